//! The chat-completions wire: a request body's `messages` to neutral messages and back,
//! the re-ask request, an answer's first choice, and the `finish_reason` a client gets.

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, Message, Tool, ToolCall};

use crate::{
    pipeline::{
        Pipeline,
        request::RequestNotes,
        server_tools::ServerTools,
        tools::{ToolCache, ToolsError},
    },
    server::error::GatewayError,
};

/// Where chat completions are posted, under `upstream.base_url`.
pub(crate) const PATH: &str = "/chat/completions";

/// The request path on a chat-completions body: `messages` decoded (after the count
/// limit), the pipeline's request path on them, and the body's `messages` rewritten when
/// they changed. Returns the messages as they go upstream (the history the response
/// path plans against) and what was done.
pub(crate) fn prepare(
    pipeline: &Pipeline,
    body: &mut Value,
) -> Result<(Vec<Message>, RequestNotes), GatewayError> {
    let Some(raw) = body.get("messages") else {
        return Err(GatewayError::invalid(
            "missing_messages",
            "the request has no 'messages'",
        ));
    };
    if let Some(n) = raw.as_array().map(Vec::len) {
        pipeline.check_message_count(n)?;
    }
    let messages: Vec<Message> =
        <Vec<Message> as serde::Deserialize>::deserialize(raw).map_err(|e| {
            GatewayError::invalid(
                "invalid_messages",
                format!("'messages' is not a list of chat messages: {e}"),
            )
        })?;
    let (messages, notes) = pipeline.prepare(messages)?;
    if notes.changed {
        body["messages"] = serde_json::to_value(&messages).unwrap_or(Value::Null);
    }
    Ok((messages, notes))
}

/// True for any value: the member is there.
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    <serde::de::IgnoredAny as serde::Deserialize>::deserialize(d).map(|_| true)
}

/// True when `text` (JSON) is an object: serde reads a struct from an array too.
pub(crate) fn is_object(text: &[u8]) -> bool {
    text.trim_ascii_start().first() == Some(&b'{')
}

/// [`prepare`] on a request whose `messages` may be left as the client's bytes: read typed
/// from them (no tree), rewritten into the body only when the request path changed them.
/// A history that does not read so goes [`prepare`]'s way, with its errors.
pub(crate) fn prepare_request(
    pipeline: &Pipeline,
    request: &mut super::body::Request,
) -> Result<(Vec<Message>, RequestNotes), GatewayError> {
    let typed = match request.take_history() {
        Some(messages) => Some(Ok(messages)),
        None => request
            .deferred("messages")
            .map(serde_json::from_slice::<Vec<Message>>),
    };
    let Some(Ok(messages)) = typed else {
        return prepare(pipeline, request.tree_mut()?);
    };
    pipeline.check_message_count(messages.len())?;
    let (messages, notes) = pipeline.prepare(messages)?;
    if notes.changed {
        request.tree_mut()?["messages"] = serde_json::to_value(&messages).unwrap_or(Value::Null);
    }
    Ok((messages, notes))
}

/// The re-ask request: `request` with the model's invalid `calls` and one tool message
/// of feedback per call appended, not streamed, one choice.
pub(crate) fn re_ask_body(
    request: &Value,
    calls: &[ToolCall],
    feedback: &[(String, String)],
) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect();
    let mut body = request.clone();
    let mut messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
    for (id, text) in feedback {
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
    }
    body["messages"] = Value::Array(messages);
    body["stream"] = json!(false);
    if let Some(o) = body.as_object_mut() {
        o.remove("stream_options");
        o.remove("n");
    }
    body
}

/// The next round's request (the round trip): `request` with `messages` replaced by the
/// round's (the answer and the server-side results appended), one choice.
pub(crate) fn next_round(request: &mut Value, messages: &[Message]) {
    request["messages"] = serde_json::to_value(messages).unwrap_or(Value::Null);
    if let Some(o) = request.as_object_mut() {
        o.remove("n");
    }
}

