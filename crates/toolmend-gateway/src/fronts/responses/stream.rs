//! The chat front's mended SSE, as it comes, turned into the Responses event stream:
//! `response.created`, `response.in_progress`; per output item `response.output_item.added`,
//! its deltas (`response.output_text.delta` inside a `content_part`,
//! `response.function_call_arguments.delta`), their `.done` events and
//! `response.output_item.done`; then `response.completed` (or `response.incomplete`) with
//! the whole response, the usage and the account. Every event carries its
//! `sequence_number`, consecutive from 0; one item open at a time, `output_index`
//! consecutive. Reasoning goes out as a `reasoning` item whose summary is whole at its
//! `output_item.done`. An error event of the chat stream becomes an `error` event.

use serde_json::{Value, json};

use std::sync::Arc;

use super::{convert, kept::Kept};
use crate::{
    config::UpstreamApi,
    fronts::translate::{self, ChatEvents},
};

/// The open output item.
#[derive(Debug)]
enum Open {
    Reasoning {
        id: String,
        text: String,
    },
    Message {
        id: String,
        text: String,
    },
    Call {
        index: u64,
        item: Value,
        args: String,
    },
}

/// The translation of one stream.
#[derive(Debug, Default)]
pub(crate) struct Translator {
    /// The request as the client sent it (the response echoes some of it).
    request: Value,
    /// `id`, `created_at`, `model` once the first chunk is in.
    base: Option<Value>,
    seq: u64,
    open: Option<Open>,
    /// The items done so far (the output of `response.completed`).
    done: Vec<Value>,
    finish: Option<String>,
    /// The usage and the account, for the closing events.
    tail: translate::Tail,
    left_out: Vec<String>,
    /// The request's namespaced functions (their calls go out under their namespace).
    flat: convert::FlatNames,
    /// The response's id.
    id: String,
    /// Where the finished conversation is kept for `previous_response_id`, and the
    /// conversation before this answer.
    keeping: Option<(Arc<Kept>, Vec<u8>)>,
    /// The upstream's API, and whether the client's body went up as it came.
    pub(crate) upstream: UpstreamApi,
    pub(crate) passed_through: bool,
    /// The upstream's own reasoning items came (`reasoning_items`): the reasoning text
    /// that follows them is theirs, not another item.
    carried: bool,
}

impl Translator {
    pub(crate) fn new(request: Value, left_out: Vec<String>) -> Self {
        Translator {
            flat: convert::flat_names(&request),
            request,
            left_out,
            id: "resp_toolmend".to_owned(),
            ..Translator::default()
        }
    }

    /// The response's id, and where to keep its conversation.
    pub(crate) fn keeping(mut self, id: String, keeping: Option<(Arc<Kept>, Vec<u8>)>) -> Self {
        self.id = id;
        self.keeping = keeping;
        self
    }

