//! The Redis store against a real `redis-server`: the memory store's semantics, atomicity
//! under concurrency, one round trip per message, outages, early refusal, cluster stance.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Plain tasks stand for concurrent gateway requests here (no tool bodies run).
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::Duration;

use common::{Redis, budget, call, window};
use toolmend::guard::{
    FailMode, Guard, GuardConfig, GuardContext, GuardRequest, GuardStore, MemoryStore, Rule,
    RuleGuard, Window,
    store::{Admission, AdmitCall, CallAnswer, Check, ManualClock, Scope, StoreErrorKind},
};
use toolmend_redis::{ConfigError, RedisOptions, RedisStore, redis_guard_store};

/// The server's time in ms (a script: `TIME` answers an array).
const TIME_MS: &str =
    "local t = redis.call('TIME') return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)";

/// The `i:` (seen id) fields of a session's hash.
const ID_FIELDS: &str = "local n = 0 for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do \
    if string.sub(f, 1, 2) == 'i:' then n = n + 1 end end return n";

fn opts() -> RedisOptions {
    RedisOptions {
        // Generous: these tests are about semantics on a shared 2-core machine.
        timeout: Duration::from_millis(500),
        ..RedisOptions::default()
    }
}

async fn store(redis: &Redis, opts: RedisOptions) -> RedisStore {
    let s = RedisStore::connect(&redis.url(), opts).expect("url");
    assert!(s.wait_connected(Duration::from_secs(5)).await, "connected");
    s
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
    let t0 = std::time::Instant::now();
    assert_eq!(admitted(&s, "s", &calls).await, [true, true, true, false]);
    let refused = admit(&s, "s", 60_000, &calls[..1]).await;
    assert_eq!(refused[0].checks[0].count, 3);
    let retry = refused[0].checks[0].retry_after_ms;
    let waited = t0.elapsed().as_millis() as u64;
    assert!(
        retry <= 600 && retry + waited + 50 >= 600,
        "retry {retry} after {waited}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        admitted(&s, "s", &calls[..1]).await,
        [false],
        "still inside the window"
    );
    // Past the window (from the first admission), with tolerance.
    let left = 600u64.saturating_sub(t0.elapsed().as_millis() as u64) + 60;
    tokio::time::sleep(Duration::from_millis(left)).await;
    assert_eq!(admitted(&s, "s", &calls[..3]).await, [true, true, true]);
    assert_eq!(admitted(&s, "s", &calls[..1]).await, [false]);
    assert_eq!(
        admitted(&s, "other", &calls[..1]).await,
        [true],
        "sessions are apart"
    );
    // The keys are versioned, tagged by session, and expire: the window's own expiry is
    // its field's first 13 digits (the last admission + the window), the session's hash
    // lives the session TTL (the ids') after its last call.
    let blob = redis.cmd(&["HGET", "tm:v2:{s}", "s"]);
    let exp: u64 = blob[..13].parse().unwrap();
    let now: u64 = redis.cmd(&["EVAL", TIME_MS, "0"]).parse().unwrap();
    assert!(exp > now && exp <= now + 600, "{exp} {now}");
    assert_eq!(
        blob.len(),
        13 * 4,
        "the expiry and three admissions: {blob}"
    );
    let ttl: i64 = redis.cmd(&["PTTL", "tm:v2:{s}"]).parse().unwrap();
    assert!(ttl > 59_000, "{ttl}");
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
    let calls = [call("a", vec![b.clone()]), call("b", vec![b.clone()])];
    let first = admit(&s, "s", 500, &calls).await;
    assert!(first.iter().all(|a| a.admitted && !a.id_seen));
    let again = admit(&s, "s", 500, &calls[..1]).await;
    assert!(!again[0].admitted);
    assert!(again[0].id_seen);
    assert_eq!(again[0].checks[0].count, 2);
    let retry = again[0].checks[0].retry_after_ms;
    assert!(retry > 300 && retry <= 500, "the budget's TTL: {retry}");
    tokio::time::sleep(Duration::from_millis(560)).await;
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
    let slow = RedisOptions {
        timeout: Duration::from_secs(5),
        ..RedisOptions::default()
    };
    let s = store(&redis, slow.clone()).await;
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
    let a = store(&redis, slow.clone()).await;
    let b = store(&redis, slow).await;
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
    assert!(front.inner().wait_connected(Duration::from_secs(5)).await);
    let c = [call("a", vec![window(Scope::Session, 1, 400)])];
    let t0 = std::time::Instant::now();
    assert_eq!(admitted(&front, "s", &c).await, [true]);
    assert_eq!(admitted(&front, "s", &c).await, [false]);
    let rt = front.inner().stats().round_trips;
    assert_eq!(rt, 2);
    let local = admit(&front, "s", 60_000, &c).await;
    assert!(!local[0].admitted);
    assert!(local[0].checks[0].retry_after_ms > 0);
    assert_eq!(front.inner().stats().round_trips, rt, "no round trip");
    assert_eq!(admitted(&front, "other", &c).await, [true]);
    assert_eq!(front.inner().stats().round_trips, rt + 1);
    let left = 400u64.saturating_sub(t0.elapsed().as_millis() as u64) + 50;
    tokio::time::sleep(Duration::from_millis(left)).await;
    assert_eq!(admitted(&front, "s", &c).await, [true]);
    assert_eq!(front.inner().stats().round_trips, rt + 2);
}

