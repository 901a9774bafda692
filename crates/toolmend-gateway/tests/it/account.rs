//! The gateway's account in the response itself (the `toolmend` object of a completion
//! and of a stream's last chunk) and the reasoning policy (`calls.reasoning`), end to
//! end: a real client (reqwest) -> the gateway -> the strict scripted provider, all on
//! 127.0.0.1.

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, Content, ToolCall};
use toolmend_scripted::{Script, Step};

use crate::common::{Running, calls, start, weather_tools as tools};

fn reply(message: Value) -> Step {
    Step::Reply(serde_json::from_value(message).unwrap())
}

fn said(text: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(Some(Content::Text(text.into()))),
        ..Default::default()
    })
}

fn ask() -> Value {
    json!([{"role": "user", "content": "Weather in Paris for 3 days?"}])
}

fn request(messages: Value, stream: bool, usage: bool) -> Value {
    let mut r = json!({"model": "m", "messages": messages, "tools": tools(), "stream": stream});
    if usage {
        r["stream_options"] = json!({"include_usage": true});
    }
    r
}

async fn post_to(r: &Running, url: &str, body: &Value) -> reqwest::Response {
    r.http
        .post(format!("{url}/chat/completions"))
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn post(r: &Running, body: &Value) -> reqwest::Response {
    post_to(r, &r.url, body).await
}

/// The `data:` chunks of an SSE answer (JSON), and the whole text.
async fn sse(resp: reqwest::Response) -> (Vec<Value>, String) {
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let chunks = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    (chunks, text)
}

/// The chunks that carry the account: exactly one, the last.
fn account_of_stream(chunks: &[Value]) -> Value {
    let with: Vec<usize> = chunks
        .iter()
        .enumerate()
        .filter(|(_, c)| c.get("toolmend").is_some())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        with,
        [chunks.len() - 1],
        "the account rides the last chunk only"
    );
    chunks.last().unwrap()["toolmend"].clone()
}

#[tokio::test]
async fn the_completion_carries_the_account_of_every_call() {
    let r = start(
        Script::new().then(calls(vec![
            ToolCall::new("c1", "get_weather", r#"{"city": "Oslo"}"#),
            ToolCall::new("c2", "get_weather", "{'city': 'Paris', 'days': '3',}"),
        ])),
        "calls.invalid = \"pass\"",
    )
    .await;
    let resp = post(&r, &request(ask(), false, false)).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    let account = &body["toolmend"];
    assert_eq!(
        account["counts"],
        json!({"valid": 1, "repaired": 1, "unresolved": 0, "dropped": 0, "flooded": 0, "from_text": 0})
    );
    let calls = account["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0],
        json!({"id": "c1", "tool": "get_weather", "status": "valid", "outcome": "executed",
               "source": "tool_calls", "fixes": [], "issues": []})
    );
    assert_eq!(calls[1]["id"], "c2");
    assert_eq!(calls[1]["status"], "repaired");
    let fixes: Vec<&str> = calls[1]["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for kind in ["single_quotes", "trailing_comma", "string_to_integer"] {
        assert!(fixes.contains(&kind), "{fixes:?}");
    }
    assert_eq!(
        account["re_asks"],
        json!({"made": 0, "calls": [], "failed": null})
    );
    assert_eq!(account["history"], Value::Null);
    assert_eq!(account["guard"], Value::Null);
    // Everything else is OpenAI's shape, as the upstream sent it.
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "object",
            "created",
            "model",
            "system_fingerprint",
            "choices",
            "usage",
            "toolmend"
        ]
    );
}

#[tokio::test]
async fn an_unchanged_answer_keeps_its_bytes_and_gains_only_the_account() {
    let args = r#"{"city":  "Paris"}"#;
    let step = calls(vec![ToolCall::new("c1", "get_weather", args)]);
    let r = start(Script::new().then(step.clone()).then(step), "").await;
    let direct = post_to(&r, &r.provider.base_url(), &request(ask(), false, false))
        .await
        .text()
        .await
        .unwrap();
    let through = post(&r, &request(ask(), false, false))
        .await
        .text()
        .await
        .unwrap();
    // The gateway's bytes are the upstream's, with `,"toolmend":{…}` before the last `}`.
    let at = through.rfind(",\"toolmend\":").unwrap();
    let head = &through[..at];
    // Each answer has its own id and time: named alike, the rest compared byte for byte.
    let normalize = |s: &str| {
        let v: Value = serde_json::from_str(s).unwrap();
        s.replace(v["id"].as_str().unwrap(), "ID")
            .replace(&v["created"].to_string(), "T")
    };
    assert_eq!(
        normalize(&format!("{head}}}")),
        normalize(direct.trim_end()),
        "the upstream's own bytes"
    );
    let body: Value = serde_json::from_str(&through).unwrap();
    assert_eq!(body["toolmend"]["calls"][0]["status"], "valid");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], args,
        "the valid call byte for byte"
    );
}

