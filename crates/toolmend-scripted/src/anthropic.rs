//! Anthropic's Messages API side of the contract (`POST /v1/messages`): the request
//! checks its documentation and its servers' answers give, with their error body and
//! wording (`{"type": "error", "error": {"type": "invalid_request_error", "message":
//! "messages.N…: …"}}`), and the reply as a Messages message, JSON or its named SSE
//! events. Thinking blocks are signed; a signature this provider did not give for that
//! text is refused, as Anthropic refuses a changed thinking block.

use std::{collections::HashSet, convert::Infallible};

use axum::{
    body::Body,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use toolmend::conversation::AssistantMessage;

use crate::{pieces, seal};

/// An error in Anthropic's shape.
pub(crate) fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message},
        "request_id": "req_scripted"});
    (status, axum::Json(body)).into_response()
}

/// A refusal: the response to give (boxed: it is large, and the rare path).
pub(crate) type Refusal = Box<Response>;

fn refuse(message: impl Into<String>) -> Refusal {
    Box::new(error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        &message.into(),
    ))
}

/// The top-level fields the API takes; any other is refused.
const FIELDS: [&str; 20] = [
    "model",
    "messages",
    "max_tokens",
    "system",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "thinking",
    "service_tier",
    "container",
    "mcp_servers",
    "context_management",
    "output_config",
    "output_format",
    "inference_geo",
];

/// The signature this provider gives a thinking block with `text`.
pub(crate) fn signature(text: &str) -> String {
    format!("scripted-sig-{:016x}", seal(text))
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len()) && valid_id(name)
}

/// Refuses what the Messages API refuses.
pub(crate) fn validate(request: &Value) -> Result<(), Refusal> {
    let Some(obj) = request.as_object() else {
        return Err(refuse("Input should be a valid dictionary"));
    };
    for key in obj.keys() {
        if !FIELDS.contains(&key.as_str()) {
            return Err(refuse(format!("{key}: Extra inputs are not permitted")));
        }
    }
    for key in ["model", "max_tokens", "messages"] {
        if obj.get(key).is_none_or(Value::is_null) {
            return Err(refuse(format!("{key}: Field required")));
        }
    }
    if !obj["model"].is_string() {
        return Err(refuse("model: Input should be a valid string"));
    }
    if obj["max_tokens"].as_u64().is_none_or(|n| n < 1) {
        return Err(refuse(
            "max_tokens: Input should be greater than or equal to 1",
        ));
    }
    match obj.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) if blocks.iter().all(|b| b["type"] == "text") => {}
        Some(_) => return Err(refuse("system: Input should be a valid string")),
    }
    let mut tool_names = HashSet::new();
    for (i, t) in obj
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = t["name"].as_str().unwrap_or_default();
        let custom = t["type"].is_null() || t["type"] == "custom";
        if custom && !valid_name(name) {
            return Err(refuse(format!(
                "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            )));
        }
        if custom && !t["input_schema"].is_object() {
            return Err(refuse(format!(
                "tools.{i}.custom.input_schema: Field required"
            )));
        }
        if !tool_names.insert(name.to_owned()) {
            return Err(refuse("tools: Tool names must be unique."));
        }
    }
    let Some(messages) = obj["messages"].as_array() else {
        return Err(refuse("messages: Input should be a valid list"));
    };
    if messages.is_empty() {
        return Err(refuse("messages: at least one message is required"));
    }
    check_turns(messages, !tool_names.is_empty())
}

/// The conversation's rules: roles, blocks, every `tool_use` answered by a `tool_result`
/// at the start of the next message, no result without its call, ids unique.
fn check_turns(messages: &[Value], has_tools: bool) -> Result<(), Refusal> {
    let mut seen_ids = HashSet::new();
    // The calls of the previous assistant turn, waiting for their results.
    let mut waiting: Vec<String> = Vec::new();
    let mut any_tool_block = false;
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        if role != "user" && role != "assistant" {
            return Err(refuse(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            )));
        }
        let blocks: Vec<Value> = match &m["content"] {
            Value::String(s) if s.is_empty() && i + 1 < messages.len() => {
                return Err(refuse(format!(
                    "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
                )));
            }
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(b) => b.clone(),
            _ => {
                return Err(refuse(format!(
                    "messages.{i}.content: Input should be a valid list"
                )));
            }
        };
        // The results this message gives, at its start.
        let mut leading_results = Vec::new();
        let mut calls = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let kind = b["type"].as_str().unwrap_or_default();
            match (role, kind) {
                (_, "text") => {
                    if b["text"].as_str().is_none_or(str::is_empty) {
                        return Err(refuse("messages: text content blocks must be non-empty"));
                    }
                }
                ("user", "image" | "document" | "search_result") => {}
                ("user", "tool_result") => {
                    any_tool_block = true;
                    let id = b["tool_use_id"].as_str().unwrap_or_default();
                    if !waiting.iter().any(|w| w == id) {
                        return Err(refuse(format!(
                            "messages.{i}.content.{j}: unexpected `tool_use_id` found in \
                             `tool_result` blocks: {id}. Each `tool_result` block must have a \
                             corresponding `tool_use` block in the previous message."
                        )));
                    }
                    if leading_results.len() != j {
                        return Err(refuse(format!(
                            "messages.{i}: Did not find {} `tool_result` block(s) at the \
                             beginning of this message. Messages following `tool_use` blocks \
                             must begin with a matching number of `tool_result` blocks.",
                            waiting.len()
                        )));
                    }
                    leading_results.push(id.to_owned());
                }
                ("assistant", "tool_use") => {
                    any_tool_block = true;
                    let id = b["id"].as_str().unwrap_or_default();
                    if !valid_id(id) {
                        return Err(refuse(format!(
                            "messages.{i}.content.{j}.tool_use.id: String should match pattern \
                             '^[a-zA-Z0-9_-]+$'"
                        )));
                    }
                    if !b["input"].is_object() {
                        return Err(refuse(format!(
                            "messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
                        )));
                    }
                    if !seen_ids.insert(id.to_owned()) {
                        return Err(refuse(format!(
                            "messages.{i}.content.{j}: `tool_use` ids must be unique"
                        )));
                    }
                    calls.push(id.to_owned());
                }
                ("assistant", "thinking") => {
                    let text = b["thinking"].as_str().unwrap_or_default();
                    match b["signature"].as_str() {
                        None | Some("") => {
                            return Err(refuse(format!(
                                "messages.{i}.content.{j}.thinking.signature: Field required"
                            )));
                        }
                        Some(s) if s != signature(text) => {
                            return Err(refuse(format!(
                                "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                            )));
                        }
                        Some(_) => {}
                    }
                }
                (
                    "assistant",
                    "redacted_thinking" | "server_tool_use" | "web_search_tool_result",
                ) => {}
                _ => {
                    return Err(refuse(format!(
                        "messages.{i}.content.{j}.type: Input tag '{kind}' found using 'type' \
                         does not match any of the expected tags"
                    )));
                }
            }
        }
        if !waiting.is_empty() {
            let missing: Vec<&str> = waiting
                .iter()
                .filter(|w| !leading_results.contains(w))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(refuse(format!(
                    "messages.{}: `tool_use` ids were found without `tool_result` blocks \
                     immediately after: {}. Each `tool_use` block must have a corresponding \
                     `tool_result` block in the next message.",
                    i - 1,
                    missing.join(", ")
                )));
            }
        }
        waiting = calls;
    }
    if !waiting.is_empty() {
        // The last message calls tools: it must be the assistant's prefill, which a
        // `tool_use` cannot be.
        return Err(refuse(format!(
            "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately \
             after: {}. Each `tool_use` block must have a corresponding `tool_result` block in \
             the next message.",
            messages.len() - 1,
            waiting.join(", ")
        )));
    }
    if any_tool_block && !has_tools {
        return Err(refuse(
            "Requests which include `tool_use` or `tool_result` blocks must define tools.",
        ));
    }
    Ok(())
}

