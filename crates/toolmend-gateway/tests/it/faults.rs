//! Faults at the gateway's edges, end to end on 127.0.0.1: every `[limits]` bound at its
//! value and one past it, slow and greedy clients, upstreams that drip, reset, redirect
//! or stop at their token limit, and the regressions of issue 11. Each test bounds its
//! own waits (client timeouts, `within`), so none can hang.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    http::{HeaderMap, StatusCode},
    response::IntoResponse,
    routing::post as route_post,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{mpsc, oneshot},
};
use toolmend::conversation::{AssistantMessage, Content, ToolCall};
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::common::WAIT;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Bounds a wait by [`WAIT`]: a test waits for what must happen, never for a time.
async fn within<T>(what: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, what)
        .await
        .unwrap_or_else(|_| panic!("a wait in the test ran past its {WAIT:?} bound"))
}

/// A gateway for `upstream` with `extra` TOML (dotted keys), on a free port.
async fn gateway(upstream: &str, extra: &str) -> SocketAddr {
    let toml = format!("upstream.base_url = \"{upstream}\"\n{extra}");
    let config = Config::from_toml_and_env(&toml, Vec::new()).unwrap();
    let metrics = toolmend_gateway::metrics::install().ok();
    let gw = Arc::new(Gateway::new(config, metrics).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(toolmend_gateway::serve(
        listener,
        gw,
        std::future::pending(),
    ));
    addr
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(WAIT)
        .no_proxy()
        .build()
        .unwrap()
}

fn weather() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"], "additionalProperties": false}}})
}

/// A tool taking no arguments.
fn bare(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name, "description": "A tool.",
        "parameters": {"type": "object", "properties": {}}}})
}

fn ask() -> Value {
    json!([{"role": "user", "content": "Weather in Paris?"}])
}

fn request(messages: Value, stream: bool) -> Value {
    json!({"model": "m", "messages": messages, "tools": [weather()], "stream": stream})
}

async fn post(gw: SocketAddr, body: &Value) -> reqwest::Response {
    within(
        http()
            .post(format!("http://{gw}/v1/chat/completions"))
            .json(body)
            .send(),
    )
    .await
    .unwrap()
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Checks an error answer: its status and OpenAI's shape `{"error": {"message", "type",
/// "param", "code"}}` with `code`; returns the message.
fn openai_error(status: u16, body: &[u8], want_status: u16, code: &str) -> String {
    let text = String::from_utf8_lossy(body);
    assert_eq!(status, want_status, "{text}");
    let v: Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}: {text}"));
    let e = v["error"].as_object().unwrap_or_else(|| panic!("{text}"));
    let mut keys: Vec<&str> = e.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["code", "message", "param", "type"], "{text}");
    assert!(e["type"].is_string(), "{text}");
    assert_eq!(e["code"], code, "{text}");
    e["message"].as_str().unwrap().to_owned()
}

async fn error_of(resp: reqwest::Response, status: u16, code: &str) -> String {
    let got = resp.status().as_u16();
    assert!(
        header(&resp, "content-type").starts_with("application/json"),
        "{:?}",
        resp.headers()
    );
    let body = within(resp.bytes()).await.unwrap();
    openai_error(got, &body, status, code)
}

/// The `data:` events of an SSE body (without `[DONE]`), after checking it ends in `[DONE]`.
fn events(text: &str) -> Vec<Value> {
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    text.split("\n\n")
        .filter_map(|b| b.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}

/// The closing `: toolmend {…}` summary comment of a gateway stream.
fn stream_summary(text: &str) -> Value {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(": toolmend "))
        .unwrap_or_else(|| panic!("no summary comment in {text}"));
    serde_json::from_str(line).unwrap()
}

/// The tool-call deltas of a stream: `(index, id, name, arguments)` in order.
fn streamed_calls(events: &[Value]) -> Vec<(u64, String, String, String)> {
    events
        .iter()
        .flat_map(|e| {
            e["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| {
            (
                c["index"].as_u64().unwrap(),
                c["id"].as_str().unwrap_or_default().to_owned(),
                c["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                c["function"]["arguments"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

fn error_events(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e.get("error").is_some()).collect()
}

fn said(text: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(Some(Content::Text(text.into()))),
        ..Default::default()
    })
}

fn calls(list: Vec<ToolCall>) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(list),
        ..Default::default()
    })
}

/// A `chat.completion` body.
fn completion(message: &Value, finish: &str) -> String {
    json!({"id": "chatcmpl-f", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}]})
    .to_string()
}

