//! The Responses wire and the chat-completions one: a Responses request (`input` as a
//! string or items, `instructions`, `tools`) as the chat request a `chat_completions`
//! upstream takes, and a chat completion back as a Responses object (`output` items). What
//! a chat upstream has no place for is left out and named (the account's
//! `translation.left_out`) when the model need not see it (hosted tools it could not run,
//! `store`, `include`, encrypted reasoning), or refused with a 400 that says where it is.

use serde_json::{Map, Value, json};

use crate::{
    fronts::translate::{LeftOut, object},
    server::error::GatewayError,
};

/// A Responses request translated: the chat request, and what had no place in it.
#[derive(Debug, Default)]
pub(crate) struct ToChat {
    pub(crate) request: Value,
    pub(crate) left_out: LeftOut,
    /// `previous_response_id`: the kept conversation goes before the input.
    pub(crate) previous: Option<String>,
    /// The first chat message is the `instructions` (not carried to a later response).
    pub(crate) instructions: bool,
    /// The upstream speaks Responses too: reasoning items are carried whole in the chat
    /// message (`reasoning_items`), encrypted content and all, for the way back.
    keep: bool,
}

fn refuse(message: impl Into<String>) -> GatewayError {
    GatewayError::invalid("invalid_input", message)
}

/// The chat request for Responses `body`, toward a chat upstream.
pub(crate) fn request_to_chat(body: &Value) -> Result<ToChat, GatewayError> {
    request_to_chat_keeping(body, false)
}

/// The chat request for Responses `body`; `keep`: toward a Responses upstream, with
/// reasoning items carried for the way back ([`ToChat::keep`]).
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
    let mut messages = Vec::new();
    for (key, value) in req {
        match key.as_str() {
            "model" | "temperature" | "top_p" | "stream" | "user" | "parallel_tool_calls" => {
                chat.insert(key.clone(), value.clone());
            }
            "max_output_tokens" => {
                chat.insert("max_tokens".to_owned(), value.clone());
            }
            "input" => {}
            "instructions" => {
                if let Some(text) = value.as_str() {
                    messages.push(json!({"role": "system", "content": text}));
                    out.instructions = true;
                } else if !value.is_null() {
                    return Err(refuse("'instructions' must be a string"));
                }
            }
            "tools" => {
                let tools = tools_to_chat(value, &mut out)?;
                if !tools.is_empty() {
                    chat.insert("tools".to_owned(), Value::Array(tools));
                }
            }
            "tool_choice" => {
                chat.insert("tool_choice".to_owned(), tool_choice_to_chat(value)?);
            }
            "text" => {
                if let Some(format) = response_format(value) {
                    chat.insert("response_format".to_owned(), format);
                }
            }
            "previous_response_id" if !value.is_null() => {
                let id = value
                    .as_str()
                    .ok_or_else(|| refuse("'previous_response_id' must be a string"))?;
                out.previous = Some(id.to_owned());
            }
            // Nothing the model must see: named.
            other => {
                if !value.is_null() {
                    out.left_out.add(other);
                }
            }
        }
    }
    match req.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => items_to_chat(items, &mut messages, &mut out)?,
        _ => {
            return Err(GatewayError::invalid(
                "missing_input",
                "the request has no 'input' (a string or a list of items)",
            ));
        }
    }
    if !chat.contains_key("tools") {
        chat.remove("tool_choice");
        chat.remove("parallel_tool_calls");
    }
    chat.insert("messages".to_owned(), Value::Array(messages));
    out.request = Value::Object(chat);
    Ok(out)
}

