//! The Messages wire and the chat-completions one: a Messages request as the chat
//! request a `chat_completions` upstream takes, and a chat completion back as a Messages
//! message. What a chat upstream has no place for is either left out and named (the
//! account's `translation.left_out`) when it changes nothing the model must see (cache
//! hints, thinking settings, hosted tools it cannot run), or refused with a 400 that says
//! so (a document block): never dropped without a word.

use serde_json::{Map, Value, json};

use crate::{
    fronts::translate::{LeftOut, object},
    server::error::GatewayError,
};

/// A Messages request translated: the chat request, and what had no place in it.
#[derive(Debug, Default)]
pub(crate) struct ToChat {
    pub(crate) request: Value,
    /// What was left out, each once, in the order met (`"cache_control"`,
    /// `"tool web_search (web_search_20250305)"` …).
    pub(crate) left_out: LeftOut,
    /// The upstream speaks Messages too: signed and redacted thinking and server-tool
    /// blocks are carried in the chat message (`thinking_blocks`, `server_blocks`), and
    /// a user block chat has no part for as a part of its own type, for the way back.
    keep: bool,
}

fn refuse(message: impl Into<String>) -> GatewayError {
    GatewayError::invalid("invalid_messages", message)
}

/// Request keys that carry over under the same name.
const SAME: [&str; 4] = ["model", "max_tokens", "temperature", "top_p"];

/// The chat request for Messages `body`, toward a chat upstream.
pub(crate) fn request_to_chat(body: &Value) -> Result<ToChat, GatewayError> {
    request_to_chat_keeping(body, false)
}

/// The chat request for Messages `body`; `keep`: toward a Messages upstream, with what
/// chat cannot hold carried for the way back ([`ToChat::keep`]).
pub(crate) fn request_to_chat_keeping(body: &Value, keep: bool) -> Result<ToChat, GatewayError> {
    let Some(req) = body.as_object() else {
        return Err(GatewayError::invalid(
            "invalid_body",
            "the body must be a JSON object",
        ));
    };
    let mut out = ToChat {
        keep,
        ..ToChat::default()
    };
    let mut chat = Map::new();
    for key in SAME {
        if let Some(v) = req.get(key) {
            chat.insert(key.to_owned(), v.clone());
        }
    }
    let mut messages = Vec::new();
    for (key, value) in req {
        match key.as_str() {
            k if SAME.contains(&k) => {}
            "messages" => {}
            "system" => messages.push(json!({"role": "system", "content": system_text(value)?})),
            "stop_sequences" => {
                chat.insert("stop".to_owned(), value.clone());
            }
            "stream" => {
                chat.insert("stream".to_owned(), value.clone());
            }
            "metadata" => {
                if let Some(user) = value.get("user_id").and_then(Value::as_str) {
                    chat.insert("user".to_owned(), json!(user));
                }
            }
            "tools" => {
                let tools = tools_to_chat(value, &mut out)?;
                if !tools.is_empty() {
                    chat.insert("tools".to_owned(), Value::Array(tools));
                }
            }
            "tool_choice" => tool_choice_to_chat(value, &mut chat, &mut out)?,
            other => out.left_out.add(other),
        }
    }
    let Some(list) = req.get("messages").and_then(Value::as_array) else {
        return Err(GatewayError::invalid(
            "missing_messages",
            "the request has no 'messages' list",
        ));
    };
    for (i, m) in list.iter().enumerate() {
        message_to_chat(m, i, &mut messages, &mut out)?;
    }
    // A tool choice with no tool left to choose (every tool was a hosted one).
    if !chat.contains_key("tools") {
        chat.remove("tool_choice");
        chat.remove("parallel_tool_calls");
    }
    chat.insert("messages".to_owned(), Value::Array(messages));
    out.request = Value::Object(chat);
    Ok(out)
}

/// `system`: a string, or text blocks (joined by a blank line).
fn system_text(value: &Value) -> Result<Value, GatewayError> {
    match value {
        Value::String(_) => Ok(value.clone()),
        Value::Array(blocks) => {
            let mut parts = Vec::new();
            for b in blocks {
                match (b["type"].as_str(), b["text"].as_str()) {
                    (Some("text"), Some(t)) => parts.push(t),
                    _ => return Err(refuse("'system' holds a block that is not text")),
                }
            }
            Ok(json!(parts.join("\n\n")))
        }
        _ => Err(refuse("'system' must be a string or a list of text blocks")),
    }
}

