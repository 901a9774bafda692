//! The HTTP side: routes, the request path (history), the upstream call, the response
//! path (mending, re-asks), headers and metrics.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{DefaultBodyLimit, State},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{Value, json};
use toolmend::{
    MendOptions,
    history::{
        self, Budget, ByteEstimate, MissingIdPolicy, OrphanPolicy, SanitizePolicy, Tiktoken,
    },
    mend::Outcome,
    protocol::{AssistantMessage, Message},
};

use crate::{
    config::{ApiKeyHeader, Config, HistoryPolicy, InvalidPolicy, Redirects},
    mend::{CallReport, MendConfig, Mended, ToolCache, mend_message, mint_token},
    metrics as m, stream,
};

/// The gateway's state, shared by every request.
#[derive(Debug)]
pub struct Gateway {
    pub(crate) config: Config,
    pub(crate) client: reqwest::Client,
    pub(crate) tools: ToolCache,
    pub(crate) mend: MendConfig,
    api_key: Option<String>,
    metrics: Option<PrometheusHandle>,
    pub(crate) corrector: Option<toolmend_openai::ModelCorrector>,
    /// The `tool` label values handed out so far (bounded).
    pub(crate) labels: m::ToolLabels,
}

/// A gateway that could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// The correction model's client could not be built.
    #[error("correction model: {0}")]
    Correction(#[from] toolmend_openai::ClientError),
}

impl Gateway {
    /// A gateway for `config`. The API key is read now from `upstream.api_key_env`.
    /// `metrics`: the Prometheus handle `/metrics` renders (see [`crate::metrics::install`]).
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be built.
    pub fn new(config: Config, metrics: Option<PrometheusHandle>) -> Result<Self, StartError> {
        let redirects = match config.upstream.redirects {
            Redirects::None => reqwest::redirect::Policy::none(),
            Redirects::SameOrigin => {
                let origin = origin_of(&config.upstream.base_url);
                reqwest::redirect::Policy::custom(move |attempt| {
                    let to = attempt.url();
                    let same = origin.as_ref().is_some_and(|(scheme, host, port)| {
                        to.scheme() == scheme
                            && to.host_str() == Some(host.as_str())
                            && to.port_or_known_default() == *port
                    });
                    if same && attempt.previous().len() < 5 {
                        attempt.follow()
                    } else {
                        attempt.stop()
                    }
                })
            }
        };
        let client = reqwest::Client::builder()
            .connect_timeout(crate::config::secs(config.upstream.connect_timeout_secs))
            .read_timeout(config.upstream.timeout())
            .tcp_nodelay(true)
            .redirect(redirects)
            .build()?;
        let api_key = config
            .upstream
            .api_key_env
            .as_deref()
            .and_then(|name| std::env::var(name).ok())
            .filter(|k| !k.is_empty());
        let mend = MendConfig {
            mend: MendOptions::default(),
            calls_in_content: config.calls.calls_in_content,
            accept_truncated: config.calls.accept_truncated,
        };
        let corrector = if config
            .calls
            .invalid
            .list()
            .contains(&InvalidPolicy::Correct)
        {
            let c = &config.correction;
            let mut client = toolmend_openai::OpenAiClient::new(&c.base_url)?
                .timeout(Duration::from_secs_f64(c.timeout_secs.max(0.001)));
            if let Some(key) = c.api_key_env.as_deref().and_then(|n| std::env::var(n).ok()) {
                client = client.api_key(key);
            }
            Some(
                toolmend_openai::ModelCorrector::new(client, &c.model)
                    .context_messages(c.context_messages),
            )
        } else {
            None
        };
        Ok(Gateway {
            labels: m::ToolLabels::new(config.limits.max_tool_labels),
            corrector,
            tools: ToolCache::new(config.limits.tool_cache)
                .limits(config.limits.max_tools, config.limits.max_schema_bytes),
            client,
            mend,
            api_key,
            metrics,
            config,
        })
    }

