//! The upstream provider: one HTTP client, its auth, and every way an upstream answer is
//! read (bounded in size and time) or fails. Knows nothing of any API's body: a front
//! says which path to post to and what.

use std::time::{Duration, Instant};

use axum::{
    body::Bytes,
    http::{HeaderMap, HeaderValue, StatusCode, header},
};
use serde_json::Value;

use crate::{
    config::{self, ApiKeyHeader, Redirects},
    metrics as m,
    server::{
        access,
        error::{Forwarded, GatewayError},
    },
};

/// The upstream provider and the client that talks to it.
#[derive(Debug)]
pub(crate) struct Upstream {
    client: reqwest::Client,
    /// `upstream.api_key_env`'s value, read once at start.
    api_key: Option<String>,
    config: config::Upstream,
    /// `limits.max_upstream_bytes`.
    max_bytes: usize,
    /// `server.address` and `server.port` of the spans.
    #[cfg(feature = "otel")]
    server: Option<(String, Option<u16>)>,
    /// The URLs of the paths the fronts post to, parsed once: a URL parsed per request
    /// (host, IDNA, path) cost about a tenth of the gateway's own CPU.
    urls: Vec<(&'static str, reqwest::Url)>,
}

/// The upstream paths whose URLs are parsed once, at start.
const KNOWN_PATHS: [&str; 5] = [
    "/chat/completions",
    "/messages",
    "/responses",
    "/models",
    "/messages/count_tokens",
];

impl Upstream {
    /// The client for `config` (timeouts, redirect policy, `TCP_NODELAY`); the API key is
    /// read now from `api_key_env`.
    pub(crate) fn new(config: &config::Upstream, max_bytes: usize) -> Result<Self, reqwest::Error> {
        let redirects = match config.redirects {
            Redirects::None => reqwest::redirect::Policy::none(),
            Redirects::SameOrigin => {
                let origin = origin_of(&config.base_url);
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
            .connect_timeout(config::secs(config.connect_timeout_secs))
            .read_timeout(config.timeout())
            .tcp_nodelay(true)
            .redirect(redirects)
            .build()?;
        let api_key = config
            .api_key_env
            .as_deref()
            .and_then(|name| std::env::var(name).ok())
            .filter(|k| !k.is_empty());
        #[cfg(feature = "otel")]
        let server = reqwest::Url::parse(&config.base_url)
            .ok()
            .and_then(|u| Some((u.host_str()?.to_owned(), u.port_or_known_default())));
        let base = config.base_url.trim_end_matches('/');
        let urls = KNOWN_PATHS
            .iter()
            .filter_map(|p| Some((*p, reqwest::Url::parse(&format!("{base}{p}")).ok()?)))
            .collect();
        Ok(Upstream {
            urls,
            #[cfg(feature = "otel")]
            server,
            client,
            api_key,
            config: config.clone(),
            max_bytes,
        })
    }

    /// The idle timeout between two pieces of an answer (`upstream.timeout_secs`).
    pub(crate) fn idle_timeout(&self) -> Duration {
        self.config.timeout()
    }

    /// When an answer asked for now must have arrived whole (`upstream.deadline_secs`).
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.config.deadline()
    }

    /// `limits.max_upstream_bytes`.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The API the upstream speaks (`upstream.api`).
    pub(crate) fn api(&self) -> config::UpstreamApi {
        self.config.api
    }

    /// A request to `{base_url}{path}`: the URL parsed at start for the known paths.
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        match self.urls.iter().find(|(p, _)| *p == path) {
            Some((_, url)) => self.client.request(method, url.clone()),
            None => self.client.request(
                method,
                format!("{}{path}", self.config.base_url.trim_end_matches('/')),
            ),
        }
    }

    /// `POST {base_url}{path}` with `body` as JSON, auth and tracing headers.
    pub(crate) fn post(
        &self,
        path: &str,
        headers: &HeaderMap,
        body: &Value,
    ) -> reqwest::RequestBuilder {
        #[cfg(feature = "otel")]
        if crate::telemetry::active() {
            access::note_model(body.get("model").and_then(Value::as_str).map(str::to_owned));
        }
        self.auth(
            self.request(reqwest::Method::POST, path).json(body),
            headers,
        )
    }