/// One SSE chunk event.
fn chunk(delta: &Value, finish: Option<&str>) -> String {
    let c = json!({"id": "chatcmpl-f", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

async fn serve_app(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// What an upstream received: headers and body of each request, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(HeaderMap, Bytes)>>>);

impl Seen {
    fn all(&self) -> Vec<(HeaderMap, Bytes)> {
        self.0.lock().unwrap().clone()
    }
}

/// An upstream answering each chat request with the next canned `(content-type, body)`
/// (the last again once they run out), keeping what it received. Returns its base URL.
async fn canned(answers: Vec<(&'static str, String)>) -> (String, Seen) {
    let seen = Seen::default();
    let next = Arc::new(AtomicUsize::new(0));
    let answers = Arc::new(answers);
    let kept = seen.clone();
    let app = Router::new().route(
        "/v1/chat/completions",
        route_post(move |headers: HeaderMap, body: Bytes| {
            let (kept, next, answers) = (kept.clone(), Arc::clone(&next), Arc::clone(&answers));
            async move {
                kept.0.lock().unwrap().push((headers, body));
                let n = next.fetch_add(1, Ordering::SeqCst).min(answers.len() - 1);
                let (kind, body) = answers[n].clone();
                ([("content-type", kind)], body).into_response()
            }
        }),
    );
    (format!("http://{}/v1", serve_app(app).await), seen)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads an HTTP head through its blank line; returns it and the bytes read past it.
async fn read_head(r: &mut (impl AsyncRead + Unpin)) -> io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            let rest = buf.split_off(at + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        let n = r.read(&mut tmp).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed after {} bytes of a head", buf.len()),
            ));
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn content_length(head: &str) -> Option<usize> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

/// Reads a body of `len` bytes (to EOF when `None`) after `got` already read.
async fn read_body(
    r: &mut (impl AsyncRead + Unpin),
    mut got: Vec<u8>,
    len: Option<usize>,
) -> io::Result<Vec<u8>> {
    match len {
        Some(len) => {
            while got.len() < len {
                let mut tmp = vec![0u8; len - got.len()];
                let n = r.read(&mut tmp).await?;
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                got.extend_from_slice(&tmp[..n]);
            }
        }
        None => {
            r.read_to_end(&mut got).await?;
        }
    }
    Ok(got)
}

/// One raw HTTP response.
#[derive(Debug)]
struct Raw {
    status: u16,
    head: String,
    body: Vec<u8>,
}

async fn read_response(r: &mut (impl AsyncRead + Unpin)) -> io::Result<Raw> {
    let (head, rest) = read_head(r).await?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = read_body(r, rest, content_length(&head)).await?;
    Ok(Raw { status, head, body })
}

/// A request as the upstream sees it: head and body (by `content-length`).
async fn read_request(r: &mut (impl AsyncRead + Unpin)) -> io::Result<(String, Vec<u8>)> {
    let (head, rest) = read_head(r).await?;
    let len = content_length(&head).unwrap_or(0);
    let body = read_body(r, rest, Some(len)).await?;
    Ok((head, body))
}

const GET_HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";

/// Waits (bounded) for the peer to close `s` (EOF or a reset); returns what it sent
/// first, if anything.
async fn until_closed(s: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
    let mut got = Vec::new();
    let mut tmp = [0u8; 1024];
    loop {
        match within(s.read(&mut tmp)).await {
            Ok(0) | Err(_) => return got,
            Ok(n) => got.extend_from_slice(&tmp[..n]),
        }
    }
}

/// Sums `toolmend_calls_total` over the series whose `tool` label is `tool`.
fn calls_counted(metrics: &str, tool: &str) -> f64 {
    let label = format!("tool=\"{tool}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("toolmend_calls_total{") && l.contains(&label))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

async fn metrics_of(gw: SocketAddr) -> String {
    within(http().get(format!("http://{gw}/metrics")).send())
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// 1. Every limit at its value, then one past it
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn messages_at_the_limit_pass_and_one_more_is_refused() {
    let p = ScriptedProvider::start(Script::new().then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), "limits.max_messages = 3").await;
    let three = json!([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "weather?"},
    ]);
    assert_eq!(post(gw, &request(three.clone(), false)).await.status(), 200);
    let mut four = three.as_array().unwrap().clone();
    four.push(json!({"role": "user", "content": "and tomorrow?"}));
    let msg = error_of(
        post(gw, &request(Value::Array(four), false)).await,
        400,
        "toolmend_limit_exceeded",
    )
    .await;
    assert!(
        msg.contains("4 messages") && msg.contains("limits.max_messages (3)"),
        "{msg}"
    );
    assert_eq!(
        p.requests().len(),
        1,
        "the refused request never went upstream"
    );
}

/// An assistant turn with `n` calls and their results.
fn turn_with_calls(n: usize, args: impl Fn(usize) -> String) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "weather?"})];
    let list: Vec<Value> = (0..n)
        .map(|i| {
            json!({"id": format!("t{i}"), "type": "function",
            "function": {"name": "get_weather", "arguments": args(i)}})
        })
        .collect();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": list}));
    for i in 0..n {
        messages.push(json!({"role": "tool", "tool_call_id": format!("t{i}"), "content": "sunny"}));
    }
    messages.push(json!({"role": "user", "content": "thanks; and tomorrow?"}));
    Value::Array(messages)
}

#[tokio::test]
async fn calls_per_message_at_the_limit_pass_and_one_more_is_refused() {
    let p = ScriptedProvider::start(Script::new().then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), "limits.max_calls_per_message = 2").await;
    let city = |_| r#"{"city": "Rome"}"#.to_owned();
    assert_eq!(
        post(gw, &request(turn_with_calls(2, city), false))
            .await
            .status(),
        200
    );
    let msg = error_of(
        post(gw, &request(turn_with_calls(3, city), false)).await,
        400,
        "toolmend_limit_exceeded",
    )
    .await;
    assert!(
        msg.contains("messages[1] has 3 tool calls")
            && msg.contains("limits.max_calls_per_message (2)"),
        "{msg}"
    );
    assert_eq!(p.requests().len(), 1);
}

#[tokio::test]
async fn argument_bytes_at_the_limit_pass_unchanged_and_one_more_is_refused_by_name() {
    const MAX: usize = 64;
    // `{"city": "xxxx…"}` of exactly `len` bytes.
    let sized = |len: usize| format!("{{\"city\": \"{}\"}}", "x".repeat(len - 12));
    assert_eq!(sized(MAX).len(), MAX);
    let p = ScriptedProvider::start(Script::new().then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), &format!("limits.max_argument_bytes = {MAX}")).await;
    // The second call is the big one: the error must name it, not the first.
    let at = turn_with_calls(2, |i| if i == 1 { sized(MAX) } else { sized(20) });
    assert_eq!(post(gw, &request(at, false)).await.status(), 200);
    let sent = &p.requests()[0]["messages"][1]["tool_calls"][1]["function"]["arguments"];
    assert_eq!(sent, &json!(sized(MAX)), "passed as it was, never replaced");

    let past = turn_with_calls(2, |i| if i == 1 { sized(MAX + 1) } else { sized(20) });
    let msg = error_of(
        post(gw, &request(past, false)).await,
        400,
        "toolmend_limit_exceeded",
    )
    .await;
    assert!(
        msg.contains(&format!(
            "messages[1].tool_calls[1].arguments is {} bytes",
            MAX + 1
        )) && msg.contains(&format!("limits.max_argument_bytes ({MAX})")),
        "{msg}"
    );
    assert_eq!(
        p.requests().len(),
        1,
        "not sent upstream with `{{}}` instead"
    );
}

#[tokio::test]
async fn tools_at_the_limit_pass_and_one_more_is_refused() {
    let p = ScriptedProvider::start(Script::new().then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), "limits.max_tools = 2").await;
    let with = |tools: Value| json!({"model": "m", "messages": ask(), "tools": tools});
    let two = json!([weather(), bare("get_time")]);
    assert_eq!(post(gw, &with(two)).await.status(), 200);
    let three = json!([weather(), bare("get_time"), bare("get_date")]);
    let msg = error_of(post(gw, &with(three)).await, 400, "invalid_tools").await;
    assert!(
        msg.contains("3 tools") && msg.contains("limits.max_tools (2)"),
        "{msg}"
    );
    assert_eq!(p.requests().len(), 1);
}

#[tokio::test]
async fn a_schema_at_the_limit_passes_and_one_byte_more_is_refused() {
    let tool = weather();
    let max = tool.to_string().len();
    let p = ScriptedProvider::start(Script::new().then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), &format!("limits.max_schema_bytes = {max}")).await;
    let with = |tool: Value| json!({"model": "m", "messages": ask(), "tools": [tool]});
    assert_eq!(post(gw, &with(tool.clone())).await.status(), 200);
    let mut bigger = tool;
    bigger["function"]["description"] = json!("Weather!.");
    assert_eq!(bigger.to_string().len(), max + 1);
    let msg = error_of(post(gw, &with(bigger)).await, 400, "invalid_tools").await;
    assert!(
        msg.contains(&format!("tools[0] is {} bytes", max + 1))
            && msg.contains(&format!("limits.max_schema_bytes ({max})")),
        "{msg}"
    );
    assert_eq!(p.requests().len(), 1);
}

#[tokio::test]
async fn a_body_at_the_limit_passes_and_one_byte_more_is_413_declared_or_chunked() {
    const MAX: usize = 2048;
    let sized = |len: usize| {
        let base = request(json!([{"role": "user", "content": ""}]), false).to_string();
        let body = request(
            json!([{"role": "user", "content": "x".repeat(len - base.len())}]),
            false,
        )
        .to_string();
        assert_eq!(body.len(), len);
        Bytes::from(body)
    };
    let p = ScriptedProvider::start(Script::new().then(said("ok")).then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), &format!("limits.max_body_bytes = {MAX}")).await;
    let url = format!("http://{gw}/v1/chat/completions");
    let send = |body: reqwest::Body| {
        within(
            http()
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send(),
        )
    };
    // With a content-length: refused before the body is read.
    assert_eq!(send(sized(MAX).into()).await.unwrap().status(), 200);
    error_of(
        send(sized(MAX + 1).into()).await.unwrap(),
        413,
        "body_too_large",
    )
    .await;
    // Chunked (no content-length): counted as it is read.
    let chunked = |b: Bytes| {
        let parts: Vec<Result<Bytes, io::Error>> = b
            .chunks(500)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        reqwest::Body::wrap_stream(futures::stream::iter(parts))
    };
    assert_eq!(send(chunked(sized(MAX))).await.unwrap().status(), 200);
    let msg = error_of(
        send(chunked(sized(MAX + 1))).await.unwrap(),
        413,
        "body_too_large",
    )
    .await;
    assert!(msg.contains(&format!("({MAX} bytes)")), "{msg}");
    assert_eq!(p.requests().len(), 2);
}

#[tokio::test]
async fn a_head_at_the_limit_is_served_and_one_byte_more_is_431() {
    const MAX: usize = 8192; // the smallest the gateway accepts
    let gw = gateway(
        "http://127.0.0.1:9/v1",
        &format!("limits.max_header_bytes = {MAX}"),
    )
    .await;
    let head = |len: usize| {
        let base = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-pad: \r\n\r\n".len();
        let h = format!(
            "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-pad: {}\r\n\r\n",
            "p".repeat(len - base)
        );
        assert_eq!(h.len(), len);
        h
    };
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(head(MAX).as_bytes()).await.unwrap();
    let r = within(read_response(&mut s)).await.unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]), "{r:?}");

    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(head(MAX + 1).as_bytes()).await.unwrap();
    let r = within(read_response(&mut s)).await.unwrap();
    assert_eq!(r.status, 431, "{r:?}");
    // …and the connection is closed.
    let more = until_closed(&mut s).await;
    assert!(more.is_empty(), "{}", String::from_utf8_lossy(&more));
}

