//! The gateway as a new user meets it (issue 16): the start refuses what would fail
//! later (a key variable that is not set, an upstream URL of the wrong shape) and says
//! what it changed (`/v1` appended); unknown routes and methods answer JSON in OpenAI's
//! error shape listing the routes; the `/v1`-less aliases reach the same routes; and
//! every request leaves one log line at info (upstream failures one more, at warn, with
//! their cause), never with a key or an argument value. Against the strict scripted
//! provider and a dead port on 127.0.0.1; the log is this process's own tracing output.

use std::{
    io::Write,
    sync::{Arc, Mutex, OnceLock},
};

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, Content, ToolCall};
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::common;

// ---------------------------------------------------------------- the captured log

/// Every line this test binary logs (JSON, as `toolmend serve` writes them).
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        let _ = tracing_subscriber::fmt()
            .json()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
            .with_writer(move || Capture(buf))
            .try_init();
        buf
    })
}

struct Capture(&'static Mutex<Vec<u8>>);

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log lines that name `request_id`, parsed.
fn lines_of(request_id: &str) -> Vec<Value> {
    let text = String::from_utf8(log().lock().unwrap().clone()).unwrap();
    text.lines()
        .filter(|l| l.contains(request_id))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The one `toolmend::request` line of `request_id` (waited for, bounded: a stream's
/// line is written when its body ends).
async fn request_line(request_id: &str) -> Value {
    let mut found: Vec<Value> =
        common::eventually(&format!("a request line for {request_id}"), || {
            let found: Vec<Value> = lines_of(request_id)
                .into_iter()
                .filter(|l| l["target"] == "toolmend::request")
                .collect();
            if found.is_empty() {
                Err(format!("{:?}", lines_of(request_id)))
            } else {
                Ok(found)
            }
        })
        .await;
    assert_eq!(found.len(), 1, "one line per request: {found:?}");
    found.remove(0)
}

// ---------------------------------------------------------------- helpers

const KEY: &str = "sk-client-secret-key";

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"], "additionalProperties": false}}}])
}

fn calls(list: Vec<ToolCall>) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(list),
        ..Default::default()
    })
}

fn said(text: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(Some(Content::Text(text.into()))),
        ..Default::default()
    })
}

fn request(stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "tools": tools(),
           "messages": [{"role": "user", "content": "Weather in Osaka?"}]})
}

async fn gateway(base_url: &str, extra: &str) -> String {
    log();
    let config =
        Config::from_toml_and_env(&format!("upstream.base_url = \"{base_url}\"\n{extra}"), [])
            .unwrap();
    let gw = Arc::new(Gateway::new(config, None).unwrap());
    format!("http://{}", common::serve(gw).await)
}

async fn send(req: reqwest::RequestBuilder, id: &str) -> reqwest::Response {
    req.header("x-request-id", id)
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
}

fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

// ---------------------------------------------------------------- routes

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_listing_the_routes() {
    let gw = gateway(&format!("http://127.0.0.1:{}/v1", dead_port()), "").await;
    let http = reqwest::Client::new();
    let resp = send(http.get(format!("{gw}/v1/embeddings")), "ops-404").await;
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.headers()["x-request-id"], "ops-404");
    let body: Value = resp.json().await.unwrap();
    let err = &body["error"];
    assert_eq!(err["code"], "unknown_route");
    assert_eq!(err["type"], "invalid_request_error");
    assert!(err.get("param").is_some());
    let message = err["message"].as_str().unwrap();
    assert!(
        message.starts_with("no route GET /v1/embeddings"),
        "{message}"
    );
    for route in [
        "POST /v1/chat/completions",
        "POST /v1/tools/execute",
        "GET /v1/models",
        "GET /healthz",
        "GET /metrics",
    ] {
        assert!(message.contains(route), "{route} missing: {message}");
    }
    let line = request_line("ops-404").await;
    assert_eq!(line["fields"]["route"], "unmatched");
    assert_eq!(line["fields"]["path"], "/v1/embeddings");
    assert_eq!(line["fields"]["error"], "unknown_route");

    // A base URL with /v1 twice is named as such.
    let resp = send(
        http.post(format!("{gw}/v1/v1/chat/completions")),
        "ops-404b",
    )
    .await;
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1 twice"),
        "{body}"
    );

    // The right path, the wrong method: 405, naming the method it takes.
    let resp = send(http.get(format!("{gw}/v1/chat/completions")), "ops-405").await;
    assert_eq!(resp.status(), 405);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("use POST /v1/chat/completions"),
        "{message}"
    );
}

