//! Toward a Responses upstream: a chat request as a Responses request (stateless:
//! `store: false`, the whole conversation as `input`, encrypted reasoning asked back),
//! and a Responses object back as a chat completion.

use serde_json::{Map, Value, json};

use super::finish;

/// The Responses request for chat request `chat`: system and developer messages as
/// `developer` items, user messages as `input_text` / `input_image` items, an assistant
/// message as its carried `reasoning_items`, an output `message` and a `function_call`
/// per call, a tool message as a `function_call_output`; function tools as Responses
/// function tools.
pub(crate) fn chat_to_request(chat: &Value) -> Value {
    let mut out = Map::new();
    out.insert("model".to_owned(), chat["model"].clone());
    for (from, to) in [
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("user", "user"),
        ("parallel_tool_calls", "parallel_tool_calls"),
        ("max_tokens", "max_output_tokens"),
        ("max_completion_tokens", "max_output_tokens"),
    ] {
        if let Some(v) = chat.get(from).filter(|v| !v.is_null()) {
            out.insert(to.to_owned(), v.clone());
        }
    }
    let mut input = Vec::new();
    for m in chat["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        match m["role"].as_str().unwrap_or_default() {
            role @ ("system" | "developer") => input.push(json!({"type": "message",
                "role": role, "content": text_of(&m["content"])})),
            "user" => input.push(json!({"type": "message", "role": "user",
                "content": user_parts(&m["content"])})),
            "tool" | "function" => input.push(json!({"type": "function_call_output",
                "call_id": m["tool_call_id"], "output": text_of(&m["content"])})),
            "assistant" => {
                input.extend(
                    m["reasoning_items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
                let text = text_of(&m["content"]);
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}));
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    input.push(json!({"type": "function_call", "call_id": c["id"],
                        "name": c["function"]["name"], "arguments": c["function"]["arguments"]}));
                }
            }
            _ => {}
        }
    }
    out.insert("input".to_owned(), Value::Array(input));
    let tools: Vec<Value> = chat["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let f = &t["function"];
            let mut tool = Map::new();
            tool.insert("type".to_owned(), json!("function"));
            tool.insert("name".to_owned(), f.get("name")?.clone());
            for key in ["description", "parameters", "strict"] {
                if let Some(v) = f.get(key).filter(|v| !v.is_null()) {
                    tool.insert(key.to_owned(), v.clone());
                }
            }
            Some(Value::Object(tool))
        })
        .collect();
    if !tools.is_empty() {
        out.insert("tools".to_owned(), Value::Array(tools));
        match &chat["tool_choice"] {
            v @ Value::String(_) => {
                out.insert("tool_choice".to_owned(), v.clone());
            }
            Value::Object(_) => {
                if let Some(name) = chat["tool_choice"]["function"]["name"].as_str() {
                    out.insert(
                        "tool_choice".to_owned(),
                        json!({"type": "function", "name": name}),
                    );
                }
            }
            _ => {}
        }
    }
    out.insert("store".to_owned(), json!(false));
    out.insert("include".to_owned(), json!(["reasoning.encrypted_content"]));
    Value::Object(out)
}

/// A chat content's text: the string, or its text parts joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// A user message's content as input parts.
fn user_parts(content: &Value) -> Value {
    match content {
        Value::String(s) => json!([{"type": "input_text", "text": s}]),
        Value::Array(parts) => Value::Array(
            parts
                .iter()
                .map(|p| match p["type"].as_str() {
                    Some("text") => json!({"type": "input_text", "text": p["text"]}),
                    Some("image_url") => json!({"type": "input_image",
                        "image_url": p["image_url"]["url"], "detail": "auto"}),
                    _ => p.clone(),
                })
                .collect(),
        ),
        _ => json!([]),
    }
}

