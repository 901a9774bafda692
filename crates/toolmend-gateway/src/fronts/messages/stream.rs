//! The chat front's mended SSE, as it comes, turned into Anthropic's event stream: text
//! and reasoning deltas go out as they arrive (`text_delta`, `thinking_delta`), each call
//! (which the chat front releases mended, whole, before the finish) as a `tool_use`
//! block with its whole input as one `input_json_delta` (an `input` that is not an
//! object, from an unresolved call passed on, goes out as `{}` and is named, as in the
//! JSON path); one block open at a time, indexes consecutive from 0; `message_delta`
//! carries the `stop_reason`, the usage and the account. An error event of the chat stream becomes Anthropic's `error` event.

use axum::response::Response;
use serde_json::{Value, json};

use super::convert;
use crate::{
    config::UpstreamApi,
    fronts::translate::{self, ChatEvents, event},
};

/// The open content block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// A call, by its index in the chat stream.
    Tool(u64),
}

/// The translation of one stream.
#[derive(Debug, Default)]
pub(crate) struct Translator {
    started: bool,
    open: Option<Open>,
    /// The index the next block gets.
    next: usize,
    any_tool: bool,
    /// The open call's id and arguments so far: its `input` goes out when it closes,
    /// checked to be an object (the chat front releases a call whole and mended, but an
    /// unresolved call passed on may hold any text).
    call: Option<(String, String)>,
    finish: Option<String>,
    /// The usage and the account, for the closing events.
    tail: translate::Tail,
    left_out: Vec<String>,
    /// The upstream's API, and whether the client's body went up as it came.
    upstream: UpstreamApi,
    passed_through: bool,
    /// The upstream's own thinking blocks came (`thinking_blocks`): the reasoning text
    /// that follows them is theirs, not another block.
    signed: bool,
}

impl Translator {
    pub(crate) fn new(left_out: Vec<String>) -> Self {
        Translator {
            left_out,
            ..Translator::default()
        }
    }
}

impl ChatEvents for Translator {
    fn error(&mut self, error: &Value, out: &mut String) {
        self.close(out);
        let kind = match error["type"].as_str() {
            Some("requests") => "rate_limit_error",
            Some("invalid_request_error") => "invalid_request_error",
            _ => "api_error",
        };
        event(
            out,
            "error",
            &json!({"type": "error", "error": {"type": kind,
                "message": error["message"], "code": error["code"]}}),
        );
    }

    fn chunk(&mut self, chunk: &Value, out: &mut String) {
        if !self.started {
            self.started = true;
            let id = chunk["id"].as_str().unwrap_or("toolmend");
            event(
                out,
                "message_start",
                &json!({"type": "message_start", "message": {
                "id": format!("msg_{id}"), "type": "message", "role": "assistant",
                "model": chunk["model"], "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0}}}),
            );
            event(out, "ping", &json!({"type": "ping"}));
        }
        let Some(choice) = self.tail.read(chunk, super::ACCOUNT_KEY) else {
            return;
        };
        let delta = &choice["delta"];
        // A Messages upstream's blocks, carried whole through the chat stream.
        for key in ["thinking_blocks", "server_blocks"] {
            for block in delta[key].as_array().into_iter().flatten() {
                self.signed |= key == "thinking_blocks";
                self.whole_block(block, out);
            }
        }
        if let Some(r) = delta["reasoning_content"]
            .as_str()
            .filter(|r| !r.is_empty() && !self.signed)
        {
            self.open_block(Open::Thinking, None, out);
            self.delta(out, json!({"type": "thinking_delta", "thinking": r}));
        }
        if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.open_block(Open::Text, None, out);
            self.delta(out, json!({"type": "text_delta", "text": t}));
        }
        for call in delta["tool_calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let index = call["index"].as_u64().unwrap_or(0);
            self.open_block(Open::Tool(index), Some(call), out);
            if let (Some(args), Some((_, held))) =
                (call["function"]["arguments"].as_str(), self.call.as_mut())
            {
                held.push_str(args);
            }
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            self.finish = Some(f.to_owned());
        }
    }

    fn end(&mut self, out: &mut String) {
        if !self.started {
            event(
                out,
                "error",
                &json!({"type": "error", "error": {"type": "api_error",
                "message": "the upstream stream ended before its first chunk",
                "code": "upstream_stream_error"}}),
            );
            return;
        }
        self.close(out);
        let stop_reason = convert::stop_reason(self.finish.as_deref(), self.any_tool);
        let mut delta = json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"input_tokens": self.tail.usage["prompt_tokens"].as_u64().unwrap_or(0),
                      "output_tokens": self.tail.usage["completion_tokens"].as_u64().unwrap_or(0)}});
        if let Some(mut a) = self.tail.account.take() {
            a["translation"] =
                super::translation(self.upstream, self.passed_through, &self.left_out);
            delta[super::ACCOUNT_KEY] = a;
        }
        event(out, "message_delta", &delta);
        event(out, "message_stop", &json!({"type": "message_stop"}));
    }
}

