//! The store: a connection supervised in the background, one script call per admission.

use std::{
    collections::HashMap,
    fmt::{self, Write as _},
    sync::{
        Arc, RwLock, Weak,
        atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering},
    },
    time::Duration,
};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::time::Instant;
use toolmend::{
    future::BoxFuture,
    guard::{
        GuardStore,
        store::{
            Admission, CallAnswer, CheckResult, EarlyRefusal, Scope, StoreError, StoreErrorKind,
        },
    },
};

/// The script's version, baked into every key's prefix ([`KEY_PREFIX`]).
pub const SCRIPT_VERSION: u32 = 1;
/// The prefix of every key the store writes: `tm:v<SCRIPT_VERSION>:`.
pub const KEY_PREFIX: &str = "tm:v1:";
/// Default bound on one admission, round trip included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(20);

const LUA: &str = include_str!("admit.lua");

const CONNECTING: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;
const CLUSTER: u8 = 3;

/// How the store connects and how long it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisOptions {
    /// Bound on one admission, retry included: past it, [`StoreErrorKind::Timeout`].
    pub timeout: Duration,
    /// Bound on one connection attempt (and on one ping while reconnecting).
    pub connect_timeout: Duration,
    /// Pause between connection attempts while Redis is down.
    pub reconnect_interval: Duration,
    /// Keys the [`EarlyRefusal`] front of [`redis_guard_store`] keeps.
    pub early_refusal_keys: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: Duration::from_secs(1),
            reconnect_interval: Duration::from_millis(200),
            early_refusal_keys: 100_000,
        }
    }
}

/// Why a store cannot be made (nothing about Redis being reachable: that is checked later).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The URL does not parse as a Redis URL.
    #[error("invalid Redis URL: {0}")]
    Url(String),
    /// Called outside a Tokio runtime (the connection is made in a background task).
    #[error("the Redis guard store needs a Tokio runtime to connect in the background")]
    NoRuntime,
    /// A zero timeout would refuse every admission.
    #[error("the Redis guard store's timeout must be above zero")]
    ZeroTimeout,
}

/// What the store did, since it was made (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Admissions asked of the store.
    pub admissions: u64,
    /// Script calls sent (an admission's retry counts again).
    pub round_trips: u64,
    /// Retries after a dropped connection.
    pub retries: u64,
    /// Admissions that answered [`StoreErrorKind::Timeout`].
    pub timeouts: u64,
    /// Admissions that answered [`StoreErrorKind::Unavailable`].
    pub unavailable: u64,
    /// Admissions that answered [`StoreErrorKind::Protocol`].
    pub protocol_errors: u64,
    /// Connections made after a drop (the first connection is not counted).
    pub reconnects: u64,
    /// Connected now.
    pub connected: bool,
}

#[derive(Debug, Default)]
struct Counters {
    admissions: AtomicU64,
    round_trips: AtomicU64,
    retries: AtomicU64,
    timeouts: AtomicU64,
    unavailable: AtomicU64,
    protocol_errors: AtomicU64,
    reconnects: AtomicU64,
}

struct Inner {
    client: redis::Client,
    conn: RwLock<Option<ConnectionManager>>,
    state: AtomicU8,
    probing: AtomicBool,
    script: redis::Script,
    opts: RedisOptions,
    counters: Counters,
    runtime: tokio::runtime::Handle,
}

/// The guard's state in Redis: one Lua script call per message (see the crate docs).
/// Cheap to clone: clones share one connection and one set of counters.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("state", &self.state_name())
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

/// A [`RedisStore`] behind an [`EarlyRefusal`] front of `opts.early_refusal_keys` keys:
/// what is refused and cannot pass before its `retry_after` is refused again without a
/// round trip. Give it to [`RuleGuard::with_store`](toolmend::guard::RuleGuard::with_store);
/// keep `front.inner().clone()` for [`RedisStore::stats`].
pub fn redis_guard_store(
    url: &str,
    opts: RedisOptions,
) -> Result<EarlyRefusal<RedisStore>, ConfigError> {
    let keys = opts.early_refusal_keys;
    Ok(EarlyRefusal::new(RedisStore::connect(url, opts)?, keys))
}

