//! The JSON answer (`stream` off): the completion fetched whole, each choice's message
//! planned by the pipeline (choice 0 also through the resolve chain), written back only
//! where something changed; the upstream's own bytes go out when nothing did.

use std::time::{Duration, Instant};

use axum::{
    body::Bytes,
    http::header,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use toolmend::protocol::AssistantMessage;

use crate::{
    fronts::chat_completions::{exchange::Exchange, wire},
    metrics as m,
    pipeline::{plan::plan_message, report::Summary},
    server::{error::GatewayError, http},
};

/// The JSON answer to `ex`. `unchanged`: the client's body when the request path changed
/// nothing in it (sent as it came, no second serialization).
pub(crate) async fn respond(
    ex: Exchange,
    unchanged: Option<Bytes>,
) -> Result<Response, GatewayError> {
    let gw = &ex.gw;
    let pipeline = &gw.pipeline;
    let mut upstream_time = Duration::ZERO;
    let t = Instant::now();
    let outgoing = match unchanged {
        Some(body) => gw.upstream.post_bytes(wire::PATH, &ex.headers, body),
        None => gw.upstream.post(wire::PATH, &ex.headers, &ex.request),
    };
    let raw = gw.upstream.fetch(outgoing).await?;
    let mut response: Value = serde_json::from_slice(&raw)
        .map_err(|e| GatewayError::UpstreamInvalidJson(e.to_string()))?;
    let mut response_changed = false;
    upstream_time += t.elapsed();
    let mut summary = Summary::default();
    // Only a completion's `choices` list is mended; any other JSON passes as it came (an
    // array or a string at the top used to panic on the way back).
    if let Some(toolbox) = &ex.toolbox
        && let Some(choices) = response
            .get_mut("choices")
            .and_then(Value::as_array_mut)
            .map(std::mem::take)
    {
        let mut mended_choices = Vec::with_capacity(choices.len());
        for (i, mut choice) in choices.into_iter().enumerate() {
            let Ok(message) = serde_json::from_value::<AssistantMessage>(choice["message"].clone())
            else {
                mended_choices.push(choice);
                continue;
            };
            let finish = choice["finish_reason"].as_str();
            let mut mended = plan_message(&message, &ex.history, toolbox, &pipeline.plan, finish);
            if i == 0 {
                let (m2, took) = pipeline.resolve(&ex.history, toolbox, mended, &ex).await;
                let t = Instant::now();
                mended = pipeline
                    .guard(
                        ex.session(),
                        &ex.history,
                        toolbox,
                        m2,
                        &ex,
                        &mut summary.guard,
                    )
                    .await?;
                // A guard re-ask is time upstream (the check itself is ours).
                if summary.guard.re_asks > 0 {
                    upstream_time += t.elapsed();
                }
                upstream_time += took;
            }
            summary.add(&mended, toolbox, &pipeline.labels);
            if mended.changed {
                choice["message"] = serde_json::to_value(&mended.message).unwrap_or(Value::Null);
                response_changed = true;
            }
            let finish_before = choice["finish_reason"].clone();
            let has_calls = mended
                .message
                .tool_calls
                .as_ref()
                .is_some_and(|c| !c.is_empty());
            if let Some(f) = wire::finish_reason(
                choice["finish_reason"].as_str(),
                has_calls,
                mended.calls.iter().any(|c| c.from_text),
            ) {
                choice["finish_reason"] = json!(f);
            }
            response_changed |= choice["finish_reason"] != finish_before;
            mended_choices.push(choice);
        }
        response["choices"] = Value::Array(mended_choices);
    }
    m::request(
        "ok",
        ex.started.elapsed().saturating_sub(upstream_time),
        upstream_time,
    );
    // Nothing mended: the upstream's own bytes go out (no second serialization).
    let mut out = if response_changed {
        axum::Json(response).into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], raw).into_response()
    };
    http::set_headers(out.headers_mut(), summary.headers(&ex.notes));
    Ok(out)
}