    fn emit(&mut self, out: &mut String, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        out.push_str("event: ");
        out.push_str(kind);
        out.push_str("\ndata: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    }

    /// The response object as it stands (`status`, the items done so far).
    fn response(&self, status: &str) -> Value {
        let base = self.base.clone().unwrap_or(Value::Null);
        let completion = json!({"id": base["id"], "created": base["created"], "model": base["model"],
            "choices": [{"finish_reason": null, "message": {}}], "usage": self.tail.usage});
        let mut r = convert::completion_to_response(&completion, &self.request);
        r["id"] = json!(self.id);
        r["status"] = json!(status);
        r["output"] = Value::Array(self.done.clone());
        r
    }

    /// The answer streamed, as the chat assistant message a later request continues from.
    fn chat_answer(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": null});
        let mut calls = Vec::new();
        for item in &self.done {
            match item["type"].as_str() {
                Some("reasoning") if self.carried => {
                    if let Value::Array(items) = message
                        .as_object_mut()
                        .map(|m| m.entry("reasoning_items").or_insert_with(|| json!([])))
                        .unwrap_or(&mut Value::Null)
                    {
                        items.push(item.clone());
                    }
                }
                Some("reasoning") => {
                    message["reasoning_content"] = item["summary"][0]["text"].clone();
                }
                Some("message") => message["content"] = item["content"][0]["text"].clone(),
                Some("function_call") => {
                    let name = match item["namespace"].as_str() {
                        Some(ns) => format!("{ns}__{}", item["name"].as_str().unwrap_or_default()),
                        None => item["name"].as_str().unwrap_or_default().to_owned(),
                    };
                    calls.push(json!({"id": item["call_id"], "type": "function",
                        "function": {"name": name, "arguments": item["arguments"]}}));
                }
                Some("custom_tool_call") => {
                    let arguments = json!({"input": item["input"]}).to_string();
                    calls.push(json!({"id": item["call_id"], "type": "function",
                        "function": {"name": item["name"], "arguments": arguments}}));
                }
                _ => {}
            }
        }
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        message
    }
}

impl ChatEvents for Translator {
    fn error(&mut self, error: &Value, out: &mut String) {
        self.close(out);
        self.emit(
            out,
            "error",
            json!({"code": error["code"], "message": error["message"],
                "param": null}),
        );
    }

    fn chunk(&mut self, chunk: &Value, out: &mut String) {
        if self.base.is_none() {
            self.base = Some(json!({"id": chunk["id"], "created": chunk["created"],
                "model": chunk["model"]}));
            let r = self.response("in_progress");
            self.emit(out, "response.created", json!({"response": r}));
            let r = self.response("in_progress");
            self.emit(out, "response.in_progress", json!({"response": r}));
        }
        let Some(choice) = self.tail.read(chunk, super::ACCOUNT_KEY) else {
            return;
        };
        let delta = &choice["delta"];
        // A Responses upstream's reasoning items, carried whole through the chat stream.
        for item in delta["reasoning_items"].as_array().into_iter().flatten() {
            self.carried = true;
            self.close(out);
            let index = self.done.len();
            self.emit(
                out,
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            );
            self.emit(
                out,
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
            self.done.push(item.clone());
        }
        if let Some(r) = delta["reasoning_content"]
            .as_str()
            .filter(|r| !r.is_empty() && !self.carried)
        {
            if !matches!(self.open, Some(Open::Reasoning { .. })) {
                self.close(out);
                let id = format!("rs_{}", self.item_base());
                let index = self.done.len();
                self.emit(
                    out,
                    "response.output_item.added",
                    json!({"output_index": index,
                    "item": {"type": "reasoning", "id": id, "summary": []}}),
                );
                self.open = Some(Open::Reasoning {
                    id,
                    text: String::new(),
                });
            }
            if let Some(Open::Reasoning { text, .. }) = &mut self.open {
                text.push_str(r);
            }
        }
        if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            if !matches!(self.open, Some(Open::Message { .. })) {
                self.close(out);
                let id = format!("msg_{}", self.item_base());
                let index = self.done.len();
                self.emit(
                    out,
                    "response.output_item.added",
                    json!({"output_index": index,
                    "item": {"type": "message", "id": id, "status": "in_progress",
                        "role": "assistant", "content": []}}),
                );
                self.emit(
                    out,
                    "response.content_part.added",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
                );
                self.open = Some(Open::Message {
                    id,
                    text: String::new(),
                });
            }
            let index = self.done.len();
            let id = match &mut self.open {
                Some(Open::Message { id, text }) => {
                    text.push_str(t);
                    id.clone()
                }
                _ => String::new(),
            };
            self.emit(
                out,
                "response.output_text.delta",
                json!({"item_id": id,
                "output_index": index, "content_index": 0, "delta": t, "logprobs": []}),
            );
        }
        for call in delta["tool_calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let index = call["index"].as_u64().unwrap_or(0);
            if !matches!(self.open, Some(Open::Call { index: i, .. }) if i == index) {
                self.close(out);
                let item = convert::function_call_item(
                    &json!({"id": call["id"], "function": {"name": call["function"]["name"],
                        "arguments": ""}}),
                    "in_progress",
                    &self.flat,
                );
                let at = self.done.len();
                self.emit(
                    out,
                    "response.output_item.added",
                    json!({"output_index": at, "item": item}),
                );
                self.open = Some(Open::Call {
                    index,
                    item,
                    args: String::new(),
                });
            }
            let at = self.done.len();
            if let Some(fragment) = call["function"]["arguments"]
                .as_str()
                .filter(|a| !a.is_empty())
            {
                let (item_id, custom) = match &mut self.open {
                    Some(Open::Call { item, args, .. }) => {
                        args.push_str(fragment);
                        (item["id"].clone(), item["type"] == "custom_tool_call")
                    }
                    _ => (Value::Null, false),
                };
                // A custom tool's input goes out whole at its end: what the chat stream
                // carries is its JSON arguments, not the input itself.
                if !custom {
                    self.emit(
                        out,
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id,
                        "output_index": at, "delta": fragment}),
                    );
                }
            }
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            self.finish = Some(f.to_owned());
        }
    }

    fn end(&mut self, out: &mut String) {
        if self.base.is_none() {
            self.emit(
                out,
                "error",
                json!({"code": "upstream_stream_error",
                "message": "the upstream stream ended before its first chunk", "param": null}),
            );
            return;
        }
        self.close(out);
        let (status, incomplete) = convert::status(self.finish.as_deref());
        let mut r = self.response(status);
        r["incomplete_details"] = incomplete;
        if let Some(mut a) = self.tail.account.take() {
            a["translation"] =
                super::translation(self.upstream, self.passed_through, &self.left_out);
            r[super::ACCOUNT_KEY] = a;
        }
        let kind = if status == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        if let Some((kept, history)) = self.keeping.take() {
            let json = super::kept::with_answer(history, &self.chat_answer());
            kept.keep_soon(self.id.clone(), json);
        }
        self.emit(out, kind, json!({"response": r}));
    }
}

