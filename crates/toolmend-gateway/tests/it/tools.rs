//! The gateway's own tools, end to end on 127.0.0.1, no mocks: a real client (reqwest)
//! -> the gateway -> the strict scripted provider (which refuses any history OpenAI
//! would refuse), with HTTP tool services (axum) speaking the envelope. The round trip
//! (model -> server-side tools -> model, JSON and streamed; dirty answers; the bounds;
//! answers mixing server-side and client calls) and `POST /v1/tools/execute`.

use std::sync::{Arc, Mutex};

use axum::{
    Json, Router,
    extract::{Path, State},
    http::HeaderMap,
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, Content, ToolCall};
use toolmend_gateway::{
    Config, Gateway,
    toolmend_tools::{LoadError, ToolsFile},
};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::common::{self, WAIT};

// ---------------------------------------------------------------------------------------
// The tool services.

/// One call a service received.
#[derive(Debug, Clone)]
struct Hit {
    route: String,
    call_id: String,
    trace_id: String,
    body: Value,
}

type Hits = Arc<Mutex<Vec<Hit>>>;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn service(
    State(hits): State<Hits>,
    Path(route): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let h = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let id = h("x-tool-call-id");
    hits.lock().unwrap().push(Hit {
        route: route.clone(),
        call_id: id.clone(),
        trace_id: h("x-trace-id"),
        body: body.clone(),
    });
    let ok = |data: Value| {
        Json(json!({"status": "success", "data": data, "call_id": id, "timestamp": now_ms()}))
            .into_response()
    };
    let args = &body["arguments"];
    match route.as_str() {
        "lookup" => ok(json!({"city": args["q"], "population": 2_100_000})),
        "weather" => ok(json!({"city": args["city"], "temp_c": 21})),
        // Another call's answer: never the model's to read.
        "dirty" => Json(
            json!({"status": "success", "data": {"secret": "TOP-SECRET-42"},
            "call_id": "call_someone_else", "timestamp": now_ms()}),
        )
        .into_response(),
        // Never answers: only a timeout ends a call to it.
        "slow" | "stuck" => std::future::pending().await,
        _ => axum::http::StatusCode::NOT_FOUND.into_response(),
    }
}

async fn tool_service() -> (String, Hits) {
    let hits: Hits = Arc::default();
    let app = Router::new()
        .route("/{route}", post(service))
        .with_state(Arc::clone(&hits));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), hits)
}

/// The tools, in the gateway's own configuration.
fn tools_toml(base: &str) -> String {
    format!(
        r#"
[[tools]]
name = "lookup"
description = "Facts about a city."
endpoint = "{base}/lookup"
server_side = true
parameters_json = '{{"type": "object", "properties": {{"q": {{"type": "string"}}}}, "required": ["q"], "additionalProperties": false}}'

[[tools]]
name = "weather"
description = "Weather for a city."
endpoint = "{base}/weather"
server_side = true
parameters_json = '{{"type": "object", "properties": {{"city": {{"type": "string"}}}}, "required": ["city"]}}'

[[tools]]
name = "dirty"
description = "A service that answers for another call."
endpoint = "{base}/dirty"
server_side = true
parameters = {{ type = "object" }}

[[tools]]
name = "slow"
description = "A service that never answers, with a timeout."
endpoint = "{base}/slow"
server_side = true
timeout_ms = 300
parameters = {{ type = "object" }}

[[tools]]
name = "stuck"
description = "A service that never answers, with a timeout longer than any test."
endpoint = "{base}/stuck"
server_side = true
timeout_ms = 600000
parameters = {{ type = "object" }}
"#
    )
}

// ---------------------------------------------------------------------------------------
// The gateway and the provider.

struct Running {
    url: String,
    base: String,
    provider: ScriptedProvider,
    hits: Hits,
    http: reqwest::Client,
}