/// The reply's content blocks: its reasoning as a signed `thinking` block, its text,
/// each call whose arguments are a JSON object a `tool_use` block; a call whose
/// arguments are not (a Messages `input` is always an object) stays in the text as the
/// model wrote it, `<tool_call>` and all, as a model server does when its parser fails.
fn blocks(reply: &AssistantMessage, n: u64) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(r) = reply.reasoning.as_deref().filter(|r| !r.is_empty()) {
        out.push(json!({"type": "thinking", "thinking": r, "signature": signature(r)}));
    }
    let mut text = reply.text().unwrap_or_default();
    let mut uses = Vec::new();
    for (k, c) in reply.tool_calls.iter().flatten().enumerate() {
        match serde_json::from_str::<Value>(&c.arguments) {
            Ok(input @ Value::Object(_)) => {
                let id =
                    c.id.clone()
                        .unwrap_or_else(|| format!("toolu_scripted_{n}_{k}"));
                uses.push(json!({"type": "tool_use", "id": id, "name": c.name, "input": input}));
            }
            _ => {
                text.push_str(&format!(
                    "<tool_call>\n{{\"name\": \"{}\", \"arguments\": {}}}\n</tool_call>",
                    c.name, c.arguments
                ));
            }
        }
    }
    if !text.is_empty() {
        out.push(json!({"type": "text", "text": text}));
    }
    out.extend(uses);
    out
}

