//! The OpenAI chat-completions front: `POST /v1/chat/completions`, JSON ([`json`]) and
//! SSE ([`sse`]), over the wire helpers in [`wire`]. The request path and the plan of
//! every answer are the pipeline's; this front only converts.

pub(crate) mod exchange;
mod json;
pub(crate) mod sse;
pub(crate) mod wire;

use std::{sync::Arc, time::Instant};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, HeaderValue},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::Value;

use self::exchange::Exchange;
use crate::{
    server::{error::GatewayError, http},
    state::Gateway,
};

/// `POST /v1/chat/completions`.
pub(crate) fn routes(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(gw)
}

async fn chat(State(gw): State<Arc<Gateway>>, mut headers: HeaderMap, body: Body) -> Response {
    let id = http::request_id(&mut headers);
    // A body declared over the limit is not kept: it is read and discarded (see
    // read_body), then answered 413.
    let mut out = match http::read_body(&gw.config.limits, &headers, body).await {
        Ok(body) => match chat_inner(gw, headers, body).await {
            Ok(r) => r,
            Err(e) => e.into_response(),
        },
        Err(e) => e.into_response(),
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

async fn chat_inner(
    gw: Arc<Gateway>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, GatewayError> {
    let started = Instant::now();
    let mut request: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return Err(GatewayError::invalid(
                "invalid_body",
                "the body must be a JSON object",
            ));
        }
        Err(e) => {
            return Err(GatewayError::invalid(
                "invalid_json",
                format!("the body is not JSON: {e}"),
            ));
        }
    };
    let (history, notes) = wire::prepare(&gw.pipeline, &mut request)?;
    let toolbox = match request.get("tools").filter(|t| t.is_array()) {
        Some(tools) if gw.config.calls.mend => Some(
            gw.pipeline
                .tools
                .get(tools)
                .map_err(|e| GatewayError::invalid("invalid_tools", e.to_string()))?,
        ),
        _ => None,
    };
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let unchanged = (!notes.changed).then_some(body);
    let session = gw
        .pipeline
        .guard
        .as_ref()
        .and_then(|g| g.session(&headers, &request));
    let exchange = Exchange {
        gw,
        headers,
        request,
        history,
        toolbox,
        notes,
        started,
        session,
    };
    if stream {
        return Ok(sse::respond(exchange).await);
    }
    json::respond(exchange, unchanged).await
}
