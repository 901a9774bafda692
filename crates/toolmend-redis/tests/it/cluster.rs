//! The store on a real three-node Redis Cluster (started here, on loopback) and against a
//! frozen redis-server (SIGSTOP): the same limits as one Redis across two stores, the
//! cross-slot refund, the circuit breaker (counted in timeouts, round trips and probes).

use std::time::{Duration, Instant};

use crate::common::{Cluster, PATIENCE, Redis, budget, call, window};
use toolmend::guard::{
    GuardStore, MemoryStore,
    store::{Admission, AdmitCall, CallAnswer, ManualClock, Scope, StoreErrorKind},
};
use toolmend_redis::{RedisOptions, RedisStore, StoreState};

/// Bounds no answer of a live cluster reaches, however loaded the machine (`connect_timeout`
/// is also the cluster client's response timeout).
fn opts() -> RedisOptions {
    RedisOptions {
        timeout: PATIENCE,
        connect_timeout: PATIENCE,
        ..RedisOptions::default()
    }
}

/// The breaker tests' bound on an admission: a frozen Redis never answers within it, a live
/// one always does, however loaded the machine. Each of their timeouts costs this long.
const BREAKER_TIMEOUT: Duration = Duration::from_secs(1);

/// Their bound on a connection attempt and a probe (and the connection's response timeout,
/// which must not fire before [`BREAKER_TIMEOUT`]).
const BREAKER_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

async fn store(url: &str, opts: RedisOptions) -> RedisStore {
    let s = RedisStore::connect(url, opts).expect("url");
    assert!(s.wait_connected(PATIENCE).await, "connected");
    s
}

async fn admit(s: &impl GuardStore, session: &str, calls: &[AdmitCall]) -> Vec<CallAnswer> {
    s.admit(Admission {
        session: Some(session),
        ttl_ms: 3_600_000,
        calls,
    })
    .await
    .expect("an answer")
}

