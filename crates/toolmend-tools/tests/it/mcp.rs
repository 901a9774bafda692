//! `McpConnection` against real MCP servers on loopback, no mocks: an rmcp server
//! written here (over streamable HTTP, and over stdio as this very test binary run
//! again: [`stdio_server_child_process`]), and the Python SDK's server
//! (`tests/mcp_server.py`, over both) as an independent implementation.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use crate::common::{EVERY_LOG_LINE, PATIENCE, capture_logs, captured_logs, eventually, metrics};
use axum::{response::IntoResponse as _, serve::ListenerExt as _};
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use toolmend_tools::{
    mcp::{MAX_MESSAGE_BYTES, McpConnection, McpToolDef, RECONNECT_BACKOFF_MIN},
    spec::{DEFAULT_MAX_RESPONSE_BYTES, McpSpec},
    transport::{Reply, ServiceRequest, TransportError},
};

// ---------------------------------------------------------------------------------
// The rmcp test server.

/// Tells this test binary, run again as a child, to be the stdio server.
const CHILD_ENV: &str = "TOOLMEND_MCP_TEST_SERVER";
const TOKEN: &str = "s3cret";
/// A file the stdio server adds a line to each time it starts.
const STARTS_ENV: &str = "TOOLMEND_MCP_TEST_STARTS";
/// Tells the stdio server to write to its stderr as it starts.
const STDERR_ENV: &str = "TOOLMEND_MCP_TEST_STDERR";

#[derive(Clone, Default)]
struct TestServer {
    /// `slow` calls begun, and those the client cancelled.
    slow: Arc<AtomicUsize>,
    cancelled: Arc<AtomicUsize>,
    /// `meta` calls with `together` that have come in, and that have been answered.
    arrived: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
}

/// A `slow` call's sleep that outlasts any test: a call that must time out gets no answer.
const NEVER_MS: u64 = 3_600_000;

