//! HTTP tool services: the envelope, sent and verified.
//!
//! Out: `POST {endpoint}` with `{"function": name, "arguments": {...}}` and the headers
//! `X-Tool-Call-ID` (the call id; a retry gets a new one, `{id}-retry{n}`, and carries
//! the original in `X-Original-ID`), `X-Request-Timestamp` (ms since the epoch),
//! `X-Trace-ID`, `Idempotency-Key` (the call id, when the tool asks for it), and the
//! tool's own headers (secrets from the environment, marked sensitive so they are never
//! printed).
//!
//! In: `{"status": "success" | "error", "data": …, "message": "…", "call_id": "…",
//! "timestamp": ms}`. No `status` is a protocol violation; a `call_id` that is not this
//! call's (the attempt's id or the original) is a dirty answer, dropped: the call is
//! answered with an error result, never with another call's data; a `timestamp` outside
//! `[sent - tolerance, received + tolerance]` is recorded as clock skew and accepted. A
//! service that does not speak the envelope is read through an `adapter` (JSON Pointers
//! to its data, message, error and call id fields).
//!
//! Endpoints come only from the configuration: redirects are followed only to the same
//! host and port (a redirect elsewhere is an error), proxies from the environment are not
//! used, and an answer over `max_response_bytes` is refused while it is read.

use std::{
    sync::OnceLock,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::BytesMut;
use futures::StreamExt;
use reqwest::{
    Url,
    header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue},
    redirect,
};
use serde_json::Value;
use toolmend::redact;

use crate::{
    spec::AdapterSpec,
    transport::{ExchangeNotes, Reply, ServiceRequest, TransportError},
};

/// The shared HTTP client of every HTTP tool: connection pool, no proxies, redirects
/// only within one host.
pub fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| build_client(true))
}

/// The client of MCP servers over streamable HTTP: as [`client`] (no proxies, redirects
/// only within one host), but a fresh connection per request, as rmcp's own client does.
/// A pooled connection that carried an SSE answer waits about 40 ms before the next
/// request's answer arrives (measured here: 42.9 ms a call pooled, against 1.1 ms).
pub fn mcp_client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| build_client(false))
}

fn build_client(pool: bool) -> reqwest::Client {
    let policy = redirect::Policy::custom(|attempt| {
        let same = attempt.previous().first().is_some_and(|first| {
            first.host_str() == attempt.url().host_str()
                && first.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if attempt.previous().len() > 5 {
            attempt.error("more than 5 redirects")
        } else if same {
            attempt.follow()
        } else {
            let to = attempt.url().host_str().unwrap_or("?").to_owned();
            attempt.error(OtherHost(to))
        }
    });
    let builder = reqwest::Client::builder()
        .redirect(policy)
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(60));
    let builder = if pool {
        builder
    } else {
        builder.pool_max_idle_per_host(0)
    };
    builder.build().unwrap_or_else(|_| reqwest::Client::new())
}

#[derive(Debug)]
struct OtherHost(String);

impl std::fmt::Display for OtherHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a redirect to another host ({})", self.0)
    }
}

impl std::error::Error for OtherHost {}

/// How one HTTP tool is reached.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    endpoint: Url,
    headers: HeaderMap,
    retries: u32,
    idempotency_key: bool,
    adapter: Option<AdapterSpec>,
    max_bytes: usize,
    skew_tolerance: Duration,
}

/// Settings of an [`HttpTransport`].
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Attempts after the first (only where safe: the loader checks).
    pub retries: u32,
    /// Send `Idempotency-Key: <call id>`.
    pub idempotency_key: bool,
    /// Field mapping for a service without the envelope.
    pub adapter: Option<AdapterSpec>,
    /// The largest answer accepted.
    pub max_bytes: usize,
    /// Clock skew tolerated before it is recorded.
    pub skew_tolerance: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            retries: 0,
            idempotency_key: false,
            adapter: None,
            max_bytes: crate::spec::DEFAULT_MAX_RESPONSE_BYTES,
            skew_tolerance: Duration::from_millis(crate::spec::DEFAULT_SKEW_TOLERANCE_MS),
        }
    }
}