/// `tools`: custom tools (no `type`, or `"custom"`) as functions; a hosted tool (any
/// other `type`: `web_search_…`, `bash_…`, `text_editor_…`) has no place at a chat
/// upstream, which could not run it: left out and named.
fn tools_to_chat(value: &Value, out: &mut ToChat) -> Result<Vec<Value>, GatewayError> {
    let Some(tools) = value.as_array() else {
        return Err(GatewayError::invalid(
            "invalid_tools",
            "'tools' must be a list",
        ));
    };
    let mut chat = Vec::with_capacity(tools.len());
    for t in tools {
        let name = t["name"].as_str().ok_or_else(|| {
            GatewayError::invalid("invalid_tools", "every tool needs a string 'name'")
        })?;
        let kind = t["type"].as_str().unwrap_or("custom");
        if kind != "custom" {
            out.left_out.add(format!("tool {name} ({kind})"));
            continue;
        }
        let mut function = Map::new();
        function.insert("name".to_owned(), json!(name));
        if let Some(d) = t.get("description") {
            function.insert("description".to_owned(), d.clone());
        }
        function.insert(
            "parameters".to_owned(),
            t.get("input_schema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"})),
        );
        if let Some(s) = t.get("strict") {
            function.insert("strict".to_owned(), s.clone());
        }
        for key in t.as_object().into_iter().flat_map(Map::keys) {
            if !matches!(
                key.as_str(),
                "name" | "description" | "input_schema" | "type" | "strict"
            ) {
                out.left_out.add(format!("tools[].{key}"));
            }
        }
        chat.push(object([
            ("type", Value::from("function")),
            ("function", Value::Object(function)),
        ]));
    }
    Ok(chat)
}

/// `tool_choice`: `auto`, `any` (→ `required`), `tool` (→ that function), `none`;
/// `disable_parallel_tool_use` → `parallel_tool_calls: false`.
fn tool_choice_to_chat(
    value: &Value,
    chat: &mut Map<String, Value>,
    out: &mut ToChat,
) -> Result<(), GatewayError> {
    let choice = match value["type"].as_str() {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            let name = value["name"]
                .as_str()
                .ok_or_else(|| refuse("a tool_choice of type 'tool' needs a 'name'"))?;
            json!({"type": "function", "function": {"name": name}})
        }
        _ => {
            return Err(refuse(
                "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}",
            ));
        }
    };
    chat.insert("tool_choice".to_owned(), choice);
    if value["disable_parallel_tool_use"].as_bool() == Some(true) {
        chat.insert("parallel_tool_calls".to_owned(), json!(false));
    }
    if value.get("cache_control").is_some() {
        out.left_out.add("cache_control");
    }
    Ok(())
}

/// One Messages message as chat messages: a user turn's `tool_result` blocks become
/// tool messages (first, in order: they answer the previous turn's calls), the rest one
/// user message; an assistant turn one assistant message (`text`, `thinking` as
/// `reasoning_content`, `tool_use` as `tool_calls`).
fn message_to_chat(
    m: &Value,
    at: usize,
    messages: &mut Vec<Value>,
    out: &mut ToChat,
) -> Result<(), GatewayError> {
    let role = m["role"].as_str().unwrap_or_default();
    let content = &m["content"];
    match (role, content) {
        // A system message within the conversation (what Claude Code sends for its
        // environment notes): a chat system message where it stands.
        ("system", _) => {
            messages.push(json!({"role": "system", "content": system_text(content)?}));
            Ok(())
        }
        ("user" | "assistant", Value::String(text)) => {
            messages.push(json!({"role": role, "content": text}));
            Ok(())
        }
        ("user", Value::Array(blocks)) => user_blocks(blocks, at, messages, out),
        ("assistant", Value::Array(blocks)) => {
            messages.push(assistant_blocks(blocks, at, out)?);
            Ok(())
        }
        ("user" | "assistant", _) => Err(refuse(format!(
            "messages[{at}].content must be a string or a list of content blocks"
        ))),
        _ => Err(refuse(format!(
            "messages[{at}].role must be \"user\", \"assistant\" or \"system\""
        ))),
    }
}