/// A streamed request read whole instead (the round trip reads every round as JSON and
/// writes the final answer as SSE): `stream` off, `stream_options` removed (providers
/// refuse it without `stream`). Returns `stream_options.include_usage`.
pub(crate) fn unstream(request: &mut Value) -> bool {
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    request["stream"] = json!(false);
    if let Some(o) = request.as_object_mut() {
        o.remove("stream_options");
    }
    include_usage
}

/// The first choice of a chat completion: its message and `finish_reason`.
pub(crate) fn first_choice(answer: &Value) -> Option<(AssistantMessage, Option<String>)> {
    let message =
        <AssistantMessage as serde::Deserialize>::deserialize(&answer["choices"][0]["message"])
            .ok()?;
    let finish = answer["choices"][0]["finish_reason"]
        .as_str()
        .map(str::to_owned);
    Some((message, finish))
}

/// The neutral model's `cut_off`: the upstream stopped at its token limit
/// (`finish_reason = "length"`), so its last call may be cut off.
pub(crate) fn cut_off(finish_reason: Option<&str>) -> bool {
    finish_reason == Some("length")
}

/// The `finish_reason` the client gets, when it is not the upstream's: `tool_calls` when
/// calls go out (read from the text, or after a `stop`), `stop` when none are left. A
/// `length` stays: the answer was cut off, whatever calls it holds.
pub(crate) fn finish_reason(
    upstream: Option<&str>,
    has_calls: bool,
    from_text: bool,
) -> Option<&'static str> {
    match upstream {
        Some("length") => None,
        Some("stop") if has_calls => Some("tool_calls"),
        Some(f) if has_calls && from_text && f != "tool_calls" => Some("tool_calls"),
        Some("tool_calls") if !has_calls => Some("stop"),
        _ => None,
    }
}

/// With `calls.template_opens_thinking`: the text content of `message` (a chat-completions
/// message object) read as begun inside a thinking block the template opened
/// ([`toolmend::message::open_thinking`]), before anything plans it or splits it.
pub(crate) fn open_thinking_in_prompt(message: &mut serde_json::Value) {
    if let Some(text) = message.get_mut("content").and_then(|c| match c {
        serde_json::Value::String(t) if !t.is_empty() => Some(t),
        _ => None,
    }) {
        *text = toolmend::message::open_thinking(text);
    }
}

/// Adds `reasoning` to the `reasoning_content` of `message` (a chat-completions message
/// or delta object), after what the upstream put there itself.
pub(crate) fn put_reasoning(message: &mut serde_json::Value, reasoning: &str) {
    if reasoning.is_empty() {
        return;
    }
    let Some(o) = message.as_object_mut() else {
        return;
    };
    let text = match o
        .get("reasoning_content")
        .and_then(serde_json::Value::as_str)
    {
        Some(before) if !before.is_empty() => format!("{before}\n{reasoning}"),
        _ => reasoning.to_owned(),
    };
    o.insert(
        "reasoning_content".to_owned(),
        serde_json::Value::String(text),
    );
}

