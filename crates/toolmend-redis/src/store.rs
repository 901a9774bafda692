//! The store: a connection supervised in the background, a circuit breaker, one script
//! call per admission (per slot on a cluster).

use std::{
    fmt,
    sync::{
        Arc, Mutex, RwLock, Weak,
        atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering},
    },
    time::Duration,
};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::time::Instant;
use toolmend::{
    future::BoxFuture,
    guard::{
        GuardStore,
        store::{Admission, CallAnswer, EarlyRefusal, StoreError, StoreErrorKind},
    },
};

use crate::{
    encode::{Invocation, Part, blank, decode, encode, has_global},
    target::{Conn, Target, redact},
};

/// What [`RedisStore::run`] sends: the guard's script, or a plain command.
#[derive(Clone, Copy)]
enum Op<'a> {
    Script(&'a Invocation),
    Cmd(&'a redis::Cmd),
}

/// The prefix of the keys [`RedisStore::set_blob`] writes (outside the guard's layout:
/// the gateway's kept responses).
pub const BLOB_PREFIX: &str = "tm:blob:";

/// The script's version, baked into every key's prefix ([`KEY_PREFIX`]).
pub const SCRIPT_VERSION: u32 = 2;
/// The prefix of every key the store writes: `tm:v<SCRIPT_VERSION>:`.
pub const KEY_PREFIX: &str = "tm:v2:";
/// Default bound on one admission, round trips included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(20);
/// The most consecutive timeouts before the store marks itself down.
pub const MAX_BREAKER_TIMEOUTS: u32 = 3;

const LUA: &str = include_str!("admit.lua");

const CONNECTING: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;
const MISCONFIGURED: u8 = 3;

/// How the store connects and how long it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisOptions {
    /// Bound on one admission, every round trip included: past it,
    /// [`StoreErrorKind::Timeout`].
    pub timeout: Duration,
    /// Bound on one connection attempt (and on one probe while down).
    pub connect_timeout: Duration,
    /// Pause before the first probe after the store went down; doubled after each failed
    /// probe, up to [`RedisOptions::max_probe_interval`].
    pub reconnect_interval: Duration,
    /// The longest pause between two probes.
    pub max_probe_interval: Duration,
    /// Consecutive timeouts that mark the store down (1 to [`MAX_BREAKER_TIMEOUTS`]).
    pub breaker_timeouts: u32,
    /// Keys the [`EarlyRefusal`] front of [`redis_guard_store`] keeps.
    pub early_refusal_keys: usize,
    /// A PEM bundle of the certificate authorities a `rediss://` server's certificate may
    /// chain to, instead of the system's (which also honour `SSL_CERT_FILE`).
    pub tls_ca_pem: Option<Vec<u8>>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: Duration::from_secs(1),
            reconnect_interval: Duration::from_millis(200),
            max_probe_interval: Duration::from_secs(2),
            breaker_timeouts: MAX_BREAKER_TIMEOUTS,
            early_refusal_keys: 100_000,
            tls_ca_pem: None,
        }
    }
}

/// Why a store cannot be made (nothing about Redis being reachable: that is checked later).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The URL does not parse as a Redis URL (the message never carries its password).
    #[error("invalid Redis URL: {0}")]
    Url(String),
    /// Called outside a Tokio runtime (the connection is made in a background task).
    #[error("the Redis guard store needs a Tokio runtime to connect in the background")]
    NoRuntime,
    /// A zero timeout would refuse every admission.
    #[error("the Redis guard store's timeout must be above zero")]
    ZeroTimeout,
    /// `breaker_timeouts` outside 1 to [`MAX_BREAKER_TIMEOUTS`].
    #[error("the Redis guard store's breaker_timeouts must be between 1 and 3, not {0}")]
    Breaker(u32),
    /// A `rediss://` URL (redacted) in a build without the `tls` feature: the build's
    /// fault, not the URL's.
    #[error(
        "{0} is a TLS address (rediss://), but this build has no TLS: rebuild with the \
         `tls` feature (on by default), or use redis://"
    )]
    NoTls(String),
}