impl Translator {
    fn item_base(&self) -> String {
        let id = self
            .base
            .as_ref()
            .and_then(|b| b["id"].as_str())
            .unwrap_or("toolmend");
        format!("{id}_{}", self.done.len())
    }

    fn close(&mut self, out: &mut String) {
        let index = self.done.len();
        let item = match self.open.take() {
            None => return,
            Some(Open::Reasoning { id, text }) => {
                json!({"type": "reasoning", "id": id,
                    "summary": [{"type": "summary_text", "text": text}]})
            }
            Some(Open::Message { id, text }) => {
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                self.emit(
                    out,
                    "response.output_text.done",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                );
                self.emit(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id,
                    "output_index": index, "content_index": 0, "part": part}),
                );
                json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
                    "content": [part]})
            }
            Some(Open::Call { mut item, args, .. }) if item["type"] == "custom_tool_call" => {
                let input = convert::custom_input(&args);
                self.emit(
                    out,
                    "response.custom_tool_call_input.delta",
                    json!({"item_id": item["id"], "output_index": index, "delta": input}),
                );
                self.emit(
                    out,
                    "response.custom_tool_call_input.done",
                    json!({"item_id": item["id"], "output_index": index, "input": input}),
                );
                item["input"] = json!(input);
                item["status"] = json!("completed");
                item
            }
            Some(Open::Call { mut item, args, .. }) => {
                self.emit(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": item["id"],
                    "output_index": index, "arguments": args}),
                );
                item["arguments"] = json!(args);
                item["status"] = json!("completed");
                item
            }
        };
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
        self.done.push(item);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Translator;
    use crate::fronts::translate::ChatFrames;

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        format!(
            "data: {}\n\n",
            json!({"id": "c1", "model": "m", "created": 5,
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
    fn items_open_fill_and_close_in_order_with_consecutive_numbers() {
        let stream = [
            chunk(
                json!({"role": "assistant", "reasoning_content": "hm"}),
                None,
            ),
            chunk(json!({"content": "Run"}), None),
            chunk(json!({"content": "ning."}), None),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "shell", "arguments": "{\"cmd\": \"ls\"}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
            format!(
                "data: {}\n\n",
                json!({"id": "c1", "choices": [],
                "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5},
                "toolmend": {"counts": {}}})
            ),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        let mut t = ChatFrames::new(Translator::new(
            json!({"instructions": "x"}),
            vec!["store".into()],
        ));
        let mut out = String::new();
        for piece in stream.as_bytes().chunks(5) {
            out.push_str(&t.feed(piece));
        }
        out.push_str(&t.finish());
        let ev = events(&out);
        let kinds: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        let seqs: Vec<u64> = ev
            .iter()
            .map(|e| e["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (0..ev.len() as u64).collect::<Vec<_>>());
        let done = &ev[15]["response"];
        assert_eq!(done["status"], "completed");
        let kinds: Vec<&str> = done["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["reasoning", "message", "function_call"]);
        assert_eq!(done["output"][1]["content"][0]["text"], "Running.");
        assert_eq!(done["output"][2]["arguments"], "{\"cmd\": \"ls\"}");
        assert_eq!(done["usage"]["output_tokens"], 3);
        assert_eq!(
            done["toolmend"]["translation"]["left_out"],
            json!(["store"])
        );
        let indexes: Vec<u64> = ev
            .iter()
            .filter(|e| e["type"] == "response.output_item.done")
            .map(|e| e["output_index"].as_u64().unwrap())
            .collect();
        assert_eq!(indexes, [0, 1, 2]);
    }

    #[test]
    fn a_cut_answer_is_incomplete_and_an_error_ends_the_stream() {
        let mut t = ChatFrames::new(Translator::new(json!({}), Vec::new()));
        let mut out = t.feed(chunk(json!({"content": "ab"}), Some("length")).as_bytes());
        out.push_str(&t.feed(b"data: [DONE]\n\n"));
        let ev = events(&out);
        assert_eq!(ev.last().unwrap()["type"], "response.incomplete");
        let mut t = ChatFrames::new(Translator::new(json!({}), Vec::new()));
        let out = t.feed(
            b"data: {\"error\": {\"message\": \"x\", \"code\": \"toolmend_tool_flood\"}}\n\n",
        );
        let ev = events(&out);
        assert_eq!(ev.last().unwrap()["type"], "error");
        assert_eq!(events(&t.finish()).len(), 0);
    }
}