async fn start(script: Script, extra: &str) -> Running {
    let (tools_base, hits) = tool_service().await;
    let provider = ScriptedProvider::start(script).await.unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\n{extra}\n{}",
        provider.base_url(),
        tools_toml(&tools_base)
    );
    let config = Config::from_toml_and_env(&toml, Vec::new()).unwrap();
    let file = ToolsFile::parse_section(&toml, "gateway.toml").unwrap();
    let metrics = toolmend_gateway::metrics::install().ok();
    let gateway = Arc::new(Gateway::with_tools(config, metrics, &file).await.unwrap());
    let addr = common::serve(gateway).await;
    Running {
        url: format!("http://{addr}/v1"),
        base: format!("http://{addr}"),
        provider,
        hits,
        // Bounded: a call that should have timed out fails the test, never hangs it.
        http: reqwest::Client::builder().timeout(WAIT).build().unwrap(),
    }
}

fn calls(list: &[(&str, &str, &str)]) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(
            list.iter()
                .map(|(id, name, args)| ToolCall::new(*id, *name, *args))
                .collect(),
        ),
        ..Default::default()
    })
}

fn said(text: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(Some(Content::Text(text.into()))),
        ..Default::default()
    })
}

const FINAL: &str = "Paris: 2.1 million people, 21 °C.";

