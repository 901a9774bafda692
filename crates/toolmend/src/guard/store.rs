//! Where the counted rules keep their state: one [`GuardStore::admit`] per message, with
//! every check of every call, evaluated atomically in call order. A call is admitted when
//! all its non-shadow checks pass, and then counted in all of them; a refused call counts
//! nowhere (all or nothing per call). Calls later in the message see the earlier ones.
//!
//! Two stores share these semantics and one test suite: [`MemoryStore`] (here, the default)
//! and the Redis store (`toolmend-redis`, one script call per message). [`EarlyRefusal`]
//! sits in front of a remote store and refuses, without a round trip, what the store
//! already refused and cannot admit again before its `retry_after`.

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use super::Rule;
use crate::future::BoxFuture;

/// What a check counts, within the request's session where it names none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// All calls of the session.
    Session,
    /// One tool's calls in the session.
    SessionTool(Arc<str>),
    /// One tool's calls across sessions (no session needed).
    Tool(Arc<str>),
    /// Calls that ran in the thread (the session), no window.
    Thread,
    /// One tool's calls that ran in the thread.
    ThreadTool(Arc<str>),
    /// Calls that ran in run `n` of the session.
    Run(u64),
    /// One tool's calls that ran in run `n`.
    RunTool(u64, Arc<str>),
    /// One fingerprint (tool and canonical arguments) in the session.
    Call(u64),
}

impl Scope {
    /// True for the scope shared by all sessions.
    pub fn is_global(&self) -> bool {
        matches!(self, Scope::Tool(_))
    }

    /// The key's suffix within its session (or within the global space), without any
    /// store prefix: `s`, `st:search`, `t:search`, `th`, `tht:search`, `r:3`, `rt:3:search`,
    /// `c:<16 hex>`.
    pub fn suffix(&self) -> String {
        match self {
            Scope::Session => "s".to_owned(),
            Scope::SessionTool(t) => format!("st:{t}"),
            Scope::Tool(t) => format!("t:{t}"),
            Scope::Thread => "th".to_owned(),
            Scope::ThreadTool(t) => format!("tht:{t}"),
            Scope::Run(n) => format!("r:{n}"),
            Scope::RunTool(n, t) => format!("rt:{n}:{t}"),
            Scope::Call(fp) => format!("c:{fp:016x}"),
        }
    }
}

/// One check of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The rule it serves (for the answer).
    pub rule: Rule,
    /// What it counts.
    pub scope: Scope,
    /// Calls admitted in the scope (per window, if any); the next is refused.
    pub limit: u64,
    /// A sliding window in milliseconds; `None`: a budget, counted for the session's TTL.
    pub window_ms: Option<u64>,
    /// Report, never refuse.
    pub shadow: bool,
}

/// One call's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitCall {
    /// The call id (checked for reuse within the session, then remembered).
    pub call_id: String,
    /// Its checks.
    pub checks: Vec<Check>,
}

/// One message's calls.
#[derive(Debug, Clone, Copy)]
pub struct Admission<'a> {
    /// The session key (already hashed by the guard: never the caller's raw value).
    pub session: Option<&'a str>,
    /// How long a session's budgets and ids are kept after its last admitted call.
    pub ttl_ms: u64,
    /// The calls, in order.
    pub calls: &'a [AdmitCall],
}

/// One check's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CheckResult {
    /// Under its limit.
    pub passed: bool,
    /// Calls already counted in the scope (before this one).
    pub count: u64,
    /// For a failed check: milliseconds until a call could pass it again.
    pub retry_after_ms: u64,
}

/// One call's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallAnswer {
    /// All non-shadow checks passed; the call is counted.
    pub admitted: bool,
    /// One result per check, in order.
    pub checks: Vec<CheckResult>,
    /// The call id was seen before in this session.
    pub id_seen: bool,
}

/// Why a store gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} guard store: {message}")]
pub struct StoreError {
    /// What kind of failure.
    pub kind: StoreErrorKind,
    /// Its cause, in words (never a key's or an argument's value).
    pub message: String,
}