/// The compiled tools of a chat request's `tools` (an array), through the pipeline's
/// cache keyed by their exact bytes (serialized into a buffer each thread reuses: no
/// allocation, no formatter, on the hit every agent's second request takes): only
/// `function` tools, each definition at most `limit` bytes serialized
/// (`limits.max_schema_bytes`, checked on a miss).
pub(crate) fn toolbox(
    cache: &ToolCache,
    tools: &Value,
) -> Result<std::sync::Arc<toolmend::Toolbox>, ToolsError> {
    thread_local! {
        static KEY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let list = tools.as_array().map_or(&[][..], Vec::as_slice);
    KEY.with_borrow_mut(|key| {
        key.clear();
        // Writing a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *key, tools);
        let compiled = cache.get(key, || list.len(), |limit| compile(tools, list, limit));
        // A buffer grown by one huge request is not kept for the thread's life.
        if key.capacity() > 1 << 20 {
            *key = Vec::new();
        }
        compiled
    })
}

/// [`toolbox`] for `tools` left as the client's bytes (a JSON array): the cache keyed by
/// those bytes, the tree read only on a miss. `Err(None)`: the bytes do not read as JSON
/// (the skip that found their end checks less than a reading): the body's error is due.
pub(crate) fn toolbox_of_bytes(
    cache: &ToolCache,
    bytes: &[u8],
) -> Result<std::sync::Arc<toolmend::Toolbox>, Option<ToolsError>> {
    let mut not_json = false;
    let compiled = cache.get(
        bytes,
        || count_elements(bytes),
        |limit| {
            let tools: Value = serde_json::from_slice(bytes).map_err(|e| {
                not_json = true;
                ToolsError(e.to_string())
            })?;
            let list = tools.as_array().map_or(&[][..], Vec::as_slice);
            compile(&tools, list, limit)
        },
    );
    compiled.map_err(|e| (!not_json).then_some(e))
}

/// The number of elements of the JSON array `bytes` (valid JSON): its commas at depth 1,
/// outside strings.
fn count_elements(bytes: &[u8]) -> usize {
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    let (mut commas, mut any) = (0usize, false);
    for &b in bytes {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_str = true;
                any |= depth == 1;
            }
            b'[' | b'{' => {
                any |= depth == 1;
                depth += 1;
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => commas += 1,
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => any |= depth == 1,
        }
    }
    if any { commas + 1 } else { 0 }
}

/// The front's conversion of `tools` on a cache miss (each definition at most `limit`
/// bytes serialized).
fn compile(tools: &Value, list: &[Value], limit: usize) -> Result<Vec<Tool>, ToolsError> {
    if limit < usize::MAX {
        for (i, t) in list.iter().enumerate() {
            let len = t.to_string().len();
            if len > limit {
                return Err(ToolsError(format!(
                    "tools[{i}] is {len} bytes, more than limits.max_schema_bytes ({limit})"
                )));
            }
        }
    }
    let defs: Vec<Tool> = <Vec<Tool> as serde::Deserialize>::deserialize(tools)
        .map_err(|e| ToolsError(e.to_string()))?;
    Ok(defs
        .into_iter()
        .filter(|d| d.wire_type() == "function")
        .collect())
}

/// Adds the gateway's server-side tools' definitions to a chat request's `tools`
/// (replacing a client tool of the same name: the gateway runs that name). True when it
/// changed.
pub(crate) fn inject_tools(request: &mut Value, server: &ServerTools) -> bool {
    let definitions = server.definitions();
    if definitions.is_empty() {
        return false;
    }
    let Some(obj) = request.as_object_mut() else {
        return false;
    };
    let mut tools = match obj.remove("tools") {
        Some(Value::Array(t)) => t,
        _ => Vec::new(),
    };
    tools.retain(|t| {
        !t.pointer("/function/name")
            .and_then(Value::as_str)
            .is_some_and(|n| server.is_server_side(n))
    });
    tools.extend(
        definitions
            .iter()
            .filter_map(|d| serde_json::to_value(d).ok()),
    );
    obj.insert("tools".to_owned(), Value::Array(tools));
    true
}

#[cfg(test)]
pub(crate) mod count_tests {
    use proptest::prelude::*;
    use serde_json::Value;

    /// Any JSON value, its strings and keys full of what a byte scanner could mistake for
    /// structure (brackets, commas, quotes, backslashes) and a multi-byte letter.
    pub(crate) fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[\\[\\]{},\"\\\\a-z é]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z,\\[\"]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The elements counted from the bytes are the array's, whatever they hold.
        #[test]
        fn elements_counted_from_bytes(items in prop::collection::vec(json(), 0..6), pretty in any::<bool>()) {
            let array = Value::from(items.clone());
            let text = if pretty {
                serde_json::to_string_pretty(&array).unwrap()
            } else {
                serde_json::to_string(&array).unwrap()
            };
            prop_assert_eq!(super::count_elements(text.as_bytes()), items.len());
        }
    }
}