    /// The routes: `POST /v1/chat/completions`, `GET /v1/models`, `/healthz`, `/readyz`,
    /// `/metrics`.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(|| async { "ok" }))
            .route("/metrics", get(render_metrics))
            // The body limit and its timeout are applied where the body is read (read_body),
            // so both answer in OpenAI's error shape.
            .layer(DefaultBodyLimit::disable())
            .layer(catch_panics())
            .with_state(self)
    }

    pub(crate) fn upstream_url(&self, path: &str) -> String {
        format!(
            "{}{path}",
            self.config.upstream.base_url.trim_end_matches('/')
        )
    }

    /// Sends `req` and reads the whole answer, within `upstream.deadline_secs` and
    /// `limits.max_upstream_bytes`; an answer that is not a success comes back as the
    /// response to give the client (passed on, or a 502 for a redirect).
    #[allow(clippy::result_large_err)]
    pub(crate) async fn fetch(&self, req: reqwest::RequestBuilder) -> Result<Bytes, Response> {
        let deadline = Instant::now() + self.config.upstream.deadline();
        let resp = match tokio::time::timeout_at(deadline.into(), req.send()).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(upstream_failure(&e)),
            Err(_) => return Err(deadline_passed()),
        };
        if !resp.status().is_success() {
            return Err(not_success(self, resp, deadline).await);
        }
        read_bounded(resp, self.config.limits.max_upstream_bytes, deadline).await
    }

    /// The upstream request with auth and tracing headers.
    pub(crate) fn upstream_post(
        &self,
        headers: &HeaderMap,
        body: &Value,
    ) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .post(self.upstream_url("/chat/completions"))
            .json(body);
        req = self.auth(req, headers);
        req
    }

    /// [`upstream_post`](Self::upstream_post) with the body as bytes: the client's own
    /// when nothing in it changed (no second serialization).
    pub(crate) fn upstream_post_bytes(
        &self,
        headers: &HeaderMap,
        body: Bytes,
    ) -> reqwest::RequestBuilder {
        let req = self
            .client
            .post(self.upstream_url("/chat/completions"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(body);
        self.auth(req, headers)
    }

    fn auth(
        &self,
        mut req: reqwest::RequestBuilder,
        headers: &HeaderMap,
    ) -> reqwest::RequestBuilder {
        match (&self.api_key, self.config.upstream.api_key_header) {
            (Some(key), ApiKeyHeader::Authorization) => req = req.bearer_auth(key),
            (Some(key), ApiKeyHeader::ApiKey) => req = req.header("api-key", key.as_str()),
            (None, _) => {
                // The client's own credentials, in whichever header it sent them
                // (`api-key`: Azure OpenAI and the servers that copy it).
                for name in [header::AUTHORIZATION.as_str(), "api-key"] {
                    if let Some(v) = headers.get(name) {
                        req = req.header(name, v.clone());
                    }
                }
            }
        }
        for name in [
            "x-request-id",
            "traceparent",
            "openai-organization",
            "openai-project",
        ] {
            if let Some(v) = headers.get(name) {
                req = req.header(name, v.clone());
            }
        }
        req
    }
}

/// A bug that panics in a handler answers that request with a 500 in OpenAI's shape
/// (logged, counted) instead of a dropped connection; the other requests never notice.
pub(crate) fn catch_panics()
-> tower_http::catch_panic::CatchPanicLayer<fn(Box<dyn std::any::Any + Send>) -> Response> {
    fn answer(err: Box<dyn std::any::Any + Send>) -> Response {
        let what = err
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| err.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(panic = %what, "a request handler panicked");
        m::panic();
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "toolmend_internal_error",
            "toolmend failed on this request (a bug; the log has the details): nothing \
             was changed upstream by it, and it may be retried",
        )
    }
    tower_http::catch_panic::CatchPanicLayer::custom(answer as fn(_) -> _)
}

async fn render_metrics(State(gw): State<Arc<Gateway>>) -> Response {
    match &gw.metrics {
        Some(h) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            h.render(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "metrics are not installed").into_response(),
    }
}

async fn models(State(gw): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    let req = gw.auth(gw.client.get(gw.upstream_url("/models")), &headers);
    let deadline = Instant::now() + gw.config.upstream.deadline();
    match tokio::time::timeout_at(deadline.into(), req.send()).await {
        Ok(Ok(resp)) => forward(resp, gw.config.limits.max_upstream_bytes, deadline).await,
        Ok(Err(e)) => upstream_failure(&e),
        Err(_) => deadline_passed(),
    }
}

/// An OpenAI-style error response.
pub(crate) fn error(
    status: StatusCode,
    kind: &str,
    code: &str,
    message: impl Into<String>,
) -> Response {
    let body =
        json!({"error": {"message": message.into(), "type": kind, "param": null, "code": code}});
    (status, axum::Json(body)).into_response()
}

pub(crate) fn upstream_failure(e: &reqwest::Error) -> Response {
    m::upstream_error(if e.is_timeout() {
        "timeout"
    } else {
        "transport"
    });
    if e.is_timeout() {
        error(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_error",
            "upstream_timeout",
            "the upstream provider did not answer in time",
        )
    } else {
        error(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "upstream_unreachable",
            format!(
                "the upstream provider could not be reached: {}",
                without_url(e)
            ),
        )
    }
}

