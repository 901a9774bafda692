//! The OpenAI chat-completions front: `POST /v1/chat/completions`, JSON ([`json`]) and
//! SSE ([`sse`]), over the wire helpers in [`wire`]. The request path, the plan of every
//! answer and the round trip through server-side tools are the pipeline's; this front
//! only converts (and asks the upstream again for each round). With server-side tools a
//! stream is read round by round as JSON and its final answer written as SSE
//! ([`sse::replay`]).

pub(crate) mod body;
pub(crate) mod chunk_view;
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

use self::body::Request;
use self::exchange::Exchange;
use crate::pipeline::tools::ToolsError;
use crate::{
    config::UpstreamApi,
    server::{error::GatewayError, http},
    state::Gateway,
    upstreams::Original,
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
    // Its history and tools are read from their bytes: a request that goes up as it came
    // never has them as trees.
    let request = Request::read(&body)?;
    let stream = request.partial().get("stream").and_then(Value::as_bool) == Some(true);
    let prepared = exchange(gw, headers, request, started, request_id, stream, None)?;
    let unchanged = prepared.as_it_came.then_some(body);
    // Boxed: the answer's future is kilobytes, and inlined it would be moved again with
    // every future around this one, up to axum's handler (a few times per request).
    if prepared.replay {
        let answer = Box::pin(json::answer(prepared.exchange, None)).await?;
        return Ok(sse::replay(answer, prepared.include_usage));
    }
    if stream {
        return Ok(sse::respond(prepared.exchange, unchanged).await);
    }
    Box::pin(json::respond(prepared.exchange, unchanged)).await
}

/// A chat-completions request made ready: its exchange, and how it is to be answered.
struct Prepared {
    exchange: Exchange,
    /// The client's body goes upstream as it came: the upstream speaks its API and
    /// nothing changed it (the history, server-side tools, a stream read whole).
    as_it_came: bool,
    /// A stream read whole (the round trip) and written as SSE at the end.
    replay: bool,
    /// The client asked for the usage chunk (`stream_options.include_usage`).
    include_usage: bool,
}

/// The request path on a chat-completions body: history checked, server-side tools
/// added, tools compiled, the guard's session found. `original`: the client's body, when
/// a translating front's client speaks the upstream's own API: it goes up as it came
/// when the history needed no change and nothing was added.
fn exchange(
    gw: Arc<Gateway>,
    headers: HeaderMap,
    mut request: Request,
    started: Instant,
    request_id: &str,
    stream: bool,
    original: Option<Original>,
) -> Result<Prepared, GatewayError> {
    let (history, notes) = wire::prepare_request(&gw.pipeline, &mut request)?;
    // The round trip: the server-side tools' definitions go upstream (the client does not
    // know them), and a stream is read whole, round by round, then written as SSE.
    let round_trip = gw
        .pipeline
        .server_tools
        .as_ref()
        .filter(|s| s.any_server_side());
    let injected = match round_trip {
        Some(st) if gw.config.round_trip.inject => wire::inject_tools(request.tree_mut()?, st),
        _ => false,
    };
    let invalid_tools = |e: ToolsError| GatewayError::invalid("invalid_tools", e.to_string());
    let toolbox = if gw.config.calls.mend {
        match request.deferred("tools") {
            Some(bytes) => match wire::toolbox_of_bytes(&gw.pipeline.tools, bytes) {
                Ok(toolbox) => Some(toolbox),
                Err(Some(e)) => return Err(invalid_tools(e)),
                Err(None) => return Err(request.invalid_json()),
            },
            None => request
                .partial()
                .get("tools")
                .filter(|t| t.is_array())
                .map(|tools| wire::toolbox(&gw.pipeline.tools, tools))
                .transpose()
                .map_err(invalid_tools)?,
        }
    } else {
        // Unread, the tools would go upstream unchecked: read, as the whole body was.
        request.tree_mut()?;
        None
    };
    // An upstream of another API is asked whole and its answer written as SSE.
    let api = gw.upstream.api();
    let replay = stream && (round_trip.is_some() || api != UpstreamApi::ChatCompletions);
    let include_usage = replay && wire::unstream(request.tree_mut()?);
    let as_it_came = api == UpstreamApi::ChatCompletions && !notes.changed && !injected && !replay;
    if !as_it_came {
        // It will be written: its members read into the tree now, once.
        request.tree_mut()?;
    }
    let original = original
        .filter(|o| o.api == api && !notes.changed && !injected)
        .map(|mut o| {
            if let Some(body) = o.body.as_object_mut() {
                body.remove("stream");
            }
            o
        });
    let session = gw
        .pipeline
        .guard
        .as_ref()
        .and_then(|g| g.session(&crate::fronts::session_hints(&headers, request.partial())));
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
        original,
    };
    Ok(Prepared {
        exchange,
        as_it_came,
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
    original: Option<Original>,
) -> Result<json::Answer, GatewayError> {
    let started = Instant::now();
    wire::unstream(&mut request);
    let prepared = exchange(
        gw,
        headers,
        Request::whole(request),
        started,
        request_id,
        false,
        original,
    )?;
    // Boxed, as in [`chat_inner`].
    Box::pin(json::answer(prepared.exchange, None)).await
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
    original: Option<Original>,
) -> Result<Streamed, GatewayError> {
    let started = Instant::now();
    request["stream"] = serde_json::json!(true);
    request["stream_options"] = serde_json::json!({"include_usage": true});
    let prepared = exchange(
        gw,
        headers,
        Request::whole(request),
        started,
        request_id,
        true,
        original,
    )?;
    if prepared.replay {
        let answer = Box::pin(json::answer(prepared.exchange, None)).await?;
        let passed_through = answer.passed_through;
        return Ok(Streamed {
            response: sse::replay(answer, true),
            passed_through,
        });
    }
    Ok(Streamed {
        response: sse::respond(prepared.exchange, None).await,
        passed_through: false,
    })
}

/// A streamed answer for a translating front.
pub(crate) struct Streamed {
    /// The chat front's SSE.
    pub(crate) response: Response,
    /// The client's own body went upstream (an upstream of its API, nothing changed).
    pub(crate) passed_through: bool,
}