/// Kinds of store failure (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// No answer within the decision timeout.
    Timeout,
    /// Not reachable (connection refused, dropped, reconnecting).
    Unavailable,
    /// An answer that could not be read.
    Protocol,
}

impl StoreErrorKind {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreErrorKind::Timeout => "timeout",
            StoreErrorKind::Unavailable => "unavailable",
            StoreErrorKind::Protocol => "protocol",
        }
    }
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Keeps the counted rules' state.
pub trait GuardStore: Send + Sync {
    /// `memory`, `redis` …: a metric label.
    fn name(&self) -> &'static str;
    /// True for a store that answers at once, in process (no timeout needed around it).
    fn is_local(&self) -> bool {
        false
    }
    /// Evaluates and counts one message's calls atomically: one answer per call, in order.
    fn admit<'a>(
        &'a self,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>>;
}

impl<T: GuardStore + ?Sized> GuardStore for std::sync::Arc<T> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn is_local(&self) -> bool {
        (**self).is_local()
    }
    fn admit<'a>(
        &'a self,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
        (**self).admit(admission)
    }
}

impl fmt::Debug for dyn GuardStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GuardStore({})", self.name())
    }
}

/// Milliseconds on a clock that never goes back.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now, in milliseconds from the clock's own origin.
    fn now_ms(&self) -> u64;
}

/// The process's monotonic clock.
#[derive(Debug)]
pub struct MonotonicClock(Instant);

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock(Instant::now())
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        // Starts at one hour so that `now - window` never underflows in practice.
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX) + 3_600_000
    }
}

/// A clock moved by hand (tests, simulations).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock at `ms`.
    pub fn at(ms: u64) -> Self {
        ManualClock(AtomicU64::new(ms))
    }
    /// Moves it forward.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl<T: Clock + ?Sized> Clock for std::sync::Arc<T> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

/// Default bound on the keys a [`MemoryStore`] keeps.
pub const DEFAULT_MAX_KEYS: usize = 100_000;
/// Ids remembered per session (the oldest go first).
pub const MAX_IDS_PER_SESSION: usize = 10_000;

#[derive(Debug)]
enum Entry {
    /// Admission times, oldest first (at most the limit).
    Log(VecDeque<u64>),
    /// The one admission time of a window of limit 1 (a fingerprint: the most numerous
    /// keys), without a heap log.
    Last(u64),
    /// A budget count.
    Count(u64),
}

#[derive(Debug)]
struct Slot {
    entry: Entry,
    /// When the key may be forgotten.
    expires: u64,
}

/// Hashes a key that is already a 64-bit hash (a fingerprint, an id's hash): one
/// splitmix64 round over it and a per-process random seed, so a client that crafts
/// fingerprints cannot aim them at one bucket, at a fraction of SipHash's cost.
#[derive(Debug, Clone, Copy)]
struct Mixed(u64);

impl std::hash::BuildHasher for Mixed {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(self.0)
    }
}

#[derive(Debug)]
struct MixHasher(u64);