/// `tools`: function tools as chat functions; any other type (`web_search`, `custom`,
/// `local_shell`, `file_search`, `namespace` …) has no place at a chat upstream: left
/// out and named.
fn tools_to_chat(value: &Value, out: &mut ToChat) -> Result<Vec<Value>, GatewayError> {
    let Some(tools) = value.as_array() else {
        return Err(GatewayError::invalid(
            "invalid_tools",
            "'tools' must be a list",
        ));
    };
    let mut chat = Vec::with_capacity(tools.len());
    for t in tools {
        let kind = t["type"].as_str().unwrap_or_default();
        let name = t["name"].as_str();
        if kind == "namespace"
            && let (Some(ns), Some(inner)) = (name, t["tools"].as_array())
        {
            // Flattened: each function of the namespace as `{namespace}__{name}`, read
            // back into `namespace` and `name` (see `flat_names`).
            for f in inner {
                match (f["type"].as_str(), f["name"].as_str()) {
                    (Some("function"), Some(n)) => {
                        let mut flat = f.clone();
                        flat["name"] = json!(flat_name(ns, n));
                        chat.extend(tools_to_chat(&json!([flat]), out)?);
                    }
                    (kind, n) => out.left_out.add(format!(
                        "tool {ns}.{} ({})",
                        n.unwrap_or("?"),
                        kind.unwrap_or("?")
                    )),
                }
            }
            continue;
        }
        if kind == "custom"
            && let Some(n) = name
        {
            chat.push(custom_as_function(t, n));
            continue;
        }
        if kind != "function" {
            out.left_out.add(match name {
                Some(n) => format!("tool {n} ({kind})"),
                None => format!("tool ({kind})"),
            });
            continue;
        }
        let name = name.ok_or_else(|| {
            GatewayError::invalid("invalid_tools", "every function tool needs a string 'name'")
        })?;
        let mut function = Map::new();
        function.insert("name".to_owned(), json!(name));
        for key in ["description", "strict"] {
            if let Some(v) = t.get(key).filter(|v| !v.is_null()) {
                function.insert(key.to_owned(), v.clone());
            }
        }
        function.insert(
            "parameters".to_owned(),
            t.get("parameters")
                .filter(|p| !p.is_null())
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        );
        chat.push(object([
            ("type", Value::from("function")),
            ("function", Value::Object(function)),
        ]));
    }
    Ok(chat)
}

fn tool_choice_to_chat(value: &Value) -> Result<Value, GatewayError> {
    match value {
        Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => Ok(value.clone()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = o
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| refuse("a tool_choice of type 'function' needs a 'name'"))?;
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        _ => Err(refuse(
            "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": …}",
        )),
    }
}

/// `text.format` as chat's `response_format` (`json_schema`, `json_object`; `text` is
/// the default).
fn response_format(text: &Value) -> Option<Value> {
    let format = text.get("format")?;
    match format["type"].as_str()? {
        "json_object" => Some(json!({"type": "json_object"})),
        "json_schema" => {
            let mut schema = Map::new();
            for key in ["name", "schema", "strict", "description"] {
                if let Some(v) = format.get(key) {
                    schema.insert(key.to_owned(), v.clone());
                }
            }
            Some(json!({"type": "json_schema", "json_schema": schema}))
        }
        _ => None,
    }
}

