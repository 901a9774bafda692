//! The Redis store against a real `redis-server`: the memory store's semantics, atomicity
//! under concurrency, one round trip per message, outages, early refusal, cluster stance.
//! No wall-clock figure is asserted: times come from the server's own records, waits are
//! for a condition (bounded by [`PATIENCE`]), and "at once" is counted in round trips.

use std::time::{Duration, Instant};

use crate::common::{Cluster, PATIENCE, Redis, budget, call, window};
use toolmend::guard::{
    FailMode, Guard, GuardConfig, GuardContext, GuardRequest, GuardStore, MemoryStore, Rule,
    RuleGuard, Window,
    store::{Admission, AdmitCall, CallAnswer, Check, ManualClock, Scope, StoreErrorKind},
};
use toolmend_redis::{ConfigError, RedisOptions, RedisStore, StoreState, redis_guard_store};

/// The `i:` (seen id) fields of a session's hash.
const ID_FIELDS: &str = "local n = 0 for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do \
    if string.sub(f, 1, 2) == 'i:' then n = n + 1 end end return n";

/// Bounds no answer of a live server reaches, however loaded the machine: these tests are
/// about semantics (the connection's own response timeout is `connect_timeout`).
fn opts() -> RedisOptions {
    RedisOptions {
        timeout: PATIENCE,
        connect_timeout: PATIENCE,
        ..RedisOptions::default()
    }
}

async fn store(redis: &Redis, opts: RedisOptions) -> RedisStore {
    let s = RedisStore::connect(&redis.url(), opts).expect("url");
    assert!(s.wait_connected(PATIENCE).await, "connected");
    s
}

/// A session window's log as Redis holds it: its expiry, then its admission times.
fn window_log(redis: &Redis, session: &str) -> (u64, Vec<u64>) {
    let blob = redis.cmd(&["HGET", &format!("tm:v2:{{{session}}}"), "s"]);
    assert!(
        blob.len().is_multiple_of(13) && blob.bytes().all(|b| b.is_ascii_digit()),
        "{blob}"
    );
    let mut times = blob
        .as_bytes()
        .chunks(13)
        .map(|t| std::str::from_utf8(t).unwrap().parse().unwrap());
    let expiry = times.next().unwrap();
    (expiry, times.collect())
}

async fn admit(
    s: &(impl GuardStore + ?Sized),
    session: &str,
    ttl_ms: u64,
    calls: &[AdmitCall],
) -> Vec<CallAnswer> {
    s.admit(Admission {
        session: Some(session),
        ttl_ms,
        calls,
    })
    .await
    .expect("an answer")
}

async fn admitted(s: &impl GuardStore, session: &str, calls: &[AdmitCall]) -> Vec<bool> {
    admit(s, session, 60_000, calls)
        .await
        .into_iter()
        .map(|a| a.admitted)
        .collect()
}