#[tokio::test]
async fn a_re_ask_leaves_its_trace_in_the_account() {
    // `c1` misses its required city: asked again (an upstream call the client never
    // sees), answered valid.
    let r = start(
        Script::new()
            .then(calls(vec![ToolCall::new(
                "c1",
                "get_weather",
                r#"{"days": 2}"#,
            )]))
            .then(calls(vec![ToolCall::new(
                "c1b",
                "get_weather",
                r#"{"city": "Paris", "days": 2}"#,
            )]))
            .then(calls(vec![ToolCall::new(
                "c1",
                "get_weather",
                r#"{"days": 2}"#,
            )]))
            .then(calls(vec![ToolCall::new(
                "c1b",
                "get_weather",
                r#"{"city": "Paris", "days": 2}"#,
            )])),
        "",
    )
    .await;
    let body: Value = post(&r, &request(ask(), false, false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(r.provider.requests().len(), 2, "one re-ask");
    let account = &body["toolmend"];
    assert_eq!(
        account["re_asks"],
        json!({"made": 1, "calls": ["c1"], "failed": null})
    );
    assert_eq!(account["calls"][0]["id"], "c1b");
    assert_eq!(account["calls"][0]["status"], "valid");
    // The stream says the same in its last chunk.
    let (chunks, text) = sse(post(&r, &request(ask(), true, true)).await).await;
    assert_eq!(r.provider.requests().len(), 4);
    let account = account_of_stream(&chunks);
    assert_eq!(
        account["re_asks"],
        json!({"made": 1, "calls": ["c1"], "failed": null})
    );
    assert!(
        chunks.last().unwrap()["usage"].is_object(),
        "the usage chunk is last"
    );
    assert!(text.contains(": toolmend {"), "the SSE comment stays");
    assert!(text.trim_end().ends_with("data: [DONE]"));
}

#[tokio::test]
async fn what_stays_unresolved_is_named_with_its_issues() {
    let r = start(
        Script::new().then(calls(vec![ToolCall::new(
            "c9",
            "get_weather",
            r#"{"days": "many", "town": "Oslo"}"#,
        )])),
        "calls.invalid = \"pass\"",
    )
    .await;
    let body: Value = post(&r, &request(ask(), false, false))
        .await
        .json()
        .await
        .unwrap();
    let call = &body["toolmend"]["calls"][0];
    assert_eq!(call["status"], "unresolved");
    assert_eq!(call["outcome"], "feedback");
    let issues = call["issues"].as_array().unwrap();
    assert!(issues.iter().any(|i| i["path"] == "/days"), "{issues:?}");
    for i in issues {
        assert_eq!(
            i.as_object().unwrap().len(),
            2,
            "kind and path, no value: {i}"
        );
    }
    assert_eq!(body["toolmend"]["counts"]["unresolved"], 1);
}

#[tokio::test]
async fn history_actions_and_guard_decisions_are_in_the_account() {
    let valid = || {
        calls(vec![ToolCall::new(
            "c5",
            "get_weather",
            r#"{"city": "Rome"}"#,
        )])
    };
    let r = start(
        Script::new().then(valid()).then(valid()),
        "[guard]\non_flood = \"flag\"\n[guard.session]\nlimit = 1\nwindow_secs = 60\n",
    )
    .await;
    // A call with no result in the history: the request path synthesizes one.
    let history = json!([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "h1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "user", "content": "And Rome?"}
    ]);
    let in_session = |body: Value| {
        r.http
            .post(format!("{}/chat/completions", r.url))
            .header("x-toolmend-session", "s1")
            .json(&body)
            .send()
    };
    let body: Value = in_session(request(history.clone(), false, false))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let account = &body["toolmend"];
    let sanitized = &account["history"]["sanitized"];
    assert!(sanitized["actions"].as_u64().unwrap() >= 1, "{account}");
    assert!(!sanitized["kinds"].as_array().unwrap().is_empty());
    assert_eq!(account["guard"]["checked"], 1, "{account}");
    // The second answer is past the session's limit of 1: flagged, in the account.
    let (chunks, _) = sse(in_session(request(history, true, false)).await.unwrap()).await;
    let account = account_of_stream(&chunks);
    assert_eq!(account["guard"]["flagged"], 1, "{account}");
    assert_eq!(
        account["guard"]["rules"],
        json!(["session_window"]),
        "{account}"
    );
    assert!(
        chunks.last().unwrap()["choices"][0]["finish_reason"].is_string(),
        "without usage the finish chunk is last"
    );
}

#[tokio::test]
async fn the_account_can_be_turned_off() {
    let step = || calls(vec![ToolCall::new("c1", "get_weather", "{'city': 'Oslo'}")]);
    let r = start(
        Script::new().then(step()).then(step()),
        "calls.account = false",
    )
    .await;
    let body: Value = post(&r, &request(ask(), false, false))
        .await
        .json()
        .await
        .unwrap();
    assert!(body.get("toolmend").is_none());
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"city":"Oslo"}"#
    );
    let (chunks, text) = sse(post(&r, &request(ask(), true, true)).await).await;
    assert!(chunks.iter().all(|c| c.get("toolmend").is_none()));
    assert!(text.contains(": toolmend {"), "the SSE comment stays");
}