/// The input items as chat messages: messages by role (`developer` as `system`),
/// consecutive `function_call`s (with the assistant text just before them and the
/// reasoning before that) as one assistant message, each `function_call_output` a tool
/// message.
fn items_to_chat(
    items: &[Value],
    messages: &mut Vec<Value>,
    out: &mut ToChat,
) -> Result<(), GatewayError> {
    // The assistant message being built (text, reasoning, calls), flushed when anything
    // else comes.
    let mut assistant: Option<Map<String, Value>> = None;
    let flush = |assistant: &mut Option<Map<String, Value>>, messages: &mut Vec<Value>| {
        if let Some(mut m) = assistant.take() {
            if !m.contains_key("content") {
                m.insert("content".to_owned(), Value::Null);
            }
            messages.push(Value::Object(m));
        }
    };
    let mut pending_images: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item["type"]
            .as_str()
            .unwrap_or(if item.get("role").is_some() {
                "message"
            } else {
                ""
            });
        match kind {
            "message" => {
                let role = item["role"].as_str().unwrap_or_default();
                match role {
                    "assistant" => {
                        let text = content_text(&item["content"], i)?;
                        let a = assistant.get_or_insert_with(assistant_message);
                        if a.contains_key("tool_calls") {
                            // Text after calls: a new turn.
                            flush(&mut assistant, messages);
                            assistant = Some(assistant_message());
                        }
                        let a = assistant.as_mut().unwrap_or_else(|| unreachable!());
                        let joined = format!(
                            "{}{text}",
                            a.get("content").and_then(Value::as_str).unwrap_or_default()
                        );
                        a.insert("content".to_owned(), json!(joined));
                    }
                    "user" | "system" | "developer" => {
                        flush(&mut assistant, messages);
                        let role = if role == "developer" { "system" } else { role };
                        let content = if role == "user" {
                            user_content(&item["content"], i)?
                        } else {
                            json!(content_text(&item["content"], i)?)
                        };
                        messages.push(json!({"role": role, "content": content}));
                    }
                    other => {
                        return Err(refuse(format!(
                            "input[{i}]: a message's role must be user, assistant, system or \
                             developer, not {other:?}"
                        )));
                    }
                }
            }
            "function_call" => {
                let (Some(call_id), Some(name)) = (item["call_id"].as_str(), item["name"].as_str())
                else {
                    return Err(refuse(format!(
                        "input[{i}]: a function_call needs 'call_id' and 'name'"
                    )));
                };
                let arguments = item["arguments"].as_str().unwrap_or("{}");
                let flat;
                let name = match item["namespace"].as_str() {
                    Some(ns) => {
                        flat = flat_name(ns, name);
                        flat.as_str()
                    }
                    None => name,
                };
                let a = assistant.get_or_insert_with(assistant_message);
                let calls = a
                    .entry("tool_calls")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Some(calls) = calls.as_array_mut() {
                    calls.push(json!({"id": call_id, "type": "function",
                        "function": {"name": name, "arguments": arguments}}));
                }
            }
            "custom_tool_call" => {
                let (Some(call_id), Some(name)) = (item["call_id"].as_str(), item["name"].as_str())
                else {
                    return Err(refuse(format!(
                        "input[{i}]: a custom_tool_call needs 'call_id' and 'name'"
                    )));
                };
                // Its free-form input as the one string argument of the function it is
                // toward a chat upstream (`custom_as_function`).
                let arguments = json!({"input": item["input"].as_str().unwrap_or_default()});
                let a = assistant.get_or_insert_with(assistant_message);
                if let Value::Array(calls) = a
                    .entry("tool_calls")
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    calls.push(json!({"id": call_id, "type": "function",
                        "function": {"name": name, "arguments": arguments.to_string()}}));
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                flush(&mut assistant, messages);
                let Some(call_id) = item["call_id"].as_str() else {
                    return Err(refuse(format!("input[{i}]: a {kind} needs 'call_id'")));
                };
                let (text, images) = output_content(&item["output"], i)?;
                messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": text}));
                if !images.is_empty() {
                    pending_images.push(json!({"type": "text",
                        "text": format!("(the images of the output of {call_id})")}));
                    pending_images.extend(images);
                }
            }
            "reasoning" => {
                let text = reasoning_text(item);
                if out.keep {
                    if assistant
                        .as_ref()
                        .is_some_and(|a| a.contains_key("tool_calls") || a.contains_key("content"))
                    {
                        flush(&mut assistant, messages);
                    }
                    let a = assistant.get_or_insert_with(assistant_message);
                    if let Value::Array(items) = a
                        .entry("reasoning_items")
                        .or_insert_with(|| Value::Array(Vec::new()))
                    {
                        items.push(item.clone());
                    }
                } else if item.get("encrypted_content").is_some_and(|e| !e.is_null()) {
                    out.left_out.add("reasoning.encrypted_content");
                }
                if !text.is_empty() {
                    if assistant
                        .as_ref()
                        .is_some_and(|a| a.contains_key("tool_calls") || a.contains_key("content"))
                    {
                        flush(&mut assistant, messages);
                    }
                    let a = assistant.get_or_insert_with(assistant_message);
                    let joined = format!(
                        "{}{text}",
                        a.get("reasoning_content")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    );
                    a.insert("reasoning_content".to_owned(), json!(joined));
                }
            }
            "" => return Err(refuse(format!("input[{i}] has no 'type'"))),
            other => {
                return Err(refuse(format!(
                    "input[{i}]: a '{other}' item cannot be sent to a chat_completions upstream \
                     (message, function_call, function_call_output and reasoning can)"
                )));
            }
        }
        // Images of tool outputs go in a user message once the outputs are all in.
        let next_is_output = items
            .get(i + 1)
            .is_some_and(|n| n["type"] == "function_call_output");
        if !pending_images.is_empty() && !next_is_output {
            messages.push(json!({"role": "user", "content": std::mem::take(&mut pending_images)}));
        }
    }
    flush(&mut assistant, messages);
    Ok(())
}