#[tokio::test]
async fn a_window_admits_exactly_its_limit_then_frees_at_its_edge() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let calls: Vec<AdmitCall> = (0..4)
        .map(|i| call(&format!("c{i}"), vec![window(Scope::Session, 3, 600)]))
        .collect();
    let flags = |a: &[CallAnswer]| a.iter().map(|a| a.admitted).collect::<Vec<_>>();
    // One message, one time at the server: three fit, the fourth waits the whole window.
    let first = admit(&s, "s", 60_000, &calls).await;
    assert_eq!(flags(&first), [true, true, true, false]);
    assert_eq!(first[3].checks[0].count, 3);
    assert_eq!(first[3].checks[0].retry_after_ms, 600);
    let (expiry, admitted_at) = window_log(&redis, "s");
    let t1 = admitted_at[0];
    assert_eq!(admitted_at, [t1; 3], "three admissions at one time");
    assert_eq!(expiry, t1 + 600, "the last admission + the window");
    // The same message again until the window frees: refused whole while inside it (and
    // counted nowhere), then three admitted at once.
    let until = Instant::now() + PATIENCE;
    let again = loop {
        let a = admit(&s, "s", 60_000, &calls).await;
        if a[0].admitted {
            break a;
        }
        for r in &a {
            let c = &r.checks[0];
            assert!(!r.admitted && !c.passed, "{a:?}");
            assert_eq!(c.count, 3, "still inside the window: {a:?}");
            assert!(c.retry_after_ms > 0 && c.retry_after_ms <= 600, "{a:?}");
        }
        assert!(Instant::now() < until, "the window never freed: {a:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(flags(&again), [true, true, true, false]);
    // By the server's own records: admitted again at the window's edge or after, never
    // before; the first three gone from the log.
    let (expiry, admitted_at) = window_log(&redis, "s");
    let t2 = admitted_at[0];
    assert_eq!(admitted_at, [t2; 3], "the expiry and three admissions");
    assert!(
        t2 >= t1 + 600,
        "freed early: admitted at {t1}, again at {t2}"
    );
    assert_eq!(expiry, t2 + 600);
    assert_eq!(
        admitted(&s, "other", &calls[..1]).await,
        [true],
        "sessions are apart"
    );
    // The keys are versioned, tagged by session, and expire: the session's hash lives the
    // session TTL (the ids') after its last call.
    let ttl: i64 = redis.cmd(&["PTTL", "tm:v2:{s}"]).parse().unwrap();
    assert!(ttl > 30_000 && ttl <= 60_000, "{ttl}");
}

#[tokio::test]
async fn a_refused_call_counts_nowhere_and_shadow_refuses_nothing() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let tight = window(Scope::Session, 1, 60_000);
    let wide = window(Scope::SessionTool("t".into()), 10, 60_000);
    let c = vec![call("a", vec![tight.clone(), wide.clone()])];
    assert_eq!(admitted(&s, "s", &c).await, [true]);
    assert_eq!(admitted(&s, "s", &c).await, [false]);
    let probe = admit(&s, "s", 60_000, &[call("b", vec![wide.clone()])]).await;
    assert_eq!(
        probe[0].checks[0].count, 1,
        "the refused call was not counted"
    );
    let mut shadow = tight;
    shadow.shadow = true;
    let a = admit(&s, "s", 60_000, &[call("c", vec![shadow.clone()])]).await;
    assert!(a[0].admitted);
    assert!(
        !a[0].checks[0].passed,
        "the shadow check still reports its refusal"
    );
    // A shadow rule past its limit keeps a log of at most its limit.
    for _ in 0..5 {
        admit(&s, "s", 60_000, &[call("d", vec![shadow.clone()])]).await;
    }
    assert_eq!(
        redis.cmd(&["HGET", "tm:v2:{s}", "s"]).len(),
        26,
        "the expiry and one admission"
    );
}

#[tokio::test]
async fn budgets_and_ids_last_for_the_session_ttl() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let b = budget(Scope::Thread, 2);
    let calls = [
        call("a", vec![b.clone()]),
        call("b", vec![b.clone()]),
        call("a", vec![b.clone()]),
    ];
    // One message, one time at the server: the third call finds the budget spent and its
    // id seen, for the whole TTL.
    let first = admit(&s, "s", 500, &calls).await;
    let got: Vec<(bool, bool)> = first.iter().map(|a| (a.admitted, a.id_seen)).collect();
    assert_eq!(got, [(true, false), (true, false), (false, true)]);
    assert_eq!(first[2].checks[0].count, 2);
    assert_eq!(first[2].checks[0].retry_after_ms, 500, "the budget's TTL");
    let ttl: i64 = redis.cmd(&["PTTL", "tm:v2:{s}"]).parse().unwrap();
    // (-2: gone already, on a machine slow enough; -1 would be no expiry.)
    assert!(
        ttl == -2 || (ttl > 0 && ttl <= 500),
        "the session's hash lives its TTL: {ttl}"
    );
    // Once Redis has expired the session's hash, the budget and the ids are gone with it.
    let until = Instant::now() + PATIENCE;
    while redis.cmd(&["EXISTS", "tm:v2:{s}"]) != "0" {
        assert!(Instant::now() < until, "the session never expired");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let later = admit(&s, "s", 500, &calls[..1]).await;
    assert!(later[0].admitted, "the session expired");
    assert!(!later[0].id_seen, "its ids too");
}

