//! The SSE answer (`stream: true`): text deltas are forwarded as they arrive; tool-call
//! deltas are buffered per index and emitted mended, in OpenAI's chunk format, before the
//! chunk that carries `finish_reason`. Content that starts a call written into the text
//! (`<tool_call>`, `[TOOL_CALLS]`, a leading `{` …) is held from there on and becomes
//! real `tool_calls`. A client that goes away drops the body stream, which drops (and so
//! cancels) the upstream request.

use std::{
    collections::{HashMap, VecDeque},
    time::Instant,
};

use axum::{
    body::{Body, Bytes},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures::{Stream, StreamExt, stream};
use serde_json::{Map, Value, json};
use toolmend::protocol::{AssistantMessage, Content, ToolCall};

use crate::{
    fronts::chat_completions::{exchange::Exchange, wire},
    metrics as m,
    pipeline::{
        plan::{Mended, mend_message, mint_token},
        report::Summary,
    },
    server::error::GatewayError,
};

/// Markers of a call written into the text, anywhere in it.
const MARKERS: [&str; 4] = [
    "<tool_call>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<function=",
];
/// Markers that count only at the very start of the content.
const LEADING: [&str; 2] = ["{", "```"];

/// Decides, delta by delta, which content can be forwarded now and which is held because
/// it may be (or is) a call written into the text.
#[derive(Debug, Default)]
pub(crate) struct ContentGate {
    /// Everything seen so far.
    seen: String,
    /// Forwarded up to this byte of `seen`.
    sent: usize,
    /// From here on everything is held (a marker was found at this byte).
    held_from: Option<usize>,
}

impl ContentGate {
    /// Takes a content delta; returns the text to forward now.
    pub(crate) fn push(&mut self, delta: &str) -> String {
        self.seen.push_str(delta);
        if self.held_from.is_some() {
            return String::new();
        }
        let trimmed_at = self.seen.len() - self.seen.trim_start().len();
        let rest = &self.seen[trimmed_at..];
        if LEADING.iter().any(|m| rest.starts_with(m)) {
            // Leading whitespace was held back too, so nothing of the call went out.
            self.held_from = Some(self.sent);
            return String::new();
        }
        if let Some(at) = MARKERS
            .iter()
            .filter_map(|m| self.seen[self.sent..].find(m).map(|i| i + self.sent))
            .min()
        {
            let out = self.seen[self.sent..at].to_owned();
            self.sent = at;
            self.held_from = Some(at);
            return out;
        }
        // Hold back a tail that could still grow into a marker (or, at the start, into a
        // leading one: only whitespace seen so far).
        let mut keep = 0;
        // Nothing but whitespace went out yet and what follows may still grow into a
        // leading marker (`` ` `` or ``` `` ``` before a fence): hold it all (the fuzz target
        // found "``" released, then "`json …" held: the fence leaked).
        let at_start = self.sent <= trimmed_at;
        if rest.is_empty() || (at_start && LEADING.iter().any(|m| m.starts_with(rest))) {
            keep = self.seen.len() - self.sent;
        } else {
            for m in MARKERS {
                for len in (1..m.len()).rev() {
                    if self.seen.len() - self.sent >= len
                        && self.seen.is_char_boundary(self.seen.len() - len)
                        && self.seen.ends_with(&m[..len])
                    {
                        keep = keep.max(len);
                        break;
                    }
                }
            }
        }
        let end = self.seen.len() - keep;
        let out = self.seen[self.sent..end].to_owned();
        self.sent = end;
        out
    }

    /// At the end: the held text (a possible call), and any tail kept back.
    pub(crate) fn finish(&mut self) -> (Option<String>, String) {
        match self.held_from {
            Some(at) => (
                Some(self.seen[at..].to_owned()),
                self.seen[self.sent..at].to_owned(),
            ),
            None => {
                let tail = self.seen[self.sent..].to_owned();
                self.sent = self.seen.len();
                (None, tail)
            }
        }
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The transformation of choice 0's deltas.
#[derive(Debug)]
struct Transformer {
    gate: ContentGate,
    gate_content: bool,
    /// The calls in the order they began.
    calls: Vec<PartialCall>,
    /// The stream's `index` -> the call it currently feeds. A new `id` on an index that
    /// already has one starts a call of its own (nothing is merged away).
    slot: HashMap<u64, usize>,
    /// Bytes held so far (content and call fragments), against `max_upstream_bytes`.
    pub(crate) buffered: usize,
    /// `id`, `object`, `created`, `model` … of the first chunk, for the chunks we write.
    meta: Map<String, Value>,
}

/// What one upstream event turns into.
enum Step {
    /// Chunks to send now.
    Emit(Vec<Value>),
    /// Choice 0 finished: mend the buffered message, then send the finish chunk.
    Finish(Box<Finished>),
}

/// Choice 0 at its end: the buffered message and the chunk that finishes it.
struct Finished {
    message: AssistantMessage,
    held_text: Option<String>,
    tail: String,
    finish: Value,
}

impl Transformer {
    fn new(gate_content: bool) -> Self {
        Transformer {
            gate: ContentGate::default(),
            gate_content,
            calls: Vec::new(),
            slot: HashMap::new(),
            buffered: 0,
            meta: Map::new(),
        }
    }

    /// True when choice 0 has something buffered that only its finish releases: tool-call
    /// fragments, or content the gate holds or keeps back.
    fn holds_anything(&self) -> bool {
        !self.calls.is_empty() || self.gate.sent < self.gate.seen.len()
    }

    fn chunk(&self, choice: Value) -> Value {
        let mut c = self.meta.clone();
        c.insert("choices".to_owned(), json!([choice]));
        Value::Object(c)
    }

    fn on_chunk(&mut self, mut chunk: Value) -> Step {
        // Some servers put `usage` in the chunk that finishes: it must survive.
        let usage = chunk.get("usage").filter(|u| !u.is_null()).cloned();
        if self.meta.is_empty()
            && let Some(obj) = chunk.as_object()
        {
            for (k, v) in obj {
                if !matches!(k.as_str(), "choices" | "usage") {
                    self.meta.insert(k.clone(), v.clone());
                }
            }
        }
        let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) else {
            return Step::Emit(vec![chunk]);
        };
        let Some(pos) = choices
            .iter()
            .position(|c| c["index"].as_u64().unwrap_or(0) == 0)
        else {
            return Step::Emit(vec![chunk]);
        };
        let choice = &mut choices[pos];
        if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
            if let Some(Value::Array(parts)) = delta.remove("tool_calls") {
                for p in parts {
                    let index = p["index"].as_u64().unwrap_or(0);
                    let id = p["id"].as_str().filter(|s| !s.is_empty());
                    let current = self.slot.get(&index).copied();
                    let changed_id = current.is_some_and(|at| {
                        matches!((&self.calls[at].id, id), (Some(had), Some(new)) if had != new)
                    });
                    let at = match current {
                        Some(at) if !changed_id => at,
                        _ => {
                            self.calls.push(PartialCall::default());
                            self.slot.insert(index, self.calls.len() - 1);
                            self.calls.len() - 1
                        }
                    };
                    let entry = &mut self.calls[at];
                    if let Some(id) = id {
                        entry.id = Some(id.to_owned());
                    }
                    if let Some(name) = p["function"]["name"].as_str() {
                        entry.name.push_str(name);
                        self.buffered += name.len();
                    }
                    if let Some(a) = p["function"]["arguments"].as_str() {
                        entry.arguments.push_str(a);
                        self.buffered += a.len();
                    }
                }
            }
            if self.gate_content
                && let Some(text) = delta
                    .get("content")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            {
                self.buffered += text.len();
                let now = self.gate.push(&text);
                if now.is_empty() && !text.is_empty() {
                    delta.remove("content");
                } else {
                    delta.insert("content".to_owned(), Value::String(now));
                }
            }
        }
        let finish = choice
            .get("finish_reason")
            .filter(|f| !f.is_null())
            .cloned();
        if finish.is_some() {
            let mut finish_choice = choices.remove(pos);
            // The finishing chunk may carry content of its own: what of it the gate
            // released goes out first, before the tail the gate kept back (found by the
            // sse_assemble fuzz target: it used to be dropped with the delta).
            let released = finish_choice
                .get_mut("delta")
                .and_then(Value::as_object_mut)
                .and_then(|d| d.remove("content"))
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let (held_text, kept) = self.gate.finish();
            let tail = released + &kept;
            self.slot.clear();
            let calls: Vec<ToolCall> = std::mem::take(&mut self.calls)
                .into_iter()
                .map(|p| {
                    let mut tc =
                        ToolCall::new(p.id.clone().unwrap_or_default(), p.name, p.arguments);
                    tc.id = p.id;
                    tc
                })
                .collect();
            let message = AssistantMessage {
                content: Some(held_text.clone().map(Content::Text)),
                tool_calls: (!calls.is_empty()).then_some(calls),
                ..Default::default()
            };
            // Other choices in the same chunk go out unchanged; `usage` goes with the
            // finish chunk only (twice would count twice).
            let rest = if choices.is_empty() {
                None
            } else {
                if let Some(o) = chunk.as_object_mut() {
                    o.remove("usage");
                }
                Some(chunk)
            };
            let mut step_finish = self.chunk(finish_choice);
            if let Some(usage) = usage {
                step_finish["usage"] = usage;
            }
            if let Some(rest) = rest {
                step_finish = json!({"__also": rest, "__finish": step_finish});
            }
            return Step::Finish(Box::new(Finished {
                message,
                held_text,
                tail,
                finish: step_finish,
            }));
        }
        // Drop a chunk left with nothing to say (a tool-call fragment, held content).
        let empty = choices[pos]["delta"].as_object().is_some_and(Map::is_empty)
            && choices[pos].get("logprobs").is_none_or(Value::is_null);
        if empty {
            choices.remove(pos);
            if choices.is_empty() && chunk.get("usage").is_none_or(Value::is_null) {
                return Step::Emit(vec![]);
            }
        }
        Step::Emit(vec![chunk])
    }

    /// The chunks that carry the mended calls (one per call, whole arguments), any
    /// content that was held and did not hold calls, then the finish chunk.
    fn finish_chunks(
        &self,
        mended: Option<&Mended>,
        message: &AssistantMessage,
        held_text: Option<String>,
        tail: String,
        finish: Value,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        let (finish, also) = match finish.get("__finish") {
            Some(f) => (f.clone(), finish.get("__also").cloned()),
            None => (finish, None),
        };
        let calls = mended.map_or_else(
            || message.tool_calls.clone().unwrap_or_default(),
            |m| m.message.tool_calls.clone().unwrap_or_default(),
        );
        let from_text = mended.is_some_and(|m| m.calls.iter().any(|c| c.from_text));
        let mut text = tail;
        if !from_text && let Some(h) = held_text {
            text.push_str(&h);
        } else if from_text && let Some(prose) = mended.and_then(|m| m.message.text()) {
            text.push_str(&prose);
        }
        if let Some(added) = mended.and_then(|m| m.added_text.as_deref()) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(added);
        }
        if !text.is_empty() {
            out.push(self.chunk(json!({"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null})));
        }
        for (i, c) in calls.iter().enumerate() {
            out.push(self.chunk(json!({"index": 0, "delta": {"tool_calls": [{
                "index": i, "id": c.id, "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments}}]},
                "logprobs": null, "finish_reason": null})));
        }
        let mut finish = finish;
        if let Some(f) = wire::finish_reason(
            finish["choices"][0]["finish_reason"].as_str(),
            !calls.is_empty(),
            from_text,
        ) {
            finish["choices"][0]["finish_reason"] = json!(f);
        }
        out.push(finish);
        if let Some(also) = also {
            out.push(also);
        }
        out
    }
}

fn frame(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

type Upstream =
    std::pin::Pin<Box<dyn Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Send>>;

struct Driver {
    ex: Exchange,
    upstream: Upstream,
    t: Transformer,
    queue: VecDeque<Bytes>,
    summary: Summary,
    done: bool,
    /// Choice 0's `finish_reason` was seen.
    finished: bool,
    /// The whole answer must have arrived by then (`upstream.deadline_secs`).
    deadline: Instant,
}

impl Driver {
    async fn next_frames(&mut self) -> bool {
        let idle = self.ex.gw.upstream.idle_timeout();
        let by = (Instant::now() + idle).min(self.deadline);
        let event = match tokio::time::timeout_at(by.into(), self.upstream.next()).await {
            Ok(Some(Ok(e))) => e,
            Ok(Some(Err(e))) => {
                m::upstream_error("stream");
                self.fail(&format!("the upstream stream broke: {e}"));
                return false;
            }
            Ok(None) if self.finished => {
                self.end();
                return false;
            }
            Ok(None) => {
                m::upstream_error("stream");
                self.fail("the upstream stream ended before its last chunk");
                return false;
            }
            Err(_) if Instant::now() >= self.deadline => {
                m::upstream_error("deadline");
                self.fail_with(GatewayError::UpstreamDeadline);
                return false;
            }
            Err(_) => {
                m::upstream_error("timeout");
                self.fail("the upstream stream stalled past the timeout");
                return false;
            }
        };
        let Some(data) = event.data else { return true };
        if data.trim() == "[DONE]" {
            if !self.finished && self.t.holds_anything() {
                // Never dropped in silence: what was buffered for choice 0 (calls, held
                // content) had no finish to be released with.
                m::upstream_error("stream");
                self.fail(
                    "the upstream stream ended ([DONE]) before choice 0's finish_reason; \
                     the tool calls or content buffered for it were not released",
                );
                return false;
            }
            self.end();
            return false;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
            m::upstream_error("stream");
            self.fail("the upstream sent a stream chunk that is not JSON");
            return false;
        };
        if chunk.get("error").is_some() {
            self.queue.push_back(frame(&chunk));
            return true;
        }
        let step = self.t.on_chunk(chunk);
        let max = self.ex.gw.upstream.max_bytes();
        if self.t.buffered > max {
            m::upstream_error("too_large");
            self.fail_with(GatewayError::UpstreamTooLarge(format!(
                "the upstream stream held more than limits.max_upstream_bytes ({max} bytes) \
                 of content and tool calls; it was not read further"
            )));
            return false;
        }
        match step {
            Step::Emit(chunks) => self.queue.extend(chunks.iter().map(frame)),
            Step::Finish(f) => {
                self.finished = true;
                let Finished {
                    message,
                    held_text,
                    tail,
                    finish,
                } = *f;
                let upstream_finish = finish
                    .get("__finish")
                    .unwrap_or(&finish)
                    .pointer("/choices/0/finish_reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let ex = &self.ex;
                let pipeline = &ex.gw.pipeline;
                let mended = match &ex.toolbox {
                    Some(toolbox) => {
                        let first = mend_message(
                            &message,
                            toolbox,
                            &pipeline.mend,
                            &mint_token(),
                            upstream_finish.as_deref(),
                        );
                        let (mended, _) = pipeline.resolve(&ex.history, toolbox, first, ex).await;
                        self.summary.add(&mended, toolbox, &pipeline.labels);
                        Some(mended)
                    }
                    None => None,
                };
                let chunks =
                    self.t
                        .finish_chunks(mended.as_ref(), &message, held_text, tail, finish);
                self.queue.extend(chunks.iter().map(frame));
            }
        }
        true
    }

    fn end(&mut self) {
        let stats = self.summary.to_json(&self.ex.notes);
        // An SSE comment: clients ignore it; people and tests can read it.
        self.queue
            .push_back(Bytes::from(format!(": toolmend {stats}\n\n")));
        self.queue
            .push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        m::request("ok", self.ex.started.elapsed(), std::time::Duration::ZERO);
        self.done = true;
    }

    fn fail(&mut self, message: &str) {
        self.fail_with(GatewayError::UpstreamStream(message.to_owned()));
    }

    /// Ends the stream with an error event in OpenAI's shape (the same `code` as the
    /// JSON path's answer to the same fault), then `[DONE]`.
    fn fail_with(&mut self, e: GatewayError) {
        self.queue.push_back(frame(&e.body()));
        self.queue
            .push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        self.done = true;
    }
}

/// The streaming answer to `ex`.
pub(crate) async fn respond(ex: Exchange) -> Response {
    let deadline = ex.gw.upstream.deadline();
    let req = ex.gw.upstream.post(wire::PATH, &ex.headers, &ex.request);
    let resp = match ex.gw.upstream.send(req, deadline).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let gate = ex.toolbox.is_some() && ex.gw.config.calls.calls_in_content;
    let upstream: Upstream = Box::pin(sse_stream::SseStream::from_bytes_stream(
        resp.bytes_stream(),
    ));
    let history_header = ex
        .notes
        .history
        .as_deref()
        .and_then(|h| HeaderValue::from_str(h).ok());
    let driver = Driver {
        ex,
        upstream,
        t: Transformer::new(gate),
        queue: VecDeque::new(),
        summary: Summary::default(),
        done: false,
        finished: false,
        deadline,
    };
    let body = stream::unfold(driver, |mut d| async move {
        loop {
            if let Some(b) = d.queue.pop_front() {
                return Some((Ok::<_, std::convert::Infallible>(b), d));
            }
            if d.done {
                return None;
            }
            d.next_frames().await;
        }
    });
    let mut out = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| {
            GatewayError::Internal {
                code: "stream",
                message: "stream setup failed".to_owned(),
            }
            .into_response()
        });
    if let Some(v) = history_header {
        out.headers_mut().insert("x-toolmend-history", v);
    }
    out.into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{ContentGate, Step, Transformer};

    #[test]
    fn usage_in_the_finishing_chunk_survives() {
        // Some servers send `usage` with `finish_reason` rather than in a chunk of its own.
        let mut t = Transformer::new(true);
        let first = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null}]});
        assert!(matches!(t.on_chunk(first), Step::Emit(_)));
        let last = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}});
        let Step::Finish(f) = t.on_chunk(last) else {
            panic!("no finish")
        };
        let chunks = t.finish_chunks(None, &f.message, f.held_text, f.tail, f.finish);
        assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 6);
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "stop"
        );
    }

    fn run(deltas: &[&str]) -> (String, Option<String>) {
        let mut g = ContentGate::default();
        let mut out = String::new();
        for d in deltas {
            out.push_str(&g.push(d));
        }
        let (held, tail) = g.finish();
        out.push_str(&tail);
        (out, held)
    }

    #[test]
    fn plain_text_streams_through_whole() {
        assert_eq!(
            run(&["Hel", "lo ", "world", "."]),
            ("Hello world.".into(), None)
        );
        // A '<' that does not become a marker is released.
        assert_eq!(run(&["a <", "b"]), ("a <b".into(), None));
    }

    #[test]
    fn a_call_marker_holds_the_rest() {
        let (out, held) = run(&[
            "Let me check.",
            "<tool",
            "_call>{\"name\"",
            ": \"f\"}</tool_call>",
        ]);
        assert_eq!(out, "Let me check.");
        assert_eq!(
            held.as_deref(),
            Some("<tool_call>{\"name\": \"f\"}</tool_call>")
        );
        let (out, held) = run(&["  {\"name\": ", "\"f\"}"]);
        assert_eq!(out, "");
        assert_eq!(held.as_deref(), Some("  {\"name\": \"f\"}"));
    }

    /// Feeds `n` content deltas and `n` tool-call fragments through the assembler, then
    /// finishes; returns the best time of three runs.
    fn assemble(n: usize) -> std::time::Duration {
        let mut best = std::time::Duration::MAX;
        for _ in 0..3 {
            let mut t = Transformer::new(true);
            let chunks: Vec<_> = (0..n)
                .map(|i| {
                    let delta = if i % 2 == 0 {
                        json!({"content": "some words of prose, then more "})
                    } else {
                        json!({"tool_calls": [{"index": i % 4, "id": if i < 4 { json!(format!("c{i}")) } else { json!(null) },
                            "function": {"arguments": "\"k\": 1, "}}]})
                    };
                    json!({"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
                })
                .collect();
            let started = std::time::Instant::now();
            for c in chunks {
                let _ = t.on_chunk(c);
            }
            let last = json!({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
            let Step::Finish(f) = t.on_chunk(last) else {
                panic!("no finish")
            };
            let out = t.finish_chunks(None, &f.message, f.held_text, f.tail, f.finish);
            assert!(!out.is_empty());
            best = best.min(started.elapsed());
        }
        best
    }

    /// The content a client receives for `chunks` (choice 0, no mending).
    fn streamed_text(gate: bool, chunks: &[serde_json::Value]) -> String {
        let mut t = Transformer::new(gate);
        let mut out = Vec::new();
        for c in chunks {
            match t.on_chunk(c.clone()) {
                Step::Emit(v) => out.extend(v),
                Step::Finish(f) => {
                    out.extend(t.finish_chunks(None, &f.message, f.held_text, f.tail, f.finish));
                }
            }
        }
        out.iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect()
    }

    #[test]
    fn content_in_the_finishing_chunk_reaches_the_client() {
        // fuzz/regressions/sse_assemble/content_in_finishing_chunk_dropped.jsonl
        let chunks = [
            json!({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": null}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "."}, "finish_reason": "stop"}]}),
        ];
        assert_eq!(streamed_text(true, &chunks), "Hi.");
        assert_eq!(streamed_text(false, &chunks), "Hi.");
    }

    #[test]
    fn a_leading_fence_split_before_its_third_backtick_is_held_whole() {
        // fuzz/regressions/sse_assemble/leading_fence_split_leaks_backticks.jsonl
        assert_eq!(
            run(&["``", "`json\n{\"a\": 1}\n```"]),
            (String::new(), Some("```json\n{\"a\": 1}\n```".into()))
        );
        // Backticks that do not become a fence are released at the end, none lost.
        assert_eq!(run(&["``", " code"]), ("`` code".into(), None));
    }

    #[test]
    fn the_assembler_is_linear_in_the_deltas() {
        // Quadratic work (a rescan of everything held per delta) gives ~100x per 10x.
        let (a, b, c) = (assemble(1_000), assemble(10_000), assemble(100_000));
        let r1 = b.as_secs_f64() / a.as_secs_f64().max(1e-9);
        let r2 = c.as_secs_f64() / b.as_secs_f64().max(1e-9);
        assert!(r1 < 30.0 && r2 < 30.0, "1x {a:?}, 10x {b:?}, 100x {c:?}");
    }

    #[test]
    fn a_new_id_on_the_same_index_starts_its_own_call() {
        // Issue 11: ids A then B on index 0 reached the client as one call B.
        let mut t = Transformer::new(false);
        let part = |id: &str, args: &str| {
            json!({"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": id,
                "function": {"name": if id.is_empty() { json!(null) } else { json!("f") }, "arguments": args}}]},
                "finish_reason": null}]})
        };
        for c in [
            part("A", "{\"a\""),
            part("", ": 1}"),
            part("B", "{\"b\": 2}"),
        ] {
            let _ = t.on_chunk(c);
        }
        let last = json!({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
        let Step::Finish(f) = t.on_chunk(last) else {
            panic!("no finish")
        };
        let calls = f.message.tool_calls.unwrap();
        let got: Vec<(Option<&str>, &str)> = calls
            .iter()
            .map(|c| (c.id.as_deref(), c.function.arguments.as_str()))
            .collect();
        assert_eq!(got, [(Some("A"), "{\"a\": 1}"), (Some("B"), "{\"b\": 2}")]);
    }

    #[test]
    fn nothing_is_lost_or_repeated() {
        // Whatever the split, forwarded text + held text is the whole content.
        let text = "Sure. <tool_call>{\"a\": 1}</tool_call> done";
        for cut in 1..text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let (out, held) = run(&[&text[..cut], &text[cut..]]);
            assert_eq!(
                format!("{out}{}", held.unwrap_or_default()),
                text,
                "cut {cut}"
            );
        }
    }
}
