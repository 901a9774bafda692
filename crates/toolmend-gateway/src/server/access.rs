//! The way in, around every route: the `/v1`-less aliases, the request id, who may call
//! (the client keys and the admin key of `[access]`, [`Gate`]: a 401 before the route
//! runs), the JSON answers to an unknown route or method, and **one log line per request** (target
//! `toolmend::request`, at info; the probes and `/metrics` at debug): method, route,
//! status, the upstream's status and how many upstream calls the request cost (a
//! re-ask or a round is one more), the duration, the mended counts, the error code, the
//! client's name, the request id. Never a key, a header value, a body or an argument
//! value.
//!
//! The upstream client reports into the request's [`Tally`] (a task-local, set around
//! the handler and around every poll of a streamed body, where a stream's re-asks
//! happen). A stream's line is written when its body ends (or the client goes away),
//! with the counts of its closing `: toolmend {…}` report.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU16, AtomicU32, Ordering},
    },
    task::{Context, Poll},
    time::Instant,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::Request,
    http::{HeaderValue, Method, Uri, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use futures::Stream;
use tower::Layer as _;

use crate::server::{
    auth::{Gate, KEY_HEADERS},
    error::{ErrorCode, GatewayError},
};

/// The routes, as the 404 lists them: method, path, and whether it has a `/v1`-less
/// alias.
pub(crate) const ROUTES: [(&str, &str, bool); 9] = [
    ("POST", "/v1/chat/completions", true),
    ("POST", "/v1/responses", true),
    ("POST", "/v1/messages", false),
    ("POST", "/v1/messages/count_tokens", false),
    ("POST", "/v1/tools/execute", true),
    ("GET", "/v1/models", true),
    ("GET", "/healthz", false),
    ("GET", "/readyz", false),
    ("GET", "/metrics", false),
];

/// Routes that are not worth a line at info (probes and scrapes every few seconds).
const QUIET: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

tokio::task_local! {
    static CURRENT: Arc<Tally>;
}

/// What the upstream client tells about the request in whose task it runs.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// The request id (`x-request-id`).
    pub(crate) request_id: String,
    /// The `[access]` client whose key the request presented (none without clients).
    client: Option<Arc<str>>,
    /// The last upstream answer's status (0: none yet).
    upstream_status: AtomicU16,
    /// Upstream calls made (a re-ask, a round, a correction through the upstream: one more).
    upstream_calls: AtomicU32,
    /// The model the last upstream request named (for its span).
    #[cfg(feature = "otel")]
    model: std::sync::Mutex<Option<String>>,
}

/// Notes the model of the upstream request being made.
#[cfg(feature = "otel")]
pub(crate) fn note_model(model: Option<String>) {
    let _ = CURRENT.try_with(|t| {
        if let Ok(mut m) = t.model.lock() {
            *m = model;
        }
    });
}

/// The model of the upstream request being made.
#[cfg(feature = "otel")]
pub(crate) fn current_model() -> Option<String> {
    CURRENT
        .try_with(|t| t.model.lock().ok().and_then(|m| m.clone()))
        .ok()
        .flatten()
}

/// Upstream calls made so far for the request being served.
#[cfg(feature = "otel")]
pub(crate) fn upstream_calls() -> u32 {
    CURRENT
        .try_with(|t| t.upstream_calls.load(Ordering::Relaxed))
        .unwrap_or(0)
}

/// Notes an upstream answer's status for the request being served (if any).
pub(crate) fn note_upstream(status: u16) {
    let _ = CURRENT.try_with(|t| {
        t.upstream_status.store(status, Ordering::Relaxed);
        t.upstream_calls.fetch_add(1, Ordering::Relaxed);
    });
}

/// Notes an upstream call that got no answer (refused, timed out).
pub(crate) fn note_upstream_failed() {
    let _ = CURRENT.try_with(|t| {
        t.upstream_calls.fetch_add(1, Ordering::Relaxed);
    });
}

/// The `[access]` client of the request being served: its key was checked (none when no
/// client is configured, or outside a request).
pub(crate) fn current_client() -> Option<Arc<str>> {
    CURRENT.try_with(|t| t.client.clone()).ok().flatten()
}

