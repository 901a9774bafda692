//! The gateway end to end: a real client (reqwest) -> the gateway -> the strict scripted
//! provider, all on 127.0.0.1.

use std::sync::Arc;

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, Content, ToolCall};
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::common::{self, Running, calls, start, weather_tools as tools};

fn said(text: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(Some(Content::Text(text.into()))),
        ..Default::default()
    })
}

fn request(messages: Value, stream: bool) -> Value {
    json!({"model": "m", "messages": messages, "tools": tools(), "stream": stream,
           "stream_options": if stream { json!({"include_usage": true}) } else { Value::Null }})
}

fn ask() -> Value {
    json!([{"role": "user", "content": "Weather in Paris for 3 days?"}])
}

async fn post(r: &Running, body: &Value) -> reqwest::Response {
    r.http
        .post(format!("{}/chat/completions", r.url))
        .json(body)
        .send()
        .await
        .unwrap()
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn broken_arguments_reach_the_client_mended_and_recorded() {
    let r = start(
        Script::new().then(calls(vec![ToolCall::new(
            "c1",
            "get_weather",
            "{'city': 'Paris', 'days': '3', 'units': 'Celsius',}",
        )])),
        "",
    )
    .await;
    let resp = post(&r, &request(ask(), false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-calls"),
        "valid=0 repaired=1 unresolved=0 from_text=0"
    );
    let fixes = header(&resp, "x-toolmend-fixes");
    for kind in [
        "single_quotes",
        "trailing_comma",
        "string_to_integer",
        "enum_case_fixed",
    ] {
        assert!(fixes.contains(kind), "{fixes}");
    }
    let body: Value = resp.json().await.unwrap();
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["id"], "c1");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        args,
        json!({"city": "Paris", "days": 3, "units": "celsius"})
    );
}

#[tokio::test]
async fn a_valid_answer_passes_byte_for_byte() {
    let args = r#"{"city":  "Paris"}"#;
    let r = start(
        Script::new().then(calls(vec![ToolCall::new("c1", "get_weather", args)])),
        "",
    )
    .await;
    let resp = post(&r, &request(ask(), false)).await;
    assert_eq!(
        header(&resp, "x-toolmend-calls"),
        "valid=1 repaired=0 unresolved=0 from_text=0"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        args
    );
}

