//! Guard decision latency through `RuleGuard::check`: the memory store and Redis on
//! loopback, messages of 1 and 8 calls, with a bare `PING` as the baseline. Starts its own
//! `redis-server` (as the tests do). Prints a markdown table.
//!
//! `cargo bench -p toolmend-redis --bench guard` (ITERS=n to change the iterations).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

// The allocator the gateway and the CLI run on.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use toolmend::guard::{
    Budget, Duplicate, Guard, GuardConfig, GuardContext, GuardRequest, Rule, RuleGuard, ToolRules,
    Window,
};
use toolmend_redis::{RedisOptions, redis_guard_store};

const SESSIONS: usize = 1000;

fn config() -> GuardConfig {
    let mut tools = BTreeMap::new();
    tools.insert(
        "search".to_owned(),
        ToolRules {
            session: Some(Window::new(1000, 60.0)),
            ..ToolRules::default()
        },
    );
    GuardConfig {
        session: Some(Window::new(1000, 60.0)),
        tools,
        duplicate: Some(Duplicate {
            window_secs: 60.0,
            shadow: false,
        }),
        limits: Some(Budget {
            thread_limit: Some(100_000),
            ..Budget::default()
        }),
        ..GuardConfig::default()
    }
}

#[derive(Debug)]
struct Row {
    name: String,
    calls: usize,
    p50: Duration,
    p99: Duration,
    round_trips: Option<f64>,
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `iters` messages of `calls` calls each (after a warm-up), one session of `SESSIONS` in
/// turn, arguments never repeated (so nothing is refused and every message is asked).
async fn run_guard(guard: &RuleGuard, calls: usize, iters: usize, offset: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(iters);
    let warm = iters / 10;
    for i in 0..warm + iters {
        let n = offset + i;
        let session = format!("user-{}", n % SESSIONS);
        let args: Vec<serde_json::Value> = (0..calls)
            .map(|j| serde_json::json!({"q": n * calls + j, "m": calls, "lang": "en"}))
            .collect();
        let ids: Vec<String> = (0..calls).map(|j| format!("call_{n}_{j}")).collect();
        let reqs: Vec<GuardRequest<'_>> = args
            .iter()
            .zip(&ids)
            .map(|(a, id)| GuardRequest {
                call_id: id,
                tool: "search",
                arguments: a,
            })
            .collect();
        let ctx = GuardContext {
            session: Some(&session),
            history: &[],
        };
        let t = Instant::now();
        let v = guard.check(ctx, &reqs).await;
        let took = t.elapsed();
        assert!(
            v.iter()
                .all(|v| v.is_allowed()
                    && !v.decisions.iter().any(|d| d.rule == Rule::StoreUnavailable)),
            "a decision was not Redis-backed or refused: {v:?}"
        );
        if i >= warm {
            times.push(took);
        }
    }
    times.sort();
    times
}

fn main() {
    let iters: usize = std::env::var("ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let redis = common::Redis::start();
    let rows = rt.block_on(async {
        let mut rows = Vec::new();
        // Baseline: a bare PING over the same kind of connection.
        let client = redis::Client::open(redis.url()).expect("url");
        let mut conn = redis::aio::ConnectionManager::new(client)
            .await
            .expect("connect");
        let mut times = Vec::with_capacity(iters);
        for i in 0..iters + iters / 10 {
            let t = Instant::now();
            let pong: String = redis::cmd("PING")
                .query_async(&mut conn)
                .await
                .expect("ping");
            let took = t.elapsed();
            assert_eq!(pong, "PONG");
            if i >= iters / 10 {
                times.push(took);
            }
        }
        times.sort();
        rows.push(Row {
            name: "redis PING (baseline)".into(),
            calls: 1,
            p50: pct(&times, 0.5),
            p99: pct(&times, 0.99),
            round_trips: None,
        });

        let memory = RuleGuard::new(config()).expect("config");
        for calls in [1, 8] {
            let t = run_guard(&memory, calls, iters, 0).await;
            rows.push(Row {
                name: "guard, memory store".into(),
                calls,
                p50: pct(&t, 0.5),
                p99: pct(&t, 0.99),
                round_trips: None,
            });
        }

        let store = redis_guard_store(
            &redis.url(),
            RedisOptions {
                timeout: Duration::from_millis(200),
                ..RedisOptions::default()
            },
        )
        .expect("url");
        let handle = store.inner().clone();
        assert!(handle.wait_connected(Duration::from_secs(5)).await);
        let guard = RuleGuard::new(config())
            .expect("config")
            .with_store(store)
            .timeout(Duration::from_millis(200));
        for calls in [1, 8] {
            let before = redis.calls_of("evalsha");
            let t = run_guard(&guard, calls, iters, 1_000_000 * calls).await;
            let sent = redis.calls_of("evalsha") - before;
            rows.push(Row {
                name: "guard, Redis store (loopback)".into(),
                calls,
                p50: pct(&t, 0.5),
                p99: pct(&t, 0.99),
                round_trips: Some(sent as f64 / (iters + iters / 10) as f64),
            });
        }
        let info = redis.cmd(&["INFO", "commandstats"]);
        // Server-side cost of the script and of the commands it runs (VERBOSE=1: all).
        let verbose = std::env::var_os("VERBOSE").is_some();
        for l in info
            .lines()
            .filter(|l| verbose || l.starts_with("cmdstat_evalsha:"))
        {
            println!("server side: {l}");
        }
        let st = handle.stats();
        assert_eq!(
            st.timeouts + st.unavailable + st.protocol_errors,
            0,
            "{st:?}"
        );
        rows
    });

    let ping = rows[0].p50;
    let one = rows
        .iter()
        .find(|r| r.round_trips.is_some() && r.calls == 1)
        .map(|r| r.p50)
        .unwrap_or_default();
    println!(
        "\n{iters} messages per row (after {} of warm-up)\n",
        iters / 10
    );
    println!(
        "Redis store p50, 1 call: {:.2}x a PING in this run (bar: at most 2x)\n",
        one.as_secs_f64() / ping.as_secs_f64()
    );
    println!(
        "| case | calls/message | p50 µs/message | p99 µs/message | p50 µs/call | p99 µs/call | EVALSHA/message |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for r in rows {
        let c = r.calls as f64;
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.3} | {:.3} | {} |",
            r.name,
            r.calls,
            us(r.p50),
            us(r.p99),
            us(r.p50) / c,
            us(r.p99) / c,
            r.round_trips.map_or("–".to_owned(), |n| format!("{n:.2}"))
        );
    }
}
