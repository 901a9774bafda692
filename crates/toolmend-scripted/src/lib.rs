//! A scripted provider: a real HTTP server on 127.0.0.1 that answers from a script in
//! each of the three APIs agents speak, strictly: `POST /v1/chat/completions` (OpenAI's
//! JSON and SSE chunks), `POST /v1/messages` (Anthropic's message and named events,
//! thinking signed) and `POST /v1/responses` (OpenAI's Responses object and events,
//! stateless). Each refuses a broken request the way its API does (HTTP 400, that API's
//! error body and wording). No model runs in this project's tests; this stands in for
//! one, strictly, so that toolmend's guarantees are tested against the contract, not
//! assumed.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use toolmend_scripted::{Script, ScriptedProvider};
//! let script = Script::from_jsonl(r#"{"content": "Hello!"}"#).unwrap();
//! let provider = ScriptedProvider::start(script).await?;
//! println!("point your client at {}", provider.base_url()); // http://127.0.0.1:PORT/v1
//! # Ok(()) }
//! ```

mod anthropic;
mod openai;
mod responses;
mod script;

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::serve::ListenerExt as _;
use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::Value;
use tokio::net::TcpListener;

pub use script::{Script, ScriptError, Step};
use toolmend::{agent::Strictness, conversation::AssistantMessage};

/// A running scripted provider. Dropping it stops the server.
#[derive(Debug)]
pub struct ScriptedProvider {
    addr: SocketAddr,
    state: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// What the server shares between requests.
#[derive(Debug)]
struct Shared {
    script: Mutex<Script>,
    strictness: Strictness,
    /// Request bodies received (accepted or refused), in order, up to `keep`.
    requests: Mutex<Vec<Value>>,
    /// How many request bodies to keep (the rest are served, not kept).
    keep: usize,
    /// Responses given so far (numbers the completion ids).
    served: Mutex<u64>,
}

impl ScriptedProvider {
    /// Starts a provider on a free port of 127.0.0.1, enforcing OpenAI's rules.
    pub async fn start(script: Script) -> std::io::Result<Self> {
        Self::start_with(script, Strictness::OpenAi, 0).await
    }

    /// Starts a provider with the given strictness on `port` (0: any free port).
    pub async fn start_with(
        script: Script,
        strictness: Strictness,
        port: u16,
    ) -> std::io::Result<Self> {
        Self::start_keeping(script, strictness, port, usize::MAX).await
    }

    /// [`start_with`](Self::start_with), keeping at most `keep` request bodies for
    /// [`requests`](Self::requests): a long-running provider (the CLI's, a benchmark's)
    /// should not hold every body it ever received.
    pub async fn start_keeping(
        script: Script,
        strictness: Strictness,
        port: u16,
        keep: usize,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Shared {
            script: Mutex::new(script),
            strictness,
            requests: Mutex::new(Vec::new()),
            keep,
            served: Mutex::new(0),
        });
        let app = router(Arc::clone(&state));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        #[allow(clippy::disallowed_methods)] // the server's own task, stopped on drop
        tokio::spawn(async move {
            // Each SSE event written at once, as model servers do: without TCP_NODELAY a
            // stream of small chunks waits on the client's delayed ACK (about 40 ms).
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "scripted provider stopped");
            }
        });
        Ok(ScriptedProvider {
            addr,
            state,
            stop: Some(stop),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL an OpenAI client takes (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The JSON request bodies received so far (up to the number kept), refused ones
    /// included.
    pub fn requests(&self) -> Vec<Value> {
        self.state
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Steps left in the script.
    pub fn remaining(&self) -> usize {
        self.state.script.lock().map(|s| s.len()).unwrap_or(0)
    }
}

impl Drop for ScriptedProvider {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn router(state: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/responses", post(responses))
        .route("/v1/models", get(models))
        .with_state(state)
}

async fn models() -> Response {
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [{"id": "scripted", "object": "model", "created": 0, "owned_by": "toolmend"}]
    }))
    .into_response()
}

async fn chat_completions(State(state): State<Arc<Shared>>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return openai::error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "We could not parse the JSON body of your request. ({e}) (HINT: This likely \
                     means you aren't using your HTTP library correctly. The OpenAI API expects \
                     a JSON payload, but what was sent was not valid JSON.)"
                ),
                None,
            );
        }
    };
    if let Ok(mut r) = state.requests.lock()
        && r.len() < state.keep
    {
        r.push(request.clone());
    }
    if let Err(refusal) = openai::validate(&request, state.strictness) {
        return refusal.into_response();
    }
    // `n` choices: the next `n` steps, one per choice (an error among them answers).
    let choices = request
        .get("n")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, 128);
    let steps: Vec<Option<Step>> = state
        .script
        .lock()
        .map(|mut s| (0..choices).map(|_| s.pop_step()).collect())
        .unwrap_or_default();
    let n = state
        .served
        .lock()
        .map(|mut n| {
            *n += 1;
            *n
        })
        .unwrap_or(0);
    let mut replies = Vec::with_capacity(steps.len());
    for step in steps {
        match step {
            None => {
                return openai::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "The scripted provider's script is exhausted: no reply left for this request.",
                    None,
                );
            }
            Some(Step::Error { status, body }) => {
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return (status, axum::Json(body)).into_response();
            }
            Some(Step::Reply(reply)) => replies.push(reply),
        }
    }
    if replies.is_empty() {
        return openai::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "The scripted provider's script is exhausted: no reply left for this request.",
            None,
        );
    }
    openai::completion(&request, &replies, n)
}

