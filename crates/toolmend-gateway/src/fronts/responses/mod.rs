//! The OpenAI Responses front: `POST /v1/responses` (the Codex CLI, the OpenAI Agents SDK,
//! `client.responses.create`), toward a `chat_completions` upstream. As the Messages
//! front: the request is translated ([`convert`]) into the chat request the chat front
//! answers (the same request path, plan, guard, re-ask and round trip), and its mended
//! completion translated back into a Responses object; a stream is the chat front's
//! mended SSE turned into the Responses events as it comes ([`stream`]). Errors are
//! OpenAI's shape, as for chat completions.

pub(crate) mod convert;
pub(crate) mod kept;
pub(crate) mod stream;

use std::sync::Arc;

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::State,
    http::HeaderMap,
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

use crate::{
    fronts::{
        chat_completions,
        translate::{self, LeftOut},
    },
    server::{error::GatewayError, headers, http},
    state::Gateway,
};

/// The key of the account in a response (and in `response.completed`'s).
pub(crate) const ACCOUNT_KEY: &str = "toolmend";

/// `POST /v1/responses`.
pub(crate) fn routes(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/v1/responses", post(responses))
        .with_state((gw, Arc::new(kept::Kept::default())))
}

async fn responses(
    State((gw, kept)): State<(Arc<Gateway>, Arc<kept::Kept>)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let gw2 = Arc::clone(&gw);
    let (out, id) = http::handle(&gw.config.limits, headers, body, |h, b, id| async move {
        answer(gw2, kept, h, b, &id).await
    })
    .await;
    tracing::debug!(request_id = %id, status = out.status().as_u16(), "responses");
    out
}

async fn answer(
    gw: Arc<Gateway>,
    kept: Arc<kept::Kept>,
    headers: HeaderMap,
    body: Bytes,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let request = http::json_object(&body)?;
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let convert::ToChat {
        request: mut chat,
        left_out: LeftOut(left_out),
        previous,
        instructions,
    } = convert::request_to_chat(&request)?;
    if let Some(id) = &previous {
        let Some(earlier) = kept.get(id) else {
            return Err(GatewayError::NotFound {
                code: "previous_response_not_found",
                message: format!(
                    "Previous response with id '{id}' not found: the gateway keeps the \
                     responses it served for {} min, the latest {} (send the whole \
                     conversation as 'input' instead)",
                    kept::TTL.as_secs() / 60,
                    kept::MAX_RESPONSES
                ),
            });
        };
        if let Some(messages) = chat["messages"].as_array_mut() {
            let at = usize::from(instructions);
            messages.splice(at..at, earlier);
        }
    }
    // What a later response continues from: this one's conversation, its instructions
    // left out (`store: false`: nothing kept).
    let keep = (request.get("store").and_then(Value::as_bool) != Some(false)).then(|| {
        let messages = chat["messages"].as_array().cloned().unwrap_or_default();
        messages[usize::from(instructions)..].to_vec()
    });
    let id = kept.mint();
    if stream {
        let chat = chat_completions::answer_streamed(gw, headers, chat, request_id).await?;
        let keeping = keep.map(|history| (Arc::clone(&kept), history));
        let mut out = stream::translate(chat, request, left_out.clone(), id, keeping);
        headers::set_headers(out.headers_mut(), translate::left_out_header(&left_out));
        return Ok(out);
    }
    let answer = chat_completions::answer_whole(gw, headers, chat, request_id).await?;
    if !answer.response["choices"].is_array() {
        return Err(GatewayError::UpstreamInvalidJson(
            "the upstream answer is not a chat completion (no 'choices')".to_owned(),
        ));
    }
    let mut response = convert::completion_to_response(&answer.response, &request);
    response["id"] = json!(id);
    if let Some(mut history) = keep {
        history.push(answer.response["choices"][0]["message"].clone());
        kept.put(id, history);
    }
    let mut toolmend_headers = answer.headers;
    toolmend_headers.extend(translate::left_out_header(&left_out));
    if let Some(mut a) = answer.account {
        a["translation"] = json!({"from": "responses", "to": "chat_completions",
            "left_out": left_out});
        response[ACCOUNT_KEY] = a;
    }
    let mut out = Json(response).into_response();
    headers::set_headers(out.headers_mut(), toolmend_headers);
    Ok(out)
}