#[tokio::test]
async fn later_calls_of_a_message_see_earlier_ones() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let dup = Check {
        rule: Rule::Duplicate,
        ..window(Scope::Call(0xabc), 1, 60_000)
    };
    let tool = window(Scope::SessionTool("search".into()), 2, 60_000);
    let calls = [
        call("x", vec![dup.clone(), tool.clone()]),
        call("x", vec![dup.clone(), tool.clone()]),
        call("y", vec![tool.clone()]),
        call("z", vec![tool.clone()]),
    ];
    let a = admit(&s, "s", 60_000, &calls).await;
    let got: Vec<(bool, bool)> = a.iter().map(|a| (a.admitted, a.id_seen)).collect();
    assert_eq!(
        got,
        [(true, false), (false, true), (true, false), (false, false)]
    );
    assert_eq!(a[3].checks[0].count, 2);
    // Without a session: only the cross-session window, no ids.
    let global = window(Scope::Tool("search".into()), 1, 60_000);
    let none = s
        .admit(Admission {
            session: None,
            ttl_ms: 60_000,
            calls: &[call("g", vec![global.clone()]), call("g", vec![global])],
        })
        .await
        .expect("answer");
    assert_eq!(
        none.iter()
            .map(|a| (a.admitted, a.id_seen))
            .collect::<Vec<_>>(),
        [(true, false), (false, false)]
    );
    assert_eq!(redis.cmd(&["EXISTS", "tm:v2:{g}:t:search"]), "1");
}

/// A small deterministic generator (no dependency, fixed seed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// A random sequence of admissions (fixed seed) against both stores: the same answers,
/// call by call. `tight`: small limits and many shadow checks (logs at their cap, refusals
/// inside a message, retries from entries of the same message).
async fn equivalence(seed: u64, tight: bool) {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let memory = MemoryStore::with_clock(100_000, ManualClock::at(10_000_000));
    let mut rng = Lcg(seed);
    let tools = ["search", "fetch"];
    let (mut total, mut refused, mut seen) = (0, 0, 0);
    let calls_max = if tight { 8 } else { 4 };
    for _ in 0..400 {
        let session = format!("{:016x}", rng.next(3));
        let calls: Vec<AdmitCall> = (0..1 + rng.next(calls_max))
            .map(|_| {
                let tool = tools[rng.next(2) as usize];
                let mut checks = Vec::new();
                let mut add = |rng: &mut Lcg, c: Check| {
                    if rng.next(2) == 0 {
                        let shadow = rng.next(if tight { 3 } else { 10 }) == 0;
                        checks.push(Check { shadow, ..c });
                    }
                };
                add(
                    &mut rng,
                    window(Scope::Session, if tight { 8 } else { 150 }, 600_000),
                );
                let l = if tight {
                    1 + rng.next(4)
                } else {
                    40 + rng.next(40)
                };
                add(
                    &mut rng,
                    window(Scope::SessionTool(tool.into()), l, 600_000),
                );
                add(
                    &mut rng,
                    window(
                        Scope::Tool(tool.into()),
                        if tight { 12 } else { 300 },
                        600_000,
                    ),
                );
                let fp = rng.next(60);
                add(&mut rng, window(Scope::Call(fp), 1, 600_000));
                add(
                    &mut rng,
                    budget(Scope::Thread, if tight { 10 } else { 200 }),
                );
                let run = rng.next(4);
                add(
                    &mut rng,
                    budget(Scope::RunTool(run, tool.into()), if tight { 3 } else { 40 }),
                );
                call(&format!("id{}", rng.next(400)), checks)
            })
            .collect();
        let a = Admission {
            session: Some(&session),
            ttl_ms: 3_600_000,
            calls: &calls,
        };
        let m = memory.admit_now(a);
        let r = s.admit(a).await.expect("redis");
        assert_eq!(m.len(), r.len());
        for (i, (m, r)) in m.iter().zip(&r).enumerate() {
            total += 1;
            refused += usize::from(!m.admitted);
            seen += usize::from(m.id_seen);
            let strip = |a: &CallAnswer| -> (bool, bool, Vec<(bool, u64, bool)>) {
                (
                    a.admitted,
                    a.id_seen,
                    a.checks
                        .iter()
                        .map(|c| (c.passed, c.count, c.retry_after_ms > 0))
                        .collect(),
                )
            };
            assert_eq!(strip(m), strip(r), "call {i} of {:?}", calls);
        }
    }
    // The sequence exercises both outcomes.
    assert!(
        refused > total / 10 && refused < total * 9 / 10,
        "{refused}/{total}"
    );
    assert!(seen > 0);
}