fn assistant_message() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("role".to_owned(), json!("assistant"));
    m
}

/// A message's content as text: a string, or parts (`input_text`, `output_text`,
/// `refusal`, `text`) joined.
fn content_text(content: &Value, i: usize) -> Result<String, GatewayError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for p in parts {
                match p["type"].as_str() {
                    Some("input_text" | "output_text" | "text") => {
                        text.push_str(p["text"].as_str().unwrap_or_default());
                    }
                    Some("refusal") => text.push_str(p["refusal"].as_str().unwrap_or_default()),
                    other => {
                        return Err(refuse(format!(
                            "input[{i}]: a {other:?} part has no place in this message toward a \
                             chat_completions upstream"
                        )));
                    }
                }
            }
            Ok(text)
        }
        _ => Err(refuse(format!(
            "input[{i}]: a message's content must be a string or a list of parts"
        ))),
    }
}

/// A user message's content: a string, or parts (`input_text`, `input_image`) as chat
/// parts.
fn user_content(content: &Value, i: usize) -> Result<Value, GatewayError> {
    let Value::Array(parts) = content else {
        return Ok(json!(content_text(content, i)?));
    };
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        match p["type"].as_str() {
            Some("input_text" | "text" | "output_text") => {
                out.push(json!({"type": "text", "text": p["text"].as_str().unwrap_or_default()}));
            }
            Some("input_image") => out.push(image_part(p).ok_or_else(|| {
                refuse(format!("input[{i}]: an input_image needs an 'image_url'"))
            })?),
            other => {
                return Err(refuse(format!(
                    "input[{i}]: a {other:?} part cannot be sent to a chat_completions upstream \
                     (input_text and input_image can)"
                )));
            }
        }
    }
    Ok(Value::Array(out))
}

fn image_part(p: &Value) -> Option<Value> {
    let url = p["image_url"].as_str()?;
    let mut image = json!({"url": url});
    if let Some(d) = p["detail"].as_str() {
        image["detail"] = json!(d);
    }
    Some(json!({"type": "image_url", "image_url": image}))
}

/// A `function_call_output`'s output: its text and its images.
fn output_content(output: &Value, i: usize) -> Result<(String, Vec<Value>), GatewayError> {
    match output {
        Value::String(s) => Ok((s.clone(), Vec::new())),
        Value::Array(parts) => {
            let mut text = Vec::new();
            let mut images = Vec::new();
            for p in parts {
                match p["type"].as_str() {
                    Some("input_text" | "output_text" | "text") => {
                        text.push(p["text"].as_str().unwrap_or_default());
                    }
                    Some("input_image") => images.push(image_part(p).ok_or_else(|| {
                        refuse(format!("input[{i}]: an input_image needs an 'image_url'"))
                    })?),
                    other => {
                        return Err(refuse(format!(
                            "input[{i}]: a {other:?} part of a function_call_output cannot be sent \
                             to a chat_completions upstream"
                        )));
                    }
                }
            }
            Ok((text.join("\n"), images))
        }
        _ => Err(refuse(format!(
            "input[{i}]: a function_call_output's output must be a string or a list of parts"
        ))),
    }
}