fn user_blocks(
    blocks: &[Value],
    at: usize,
    messages: &mut Vec<Value>,
    out: &mut ToChat,
) -> Result<(), GatewayError> {
    let mut parts = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        note_cache(b, out);
        match b["type"].as_str() {
            Some("tool_result") => {
                let id = b["tool_use_id"].as_str().ok_or_else(|| {
                    refuse(format!(
                        "messages[{at}].content[{j}]: a tool_result needs 'tool_use_id'"
                    ))
                })?;
                let (mut text, images) = result_content(&b["content"], at, j)?;
                if b["is_error"].as_bool() == Some(true) {
                    // Chat has no error flag on a tool message: the text says it.
                    text = format!("Error: {text}");
                }
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
                // A chat tool message holds text only: its images follow in the user
                // message, said to be the result's.
                if !images.is_empty() {
                    parts.push(json!({"type": "text", "text": format!("(the images of the result of {id})")}));
                    parts.extend(images);
                }
            }
            Some(t) if out.keep && !matches!(t, "text" | "image") => parts.push(b.clone()),
            _ => parts.push(user_part(b, at, j)?),
        }
    }
    match parts.as_slice() {
        [] => {}
        [only] if only["type"] == "text" => {
            messages.push(json!({"role": "user", "content": only["text"]}));
        }
        _ => messages.push(json!({"role": "user", "content": parts})),
    }
    Ok(())
}

/// A user block as a chat content part: `text`, or an `image` (base64 or URL source).
fn user_part(b: &Value, at: usize, j: usize) -> Result<Value, GatewayError> {
    match b["type"].as_str() {
        Some("text") => Ok(json!({"type": "text", "text": b["text"].as_str().unwrap_or_default()})),
        Some("image") => image_part(&b["source"]).ok_or_else(|| {
            refuse(format!(
                "messages[{at}].content[{j}]: an image needs a base64 or url source"
            ))
        }),
        Some(other) => Err(refuse(format!(
            "messages[{at}].content[{j}]: a '{other}' block cannot be sent to a chat_completions \
             upstream (text, image, tool_result and, from the assistant, tool_use and thinking can)"
        ))),
        None => Err(refuse(format!("messages[{at}].content[{j}] has no 'type'"))),
    }
}

fn image_part(source: &Value) -> Option<Value> {
    let url = match source["type"].as_str()? {
        "base64" => format!(
            "data:{};base64,{}",
            source["media_type"].as_str()?,
            source["data"].as_str()?
        ),
        "url" => source["url"].as_str()?.to_owned(),
        _ => return None,
    };
    Some(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// A `tool_result`'s content: its text (blocks joined by a newline) and its images.
fn result_content(
    content: &Value,
    at: usize,
    j: usize,
) -> Result<(String, Vec<Value>), GatewayError> {
    match content {
        Value::Null => Ok((String::new(), Vec::new())),
        Value::String(s) => Ok((s.clone(), Vec::new())),
        Value::Array(blocks) => {
            let mut text = Vec::new();
            let mut images = Vec::new();
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => text.push(b["text"].as_str().unwrap_or_default()),
                    Some("image") => images.push(image_part(&b["source"]).ok_or_else(|| {
                        refuse(format!(
                            "messages[{at}].content[{j}]: an image needs a base64 or url source"
                        ))
                    })?),
                    _ => {
                        return Err(refuse(format!(
                            "messages[{at}].content[{j}]: a tool_result may hold text and image blocks"
                        )));
                    }
                }
            }
            Ok((text.join("\n"), images))
        }
        _ => Err(refuse(format!(
            "messages[{at}].content[{j}]: a tool_result's content must be a string or blocks"
        ))),
    }
}

