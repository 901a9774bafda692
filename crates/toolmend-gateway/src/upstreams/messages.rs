//! Toward a Messages upstream: a chat request as a Messages request, and a Messages
//! message back as a chat completion.

use serde_json::{Map, Value, json};

use super::finish;

/// `max_tokens` when the chat request names none: Messages requires it.
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The Messages request for chat request `chat`: system and developer messages joined
/// into `system`; each assistant message one assistant turn (`thinking_blocks`, text,
/// `tool_use` blocks with the arguments as the `input` object); the tool messages after
/// it `tool_result` blocks at the start of the next user turn (the user's own content
/// after them); function tools with `input_schema`; `tool_choice` and
/// `parallel_tool_calls` as Messages' `tool_choice`.
pub(crate) fn chat_to_request(chat: &Value) -> Value {
    let mut out = Map::new();
    out.insert("model".to_owned(), chat["model"].clone());
    let max = chat
        .get("max_tokens")
        .or_else(|| chat.get("max_completion_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    out.insert("max_tokens".to_owned(), json!(max));
    for key in ["temperature", "top_p"] {
        if let Some(v) = chat.get(key).filter(|v| !v.is_null()) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    match &chat["stop"] {
        Value::String(s) => {
            out.insert("stop_sequences".to_owned(), json!([s]));
        }
        v @ Value::Array(_) => {
            out.insert("stop_sequences".to_owned(), v.clone());
        }
        _ => {}
    }
    if let Some(user) = chat["user"].as_str() {
        out.insert("metadata".to_owned(), json!({"user_id": user}));
    }
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for m in chat["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        match m["role"].as_str().unwrap_or_default() {
            "system" | "developer" => system.push(text_of(&m["content"])),
            "user" => push_user(&mut messages, user_blocks(&m["content"]), false),
            "tool" | "function" => {
                let id = m["tool_call_id"].as_str().unwrap_or_default();
                let result = json!({"type": "tool_result", "tool_use_id": id,
                    "content": text_of(&m["content"])});
                push_user(&mut messages, vec![result], true);
            }
            "assistant" => {
                let blocks = assistant_blocks(m);
                if !blocks.is_empty() {
                    messages.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            _ => {}
        }
    }
    let system: Vec<String> = system.into_iter().filter(|s| !s.is_empty()).collect();
    if !system.is_empty() {
        out.insert("system".to_owned(), json!(system.join("\n\n")));
    }
    out.insert("messages".to_owned(), Value::Array(messages));
    let tools: Vec<Value> = chat["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let f = &t["function"];
            let mut tool = Map::new();
            tool.insert("name".to_owned(), f.get("name")?.clone());
            if let Some(d) = f.get("description").filter(|d| !d.is_null()) {
                tool.insert("description".to_owned(), d.clone());
            }
            tool.insert(
                "input_schema".to_owned(),
                f.get("parameters")
                    .filter(|p| p.is_object())
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            );
            Some(Value::Object(tool))
        })
        .collect();
    if !tools.is_empty() {
        out.insert("tools".to_owned(), Value::Array(tools));
        let mut choice = match &chat["tool_choice"] {
            Value::String(s) if s == "required" => json!({"type": "any"}),
            Value::String(s) if s == "none" => json!({"type": "none"}),
            Value::Object(_) => match chat["tool_choice"]["function"]["name"].as_str() {
                Some(name) => json!({"type": "tool", "name": name}),
                None => json!({"type": "auto"}),
            },
            _ => json!({"type": "auto"}),
        };
        let serial = chat["parallel_tool_calls"].as_bool() == Some(false);
        if serial {
            choice["disable_parallel_tool_use"] = json!(true);
        }
        if serial || chat.get("tool_choice").is_some() {
            out.insert("tool_choice".to_owned(), choice);
        }
    }
    Value::Object(out)
}

/// Adds `blocks` to the conversation as user content: into the user turn already last
/// (results first: `results` blocks go before any of its other blocks), else a new one.
fn push_user(messages: &mut Vec<Value>, blocks: Vec<Value>, results: bool) {
    if blocks.is_empty() {
        return;
    }
    if let Some(last) = messages.last_mut().filter(|m| m["role"] == "user")
        && let Some(content) = last["content"].as_array_mut()
    {
        if results {
            let at = content
                .iter()
                .position(|b| b["type"] != "tool_result")
                .unwrap_or(content.len());
            content.splice(at..at, blocks);
        } else {
            content.extend(blocks);
        }
        return;
    }
    messages.push(json!({"role": "user", "content": blocks}));
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

/// A user message's content as blocks: text parts as `text`, `image_url` as an `image`
/// (a `data:` URL as a base64 source), any other part as the block it carries.
fn user_blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) if s.is_empty() => Vec::new(),
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p["type"].as_str() {
                Some("text") => p["text"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(|t| json!({"type": "text", "text": t})),
                Some("image_url") => {
                    let url = p["image_url"]["url"].as_str()?;
                    Some(match data_url(url) {
                        Some((media, data)) => json!({"type": "image",
                            "source": {"type": "base64", "media_type": media, "data": data}}),
                        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
                    })
                }
                _ => Some(p.clone()),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `data:MEDIA;base64,DATA` split.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (media, data) = rest.split_once(";base64,")?;
    Some((media, data))
}

/// An assistant message's blocks: its carried thinking blocks (a `reasoning_content`
/// without them has no signature, which a Messages upstream refuses: it stays out), its
/// server-tool blocks, its text, its calls.
fn assistant_blocks(m: &Value) -> Vec<Value> {
    let mut blocks: Vec<Value> = Vec::new();
    for key in ["thinking_blocks", "server_blocks"] {
        blocks.extend(m[key].as_array().into_iter().flatten().cloned());
    }
    let text = text_of(&m["content"]);
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for c in m["tool_calls"].as_array().into_iter().flatten() {
        let arguments = c["function"]["arguments"].as_str().unwrap_or("{}");
        // A history call whose arguments are no object (the history policy passed it):
        // Messages holds only an object; its text goes under `arguments`, not dropped.
        let input = match serde_json::from_str::<Value>(arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ if arguments.trim().is_empty() => json!({}),
            _ => json!({"arguments": arguments}),
        };
        blocks.push(json!({"type": "tool_use", "id": c["id"],
            "name": c["function"]["name"], "input": input}));
    }
    blocks
}

/// The chat completion for Messages message `message`: its text blocks as the content,
/// its thinking as `reasoning_content` (and the blocks themselves, signatures and all,
/// in `thinking_blocks`), server-tool blocks in `server_blocks`, each `tool_use` a call
/// with its `input` as the argument text; `None` when it is not a message.
pub(crate) fn message_to_completion(message: &Value) -> Option<Value> {
    let blocks = message["content"].as_array()?;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut thinking = Vec::new();
    let mut server = Vec::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b["type"].as_str() {
            Some("text") => text.push_str(b["text"].as_str().unwrap_or_default()),
            Some("thinking") => {
                reasoning.push_str(b["thinking"].as_str().unwrap_or_default());
                thinking.push(b.clone());
            }
            Some("redacted_thinking") => thinking.push(b.clone()),
            Some("tool_use") => {
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(json!({"id": b["id"], "type": "function",
                    "function": {"name": b["name"], "arguments": input.to_string()}}));
            }
            _ => server.push(b.clone()),
        }
    }
    let has_calls = !calls.is_empty();
    let m = super::chat_assistant(
        text,
        reasoning,
        vec![("thinking_blocks", thinking), ("server_blocks", server)],
        calls,
    );
    let finish_reason = match message["stop_reason"].as_str() {
        Some("max_tokens") => "length",
        Some("refusal") => "content_filter",
        _ => finish(has_calls, "stop"),
    };
    Some(super::completion(message, 0, m, finish_reason))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_chat_conversation_becomes_turns_with_results_first() {
        let chat = json!({"model": "m", "stop": "END", "parallel_tool_calls": false,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": null,
                 "thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "sig"}],
                 "tool_calls": [
                    {"id": "toolu_1", "type": "function", "function": {"name": "w", "arguments": "{\"city\":\"Oslo\"}"}},
                    {"id": "toolu_2", "type": "function", "function": {"name": "w", "arguments": "not json"}}]},
                {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "toolu_2", "content": "rain"},
                {"role": "user", "content": [{"type": "text", "text": "And?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]}],
            "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}]});
        let req = chat_to_request(&chat);
        assert_eq!(req["system"], "Be brief.");
        assert_eq!(req["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(req["stop_sequences"], json!(["END"]));
        assert_eq!(
            req["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
        let m = req["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[1]["content"][0]["signature"], "sig");
        assert_eq!(m[1]["content"][1]["input"], json!({"city": "Oslo"}));
        assert_eq!(
            m[1]["content"][2]["input"],
            json!({"arguments": "not json"})
        );
        let kinds: Vec<&str> = m[2]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["tool_result", "tool_result", "text", "image"]);
        assert_eq!(m[2]["content"][3]["source"]["media_type"], "image/png");
    }

    #[test]
    fn a_message_reads_back_with_its_signed_thinking_and_calls() {
        let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                        {"type": "redacted_thinking", "data": "xyz"},
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_9", "name": "w", "input": {"city": "Oslo"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}});
        let c = message_to_completion(&message).unwrap();
        let m = &c["choices"][0]["message"];
        assert_eq!(m["reasoning_content"], "hm");
        assert_eq!(m["thinking_blocks"].as_array().unwrap().len(), 2);
        assert_eq!(
            m["tool_calls"][0]["function"]["arguments"],
            "{\"city\":\"Oslo\"}"
        );
        assert_eq!(c["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(c["usage"]["total_tokens"], 7);
        // And back: the same blocks.
        let again = chat_to_request(&json!({"model": "m", "messages": [m]}));
        assert_eq!(again["messages"][0]["content"], message["content"]);
        assert!(message_to_completion(&json!({"error": "x"})).is_none());
    }
}