/// A reasoning item's readable text: its `content` (`reasoning_text`), else its summary.
fn reasoning_text(item: &Value) -> String {
    let from = |key: &str| -> String {
        item[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let content = from("content");
    if content.is_empty() {
        from("summary")
    } else {
        content
    }
}

/// A chat completion (mended) as a Responses object: reasoning as a `reasoning` item,
/// the text as a `message` item, each call a `function_call` item (`call_id` the call's
/// id, `arguments` its mended text); `status` `incomplete` for a cut-off answer. `request`
/// gives the echoed fields (`instructions`, `tools`, `tool_choice` …).
pub(crate) fn completion_to_response(completion: &Value, request: &Value) -> Value {
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let base = completion["id"].as_str().unwrap_or("toolmend");
    let mut output = Vec::new();
    // A Responses upstream's own reasoning items, carried through the chat form.
    match message["reasoning_items"].as_array() {
        Some(items) => output.extend(items.iter().cloned()),
        None => {
            if let Some(r) = message["reasoning_content"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                output.push(json!({"type": "reasoning", "id": format!("rs_{base}"),
                    "summary": [{"type": "summary_text", "text": r}]}));
            }
        }
    }
    if let Some(t) = message["content"].as_str().filter(|t| !t.is_empty()) {
        output.push(json!({"type": "message", "id": format!("msg_{base}"), "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": t, "annotations": []}]}));
    }
    let flat = flat_names(request);
    for c in message["tool_calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        output.push(function_call_item(c, "completed", &flat));
    }
    let (status, incomplete) = status(choice["finish_reason"].as_str());
    let usage = &completion["usage"];
    let count = |key: &str| Value::from(usage[key].as_u64().unwrap_or(0));
    let echo = |key: &str, default: Value| request.get(key).cloned().unwrap_or(default);
    let mut response = object([
        ("id", Value::String(format!("resp_{base}"))),
        ("object", Value::from("response")),
        (
            "created_at",
            Value::from(completion["created"].as_u64().unwrap_or(0)),
        ),
        ("status", Value::from(status)),
        ("error", Value::Null),
        ("incomplete_details", incomplete),
        ("model", completion["model"].clone()),
        ("output", Value::Array(output)),
        (
            "parallel_tool_calls",
            echo("parallel_tool_calls", Value::Bool(true)),
        ),
        ("tool_choice", echo("tool_choice", Value::from("auto"))),
        ("tools", echo("tools", Value::Array(Vec::new()))),
        (
            "usage",
            object([
                ("input_tokens", count("prompt_tokens")),
                (
                    "input_tokens_details",
                    object([("cached_tokens", Value::from(0))]),
                ),
                ("output_tokens", count("completion_tokens")),
                (
                    "output_tokens_details",
                    object([("reasoning_tokens", Value::from(0))]),
                ),
                ("total_tokens", count("total_tokens")),
            ]),
        ),
    ]);
    for key in [
        "instructions",
        "temperature",
        "top_p",
        "max_output_tokens",
        "metadata",
        "user",
        "store",
    ] {
        if let Some(v) = request.get(key) {
            response[key] = v.clone();
        }
    }
    response
}

/// The chat name of function `name` in namespace `ns`.
fn flat_name(ns: &str, name: &str) -> String {
    format!("{ns}__{name}")
}

/// What a chat tool name stands for in the client's request, when it is not a plain
/// function of that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChatName {
    /// A function of a `namespace` tool: `(namespace, name)`.
    Namespaced(String, String),
    /// A `custom` (free-form) tool, a function of one string `input` toward chat.
    Custom,
}

/// The request's namespaced functions and custom tools, by their chat name.
pub(crate) type FlatNames = std::collections::HashMap<String, ChatName>;