fn assistant_blocks(blocks: &[Value], at: usize, out: &mut ToChat) -> Result<Value, GatewayError> {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    let (mut thinking, mut server) = (Vec::new(), Vec::new());
    for (j, b) in blocks.iter().enumerate() {
        note_cache(b, out);
        match b["type"].as_str() {
            Some("text") => text.push_str(b["text"].as_str().unwrap_or_default()),
            Some("thinking") => {
                reasoning.push_str(b["thinking"].as_str().unwrap_or_default());
                if out.keep {
                    thinking.push(b.clone());
                } else if b["signature"].as_str().is_some_and(|s| !s.is_empty()) {
                    out.left_out.add("thinking.signature");
                }
            }
            Some("redacted_thinking") if out.keep => thinking.push(b.clone()),
            Some("redacted_thinking") => out.left_out.add("redacted_thinking"),
            Some("tool_use") => {
                let (Some(id), Some(name)) = (b["id"].as_str(), b["name"].as_str()) else {
                    return Err(refuse(format!(
                        "messages[{at}].content[{j}]: a tool_use needs 'id' and 'name'"
                    )));
                };
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": input.to_string()}}));
            }
            Some(_) if out.keep => server.push(b.clone()),
            Some(other) => {
                return Err(refuse(format!(
                    "messages[{at}].content[{j}]: an assistant '{other}' block cannot be sent to \
                     a chat_completions upstream"
                )));
            }
            None => return Err(refuse(format!("messages[{at}].content[{j}] has no 'type'"))),
        }
    }
    Ok(Value::Object(crate::upstreams::chat_assistant(
        text,
        reasoning,
        vec![("thinking_blocks", thinking), ("server_blocks", server)],
        calls,
    )))
}

fn note_cache(b: &Value, out: &mut ToChat) {
    if b.get("cache_control").is_some() {
        out.left_out.add("cache_control");
    }
}

/// A chat completion (mended) as a Messages message: `reasoning_content` as a
/// `thinking` block, the text as a `text` block, each call a `tool_use` block with its
/// arguments as the `input` object; `stop_reason` from `finish_reason` (`tool_use`
/// whenever a call is there). `left_out`: the calls whose arguments are not an object
/// (they stay as an empty `input`, and are named).
pub(crate) fn completion_to_message(completion: &Value, left_out: &mut Vec<String>) -> Value {
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let mut content = Vec::new();
    // A Messages upstream's own thinking blocks, signed, carried through the chat form.
    match message["thinking_blocks"].as_array() {
        Some(blocks) => content.extend(blocks.iter().cloned()),
        None => {
            if let Some(r) = message["reasoning_content"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                content.push(json!({"type": "thinking", "thinking": r, "signature": ""}));
            }
        }
    }
    content.extend(
        message["server_blocks"]
            .as_array()
            .into_iter()
            .flatten()
            .cloned(),
    );
    if let Some(t) = message["content"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": t}));
    }
    for c in message["tool_calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let id = c["id"].as_str().unwrap_or_default();
        let arguments = c["function"]["arguments"].as_str().unwrap_or_default();
        let input = match serde_json::from_str::<Value>(arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                left_out.push(format!("the arguments of {id}: not a JSON object"));
                json!({})
            }
        };
        content.push(object([
            ("type", Value::from("tool_use")),
            ("id", Value::from(id)),
            ("name", c["function"]["name"].clone()),
            ("input", input),
        ]));
    }
    let has_calls = content.iter().any(|b| b["type"] == "tool_use");
    let stop_reason = stop_reason(choice["finish_reason"].as_str(), has_calls);
    let usage = &completion["usage"];
    let count = |key: &str| Value::from(usage[key].as_u64().unwrap_or(0));
    object([
        (
            "id",
            Value::String(format!(
                "msg_{}",
                completion["id"].as_str().unwrap_or("toolmend")
            )),
        ),
        ("type", Value::from("message")),
        ("role", Value::from("assistant")),
        ("model", completion["model"].clone()),
        ("content", Value::Array(content)),
        ("stop_reason", Value::from(stop_reason)),
        ("stop_sequence", Value::Null),
        (
            "usage",
            object([
                ("input_tokens", count("prompt_tokens")),
                ("output_tokens", count("completion_tokens")),
            ]),
        ),
    ])
}