/// The id of the request being served, for log lines (empty outside one).
pub(crate) fn current_request_id() -> String {
    CURRENT
        .try_with(|t| t.request_id.clone())
        .unwrap_or_default()
}

/// `routes` behind the way in (see the module docs), asking for the keys of `gate`.
pub(crate) fn wrap(routes: Router, gate: Arc<Gate>) -> Router {
    let routes = routes
        .fallback(unknown_route)
        .method_not_allowed_fallback(wrong_method);
    Router::new().fallback_service(axum::middleware::from_fn_with_state(gate, access).layer(routes))
}

/// Who may call `route`: the probes and an unknown route (a 404) anyone; `/metrics`
/// the admin key (or, without one, what the API routes ask); the API routes a client
/// key, when `[access]` has clients. `Ok(Some(name))`: the client. A client's key is
/// removed from `headers` once checked: it is the gateway's credential, never sent on.
fn admit(
    gate: &Gate,
    route: &'static str,
    headers: &mut axum::http::HeaderMap,
) -> Result<Option<Arc<str>>, GatewayError> {
    let refused = |r: crate::server::auth::Refusal, admin: bool| {
        crate::metrics::auth_refused(route, r.as_str());
        r.error(admin)
    };
    match route {
        "/healthz" | "/readyz" | "unmatched" => Ok(None),
        // Served elsewhere: the route answers where.
        "/metrics" if gate.admin_elsewhere => Ok(None),
        "/metrics" => gate
            .admin(headers)
            .map(|()| None)
            .map_err(|r| refused(r, true)),
        _ => {
            let client = gate.client(headers).map_err(|r| refused(r, false))?;
            if let Some(name) = &client {
                crate::metrics::client_request(name);
                for h in KEY_HEADERS {
                    headers.remove(h);
                }
            }
            Ok(client)
        }
    }
}

/// The `/v1` path an alias stands for (`/chat/completions` -> `/v1/chat/completions`),
/// as LiteLLM and most OpenAI-compatible proxies accept them.
fn alias(path: &str) -> Option<&'static str> {
    ROUTES
        .iter()
        .find(|(_, p, aliased)| *aliased && p.strip_prefix("/v1") == Some(path))
        .map(|(_, p, _)| *p)
}

fn routes_text() -> String {
    let list: Vec<String> = ROUTES.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
    format!(
        "the routes are: {} (and without /v1: /chat/completions, /responses, /tools/execute, /models)",
        list.join(", ")
    )
}

async fn unknown_route(method: Method, uri: Uri) -> Response {
    let path = shown_path(uri.path());
    let hint = if path.starts_with("/v1/v1/") {
        "; the client's base URL ends in /v1 twice: point it at http://HOST:PORT/v1"
    } else {
        ""
    };
    GatewayError::NotFound {
        code: "unknown_route",
        message: format!("no route {method} {path}{hint}; {}", routes_text()),
    }
    .into_response()
}

async fn wrong_method(method: Method, uri: Uri) -> Response {
    let path = uri.path();
    let allowed: Vec<&str> = ROUTES
        .iter()
        .filter(|(_, p, _)| *p == path)
        .map(|(m, _, _)| *m)
        .collect();
    GatewayError::MethodNotAllowed(format!(
        "{method} is not served at {}: use {} {}; {}",
        shown_path(path),
        allowed.join(" or "),
        shown_path(path),
        routes_text()
    ))
    .into_response()
}

/// A path as logs and errors show it: at most 200 bytes.
fn shown_path(path: &str) -> String {
    if path.len() <= 200 {
        return path.to_owned();
    }
    let mut end = 200;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &path[..end])
}