impl Translator {
    /// A whole block as its own events: a `thinking` block's text as one
    /// `thinking_delta` and its signature as one `signature_delta`; any other (redacted
    /// thinking, a server tool's use or result) whole in its `content_block_start`.
    fn whole_block(&mut self, block: &Value, out: &mut String) {
        self.close(out);
        let index = self.next;
        let start = if block["type"] == "thinking" {
            json!({"type": "thinking", "thinking": "", "signature": ""})
        } else {
            block.clone()
        };
        event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        if block["type"] == "thinking" {
            self.delta(
                out,
                json!({"type": "thinking_delta", "thinking": block["thinking"]}),
            );
            self.delta(
                out,
                json!({"type": "signature_delta", "signature": block["signature"]}),
            );
        }
        event(
            out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
        self.next += 1;
    }

    /// Makes `kind` the open block, closing another; a call's block opens with its id
    /// and name.
    fn open_block(&mut self, kind: Open, call: Option<&Value>, out: &mut String) {
        if self.open == Some(kind) {
            return;
        }
        self.close(out);
        let block = match (kind, call) {
            (Open::Text, _) => json!({"type": "text", "text": ""}),
            (Open::Thinking, _) => json!({"type": "thinking", "thinking": "", "signature": ""}),
            (Open::Tool(_), c) => {
                self.any_tool = true;
                let c = c.cloned().unwrap_or(Value::Null);
                self.call = Some((
                    c["id"].as_str().unwrap_or_default().to_owned(),
                    String::new(),
                ));
                json!({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                    "input": {}})
            }
        };
        event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start",
            "index": self.next, "content_block": block}),
        );
        self.open = Some(kind);
    }

    fn delta(&self, out: &mut String, delta: Value) {
        event(
            out,
            "content_block_delta",
            &json!({"type": "content_block_delta",
            "index": self.next, "delta": delta}),
        );
    }

    fn close(&mut self, out: &mut String) {
        if let Some((id, args)) = self.call.take() {
            let input = match serde_json::from_str::<Value>(&args) {
                Ok(Value::Object(_)) => args,
                _ => {
                    self.left_out
                        .push(format!("the arguments of {id}: not a JSON object"));
                    "{}".to_owned()
                }
            };
            self.delta(
                out,
                json!({"type": "input_json_delta", "partial_json": input}),
            );
        }
        if self.open.take().is_some() {
            event(
                out,
                "content_block_stop",
                &json!({"type": "content_block_stop",
                "index": self.next}),
            );
            self.next += 1;
        }
    }
}

/// `chat`, the chat front's streamed answer, as Anthropic's event stream.
pub(crate) fn translate(
    chat: Response,
    upstream: UpstreamApi,
    passed_through: bool,
    left_out: Vec<String>,
) -> Response {
    let mut t = Translator::new(left_out);
    t.upstream = upstream;
    t.passed_through = passed_through;
    translate::stream(chat, t)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Translator;
    use crate::fronts::translate::ChatFrames;

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        format!(
            "data: {}\n\n",
            json!({"id": "c1", "model": "m", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    }

    fn events(out: &str) -> Vec<Value> {
        out.split("\n\n")
            .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn text_reasoning_and_calls_become_consecutive_blocks() {
        let mut t = ChatFrames::new(Translator::new(vec!["thinking".into()]));
        let mut out = String::new();
        let stream = [
            chunk(json!({"role": "assistant", "reasoning_content": "hm"}), None),
            chunk(json!({"content": "Check"}), None),
            chunk(json!({"content": "ing."}), None),
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}), None),
            chunk(json!({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                "function": {"name": "g", "arguments": "{}"}}]}), None),
            chunk(json!({}), Some("tool_calls")),
            format!("data: {}\n\n", json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3},
                "toolmend": {"counts": {"from_text": 0}}})),
            ": toolmend {}\n\n".to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        // Fed in awkward pieces: frames cut anywhere.
        for piece in stream.as_bytes().chunks(7) {
            out.push_str(&t.feed(piece));
        }
        out.push_str(&t.finish());
        let ev = events(&out);
        let kinds: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let starts: Vec<&Value> = ev
            .iter()
            .filter(|e| e["type"] == "content_block_start")
            .collect();
        assert_eq!(
            starts
                .iter()
                .map(|e| e["index"].as_u64().unwrap())
                .collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(
            starts[2]["content_block"],
            json!({"type": "tool_use", "id": "call_1", "name": "f", "input": {}})
        );
        let delta = &ev[15];
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(
            delta["usage"],
            json!({"input_tokens": 7, "output_tokens": 3})
        );
        assert_eq!(
            delta["toolmend"]["translation"]["left_out"],
            json!(["thinking"])
        );
    }

    #[test]
    fn an_error_event_ends_the_stream_in_anthropics_shape() {
        let mut t = ChatFrames::new(Translator::new(Vec::new()));
        let mut out = t.feed(chunk(json!({"content": "Hi"}), None).as_bytes());
        out.push_str(&t.feed(b"data: {\"error\": {\"message\": \"too many\", \"type\": \"requests\", \"code\": \"toolmend_tool_flood\"}}\n\ndata: [DONE]\n\n"));
        out.push_str(&t.finish());
        let ev = events(&out);
        let last = ev.last().unwrap();
        assert_eq!(last["type"], "error");
        assert_eq!(last["error"]["type"], "rate_limit_error");
        assert_eq!(ev.iter().filter(|e| e["type"] == "message_stop").count(), 0);
        // The text block was closed before the error.
        assert_eq!(ev[ev.len() - 2]["type"], "content_block_stop");
    }

    #[test]
    fn a_stream_cut_before_its_first_chunk_is_an_error_event() {
        let mut t = ChatFrames::new(Translator::new(Vec::new()));
        let ev = events(&t.finish());
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0]["type"], "error");
    }
}