impl RedisStore {
    /// Checks `url` (`redis://host:port/db`, `rediss://` needs a TLS feature of `redis`)
    /// and returns at once; the connection is made in a background task on the current
    /// Tokio runtime, retried every `opts.reconnect_interval` until Redis answers.
    /// Until then, admissions answer [`StoreErrorKind::Unavailable`].
    pub fn connect(url: &str, opts: RedisOptions) -> Result<RedisStore, ConfigError> {
        if opts.timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        let client = redis::Client::open(url).map_err(|e| ConfigError::Url(e.to_string()))?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| ConfigError::NoRuntime)?;
        let inner = Arc::new(Inner {
            client,
            conn: RwLock::new(None),
            state: AtomicU8::new(CONNECTING),
            probing: AtomicBool::new(true),
            script: redis::Script::new(LUA),
            opts,
            counters: Counters::default(),
            runtime,
        });
        let weak = Arc::downgrade(&inner);
        inner.runtime.spawn(supervise(weak));
        Ok(RedisStore { inner })
    }

    /// The counters so far.
    pub fn stats(&self) -> RedisStats {
        let c = &self.inner.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RedisStats {
            admissions: get(&c.admissions),
            round_trips: get(&c.round_trips),
            retries: get(&c.retries),
            timeouts: get(&c.timeouts),
            unavailable: get(&c.unavailable),
            protocol_errors: get(&c.protocol_errors),
            reconnects: get(&c.reconnects),
            connected: self.is_connected(),
        }
    }

    /// True while admissions go to Redis.
    pub fn is_connected(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) == UP
    }

    /// Waits until connected, at most `within`; true if connected (a readiness probe, or a
    /// start that prefers to wait).
    pub async fn wait_connected(&self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            if self.is_connected() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> &RedisOptions {
        &self.inner.opts
    }

    fn state_name(&self) -> &'static str {
        match self.inner.state.load(Ordering::Acquire) {
            CONNECTING => "connecting",
            UP => "up",
            DOWN => "reconnecting",
            _ => "cluster (unsupported)",
        }
    }

    fn fail(&self, kind: StoreErrorKind, message: impl Into<String>) -> StoreError {
        let c = &self.inner.counters;
        match kind {
            StoreErrorKind::Timeout => &c.timeouts,
            StoreErrorKind::Unavailable => &c.unavailable,
            StoreErrorKind::Protocol => &c.protocol_errors,
        }
        .fetch_add(1, Ordering::Relaxed);
        StoreError {
            kind,
            message: message.into(),
        }
    }

    /// Marks the store down and starts the one reconnecting task, if none runs.
    fn mark_down(&self) {
        if self
            .inner
            .state
            .compare_exchange(UP, DOWN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            && !self.inner.probing.swap(true, Ordering::AcqRel)
        {
            tracing::warn!(store = "redis", "guard store connection lost; reconnecting");
            self.inner
                .runtime
                .spawn(supervise(Arc::downgrade(&self.inner)));
        }
    }

    async fn admit_inner(&self, a: Admission<'_>) -> Result<Vec<CallAnswer>, StoreError> {
        let inner = &self.inner;
        inner.counters.admissions.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + inner.opts.timeout;
        match inner.state.load(Ordering::Acquire) {
            UP => {}
            CONNECTING => {
                return Err(self.fail(StoreErrorKind::Unavailable, "not connected yet"));
            }
            DOWN => return Err(self.fail(StoreErrorKind::Unavailable, "reconnecting")),
            _ => {
                return Err(self.fail(
                    StoreErrorKind::Protocol,
                    "Redis Cluster is not supported by toolmend-redis 0.1 (a message's \
                     session and cross-session keys live in different slots); use a \
                     standalone Redis",
                ));
            }
        }
        let conn = inner.conn.read().map_or(None, |c| c.clone());
        let Some(mut conn) = conn else {
            return Err(self.fail(StoreErrorKind::Unavailable, "not connected"));
        };
        let (keys, args) = encode(a);
        let mut invocation = inner.script.prepare_invoke();
        for k in &keys {
            invocation.key(k.as_str());
        }
        for arg in &args {
            invocation.arg(arg.as_str());
        }
        let mut retried = false;
        loop {
            inner.counters.round_trips.fetch_add(1, Ordering::Relaxed);
            let answer = tokio::time::timeout_at(
                deadline,
                invocation.invoke_async::<Vec<Vec<i64>>>(&mut conn),
            )
            .await;
            match answer {
                Ok(Ok(reply)) => {
                    return decode(a, reply).map_err(|m| self.fail(StoreErrorKind::Protocol, m));
                }
                Err(_) if retried => {
                    // The retry after a drop waited for the reconnect: Redis is away.
                    self.mark_down();
                    return Err(self.fail(
                        StoreErrorKind::Unavailable,
                        "connection dropped and not back within the timeout",
                    ));
                }
                Err(_) => {
                    return Err(self.fail(
                        StoreErrorKind::Timeout,
                        format!("no answer within {} ms", inner.opts.timeout.as_millis()),
                    ));
                }
                Ok(Err(e)) => {
                    let dropped = e.is_connection_dropped()
                        || e.is_io_error()
                        || e.is_connection_refusal()
                        || e.is_unrecoverable_error();
                    if dropped && !retried && Instant::now() < deadline {
                        retried = true;
                        inner.counters.retries.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if dropped {
                        self.mark_down();
                        return Err(self.fail(
                            StoreErrorKind::Unavailable,
                            format!("connection lost: {}", e.kind_name()),
                        ));
                    }
                    if matches!(
                        e.kind(),
                        redis::ErrorKind::Server(
                            redis::ServerErrorKind::BusyLoading
                                | redis::ServerErrorKind::TryAgain
                                | redis::ServerErrorKind::MasterDown
                                | redis::ServerErrorKind::ClusterDown
                        )
                    ) {
                        // Up but not serving yet (loading its data set, a failover).
                        return Err(self.fail(
                            StoreErrorKind::Unavailable,
                            format!("not serving: {}", e.code().unwrap_or("error")),
                        ));
                    }
                    if e.is_timeout() {
                        return Err(self.fail(StoreErrorKind::Timeout, "response timed out"));
                    }
                    return Err(self.fail(
                        StoreErrorKind::Protocol,
                        format!("script failed: {}", e.code().unwrap_or("error")),
                    ));
                }
            }
        }
    }
}

/// A short, value-free name for an error (never a key or an argument).
trait KindName {
    fn kind_name(&self) -> String;
}

impl KindName for redis::RedisError {
    fn kind_name(&self) -> String {
        format!("{:?}", self.kind())
    }
}

impl GuardStore for RedisStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn admit<'a>(
        &'a self,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
        Box::pin(self.admit_inner(admission))
    }
}