#[tokio::test]
async fn calls_written_into_the_text_become_tool_calls() {
    let r = start(
        Script::new().then(said(
            r#"Checking.<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>"#,
        )),
        "",
    )
    .await;
    let body: Value = post(&r, &request(ask(), false)).await.json().await.unwrap();
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "Checking.");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert!(!call["id"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn broken_histories_are_sanitized_rejected_or_passed_by_policy() {
    // An orphan result and an unanswered call: the strict provider refuses this.
    let broken = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "zzz", "content": "orphan"},
        {"role": "user", "content": "and Paris?"},
    ]);
    let r = start(Script::new().then(said("ok")), "").await;
    let resp = post(&r, &request(broken.clone(), false)).await;
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "x-toolmend-history").starts_with("sanitized; actions="));
    let sent = &r.provider.requests()[0]["messages"];
    assert!(
        toolmend::history::check(&serde_json::from_value::<Vec<_>>(sent.clone()).unwrap())
            .is_empty()
    );

    let r = start(
        Script::new().then(said("ok")),
        "history.policy = \"reject\"",
    )
    .await;
    let resp = post(&r, &request(broken.clone(), false)).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "toolmend_invalid_history");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("unanswered_call") && message.contains("orphan_result"),
        "{message}"
    );
    assert!(r.provider.requests().is_empty(), "nothing went upstream");

    let r = start(Script::new().then(said("ok")), "history.policy = \"pass\"").await;
    let resp = post(&r, &request(broken, false)).await;
    assert_eq!(resp.status(), 400, "the provider's own refusal, forwarded");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn an_invalid_call_is_re_asked_invisibly_and_the_valid_one_kept() {
    let r = start(
        Script::new()
            .then(calls(vec![
                ToolCall::new("c1", "get_weather", r#"{"city": "Paris"}"#),
                ToolCall::new("c2", "get_weather", r#"{"days": 2}"#),
            ]))
            .then(calls(vec![ToolCall::new(
                "c9",
                "get_weather",
                r#"{"city": "Lyon", "days": 2}"#,
            )])),
        "",
    )
    .await;
    let resp = post(&r, &request(ask(), false)).await;
    assert_eq!(
        header(&resp, "x-toolmend-calls"),
        "valid=2 repaired=0 unresolved=0 from_text=0"
    );
    let body: Value = resp.json().await.unwrap();
    let got: Vec<(String, String)> = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["function"]["arguments"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(got[0], ("c1".to_owned(), r#"{"city": "Paris"}"#.to_owned()));
    assert_eq!(got[1].0, "c9");
    // The re-ask carried the invalid call and its feedback; the strict provider took it.
    let sent = r.provider.requests();
    assert_eq!(sent.len(), 2);
    let messages = sent[1]["messages"].as_array().unwrap();
    assert_eq!(messages[messages.len() - 1]["role"], "tool");
    assert!(
        messages[messages.len() - 1]["content"]
            .as_str()
            .unwrap()
            .contains("city")
    );
}

#[tokio::test]
async fn what_stays_invalid_after_the_re_asks_is_passed_and_flagged() {
    let r = start(
        Script::new()
            .then(calls(vec![ToolCall::new(
                "c1",
                "get_weather",
                r#"{"days": 2}"#,
            )]))
            .then(calls(vec![ToolCall::new(
                "c2",
                "get_weather",
                r#"{"days": 3}"#,
            )])),
        "",
    )
    .await;
    let resp = post(&r, &request(ask(), false)).await;
    assert_eq!(header(&resp, "x-toolmend-unresolved"), "c2");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let r = start(
        Script::new().then(calls(vec![ToolCall::new(
            "c1",
            "get_weather",
            r#"{"days": 2}"#,
        )])),
        "calls.invalid = \"pass\"",
    )
    .await;
    let resp = post(&r, &request(ask(), false)).await;
    assert_eq!(header(&resp, "x-toolmend-unresolved"), "c1");
    assert_eq!(r.provider.requests().len(), 1);
}

/// Three cities merged into one call, re-asked, "fixed" by keeping one: the narrowed call
/// is not reported clean (the client would silently lose two cities); it goes out flagged.
#[tokio::test]
async fn a_re_ask_that_drops_values_the_model_sent_is_flagged() {
    let r = start(
        Script::new()
            .then(calls(vec![ToolCall::new(
                "c1",
                "get_weather",
                r#"{"city": ["Lima", "Quito", "Bogota"]}"#,
            )]))
            .then(calls(vec![ToolCall::new(
                "c2",
                "get_weather",
                r#"{"city": "Lima"}"#,
            )])),
        // Split by default (one call per city): here the merged call is re-asked.
        "calls.coercions = { split_merged_calls = false }",
    )
    .await;
    let resp = post(&r, &request(ask(), false)).await;
    assert_eq!(header(&resp, "x-toolmend-unresolved"), "c2");
    assert_eq!(r.provider.requests().len(), 2, "one re-ask");
}

async fn sse(resp: reqwest::Response) -> (Vec<Value>, String) {
    let text = resp.text().await.unwrap();
    let mut chunks = Vec::new();
    for block in text.split("\n\n") {
        if let Some(data) = block.strip_prefix("data: ")
            && data != "[DONE]"
        {
            chunks.push(serde_json::from_str(data).unwrap());
        }
    }
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    (chunks, text)
}

#[tokio::test]
async fn streaming_emits_mended_calls_before_the_finish_chunk() {
    let r = start(
        Script::new().then(Step::Reply(AssistantMessage {
            content: Some(Some(Content::Text("Let me look that up for you.".into()))),
            tool_calls: Some(vec![ToolCall::new(
                "c1",
                "get_weather",
                "{'city': 'Paris', 'days': '3'",
            )]),
            ..Default::default()
        })),
        "calls.accept_truncated = true",
    )
    .await;
    let resp = post(&r, &request(ask(), true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "text/event-stream");
    let (chunks, text) = sse(resp).await;
    // Text deltas as they came, then one chunk per mended call, then the finish chunk.
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "Let me look that up for you.");
    let call_at = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"]["tool_calls"].is_array())
        .unwrap();
    let finish_at = chunks
        .iter()
        .position(|c| {
            !c["choices"][0]["finish_reason"].is_null()
                && c["choices"].as_array().is_some_and(|a| !a.is_empty())
        })
        .unwrap();
    assert!(call_at < finish_at);
    let call = &chunks[call_at]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(call["index"], 0);
    assert_eq!(call["id"], "c1");
    assert_eq!(call["type"], "function");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris", "days": 3}));
    assert_eq!(
        chunks[finish_at]["choices"][0]["finish_reason"],
        "tool_calls"
    );
    // The usage chunk (include_usage) still comes, last.
    assert!(chunks.last().unwrap()["usage"].is_object());
    assert!(text.contains(": toolmend {"));
}

#[tokio::test]
async fn streaming_turns_calls_in_the_text_into_tool_calls() {
    let r = start(
        Script::new().then(said(
            r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>"#,
        )),
        "",
    )
    .await;
    let (chunks, _) = sse(post(&r, &request(ask(), true)).await).await;
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        content, "",
        "the call text never reaches the client as text"
    );
    let call = chunks
        .iter()
        .find_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0).cloned())
        .unwrap();
    assert_eq!(call["function"]["name"], "get_weather");
    let finish = chunks
        .iter()
        .find(|c| c["choices"][0]["finish_reason"].is_string())
        .unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn upstream_errors_are_forwarded_with_their_status_and_body() {
    let r = start(
        Script::new().then(Step::Error {
            status: 429,
            body: json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}),
        }),
        "",
    )
    .await;
    let resp = post(&r, &request(ask(), false)).await;
    assert_eq!(resp.status(), 429);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
}

#[tokio::test]
async fn probes_metrics_and_bad_requests() {
    let r = start(
        Script::new().then(calls(vec![ToolCall::new(
            "c1",
            "get_weather",
            "{'city': 'Rome'}",
        )])),
        "",
    )
    .await;
    post(&r, &request(ask(), false)).await;
    let base = r.url.trim_end_matches("/v1");
    assert_eq!(
        r.http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "ok"
    );
    let metrics = r
        .http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("toolmend_calls_total"), "{metrics}");
    assert!(
        metrics.contains("toolmend_gateway_overhead_seconds_bucket"),
        "{metrics}"
    );
    let resp = r
        .http
        .post(format!("{}/chat/completions", r.url))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");
}