/// reqwest's error text with its causes (its own text names none: "error sending
/// request for url (…)", the "connection refused" is in its sources), without the URL
/// (it may carry a key in a query string).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cause = c.source();
    }
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), "<upstream>");
    }
    s
}

/// `(scheme, host, port)` of a URL, for the same-origin redirect policy.
fn origin_of(url: &str) -> Option<(String, String, Option<u16>)> {
    let u = reqwest::Url::parse(url).ok()?;
    Some((
        u.scheme().to_owned(),
        u.host_str()?.to_owned(),
        u.port_or_known_default(),
    ))
}

/// Reads an upstream body up to `max` bytes: past that, or past `deadline`, an error
/// response in OpenAI's shape.
#[allow(clippy::result_large_err)]
pub(crate) async fn read_bounded(
    mut resp: reqwest::Response,
    max: usize,
    deadline: Instant,
) -> Result<Bytes, Response> {
    let mut buf = bytes::BytesMut::new();
    loop {
        let next = tokio::time::timeout_at(deadline.into(), resp.chunk()).await;
        match next {
            Err(_) => return Err(deadline_passed()),
            Ok(Err(e)) => return Err(upstream_failure(&e)),
            Ok(Ok(None)) => return Ok(buf.freeze()),
            Ok(Ok(Some(chunk))) => {
                if buf.len() + chunk.len() > max {
                    m::upstream_error("too_large");
                    return Err(error(
                        StatusCode::BAD_GATEWAY,
                        "upstream_error",
                        "upstream_too_large",
                        format!(
                            "the upstream answer is larger than limits.max_upstream_bytes \
                             ({max} bytes); it was not read further"
                        ),
                    ));
                }
                buf.extend_from_slice(&chunk);
            }
        }
    }
}

/// The answer when an upstream answer outlives `upstream.deadline_secs`.
pub(crate) fn deadline_passed() -> Response {
    m::upstream_error("deadline");
    error(
        StatusCode::GATEWAY_TIMEOUT,
        "upstream_error",
        "upstream_deadline",
        "the upstream answer took longer than upstream.deadline_secs in all",
    )
}

/// An upstream answer that is not a success: a redirect is refused (not followed,
/// `upstream.redirects`), anything else is passed on as it is.
pub(crate) async fn not_success(
    gw: &Gateway,
    resp: reqwest::Response,
    deadline: Instant,
) -> Response {
    if resp.status().is_redirection() {
        m::upstream_error("redirect");
        let to = resp
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| "nowhere".to_owned(), crate::config::redact_url);
        return error(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "upstream_redirect",
            format!(
                "the upstream answered {} (to {to}); redirects are not followed \
                 (upstream.redirects = \"{}\"): set upstream.base_url to the final URL",
                resp.status().as_u16(),
                match gw.config.upstream.redirects {
                    Redirects::None => "none",
                    Redirects::SameOrigin => "same_origin",
                }
            ),
        );
    }
    m::upstream_error("status");
    forward(resp, gw.config.limits.max_upstream_bytes, deadline).await
}

/// An upstream response passed on as it is (status, body, `Retry-After`).
pub(crate) async fn forward(resp: reqwest::Response, max: usize, deadline: Instant) -> Response {
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut out = Response::builder().status(status);
    for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
        if let Some(v) = resp.headers().get(name.as_str())
            && let Ok(v) = HeaderValue::from_bytes(v.as_bytes())
        {
            out = out.header(name, v);
        }
    }
    for (name, v) in resp.headers() {
        if name.as_str().starts_with("x-ratelimit-")
            && let Ok(v) = HeaderValue::from_bytes(v.as_bytes())
        {
            out = out.header(name.as_str(), v);
        }
    }
    let body = match read_bounded(resp, max, deadline).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    out.body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

/// What the request path did, for the response headers.
#[derive(Debug, Default, Clone)]
pub(crate) struct RequestNotes {
    pub history: Option<String>,
    /// The request body changed (sanitized or trimmed): it must be serialized again.
    pub changed: bool,
}

