//! What toolmend adds per call to a tool behind HTTP, beyond the tool's own latency.
//!
//! A tool service on loopback answers the envelope at once (axum, its own runtime
//! thread). Interleaved, call after call:
//!
//! - `raw`: the floor: one `reqwest` POST of the same body, the answer read and parsed
//!   as JSON (what any client pays to reach the tool);
//! - `net_tool`: `NetTool::call` (envelope headers, verification of `status` and
//!   `call_id`, skew check, shaping with a template, metadata);
//! - `node`: the whole tool node on a one-call assistant message (plan, repair, validate,
//!   execute through the `NetTool`, answer).
//!
//! The same for MCP over streamable HTTP: an rmcp server on loopback, a bare rmcp client's
//! `call_tool` as the floor, against the `NetTool` of the same tool (`[[mcp]]`: `_meta`
//! ids, the result mapped, `structuredContent` checked, shaped).
//!
//! Added = the path's percentile minus the floor's (noisy at p99: two distributions);
//! own = per call, the path's time minus the service latency it measured itself (the
//! `service_latency_ms` of its metadata: request sent -> answer read), i.e. toolmend's
//! own work around the exchange (plan, validate, envelope check, shaping, metadata).
//! Also prints the CPU time of the process per call. `cargo bench -p toolmend-tools --bench overhead` (ITERS=n).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use axum::{Json, Router, http::HeaderMap, routing::post};
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    transport::{
        StreamableHttpClientTransport,
        streamable_http_server::{
            StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
        },
    },
};
use serde_json::{Value, json};
use toolmend::{
    conversation::Message,
    node::{CallContext, Tool, ToolNode},
};
use toolmend_tools::{ToolSet, ToolsFile};

#[derive(Clone)]
struct Weather;

impl ServerHandler for Weather {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(serde_json::from_value(json!({"tools": [{"name": "get_weather", "description": "Weather for a city.",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]}))
        .unwrap())
    }
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let city = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("city"))
            .cloned()
            .unwrap_or(Value::Null);
        let data = json!({"city": city, "temp": 21.5, "unit": "celsius",
                          "forecast": [{"day": 1, "t": 20}, {"day": 2, "t": 22}, {"day": 3, "t": 19}]});
        Ok(serde_json::from_value::<CallToolResult>(json!({
            "content": [{"type": "text", "text": data.to_string()}], "structuredContent": data}))
        .unwrap()
        .into())
    }
}