#[test]
fn config_reads_toml_and_environment_overrides() {
    let c = Config::from_toml_and_env(
        "upstream.base_url = \"http://x/v1\"\n[calls]\nmax_re_asks = 2",
        vec![
            ("TOOLMEND_HISTORY__POLICY".to_owned(), "reject".to_owned()),
            ("TOOLMEND_CALLS__MAX_RE_ASKS".to_owned(), "3".to_owned()),
            ("UNRELATED".to_owned(), "x".to_owned()),
        ],
    )
    .unwrap();
    assert_eq!(c.calls.max_re_asks, 3);
    assert_eq!(
        c.history.policy,
        toolmend_gateway::config::HistoryPolicy::Reject
    );
    let e = Config::from_toml_and_env(
        "upstream.base_url = \"http://x/v1\"\nlisten_on = 1",
        Vec::new(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("listen_on"), "{e}");
    let e = Config::from_toml_and_env("", Vec::new()).unwrap_err();
    assert!(e.to_string().contains("--upstream"), "{e}");
}

#[tokio::test]
async fn the_correction_model_fixes_what_rules_cannot() {
    let corrector = ScriptedProvider::start(Script::new().then(calls(vec![ToolCall::new(
        "fix",
        "get_weather",
        r#"{"city": "Paris", "days": 3}"#,
    )])))
    .await
    .unwrap();
    let extra = format!(
        "calls.invalid = [\"correct\", \"pass\"]\n[correction]\nbase_url = \"{}\"\nmodel = \"small\"",
        corrector.base_url()
    );
    let r = start(
        Script::new().then(calls(vec![
            ToolCall::new("c1", "get_weather", r#"{"city": "Paris", "days": "three"}"#),
            ToolCall::new("c2", "get_weather", r#"{"days": 3}"#),
        ])),
        &extra,
    )
    .await;
    let resp = post(&r, &request(ask(), false)).await;
    assert!(header(&resp, "x-toolmend-fixes").contains("arguments_corrected"));
    // c2 misses `city`: never sent to the model (it would invent it), passed flagged.
    assert_eq!(header(&resp, "x-toolmend-unresolved"), "c2");
    let body: Value = resp.json().await.unwrap();
    let args: Value = serde_json::from_str(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"city": "Paris", "days": 3}));
    assert_eq!(corrector.requests().len(), 1);
    assert_eq!(r.provider.requests().len(), 1, "no re-ask in this chain");
    // A chain without a [correction] is a configuration error.
    let e = Config::from_toml_and_env(
        "upstream.base_url = \"http://x/v1\"\ncalls.invalid = \"correct\"",
        Vec::new(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("[correction]"), "{e}");
}

#[tokio::test]
async fn a_re_ask_answered_with_text_reaches_the_client_as_text() {
    let question = "Which city do you mean?";
    let r = start(
        Script::new()
            .then(calls(vec![ToolCall::new(
                "c1",
                "get_weather",
                r#"{"days": 2}"#,
            )]))
            .then(said(question)),
        "",
    )
    .await;
    let body: Value = post(&r, &request(ask(), false)).await.json().await.unwrap();
    let choice = &body["choices"][0];
    assert_eq!(choice["message"]["content"], question);
    assert!(
        choice["message"]
            .get("tool_calls")
            .is_none_or(Value::is_null),
        "{choice}"
    );
    assert_eq!(choice["finish_reason"], "stop");
}

#[tokio::test]
async fn minted_ids_do_not_repeat_across_responses() {
    // The core's id rule: a minted id is `call_tm_<position>_<call>`, unique against the
    // request's history. The next turn carries this answer back, so its calls sit at
    // another position and cannot take the same id.
    let text = r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>"#;
    let r = start(Script::new().then(said(text)).then(said(text)), "").await;
    let mut messages = ask().as_array().unwrap().clone();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let body: Value = post(&r, &request(Value::Array(messages.clone()), false))
            .await
            .json()
            .await
            .unwrap();
        let message = body["choices"][0]["message"].clone();
        let id = message["tool_calls"][0]["id"].as_str().unwrap().to_owned();
        messages.push(message);
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "Sunny."}));
        messages.push(json!({"role": "user", "content": "And tomorrow?"}));
        ids.push(id);
    }
    assert_eq!(ids, ["call_tm_1_0", "call_tm_4_0"]);
    assert!(ids.iter().all(|id| id.len() <= 40), "{ids:?}");
}

