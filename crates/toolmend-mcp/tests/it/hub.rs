//! The aggregating server over streamable HTTP, in front of two copies of the Python
//! SDK's own MCP server (stdio), with toolmend's MCP client as its client.

use std::time::Duration;

use rmcp::model::{ClientRequest, ServerResult};
use serde_json::{Value, json};
use toolmend::message::PlanOptions;
use toolmend_mcp::{
    Mender,
    hub::{Hub, Naming},
    serve,
};
use toolmend_tools::{
    mcp::{Forwarded, McpConnection},
    spec::McpSpec,
};

use crate::stdio::{python_server, python_with_mcp};

fn spec(v: Value) -> McpSpec {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

/// A hub over two copies of the Python server (`one`, `two`), served on a free port;
/// its URL.
async fn hub(naming: Naming) -> String {
    let python = python_with_mcp();
    let mut servers = Vec::new();
    for name in ["one", "two"] {
        let s = spec(
            json!({"name": name, "command": python.display().to_string(),
                            "args": [python_server(), "stdio"], "timeout_ms": 20000}),
        );
        servers.push(
            McpConnection::connect(&s, &|_| None)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    let hub = Hub::new(
        servers,
        naming,
        Mender::new(PlanOptions::default(), None),
        Duration::from_secs(20),
        "test",
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!(
        "http://{}/mcp",
        listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(serve::http_on(
        hub,
        listener,
        1 << 20,
        &[],
        axum::Router::new(),
        std::future::pending(),
    ));
    url
}

async fn client(url: &str) -> McpConnection {
    McpConnection::connect(
        &spec(json!({"name": "hub", "url": url, "timeout_ms": 20000})),
        &|_| None,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn call(c: &McpConnection, name: &str, arguments: Value) -> Result<Value, Forwarded> {
    let request: ClientRequest = serde_json::from_value(
        json!({"method": "tools/call", "params": {"name": name, "arguments": arguments}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let result: ServerResult = c
        .forward(request, Duration::from_secs(20), std::future::pending())
        .await?;
    Ok(serde_json::to_value(result).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_behind_one_endpoint_shared_names_by_the_template_calls_mended() {
    let url = hub(Naming::default()).await;
    let c = client(&url).await;
    let mut names: Vec<String> = c
        .list_tools()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|t| t.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "one_add", "one_boom", "one_echo", "two_add", "two_boom", "two_echo"
        ]
    );
    // Integers as strings: mended, routed to server `two` under its own name `add`.
    let sum = call(&c, "two_add", json!({"a": "2", "b": "40"}))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(sum["structuredContent"], json!({"result": 42}), "{sum}");
    assert_eq!(
        sum["_meta"]["io.toolmend/mend"]["fixes"][0]["kind"],
        "string_to_integer"
    );
    // A required value missing: answered by the hub, with the field named.
    let refused = call(&c, "one_add", json!({"a": 1}))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(refused["isError"], true);
    assert!(
        refused["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("\"b\"")),
        "{refused}"
    );
    // A close name is a tool the model meant only when the plan says so; an unknown one
    // is feedback listing the tools.
    let unknown = call(&c, "three_add", json!({"a": 1, "b": 2}))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(unknown["isError"], true, "{unknown}");
    // The server's own failure passes as it came.
    let boom = call(&c, "one_boom", json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(boom["isError"], true);
    assert!(
        boom["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("on purpose")),
        "{boom}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_sent_as_a_json_string_reach_the_hub_and_are_read() {
    let url = hub(Naming {
        template: "{server}.{tool}".to_owned(),
        always: true,
    })
    .await;
    // Straight over HTTP: the SDKs would not send a string where the object belongs.
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut r = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(&body);
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.send()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}}),
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let _ = init.text().await;
    let _ = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        session.clone(),
    )
    .await;
    let answer = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "one.echo", "arguments": "{'text': 'hi',}"}}),
        session,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"))
    .text()
    .await
    .unwrap_or_default();
    // A JSON body or one SSE event: the message is the line that holds the id.
    let message: Value = answer
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to the call: {answer}"));
    assert_eq!(message["result"]["content"][0]["text"], "hi", "{message}");
    let kinds: Vec<&str> = message["result"]["_meta"]["io.toolmend/mend"]["fixes"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["kind"].as_str()).collect())
        .unwrap_or_default();
    assert!(kinds.contains(&"double_encoded_decoded"), "{message}");
}