#[tokio::test]
async fn a_random_sequence_gets_the_same_answers_from_memory_and_redis() {
    equivalence(20_261_202, false).await;
}

#[tokio::test]
async fn a_tight_random_sequence_gets_the_same_answers_from_memory_and_redis() {
    equivalence(7, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_admissions_admit_exactly_the_limit() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let check = window(Scope::Session, 10, 60_000);
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let s = s.clone();
            let c = check.clone();
            tokio::spawn(async move {
                let calls = [call(&format!("c{i}"), vec![c])];
                admit(&s, "one", 60_000, &calls).await[0].admitted
            })
        })
        .collect();
    let mut n = 0;
    for t in tasks {
        n += usize::from(t.await.expect("task"));
    }
    assert_eq!(n, 10);

    // Two stores, two connections, 1,000 admissions of one session at once.
    let a = store(&redis, opts()).await;
    let b = store(&redis, opts()).await;
    let tasks: Vec<_> = (0..1000)
        .map(|i| {
            let s = if i % 2 == 0 { a.clone() } else { b.clone() };
            let c = check.clone();
            tokio::spawn(async move {
                let calls = [call(&format!("c{i}"), vec![c])];
                admit(&s, "two", 60_000, &calls).await[0].admitted
            })
        })
        .collect();
    let mut n = 0;
    for t in tasks {
        n += usize::from(t.await.expect("task"));
    }
    assert_eq!(n, 10);
    assert_eq!(a.stats().round_trips + b.stats().round_trips, 1000);
}

#[tokio::test]
async fn one_round_trip_per_message_whatever_its_calls() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let checks = || {
        vec![
            window(Scope::Session, 100, 60_000),
            window(Scope::SessionTool("t".into()), 100, 60_000),
            window(Scope::Tool("t".into()), 100, 60_000),
            budget(Scope::Thread, 100),
            budget(Scope::Run(0), 100),
        ]
    };
    for n in [1, 8, 64] {
        let calls: Vec<AdmitCall> = (0..n).map(|i| call(&format!("c{i}"), checks())).collect();
        let before = (redis.calls_of("evalsha"), redis.calls_of("eval"));
        let rt = s.stats().round_trips;
        let a = admit(&s, "s", 60_000, &calls).await;
        assert!(a.iter().all(|a| a.admitted));
        let after = (redis.calls_of("evalsha"), redis.calls_of("eval"));
        assert_eq!(after.0 - before.0, 1, "one EVALSHA for {n} calls");
        assert_eq!(after.1, before.1, "no EVAL");
        assert_eq!(s.stats().round_trips - rt, 1);
    }
}