impl std::hash::Hasher for MixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
    fn finish(&self) -> u64 {
        let mut z = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn seed() -> Mixed {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    Mixed(h.finish())
}

/// One session's keys. The scoped ones are few (the session, its tools, its runs): a
/// short list searched in order beats hashing a composed key per check; fingerprints
/// may be many: a map keyed by the 64-bit fingerprint itself.
#[derive(Debug)]
struct SessionKeys {
    /// The session's, its tools' and its thread's keys: bounded by the configured tools.
    scoped: Vec<(Scope, Slot)>,
    /// Per-run budgets: a new run adds keys, so a map (a list would grow with the runs).
    runs: HashMap<Scope, Slot>,
    calls: HashMap<u64, Slot, Mixed>,
    /// Seen ids, as 64-bit hashes, in insertion order.
    ids: std::collections::HashSet<u64, Mixed>,
    id_order: VecDeque<u64>,
    ids_expire: u64,
}

impl SessionKeys {
    fn new(seed: Mixed) -> Self {
        SessionKeys {
            scoped: Vec::new(),
            runs: HashMap::new(),
            calls: HashMap::with_hasher(seed),
            ids: std::collections::HashSet::with_hasher(seed),
            id_order: VecDeque::new(),
            ids_expire: 0,
        }
    }
}

impl SessionKeys {
    fn keys(&self) -> usize {
        self.scoped.len() + self.runs.len() + self.calls.len() + 1
    }

    /// The latest expiry of anything it holds.
    fn expires(&self) -> u64 {
        self.scoped
            .iter()
            .map(|(_, s)| s.expires)
            .chain(self.runs.values().map(|s| s.expires))
            .chain(self.calls.values().map(|s| s.expires))
            .fold(self.ids_expire, u64::max)
    }

    fn slot(&mut self, scope: &Scope) -> Option<&mut Slot> {
        match scope {
            Scope::Call(fp) => self.calls.get_mut(fp),
            Scope::Run(_) | Scope::RunTool(..) => self.runs.get_mut(scope),
            _ => self
                .scoped
                .iter_mut()
                .find(|(s, _)| s == scope)
                .map(|(_, slot)| slot),
        }
    }

    /// The slot for `scope`, made if missing; true when made.
    fn slot_or_new(&mut self, scope: &Scope) -> (&mut Slot, bool) {
        let fresh = || Slot {
            entry: Entry::Count(0),
            expires: 0,
        };
        match scope {
            Scope::Call(fp) => {
                let made = !self.calls.contains_key(fp);
                (self.calls.entry(*fp).or_insert_with(fresh), made)
            }
            Scope::Run(_) | Scope::RunTool(..) => {
                let made = !self.runs.contains_key(scope);
                (self.runs.entry(scope.clone()).or_insert_with(fresh), made)
            }
            _ => match self.scoped.iter().position(|(s, _)| s == scope) {
                Some(i) => (&mut self.scoped[i].1, false),
                None => {
                    self.scoped.push((scope.clone(), fresh()));
                    let last = self.scoped.len() - 1;
                    (&mut self.scoped[last].1, true)
                }
            },
        }
    }

    /// Checks `id` and remembers it; true when it was seen before (within the TTL).
    fn seen(&mut self, id: &str, now: u64, ttl: u64) -> bool {
        if self.ids_expire <= now {
            self.ids.clear();
            self.id_order.clear();
        }
        self.ids_expire = now.saturating_add(ttl);
        let h = super::fingerprint::result_hash(id);
        if !self.ids.insert(h) {
            return true;
        }
        self.id_order.push_back(h);
        while self.id_order.len() > MAX_IDS_PER_SESSION {
            if let Some(old) = self.id_order.pop_front() {
                self.ids.remove(&old);
            }
        }
        false
    }

    /// Drops what expired; returns how many keys went.
    fn purge(&mut self, now: u64) -> usize {
        let before = self.keys();
        self.scoped.retain(|(_, s)| s.expires > now);
        self.runs.retain(|_, s| s.expires > now);
        self.calls.retain(|_, s| s.expires > now);
        before - self.keys()
    }
}

#[derive(Debug)]
struct Keys {
    seed: Mixed,
    sessions: HashMap<String, SessionKeys>,
    /// Scopes shared by all sessions (a tool across sessions), and keys of a
    /// session-less admission.
    global: SessionKeys,
    /// Keys held in all (each session counts its ids as one).
    count: usize,
}

/// The in-process store: sliding-window logs, budget counts and seen ids, per session,
/// expiring, bounded in keys. Past `max_keys`, expired keys go first, then the sessions
/// soonest to expire (a forgotten key can only admit more, never refuse wrongly; counted
/// in [`evicted`]).
///
/// [`evicted`]: MemoryStore::evicted
#[derive(Debug)]
pub struct MemoryStore {
    keys: Mutex<Keys>,
    clock: Box<dyn Clock>,
    max_keys: usize,
    evicted: AtomicU64,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(DEFAULT_MAX_KEYS)
    }
}

impl MemoryStore {
    /// A store of at most `max_keys` keys on the monotonic clock.
    pub fn new(max_keys: usize) -> Self {
        MemoryStore::with_clock(max_keys, MonotonicClock::default())
    }