/// The `stop_reason` for a chat `finish_reason`: `tool_use` whenever a call is there.
pub(crate) fn stop_reason(finish_reason: Option<&str>, has_calls: bool) -> &'static str {
    match finish_reason {
        _ if has_calls => "tool_use",
        Some("length") => "max_tokens",
        Some("content_filter") => "refusal",
        _ => "end_turn",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_conversation_with_calls_and_results_translates_block_by_block() {
        let req = json!({
            "model": "m", "max_tokens": 100, "system": [{"type": "text", "text": "Be brief."},
                {"type": "text", "text": "Use tools.", "cache_control": {"type": "ephemeral"}}],
            "stop_sequences": ["END"], "metadata": {"user_id": "u1"},
            "tools": [{"name": "get_weather", "description": "d",
                       "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
                      {"type": "web_search_20250305", "name": "web_search"}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Need the tool.", "signature": "sig"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                    {"type": "text", "text": "And tomorrow?"}]}
            ]
        });
        let t = request_to_chat(&req).unwrap();
        assert_eq!(
            t.request,
            json!({
                "model": "m", "max_tokens": 100, "stop": ["END"], "user": "u1",
                "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
                "tool_choice": "required", "parallel_tool_calls": false,
                "messages": [
                    {"role": "system", "content": "Be brief.\n\nUse tools."},
                    {"role": "user", "content": "Weather in Oslo?"},
                    {"role": "assistant", "content": "Checking.", "reasoning_content": "Need the tool.",
                     "tool_calls": [{"id": "toolu_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
                    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
                    {"role": "user", "content": "And tomorrow?"}
                ]
            })
        );
        for what in [
            "tool web_search (web_search_20250305)",
            "thinking",
            "thinking.signature",
        ] {
            assert!(
                t.left_out.0.iter().any(|l| l == what),
                "{what} in {:?}",
                t.left_out.0
            );
        }
    }

    #[test]
    fn a_tool_error_and_its_images_are_said_not_lost() {
        let req = json!({"model": "m", "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": true,
                "content": [{"type": "text", "text": "no such file"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}}]}]}]});
        let t = request_to_chat(&req).unwrap();
        let m = &t.request["messages"];
        assert_eq!(
            m[0],
            json!({"role": "tool", "tool_call_id": "t1", "content": "Error: no such file"})
        );
        assert_eq!(m[1]["role"], "user");
        assert_eq!(
            m[1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAA"
        );
    }

    #[test]
    fn what_a_chat_upstream_cannot_take_is_refused_with_its_place() {
        let doc = json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}]});
        let e = request_to_chat(&doc).unwrap_err();
        assert!(
            e.to_string()
                .contains("messages[0].content[0]: a 'document' block"),
            "{e}"
        );
        let system = json!({"model": "m", "messages": [{"role": "user", "content": "hi"},
            {"role": "system", "content": [{"type": "text", "text": "env"}]}]});
        assert_eq!(
            request_to_chat(&system).unwrap().request["messages"][1],
            json!({"role": "system", "content": "env"})
        );
        let no_messages = request_to_chat(&json!({"model": "m"})).unwrap_err();
        assert_eq!(no_messages.code(), "missing_messages");
        assert!(request_to_chat(&json!([1])).is_err());
    }

    #[test]
    fn a_completion_reads_back_as_blocks_with_the_stop_reason() {
        let completion = json!({"id": "c1", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": "Checking.", "reasoning_content": "hmm",
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5}});
        let mut left = Vec::new();
        let m = completion_to_message(&completion, &mut left);
        assert_eq!(
            m["content"],
            json!([
            {"type": "thinking", "thinking": "hmm", "signature": ""},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}])
        );
        assert_eq!(m["stop_reason"], "tool_use");
        assert_eq!(m["usage"], json!({"input_tokens": 12, "output_tokens": 5}));
        assert!(left.is_empty());
        let cut = json!({"id": "c2", "choices": [{"finish_reason": "length", "message": {"content": "abc"}}]});
        assert_eq!(
            completion_to_message(&cut, &mut left)["stop_reason"],
            "max_tokens"
        );
    }

    #[test]
    fn translated_and_back_the_calls_and_results_are_the_same() {
        // The round trip the issue asks for: a Messages turn with calls, as chat, and
        // the chat answer back as Messages blocks: ids, names, inputs kept.
        let turn = json!([
            {"type": "text", "text": "Two lookups."},
            {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {"x": 1, "y": [1, 2]}},
            {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}]);
        let req = json!({"model": "m", "messages": [{"role": "user", "content": "go"},
            {"role": "assistant", "content": turn}]});
        let chat = request_to_chat(&req).unwrap().request;
        let completion = json!({"id": "x", "choices": [{"finish_reason": "tool_calls",
            "message": chat["messages"][1]}]});
        let back = completion_to_message(&completion, &mut Vec::new());
        assert_eq!(back["content"], turn);
    }
}