/// The request path: the history checked and, by policy, sanitized or refused; trimmed.
#[allow(clippy::result_large_err)]
pub(crate) fn prepare(gw: &Gateway, body: &mut Value) -> Result<RequestNotes, Response> {
    let mut notes = RequestNotes::default();
    let Some(raw) = body.get("messages") else {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "missing_messages",
            "the request has no 'messages'",
        ));
    };
    let limits = &gw.config.limits;
    if let Some(n) = raw.as_array().map(Vec::len)
        && n > limits.max_messages
    {
        return Err(over_limit(format!(
            "'messages' has {n} messages, more than limits.max_messages ({})",
            limits.max_messages
        )));
    }
    let mut messages: Vec<Message> = <Vec<Message> as serde::Deserialize>::deserialize(raw)
        .map_err(|e| {
            error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_messages",
                format!("'messages' is not a list of chat messages: {e}"),
            )
        })?;
    for (i, message) in messages.iter().enumerate() {
        let calls = message.tool_calls();
        if calls.len() > limits.max_calls_per_message {
            return Err(over_limit(format!(
                "messages[{i}] has {} tool calls, more than limits.max_calls_per_message ({})",
                calls.len(),
                limits.max_calls_per_message
            )));
        }
        if let Some((c, call)) = calls
            .iter()
            .enumerate()
            .find(|(_, c)| c.function.arguments.len() > limits.max_argument_bytes)
        {
            // Never replaced by `{}` in silence: the client learns which call is too big.
            return Err(over_limit(format!(
                "messages[{i}].tool_calls[{c}].function.arguments is {} bytes, more than \
                 limits.max_argument_bytes ({})",
                call.function.arguments.len(),
                limits.max_argument_bytes
            )));
        }
    }
    // Counted without their texts: only a refusal lists them.
    let found = history::count(&messages);
    let mut changed = false;
    if found > 0 {
        match gw.config.history.policy {
            HistoryPolicy::Pass => {
                m::history("passed");
                notes.history = Some(format!("passed; violations={found}"));
            }
            HistoryPolicy::Reject => {
                m::history("rejected");
                // The first ones in full, the rest as a count: the answer stays small.
                const LISTED: usize = 50;
                let violations = history::check(&messages);
                let mut lines: Vec<String> = violations
                    .iter()
                    .take(LISTED)
                    .map(|v| {
                        format!(
                            "- {} (message {}): {}",
                            v.kind.id(),
                            v.message,
                            v.provider_error
                        )
                    })
                    .collect();
                if violations.len() > LISTED {
                    lines.push(format!("- … and {} more", violations.len() - LISTED));
                }
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "toolmend_invalid_history",
                    format!(
                        "the history breaks the tool-call pairing rules ({} violation(s)); it \
                         was not sent upstream:\n{}",
                        violations.len(),
                        lines.join("\n")
                    ),
                ));
            }
            HistoryPolicy::Sanitize => {
                let policy = SanitizePolicy {
                    orphans: if gw.config.history.orphans == "rehome" {
                        OrphanPolicy::Rehome
                    } else {
                        OrphanPolicy::Drop
                    },
                    missing_ids: MissingIdPolicy::Mint,
                    ..SanitizePolicy::default()
                };
                let out = history::sanitize(messages, &policy);
                let mut kinds: Vec<&str> = out.actions.iter().map(|a| a.kind.id()).collect();
                kinds.sort_unstable();
                kinds.dedup();
                m::history("sanitized");
                notes.history = Some(format!(
                    "sanitized; actions={}; kinds={}",
                    out.actions.len(),
                    kinds.join(",")
                ));
                messages = out.messages;
                changed = true;
            }
        }
    }
    if let Some(budget) = gw.config.history.max_tokens {
        let counter: Box<dyn history::TokenCounter> = match gw.config.history.encoding.as_str() {
            "cl100k_base" => Box::new(Tiktoken::cl100k_base()),
            "bytes" => Box::new(ByteEstimate),
            _ => Box::new(Tiktoken::o200k_base()),
        };
        let trimmed = history::trim(messages, Budget::Tokens(budget), counter.as_ref());
        if trimmed.dropped > 0 {
            changed = true;
            let note = format!("trimmed; dropped={}", trimmed.dropped);
            notes.history = Some(match notes.history.take() {
                Some(h) => format!("{h}; {note}"),
                None => note,
            });
        }
        messages = trimmed.messages;
    }
    if changed {
        body["messages"] = serde_json::to_value(&messages).unwrap_or(Value::Null);
        notes.changed = true;
    }
    Ok(notes)
}

/// 400 for a request past one of the `[limits]`.
pub(crate) fn over_limit(message: String) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "toolmend_limit_exceeded",
        message,
    )
}

/// A request id for logs and the upstream: the client's `x-request-id`, or a new one.
fn request_id(headers: &mut HeaderMap) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if let Some(id) = headers.get("x-request-id").and_then(|v| v.to_str().ok()) {
        return id.to_owned();
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let id = format!("tm-{nanos:08x}{:06x}", NEXT.fetch_add(1, Ordering::Relaxed));
    if let Ok(v) = HeaderValue::from_str(&id) {
        headers.insert("x-request-id", v);
    }
    id
}