/// Connects (or reconnects), loads the script, marks the store up; every
/// `reconnect_interval` until it works or the store is dropped.
async fn supervise(weak: Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let interval = inner.opts.reconnect_interval;
        match tokio::time::timeout(inner.opts.connect_timeout, connect_once(&inner)).await {
            Ok(Ok(cluster)) => {
                let first = inner.state.load(Ordering::Acquire) == CONNECTING;
                if !first {
                    inner.counters.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                inner.probing.store(false, Ordering::Release);
                inner
                    .state
                    .store(if cluster { CLUSTER } else { UP }, Ordering::Release);
                if cluster {
                    tracing::error!(
                        store = "redis",
                        "the guard store's Redis is a cluster node: not supported, every \
                         admission fails"
                    );
                } else {
                    tracing::info!(store = "redis", reconnect = !first, "guard store connected");
                }
                return;
            }
            Ok(Err(e)) => {
                tracing::debug!(
                    store = "redis",
                    "guard store connect failed: {:?}",
                    e.kind()
                );
            }
            Err(_) => {
                tracing::debug!(store = "redis", "guard store connect timed out");
            }
        }
        drop(inner);
        tokio::time::sleep(interval).await;
    }
}

/// One attempt: the existing manager (it reconnects on its own) or a new one; then the
/// cluster check and the script load. True for a cluster node.
async fn connect_once(inner: &Inner) -> redis::RedisResult<bool> {
    let existing = inner.conn.read().map_or(None, |c| c.clone());
    let mut conn = match existing {
        Some(c) => c,
        None => {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(inner.opts.connect_timeout))
                .set_response_timeout(Some(inner.opts.connect_timeout))
                .set_number_of_retries(1)
                .set_min_delay(Duration::from_millis(20))
                .set_max_delay(inner.opts.reconnect_interval);
            let c = ConnectionManager::new_with_config(inner.client.clone(), config).await?;
            if let Ok(mut slot) = inner.conn.write() {
                *slot = Some(c.clone());
            }
            c
        }
    };
    let info: String = redis::cmd("INFO")
        .arg("cluster")
        .query_async(&mut conn)
        .await?;
    if info.contains("cluster_enabled:1") {
        return Ok(true);
    }
    inner.script.load_async(&mut conn).await?;
    Ok(false)
}