    /// A store on the given clock.
    pub fn with_clock(max_keys: usize, clock: impl Clock + 'static) -> Self {
        MemoryStore {
            keys: Mutex::new({
                let seed = seed();
                Keys {
                    seed,
                    sessions: HashMap::new(),
                    global: SessionKeys::new(seed),
                    count: 0,
                }
            }),
            clock: Box::new(clock),
            max_keys: max_keys.max(16),
            evicted: AtomicU64::new(0),
        }
    }

    /// Keys forgotten early because the store was full.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.keys.lock().map_or(0, |k| k.count)
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The admission, synchronously (the store never waits).
    pub fn admit_now(&self, a: Admission<'_>) -> Vec<CallAnswer> {
        let now = self.clock.now_ms();
        let mut guard = match self.keys.lock() {
            Ok(k) => k,
            // A panic elsewhere while holding the lock leaves counts that are still sane.
            Err(poisoned) => poisoned.into_inner(),
        };
        let keys = &mut *guard;
        let needed = a.calls.iter().map(|c| c.checks.len()).sum::<usize>() + 1;
        if keys.count + needed > self.max_keys {
            self.make_room(keys, now, needed);
        }
        let Keys {
            seed,
            sessions,
            global,
            count,
        } = keys;
        let mut session = match a.session {
            Some(s) => Some(match sessions.get_mut(s) {
                Some(k) => k,
                None => {
                    *count += 1;
                    sessions
                        .entry(s.to_owned())
                        .or_insert_with(|| SessionKeys::new(*seed))
                }
            }),
            None => None,
        };
        let mut out = Vec::with_capacity(a.calls.len());
        for call in a.calls {
            let mut results = Vec::with_capacity(call.checks.len());
            for check in &call.checks {
                let slot = match (&mut session, check.scope.is_global()) {
                    (Some(s), false) => s.slot(&check.scope),
                    _ => global.slot(&check.scope),
                };
                results.push(evaluate(slot, check, now));
            }
            let admitted = call
                .checks
                .iter()
                .zip(&results)
                .all(|(c, r)| c.shadow || r.passed);
            let id_seen = session
                .as_mut()
                .is_some_and(|s| s.seen(&call.call_id, now, a.ttl_ms));
            if admitted {
                for check in &call.checks {
                    let (slot, made) = match (&mut session, check.scope.is_global()) {
                        (Some(s), false) => s.slot_or_new(&check.scope),
                        _ => global.slot_or_new(&check.scope),
                    };
                    *count += usize::from(made);
                    record(slot, check, now, a.ttl_ms);
                }
            }
            out.push(CallAnswer {
                admitted,
                checks: results,
                id_seen,
            });
        }
        out
    }

    /// Frees room for `needed` keys: expired keys first, then whole sessions, soonest to
    /// expire first, down to nine tenths of the bound.
    fn make_room(&self, keys: &mut Keys, now: u64, needed: usize) {
        let mut freed = keys.global.purge(now);
        for s in keys.sessions.values_mut() {
            freed += s.purge(now);
        }
        let before = keys.sessions.len();
        keys.sessions
            .retain(|_, s| s.expires() > now || s.keys() > 1);
        freed += before - keys.sessions.len();
        keys.count = keys.count.saturating_sub(freed);
        let target = (self.max_keys - self.max_keys / 10).saturating_sub(needed);
        if keys.count <= target {
            return;
        }
        let mut by_expiry: Vec<(u64, String)> = keys
            .sessions
            .iter()
            .map(|(k, s)| (s.expires(), k.clone()))
            .collect();
        by_expiry.sort_unstable();
        let mut dropped = 0u64;
        for (_, k) in by_expiry {
            if keys.count <= target {
                break;
            }
            if let Some(s) = keys.sessions.remove(&k) {
                keys.count = keys.count.saturating_sub(s.keys());
                dropped += s.keys() as u64;
            }
        }
        self.evicted.fetch_add(dropped, Ordering::Relaxed);
    }
}

