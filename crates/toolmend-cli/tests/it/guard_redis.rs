//! Two `toolmend serve` processes sharing one real `redis-server`, then a real three-node
//! Redis Cluster: the same limits between them (a session's, a tool's across sessions),
//! whatever the interleaving; and Redis restarted under them.

#[path = "../../../toolmend-redis/tests/it/common/mod.rs"]
mod common;

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, ToolCall};
use toolmend_scripted::{Script, ScriptedProvider, Step};

const BIN: &str = env!("CARGO_BIN_EXE_toolmend");

/// How long a wait for something that must happen may last before the test fails: long
/// enough for a debug build on a loaded two-core machine, short of a hung run.
const PATIENCE: Duration = Duration::from_secs(120);

/// A client whose requests fail (the test with them) rather than hang.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(PATIENCE)
        .build()
        .unwrap()
}

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
    // Generous: a status asserted on must not turn into 0 on a loaded machine.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
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
/// store is connected); a bound of minutes only turns a gateway that never gets ready into
/// a failure.
fn wait_ready(addr: SocketAddr) {
    let deadline = Instant::now() + PATIENCE;
    while readyz(addr) != 200 {
        assert!(
            Instant::now() < deadline,
            "{addr} not ready within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn step(i: usize, tool: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![ToolCall::new(
            format!("c{i}"),
            tool,
            format!(r#"{{"q": "q{i}"}}"#),
        )]),
        ..Default::default()
    })
}

/// `n` answers, each one `search` call with its own arguments (no duplicate).
fn calls(n: usize) -> Script {
    (0..n).fold(Script::new(), |s, i| s.then(step(i, "search")))
}

fn body() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {"type": "function", "function": {"name": "search",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "fetch",
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

/// One request to `addr` in `session`: the status and `x-toolmend-guard`.
async fn ask(http: reqwest::Client, addr: SocketAddr, session: String) -> (u16, String) {
    let r = http
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("x-toolmend-session", session)
        .json(&body())
        .send()
        .await
        .unwrap();
    let guard = r
        .headers()
        .get("x-toolmend-guard")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status().as_u16(), guard)
}

/// All of `requests` at once (`(gateway, session)`); their answers in order.
fn burst(
    rt: &tokio::runtime::Runtime,
    http: &reqwest::Client,
    requests: Vec<(SocketAddr, String)>,
) -> Vec<(u16, String)> {
    rt.block_on(async {
        let tasks: Vec<_> = requests
            .into_iter()
            .map(|(addr, session)| tokio::spawn(ask(http.clone(), addr, session)))
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    })
}

/// Checks a phase's answers: exactly `admitted` 200s, every other answer a 429 whose
/// `x-toolmend-guard` names `rule` and only it (a refusal for want of the store, failing
/// closed, names `store_unavailable`).
fn expect(phase: &str, answers: &[(u16, String)], admitted: usize, rule: &str) {
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(
        ok,
        admitted,
        "{phase}: {ok} admitted of {}, expected {admitted}",
        answers.len()
    );
    for (status, guard) in answers.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(*status, 429, "{phase}: {guard}");
        assert!(
            guard.ends_with(&format!(" rules={rule}")),
            "{phase}: a refusal by another rule than {rule}: {guard}"
        );
    }
}

/// The session limit of every session, all tools together.
const SESSION: usize = 37;
/// The limit of `search` across all sessions (`tools.search.global`).
const GLOBAL: usize = 70;

/// Two `toolmend serve` processes on the guard store at `url` (one Redis, or a cluster),
/// failing closed with a generous timeout: a decision that did not come from the store
/// would refuse with rule `store_unavailable`, so exact counts mean every decision was the
/// store's. Each limit is checked by requests spread over both gateways; one gateway's
/// own count could never reach it.
fn shared_limits_across_two_gateways(url: &str) {
    const A: usize = 200; // session "shared", `search`, both gateways at once
    const B1: usize = 20; // a session each, `search`, gateway `a` alone, one at a time
    const B2: usize = 200; // 40 sessions, `search`, both gateways at once
    const C: usize = 2; // session "late", `search`: `a` then `b`
    const D: usize = 100; // session "late", `fetch` (no global rule), both at once
    let tools =
        std::iter::repeat_n("search", A + B1 + B2 + C).chain(std::iter::repeat_n("fetch", D));
    let script = tools
        .enumerate()
        .fold(Script::new(), |s, (i, tool)| s.then(step(i, tool)));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let provider = rt.block_on(ScriptedProvider::start(script)).unwrap();
    let mut env = guard_env(url, SESSION as u64, "closed", 5000);
    env.push((
        "TOOLMEND_GUARD__TOOLS__SEARCH__GLOBAL__LIMIT",
        GLOBAL.to_string(),
    ));
    env.push((
        "TOOLMEND_GUARD__TOOLS__SEARCH__GLOBAL__WINDOW_SECS",
        "600".into(),
    ));
    let a = serve(&provider.base_url(), &env);
    let b = serve(&provider.base_url(), &env);
    // Failing closed, a gateway refuses every call until its store is connected: /readyz
    // says when (a load balancer's probe; here, the test's).
    wait_ready(a.addr);
    wait_ready(b.addr);
    let http = client();
    let both = |i: usize| if i.is_multiple_of(2) { a.addr } else { b.addr };

    // A. One session on both gateways: exactly its limit, the rest refused by the
    // session's window (each gateway alone got 100, enough to admit 37 by itself).
    let answers = burst(
        &rt,
        &http,
        (0..A).map(|i| (both(i), "shared".into())).collect(),
    );
    expect("session limit", &answers, SESSION, "session_window");

    // B. `search` across sessions: the calls A refused did not count, so the global
    // window holds SESSION; gateway `a` alone spends B1 more, and both gateways at once
    // get exactly what is left, every refusal the global window's.
    for i in 0..B1 {
        let answer = rt.block_on(ask(http.clone(), a.addr, format!("b1-{i}")));
        assert_eq!(answer.0, 200, "B1 #{i}: {}", answer.1);
    }
    let answers = burst(
        &rt,
        &http,
        (0..B2)
            .map(|i| (both(i), format!("b2-{}", i % 40)))
            .collect(),
    );
    expect(
        "global limit",
        &answers,
        GLOBAL - SESSION - B1,
        "tool_global_window",
    );

    // C. A fresh session: its `search` is refused on either gateway, the budget spent by
    // both.
    let answers: Vec<_> = [a.addr, b.addr]
        .into_iter()
        .map(|addr| rt.block_on(ask(http.clone(), addr, "late".into())))
        .collect();
    expect(
        "global limit, a fresh session",
        &answers,
        0,
        "tool_global_window",
    );

    // D. The calls the global window refused do not count in their session (on a
    // cluster, the refund in the session's slot): "late" still gets its whole session
    // limit of `fetch`, on both gateways at once.
    let answers = burst(
        &rt,
        &http,
        (0..D).map(|i| (both(i), "late".into())).collect(),
    );
    expect(
        "session limit after global refusals",
        &answers,
        SESSION,
        "session_window",
    );
    assert_eq!(
        provider.remaining(),
        0,
        "every request reached the upstream once"
    );
}

