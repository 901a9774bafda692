//! The OpenAI chat-completions front: `POST /v1/chat/completions`, JSON ([`json`]) and
//! SSE ([`sse`]), over the wire helpers in [`wire`]. The request path, the plan of every
//! answer and the round trip through server-side tools are the pipeline's; this front
//! only converts (and asks the upstream again for each round). With server-side tools a
//! stream is read round by round as JSON and its final answer written as SSE
//! ([`sse::replay`]).

pub(crate) mod exchange;
mod json;
pub(crate) mod sse;
pub(crate) mod wire;

use std::{sync::Arc, time::Instant};

/// This front's name in events and logs.
pub(crate) const FRONT: &str = "chat_completions";

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::HeaderMap,
    response::Response,
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

async fn chat(State(gw): State<Arc<Gateway>>, headers: HeaderMap, body: Body) -> Response {
    let gw2 = Arc::clone(&gw);
    let (out, id) = http::handle(
        &gw.config.limits,
        headers,
        body,
        |headers, body, id| async move { chat_inner(gw2, headers, body, &id).await },
    )
    .await;
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
    request_id: &str,
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
    // The round trip: the server-side tools' definitions go upstream (the client does not
    // know them), and a stream is read whole, round by round, then written as SSE.
    let round_trip = gw
        .pipeline
        .server_tools
        .as_ref()
        .filter(|s| s.any_server_side());
    let injected = match round_trip {
        Some(st) if gw.config.round_trip.inject => wire::inject_tools(&mut request, st),
        _ => false,
    };
    let toolbox = match request.get("tools").filter(|t| t.is_array()) {
        Some(tools) if gw.config.calls.mend => Some(
            wire::toolbox(&gw.pipeline.tools, tools)
                .map_err(|e| GatewayError::invalid("invalid_tools", e.to_string()))?,
        ),
        _ => None,
    };
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let replay = stream && round_trip.is_some();
    let include_usage = replay && wire::unstream(&mut request);
    let unchanged = (!notes.changed && !injected && !replay).then_some(body);
    let session = gw
        .pipeline
        .guard
        .as_ref()
        .and_then(|g| g.session(&crate::fronts::session_hints(&headers, &request)));
    let exchange = Exchange {
        gw,
        headers,
        request,
        history,
        toolbox,
        notes,
        started,
        session,
        request_id: request_id.to_owned(),
    };
    if replay {
        let answer = json::answer(exchange, None).await?;
        return Ok(sse::replay(answer, include_usage));
    }
    if stream {
        return Ok(sse::respond(exchange).await);
    }
    json::respond(exchange, unchanged).await
}
