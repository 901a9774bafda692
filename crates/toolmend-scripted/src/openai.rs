//! OpenAI's side of the contract: request checks with its error bodies and wording, and
//! responses in its exact JSON and SSE chunk formats.

use std::convert::Infallible;

use crate::pieces;
use axum::{
    body::Body,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use toolmend::{
    agent::Strictness,
    conversation::{AssistantMessage, Content, Message},
    history::{self, ViolationKind},
};

/// An OpenAI-style error response.
pub(crate) fn error(status: StatusCode, message: &str, param: Option<String>) -> Response {
    let kind = if status == StatusCode::BAD_REQUEST {
        "invalid_request_error"
    } else {
        "server_error"
    };
    let body = json!({"error": {"message": message, "type": kind, "param": param, "code": null}});
    (status, axum::Json(body)).into_response()
}

/// A request OpenAI would refuse: its message and the offending parameter.
#[derive(Debug)]
pub(crate) struct Refusal {
    message: String,
    param: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        error(StatusCode::BAD_REQUEST, &self.message, Some(self.param))
    }
}

fn bad_request(message: &str, param: impl Into<String>) -> Refusal {
    Refusal {
        message: message.to_owned(),
        param: param.into(),
    }
}

/// Refuses what OpenAI refuses (and, with [`Strictness::All`], what stricter providers do).
pub(crate) fn validate(request: &Value, strictness: Strictness) -> Result<(), Refusal> {
    let Some(obj) = request.as_object() else {
        return Err(bad_request(
            "Invalid type for request body: expected an object.",
            "",
        ));
    };
    if !obj.get("model").is_some_and(Value::is_string) {
        return Err(bad_request("you must provide a model parameter", "model"));
    }
    let Some(raw) = obj.get("messages").and_then(Value::as_array) else {
        return Err(bad_request(
            "Missing required parameter: 'messages'.",
            "messages",
        ));
    };
    if raw.is_empty() {
        return Err(bad_request(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            "messages",
        ));
    }
    let mut messages = Vec::with_capacity(raw.len());
    for (i, m) in raw.iter().enumerate() {
        match serde_json::from_value::<Message>(m.clone()) {
            Ok(m) => messages.push(m),
            Err(e) => {
                return Err(bad_request(
                    &format!("Invalid value for 'messages[{i}]': {e}."),
                    format!("messages.[{i}]"),
                ));
            }
        }
    }
    if let Some(tools) = obj.get("tools").and_then(Value::as_array) {
        for (i, t) in tools.iter().enumerate() {
            let name = t
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !history::is_valid_function_name(name) {
                return Err(bad_request(
                    &format!(
                        "Invalid 'tools[{i}].name': string does not match pattern. \
                         Expected a string that matches the pattern '^[a-zA-Z0-9_-]{{1,64}}$'."
                    ),
                    format!("tools[{i}].name"),
                ));
            }
        }
    }
    if let Some(v) = history::check(&messages)
        .into_iter()
        .find(|v| strictness.refuses(v.kind))
    {
        let param = match v.kind {
            ViolationKind::OrphanResult
            | ViolationKind::ResultOutOfPlace
            | ViolationKind::DuplicateResult => format!("messages.[{}].call_id", v.message),
            ViolationKind::InvalidFunctionName => format!(
                "messages.[{}].tool_calls.[{}].name",
                v.message,
                v.call.unwrap_or(0)
            ),
            _ => format!("messages.[{}]", v.message),
        };
        return Err(bad_request(&v.provider_error, param));
    }
    Ok(())
}