#[test]
fn two_gateways_on_one_redis_admit_exactly_the_limits_between_them() {
    let redis = common::Redis::start();
    shared_limits_across_two_gateways(&redis.url());
}

#[test]
fn two_gateways_on_a_three_node_cluster_admit_exactly_the_same_limits() {
    // Three `redis-server --cluster-enabled yes` on free loopback ports, slots spread by
    // `redis-cli --cluster create … --cluster-replicas 0 --cluster-yes`, every node
    // waited for until `cluster_state:ok` (at most 20 s); all killed on drop. The redis
    // crate's own harness, included above by path: no second copy.
    let cluster = common::Cluster::start();
    let url = cluster.url();
    assert!(url.starts_with("redis+cluster://"), "{url}");
    shared_limits_across_two_gateways(&url);
    // The sessions' keys (hash-tagged per session) landed on more than one node: the
    // limits held across slots, not within one node's.
    let used = cluster
        .nodes
        .iter()
        .filter(|n| n.cmd(&["DBSIZE"]).parse::<u64>().unwrap() > 0)
        .count();
    assert!(used >= 2, "the guard's keys are on {used} node(s) of 3");
}

#[test]
fn a_redis_restart_under_a_gateway_fails_as_configured_then_recovers() {
    let mut redis = common::Redis::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Played in a loop, and a session limit no wait below can reach: the wait for the
    // recovery sends as many requests as it needs.
    let provider = Arc::new(
        rt.block_on(ScriptedProvider::start(calls(400).repeating()))
            .unwrap(),
    );
    // Generous: with Redis up, no decision may fail for want of time on a loaded machine.
    // With it down, the store answers at once (the connection is refused), whatever the
    // timeout; `toolmend-redis`'s tests bound a frozen Redis by counting timeouts.
    let timeout_ms = 5000;
    let open = serve(
        &provider.base_url(),
        &guard_env(&redis.url(), 100_000, "open", timeout_ms),
    );
    let closed = serve(
        &provider.base_url(),
        &guard_env(&redis.url(), 100_000, "closed", timeout_ms),
    );
    let http = client();
    let ask = |addr: SocketAddr| {
        let http = http.clone();
        rt.block_on(async move {
            let r = http
                .post(format!("http://{addr}/v1/chat/completions"))
                .header("x-toolmend-session", "s")
                .json(&body())
                .send()
                .await
                .unwrap_or_else(|e| panic!("no answer from {addr}: {e}"));
            let guard = r
                .headers()
                .get("x-toolmend-guard")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            (r.status().as_u16(), guard)
        })
    };
    wait_ready(closed.addr);
    assert_eq!(ask(open.addr).0, 200);
    assert_eq!(ask(closed.addr).0, 200);
    redis.stop();
    // During the outage every request is answered (the client's bound turns a hang into
    // a failure): open passes, saying the store was unavailable; closed refuses for the
    // same reason.
    for _ in 0..5 {
        let (status, guard) = ask(open.addr);
        assert_eq!(status, 200, "{guard}");
        assert!(guard.contains("store_unavailable"), "{guard}");
        // An outage, not a flood: the gateway's failure (503), not the client's.
        let (status, guard) = ask(closed.addr);
        assert_eq!(status, 503, "{guard}");
        assert!(guard.ends_with(" rules=store_unavailable"), "{guard}");
    }
    // Failing closed without Redis, the gateway is not ready; failing open, it is.
    assert_eq!(readyz(closed.addr), 503);
    assert_eq!(readyz(open.addr), 200);
    redis.restart();
    // The store reconnects on its own (a probe, then up): wait for it, bounded.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (o, og) = ask(open.addr);
        let (c, _) = ask(closed.addr);
        if o == 200 && c == 200 && !og.contains("store_unavailable") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not back on Redis within {PATIENCE:?} of its restart"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(readyz(closed.addr), 200, "ready again once Redis is back");
}
