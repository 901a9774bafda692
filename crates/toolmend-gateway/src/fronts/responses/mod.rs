//! The OpenAI Responses front: `POST /v1/responses` (the Codex CLI, the OpenAI Agents SDK,
//! `client.responses.create`), toward any upstream (toward a `responses` one, the
//! client's body passes through when nothing in it changes). As the Messages
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
    config::UpstreamApi,
    fronts::{
        chat_completions,
        translate::{self, LeftOut},
    },
    server::{error::GatewayError, headers, http},
    state::Gateway,
    upstreams::Original,
};

/// The key of the account in a response (and in `response.completed`'s).
pub(crate) const ACCOUNT_KEY: &str = "toolmend";

/// `POST /v1/responses`.
pub(crate) fn routes(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/v1/responses", post(responses))
        .with_state((
            Arc::clone(&gw),
            Arc::new(kept::Kept::new(gw.shared_store.clone())),
        ))
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
    let upstream = gw.upstream.api();
    let same = upstream == UpstreamApi::Responses;
    let convert::ToChat {
        request: mut chat,
        left_out: LeftOut(mut left_out),
        previous,
        instructions,
        ..
    } = convert::request_to_chat_keeping(&request, same)?;
    if let Some(id) = &previous {
        let Some(earlier) = kept.find(id).await? else {
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
            // Reasoning items kept from a Responses upstream go only to one.
            if !same {
                for m in messages.iter_mut().filter_map(Value::as_object_mut) {
                    m.remove("reasoning_items");
                }
            }
        }
    }
    // The client's body goes up as it came when nothing in it changes on the way (a
    // previous response's conversation is the gateway's, unknown upstream: it goes in).
    let original = (same && previous.is_none()).then(|| Original {
        api: upstream,
        body: request.clone(),
    });
    // What a later response continues from: this one's conversation, its instructions
    // left out (`store: false`: nothing kept).
    let keep = (request.get("store").and_then(Value::as_bool) != Some(false)).then(|| {
        let messages = chat["messages"].as_array().map_or(&[][..], Vec::as_slice);
        kept::history_json(
            messages
                .get(usize::from(instructions)..)
                .unwrap_or_default(),
        )
    });
    let id = kept.mint();
    if stream {
        let chat =
            chat_completions::answer_streamed(gw, headers, chat, request_id, original).await?;
        if chat.passed_through {
            left_out.clear();
        }
        let keeping = keep.map(|history| (Arc::clone(&kept), history));
        let mut t = stream::Translator::new(request, left_out.clone()).keeping(id, keeping);
        t.upstream = upstream;
        t.passed_through = chat.passed_through;
        let mut out = translate::stream(chat.response, t);
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
    let mut response = convert::completion_to_response(&completion, &request);
    response["id"] = json!(id);
    if let Some(history) = keep {
        let json = kept::with_answer(history, &completion["choices"][0]["message"]);
        kept.keep(id, json).await;
    }
    let account = answer.account();
    let mut toolmend_headers = answer.headers;
    toolmend_headers.extend(translate::left_out_header(&left_out));
    if let Some(mut a) = account {
        a["translation"] = translation(upstream, answer.passed_through, &left_out);
        response[ACCOUNT_KEY] = a;
    }
    let mut out = Json(response).into_response();
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
    json!({"from": "responses", "to": upstream.name(), "passed_through": passed_through,
        "left_out": left_out})
}
