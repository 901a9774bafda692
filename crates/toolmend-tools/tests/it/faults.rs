//! The fault suite of HTTP tool services, through a `ToolSet` and the tool node: a secret
//! in the URL (userinfo, query), in a failing service's body (a 5xx with a password and a
//! stack trace), in the payload (a result template that fails, over a field it was
//! written to hide) reaches no model-visible text, no client response (what the gateway's
//! `/v1/tools/execute` returns: each result's content, artifact and metadata, and the
//! node's stats) and no log line, ours or our dependencies' (captured down to debug).
//! And every error says whose fault it is: the call's (LangGraph's words) or the tool's
//! (unavailable, timed out, failed), with `fault` machine-readable.

use crate::common::{EVERY_LOG_LINE, capture_logs, captured_logs};
use axum::{
    Json, Router,
    extract::Path,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};
use toolmend::{
    conversation::{AssistantMessage, Content, Message, ToolCall},
    node::{
        Fault, NodeOutput, ResultStatus, TOOL_ERROR_TEMPLATE, TOOL_FAILED_TEMPLATE,
        TOOL_TIMEOUT_TEMPLATE, TOOL_UNAVAILABLE_TEMPLATE, ToolNode, ToolResult,
    },
};
use toolmend_tools::{ToolSet, ToolsFile};

/// Every secret of the suite: none may appear anywhere.
const SECRETS: &[&str] = &[
    "USERINFO_SECRET",
    "QUERY_SECRET",
    "FRAGMENT_SECRET",
    "BODY_SECRET",
    "PAYLOAD_SECRET",
];

