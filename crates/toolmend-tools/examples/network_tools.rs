//! Tools behind HTTP, end to end, on loopback: a small tool service speaking the envelope
//! starts here, a tools file declares two tools on it, and the tool node answers a
//! message with three calls: one valid, one with an argument to repair (`"3"` for an
//! integer), one the service answers for another call (a dirty answer: dropped, never
//! given to the model).
//!
//! `cargo run -p toolmend-tools --example network_tools`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::disallowed_methods
)]

use axum::{Json, Router, http::HeaderMap, routing::post};
use serde_json::{Value, json};
use toolmend::{conversation::Message, node::ToolNode};
use toolmend_tools::{ToolSet, ToolsFile};

/// The tool service: `/weather` answers the envelope for the call it was sent; `/stale`
/// answers with another call's id, as a service mixing up its queue would.
async fn weather(headers: HeaderMap, Json(body): Json<Value>) -> Json<Value> {
    let id = headers
        .get("x-tool-call-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let days = body["arguments"]["days"].as_u64().unwrap_or(1);
    let forecast: Vec<Value> = (1..=days)
        .map(|d| json!({"day": d, "high": 18 + d, "sky": "clear"}))
        .collect();
    Json(json!({
        "status": "success",
        "data": {"city": body["arguments"]["city"], "temp": 21.46, "unit": "celsius", "forecast": forecast},
        "call_id": id,
        "timestamp": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64,
    }))
}

async fn stale() -> Json<Value> {
    Json(
        json!({"status": "success", "data": {"account": "someone else's"}, "call_id": "call_from_yesterday"}),
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/weather", post(weather))
        .route("/stale", post(stale));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let tools = format!(
        r#"
[[tools]]
name = "get_weather"
description = "Weather and forecast for a city."
endpoint = "http://{addr}/weather"
template = "{{{{ city }}}}: {{{{ temp | round(1) }}}} °C; next {{{{ forecast | length }}}} days: {{{{ forecast | map(attribute='high') | join(', ') }}}}"
[tools.parameters]
type = "object"
required = ["city"]
properties = {{ city = {{ type = "string" }}, days = {{ type = "integer", minimum = 1, maximum = 7 }} }}

[[tools]]
name = "get_balance"
description = "The balance of the user's account."
endpoint = "http://{addr}/stale"
parameters = {{ type = "object" }}
"#
    );
    let set = ToolSet::load(&ToolsFile::parse(&tools, "tools.toml").unwrap(), &|_| None)
        .await
        .unwrap();
    let node = ToolNode::builder(set.registry().unwrap()).build();
    let messages: Vec<Message> = serde_json::from_value(json!([
        {"role": "user", "content": "Weather in Paris and Lima, and my balance?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lima\", \"days\": \"3\"}"}},
            {"id": "call_3", "type": "function", "function": {"name": "get_balance", "arguments": "{}"}}
        ]}
    ]))
    .unwrap();
    let out = node.invoke(&messages).await.unwrap();
    for (r, s) in out.results.iter().zip(&out.stats.calls) {
        let content = match &r.content {
            toolmend::conversation::Content::Text(t) => t.clone(),
            other => serde_json::to_string(other).unwrap(),
        };
        let fixes: Vec<&str> = s.fixes.iter().map(|f| f.kind.id()).collect();
        println!(
            "{} {:<11} {:?} fixes={fixes:?}",
            r.call_id, r.tool, r.status
        );
        println!("  model reads: {content}");
        if let Some(a) = &r.artifact {
            println!("  artifact:    {a}");
        }
        if let Some(m) = &r.metadata {
            println!(
                "  metadata:    shaped_by={} service_latency_ms={}",
                m["shaped_by"], m["service_latency_ms"]
            );
        }
    }
    println!("answered: {} of {} call ids", out.results.len(), 3);
}
