//! A guard that breaks never lets a call through unchecked, at the gateway as at the node
//! (the core's guard stage, `toolmend::guard::stage`): a store that panics, a local store
//! that never answers, and one that answers for fewer calls than it was asked about each
//! refuse the answer's calls, in the JSON and the streamed answer alike.

use std::sync::Arc;

use serde_json::{Value, json};
use toolmend::{
    conversation::{AssistantMessage, ToolCall},
    guard::{
        GuardStore,
        stage::{GUARD_FAILED, GUARD_LATE},
    },
    testing::BrokenStore as Broken,
};
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::common;

fn two_calls() -> Step {
    let call = |id: &str, q: &str| ToolCall::new(id, "search", format!(r#"{{"q": "{q}"}}"#));
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![call("c1", "rome"), call("c2", "paris")]),
        ..Default::default()
    })
}

/// The answer to one request through a gateway whose guard keeps its counts in `store`
/// (`fail`: the fail mode), rejecting refused calls.
async fn answer(store: Broken, fail: &str, stream: bool) -> (u16, String) {
    let provider = ScriptedProvider::start(Script::new().then(two_calls()))
        .await
        .unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\n[guard]\non_flood = \"reject\"\nfail = \"{fail}\"\n\
         [guard.session]\nlimit = 100\nwindow_secs = 60\n",
        provider.base_url()
    );
    let config = Config::from_toml_and_env(&toml, Vec::<(String, String)>::new()).unwrap();
    let store: Arc<dyn GuardStore> = Arc::new(store);
    let gateway = Arc::new(Gateway::with_guard_store(config, None, Some(store)).unwrap());
    let addr = common::serve(gateway).await;
    let tools = json!([{"type": "function", "function": {"name": "search",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
            "required": ["q"]}}}]);
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("x-toolmend-session", "alice")
        .json(
            &json!({"model": "m", "messages": [{"role": "user", "content": "find"}],
            "tools": tools, "stream": stream}),
        )
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The reason the gateway gave for refusing, from a JSON error or the stream's error event.
fn refusal(status: u16, body: &str, stream: bool) -> String {
    refusal_as(status, body, stream, 429, "toolmend_tool_flood")
}

/// The same, answered with `want` and `code` when not streamed.
fn refusal_as(status: u16, body: &str, stream: bool, want: u16, code: &str) -> String {
    if stream {
        assert_eq!(status, 200, "{body}");
        let event = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|v| v.get("error").is_some())
            .unwrap_or_else(|| panic!("no error event: {body}"));
        assert!(
            !body.contains("\"tool_calls\""),
            "a refused call reached the client: {body}"
        );
        event["error"]["message"].as_str().unwrap().to_owned()
    } else {
        assert_eq!(status, want, "{body}");
        let v: Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], code, "{body}");
        v["error"]["message"].as_str().unwrap().to_owned()
    }
}

#[tokio::test]
async fn a_guard_that_panics_refuses_every_call() {
    for stream in [false, true] {
        let (status, body) = answer(Broken::Panics, "open", stream).await;
        let why = refusal(status, &body, stream);
        assert!(why.starts_with(GUARD_FAILED), "{why}");
        assert!(why.contains("2 of the answer's 2 calls refused"), "{why}");
    }
}

#[tokio::test]
async fn a_guard_that_never_answers_refuses_every_call() {
    for stream in [false, true] {
        let (status, body) = answer(Broken::Hangs, "open", stream).await;
        let why = refusal(status, &body, stream);
        assert!(why.starts_with(GUARD_LATE), "{why}");
    }
}

#[tokio::test]
async fn a_store_short_of_answers_is_judged_by_the_fail_mode() {
    // Closed: both calls refused, the one the store answered for too (its answer cannot
    // be trusted). An outage, not a flood: 503, and the text says so.
    for stream in [false, true] {
        let (status, body) = answer(Broken::Short, "closed", stream).await;
        let why = refusal_as(status, &body, stream, 503, "toolmend_guard_unavailable");
        assert!(why.contains("2 of the answer's 2 calls refused"), "{why}");
        assert!(why.starts_with(toolmend::guard::UNCHECKED_PREFIX), "{why}");
    }
    // Open: both pass, as with a store that is down.
    let (status, body) = answer(Broken::Short, "open", false).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{body}"
    );
}
