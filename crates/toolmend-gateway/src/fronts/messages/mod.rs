//! The Anthropic Messages front: `POST /v1/messages` and `POST /v1/messages/count_tokens`
//! (Claude Code and the Anthropic SDKs, pointed here with `ANTHROPIC_BASE_URL`), toward a
//! `chat_completions` upstream. The request is translated ([`convert`]) into the chat
//! request the chat front answers whole (the same request path, plan, guard, re-ask and
//! round trip: [`chat_completions::answer_whole`]), and the mended completion is
//! translated back into a Messages message. A stream is the chat front's mended SSE
//! turned into Anthropic's events as it comes ([`stream`]). Errors go out in Anthropic's
//! shape,
//! `{"type": "error", "error": {"type", "message"}}`.

pub(crate) mod convert;
pub(crate) mod stream;

use std::sync::Arc;

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

use crate::{
    fronts::chat_completions,
    server::{
        error::{ErrorCode, GatewayError},
        headers, http,
    },
    state::Gateway,
};

/// The key of the account in a message and in the stream's `message_delta`.
pub(crate) const ACCOUNT_KEY: &str = "toolmend";

/// The header naming what the translation left out.
const LEFT_OUT_HEADER: &str = "x-toolmend-left-out";

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
    reshaped(out).await
}

async fn count_tokens(State(gw): State<Arc<Gateway>>, headers: HeaderMap, body: Body) -> Response {
    let (out, _) = http::handle(&gw.config.limits, headers, body, |_, b, _| async move {
        let request = parse(&b)?;
        let chat = convert::request_to_chat(&request)?.request;
        // An estimate (a chat upstream has no such route): four bytes a token over the
        // messages and tools as they would go upstream.
        let bytes = chat["messages"].to_string().len()
            + chat.get("tools").map_or(0, |t| t.to_string().len());
        Ok(Json(json!({"input_tokens": bytes.div_ceil(4)})).into_response())
    })
    .await;
    reshaped(out).await
}

fn parse(body: &Bytes) -> Result<Value, GatewayError> {
    match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
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

async fn answer(
    gw: Arc<Gateway>,
    headers: HeaderMap,
    body: Bytes,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let request = parse(&body)?;
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let convert::ToChat {
        request: chat,
        mut left_out,
    } = convert::request_to_chat(&request)?;
    let headers = chat_headers(headers);
    if stream {
        let chat = chat_completions::answer_streamed(gw, headers, chat, request_id).await?;
        let mut out = stream::translate(chat, left_out.clone());
        if !left_out.is_empty()
            && let Ok(v) = HeaderValue::from_str(&left_out.join(", "))
        {
            out.headers_mut().insert(LEFT_OUT_HEADER, v);
        }
        return Ok(out);
    }
    let answer = chat_completions::answer_whole(gw, headers, chat, request_id).await?;
    if !answer.response["choices"].is_array() {
        return Err(GatewayError::UpstreamInvalidJson(
            "the upstream answer is not a chat completion (no 'choices')".to_owned(),
        ));
    }
    let mut message = convert::completion_to_message(&answer.response, &mut left_out);
    let mut toolmend_headers = answer.headers;
    if !left_out.is_empty() {
        toolmend_headers.push((LEFT_OUT_HEADER, left_out.join(", ")));
    }
    let account = answer.account.map(|mut a| {
        a["translation"] = json!({"from": "messages", "to": "chat_completions",
            "left_out": left_out});
        a
    });
    if let Some(a) = account {
        message[ACCOUNT_KEY] = a;
    }
    let mut out = Json(message).into_response();
    headers::set_headers(out.headers_mut(), toolmend_headers);
    Ok(out)
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

/// An error answer in Anthropic's shape: `{"type": "error", "error": {"type", "message"}}`,
/// the status and headers kept (`retry-after`, `x-should-retry`), toolmend's `code`
/// beside the message. An upstream's own error keeps its status and its message.
async fn reshaped(out: Response) -> Response {
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
    let body = json!({"type": "error", "error": {"type": error_type(parts.status),
        "message": message, "code": code}});
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// Anthropic's `error.type` for a status.
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 408 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 | 503 => "overloaded_error",
        _ => "api_error",
    }
}