/// The request's namespaced functions and custom tools, by their chat name.
pub(crate) fn flat_names(request: &Value) -> FlatNames {
    let mut out = FlatNames::new();
    for t in request["tools"].as_array().into_iter().flatten() {
        let Some(name) = t["name"].as_str() else {
            continue;
        };
        match t["type"].as_str() {
            Some("custom") => {
                out.insert(name.to_owned(), ChatName::Custom);
            }
            Some("namespace") => {
                for f in t["tools"].as_array().into_iter().flatten() {
                    if let Some(n) = f["name"].as_str() {
                        out.insert(
                            flat_name(name, n),
                            ChatName::Namespaced(name.to_owned(), n.to_owned()),
                        );
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A `custom` tool toward a chat upstream: a function of one string, `input`, its format
/// (a grammar, say) told in the description, for the model to follow.
fn custom_as_function(tool: &Value, name: &str) -> Value {
    let mut description = tool["description"].as_str().unwrap_or_default().to_owned();
    let format = &tool["format"];
    if let Some(definition) = format["definition"].as_str() {
        description.push_str(&format!(
            "\n\nThe input is free-form text, in this {} grammar ({}):\n{definition}",
            format["syntax"].as_str().unwrap_or("given"),
            format["type"].as_str().unwrap_or("grammar"),
        ));
    }
    object([
        ("type", Value::from("function")),
        (
            "function",
            object([
                ("name", Value::from(name)),
                ("description", Value::String(description)),
                (
                    "parameters",
                    json!({"type": "object", "properties": {"input": {"type": "string",
                        "description": "The tool's free-form input, as its description says."}},
                        "required": ["input"], "additionalProperties": false}),
                ),
            ]),
        ),
    ])
}

/// The free-form input of a call to a custom tool: its `input` argument, or, when the
/// arguments are not an object holding a string `input`, their text as the model wrote it.
pub(crate) fn custom_input(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(mut args)) => match args.remove("input") {
            Some(Value::String(input)) => input,
            _ => arguments.to_owned(),
        },
        _ => arguments.to_owned(),
    }
}

/// A chat call as a `function_call` item; a namespaced function's call with its
/// `namespace` and its own `name`, a custom tool's as a `custom_tool_call` with its
/// `input` (`flat`: [`flat_names`] of the request).
pub(crate) fn function_call_item(call: &Value, status: &str, flat: &FlatNames) -> Value {
    let id = call["id"].as_str().unwrap_or_default();
    let name = call["function"]["name"].as_str().unwrap_or_default();
    if flat.get(name) == Some(&ChatName::Custom) {
        let arguments = call["function"]["arguments"].as_str().unwrap_or_default();
        return object([
            ("type", Value::from("custom_tool_call")),
            ("id", Value::String(format!("ctc_{id}"))),
            ("call_id", Value::from(id)),
            ("name", Value::from(name)),
            ("input", Value::String(custom_input(arguments))),
            ("status", Value::from(status)),
        ]);
    }
    let mut item = object([
        ("type", Value::from("function_call")),
        ("id", Value::String(format!("fc_{id}"))),
        ("call_id", Value::from(id)),
        ("name", Value::from(name)),
        ("arguments", call["function"]["arguments"].clone()),
        ("status", Value::from(status)),
    ]);
    if let Some(ChatName::Namespaced(ns, n)) = flat.get(name) {
        item["name"] = json!(n);
        item["namespace"] = json!(ns);
    }
    item
}

/// `status` and `incomplete_details` for a chat `finish_reason`.
pub(crate) fn status(finish_reason: Option<&str>) -> (&'static str, Value) {
    match finish_reason {
        Some("length") => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some("content_filter") => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_conversation_of_items_translates_turn_by_turn() {
        let req = json!({
            "model": "m", "instructions": "Be brief.", "max_output_tokens": 50,
            "tools": [{"type": "function", "name": "shell", "description": "Run.",
                       "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
                      {"type": "web_search"}, {"type": "custom", "name": "apply_patch"}],
            "tool_choice": {"type": "function", "name": "shell"}, "store": false,
            "input": [
                {"role": "user", "content": "List files."},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use ls."}],
                 "encrypted_content": "gAAA"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Running."}]},
                {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"cmd\": \"ls\"}"},
                {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": "{\"cmd\": \"pwd\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "/w"}]},
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Note."}]}
            ]
        });
        let t = request_to_chat(&req).unwrap();
        assert_eq!(
            t.request,
            json!({
                "model": "m", "max_tokens": 50,
                "tools": [{"type": "function", "function": {"name": "shell", "description": "Run.",
                    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}},
                    {"type": "function", "function": {"name": "apply_patch", "description": "",
                    "parameters": {"type": "object", "properties": {"input": {"type": "string",
                        "description": "The tool's free-form input, as its description says."}},
                        "required": ["input"], "additionalProperties": false}}}],
                "tool_choice": {"type": "function", "function": {"name": "shell"}},
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "List files."},
                    {"role": "assistant", "reasoning_content": "Use ls.", "content": "Running.",
                     "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"ls\"}"}},
                        {"id": "call_2", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"pwd\"}"}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
                    {"role": "tool", "tool_call_id": "call_2", "content": "/w"},
                    {"role": "system", "content": "Note."}
                ]
            })
        );
        assert!(!t.left_out.0.iter().any(|l| l.contains("apply_patch")));
        for what in ["tool (web_search)", "store", "reasoning.encrypted_content"] {
            assert!(
                t.left_out.0.iter().any(|l| l == what),
                "{what} in {:?}",
                t.left_out.0
            );
        }
    }

    #[test]
    fn a_namespace_is_flattened_and_its_calls_read_back_under_it() {
        let req = json!({"model": "m", "tools": [{"type": "namespace", "name": "agents",
            "description": "Sub-agents.", "tools": [
                {"type": "function", "name": "spawn", "parameters": {"type": "object"}},
                {"type": "custom", "name": "note"}]}],
            "input": [{"role": "user", "content": "go"},
                {"type": "function_call", "namespace": "agents", "call_id": "c0", "name": "spawn", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c0", "output": "ok"}]});
        let t = request_to_chat(&req).unwrap();
        assert_eq!(t.request["tools"][0]["function"]["name"], "agents__spawn");
        assert_eq!(
            t.request["messages"][1]["tool_calls"][0]["function"]["name"],
            "agents__spawn"
        );
        assert!(
            t.left_out
                .0
                .iter()
                .any(|l| l == "tool agents.note (custom)"),
            "{:?}",
            t.left_out
        );
        let completion = json!({"id": "x", "choices": [{"finish_reason": "tool_calls", "message": {
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "agents__spawn", "arguments": "{}"}}]}}]});
        let back = completion_to_response(&completion, &req);
        assert_eq!(
            (
                back["output"][0]["name"].as_str(),
                back["output"][0]["namespace"].as_str()
            ),
            (Some("spawn"), Some("agents"))
        );
    }

    #[test]
    fn a_string_input_and_what_cannot_go_are_answered() {
        let t = request_to_chat(&json!({"model": "m", "input": "hi"})).unwrap();
        assert_eq!(
            t.request["messages"],
            json!([{"role": "user", "content": "hi"}])
        );
        let e = request_to_chat(
            &json!({"model": "m", "input": [{"type": "web_search_call", "id": "w"}]}),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("input[0]: a 'web_search_call' item"),
            "{e}"
        );
        let t = request_to_chat(
            &json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"}),
        )
        .unwrap();
        assert_eq!(t.previous.as_deref(), Some("resp_1"));
        assert_eq!(
            request_to_chat(&json!({"model": "m"})).unwrap_err().code(),
            "missing_input"
        );
    }

    #[test]
    fn a_completion_reads_back_as_output_items() {
        let completion = json!({"id": "c1", "created": 7, "model": "m", "choices": [{"index": 0,
            "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Running.",
            "reasoning_content": "hm", "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "shell", "arguments": "{\"cmd\":\"ls\"}"}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}});
        let r = completion_to_response(&completion, &json!({"instructions": "x"}));
        let kinds: Vec<&str> = r["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["reasoning", "message", "function_call"]);
        assert_eq!(r["output"][2]["call_id"], "call_1");
        assert_eq!(r["output"][2]["arguments"], "{\"cmd\":\"ls\"}");
        assert_eq!(r["status"], "completed");
        assert_eq!(r["instructions"], "x");
        assert_eq!(r["usage"]["total_tokens"], 7);
        let cut = json!({"id": "c2", "choices": [{"finish_reason": "length", "message": {"content": "ab"}}]});
        let r = completion_to_response(&cut, &json!({}));
        assert_eq!(
            (
                r["status"].as_str(),
                r["incomplete_details"]["reason"].as_str()
            ),
            (Some("incomplete"), Some("max_output_tokens"))
        );
    }

    #[test]
    fn items_translated_and_back_keep_the_calls() {
        let calls = json!([
            {"type": "function_call", "call_id": "call_a", "name": "f", "arguments": "{\"x\":1}"},
            {"type": "function_call", "call_id": "call_b", "name": "g", "arguments": "{}"}]);
        let mut input = vec![json!({"role": "user", "content": "go"})];
        input.extend(calls.as_array().unwrap().iter().cloned());
        let chat = request_to_chat(&json!({"model": "m", "input": input}))
            .unwrap()
            .request;
        let completion = json!({"id": "x", "choices": [{"finish_reason": "tool_calls", "message": chat["messages"][1]}]});
        let back = completion_to_response(&completion, &json!({}));
        for (b, c) in back["output"]
            .as_array()
            .unwrap()
            .iter()
            .zip(calls.as_array().unwrap())
        {
            assert_eq!(
                (&b["call_id"], &b["name"], &b["arguments"]),
                (&c["call_id"], &c["name"], &c["arguments"])
            );
        }
    }
}