#[tokio::test]
async fn json_and_stream_answers_are_planned_by_the_core_alike() {
    // One message: thinking in the content, a call without an id, an exact repeat of a
    // call (same id, same arguments: dropped), a call whose id the history used.
    let message = AssistantMessage {
        content: Some(Some(Content::Text(
            "<think>the user wants Paris</think>Checking.".into(),
        ))),
        tool_calls: Some(vec![
            ToolCall::new("", "get_weather", r#"{"city": "Paris"}"#),
            ToolCall::new("c1", "get_weather", r#"{"city": "Lyon"}"#),
            ToolCall::new("c1", "get_weather", r#"{"city": "Lyon"}"#),
            ToolCall::new("old", "get_weather", r#"{"city": "Nice"}"#),
        ]),
        ..Default::default()
    };
    let history = json!([
        {"role": "user", "content": "Weather in Nice?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "old", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Nice\"}"}}]},
        {"role": "tool", "tool_call_id": "old", "content": "Sunny."},
        {"role": "user", "content": "And Paris, Lyon, Nice again?"}
    ]);
    let r = start(
        Script::new()
            .then(Step::Reply(message.clone()))
            .then(Step::Reply(message)),
        "",
    )
    .await;
    let resp = post(&r, &request(history.clone(), false)).await;
    assert_eq!(
        header(&resp, "x-toolmend-outcomes"),
        "dropped=1 executed=3; tool_calls=4"
    );
    let body: Value = resp.json().await.unwrap();
    let m = &body["choices"][0]["message"];
    let json_ids: Vec<&str> = m["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(m["content"], "Checking.");
    assert_eq!(json_ids.len(), 3, "{m}");
    assert_eq!(json_ids[0], "call_tm_4_0");
    assert_eq!(json_ids[1], "c1");
    assert_ne!(json_ids[2], "old", "an id the history used is renamed");

    let (chunks, comment) = sse(post(&r, &request(history, true)).await).await;
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "Checking.", "thinking never streams: {chunks:?}");
    let stream_ids: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["id"].as_str())
        .collect();
    assert_eq!(stream_ids, json_ids);
    assert!(comment.contains("\"dropped\":1"), "{comment}");
    assert!(comment.contains("thinking_stripped"), "{comment}");
}