/// The store's state, for readiness and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreState {
    /// Not connected yet since the start; `cause`: why the last attempt failed, if one did.
    Connecting {
        /// The last attempt's error.
        cause: Option<String>,
    },
    /// Admissions go to Redis.
    Up,
    /// Marked down (a dropped connection, or consecutive timeouts: the breaker is open);
    /// admissions answer at once without a round trip; one probe at a time brings it back.
    Down {
        /// Why.
        cause: String,
    },
    /// Connected to something that cannot work as configured (a cluster node behind a
    /// `redis://` URL); admissions fail, the log says what to write.
    Misconfigured {
        /// What is wrong and what to do.
        cause: String,
    },
}

impl StoreState {
    /// `connecting`, `up`, `down` or `misconfigured`.
    pub fn name(&self) -> &'static str {
        match self {
            StoreState::Connecting { .. } => "connecting",
            StoreState::Up => "up",
            StoreState::Down { .. } => "down",
            StoreState::Misconfigured { .. } => "misconfigured",
        }
    }
}

/// What the store did, since it was made (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedisStats {
    /// Admissions asked of the store.
    pub admissions: u64,
    /// Script calls sent (an admission's retry, and each part on a cluster, count again).
    pub round_trips: u64,
    /// Round trips to a cluster's global slot.
    pub global_round_trips: u64,
    /// Refunds sent to a cluster's session slot (calls its global slot refused).
    pub refunds: u64,
    /// Retries after a dropped connection.
    pub retries: u64,
    /// Admissions that answered [`StoreErrorKind::Timeout`].
    pub timeouts: u64,
    /// Admissions that answered [`StoreErrorKind::Unavailable`].
    pub unavailable: u64,
    /// Admissions that answered [`StoreErrorKind::Protocol`].
    pub protocol_errors: u64,
    /// Connections made after a drop or an open breaker (the first is not counted).
    pub reconnects: u64,
    /// Times the breaker opened (consecutive timeouts marked the store down).
    pub breaker_opens: u64,
    /// Probes sent while down (each one command, bounded by `connect_timeout`).
    pub probes: u64,
    /// Connected now.
    pub connected: bool,
}

#[derive(Debug, Default)]
struct Counters {
    admissions: AtomicU64,
    round_trips: AtomicU64,
    global_round_trips: AtomicU64,
    refunds: AtomicU64,
    retries: AtomicU64,
    timeouts: AtomicU64,
    unavailable: AtomicU64,
    protocol_errors: AtomicU64,
    reconnects: AtomicU64,
    breaker_opens: AtomicU64,
    probes: AtomicU64,
}

// Made once per store: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
enum Client {
    Single(redis::Client),
    Cluster(redis::cluster::ClusterClient),
}