/// The chat completion for Responses object `response`: its output messages' text as
/// the content, its reasoning's text as `reasoning_content` (the items themselves in
/// `reasoning_items`), each `function_call` a call (`call_id` its id; a namespaced one
/// under `{namespace}__{name}`, the name the Responses front flattens it to); `None`
/// when it is not a response.
pub(crate) fn response_to_completion(response: &Value) -> Option<Value> {
    let output = response["output"].as_array()?;
    let mut text = String::new();
    let mut refusal = String::new();
    let mut reasoning = Vec::new();
    let mut items = Vec::new();
    let mut calls = Vec::new();
    for item in output {
        match item["type"].as_str() {
            Some("message") => {
                for p in item["content"].as_array().into_iter().flatten() {
                    match p["type"].as_str() {
                        Some("output_text") => text.push_str(p["text"].as_str().unwrap_or("")),
                        Some("refusal") => refusal.push_str(p["refusal"].as_str().unwrap_or("")),
                        _ => {}
                    }
                }
            }
            Some("reasoning") => {
                for key in ["content", "summary"] {
                    let parts: Vec<&str> = item[key]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["text"].as_str())
                        .collect();
                    if !parts.is_empty() {
                        reasoning.push(parts.join("\n"));
                        break;
                    }
                }
                items.push(item.clone());
            }
            Some("custom_tool_call") => {
                // Its free-form input as the one string argument the fronts read it by.
                let Some(name) = item["name"].as_str() else {
                    continue;
                };
                let arguments = json!({"input": item["input"].as_str().unwrap_or_default()});
                calls.push(json!({"id": item["call_id"], "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}}));
            }
            Some("function_call") => {
                let name = match (item["namespace"].as_str(), item["name"].as_str()) {
                    (Some(ns), Some(n)) => format!("{ns}__{n}"),
                    (None, Some(n)) => n.to_owned(),
                    _ => continue,
                };
                calls.push(json!({"id": item["call_id"], "type": "function",
                    "function": {"name": name, "arguments": item["arguments"]}}));
            }
            _ => {}
        }
    }
    let has_calls = !calls.is_empty();
    let mut m = super::chat_assistant(
        text,
        reasoning.join("\n"),
        vec![("reasoning_items", items)],
        calls,
    );
    if !refusal.is_empty() {
        m.insert("refusal".to_owned(), json!(refusal));
    }
    let finish_reason = match response["incomplete_details"]["reason"].as_str() {
        Some("max_output_tokens") => "length",
        Some("content_filter") => "content_filter",
        _ => finish(has_calls, "stop"),
    };
    let created = response["created_at"].as_u64().unwrap_or(0);
    Some(super::completion(response, created, m, finish_reason))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_chat_conversation_becomes_items_with_reasoning_kept() {
        let chat = json!({"model": "m", "max_tokens": 50, "tool_choice": {"type": "function", "function": {"name": "w"}},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": null,
                 "reasoning_items": [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}],
                 "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "w", "arguments": "{\"city\":"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
            "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}]});
        let req = chat_to_request(&chat);
        assert_eq!(req["store"], false);
        assert_eq!(req["max_output_tokens"], 50);
        assert_eq!(req["tool_choice"], json!({"type": "function", "name": "w"}));
        let kinds: Vec<&str> = req["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "message",
                "message",
                "reasoning",
                "function_call",
                "function_call_output"
            ]
        );
        assert_eq!(req["input"][2]["encrypted_content"], "gAAA");
        // The broken arguments go as they were.
        assert_eq!(req["input"][3]["arguments"], "{\"city\":");
    }

    #[test]
    fn a_response_reads_back_with_its_reasoning_items_and_calls() {
        let response = json!({"id": "resp_1", "object": "response", "created_at": 5, "model": "m",
            "status": "completed", "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}],
                 "encrypted_content": "gAAA"},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "On it.", "annotations": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_7", "name": "w",
                 "namespace": "geo", "arguments": "{\"city\": \"Oslo\"", "status": "completed"}],
            "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}});
        let c = response_to_completion(&response).unwrap();
        let m = &c["choices"][0]["message"];
        assert_eq!(m["content"], "On it.");
        assert_eq!(m["reasoning_content"], "hm");
        assert_eq!(m["reasoning_items"][0]["encrypted_content"], "gAAA");
        assert_eq!(m["tool_calls"][0]["id"], "call_7");
        assert_eq!(m["tool_calls"][0]["function"]["name"], "geo__w");
        assert_eq!(
            m["tool_calls"][0]["function"]["arguments"],
            "{\"city\": \"Oslo\""
        );
        assert_eq!(c["choices"][0]["finish_reason"], "tool_calls");
        let again = chat_to_request(&json!({"model": "m", "messages": [m]}));
        assert_eq!(again["input"][0], response["output"][0]);
        assert!(response_to_completion(&json!({"error": {}})).is_none());
    }
}
