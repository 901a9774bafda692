//! Request plumbing every front shares: the body read within its bounds, the request id,
//! a panicking handler answered in OpenAI's shape, and `x-toolmend-*` headers set.

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
};

use crate::{config::Limits, metrics as m, server::error::GatewayError};

/// One request of a front, the part every front does alike: the request id (the
/// client's `x-request-id`, or a new one), the body read within `limits`, the handler's
/// answer or its error in OpenAI's shape, and `x-request-id` on whatever goes out.
pub(crate) async fn handle<F, Fut>(
    limits: &Limits,
    mut headers: HeaderMap,
    body: Body,
    handler: F,
) -> (Response, String)
where
    F: FnOnce(HeaderMap, Bytes, String) -> Fut,
    Fut: std::future::Future<Output = Result<Response, GatewayError>>,
{
    let id = request_id(&mut headers);
    // A body declared over the limit is not kept: it is read and discarded (see
    // read_body), then answered 413.
    let mut out = match read_body(limits, &headers, body).await {
        Ok(body) => handler(headers, body, id.clone())
            .await
            .unwrap_or_else(IntoResponse::into_response),
        Err(e) => e.into_response(),
    };
    if let Ok(v) = HeaderValue::from_str(&id) {
        out.headers_mut().insert("x-request-id", v);
    }
    (out, id)
}

/// A body over `limits.max_body_bytes` is read and discarded up to this many bytes (or
/// the limit, when it is larger) before the 413; one declared larger is answered at once.
const DRAIN_MAX: usize = 64 << 20;

/// The request body, read within `limits.body_timeout_secs` and `limits.max_body_bytes`.
/// A body over the limit is still read to its end (discarded, up to [`DRAIN_MAX`] and the
/// same timeout) before the 413 goes out: clients that send the whole body before they
/// read (Python's http.client, httpx) would otherwise meet a reset connection instead of
/// the answer that names the limit.
pub(crate) async fn read_body(
    limits: &Limits,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, GatewayError> {
    use futures::StreamExt as _;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let max = limits.max_body_bytes;
    let drain_max = DRAIN_MAX.max(max);
    if declared.is_some_and(|n| n > drain_max as u64) {
        return Err(GatewayError::BodyTooLarge { max });
    }
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf = bytes::BytesMut::new();
        let mut seen = 0usize;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                GatewayError::invalid(
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
            return Err(GatewayError::BodyTooLarge { max });
        }
        Ok(buf.freeze())
    };
    match tokio::time::timeout(limits.body_timeout(), read).await {
        Ok(r) => r,
        Err(_) if declared.is_some_and(|n| n > max as u64) => {
            Err(GatewayError::BodyTooLarge { max })
        }
        Err(_) => Err(GatewayError::BodyTimeout {
            secs: limits.body_timeout_secs,
        }),
    }
}

/// A request id for logs and the upstream: the client's `x-request-id`, or a new one
/// (then set in `headers`, so the upstream gets it too).
pub(crate) fn request_id(headers: &mut HeaderMap) -> String {
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
        GatewayError::Internal {
            code: "toolmend_internal_error",
            message: "toolmend failed on this request (a bug; the log has the details): \
                      nothing was changed upstream by it, and it may be retried"
                .to_owned(),
        }
        .into_response()
    }
    tower_http::catch_panic::CatchPanicLayer::custom(answer as fn(_) -> _)
}

/// A request body as a JSON object (every front's body is one).
pub(crate) fn json_object(body: &Bytes) -> Result<serde_json::Value, GatewayError> {
    match serde_json::from_slice(body) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        Ok(_) => Err(GatewayError::invalid(
            "invalid_body",
            "the body must be a JSON object",
        )),
        Err(e) => Err(GatewayError::invalid(
            "invalid_json",
            format!("the body is not JSON: {e}"),
        )),
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