/// A body over `limits.max_body_bytes` is read and discarded up to this many bytes (or
/// the limit, when it is larger) before the 413; one declared larger is answered at once.
const DRAIN_MAX: usize = 64 << 20;

/// The request body, read within `limits.body_timeout_secs` and `limits.max_body_bytes`.
/// A body over the limit is still read to its end (discarded, up to [`DRAIN_MAX`] and the
/// same timeout) before the 413 goes out: clients that send the whole body before they
/// read (Python's http.client, httpx) would otherwise meet a reset connection instead of
/// the answer that names the limit.
#[allow(clippy::result_large_err)]
async fn read_body(gw: &Gateway, body: Body, declared: Option<u64>) -> Result<Bytes, Response> {
    use futures::StreamExt as _;
    let limits = &gw.config.limits;
    let max = limits.max_body_bytes;
    let drain_max = DRAIN_MAX.max(max);
    if declared.is_some_and(|n| n > drain_max as u64) {
        return Err(too_large_body(max));
    }
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf = bytes::BytesMut::new();
        let mut seen = 0usize;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "body_read_failed",
                    format!("the request body could not be read: {e}"),
                )
            })?;
            seen = seen.saturating_add(chunk.len());
            if seen > drain_max {
                break;
            }
            if seen <= max && declared.is_none_or(|n| n <= max as u64) {
                buf.extend_from_slice(&chunk);
            }
        }
        if seen > max || declared.is_some_and(|n| n > max as u64) {
            return Err(too_large_body(max));
        }
        Ok(buf.freeze())
    };
    match tokio::time::timeout(limits.body_timeout(), read).await {
        Ok(r) => r,
        Err(_) if declared.is_some_and(|n| n > max as u64) => Err(too_large_body(max)),
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            "body_timeout",
            format!(
                "the request body did not arrive within limits.body_timeout_secs ({} s)",
                limits.body_timeout_secs
            ),
        )),
    }
}

/// 413 in OpenAI's shape.
pub(crate) fn too_large_body(max: usize) -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        "body_too_large",
        format!("the request body is larger than limits.max_body_bytes ({max} bytes)"),
    )
}

async fn chat(State(gw): State<Arc<Gateway>>, mut headers: HeaderMap, body: Body) -> Response {
    let id = request_id(&mut headers);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // A body declared over the limit is not kept: it is read and discarded (see
    // read_body), then answered 413.
    let mut out = match read_body(&gw, body, declared).await {
        Ok(body) => chat_inner(gw, headers, body).await,
        Err(e) => e,
    };
    if let Ok(v) = HeaderValue::from_str(&id) {
        out.headers_mut().insert("x-request-id", v);
    }
    // Debug: at this rate a log line per request costs as much as the mending.
    tracing::debug!(
        request_id = %id,
        status = out.status().as_u16(),
        calls = out.headers().get("x-toolmend-calls").and_then(|v| v.to_str().ok()).unwrap_or(""),
        history = out.headers().get("x-toolmend-history").and_then(|v| v.to_str().ok()).unwrap_or(""),
        "chat completion"
    );
    out
}