#[tokio::test]
async fn a_down_redis_neither_blocks_the_start_nor_the_admissions() {
    assert!(matches!(
        RedisStore::connect("not a url", RedisOptions::default()),
        Err(ConfigError::Url(_))
    ));
    let mut redis = Redis::start();
    redis.stop();
    let t0 = std::time::Instant::now();
    let s = RedisStore::connect(&redis.url(), RedisOptions::default()).expect("url");
    assert!(t0.elapsed() < Duration::from_millis(50), "no wait at start");
    let c = [call("a", vec![window(Scope::Session, 1, 60_000)])];
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let e = s
            .admit(Admission {
                session: Some("s"),
                ttl_ms: 1000,
                calls: &c,
            })
            .await
            .expect_err("down");
        assert_eq!(e.kind, StoreErrorKind::Unavailable);
        // At once: well under the 20 ms timeout (slack for a loaded machine).
        assert!(
            t.elapsed() < Duration::from_millis(10),
            "at once: {:?}",
            t.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    redis.restart();
    assert!(s.wait_connected(Duration::from_secs(3)).await);
    assert_eq!(admitted(&s, "s", &c).await, [true]);
    let st = s.stats();
    assert_eq!(st.unavailable, 3);
    assert!(st.connected);
}

#[tokio::test]
async fn a_cluster_node_behind_a_single_url_is_refused_saying_what_to_write() {
    let nodes: Vec<Redis> = (0..3)
        .map(|_| {
            Redis::start_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
        })
        .collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let out = std::process::Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli (Debian's redis-tools, a dependency of redis-server)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !nodes[0]
        .cmd(&["CLUSTER", "INFO"])
        .contains("cluster_state:ok")
    {
        assert!(std::time::Instant::now() < until, "cluster not ok");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = RedisStore::connect(&nodes[0].url(), opts()).expect("url");
    let until = std::time::Instant::now() + Duration::from_secs(5);
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
        assert!(std::time::Instant::now() < until, "never connected: {e}");
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

/// One check of the loop: when it started (from the loop's start), how long it took,
/// whether Redis decided it, and whether the call may run.
#[derive(Debug, Clone, Copy)]
struct Probe {
    at: Duration,
    took: Duration,
    backed: bool,
    allowed: bool,
}

async fn outage(fail: FailMode) {
    let timeout = Duration::from_millis(20);
    let mut redis = Redis::start();
    let s = store(
        &redis,
        RedisOptions {
            timeout,
            ..RedisOptions::default()
        },
    )
    .await;
    let guard = RuleGuard::new(GuardConfig {
        session: Some(Window::new(100_000, 600.0)),
        ..GuardConfig::default()
    })
    .expect("config")
    .with_store(s.clone())
    .fail_mode(fail)
    .timeout(timeout);
    let args = serde_json::json!({"q": 1});
    let t0 = std::time::Instant::now();
    let (stop_at, restart_at) = (Duration::from_millis(1000), Duration::from_millis(2000));
    let (mut stopped, mut restarted) = (false, false);
    let mut probes: Vec<Probe> = Vec::new();
    let mut n = 0;
    loop {
        let at = t0.elapsed();
        if !stopped && at >= stop_at {
            redis.stop();
            stopped = true;
        }
        if !restarted && at >= restart_at {
            redis.restart();
            restarted = true;
        }
        let at = t0.elapsed();
        n += 1;
        let id = format!("c{n}");
        let calls = [GuardRequest {
            call_id: &id,
            tool: "search",
            arguments: &args,
        }];
        let started = std::time::Instant::now();
        let v = guard
            .check(
                GuardContext {
                    session: Some("user-1"),
                    history: &[],
                },
                &calls,
            )
            .await;
        let took = started.elapsed();
        let backed = !v[0]
            .decisions
            .iter()
            .any(|d| d.rule == Rule::StoreUnavailable);
        probes.push(Probe {
            at,
            took,
            backed,
            allowed: v[0].is_allowed(),
        });
        let recovered = probes.iter().any(|p| p.at > restart_at && p.backed);
        if (recovered && at > restart_at + Duration::from_millis(500))
            || at > restart_at + Duration::from_secs(6)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let slowest = probes.iter().map(|p| p.took).max().unwrap_or_default();
    let before: Vec<&Probe> = probes.iter().filter(|p| p.at < stop_at).collect();
    let during: Vec<&Probe> = probes
        .iter()
        .filter(|p| p.at > stop_at && p.at < restart_at)
        .collect();
    let back = probes
        .iter()
        .find(|p| p.at > restart_at && p.backed)
        .map(|p| p.at - restart_at);
    eprintln!(
        "{fail:?}: {} checks, slowest {slowest:?}, {} during the outage, Redis-backed again \
         {back:?} after the restart, stats {:?}",
        probes.len(),
        during.len(),
        s.stats()
    );
    assert!(
        slowest <= timeout + Duration::from_millis(40),
        "a check took {slowest:?}"
    );
    assert!(before.iter().all(|p| p.backed && p.allowed));
    assert!(during.len() >= 10);
    for p in &during {
        assert!(!p.backed, "{p:?}");
        assert_eq!(p.allowed, fail == FailMode::Open, "{p:?}");
    }
    let back = back.expect("Redis-backed decisions again after the restart");
    assert!(back <= Duration::from_secs(5), "{back:?}");
    assert!(s.stats().reconnects >= 1);
    assert!(probes.last().is_some_and(|p| p.backed && p.allowed));
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