#[tokio::test]
async fn early_refusal_skips_the_round_trip_until_retry_after() {
    let redis = Redis::start();
    let front = redis_guard_store(&redis.url(), opts()).expect("url");
    assert!(front.inner().wait_connected(PATIENCE).await);
    let round_trips = || front.inner().stats().round_trips;
    // One call per 2 s: the refusal's retry-after outlasts the next few calls, loaded or not.
    let c = [call("a", vec![window(Scope::Session, 1, 2000)])];
    assert_eq!(admitted(&front, "s", &c).await, [true]);
    assert_eq!(admitted(&front, "s", &c).await, [false]);
    assert_eq!(round_trips(), 2);
    let local = admit(&front, "s", 60_000, &c).await;
    assert!(!local[0].admitted);
    assert!(local[0].checks[0].retry_after_ms > 0);
    assert_eq!(round_trips(), 2, "no round trip");
    assert_eq!(admitted(&front, "other", &c).await, [true]);
    assert_eq!(round_trips(), 3);
    // The same call until it passes: refused by the front until the retry-after is over,
    // then asked of Redis, whose window has freed by then.
    let (until, mut asked) = (Instant::now() + PATIENCE, 0);
    loop {
        asked += 1;
        if admit(&front, "s", 60_000, &c).await[0].admitted {
            break;
        }
        assert!(Instant::now() < until, "never admitted again");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The one that passed, and at most one that reached Redis a hair before its edge (the
    // front's clock is not Redis's).
    let sent = round_trips() - 3;
    assert!(
        (1..=2).contains(&sent),
        "{sent} round trips for {asked} calls"
    );
}

#[tokio::test]
async fn a_down_redis_neither_blocks_the_start_nor_the_admissions() {
    assert!(matches!(
        RedisStore::connect("not a url", RedisOptions::default()),
        Err(ConfigError::Url(_))
    ));
    let c = [call("a", vec![window(Scope::Session, 1, 60_000)])];
    let admission = Admission {
        session: Some("s"),
        ttl_ms: 1000,
        calls: &c,
    };
    // A peer that never answers (a listener nobody accepts on), and bounds far past the
    // test's: a start or an admission that waited for Redis would never return.
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let never = RedisOptions {
        timeout: Duration::from_secs(3600),
        connect_timeout: Duration::from_secs(3600),
        ..RedisOptions::default()
    };
    let s = RedisStore::connect(&format!("redis://{}/", mute.local_addr().unwrap()), never)
        .expect("url");
    assert_eq!(
        s.state(),
        StoreState::Connecting { cause: None },
        "no wait at start: the first attempt is still under way"
    );
    for _ in 0..3 {
        let e = tokio::time::timeout(PATIENCE, s.admit(admission))
            .await
            .expect("an admission waited for a Redis that never answers")
            .expect_err("not connected");
        assert_eq!(e.kind, StoreErrorKind::Unavailable);
        assert!(e.message.contains("first attempt under way"), "{e}");
    }
    assert_eq!(s.stats().round_trips, 0);

    // A Redis that is not there, then is: unavailable at once (no round trip), then up.
    let mut redis = Redis::start();
    redis.stop();
    let s = RedisStore::connect(&redis.url(), opts()).expect("url");
    for _ in 0..3 {
        let e = s.admit(admission).await.expect_err("down");
        assert_eq!(e.kind, StoreErrorKind::Unavailable);
    }
    redis.restart();
    assert!(s.wait_connected(PATIENCE).await);
    assert_eq!(admitted(&s, "s", &c).await, [true]);
    let st = s.stats();
    assert_eq!(st.unavailable, 3);
    assert_eq!(st.round_trips, 1, "none while Redis was away");
    assert!(st.connected);
}

#[tokio::test]
async fn a_cluster_node_behind_a_single_url_is_refused_saying_what_to_write() {
    let cluster = Cluster::start();
    let s = RedisStore::connect(&cluster.nodes[0].url(), opts()).expect("url");
    let until = Instant::now() + PATIENCE;
    loop {
        let e = s
            .admit(Admission {
                session: Some("s"),
                ttl_ms: 1000,
                calls: &[call("a", vec![window(Scope::Session, 1, 60_000)])],
            })
            .await
            .expect_err("refused");
        if e.kind == StoreErrorKind::Protocol {
            assert!(
                e.message.contains("write the URL as redis+cluster://"),
                "{e}"
            );
            break;
        }
        assert!(Instant::now() < until, "never connected: {e}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.stats().round_trips, 0);
}

#[tokio::test]
async fn a_flushed_script_is_loaded_again() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let c = [call("a", vec![window(Scope::Session, 5, 60_000)])];
    assert_eq!(admitted(&s, "s", &c).await, [true]);
    assert_eq!(redis.cmd(&["SCRIPT", "FLUSH"]), "OK");
    assert_eq!(admitted(&s, "s", &c).await, [true], "NOSCRIPT, loaded, run");
    assert_eq!(s.stats().protocol_errors, 0);
}

/// One decision of the guard on a call of `search` in one session: whether Redis decided
/// it (no `store_unavailable` among its decisions), and whether the call may run.
async fn decide(guard: &RuleGuard, n: &mut usize) -> (bool, bool) {
    *n += 1;
    let id = format!("c{n}");
    let args = serde_json::json!({"q": 1});
    let calls = [GuardRequest {
        call_id: &id,
        tool: "search",
        arguments: &args,
    }];
    let v = guard
        .check(
            GuardContext {
                session: Some("user-1"),
                history: &[],
            },
            &calls,
        )
        .await;
    let backed = !v[0]
        .decisions
        .iter()
        .any(|d| d.rule == Rule::StoreUnavailable);
    (backed, v[0].is_allowed())
}

/// Redis killed under a guard, then started again: the fail mode meanwhile, without
/// waiting on Redis (counted: no round trip once the store knows), Redis-backed again after.
async fn outage(fail: FailMode) {
    let mut redis = Redis::start();
    let s = store(&redis, opts()).await;
    let guard = RuleGuard::new(GuardConfig {
        session: Some(Window::new(100_000, 600.0)),
        ..GuardConfig::default()
    })
    .expect("config")
    .with_store(s.clone())
    .fail_mode(fail)
    .timeout(PATIENCE);
    let mut n = 0;
    for _ in 0..10 {
        assert_eq!(decide(&guard, &mut n).await, (true, true), "up");
    }
    let up = s.stats();
    assert_eq!(up.round_trips, 10, "{up:?}");

    redis.stop();
    for _ in 0..20 {
        let (backed, allowed) = decide(&guard, &mut n).await;
        assert!(!backed, "decided by a Redis that was killed");
        assert_eq!(allowed, fail == FailMode::Open);
    }
    // The first decision found the connection gone (one try and its retry); the store was
    // down from then on, and the others answered without a round trip.
    let down = s.stats();
    assert!(down.round_trips - up.round_trips <= 2, "{down:?}");
    assert_eq!(
        down.timeouts, 0,
        "a refused connection is no timeout: {down:?}"
    );
    assert_eq!(s.state().name(), "down");

    redis.restart();
    let until = Instant::now() + PATIENCE;
    loop {
        let (backed, allowed) = decide(&guard, &mut n).await;
        if backed {
            assert!(allowed);
            break;
        }
        assert_eq!(allowed, fail == FailMode::Open);
        assert!(
            Instant::now() < until,
            "not Redis-backed again after the restart: {:?}",
            s.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..5 {
        assert_eq!(decide(&guard, &mut n).await, (true, true), "up again");
    }
    let st = s.stats();
    eprintln!("{fail:?}: {n} decisions, stats {st:?}");
    assert!(st.reconnects >= 1, "{st:?}");
}

#[tokio::test]
async fn a_redis_restart_fails_open_then_recovers() {
    outage(FailMode::Open).await;
}

#[tokio::test]
async fn a_redis_restart_fails_closed_then_recovers() {
    outage(FailMode::Closed).await;
}

#[tokio::test]
async fn a_session_keeps_its_last_ten_thousand_ids_like_the_memory_store() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let memory = MemoryStore::new(1000);
    let many: Vec<AdmitCall> = (0..10_001)
        .map(|i| call(&format!("id{i}"), vec![]))
        .collect();
    // id0 left; adding it again pushes id1 out (insertion order).
    let probe = [
        call("id1", vec![]),
        call("id0", vec![]),
        call("id1", vec![]),
        call("id10000", vec![]),
    ];
    for store in [&s as &dyn GuardStore, &memory] {
        let first = admit(store, "s", 60_000, &many).await;
        assert!(first.iter().all(|a| a.admitted && !a.id_seen));
        let again = admit(store, "s", 60_000, &probe).await;
        let seen: Vec<bool> = again.iter().map(|a| a.id_seen).collect();
        assert_eq!(seen, [true, false, false, true], "{}", store.name());
    }
    assert_eq!(redis.cmd(&["EVAL", ID_FIELDS, "1", "tm:v2:{s}"]), "10000");
}

#[tokio::test]
async fn a_key_reused_by_another_kind_of_check_starts_over_like_the_memory_store() {
    let redis = Redis::start();
    let s = store(&redis, opts()).await;
    let memory = MemoryStore::new(1000);
    let as_window = window(Scope::Thread, 2, 60_000);
    let as_budget = budget(Scope::Thread, 2);
    let steps = [
        vec![
            call("a", vec![as_budget.clone()]),
            call("b", vec![as_budget.clone()]),
        ],
        vec![call("c", vec![as_window.clone()])],
        vec![
            call("d", vec![as_window.clone()]),
            call("e", vec![as_window.clone()]),
        ],
        vec![call("f", vec![as_budget.clone(), as_window.clone()])],
        vec![call("g", vec![as_budget.clone()])],
    ];
    for calls in &steps {
        let m = admit(&memory, "s", 60_000, calls).await;
        let r = admit(&s, "s", 60_000, calls).await;
        let strip = |a: &[CallAnswer]| -> Vec<(bool, Vec<(bool, u64)>)> {
            a.iter()
                .map(|a| {
                    (
                        a.admitted,
                        a.checks.iter().map(|c| (c.passed, c.count)).collect(),
                    )
                })
                .collect()
        };
        assert_eq!(strip(&m), strip(&r), "{calls:?}");
    }
}
