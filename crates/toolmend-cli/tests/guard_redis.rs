//! Two `toolmend serve` processes sharing one real `redis-server`: one limit between
//! them, whatever the interleaving; and Redis restarted under them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "../../toolmend-redis/tests/common/mod.rs"]
mod common;

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use toolmend::protocol::{AssistantMessage, ToolCall};
use toolmend_scripted::{Script, ScriptedProvider, Step};

const BIN: &str = env!("CARGO_BIN_EXE_toolmend");

struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(upstream: &str, env: &[(&str, String)]) -> Serve {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--upstream", upstream]);
    for (k, _) in std::env::vars() {
        if k.starts_with("TOOLMEND_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    let addr = banner
        .strip_prefix("toolmend gateway: http://")
        .and_then(|rest| rest.split_once("/v1"))
        .map(|(addr, _)| addr.parse().unwrap())
        .unwrap_or_else(|| panic!("unexpected banner: {banner}"));
    Serve { child, addr }
}

/// `GET /readyz`'s status.
fn readyz(addr: SocketAddr) -> u16 {
    use std::io::{Read as _, Write as _};
    let Ok(mut conn) = std::net::TcpStream::connect(addr) else {
        return 0;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = String::new();
    let _ = conn
        .write_all(b"GET /readyz HTTP/1.1\r\nhost: toolmend\r\nconnection: close\r\n\r\n")
        .and_then(|()| conn.read_to_string(&mut answer));
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// Waits until `/readyz` answers 200 (a gateway failing closed is ready once its Redis
/// store is connected), at most 10 s.
fn wait_ready(addr: SocketAddr) {
    let t = Instant::now();
    while readyz(addr) != 200 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{addr} not ready within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn calls(n: usize) -> Script {
    (0..n).fold(Script::new(), |s, i| {
        s.then(Step::Reply(AssistantMessage {
            content: Some(None),
            tool_calls: Some(vec![ToolCall::new(
                format!("c{i}"),
                "search",
                format!(r#"{{"q": "q{i}"}}"#),
            )]),
            ..Default::default()
        }))
    })
}

fn body() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": "search",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]})
}

fn guard_env(redis: &str, limit: u64, fail: &str, timeout_ms: u64) -> Vec<(&'static str, String)> {
    vec![
        ("TOOLMEND_GUARD__STORE", "redis".into()),
        ("TOOLMEND_GUARD__REDIS_URL", redis.into()),
        ("TOOLMEND_GUARD__ON_FLOOD", "reject".into()),
        ("TOOLMEND_GUARD__FAIL", fail.into()),
        ("TOOLMEND_GUARD__TIMEOUT_MS", timeout_ms.to_string()),
        ("TOOLMEND_GUARD__SESSION__LIMIT", limit.to_string()),
        ("TOOLMEND_GUARD__SESSION__WINDOW_SECS", "600".into()),
    ]
}

#[test]
fn two_gateways_on_one_redis_admit_exactly_the_limit_between_them() {
    let redis = common::Redis::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    const N: usize = 1000;
    const LIMIT: u64 = 37;
    let provider = Arc::new(rt.block_on(ScriptedProvider::start(calls(N))).unwrap());
    // Fail closed with a generous timeout: a decision that did not come from Redis would
    // refuse, so exactly LIMIT admissions means every decision was Redis'.
    let env = guard_env(&redis.url(), LIMIT, "closed", 5000);
    let a = serve(&provider.base_url(), &env);
    let b = serve(&provider.base_url(), &env);
    // Failing closed, a gateway refuses every call until its store is connected: /readyz
    // says when (a load balancer's probe; here, the test's).
    wait_ready(a.addr);
    wait_ready(b.addr);
    let http = reqwest::Client::new();
    let statuses: Vec<u16> = rt.block_on(async {
        let tasks: Vec<_> = (0..N)
            .map(|i| {
                let http = http.clone();
                let addr = if i % 2 == 0 { a.addr } else { b.addr };
                tokio::spawn(async move {
                    http.post(format!("http://{addr}/v1/chat/completions"))
                        .header("x-toolmend-session", "shared")
                        .json(&body())
                        .send()
                        .await
                        .unwrap()
                        .status()
                        .as_u16()
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    });
    let ok = statuses.iter().filter(|&&s| s == 200).count();
    let limited = statuses.iter().filter(|&&s| s == 429).count();
    assert_eq!(ok as u64, LIMIT, "statuses: {ok} ok, {limited} limited");
    assert_eq!(ok + limited, N);
}

#[test]
fn a_redis_restart_under_a_gateway_fails_as_configured_then_recovers() {
    let mut redis = common::Redis::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let provider = Arc::new(rt.block_on(ScriptedProvider::start(calls(400))).unwrap());
    let timeout_ms = 50;
    let open = serve(
        &provider.base_url(),
        &guard_env(&redis.url(), 1000, "open", timeout_ms),
    );
    let closed = serve(
        &provider.base_url(),
        &guard_env(&redis.url(), 1000, "closed", timeout_ms),
    );
    let http = reqwest::Client::new();
    let ask = |addr: SocketAddr| {
        let http = http.clone();
        rt.block_on(async move {
            let t = Instant::now();
            let r = http
                .post(format!("http://{addr}/v1/chat/completions"))
                .header("x-toolmend-session", "s")
                .json(&body())
                .send()
                .await
                .unwrap();
            let guard = r
                .headers()
                .get("x-toolmend-guard")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            (r.status().as_u16(), guard, t.elapsed())
        })
    };
    wait_ready(closed.addr);
    assert_eq!(ask(open.addr).0, 200);
    assert_eq!(ask(closed.addr).0, 200);
    redis.stop();
    // During the outage: no request hangs past the decision timeout (plus the upstream
    // and a loaded machine's slack); open passes, closed refuses.
    for _ in 0..5 {
        let (status, guard, took) = ask(open.addr);
        assert_eq!(status, 200, "{guard}");
        assert!(guard.contains("store_unavailable"), "{guard}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        let (status, _, took) = ask(closed.addr);
        assert_eq!(status, 429);
        assert!(took < Duration::from_secs(2), "{took:?}");
    }
    // Failing closed without Redis, the gateway is not ready; failing open, it is.
    assert_eq!(readyz(closed.addr), 503);
    assert_eq!(readyz(open.addr), 200);
    redis.restart();
    let back = Instant::now();
    loop {
        let (o, og, _) = ask(open.addr);
        let (c, _, _) = ask(closed.addr);
        if o == 200 && c == 200 && !og.contains("store_unavailable") {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "not back on Redis within 5 s of its restart"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(readyz(closed.addr), 200, "ready again once Redis is back");
}