async fn chat_inner(gw: Arc<Gateway>, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let mut request: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_body",
                "the body must be a JSON object",
            );
        }
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
                format!("the body is not JSON: {e}"),
            );
        }
    };
    let notes = match prepare(&gw, &mut request) {
        Ok(n) => n,
        Err(resp) => return resp,
    };
    let toolbox = match request.get("tools").filter(|t| t.is_array()) {
        Some(tools) if gw.config.calls.mend => match gw.tools.get(tools) {
            Ok(t) => Some(t),
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "invalid_tools",
                    e.to_string(),
                );
            }
        },
        _ => None,
    };
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        return stream::respond(gw, headers, request, toolbox, notes, started).await;
    }
    let mut upstream_time = Duration::ZERO;
    let t = Instant::now();
    let outgoing = if notes.changed {
        gw.upstream_post(&headers, &request)
    } else {
        gw.upstream_post_bytes(&headers, body)
    };
    let raw = match gw.fetch(outgoing).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    let mut response: Value = match serde_json::from_slice(&raw) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "upstream_invalid_json",
                format!("the upstream answer is not JSON: {e}"),
            );
        }
    };
    let mut response_changed = false;
    upstream_time += t.elapsed();
    let mut summary = Summary::default();
    // Only a completion's `choices` list is mended; any other JSON passes as it came (an
    // array or a string at the top used to panic on the way back).
    if let Some(toolbox) = &toolbox
        && let Some(taken) = response
            .get_mut("choices")
            .and_then(Value::as_array_mut)
            .map(std::mem::take)
    {
        let choices = taken;
        let mut mended_choices = Vec::with_capacity(choices.len());
        for (i, mut choice) in choices.into_iter().enumerate() {
            let Ok(message) = serde_json::from_value::<AssistantMessage>(choice["message"].clone())
            else {
                mended_choices.push(choice);
                continue;
            };
            let finish = choice["finish_reason"].as_str();
            let mut mended = mend_message(&message, toolbox, &gw.mend, &mint_token(), finish);
            if i == 0 {
                let (m2, took) = resolve(&gw, &headers, &request, toolbox, mended).await;
                mended = m2;
                upstream_time += took;
            }
            summary.add(&mended, toolbox, &gw.labels);
            if mended.changed {
                choice["message"] = serde_json::to_value(&mended.message).unwrap_or(Value::Null);
                response_changed = true;
            }
            let finish_before = choice["finish_reason"].clone();
            let has_calls = mended
                .message
                .tool_calls
                .as_ref()
                .is_some_and(|c| !c.is_empty());
            if let Some(f) = finish_reason(
                choice["finish_reason"].as_str(),
                has_calls,
                mended.calls.iter().any(|c| c.from_text),
            ) {
                choice["finish_reason"] = json!(f);
            }
            response_changed |= choice["finish_reason"] != finish_before;
            mended_choices.push(choice);
        }
        response["choices"] = Value::Array(mended_choices);
    }
    m::request(
        "ok",
        started.elapsed().saturating_sub(upstream_time),
        upstream_time,
    );
    // Nothing mended: the upstream's own bytes go out (no second serialization).
    let mut out = if response_changed {
        axum::Json(response).into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], raw).into_response()
    };
    summary.headers(out.headers_mut(), &notes);
    out
}

/// Runs the `calls.invalid` policies, in order, on the calls that stayed invalid; what
/// is still invalid at the end goes out flagged. Returns the time spent upstream.
pub(crate) async fn resolve(
    gw: &Gateway,
    headers: &HeaderMap,
    request: &Value,
    toolbox: &toolmend::Toolbox,
    mut mended: Mended,
) -> (Mended, Duration) {
    let mut took = Duration::ZERO;
    for policy in gw.config.calls.invalid.list() {
        if mended.unresolved().next().is_none() {
            break;
        }
        match policy {
            InvalidPolicy::ReAsk => {
                let (m2, t) = re_ask(gw, headers, request, toolbox, mended).await;
                mended = m2;
                took += t;
            }
            InvalidPolicy::Correct => {
                let t = Instant::now();
                mended = correct(gw, request, toolbox, mended).await;
                took += t.elapsed();
            }
            InvalidPolicy::Pass => break,
        }
    }
    (mended, took)
}

/// Asks the correction model to fix each invalid call (concurrently), re-validating each
/// answer. A call missing a required value (with no unknown key that may be its
/// misnaming) or cut off is not sent: the model would invent what was never said.
async fn correct(
    gw: &Gateway,
    request: &Value,
    toolbox: &toolmend::Toolbox,
    mut mended: Mended,
) -> Mended {
    use toolmend::{
        Fix, FixKind, IssueKind,
        correct::{Correction, CorrectionRequest, Corrector},
        schema::{Phase, ValidationContext},
    };
    let Some(corrector) = &gw.corrector else {
        return mended;
    };
    let messages: Vec<Message> =
        serde_json::from_value(request["messages"].clone()).unwrap_or_default();
    let assistant_text = mended.message.text();
    let raw_of = |id: &str| {
        mended
            .message
            .tool_calls
            .iter()
            .flatten()
            .find(|c| c.id.as_deref() == Some(id))
            .map(|c| c.function.arguments.clone())
            .unwrap_or_default()
    };
    let jobs: Vec<(usize, String)> = mended
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.outcome == Outcome::Feedback)
        .filter(|(_, c)| {
            let has = |k: IssueKind| c.issues.iter().any(|i| i.kind == k);
            let misnamed = has(IssueKind::UnknownKey)
                || c.fixes.iter().any(|f| f.kind == FixKind::UnknownKeyDropped);
            !has(IssueKind::UnknownTool)
                && !has(IssueKind::Truncated)
                && (!has(IssueKind::MissingRequired) || misnamed)
        })
        .map(|(i, c)| (i, raw_of(&c.id)))
        .collect();
    let coercions = MendOptions::default().coercions;
    let tries = gw.config.correction.max_retries;
    let work = jobs.iter().map(|(i, raw)| {
        let report = &mended.calls[*i];
        let messages = &messages;
        let assistant_text = assistant_text.as_deref();
        let coercions = &coercions;
        async move {
            let tool = toolbox.get(&report.tool)?;
            let mut issues = report.issues.clone();
            for attempt in 1..=tries {
                m::correction();
                let answer = corrector
                    .correct(CorrectionRequest {
                        tool,
                        call_id: &report.id,
                        raw_arguments: raw,
                        arguments: None,
                        issues: &issues,
                        attempt,
                        messages,
                        assistant_text,
                    })
                    .await;
                let Ok(Correction {
                    arguments: Some(value),
                    ..
                }) = answer
                else {
                    return None;
                };
                let ctx = ValidationContext::new(tool.name(), Phase::Correction);
                let checked = tool.check(value, coercions, &ctx);
                if checked.is_valid() {
                    return Some((*i, checked.value));
                }
                issues = checked.issues;
            }
            None
        }
    });
    let fixed: Vec<(usize, Value)> = futures::future::join_all(work)
        .await
        .into_iter()
        .flatten()
        .collect();
    for (i, value) in fixed {
        let text = value.to_string();
        let id = mended.calls[i].id.clone();
        if let Some(call) = mended
            .message
            .tool_calls
            .iter_mut()
            .flatten()
            .find(|c| c.id.as_deref() == Some(id.as_str()))
        {
            call.function.arguments.clone_from(&text);
            call.function.name.clone_from(&mended.calls[i].tool);
        }
        let report = &mut mended.calls[i];
        report.outcome = Outcome::Repaired;
        report
            .fixes
            .push(Fix::on(FixKind::ArgumentsCorrected, "", text));
        report.issues.clear();
        report.feedback = None;
        mended.changed = true;
    }
    mended
}

