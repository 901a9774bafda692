//! The guard's Redis store as the operator sees it: a `redis_url` nobody answers is one
//! WARN at start (the address without its password, the cause in words), `/readyz` says
//! `degraded` (fail open) or 503 (fail closed), the decisions meanwhile are counted and
//! said once, not once each, and a Redis that comes up makes the gateway `ready`.
//! Against a real `redis-server` started on the port the gateway was given.

#[path = "../../../toolmend-redis/tests/it/common/mod.rs"]
mod redis_common;

use std::{
    io::Write,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, ToolCall};
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::common::{self, WAIT};

const SECRET: &str = "s3cret-pw";

/// The log lines of this test's thread (a current-thread runtime: every task the gateway
/// spawns runs here), without colours.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let w = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || w.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn matching(&self, text: &str) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| l.contains(text))
            .collect()
    }

    /// Waits (bounded) until a line holds `text`.
    async fn wait_for(&self, text: &str) {
        common::eventually(&format!("a line with {text:?}"), || {
            if self.matching(text).is_empty() {
                Err(format!("{:#?}", self.lines()))
            } else {
                Ok(())
            }
        })
        .await;
    }
}

/// A port where no Redis listens now (one that had a Redis a moment ago), the server
/// stopped to be started again there later.
fn dead_redis() -> redis_common::Redis {
    let mut redis = redis_common::Redis::start();
    redis.stop();
    redis
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

struct Running {
    root: String,
    http: reqwest::Client,
    _provider: ScriptedProvider,
}

/// A gateway whose guard's store is the Redis of `port`, with the URL's password set. A
/// Redis that is down refuses at once; one that is up answers within `timeout_ms` even on
/// a loaded machine (generous: a decision that must come from Redis never times out).
async fn start(port: u16, fail: &str, script: Script) -> Running {
    let provider = ScriptedProvider::start(script).await.unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\n[guard]\nstore = \"redis\"\n\
         redis_url = \"redis://default:{SECRET}@127.0.0.1:{port}/?x=also-secret\"\n\
         fail = \"{fail}\"\non_flood = \"reject\"\ntimeout_ms = 5000\n\
         [guard.session]\nlimit = 1000\nwindow_secs = 600\n",
        provider.base_url()
    );
    let config = Config::from_toml_and_env(&toml, Vec::new()).unwrap();
    let metrics = toolmend_gateway::metrics::install().ok();
    let gateway = Arc::new(Gateway::new(config, metrics).unwrap());
    let addr = common::serve(gateway).await;
    Running {
        root: format!("http://{addr}"),
        http: reqwest::Client::new(),
        _provider: provider,
    }
}