#[tokio::test]
async fn an_upstream_answer_at_the_limit_passes_whole_and_one_byte_more_is_502() {
    const MAX: usize = 1000;
    let sized = |len: usize| {
        let base = completion(&json!({"role": "assistant", "content": ""}), "stop").len();
        let body = completion(
            &json!({"role": "assistant", "content": "x".repeat(len - base)}),
            "stop",
        );
        assert_eq!(body.len(), len);
        body
    };
    let (url, _) = canned(vec![
        ("application/json", sized(MAX)),
        ("application/json", sized(MAX + 1)),
    ])
    .await;
    // The account would add its bytes to the answer: off, the answer is the upstream's.
    let gw = gateway(
        &url,
        &format!("limits.max_upstream_bytes = {MAX}\ncalls.account = false"),
    )
    .await;
    let plain = json!({"model": "m", "messages": ask()});
    let resp = post(gw, &plain).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), sized(MAX), "byte for byte");
    let msg = error_of(post(gw, &plain).await, 502, "upstream_too_large").await;
    assert!(
        msg.contains(&format!("limits.max_upstream_bytes ({MAX} bytes)")),
        "{msg}"
    );
}

#[tokio::test]
async fn a_stream_at_the_upstream_limit_passes_and_one_byte_more_ends_in_an_error_event() {
    // A stream's measure: the call fragments (and content) it holds, here the name
    // `get_weather` (11 bytes) and the arguments.
    let at = r#"{"city": "Paris"}"#;
    let past = r#"{"city":  "Paris"}"#;
    let max = "get_weather".len() + at.len();
    let p = ScriptedProvider::start(
        Script::new()
            .then(calls(vec![ToolCall::new("c1", "get_weather", at)]))
            .then(calls(vec![ToolCall::new("c2", "get_weather", past)])),
    )
    .await
    .unwrap();
    let gw = gateway(&p.base_url(), &format!("limits.max_upstream_bytes = {max}")).await;

    let resp = post(gw, &request(ask(), true)).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let ev = events(&text);
    assert!(error_events(&ev).is_empty(), "{text}");
    let got = streamed_calls(&ev);
    assert_eq!(got.len(), 1, "{text}");
    assert_eq!((got[0].1.as_str(), got[0].3.as_str()), ("c1", at));

    let text = post(gw, &request(ask(), true)).await.text().await.unwrap();
    let ev = events(&text);
    let errors = error_events(&ev);
    assert_eq!(errors.len(), 1, "{text}");
    let msg = openai_error(
        200,
        errors[0].to_string().as_bytes(),
        200,
        "upstream_too_large",
    );
    assert!(
        msg.contains(&format!("limits.max_upstream_bytes ({max} bytes)")),
        "{msg}"
    );
    assert!(streamed_calls(&ev).is_empty(), "no call went out: {text}");
}

// ---------------------------------------------------------------------------------------
// 2. Slow and greedy clients
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_head_sent_a_byte_at_a_time_is_cut_at_the_header_timeout_and_others_are_served() {
    let p = ScriptedProvider::start(Script::new().then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), "limits.header_timeout_secs = 1").await;
    let head: &'static [u8] =
        b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nuser-agent: a-very-slow-client\r\n\r\n";
    // Three slow clients: a byte every 100 ms or more (the whole head takes 7 s at
    // least, a load only makes it longer). Cut before their head is whole, they were cut
    // by the timeout: nothing else closes a connection that keeps sending.
    let mut slow = Vec::new();
    for _ in 0..3 {
        let (mut rd, mut wr) = TcpStream::connect(gw).await.unwrap().into_split();
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&sent);
        tokio::spawn(async move {
            for b in head {
                if wr.write_all(&[*b]).await.is_err() {
                    return;
                }
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let closed = tokio::spawn(async move { until_closed(&mut rd).await });
        slow.push((sent, closed));
    }
    // Meanwhile the gateway serves everyone else.
    let ok = within(http().get(format!("http://{gw}/healthz")).send())
        .await
        .unwrap();
    assert_eq!(ok.text().await.unwrap(), "ok");
    assert_eq!(post(gw, &request(ask(), false)).await.status(), 200);
    for (sent, closed) in slow {
        let answer = closed.await.unwrap();
        let sent = sent.load(Ordering::SeqCst);
        assert!(
            sent < head.len(),
            "the connection lasted until the whole head ({sent} bytes) was sent"
        );
        assert!(
            !String::from_utf8_lossy(&answer).contains(" 200 "),
            "{answer:?}"
        );
    }
}

#[tokio::test]
async fn an_idle_connection_is_closed_at_the_header_timeout_fresh_or_kept_alive() {
    // Without the timeout these connections would stay open for good: closed within the
    // test's bound, they were closed by it.
    let gw = gateway("http://127.0.0.1:9/v1", "limits.header_timeout_secs = 1").await;
    // Connects and never says a word.
    let mut s = TcpStream::connect(gw).await.unwrap();
    let answer = until_closed(&mut s).await;
    assert!(answer.is_empty(), "{answer:?}");
    // One request, kept alive, then silence: closed just the same.
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(GET_HEALTHZ).await.unwrap();
    let r = within(read_response(&mut s)).await.unwrap();
    assert_eq!(r.status, 200);
    assert!(!r.head.to_ascii_lowercase().contains("connection: close"));
    let answer = until_closed(&mut s).await;
    assert!(answer.is_empty(), "{answer:?}");
}

#[tokio::test]
async fn a_body_sent_too_slowly_is_answered_408() {
    let gw = gateway(
        "http://127.0.0.1:9/v1",
        "limits.header_timeout_secs = 5\nlimits.body_timeout_secs = 0.5",
    )
    .await;
    let (mut rd, mut wr) = TcpStream::connect(gw).await.unwrap().into_split();
    let body = request(ask(), false).to_string();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    wr.write_all(head.as_bytes()).await.unwrap();
    // A byte every 100 ms or more: the whole body would take over 10 s, so only the body
    // timeout can answer first (and the answer says which limit it was).
    tokio::spawn(async move {
        for b in body.into_bytes() {
            if wr.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let r = within(read_response(&mut rd)).await.unwrap();
    let msg = openai_error(r.status, &r.body, 408, "body_timeout");
    assert!(msg.contains("limits.body_timeout_secs"), "{msg}");
}

#[tokio::test]
async fn connections_past_the_cap_get_503_until_the_held_ones_close() {
    let p = ScriptedProvider::start(Script::new().then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(
        &p.base_url(),
        // The held connections sit idle: the head timeout must outlast the test.
        "limits.max_connections = 4\nlimits.header_timeout_secs = 30",
    )
    .await;
    // Four connections, each served once (so each is surely accepted and counted), held.
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(gw).await.unwrap();
        s.write_all(GET_HEALTHZ).await.unwrap();
        let r = within(read_response(&mut s)).await.unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
        held.push(s);
    }
    // The fifth and sixth: a raw 503 in OpenAI's shape, then closed.
    for _ in 0..2 {
        let mut s = TcpStream::connect(gw).await.unwrap();
        s.write_all(GET_HEALTHZ).await.unwrap();
        let r = within(read_response(&mut s)).await.unwrap();
        let msg = openai_error(r.status, &r.body, 503, "too_many_connections");
        assert!(msg.contains("limits.max_connections"), "{msg}");
        let head = r.head.to_ascii_lowercase();
        assert!(
            head.contains("connection: close") && head.contains("retry-after: 1"),
            "{head}"
        );
        let more = until_closed(&mut s).await;
        assert!(more.is_empty());
    }
    // An ordinary client with a body gets the 503 too (not a reset connection).
    let resp = post(gw, &request(ask(), false)).await;
    error_of(resp, 503, "too_many_connections").await;
    assert!(
        p.requests().is_empty(),
        "nothing past the cap went upstream"
    );

    // Once the held ones close, new connections are served again.
    drop(held);
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let mut s = TcpStream::connect(gw).await.unwrap();
        s.write_all(GET_HEALTHZ).await.unwrap();
        let r = within(read_response(&mut s)).await.unwrap();
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503);
        assert!(
            tokio::time::Instant::now() < until,
            "still refused {WAIT:?} after the held connections closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(post(gw, &request(ask(), false)).await.status(), 200);
    let refused = metrics_of(gw)
        .await
        .lines()
        .find_map(|l| l.strip_prefix("toolmend_connections_refused_total "))
        .map(|v| v.trim().parse::<f64>().unwrap())
        .unwrap_or(0.0);
    assert!(refused >= 3.0, "{refused}");
}

// ---------------------------------------------------------------------------------------
// 3. Upstreams that drip, reset or redirect
// ---------------------------------------------------------------------------------------

/// What a raw upstream connection is answered with after the request.
#[derive(Clone, Copy)]
enum Drip {
    /// A JSON head, then a byte every 100 ms, forever.
    Json,
    /// An SSE head and a first chunk, then a whole chunk every 100 ms, forever.
    Sse,
}

/// An upstream that drips (see [`Drip`]) until its writes fail; each connection then
/// reports that it was dropped (a drip fills no socket buffer: only a close fails it).
async fn dripping(kind: Drip) -> (String, mpsc::UnboundedReceiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                if read_request(&mut s).await.is_err() {
                    return;
                }
                let (head, first, each): (&str, String, String) = match kind {
                    Drip::Json => ("application/json", "{".to_owned(), " ".to_owned()),
                    Drip::Sse => (
                        "text/event-stream",
                        chunk(&json!({"role": "assistant", "content": "Hel"}), None),
                        chunk(&json!({"content": "."}), None),
                    ),
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {head}\r\nconnection: close\r\n\r\n{first}"
                );
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if s.write_all(each.as_bytes()).await.is_err() {
                        let _ = tx.send(());
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}/v1"), rx)
}

#[tokio::test]
async fn a_dripping_json_answer_is_cut_at_the_deadline_and_the_upstream_dropped() {
    let (url, mut dropped) = dripping(Drip::Json).await;
    // The idle timeout never fires (a byte every 100 ms); only the total deadline can.
    let gw = gateway(
        &url,
        "upstream.deadline_secs = 1\nupstream.timeout_secs = 10",
    )
    .await;
    let msg = error_of(
        post(gw, &request(ask(), false)).await,
        504,
        "upstream_deadline",
    )
    .await;
    assert!(msg.contains("deadline_secs"), "{msg}");
    // The upstream connection is closed, not left dripping for good.
    within(dropped.recv()).await.unwrap();
}

#[tokio::test]
async fn a_json_answer_that_stops_after_its_head_is_cut_at_the_idle_timeout() {
    // The head and the first bytes of a promised body, then nothing: neither the total
    // deadline (10 s) nor a drip ends it, only `upstream.timeout_secs` between pieces.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, mut dropped) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                if read_request(&mut s).await.is_err() {
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                            content-length: 100\r\n\r\n{\"id\"";
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                // Held open until the gateway lets go of it.
                let mut rest = [0u8; 64];
                while matches!(s.read(&mut rest).await, Ok(n) if n > 0) {}
                let _ = tx.send(());
            });
        }
    });
    let gw = gateway(
        &format!("http://{addr}/v1"),
        "upstream.deadline_secs = 10\nupstream.timeout_secs = 0.3",
    )
    .await;
    // `upstream_timeout`, not `upstream_deadline`: cut by the idle timeout.
    error_of(
        post(gw, &request(ask(), false)).await,
        504,
        "upstream_timeout",
    )
    .await;
    within(dropped.recv()).await.unwrap();
}