/// The key of a scope within a session (or of the global space).
pub(crate) fn key(session: Option<&str>, scope: &Scope) -> String {
    if scope.is_global() {
        format!("{KEY_PREFIX}{{{}}}:w", scope.suffix())
    } else {
        format!(
            "{KEY_PREFIX}{{{}}}:{}",
            session.unwrap_or("_"),
            scope.suffix()
        )
    }
}

/// `KEYS` (the ids first, with a session; each key once) and `ARGV`.
fn encode(a: Admission<'_>) -> (Vec<String>, Vec<String>) {
    let mut keys: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    if let Some(s) = a.session {
        keys.push(format!("{KEY_PREFIX}{{{s}}}:ids"));
    }
    let mut args = Vec::with_capacity(2 + 2 * a.calls.len());
    args.push(a.ttl_ms.to_string());
    args.push(if a.session.is_some() { "1" } else { "0" }.to_owned());
    for call in a.calls {
        let mut spec = String::with_capacity(24 * call.checks.len());
        for c in &call.checks {
            let k = key(a.session, &c.scope);
            let n = match index.get(&k) {
                Some(&n) => n,
                None => {
                    keys.push(k.clone());
                    index.insert(k, keys.len());
                    keys.len()
                }
            };
            let window = c
                .window_ms
                .map_or(-1, |w| i64::try_from(w).unwrap_or(i64::MAX));
            let _ = write!(
                spec,
                "{n},{},{window},{};",
                c.limit,
                if c.shadow { 1 } else { 0 }
            );
        }
        args.push(call.call_id.clone());
        args.push(spec);
    }
    (keys, args)
}

fn decode(a: Admission<'_>, reply: Vec<Vec<i64>>) -> Result<Vec<CallAnswer>, String> {
    if reply.len() != a.calls.len() {
        return Err(format!(
            "{} answers for {} calls",
            reply.len(),
            a.calls.len()
        ));
    }
    let as_u64 = |v: i64| u64::try_from(v).unwrap_or(0);
    a.calls
        .iter()
        .zip(reply)
        .map(|(call, r)| {
            if r.len() != 2 + 3 * call.checks.len() {
                return Err(format!(
                    "{} values for a call of {} checks",
                    r.len(),
                    call.checks.len()
                ));
            }
            Ok(CallAnswer {
                admitted: r[0] == 1,
                id_seen: r[1] == 1,
                checks: r[2..]
                    .chunks_exact(3)
                    .map(|c| CheckResult {
                        passed: c[0] == 1,
                        count: as_u64(c[1]),
                        retry_after_ms: as_u64(c[2]),
                    })
                    .collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use toolmend::guard::{
        Rule,
        store::{AdmitCall, Check},
    };

    use super::*;

    #[test]
    fn the_prefix_carries_the_script_version() {
        assert_eq!(KEY_PREFIX, format!("tm:v{SCRIPT_VERSION}:"));
    }

    #[test]
    fn keys_share_the_session_tag_and_globals_have_their_own() {
        assert_eq!(
            key(Some("00ab"), &Scope::SessionTool("search".into())),
            "tm:v1:{00ab}:st:search"
        );
        assert_eq!(
            key(Some("00ab"), &Scope::Tool("search".into())),
            "tm:v1:{t:search}:w"
        );
        assert_eq!(key(None, &Scope::Thread), "tm:v1:{_}:th");
    }

    #[test]
    fn an_admission_is_one_line_per_call_and_each_key_once() {
        let check = |scope, window_ms| Check {
            rule: Rule::SessionWindow,
            scope,
            limit: 3,
            window_ms,
            shadow: false,
        };
        let calls = [
            AdmitCall {
                call_id: "a".into(),
                checks: vec![
                    check(Scope::Session, Some(1000)),
                    check(Scope::Thread, None),
                ],
            },
            AdmitCall {
                call_id: "b".into(),
                checks: vec![check(Scope::Session, Some(1000))],
            },
        ];
        let (keys, args) = encode(Admission {
            session: Some("s1"),
            ttl_ms: 60_000,
            calls: &calls,
        });
        assert_eq!(keys, ["tm:v1:{s1}:ids", "tm:v1:{s1}:s", "tm:v1:{s1}:th"]);
        assert_eq!(
            args,
            [
                "60000",
                "1",
                "a",
                "2,3,1000,0;3,3,-1,0;",
                "b",
                "2,3,1000,0;"
            ]
        );
    }
}