async fn access(
    axum::extract::State(gate): axum::extract::State<Arc<Gate>>,
    mut req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let route = match alias(&path) {
        Some(to) => {
            let mut target = to.to_owned();
            if let Some(q) = req.uri().query() {
                target.push('?');
                target.push_str(q);
            }
            if let Ok(uri) = target.parse::<Uri>() {
                *req.uri_mut() = uri;
            }
            to
        }
        None => ROUTES
            .iter()
            .find(|(_, p, _)| *p == path)
            .map_or("unmatched", |(_, p, _)| *p),
    };
    // The id the fronts, the upstream and this line share (the client's, or minted here).
    let request_id = crate::server::http::request_id(req.headers_mut());
    let (client, refused) = match admit(&gate, route, req.headers_mut()) {
        Ok(client) => (client, None),
        Err(e) => (None, Some(e)),
    };
    let tally = Arc::new(Tally {
        request_id,
        client,
        ..Tally::default()
    });
    #[cfg(feature = "otel")]
    let span = if crate::telemetry::active() {
        use tracing::field::Empty;
        let span = tracing::info_span!(
            target: "toolmend::trace",
            "request",
            otel.name = %format!("{method} {route}"),
            otel.kind = "server",
            otel.status_code = Empty,
            http.request.method = %method,
            http.route = route,
            http.response.status_code = Empty,
            error.type = Empty,
            toolmend.request_id = %tally.request_id,
            toolmend.upstream_calls = Empty,
            toolmend.calls.valid = Empty,
            toolmend.calls.repaired = Empty,
            toolmend.calls.unresolved = Empty,
        );
        crate::telemetry::adopt_parent(&span, req.headers());
        span
    } else {
        // No exporter: no span (nothing made, formatted or stored per request).
        tracing::Span::none()
    };
    #[cfg(feature = "otel")]
    let mut resp = match refused {
        // Never reaches the route (nor the upstream).
        Some(e) => e.into_response(),
        None => {
            use tracing::Instrument as _;
            CURRENT
                .scope(Arc::clone(&tally), next.run(req).instrument(span.clone()))
                .await
        }
    };
    #[cfg(not(feature = "otel"))]
    let mut resp = match refused {
        // Never reaches the route (nor the upstream).
        Some(e) => e.into_response(),
        None => CURRENT.scope(Arc::clone(&tally), next.run(req)).await,
    };
    // The Messages routes answer errors in Anthropic's shape, refusals here included.
    if route.starts_with("/v1/messages") {
        resp = crate::server::error::in_anthropic_shape(resp).await;
    }
    if !resp.headers().contains_key("x-request-id")
        && let Ok(v) = HeaderValue::from_str(&tally.request_id)
    {
        resp.headers_mut().insert("x-request-id", v);
    }
    let line = Line {
        method,
        route,
        path: (route == "unmatched").then(|| shown_path(&path)),
        status: resp.status().as_u16(),
        error: resp.extensions().get::<ErrorCode>().map(|c| c.0.to_owned()),
        started,
        counts: Counts::from_header(
            resp.headers()
                .get("x-toolmend-calls")
                .and_then(|v| v.to_str().ok()),
        ),
        stream: false,
        #[cfg(feature = "otel")]
        span,
    };
    let streamed = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streamed {
        line.write(&tally, true);
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let body = Logged {
        inner: body.into_data_stream(),
        tally,
        line: Some(Line {
            stream: true,
            ..line
        }),
    };
    Response::from_parts(parts, Body::from_stream(body))
}

/// The mended counts: `x-toolmend-calls`, or a stream's closing report.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    valid: Option<u64>,
    repaired: Option<u64>,
    unresolved: Option<u64>,
}

impl Counts {
    /// `valid=1 repaired=2 unresolved=0 from_text=0`.
    fn from_header(v: Option<&str>) -> Counts {
        let mut c = Counts::default();
        for pair in v.unwrap_or_default().split_ascii_whitespace() {
            let Some((k, n)) = pair.split_once('=') else {
                continue;
            };
            let n = n.parse().ok();
            match k {
                "valid" => c.valid = n,
                "repaired" => c.repaired = n,
                "unresolved" => c.unresolved = n,
                _ => {}
            }
        }
        c
    }

    /// `: toolmend {"valid": 1, "repaired": 0, "unresolved": ["c2"], …}`.
    fn from_report(json: &[u8]) -> Counts {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) else {
            return Counts::default();
        };
        Counts {
            valid: v["valid"].as_u64(),
            repaired: v["repaired"].as_u64(),
            unresolved: v["unresolved"].as_array().map(|a| a.len() as u64),
        }
    }
}

/// One request's log line, written once.
#[derive(Debug)]
struct Line {
    method: Method,
    route: &'static str,
    /// The path, for a route that matched none.
    path: Option<String>,
    status: u16,
    error: Option<String>,
    started: Instant,
    counts: Counts,
    stream: bool,
    /// The request's span, closed with the line.
    #[cfg(feature = "otel")]
    span: tracing::Span,
}