/// The three-round agent: lookup, then weather, then the answer.
fn three_rounds() -> Script {
    Script::new()
        .then(calls(&[("c1", "lookup", r#"{"q": "Paris"}"#)]))
        .then(calls(&[("c2", "weather", r#"{"city": "Paris"}"#)]))
        .then(said(FINAL))
}

fn ask() -> Value {
    json!([{"role": "user", "content": "How many people live in Paris, and how warm is it?"}])
}

/// A client tool the gateway does not serve.
fn client_tools() -> Value {
    json!([{"type": "function", "function": {"name": "send_email", "description": "Send an email.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}}])
}

async fn chat(r: &Running, body: Value) -> reqwest::Response {
    r.http
        .post(format!("{}/chat/completions", r.url))
        .header("x-request-id", "trace-abc")
        .json(&body)
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

/// Every request the provider received was one it accepted: the strict provider answers
/// 400 to a broken history, and the script has a step only for each accepted one.
fn assert_provider_refused_nothing(r: &Running, expected_requests: usize) {
    let requests = r.provider.requests();
    assert_eq!(requests.len(), expected_requests, "{requests:#?}");
    assert_eq!(r.provider.remaining(), 0, "every scripted answer was used");
    for req in &requests {
        let messages: Vec<toolmend::conversation::Message> =
            serde_json::from_value(req["messages"].clone()).unwrap();
        assert!(
            toolmend::history::check(&messages).is_empty(),
            "a history the provider would refuse: {req:#}"
        );
    }
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The `data:` payloads of an SSE body, `[DONE]` included.
fn events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------
// (a) The bar: a three-round agent in one client request.

#[tokio::test]
async fn a_three_round_agent_completes_in_one_client_request() {
    let r = start(three_rounds(), "").await;
    let resp = chat(&r, json!({"model": "m", "messages": ask()})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-round-trip"),
        "rounds=3; server_calls=2; errors=0"
    );
    assert_eq!(header(&resp, "x-request-id"), "trace-abc");
    // The final answer's own headers: it has no calls.
    assert_eq!(header(&resp, "x-toolmend-outcomes"), "none");
    let body: Value = resp.json().await.unwrap();
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], FINAL);
    assert!(
        message.get("tool_calls").is_none_or(Value::is_null),
        "{body:#}"
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["choices"].as_array().unwrap().len(), 1);

    assert_provider_refused_nothing(&r, 3);
    let requests = r.provider.requests();
    // The client sent no tools; the gateway told the model about its own.
    for req in &requests {
        let names = tool_names(req);
        assert!(names.contains(&"lookup".to_owned()) && names.contains(&"weather".to_owned()));
    }
    // Round 2 carries the first call and its result; round 3 both.
    let m2 = requests[1]["messages"].as_array().unwrap();
    assert_eq!(m2.len(), 3);
    assert_eq!(m2[1]["tool_calls"][0]["id"], "c1");
    assert_eq!(m2[2]["role"], "tool");
    assert_eq!(m2[2]["tool_call_id"], "c1");
    assert!(
        m2[2]["content"].as_str().unwrap().contains("2100000"),
        "{m2:#?}"
    );
    let m3 = requests[2]["messages"].as_array().unwrap();
    assert_eq!(m3.len(), 5);
    assert_eq!(m3[3]["tool_calls"][0]["function"]["name"], "weather");
    assert_eq!(m3[4]["tool_call_id"], "c2");
    assert!(m3[4]["content"].as_str().unwrap().contains("21"));

    // Each tool service got its call once, with the call id and the request's trace id.
    let hits = r.hits.lock().unwrap().clone();
    let seen: Vec<(&str, &str, &str)> = hits
        .iter()
        .map(|h| (h.route.as_str(), h.call_id.as_str(), h.trace_id.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("lookup", "c1", "trace-abc"),
            ("weather", "c2", "trace-abc")
        ]
    );
    assert_eq!(
        hits[0].body,
        json!({"function": "lookup", "arguments": {"q": "Paris"}})
    );

    // Metrics: the round trip's rounds and time, each server-side call, and the tools'
    // SLA histograms, all as Prometheus histograms.
    let metrics = r
        .http
        .get(format!("{}/metrics", r.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for want in [
        "toolmend_round_trip_rounds_bucket{le=\"3\"} 1",
        "toolmend_round_trip_rounds_sum 3",
        "toolmend_round_trip_seconds_bucket{le=\"60\"} 1",
        "toolmend_server_tool_calls_total{tool=\"lookup\",outcome=\"success\"} 1",
        "toolmend_server_tool_calls_total{tool=\"weather\",outcome=\"success\"} 1",
        "toolmend_tool_service_seconds_bucket{tool=\"lookup\",le=\"120\"} 1",
        "toolmend_tool_call_initiation_seconds_bucket{tool=\"weather\",le=\"120\"} 1",
        "toolmend_tool_result_injection_seconds_bucket{tool=\"weather\",le=\"120\"} 1",
        "toolmend_tool_round_trip_seconds_bucket{tool=\"lookup\",le=\"120\"} 1",
    ] {
        assert!(metrics.contains(want), "missing {want:?} in\n{metrics}");
    }
    assert!(
        !metrics.contains("toolmend_tool_service_seconds{tool=\"lookup\",quantile"),
        "a summary, not a histogram"
    );
}

#[tokio::test]
async fn two_server_side_calls_in_one_answer_then_the_answer() {
    let script = Script::new()
        .then(calls(&[
            ("c1", "lookup", r#"{"q": "Paris"}"#),
            ("c2", "weather", r#"{"city": "Paris"}"#),
        ]))
        .then(said(FINAL));
    let r = start(script, "").await;
    let resp = chat(&r, json!({"model": "m", "messages": ask()})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-round-trip"),
        "rounds=2; server_calls=2; errors=0"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], FINAL);
    assert_provider_refused_nothing(&r, 2);
    let m2 = r.provider.requests()[1]["messages"].clone();
    let ids: Vec<&str> = m2.as_array().unwrap()[2..]
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1", "c2"], "one result per call id, in call order");
    assert_eq!(r.hits.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_broken_server_side_call_is_mended_before_it_runs() {
    // Single quotes and a trailing comma: repaired, then run with the repaired arguments.
    let script = Script::new()
        .then(calls(&[("c1", "lookup", "{'q': 'Paris',}")]))
        .then(said(FINAL));
    let r = start(script, "").await;
    let resp = chat(&r, json!({"model": "m", "messages": ask()})).await;
    assert_eq!(resp.status(), 200);
    assert_provider_refused_nothing(&r, 2);
    let hits = r.hits.lock().unwrap().clone();
    assert_eq!(hits[0].body["arguments"], json!({"q": "Paris"}));
    // What the model reads back is valid JSON in the history it is sent.
    let m2 = r.provider.requests()[1]["messages"].clone();
    assert_eq!(
        m2[1]["tool_calls"][0]["function"]["arguments"],
        r#"{"q":"Paris"}"#
    );
}

// ---------------------------------------------------------------------------------------
// (b) The same, streamed.

#[tokio::test]
async fn the_round_trip_streamed_writes_the_final_answer_in_openais_chunk_format() {
    let r = start(three_rounds(), "").await;
    let resp = chat(
        &r,
        json!({"model": "m", "messages": ask(), "stream": true,
               "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "text/event-stream");
    assert_eq!(
        header(&resp, "x-toolmend-round-trip"),
        "rounds=3; server_calls=2; errors=0"
    );
    let text = resp.text().await.unwrap();
    let events = events(&text);
    assert_eq!(events.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert!(c["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert!(c["created"].is_u64() && c["model"] == "m");
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, FINAL);
    let finish: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0].get("finish_reason"))
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("stop")]);
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["total_tokens"].as_u64().unwrap() > 0);
    // The closing report names the round trip.
    assert!(text.contains(": toolmend {"), "{text}");
    assert!(text.contains(r#""round_trip":{"rounds":3"#), "{text}");
    // Every round was read whole; the provider saw no stream options.
    assert_provider_refused_nothing(&r, 3);
    for req in r.provider.requests() {
        assert_eq!(req["stream"], false);
        assert!(req.get("stream_options").is_none());
    }
}

// ---------------------------------------------------------------------------------------
// (c) A dirty answer in the round trip.

#[tokio::test]
async fn a_dirty_tool_answer_reaches_the_model_as_an_error_never_as_data() {
    let script = Script::new()
        .then(calls(&[
            ("c1", "dirty", "{}"),
            ("c2", "lookup", r#"{"q": "Paris"}"#),
        ]))
        .then(said("The first service failed."));
    let r = start(script, "").await;
    let resp = chat(&r, json!({"model": "m", "messages": ask()})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-round-trip"),
        "rounds=2; server_calls=2; errors=1"
    );
    assert_provider_refused_nothing(&r, 2);
    let sent = r.provider.requests()[1].to_string();
    assert!(
        !sent.contains("TOP-SECRET-42"),
        "another call's data reached the model: {sent}"
    );
    let m2 = r.provider.requests()[1]["messages"].clone();
    assert_eq!(m2[2]["tool_call_id"], "c1");
    let error = m2[2]["content"].as_str().unwrap();
    assert!(error.starts_with("Error:"), "{error}");
    assert!(error.contains("call_someone_else"), "{error}");
    // The other call of the answer is answered with its own data.
    assert_eq!(m2[3]["tool_call_id"], "c2");
    assert!(m2[3]["content"].as_str().unwrap().contains("2100000"));
    let metrics = r
        .http
        .get(format!("{}/metrics", r.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for want in [
        "toolmend_server_tool_calls_total{tool=\"dirty\",outcome=\"error\"} 1",
        // Dropped, counted and labelled by the tool that answered dirty.
        "toolmend_tool_dirty_answers_total{tool=\"dirty\"} 1",
        "toolmend_tool_calls_total{tool=\"dirty\",result=\"dirty\"} 1",
    ] {
        assert!(metrics.contains(want), "missing {want:?} in\n{metrics}");
    }
}

// ---------------------------------------------------------------------------------------
// (d) The bounds.

#[tokio::test]
async fn the_round_limit_is_an_openai_error_naming_the_rounds() {
    let script = Script::new()
        .then(calls(&[("c1", "lookup", r#"{"q": "Paris"}"#)]))
        .then(calls(&[("c2", "lookup", r#"{"q": "Lyon"}"#)]));
    let r = start(script, "[round_trip]\nmax_rounds = 2\n").await;
    let resp = chat(&r, json!({"model": "m", "messages": ask()})).await;
    assert_eq!(resp.status(), 504);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "toolmend_round_trip_limit");
    assert_eq!(body["error"]["type"], "server_error");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("round_trip.max_rounds (2)"), "{msg}");
    assert!(msg.contains("rounds=2; server_calls=1"), "{msg}");
    assert!(msg.contains("lookup"), "{msg}");
    assert_provider_refused_nothing(&r, 2);
    // The call of the last round was not run: nobody would read its result.
    assert_eq!(r.hits.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn the_time_limit_cuts_the_tools_and_answers_504() {
    // The tool never answers and its own timeout is longer than the test: only the round
    // trip's limit can end the request (the client's bound is common::WAIT).
    let script = Script::new()
        .then(calls(&[("c1", "stuck", "{}")]))
        .then(said("never asked"));
    let r = start(script, "[round_trip]\nmax_secs = 0.2\n").await;
    let resp = chat(&r, json!({"model": "m", "messages": ask()})).await;
    assert_eq!(resp.status(), 504);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "toolmend_round_trip_limit");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("round_trip.max_secs (0.2 s)"), "{msg}");
    assert!(msg.contains("rounds=1; server_calls=1; errors=1"), "{msg}");
}

// ---------------------------------------------------------------------------------------
// (f) An answer that mixes server-side and client calls.

#[tokio::test]
async fn a_mixed_answer_runs_the_server_side_calls_and_gives_the_client_only_its_own() {
    let mixed = || {
        calls(&[
            ("c1", "lookup", r#"{"q": "Paris"}"#),
            ("c2", "send_email", r#"{"to": "ann@example.com"}"#),
        ])
    };
    let r = start(Script::new().then(mixed()).then(mixed()), "").await;
    let body = json!({"model": "m", "messages": ask(), "tools": client_tools()});
    let resp = chat(&r, body.clone()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-round-trip"),
        "rounds=1; server_calls=1; errors=0; unseen=1"
    );
    assert_eq!(
        header(&resp, "x-toolmend-outcomes"),
        "executed=1; tool_calls=1"
    );
    let answer: Value = resp.json().await.unwrap();
    let calls = answer["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["id"], "c2");
    assert_eq!(calls[0]["function"]["name"], "send_email");
    assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
    // The server-side call ran.
    assert_eq!(r.hits.lock().unwrap()[0].call_id, "c1");
    // The client's tools and the gateway's went upstream.
    let names = tool_names(&r.provider.requests()[0]);
    assert!(names.contains(&"send_email".to_owned()) && names.contains(&"lookup".to_owned()));

    // Streamed: the client's call in OpenAI's tool_calls deltas.
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let resp = chat(&r, streamed).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let deltas: Vec<Value> = events(&text)
        .iter()
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .filter_map(|c| c["choices"][0]["delta"].get("tool_calls").cloned())
        .collect();
    assert_eq!(
        deltas,
        [json!([{"index": 0, "id": "c2", "type": "function",
            "function": {"name": "send_email", "arguments": "{\"to\": \"ann@example.com\"}"}}])]
    );
    assert!(text.contains("\"finish_reason\":\"tool_calls\""), "{text}");
    assert_provider_refused_nothing(&r, 2);
}

#[tokio::test]
async fn without_server_side_calls_an_answer_passes_as_before() {
    let script = Script::new().then(calls(&[("c9", "send_email", r#"{"to": "x@y.z"}"#)]));
    let r = start(script, "").await;
    let resp = chat(
        &r,
        json!({"model": "m", "messages": ask(), "tools": client_tools()}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-round-trip"),
        "rounds=1; server_calls=0; errors=0"
    );
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["tool_calls"][0]["id"], "c9");
    assert!(r.hits.lock().unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------
// (e) POST /v1/tools/execute.

async fn execute(r: &Running, body: Value) -> (u16, Value) {
    let resp = r
        .http
        .post(format!("{}/tools/execute", r.url))
        .header("x-request-id", "exec-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// A guard budget with `exit_behavior = "error"` refuses the request (429, as the chat
/// path's refusals: `x-should-retry: false`, so the SDKs do not send it again).
#[tokio::test]
async fn execute_past_an_erroring_budget_is_a_429_not_to_be_retried() {
    let r = start(
        Script::new(),
        "[guard.limits]\nrun_limit = 1\nexit_behavior = \"error\"",
    )
    .await;
    let call = |id: &str| {
        json!({"id": id, "type": "function", "function": {"name": "lookup",
            "arguments": "{\"q\": \"Paris\"}"}})
    };
    let resp = r
        .http
        .post(format!("{}/tools/execute", r.url))
        .json(
            &json!({"session": "alice", "messages": [{"role": "user", "content": "facts"},
            {"role": "assistant", "content": null, "tool_calls": [call("a1"), call("a2")]}]}),
        )
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers["x-should-retry"], "false");
    assert_eq!(body["error"]["code"], "toolmend_tool_flood", "{body}");
}

#[tokio::test]
async fn execute_answers_each_call_id_exactly_once() {
    let r = start(Script::new(), "").await;
    let message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "v1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"Paris\"}"}},
        {"id": "r1", "type": "function", "function": {"name": "weather", "arguments": "{'city': 'Rome',}"}},
        // A required field missing and nothing that could be it (a lone unknown key of
        // the right type would now be read as it, by the schema's structure).
        {"id": "i1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
    ]});
    let (status, out) = execute(
        &r,
        json!({"messages": [
        {"role": "user", "content": "facts"}, message]}),
    )
    .await;
    assert_eq!(status, 200, "{out:#}");
    let messages = out["messages"].as_array().unwrap();
    let ids: Vec<&str> = messages
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["v1", "r1", "i1"],
        "one tool message per call id, in call order"
    );
    for m in messages {
        assert_eq!(m["role"], "tool");
        assert!(
            m.get("artifact").is_none() && m.get("metadata").is_none(),
            "{m:#}"
        );
    }
    let results = out["results"].as_array().unwrap();
    let got: Vec<(&str, &str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["call_id"].as_str().unwrap(),
                r["status"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("v1", "success", "executed"),
            ("r1", "success", "executed"),
            ("i1", "error", "feedback")
        ]
    );
    // The payload is the caller's artifact; the metadata names the trace.
    assert_eq!(
        results[0]["artifact"],
        json!({"city": "Paris", "population": 2_100_000})
    );
    assert_eq!(results[0]["metadata"]["trace_id"], "exec-1");
    assert!(results[2]["artifact"].is_null());
    // The invalid call got feedback naming what is wrong; it never ran.
    let feedback = messages[2]["content"].as_str().unwrap();
    assert!(feedback.contains('q'), "{feedback}");
    let hits = r.hits.lock().unwrap().clone();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[1].body["arguments"], json!({"city": "Rome"}));
    assert!(hits.iter().all(|h| h.trace_id == "exec-1"));
    // The sanitized assistant message: the repaired call as valid JSON.
    assert_eq!(out["assistant"]["role"], "assistant");
    assert_eq!(
        out["assistant"]["tool_calls"][1]["function"]["arguments"],
        r#"{"city":"Rome"}"#
    );
    assert_eq!(out["stats"]["calls"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn execute_answers_a_timeout_and_an_unknown_tool() {
    // `slow` never answers: the answer came, so its 300 ms timeout ended the call (the
    // client's bound is common::WAIT).
    let r = start(Script::new(), "").await;
    let (status, out) = execute(
        &r,
        json!({"tool_calls": [
            {"id": "s1", "type": "function", "function": {"name": "slow", "arguments": "{}"}},
            {"id": "u1", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        ]}),
    )
    .await;
    assert_eq!(status, 200, "{out:#}");
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["call_id"], "s1");
    assert_eq!(results[0]["status"], "error");
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("did not finish within 300 ms"),
        "{:#}",
        results[0]
    );
    // Whose fault, for the client: the tool's (it may have run), not the call's; the
    // model is not told to fix its call.
    assert_eq!(results[0]["fault"], "timeout", "{:#}", results[0]);
    assert!(
        !results[0]["content"]
            .as_str()
            .unwrap()
            .contains("fix your mistakes")
    );
    assert_eq!(results[1]["call_id"], "u1");
    assert_eq!(results[1]["outcome"], "feedback");
    assert!(results[1]["fault"].is_null());
    assert!(results[1]["content"].as_str().unwrap().contains("nope"));
    assert_eq!(out["messages"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn execute_with_one_message_restricted_tools_and_the_tools_own_limits() {
    let r = start(Script::new(), "").await;
    // `message`: the assistant message alone; `tools`: only weather may run.
    let (status, out) = execute(
        &r,
        json!({"message": {"tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"x\"}"}},
            {"id": "b", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"x\"}"}},
        ]}, "tools": ["weather"]}),
    )
    .await;
    assert_eq!(status, 200, "{out:#}");
    let results = out["results"].as_array().unwrap();
    // Outside the list: an unknown tool for this request, feedback naming the allowed.
    assert_eq!(results[0]["outcome"], "feedback");
    assert_eq!(results[0]["status"], "error");
    let feedback = results[0]["content"].as_str().unwrap();
    assert!(
        feedback.contains("weather") && !feedback.contains("flood"),
        "{feedback}"
    );
    assert_eq!(results[1]["status"], "success");
    let routes: Vec<String> = r
        .hits
        .lock()
        .unwrap()
        .iter()
        .map(|h| h.route.clone())
        .collect();
    assert_eq!(routes, ["weather"]);
    // A name the gateway does not serve.
    let (status, out) = execute(&r, json!({"tool_calls": [], "tools": ["nope"]})).await;
    assert_eq!(status, 400);
    assert_eq!(out["error"]["code"], "invalid_tools");
}

#[tokio::test]
async fn execute_applies_the_guard_with_the_tools_limits_per_session() {
    let (tools_base, _hits) = tool_service().await;
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    let toml = format!(
        r#"upstream.base_url = "{}"
[[tools]]
name = "lookup"
endpoint = "{tools_base}/lookup"
parameters = {{ type = "object", properties = {{ q = {{ type = "string" }} }} }}
limits = {{ session = {{ limit = 1, window_secs = 60 }} }}
"#,
        provider.base_url()
    );
    let config = Config::from_toml_and_env(&toml, Vec::new()).unwrap();
    let file = ToolsFile::parse_section(&toml, "gateway.toml").unwrap();
    let gateway = Arc::new(Gateway::with_tools(config, None, &file).await.unwrap());
    let addr = common::serve(gateway).await;
    let http = reqwest::Client::new();
    let run = |id: &'static str, session: &'static str| {
        let http = http.clone();
        async move {
            let v: Value = http
                .post(format!("http://{addr}/v1/tools/execute"))
                .json(
                    &json!({"session": session, "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": "lookup", "arguments": format!("{{\"q\": \"{id}\"}}")}}]}),
                )
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            v["results"][0]["outcome"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(run("k1", "alice").await, "executed");
    assert_eq!(run("k2", "alice").await, "flooded", "limit 1 per session");
    assert_eq!(
        run("k3", "bob").await,
        "executed",
        "another session has its own"
    );
}

#[tokio::test]
async fn execute_errors_are_openai_shaped() {
    let r = start(Script::new(), "").await;
    let post = |body: &'static str| {
        let http = r.http.clone();
        let url = format!("{}/tools/execute", r.url);
        async move {
            let resp = http
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };
    for (body, code) in [
        ("{not json", "invalid_json"),
        ("[1]", "invalid_body"),
        ("{}", "missing_messages"),
        (
            r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
            "invalid_messages",
        ),
        (r#"{"messages": [], "tool_calls": []}"#, "invalid_body"),
        (r#"{"tool_calls": "x"}"#, "invalid_messages"),
        (r#"{"tool_calls": [], "session": 5}"#, "invalid_session"),
    ] {
        let (status, v) = post(body).await;
        assert_eq!(status, 400, "{body}: {v:#}");
        assert_eq!(v["error"]["code"], code, "{body}: {v:#}");
        let mut keys: Vec<&String> = v["error"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["code", "message", "param", "type"]);
    }
}

#[tokio::test]
async fn execute_without_tools_is_a_clear_404() {
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    let config = Config::from_toml_and_env(
        &format!("upstream.base_url = \"{}\"", provider.base_url()),
        Vec::new(),
    )
    .unwrap();
    let gateway = Arc::new(Gateway::new(config, None).unwrap());
    let addr = common::serve(gateway).await;
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/tools/execute"))
        .json(&json!({"tool_calls": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "toolmend_no_tools");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[[tools]]")
    );
}

// ---------------------------------------------------------------------------------------
// Configuration.

#[tokio::test]
async fn the_config_takes_tools_and_round_trip_and_names_the_line_of_a_bad_tool() {
    let toml = r#"upstream.base_url = "http://127.0.0.1:9/v1"
[round_trip]
max_rounds = 3
max_secs = 10
inject = false

[[tools]]
name = "ok"
endpoint = "http://127.0.0.1:9/ok"
parameters = { type = "object" }

[[tools]]
name = "broken"
endpoint = "not a url"
parameters = { type = "object" }
"#;
    let config = Config::from_toml_and_env(toml, Vec::new()).unwrap();
    assert_eq!(config.round_trip.max_rounds, 3);
    assert!(!config.round_trip.inject);
    let file = ToolsFile::parse_section(toml, "gateway.toml").unwrap();
    assert_eq!(file.tools.len(), 2);
    let err = Gateway::with_tools(config, None, &file)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("tools: gateway.toml:12: tool \"broken\": "),
        "{err}"
    );
    assert!(err.contains("not a URL"), "{err}");

    // A wrong type in a tool: the tools parser names the line.
    let bad = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n[[tools]]\nname = 5\n";
    assert!(
        Config::from_toml_and_env(bad, Vec::new()).is_ok(),
        "the tables are the tools loader's"
    );
    let e: LoadError = ToolsFile::parse_section(bad, "g.toml").unwrap_err();
    assert_eq!((e.origin.as_str(), e.line), ("g.toml", Some(3)));

    for (toml, key) in [
        ("[round_trip]\nmax_round = 3\n", "max_round"),
        (
            "[round_trip]\nmax_rounds = 1\n",
            "round_trip.max_rounds is 1",
        ),
        ("[round_trip]\nmax_secs = 0\n", "round_trip.max_secs is 0"),
    ] {
        let text = format!("upstream.base_url = \"http://127.0.0.1:9/v1\"\n{toml}");
        let err = Config::from_toml_and_env(&text, Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{err}");
    }
}

#[tokio::test]
async fn inject_off_runs_only_what_the_client_declares() {
    // With inject = false the model learns the server-side tools only from the client's
    // own `tools`; calls to them are still run by the gateway.
    let script = Script::new()
        .then(calls(&[("c1", "lookup", r#"{"q": "Paris"}"#)]))
        .then(said(FINAL));
    let r = start(script, "[round_trip]\ninject = false\n").await;
    let declared = json!([{"type": "function", "function": {"name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]);
    let resp = chat(
        &r,
        json!({"model": "m", "messages": ask(), "tools": declared}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-round-trip"),
        "rounds=2; server_calls=1; errors=0"
    );
    assert_eq!(tool_names(&r.provider.requests()[0]), ["lookup"]);
    assert_provider_refused_nothing(&r, 2);
}

#[tokio::test]
async fn the_guard_checks_every_round_and_a_refused_server_side_call_never_runs() {
    // lookup: once per session. Round 2 calls it again: the guard refuses it, the model is
    // re-asked with the guard's message (not a round), and answers.
    let script = Script::new()
        .then(calls(&[("c1", "lookup", r#"{"q": "Paris"}"#)]))
        .then(calls(&[("c2", "lookup", r#"{"q": "Lyon"}"#)]))
        .then(said(FINAL));
    let r = start(
        script,
        "[guard.tools.lookup]\nsession = { limit = 1, window_secs = 60 }\n",
    )
    .await;
    let resp = chat(
        &r,
        json!({"model": "m", "messages": ask(), "user": "alice"}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-round-trip"),
        "rounds=2; server_calls=1; errors=0"
    );
    let guard = header(&resp, "x-toolmend-guard");
    assert!(guard.starts_with("checked=2 refused=1 "), "{guard}");
    assert!(guard.contains("re_asks=1"), "{guard}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], FINAL);
    assert_provider_refused_nothing(&r, 3);
    // The re-ask carries the refused call and the guard's answer to it.
    let m3 = r.provider.requests()[2]["messages"].clone();
    let last = m3.as_array().unwrap().last().unwrap();
    assert_eq!(last["tool_call_id"], "c2");
    assert!(
        last["content"].as_str().unwrap().contains("session"),
        "{last:#}"
    );
    let routes: Vec<String> = r
        .hits
        .lock()
        .unwrap()
        .iter()
        .map(|h| h.call_id.clone())
        .collect();
    assert_eq!(routes, ["c1"], "the refused call never ran");
}