/// The reply as a Messages message, or its events when the request streams.
pub(crate) fn message(request: &Value, reply: &AssistantMessage, n: u64) -> Response {
    let content = blocks(reply, n);
    let stop_reason = if content.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    let input_tokens = request["messages"].to_string().len().div_ceil(4);
    let output_tokens = Value::Array(content.clone()).to_string().len().div_ceil(4);
    let id = format!("msg_scripted_{n}");
    let model = request["model"].clone();
    if request["stream"].as_bool() != Some(true) {
        return axum::Json(json!({"id": id, "type": "message", "role": "assistant",
            "model": model, "content": content, "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}))
        .into_response();
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
    )];
    events.push(("ping", json!({"type": "ping"})));
    for (index, b) in content.iter().enumerate() {
        let delta = |d: Value| {
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": d}),
            )
        };
        let (start, deltas): (Value, Vec<_>) = match b["type"].as_str() {
            Some("thinking") => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                pieces(b["thinking"].as_str().unwrap_or_default(), 8)
                    .into_iter()
                    .map(|p| delta(json!({"type": "thinking_delta", "thinking": p})))
                    .chain(std::iter::once(delta(
                        json!({"type": "signature_delta", "signature": b["signature"]}),
                    )))
                    .collect(),
            ),
            Some("text") => (
                json!({"type": "text", "text": ""}),
                pieces(b["text"].as_str().unwrap_or_default(), 8)
                    .into_iter()
                    .map(|p| delta(json!({"type": "text_delta", "text": p})))
                    .collect(),
            ),
            _ => (
                json!({"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}),
                std::iter::once(delta(
                    json!({"type": "input_json_delta", "partial_json": ""}),
                ))
                .chain(
                    pieces(&b["input"].to_string(), 8)
                        .into_iter()
                        .map(|p| delta(json!({"type": "input_json_delta", "partial_json": p}))),
                )
                .collect(),
            ),
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.extend(deltas);
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let frames: Vec<Result<String, Infallible>> = events
        .iter()
        .map(|(name, data)| Ok(format!("event: {name}\ndata: {data}\n\n")))
        .collect();
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(futures::stream::iter(frames)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    async fn refusal(messages: Value, extra: Value) -> Option<String> {
        let mut body = json!({"model": "m", "max_tokens": 10, "messages": messages,
            "tools": [{"name": "w", "input_schema": {"type": "object"}}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let resp = *validate(&body).err()?;
        assert_eq!(resp.status(), 400);
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        let e: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(e["type"], "error");
        Some(e["error"]["message"].as_str().unwrap().to_owned())
    }

    fn call(id: &str) -> Value {
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "w", "input": {}}]})
    }

    fn result(ids: &[&str], then: Option<&str>) -> Value {
        let mut c: Vec<Value> = ids
            .iter()
            .map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"}))
            .collect();
        if let Some(t) = then {
            c.insert(0, json!({"type": "text", "text": t}));
        }
        json!({"role": "user", "content": c})
    }

    #[tokio::test]
    async fn each_pairing_defect_is_refused_in_anthropics_words() {
        let user = json!({"role": "user", "content": "hi"});
        let ok = refusal(
            json!([user, call("toolu_1"), result(&["toolu_1"], None)]),
            json!({}),
        )
        .await;
        assert_eq!(ok, None);
        let cases = [
            (
                json!([user, call("toolu_1"), user]),
                "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1.",
            ),
            (
                json!([user, call("toolu_1"), result(&["toolu_2"], None)]),
                "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2.",
            ),
            (
                json!([user, call("toolu_1"), result(&["toolu_1"], Some("first"))]),
                "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message.",
            ),
            (
                json!([
                    user,
                    call("toolu_1"),
                    result(&["toolu_1"], None),
                    call("toolu_1"),
                    result(&["toolu_1"], None)
                ]),
                "messages.3.content.0: `tool_use` ids must be unique",
            ),
            (
                json!([user, call("call.1"), result(&["call.1"], None)]),
                "tool_use.id: String should match pattern",
            ),
            (
                json!([user, call("toolu_1")]),
                "messages.1: `tool_use` ids were found without `tool_result` blocks",
            ),
            (
                json!([{"role": "user", "content": [{"type": "text", "text": ""}]}]),
                "text content blocks must be non-empty",
            ),
            (
                json!([user, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "forged"}]}]),
                "Invalid `signature` in `thinking` block",
            ),
            (
                json!([user, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}]),
                "thinking.signature: Field required",
            ),
        ];
        for (messages, wording) in cases {
            let got = refusal(messages.clone(), json!({}))
                .await
                .unwrap_or_default();
            assert!(
                got.starts_with(wording) || got.contains(wording),
                "{messages}: {got}"
            );
        }
        let signed = json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": signature("x")}]});
        assert_eq!(refusal(json!([user, signed]), json!({})).await, None);
        assert_eq!(
            refusal(json!([user]), json!({"stream_options": {}}))
                .await
                .unwrap(),
            "stream_options: Extra inputs are not permitted"
        );
        assert_eq!(
            refusal(
                json!([user, call("toolu_1"), result(&["toolu_1"], None)]),
                json!({"tools": []})
            )
            .await
            .unwrap(),
            "Requests which include `tool_use` or `tool_result` blocks must define tools."
        );
    }
}
