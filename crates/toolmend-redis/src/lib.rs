//! A Redis store for toolmend's flood guard ([`toolmend::guard::GuardStore`]): the
//! counted rules' state shared by every instance of a gateway, with the same semantics
//! as [`toolmend::guard::MemoryStore`] and one round trip per message (on a Redis
//! Cluster, a second one only for messages with a cross-session rule).
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
//! # Addresses
//!
//! `redis://[user:password@]host:port/db` (one Redis), `rediss://…` (TLS over rustls, the
//! crypto provider the gateway already uses; the system's roots, which honour
//! `SSL_CERT_FILE`, or [`RedisOptions::tls_ca_pem`]), `redis+cluster://host1:port1,host2:port2`
//! and `rediss+cluster://…` (a Redis Cluster: seed nodes, the userinfo and query apply to
//! each; only database 0). A `redis://` URL that reaches a cluster node is refused with a
//! message that says to write `redis+cluster://`. Sentinel is not supported: the `redis`
//! crate's Sentinel client has no connection manager of the kind the store supervises
//! (reconnect, script load, breaker) and would need a second connection path; point the
//! URL at the primary (or a proxy/DNS name that follows failovers) instead. Every address
//! the store logs or reports is [`redact`]ed: no userinfo, query or fragment.
//!
//! TLS is tested against a real server (`tests/it/tls.rs`): the test makes a throwaway CA and
//! a certificate for `127.0.0.1`/`localhost` with the `openssl` command line, starts
//! `redis-server --port 0 --tls-port …` (TLS only, a password required), and checks that a
//! `rediss://` store given the CA ([`RedisOptions::tls_ca_pem`]) enforces a session window
//! exactly (3 admitted, the 4th refused by the window; the records read back with
//! `redis-cli --tls`), and that a store given an unrelated CA, or none (the system's
//! roots), never connects: its decisions fail with `not connected yet to
//! rediss://127.0.0.1:<port>/: invalid peer certificate: UnknownIssuer`, the password
//! nowhere in the text. Not tested: client certificates (`tls-auth-clients yes`; the store
//! has no option for them) and `rediss+cluster://`.
//!
//! # Key layout
//!
//! Every key starts with `tm:v2:` (`v2`: [`SCRIPT_VERSION`]; a script that changes the
//! layout changes the prefix, so instances of two versions in a rolling deploy never read
//! each other's keys: version 1 kept one key per scope and the seen ids in a sorted set).
//! A session's keys share one hash tag, the session as the guard hashed it (16 hex
//! characters, never the caller's value):
//!
//! | key | holds | expires |
//! |---|---|---|
//! | `tm:v2:{<session>}` (a hash) | field `n`: `<id seq>:<ids base>:<ids expiry>:<hash expiry>`; `i:<id>`: a seen id's sequence number, `q:<k>`: the ring of the last 10,000 ids; `s`, `st:<tool>`: windows; `th`, `tht:<tool>`: budgets | at the latest of the session TTL after its last call and its windows' expiries |
//! | `tm:v2:{<session>}:c:<fingerprint>` | a duplicate window | `window` after its last admission |
//! | `tm:v2:{<session>}:r:<n>`, `:rt:<n>:<tool>` | a run's budget | the session TTL after its last admission |
//! | `tm:v2:{g}:t:<tool>` | a tool's window across sessions (`Scope::Tool`) | `window` after its last admission |
//!
//! A window is `<expiry ms><time ms>…` (13 digits each, oldest first, at most `limit`
//! times): its own expiry first, so a field of the hash expires on its own terms; a
//! budget is `<count>:<expiry ms>`. The scoped windows and budgets live in the session's
//! hash because they are few (bounded by the configured tools); fingerprints and runs are
//! many and keep keys of their own, so Redis forgets each on its own. Seen ids: an id is
//! seen while its field holds a sequence number above the base (the base moves to the
//! latest number when the ids' session TTL passes), and the id 10,000 inserts older is
//! forgotten through the ring (its slot is read only past 10,000 ids).
//!
//! # The script
//!
//! One Lua script (`src/admit.lua`) per message, whatever its number of calls. It reads
//! the time once from `redis.call('TIME')` (server time: instances with skewed clocks
//! agree), reads the session's hash once (`HMGET`: the header, every field and id the
//! message needs) and the other keys once (`MGET`), then per call, in order: evaluates
//! every check (a window drops the times at or before `now - window` and passes while
//! fewer than `limit` remain; a budget passes while its count is under `limit`), admits
//! the call when every non-shadow check passed, looks up and remembers its id, and, only
//! if admitted, records it in every check (all or nothing per call: a refused call counts
//! nowhere). Later calls of the message see the earlier ones. A failed window's
//! `retry_after` is when its oldest blocking entry leaves the window; a failed budget's is
//! the key's remaining TTL. These are exactly
//! [`MemoryStore::admit_now`](toolmend::guard::MemoryStore::admit_now)'s rules; the tests
//! run both stores side by side on one random sequence. It writes once at the end: one
//! `HSET` and one `PEXPIREAT` for the hash, one `SET … PXAT` per other key written. A
//! message of one call with a session window, a tool window, a duplicate check and a
//! thread budget costs 6 commands inside the script (version 1: 17). The script is kept lean
//! (Lua in Redis pays about 250 ns a closure, 100 ns a table and hashes every byte of every
//! string it makes): the Rust side passes every field name it reads and each call's id field
//! by index, and the answer is one flat array. On the 2-core reference host
//! (`ITERS=3000 cargo bench -p toolmend-redis --bench guard`): a one-call message 39–43 µs
//! p50, 4.7x a `PING` of the same run (before: 55 µs, 6.2x); 8 calls 136–186 µs p50, p99
//! 268–568 µs in four runs of five; the same six commands with no logic are already about
//! 3x `PING` there (docs/benchmarks.md §7).
//!
//! The script is sent by SHA (`EVALSHA`) through [`redis::Script`], which loads it on
//! `NOSCRIPT` (after a Redis restart or a `SCRIPT FLUSH`) and retries; the store also
//! loads it after every (re)connect (on a cluster: on every primary).
//!
//! # Redis Cluster: two slots, what holds between them
//!
//! A session's keys share its slot; the global windows share the slot of `{g}` (one slot
//! for every tool: a message needs at most one global round trip, and that slot's node
//! carries every global rule's traffic). One script cannot touch two slots, so on a
//! cluster a message costs:
//!
//! 1. the session's slot (always, with a session): the session's checks and ids, as
//!    above; a call whose session checks pass is recorded there at once;
//! 2. the global slot, only when a call of the message has a global check
//!    (`tools.X.global`): every global check is evaluated; a call is recorded there only
//!    when its session checks passed in step 1 and all its global checks pass, atomically
//!    in that slot: a global window never holds a refused call and never passes its limit;
//! 3. the session's slot again, only when step 2 refused a call step 1 had recorded: that
//!    call's session records are taken back (one admission at step 1's time removed from
//!    each window, each budget decremented).
//!
//! Why this order and not the global slot first: the global keys are the ones every
//! session of every instance contends for, and a flood is usually one session refused by
//! its own rules. Recording tentatively in the session's slot keeps the global counts
//! exact at every moment, and needs a refund only when a global rule refuses a call its
//! session admitted; the other order would put a refused session's calls into the shared
//! windows during every flood, visible to all sessions, and refund them on every message.
//!
//! What is given up on a cluster, and only there: between steps 1 and 3 the session's
//! records hold a call that ends refused, so a concurrent message of the same session
//! (and a later call of the same message) may be refused where one Redis would have
//! admitted it: the error only ever refuses, never admits past a limit, and only within
//! one session. A budget's expiry extended by step 1 is not taken back, and a shadow
//! window at its cap that dropped its oldest entry in step 1 does not get it back. If
//! step 2 or 3 fails (timeout, connection), the admission fails as a whole (the guard's
//! `fail` mode applies) and step 1's records stay (conservative again). A standalone Redis
//! keeps the single atomic script and none of these caveats. Tests:
//! `tests/it/cluster.rs` (two stores on a three-node cluster admit exactly the limits under
//! 300 concurrent calls; one-call messages answer exactly as the memory store; the global
//! slot is asked only when a rule needs it).
//!
//! # Timeouts, the circuit breaker, fail modes
//!
//! [`RedisStore::connect`] checks the URL and returns at once: the connection is made in a
//! background task, so a process never waits for a down Redis to start. While it is not
//! connected, admissions answer [`StoreErrorKind::Unavailable`] at once with the address
//! and the cause (`not connected yet to redis://10.0.0.5:6379/0: Connection refused …`),
//! without a round trip. Every admission is bounded by [`RedisOptions::timeout`] (20 ms by
//! default, every round trip included) and answers [`StoreErrorKind::Timeout`] past it.
//!
//! The breaker: [`RedisOptions::breaker_timeouts`] (at most 3, the default) admissions in
//! a row that time out mark the store down, as a dropped connection does: admissions then
//! answer `Unavailable` at once, and one background task probes (`INFO` and the script
//! load, bounded by
//! `connect_timeout`) after [`RedisOptions::reconnect_interval`], the pause doubling to
//! [`RedisOptions::max_probe_interval`]; the first probe answered marks it up. So a frozen
//! Redis (`DEBUG SLEEP`, a SIGSTOP, a saturated network) costs three sequential decisions
//! their timeout, then none; admissions already waiting when it opens finish their own
//! wait. Any answer resets the count. A timed-out script may still run when Redis wakes:
//! its records then stand (what the guard let through on `fail = "open"` is counted;
//! on `"closed"`, a refused call is counted: conservative). Test:
//! `a_frozen_redis_costs_at_most_three_timeouts_then_decisions_fail_at_once` (SIGSTOP of a
//! server the test started; counts timeouts, round trips and probes).
//!
//! A connection-dropped error is retried once at once, within the same timeout. Answers
//! that cannot be read are [`StoreErrorKind::Protocol`]. The store never decides on its
//! own what a failure means: the [`RuleGuard`](toolmend::guard::RuleGuard) does, by its
//! [`FailMode`](toolmend::guard::FailMode) and its own decision timeout, which should not
//! be shorter than the store's.
//!
//! # State and metrics
//!
//! [`RedisStore::state`] says `connecting` (with the last attempt's cause), `up`, `down`
//! (with why) or `misconfigured`; the gateway's `/readyz` reports it. The store records,
//! through the `metrics` facade, `toolmend_guard_store_state{store, state, address}` (1
//! for the current state, 0 for the others) and
//! `toolmend_guard_store_transitions_total{store, to, why}` (`to`: `up`, `down`,
//! `misconfigured`; `why`: `connected`, `probe`, `timeouts`, `dropped`, `cluster`).
//! [`RedisStore::stats`] counts round trips (global ones and refunds apart), retries,
//! errors by kind, breaker openings, probes and reconnects.
//!
//! [`StoreErrorKind::Unavailable`]: toolmend::guard::store::StoreErrorKind::Unavailable
//! [`StoreErrorKind::Timeout`]: toolmend::guard::store::StoreErrorKind::Timeout
//! [`StoreErrorKind::Protocol`]: toolmend::guard::store::StoreErrorKind::Protocol
//! [`GuardStore::admit`]: toolmend::guard::GuardStore::admit

mod encode;
mod store;
mod target;

pub use store::{
    BLOB_PREFIX, ConfigError, DEFAULT_TIMEOUT, KEY_PREFIX, MAX_BREAKER_TIMEOUTS, RedisOptions,
    RedisStats, RedisStore, SCRIPT_VERSION, StoreState, redis_guard_store,
};
pub use target::redact;
