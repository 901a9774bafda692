//! OpenAI's Responses API side of the contract (`POST /v1/responses`), stateless: the
//! request checks with OpenAI's error body and wording (every `function_call` answered
//! by a `function_call_output` and no output without its call, item ids with the prefix
//! of their type and not repeated, no unknown parameter), a `previous_response_id`
//! answered 404 (nothing is stored here), and the reply as a Responses object, JSON or
//! the Responses event stream with consecutive `sequence_number`s. Reasoning items carry
//! `encrypted_content` when `include` asks for it; one this provider did not give for
//! that summary is refused.

use std::{collections::HashSet, convert::Infallible};

use axum::{
    body::Body,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use toolmend::conversation::AssistantMessage;

use crate::{anthropic::Refusal, openai, pieces, seal};

/// The parameters the API takes; any other is refused.
const FIELDS: [&str; 28] = [
    "model",
    "client_metadata",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "store",
    "stream",
    "stream_options",
    "previous_response_id",
    "include",
    "max_output_tokens",
    "max_tool_calls",
    "temperature",
    "top_p",
    "top_logprobs",
    "user",
    "metadata",
    "reasoning",
    "text",
    "truncation",
    "background",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
    "conversation",
    "prompt",
];

fn refuse(message: impl Into<String>, param: impl Into<String>) -> Refusal {
    Box::new(openai::error(
        StatusCode::BAD_REQUEST,
        &message.into(),
        Some(param.into()),
    ))
}

/// The encrypted content this provider gives a reasoning item with `text`.
pub(crate) fn encrypted(text: &str) -> String {
    format!("scripted-enc-{:016x}", seal(text))
}

/// The readable text of a reasoning item (its summary's texts, joined).
fn reasoning_text(item: &Value) -> String {
    item["summary"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Refuses what the Responses API refuses.
pub(crate) fn validate(request: &Value) -> Result<(), Refusal> {
    let Some(obj) = request.as_object() else {
        return Err(refuse(
            "Invalid type for request body: expected an object.",
            "",
        ));
    };
    for key in obj.keys() {
        if !FIELDS.contains(&key.as_str()) {
            return Err(refuse(format!("Unknown parameter: '{key}'."), key.clone()));
        }
    }
    if !obj.get("model").is_some_and(Value::is_string) {
        return Err(refuse("Missing required parameter: 'model'.", "model"));
    }
    if let Some(id) = obj.get("previous_response_id").and_then(Value::as_str) {
        return Err(Box::new(openai::error(
            StatusCode::NOT_FOUND,
            &format!("Previous response with id '{id}' not found."),
            Some("previous_response_id".to_owned()),
        )));
    }
    for (i, t) in obj
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if t["type"] == "function" {
            let name = t["name"].as_str().unwrap_or_default();
            if !toolmend::history::is_valid_function_name(name) {
                return Err(refuse(
                    format!(
                        "Invalid 'tools[{i}].name': string does not match pattern. Expected a \
                         string that matches the pattern '^[a-zA-Z0-9_-]{{1,64}}$'."
                    ),
                    format!("tools[{i}].name"),
                ));
            }
        } else if !t["type"].is_string() {
            return Err(refuse(
                format!("Missing required parameter: 'tools[{i}].type'."),
                format!("tools[{i}].type"),
            ));
        }
    }
    match obj.get("input") {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(items)) => check_items(items),
        Some(other) => Err(refuse(
            format!(
                "Invalid type for 'input': expected one of a string or array of input items, but \
                 got {} instead.",
                kind_of(other)
            ),
            "input",
        )),
        None => Err(refuse("Missing required parameter: 'input'.", "input")),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The input items' rules.
fn check_items(items: &[Value]) -> Result<(), Refusal> {
    let mut ids = HashSet::new();
    let mut calls: Vec<&str> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item["type"]
            .as_str()
            .unwrap_or(if item.get("role").is_some() {
                "message"
            } else {
                ""
            });
        if let Some(id) = item.get("id").and_then(Value::as_str) {
            let prefix = match kind {
                "function_call" => "fc",
                "reasoning" => "rs",
                "message" => "msg",
                _ => "",
            };
            if !id.starts_with(prefix) {
                return Err(refuse(
                    format!(
                        "Invalid 'input[{i}].id': '{id}'. Expected an ID that begins with '{prefix}'."
                    ),
                    format!("input[{i}].id"),
                ));
            }
            if !ids.insert(id) {
                return Err(refuse(
                    format!(
                        "Duplicate item found with id {id}. Remove duplicate items from your \
                         input and try again."
                    ),
                    "input",
                ));
            }
        }
        let need = |key: &str| -> Result<&str, Refusal> {
            item[key].as_str().ok_or_else(|| {
                refuse(
                    format!("Missing required parameter: 'input[{i}].{key}'."),
                    format!("input[{i}].{key}"),
                )
            })
        };
        match kind {
            "message" => {
                let role = need("role")?;
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    return Err(refuse(
                        format!(
                            "Invalid value: '{role}'. Supported values are: 'assistant', \
                             'system', 'developer', and 'user'."
                        ),
                        format!("input[{i}].role"),
                    ));
                }
                if !(item["content"].is_string() || item["content"].is_array()) {
                    return Err(refuse(
                        format!("Missing required parameter: 'input[{i}].content'."),
                        format!("input[{i}].content"),
                    ));
                }
            }
            "function_call" => {
                let call_id = need("call_id")?;
                need("name")?;
                need("arguments")?;
                calls.push(call_id);
            }
            "function_call_output" => {
                let call_id = need("call_id")?;
                if !calls.contains(&call_id) {
                    return Err(refuse(
                        format!(
                            "No tool call found for function call output with call_id {call_id}."
                        ),
                        "input",
                    ));
                }
                answered.insert(call_id);
                if item.get("output").is_none_or(Value::is_null) {
                    return Err(refuse(
                        format!("Missing required parameter: 'input[{i}].output'."),
                        format!("input[{i}].output"),
                    ));
                }
            }
            "reasoning" => {
                if let Some(enc) = item.get("encrypted_content").and_then(Value::as_str)
                    && enc != encrypted(&reasoning_text(item))
                {
                    return Err(refuse(
                        "The encrypted content for item could not be verified.",
                        format!("input[{i}].encrypted_content"),
                    ));
                }
            }
            "" => {
                return Err(refuse(
                    format!("Missing required parameter: 'input[{i}].type'."),
                    format!("input[{i}].type"),
                ));
            }
            _ => {}
        }
    }
    if let Some(id) = calls.iter().find(|c| !answered.contains(*c)) {
        return Err(refuse(
            format!("No tool output found for function call {id}."),
            "input",
        ));
    }
    Ok(())
}

/// The reply's output items: its reasoning (with `encrypted_content` when `include`
/// asks), its text as an assistant message, each call a `function_call` with its
/// arguments as the model wrote them.
fn output(request: &Value, reply: &AssistantMessage, n: u64) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(r) = reply.reasoning.as_deref().filter(|r| !r.is_empty()) {
        let mut item = json!({"type": "reasoning", "id": format!("rs_scripted_{n}"),
            "summary": [{"type": "summary_text", "text": r}]});
        let include = request["include"].as_array().into_iter().flatten();
        if include.clone().any(|i| i == "reasoning.encrypted_content") {
            item["encrypted_content"] = json!(encrypted(r));
        }
        out.push(item);
    }
    if let Some(text) = reply.text().filter(|t| !t.is_empty()) {
        out.push(json!({"type": "message", "id": format!("msg_scripted_{n}"),
            "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}));
    }
    for (k, c) in reply.tool_calls.iter().flatten().enumerate() {
        let call_id =
            c.id.clone()
                .unwrap_or_else(|| format!("call_scripted_{n}_{k}"));
        out.push(
            json!({"type": "function_call", "id": format!("fc_scripted_{n}_{k}"),
            "call_id": call_id, "name": c.name, "arguments": c.arguments,
            "status": "completed"}),
        );
    }
    out
}

/// The reply as a Responses object, or its event stream when the request streams.
pub(crate) fn response(request: &Value, reply: &AssistantMessage, n: u64) -> Response {
    let items = output(request, reply, n);
    let input_tokens = request["input"].to_string().len().div_ceil(4);
    let output_tokens = Value::Array(items.clone()).to_string().len().div_ceil(4);
    let object = |status: &str, output: Vec<Value>| {
        json!({"id": format!("resp_scripted_{n}"), "object": "response",
            "created_at": 1_700_000_000 + n, "status": status, "error": null,
            "incomplete_details": null, "model": request["model"], "output": output,
            "parallel_tool_calls": request.get("parallel_tool_calls").cloned().unwrap_or(json!(true)),
            "tool_choice": request.get("tool_choice").cloned().unwrap_or(json!("auto")),
            "tools": request.get("tools").cloned().unwrap_or(json!([])),
            "store": request.get("store").cloned().unwrap_or(json!(true)),
            "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input_tokens + output_tokens}})
    };
    if request["stream"].as_bool() != Some(true) {
        return axum::Json(object("completed", items)).into_response();
    }
    let mut events: Vec<(&str, Value)> = vec![
        (
            "response.created",
            json!({"response": object("in_progress", vec![])}),
        ),
        (
            "response.in_progress",
            json!({"response": object("in_progress", vec![])}),
        ),
    ];
    for (index, item) in items.iter().enumerate() {
        let id = &item["id"];
        match item["type"].as_str() {
            Some("message") => {
                let text = item["content"][0]["text"].as_str().unwrap_or_default();
                let mut open = item.clone();
                open["status"] = json!("in_progress");
                open["content"] = json!([]);
                events.push((
                    "response.output_item.added",
                    json!({"output_index": index, "item": open}),
                ));
                events.push((
                    "response.content_part.added",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
                ));
                for p in pieces(text, 8) {
                    events.push((
                        "response.output_text.delta",
                        json!({"item_id": id,
                        "output_index": index, "content_index": 0, "delta": p, "logprobs": []}),
                    ));
                }
                events.push((
                    "response.output_text.done",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                ));
                events.push((
                    "response.content_part.done",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "part": item["content"][0]}),
                ));
            }
            Some("function_call") => {
                let args = item["arguments"].as_str().unwrap_or_default();
                let mut open = item.clone();
                open["status"] = json!("in_progress");
                open["arguments"] = json!("");
                events.push((
                    "response.output_item.added",
                    json!({"output_index": index, "item": open}),
                ));
                for p in pieces(args, 8) {
                    events.push((
                        "response.function_call_arguments.delta",
                        json!({"item_id": id,
                        "output_index": index, "delta": p}),
                    ));
                }
                events.push((
                    "response.function_call_arguments.done",
                    json!({"item_id": id,
                    "output_index": index, "arguments": args}),
                ));
            }
            _ => {
                events.push((
                    "response.output_item.added",
                    json!({"output_index": index, "item": item}),
                ));
            }
        }
        events.push((
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
    }
    events.push((
        "response.completed",
        json!({"response": object("completed", items)}),
    ));
    let frames: Vec<Result<String, Infallible>> = events
        .into_iter()
        .enumerate()
        .map(|(seq, (name, mut data))| {
            data["type"] = json!(name);
            data["sequence_number"] = json!(seq);
            Ok(format!("event: {name}\ndata: {data}\n\n"))
        })
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

    async fn refusal(input: Value, extra: Value) -> Option<(u16, String, Value)> {
        let mut body = json!({"model": "m", "input": input});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let resp = *validate(&body).err()?;
        let status = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        let e: Value = serde_json::from_slice(&bytes).unwrap();
        Some((
            status,
            e["error"]["message"].as_str().unwrap().to_owned(),
            e["error"]["param"].clone(),
        ))
    }

    fn call(id: &str) -> Value {
        json!({"type": "function_call", "call_id": id, "name": "w", "arguments": "{"})
    }

    fn output(id: &str) -> Value {
        json!({"type": "function_call_output", "call_id": id, "output": "ok"})
    }

    #[tokio::test]
    async fn each_pairing_defect_is_refused_in_openais_words() {
        let user = json!({"role": "user", "content": "hi"});
        assert_eq!(
            refusal(json!([user, call("c1"), output("c1")]), json!({})).await,
            None
        );
        let cases = [
            (
                json!([user, call("c1"), user]),
                "No tool output found for function call c1.",
            ),
            (
                json!([user, output("c9")]),
                "No tool call found for function call output with call_id c9.",
            ),
            (
                json!([user, {"type": "function_call", "id": "call_1", "call_id": "c1", "name": "w", "arguments": "{}"}, output("c1")]),
                "Invalid 'input[1].id': 'call_1'. Expected an ID that begins with 'fc'.",
            ),
            (
                json!([{"type": "message", "id": "msg_1", "role": "user", "content": "a"}, {"type": "message", "id": "msg_1", "role": "user", "content": "b"}]),
                "Duplicate item found with id msg_1. Remove duplicate items from your input and try again.",
            ),
            (
                json!([{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "x"}], "encrypted_content": "forged"}]),
                "The encrypted content for item could not be verified.",
            ),
        ];
        for (input, wording) in cases {
            let (status, got, _) = refusal(input.clone(), json!({})).await.unwrap();
            assert_eq!((status, got.as_str()), (400, wording), "{input}");
        }
        let sealed = json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "x"}], "encrypted_content": encrypted("x")});
        assert_eq!(refusal(json!([sealed]), json!({})).await, None);
        let (status, got, param) = refusal(json!("hi"), json!({"messages": []})).await.unwrap();
        assert_eq!(
            (status, got.as_str(), param),
            (400, "Unknown parameter: 'messages'.", json!("messages"))
        );
        let (status, _, _) = refusal(json!("hi"), json!({"previous_response_id": "resp_x"}))
            .await
            .unwrap();
        assert_eq!(status, 404);
    }
}