/// Checks an endpoint from the configuration (an HTTP tool's, an MCP server's): an
/// absolute `http` or `https` URL.
///
/// # Errors
///
/// Not a URL, or another scheme: the reason; an `https` URL in a build without the `tls`
/// feature: that the build lacks it (rather than a connect error on every call).
pub fn parse_endpoint(s: &str) -> Result<Url, String> {
    // Shown redacted: a URL's userinfo and query may hold a secret.
    let shown = redact::url(s);
    let url = Url::parse(s).map_err(|e| format!("endpoint {shown:?} is not a URL ({e})"))?;
    match url.scheme() {
        "https" if !cfg!(feature = "tls") => Err(no_tls(&shown)),
        "http" | "https" if url.host_str().is_some() => Ok(url),
        other => Err(format!(
            "endpoint {shown:?} must be an http:// or https:// URL with a host (scheme {other:?})"
        )),
    }
}

/// Why `shown` (an https URL, redacted) cannot be used by a build without `tls`.
pub(crate) fn no_tls(shown: &str) -> String {
    format!(
        "endpoint {shown:?} is an https:// URL, but this build has no TLS: rebuild with the \
         `tls` feature (on by default), or use an http:// URL"
    )
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl HttpTransport {
    /// A transport to `endpoint` with extra `headers` (already resolved; values are marked
    /// sensitive).
    ///
    /// # Errors
    ///
    /// A header name or value that HTTP does not allow.
    pub fn new(
        endpoint: Url,
        headers: &[(String, String)],
        options: HttpOptions,
    ) -> Result<Self, String> {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("header name {k:?} is not valid in HTTP"))?;
            let mut value = HeaderValue::from_str(v)
                .map_err(|_| format!("the value of header {k:?} is not valid in HTTP"))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        Ok(HttpTransport {
            endpoint,
            headers: map,
            retries: options.retries,
            idempotency_key: options.idempotency_key,
            adapter: options.adapter,
            max_bytes: options.max_bytes,
            skew_tolerance: options.skew_tolerance,
        })
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// Sends the call (retrying where allowed) and verifies the answer.
    ///
    /// # Errors
    ///
    /// No usable answer after every attempt: the last reason.
    pub async fn call(
        &self,
        req: &ServiceRequest<'_>,
    ) -> Result<(Reply, ExchangeNotes), TransportError> {
        let body = serde_json::to_vec(&serde_json::json!({
            "function": req.function,
            "arguments": req.arguments,
        }))
        .map_err(|e| TransportError::Protocol(e.to_string()))?;
        let body = bytes::Bytes::from(body);
        let mut notes = ExchangeNotes::default();
        let mut attempt = 0u32;
        loop {
            notes.attempts = attempt + 1;
            let attempt_id = if attempt == 0 {
                req.call_id.to_owned()
            } else {
                format!("{}-retry{attempt}", req.call_id)
            };
            match self
                .attempt(req, &attempt_id, body.clone(), &mut notes)
                .await
            {
                Ok(reply) => return Ok((reply, notes)),
                Err(e) if e.retryable() && attempt < self.retries => {
                    tracing::debug!(call_id = req.call_id, error = %e, attempt, "tool service: retrying");
                    // A short, growing pause: a busy service gets room, a dead one costs
                    // little (50, 100, 200 … ms, at most 1 s).
                    let pause =
                        Duration::from_millis(50u64 << attempt.min(4)).min(Duration::from_secs(1));
                    tokio::time::sleep(pause).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn attempt(
        &self,
        req: &ServiceRequest<'_>,
        attempt_id: &str,
        body: bytes::Bytes,
        notes: &mut ExchangeNotes,
    ) -> Result<Reply, TransportError> {
        let sent = now_ms();
        let mut rb = client()
            .post(self.endpoint.clone())
            .timeout(req.timeout)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header("X-Tool-Call-ID", attempt_id)
            .header("X-Request-Timestamp", sent.to_string())
            .header("X-Trace-ID", req.trace_id)
            .body(body);
        if attempt_id != req.call_id {
            rb = rb.header("X-Original-ID", req.call_id);
        }
        if self.idempotency_key {
            rb = rb.header("Idempotency-Key", req.call_id);
        }
        let resp = rb.send().await.map_err(|e| send_error(&e, req.timeout))?;
        let status = resp.status();
        if resp
            .content_length()
            .is_some_and(|n| n > self.max_bytes as u64)
        {
            return Err(TransportError::TooLarge {
                limit: self.max_bytes,
            });
        }
        let mut buf = BytesMut::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| send_error(&e, req.timeout))?;
            if buf.len() + chunk.len() > self.max_bytes {
                return Err(TransportError::TooLarge {
                    limit: self.max_bytes,
                });
            }
            buf.extend_from_slice(&chunk);
        }
        let received = now_ms();
        notes.bytes = buf.len();
        let parsed = parse_json(&buf);
        if !status.is_success() {
            // An envelope's own error (with this call's id) is the tool speaking; an envelope
            // naming another call is dirty whatever the status (dropped, never retried);
            // anything else is the service failing.
            if let Ok((v, _)) = &parsed
                && self.adapter.is_none()
            {
                match read_envelope(v, attempt_id, req.call_id) {
                    Ok(reply @ Reply::Failed { .. }) => return Ok(reply),
                    Err(dirty @ TransportError::Dirty { .. }) => return Err(dirty),
                    _ => {}
                }
            }
            // The body summarized (a stack trace, an internal host, a password are
            // the service's, never the model's): a short reason only from a JSON error
            // object; the body itself only at debug, redacted.
            if tracing::enabled!(tracing::Level::DEBUG) {
                let (text, _) = crate::shape::clean_utf8(&buf);
                let body = redact::text(&redact::brief(&text, MAX_LOGGED_BODY_CHARS));
                // Escaped (`?`): one log line, whatever the body's lines.
                tracing::debug!(
                    tool = req.function,
                    call_id = req.call_id,
                    status = status.as_u16(),
                    ?body,
                    "tool service error body"
                );
            }
            return Err(TransportError::Status {
                status: status.as_u16(),
                reason: redact::error_reason(&buf),
            });
        }
        let (value, lossy) = parsed
            .map_err(|e| TransportError::Protocol(format!("the answer is not JSON ({e})")))?;
        notes.invalid_utf8 = lossy;
        let reply = match &self.adapter {
            Some(a) => read_adapted(&value, a, attempt_id, req.call_id)?,
            None => {
                if let Some(ts) = value.get("timestamp").and_then(Value::as_i64) {
                    let tol = i64::try_from(self.skew_tolerance.as_millis()).unwrap_or(i64::MAX);
                    let skew = if ts < sent - tol {
                        Some(ts - sent)
                    } else if ts > received + tol {
                        Some(ts - received)
                    } else {
                        None
                    };
                    notes.clock_skew_ms = skew;
                }
                read_envelope(&value, attempt_id, req.call_id)?
            }
        };
        Ok(reply)
    }
}

/// The answer as JSON. A body that is JSON but for invalid UTF-8 inside its strings is
/// read with the bad bytes replaced by U+FFFD (`true`: the caller records it), rather than
/// refused as not JSON.
fn parse_json(buf: &[u8]) -> Result<(Value, bool), serde_json::Error> {
    match serde_json::from_slice(buf) {
        Ok(v) => Ok((v, false)),
        Err(e) => match std::str::from_utf8(buf) {
            Ok(_) => Err(e),
            Err(_) => {
                let (clean, _) = crate::shape::clean_utf8(buf);
                serde_json::from_str(&clean)
                    .map(|v| (v, true))
                    .map_err(|_| e)
            }
        },
    }
}

/// The most of an error body logged (at debug).
const MAX_LOGGED_BODY_CHARS: usize = 2_000;

/// A failed exchange in our words: never the error's `Display` chain (it names the URL,
/// which may carry a secret, and the HTTP library's own types).
fn send_error(e: &reqwest::Error, timeout: Duration) -> TransportError {
    if e.is_timeout() {
        return TransportError::Timeout(timeout);
    }
    if e.is_redirect() {
        // Our own error (`OtherHost`: the host only) or reqwest's "too many redirects".
        let why = std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<OtherHost>())
            .map_or_else(|| "too many redirects".to_owned(), ToString::to_string);
        return TransportError::Redirect(redact::text(&why));
    }
    let cause = redact::cause(e);
    if e.is_connect() {
        TransportError::Connect(cause.unwrap_or("could not connect").to_owned())
    } else if e.is_body() || e.is_decode() {
        TransportError::Broken(format!(
            "the answer broke off{}",
            cause.map(|c| format!(": {c}")).unwrap_or_default()
        ))
    } else {
        TransportError::Broken(cause.unwrap_or("the request failed").to_owned())
    }
}

fn check_id(got: Option<&Value>, attempt_id: &str, call_id: &str) -> Result<(), TransportError> {
    match got {
        Some(Value::String(s)) if s == attempt_id || s == call_id => Ok(()),
        Some(Value::String(s)) => Err(TransportError::Dirty { got: s.clone() }),
        Some(other) => Err(TransportError::Dirty {
            got: other.to_string(),
        }),
        None => Err(TransportError::Protocol(
            "the answer does not echo `call_id` (the envelope requires it; declare an `adapter` for a service that does not)".into(),
        )),
    }
}

/// Reads the envelope: `status` required, `call_id` this call's.
///
/// # Errors
///
/// A protocol violation or a dirty answer.
pub fn read_envelope(v: &Value, attempt_id: &str, call_id: &str) -> Result<Reply, TransportError> {
    let Some(obj) = v.as_object() else {
        return Err(TransportError::Protocol(
            "the answer is not a JSON object with `status`".into(),
        ));
    };
    let status = match obj.get("status") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(TransportError::Protocol(format!(
                "`status` must be \"success\" or \"error\", not {other}"
            )));
        }
        None => {
            return Err(TransportError::Protocol(
                "the answer has no `status` (success | error): a protocol violation".into(),
            ));
        }
    };
    check_id(obj.get("call_id"), attempt_id, call_id)?;
    let message = obj
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let data = obj.get("data").cloned().unwrap_or(Value::Null);
    match status {
        "success" => Ok(Reply::Success { data, message }),
        "error" => Ok(Reply::Failed {
            message: message.unwrap_or_else(|| "the tool reported an error".into()),
            data: (!data.is_null()).then_some(data),
        }),
        other => Err(TransportError::Protocol(format!(
            "`status` must be \"success\" or \"error\", not {other:?}"
        ))),
    }
}