const THOUGHT: &str = "<think>\nThe user wants Paris.\n</think>\n\nChecking the weather.";

fn thinking_reply() -> Step {
    reply(
        json!({"content": THOUGHT, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}),
    )
}

/// The content and the reasoning a stream's client assembles.
fn streamed(chunks: &[Value]) -> (String, String) {
    let field = |k: &str| {
        chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"][k].as_str())
            .collect::<String>()
    };
    (field("content"), field("reasoning_content"))
}

#[tokio::test]
async fn reasoning_moves_to_reasoning_content_by_default_json_and_stream() {
    let r = start(
        Script::new()
            .then(thinking_reply())
            .then(thinking_reply())
            .then(said(THOUGHT))
            .then(said(THOUGHT)),
        "",
    )
    .await;
    let body: Value = post(&r, &request(ask(), false, false))
        .await
        .json()
        .await
        .unwrap();
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], "Checking the weather.");
    assert_eq!(message["reasoning_content"], "The user wants Paris.");
    assert_eq!(body["toolmend"]["reasoning"], "moved");
    assert_eq!(
        message["tool_calls"][0]["function"]["arguments"],
        "{\"city\": \"Paris\"}"
    );
    let (chunks, _) = sse(post(&r, &request(ask(), true, true)).await).await;
    let (content, reasoning) = streamed(&chunks);
    assert_eq!(content, "Checking the weather.");
    assert_eq!(reasoning, "The user wants Paris.");
    assert!(!content.contains("<think>") && !reasoning.contains("think>"));
    // The reasoning goes out before the content.
    let first_reasoning = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"]["reasoning_content"].is_string())
        .unwrap();
    let first_content = chunks
        .iter()
        .position(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .unwrap();
    assert!(first_reasoning < first_content);
    assert_eq!(account_of_stream(&chunks)["reasoning"], "moved");

    // A request without tools (no plan runs): the same.
    let plain = json!({"model": "m", "messages": ask()});
    let body: Value = post(&r, &plain).await.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Checking the weather."
    );
    assert_eq!(
        body["choices"][0]["message"]["reasoning_content"],
        "The user wants Paris."
    );
    let mut plain_stream = plain.clone();
    plain_stream["stream"] = json!(true);
    let (chunks, _) = sse(post(&r, &plain_stream).await).await;
    let (content, reasoning) = streamed(&chunks);
    assert_eq!(content, "Checking the weather.");
    assert_eq!(reasoning, "The user wants Paris.");
}

#[tokio::test]
async fn reasoning_dropped_or_kept_by_policy() {
    for (policy, content, reasoning) in [
        ("drop", "Checking the weather.", None),
        ("keep", THOUGHT, None),
    ] {
        let r = start(
            Script::new()
                .then(thinking_reply())
                .then(thinking_reply())
                .then(said(THOUGHT))
                .then(said(THOUGHT)),
            &format!("calls.reasoning = \"{policy}\""),
        )
        .await;
        let body: Value = post(&r, &request(ask(), false, false))
            .await
            .json()
            .await
            .unwrap();
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], content, "{policy}");
        assert_eq!(message.get("reasoning_content"), reasoning, "{policy}");
        let (chunks, _) = sse(post(&r, &request(ask(), true, false)).await).await;
        assert_eq!(
            streamed(&chunks),
            (content.to_owned(), String::new()),
            "{policy}"
        );
        // Without tools too.
        let plain = json!({"model": "m", "messages": ask()});
        let body: Value = post(&r, &plain).await.json().await.unwrap();
        assert_eq!(
            body["choices"][0]["message"]["content"], content,
            "{policy}"
        );
        let mut plain_stream = plain.clone();
        plain_stream["stream"] = json!(true);
        let (chunks, _) = sse(post(&r, &plain_stream).await).await;
        assert_eq!(streamed(&chunks).0, content, "{policy}");
    }
}
