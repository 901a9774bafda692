//! The upstreams that speak another API than Chat Completions (`upstream.api`): the
//! chat request every front hands the pipeline, written in the upstream's API, and its
//! answer read back as a chat completion, so that the plan, the guard, the re-ask and
//! the round trip run once, whatever the upstream speaks. A front of the upstream's own
//! API passes its client's body through instead when the history needed no change
//! ([`Original`]). What the chat form cannot hold travels in fields of the chat message
//! that the fronts read back: `thinking_blocks` (Messages' signed and redacted
//! thinking, LiteLLM's name for them), `server_blocks` (Messages' server-tool blocks)
//! and `reasoning_items` (Responses' reasoning items, encrypted content included).

pub(crate) mod messages;
pub(crate) mod responses;

use serde_json::{Map, Value, json};

use crate::{config::UpstreamApi, server::error::GatewayError};

/// A client's request in the upstream's own API, to go upstream as it came when the
/// request path changed nothing in it.
#[derive(Debug, Clone)]
pub(crate) struct Original {
    /// The API the client spoke.
    pub(crate) api: UpstreamApi,
    /// Its body.
    pub(crate) body: Value,
}

/// The path under `upstream.base_url` of `api`'s answers.
pub(crate) fn path(api: UpstreamApi) -> &'static str {
    match api {
        UpstreamApi::ChatCompletions => "/chat/completions",
        UpstreamApi::Messages => "/messages",
        UpstreamApi::Responses => "/responses",
    }
}

/// The chat request `chat` as a request of `api` (asked whole: the gateway reads a
/// translated answer whole and streams it to the client itself); `None` for a chat
/// upstream, which takes `chat` as it is (no copy of it is made).
pub(crate) fn request_for(api: UpstreamApi, chat: &Value) -> Option<Value> {
    match api {
        UpstreamApi::ChatCompletions => None,
        UpstreamApi::Messages => Some(messages::chat_to_request(chat)),
        UpstreamApi::Responses => Some(responses::chat_to_request(chat)),
    }
}

/// The upstream's answer `raw` (a JSON object of `api`) as a chat completion.
pub(crate) fn completion_from(api: UpstreamApi, raw: &[u8]) -> Result<Value, GatewayError> {
    let answer: Value = serde_json::from_slice(raw)
        .map_err(|e| GatewayError::UpstreamInvalidJson(e.to_string()))?;
    let not = |what: &str| {
        GatewayError::UpstreamInvalidJson(format!(
            "the upstream ({} API) answered something that is not {what}",
            api.name()
        ))
    };
    match api {
        UpstreamApi::ChatCompletions => Ok(answer),
        UpstreamApi::Messages => {
            messages::message_to_completion(&answer).ok_or_else(|| not("a Messages message"))
        }
        UpstreamApi::Responses => {
            responses::response_to_completion(&answer).ok_or_else(|| not("a Responses object"))
        }
    }
}

/// The chat completion of an upstream's `answer` (its `id`, `model` and
/// `usage.input_tokens` / `output_tokens`: the same keys in Messages and Responses),
/// with one choice, `message`.
fn completion(
    answer: &Value,
    created: u64,
    message: Map<String, Value>,
    finish_reason: &str,
) -> Value {
    let usage = &answer["usage"];
    let (input, output) = (
        usage["input_tokens"].as_u64().unwrap_or(0),
        usage["output_tokens"].as_u64().unwrap_or(0),
    );
    json!({
        "id": answer["id"],
        "object": "chat.completion",
        "created": created,
        "model": answer["model"],
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": input, "completion_tokens": output,
                  "total_tokens": input + output},
    })
}

/// The finish reason of a chat completion with `has_calls`.
fn finish(has_calls: bool, otherwise: &'static str) -> &'static str {
    if has_calls { "tool_calls" } else { otherwise }
}

/// A chat assistant message: its text (`null` when it only calls tools), its reasoning,
/// the fields the chat form has no place for (`carried`, each only when not empty), its
/// calls.
pub(crate) fn chat_assistant(
    text: String,
    reasoning: String,
    carried: Vec<(&str, Vec<Value>)>,
    calls: Vec<Value>,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("role".to_owned(), json!("assistant"));
    let content = if text.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        Value::String(text)
    };
    m.insert("content".to_owned(), content);
    if !reasoning.is_empty() {
        m.insert("reasoning_content".to_owned(), Value::String(reasoning));
    }
    for (key, values) in carried {
        if !values.is_empty() {
            m.insert(key.to_owned(), Value::Array(values));
        }
    }
    if !calls.is_empty() {
        m.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    m
}