impl GuardStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn is_local(&self) -> bool {
        true
    }
    fn admit<'a>(
        &'a self,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.admit_now(admission))))
    }
}

/// A key as one string (the early-refusal front's map, and the naive test model).
fn memory_key(session: Option<&str>, scope: &Scope) -> String {
    if scope.is_global() {
        format!("\u{0}{}", scope.suffix())
    } else {
        format!("{}\u{0}{}", session.unwrap_or_default(), scope.suffix())
    }
}

fn evaluate(slot: Option<&mut Slot>, check: &Check, now: u64) -> CheckResult {
    let Some(slot) = slot.filter(|s| s.expires > now) else {
        return CheckResult {
            passed: check.limit > 0,
            count: 0,
            retry_after_ms: 0,
        };
    };
    match (&mut slot.entry, check.window_ms) {
        // A one-entry log, whatever the limit asked now (a limit changed by a reload).
        (Entry::Last(t), Some(window)) => {
            let count = u64::from(*t > now.saturating_sub(window));
            let passed = count < check.limit;
            CheckResult {
                passed,
                count,
                retry_after_ms: if passed {
                    0
                } else {
                    (*t + window).saturating_sub(now)
                },
            }
        }
        (Entry::Log(log), Some(window)) => {
            let from = now.saturating_sub(window);
            while log.front().is_some_and(|&t| t <= from) {
                log.pop_front();
            }
            let count = log.len() as u64;
            let passed = count < check.limit;
            let retry_after_ms = if passed {
                0
            } else {
                // The oldest admission that must leave the window before one more fits.
                let over = usize::try_from(count - check.limit).unwrap_or(usize::MAX);
                log.get(over)
                    .map_or(0, |&t| (t + window).saturating_sub(now))
            };
            CheckResult {
                passed,
                count,
                retry_after_ms,
            }
        }
        (Entry::Count(n), None) => CheckResult {
            passed: *n < check.limit,
            count: *n,
            retry_after_ms: if *n < check.limit {
                0
            } else {
                slot.expires.saturating_sub(now)
            },
        },
        // A key reused with another kind of check (a config change): start over.
        _ => CheckResult {
            passed: check.limit > 0,
            count: 0,
            retry_after_ms: 0,
        },
    }
}

fn record(slot: &mut Slot, check: &Check, now: u64, ttl: u64) {
    let one = check.limit == 1;
    // A one-entry log asked to hold more becomes a log (what is still in its window kept).
    if let (Entry::Last(t), Some(window)) = (&slot.entry, check.window_ms)
        && !one
        && slot.expires > now
    {
        let kept = *t > now.saturating_sub(window);
        slot.entry = Entry::Log(if kept {
            VecDeque::from([*t])
        } else {
            VecDeque::new()
        });
    }
    let fits = matches!(
        (&slot.entry, check.window_ms),
        (Entry::Log(_), Some(_)) | (Entry::Count(_), None)
    ) || (one && matches!((&slot.entry, check.window_ms), (Entry::Last(_), Some(_))));
    if slot.expires <= now || !fits {
        slot.entry = match check.window_ms {
            Some(_) if one => Entry::Last(0),
            Some(_) => Entry::Log(VecDeque::new()),
            None => Entry::Count(0),
        };
    }
    match (&mut slot.entry, check.window_ms) {
        (Entry::Last(t), Some(window)) => {
            *t = now;
            slot.expires = now.saturating_add(window);
        }
        (Entry::Log(log), Some(window)) => {
            log.push_back(now);
            // A shadow rule admits past its limit: keep the log bounded by the limit.
            while log.len() as u64 > check.limit.max(1) {
                log.pop_front();
            }
            slot.expires = now.saturating_add(window);
        }
        (Entry::Count(n), None) => {
            *n += 1;
            slot.expires = now.saturating_add(ttl);
        }
        _ => {}
    }
}

/// Refuses locally, without a round trip, what the wrapped store refused and cannot
/// admit before its `retry_after` (a window's oldest entry has not left it yet; other
/// instances can only add to it). It never admits on its own: admissions always go to
/// the store.
#[derive(Debug)]
pub struct EarlyRefusal<S> {
    inner: S,
    blocked: Mutex<HashMap<String, Instant>>,
    max_keys: usize,
}