/// An upstream that streams slowly, or breaks off: what the scripted provider cannot do.
mod odd_upstream {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
        time::Duration,
    };

    use axum::{Router, body::Body, response::Response, routing::post};
    use futures::StreamExt;

    /// Sets the flag when the response body is dropped (the client went away).
    struct Dropped(Arc<AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn chunk(content: &str) -> String {
        format!(
            "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n"
        )
    }

    /// Streams one chunk, then one every 100 ms for a long time.
    pub async fn slow(dropped: Arc<AtomicBool>) -> String {
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move || {
                let guard = Dropped(Arc::clone(&dropped));
                async move {
                    let s = futures::stream::iter(0..600).then(move |i| {
                        let _keep = &guard;
                        async move {
                            if i > 0 {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            Ok::<_, std::convert::Infallible>(chunk("tick "))
                        }
                    });
                    Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(Body::from_stream(s))
                        .unwrap()
                }
            }),
        );
        serve(app).await
    }

    /// A text chunk as a server may write it (spaces, a `\u` escape, the keys in its own
    /// order), a finishing chunk, `[DONE]`.
    pub const VERBATIM: &str = r#"{ "id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [ { "index": 0, "delta": { "content": "caf\u00e9 au lait." }, "finish_reason": null } ] }"#;

    /// A text chunk that names `content` twice: JSON readers that keep the first see
    /// what a reader that keeps the last (serde) does not.
    pub const DUPLICATED: &str = r#"{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"<tool_call>{\"name\": \"secret\"}</tool_call>","content":"Fine."},"finish_reason":null}]}"#;

    /// Streams `first` (a chunk's JSON), a finishing chunk, `[DONE]`.
    pub async fn verbatim(first: &'static str) -> String {
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move || async move {
                let body = format!(
                    "data: {first}\n\ndata: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
                );
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(body))
                    .unwrap()
            }),
        );
        serve(app).await
    }

    /// Sends one chunk, then a broken line and closes without `[DONE]`.
    pub async fn broken() -> String {
        let app = Router::new().route(
            "/v1/chat/completions",
            post(|| async {
                let body = format!("{}data: {{\"id\":\"x\",\"choi", chunk("Hel"));
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from(body))
                    .unwrap()
            }),
        );
        serve(app).await
    }

    async fn serve(app: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/v1")
    }
}

async fn gateway_for(upstream: &str) -> String {
    let config =
        Config::from_toml_and_env(&format!("upstream.base_url = \"{upstream}\""), Vec::new())
            .unwrap();
    let gateway = Arc::new(Gateway::new(config, None).unwrap());
    let addr = common::serve(gateway).await;
    format!("http://{addr}/v1")
}

/// A text delta that carries nothing to hold back goes out as the upstream's own bytes
/// (not parsed and written again), with tools declared or not.
#[tokio::test]
async fn a_text_delta_left_as_it_came_goes_out_as_the_upstreams_bytes() {
    let url = gateway_for(&odd_upstream::verbatim(odd_upstream::VERBATIM).await).await;
    for with_tools in [false, true] {
        let mut body = request(ask(), true);
        if with_tools {
            body["tools"] = common::weather_tools();
        }
        let text = reqwest::Client::new()
            .post(format!("{url}/chat/completions"))
            .json(&body)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            text.contains(&format!("data: {}\n\n", odd_upstream::VERBATIM)),
            "tools {with_tools}: {text}"
        );
        assert!(text.contains("data: [DONE]"), "{text}");
    }
}

/// A chunk that names a key twice is written again from what the gateway read, never
/// forwarded as it came: a client whose reader keeps the first value would see what the
/// gateway never looked at.
#[tokio::test]
async fn a_chunk_naming_a_key_twice_is_not_forwarded_as_it_came() {
    let url = gateway_for(&odd_upstream::verbatim(odd_upstream::DUPLICATED).await).await;
    let text = reqwest::Client::new()
        .post(format!("{url}/chat/completions"))
        .json(&request(ask(), true))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains("secret"), "{text}");
    assert!(text.contains("Fine."), "{text}");
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_upstream_request() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dropped = Arc::new(AtomicBool::new(false));
    let url = gateway_for(&odd_upstream::slow(Arc::clone(&dropped)).await).await;
    let mut resp = reqwest::Client::new()
        .post(format!("{url}/chat/completions"))
        .json(&request(ask(), true))
        .send()
        .await
        .unwrap();
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("tick"));
    drop(resp);
    // The upstream's stream (60 s or more) is dropped before its end: waited for (at most
    // common::WAIT, half of it), never timed.
    common::eventually("the upstream stream dropped after the client left", || {
        if dropped.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("still streaming".to_owned())
        }
    })
    .await;
}