async fn service(Path(route): Path<String>, headers: HeaderMap) -> Response {
    let id = headers
        .get("x-tool-call-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    match route.as_str() {
        // A crash: a stack trace naming an internal host with its password, as text.
        "crash" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "Traceback (most recent call last):\n  File \"/srv/app.py\", line 3, in charge\n\
             psycopg.OperationalError: connection to postgres://app:BODY_SECRET_1@db.internal:5432/orders failed\n\
             password=BODY_SECRET_2\n",
        )
            .into_response(),
        // A JSON error object: its message is the reason; the rest of the body is not.
        "json503" => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": {"message": "database unavailable"},
                "debug": {"password": "BODY_SECRET_3", "trace": "at Orders.charge (internal.js:12)"}})),
        )
            .into_response(),
        "refused_args" => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"detail": [{"msg": "city: unknown city 'Atlantis'"}]})),
        )
            .into_response(),
        "busy" => (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response(),
        // Never answers: the tool times out, however loaded the machine.
        "sleep" => std::future::pending().await,
        "tool_error" => Json(json!({"status": "error", "message": "user u9 not found", "call_id": id}))
            .into_response(),
        // A payload with fields the template was written to hide.
        "account" => Json(json!({"status": "success", "call_id": id, "data": {
            "name": "Ann", "ssn": "PAYLOAD_SECRET_SSN", "balance": "PAYLOAD_SECRET_BALANCE",
            "opened": "PAYLOAD_SECRET_OPENED"}}))
        .into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn start() -> String {
    let app = Router::new().route("/{route}", post(service));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn env(_: &str) -> Option<String> {
    None
}

async fn node_of(toml: &str) -> (ToolSet, ToolNode) {
    let set = ToolSet::load(&ToolsFile::parse(toml, "t.toml").unwrap(), &env)
        .await
        .unwrap();
    let node = ToolNode::builder(set.registry().unwrap()).build();
    (set, node)
}

/// One call without arguments: its result, and what a client of the gateway would get
/// for it (the result's content, artifact and metadata, and the stats).
async fn one(node: &ToolNode, id: &str, tool: &str) -> (ToolResult, String) {
    let messages = vec![Message::Assistant(AssistantMessage {
        tool_calls: Some(vec![ToolCall::new(id, tool, "{}")]),
        ..Default::default()
    })];
    let NodeOutput {
        mut results, stats, ..
    } = node.invoke(&messages).await.unwrap();
    assert_eq!(results.len(), 1);
    let r = results.remove(0);
    let client = json!({"content": r.content, "status": r.status, "artifact": r.artifact,
        "metadata": r.metadata, "fault": r.fault, "stats": stats})
    .to_string();
    (r, client)
}

fn text(c: &Content) -> String {
    match c {
        Content::Text(t) => t.clone(),
        other => serde_json::to_string(other).unwrap(),
    }
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} in the {what}:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_of_the_url_the_body_or_the_payload_reaches_the_model_a_client_or_the_log() {
    capture_logs(EVERY_LOG_LINE);
    let base = start().await;
    let toml = format!(
        r#"
[[tools]]
name = "unreachable"
endpoint = "http://admin:USERINFO_SECRET@127.0.0.1:1/x?key=QUERY_SECRET#FRAGMENT_SECRET"
parameters = {{ type = "object" }}

[[tools]]
name = "crash"
endpoint = "{base}/crash?key=QUERY_SECRET"
parameters = {{ type = "object" }}

[[tools]]
name = "json503"
endpoint = "{base}/json503"
parameters = {{ type = "object" }}

[[tools]]
name = "account"
endpoint = "{base}/account"
parameters = {{ type = "object" }}
template = "Balance of {{{{ name }}}}: {{{{ round(balance, 2) + 1 }}}}"

[[tools]]
name = "account_opened"
endpoint = "{base}/account"
parameters = {{ type = "object" }}
template = "{{{{ name }}}}, customer since {{{{ date(opened) }}}}"
"#
    );
    let (_set, node) = node_of(&toml).await;

    // The URL: unreachable, with credentials, a key and a fragment.
    let (r, client) = one(&node, "u1", "unreachable").await;
    let model = text(&r.content);
    assert_eq!(
        model,
        TOOL_UNAVAILABLE_TEMPLATE.replace(
            "{error}",
            "unreachable: the tool service could not be reached (connection refused)"
        )
    );
    assert_no_secret("model's text", &model);
    assert_no_secret("client's response", &client);

    // The body: a crash with a stack trace and a password (text), and a JSON error.
    let (r, client) = one(&node, "b1", "crash").await;
    let model = text(&r.content);
    assert_eq!(
        model,
        TOOL_FAILED_TEMPLATE.replace("{error}", "crash: the tool service answered HTTP 500")
    );
    assert_no_secret("client's response", &client);
    for internal in ["Traceback", "db.internal", "app.py"] {
        assert!(!client.contains(internal), "{internal}: {client}");
    }
    let (r, client) = one(&node, "b2", "json503").await;
    assert_eq!(
        text(&r.content),
        TOOL_FAILED_TEMPLATE.replace(
            "{error}",
            "json503: the tool service answered HTTP 503: database unavailable"
        )
    );
    assert_no_secret("client's response", &client);
    assert!(!client.contains("internal.js"), "{client}");

    // The payload: two templates that fail, one on a value it quotes in its error.
    for (id, tool) in [("p1", "account"), ("p2", "account_opened")] {
        let (r, client) = one(&node, id, tool).await;
        assert_eq!(r.status, ResultStatus::Error);
        assert_eq!(r.fault, Some(Fault::Failed));
        assert_eq!(r.artifact, None, "the payload is not kept either");
        let model = text(&r.content);
        let prefix =
            format!("Error: {tool}: the tool ran, but its result template failed (line 1: ");
        assert!(model.starts_with(&prefix), "{model}");
        assert!(
            model.contains("so its result cannot be shown") && !model.contains("Ann"),
            "{model}"
        );
        assert_no_secret("model's text", &model);
        assert_no_secret("client's response", &client);
        assert_eq!(r.metadata.as_ref().unwrap()["shaped_by"], "template_failed");
    }

    let logs = captured_logs();
    assert_no_secret("log", &logs);
    // No dump of a dependency's error (its type, its fields).
    for dump in ["reqwest::Error", "Error {", "kind: "] {
        assert!(!logs.contains(dump), "{dump} logged:\n{logs}");
    }
    // What happened is logged all the same: each failure at warn naming its tool, the
    // crash's body at debug (redacted), the template's error.
    for tool in ["unreachable", "crash", "json503"] {
        assert!(
            logs.lines().any(|l| l.contains("WARN")
                && l.contains("tool service failed")
                && l.contains(&format!("tool={tool}"))),
            "{tool}:\n{logs}"
        );
    }
    assert!(
        logs.lines().any(|l| l.contains("DEBUG")
            && l.contains("tool service error body")
            && l.contains("status=500")
            && l.contains("password=***")
            && l.contains("postgres://db.internal:5432/orders")),
        "{logs}"
    );
    assert!(
        logs.lines().any(|l| l.contains("WARN")
            && l.contains("tool result template failed")
            && l.contains("tool=account_opened")
            && l.contains("date: cannot read")),
        "{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_error_says_whose_fault_it_is() {
    let base = start().await;
    let toml = format!(
        r#"
[[tools]]
name = "tool_error"
endpoint = "{base}/tool_error"
parameters = {{ type = "object" }}

[[tools]]
name = "refused_args"
endpoint = "{base}/refused_args"
parameters = {{ type = "object" }}

[[tools]]
name = "busy"
endpoint = "{base}/busy"
parameters = {{ type = "object" }}

[[tools]]
name = "sleep"
endpoint = "{base}/sleep"
timeout_ms = 100
parameters = {{ type = "object" }}

[[tools]]
name = "unreachable"
endpoint = "http://127.0.0.1:1/x"
parameters = {{ type = "object" }}

[[tools]]
name = "crash"
endpoint = "{base}/crash"
parameters = {{ type = "object" }}
"#
    );
    let (_set, node) = node_of(&toml).await;
    let cases = [
        // The tool itself says the call is wrong: LangGraph's words, for drop-in use.
        (
            "tool_error",
            Fault::Call,
            TOOL_ERROR_TEMPLATE.replace("{error}", "tool_error failed: user u9 not found"),
        ),
        // The service refused the arguments (422), with a JSON reason.
        (
            "refused_args",
            Fault::Call,
            TOOL_ERROR_TEMPLATE.replace(
                "{error}",
                "refused_args: the tool service answered HTTP 422: city: unknown city 'Atlantis'",
            ),
        ),
        // Not taken (429): it did not run.
        (
            "busy",
            Fault::Unavailable,
            TOOL_UNAVAILABLE_TEMPLATE
                .replace("{error}", "busy: the tool service answered HTTP 429"),
        ),
        // Not reached: it did not run.
        (
            "unreachable",
            Fault::Unavailable,
            TOOL_UNAVAILABLE_TEMPLATE.replace(
                "{error}",
                "unreachable: the tool service could not be reached (connection refused)",
            ),
        ),
        // No answer in time: it may have run.
        (
            "sleep",
            Fault::Timeout,
            TOOL_TIMEOUT_TEMPLATE.replace("{error}", "the tool did not finish within 100 ms"),
        ),
        // A 500: it may have run.
        (
            "crash",
            Fault::Failed,
            TOOL_FAILED_TEMPLATE.replace("{error}", "crash: the tool service answered HTTP 500"),
        ),
    ];
    for (tool, fault, expected) in cases {
        let (r, client) = one(&node, &format!("{tool}_1"), tool).await;
        assert_eq!(r.status, ResultStatus::Error, "{tool}");
        assert_eq!(r.fault, Some(fault), "{tool}");
        assert_eq!(text(&r.content), expected, "{tool}");
        // Machine-readable for a client: the result's and the stats' `fault`.
        let v: Value = serde_json::from_str(&client).unwrap();
        assert_eq!(v["fault"], json!(fault.as_str()), "{tool}");
        assert_eq!(
            v["stats"]["calls"][0]["fault"],
            json!(fault.as_str()),
            "{tool}"
        );
    }
    // Only the call's own fault tells the model to fix it.
    for template in [
        TOOL_UNAVAILABLE_TEMPLATE,
        TOOL_TIMEOUT_TEMPLATE,
        TOOL_FAILED_TEMPLATE,
    ] {
        assert!(!template.contains("fix your mistakes"), "{template}");
        assert!(template.contains("Nothing is known to be wrong with your call"));
    }
    assert!(TOOL_UNAVAILABLE_TEMPLATE.contains("did not run"));
    assert!(TOOL_TIMEOUT_TEMPLATE.contains("may or may not have run"));
    assert!(TOOL_FAILED_TEMPLATE.contains("may or may not have run"));
}