fn pointer<'v>(v: &'v Value, p: &str) -> Option<&'v Value> {
    if p.is_empty() { Some(v) } else { v.pointer(p) }
}

fn read_adapted(
    v: &Value,
    a: &AdapterSpec,
    attempt_id: &str,
    call_id: &str,
) -> Result<Reply, TransportError> {
    if let Some(p) = &a.call_id {
        check_id(pointer(v, p), attempt_id, call_id)?;
    }
    let message = a
        .message
        .as_deref()
        .and_then(|p| pointer(v, p))
        .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned));
    if let Some(p) = &a.error
        && let Some(e) = pointer(v, p)
        && !matches!(e, Value::Null | Value::Bool(false))
    {
        let text =
            message.unwrap_or_else(|| e.as_str().map_or_else(|| e.to_string(), str::to_owned));
        return Ok(Reply::Failed {
            message: text,
            data: Some(v.clone()),
        });
    }
    let data = pointer(v, &a.data).cloned().ok_or_else(|| {
        TransportError::Protocol(format!(
            "the answer has nothing at {:?} (adapter.data)",
            a.data
        ))
    })?;
    Ok(Reply::Success { data, message })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_envelope_is_verified() {
        let ok = json!({"status": "success", "data": [1], "call_id": "c1", "timestamp": 5});
        assert_eq!(
            read_envelope(&ok, "c1", "c1"),
            Ok(Reply::Success {
                data: json!([1]),
                message: None
            })
        );
        // A retry's answer may name the attempt or the original.
        assert!(read_envelope(&ok, "c1-retry1", "c1").is_ok());
        let dirty = json!({"status": "success", "data": [2], "call_id": "c9"});
        assert_eq!(
            read_envelope(&dirty, "c1", "c1"),
            Err(TransportError::Dirty { got: "c9".into() })
        );
        let no_status = json!({"data": 1, "call_id": "c1"});
        assert!(
            matches!(read_envelope(&no_status, "c1", "c1"), Err(TransportError::Protocol(m)) if m.contains("no `status`"))
        );
        let err = json!({"status": "error", "message": "user not found", "call_id": "c1"});
        assert_eq!(
            read_envelope(&err, "c1", "c1"),
            Ok(Reply::Failed {
                message: "user not found".into(),
                data: None
            })
        );
        assert!(matches!(
            read_envelope(&json!([1]), "c1", "c1"),
            Err(TransportError::Protocol(_))
        ));
        assert!(matches!(
            read_envelope(&json!({"status": "ok", "call_id": "c1"}), "c1", "c1"),
            Err(TransportError::Protocol(_))
        ));
    }

    #[test]
    fn an_adapter_maps_a_plain_service() {
        let a = AdapterSpec {
            data: "/result".into(),
            message: Some("/note".into()),
            error: Some("/error".into()),
            call_id: None,
        };
        let v = json!({"result": {"t": 21}, "note": "fine", "error": null});
        assert_eq!(
            read_adapted(&v, &a, "c", "c"),
            Ok(Reply::Success {
                data: json!({"t": 21}),
                message: Some("fine".into())
            })
        );
        let v = json!({"error": "no such city"});
        assert!(
            matches!(read_adapted(&v, &a, "c", "c"), Ok(Reply::Failed { message, .. }) if message == "no such city")
        );
        let v = json!({"other": 1});
        assert!(matches!(
            read_adapted(&v, &a, "c", "c"),
            Err(TransportError::Protocol(_))
        ));
    }

    #[test]
    fn endpoints_must_be_http_urls() {
        assert!(parse_endpoint("http://127.0.0.1:9/x").is_ok());
        // A build without `tls` refuses it (the `no_tls` test below).
        assert_eq!(
            parse_endpoint("https://tools.example/weather").is_ok(),
            cfg!(feature = "tls")
        );
        assert!(parse_endpoint("tools.example/weather").is_err());
        assert!(parse_endpoint("file:///etc/passwd").is_err());
        assert!(parse_endpoint("ftp://x/y").is_err());
    }
}

/// Built without `tls` (`cargo test -p toolmend-tools --no-default-features --lib`).
#[cfg(all(test, not(feature = "tls")))]
mod no_tls {
    use super::parse_endpoint;

    #[test]
    fn an_https_endpoint_is_refused_with_what_to_do() {
        let err = parse_endpoint("https://tools.example/weather?key=secret").unwrap_err();
        assert!(err.contains("\"https://tools.example/weather\""), "{err}");
        assert!(err.contains("this build has no TLS"), "{err}");
        assert!(err.contains("`tls` feature"), "{err}");
        assert!(!err.contains("secret"), "{err}");
        assert!(parse_endpoint("http://127.0.0.1:9/x").is_ok());
    }
}