#[tokio::test]
async fn a_broken_upstream_stream_ends_in_a_clear_error_event() {
    let url = gateway_for(&odd_upstream::broken().await).await;
    let text = reqwest::Client::new()
        .post(format!("{url}/chat/completions"))
        .json(&request(ask(), true))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("\"content\":\"Hel\""), "{text}");
    let error_line = text
        .lines()
        .find(|l| l.contains("\"error\""))
        .unwrap_or_else(|| panic!("no error event in {text}"));
    assert!(
        error_line.contains("upstream_stream_error") || error_line.contains("upstream"),
        "{error_line}"
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

#[tokio::test]
async fn limits_body_size_trim_and_upstream_timeout() {
    // A body over the limit: 413, nothing sent upstream.
    let r = start(
        Script::new().then(said("ok")),
        "limits.max_body_bytes = 1024",
    )
    .await;
    let big = request(
        json!([{"role": "user", "content": "x".repeat(4096)}]),
        false,
    );
    assert_eq!(post(&r, &big).await.status(), 413);
    assert!(r.provider.requests().is_empty());

    // A token budget: the oldest turns go, whole; system and first user message stay.
    let r = start(
        Script::new().then(said("ok")),
        "[history]\nmax_tokens = 60\nencoding = \"bytes\"",
    )
    .await;
    let mut messages = vec![
        json!({"role": "system", "content": "be brief"}),
        json!({"role": "user", "content": "first"}),
    ];
    for i in 0..20 {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("t{i}"), "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("t{i}"), "content": "sunny and warm all day long"}));
    }
    messages.push(json!({"role": "user", "content": "last"}));
    let resp = post(&r, &request(Value::Array(messages.clone()), false)).await;
    assert_eq!(resp.status(), 200);
    assert!(
        header(&resp, "x-toolmend-history").contains("trimmed; dropped="),
        "{:?}",
        resp.headers()
    );
    let sent = r.provider.requests()[0]["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert!(sent.len() < messages.len());
    assert_eq!(sent[0]["content"], "be brief");
    assert_eq!(sent[1]["content"], "first");
    assert_eq!(sent.last().unwrap()["content"], "last");
    let kept: Vec<toolmend::conversation::Message> =
        serde_json::from_value(Value::Array(sent)).unwrap();
    assert!(
        toolmend::history::check(&kept).is_empty(),
        "trimmed by whole groups"
    );

    // An upstream that accepts and never answers: 504 in OpenAI's error shape.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = silent.accept().await {
            held.push(conn);
        }
    });
    let config = Config::from_toml_and_env(
        &format!("upstream.base_url = \"http://{addr}/v1\"\nupstream.timeout_secs = 0.3"),
        Vec::new(),
    )
    .unwrap();
    let gateway = Arc::new(Gateway::new(config, None).unwrap());
    let gw_addr = common::serve(gateway).await;
    let resp = reqwest::Client::new()
        .post(format!("http://{gw_addr}/v1/chat/completions"))
        .json(&request(ask(), false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 504);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_timeout");
}

#[tokio::test]
async fn a_rate_limit_keeps_its_retry_after_and_rate_limit_headers() {
    use axum::{Router, response::IntoResponse, routing::post as route_post};
    let app = Router::new().route(
        "/v1/chat/completions",
        route_post(|| async {
            (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "7"), ("x-ratelimit-remaining-requests", "0"), ("content-type", "application/json")],
                r#"{"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}"#,
            )
                .into_response()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = gateway_for(&format!("http://{addr}/v1")).await;
    let resp = reqwest::Client::new()
        .post(format!("{url}/chat/completions"))
        .json(&request(ask(), false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(header(&resp, "retry-after"), "7");
    assert_eq!(header(&resp, "x-ratelimit-remaining-requests"), "0");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
}

#[tokio::test]
async fn strip_thinking_off_keeps_the_reasoning_in_json_and_stream() {
    // `calls.strip_thinking = false`: the content reaches the client as the model wrote it,
    // on both paths; the default (on) is held by the test above.
    let message: AssistantMessage = serde_json::from_value(json!({
        "content": "<think>the user wants Paris</think>Checking.",
        "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]
    }))
    .unwrap();
    let r = start(
        Script::new()
            .then(Step::Reply(message.clone()))
            .then(Step::Reply(message)),
        "calls.strip_thinking = false",
    )
    .await;
    let history = json!([{"role": "user", "content": "Weather in Paris?"}]);
    let body: Value = post(&r, &request(history.clone(), false))
        .await
        .json()
        .await
        .unwrap();
    let kept = "<think>the user wants Paris</think>Checking.";
    assert_eq!(body["choices"][0]["message"]["content"], kept);
    let (chunks, _) = sse(post(&r, &request(history, true)).await).await;
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, kept);
}