/// Re-asks the upstream model for the calls that stayed invalid (policy `re_ask`): the
/// conversation, the model's invalid calls and their feedback go back, the client never
/// sees them. Valid calls of the first answer are kept; the new answer's calls replace
/// the invalid ones.
async fn re_ask(
    gw: &Gateway,
    headers: &HeaderMap,
    request: &Value,
    toolbox: &toolmend::Toolbox,
    mut mended: Mended,
) -> (Mended, Duration) {
    let mut took = Duration::ZERO;
    let mut asked = 0;
    while asked < gw.config.calls.max_re_asks && mended.unresolved().next().is_some() {
        asked += 1;
        m::re_ask();
        let bad: Vec<&CallReport> = mended.unresolved().collect();
        let bad_ids: Vec<&str> = bad.iter().map(|c| c.id.as_str()).collect();
        let calls: Vec<Value> = mended
            .message
            .tool_calls
            .iter()
            .flatten()
            .filter(|c| c.id.as_deref().is_some_and(|id| bad_ids.contains(&id)))
            .map(|c| {
                // Providers (vLLM) decode historical arguments: keep them JSON.
                let args = if serde_json::from_str::<Value>(&c.function.arguments).is_ok() {
                    c.function.arguments.clone()
                } else {
                    "{}".to_owned()
                };
                json!({"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": args}})
            })
            .collect();
        let mut body = request.clone();
        let mut messages = body["messages"].as_array().cloned().unwrap_or_default();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
        for c in &bad {
            messages.push(json!({"role": "tool", "tool_call_id": c.id, "content": c.feedback}));
        }
        body["messages"] = Value::Array(messages);
        body["stream"] = json!(false);
        if let Some(o) = body.as_object_mut() {
            o.remove("stream_options");
            o.remove("n");
        }
        let t = Instant::now();
        let Ok(raw) = gw.fetch(gw.upstream_post(headers, &body)).await else {
            break;
        };
        let Ok(answer) = serde_json::from_slice::<Value>(&raw) else {
            break;
        };
        took += t.elapsed();
        let Ok(message) =
            serde_json::from_value::<AssistantMessage>(answer["choices"][0]["message"].clone())
        else {
            break;
        };
        let finish = answer["choices"][0]["finish_reason"].as_str();
        let again = mend_message(&message, toolbox, &gw.mend, &mint_token(), finish);
        mended = merge(mended, again);
    }
    (mended, took)
}