#[tokio::test]
async fn a_base_urls_userinfo_reaches_the_upstream_as_basic_credentials_not_in_the_url() {
    let said_ok = completion(&json!({"role": "assistant", "content": "ok"}), "stop");
    let (url, seen) = canned(vec![("application/json", said_ok)]).await;
    // `p%40ss` is `p@ss`, percent-encoded as a URL's userinfo must be.
    let with_user = url.replacen("http://", "http://proxy-user:p%40ss@", 1);
    let gw = gateway(&with_user, "").await;
    let resp = within(
        http()
            .post(format!("http://{gw}/v1/chat/completions"))
            .json(&request(ask(), false))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let (headers, _) = seen.all().pop().unwrap();
    // base64("proxy-user:p@ss")
    assert_eq!(headers["authorization"], "Basic cHJveHktdXNlcjpwQHNz");
    assert_eq!(headers.get_all("authorization").iter().count(), 1);

    // A key of the gateway's own is the credential sent, alone.
    let (name, key) = some_env_key();
    let gw = gateway(&with_user, &format!("upstream.api_key_env = \"{name}\"")).await;
    let resp = within(
        http()
            .post(format!("http://{gw}/v1/chat/completions"))
            .json(&request(ask(), false))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let (headers, _) = seen.all().pop().unwrap();
    assert_eq!(headers["authorization"], format!("Bearer {key}").as_str());
    assert_eq!(headers.get_all("authorization").iter().count(), 1);
}

#[tokio::test]
async fn a_dripping_stream_is_cut_at_the_deadline_with_an_error_event_then_done() {
    let (url, mut dropped) = dripping(Drip::Sse).await;
    let gw = gateway(
        &url,
        "upstream.deadline_secs = 1\nupstream.timeout_secs = 10",
    )
    .await;
    let resp = post(gw, &request(ask(), true)).await;
    assert_eq!(resp.status(), 200);
    let text = within(resp.text()).await.unwrap();
    let ev = events(&text);
    assert!(text.contains("\"content\":\"Hel\""), "{text}");
    let errors = error_events(&ev);
    assert_eq!(errors.len(), 1, "{text}");
    let msg = openai_error(
        200,
        errors[0].to_string().as_bytes(),
        200,
        "upstream_deadline",
    );
    assert!(msg.contains("deadline_secs"), "{msg}");
    within(dropped.recv()).await.unwrap();
}

#[tokio::test]
async fn an_upstream_that_resets_mid_stream_ends_in_an_error_event() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let Ok((mut s, _)) = listener.accept().await else {
            return;
        };
        if read_request(&mut s).await.is_err() {
            return;
        }
        // A long body is promised; one chunk comes, then the socket is reset.
        let first = chunk(&json!({"role": "assistant", "content": "Hel"}), None);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 100000\r\n\r\n{first}"
        );
        if s.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let _ = tokio::time::timeout(WAIT, go_rx).await;
        s.set_zero_linger().unwrap();
        drop(s);
    });
    let gw = gateway(&format!("http://{addr}/v1"), "").await;
    let mut resp = post(gw, &request(ask(), true)).await;
    assert_eq!(resp.status(), 200);
    let mut text = String::new();
    while !text.contains("\"content\":\"Hel\"") {
        let c = within(resp.chunk())
            .await
            .unwrap()
            .expect("the stream ended early");
        text.push_str(&String::from_utf8_lossy(&c));
    }
    go_tx.send(()).unwrap();
    while let Some(c) = within(resp.chunk()).await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&c));
    }
    let ev = events(&text);
    let errors = error_events(&ev);
    assert_eq!(errors.len(), 1, "{text}");
    let msg = openai_error(
        200,
        errors[0].to_string().as_bytes(),
        200,
        "upstream_stream_error",
    );
    assert!(msg.contains("broke"), "{msg}");
}

/// A listener that counts the connections made to it (and answers none).
async fn counting() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            drop(s);
        }
    });
    (addr, count)
}

#[tokio::test]
async fn a_redirect_elsewhere_is_not_followed_and_names_its_target_redacted() {
    let (elsewhere, contacted) = counting().await;
    let location = format!("http://user:pw@{elsewhere}/v1/chat/completions?key=sekrit");
    let app = Router::new().route(
        "/v1/chat/completions",
        route_post(move || {
            let location = location.clone();
            async move { (StatusCode::FOUND, [("location", location)], "").into_response() }
        }),
    );
    let url = format!("http://{}/v1", serve_app(app).await);
    for extra in ["", "upstream.redirects = \"same_origin\""] {
        let gw = gateway(&url, extra).await;
        for stream in [false, true] {
            let msg = error_of(
                post(gw, &request(ask(), stream)).await,
                502,
                "upstream_redirect",
            )
            .await;
            assert!(
                msg.contains("302")
                    && msg.contains(&format!("http://{elsewhere}/v1/chat/completions"))
                    && !msg.contains("key="),
                "{msg}"
            );
            assert!(!msg.contains("sekrit") && !msg.contains("pw@"), "{msg}");
        }
    }
    assert_eq!(
        contacted.load(Ordering::SeqCst),
        0,
        "the redirect target was contacted"
    );
}