impl Running {
    async fn readyz(&self) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}/readyz", self.root))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    /// Waits (bounded) until `/readyz` says `status`.
    async fn wait_ready(&self, status: &str) -> (u16, Value) {
        let until = Instant::now() + WAIT;
        loop {
            let (code, body) = self.readyz().await;
            if body["status"] == status {
                return (code, body);
            }
            assert!(
                Instant::now() < until,
                "/readyz not {status} within {WAIT:?}: {code} {body}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// One chat completion in session `s`: the status and the guard's header.
    async fn ask(&self) -> (u16, String) {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "go"}],
            "tools": [{"type": "function", "function": {"name": "search",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]});
        let r = self
            .http
            .post(format!("{}/v1/chat/completions", self.root))
            .header("x-toolmend-session", "s")
            .json(&body)
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

    /// A counter's value in `/metrics` (0 when absent).
    async fn metric(&self, series: &str) -> f64 {
        let text = self
            .http
            .get(format!("{}/metrics", self.root))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

fn no_secret(logs: &Logs) {
    for line in logs.lines() {
        assert!(
            !line.contains(SECRET) && !line.contains("also-secret"),
            "a secret in a log line: {line}"
        );
    }
}

#[tokio::test]
async fn a_dead_redis_failing_open_is_one_warn_degraded_counted_then_ready_when_it_comes_up() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let mut redis = dead_redis();
    let address = format!("redis://127.0.0.1:{}/", redis.port);
    let gw = start(redis.port, "open", calls(100)).await;

    // One WARN at start: the address without its password or query, the cause in words.
    logs.wait_for("unreachable at start").await;
    let start_lines = logs.matching("unreachable at start");
    assert_eq!(start_lines.len(), 1, "{start_lines:#?}");
    let warn = &start_lines[0];
    assert!(warn.contains("WARN"), "{warn}");
    assert!(warn.contains(&address), "{warn}");
    assert!(warn.contains("connection refused"), "{warn}");
    assert!(warn.contains("guard.fail = \"open\""), "{warn}");

    // Ready, but degraded: the shared limits do nothing meanwhile.
    let (code, body) = gw.readyz().await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], "degraded", "{body}");
    let store = &body["guard_store"];
    assert_eq!(store["state"], "down", "{body}");
    assert_eq!(store["address"], address.as_str(), "{body}");
    assert_eq!(store["fail"], "open", "{body}");
    assert_eq!(store["cause"], "connection refused", "{body}");
    assert!(store["since_s"].is_u64(), "{body}");

    // 50 decisions: said once (the change), perhaps reminded once, never 50 times.
    let before = logs.lines().len();
    let counted = r#"toolmend_guard_fail_mode_total{store="redis",mode="open"}"#;
    let was = gw.metric(counted).await;
    for _ in 0..50 {
        let (status, guard) = gw.ask().await;
        assert_eq!(status, 200, "{guard}");
        assert!(guard.contains("store_unavailable"), "{guard}");
    }
    let during: Vec<String> = logs.lines()[before..]
        .iter()
        .filter(|l| l.contains("WARN"))
        .cloned()
        .collect();
    assert!(
        (1..=2).contains(&during.len()),
        "{} WARN lines for 50 decisions: {during:#?}",
        during.len()
    );
    assert!(
        during[0].contains("guard store gave no answer"),
        "{during:#?}"
    );
    assert!(during[0].contains(&address), "{during:#?}");
    // Counted (other tests of this binary may add theirs to the process' recorder).
    assert!(gw.metric(counted).await - was >= 50.0);

    // Redis comes up on that port: ready, decisions from Redis again, said once at info.
    redis.restart();
    let (code, body) = gw.wait_ready("ready").await;
    assert_eq!(code, 200);
    assert_eq!(body["guard_store"]["state"], "up", "{body}");
    assert!(body["guard_store"].get("cause").is_none(), "{body}");
    // The next decisions come from Redis (waited for, bounded: not assumed of the first,
    // which may race the reconnection).
    let until = Instant::now() + WAIT;
    loop {
        let (status, guard) = gw.ask().await;
        assert_eq!(status, 200);
        if !guard.contains("store_unavailable") {
            break;
        }
        assert!(
            Instant::now() < until,
            "decisions not from Redis within {WAIT:?} of /readyz ready: {:#?}",
            logs.matching("guard store")
        );
    }
    let back = logs.matching("answers again");
    assert_eq!(back.len(), 1, "{back:#?}");
    assert!(back[0].contains("INFO"), "{back:#?}");
    assert!(
        back[0].contains("in all while it gave no answer"),
        "{back:#?}"
    );
    assert_eq!(logs.matching("unreachable at start").len(), 1);
    no_secret(&logs);
}

#[tokio::test]
async fn a_dead_redis_failing_closed_is_not_ready_until_it_comes_up() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let mut redis = dead_redis();
    let gw = start(redis.port, "closed", Script::new()).await;
    logs.wait_for("unreachable at start").await;
    let (code, body) = gw.wait_ready("not_ready").await;
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["guard_store"]["state"], "down", "{body}");
    assert_eq!(body["guard_store"]["fail"], "closed", "{body}");
    assert_eq!(body["guard_store"]["cause"], "connection refused", "{body}");
    assert!(
        body["reason"].as_str().unwrap().contains("refuses"),
        "{body}"
    );
    redis.restart();
    let (code, body) = gw.wait_ready("ready").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(logs.matching("unreachable at start").len(), 1);
    no_secret(&logs);
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_said_at_start_in_words() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\n[guard]\nstore = \"redis\"\n\
         redis_url = \"redis://default:{SECRET}@no-such-host.invalid:6379/\"\n\
         [guard.session]\nlimit = 10\nwindow_secs = 60\n",
        provider.base_url()
    );
    let config = Config::from_toml_and_env(&toml, Vec::new()).unwrap();
    let gateway = Arc::new(Gateway::new(config, None).unwrap());
    let addr = common::serve(gateway).await;
    logs.wait_for("unreachable at start").await;
    let warn = logs.matching("unreachable at start").remove(0);
    assert!(
        warn.contains("redis://no-such-host.invalid:6379/"),
        "{warn}"
    );
    // No resolver in a sandbox answers as "timed out"; either way, said in words.
    assert!(
        warn.contains("name not resolved") || warn.contains("timed out"),
        "{warn}"
    );
    let body: Value = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["status"], "degraded", "{body}");
    no_secret(&logs);
}

#[tokio::test]
async fn a_wrong_password_is_said_at_start_as_auth_failed() {
    let logs = Logs::default();
    let _capture = logs.capture();
    let redis = redis_common::Redis::start();
    redis.cmd(&["CONFIG", "SET", "requirepass", "the-right-one"]);
    let gw = start(redis.port, "open", Script::new()).await;
    logs.wait_for("unreachable at start").await;
    let warn = logs.matching("unreachable at start").remove(0);
    assert!(warn.contains("auth failed"), "{warn}");
    let (code, body) = gw.readyz().await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"], "degraded", "{body}");
    assert_eq!(body["guard_store"]["cause"], "auth failed", "{body}");
    no_secret(&logs);
}

