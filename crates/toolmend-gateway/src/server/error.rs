//! [`GatewayError`]: every error the gateway answers with, its HTTP status and its body
//! in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`. The JSON path
//! answers with it, the SSE path ends a stream with its body as an event, the accept
//! loop writes it for a connection past the cap: the same fault has the same `code`
//! wherever it is met.

use axum::{
    Json,
    body::{Body, Bytes},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

/// The header the OpenAI and Anthropic SDKs (Python and TypeScript) read before the
/// status to decide on a retry: `false` on a guard's refusal (docs/guard.md).
pub(crate) const SHOULD_RETRY: &str = "x-should-retry";

/// An upstream answer that was not a success, passed on to the client as it came
/// (status, the headers worth keeping, body).
#[derive(Debug, Clone)]
pub(crate) struct Forwarded {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// What went wrong, by who is to blame: the request (4xx), the upstream (5xx, or its own
/// answer passed on), the gateway itself (500, 503).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum GatewayError {
    /// 400 `invalid_request_error`: the request is not one the gateway can send on
    /// (`code`: `invalid_json`, `invalid_body`, `missing_messages`, `invalid_messages`,
    /// `invalid_tools`, `body_read_failed`, `toolmend_invalid_history`).
    #[error("{message}")]
    InvalidRequest { code: &'static str, message: String },
    /// 400 `toolmend_limit_exceeded`: the request is past one of the `[limits]`.
    #[error("{0}")]
    LimitExceeded(String),
    /// 413 `body_too_large`.
    #[error("the request body is larger than limits.max_body_bytes ({max} bytes)")]
    BodyTooLarge { max: usize },
    /// 408 `body_timeout`.
    #[error("the request body did not arrive within limits.body_timeout_secs ({secs} s)")]
    BodyTimeout { secs: f64 },
    /// 504 `upstream_timeout`: no answer within the read timeout.
    #[error("the upstream provider did not answer in time")]
    UpstreamTimeout,
    /// 502 `upstream_unreachable` (the transport's error, without the URL).
    #[error("the upstream provider could not be reached: {0}")]
    UpstreamUnreachable(String),
    /// 504 `upstream_deadline`: the whole answer took longer than `upstream.deadline_secs`.
    #[error("the upstream answer took longer than upstream.deadline_secs in all")]
    UpstreamDeadline,
    /// 502 `upstream_too_large`: past `limits.max_upstream_bytes` (`message` says of what).
    #[error("{0}")]
    UpstreamTooLarge(String),
    /// 502 `upstream_redirect`: a redirect that is not followed.
    #[error("{0}")]
    UpstreamRedirect(String),
    /// 502 `upstream_invalid_json`.
    #[error("the upstream answer is not JSON: {0}")]
    UpstreamInvalidJson(String),
    /// 502 `upstream_stream_error`: the upstream stream broke, stalled or ended early
    /// (only ever sent as a stream's last event).
    #[error("{0}")]
    UpstreamStream(String),
    /// The upstream's own answer that was not a success, passed on as it came.
    #[error("the upstream answered {}", .0.status)]
    UpstreamStatus(Box<Forwarded>),
    /// 500 `server_error`: a bug (`code`: `toolmend_internal_error`, `stream`).
    #[error("{message}")]
    Internal { code: &'static str, message: String },
    /// 401 `invalid_api_key`: no client key, or not one of `[access]` (the message says
    /// which, and how to send one). Never names the key presented.
    #[error("{message}")]
    Unauthorized { message: String },
    /// 503 `too_many_connections`.
    #[error("the gateway is at its connection limit (limits.max_connections); retry shortly")]
    TooManyConnections,
    /// 503 `toolmend_store_unavailable`: a store the answer needs (the kept responses'
    /// Redis) did not answer; `message` says which and why, and what to do instead.
    #[error("{0}")]
    StoreUnavailable(String),
    /// 404 `invalid_request_error` with `code`: the route has nothing to serve here
    /// (`toolmend_no_tools`: `/v1/tools/execute` without configured tools).
    #[error("{message}")]
    NotFound { code: &'static str, message: String },
    /// 405 `method_not_allowed`: the route exists, not for this method (`message` names
    /// the one it takes).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 504 `toolmend_round_trip_limit`: the round trip through server-side tools reached
    /// `round_trip.max_rounds` or `round_trip.max_secs` with calls still to run (`message`
    /// names the bound and the rounds).
    #[error("{0}")]
    RoundTripLimit(String),
    /// 429 `toolmend_tool_flood` (with `Retry-After`), or 400 `toolmend_tool_loop` when
    /// the rule ends the run: the guard refused the model's calls (`guard.on_flood =
    /// "reject"`, or feedback re-asks that did not help). Always with `x-should-retry:
    /// false` (the OpenAI and Anthropic SDKs then raise at once instead of sending the
    /// request again, each retry a paid model call) and `headers`: what the guard did
    /// (`x-toolmend-guard`, `x-toolmend-re-ask`).
    #[error("{message}")]
    Flooded {
        message: String,
        retry_after: Option<std::time::Duration>,
        ends_run: bool,
        /// Every refusal was the guard's store not answering (`fail = "closed"`): an
        /// outage, answered 503 `toolmend_guard_unavailable`, not a flood.
        outage: bool,
        headers: Vec<(&'static str, String)>,
    },
}

impl GatewayError {
    /// 400 `invalid_request_error` with `code`.
    pub(crate) fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        GatewayError::InvalidRequest {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status of the answer.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            GatewayError::InvalidRequest { .. } | GatewayError::LimitExceeded(_) => {
                StatusCode::BAD_REQUEST
            }
            GatewayError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            GatewayError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            GatewayError::UpstreamTimeout
            | GatewayError::UpstreamDeadline
            | GatewayError::RoundTripLimit(_) => StatusCode::GATEWAY_TIMEOUT,
            GatewayError::NotFound { .. } => StatusCode::NOT_FOUND,
            GatewayError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            GatewayError::UpstreamUnreachable(_)
            | GatewayError::UpstreamTooLarge(_)
            | GatewayError::UpstreamRedirect(_)
            | GatewayError::UpstreamInvalidJson(_)
            | GatewayError::UpstreamStream(_) => StatusCode::BAD_GATEWAY,
            GatewayError::UpstreamStatus(f) => f.status,
            GatewayError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            GatewayError::TooManyConnections | GatewayError::StoreUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            GatewayError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            GatewayError::Flooded { ends_run: true, .. } => StatusCode::BAD_REQUEST,
            GatewayError::Flooded { outage: true, .. } => StatusCode::SERVICE_UNAVAILABLE,
            GatewayError::Flooded { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// OpenAI's `error.type`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            GatewayError::InvalidRequest { .. }
            | GatewayError::LimitExceeded(_)
            | GatewayError::BodyTooLarge { .. }
            | GatewayError::BodyTimeout { .. }
            | GatewayError::NotFound { .. }
            | GatewayError::MethodNotAllowed(_)
            // OpenAI's own 401 for a wrong key.
            | GatewayError::Unauthorized { .. } => "invalid_request_error",
            GatewayError::RoundTripLimit(_) => "server_error",
            GatewayError::UpstreamTimeout
            | GatewayError::UpstreamUnreachable(_)
            | GatewayError::UpstreamDeadline
            | GatewayError::UpstreamTooLarge(_)
            | GatewayError::UpstreamRedirect(_)
            | GatewayError::UpstreamInvalidJson(_)
            | GatewayError::UpstreamStream(_)
            | GatewayError::UpstreamStatus(_) => "upstream_error",
            GatewayError::Internal { .. }
            | GatewayError::TooManyConnections
            | GatewayError::StoreUnavailable(_) => "server_error",
            GatewayError::Flooded { ends_run: true, .. } => "invalid_request_error",
            GatewayError::Flooded { outage: true, .. } => "server_error",
            // OpenAI's own 429s say `requests` (or `tokens`).
            GatewayError::Flooded { .. } => "requests",
        }
    }

    /// OpenAI's `error.code`: stable, documented in docs/gateway.md.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            GatewayError::InvalidRequest { code, .. }
            | GatewayError::Internal { code, .. }
            | GatewayError::NotFound { code, .. } => code,
            GatewayError::RoundTripLimit(_) => "toolmend_round_trip_limit",
            GatewayError::MethodNotAllowed(_) => "method_not_allowed",
            GatewayError::LimitExceeded(_) => "toolmend_limit_exceeded",
            GatewayError::BodyTooLarge { .. } => "body_too_large",
            GatewayError::BodyTimeout { .. } => "body_timeout",
            GatewayError::UpstreamTimeout => "upstream_timeout",
            GatewayError::UpstreamUnreachable(_) => "upstream_unreachable",
            GatewayError::UpstreamDeadline => "upstream_deadline",
            GatewayError::UpstreamTooLarge(_) => "upstream_too_large",
            GatewayError::UpstreamRedirect(_) => "upstream_redirect",
            GatewayError::UpstreamInvalidJson(_) => "upstream_invalid_json",
            GatewayError::UpstreamStream(_) => "upstream_stream_error",
            GatewayError::UpstreamStatus(_) => "upstream_status",
            GatewayError::TooManyConnections => "too_many_connections",
            GatewayError::StoreUnavailable(_) => "toolmend_store_unavailable",
            GatewayError::Unauthorized { .. } => "invalid_api_key",
            GatewayError::Flooded { ends_run: true, .. } => "toolmend_tool_loop",
            GatewayError::Flooded { outage: true, .. } => "toolmend_guard_unavailable",
            GatewayError::Flooded { .. } => "toolmend_tool_flood",
        }
    }

    /// The body in OpenAI's shape (for [`GatewayError::UpstreamStatus`], a description of
    /// it: the client gets the upstream's own body).
    pub(crate) fn body(&self) -> Value {
        json!({"error": {"message": self.to_string(), "type": self.kind(), "param": null,
            "code": self.code()}})
    }
}

impl IntoResponse for Forwarded {
    fn into_response(self) -> Response {
        let mut out = Response::new(Body::from(self.body));
        *out.status_mut() = self.status;
        *out.headers_mut() = self.headers;
        out
    }
}

/// The `code` of the error a response answers with, in its extensions: the request's
/// log line names it (`server::access`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorCode(pub(crate) &'static str);

impl IntoResponse for GatewayError {
    fn into_response(self) -> Response {
        let code = ErrorCode(self.code());
        let mut out = self.into_response_inner();
        out.extensions_mut().insert(code);
        out
    }
}

impl GatewayError {
    fn into_response_inner(self) -> Response {
        match self {
            GatewayError::UpstreamStatus(f) => f.into_response(),
            GatewayError::Flooded {
                retry_after,
                ends_run,
                ref headers,
                ..
            } => {
                let mut out = (self.status(), Json(self.body())).into_response();
                let h = out.headers_mut();
                if let (Some(after), false) = (retry_after, ends_run) {
                    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
                    h.insert(axum::http::header::RETRY_AFTER, secs.max(1).into());
                }
                h.insert(
                    axum::http::HeaderName::from_static(SHOULD_RETRY),
                    axum::http::HeaderValue::from_static("false"),
                );
                crate::server::headers::set_headers(h, headers.iter().cloned());
                out
            }
            GatewayError::Unauthorized { .. } => {
                let mut out = (self.status(), Json(self.body())).into_response();
                out.headers_mut().insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Bearer realm=\"toolmend\""),
                );
                out
            }
            e => (e.status(), Json(e.body())).into_response(),
        }
    }
}

/// `out`, an error answer in OpenAI's shape (or an upstream's own), in Anthropic's:
/// `{"type": "error", "error": {"type", "message", "code"}}`, the status and headers kept
/// (`retry-after`, `x-should-retry`). An upstream's own error keeps its message. A
/// response that is not an error (no [`ErrorCode`]) is returned as it is.
pub(crate) async fn in_anthropic_shape(out: Response) -> Response {
    let Some(ErrorCode(code)) = out.extensions().get::<ErrorCode>().copied() else {
        return out;
    };
    let (mut parts, body) = out.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(2000).collect());
    let body = json!({"type": "error", "error": {"type": anthropic_type(parts.status),
        "message": message, "code": code}});
    parts.headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// Anthropic's `error.type` for a status.
fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 408 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::GatewayError;

    #[test]
    fn every_error_body_has_openais_four_keys() {
        for e in [
            GatewayError::invalid("invalid_json", "x"),
            GatewayError::LimitExceeded("x".into()),
            GatewayError::BodyTooLarge { max: 1 },
            GatewayError::BodyTimeout { secs: 1.5 },
            GatewayError::UpstreamTimeout,
            GatewayError::UpstreamDeadline,
            GatewayError::UpstreamStream("x".into()),
            GatewayError::TooManyConnections,
            GatewayError::StoreUnavailable("x".into()),
            GatewayError::Unauthorized {
                message: "x".into(),
            },
            GatewayError::RoundTripLimit("x".into()),
            GatewayError::NotFound {
                code: "toolmend_no_tools",
                message: "x".into(),
            },
            GatewayError::Flooded {
                message: "x".into(),
                retry_after: None,
                ends_run: false,
                outage: false,
                headers: Vec::new(),
            },
            GatewayError::Flooded {
                message: "x".into(),
                retry_after: None,
                ends_run: false,
                outage: true,
                headers: Vec::new(),
            },
        ] {
            let body = e.body();
            let mut keys: Vec<&String> = body["error"].as_object().unwrap().keys().collect();
            keys.sort();
            assert_eq!(keys, ["code", "message", "param", "type"]);
            assert_eq!(body["error"]["code"], e.code());
        }
        assert_eq!(
            GatewayError::BodyTimeout { secs: 1.5 }.to_string(),
            "the request body did not arrive within limits.body_timeout_secs (1.5 s)"
        );
    }
}