#[tokio::test]
async fn a_same_origin_redirect_is_followed_only_when_configured() {
    let seen = Seen::default();
    let kept = seen.clone();
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            route_post(|| async {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [("location", "/moved/v1/chat/completions")],
                    "",
                )
                    .into_response()
            }),
        )
        .route(
            "/moved/v1/chat/completions",
            route_post(move |headers: HeaderMap, body: Bytes| {
                let kept = kept.clone();
                async move {
                    kept.0.lock().unwrap().push((headers, body));
                    (
                        [("content-type", "application/json")],
                        completion(&json!({"role": "assistant", "content": "moved ok"}), "stop"),
                    )
                        .into_response()
                }
            }),
        );
    let url = format!("http://{}/v1", serve_app(app).await);

    let gw = gateway(&url, "").await;
    error_of(
        post(gw, &request(ask(), false)).await,
        502,
        "upstream_redirect",
    )
    .await;
    assert!(seen.all().is_empty(), "followed with redirects = \"none\"");

    let gw = gateway(&url, "upstream.redirects = \"same_origin\"").await;
    let resp = post(gw, &request(ask(), false)).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "moved ok");
    let got = seen.all();
    assert_eq!(got.len(), 1);
    let sent: Value = serde_json::from_slice(&got[0].1).unwrap();
    assert_eq!(sent["messages"], ask(), "the request came along whole");
}

#[tokio::test]
async fn a_see_other_redirect_is_followed_as_a_get_without_the_body_and_loops_end() {
    use axum::routing::get as route_get;
    let seen = Seen::default();
    let kept = seen.clone();
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            route_post(|| async {
                (StatusCode::SEE_OTHER, [("location", "/v1/answer")], "").into_response()
            }),
        )
        .route(
            "/v1/answer",
            route_get(move |headers: HeaderMap, body: Bytes| {
                let kept = kept.clone();
                async move {
                    kept.0.lock().unwrap().push((headers, body));
                    (
                        [("content-type", "application/json")],
                        completion(&json!({"role": "assistant", "content": "seen"}), "stop"),
                    )
                        .into_response()
                }
            }),
        )
        // A redirect to itself, for good.
        .route(
            "/loop/v1/chat/completions",
            route_post(|| async {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [("location", "/loop/v1/chat/completions")],
                    "",
                )
                    .into_response()
            }),
        );
    let addr = serve_app(app).await;
    let gw = gateway(
        &format!("http://{addr}/v1"),
        "upstream.redirects = \"same_origin\"",
    )
    .await;
    let resp = post(gw, &request(ask(), false)).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "seen");
    let (headers, sent) = seen.all().pop().unwrap();
    assert!(sent.is_empty(), "a GET carries no body");
    assert!(headers.get("content-type").is_none());

    let gw = gateway(
        &format!("http://{addr}/loop/v1"),
        "upstream.redirects = \"same_origin\"",
    )
    .await;
    error_of(
        post(gw, &request(ask(), false)).await,
        502,
        "upstream_redirect",
    )
    .await;
}

