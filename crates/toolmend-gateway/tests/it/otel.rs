//! OpenTelemetry traces (the `otel` feature): a request through the gateway to the strict
//! scripted provider, with a broken call that is re-asked, exported over OTLP/HTTP to a
//! collector stand-in on 127.0.0.1 (an HTTP server in this test that takes the protobuf
//! POST to /v1/traces, as a real collector's OTLP/HTTP receiver does), and a round trip
//! through a server-side HTTP tool (its round's and its call's spans). Checked: the span
//! names and kinds, the GenAI semantic conventions' attribute names and values, the
//! parent of each span (the client's `traceparent` for the request span), and that no
//! argument value or key became an attribute.
//!
//! `cargo nextest run -p toolmend-gateway --features otel --test it otel::`

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use axum::{Router, body::Bytes, extract::State, routing::post};
use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, ToolCall};
use toolmend_gateway::{
    Config, Gateway,
    config::Telemetry,
    telemetry::{
        Tracing,
        proto::{ExportTraceServiceRequest, Message as _, Value as AnyValue},
        traces_endpoint,
    },
};
use toolmend_scripted::{Script, ScriptedProvider, Step};
use tracing_subscriber::{layer::SubscriberExt as _, util::SubscriberInitExt as _};

use crate::common;

/// One exported span, as the test reads it.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent: String,
    attrs: BTreeMap<String, Value>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn attr(v: Option<&AnyValue>) -> Value {
    match v {
        Some(AnyValue::StringValue(s)) => json!(s),
        Some(AnyValue::IntValue(i)) => json!(i),
        Some(AnyValue::BoolValue(b)) => json!(b),
        Some(AnyValue::DoubleValue(d)) => json!(d),
        Some(AnyValue::ArrayValue(a)) => {
            Value::Array(a.values.iter().map(|v| attr(v.value.as_ref())).collect())
        }
        other => json!(format!("{other:?}")),
    }
}

