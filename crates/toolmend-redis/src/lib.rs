//! A Redis store for toolmend's flood guard ([`toolmend::guard::GuardStore`]): the
//! counted rules' state shared by every instance of a gateway, with the same semantics
//! as [`toolmend::guard::MemoryStore`] and one round trip per message.
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use toolmend::guard::{FailMode, GuardConfig, RuleGuard, Window};
//! use toolmend_redis::{RedisOptions, redis_guard_store};
//!
//! let store = redis_guard_store("redis://127.0.0.1:6379/", RedisOptions::default())?;
//! let stats = store.inner().clone(); // a handle for metrics: `stats.stats()`
//! let guard = RuleGuard::new(GuardConfig {
//!     session: Some(Window::new(20, 60.0)),
//!     ..GuardConfig::default()
//! })?
//! .with_store(store)
//! .fail_mode(FailMode::Open);
//! # let _ = (guard, stats); Ok(()) }
//! ```
//!
//! # Key layout
//!
//! Every key starts with `tm:v1:` (`v1`: [`SCRIPT_VERSION`]; a script that changes the
//! layout changes the prefix, so instances of two versions in a rolling deploy never read
//! each other's keys). A session's keys share one hash tag, the session as the guard hashed
//! it (16 hex characters, never the caller's value):
//!
//! | key | holds | expires |
//! |---|---|---|
//! | `tm:v1:{<session>}:s`, `:st:<tool>`, `:c:<fingerprint>` | a sliding-window log: a list of admission times (ms), at most `limit` of them | `window` after the last admission |
//! | `tm:v1:{<session>}:th`, `:tht:<tool>`, `:r:<n>`, `:rt:<n>:<tool>` | a budget: `<count>:<expiry ms>` (its expiry on the server's clock, so the script needs no `PTTL`) | the session TTL after the last admission |
//! | `tm:v1:{<session>}:ids` | the call ids seen, a sorted set in insertion order, at most 10,000 | the session TTL, refreshed by every call |
//! | `tm:v1:{t:<tool>}:w` | a tool's window across sessions (`Scope::Tool`) | `window` after the last admission |
//!
//! Every key written gets an expiry (`PEXPIRE`, `PEXPIREAT` or `SET … PXAT`), so Redis
//! forgets idle sessions on its own.
//!
//! # The script
//!
//! One Lua script (`src/admit.lua`) per message, whatever its number of calls: the
//! message's keys in `KEYS` (each once), and in `ARGV` the session TTL, then per call its
//! id and one compact line of checks (`key,limit,window,shadow;` with `key` an index into
//! `KEYS` and `-1` as the window of a budget). It reads the time once from
//! `redis.call('TIME')` (server time: instances with skewed clocks agree), then per call,
//! in order: evaluates every check (a window drops the times at or before `now - window`
//! and passes while fewer than `limit` remain; a budget passes while its count is under
//! `limit`), admits the call when every non-shadow check passed, looks up and remembers
//! its id, and, only if admitted, records it in every check (all or nothing per call: a
//! refused call counts nowhere). Later calls of the message see the earlier ones. A
//! failed window's `retry_after` is when its oldest blocking entry leaves the window; a
//! failed budget's is the key's remaining TTL. These are exactly
//! [`MemoryStore::admit_now`](toolmend::guard::MemoryStore::admit_now)'s rules; the tests
//! run both stores side by side on one random sequence.
//!
//! Inside the script each key is read at most once per message (`LINDEX`/`LLEN` for a
//! log, `GET` for a counter) and written once at the end (`RPUSH` + `PEXPIREAT`, or
//! `SET … PXAT`); in between it keeps a model of the key, so a message of 8 calls costs
//! far less than 8 messages of one. What remains is Redis's own cost per command called
//! from Lua (a few µs each on a busy machine): about 17 commands for a call with a session
//! window, a tool window, a duplicate check and a thread budget. `benches/guard.rs`
//! measures it (p50 and p99 per message, with a bare `PING` beside it).
//!
//! The script is sent by SHA (`EVALSHA`) through [`redis::Script`], which loads it on
//! `NOSCRIPT` (after a Redis restart or a `SCRIPT FLUSH`) and retries; the store also
//! loads it after every (re)connect so the first message does not pay for it.
//!
//! # Timeouts, failures, fail modes
//!
//! [`RedisStore::connect`] checks the URL and returns at once: the connection is made in a
//! background task, so a process never waits for a down Redis to start. While it is not
//! connected, or after a dropped connection until it is back, [`GuardStore::admit`]
//! answers [`StoreErrorKind::Unavailable`] at once, without a round trip. Every admission
//! is bounded by [`RedisOptions::timeout`] (20 ms by default) and answers
//! [`StoreErrorKind::Timeout`] past it. A connection-dropped error is retried once at
//! once, within the same timeout (the first command after a drop fails by design in
//! `ConnectionManager`). Answers that cannot be read are [`StoreErrorKind::Protocol`].
//! The store never decides on its own what a failure means: the
//! [`RuleGuard`](toolmend::guard::RuleGuard) does, by its
//! [`FailMode`](toolmend::guard::FailMode) (open: calls run, reported with rule
//! `store_unavailable`; closed: calls the store would have counted are refused) and by its
//! own decision timeout, which should not be shorter than the store's.
//!
//! # Reconnecting
//!
//! Over a [`redis::aio::ConnectionManager`]. After a dropped connection the store marks
//! itself down and one background task pings every [`RedisOptions::reconnect_interval`]
//! until Redis answers, loads the script again, and marks the store up: decisions are
//! Redis-backed again within about one interval of Redis coming back (measured in the
//! tests: well under a second). Nothing in the store panics.
//! [`RedisStore::stats`] counts round trips, retries, errors by kind and reconnects for
//! the gateway's metrics.
//!
//! # Redis Cluster
//!
//! Not supported in this version, by decision, and refused clearly: when the server says
//! `cluster_enabled:1` (checked once per connection), every admission answers
//! [`StoreErrorKind::Protocol`] with "Redis Cluster is not supported", so the guard fails
//! as configured and the log says why. The reason: a session's keys share a slot (the
//! hash tag), but the cross-session window `tm:v1:{t:<tool>}:w` lives in another slot,
//! and one script cannot touch two slots (`CROSSSLOT`). Keeping "all or nothing per call"
//! across slots needs a second script call for the global keys with a reservation and a
//! refund when the session script refuses the call: two round trips, and a window in which
//! a reserved but refunded call is visible to other instances. That is the planned design
//! for a `cluster` feature (over `cluster-async`); until then use a standalone Redis (or a
//! primary with replicas and Sentinel).
//!
//! [`StoreErrorKind::Unavailable`]: toolmend::guard::store::StoreErrorKind::Unavailable
//! [`StoreErrorKind::Timeout`]: toolmend::guard::store::StoreErrorKind::Timeout
//! [`StoreErrorKind::Protocol`]: toolmend::guard::store::StoreErrorKind::Protocol
//! [`GuardStore::admit`]: toolmend::guard::GuardStore::admit

mod store;

pub use store::{
    ConfigError, DEFAULT_TIMEOUT, KEY_PREFIX, RedisOptions, RedisStats, RedisStore, SCRIPT_VERSION,
    redis_guard_store,
};
