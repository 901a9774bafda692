//! A session's recent calls and results, as the messages the guard's loop rules read
//! (repeats, ping-pong, no progress): MCP has no conversation, so the proxy keeps one,
//! bounded, per session.

use std::collections::VecDeque;

use serde_json::Value;
use toolmend::conversation::{AssistantMessage, Content, Message, ToolCall, ToolMessage};

/// Messages kept per session (a call and its result are two).
pub const KEPT: usize = 64;

/// Bytes of a result's text kept (what the no-progress rule compares).
pub const RESULT_BYTES: usize = 4096;

/// One session's recent calls and results.
#[derive(Debug, Default, Clone)]
pub struct Recent {
    messages: VecDeque<Message>,
}

impl Recent {
    /// The messages, oldest first.
    pub fn messages(&mut self) -> &[Message] {
        self.messages.make_contiguous()
    }

    /// A call that went to the server (or was answered here): `params` of its
    /// `tools/call`.
    pub fn call(&mut self, call_id: &str, params: &Value) {
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let args = params
            .get("arguments")
            .map_or_else(|| "{}".to_owned(), Value::to_string);
        self.push(Message::Assistant(AssistantMessage {
            content: Some(None),
            tool_calls: Some(vec![ToolCall::new(call_id, name, args)]),
            ..AssistantMessage::default()
        }));
    }

    /// Its result (a `CallToolResult`): its text blocks.
    pub fn result(&mut self, call_id: &str, result: &Value) {
        let text = result
            .get("content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        let mut text = text;
        if text.len() > RESULT_BYTES {
            let mut cut = RESULT_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        self.push(Message::Tool(ToolMessage {
            content: Content::Text(text),
            call_id: call_id.to_owned(),
            extra: Default::default(),
        }));
    }

    fn push(&mut self, m: Message) {
        if self.messages.len() == KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back(m);
    }
}