fn tools() -> Vec<Value> {
    let int = json!({"type": "integer"});
    vec![
        json!({"name": "add", "description": "Adds a and b.",
            "inputSchema": {"type": "object", "properties": {"a": int, "b": int}, "required": ["a", "b"]},
            "outputSchema": {"type": "object", "properties": {"sum": int}, "required": ["sum"]}}),
        json!({"name": "echo", "description": "Answers its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}),
        json!({"name": "fail", "inputSchema": {"type": "object"}}),
        json!({"name": "slow", "inputSchema": {"type": "object", "properties": {"ms": int}}}),
        json!({"name": "big", "inputSchema": {"type": "object"}}),
        json!({"name": "huge", "inputSchema": {"type": "object"}}),
        json!({"name": "bad_schema", "inputSchema": {"type": 12}}),
        json!({"name": "wrong_output", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"n": int}, "required": ["n"]}}),
        json!({"name": "no_structured", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"}}),
        json!({"name": "image", "inputSchema": {"type": "object"}}),
        json!({"name": "rpc_error", "inputSchema": {"type": "object"}}),
        json!({"name": "meta", "inputSchema": {"type": "object", "properties": {"ms": int}}}),
        json!({"name": "echo_id", "inputSchema": {"type": "object"}}),
        json!({"name": "dirty", "inputSchema": {"type": "object"}}),
        json!({"name": "pid", "inputSchema": {"type": "object"}}),
        json!({"name": "env", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
        json!({"name": "exit", "description": "The stdio server exits without answering.",
            "inputSchema": {"type": "object"}}),
    ]
}

fn result(v: Value) -> Result<CallToolResponse, ErrorData> {
    Ok(serde_json::from_value::<CallToolResult>(v).unwrap().into())
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    result(json!({"content": [{"type": "text", "text": t.into()}]}))
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    /// Four tools a page, so the client has to follow `nextCursor`.
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let all = tools();
        let start: usize = request
            .and_then(|r| r.cursor)
            .map_or(0, |c| c.parse().unwrap());
        let end = (start + 4).min(all.len());
        let mut page = json!({"tools": all[start..end]});
        if end < all.len() {
            page["nextCursor"] = json!(end.to_string());
        }
        Ok(serde_json::from_value(page).unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let seen_call_id = context.meta.get("io.toolmend/callId").cloned();
        let sleep = |ms: &Value| Duration::from_millis(ms.as_u64().unwrap_or(0));
        match request.name.as_ref() {
            "add" => {
                let sum = args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap();
                result(
                    json!({"content": [{"type": "text", "text": json!({"sum": sum}).to_string()}],
                    "structuredContent": {"sum": sum}}),
                )
            }
            "echo" => text(args["text"].as_str().unwrap()),
            "fail" => result(json!({"content": [{"type": "text", "text": "it failed"},
                {"type": "text", "text": "twice"}], "structuredContent": {"code": 7}, "isError": true})),
            "slow" => {
                self.slow.fetch_add(1, Ordering::SeqCst);
                tokio::select! {
                    () = tokio::time::sleep(sleep(&args["ms"])) => text("slept"),
                    () = context.ct.cancelled() => {
                        self.cancelled.fetch_add(1, Ordering::SeqCst);
                        text("cancelled")
                    }
                }
            }
            "big" => text("x".repeat(DEFAULT_MAX_RESPONSE_BYTES + 1000)),
            "huge" => text("x".repeat(MAX_MESSAGE_BYTES + 1000)),
            "bad_schema" => text("ok"),
            "wrong_output" => result(json!({"content": [], "structuredContent": {"n": "seven"}})),
            "no_structured" => text("just text"),
            "image" => result(json!({"content": [{"type": "text", "text": "a chart"},
                {"type": "image", "data": "QUJD", "mimeType": "image/png"}]})),
            "rpc_error" => Err(ErrorData::invalid_params("the server refuses", None)),
            "meta" => {
                tokio::time::sleep(sleep(&args["ms"])).await;
                // With `together: n`: no answer before n such calls are in at once, then
                // one at a time in `rank` order (0 first).
                if let Some(n) = args["together"].as_u64() {
                    let (n, rank) = (n as usize, args["rank"].as_u64().unwrap_or(0) as usize);
                    self.arrived.fetch_add(1, Ordering::SeqCst);
                    while self.arrived.load(Ordering::SeqCst) < n
                        || self.answered.load(Ordering::SeqCst) < rank
                    {
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_millis(1)) => {}
                            () = context.ct.cancelled() => return text("cancelled"),
                        }
                    }
                    self.answered.fetch_add(1, Ordering::SeqCst);
                }
                result(json!({"content": [], "structuredContent": {
                    "callId": seen_call_id, "traceId": context.meta.get("io.toolmend/traceId")}}))
            }
            "echo_id" => result(json!({"content": [{"type": "text", "text": "ok"}],
                "_meta": {"io.toolmend/callId": seen_call_id}})),
            "dirty" => result(
                json!({"content": [{"type": "text", "text": "someone else's"}],
                "_meta": {"io.toolmend/callId": "call_someone_else"}}),
            ),
            "pid" => text(std::process::id().to_string()),
            // Only the stdio child exits (never the test binary serving HTTP).
            "exit" if std::env::var(CHILD_ENV).is_ok() => std::process::exit(3),
            "env" => result(json!({"content": [],
                "structuredContent": {"value": std::env::var(args["name"].as_str().unwrap()).ok()}})),
            other => Err(ErrorData::invalid_params(
                format!("no tool {other:?}"),
                None,
            )),
        }
    }
}

/// The test server over streamable HTTP on 127.0.0.1, behind a bearer token. Stops
/// when dropped.
struct HttpServer {
    url: String,
    server: TestServer,
    /// While set, every request is answered 503.
    outage: Arc<AtomicBool>,
    /// Connections accepted, and requests received on them.
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn http_server() -> HttpServer {
    http_server_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap())
}

fn http_server_on(listener: tokio::net::TcpListener) -> HttpServer {
    let server = TestServer::default();
    let factory = server.clone();
    let outage = Arc::new(AtomicBool::new(false));
    let down = outage.clone();
    let (connections, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (accepted, received) = (connections.clone(), requests.clone());
    let service = StreamableHttpService::new(
        move || Ok(factory.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    received.fetch_add(1, Ordering::SeqCst);
                    let down = down.load(Ordering::SeqCst);
                    async move {
                        if down {
                            return axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
                        }
                        let authorized = req
                            .headers()
                            .get("authorization")
                            .is_some_and(|v| v == format!("Bearer {TOKEN}").as_str());
                        if authorized {
                            next.run(req).await
                        } else {
                            axum::http::StatusCode::UNAUTHORIZED.into_response()
                        }
                    }
                },
            ));
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let listener = listener.tap_io(move |_| {
        accepted.fetch_add(1, Ordering::SeqCst);
    });
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    HttpServer {
        url,
        server,
        outage,
        connections,
        requests,
        task,
    }
}

/// Not a test of its own: the stdio server, when this binary is run again as a child
/// with [`CHILD_ENV`] set (libtest's `running 1 test` line on stdout is not JSON, and
/// MCP clients skip such lines). Otherwise it passes at once.
#[tokio::test]
async fn stdio_server_child_process() {
    if std::env::var(CHILD_ENV).as_deref() != Ok("stdio") {
        return;
    }
    // Each start is a line in `STARTS_ENV`'s file; while `<that file>.refuse` exists,
    // the server exits before its handshake.
    if let Ok(path) = std::env::var(STARTS_ENV) {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(f, "{}", std::process::id()).unwrap();
        if std::path::Path::new(&format!("{path}.refuse")).exists() {
            std::process::exit(1);
        }
    }
    // A server that talks on stderr: a secret in a URL, colours, a line over the bound.
    if std::env::var(STDERR_ENV).is_ok() {
        eprintln!(
            "starting up; db at postgres://app:STDERR_SECRET@db.internal/x?key=STDERR_SECRET"
        );
        eprintln!("\x1b[31mERROR\x1b[0m the cache is cold");
        eprintln!("{}", "x".repeat(5_000));
    }
    let running = TestServer::default()
        .serve(rmcp::transport::stdio())
        .await
        .unwrap();
    let _ = running.waiting().await;
}

// ---------------------------------------------------------------------------------
// Helpers.

fn env(name: &str) -> Option<String> {
    match name {
        "MCP_TOKEN" => Some(TOKEN.to_owned()),
        "MCP_CHILD_SECRET" => Some("from-our-env".to_owned()),
        _ => None,
    }
}

fn spec(v: Value) -> McpSpec {
    serde_json::from_value(v).unwrap()
}

fn http_spec(url: &str) -> McpSpec {
    spec(
        json!({"name": "rust-http", "url": url, "timeout_ms": PATIENCE.as_millis(),
        "headers": {"Authorization": {"env": "MCP_TOKEN", "prefix": "Bearer "}}}),
    )
}

fn stdio_spec() -> McpSpec {
    let exe = std::env::current_exe().unwrap();
    spec(json!({"name": "rust-stdio", "command": exe,
        "args": ["--exact", "mcp::stdio_server_child_process", "--nocapture"],
        "timeout_ms": PATIENCE.as_millis(),
        "env": {CHILD_ENV: "stdio", "CHILD_SECRET": {"env": "MCP_CHILD_SECRET"}}}))
}

async fn connect(spec: &McpSpec) -> McpConnection {
    McpConnection::connect(spec, &env).await.unwrap()
}

async fn call(
    conn: &McpConnection,
    function: &str,
    arguments: Value,
) -> Result<Reply, TransportError> {
    call_as(conn, function, "call_1", arguments, PATIENCE).await
}

async fn call_as(
    conn: &McpConnection,
    function: &str,
    call_id: &str,
    arguments: Value,
    timeout: Duration,
) -> Result<Reply, TransportError> {
    let req = ServiceRequest {
        function,
        call_id,
        trace_id: "trace_1",
        arguments: &arguments,
        timeout,
    };
    conn.call(&req).await.map(|(reply, notes)| {
        assert_eq!(notes.attempts, 1);
        assert!(notes.bytes > 0);
        reply
    })
}

fn success(data: Value) -> Result<Reply, TransportError> {
    Ok(Reply::Success {
        data,
        message: None,
    })
}

fn protocol_error(r: Result<Reply, TransportError>) -> String {
    match r {
        Err(TransportError::Protocol(m)) => m,
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------
// The rmcp server over streamable HTTP.

#[tokio::test]
async fn http_lists_every_page_as_declared() {
    let server = http_server().await;
    let conn = connect(&http_spec(&server.url)).await;
    let listed = conn.list_tools().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    let declared: Vec<Value> = tools();
    assert_eq!(names.len(), declared.len(), "every page: {names:?}");
    assert_eq!(
        listed[0],
        McpToolDef {
            name: "add".into(),
            description: "Adds a and b.".into(),
            input_schema: declared[0]["inputSchema"].clone(),
            output_schema: Some(declared[0]["outputSchema"].clone()),
        }
    );
    let bad = listed.iter().find(|t| t.name == "bad_schema").unwrap();
    assert_eq!(
        bad.input_schema,
        json!({"type": 12}),
        "kept as sent, not judged here"
    );
    assert_eq!(bad.description, "");
    let echo = listed.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.output_schema, None);
}

#[tokio::test]
async fn http_results_structured_text_and_errors() {
    let server = http_server().await;
    let conn = connect(&http_spec(&server.url)).await;
    // structuredContent is the data (and matches the outputSchema).
    assert_eq!(
        call(&conn, "add", json!({"a": 2, "b": 3})).await,
        success(json!({"sum": 5}))
    );
    // One text block is a string, even when it looks like JSON.
    assert_eq!(
        call(&conn, "echo", json!({"text": "hello"})).await,
        success(json!("hello"))
    );
    assert_eq!(
        call(&conn, "echo", json!({"text": "{\"a\": 1}"})).await,
        success(json!("{\"a\": 1}"))
    );
    // isError: the text joined, structuredContent beside.
    assert_eq!(
        call(&conn, "fail", json!({})).await,
        Ok(Reply::Failed {
            message: "it failed\ntwice".into(),
            data: Some(json!({"code": 7})),
        })
    );
    // Several blocks: an array; an image a descriptor, never its bytes.
    assert_eq!(
        call(&conn, "image", json!({})).await,
        success(json!(["a chart", {"type": "image", "mimeType": "image/png", "bytes": 3}]))
    );
    // A tool whose inputSchema is no schema still runs (judging it is the set's job).
    assert_eq!(
        call(&conn, "bad_schema", json!({})).await,
        success(json!("ok"))
    );
}

#[tokio::test]
async fn http_protocol_errors() {
    let server = http_server().await;
    let conn = connect(&http_spec(&server.url)).await;
    let m = protocol_error(call(&conn, "wrong_output", json!({})).await);
    assert!(
        m.starts_with("structuredContent does not match the tool's outputSchema: at /n:"),
        "{m}"
    );
    assert!(!m.contains("seven"), "the value is not echoed: {m}");
    let m = protocol_error(call(&conn, "no_structured", json!({})).await);
    assert!(m.contains("declares an outputSchema"), "{m}");
    let m = protocol_error(call(&conn, "rpc_error", json!({})).await);
    assert_eq!(m, "JSON-RPC error -32602: the server refuses");
    let m = protocol_error(call(&conn, "nope", json!({})).await);
    assert!(m.starts_with("JSON-RPC error -32602"), "{m}");
    let m = protocol_error(call(&conn, "echo", json!(["not", "an", "object"])).await);
    assert_eq!(
        m,
        "the arguments of tools/call must be a JSON object, not an array"
    );
    // Too large: over the limit serialized, though the transport took it.
    assert_eq!(
        call(&conn, "big", json!({})).await,
        Err(TransportError::TooLarge {
            limit: DEFAULT_MAX_RESPONSE_BYTES
        })
    );
    // An HTTP error status.
    server.outage.store(true, Ordering::SeqCst);
    let r = call(&conn, "add", json!({"a": 1, "b": 1})).await;
    server.outage.store(false, Ordering::SeqCst);
    assert!(
        matches!(r, Err(TransportError::Status { status: 503, .. })),
        "{r:?}"
    );
    // The connection still serves after all of that.
    assert_eq!(
        call(&conn, "add", json!({"a": 1, "b": 1})).await,
        success(json!({"sum": 2}))
    );
    // Over the transport's bound: refused while read, never decoded, an error result
    // (rmcp's transport drops the session's stream then; last, as the session may end).
    let r = call(&conn, "huge", json!({})).await;
    // (It ran: the exchange broke off after the call was sent.)
    assert!(matches!(r, Err(TransportError::Broken(_))), "{r:?}");
    // The next call starts a new session if that one ended.
    assert_eq!(
        call(&conn, "add", json!({"a": 2, "b": 2})).await,
        success(json!({"sum": 4}))
    );
}

#[tokio::test]
async fn http_a_restarted_server_gets_a_new_session() {
    let server = http_server().await;
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let conn = connect(&http_spec(&server.url)).await;
    assert_eq!(
        call(&conn, "echo", json!({"text": "first"})).await,
        success(json!("first"))
    );
    // The server goes away and comes back on the same port, without our session.
    drop(server);
    until_refused(&addr).await;
    let down = call(&conn, "echo", json!({"text": "down"})).await;
    // Refused: not sent, so the call did not run.
    assert_eq!(
        down,
        Err(TransportError::Connect("connection refused".into()))
    );
    let _again = http_server_on(rebind(&addr).await);
    // Answered 404 for the old session, the client initializes again and resends (the
    // MCP specification's rule); or, if the session had ended, starts a new one.
    let until = Instant::now() + PATIENCE;
    let back = loop {
        match call(&conn, "echo", json!({"text": "back"})).await {
            Ok(reply) => break reply,
            // Within the wait after a failed start.
            Err(TransportError::Connect(m)) if m.contains("next try in") => {
                assert!(Instant::now() < until, "never served again: {m}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(
        back,
        Reply::Success {
            data: json!("back"),
            message: None
        }
    );
}

/// Waits until nothing listens on `addr` (a dropped server's listener closes when its
/// aborted task is next polled).
async fn until_refused(addr: &str) {
    eventually(&format!("{addr} still accepts connections"), || {
        std::net::TcpStream::connect(addr).is_err()
    })
    .await;
}

/// A listener on `addr` again, once the port is free.
async fn rebind(addr: &str) -> tokio::net::TcpListener {
    let until = Instant::now() + PATIENCE;
    loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => return l,
            Err(e) => {
                assert!(Instant::now() < until, "{addr} never free again: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

#[tokio::test]
async fn http_meta_carries_ids_and_a_dirty_answer_is_dropped() {
    let server = http_server().await;
    let conn = connect(&http_spec(&server.url)).await;
    let seen = call_as(&conn, "meta", "call_abc", json!({}), PATIENCE).await;
    assert_eq!(
        seen,
        success(json!({"callId": "call_abc", "traceId": "trace_1"}))
    );
    // Echoing our own id is fine; naming another call is not.
    assert_eq!(
        call(&conn, "echo_id", json!({})).await,
        success(json!("ok"))
    );
    assert_eq!(
        call(&conn, "dirty", json!({})).await,
        Err(TransportError::Dirty {
            got: "call_someone_else".into()
        })
    );
}

#[tokio::test]
async fn http_timeout_cancels_at_the_server_and_the_connection_survives() {
    let server = http_server().await;
    let conn = connect(&http_spec(&server.url)).await;
    // A call the server would answer only after the test: the timeout is what ends it. Long
    // enough for the call to reach the server first on a loaded machine: a cancel that
    // overtakes its call (each request has a connection of its own) finds nothing to cancel.
    let timeout = Duration::from_secs(5);
    let r = call_as(&conn, "slow", "call_slow", json!({"ms": NEVER_MS}), timeout).await;
    assert_eq!(r, Err(TransportError::Timeout(timeout)));
    assert_eq!(
        server.server.slow.load(Ordering::SeqCst),
        1,
        "the call reached the server only after the client gave up"
    );
    // rmcp told the server (notifications/cancelled).
    eventually("the server never heard of the cancel", || {
        server.server.cancelled.load(Ordering::SeqCst) > 0
    })
    .await;
    assert_eq!(
        call(&conn, "slow", json!({"ms": 10})).await,
        success(json!("slept"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_concurrent_calls_pair_with_their_requests() {
    let server = http_server().await;
    let conn = connect(&http_spec(&server.url)).await;
    conn.list_tools().await.unwrap();
    let calls = (0..20).map(|i| {
        let conn = conn.clone();
        tokio::spawn(async move {
            let call_id = format!("call_{i}");
            // The server answers none before all twenty are in at once (calls one after
            // another would never be answered), then later calls first: out of order.
            let r = call_as(
                &conn,
                "meta",
                &call_id,
                json!({"together": 20, "rank": 19 - i}),
                PATIENCE,
            )
            .await;
            (call_id, r)
        })
    });
    for handle in futures::future::join_all(calls).await {
        let (call_id, r) = handle.unwrap();
        assert_eq!(r, success(json!({"callId": call_id, "traceId": "trace_1"})));
    }
    assert_eq!(server.server.answered.load(Ordering::SeqCst), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_calls_one_after_another_do_not_stall() {
    // A pooled connection that carried an SSE answer stalled the next call by about 40 ms
    // (found by the overhead bench: 42.9 ms a call against 1.1 ms; every call stalled), so
    // each request goes on a connection of its own, as rmcp's own client does. Counted
    // here, not timed (the bench keeps the figure): no connection carries a second request.
    let server = http_server().await;
    let conn = connect(&http_spec(&server.url)).await;
    conn.list_tools().await.unwrap();
    for i in 0..9 {
        let r = call_as(
            &conn,
            "meta",
            &format!("call_{i}"),
            json!({"ms": 0}),
            PATIENCE,
        )
        .await;
        assert_eq!(
            r,
            success(json!({"callId": format!("call_{i}"), "traceId": "trace_1"}))
        );
    }
    let requests = server.requests.load(Ordering::SeqCst);
    let connections = server.connections.load(Ordering::SeqCst);
    assert!(requests > 9, "{requests}");
    assert!(
        connections >= requests,
        "{requests} requests on {connections} connections"
    );
}

#[tokio::test]
async fn connect_errors_say_why() {
    let err = |spec: McpSpec| async move { McpConnection::connect(&spec, &env).await.unwrap_err() };
    let server = http_server().await;

    // A secret that is not set: named.
    let mut s = http_spec(&server.url);
    s.headers.insert(
        "X-Other".into(),
        serde_json::from_value(json!({"env": "MCP_NOT_SET"})).unwrap(),
    );
    let e = err(s).await;
    assert!(e.contains("MCP_NOT_SET") && e.contains("rust-http"), "{e}");

    // The wrong token: the handshake fails, and the secret is not in the message.
    let e = McpConnection::connect(&http_spec(&server.url), &|_| Some("wrong".into()))
        .await
        .unwrap_err();
    assert!(e.contains("handshake failed"), "{e}");
    assert!(!e.contains("wrong"), "{e}");

    // Nobody listening.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = err(http_spec(&format!("http://127.0.0.1:{port}/mcp"))).await;
    assert!(e.contains("handshake failed"), "{e}");

    // Someone listening who never answers: the connect timeout.
    let mute = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut s = http_spec(&format!("http://{}/mcp", mute.local_addr().unwrap()));
    s.timeout_ms = Some(300);
    let e = err(s).await;
    assert!(e.contains("no handshake within 300 ms"), "{e}");

    // No such program.
    let e = err(spec(
        json!({"name": "gone", "command": "/nonexistent/mcp-server"}),
    ))
    .await;
    assert!(
        e.contains("cannot start") && e.contains("/nonexistent/mcp-server"),
        "{e}"
    );
    // Neither or both.
    let e = err(spec(json!({"name": "none"}))).await;
    assert!(e.contains("`url`") && e.contains("`command`"), "{e}");
    let e = err(spec(
        json!({"name": "both", "url": server.url, "command": "x"}),
    ))
    .await;
    assert!(e.contains("not both"), "{e}");
    // A header the transport sets itself.
    let e = err(spec(
        json!({"name": "h", "url": server.url, "headers": {"Mcp-Session-Id": "x"}}),
    ))
    .await;
    assert!(e.contains("set by the MCP transport"), "{e}");
}

// ---------------------------------------------------------------------------------
// The rmcp server over stdio (this binary, run again).

#[tokio::test]
async fn stdio_lists_and_calls() {
    let conn = connect(&stdio_spec()).await;
    assert_eq!(conn.list_tools().await.unwrap().len(), tools().len());
    assert_eq!(
        call(&conn, "add", json!({"a": 20, "b": 22})).await,
        success(json!({"sum": 42}))
    );
    assert_eq!(
        call(&conn, "echo", json!({"text": "over stdio"})).await,
        success(json!("over stdio"))
    );
    assert!(matches!(
        call(&conn, "fail", json!({})).await,
        Ok(Reply::Failed { .. })
    ));
    assert_eq!(
        call(&conn, "big", json!({})).await,
        Err(TransportError::TooLarge {
            limit: DEFAULT_MAX_RESPONSE_BYTES
        })
    );
    // Its env: the secret resolved from ours; our other variables not passed on.
    assert_eq!(
        call(&conn, "env", json!({"name": "CHILD_SECRET"})).await,
        success(json!({"value": "from-our-env"}))
    );
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    assert_eq!(
        call(&conn, "env", json!({"name": "CARGO_MANIFEST_DIR"})).await,
        success(json!({"value": null}))
    );
    let timeout = Duration::from_millis(200);
    assert_eq!(
        call_as(&conn, "slow", "call_s", json!({"ms": NEVER_MS}), timeout).await,
        Err(TransportError::Timeout(timeout))
    );
    assert_eq!(
        call(&conn, "meta", json!({})).await,
        success(json!({"callId": "call_1", "traceId": "trace_1"}))
    );
}

/// Whether `pid` still runs (a zombie has ended).
#[cfg(target_os = "linux")]
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        }
        Err(_) => false,
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn stdio_child_ends_when_the_last_clone_drops() {
    let conn = connect(&stdio_spec()).await;
    let Ok(Reply::Success { data, .. }) = call(&conn, "pid", json!({})).await else {
        panic!("no pid");
    };
    let pid: u32 = data.as_str().unwrap().parse().unwrap();
    assert_ne!(pid, std::process::id());
    assert!(running(pid));
    let clone = conn.clone();
    drop(conn);
    // A clone still holds the session: the same server answers it.
    assert_eq!(
        call(&clone, "pid", json!({})).await,
        success(json!(pid.to_string()))
    );
    assert!(running(pid));
    drop(clone);
    eventually(&format!("the server {pid} outlived its connection"), || {
        !running(pid)
    })
    .await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn stdio_child_of_a_failed_handshake_is_killed() {
    // A "server" that never answers: it writes its pid and sleeps. The handshake's bound
    // leaves a loaded machine time to start it and write the pid.
    let pid_file = std::env::temp_dir().join(format!("toolmend-mcp-mute-{}", std::process::id()));
    let script = format!("echo $$ > '{}'; exec sleep 3600", pid_file.display());
    let s = spec(
        json!({"name": "mute", "command": "sh", "args": ["-c", script],
        "timeout_ms": 2000}),
    );
    let e = McpConnection::connect(&s, &env).await.unwrap_err();
    assert!(e.contains("no handshake within 2000 ms"), "{e}");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = std::fs::remove_file(&pid_file);
    eventually(
        &format!("the mute server {pid} outlived the failed connect"),
        || !running(pid),
    )
    .await;
}

/// Waits (at most 5 s) until `conn`'s session has ended.
async fn until_closed(conn: &McpConnection) {
    eventually("the session never ended", || conn.is_closed()).await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn stdio_a_server_that_exits_is_started_again_with_a_backoff() {
    let metrics = metrics();
    let starts = std::env::temp_dir().join(format!(
        "toolmend-mcp-starts-{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    ));
    let starts = starts.to_str().unwrap().to_owned();
    let refuse = format!("{starts}.refuse");
    let count = || {
        std::fs::read_to_string(&starts)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let mut s = stdio_spec();
    s.name = "restarting".into();
    s.env.insert(
        STARTS_ENV.into(),
        serde_json::from_value(json!(starts.clone())).unwrap(),
    );
    let conn = connect(&s).await;
    let pid = |r: Result<Reply, TransportError>| match r {
        Ok(Reply::Success { data, .. }) => data.as_str().unwrap().parse::<u32>().unwrap(),
        other => panic!("no pid: {other:?}"),
    };
    let first = pid(call(&conn, "pid", json!({})).await);

    // The server dies during a call: that call is answered with the failure (never sent
    // again: it may have run) ...
    let r = call(&conn, "exit", json!({})).await;
    assert!(
        matches!(&r, Err(e @ TransportError::Broken(_)) if e.fault() == toolmend::node::Fault::Failed),
        "{r:?}"
    );
    until_closed(&conn).await;
    // ... and the next call starts a new server.
    let second = pid(call(&conn, "pid", json!({})).await);
    assert_ne!(first, second);
    assert_eq!(count(), 2);
    assert!(!running(first));

    // A server that cannot start again: the call says why, without the command line,
    // and calls within the wait fail at once without starting it.
    std::fs::write(&refuse, "").unwrap();
    let _ = call(&conn, "exit", json!({})).await;
    until_closed(&conn).await;
    let r = call(&conn, "echo", json!({"text": "x"})).await;
    let Err(TransportError::Connect(m)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        m,
        format!(
            "the session with the MCP server ended and could not be started again (the handshake failed); next try in {} ms",
            RECONNECT_BACKOFF_MIN.as_millis()
        )
    );
    assert_eq!(count(), 3);
    // Within the wait, a call fails at once ("...again; next try in") and starts nothing.
    // One that comes after it (a loaded machine) tries, fails and doubles the wait: the
    // next comes within that one.
    let mut within_the_wait = false;
    for _ in 0..5 {
        let before = count();
        let r = call(&conn, "echo", json!({"text": "x"})).await;
        let Err(TransportError::Connect(m)) = r else {
            panic!("{r:?}")
        };
        if m.contains("could not be started again; next try in") {
            assert_eq!(count(), before, "a start within the wait: {m}");
            within_the_wait = true;
            break;
        }
        assert!(m.contains("(the handshake failed); next try in"), "{m}");
        assert_eq!(count(), before + 1, "{m}");
    }
    assert!(within_the_wait, "no call came within the wait");
    let failed_starts = count() - 2;

    // Back: calls fail at once until the wait is over; then the next one starts it.
    std::fs::remove_file(&refuse).unwrap();
    let until = Instant::now() + PATIENCE;
    let back = loop {
        match call(&conn, "echo", json!({"text": "back"})).await {
            Ok(reply) => break reply,
            Err(TransportError::Connect(m)) if m.contains("again; next try in") => {
                assert!(Instant::now() < until, "never started again: {m}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e:?}"),
        }
    };
    assert_eq!(
        back,
        Reply::Success {
            data: json!("back"),
            message: None
        }
    );
    assert_eq!(count(), failed_starts + 3);
    let _ = std::fs::remove_file(&starts);
    let text = metrics.render();
    for want in [
        "toolmend_mcp_reconnects_total{server=\"restarting\",result=\"ok\"} 2".to_owned(),
        format!(
            "toolmend_mcp_reconnects_total{{server=\"restarting\",result=\"failed\"}} {failed_starts}"
        ),
    ] {
        assert!(text.contains(&want), "missing {want:?} in\n{text}");
    }
}

/// Calls that meet an ended session together start one new server, not one each.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_concurrent_calls_start_one_new_server() {
    let starts = std::env::temp_dir().join(format!(
        "toolmend-mcp-starts-c-{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    ));
    let starts = starts.to_str().unwrap().to_owned();
    let mut s = stdio_spec();
    s.env.insert(
        STARTS_ENV.into(),
        serde_json::from_value(json!(starts.clone())).unwrap(),
    );
    let conn = connect(&s).await;
    let _ = call(&conn, "exit", json!({})).await;
    until_closed(&conn).await;
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let conn = conn.clone();
            tokio::spawn(async move {
                call_as(
                    &conn,
                    "echo",
                    &format!("call_{i}"),
                    json!({"text": i.to_string()}),
                    PATIENCE,
                )
                .await
            })
        })
        .collect();
    for (i, c) in calls.into_iter().enumerate() {
        assert_eq!(c.await.unwrap(), success(json!(i.to_string())));
    }
    let n = std::fs::read_to_string(&starts).unwrap().lines().count();
    let _ = std::fs::remove_file(&starts);
    assert_eq!(n, 2, "one start at connect, one after the exit");
}

// ---------------------------------------------------------------------------------
// The Python SDK's server (an independent implementation).

/// The interpreter with `mcp` importable: `TOOLMEND_PYTHON`, or the workspace's
/// `.venv`. Neither is a failure, not a skip.
fn python() -> PathBuf {
    let candidates: Vec<PathBuf> = std::env::var_os("TOOLMEND_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python")])
        .collect();
    for python in &candidates {
        let ok = std::process::Command::new(python)
            .args(["-c", "import mcp.server.mcpserver"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return python.clone();
        }
    }
    panic!(
        "no Python with the `mcp` package (tried {candidates:?}): run scripts/python-env.sh, \
         or point TOOLMEND_PYTHON at an interpreter that has mcp 2.x"
    );
}

fn python_script() -> String {
    format!("{}/tests/mcp_server.py", env!("CARGO_MANIFEST_DIR"))
}

async fn python_checks(conn: &McpConnection) {
    let listed = conn.list_tools().await.unwrap();
    let mut names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["add", "boom", "echo"]);
    let add = listed.iter().find(|t| t.name == "add").unwrap();
    assert!(
        add.output_schema.is_some(),
        "MCPServer declares one for `-> int`"
    );
    // Structured (and checked against its outputSchema), text, and an error result.
    assert_eq!(
        call(conn, "add", json!({"a": 2, "b": 3})).await,
        success(json!({"result": 5}))
    );
    assert_eq!(
        call(conn, "echo", json!({"text": "héllo"})).await,
        success(json!("héllo"))
    );
    match call(conn, "boom", json!({})).await {
        Ok(Reply::Failed { message, .. }) => {
            assert!(message.contains("failed on purpose"), "{message}");
        }
        other => panic!("expected a failed reply, got {other:?}"),
    }
    // The Python server validates arguments itself: an error result, or a JSON-RPC
    // error, never a success.
    let r = call(conn, "add", json!({"a": "two"})).await;
    assert!(
        matches!(
            r,
            Ok(Reply::Failed { .. }) | Err(TransportError::Protocol(_))
        ),
        "{r:?}"
    );
}

#[tokio::test]
async fn python_stdio_server() {
    let python = python();
    let conn = connect(&spec(json!({"name": "py-stdio", "command": python,
        "args": [python_script(), "stdio"], "timeout_ms": PYTHON_START.as_millis()})))
    .await;
    python_checks(&conn).await;
}

/// How long a Python server may take to start (the interpreter, the SDK's imports) on a
/// loaded machine.
const PYTHON_START: Duration = Duration::from_secs(120);

/// Kills the child when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn python_http_server() {
    use std::io::BufRead as _;
    let mut child = Child(
        std::process::Command::new(python())
            .args([python_script().as_str(), "http", "0"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        line
    });
    let line = tokio::time::timeout(PYTHON_START, line)
        .await
        .expect("the Python server did not start")
        .unwrap();
    let port = line.trim().strip_prefix("PORT ").expect(&line);
    let conn = connect(&spec(json!({"name": "py-http",
        "url": format!("http://127.0.0.1:{port}/mcp"), "timeout_ms": PATIENCE.as_millis()})))
    .await;
    python_checks(&conn).await;
    drop(conn);
    drop(child);
}

// ---------------------------------------------------------------------------------
// Through a tools file and the tool node: MCP tools are mended like any other, each call
// id answered once, a schema the server sends that does not compile reported, not trusted.

#[tokio::test]
async fn a_tools_file_runs_mcp_tools_through_the_node() {
    use toolmend::{
        conversation::{Content, Message},
        node::{ResultStatus, ToolNode},
    };
    use toolmend_tools::{ToolSet, ToolsFile};

    let server = http_server().await;
    let toml = format!(
        r#"
[[mcp]]
name = "rust-http"
url = "{url}"
headers = {{ Authorization = {{ env = "MCP_TOKEN", prefix = "Bearer " }} }}

[[tools]]
name = "plus"
kind = "mcp"
server = "rust-http"
remote_name = "add"
template = "the sum is {{{{ sum }}}}"
"#,
        url = server.url
    );
    let set = ToolSet::load(&ToolsFile::parse(&toml, "t.toml").unwrap(), &env)
        .await
        .unwrap();
    assert!(
        set.get("plus").is_some() && set.get("add").is_none(),
        "renamed, not twice"
    );
    assert!(set.get("echo").is_some(), "the rest of the server's tools");
    assert!(set.get("bad_schema").is_none());
    assert!(
        set.problems()
            .iter()
            .any(|p| p.contains("\"bad_schema\"") && p.contains("not trusted")),
        "{:?}",
        set.problems()
    );
    let node = ToolNode::builder(set.registry().unwrap()).build();
    let calls = [
        ("m1", "plus", r#"{"a": "2", "b": 3}"#),
        ("m2", "echo", r#"{"text": "hi"}"#),
        ("m3", "fail", "{}"),
        ("m4", "dirty", "{}"),
        ("m5", "bad_schema", "{}"),
        ("m6", "plus", r#"{"a": 1}"#),
    ];
    let calls_json: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let messages: Vec<Message> = serde_json::from_value(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": calls_json}
    ]))
    .unwrap();
    let out = node.invoke(&messages).await.unwrap();
    let ids: Vec<&str> = out.results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(
        ids,
        ["m1", "m2", "m3", "m4", "m5", "m6"],
        "each call id answered once"
    );
    let text = |i: usize| match &out.results[i].content {
        Content::Text(t) => t.clone(),
        other => format!("{other:?}"),
    };
    assert_eq!(out.results[0].status, ResultStatus::Success);
    assert_eq!(
        text(0),
        "the sum is 5",
        "\"2\" coerced to 2 before the server saw it"
    );
    assert_eq!(out.results[0].artifact, Some(json!({"sum": 5})));
    assert_eq!(out.results[0].metadata.as_ref().unwrap()["kind"], "mcp");
    assert_eq!(text(1), "hi");
    assert_eq!(out.results[2].status, ResultStatus::Error);
    assert!(text(2).contains("it failed"), "{}", text(2));
    // isError's structuredContent: the error result's artifact, never the model's.
    assert_eq!(out.results[2].artifact, Some(json!({"code": 7})));
    assert!(!text(2).contains("\"code\""), "{}", text(2));
    let meta = out.results[2].metadata.as_ref().unwrap();
    assert_eq!(meta["kind"], "mcp");
    assert!(meta["service_latency_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(out.results[3].status, ResultStatus::Error);
    assert!(
        !text(3).contains("someone else"),
        "a dirty answer never reaches the model"
    );
    assert_eq!(out.results[3].artifact, None, "nor the caller's artifact");
    // Not trusted: an unknown tool to the node, feedback naming the tools.
    assert_eq!(out.results[4].status, ResultStatus::Error);
    assert!(
        text(4).contains("bad_schema") && text(4).contains("plus"),
        "{}",
        text(4)
    );
    // A required field missing: feedback, not sent.
    assert!(text(5).contains("b"), "{}", text(5));
    assert_eq!(
        out.stats.calls[5].outcome,
        toolmend::message::CallOutcome::Feedback
    );
}

// ---------------------------------------------------------------------------------
// Secrets and logs.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_stderr_becomes_structured_log_lines_naming_the_server() {
    capture_logs(EVERY_LOG_LINE);
    let mut s = stdio_spec();
    s.name = "chatty".into();
    s.env.insert(
        STDERR_ENV.into(),
        serde_json::from_value(json!("1")).unwrap(),
    );
    let conn = connect(&s).await;
    let Ok(Reply::Success { data, .. }) = call(&conn, "pid", json!({})).await else {
        panic!("no pid")
    };
    let child: u32 = data.as_str().unwrap().parse().unwrap();
    let stderr_lines = || {
        captured_logs()
            .lines()
            .filter(|l| l.contains("toolmend::mcp::stderr"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    eventually("the child's three stderr lines logged", || {
        stderr_lines().len() >= 3
    })
    .await;
    let lines = stderr_lines();
    // One structured event per line, naming the server; an error-looking line at warn.
    assert!(
        lines.iter().all(|l| l.contains("server=chatty")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains(" INFO ")
            && l.contains("stderr=starting up; db at postgres://db.internal/x")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" WARN ") && l.contains("stderr=ERROR the cache is cold")),
        "{lines:#?}"
    );
    // Cut to the bound; no escape codes; no secret.
    let long = lines.iter().find(|l| l.contains("xxxx")).unwrap();
    let xs = long.matches('x').count();
    assert!(
        (toolmend_tools::stderr::MAX_LINE_BYTES..toolmend_tools::stderr::MAX_LINE_BYTES + 100)
            .contains(&xs),
        "{xs}"
    );
    let logs = captured_logs();
    assert!(
        !logs.contains("STDERR_SECRET") && !logs.contains('\u{1b}'),
        "{logs}"
    );
    // Every line the child wrote is in a structured line, none raw.
    for raw in ["starting up", "the cache is cold"] {
        for l in logs.lines().filter(|l| l.contains(raw)) {
            assert!(
                l.contains("toolmend::mcp::stderr") && l.contains("server=chatty"),
                "{l}"
            );
        }
    }
    // The child's stderr is a pipe of ours, not our own stderr.
    #[cfg(target_os = "linux")]
    {
        let theirs = std::fs::read_link(format!("/proc/{child}/fd/2")).unwrap();
        let ours = std::fs::read_link("/proc/self/fd/2").unwrap();
        assert_ne!(theirs, ours);
        assert!(theirs.to_string_lossy().starts_with("pipe:"), "{theirs:?}");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = child;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_down_and_restarting_leaks_no_secret_and_blames_no_call() {
    use toolmend::{
        conversation::{AssistantMessage, Message, ToolCall},
        node::{Fault, TOOL_FAILED_TEMPLATE, TOOL_UNAVAILABLE_TEMPLATE, ToolNode},
    };
    capture_logs(EVERY_LOG_LINE);
    let secrets = ["MCP_USERINFO_SECRET", "MCP_QUERY_SECRET", TOKEN];

    // Down at start: the load error, without the secrets.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = McpConnection::connect(
        &http_spec(&format!(
            "http://user:MCP_USERINFO_SECRET@127.0.0.1:{port}/mcp?key=MCP_QUERY_SECRET"
        )),
        &env,
    )
    .await
    .unwrap_err();
    assert_eq!(
        e,
        format!(
            "MCP server \"rust-http\" (http://127.0.0.1:{port}/mcp): the handshake failed: could not connect: connection refused"
        )
    );

    // Up, then down, then back on its port, through the tool node.
    let server = http_server().await;
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let toml = format!(
        r#"
[[mcp]]
name = "remote"
url = "{}?key=MCP_QUERY_SECRET"
headers = {{ Authorization = {{ env = "MCP_TOKEN", prefix = "Bearer " }} }}
tools = ["echo"]
timeout_ms = {}
"#,
        server.url,
        PATIENCE.as_millis()
    );
    let set = toolmend_tools::ToolSet::load(
        &toolmend_tools::ToolsFile::parse(&toml, "t.toml").unwrap(),
        &env,
    )
    .await
    .unwrap();
    let node = ToolNode::builder(set.registry().unwrap()).build();
    let mut seen = Vec::new();
    let mut invoke = async |id: &str| {
        let messages = vec![Message::Assistant(AssistantMessage {
            tool_calls: Some(vec![ToolCall::new(id, "echo", r#"{"text": "hi"}"#)]),
            ..Default::default()
        })];
        let out = node.invoke(&messages).await.unwrap();
        let r = out.results[0].clone();
        seen.push(
            json!({"content": r.content, "artifact": r.artifact, "metadata": r.metadata,
                "stats": out.stats})
            .to_string(),
        );
        r
    };
    let up = invoke("m1").await;
    assert_eq!(up.content.text(), "hi");
    drop(server);
    until_refused(&addr).await;
    let down = invoke("m2").await;
    assert_eq!(down.fault, Some(Fault::Unavailable));
    assert_eq!(
        down.content.text(),
        TOOL_UNAVAILABLE_TEMPLATE.replace(
            "{error}",
            "echo: the tool service could not be reached (connection refused)"
        )
    );
    let _again = http_server_on(rebind(&addr).await);
    let (until, mut i) = (Instant::now() + PATIENCE, 0);
    let back = loop {
        i += 1;
        let r = invoke(&format!("m3_{i}")).await;
        if r.fault.is_none() {
            break r;
        }
        // Meanwhile: the tool's fault, never the call's.
        assert!(
            matches!(r.fault, Some(Fault::Unavailable | Fault::Failed)),
            "{r:?}"
        );
        if r.fault == Some(Fault::Failed) {
            assert!(r.content.text().starts_with("Error: echo: "));
            assert!(r.content.text().ends_with(&TOOL_FAILED_TEMPLATE[9..]));
        }
        assert!(Instant::now() < until, "never served again: {r:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(back.content.text(), "hi");

    let logs = captured_logs();
    for secret in secrets {
        for text in seen.iter().chain([&logs, &e]) {
            assert!(!text.contains(secret), "{secret}:\n{text}");
        }
    }
    for dump in ["reqwest::Error", "Error {", "TransportError(", "kind: "] {
        assert!(!logs.contains(dump), "{dump}:\n{logs}");
    }
    assert!(
        logs.lines().any(|l| l.contains("WARN")
            && l.contains("tool service failed")
            && l.contains("tool=echo")),
        "{logs}"
    );
}
