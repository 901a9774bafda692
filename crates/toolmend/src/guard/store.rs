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
        Mutex,
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
    SessionTool(String),
    /// One tool's calls across sessions (no session needed).
    Tool(String),
    /// Calls that ran in the thread (the session), no window.
    Thread,
    /// One tool's calls that ran in the thread.
    ThreadTool(String),
    /// Calls that ran in run `n` of the session.
    Run(u64),
    /// One tool's calls that ran in run `n`.
    RunTool(u64, String),
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
    /// A budget count.
    Count(u64),
    /// Seen call ids, with their insertion order.
    Ids(HashMap<String, u64>, VecDeque<String>),
}

#[derive(Debug)]
struct Slot {
    entry: Entry,
    /// When the key may be forgotten.
    expires: u64,
}

/// The in-process store: a bounded map of sliding-window logs, budget counts and seen
/// ids, expiring. Past `max_keys`, expired keys go first, then the soonest to expire (a
/// forgotten key can only admit more, never refuse wrongly; counted in [`evicted`]).
///
/// [`evicted`]: MemoryStore::evicted
#[derive(Debug)]
pub struct MemoryStore {
    map: Mutex<HashMap<String, Slot>>,
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
            map: Mutex::new(HashMap::new()),
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
        self.map.lock().map_or(0, |m| m.len())
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The admission, synchronously (the store never waits).
    pub fn admit_now(&self, a: Admission<'_>) -> Vec<CallAnswer> {
        let now = self.clock.now_ms();
        let mut map = match self.map.lock() {
            Ok(m) => m,
            // A panic elsewhere while holding the lock leaves counts that are still sane.
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut out = Vec::with_capacity(a.calls.len());
        for call in a.calls {
            let keys: Vec<String> = call
                .checks
                .iter()
                .map(|c| memory_key(a.session, &c.scope))
                .collect();
            let mut results = Vec::with_capacity(call.checks.len());
            for (check, key) in call.checks.iter().zip(&keys) {
                results.push(evaluate(map.get_mut(key.as_str()), check, now));
            }
            let admitted = call
                .checks
                .iter()
                .zip(&results)
                .all(|(c, r)| c.shadow || r.passed);
            let mut id_seen = false;
            if let Some(session) = a.session {
                let key = format!("{session}\u{0}ids");
                if !map.contains_key(&key) {
                    make_room(&mut map, self.max_keys, now, &self.evicted);
                }
                let slot = map.entry(key).or_insert_with(|| Slot {
                    entry: Entry::Ids(HashMap::new(), VecDeque::new()),
                    expires: now,
                });
                slot.expires = now.saturating_add(a.ttl_ms);
                if let Entry::Ids(set, order) = &mut slot.entry {
                    id_seen = set.contains_key(&call.call_id);
                    if !id_seen {
                        set.insert(call.call_id.clone(), now);
                        order.push_back(call.call_id.clone());
                        while order.len() > MAX_IDS_PER_SESSION {
                            if let Some(old) = order.pop_front() {
                                set.remove(&old);
                            }
                        }
                    }
                }
            }
            if admitted {
                for (check, key) in call.checks.iter().zip(keys) {
                    if !map.contains_key(&key) {
                        make_room(&mut map, self.max_keys, now, &self.evicted);
                    }
                    record(&mut map, key, check, now, a.ttl_ms);
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
}

impl GuardStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn admit<'a>(
        &'a self,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.admit_now(admission))))
    }
}

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
                let over = (count - check.limit) as usize;
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

fn record(map: &mut HashMap<String, Slot>, key: String, check: &Check, now: u64, ttl: u64) {
    let slot = map.entry(key).or_insert_with(|| Slot {
        entry: match check.window_ms {
            Some(_) => Entry::Log(VecDeque::new()),
            None => Entry::Count(0),
        },
        expires: 0,
    });
    if slot.expires <= now {
        slot.entry = match check.window_ms {
            Some(_) => Entry::Log(VecDeque::new()),
            None => Entry::Count(0),
        };
    }
    match (&mut slot.entry, check.window_ms) {
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
        (entry, window) => {
            *entry = match window {
                Some(_) => Entry::Log(VecDeque::from([now])),
                None => Entry::Count(1),
            };
            slot.expires = now.saturating_add(window.unwrap_or(ttl));
        }
    }
}

/// Frees a key's room: expired keys first, then a tenth of the map, soonest to expire.
fn make_room(map: &mut HashMap<String, Slot>, max: usize, now: u64, evicted: &AtomicU64) {
    if map.len() < max {
        return;
    }
    map.retain(|_, s| s.expires > now);
    if map.len() < max {
        return;
    }
    let mut by_expiry: Vec<(u64, String)> =
        map.iter().map(|(k, s)| (s.expires, k.clone())).collect();
    let drop = (max / 10).max(1);
    let nth = drop.min(by_expiry.len() - 1);
    by_expiry.select_nth_unstable(nth);
    for (_, k) in by_expiry.into_iter().take(drop) {
        map.remove(&k);
    }
    evicted.fetch_add(drop as u64, Ordering::Relaxed);
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
