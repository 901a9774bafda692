//! HTTP tool services on 127.0.0.1, through a `ToolSet` and the tool node: answers that
//! are good, dirty (another call's id), without `status`, not JSON, huge; timeouts;
//! failures then success (retries, only where safe); a service that slows down (the SLA
//! sends its calls to the backup, and back). Every call id is answered exactly once, and a
//! dirty answer never reaches the model.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use crate::common::{EVERY_LOG_LINE, capture_logs, captured_logs, metrics};
use axum::{
    Json, Router,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};
use toolmend::{
    conversation::{Content, Message},
    node::{ResultStatus, ToolNode, ToolResult},
};
use toolmend_tools::{ToolSet, ToolsFile};

/// What the service saw, per route.
#[derive(Default)]
struct Seen {
    headers: Mutex<Vec<HashMap<String, String>>>,
    hits: AtomicUsize,
    /// Service delay for /slow, ms.
    delay_ms: AtomicU64,
}

fn header(h: &HeaderMap, k: &str) -> String {
    h.get(k)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn service(
    State(seen): State<Arc<Seen>>,
    Path(route): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let n = seen.hits.fetch_add(1, Ordering::SeqCst);
    let mut h = HashMap::new();
    for k in [
        "x-tool-call-id",
        "x-request-timestamp",
        "x-trace-id",
        "x-original-id",
        "idempotency-key",
        "authorization",
    ] {
        h.insert(k.to_owned(), header(&headers, k));
    }
    seen.headers.lock().unwrap().push(h);
    let id = header(&headers, "x-tool-call-id");
    let ok = |data: Value| {
        Json(json!({"status": "success", "data": data, "call_id": id, "timestamp": now_ms()}))
            .into_response()
    };
    match route.as_str() {
        "weather" => ok(json!({"city": body["arguments"]["city"], "temp": 21.5, "unit": "celsius"})),
        "dirty" => Json(json!({"status": "success", "data": {"secret": "someone else's"}, "call_id": "call_other"})).into_response(),
        "no_status" => Json(json!({"data": {"t": 1}, "call_id": id})).into_response(),
        "not_json" => (StatusCode::OK, "<html>oops</html>").into_response(),
        "huge" => ok(json!("x".repeat(3 << 20))),
        // Never answers: the tool times out, however loaded the machine.
        "sleep" => std::future::pending().await,
        "flaky" => {
            if n % 3 != 2 {
                (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response()
            } else {
                ok(json!({"attempt": n}))
            }
        }
        "tool_error" => Json(json!({"status": "error", "message": "user u9 not found", "call_id": id})).into_response(),
        "skewed" => Json(json!({"status": "success", "data": 1, "call_id": id, "timestamp": 1_000})).into_response(),
        "slow" => {
            let d = seen.delay_ms.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(d)).await;
            ok(json!({"from": "primary"}))
        }
        "backup" => ok(json!({"from": "backup"})),
        "plain" => Json(json!({"result": {"temp": 3}, "error": null})).into_response(),
        "redirect" => (StatusCode::TEMPORARY_REDIRECT, [("location", "http://example.invalid/x")]).into_response(),
        "orders" => ok(json!({"orders": [{"id": 1, "amount": 20.5}, {"id": 2, "amount": 9.5}, {"id": 3, "amount": 70}]})),
        // Another call's envelope under an error status: dirty, whatever the status.
        "dirty500" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"status": "error", "message": "someone else's failure", "call_id": "call_other"})),
        )
            .into_response(),
        // JSON, but for a byte that is not UTF-8 inside a string.
        "latin1" => {
            let mut body = format!(r#"{{"status": "success", "call_id": "{id}", "data": {{"city": "Besan"#).into_bytes();
            body.push(0xE7); // ç in Latin-1
            body.extend_from_slice(br#"on"}}"#);
            ([("content-type", "application/json")], body).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn start() -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/{route}", post(service))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

const ANY: &str = r#"parameters = { type = "object" }"#;

fn tools_toml(base: &str) -> String {
    format!(
        r#"
[[tools]]
name = "get_weather"
description = "Weather for a city."
endpoint = "{base}/weather"
template = "{{{{ city }}}}: {{{{ temp | round }}}} {{{{ unit }}}}"
headers = {{ Authorization = {{ env = "TM_TEST_TOKEN", prefix = "Bearer " }} }}
[tools.parameters]
type = "object"
required = ["city"]
properties = {{ city = {{ type = "string" }}, days = {{ type = "integer" }} }}

[[tools]]
name = "dirty"
endpoint = "{base}/dirty"
{ANY}

[[tools]]
name = "no_status"
endpoint = "{base}/no_status"
{ANY}

[[tools]]
name = "not_json"
endpoint = "{base}/not_json"
{ANY}

[[tools]]
name = "huge"
endpoint = "{base}/huge"
{ANY}

[[tools]]
name = "sleep"
endpoint = "{base}/sleep"
timeout_ms = 150
{ANY}

[[tools]]
name = "flaky"
endpoint = "{base}/flaky"
retries = 2
idempotent = true
{ANY}

[[tools]]
name = "tool_error"
endpoint = "{base}/tool_error"
{ANY}

[[tools]]
name = "skewed"
endpoint = "{base}/skewed"
{ANY}

[[tools]]
name = "plain"
endpoint = "{base}/plain"
adapter = {{ data = "/result", error = "/error" }}
{ANY}

[[tools]]
name = "redirect"
endpoint = "{base}/redirect"
{ANY}

[[tools]]
name = "orders"
endpoint = "{base}/orders"
template = "{{{{ orders | length }}}} orders, total {{{{ orders | sum(attribute='amount') }}}}"
{ANY}
"#
    )
}

fn env(name: &str) -> Option<String> {
    (name == "TM_TEST_TOKEN").then(|| "s3cret".to_owned())
}

async fn load(base: &str) -> ToolSet {
    let file = ToolsFile::parse(&tools_toml(base), "tools.toml").unwrap();
    ToolSet::load(&file, &env).await.unwrap()
}

fn assistant(calls: &[(&str, &str, &str)]) -> Vec<Message> {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    vec![
        serde_json::from_value(json!({"role": "user", "content": "go"})).unwrap(),
        serde_json::from_value(json!({"role": "assistant", "content": null, "tool_calls": calls}))
            .unwrap(),
    ]
}

fn text(c: &Content) -> String {
    match c {
        Content::Text(t) => t.clone(),
        other => serde_json::to_string(other).unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_is_answered_once_and_a_dirty_answer_never_reaches_the_model() {
    let (base, seen) = start().await;
    let set = load(&base).await;
    let node = ToolNode::builder(set.registry().unwrap()).build();
    let calls = [
        ("c1", "get_weather", r#"{"city": "Paris", "days": "2"}"#),
        ("c2", "dirty", "{}"),
        ("c3", "no_status", "{}"),
        ("c4", "not_json", "{}"),
        ("c5", "huge", "{}"),
        ("c6", "sleep", "{}"),
        ("c7", "tool_error", "{}"),
        ("c8", "skewed", "{}"),
        ("c9", "plain", "{}"),
        ("c10", "redirect", "{}"),
        ("c11", "orders", "{}"),
    ];
    let out = node.invoke(&assistant(&calls)).await.unwrap();
    let ids: Vec<&str> = out.results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(
        ids,
        calls.iter().map(|c| c.0).collect::<Vec<_>>(),
        "one result per call id, in order"
    );
    let by = |id: &str| out.results.iter().find(|r| r.call_id == id).unwrap();

    let w = by("c1");
    assert_eq!(w.status, ResultStatus::Success);
    assert_eq!(text(&w.content), "Paris: 22.0 celsius");
    assert_eq!(
        w.artifact.as_ref().unwrap()["temp"],
        json!(21.5),
        "the whole payload is the artifact"
    );
    let meta = w.metadata.as_ref().unwrap();
    assert_eq!(meta["shaped_by"], "template");
    assert!(meta["service_latency_ms"].as_f64().unwrap() >= 0.0);
    assert!(meta["received_at_ms"].as_u64().unwrap() > 0);

    let d = by("c2");
    assert_eq!(d.status, ResultStatus::Error);
    assert!(
        text(&d.content).contains("answered for call \"call_other\""),
        "{}",
        text(&d.content)
    );
    assert!(
        !text(&d.content).contains("someone else"),
        "a dirty answer's data never reaches the model"
    );
    assert!(d.artifact.is_none());
    // An error result keeps how the call went beside it (never the dropped data).
    let dm = d.metadata.as_ref().unwrap();
    assert_eq!(dm["served_by"], "dirty");
    assert!(dm["service_latency_ms"].as_f64().unwrap() >= 0.0);
    assert!(!dm.to_string().contains("someone else"));

    assert!(text(&by("c3").content).contains("no `status`"));
    assert!(text(&by("c4").content).contains("not JSON"));
    assert!(text(&by("c5").content).contains("exceeded 1048576 bytes"));
    assert!(
        text(&by("c6").content).contains("within 150 ms"),
        "{}",
        text(&by("c6").content)
    );
    let e = by("c7");
    assert_eq!(e.status, ResultStatus::Error);
    assert!(text(&e.content).contains("user u9 not found"));
    assert_eq!(e.metadata.as_ref().unwrap()["attempts"], 1);
    let s = by("c8");
    assert_eq!(
        s.status,
        ResultStatus::Success,
        "clock skew is recorded, not refused"
    );
    assert!(
        s.metadata.as_ref().unwrap()["clock_skew_ms"]
            .as_i64()
            .unwrap()
            < -1_000_000
    );
    assert_eq!(
        by("c9").artifact,
        Some(json!({"temp": 3})),
        "the adapter maps a plain service"
    );
    let r = by("c10");
    assert_eq!(r.status, ResultStatus::Error);
    assert!(
        text(&r.content).contains("another host"),
        "{}",
        text(&r.content)
    );
    assert_eq!(text(&by("c11").content), "3 orders, total 100.0");

    // The envelope's headers, and the secret from the environment.
    let hs = seen.headers.lock().unwrap();
    let h = hs.iter().find(|h| h["x-tool-call-id"] == "c1").unwrap();
    assert_eq!(h["authorization"], "Bearer s3cret");
    assert!(h["x-request-timestamp"].parse::<u64>().unwrap() > 1_700_000_000_000);
    assert!(!h["x-trace-id"].is_empty());
    // The repaired argument ("2" -> 2) went to the service as a number.
    drop(hs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_gets_a_new_id_and_names_the_original() {
    let (base, seen) = start().await;
    let set = load(&base).await;
    let node = ToolNode::builder(set.registry().unwrap()).build();
    let out = node
        .invoke(&assistant(&[("call_r", "flaky", "{}")]))
        .await
        .unwrap();
    assert_eq!(out.results.len(), 1);
    assert_eq!(
        out.results[0].status,
        ResultStatus::Success,
        "{:?}",
        out.results[0].content
    );
    assert_eq!(out.results[0].metadata.as_ref().unwrap()["attempts"], 3);
    let hs = seen.headers.lock().unwrap();
    let ids: Vec<(&str, &str)> = hs
        .iter()
        .map(|h| (h["x-tool-call-id"].as_str(), h["x-original-id"].as_str()))
        .collect();
    assert_eq!(
        ids,
        [
            ("call_r", ""),
            ("call_r-retry1", "call_r"),
            ("call_r-retry2", "call_r")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_degrades_to_its_backup_and_recovers() {
    let (base, seen) = start().await;
    let toml = format!(
        r#"
[[tools]]
name = "search"
endpoint = "{base}/slow"
sla_ms = 500
backup = "search_backup"
{ANY}

[[tools]]
name = "search_backup"
endpoint = "{base}/backup"
{ANY}
"#
    );
    let set = ToolSet::load(&ToolsFile::parse(&toml, "t.toml").unwrap(), &env)
        .await
        .unwrap();
    let node = ToolNode::builder(set.registry().unwrap()).build();
    let mut served = Vec::new();
    let call = async |i: usize| {
        let out = node
            .invoke(&assistant(&[(&format!("c{i}"), "search", "{}")]))
            .await
            .unwrap();
        let r = &out.results[0];
        assert_eq!(r.status, ResultStatus::Success);
        r.artifact.as_ref().unwrap()["from"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // A slow call sleeps 600 ms (never less); a fast one takes far under the 500 ms SLA on
    // loopback, however loaded the machine.
    seen.delay_ms.store(600, Ordering::SeqCst);
    for i in 0..5 {
        served.push(call(i).await);
    }
    assert_eq!(served, ["primary"; 5], "five slow calls: p95 over the SLA");
    assert!(set.get("search").unwrap().degraded());
    served.clear();
    for i in 5..9 {
        served.push(call(i).await);
    }
    assert_eq!(served, ["backup"; 4], "degraded: the backup serves");
    // The primary is fast again: probes (every 5th call) bring it back after 3 good ones.
    seen.delay_ms.store(0, Ordering::SeqCst);
    served.clear();
    for i in 9..24 {
        served.push(call(i).await);
    }
    let mut want = Vec::new();
    for _ in 0..2 {
        want.push("primary"); // a probe, within the SLA
        want.extend(["backup"; 4]);
    }
    want.extend(["primary"; 5]); // the third good probe recovers it
    assert_eq!(served, want);
    assert!(!set.get("search").unwrap().degraded());
}

/// A node over the tools of `toml` (and the set, to look at a tool's state).
async fn node_of(toml: &str) -> (ToolSet, ToolNode) {
    let set = ToolSet::load(&ToolsFile::parse(toml, "t.toml").unwrap(), &env)
        .await
        .unwrap();
    let node = ToolNode::builder(set.registry().unwrap()).build();
    (set, node)
}

/// One call without arguments through `node`: its one result.
async fn one(node: &ToolNode, id: &str, tool: &str) -> ToolResult {
    let mut out = node.invoke(&assistant(&[(id, tool, "{}")])).await.unwrap();
    assert_eq!(out.results.len(), 1, "one result per call id");
    out.results.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_times_out_degrades_to_its_backup_with_a_metric() {
    let metrics = metrics();
    capture_logs(EVERY_LOG_LINE);
    let (base, _seen) = start().await;
    // The service never answers; the tool waits 100 ms. The transport's timeout must be
    // the one that fires (not the node's), or nothing would reach the SLA.
    let toml = format!(
        r#"
[[tools]]
name = "hang"
endpoint = "{base}/sleep"
timeout_ms = 100
sla_ms = 50
backup = "hang_backup"
{ANY}

[[tools]]
name = "hang_backup"
endpoint = "{base}/backup"
{ANY}
"#
    );
    let (set, node) = node_of(&toml).await;
    for i in 0..5 {
        let r = one(&node, &format!("h{i}"), "hang").await;
        assert_eq!(r.status, ResultStatus::Error);
        assert_eq!(
            (&r.artifact, &r.metadata),
            (&None, &None),
            "a timeout's result has neither"
        );
        assert!(
            text(&r.content).contains("did not finish within 100 ms"),
            "{}",
            text(&r.content)
        );
    }
    assert!(
        set.get("hang").unwrap().degraded(),
        "five timeouts: p95 over the SLA"
    );
    let r = one(&node, "h5", "hang").await;
    assert_eq!(r.status, ResultStatus::Success);
    assert_eq!(r.artifact.as_ref().unwrap()["from"], "backup");
    assert_eq!(r.metadata.as_ref().unwrap()["served_by"], "hang_backup");
    let text = metrics.render();
    for want in [
        "toolmend_tool_calls_total{tool=\"hang\",result=\"timeout\"} 5",
        "toolmend_tool_sla_transitions_total{tool=\"hang\",to=\"backup\"} 1",
        "toolmend_tool_degraded{tool=\"hang\"} 1",
        "toolmend_tool_calls_total{tool=\"hang\",result=\"success\"} 1",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    // The change is a warn line naming the tool and its backup.
    let logs = captured_logs();
    assert!(
        logs.lines().any(|l| l.contains("WARN")
            && l.contains("tool breached its latency SLA: calls go to the backup")
            && l.contains("tool=hang")
            && l.contains("backup=\"hang_backup\"")),
        "{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dirty_answer_under_an_error_status_is_dropped_as_dirty_and_not_retried() {
    let metrics = metrics();
    let (base, seen) = start().await;
    let toml = format!(
        r#"
[[tools]]
name = "dirty_500"
endpoint = "{base}/dirty500"
retries = 2
idempotent = true
{ANY}
"#
    );
    let (_set, node) = node_of(&toml).await;
    let r = one(&node, "d1", "dirty_500").await;
    assert_eq!(r.status, ResultStatus::Error);
    let t = text(&r.content);
    assert!(t.contains("answered for call \"call_other\""), "{t}");
    assert!(!t.contains("someone else"), "{t}");
    assert_eq!(
        seen.hits.load(Ordering::SeqCst),
        1,
        "a dirty answer is not retried"
    );
    let m = metrics.render();
    for want in [
        "toolmend_tool_dirty_answers_total{tool=\"dirty_500\"} 1",
        "toolmend_tool_calls_total{tool=\"dirty_500\",result=\"dirty\"} 1",
    ] {
        assert!(m.contains(want), "missing {want:?} in\n{m}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_in_an_answer_is_replaced_and_recorded() {
    let (base, _seen) = start().await;
    let toml = format!(
        r#"
[[tools]]
name = "latin1"
endpoint = "{base}/latin1"
{ANY}
"#
    );
    let (_set, node) = node_of(&toml).await;
    let r = one(&node, "u1", "latin1").await;
    assert_eq!(r.status, ResultStatus::Success, "{}", text(&r.content));
    assert_eq!(r.artifact, Some(json!({"city": "Besan\u{FFFD}on"})));
    assert!(text(&r.content).contains("Besan\u{FFFD}on"));
    assert_eq!(r.metadata.as_ref().unwrap()["invalid_utf8_replaced"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_an_error_without_the_endpoint() {
    // Port 1 on loopback: nothing listens there.
    let toml = format!(
        r#"
[[tools]]
name = "gone"
endpoint = "http://admin:pw-in-url@127.0.0.1:1/tools/gone?token=tok-in-url"
{ANY}
"#
    );
    let (_set, node) = node_of(&toml).await;
    let r = one(&node, "g1", "gone").await;
    assert_eq!(r.status, ResultStatus::Error);
    let t = text(&r.content);
    // Not the call's fault, and it did not run: the model is not told to change it.
    assert_eq!(
        t,
        toolmend::node::TOOL_UNAVAILABLE_TEMPLATE.replace(
            "{error}",
            "gone: the tool service could not be reached (connection refused)"
        )
    );
    assert_eq!(r.fault, Some(toolmend::node::Fault::Unavailable));
    for leak in ["pw-in-url", "tok-in-url", "127.0.0.1:1", "/tools/gone"] {
        assert!(!t.contains(leak), "the endpoint leaked ({leak}): {t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_secrets_and_endpoints_never_reach_the_logs() {
    capture_logs(EVERY_LOG_LINE);
    let (base, _seen) = start().await;
    // A secret header from the environment on every tool; one service unreachable (its
    // URL with credentials and a token), one answering for another call.
    let toml = format!(
        r#"
[[tools]]
name = "gone_again"
endpoint = "http://admin:pw-in-url@127.0.0.1:1/x?token=tok-in-url"
headers = {{ Authorization = {{ env = "TM_TEST_TOKEN", prefix = "Bearer " }} }}
{ANY}

[[tools]]
name = "dirty_logged"
endpoint = "{base}/dirty"
headers = {{ Authorization = {{ env = "TM_TEST_TOKEN", prefix = "Bearer " }} }}
{ANY}
"#
    );
    let (_set, node) = node_of(&toml).await;
    assert_eq!(
        one(&node, "s1", "gone_again").await.status,
        ResultStatus::Error
    );
    assert_eq!(
        one(&node, "s2", "dirty_logged").await.status,
        ResultStatus::Error
    );
    let logs = captured_logs();
    assert!(
        logs.contains("tool service failed") && logs.contains("tool=gone_again"),
        "{logs}"
    );
    assert!(
        logs.contains("dirty tool answer dropped") && logs.contains("tool=dirty_logged"),
        "{logs}"
    );
    for secret in ["s3cret", "pw-in-url", "tok-in-url", "someone else"] {
        assert!(!logs.contains(secret), "{secret} logged:\n{logs}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_is_the_call_id_on_every_attempt() {
    let (base, seen) = start().await;
    let toml = format!(
        r#"
[[tools]]
name = "charge"
endpoint = "{base}/flaky"
retries = 2
idempotency_key = true
{ANY}
"#
    );
    let (_set, node) = node_of(&toml).await;
    let r = one(&node, "call_k", "charge").await;
    assert_eq!(r.status, ResultStatus::Success);
    let hs = seen.headers.lock().unwrap();
    let got: Vec<(&str, &str)> = hs
        .iter()
        .map(|h| (h["x-tool-call-id"].as_str(), h["idempotency-key"].as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("call_k", "call_k"),
            ("call_k-retry1", "call_k"),
            ("call_k-retry2", "call_k")
        ]
    );
}

#[tokio::test]
async fn startup_errors_name_the_tool_and_the_line() {
    let cases: &[(&str, &str)] = &[
        (
            "[[tools]]\nname = \"a\"\nendpoint = \"not a url\"\nparameters = { type = \"object\" }\n",
            "t.toml:1: tool \"a\": endpoint \"not a url\" is not a URL",
        ),
        (
            "\n\n[[tools]]\nname = \"b\"\nendpoint = \"http://127.0.0.1:1/x\"\nparameters = { type = 12 }\n",
            "t.toml:3: tool \"b\": the parameters schema does not compile",
        ),
        (
            "[[tools]]\nname = \"c\"\nendpoint = \"http://127.0.0.1:1/x\"\nparameters = { type = \"object\" }\ntemplate = \"{{ oops \"\n",
            "t.toml:1: tool \"c\": the template does not compile",
        ),
        (
            "[[tools]]\nname = \"d\"\nendpoint = \"http://127.0.0.1:1/x\"\nretries = 2\nparameters = { type = \"object\" }\n",
            "tool \"d\": retries = 2 on a tool that is neither idempotent",
        ),
        (
            "[[tools]]\nname = \"e\"\nendpoint = \"http://127.0.0.1:1/x\"\nbackup = \"nope\"\nparameters = { type = \"object\" }\n",
            "backup \"nope\" is not a declared tool",
        ),
        (
            "[[tools]]\nname = \"f\"\nendpoint = \"http://127.0.0.1:1/x\"\nparameters = { type = \"object\" }\nheaders = { Authorization = { env = \"TM_UNSET_VAR\" } }\n",
            "the environment variable TM_UNSET_VAR",
        ),
        (
            "[[tools]]\nname = \"g\"\nendpoint = \"http://127.0.0.1:1/x\"\nparameters = { type = \"object\", properties = { d = { type = \"string\", x-business-rules = { max_dayz = 3 } } } }\n",
            "unknown business rule \"max_dayz\" at /d",
        ),
        (
            "[[tools]]\nname = \"h\"\nendpint = \"http://127.0.0.1:1/x\"\n",
            "t.toml:3: unknown field `endpint`",
        ),
        (
            "[[tools]]\nname = \"i j\"\nendpoint = \"http://127.0.0.1:1/x\"\nparameters = { type = \"object\" }\n",
            "a tool name must match",
        ),
        (
            "[[tools]]\nname = \"k\"\nendpoint = \"http://127.0.0.1:1/x\"\nparameters = { type = \"object\" }\n[[tools]]\nname = \"k\"\nendpoint = \"http://127.0.0.1:1/y\"\nparameters = { type = \"object\" }\n",
            "t.toml:5: tool \"k\": declared twice (first at line 1)",
        ),
        (
            "[[tools]]\nname = \"m\"\nkind = \"mcp\"\nserver = \"nowhere\"\n",
            "server \"nowhere\" is not an [[mcp]] entry",
        ),
    ];
    for (toml, want) in cases {
        let err = match ToolsFile::parse(toml, "t.toml") {
            Err(e) => e,
            Ok(file) => ToolSet::load(&file, &|_| None).await.unwrap_err(),
        };
        assert!(
            err.to_string().contains(want),
            "{toml}\n  got:  {err}\n  want: {want}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_rules_in_the_schema_become_feedback() {
    let (base, seen) = start().await;
    let toml = format!(
        r#"
[[tools]]
name = "book"
endpoint = "{base}/weather"
[tools.parameters]
type = "object"
required = ["start"]
[tools.parameters.properties.start]
type = "string"
format = "date"
x-business-rules = {{ min_date = "2020-01-01" }}
"#
    );
    let set = ToolSet::load(&ToolsFile::parse(&toml, "t.toml").unwrap(), &env)
        .await
        .unwrap();
    let node = ToolNode::builder(set.registry().unwrap()).build();
    let out = node
        .invoke(&assistant(&[
            ("b1", "book", r#"{"start": "2019-03-01"}"#),
            ("b2", "book", r#"{"start": "2021-03-01"}"#),
        ]))
        .await
        .unwrap();
    assert_eq!(out.results.len(), 2);
    assert_eq!(out.results[0].status, ResultStatus::Error);
    assert!(
        text(&out.results[0].content).contains("before the earliest allowed date, 2020-01-01"),
        "{}",
        text(&out.results[0].content)
    );
    assert_eq!(out.results[1].status, ResultStatus::Success);
    assert_eq!(
        seen.hits.load(Ordering::SeqCst),
        1,
        "the call that broke a rule was not sent"
    );
}

#[test]
fn the_docs_example_is_a_valid_tools_file() {
    let doc = include_str!("../../../../docs/tools.md");
    let start = doc.find("```toml\n").unwrap() + "```toml\n".len();
    let end = start + doc[start..].find("```").unwrap();
    let file = ToolsFile::parse(&doc[start..end], "docs/tools.md").unwrap();
    let names: Vec<&str> = file.tools.iter().map(|(_, t)| t.name.as_str()).collect();
    assert_eq!(names, ["get_weather", "legacy_quote", "read"]);
    assert_eq!(file.mcp.len(), 1);
    assert_eq!(
        file.tools[0]
            .1
            .limits
            .as_ref()
            .unwrap()
            .session
            .as_ref()
            .unwrap()
            .limit,
        5
    );
}