/// `text` in pieces of about `size` bytes, cut at character boundaries.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// A 64-bit FNV-1a digest of `text`: the seal of a thinking block's signature and a
/// reasoning item's encrypted content, so that one changed on the way is refused.
fn seal(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The request's JSON body, kept (up to `keep`); `None` when it is not JSON.
fn received(state: &Shared, body: &[u8]) -> Option<Value> {
    let request: Value = serde_json::from_slice(body).ok()?;
    if let Ok(mut r) = state.requests.lock()
        && r.len() < state.keep
    {
        r.push(request.clone());
    }
    Some(request)
}

/// The next step of the script as a reply and its number, or the answer to give
/// instead: a scripted error as it was written, or 500 when the script is exhausted
/// (`exhausted`: that answer in the API's shape).
fn next_reply(
    state: &Shared,
    exhausted: impl FnOnce(&str) -> Response,
) -> Result<(AssistantMessage, u64), anthropic::Refusal> {
    let step = state.script.lock().ok().and_then(|mut s| s.pop_step());
    let n = state
        .served
        .lock()
        .map(|mut n| {
            *n += 1;
            *n
        })
        .unwrap_or(0);
    match step {
        Some(Step::Reply(reply)) => Ok((reply, n)),
        Some(Step::Error { status, body }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Err(Box::new((status, axum::Json(body)).into_response()))
        }
        None => Err(Box::new(exhausted(
            "The scripted provider's script is exhausted: no reply left for this request.",
        ))),
    }
}

async fn messages(State(state): State<Arc<Shared>>, body: Bytes) -> Response {
    let Some(request) = received(&state, &body) else {
        return anthropic::error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "There was an error parsing the body of your request: it is not valid JSON.",
        );
    };
    if let Err(refusal) = anthropic::validate(&request) {
        return *refusal;
    }
    match next_reply(&state, |m| {
        anthropic::error(StatusCode::INTERNAL_SERVER_ERROR, "api_error", m)
    }) {
        Ok((reply, n)) => anthropic::message(&request, &reply, n),
        Err(answer) => *answer,
    }
}

/// Messages' `count_tokens`: the same checks as a message (no `max_tokens` needed), the
/// count at four bytes a token over the messages, system and tools; no step used.
async fn count_tokens(State(state): State<Arc<Shared>>, body: Bytes) -> Response {
    let Some(mut request) = received(&state, &body) else {
        return anthropic::error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "There was an error parsing the body of your request: it is not valid JSON.",
        );
    };
    if let Some(obj) = request.as_object_mut() {
        obj.entry("max_tokens").or_insert(serde_json::json!(1));
    }
    if let Err(refusal) = anthropic::validate(&request) {
        return *refusal;
    }
    let bytes: usize = ["system", "messages", "tools"]
        .iter()
        .filter_map(|k| request.get(*k))
        .map(|v| v.to_string().len())
        .sum();
    axum::Json(serde_json::json!({"input_tokens": bytes.div_ceil(4)})).into_response()
}

async fn responses(State(state): State<Arc<Shared>>, body: Bytes) -> Response {
    let Some(request) = received(&state, &body) else {
        return openai::error(
            StatusCode::BAD_REQUEST,
            "We could not parse the JSON body of your request.",
            None,
        );
    };
    if let Err(refusal) = responses::validate(&request) {
        return *refusal;
    }
    match next_reply(&state, |m| {
        openai::error(StatusCode::INTERNAL_SERVER_ERROR, m, None)
    }) {
        Ok((reply, n)) => responses::response(&request, &reply, n),
        Err(answer) => *answer,
    }
}