impl Line {
    fn write(&self, tally: &Tally, completed: bool) {
        let upstream_status = match tally.upstream_status.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s),
        };
        let upstream_calls = tally.upstream_calls.load(Ordering::Relaxed);
        let duration_ms = (self.started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    target: "toolmend::request",
                    method = %self.method,
                    route = self.route,
                    path = self.path.as_deref(),
                    status = self.status,
                    upstream_status,
                    upstream_calls,
                    duration_ms,
                    valid = self.counts.valid,
                    repaired = self.counts.repaired,
                    unresolved = self.counts.unresolved,
                    error = self.error.as_deref(),
                    client = tally.client.as_deref(),
                    stream = self.stream.then_some(true),
                    completed = (!completed).then_some(false),
                    request_id = %tally.request_id,
                    "request"
                )
            };
        }
        #[cfg(feature = "otel")]
        {
            let s = &self.span;
            s.record("http.response.status_code", i64::from(self.status));
            s.record("toolmend.upstream_calls", i64::from(upstream_calls));
            s.record("error.type", self.error.as_deref());
            if self.status >= 500 {
                s.record("otel.status_code", "ERROR");
            }
            // OpenTelemetry's integers are i64 (a u64 would be recorded as text).
            let int = |n: Option<u64>| n.and_then(|n| i64::try_from(n).ok());
            s.record("toolmend.calls.valid", int(self.counts.valid));
            s.record("toolmend.calls.repaired", int(self.counts.repaired));
            s.record("toolmend.calls.unresolved", int(self.counts.unresolved));
        }
        if QUIET.contains(&self.route) {
            line!(debug);
        } else {
            line!(info);
        }
    }
}

/// A streamed body that logs its request's line when it ends (or is dropped), and runs
/// every poll inside the request's [`Tally`] (a stream's re-asks call the upstream there).
struct Logged {
    inner: axum::body::BodyDataStream,
    tally: Arc<Tally>,
    line: Option<Line>,
}

impl Stream for Logged {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let tally = Arc::clone(&this.tally);
        let inner = &mut this.inner;
        // A stream's re-asks happen while it is polled: inside the request (and its span).
        #[cfg(feature = "otel")]
        let next = match &this.line {
            Some(line) => line
                .span
                .in_scope(|| CURRENT.sync_scope(tally, || Pin::new(inner).poll_next(cx))),
            None => CURRENT.sync_scope(tally, || Pin::new(inner).poll_next(cx)),
        };
        #[cfg(not(feature = "otel"))]
        let next = CURRENT.sync_scope(tally, || Pin::new(inner).poll_next(cx));
        match &next {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(line) = this.line.as_mut() {
                    if let Some(report) = frame.strip_prefix(b": toolmend ") {
                        line.counts = Counts::from_report(report);
                    } else if frame.starts_with(b"data: {\"error\"") {
                        let v: serde_json::Value =
                            serde_json::from_slice(&frame[6..]).unwrap_or(serde_json::Value::Null);
                        line.error = v["error"]["code"].as_str().map(str::to_owned);
                    }
                }
            }
            Poll::Ready(None) => {
                if let Some(line) = this.line.take() {
                    line.write(&this.tally, true);
                }
            }
            _ => {}
        }
        next
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        // The client went away before the end.
        if let Some(line) = self.line.take() {
            line.write(&self.tally, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Counts, alias};

    #[test]
    fn aliases_and_counts() {
        assert_eq!(alias("/chat/completions"), Some("/v1/chat/completions"));
        assert_eq!(alias("/models"), Some("/v1/models"));
        assert_eq!(alias("/healthz"), None);
        assert_eq!(alias("/v1/models"), None);
        let c = Counts::from_header(Some("valid=1 repaired=2 unresolved=0 from_text=0"));
        assert_eq!(
            (c.valid, c.repaired, c.unresolved),
            (Some(1), Some(2), Some(0))
        );
        let c = Counts::from_report(br#"{"valid": 0, "repaired": 1, "unresolved": ["c2"]}"#);
        assert_eq!(
            (c.valid, c.repaired, c.unresolved),
            (Some(0), Some(1), Some(1))
        );
    }
}