impl<S> EarlyRefusal<S> {
    /// `inner` with a front of at most `max_keys` blocked keys.
    pub fn new(inner: S, max_keys: usize) -> Self {
        EarlyRefusal {
            inner,
            blocked: Mutex::new(HashMap::new()),
            max_keys: max_keys.max(16),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: GuardStore> GuardStore for EarlyRefusal<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn admit<'a>(&'a self, a: Admission<'a>) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
        Box::pin(async move {
            let now = Instant::now();
            // Per call: the local answer, if some non-shadow check is still blocked.
            let mut local: Vec<Option<CallAnswer>> = Vec::with_capacity(a.calls.len());
            {
                let blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
                for call in a.calls {
                    let mut any = false;
                    let checks: Vec<CheckResult> = call
                        .checks
                        .iter()
                        .map(|c| {
                            let until = (!c.shadow)
                                .then(|| blocked.get(&memory_key(a.session, &c.scope)))
                                .flatten()
                                .filter(|&&u| u > now);
                            match until {
                                Some(&u) => {
                                    any = true;
                                    CheckResult {
                                        passed: false,
                                        count: c.limit,
                                        retry_after_ms: u64::try_from((u - now).as_millis())
                                            .unwrap_or(u64::MAX)
                                            .max(1),
                                    }
                                }
                                None => CheckResult {
                                    passed: true,
                                    count: 0,
                                    retry_after_ms: 0,
                                },
                            }
                        })
                        .collect();
                    local.push(any.then_some(CallAnswer {
                        admitted: false,
                        checks,
                        id_seen: false,
                    }));
                }
            }
            let forward: Vec<AdmitCall> = a
                .calls
                .iter()
                .zip(&local)
                .filter(|(_, l)| l.is_none())
                .map(|(c, _)| c.clone())
                .collect();
            let mut remote = if forward.is_empty() {
                Vec::new().into_iter()
            } else {
                let answers = self
                    .inner
                    .admit(Admission {
                        session: a.session,
                        ttl_ms: a.ttl_ms,
                        calls: &forward,
                    })
                    .await?;
                let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
                if blocked.len() >= self.max_keys {
                    blocked.retain(|_, u| *u > now);
                    if blocked.len() >= self.max_keys {
                        blocked.clear();
                    }
                }
                for (call, answer) in forward.iter().zip(&answers) {
                    for (c, r) in call.checks.iter().zip(&answer.checks) {
                        if !c.shadow && !r.passed && r.retry_after_ms > 0 {
                            blocked.insert(
                                memory_key(a.session, &c.scope),
                                now + std::time::Duration::from_millis(r.retry_after_ms),
                            );
                        }
                    }
                }
                answers.into_iter()
            };
            Ok(local
                .into_iter()
                .map(|l| l.unwrap_or_else(|| remote.next().unwrap_or_default()))
                .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn window(limit: u64, ms: u64) -> Check {
        Check {
            rule: Rule::SessionWindow,
            scope: Scope::Session,
            limit,
            window_ms: Some(ms),
            shadow: false,
        }
    }

    fn call(id: &str, checks: Vec<Check>) -> AdmitCall {
        AdmitCall {
            call_id: id.to_owned(),
            checks,
        }
    }

    fn admitted(store: &MemoryStore, session: &str, calls: &[AdmitCall]) -> Vec<bool> {
        store
            .admit_now(Admission {
                session: Some(session),
                ttl_ms: 60_000,
                calls,
            })
            .into_iter()
            .map(|a| a.admitted)
            .collect()
    }

    #[test]
    fn a_window_admits_exactly_its_limit_then_frees_at_its_edge() {
        let clock = Arc::new(ManualClock::at(1_000_000));
        let store = MemoryStore::with_clock(100, Arc::clone(&clock));
        let calls: Vec<AdmitCall> = (0..4)
            .map(|i| call(&format!("c{i}"), vec![window(3, 1000)]))
            .collect();
        assert_eq!(admitted(&store, "s", &calls), [true, true, true, false]);
        let refused = store.admit_now(Admission {
            session: Some("s"),
            ttl_ms: 60_000,
            calls: &calls[..1],
        });
        assert_eq!(refused[0].checks[0].count, 3);
        assert_eq!(refused[0].checks[0].retry_after_ms, 1000);
        clock.advance(999);
        assert_eq!(
            admitted(&store, "s", &calls[..1]),
            [false],
            "still inside the window"
        );
        clock.advance(1);
        assert_eq!(admitted(&store, "s", &calls[..2]), [true, true]);
        assert_eq!(admitted(&store, "s", &calls[..1]), [true]);
        assert_eq!(admitted(&store, "s", &calls[..1]), [false]);
        assert_eq!(
            admitted(&store, "other", &calls[..1]),
            [true],
            "sessions are apart"
        );
    }

    #[test]
    fn a_refused_call_counts_nowhere_and_shadow_refuses_nothing() {
        let store = MemoryStore::new(100);
        let tight = window(1, 60_000);
        let mut wide = window(10, 60_000);
        wide.scope = Scope::SessionTool("t".into());
        let c = vec![call("a", vec![tight.clone(), wide.clone()])];
        assert_eq!(admitted(&store, "s", &c), [true]);
        assert_eq!(admitted(&store, "s", &c), [false]);
        let probe = store.admit_now(Admission {
            session: Some("s"),
            ttl_ms: 60_000,
            calls: &[call("b", vec![wide.clone()])],
        });
        assert_eq!(
            probe[0].checks[0].count, 1,
            "the refused call was not counted"
        );
        let mut shadow = tight;
        shadow.shadow = true;
        let s = vec![call("c", vec![shadow])];
        let a = store.admit_now(Admission {
            session: Some("s"),
            ttl_ms: 60_000,
            calls: &s,
        });
        assert!(a[0].admitted);
        assert!(
            !a[0].checks[0].passed,
            "the shadow check still reports its refusal"
        );
    }

    #[test]
    fn budgets_and_ids_last_for_the_session_ttl() {
        let clock = Arc::new(ManualClock::at(1_000_000));
        let store = MemoryStore::with_clock(100, Arc::clone(&clock));
        let budget = Check {
            rule: Rule::ThreadLimit,
            scope: Scope::Thread,
            limit: 2,
            window_ms: None,
            shadow: false,
        };
        let calls = [
            call("a", vec![budget.clone()]),
            call("b", vec![budget.clone()]),
        ];
        assert_eq!(admitted(&store, "s", &calls), [true, true]);
        let again = store.admit_now(Admission {
            session: Some("s"),
            ttl_ms: 60_000,
            calls: &calls[..1],
        });
        assert!(!again[0].admitted);
        assert!(again[0].id_seen);
        clock.advance(60_000);
        assert_eq!(
            admitted(&store, "s", &calls[..1]),
            [true],
            "the session expired"
        );
    }

    #[test]
    fn the_store_stays_within_its_keys() {
        let store = MemoryStore::new(16);
        for i in 0..1000 {
            let c = [call("x", vec![window(1, 60_000)])];
            admitted(&store, &format!("s{i}"), &c);
        }
        assert!(store.len() <= 16, "{}", store.len());
        assert!(store.evicted() > 0);
    }

    /// The reference: every admission kept forever, counted by a scan.
    #[derive(Default)]
    struct Naive {
        log: HashMap<String, Vec<u64>>,
    }

    impl Naive {
        fn admit(&mut self, session: &str, calls: &[AdmitCall], now: u64) -> Vec<(bool, Vec<u64>)> {
            calls
                .iter()
                .map(|call| {
                    let counts: Vec<u64> = call
                        .checks
                        .iter()
                        .map(|c| {
                            let key = memory_key(Some(session), &c.scope);
                            let w = c.window_ms.unwrap_or(u64::MAX);
                            let n = self.log.get(&key).map_or(0, |l| {
                                l.iter().filter(|&&t| t > now.saturating_sub(w)).count()
                            });
                            // A shadow log is capped at its limit, as the store's.
                            (n as u64).min(c.limit)
                        })
                        .collect();
                    let admitted = call
                        .checks
                        .iter()
                        .zip(&counts)
                        .all(|(c, &n)| c.shadow || n < c.limit);
                    if admitted {
                        for c in &call.checks {
                            self.log
                                .entry(memory_key(Some(session), &c.scope))
                                .or_default()
                                .push(now);
                        }
                    }
                    (admitted, counts)
                })
                .collect()
        }
    }

    fn arb_check() -> impl proptest::strategy::Strategy<Value = Check> {
        use proptest::prelude::*;
        (
            0..4usize,
            1..4u64,
            prop_oneof![Just(50u64), Just(200), Just(1000)],
            any::<bool>(),
        )
            .prop_map(|(scope, limit, window, shadow)| Check {
                rule: Rule::SessionWindow,
                scope: match scope {
                    0 => Scope::Session,
                    1 => Scope::SessionTool("a".into()),
                    2 => Scope::Tool("a".into()),
                    _ => Scope::Call(7),
                },
                limit,
                window_ms: Some(window),
                shadow,
            })
    }

    proptest::proptest! {
        #[test]
        fn the_memory_store_matches_a_naive_log(
            steps in proptest::collection::vec(
                (0..300u64, proptest::collection::vec(proptest::collection::vec(arb_check(), 1..3), 1..4)),
                1..40,
            )
        ) {
            // One key, one kind of check: the generator keeps each scope's window and
            // limit fixed per run by deriving them from the scope alone.
            let fix = |mut c: Check| {
                let k = match c.scope { Scope::Session => 0, Scope::SessionTool(_) => 1, Scope::Tool(_) => 2, _ => 3 };
                c.limit = [2, 3, 1, 1][k];
                c.window_ms = Some([200, 1000, 50, 200][k]);
                c.shadow = k == 1 && c.shadow;
                c
            };
            let clock = Arc::new(ManualClock::at(1_000_000));
            let store = MemoryStore::with_clock(1000, Arc::clone(&clock));
            let mut naive = Naive::default();
            for (advance, calls) in steps {
                clock.advance(advance);
                let calls: Vec<AdmitCall> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, checks)| call(&format!("c{i}"), checks.into_iter().map(fix).collect()))
                    .collect();
                let got = store.admit_now(Admission { session: Some("s"), ttl_ms: 60_000, calls: &calls });
                let want = naive.admit("s", &calls, clock.now_ms());
                for (g, (admitted, counts)) in got.iter().zip(want) {
                    proptest::prop_assert_eq!(g.admitted, admitted);
                    let got_counts: Vec<u64> = g.checks.iter().map(|r| r.count).collect();
                    proptest::prop_assert_eq!(got_counts, counts);
                }
            }
        }
    }

    /// Counts the admissions that reach it.
    #[derive(Debug, Default)]
    struct Counting(MemoryStore, AtomicU64);

    impl GuardStore for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn admit<'a>(
            &'a self,
            a: Admission<'a>,
        ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.admit(a)
        }
    }

    #[tokio::test]
    async fn early_refusal_skips_the_round_trip_only_for_what_is_refused() {
        let front = EarlyRefusal::new(Counting::default(), 100);
        let c = [call("a", vec![window(1, 60_000)])];
        let a = Admission {
            session: Some("s"),
            ttl_ms: 60_000,
            calls: &c,
        };
        assert!(front.admit(a).await.expect("store")[0].admitted);
        assert!(!front.admit(a).await.expect("store")[0].admitted);
        assert_eq!(front.inner().1.load(Ordering::SeqCst), 2);
        let local = front.admit(a).await.expect("store");
        assert!(!local[0].admitted);
        assert!(local[0].checks[0].retry_after_ms > 59_000);
        assert_eq!(front.inner().1.load(Ordering::SeqCst), 2, "no round trip");
        let other = Admission {
            session: Some("t"),
            ..a
        };
        assert!(front.admit(other).await.expect("store")[0].admitted);
        assert_eq!(front.inner().1.load(Ordering::SeqCst), 3);
    }
}