/// A collector stand-in: every OTLP/HTTP protobuf POST to /v1/traces, decoded.
async fn collector() -> (String, Arc<Mutex<Vec<Span>>>, Arc<Mutex<Vec<String>>>) {
    type Seen = (Arc<Mutex<Vec<Span>>>, Arc<Mutex<Vec<String>>>);
    async fn traces(
        State((spans, types)): State<Seen>,
        headers: axum::http::HeaderMap,
        body: Bytes,
    ) {
        types.lock().unwrap().push(
            headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default(),
        );
        let req = ExportTraceServiceRequest::decode(body).unwrap();
        let mut out = spans.lock().unwrap();
        for rs in req.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .map(|kv| attr(kv.value.as_ref().and_then(|v| v.value.as_ref())));
            for ss in rs.scope_spans {
                for s in ss.spans {
                    let mut attrs: BTreeMap<String, Value> = s
                        .attributes
                        .iter()
                        .map(|kv| {
                            (
                                kv.key.clone(),
                                attr(kv.value.as_ref().and_then(|v| v.value.as_ref())),
                            )
                        })
                        .collect();
                    if let Some(svc) = &service {
                        attrs.insert("(service.name)".to_owned(), svc.clone());
                    }
                    out.push(Span {
                        name: s.name,
                        kind: s.kind,
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        attrs,
                    });
                }
            }
        }
    }
    let spans = Arc::new(Mutex::new(Vec::new()));
    let types = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state((Arc::clone(&spans), Arc::clone(&types)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), spans, types)
}

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT: &str = "b7ad6b7169203331";
/// Kinds in OTLP's enum.
const INTERNAL: i32 = 1;
const SERVER: i32 = 2;
const CLIENT: i32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_its_upstream_calls_mending_and_re_ask_are_exported_as_spans() {
    let (endpoint, spans, content_types) = collector().await;
    let telemetry = Telemetry {
        otlp_endpoint: Some(endpoint),
        service_name: "toolmend-otel-test".to_owned(),
    };
    let tracing = Tracing::start(&telemetry, &|_| None).unwrap().unwrap();
    tracing_subscriber::registry().with(tracing.layer()).init();

    // A broken call and an invalid one; the re-ask answers the invalid one.
    let provider = ScriptedProvider::start(
        Script::new()
            .then(Step::Reply(AssistantMessage {
                content: Some(None),
                tool_calls: Some(vec![
                    ToolCall::new("c1", "get_weather", "{'city': 'Osaka',}"),
                    ToolCall::new("c2", "get_weather", r#"{"days": 2}"#),
                ]),
                ..Default::default()
            }))
            .then(Step::Reply(AssistantMessage {
                content: Some(None),
                tool_calls: Some(vec![ToolCall::new(
                    "c9",
                    "get_weather",
                    r#"{"city": "Lyon"}"#,
                )]),
                ..Default::default()
            })),
    )
    .await
    .unwrap();
    let config = Config::from_toml_and_env(
        &format!("upstream.base_url = \"{}\"", provider.base_url()),
        [],
    )
    .unwrap();
    let addr = common::serve(Arc::new(Gateway::new(config, None).unwrap())).await;
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .header("x-request-id", "otel-1")
        .bearer_auth("sk-otel-secret")
        .json(
            &json!({"model": "m", "tools": [{"type": "function", "function": {
            "name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"], "additionalProperties": false}}}],
            "messages": [{"role": "user", "content": "Weather in Osaka?"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["x-toolmend-calls"],
        "valid=1 repaired=1 unresolved=0 from_text=0"
    );

    // A round trip through a server-side tool: a second gateway with a tools section.
    let round_trip_addr = round_trip_gateway().await;
    let resp = reqwest::Client::new()
        .post(format!("http://{round_trip_addr}/v1/chat/completions"))
        .header("traceparent", format!("00-{TRACE2}-{PARENT}-01"))
        .header("x-request-id", "otel-2")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "Population of Nara?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["x-toolmend-round-trip"],
        "rounds=2; server_calls=1; errors=0"
    );

    // The batch goes out on flush (a worker thread runs the exporter's task meanwhile).
    let flushed = tokio::task::spawn_blocking(move || {
        tracing.flush();
        tracing
    })
    .await
    .unwrap();
    let got = common::eventually("both requests' spans at the collector", || {
        let got = spans.lock().unwrap().clone();
        let requests = got
            .iter()
            .filter(|s| s.name == "POST /v1/chat/completions")
            .count();
        if requests == 2 {
            Ok(got)
        } else {
            Err(format!("{got:#?}"))
        }
    })
    .await;
    let names: Vec<&str> = got.iter().map(|s| s.name.as_str()).collect();
    assert!(
        content_types
            .lock()
            .unwrap()
            .iter()
            .all(|t| t == "application/x-protobuf"),
        "{:?}",
        content_types.lock().unwrap()
    );

    // The request: a server span, a child of the client's trace.
    let request = got
        .iter()
        .find(|s| s.name == "POST /v1/chat/completions" && s.trace_id == TRACE)
        .unwrap_or_else(|| panic!("no request span in {names:?}"));
    assert_eq!(request.kind, SERVER);
    assert_eq!(request.trace_id, TRACE);
    assert_eq!(request.parent, PARENT);
    let a = &request.attrs;
    assert_eq!(a["http.request.method"], "POST");
    assert_eq!(a["http.route"], "/v1/chat/completions");
    assert_eq!(a["http.response.status_code"], 200);
    assert_eq!(a["toolmend.request_id"], "otel-1");
    assert_eq!(a["toolmend.upstream_calls"], 2);
    assert_eq!(a["toolmend.calls.valid"], 1);
    assert_eq!(a["toolmend.calls.repaired"], 1);
    assert_eq!(a["(service.name)"], "toolmend-otel-test");

    // The two upstream calls: `chat m`, client spans, GenAI attributes.
    let chats: Vec<&Span> = got
        .iter()
        .filter(|s| s.name == "chat m" && s.trace_id == TRACE)
        .collect();
    assert_eq!(chats.len(), 2, "{names:?}");
    for c in &chats {
        assert_eq!(c.kind, CLIENT);
        assert_eq!(c.trace_id, TRACE);
        let a = &c.attrs;
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.request.model"], "m");
        assert!(a["gen_ai.response.id"].is_string(), "{a:?}");
        assert!(a["gen_ai.response.model"].is_string(), "{a:?}");
        assert!(
            a["gen_ai.usage.input_tokens"].as_i64().unwrap() > 0,
            "{a:?}"
        );
        assert!(
            a["gen_ai.usage.output_tokens"].as_i64().unwrap() >= 0,
            "{a:?}"
        );
        assert_eq!(a["gen_ai.response.finish_reasons"], json!(["tool_calls"]));
        assert_eq!(a["server.address"], "127.0.0.1");
        assert!(a["server.port"].as_i64().unwrap() > 0);
        assert_eq!(a["http.response.status_code"], 200);
        assert!(a.contains_key("toolmend.upstream.attempt"), "{a:?}");
    }
    let attempts: Vec<&Value> = chats
        .iter()
        .map(|c| &c.attrs["toolmend.upstream.attempt"])
        .collect();
    assert!(
        attempts.contains(&&json!(1)) && attempts.contains(&&json!(2)),
        "{attempts:?}"
    );

    // Mending: one span per answer planned (the first, the re-asked one).
    let mends: Vec<&Span> = got
        .iter()
        .filter(|s| s.name == "toolmend mend" && s.trace_id == TRACE)
        .collect();
    assert_eq!(mends.len(), 2, "{names:?}");
    for m in &mends {
        assert_eq!(m.kind, INTERNAL);
        assert_eq!(m.parent, request.span_id, "mending is the request's");
    }
    let feedback: Vec<&Value> = mends
        .iter()
        .map(|m| &m.attrs["toolmend.calls.feedback"])
        .collect();
    assert!(
        feedback.contains(&&json!(1)),
        "the first answer's invalid call: {feedback:?}"
    );

    // The re-ask, with its upstream call inside it.
    let re_ask = got
        .iter()
        .find(|s| s.name == "toolmend re_ask")
        .unwrap_or_else(|| panic!("no re-ask span in {names:?}"));
    assert_eq!(re_ask.parent, request.span_id);
    assert_eq!(re_ask.attrs["toolmend.re_ask.attempt"], 1);
    assert_eq!(re_ask.attrs["toolmend.re_ask.calls"], 1);
    let parents: Vec<&str> = chats.iter().map(|c| c.parent.as_str()).collect();
    assert!(parents.contains(&request.span_id.as_str()), "{parents:?}");
    assert!(parents.contains(&re_ask.span_id.as_str()), "{parents:?}");

    // The round trip: one `tools_round` span per round that ran server-side calls, a child
    // of the request; inside it one `execute_tool {tool}` span per call, with the GenAI
    // conventions' tool attributes.
    let trip = got
        .iter()
        .find(|s| s.name == "POST /v1/chat/completions" && s.trace_id == TRACE2)
        .unwrap_or_else(|| panic!("no round-trip request span in {names:?}"));
    assert_eq!(trip.attrs["toolmend.upstream_calls"], 2);
    let rounds: Vec<&Span> = got
        .iter()
        .filter(|s| s.name == "toolmend tools_round")
        .collect();
    assert_eq!(rounds.len(), 1, "{names:?}");
    assert_eq!(rounds[0].kind, INTERNAL);
    assert_eq!(rounds[0].trace_id, TRACE2);
    assert_eq!(rounds[0].parent, trip.span_id, "a round is the request's");
    assert_eq!(rounds[0].attrs["toolmend.round"], 1);
    assert_eq!(rounds[0].attrs["toolmend.round.calls"], 1);
    let tool = got
        .iter()
        .find(|s| s.name == "execute_tool lookup")
        .unwrap_or_else(|| panic!("no execute_tool span in {names:?}"));
    assert_eq!(tool.kind, INTERNAL);
    assert_eq!(tool.trace_id, TRACE2);
    assert_eq!(tool.parent, rounds[0].span_id, "a call is its round's");
    let a = &tool.attrs;
    assert_eq!(a["gen_ai.operation.name"], "execute_tool");
    assert_eq!(a["gen_ai.tool.name"], "lookup");
    assert_eq!(a["gen_ai.tool.call.id"], "call_nara");
    assert_eq!(a["gen_ai.tool.type"], "function");
    assert_eq!(a["toolmend.tool.kind"], "http");
    assert_eq!(a["toolmend.tool.served_by"], "lookup");
    assert!(!a.contains_key("error.type"), "{a:?}");
    let trip_chats = got
        .iter()
        .filter(|s| s.name == "chat m" && s.trace_id == TRACE2)
        .count();
    assert_eq!(trip_chats, 2, "each round's upstream call: {names:?}");

    // No argument value, message or key among the attributes.
    let all = format!("{got:?}");
    for secret in [
        "Osaka",
        "Lyon",
        "sk-otel-secret",
        "Weather in",
        "Nara",
        "1234567",
    ] {
        assert!(!all.contains(secret), "{secret} exported");
    }
    flushed.shutdown();
}

/// The trace of the round-trip request.
const TRACE2: &str = "4bf92f3577b34da6a3ce929d0e0e4737";

/// A gateway whose model calls one server-side HTTP tool (`lookup`, served by an envelope
/// service on 127.0.0.1), then answers.
async fn round_trip_gateway() -> std::net::SocketAddr {
    async fn lookup(headers: axum::http::HeaderMap, body: Bytes) -> axum::Json<Value> {
        let id = headers["x-tool-call-id"].to_str().unwrap().to_owned();
        let args: Value = serde_json::from_slice(&body).unwrap();
        axum::Json(json!({"status": "success", "call_id": id,
            "data": {"city": args["arguments"]["q"], "population": 1_234_567}}))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tools = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, Router::new().route("/lookup", post(lookup)))
            .await
            .unwrap();
    });
    let provider = ScriptedProvider::start(
        Script::new()
            .then(Step::Reply(AssistantMessage {
                content: Some(None),
                tool_calls: Some(vec![ToolCall::new(
                    "call_nara",
                    "lookup",
                    r#"{"q": "Nara"}"#,
                )]),
                ..Default::default()
            }))
            .then(Step::Reply(AssistantMessage {
                content: Some(Some(toolmend::conversation::Content::Text(
                    "About 1.2 million.".into(),
                ))),
                ..Default::default()
            })),
    )
    .await
    .unwrap();
    let toml = format!(
        r#"upstream.base_url = "{}"

[[tools]]
name = "lookup"
description = "Facts about a city."
endpoint = "http://{tools}/lookup"
server_side = true
parameters_json = '{{"type": "object", "properties": {{"q": {{"type": "string"}}}}, "required": ["q"]}}'
"#,
        provider.base_url()
    );
    let config = Config::from_toml_and_env(&toml, []).unwrap();
    let file = toolmend_tools::ToolsFile::parse_section(&toml, "gateway.toml").unwrap();
    let gateway = Gateway::with_tools(config, None, &file).await.unwrap();
    // The provider lives as long as the test process.
    std::mem::forget(provider);
    common::serve(Arc::new(gateway)).await
}

#[test]
fn the_endpoint_comes_from_the_config_then_the_standard_variables() {
    let none = Telemetry::default();
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert_eq!(traces_endpoint(&none, &env(&[])), None);
    assert_eq!(
        traces_endpoint(
            &none,
            &env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")])
        )
        .as_deref(),
        Some("http://c:4318/v1/traces")
    );
    assert_eq!(
        traces_endpoint(
            &none,
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4318/custom")
            ])
        )
        .as_deref(),
        Some("http://t:4318/custom")
    );
    let set = Telemetry {
        otlp_endpoint: Some("http://cfg:4318".to_owned()),
        ..Telemetry::default()
    };
    assert_eq!(
        traces_endpoint(
            &set,
            &env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])
        )
        .as_deref(),
        Some("http://cfg:4318/v1/traces")
    );
    let bad = Telemetry {
        otlp_endpoint: Some("collector:4318".to_owned()),
        ..Telemetry::default()
    };
    let err = Tracing::start(&bad, &|_| None).unwrap_err();
    assert!(err.contains("not an http(s) URL"), "{err}");
}
