//! What every transport (the HTTP envelope, MCP over streamable HTTP or stdio) takes and
//! gives: one [`ServiceRequest`] in, a [`Reply`] or a [`TransportError`] out. The SLA
//! timer, the backup tool, shaping and the size budget sit above this seam
//! ([`crate::NetTool`]), so every kind of tool gets them.

use std::time::Duration;

use serde_json::Value;
use toolmend::node::Fault;

/// One call as a tool service sees it.
#[derive(Debug, Clone, Copy)]
pub struct ServiceRequest<'a> {
    /// The tool's name at the service (MCP: the server's name for it).
    pub function: &'a str,
    /// The call id the result will answer (the model's `tool_call_id`).
    pub call_id: &'a str,
    /// One id for every step of the round this call belongs to.
    pub trace_id: &'a str,
    /// Arguments that passed the tool's schema.
    pub arguments: &'a Value,
    /// Give up after this long (per attempt).
    pub timeout: Duration,
}

/// What a service answered, verified.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The tool ran: its data, and the service's own summary line when it sent one.
    Success {
        /// The payload (`data` of the envelope, MCP `structuredContent` or its text).
        data: Value,
        /// The envelope's `message`.
        message: Option<String>,
    },
    /// The tool ran and reported a failure (envelope `status: error`, MCP `isError`):
    /// an error result the model reads, to correct itself.
    Failed {
        /// What the service said.
        message: String,
        /// Anything it sent beside (kept as the artifact).
        data: Option<Value>,
    },
}

/// Notes a transport makes about one exchange (kept as the call's metadata).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExchangeNotes {
    /// Attempts made (1 without retries).
    pub attempts: u32,
    /// The service's clock differed from ours by more than the tolerance (ms).
    pub clock_skew_ms: Option<i64>,
    /// Bytes of the answer as received.
    pub bytes: usize,
    /// The answer held invalid UTF-8, replaced by U+FFFD before it was read.
    pub invalid_utf8: bool,
}

/// Why a service gave no usable answer. Every variant becomes an error result for the
/// call (never data of another call); [`TransportError::kind`] is the metric label.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// No answer in time.
    #[error("the tool service did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The service could not be reached: the call was not sent (connection refused, a
    /// name that does not resolve, an MCP session that could not be started).
    #[error("the tool service could not be reached ({0})")]
    Connect(String),
    /// The exchange broke off after the call was sent (the connection reset or closed
    /// before the answer was read): the call may have run.
    #[error("the connection to the tool service broke off ({0}); the call may have run")]
    Broken(String),
    /// The service answered with an HTTP error status.
    #[error("the tool service answered HTTP {status}{}", reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    Status {
        /// The HTTP status.
        status: u16,
        /// A short reason, only when the body was a JSON error object
        /// ([`toolmend::redact::error_reason`]: cut, redacted); never the raw body.
        reason: Option<String>,
    },
    /// The answer broke the protocol: not JSON, no `status`, a JSON-RPC error, …
    #[error("the tool service broke the protocol: {0}")]
    Protocol(String),
    /// The answer names another call: dropped, never given to the model.
    #[error("the tool service answered for call {got:?}, not this one; the answer was dropped")]
    Dirty {
        /// The id the answer carried.
        got: String,
    },
    /// The answer was larger than the limit.
    #[error("the tool service's answer exceeded {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// A redirect to another host (refused: endpoints come only from the configuration).
    #[error("the tool service redirected to another host ({0}); not followed")]
    Redirect(String),
}

impl TransportError {
    /// A short, bounded label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            TransportError::Timeout(_) => "timeout",
            TransportError::Connect(_) => "connect",
            TransportError::Broken(_) => "broken",
            TransportError::Status { .. } => "status",
            TransportError::Protocol(_) => "protocol",
            TransportError::Dirty { .. } => "dirty",
            TransportError::TooLarge { .. } => "too_large",
            TransportError::Redirect(_) => "redirect",
        }
    }

    /// Worth another attempt (where retries are safe): timeouts, connection failures,
    /// 5xx, 429. A dirty or malformed answer is not retried: the service is broken, not
    /// busy.
    pub fn retryable(&self) -> bool {
        match self {
            TransportError::Timeout(_) | TransportError::Connect(_) | TransportError::Broken(_) => {
                true
            }
            TransportError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// Whose fault: the call's for a service that refused its arguments (HTTP 400, 409,
    /// 422); the tool's otherwise: unavailable when the call was not sent or not taken
    /// (not reached, HTTP 429 and other 4xx, a redirect elsewhere), a timeout, or failed
    /// when it may have run (a 5xx, an exchange broken off, an answer that is unusable,
    /// too large or another call's).
    pub fn fault(&self) -> Fault {
        match self {
            TransportError::Timeout(_) => Fault::Timeout,
            TransportError::Connect(_) | TransportError::Redirect(_) => Fault::Unavailable,
            TransportError::Status { status, .. } => match status {
                400 | 409 | 422 => Fault::Call,
                408 => Fault::Timeout,
                500.. => Fault::Failed,
                _ => Fault::Unavailable,
            },
            TransportError::Broken(_)
            | TransportError::Protocol(_)
            | TransportError::Dirty { .. }
            | TransportError::TooLarge { .. } => Fault::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whose_fault_each_failure_is() {
        let status = |status| TransportError::Status {
            status,
            reason: None,
        };
        for (e, fault) in [
            (status(400), Fault::Call),
            (status(409), Fault::Call),
            (status(422), Fault::Call),
            (status(401), Fault::Unavailable),
            (status(404), Fault::Unavailable),
            (status(429), Fault::Unavailable),
            (status(408), Fault::Timeout),
            (status(500), Fault::Failed),
            (status(503), Fault::Failed),
            (
                TransportError::Connect("connection refused".into()),
                Fault::Unavailable,
            ),
            (TransportError::Redirect("x".into()), Fault::Unavailable),
            (
                TransportError::Timeout(Duration::from_millis(5)),
                Fault::Timeout,
            ),
            (TransportError::Broken("reset".into()), Fault::Failed),
            (TransportError::Protocol("x".into()), Fault::Failed),
            (TransportError::Dirty { got: "c".into() }, Fault::Failed),
            (TransportError::TooLarge { limit: 1 }, Fault::Failed),
        ] {
            assert_eq!(e.fault(), fault, "{e:?}");
        }
        assert_eq!(
            TransportError::Status {
                status: 503,
                reason: Some("database unavailable".into())
            }
            .to_string(),
            "the tool service answered HTTP 503: database unavailable"
        );
        assert_eq!(
            status(500).to_string(),
            "the tool service answered HTTP 500"
        );
    }
}