struct Inner {
    client: Client,
    cluster: bool,
    /// The URL as it may be logged.
    address: String,
    /// The URL's userinfo, blanked out of any error text.
    secret: Option<String>,
    conn: RwLock<Option<Conn>>,
    state: AtomicU8,
    /// When `state` last changed (the store's creation for the first).
    changed: Mutex<Instant>,
    cause: Mutex<Option<String>>,
    probing: AtomicBool,
    consecutive_timeouts: AtomicU32,
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
            .field("address", &self.inner.address)
            .field("state", &self.state().name())
            .field("timeout", &self.inner.opts.timeout)
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

fn metric_state(address: &str, state: u8) {
    for (s, name) in [
        (CONNECTING, "connecting"),
        (UP, "up"),
        (DOWN, "down"),
        (MISCONFIGURED, "misconfigured"),
    ] {
        metrics::gauge!("toolmend_guard_store_state", "store" => "redis", "state" => name,
            "address" => address.to_owned())
        .set(if s == state { 1.0 } else { 0.0 });
    }
}

fn metric_transition(to: &'static str, why: &'static str) {
    metrics::counter!("toolmend_guard_store_transitions_total", "store" => "redis",
        "to" => to, "why" => why)
    .increment(1);
}

impl RedisStore {
    /// Checks `url` and returns at once; the connection is made in a background task on
    /// the current Tokio runtime, retried until Redis answers. Until then, admissions
    /// answer [`StoreErrorKind::Unavailable`] with the cause.
    ///
    /// `url`: `redis://[user:password@]host:port/db`, `rediss://…` (TLS, rustls),
    /// `redis+cluster://[user:password@]host1:port1,host2:port2` or `rediss+cluster://…`
    /// (a Redis Cluster: seed nodes, the rest is discovered).
    pub fn connect(url: &str, opts: RedisOptions) -> Result<RedisStore, ConfigError> {
        if opts.timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        if !(1..=MAX_BREAKER_TIMEOUTS).contains(&opts.breaker_timeouts) {
            return Err(ConfigError::Breaker(opts.breaker_timeouts));
        }
        let address = redact(url);
        let secret = url
            .split_once("://")
            .and_then(|(_, r)| r.split(['/', '?', '#']).next())
            .and_then(|a| a.rsplit_once('@'))
            .map(|(u, _)| u.to_owned())
            .filter(|u| !u.is_empty());
        let scrub = |e: redis::RedisError| {
            let mut m = e.to_string();
            if let Some(s) = &secret {
                m = m.replace(s.as_str(), "***");
            }
            ConfigError::Url(format!("{address}: {m}"))
        };
        // Without `tls` no URL that reaches here is rediss (Target::parse refused it), so
        // the CA bundle has nothing to apply to.
        #[cfg(feature = "tls")]
        let certs = |pem: &Vec<u8>| redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.clone()),
        };
        let (client, cluster) = match Target::parse(url)? {
            Target::Single(u) => {
                #[cfg(feature = "tls")]
                let c = match &opts.tls_ca_pem {
                    Some(pem) => redis::Client::build_with_tls(u.as_str(), certs(pem)),
                    None => redis::Client::open(u.as_str()),
                };
                #[cfg(not(feature = "tls"))]
                let c = redis::Client::open(u.as_str());
                let c = c.map_err(scrub)?;
                (Client::Single(c), false)
            }
            Target::Cluster(nodes) => {
                let b = redis::cluster::ClusterClientBuilder::new(nodes)
                    .connection_timeout(opts.connect_timeout)
                    .response_timeout(opts.connect_timeout)
                    .retries(1)
                    .min_retry_wait(5)
                    .max_retry_wait(50);
                #[cfg(feature = "tls")]
                let b = match &opts.tls_ca_pem {
                    Some(pem) => b.certs(certs(pem)),
                    None => b,
                };
                (Client::Cluster(b.build().map_err(scrub)?), true)
            }
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| ConfigError::NoRuntime)?;
        let inner = Arc::new(Inner {
            client,
            cluster,
            address,
            secret,
            conn: RwLock::new(None),
            state: AtomicU8::new(CONNECTING),
            changed: Mutex::new(Instant::now()),
            cause: Mutex::new(None),
            probing: AtomicBool::new(true),
            consecutive_timeouts: AtomicU32::new(0),
            script: redis::Script::new(LUA),
            opts,
            counters: Counters::default(),
            runtime,
        });
        metric_state(&inner.address, CONNECTING);
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
            global_round_trips: get(&c.global_round_trips),
            refunds: get(&c.refunds),
            retries: get(&c.retries),
            timeouts: get(&c.timeouts),
            unavailable: get(&c.unavailable),
            protocol_errors: get(&c.protocol_errors),
            reconnects: get(&c.reconnects),
            breaker_opens: get(&c.breaker_opens),
            probes: get(&c.probes),
            connected: self.is_connected(),
        }
    }

    /// True while admissions go to Redis.
    pub fn is_connected(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) == UP
    }

    /// The state now, with its cause.
    pub fn state(&self) -> StoreState {
        let cause = self.cause();
        match self.inner.state.load(Ordering::Acquire) {
            CONNECTING => StoreState::Connecting { cause },
            UP => StoreState::Up,
            DOWN => StoreState::Down {
                cause: cause.unwrap_or_else(|| "down".to_owned()),
            },
            _ => StoreState::Misconfigured {
                cause: cause.unwrap_or_else(|| "misconfigured".to_owned()),
            },
        }
    }

    /// How long the store has been in its [`state`](Self::state): since its creation
    /// while it has never connected, since the last change otherwise.
    pub fn time_in_state(&self) -> Duration {
        self.inner.changed().elapsed()
    }

    /// The URL as it may be logged (no userinfo, query or fragment).
    pub fn address(&self) -> &str {
        &self.inner.address
    }

    /// True for a `redis+cluster://` store.
    pub fn is_cluster(&self) -> bool {
        self.inner.cluster
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

    /// Waits until the first connection attempt ended, at most `within`: `Ok` when
    /// connected, `Err` with the state otherwise (a start that logs why Redis is not
    /// there, once).
    pub async fn first_attempt(&self, within: Duration) -> Result<(), StoreState> {
        let until = Instant::now() + within;
        loop {
            let st = self.state();
            match &st {
                StoreState::Up => return Ok(()),
                StoreState::Connecting { cause: None } if Instant::now() < until => {}
                _ => return Err(st),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> &RedisOptions {
        &self.inner.opts
    }

    fn cause(&self) -> Option<String> {
        self.inner
            .cause
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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

    /// Marks the store down and starts the one probing task, if none runs.
    fn mark_down(&self, cause: String, why: &'static str) {
        let inner = &self.inner;
        if inner
            .state
            .compare_exchange(UP, DOWN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            *inner.cause.lock().unwrap_or_else(|p| p.into_inner()) = Some(cause.clone());
            inner.changed_now();
            if why == "timeouts" {
                inner.counters.breaker_opens.fetch_add(1, Ordering::Relaxed);
            }
            metric_state(&inner.address, DOWN);
            metric_transition("down", why);
            tracing::warn!(
                store = "redis",
                address = %inner.address,
                "guard store marked down: {cause}; decisions take guard.fail at once, one \
                 probe at a time brings it back"
            );
            if !inner.probing.swap(true, Ordering::AcqRel) {
                inner.runtime.spawn(supervise(Arc::downgrade(inner)));
            }
        }
    }

    /// One timeout more; the breaker opens at `breaker_timeouts` in a row.
    fn timed_out(&self) {
        let n = self
            .inner
            .consecutive_timeouts
            .fetch_add(1, Ordering::AcqRel)
            + 1;
        if n >= self.inner.opts.breaker_timeouts {
            self.mark_down(
                format!(
                    "{n} admissions in a row got no answer within {} ms",
                    self.inner.opts.timeout.as_millis()
                ),
                "timeouts",
            );
        }
    }

    fn scrub(&self, e: &redis::RedisError) -> String {
        let mut m = e.to_string();
        if let Some(s) = &self.inner.secret {
            m = m.replace(s.as_str(), "***");
        }
        m
    }

    async fn admit_inner(&self, a: Admission<'_>) -> Result<Vec<CallAnswer>, StoreError> {
        let inner = &self.inner;
        inner.counters.admissions.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + inner.opts.timeout;
        let mut conn = self.connection()?;
        if !inner.cluster {
            let inv = encode(&a, Part::All);
            let reply = self.run(&mut conn, Op::Script(&inv), deadline).await?;
            let (_, answers) = decode(&inv, reply).map_err(|m| self.protocol(m))?;
            return Ok(merge(blank(&a), &inv, answers));
        }
        self.admit_cluster(&mut conn, a, deadline).await
    }

    /// The connection, when the store is up; else why not.
    fn connection(&self) -> Result<Conn, StoreError> {
        let inner = &self.inner;
        match inner.state.load(Ordering::Acquire) {
            UP => {}
            CONNECTING => {
                let why = self
                    .cause()
                    .unwrap_or_else(|| "first attempt under way".to_owned());
                return Err(self.fail(
                    StoreErrorKind::Unavailable,
                    format!("not connected yet to {}: {why}", inner.address),
                ));
            }
            DOWN => {
                let why = self.cause().unwrap_or_default();
                return Err(self.fail(
                    StoreErrorKind::Unavailable,
                    format!("marked down ({}): {why}", inner.address),
                ));
            }
            _ => {
                let why = self.cause().unwrap_or_default();
                return Err(self.fail(StoreErrorKind::Protocol, why));
            }
        }
        let conn = inner.conn.read().map_or(None, |c| c.clone());
        conn.ok_or_else(|| self.fail(StoreErrorKind::Unavailable, "not connected"))
    }

    /// The value under `key` (a key of the caller's, outside the guard's layout: see
    /// [`BLOB_PREFIX`]), within the store's timeout; `None` when there is none.
    ///
    /// # Errors
    ///
    /// The store is not up, or did not answer in time (the breaker told, as for an
    /// admission).
    pub async fn get_blob(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let deadline = Instant::now() + self.inner.opts.timeout;
        let mut conn = self.connection()?;
        let mut cmd = redis::cmd("GET");
        cmd.arg(format!("{BLOB_PREFIX}{key}"));
        match self.run(&mut conn, Op::Cmd(&cmd), deadline).await? {
            redis::Value::BulkString(bytes) => Ok(Some(bytes)),
            redis::Value::Nil => Ok(None),
            other => Err(self.protocol(format!("GET answered {other:?}"))),
        }
    }

    /// Keeps `value` under `key` for `ttl` (`SET … PX`), within the store's timeout.
    ///
    /// # Errors
    ///
    /// As [`get_blob`](Self::get_blob).
    pub async fn set_blob(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let deadline = Instant::now() + self.inner.opts.timeout;
        let mut conn = self.connection()?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(format!("{BLOB_PREFIX}{key}"))
            .arg(value)
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1));
        self.run(&mut conn, Op::Cmd(&cmd), deadline).await?;
        Ok(())
    }

    fn protocol(&self, m: String) -> StoreError {
        self.fail(StoreErrorKind::Protocol, m)
    }

    /// A cluster: the session's slot (its checks and ids, tentatively recorded), then the
    /// global slot only when a call has a global check (exact: records only calls every
    /// check admitted), then a refund in the session's slot only for calls the global
    /// slot refused. See the crate docs for what holds between the round trips.
    async fn admit_cluster(
        &self,
        conn: &mut Conn,
        a: Admission<'_>,
        deadline: Instant,
    ) -> Result<Vec<CallAnswer>, StoreError> {
        let mut out = blank(&a);
        let global = has_global(&a);
        let session = a.session.is_some()
            || a.calls
                .iter()
                .any(|c| c.checks.iter().any(|k| !k.scope.is_global()));
        let mut at = 0;
        let mut session_ok = vec![true; a.calls.len()];
        if session {
            let inv = encode(&a, Part::Session);
            let reply = self.run(conn, Op::Script(&inv), deadline).await?;
            let (now, answers) = decode(&inv, reply).map_err(|m| self.protocol(m))?;
            at = now;
            out = merge(out, &inv, answers);
            for (ok, answer) in session_ok.iter_mut().zip(&out) {
                *ok = answer.admitted;
            }
        }
        if !global {
            return Ok(out);
        }
        let inv = encode(&a, Part::Global(&session_ok));
        self.inner
            .counters
            .global_round_trips
            .fetch_add(1, Ordering::Relaxed);
        let reply = self.run(conn, Op::Script(&inv), deadline).await?;
        let (_, answers) = decode(&inv, reply).map_err(|m| self.protocol(m))?;
        let mut refund = vec![false; a.calls.len()];
        for (i, (admitted, _, checks)) in answers.into_iter().enumerate() {
            for (&k, r) in inv.picked[i].iter().zip(checks) {
                out[i].checks[k] = r;
            }
            refund[i] = session && session_ok[i] && !admitted;
            out[i].admitted = admitted;
        }
        if refund.iter().any(|&r| r) {
            let inv = encode(&a, Part::Refund { at, calls: &refund });
            self.inner.counters.refunds.fetch_add(1, Ordering::Relaxed);
            self.run(conn, Op::Script(&inv), deadline).await?;
        }
        Ok(out)
    }

    /// One script call or command within `deadline`: a dropped connection retried once;
    /// the breaker told of timeouts and of answers.
    async fn run(
        &self,
        conn: &mut Conn,
        op: Op<'_>,
        deadline: Instant,
    ) -> Result<redis::Value, StoreError> {
        let inner = &self.inner;
        let mut invocation = inner.script.prepare_invoke();
        if let Op::Script(inv) = op {
            for k in &inv.keys {
                invocation.key(k.as_str());
            }
            for arg in &inv.args {
                invocation.arg(arg.as_str());
            }
        }
        let mut retried = false;
        loop {
            inner.counters.round_trips.fetch_add(1, Ordering::Relaxed);
            let answer = match op {
                Op::Script(_) => {
                    tokio::time::timeout_at(deadline, invocation.invoke_async::<redis::Value>(conn))
                        .await
                }
                Op::Cmd(cmd) => {
                    tokio::time::timeout_at(deadline, cmd.query_async::<redis::Value>(conn)).await
                }
            };
            match answer {
                Ok(Ok(reply)) => {
                    inner.consecutive_timeouts.store(0, Ordering::Release);
                    return Ok(reply);
                }
                Err(_) if retried => {
                    // The retry after a drop waited for the reconnect: Redis is away.
                    self.mark_down(
                        "connection dropped and not back within the timeout".to_owned(),
                        "dropped",
                    );
                    return Err(self.fail(
                        StoreErrorKind::Unavailable,
                        "connection dropped and not back within the timeout",
                    ));
                }
                Err(_) => {
                    self.timed_out();
                    return Err(self.fail(
                        StoreErrorKind::Timeout,
                        format!(
                            "no answer from {} within {} ms",
                            inner.address,
                            inner.opts.timeout.as_millis()
                        ),
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
                        let cause = format!("connection lost: {}", self.scrub(&e));
                        self.mark_down(cause.clone(), "dropped");
                        return Err(self.fail(StoreErrorKind::Unavailable, cause));
                    }
                    inner.consecutive_timeouts.store(0, Ordering::Release);
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
                        format!("script failed: {}", self.scrub(&e)),
                    ));
                }
            }
        }
    }
}

impl Inner {
    fn changed(&self) -> Instant {
        *self.changed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed_now(&self) {
        *self.changed.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
}

/// Fills `out` with a part's answers (its checks at their indices).
fn merge(
    mut out: Vec<CallAnswer>,
    inv: &Invocation,
    answers: Vec<crate::encode::PartAnswer>,
) -> Vec<CallAnswer> {
    for (i, (admitted, seen, checks)) in answers.into_iter().enumerate() {
        let o = &mut out[i];
        o.admitted = admitted;
        o.id_seen = seen;
        for (&k, r) in inv.picked[i].iter().zip(checks) {
            o.checks[k] = r;
        }
    }
    out
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

/// Connects (or probes), loads the script, marks the store up; one attempt per pause,
/// the pause doubling from `reconnect_interval` to `max_probe_interval`, until it works
/// or the store is dropped.
async fn supervise(weak: Weak<Inner>) {
    let mut pause = None::<Duration>;
    loop {
        if let Some(p) = pause {
            tokio::time::sleep(p).await;
        }
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let first = inner.state.load(Ordering::Acquire) == CONNECTING;
        if !first {
            inner.counters.probes.fetch_add(1, Ordering::Relaxed);
        }
        let attempt = tokio::time::timeout(inner.opts.connect_timeout, connect_once(&inner)).await;
        let cause = match attempt {
            Ok(Ok(None)) => {
                if !first {
                    inner.counters.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                inner.consecutive_timeouts.store(0, Ordering::Release);
                *inner.cause.lock().unwrap_or_else(|p| p.into_inner()) = None;
                inner.probing.store(false, Ordering::Release);
                inner.state.store(UP, Ordering::Release);
                inner.changed_now();
                metric_state(&inner.address, UP);
                metric_transition("up", if first { "connected" } else { "probe" });
                tracing::info!(
                    store = "redis",
                    address = %inner.address,
                    reconnect = !first,
                    "guard store connected"
                );
                return;
            }
            Ok(Ok(Some(wrong))) => {
                *inner.cause.lock().unwrap_or_else(|p| p.into_inner()) = Some(wrong.clone());
                inner.probing.store(false, Ordering::Release);
                inner.state.store(MISCONFIGURED, Ordering::Release);
                inner.changed_now();
                metric_state(&inner.address, MISCONFIGURED);
                metric_transition("misconfigured", "cluster");
                tracing::error!(store = "redis", address = %inner.address, "{wrong}");
                return;
            }
            Ok(Err(e)) => {
                let mut m = e.to_string();
                if let Some(s) = &inner.secret {
                    m = m.replace(s.as_str(), "***");
                }
                m
            }
            Err(_) => format!(
                "no answer within {} ms",
                inner.opts.connect_timeout.as_millis()
            ),
        };
        tracing::debug!(store = "redis", address = %inner.address, "guard store attempt failed: {cause}");
        *inner.cause.lock().unwrap_or_else(|p| p.into_inner()) = Some(if first {
            cause
        } else {
            format!("probe failed: {cause}")
        });
        let base = inner.opts.reconnect_interval;
        let max = inner.opts.max_probe_interval.max(base);
        pause = Some(pause.map_or(base, |p| (p * 2).min(max)));
    }
}

/// One attempt: the existing connection (it reconnects on its own) or a new one; then a
/// check that a single URL does not name a cluster node, and the script load. `Some`:
/// what is misconfigured.
async fn connect_once(inner: &Inner) -> redis::RedisResult<Option<String>> {
    let existing = inner.conn.read().map_or(None, |c| c.clone());
    let mut conn = match existing {
        Some(c) => c,
        None => {
            let c = match &inner.client {
                Client::Single(client) => {
                    let config = ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(inner.opts.connect_timeout))
                        .set_response_timeout(Some(inner.opts.connect_timeout))
                        .set_number_of_retries(1)
                        .set_min_delay(Duration::from_millis(20))
                        .set_max_delay(inner.opts.reconnect_interval);
                    Conn::Single(ConnectionManager::new_with_config(client.clone(), config).await?)
                }
                Client::Cluster(client) => Conn::Cluster(client.get_async_connection().await?),
            };
            if let Ok(mut slot) = inner.conn.write() {
                *slot = Some(c.clone());
            }
            c
        }
    };
    if let Conn::Single(_) = conn {
        let info: String = redis::cmd("INFO")
            .arg("cluster")
            .query_async(&mut conn)
            .await?;
        if info.contains("cluster_enabled:1") {
            return Ok(Some(format!(
                "{} is a Redis Cluster node: write the URL as redis+cluster://host1:port1,\
                 host2:port2 (or rediss+cluster:// with TLS) so the store routes each \
                 session to its slot; every admission fails meanwhile",
                inner.address
            )));
        }
    }
    inner.script.load_async(&mut conn).await?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_carries_the_script_version() {
        assert_eq!(KEY_PREFIX, format!("tm:v{SCRIPT_VERSION}:"));
    }
}