async fn service(headers: HeaderMap, Json(body): Json<Value>) -> Json<Value> {
    let id = headers
        .get("x-tool-call-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    Json(json!({
        "status": "success",
        "data": {"city": body["arguments"]["city"], "temp": 21.5, "unit": "celsius",
                 "forecast": [{"day": 1, "t": 20}, {"day": 2, "t": 22}, {"day": 3, "t": 19}]},
        "call_id": id,
        "timestamp": 0
    }))
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn cpu() -> Duration {
    // utime + stime of this process, from /proc (Linux), in clock ticks of 10 ms.
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = s
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = f.get(11).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn service_of(meta: Option<&Value>) -> Duration {
    let ms = meta
        .and_then(|m| m["service_latency_ms"].as_f64())
        .unwrap_or(0.0);
    Duration::from_secs_f64(ms / 1e3)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let iters: usize = std::env::var("ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000);
    // The service on its own thread and runtime, as a real service would be.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let mcp = StreamableHttpService::new(
                || Ok(Weather),
                std::sync::Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let app = Router::new()
                .route("/weather", post(service))
                .nest_service("/mcp", mcp);
            axum::serve(listener, app).await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let toml = format!(
        r#"
[[tools]]
name = "get_weather"
description = "Weather for a city."
endpoint = "http://{addr}/weather"
template = "{{{{ city }}}}: {{{{ temp | round }}}} {{{{ unit }}}}, {{{{ forecast | length }}}} days ahead"
[tools.parameters]
type = "object"
required = ["city"]
properties = {{ city = {{ type = "string" }} }}
"#
    );
    // The MCP tool set connects (and the bare client) only after the HTTP phase: an idle
    // MCP session on the same threads would be in the HTTP figures.
    let toml_mcp = format!(
        r#"
[[mcp]]
name = "wx"
url = "http://{addr}/mcp"

[[tools]]
name = "mcp_weather"
kind = "mcp"
server = "wx"
remote_name = "get_weather"
template = "{{{{ city }}}}: {{{{ temp | round }}}} {{{{ unit }}}}, {{{{ forecast | length }}}} days ahead"
"#
    );
    let set = rt
        .block_on(ToolSet::load(
            &ToolsFile::parse(&toml, "bench").unwrap(),
            &|_| None,
        ))
        .unwrap();
    let tool = std::sync::Arc::clone(set.get("get_weather").unwrap());
    let node = ToolNode::builder(set.registry().unwrap()).build();
    let client = toolmend_tools::http::client().clone();
    let url = format!("http://{addr}/weather");
    let args = json!({"city": "Paris"});
    let messages: Vec<Message> = vec![
        serde_json::from_value(json!({"role": "user", "content": "weather?"})).unwrap(),
        serde_json::from_value(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})).unwrap(),
    ];
    let (mut raw, mut direct, mut whole) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cpu_raw, mut cpu_direct, mut cpu_node) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut mcp_raw, mut mcp_direct) = (Vec::new(), Vec::new());
    // Per call: the whole path minus the service latency it measured itself (metadata):
    // toolmend's own time, without the floor's noise.
    let (mut own_direct, mut own_node, mut own_mcp) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cpu_mcp_raw, mut cpu_mcp_direct) = (Duration::ZERO, Duration::ZERO);
    rt.block_on(async {
        let raw_call = || async {
            let body = serde_json::to_vec(&json!({"function": "get_weather", "arguments": &args}))
                .unwrap();
            let r = client
                .post(&url)
                .header("content-type", "application/json")
                .header("x-tool-call-id", "call_1")
                .body(body)
                .send()
                .await
                .unwrap();
            let b = r.bytes().await.unwrap();
            std::hint::black_box(serde_json::from_slice::<Value>(&b).unwrap());
        };
        let ctx = || CallContext {
            call_id: "call_1".into(),
            tool: "get_weather".into(),
            state: None,
            trace_id: None,
            received_at: Some(Instant::now()),
        };
        // Warm the pool and the code paths.
        for _ in 0..200 {
            raw_call().await;
            tool.call(args.clone(), ctx()).await.unwrap();
            node.invoke(&messages).await.unwrap();
        }
        for _ in 0..iters {
            let c = cpu();
            let t = Instant::now();
            raw_call().await;
            raw.push(t.elapsed());
            cpu_raw += cpu() - c;
            let c = cpu();
            let t = Instant::now();
            let o = tool.call(args.clone(), ctx()).await.unwrap();
            let took = t.elapsed();
            direct.push(took);
            own_direct.push(took.saturating_sub(service_of(o.metadata.as_ref())));
            cpu_direct += cpu() - c;
            let c = cpu();
            let t = Instant::now();
            let out = node.invoke(&messages).await.unwrap();
            let took = t.elapsed();
            whole.push(took);
            own_node.push(took.saturating_sub(service_of(out.results[0].metadata.as_ref())));
            cpu_node += cpu() - c;
            assert_eq!(out.results.len(), 1);
        }
        let set_mcp = ToolSet::load(&ToolsFile::parse(&toml_mcp, "bench").unwrap(), &|_| None)
            .await
            .unwrap();
        let mcp_tool = std::sync::Arc::clone(set_mcp.get("mcp_weather").unwrap());
        let bare = ()
            .serve(StreamableHttpClientTransport::from_uri(format!(
                "http://{addr}/mcp"
            )))
            .await
            .unwrap();
        let bare_call = || async {
            let p = CallToolRequestParams::new("get_weather")
                .with_arguments(args.as_object().unwrap().clone());
            std::hint::black_box(bare.peer().call_tool(p).await.unwrap());
        };
        for _ in 0..200 {
            bare_call().await;
            mcp_tool.call(args.clone(), ctx()).await.unwrap();
        }
        for _ in 0..iters {
            let c = cpu();
            let t = Instant::now();
            bare_call().await;
            mcp_raw.push(t.elapsed());
            cpu_mcp_raw += cpu() - c;
            let c = cpu();
            let t = Instant::now();
            let o = mcp_tool.call(args.clone(), ctx()).await.unwrap();
            let took = t.elapsed();
            mcp_direct.push(took);
            own_mcp.push(took.saturating_sub(service_of(o.metadata.as_ref())));
            cpu_mcp_direct += cpu() - c;
        }
    });
    let n = iters as f64;
    println!("HTTP tool on loopback, {iters} calls each, interleaved (µs per call)\n");
    println!(
        "| path | p50 | p99 | added p50 | added p99 | own p50 | own p99 | CPU per call (process, incl. the service) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let (r50, r99) = (pct(&mut raw, 0.50), pct(&mut raw, 0.99));
    println!(
        "| raw reqwest POST + parse (floor) | {:.1} | {:.1} | – | – | – | – | {:.1} |",
        us(r50),
        us(r99),
        us(cpu_raw) / n
    );
    for (name, v, own, c) in [
        ("NetTool::call", &mut direct, &mut own_direct, cpu_direct),
        (
            "ToolNode::invoke (1 call)",
            &mut whole,
            &mut own_node,
            cpu_node,
        ),
    ] {
        let (p50, p99) = (pct(v, 0.50), pct(v, 0.99));
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            us(p50),
            us(p99),
            us(p50) - us(r50),
            us(p99) - us(r99),
            us(pct(own, 0.50)),
            us(pct(own, 0.99)),
            us(c) / n
        );
    }
    println!(
        "\nMCP tool over streamable HTTP on loopback, {iters} calls each, interleaved (µs per call)\n"
    );
    println!(
        "| path | p50 | p99 | added p50 | added p99 | own p50 | own p99 | CPU per call (process, incl. the server) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let (m50, m99) = (pct(&mut mcp_raw, 0.50), pct(&mut mcp_raw, 0.99));
    println!(
        "| bare rmcp call_tool (floor) | {:.1} | {:.1} | – | – | – | – | {:.1} |",
        us(m50),
        us(m99),
        us(cpu_mcp_raw) / n
    );
    let (p50, p99) = (pct(&mut mcp_direct, 0.50), pct(&mut mcp_direct, 0.99));
    println!(
        "| NetTool::call (mcp) | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
        us(p50),
        us(p99),
        us(p50) - us(m50),
        us(p99) - us(m99),
        us(pct(&mut own_mcp, 0.50)),
        us(pct(&mut own_mcp, 0.99)),
        us(cpu_mcp_direct) / n
    );
}
