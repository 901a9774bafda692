//! The OpenAI chat-completions front: `POST /v1/chat/completions`, JSON ([`json`]) and
//! SSE ([`sse`]), over the wire helpers in [`wire`]. The request path, the plan of every
//! answer and the round trip through server-side tools are the pipeline's; this front
//! only converts (and asks the upstream again for each round). With server-side tools a
//! stream is read round by round as JSON and its final answer written as SSE
//! ([`sse::replay`]).

pub(crate) mod exchange;
pub(crate) mod json;
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
    let request = http::json_object(&body)?;
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let prepared = exchange(gw, headers, request, started, request_id, stream)?;
    let unchanged = (!prepared.exchange.notes.changed && !prepared.injected && !prepared.replay)
        .then_some(body);
    if prepared.replay {
        let answer = json::answer(prepared.exchange, None).await?;
        return Ok(sse::replay(answer, prepared.include_usage));
    }
    if stream {
        return Ok(sse::respond(prepared.exchange).await);
    }
    json::respond(prepared.exchange, unchanged).await
}

/// A chat-completions request made ready: its exchange, and how it is to be answered.
struct Prepared {
    exchange: Exchange,
    /// The server-side tools' definitions were added to the request.
    injected: bool,
    /// A stream read whole (the round trip) and written as SSE at the end.
    replay: bool,
    /// The client asked for the usage chunk (`stream_options.include_usage`).
    include_usage: bool,
}

/// The request path on a chat-completions body: history checked, server-side tools
/// added, tools compiled, the guard's session found.
fn exchange(
    gw: Arc<Gateway>,
    headers: HeaderMap,
    mut request: Value,
    started: Instant,
    request_id: &str,
    stream: bool,
) -> Result<Prepared, GatewayError> {
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
    let replay = stream && round_trip.is_some();
    let include_usage = replay && wire::unstream(&mut request);
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
    Ok(Prepared {
        exchange,
        injected,
        replay,
        include_usage,
    })
}

/// The whole mended answer to a chat-completions `request` that a translating front
/// made (the Messages front toward a `chat_completions` upstream): the same request
/// path, upstream call, plan, guard and round trip as this front's own JSON answer. The
/// upstream is asked without `stream`.
pub(crate) async fn answer_whole(
    gw: Arc<Gateway>,
    headers: HeaderMap,
    mut request: Value,
    request_id: &str,
) -> Result<json::Answer, GatewayError> {
    let started = Instant::now();
    wire::unstream(&mut request);
    let prepared = exchange(gw, headers, request, started, request_id, false)?;
    json::answer(prepared.exchange, None).await
}

/// The streamed mended answer to a chat-completions `request` that a translating front
/// made: this front's own SSE (with server-side tools, the round trip read whole and
/// replayed), for the translating front to turn into its own events. The usage chunk is
/// asked for.
pub(crate) async fn answer_streamed(
    gw: Arc<Gateway>,
    headers: HeaderMap,
    mut request: Value,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let started = Instant::now();
    request["stream"] = serde_json::json!(true);
    request["stream_options"] = serde_json::json!({"include_usage": true});
    let prepared = exchange(gw, headers, request, started, request_id, true)?;
    if prepared.replay {
        let answer = json::answer(prepared.exchange, None).await?;
        return Ok(sse::replay(answer, true));
    }
    Ok(sse::respond(prepared.exchange).await)
}