#[tokio::test]
async fn the_v1_less_aliases_reach_the_same_routes() {
    let provider = ScriptedProvider::start(Script::new().then(calls(vec![ToolCall::new(
        "c1",
        "get_weather",
        "{'city': 'Osaka',}",
    )])))
    .await
    .unwrap();
    let gw = gateway(&provider.base_url(), "").await;
    let http = reqwest::Client::new();
    let resp = send(
        http.post(format!("{gw}/chat/completions"))
            .json(&request(false)),
        "ops-alias",
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["x-toolmend-calls"],
        "valid=0 repaired=1 unresolved=0 from_text=0"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"city":"Osaka"}"#
    );
    assert_eq!(provider.requests().len(), 1);
    let line = request_line("ops-alias").await;
    assert_eq!(line["fields"]["route"], "/v1/chat/completions");

    let resp = send(http.get(format!("{gw}/models")), "ops-alias-models").await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert!(body["data"].is_array(), "{body}");
    // The tools front, reached by its alias: its own 404 (no tools configured), not
    // the unknown route's.
    let resp = send(
        http.post(format!("{gw}/tools/execute")).json(&json!({})),
        "ops-alias-tools",
    )
    .await;
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "toolmend_no_tools", "{body}");
}

// ---------------------------------------------------------------- the log

#[tokio::test]
async fn every_request_leaves_one_line_with_its_counts_and_no_values() {
    // A broken call, then (re-asked) a valid one: two upstream calls for one request.
    let provider = ScriptedProvider::start(
        Script::new()
            .then(calls(vec![
                ToolCall::new("c1", "get_weather", "{'city': 'Osaka',}"),
                ToolCall::new("c2", "get_weather", r#"{"days": 2}"#),
            ]))
            .then(calls(vec![ToolCall::new(
                "c9",
                "get_weather",
                r#"{"city": "Lyon"}"#,
            )])),
    )
    .await
    .unwrap();
    let gw = gateway(&provider.base_url(), "").await;
    let resp = send(
        reqwest::Client::new()
            .post(format!("{gw}/v1/chat/completions"))
            .json(&request(false)),
        "ops-line",
    )
    .await;
    assert_eq!(resp.status(), 200);
    let line = request_line("ops-line").await;
    assert_eq!(line["level"], "INFO");
    let f = &line["fields"];
    assert_eq!(f["message"], "request");
    assert_eq!(f["method"], "POST");
    assert_eq!(f["route"], "/v1/chat/completions");
    assert_eq!(f["status"], 200);
    assert_eq!(f["upstream_status"], 200);
    assert_eq!(f["upstream_calls"], 2, "the re-ask is one more: {line}");
    assert_eq!(f["valid"], 1);
    assert_eq!(f["repaired"], 1);
    assert_eq!(f["unresolved"], 0);
    assert_eq!(f["request_id"], "ops-line");
    assert!(f["duration_ms"].as_f64().unwrap() > 0.0, "{line}");
    // Nothing of the request's values, nor its key, in anything this request logged.
    for l in lines_of("ops-line") {
        let text = l.to_string();
        for secret in [KEY, "Osaka", "Lyon", "Weather in"] {
            assert!(!text.contains(secret), "{secret} logged: {text}");
        }
    }
}

#[tokio::test]
async fn a_stream_logs_its_line_at_its_end_with_the_reports_counts() {
    let provider = ScriptedProvider::start(Script::new().then(calls(vec![ToolCall::new(
        "c1",
        "get_weather",
        "{'city': 'Osaka',}",
    )])))
    .await
    .unwrap();
    let gw = gateway(&provider.base_url(), "").await;
    let resp = send(
        reqwest::Client::new()
            .post(format!("{gw}/v1/chat/completions"))
            .json(&request(true)),
        "ops-stream",
    )
    .await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.contains("data: [DONE]"), "{text}");
    let line = request_line("ops-stream").await;
    let f = &line["fields"];
    assert_eq!(f["stream"], true);
    assert_eq!(f["status"], 200);
    assert_eq!(f["upstream_status"], 200);
    assert_eq!(f["repaired"], 1, "{line}");
    assert_eq!(f["unresolved"], 0, "{line}");
    assert!(f.get("completed").is_none(), "{line}");
}

#[tokio::test]
async fn an_unreachable_upstream_is_logged_at_warn_with_its_cause() {
    let port = dead_port();
    let gw = gateway(&format!("http://user:secret@127.0.0.1:{port}/v1"), "").await;
    let resp = send(
        reqwest::Client::new()
            .post(format!("{gw}/v1/chat/completions"))
            .json(&request(false)),
        "ops-dead",
    )
    .await;
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap().to_lowercase();
    assert!(message.contains("connection refused"), "{message}");
    let lines = lines_of("ops-dead");
    let warn = lines
        .iter()
        .find(|l| l["target"] == "toolmend::upstream")
        .unwrap_or_else(|| panic!("no upstream warning: {lines:?}"));
    assert_eq!(warn["level"], "WARN");
    assert_eq!(warn["fields"]["code"], "upstream_unreachable");
    let cause = warn["fields"]["message"].as_str().unwrap();
    assert!(
        cause.to_lowercase().contains("connection refused"),
        "{cause}"
    );
    // Where it was sent, without the credentials of the URL.
    assert!(cause.contains(&format!("127.0.0.1:{port}")), "{cause}");
    let line = request_line("ops-dead").await;
    assert_eq!(line["fields"]["status"], 502);
    assert_eq!(line["fields"]["error"], "upstream_unreachable");
    assert_eq!(line["fields"]["upstream_calls"], 1);
    assert!(line["fields"].get("upstream_status").is_none(), "{line}");
    for l in &lines {
        assert!(!l.to_string().contains("secret"), "{l}");
    }
}