/// Sessions whose hashes land on different nodes (so the test crosses slots and nodes).
fn spread_sessions(c: &Cluster, n: usize) -> Vec<String> {
    let mut by_node: Vec<Vec<String>> = vec![Vec::new(); c.nodes.len()];
    let mut i = 0u64;
    while by_node.iter().map(Vec::len).sum::<usize>() < n * c.nodes.len() {
        let s = format!("{i:016x}");
        i += 1;
        let port = c.node_of(&format!("tm:v2:{{{s}}}")).port;
        let k = c.nodes.iter().position(|x| x.port == port).unwrap();
        if by_node[k].len() < n {
            by_node[k].push(s);
        }
    }
    by_node.into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_a_three_node_cluster_admit_exactly_the_limits() {
    let c = Cluster::start();
    let a = store(&c.url(), opts()).await;
    let b = store(&c.url(), opts()).await;
    assert!(a.is_cluster());
    let sessions = spread_sessions(&c, 1);
    // Per session 10 in the window; the tool 15 across sessions (the binding one): 3
    // sessions x 100 calls, half through each store, all at once.
    let checks = vec![
        window(Scope::Session, 10, 60_000),
        window(Scope::Tool("pay".into()), 15, 60_000),
        budget(Scope::Thread, 8),
    ];
    let mut tasks = Vec::new();
    for (k, s) in sessions.iter().enumerate() {
        for i in 0..100 {
            let st = if i % 2 == 0 { a.clone() } else { b.clone() };
            let s = s.clone();
            let checks = checks.clone();
            tasks.push(tokio::spawn(async move {
                let calls = [call(&format!("c{k}-{i}"), checks)];
                (k, admit(&st, &s, &calls).await[0].admitted)
            }));
        }
    }
    let mut per_session = [0usize; 3];
    for t in tasks {
        let (k, ok) = t.await.expect("task");
        per_session[k] += usize::from(ok);
    }
    let total: usize = per_session.iter().sum();
    assert_eq!(
        total, 15,
        "the tool's global limit, exactly: {per_session:?}"
    );
    assert!(
        per_session.iter().all(|&n| n <= 8),
        "the thread budget of 8 per session: {per_session:?}"
    );
    // What the keys hold agrees: the global window holds 15 admissions, each session's
    // thread budget its own admissions (refunds took back the refused ones).
    let global = c
        .node_of("tm:v2:{g}:t:pay")
        .cmd(&["GET", "tm:v2:{g}:t:pay"]);
    assert_eq!(global.len(), 13 * 16, "the expiry and 15 admissions");
    for (k, s) in sessions.iter().enumerate() {
        let h = format!("tm:v2:{{{s}}}");
        let th = c.node_of(&h).cmd(&["HGET", &h, "th"]);
        assert_eq!(
            th.split(':').next().unwrap(),
            per_session[k].to_string(),
            "session {k}: {th}"
        );
    }
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(
        sa.timeouts + sb.timeouts + sa.protocol_errors + sb.protocol_errors,
        0
    );
    assert!(sa.refunds + sb.refunds > 0, "{sa:?} {sb:?}");
}

#[tokio::test]
async fn one_call_messages_get_the_same_answers_from_memory_and_the_cluster() {
    let c = Cluster::start();
    let s = store(&c.url(), opts()).await;
    let memory = MemoryStore::with_clock(100_000, ManualClock::at(10_000_000));
    let sessions = spread_sessions(&c, 1);
    let mut seed = 99u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let (mut refused, mut total) = (0, 0);
    let mut global_refusals = 0;
    for _ in 0..300 {
        let session = &sessions[next(3) as usize];
        let tool = ["search", "fetch"][next(2) as usize];
        let mut checks = Vec::new();
        if next(2) == 0 {
            checks.push(window(Scope::Session, 6, 600_000));
        }
        checks.push(window(
            Scope::SessionTool(tool.into()),
            1 + next(5),
            600_000,
        ));
        checks.push(window(Scope::Tool(tool.into()), 6, 600_000));
        if next(2) == 0 {
            checks.push(window(Scope::Call(next(30)), 1, 600_000));
        }
        if next(2) == 0 {
            checks.push(budget(Scope::RunTool(next(3), tool.into()), 3));
        }
        let calls = [call(&format!("id{}", next(200)), checks)];
        let a = Admission {
            session: Some(session),
            ttl_ms: 3_600_000,
            calls: &calls,
        };
        let m = memory.admit_now(a);
        let r = s.admit(a).await.expect("cluster");
        let strip = |a: &CallAnswer| {
            (
                a.admitted,
                a.id_seen,
                a.checks
                    .iter()
                    .map(|c| (c.passed, c.count, c.retry_after_ms > 0))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(strip(&m[0]), strip(&r[0]), "{calls:?}");
        total += 1;
        refused += usize::from(!m[0].admitted);
        let by_global = m[0]
            .checks
            .iter()
            .zip(&calls[0].checks)
            .any(|(r, c)| c.scope.is_global() && !r.passed);
        let session_passed = m[0]
            .checks
            .iter()
            .zip(&calls[0].checks)
            .all(|(r, c)| c.scope.is_global() || r.passed);
        global_refusals += usize::from(by_global && session_passed);
    }
    // Both outcomes (the global limits, 6 per tool in a long window, admit 12 in all).
    assert!(
        refused > total / 10 && total - refused >= 10,
        "{refused}/{total}"
    );
    assert!(global_refusals > 0, "some refunds were exercised");
    assert!(s.stats().refunds > 0);
}

#[tokio::test]
async fn the_global_slot_is_asked_only_when_a_rule_needs_it() {
    let c = Cluster::start();
    let s = store(&c.url(), opts()).await;
    let session_only = [call("a", vec![window(Scope::Session, 5, 60_000)])];
    admit(&s, "0000000000000001", &session_only).await;
    let st = s.stats();
    assert_eq!((st.round_trips, st.global_round_trips), (1, 0));
    let with_global = [call(
        "b",
        vec![
            window(Scope::Session, 5, 60_000),
            window(Scope::Tool("t".into()), 5, 60_000),
        ],
    )];
    admit(&s, "0000000000000001", &with_global).await;
    let st = s.stats();
    assert_eq!(
        (st.round_trips, st.global_round_trips, st.refunds),
        (3, 1, 0)
    );
}

/// Sends one-call admissions in a row, counting answers by kind, until `stop` says so or
/// `max` were sent.
async fn drive(s: &RedisStore, max: usize, mut stop: impl FnMut(&RedisStore) -> bool) -> usize {
    let calls = [call("x", vec![window(Scope::Session, 1_000_000, 60_000)])];
    let mut sent = 0;
    while sent < max && !stop(s) {
        let _ = s
            .admit(Admission {
                session: Some("frozen"),
                ttl_ms: 60_000,
                calls: &calls,
            })
            .await;
        sent += 1;
    }
    sent
}

#[tokio::test]
async fn a_frozen_redis_costs_at_most_three_timeouts_then_decisions_fail_at_once() {
    let redis = Redis::start();
    let s = store(
        &redis.url(),
        RedisOptions {
            timeout: BREAKER_TIMEOUT,
            connect_timeout: BREAKER_CONNECT_TIMEOUT,
            reconnect_interval: Duration::from_millis(100),
            max_probe_interval: Duration::from_millis(400),
            ..RedisOptions::default()
        },
    )
    .await;
    drive(&s, 5, |_| false).await;
    assert_eq!(s.stats().timeouts, 0);
    redis.freeze();
    // 200 decisions in a row against the frozen server: 3 time out, then the store is
    // down and the rest answer Unavailable without a round trip.
    drive(&s, 200, |_| false).await;
    let st = s.stats();
    assert_eq!(st.timeouts, 3, "{st:?}");
    assert_eq!(st.breaker_opens, 1, "{st:?}");
    assert_eq!(st.unavailable, 197, "{st:?}");
    assert_eq!(st.round_trips, 5 + 3, "no round trip while down: {st:?}");
    match s.state() {
        StoreState::Down { cause } => assert!(cause.contains("3 admissions in a row"), "{cause}"),
        other => panic!("{other:?}"),
    }
    let e = s
        .admit(Admission {
            session: Some("frozen"),
            ttl_ms: 60_000,
            calls: &[call("y", vec![])],
        })
        .await
        .expect_err("down");
    assert_eq!(e.kind, StoreErrorKind::Unavailable);
    assert!(e.message.contains("marked down"), "{e}");
    // Probes: one at a time, after a pause; none per decision. Wait for two probes to
    // have failed, then thaw and wait until the store is up again.
    let until = Instant::now() + PATIENCE;
    while s.stats().probes < 2 {
        assert!(Instant::now() < until, "no probe");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    redis.thaw();
    assert!(s.wait_connected(PATIENCE).await, "back up");
    let st = s.stats();
    // Far fewer probes than the 201 decisions taken while down (one per pause).
    assert!(st.probes < 20, "{st:?}");
    assert_eq!(st.timeouts, 3, "{st:?}");
    let ok = s
        .admit(Admission {
            session: Some("frozen"),
            ttl_ms: 60_000,
            calls: &[call("z", vec![])],
        })
        .await
        .expect("Redis-backed again");
    assert!(ok[0].admitted);
    // Freezing again opens the breaker again, after as few timeouts.
    redis.freeze();
    drive(&s, 50, |_| false).await;
    redis.thaw();
    let st = s.stats();
    assert_eq!((st.timeouts, st.breaker_opens), (6, 2), "{st:?}");
}

#[tokio::test]
async fn a_frozen_cluster_node_opens_the_breaker_too() {
    let c = Cluster::start();
    let s = store(
        &c.url(),
        RedisOptions {
            timeout: BREAKER_TIMEOUT,
            connect_timeout: BREAKER_CONNECT_TIMEOUT,
            ..RedisOptions::default()
        },
    )
    .await;
    let node = c.node_of("tm:v2:{frozen}");
    drive(&s, 3, |_| false).await;
    node.freeze();
    drive(&s, 100, |_| false).await;
    node.thaw();
    let st = s.stats();
    assert_eq!(st.timeouts, 3, "{st:?}");
    assert_eq!(st.breaker_opens, 1, "{st:?}");
}
