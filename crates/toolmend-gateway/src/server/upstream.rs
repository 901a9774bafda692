//! The upstream provider: one HTTP client, its auth, and every way an upstream answer is
//! read (bounded in size and time) or fails. Knows nothing of any API's body: a front
//! says which path to post to and what.

use std::time::{Duration, Instant};

use axum::{
    body::Bytes,
    http::{self, HeaderMap, HeaderName, HeaderValue, Method, Uri, header},
};
use http_body_util::{BodyExt as _, Full, combinators::UnsyncBoxBody};
use hyper::body::Body as _;
use hyper_util::client::{
    legacy::{Client, connect::HttpConnector},
    proxy::matcher::Matcher,
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

/// How requests reach the upstream.
#[derive(Debug)]
#[allow(clippy::large_enum_variant, reason = "one per gateway, never moved")]
enum Transport {
    /// hyper's pooled client, directly: a plain-HTTP upstream no proxy of the environment
    /// stands in front of (a model server on the same host or network, where what a
    /// request costs the gateway shows). reqwest's layers (the URL turned into a `Uri`
    /// per request, the proxy match, the redirect and retry wrappers) were about a tenth
    /// of a request's CPU; redirects (`upstream.redirects`) and the idle timeout are
    /// applied here instead.
    Direct(Client<HttpConnector, Full<Bytes>>),
    /// reqwest: an HTTPS upstream (its TLS: rustls, the platform's roots, ALPN h2), or one
    /// behind a proxy of the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, not
    /// excluded by `NO_PROXY`), which it speaks to (CONNECT tunnels, their credentials).
    /// Over a network its microseconds are lost in the round trip.
    Reqwest(reqwest::Client),
}

/// An answer's body as it comes, from either transport.
pub(crate) type AnswerBody = UnsyncBoxBody<Bytes, BodyError>;

/// An upstream answer: its status and headers, the body unread.
pub(crate) type Answer = http::Response<AnswerBody>;

/// A request to the upstream, built by [`Upstream::post`] and its kin, sent by
/// [`Upstream::send`] or [`Upstream::fetch`].
#[derive(Debug)]
pub(crate) struct UpstreamRequest(http::Request<Bytes>);

impl UpstreamRequest {
    fn header(&mut self, name: impl TryInto<HeaderName>, value: HeaderValue) {
        if let Ok(name) = name.try_into() {
            self.0.headers_mut().insert(name, value);
        }
    }
}

/// A body that broke while it was read (its text never holds a URL).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    #[error("{0}")]
    Direct(#[source] hyper::Error),
    #[error("{}", without_url(.0))]
    Reqwest(#[source] reqwest::Error),
    #[error("no part of the answer arrived within upstream.timeout_secs")]
    Idle,
}

/// Why a request got no answer.
#[derive(Debug)]
enum SendError {
    Direct(hyper_util::client::legacy::Error),
    Reqwest(reqwest::Error),
    Body(BodyError),
    /// No answer head within `upstream.timeout_secs`.
    Idle,
}

impl SendError {
    fn is_timeout(&self) -> bool {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = match self {
            SendError::Idle | SendError::Body(BodyError::Idle) => return true,
            // reqwest's own timeouts (its read timeout on a body among them) are of a
            // type of its own, not an `io::Error`.
            SendError::Reqwest(e) | SendError::Body(BodyError::Reqwest(e)) => {
                return e.is_timeout();
            }
            SendError::Direct(e) => Some(e),
            SendError::Body(e) => Some(e),
        };
        while let Some(c) = cause {
            let timed_out = c
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
                || c.downcast_ref::<hyper::Error>()
                    .is_some_and(hyper::Error::is_timeout);
            if timed_out {
                return true;
            }
            cause = c.source();
        }
        false
    }

    /// The error's text with its causes (hyper's and reqwest's own texts name none:
    /// "client error (Connect)", the "connection refused" is in their sources), never a
    /// URL (it may carry a key in a query string).
    fn cause(&self) -> String {
        let top: &(dyn std::error::Error + 'static) = match self {
            SendError::Reqwest(e) => return without_url(e),
            SendError::Idle => return "no answer within upstream.timeout_secs".to_owned(),
            SendError::Direct(e) => e,
            SendError::Body(e) => e,
        };
        with_causes(top)
    }
}

/// The upstream provider and the client that talks to it.
#[derive(Debug)]
pub(crate) struct Upstream {
    transport: Transport,
    /// `upstream.api_key_env`'s value, read once at start: as a bearer credential and as
    /// itself (`api-key`, `x-api-key`), checked to be header values then.
    api_key: Option<Key>,
    /// The credentials of `upstream.base_url`'s userinfo, as a `Basic` header (they are
    /// not sent in the URL).
    userinfo: Option<HeaderValue>,
    config: config::Upstream,
    /// `limits.max_upstream_bytes`.
    max_bytes: usize,
    /// `scheme://host:port` of the upstream, for the warnings (never its userinfo).
    origin: String,
    /// `server.address` and `server.port` of the spans.
    #[cfg(feature = "otel")]
    server: Option<(String, Option<u16>)>,
    /// The URIs of the paths the fronts post to, parsed once: a URL parsed per request
    /// (host, IDNA, path) cost about a tenth of the gateway's own CPU.
    uris: Vec<(&'static str, Uri)>,
}

/// The gateway's own key, as the headers that carry it.
#[derive(Debug)]
struct Key {
    /// `Bearer {key}`.
    bearer: HeaderValue,
    /// The key itself.
    raw: HeaderValue,
}

impl Key {
    fn new(key: &str) -> Option<Key> {
        Some(Key {
            bearer: sensitive(HeaderValue::from_str(&format!("Bearer {key}")).ok()?),
            raw: sensitive(HeaderValue::from_str(key).ok()?),
        })
    }
}

/// The upstream paths whose URLs are parsed once, at start.
const KNOWN_PATHS: [&str; 5] = [
    "/chat/completions",
    "/messages",
    "/responses",
    "/models",
    "/messages/count_tokens",
];

/// Redirects followed at most (`upstream.redirects = "same_origin"`), as reqwest did.
const MAX_REDIRECTS: usize = 5;

impl Upstream {
    /// The client for `config` (timeouts, redirect policy, `TCP_NODELAY`); the API key is
    /// read now from `api_key_env`.
    pub(crate) fn new(config: &config::Upstream, max_bytes: usize) -> Result<Self, String> {
        Self::with_proxies(config, max_bytes, &Matcher::from_env())
    }

    /// [`new`](Self::new) with the proxies `proxies` names instead of the environment's.
    fn with_proxies(
        config: &config::Upstream,
        max_bytes: usize,
        proxies: &Matcher,
    ) -> Result<Self, String> {
        let base = config.base_url.trim_end_matches('/');
        let parsed = reqwest::Url::parse(&config.base_url).ok();
        let uris = KNOWN_PATHS
            .iter()
            .filter_map(|p| Some((*p, uri_of(&format!("{base}{p}"))?)))
            .collect();
        let proxied = parsed.as_ref().and_then(|u| {
            let uri = uri_of(u.as_str())?;
            proxies.intercept(&uri)
        });
        let plain = parsed.as_ref().is_some_and(|u| u.scheme() == "http");
        let transport = match proxied {
            None if plain => Transport::Direct(direct_client(config)),
            proxy => Transport::Reqwest(
                reqwest_client(config, proxy.as_ref()).map_err(|e| without_url(&e))?,
            ),
        };
        let userinfo = parsed.as_ref().and_then(|u| {
            if u.username().is_empty() && u.password().is_none() {
                return None;
            }
            let user = percent_decoded(u.username());
            let password = u.password().map(percent_decoded);
            Some(basic_auth(&user, password.as_deref()))
        });
        let origin = parsed
            .as_ref()
            .map(|u| config::redact_url(&format!("{}://{}", u.scheme(), authority_of(u))))
            .unwrap_or_default();
        let api_key = match config
            .api_key_env
            .as_deref()
            .and_then(|name| std::env::var(name).ok())
            .filter(|k| !k.is_empty())
        {
            Some(key) => Some(Key::new(&key).ok_or_else(|| {
                format!(
                    "the value of {} (upstream.api_key_env) cannot be sent in an HTTP header \
                     (a line break or a control character in it?): set it to the key alone",
                    config.api_key_env.as_deref().unwrap_or_default()
                )
            })?),
            None => None,
        };
        #[cfg(feature = "otel")]
        let server = parsed
            .as_ref()
            .and_then(|u| Some((u.host_str()?.to_owned(), u.port_or_known_default())));
        Ok(Upstream {
            transport,
            uris,
            #[cfg(feature = "otel")]
            server,
            api_key,
            userinfo,
            origin,
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

    /// A request to `{base_url}{path}`: the URI parsed at start for the known paths.
    fn request(&self, method: Method, path: &str, body: Bytes) -> UpstreamRequest {
        let uri = match self.uris.iter().find(|(p, _)| *p == path) {
            Some((_, uri)) => uri.clone(),
            None => uri_of(&format!(
                "{}{path}",
                self.config.base_url.trim_end_matches('/')
            ))
            .unwrap_or_default(),
        };
        let mut req = http::Request::new(body);
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        let mut req = UpstreamRequest(req);
        // What reqwest sent by default; some servers negotiate on it.
        req.header(header::ACCEPT, HeaderValue::from_static("*/*"));
        if let Some(basic) = &self.userinfo {
            req.header(header::AUTHORIZATION, basic.clone());
        }
        req
    }

    /// `POST {base_url}{path}` with `body` as JSON, auth and tracing headers.
    pub(crate) fn post(&self, path: &str, headers: &HeaderMap, body: &Value) -> UpstreamRequest {
        #[cfg(feature = "otel")]
        if crate::telemetry::active() {
            access::note_model(body.get("model").and_then(Value::as_str).map(str::to_owned));
        }
        // A `Value` always serializes (its keys are strings).
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        self.post_raw(path, headers, Bytes::from(bytes))
    }

    /// [`post`](Self::post) with the body as bytes: the client's own when nothing in it
    /// changed (no second serialization).
    pub(crate) fn post_bytes(
        &self,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> UpstreamRequest {
        #[cfg(feature = "otel")]
        if crate::telemetry::active() {
            access::note_model(crate::telemetry::requested_model(&body));
        }
        self.post_raw(path, headers, body)
    }

    fn post_raw(&self, path: &str, headers: &HeaderMap, body: Bytes) -> UpstreamRequest {
        let mut req = self.request(Method::POST, path, body);
        req.header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        self.auth(&mut req, headers);
        req
    }

    /// `GET {base_url}{path}` passed through: the upstream's answer, whatever its status.
    pub(crate) async fn pass_get(
        &self,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Forwarded, GatewayError> {
        let mut req = self.request(Method::GET, path, Bytes::new());
        self.auth(&mut req, headers);
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
        let req = self.post_raw(path, headers, body);
        self.pass(req, path).await
    }

    /// Sends `req` within the deadline and forwards its answer, whatever its status.
    async fn pass(&self, req: UpstreamRequest, path: &str) -> Result<Forwarded, GatewayError> {
        let deadline = self.deadline();
        match tokio::time::timeout_at(deadline.into(), self.exchange(req)).await {
            Ok(Ok(resp)) => {
                access::note_upstream(resp.status().as_u16());
                if !resp.status().is_success() {
                    warn_status(resp.status().as_u16(), path);
                }
                self.forward(resp, deadline).await
            }
            Ok(Err(e)) => Err(self.failure(&e)),
            Err(_) => Err(deadline_passed()),
        }
    }

    /// The request sent, its answer's head read (within `upstream.timeout_secs`), through
    /// the same-origin redirects `upstream.redirects` allows.
    async fn exchange(&self, req: UpstreamRequest) -> Result<Answer, SendError> {
        let client = match &self.transport {
            Transport::Direct(client) => client,
            Transport::Reqwest(client) => {
                let req = reqwest::Request::try_from(req.0).map_err(SendError::Reqwest)?;
                let resp = client.execute(req).await.map_err(SendError::Reqwest)?;
                return Ok(http::Response::from(resp)
                    .map(|body| body.map_err(BodyError::Reqwest).boxed_unsync()));
            }
        };
        let mut req = req.0;
        let mut hops = 0;
        loop {
            let again = (matches!(self.config.redirects, Redirects::SameOrigin)
                && hops < MAX_REDIRECTS)
                .then(|| {
                    (
                        req.method().clone(),
                        req.uri().clone(),
                        req.headers().clone(),
                        req.body().clone(),
                    )
                });
            let sent = client.request(req.map(Full::new));
            let resp = match tokio::time::timeout(self.idle_timeout(), sent).await {
                Ok(r) => r.map_err(SendError::Direct)?,
                Err(_) => return Err(SendError::Idle),
            };
            let Some((method, uri, headers, body)) = again else {
                return Ok(resp.map(|b| b.map_err(BodyError::Direct).boxed_unsync()));
            };
            let Some(to) = same_origin_target(&uri, &resp) else {
                return Ok(resp.map(|b| b.map_err(BodyError::Direct).boxed_unsync()));
            };
            // As the Fetch standard, browsers and reqwest do: 307 and 308 repeat the
            // request; 303 turns it into a GET without a body (a HEAD stays), 301 and 302
            // only a POST.
            let keep = match resp.status().as_u16() {
                307 | 308 => true,
                303 => method == Method::HEAD,
                _ => method != Method::POST,
            };
            let mut next = http::Request::new(if keep { body } else { Bytes::new() });
            *next.uri_mut() = to;
            *next.headers_mut() = headers;
            if keep {
                *next.method_mut() = method;
            } else {
                *next.method_mut() = Method::GET;
                for h in [header::CONTENT_TYPE, header::CONTENT_LENGTH] {
                    next.headers_mut().remove(h);
                }
            }
            req = next;
            hops += 1;
        }
    }

    fn auth(&self, req: &mut UpstreamRequest, headers: &HeaderMap) {
        if self.config.api == config::UpstreamApi::Messages {
            return self.messages_auth(req, headers);
        }
        match (&self.api_key, self.config.api_key_header) {
            (Some(key), ApiKeyHeader::Authorization) => {
                req.header(header::AUTHORIZATION, key.bearer.clone());
            }
            (Some(key), ApiKeyHeader::ApiKey) => req.header("api-key", key.raw.clone()),
            (None, _) => {
                // The client's own credentials, in whichever header it sent them
                // (`api-key`: Azure OpenAI and the servers that copy it).
                for name in [header::AUTHORIZATION.as_str(), "api-key"] {
                    if let Some(v) = headers.get(name) {
                        req.header(name, v.clone());
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
        );
    }

    /// A Messages upstream's headers: the key in `x-api-key` (ours, else the client's
    /// `x-api-key`, else its `Authorization: Bearer` token), the client's
    /// `anthropic-version` (`2023-06-01` when it sent none) and `anthropic-beta`, and the
    /// tracing headers.
    fn messages_auth(&self, req: &mut UpstreamRequest, headers: &HeaderMap) {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let key = match (&self.api_key, headers.get("x-api-key"), bearer) {
            (Some(key), _, _) => Some(key.raw.clone()),
            (None, Some(key), _) => Some(key.clone()),
            (None, None, Some(token)) => HeaderValue::from_str(token).ok(),
            (None, None, None) => None,
        };
        if let Some(key) = key {
            req.header("x-api-key", sensitive(key));
        }
        // The client's Authorization is not the Messages API's; the base URL's
        // credentials stay (set in `request`).
        req.header(
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
        );
    }

    /// Sends `req` within `deadline`; an answer that is not a success is the error to
    /// give the client (passed on, or a 502 for a redirect). The body is left unread
    /// (the stream path reads it as it comes).
    pub(crate) async fn send(
        &self,
        req: UpstreamRequest,
        deadline: Instant,
    ) -> Result<Answer, GatewayError> {
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
        req: UpstreamRequest,
        deadline: Instant,
    ) -> Result<Answer, GatewayError> {
        let path = req.0.uri().path().to_owned();
        let resp = match tokio::time::timeout_at(deadline.into(), self.exchange(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(self.failure(&e)),
            Err(_) => return Err(deadline_passed()),
        };
        access::note_upstream(resp.status().as_u16());
        #[cfg(feature = "otel")]
        tracing::Span::current().record(
            "http.response.status_code",
            i64::from(resp.status().as_u16()),
        );
        if !resp.status().is_success() {
            warn_status(resp.status().as_u16(), &path);
            return Err(self.not_success(resp, deadline).await);
        }
        Ok(resp)
    }

    /// Sends `req` and reads the whole answer, within `upstream.deadline_secs` and
    /// `limits.max_upstream_bytes`.
    pub(crate) async fn fetch(&self, req: UpstreamRequest) -> Result<Bytes, GatewayError> {
        let deadline = self.deadline();
        #[cfg(feature = "otel")]
        {
            use tracing::Instrument as _;
            let span = self.chat_span();
            let req = with_trace_headers(req, &span);
            let out = async {
                let resp = self.send_inner(req, deadline).await?;
                self.read_bounded(resp, deadline).await
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
            self.read_bounded(resp, deadline).await
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
    async fn not_success(&self, resp: Answer, deadline: Instant) -> GatewayError {
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
    async fn forward(&self, resp: Answer, deadline: Instant) -> Result<Forwarded, GatewayError> {
        let status = resp.status();
        let mut headers = HeaderMap::new();
        for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
            if let Some(v) = resp.headers().get(&name) {
                headers.insert(name, v.clone());
            }
        }
        for (name, v) in resp.headers() {
            if name.as_str().starts_with("x-ratelimit-") {
                headers.append(name.clone(), v.clone());
            }
        }
        let body = self.read_bounded(resp, deadline).await?;
        Ok(Forwarded {
            status,
            headers,
            body,
        })
    }

    /// A transport failure (counted, logged at warn with its cause): 504 on a timeout,
    /// else 502.
    fn failure(&self, e: &SendError) -> GatewayError {
        access::note_upstream_failed();
        let cause = e.cause();
        let to = &self.origin;
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

    /// Reads an answer's body up to `limits.max_upstream_bytes`: past that, past
    /// `deadline`, or with no piece for `upstream.timeout_secs`, an error.
    async fn read_bounded(&self, resp: Answer, deadline: Instant) -> Result<Bytes, GatewayError> {
        let max = self.max_bytes;
        let idle = self.idle_timeout();
        let mut body = resp.into_body();
        let mut buf = bytes::BytesMut::new();
        loop {
            let by = (Instant::now() + idle).min(deadline);
            let next = match tokio::time::timeout_at(by.into(), body.frame()).await {
                Err(_) if Instant::now() >= deadline => return Err(deadline_passed()),
                Err(_) => return Err(self.failure(&SendError::Body(BodyError::Idle))),
                Ok(next) => next,
            };
            let chunk = match next {
                None => return Ok(buf.freeze()),
                Some(Err(e)) => return Err(self.failure(&SendError::Body(e))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue, // trailers
                },
            };
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
            if buf.is_empty() && body.is_end_stream() {
                // One frame, the whole answer: no copy.
                return Ok(chunk);
            }
            buf.extend_from_slice(&chunk);
        }
    }
}

/// `req` with the `traceparent` of `span`.
#[cfg(feature = "otel")]
fn with_trace_headers(mut req: UpstreamRequest, span: &tracing::Span) -> UpstreamRequest {
    for (k, v) in crate::telemetry::trace_headers(span) {
        if let Ok(v) = HeaderValue::try_from(v) {
            req.header(k.as_str(), v);
        }
    }
    req
}

/// An upstream call that failed, on its span.
#[cfg(feature = "otel")]
fn record_error(span: &tracing::Span, e: &GatewayError) {
    span.record("error.type", e.code());
    span.record("otel.status_code", "ERROR");
}

/// `req` with the client's `names` headers, as it sent them. Traced, the upstream gets
/// the `traceparent` of our own span (a child of the client's), set where the call is
/// sent, not the client's.
fn pass_on(req: &mut UpstreamRequest, headers: &HeaderMap, names: &[&str]) {
    for &name in names {
        #[cfg(feature = "otel")]
        if name == "traceparent" && crate::telemetry::active() {
            continue;
        }
        if let Some(v) = headers.get(name) {
            req.header(name, v.clone());
        }
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
    let mut s = with_causes(e);
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), "<upstream>");
    }
    s
}

/// An error's text, then each cause's that it does not already hold, joined by ": ".
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cause = c.source();
    }
    s
}

/// A URL as hyper's `Uri`, without its userinfo (sent as a header instead).
fn uri_of(url: &str) -> Option<Uri> {
    let mut u = reqwest::Url::parse(url).ok()?;
    let _ = u.set_username("");
    let _ = u.set_password(None);
    Uri::try_from(u.as_str()).ok()
}

/// `host[:port]` of a URL, without its userinfo.
fn authority_of(u: &reqwest::Url) -> String {
    match (u.host_str(), u.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        _ => String::new(),
    }
}

/// The `Location` of a redirect `resp` to `from`, when it is of the same origin (scheme,
/// host, port): where `upstream.redirects = "same_origin"` follows it.
fn same_origin_target<B>(from: &Uri, resp: &http::Response<B>) -> Option<Uri> {
    // The redirects (not 300, 304 or 305: no target to follow).
    if !matches!(resp.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = resp.headers().get(header::LOCATION)?.to_str().ok()?;
    let base = reqwest::Url::parse(&from.to_string()).ok()?;
    let to = base.join(location).ok()?;
    let same = to.scheme() == base.scheme()
        && to.host_str() == base.host_str()
        && to.port_or_known_default() == base.port_or_known_default();
    if !same {
        return None;
    }
    uri_of(to.as_str())
}

/// A `Basic` credential header.
fn basic_auth(user: &str, password: Option<&str>) -> HeaderValue {
    use base64::Engine as _;
    let raw = format!("{user}:{}", password.unwrap_or(""));
    let encoded = base64::engine::general_purpose::STANDARD.encode(raw);
    let mut v = HeaderValue::try_from(format!("Basic {encoded}"))
        .unwrap_or_else(|_| HeaderValue::from_static(""));
    v.set_sensitive(true);
    v
}

/// A URL's userinfo part, percent-decoded (as reqwest sent it).
fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// A header value not to be shown (hyper's HTTP/2 encoder keeps it out of its table).
fn sensitive(mut v: HeaderValue) -> HeaderValue {
    v.set_sensitive(true);
    v
}

/// hyper's pooled client: `TCP_NODELAY`, the connect timeout, keepalive, HTTP/1.1.
fn direct_client(config: &config::Upstream) -> Client<HttpConnector, Full<Bytes>> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(config::secs(config.connect_timeout_secs)));
    // reqwest's defaults: a pooled connection to a host that went away fails within about
    // 30 s (keepalive probes, unacknowledged data), not at the next timeout.
    http.set_keepalive(Some(Duration::from_secs(15)));
    http.set_keepalive_interval(Some(Duration::from_secs(15)));
    http.set_keepalive_retries(Some(3));
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    http.set_tcp_user_timeout(Some(Duration::from_secs(30)));
    Client::builder(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(http)
}

/// reqwest's client, for an HTTPS upstream or one behind `proxy` (the environment's,
/// matched once at start): the same timeouts and redirect policy.
fn reqwest_client(
    config: &config::Upstream,
    proxy: Option<&hyper_util::client::proxy::matcher::Intercept>,
) -> Result<reqwest::Client, reqwest::Error> {
    let redirects = match config.redirects {
        Redirects::None => reqwest::redirect::Policy::none(),
        Redirects::SameOrigin => {
            let origin = reqwest::Url::parse(&config.base_url).ok().and_then(|u| {
                Some((
                    u.scheme().to_owned(),
                    u.host_str()?.to_owned(),
                    u.port_or_known_default(),
                ))
            });
            reqwest::redirect::Policy::custom(move |attempt| {
                let to = attempt.url();
                let same = origin.as_ref().is_some_and(|(scheme, host, port)| {
                    to.scheme() == scheme
                        && to.host_str() == Some(host.as_str())
                        && to.port_or_known_default() == *port
                });
                // `previous` holds the first URL too: at most MAX_REDIRECTS followed.
                if same && attempt.previous().len() <= MAX_REDIRECTS {
                    attempt.follow()
                } else {
                    attempt.stop()
                }
            })
        }
    };
    let builder = match proxy {
        Some(proxy) => {
            let mut via = reqwest::Proxy::all(proxy.uri().to_string())?;
            // An HTTP proxy's credentials (`http://user:pass@proxy:3128`) come as a
            // header; a SOCKS proxy's as the pair.
            if let Some(basic) = proxy.basic_auth() {
                via = via.custom_http_auth(basic.clone());
            } else if let Some((user, password)) = proxy.raw_auth() {
                via = via.basic_auth(user, password);
            }
            reqwest::Client::builder().proxy(via)
        }
        None => reqwest::Client::builder().no_proxy(),
    };
    builder
        .connect_timeout(config::secs(config.connect_timeout_secs))
        .read_timeout(config.timeout())
        .tcp_nodelay(true)
        .redirect(redirects)
        .build()
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    fn upstream_config(base_url: &str) -> config::Upstream {
        config_with(base_url, "")
    }

    fn config_with(base_url: &str, extra: &str) -> config::Upstream {
        crate::Config::from_toml_and_env(
            &format!("upstream.base_url = \"{base_url}\"\n{extra}"),
            Vec::new(),
        )
        .unwrap()
        .upstream
    }

    /// A proxy on loopback that reads one request, reports its head, and answers `answer`
    /// (then holds the connection open until the client lets go).
    #[allow(
        clippy::disallowed_methods,
        reason = "the test's own proxy, not a tool"
    )]
    async fn proxy_answering(
        answer: &'static str,
    ) -> (
        std::net::SocketAddr,
        tokio::sync::mpsc::UnboundedReceiver<String>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).await.unwrap() == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")?
                        .parse()
                        .ok()
                })
                .unwrap_or(0);
            let mut body = vec![0u8; len];
            s.read_exact(&mut body).await.unwrap();
            let _ = tx.send(head);
            s.write_all(answer.as_bytes()).await.unwrap();
            let mut rest = [0u8; 64];
            while matches!(s.read(&mut rest).await, Ok(n) if n > 0) {}
        });
        (addr, rx)
    }

    #[tokio::test]
    async fn a_proxys_credentials_reach_it_and_a_stall_behind_it_is_a_timeout() {
        // The head and part of a body, then nothing: reqwest's read timeout, a 504.
        let (proxy, mut heads) = proxy_answering(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        )
        .await;
        let config = config_with(
            "http://model.invalid:8000/v1",
            "upstream.timeout_secs = 0.3",
        );
        let proxies = Matcher::builder()
            .all(format!("http://proxy-user:pa%40ss@{proxy}"))
            .build();
        let up = Upstream::with_proxies(&config, 1 << 20, &proxies).unwrap();
        assert!(matches!(up.transport, Transport::Reqwest(_)));
        let req = up.post(
            "/chat/completions",
            &HeaderMap::new(),
            &serde_json::json!({}),
        );
        let err = up.fetch(req).await.unwrap_err();
        assert!(matches!(err, GatewayError::UpstreamTimeout), "{err:?}");
        let head = heads.recv().await.unwrap().to_ascii_lowercase();
        // base64("proxy-user:pa@ss")
        assert!(
            head.contains("proxy-authorization: basic chjvehktdxnlcjpwyubzcw=="),
            "{head}"
        );
    }

    #[test]
    fn a_key_that_cannot_be_a_header_value_is_refused_at_start() {
        assert!(Key::new("sk-proj-abc").is_some());
        assert!(Key::new("sk-proj-abc\n").is_none());
        assert!(Key::new("sk\u{7f}").is_none());
    }

    #[test]
    fn the_transport_is_hypers_for_plain_http_unless_a_proxy_applies() {
        let config = upstream_config("http://model.invalid:8000/v1");
        let none = Matcher::builder().build();
        let up = Upstream::with_proxies(&config, 1 << 20, &none).unwrap();
        assert!(matches!(up.transport, Transport::Direct(_)));
        let all = Matcher::builder().all("http://127.0.0.1:3128").build();
        let up = Upstream::with_proxies(&config, 1 << 20, &all).unwrap();
        assert!(matches!(up.transport, Transport::Reqwest(_)));
        // NO_PROXY names the upstream: hyper's, directly.
        let excluded = Matcher::builder()
            .all("http://127.0.0.1:3128")
            .no("model.invalid")
            .build();
        let up = Upstream::with_proxies(&config, 1 << 20, &excluded).unwrap();
        assert!(matches!(up.transport, Transport::Direct(_)));
        // HTTPS: reqwest's TLS, proxy or not.
        let tls = upstream_config("https://model.invalid/v1");
        let up = Upstream::with_proxies(&tls, 1 << 20, &none).unwrap();
        assert!(matches!(up.transport, Transport::Reqwest(_)));
    }

    #[tokio::test]
    async fn an_upstream_behind_a_proxy_is_reached_through_it() {
        let (proxy, mut heads) = proxy_answering(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
             content-length: 10\r\nconnection: close\r\n\r\n{\"via\": 1}",
        )
        .await;
        let config = upstream_config("http://model.invalid:8000/v1");
        let proxies = Matcher::builder().all(format!("http://{proxy}")).build();
        let up = Upstream::with_proxies(&config, 1 << 20, &proxies).unwrap();
        let req = up.post(
            "/chat/completions",
            &HeaderMap::new(),
            &serde_json::json!({}),
        );
        let body = up.fetch(req).await.unwrap();
        assert_eq!(&body[..], br#"{"via": 1}"#);
        let head = heads.recv().await.unwrap();
        assert!(
            head.starts_with("POST http://model.invalid:8000/v1/chat/completions HTTP/1.1"),
            "{head}"
        );
    }
}