#[tokio::test]
async fn an_upstream_error_status_is_logged_at_warn_and_passed_on() {
    let provider = ScriptedProvider::start(Script::new().then(Step::Error {
        status: 401,
        body: json!({"error": {"message": "Incorrect API key provided: sk-abc***", "type":
            "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
    }))
    .await
    .unwrap();
    let gw = gateway(&provider.base_url(), "").await;
    let resp = send(
        reqwest::Client::new()
            .post(format!("{gw}/v1/chat/completions"))
            .json(&request(false)),
        "ops-401",
    )
    .await;
    assert_eq!(resp.status(), 401);
    let lines = lines_of("ops-401");
    let warn = lines
        .iter()
        .find(|l| l["target"] == "toolmend::upstream")
        .unwrap_or_else(|| panic!("no upstream warning: {lines:?}"));
    assert_eq!(warn["fields"]["upstream_status"], 401);
    assert!(
        warn["fields"]["message"]
            .as_str()
            .unwrap()
            .contains("check the key"),
        "{warn}"
    );
    // The body is the client's to read, not the log's (it may quote a key).
    assert!(!warn.to_string().contains("sk-abc"), "{warn}");
    let line = request_line("ops-401").await;
    assert_eq!(line["fields"]["upstream_status"], 401);
}

// ---------------------------------------------------------------- the start

#[test]
fn a_key_variable_that_is_not_set_stops_the_start_naming_it() {
    let base = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n";
    let err = Gateway::new(
        Config::load(
            &format!("{base}upstream.api_key_env = \"TOOLMEND_TEST_NO_SUCH_KEY\"\n"),
            Some("gateway.toml"),
            [],
            Vec::new(),
        )
        .unwrap(),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            "upstream.api_key_env (at gateway.toml:2) names the environment variable \
             TOOLMEND_TEST_NO_SUCH_KEY, which is not set"
        ),
        "{err}"
    );
    assert!(
        err.contains("api_key_env = \"\""),
        "the opt-out is named: {err}"
    );
    // The explicit opt-out: no key of the gateway's.
    let keyless =
        Config::from_toml_and_env(&format!("{base}upstream.api_key_env = \"\"\n"), []).unwrap();
    assert!(Gateway::new(keyless, None).is_ok());
    // The correction model's key, when the correction model is used.
    let text = format!(
        "{base}calls.invalid = [\"re_ask\", \"correct\"]\n[correction]\nbase_url = \
         \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"TOOLMEND_TEST_NO_SUCH_KEY\"\n"
    );
    let err = Gateway::new(Config::from_toml_and_env(&text, []).unwrap(), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("correction.api_key_env (at <config>:6) names the environment variable"),
        "{err}"
    );
    // A variable that is there is taken (cargo sets CARGO_PKG_NAME for every test).
    let present = Config::from_toml_and_env(
        &format!("{base}upstream.api_key_env = \"CARGO_PKG_NAME\"\n"),
        [],
    )
    .unwrap();
    assert!(Gateway::new(present, None).is_ok());
}

#[tokio::test]
async fn a_base_url_without_a_path_gets_v1_and_says_so() {
    let provider = ScriptedProvider::start(Script::new().then(said("hello")))
        .await
        .unwrap();
    let bare = provider.base_url().trim_end_matches("/v1").to_owned();
    let config = Config::from_toml_and_env(&format!("upstream.base_url = \"{bare}\""), []).unwrap();
    assert_eq!(config.upstream.base_url, format!("{bare}/v1"));
    assert_eq!(config.notes().len(), 1);
    assert!(
        config.notes()[0].contains(&format!("requests go to {bare}/v1")),
        "{:?}",
        config.notes()
    );
    let gw = Arc::new(Gateway::new(config, None).unwrap());
    assert_eq!(gw.upstream_url(), format!("{bare}/v1"));
    let addr = common::serve(gw).await;
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/chat/completions"))
        .json(&request(false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    // An endpoint where the base belongs is refused, with what to write instead.
    let err = Config::from_toml_and_env(
        &format!("upstream.base_url = \"{bare}/v1/chat/completions\""),
        [],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains(&format!("use {bare}/v1")), "{err}");
}