// ---------------------------------------------------------------------------------------
// 4. Regressions of issue 11
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_new_id_on_the_same_index_mid_stream_is_a_second_call() {
    let part = |id: Option<&str>, name: Option<&str>, args: &str| {
        let mut p = json!({"index": 0, "function": {"arguments": args}});
        if let Some(id) = id {
            p["id"] = json!(id);
            p["type"] = json!("function");
        }
        if let Some(name) = name {
            p["function"]["name"] = json!(name);
        }
        chunk(&json!({"tool_calls": [p]}), None)
    };
    let sse = [
        chunk(&json!({"role": "assistant", "content": null}), None),
        part(Some("call_A"), Some("get_weather"), ""),
        part(None, None, r#"{"city": "#),
        part(None, None, r#""Paris"}"#),
        part(Some("call_B"), Some("get_weather"), ""),
        part(None, None, r#"{"city": "Rome"}"#),
        chunk(&json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let (url, _) = canned(vec![("text/event-stream", sse)]).await;
    let gw = gateway(&url, "").await;
    let text = post(gw, &request(ask(), true)).await.text().await.unwrap();
    let ev = events(&text);
    let got = streamed_calls(&ev);
    let want = [
        (0, "call_A", "get_weather", r#"{"city": "Paris"}"#),
        (1, "call_B", "get_weather", r#"{"city": "Rome"}"#),
    ];
    assert_eq!(got.len(), 2, "{text}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0, g.1.as_str(), g.2.as_str(), g.3.as_str()), w, "{text}");
    }
    let finish: Vec<&Value> = ev
        .iter()
        .filter_map(|e| e["choices"][0]["finish_reason"].as_str().map(|_| e))
        .collect();
    assert_eq!(finish.len(), 1);
    assert_eq!(finish[0]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(stream_summary(&text)["valid"], 2, "{text}");
}

/// A Hermes call whose arguments the repair can only read by cutting a member away.
const LOSSY: &str = r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "details": ["a": 1, "b": 2]}}</tool_call>"#;

#[tokio::test]
async fn a_lossy_call_in_the_text_reports_its_fix_and_is_unresolved() {
    let p = ScriptedProvider::start(Script::new().then(said(LOSSY)).then(said(LOSSY)))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), "calls.invalid = \"pass\"").await;
    let resp = post(gw, &request(ask(), false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-calls"),
        "valid=0 repaired=0 unresolved=1 from_text=1"
    );
    let fixes = header(&resp, "x-toolmend-fixes");
    assert!(
        fixes.split(',').any(|f| f == "truncated_member_dropped"),
        "{fixes}"
    );
    let unresolved = header(&resp, "x-toolmend-unresolved");
    let body: Value = resp.json().await.unwrap();
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["id"], unresolved.as_str(), "{body}");
    assert_eq!(call["function"]["name"], "get_weather");

    // Streaming: the same, in the closing summary.
    let text = post(gw, &request(ask(), true)).await.text().await.unwrap();
    let summary = stream_summary(&text);
    assert_eq!(summary["from_text"], 1, "{text}");
    assert_eq!(summary["unresolved"].as_array().unwrap().len(), 1, "{text}");
    assert!(
        summary["fixes"]
            .as_array()
            .unwrap()
            .contains(&json!("truncated_member_dropped")),
        "{text}"
    );
    assert_eq!(
        p.requests().len(),
        2,
        "no re-ask with calls.invalid = \"pass\""
    );
}

/// A whole, valid call in an answer that stopped at the token limit: native or in the text.
fn cut_off_answers() -> Vec<(&'static str, String)> {
    let native = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]});
    let text = json!({"role": "assistant",
        "content": r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#});
    vec![
        ("application/json", completion(&native, "length")),
        ("application/json", completion(&text, "length")),
    ]
}

#[tokio::test]
async fn finish_reason_length_marks_the_last_call_cut_off_and_refuses_it() {
    let (url, _) = canned(cut_off_answers()).await;
    let gw = gateway(&url, "calls.invalid = \"pass\"").await;
    for from_text in [0, 1] {
        let resp = post(gw, &request(ask(), false)).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(
            header(&resp, "x-toolmend-calls"),
            format!("valid=0 repaired=0 unresolved=1 from_text={from_text}")
        );
        let fixes = header(&resp, "x-toolmend-fixes");
        assert!(
            fixes.split(',').any(|f| f == "cut_off_at_token_limit"),
            "{fixes}"
        );
        let unresolved = header(&resp, "x-toolmend-unresolved");
        let body: Value = resp.json().await.unwrap();
        let choice = &body["choices"][0];
        assert_eq!(choice["finish_reason"], "length", "{body}");
        assert_eq!(
            choice["message"]["tool_calls"][0]["id"],
            unresolved.as_str()
        );
        if from_text == 0 {
            assert_eq!(unresolved, "c1");
        }
    }
}

#[tokio::test]
async fn finish_reason_length_with_accept_truncated_passes_the_call_flagged() {
    let (url, _) = canned(cut_off_answers()).await;
    let gw = gateway(
        &url,
        "calls.invalid = \"pass\"\ncalls.accept_truncated = true",
    )
    .await;
    for from_text in [0, 1] {
        let resp = post(gw, &request(ask(), false)).await;
        assert_eq!(
            header(&resp, "x-toolmend-calls"),
            format!("valid=0 repaired=1 unresolved=0 from_text={from_text}")
        );
        assert!(
            header(&resp, "x-toolmend-fixes")
                .split(',')
                .any(|f| f == "cut_off_at_token_limit")
        );
        assert!(resp.headers().get("x-toolmend-unresolved").is_none());
        let body: Value = resp.json().await.unwrap();
        let choice = &body["choices"][0];
        assert_eq!(choice["finish_reason"], "length", "{body}");
        let args: Value = serde_json::from_str(
            choice["message"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(args, json!({"city": "Paris"}));
    }
}

#[tokio::test]
async fn finish_reason_length_in_a_stream_keeps_length_and_refuses_the_call() {
    let sse = [
        chunk(
            &json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "c1",
                "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
            None,
        ),
        chunk(
            &json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \"Paris\"}"}}]}),
            None,
        ),
        chunk(&json!({}), Some("length")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let (url, _) = canned(vec![("text/event-stream", sse)]).await;
    let gw = gateway(&url, "calls.invalid = \"pass\"").await;
    let text = post(gw, &request(ask(), true)).await.text().await.unwrap();
    let ev = events(&text);
    let finish: Vec<&str> = ev
        .iter()
        .filter_map(|e| e["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finish, ["length"], "{text}");
    let summary = stream_summary(&text);
    assert_eq!(summary["unresolved"], json!(["c1"]), "{text}");
    assert!(
        summary["fixes"]
            .as_array()
            .unwrap()
            .contains(&json!("cut_off_at_token_limit")),
        "{text}"
    );
}

/// A harmless environment variable that cargo and nextest set for every test run, as a
/// stand-in key for `upstream.api_key_env` (tests cannot set one: `set_var` is unsafe and
/// this workspace forbids unsafe code).
fn some_env_key() -> (String, String) {
    ["CARGO_PKG_NAME", "CARGO_PKG_VERSION", "CARGO_MANIFEST_DIR"]
        .into_iter()
        .find_map(|k| {
            let v = std::env::var(k).ok()?;
            (!v.is_empty() && v.bytes().all(|b| (0x21..0x7f).contains(&b)))
                .then(|| (k.to_owned(), v))
        })
        .expect("run under cargo or nextest: no CARGO_PKG_NAME in the environment")
}

#[tokio::test]
async fn the_api_key_header_reaches_the_upstream() {
    let said_ok = completion(&json!({"role": "assistant", "content": "ok"}), "stop");
    let (url, seen) = canned(vec![("application/json", said_ok)]).await;
    // No key of its own: the client's `api-key` goes through.
    let gw = gateway(&url, "").await;
    let resp = within(
        http()
            .post(format!("http://{gw}/v1/chat/completions"))
            .header("api-key", "client-azure-key")
            .json(&request(ask(), false))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let (headers, _) = seen.all().pop().unwrap();
    assert_eq!(headers["api-key"], "client-azure-key");
    assert!(headers.get("authorization").is_none());

    // Its own key, sent as `api-key`: the client's credentials are not.
    let (name, key) = some_env_key();
    let gw = gateway(
        &url,
        &format!("upstream.api_key_env = \"{name}\"\nupstream.api_key_header = \"api-key\""),
    )
    .await;
    let resp = within(
        http()
            .post(format!("http://{gw}/v1/chat/completions"))
            .header("api-key", "client-azure-key")
            .bearer_auth("client-bearer")
            .json(&request(ask(), false))
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    let (headers, _) = seen.all().pop().unwrap();
    assert_eq!(headers["api-key"], key.as_str());
    assert!(headers.get("authorization").is_none());
}

#[tokio::test]
async fn a_call_to_an_undeclared_tool_counts_as_undeclared() {
    const GHOST: &str = "faults_ghost_tool_q7";
    let p = ScriptedProvider::start(Script::new().then(calls(vec![
        ToolCall::new("c1", "get_weather", r#"{"city": "Paris"}"#),
        ToolCall::new("c2", GHOST, "{}"),
    ])))
    .await
    .unwrap();
    let gw = gateway(&p.base_url(), "calls.invalid = \"pass\"").await;
    let before = calls_counted(&metrics_of(gw).await, "undeclared");
    let resp = post(gw, &request(ask(), false)).await;
    assert_eq!(header(&resp, "x-toolmend-unresolved"), "c2");
    let metrics = metrics_of(gw).await;
    assert!(
        calls_counted(&metrics, "undeclared") >= before + 1.0,
        "{metrics}"
    );
    assert!(calls_counted(&metrics, "get_weather") >= 1.0, "{metrics}");
    assert!(!metrics.contains(GHOST), "{metrics}");
}

#[tokio::test]
async fn past_max_tool_labels_new_tools_count_as_other() {
    let names = ["faults_lbl_one", "faults_lbl_two", "faults_lbl_three"];
    let reply = || {
        calls(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| ToolCall::new(format!("c{i}"), *n, "{}"))
                .collect(),
        )
    };
    let p = ScriptedProvider::start(Script::new().then(reply()).then(reply()))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), "limits.max_tool_labels = 2").await;
    let body = json!({"model": "m", "messages": ask(),
        "tools": names.iter().map(|n| bare(n)).collect::<Vec<_>>()});
    let before = calls_counted(&metrics_of(gw).await, "other");
    for _ in 0..2 {
        let resp = post(gw, &body).await;
        assert_eq!(
            header(&resp, "x-toolmend-calls"),
            "valid=3 repaired=0 unresolved=0 from_text=0"
        );
    }
    let metrics = metrics_of(gw).await;
    assert_eq!(calls_counted(&metrics, names[0]), 2.0, "{metrics}");
    assert_eq!(calls_counted(&metrics, names[1]), 2.0, "{metrics}");
    assert!(!metrics.contains(names[2]), "{metrics}");
    assert!(
        calls_counted(&metrics, "other") >= before + 2.0,
        "{metrics}"
    );
}

// ---------------------------------------------------------------------------------------
// Streams on a kept-alive connection (issue 11, item 3)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_stream_on_a_kept_alive_connection_is_not_held_back_by_nagle() {
    // Without TCP_NODELAY on the accepted socket, every small SSE write after the first
    // waits for the client's delayed ACK (40 ms at least on Linux) once the connection is
    // past its first exchanges: each streamed answer on a pooled connection came ~44 ms
    // late. The option cannot be read from here (no unsafe code), so its effect is: one
    // client (one connection, reused), warmed up, then 30 streamed answers, the fastest of
    // which must beat that floor. One-sided: Nagle's wait is under every answer, a load
    // slows some answers, not all 30 of them by 40 ms.
    let provider =
        ScriptedProvider::start(Script::new().then(said("Sunny, 21 degrees.")).repeating())
            .await
            .unwrap();
    let gw = gateway(&provider.base_url(), "").await;
    let client = reqwest::Client::builder()
        .timeout(WAIT)
        .no_proxy()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let body = request(ask(), true);
    let mut fastest = Duration::MAX;
    for i in 0..40 {
        let t = std::time::Instant::now();
        let resp = within(
            client
                .post(format!("http://{gw}/v1/chat/completions"))
                .json(&body)
                .send(),
        )
        .await
        .unwrap();
        assert_eq!(resp.status(), 200);
        let text = within(resp.text()).await.unwrap();
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        if i >= 10 {
            fastest = fastest.min(t.elapsed());
        }
    }
    assert!(
        fastest < Duration::from_millis(40),
        "the fastest of 30 streamed answers on a kept-alive connection took {fastest:?}"
    );
}

#[tokio::test]
async fn done_before_the_finish_never_drops_the_buffered_calls_in_silence() {
    // A stream whose [DONE] comes before choice 0's finish_reason: the call fragments
    // buffered for the finish used to vanish, the client seeing a clean end.
    let sse = [
        chunk(&json!({"role": "assistant", "content": null}), None),
        chunk(
            &json!({"tool_calls": [{"index": 0, "id": "call_A", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}),
            None,
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let (url, _) = canned(vec![("text/event-stream", sse)]).await;
    let gw = gateway(&url, "").await;
    let text = post(gw, &request(ask(), true)).await.text().await.unwrap();
    let ev = events(&text);
    let errors = error_events(&ev);
    assert_eq!(errors.len(), 1, "{text}");
    let msg = openai_error(
        200,
        errors[0].to_string().as_bytes(),
        200,
        "upstream_stream_error",
    );
    assert!(msg.contains("before choice 0's finish_reason"), "{msg}");

    // With nothing buffered, a [DONE] without a finish is just the end.
    let sse = [
        chunk(&json!({"role": "assistant", "content": "Hi"}), None),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let (url, _) = canned(vec![("text/event-stream", sse)]).await;
    let gw = gateway(&url, "").await;
    let text = post(gw, &request(ask(), true)).await.text().await.unwrap();
    assert!(error_events(&events(&text)).is_empty(), "{text}");
    assert!(text.contains("\"content\":\"Hi\""), "{text}");
}

#[tokio::test]
async fn usage_in_a_finishing_chunk_with_other_choices_is_sent_once() {
    let finish = json!({"id": "chatcmpl-f", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"},
                    {"index": 1, "delta": {"content": "b"}, "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}});
    let sse = [
        chunk(&json!({"role": "assistant", "content": "a"}), None),
        format!("data: {finish}\n\n"),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let (url, _) = canned(vec![("text/event-stream", sse)]).await;
    let gw = gateway(&url, "").await;
    let text = post(gw, &request(ask(), true)).await.text().await.unwrap();
    let with_usage = events(&text)
        .iter()
        .filter(|e| e.get("usage").is_some_and(|u| !u.is_null()))
        .count();
    assert_eq!(with_usage, 1, "{text}");
}

/// One choice of a streamed answer put back together: `(content, reasoning, calls as
/// (id, name, arguments), finish_reason)`.
fn streamed_choice(
    events: &[Value],
    index: u64,
) -> (String, String, Vec<(String, String, String)>, String) {
    let (mut content, mut reasoning, mut finish) = (String::new(), String::new(), String::new());
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for e in events {
        for c in e["choices"].as_array().into_iter().flatten() {
            if c["index"].as_u64() != Some(index) {
                continue;
            }
            content.push_str(c["delta"]["content"].as_str().unwrap_or_default());
            reasoning.push_str(c["delta"]["reasoning_content"].as_str().unwrap_or_default());
            for t in c["delta"]["tool_calls"].as_array().into_iter().flatten() {
                let i = t["index"].as_u64().unwrap() as usize;
                if calls.len() <= i {
                    calls.resize(i + 1, Default::default());
                }
                let call = &mut calls[i];
                call.0.push_str(t["id"].as_str().unwrap_or_default());
                call.1
                    .push_str(t["function"]["name"].as_str().unwrap_or_default());
                call.2
                    .push_str(t["function"]["arguments"].as_str().unwrap_or_default());
            }
            if let Some(f) = c["finish_reason"].as_str() {
                finish = f.to_owned();
            }
        }
    }
    (content, reasoning, calls, finish)
}

#[tokio::test]
async fn every_choice_of_a_stream_is_mended_as_the_json_answer_mends_it() {
    // n = 2: choice 1 leaks its thinking and sends a broken call, in small deltas
    // interleaved with choice 0. The stream must give what the JSON answer gives.
    let broken = r#"{'city': 'Paris', 'days': '3',}"#;
    let thought = "<think>they want Paris</think>Checking.";
    let good = r#"{"city": "Rome"}"#;
    let json_answer = json!({"id": "chatcmpl-f", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a1", "type": "function", "function": {"name": "get_weather", "arguments": good}}]},
             "logprobs": null, "finish_reason": "tool_calls"},
            {"index": 1, "message": {"role": "assistant", "content": thought, "tool_calls": [
                {"id": "b1", "type": "function", "function": {"name": "get_weather", "arguments": broken}}]},
             "logprobs": null, "finish_reason": "tool_calls"}]})
    .to_string();
    let piece = |index: u64, delta: Value, finish: Option<&str>| {
        let c = json!({"id": "chatcmpl-f", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut sse = vec![
        piece(0, json!({"role": "assistant", "content": null}), None),
        piece(1, json!({"role": "assistant", "content": ""}), None),
    ];
    let cut = |s: &str, n: usize| -> Vec<String> {
        s.chars()
            .collect::<Vec<_>>()
            .chunks(n)
            .map(|c| c.iter().collect())
            .collect()
    };
    for text in cut(thought, 4) {
        sse.push(piece(1, json!({"content": text}), None));
    }
    sse.push(piece(
        0,
        json!({"tool_calls": [{"index": 0, "id": "a1", "type": "function",
        "function": {"name": "get_weather", "arguments": ""}}]}),
        None,
    ));
    sse.push(piece(
        1,
        json!({"tool_calls": [{"index": 0, "id": "b1", "type": "function",
        "function": {"name": "get_weather", "arguments": ""}}]}),
        None,
    ));
    for (a, b) in cut(good, 3).into_iter().zip(
        cut(broken, 3)
            .into_iter()
            .chain(std::iter::repeat(String::new())),
    ) {
        sse.push(piece(
            0,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}),
            None,
        ));
        sse.push(piece(
            1,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
            None,
        ));
    }
    for b in cut(broken, 3).into_iter().skip(cut(good, 3).len()) {
        sse.push(piece(
            1,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
            None,
        ));
    }
    sse.push(piece(1, json!({}), Some("tool_calls")));
    sse.push(piece(0, json!({}), Some("tool_calls")));
    sse.push("data: [DONE]\n\n".to_owned());
    let reasoning = "calls.reasoning = \"move\"";
    let (url, _) = canned(vec![("application/json", json_answer)]).await;
    let body: Value = post(gateway(&url, reasoning).await, &request(ask(), false))
        .await
        .json()
        .await
        .unwrap();
    let (url, _) = canned(vec![("text/event-stream", sse.concat())]).await;
    let text = post(gateway(&url, reasoning).await, &request(ask(), true))
        .await
        .text()
        .await
        .unwrap();
    let events = events(&text);
    for index in [0u64, 1] {
        let want = &body["choices"][index as usize];
        let (content, reasoning, calls, finish) = streamed_choice(&events, index);
        let m = &want["message"];
        assert_eq!(
            content,
            m["content"].as_str().unwrap_or_default(),
            "choice {index}: {text}"
        );
        assert_eq!(
            reasoning,
            m["reasoning_content"].as_str().unwrap_or_default(),
            "choice {index}"
        );
        let json_calls: Vec<(String, String, String)> = m["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (
                    s(&c["id"]),
                    s(&c["function"]["name"]),
                    s(&c["function"]["arguments"]),
                )
            })
            .collect();
        assert_eq!(calls, json_calls, "choice {index}: {text}");
        assert_eq!(
            finish,
            want["finish_reason"].as_str().unwrap(),
            "choice {index}"
        );
    }
    // And the JSON answer did mend choice 1: its call is valid JSON with an integer.
    let args: Value = serde_json::from_str(
        body["choices"][1]["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"city": "Paris", "days": 3}));
    assert_eq!(
        body["choices"][1]["message"]["reasoning_content"],
        "they want Paris"
    );
}

#[tokio::test]
async fn a_client_that_writes_a_too_large_body_whole_before_reading_gets_the_413() {
    // Python's http.client and httpx send the whole body, then read. A gateway that
    // answers on the Content-Length and closes leaves them a reset connection (a write
    // error) instead of the answer that names the limit; the body is read and discarded.
    const MAX: usize = 64 * 1024;
    let gw = gateway(
        "http://127.0.0.1:9/v1",
        &format!("limits.max_body_bytes = {MAX}"),
    )
    .await;
    let body = vec![b' '; 32 << 20];
    let mut s = TcpStream::connect(gw).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    within(s.write_all(head.as_bytes())).await.unwrap();
    within(s.write_all(&body)).await.unwrap();
    let raw = within(read_response(&mut s)).await.unwrap();
    let msg = openai_error(raw.status, &raw.body, 413, "body_too_large");
    assert!(msg.contains(&format!("({MAX} bytes)")), "{msg}");
}

/// `{"n": [[…]]}` with `depth` levels in all (the object counts as one).
fn nested(depth: usize) -> String {
    format!(
        "{{\"n\": {}1{}}}",
        "[".repeat(depth - 1),
        "]".repeat(depth - 1)
    )
}

#[tokio::test]
async fn a_request_nested_to_the_json_limit_passes_and_one_level_more_is_400() {
    // serde_json's recursion limit: 127 levels in the whole body (the 128th is refused;
    // the body's own object and its `metadata` object count).
    let p = ScriptedProvider::start(Script::new().then(said("ok")))
        .await
        .unwrap();
    let gw = gateway(&p.base_url(), "").await;
    let body = |depth: usize| {
        // The body object (1) and `metadata` (1) hold `nested(depth - 2)`.
        format!(
            "{{\"model\": \"m\", \"messages\": [{{\"role\": \"user\", \"content\": \"hi\"}}], \
             \"metadata\": {{\"n\": {}}}}}",
            nested(depth - 2)
        )
    };
    let send = |text: String| {
        within(
            http()
                .post(format!("http://{gw}/v1/chat/completions"))
                .header("content-type", "application/json")
                .body(text)
                .send(),
        )
    };
    assert_eq!(send(body(127)).await.unwrap().status(), 200);
    let msg = error_of(send(body(128)).await.unwrap(), 400, "invalid_json").await;
    assert!(msg.contains("recursion limit"), "{msg}");
    assert_eq!(p.requests().len(), 1);
}

#[tokio::test]
async fn call_arguments_nested_to_the_repair_limit_pass_and_one_level_more_are_not_run() {
    // toolmend::RepairOptions::max_depth: 128 levels in one call's arguments.
    let answer = |depth: usize| {
        completion(
            &json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "f", "arguments": nested(depth)}}]}),
            "tool_calls",
        )
    };
    let (url, _) = canned(vec![
        ("application/json", answer(128)),
        ("application/json", answer(129)),
    ])
    .await;
    let gw = gateway(&url, "calls.invalid = \"pass\"").await;
    let body = json!({"model": "m", "messages": ask(), "tools": [bare("f")]});
    let resp = post(gw, &body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-unresolved"),
        "",
        "128 levels pass"
    );
    let resp = post(gw, &body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        header(&resp, "x-toolmend-unresolved"),
        "c1",
        "129 levels are refused"
    );
}

#[tokio::test]
async fn odd_upstream_answers_are_passed_on_never_a_dropped_connection() {
    // JSON that is not a chat completion: an array, a string, `choices` of the wrong type,
    // choices that are not objects. Each comes back as sent (nothing to mend), and the
    // connection is never dropped by a panic.
    let odd = [
        "[1, 2]",
        "\"text\"",
        "null",
        r#"{"choices": 5}"#,
        r#"{"choices": [1, null, {"message": 3}, {"message": {"role": "assistant", "tool_calls": 7}}]}"#,
    ];
    for body in odd {
        let (url, _) = canned(vec![("application/json", body.to_owned())]).await;
        let gw = gateway(&url, "").await;
        let resp = post(gw, &request(ask(), false)).await;
        assert_eq!(resp.status(), 200, "{body}");
        let got = within(resp.text()).await.unwrap();
        if body.contains("\"choices\": [") {
            // A `choices` list: a chat completion, which gains the gateway's account.
            let mut got: Value = serde_json::from_str(&got).unwrap();
            assert!(got["toolmend"].is_object(), "{body}");
            got.as_object_mut().unwrap().remove("toolmend");
            assert_eq!(got, serde_json::from_str::<Value>(body).unwrap());
        } else {
            assert_eq!(got, body);
        }
    }
}

#[tokio::test]
async fn a_mended_answer_keeps_the_upstreams_other_bytes_only_its_choice_written_again() {
    // Pretty-printed, an escaped letter, a float written `1.50`: bytes a tree would write
    // otherwise. The call's `days` is a string: the choice is mended.
    let head = "{\n  \"id\": \"chatcmpl-b\",\n  \"object\": \"chat.completion\",\n  \
                \"created\": 1,\n  \"system_fingerprint\": \"fp_caf\\u00e9\",\n  \"choices\": [";
    let choice = r#"{"index": 0, "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather",
        "arguments": "{\"city\": \"Paris\", \"days\": \"3\"}"}}]}, "finish_reason": "tool_calls"}"#;
    let tail = "],\n  \"usage\": {\"prompt_tokens\": 10, \"cost\": 1.50}\n}\n";
    let one = format!("{head}{choice}{tail}");
    // Two choices: the whole answer is read as a tree (each choice planned).
    let two = format!(
        "{head}{choice},{}{tail}",
        choice.replace("\"index\": 0", "\"index\": 1")
    );
    let (url, _) = canned(vec![
        ("application/json", one.clone()),
        ("application/json", two),
    ])
    .await;
    let gw = gateway(&url, "calls.account = false").await;

    let text = post(gw, &request(ask(), false)).await.text().await.unwrap();
    assert!(
        text.starts_with(head),
        "the head as the upstream wrote it: {text}"
    );
    assert!(
        text.ends_with(tail),
        "the tail as the upstream wrote it: {text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap();
    let args = &body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
    let args: Value = serde_json::from_str(args.as_str().unwrap()).unwrap();
    assert_eq!(
        args,
        json!({"city": "Paris", "days": 3}),
        "the choice mended"
    );
    // The same answer read whole means the same JSON.
    let mut expected: Value = serde_json::from_str(&one).unwrap();
    expected["choices"][0] = body["choices"][0].clone();
    assert_eq!(body, expected);

    let text = post(gw, &request(ask(), false)).await.text().await.unwrap();
    let body: Value = serde_json::from_str(&text).unwrap();
    for i in 0..2 {
        let args = &body["choices"][i]["message"]["tool_calls"][0]["function"]["arguments"];
        let args: Value = serde_json::from_str(args.as_str().unwrap()).unwrap();
        assert_eq!(
            args,
            json!({"city": "Paris", "days": 3}),
            "choice {i}: {text}"
        );
    }
    assert_eq!(body["system_fingerprint"], "fp_café");
}

#[tokio::test]
async fn an_answer_of_an_unusual_shape_passes_as_it_came_and_a_null_account_is_replaced() {
    // A JSON array at the top, and a choice that is an array: no completion to mend.
    let array_top =
        r#"[[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],null]"#;
    let array_choice = r#"{"choices":[[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",}"}}]},"stop"]]}"#;
    // The upstream's own `toolmend: null`: replaced by the account, never a second key.
    let null_account = completion(&json!({"role": "assistant", "content": "hi"}), "stop").replacen(
        '{',
        r#"{"toolmend":null,"#,
        1,
    );
    let (url, _) = canned(vec![
        ("application/json", array_top.to_owned()),
        ("application/json", array_choice.to_owned()),
        ("application/json", null_account),
    ])
    .await;
    let gw = gateway(&url, "").await;
    let resp = post(gw, &request(ask(), false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), array_top, "as it came");
    // A `choices` list: the account joins it, the choice that is no object stays as it is.
    let resp = post(gw, &request(ask(), false)).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(
        text.starts_with(&array_choice[..array_choice.len() - 1]),
        "{text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["toolmend"]["calls"], json!([]), "{text}");
    let text = post(gw, &request(ask(), false)).await.text().await.unwrap();
    assert_eq!(text.matches("\"toolmend\":").count(), 1, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert!(body["toolmend"]["counts"].is_object(), "{text}");
}

#[tokio::test]
async fn tools_or_messages_that_do_not_read_get_the_bodys_invalid_json() {
    let (url, seen) = canned(vec![(
        "application/json",
        completion(&json!({"role": "assistant", "content": "hi"}), "stop"),
    )])
    .await;
    for extra in ["", "calls.mend = false"] {
        let gw = gateway(&url, extra).await;
        // A lone surrogate: the skip that finds a member's end lets it pass, a reading
        // does not.
        for body in [
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"\ud800"}}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"\ud800"}]}"#,
        ] {
            let resp = within(
                http()
                    .post(format!("http://{gw}/v1/chat/completions"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send(),
            )
            .await
            .unwrap();
            error_of(resp, 400, "invalid_json").await;
        }
    }
    assert!(seen.all().is_empty(), "nothing went upstream");
}