#[tokio::test]
async fn a_malformed_redis_url_stays_a_start_error_without_its_password() {
    let toml = format!(
        "upstream.base_url = \"http://127.0.0.1:1/v1\"\n[guard]\nstore = \"redis\"\n\
         redis_url = \"redis://default:{SECRET}@127.0.0.1:notaport/\"\n\
         [guard.session]\nlimit = 10\nwindow_secs = 60\n"
    );
    let err = match Config::from_toml_and_env(&toml, Vec::new()) {
        Err(e) => e.to_string(),
        Ok(config) => Gateway::new(config, None).unwrap_err().to_string(),
    };
    assert!(err.contains("redis_url"), "{err}");
    assert!(!err.contains(SECRET), "{err}");
}

/// A Responses conversation continued on another instance: the first answer's
/// conversation is kept in the guard's Redis (no guard rule needs it), and a second
/// gateway in front of the same provider continues it by `previous_response_id`.
async fn continued_elsewhere(redis_url: &str) -> (Vec<Value>, String, ScriptedProvider) {
    let step = Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![ToolCall::new(
            "call_1",
            "get_weather",
            r#"{"city": "Oslo"}"#,
        )]),
        ..Default::default()
    });
    let provider = ScriptedProvider::start(Script::new().then(step).repeating())
        .await
        .unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\n[guard]\nstore = \"redis\"\nredis_url = \"{redis_url}\"\n",
        provider.base_url()
    );
    let gateway = || {
        Arc::new(Gateway::new(Config::from_toml_and_env(&toml, Vec::new()).unwrap(), None).unwrap())
    };
    let (a, b) = (
        common::serve(gateway()).await,
        common::serve(gateway()).await,
    );
    let http = reqwest::Client::new();
    let tools = json!([{"type": "function", "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    // The stores connect in the background: until they are up, a response is kept only
    // in the instance that served it.
    let until = Instant::now() + WAIT;
    loop {
        let first: Value = http
            .post(format!("http://{a}/v1/responses"))
            .json(&json!({"model": "m", "input": "Weather in Oslo?", "tools": tools}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let next = json!({"model": "m", "previous_response_id": first["id"], "tools": tools,
            "input": [{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]});
        let resp = http
            .post(format!("http://{b}/v1/responses"))
            .json(&next)
            .send()
            .await
            .unwrap();
        if resp.status() == 200 {
            let sent = provider.requests().last().unwrap()["messages"].clone();
            let id = first["id"].as_str().unwrap().to_owned();
            return (sent.as_array().unwrap().clone(), id, provider);
        }
        assert!(
            Instant::now() < until,
            "never continued: {}",
            resp.text().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_kept_by_one_instance_is_continued_by_another() {
    let redis = redis_common::Redis::start();
    let (sent, id, _provider) = continued_elsewhere(&redis.url()).await;
    // The conversation went up whole: the question, the call, its output.
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[0]["content"], "Weather in Oslo?");
    assert_eq!(sent[1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(sent[2]["tool_call_id"], "call_1");
    let ttl: i64 = redis
        .cmd(&["PTTL", &format!("tm:blob:resp:{id}")])
        .trim()
        .parse()
        .unwrap();
    assert!(ttl > 0 && ttl <= 3_600_000, "{ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_kept_in_a_redis_cluster_is_continued_by_another_instance() {
    let cluster = redis_common::Cluster::start();
    let (sent, id, _provider) = continued_elsewhere(&cluster.url()).await;
    let key = format!("tm:blob:resp:{id}");
    assert!(cluster.node_of(&key).cmd(&["EXISTS", &key]).trim() == "1");
    assert_eq!(sent.len(), 3, "{sent:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_shared_store_down_an_unknown_response_is_a_503_not_a_404() {
    let mut redis = redis_common::Redis::start();
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\n[guard]\nstore = \"redis\"\nredis_url = \"{}\"\ntimeout_ms = 50\n",
        provider.base_url(),
        redis.url()
    );
    redis.stop();
    let gw = Arc::new(
        Gateway::new(Config::from_toml_and_env(&toml, Vec::new()).unwrap(), None).unwrap(),
    );
    let addr = common::serve(gw).await;
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/responses"))
        .json(&json!({"model": "m", "previous_response_id": "resp_elsewhere", "input": "and?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    let e: Value = resp.json().await.unwrap();
    assert_eq!(e["error"]["code"], "toolmend_store_unavailable", "{e}");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(message.contains("send the whole conversation"), "{message}");
    assert!(provider.requests().is_empty());
}