    /// [`post`](Self::post) with the body as bytes: the client's own when nothing in it
    /// changed (no second serialization).
    pub(crate) fn post_bytes(
        &self,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> reqwest::RequestBuilder {
        #[cfg(feature = "otel")]
        if crate::telemetry::active() {
            access::note_model(crate::telemetry::requested_model(&body));
        }
        let req = self
            .request(reqwest::Method::POST, path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body);
        self.auth(req, headers)
    }

    /// `GET {base_url}{path}` passed through: the upstream's answer, whatever its status.
    pub(crate) async fn pass_get(
        &self,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Forwarded, GatewayError> {
        let req = self.auth(self.request(reqwest::Method::GET, path), headers);
        self.pass(req, path).await
    }

    /// `POST {base_url}{path}` with `body` passed through: the upstream's answer, whatever
    /// its status (a route the gateway adds nothing to, e.g. Messages' `count_tokens`).
    pub(crate) async fn pass_post(
        &self,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Forwarded, GatewayError> {
        let req = self
            .request(reqwest::Method::POST, path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body);
        self.pass(self.auth(req, headers), path).await
    }

    /// Sends `req` within the deadline and forwards its answer, whatever its status.
    async fn pass(
        &self,
        req: reqwest::RequestBuilder,
        path: &str,
    ) -> Result<Forwarded, GatewayError> {
        let deadline = self.deadline();
        match tokio::time::timeout_at(deadline.into(), req.send()).await {
            Ok(Ok(resp)) => {
                access::note_upstream(resp.status().as_u16());
                if !resp.status().is_success() {
                    warn_status(resp.status().as_u16(), path);
                }
                self.forward(resp, deadline).await
            }
            Ok(Err(e)) => Err(failure(&e)),
            Err(_) => Err(deadline_passed()),
        }
    }

    fn auth(
        &self,
        mut req: reqwest::RequestBuilder,
        headers: &HeaderMap,
    ) -> reqwest::RequestBuilder {
        if self.config.api == config::UpstreamApi::Messages {
            return self.messages_auth(req, headers);
        }
        match (&self.api_key, self.config.api_key_header) {
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
        pass_on(
            req,
            headers,
            &[
                "x-request-id",
                "traceparent",
                "openai-organization",
                "openai-project",
            ],
        )
    }

    /// A Messages upstream's headers: the key in `x-api-key` (ours, else the client's
    /// `x-api-key`, else its `Authorization: Bearer` token), the client's
    /// `anthropic-version` (`2023-06-01` when it sent none) and `anthropic-beta`, and the
    /// tracing headers.
    fn messages_auth(
        &self,
        mut req: reqwest::RequestBuilder,
        headers: &HeaderMap,
    ) -> reqwest::RequestBuilder {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match (&self.api_key, headers.get("x-api-key"), bearer) {
            (Some(key), _, _) => req = req.header("x-api-key", key.as_str()),
            (None, Some(key), _) => req = req.header("x-api-key", key.clone()),
            (None, None, Some(token)) => req = req.header("x-api-key", token),
            (None, None, None) => {}
        }
        req = req.header(
            "anthropic-version",
            headers
                .get("anthropic-version")
                .cloned()
                .unwrap_or_else(|| HeaderValue::from_static("2023-06-01")),
        );
        pass_on(
            req,
            headers,
            &["anthropic-beta", "x-request-id", "traceparent"],
        )
    }

    /// Sends `req` within `deadline`; an answer that is not a success is the error to
    /// give the client (passed on, or a 502 for a redirect). The body is left unread
    /// (the stream path reads it as it comes).
    pub(crate) async fn send(
        &self,
        req: reqwest::RequestBuilder,
        deadline: Instant,
    ) -> Result<reqwest::Response, GatewayError> {
        #[cfg(feature = "otel")]
        {
            use tracing::Instrument as _;
            let span = self.chat_span();
            let req = with_trace_headers(req, &span);
            let out = self
                .send_inner(req, deadline)
                .instrument(span.clone())
                .await;
            if let Err(e) = &out {
                record_error(&span, e);
            }
            out
        }
        #[cfg(not(feature = "otel"))]
        self.send_inner(req, deadline).await
    }

    async fn send_inner(
        &self,
        req: reqwest::RequestBuilder,
        deadline: Instant,
    ) -> Result<reqwest::Response, GatewayError> {
        let resp = match tokio::time::timeout_at(deadline.into(), req.send()).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(failure(&e)),
            Err(_) => return Err(deadline_passed()),
        };
        access::note_upstream(resp.status().as_u16());
        #[cfg(feature = "otel")]
        tracing::Span::current().record(
            "http.response.status_code",
            i64::from(resp.status().as_u16()),
        );
        if !resp.status().is_success() {
            warn_status(resp.status().as_u16(), resp.url().path());
            return Err(self.not_success(resp, deadline).await);
        }
        Ok(resp)
    }

    /// Sends `req` and reads the whole answer, within `upstream.deadline_secs` and
    /// `limits.max_upstream_bytes`.
    pub(crate) async fn fetch(&self, req: reqwest::RequestBuilder) -> Result<Bytes, GatewayError> {
        let deadline = self.deadline();
        #[cfg(feature = "otel")]
        {
            use tracing::Instrument as _;
            let span = self.chat_span();
            let req = with_trace_headers(req, &span);
            let out = async {
                let resp = self.send_inner(req, deadline).await?;
                read_bounded(resp, self.max_bytes, deadline).await
            }
            .instrument(span.clone())
            .await;
            match &out {
                Ok(body) => crate::telemetry::record_answer(&span, body),
                Err(e) => record_error(&span, e),
            }
            out
        }
        #[cfg(not(feature = "otel"))]
        {
            let resp = self.send_inner(req, deadline).await?;
            read_bounded(resp, self.max_bytes, deadline).await
        }
    }

    /// The span of one upstream call: the GenAI semantic conventions' `chat {model}`
    /// (client), its response attributes recorded when the answer is read.
    #[cfg(feature = "otel")]
    fn chat_span(&self) -> tracing::Span {
        use tracing::field::Empty;
        if !crate::telemetry::active() {
            return tracing::Span::none();
        }
        let model = access::current_model();
        let name = match &model {
            Some(m) => format!("chat {m}"),
            None => "chat".to_owned(),
        };
        let (address, port) = match &self.server {
            Some((a, p)) => (Some(a.as_str()), *p),
            None => (None, None),
        };
        tracing::info_span!(
            target: "toolmend::trace",
            "chat",
            otel.name = %name,
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.request.model = model.as_deref(),
            gen_ai.response.id = Empty,
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            server.address = address,
            server.port = port.map(i64::from),
            http.response.status_code = Empty,
            error.type = Empty,
            toolmend.upstream.attempt = i64::from(access::upstream_calls()) + 1,
        )
    }

    /// An upstream answer that is not a success: a redirect is refused (not followed,
    /// `upstream.redirects`), anything else is passed on as it is.
    async fn not_success(&self, resp: reqwest::Response, deadline: Instant) -> GatewayError {
        if resp.status().is_redirection() {
            m::upstream_error("redirect");
            let to = resp
                .headers()
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| "nowhere".to_owned(), config::redact_url);
            return GatewayError::UpstreamRedirect(format!(
                "the upstream answered {} (to {to}); redirects are not followed \
                 (upstream.redirects = \"{}\"): set upstream.base_url to the final URL",
                resp.status().as_u16(),
                match self.config.redirects {
                    Redirects::None => "none",
                    Redirects::SameOrigin => "same_origin",
                }
            ));
        }
        m::upstream_error("status");
        match self.forward(resp, deadline).await {
            Ok(f) => GatewayError::UpstreamStatus(Box::new(f)),
            Err(e) => e,
        }
    }

    /// An upstream response as it is (status, `Content-Type`, `Retry-After`,
    /// `x-ratelimit-*`, body), read within the bounds.
    async fn forward(
        &self,
        resp: reqwest::Response,
        deadline: Instant,
    ) -> Result<Forwarded, GatewayError> {
        let status =
            StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut headers = HeaderMap::new();
        for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
            if let Some(v) = resp.headers().get(name.as_str())
                && let Ok(v) = HeaderValue::from_bytes(v.as_bytes())
            {
                headers.insert(name, v);
            }
        }
        for (name, v) in resp.headers() {
            if name.as_str().starts_with("x-ratelimit-")
                && let Ok(v) = HeaderValue::from_bytes(v.as_bytes())
                && let Ok(name) = axum::http::HeaderName::from_bytes(name.as_str().as_bytes())
            {
                headers.append(name, v);
            }
        }
        let body = read_bounded(resp, self.max_bytes, deadline).await?;
        Ok(Forwarded {
            status,
            headers,
            body,
        })
    }
}

/// `req` with the `traceparent` of `span`.
#[cfg(feature = "otel")]
fn with_trace_headers(
    mut req: reqwest::RequestBuilder,
    span: &tracing::Span,
) -> reqwest::RequestBuilder {
    for (k, v) in crate::telemetry::trace_headers(span) {
        req = req.header(k, v);
    }
    req
}

/// An upstream call that failed, on its span.
#[cfg(feature = "otel")]
fn record_error(span: &tracing::Span, e: &GatewayError) {
    span.record("error.type", e.code());
    span.record("otel.status_code", "ERROR");
}

/// A transport failure (counted, logged at warn with its cause): 504 on a timeout,
/// else 502.
/// `req` with the client's `names` headers, as it sent them. Traced, the upstream gets
/// the `traceparent` of our own span (a child of the client's), set where the call is
/// sent, not the client's.
fn pass_on(
    mut req: reqwest::RequestBuilder,
    headers: &HeaderMap,
    names: &[&str],
) -> reqwest::RequestBuilder {
    for &name in names {
        #[cfg(feature = "otel")]
        if name == "traceparent" && crate::telemetry::active() {
            continue;
        }
        if let Some(v) = headers.get(name) {
            req = req.header(name, v.clone());
        }
    }
    req
}

pub(crate) fn failure(e: &reqwest::Error) -> GatewayError {
    access::note_upstream_failed();
    let cause = without_url(e);
    let to = e
        .url()
        .map(|u| config::redact_url(&format!("{}://{}", u.scheme(), u.authority())))
        .unwrap_or_default();
    if e.is_timeout() {
        m::upstream_error("timeout");
        warn(
            "upstream_timeout",
            &format!("the upstream {to} did not answer in time: {cause}"),
        );
        GatewayError::UpstreamTimeout
    } else {
        m::upstream_error("transport");
        warn(
            "upstream_unreachable",
            &format!("the upstream {to} could not be reached: {cause}"),
        );
        GatewayError::UpstreamUnreachable(cause)
    }
}

/// The answer when an upstream answer outlives `upstream.deadline_secs` (counted, logged).
pub(crate) fn deadline_passed() -> GatewayError {
    m::upstream_error("deadline");
    warn(
        "upstream_deadline",
        "the upstream answer took longer than upstream.deadline_secs in all",
    );
    GatewayError::UpstreamDeadline
}

/// An upstream failure, at warn, with the request it failed (target `toolmend::upstream`).
/// `cause` never holds a URL's credentials or query, a key or a body.
fn warn(code: &str, cause: &str) {
    tracing::warn!(
        target: "toolmend::upstream",
        code,
        request_id = %access::current_request_id(),
        "{cause}"
    );
}

/// An upstream answer that is not a success (passed on to the client as it came): its
/// status at warn (its body is not logged: it may quote the request or part of a key).
fn warn_status(status: u16, path: &str) {
    let hint = match status {
        401 | 403 => {
            "; check the key (upstream.api_key_env, or the client's Authorization when it \
             is not set)"
        }
        404 => "; check upstream.base_url (it must end in the API's base path, e.g. /v1)",
        _ => "",
    };
    tracing::warn!(
        target: "toolmend::upstream",
        code = "upstream_status",
        upstream_status = status,
        request_id = %access::current_request_id(),
        "the upstream answered {status} to {path}{hint}"
    );
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

/// Reads an upstream body up to `max` bytes: past that, or past `deadline`, an error.
async fn read_bounded(
    mut resp: reqwest::Response,
    max: usize,
    deadline: Instant,
) -> Result<Bytes, GatewayError> {
    let mut buf = bytes::BytesMut::new();
    loop {
        let next = tokio::time::timeout_at(deadline.into(), resp.chunk()).await;
        match next {
            Err(_) => return Err(deadline_passed()),
            Ok(Err(e)) => return Err(failure(&e)),
            Ok(Ok(None)) => return Ok(buf.freeze()),
            Ok(Ok(Some(chunk))) => {
                if buf.len() + chunk.len() > max {
                    m::upstream_error("too_large");
                    warn(
                        "upstream_too_large",
                        &format!(
                            "the upstream answer is larger than limits.max_upstream_bytes \
                             ({max} bytes)"
                        ),
                    );
                    return Err(GatewayError::UpstreamTooLarge(format!(
                        "the upstream answer is larger than limits.max_upstream_bytes \
                         ({max} bytes); it was not read further"
                    )));
                }
                buf.extend_from_slice(&chunk);
            }
        }
    }
}