/// The first answer's good calls, then the re-asked calls (ids kept unique).
fn merge(first: Mended, again: Mended) -> Mended {
    let added_text = again.message.text().filter(|t| !t.trim().is_empty());
    let bad: Vec<String> = first.unresolved().map(|c| c.id.clone()).collect();
    let mut message = first.message.clone();
    let mut calls: Vec<_> = message
        .tool_calls
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| {
            !c.id
                .as_deref()
                .is_some_and(|id| bad.contains(&id.to_owned()))
        })
        .collect();
    let mut reports: Vec<CallReport> = first
        .calls
        .into_iter()
        .filter(|c| !bad.contains(&c.id))
        .collect();
    let mut used: Vec<String> = reports.iter().map(|c| c.id.clone()).collect();
    for (mut call, mut report) in again
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .zip(again.calls)
    {
        let mut id = report.id.clone();
        let mut k = 2;
        while used.contains(&id) {
            id = format!("{}_{k}", report.id);
            k += 1;
        }
        used.push(id.clone());
        call.id = Some(id.clone());
        report.id = id;
        calls.push(call);
        reports.push(report);
    }
    // The model may answer the feedback with text (a question for the user): it reaches
    // the client. An empty `tool_calls` is dropped (providers refuse `[]`).
    if let Some(text) = &added_text {
        let joined = match message.text().filter(|t| !t.trim().is_empty()) {
            Some(first) => format!("{first}\n{text}"),
            None => text.clone(),
        };
        message.content = Some(Some(toolmend::protocol::Content::Text(joined)));
    }
    message.tool_calls = (!calls.is_empty()).then_some(calls);
    Mended {
        message,
        calls: reports,
        changed: true,
        added_text,
    }
}

/// The `finish_reason` the client gets, when it is not the upstream's: `tool_calls` when
/// calls go out (read from the text, or after a `stop`), `stop` when none are left. A
/// `length` stays: the answer was cut off, whatever calls it holds.
pub(crate) fn finish_reason(
    upstream: Option<&str>,
    has_calls: bool,
    from_text: bool,
) -> Option<&'static str> {
    match upstream {
        Some("length") => None,
        Some("stop") if has_calls => Some("tool_calls"),
        Some(f) if has_calls && from_text && f != "tool_calls" => Some("tool_calls"),
        Some("tool_calls") if !has_calls => Some("stop"),
        _ => None,
    }
}

/// Counts for the `x-toolmend-*` headers and the metrics.
#[derive(Debug, Default, Clone)]
pub(crate) struct Summary {
    pub valid: usize,
    pub repaired: usize,
    pub unresolved: Vec<String>,
    pub fixes: Vec<String>,
    pub from_text: usize,
}

impl Summary {
    pub(crate) fn add(
        &mut self,
        mended: &Mended,
        tools: &toolmend::Toolbox,
        labels: &m::ToolLabels,
    ) {
        for c in &mended.calls {
            // Only a tool the request declared names a series, and only so many do.
            let label = if tools.get(&c.tool).is_some() {
                labels.label(&c.tool)
            } else {
                m::UNDECLARED.to_owned()
            };
            m::call(label, c.outcome, &c.fixes, &c.issues);
            match c.outcome {
                Outcome::Valid => self.valid += 1,
                Outcome::Repaired => self.repaired += 1,
                Outcome::Feedback => self.unresolved.push(c.id.clone()),
            }
            self.from_text += usize::from(c.from_text);
            for f in &c.fixes {
                let id = f.kind.id().to_owned();
                if !self.fixes.contains(&id) {
                    self.fixes.push(id);
                }
            }
        }
    }

    pub(crate) fn headers(&self, headers: &mut HeaderMap, notes: &RequestNotes) {
        let mut set = |name: &'static str, value: String| {
            if let Ok(v) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), v);
            }
        };
        set(
            "x-toolmend-calls",
            format!(
                "valid={} repaired={} unresolved={} from_text={}",
                self.valid,
                self.repaired,
                self.unresolved.len(),
                self.from_text
            ),
        );
        if !self.fixes.is_empty() {
            set("x-toolmend-fixes", self.fixes.join(","));
        }
        if !self.unresolved.is_empty() {
            set("x-toolmend-unresolved", self.unresolved.join(","));
        }
        if let Some(h) = &notes.history {
            set("x-toolmend-history", h.clone());
        }
    }

    pub(crate) fn to_json(&self, notes: &RequestNotes) -> Value {
        json!({
            "valid": self.valid, "repaired": self.repaired, "unresolved": self.unresolved,
            "fixes": self.fixes, "from_text": self.from_text, "history": notes.history,
        })
    }
}

#[cfg(test)]
mod tests {
    use axum::{Router, body::Body, http::Request, routing::get};
    use tower::ServiceExt as _;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_in_openai_shape() {
        #[allow(clippy::panic)]
        async fn boom() -> &'static str {
            panic!("a bug")
        }
        let app = Router::new()
            .route("/x", get(boom))
            .layer(super::catch_panics());
        let resp = app
            .oneshot(Request::get("/x").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), 500);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["error"]["code"], "toolmend_internal_error");
    }
}