/// The scripted reply as OpenAI sends it: a `chat.completion`, or SSE chunks when the
/// request asked for a stream.
/// The completion of `replies`, one choice each (a request's `n`); streamed, each
/// choice's chunks interleaved with the others', as servers send them.
pub(crate) fn completion(request: &Value, replies: &[AssistantMessage], n: u64) -> Response {
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted")
        .to_owned();
    let id = format!("chatcmpl-scripted-{n}");
    let created = 1_700_000_000 + n;
    let finish_of = |reply: &AssistantMessage| {
        if reply.tool_calls.as_deref().unwrap_or(&[]).is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    };
    let usage = replies
        .iter()
        .map(|r| usage(request, r))
        .reduce(|mut sum, u| {
            for key in ["completion_tokens", "total_tokens"] {
                let (a, b) = (sum[key].as_u64().unwrap_or(0), u[key].as_u64().unwrap_or(0));
                sum[key] = json!(a + b);
            }
            sum
        })
        .unwrap_or(Value::Null);
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        let include_usage = request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true);
        let chunk = |index: usize, delta: Value, finish: Option<&str>| {
            json!({
                "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": null,
                "choices": [{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish}]
            })
        };
        // Each choice's events, then round-robin across the choices.
        let per_choice: Vec<Vec<Value>> = replies
            .iter()
            .enumerate()
            .map(|(i, reply)| {
                let mut events = vec![chunk(i, json!({"role": "assistant", "content": ""}), None)];
                if let Some(text) = &reply.text() {
                    for piece in pieces(text, 8) {
                        events.push(chunk(i, json!({"content": piece}), None));
                    }
                }
                for (k, tc) in reply.tool_calls.iter().flatten().enumerate() {
                    let mut first = json!({"index": k, "type": "function",
                                           "function": {"name": tc.name, "arguments": ""}});
                    if let Some(id) = &tc.id {
                        first["id"] = json!(id);
                    }
                    events.push(chunk(i, json!({"tool_calls": [first]}), None));
                    for piece in pieces(&tc.arguments, 8) {
                        events.push(chunk(
                            i,
                            json!({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}),
                            None,
                        ));
                    }
                }
                events.push(chunk(i, json!({}), Some(finish_of(reply))));
                events
            })
            .collect();
        let longest = per_choice.iter().map(Vec::len).max().unwrap_or(0);
        let mut events: Vec<Value> = (0..longest)
            .flat_map(|k| per_choice.iter().filter_map(move |c| c.get(k).cloned()))
            .collect();
        if include_usage {
            events.push(json!({
                "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": null, "choices": [], "usage": usage
            }));
        }
        let frames: Vec<Result<String, Infallible>> = events
            .iter()
            .map(|e| Ok(format!("data: {e}\n\n")))
            .chain(std::iter::once(Ok("data: [DONE]\n\n".to_owned())))
            .collect();
        return Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(futures::stream::iter(frames)))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let choices: Vec<Value> = replies
        .iter()
        .enumerate()
        .map(|(i, reply)| {
            let mut message = json!({"role": "assistant", "content": reply.text(), "refusal": null});
            if let Some(calls) = reply.tool_calls.as_ref().filter(|c| !c.is_empty()) {
                message["tool_calls"] = serde_json::to_value(calls).unwrap_or(Value::Null);
            }
            json!({"index": i, "message": message, "logprobs": null, "finish_reason": finish_of(reply)})
        })
        .collect();
    axum::Json(json!({
        "id": id, "object": "chat.completion", "created": created, "model": model,
        "system_fingerprint": null, "choices": choices, "usage": usage
    }))
    .into_response()
}

fn usage(request: &Value, reply: &AssistantMessage) -> Value {
    let prompt = request
        .get("messages")
        .map_or(0, |m| m.to_string().len().div_ceil(4));
    let mut out = reply
        .content
        .as_ref()
        .and_then(Option::as_ref)
        .map_or(0, |c: &Content| c.text().len());
    for tc in reply.tool_calls.iter().flatten() {
        out += tc.name.len() + tc.arguments.len();
    }
    let completion = out.div_ceil(4);
    json!({"prompt_tokens": prompt, "completion_tokens": completion,
           "total_tokens": prompt + completion})
}
