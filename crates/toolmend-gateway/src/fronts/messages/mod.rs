//! The Anthropic Messages front: `POST /v1/messages` and `POST /v1/messages/count_tokens`
//! (Claude Code and the Anthropic SDKs, pointed here with `ANTHROPIC_BASE_URL`), toward
//! any upstream (toward a `messages` one, the client's body passes through when its
//! history needed no change: `upstreams::Original`). The request is translated ([`convert`]) into the chat
//! request the chat front answers whole (the same request path, plan, guard, re-ask and
//! round trip: [`chat_completions::answer_whole`]), and the mended completion is
//! translated back into a Messages message. A stream is the chat front's mended SSE
//! turned into Anthropic's events as it comes ([`stream`]). Errors go out in Anthropic's
//! shape, `{"type": "error", "error": {"type", "message"}}`: `server::access` reshapes
//! every error of these routes, its own refusals (a missing client key) included.

pub(crate) mod convert;
pub(crate) mod stream;

use std::sync::Arc;

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

use crate::{
    config::UpstreamApi,
    fronts::{
        chat_completions,
        translate::{self, LeftOut},
    },
    server::{error::GatewayError, headers, http},
    state::Gateway,
    upstreams::Original,
};

/// The key of the account in a message and in the stream's `message_delta`.
pub(crate) const ACCOUNT_KEY: &str = "toolmend";

/// `POST /v1/messages`, `POST /v1/messages/count_tokens`.
pub(crate) fn routes(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .with_state(gw)
}

async fn messages(State(gw): State<Arc<Gateway>>, headers: HeaderMap, body: Body) -> Response {
    let gw2 = Arc::clone(&gw);
    let (out, id) = http::handle(&gw.config.limits, headers, body, |h, b, id| async move {
        answer(gw2, h, b, &id).await
    })
    .await;
    tracing::debug!(request_id = %id, status = out.status().as_u16(), "messages");
    out
}

async fn count_tokens(State(gw): State<Arc<Gateway>>, headers: HeaderMap, body: Body) -> Response {
    let gw2 = Arc::clone(&gw);
    let (out, _) = http::handle(&gw.config.limits, headers, body, |h, b, _| async move {
        let request = http::json_object(&b)?;
        // A Messages upstream counts them itself: the body goes as it came.
        if gw2.upstream.api() == UpstreamApi::Messages {
            return Ok(gw2
                .upstream
                .pass_post("/messages/count_tokens", &h, b)
                .await?
                .into_response());
        }
        let chat = convert::request_to_chat(&request)?.request;
        // An estimate (a chat upstream has no such route): four bytes a token over the
        // messages and tools as they would go upstream.
        let bytes = chat["messages"].to_string().len()
            + chat.get("tools").map_or(0, |t| t.to_string().len());
        Ok(Json(json!({"input_tokens": bytes.div_ceil(4)})).into_response())
    })
    .await;
    out
}

async fn answer(
    gw: Arc<Gateway>,
    headers: HeaderMap,
    body: Bytes,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let request = http::json_object(&body)?;
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let upstream = gw.upstream.api();
    let same = upstream == UpstreamApi::Messages;
    let convert::ToChat {
        request: chat,
        left_out: LeftOut(mut left_out),
        ..
    } = convert::request_to_chat_keeping(&request, same)?;
    let original = same.then(|| Original {
        api: upstream,
        body: request,
    });
    let headers = chat_headers(headers);
    if stream {
        let chat =
            chat_completions::answer_streamed(gw, headers, chat, request_id, original).await?;
        if chat.passed_through {
            left_out.clear();
        }
        let mut out = stream::translate(
            chat.response,
            upstream,
            chat.passed_through,
            left_out.clone(),
        );
        headers::set_headers(out.headers_mut(), translate::left_out_header(&left_out));
        return Ok(out);
    }
    let mut answer =
        chat_completions::answer_whole(gw, headers, chat, request_id, original).await?;
    let completion = answer.take_response()?;
    if answer.passed_through {
        left_out.clear();
    }
    if !completion["choices"].is_array() {
        return Err(GatewayError::UpstreamInvalidJson(
            "the upstream answer is not a chat completion (no 'choices')".to_owned(),
        ));
    }
    let mut message = convert::completion_to_message(&completion, &mut left_out);
    let account = answer.account();
    let mut toolmend_headers = answer.headers;
    toolmend_headers.extend(translate::left_out_header(&left_out));
    let account = account.map(|mut a| {
        a["translation"] = translation(upstream, answer.passed_through, &left_out);
        a
    });
    if let Some(a) = account {
        message[ACCOUNT_KEY] = a;
    }
    let mut out = Json(message).into_response();
    headers::set_headers(out.headers_mut(), toolmend_headers);
    Ok(out)
}

/// The account's `translation`: from this API to the upstream's, whether the client's
/// body went up as it came, and what had no place on the way.
pub(crate) fn translation(
    upstream: UpstreamApi,
    passed_through: bool,
    left_out: &[String],
) -> Value {
    json!({"from": "messages", "to": upstream.name(), "passed_through": passed_through,
        "left_out": left_out})
}

/// The client's headers as a chat upstream takes them: an Anthropic client's `x-api-key`
/// sent on as `Authorization: Bearer` (when it sent no `Authorization`).
fn chat_headers(mut headers: HeaderMap) -> HeaderMap {
    if !headers.contains_key(header::AUTHORIZATION)
        && let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok())
        && let Ok(v) = HeaderValue::from_str(&format!("Bearer {key}"))
    {
        headers.insert(header::AUTHORIZATION, v);
    }
    headers
}
