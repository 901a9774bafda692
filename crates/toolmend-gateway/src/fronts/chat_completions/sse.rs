//! The SSE answer (`stream: true`): text deltas are forwarded as they arrive; tool-call
//! deltas are buffered per index and emitted mended, in OpenAI's chunk format, before the
//! chunk that carries `finish_reason`. Content that starts a call written into the text
//! (`<tool_call>`, `[TOOL_CALLS]`, a leading `{` …) is held from there on and becomes
//! real `tool_calls`. A client that goes away drops the body stream, which drops (and so
//! cancels) the upstream request.
//!
//! With server-side tools ([`replay`]) the stream is not passed through: every round is
//! read whole, and the final answer is written as chunks of the same format.

use std::{collections::VecDeque, time::Instant};

use axum::{
    body::{Body, Bytes},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures::{Stream, StreamExt, stream};
use serde_json::{Map, Value, json};
use toolmend::{
    conversation::{AssistantMessage, ToolCall},
    drive::Resolved,
    stream::{AssembleOptions, Assembler, CallDelta, ContentMode, StreamError, Thinking},
};

use crate::{
    config::ReasoningPolicy,
    fronts::chat_completions::{
        chunk_view,
        exchange::Exchange,
        json::{self, ACCOUNT_KEY, Answer},
        wire,
    },
    metrics as m,
    pipeline::{
        plan::plan_only,
        reasoning::{Parts, Tap},
        report::Summary,
    },
    server::error::GatewayError,
};

/// The transformation of choice 0's deltas: the core assembler joins its tool-call
/// fragments and gates its content; this wraps it in chunks.
#[derive(Debug)]
struct Transformer {
    asm: Assembler,
    /// Content goes through the gate (else it passes untouched).
    gate_content: bool,
    /// `id`, `object`, `created`, `model` … of the first chunk, for the chunks we write.
    meta: Map<String, Value>,
    /// Follows the content's reasoning (`calls.reasoning` `move`, or `drop` without a
    /// gate).
    tap: Option<Tap>,
    /// The reasoning the tap finds goes out as `delta.reasoning_content`.
    move_reasoning: bool,
    /// The content the gate released before choice 0 finished: the plan reads the whole
    /// text, and only what is left of its content is sent at the end.
    released: String,
    /// The choices after the first, when the answer is mended: each held whole (content
    /// and tool calls; its other deltas pass) until its finish, then planned as the JSON
    /// path plans it ([`OtherChoice`]). `None`: they pass untouched.
    others: Option<std::collections::BTreeMap<u64, Assembler>>,
    /// `calls.template_opens_thinking`: the first content is read as inside a thinking
    /// block (the gate and the tap are given its opening tag first); false once given.
    open_thinking: bool,
    /// `max_bytes`, `max_calls` of [`Transformer::new`]: the choices after the first
    /// share the byte budget; each may hold as many calls as choice 0.
    max_bytes: usize,
    max_calls: usize,
}

/// At most this many choices after the first are held at once (OpenAI's `n` goes to 128).
const MAX_OTHER_CHOICES: usize = 128;

/// A choice after the first, finished: its whole message and its finishing choice object
/// (`delta` emptied), for the JSON path's rule to plan and write.
struct OtherChoice {
    index: u64,
    message: AssistantMessage,
    finish: Value,
}

/// What one upstream event turns into.
enum Step {
    /// Chunks to send now.
    Emit(Vec<Value>),
    /// The chunk, unchanged: it may go out as the upstream's own bytes (no re-encoding).
    Forward(Value),
    /// Choice 0 finished: mend the buffered message, then send the finish chunk.
    Finish(Box<Finished>),
}

/// Choice 0 at its end: the buffered message and the chunk that finishes it.
struct Finished {
    message: AssistantMessage,
    held_text: Option<String>,
    tail: String,
    finish: Value,
    /// The gate dropped thinking (the plan never saw it).
    thinking_stripped: bool,
    /// Reasoning still to send (`delta.reasoning_content`) before the content left.
    reasoning: String,
}

impl Transformer {
    /// `max_bytes`, `max_calls`: what choice 0 may hold (`limits.max_upstream_bytes`,
    /// `limits.max_calls_per_message`).
    /// `gate`: content goes through the gate, thinking passed or stripped (else it
    /// passes untouched).
    fn new(gate: Option<Thinking>, max_bytes: usize, max_calls: usize) -> Self {
        let content = gate.map_or(ContentMode::Pass, ContentMode::Gate);
        Transformer {
            asm: Assembler::new(AssembleOptions {
                max_bytes,
                max_calls,
                content,
            }),
            gate_content: gate.is_some(),
            meta: Map::new(),
            tap: None,
            move_reasoning: false,
            released: String::new(),
            others: None,
            open_thinking: false,
            max_bytes,
            max_calls,
        }
    }

    /// Holds the choices after the first whole, to be planned at their finish.
    fn holding_other_choices(mut self) -> Self {
        self.others = Some(std::collections::BTreeMap::new());
        self
    }

    /// The first choice after the first that holds content or calls not yet released (one
    /// that began and holds nothing loses nothing when the stream ends).
    fn others_pending(&self) -> Option<u64> {
        self.others
            .as_ref()?
            .iter()
            .find(|(_, asm)| asm.retained() > 0 || asm.holds_anything())
            .map(|(&index, _)| index)
    }

    /// Takes the choices after the first out of `chunk` (when they are held): their
    /// content and tool-call deltas are kept, what else they carry stays in the chunk,
    /// and a choice that finishes is returned whole. The second value is true when the
    /// chunk was left with no choice and nothing else to say (not to be sent).
    fn take_others(&mut self, chunk: &mut Value) -> Result<(Vec<OtherChoice>, bool), String> {
        let (max_bytes, max_calls) = (self.max_bytes, self.max_calls);
        let Some(others) = self.others.as_mut() else {
            return Ok((Vec::new(), false));
        };
        let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) else {
            return Ok((Vec::new(), false));
        };
        // Choice 0 alone (n = 1, nearly every stream): nothing to take, nothing to copy.
        if choices
            .iter()
            .all(|c| c["index"].as_u64().unwrap_or(0) == 0)
        {
            return Ok((Vec::new(), false));
        }
        let had = choices.len();
        let mut done = Vec::new();
        let mut kept = Vec::with_capacity(choices.len());
        for mut choice in std::mem::take(choices) {
            let index = choice["index"].as_u64().unwrap_or(0);
            if index == 0 {
                kept.push(choice);
                continue;
            }
            if !others.contains_key(&index) && others.len() >= MAX_OTHER_CHOICES {
                return Err(format!(
                    "the upstream stream held more than {MAX_OTHER_CHOICES} choices at once"
                ));
            }
            let asm = others.entry(index).or_insert_with(|| {
                Assembler::new(AssembleOptions {
                    max_bytes,
                    max_calls,
                    content: ContentMode::Keep,
                })
            });
            if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
                if let Some(Value::Array(parts)) = delta.remove("tool_calls") {
                    for p in &parts {
                        asm.push_call(CallDelta::from_value(p))
                            .map_err(|e| e.to_string())?;
                    }
                }
                if let Some(Value::String(text)) = delta.remove("content") {
                    asm.push_content(&text).map_err(|e| e.to_string())?;
                }
            }
            if choice.get("finish_reason").is_some_and(|f| !f.is_null()) {
                if let Some(mut asm) = others.remove(&index) {
                    done.push(OtherChoice {
                        index,
                        message: asm.finish().message,
                        finish: choice,
                    });
                }
                continue;
            }
            let empty = choice["delta"].as_object().is_none_or(Map::is_empty)
                && choice.get("logprobs").is_none_or(Value::is_null);
            if !empty {
                kept.push(choice);
            }
        }
        // One budget for every held choice: n choices never hold n times the limit.
        let held: usize = others.values().map(Assembler::retained).sum();
        if held > max_bytes {
            return Err(format!(
                "the upstream stream's choices after the first held more than \
                 limits.max_upstream_bytes ({max_bytes} bytes) of content and tool calls"
            ));
        }
        let emptied = had > 0 && kept.is_empty();
        *choices = kept;
        let silent = emptied && chunk.get("usage").is_none_or(Value::is_null);
        Ok((done, silent))
    }

    /// Follows the content's reasoning: `move` sends it as `delta.reasoning_content`;
    /// without a gate (an answer no plan reads) the tap also takes it out of the content
    /// (`move` and `drop`).
    fn with_reasoning(mut self, policy: ReasoningPolicy) -> Self {
        let needed = match policy {
            ReasoningPolicy::Keep => false,
            ReasoningPolicy::Move => true,
            ReasoningPolicy::Drop => !self.gate_content,
        };
        if needed {
            self.tap = Some(Tap::default());
            self.move_reasoning = policy == ReasoningPolicy::Move;
            if self.gate_content {
                // The tap splits what the gate strips.
                self.asm = std::mem::take(&mut self.asm).collecting_reasoning();
            }
        }
        self
    }

    /// True when reasoning was taken out of the content (by the tap or the gate).
    fn saw_thinking(&self) -> bool {
        self.tap.as_ref().is_some_and(Tap::saw_thinking)
    }

    /// True when choice 0 has something buffered that only its finish releases: tool-call
    /// fragments, or content the gate holds or keeps back.
    fn holds_anything(&self) -> bool {
        self.asm.holds_anything()
    }

    fn chunk(&self, choice: Value) -> Value {
        let mut c = self.meta.clone();
        c.insert("choices".to_owned(), json!([choice]));
        Value::Object(c)
    }

    /// A text delta through the gate and the tap: what of it goes out now, and the
    /// reasoning split off. `None` when neither runs (the text goes out as it came).
    fn content_step(&mut self, text: &str) -> Result<Option<ContentStep>, StreamError> {
        if !(self.gate_content || self.tap.is_some()) {
            return Ok(None);
        }
        if self.open_thinking && !text.is_empty() {
            // The template opened the block: what follows is inside it.
            self.open_thinking = false;
            let tag = toolmend::message::TEMPLATE_THINKING_TAG;
            if self.gate_content {
                self.asm.push_content(tag)?;
            } else if let Some(tap) = self.tap.as_mut() {
                tap.push(tag);
            }
        }
        // With the gate, the tap splits the reasoning the gate stripped (a tag quoted in
        // code or inside a held call is no reasoning); without it, the content itself.
        let (parts, now) = if self.gate_content {
            let now = self.asm.push_content(text)?;
            let stripped = self.asm.take_reasoning();
            (self.tap.as_mut().map(|t| t.push(&stripped)), Some(now))
        } else {
            let parts = self.tap.as_mut().map(|t| t.push(text));
            let now = parts.as_ref().map(|p| p.content.clone());
            (parts, now)
        };
        Ok(Some(ContentStep { now, parts }))
    }

    /// True when `step` leaves a delta whose content was `text` as it came.
    fn keeps(&self, text: &str, step: &ContentStep) -> bool {
        step.now.as_deref().is_none_or(|now| now == text)
            && !(self.move_reasoning
                && step.parts.as_ref().is_some_and(|p| !p.reasoning.is_empty()))
    }

    /// Writes `step` into `delta` (whose content was `text`). True when it changed.
    fn apply_content(&self, delta: &mut Map<String, Value>, text: &str, step: ContentStep) -> bool {
        let mut changed = false;
        if let Some(now) = step.now {
            if now.is_empty() && !text.is_empty() {
                changed = true;
                delta.remove("content");
            } else if now != text {
                changed = true;
                delta.insert("content".to_owned(), Value::String(now));
            }
        }
        if let Some(p) = step.parts.filter(|_| self.move_reasoning) {
            changed |= !p.reasoning.is_empty();
            let mut d = Value::Object(std::mem::take(delta));
            wire::put_reasoning(&mut d, &p.reasoning);
            if let Value::Object(o) = d {
                *delta = o;
            }
        }
        changed
    }

    /// A chunk that is only choice 0's text, or only choice 0's tool-call fragments, read
    /// without a tree (see [`Viewed`]); `None` for any other chunk (nothing done:
    /// [`on_chunk`](Self::on_chunk) reads it).
    fn on_text_chunk(&mut self, data: &str) -> Option<Result<Viewed, StreamError>> {
        // The first chunk's members are kept for the chunks the gateway writes.
        if self.meta.is_empty() {
            return None;
        }
        // One pass, objects only, each member read at most once (see `chunk_view`).
        let view = serde_json::from_str::<chunk_view::Chunk<'_>>(data).ok()?;
        if view.error {
            return None;
        }
        let [choice] = view.choices.as_slice() else {
            return None;
        };
        if choice.index.unwrap_or(0) != 0 || choice.finish_reason {
            return None;
        }
        let delta = &choice.delta;
        if let Some(parts) = &delta.tool_calls {
            // Sent nowhere only when the tree would drop the whole chunk: nothing but the
            // fragments in the delta, no `logprobs` beside it, no `usage` in the chunk.
            if view.usage || choice.logprobs || delta.content.is_some() || delta.other {
                return None;
            }
            return self.on_calls_delta(parts.as_deref()?);
        }
        let text = delta.content.as_ref()?.as_ref()?.0.as_ref();
        Some(match self.content_step(text) {
            Ok(Some(step)) if !self.keeps(text, &step) => Ok(Viewed::Changed(step)),
            Ok(_) => Ok(Viewed::AsItCame),
            Err(e) => Err(e),
        })
    }

    /// Choice 0's delta holding tool-call fragments and nothing else, every fragment read
    /// typed (one that does not read so left the chunk to the tree, nothing taken): each
    /// taken in order.
    fn on_calls_delta(
        &mut self,
        parts: &[chunk_view::Part<'_>],
    ) -> Option<Result<Viewed, StreamError>> {
        for part in parts {
            let (name, arguments) = part.function.as_ref().map_or((None, None), |f| {
                (
                    f.name.as_ref().map(|s| s.0.as_ref()),
                    f.arguments.as_ref().map(|s| s.0.as_ref()),
                )
            });
            let call = CallDelta {
                index: part.index,
                id: part.id.as_ref().map(|s| s.0.as_ref()),
                name,
                arguments,
            };
            if let Err(e) = self.asm.push_call(call) {
                return Some(Err(e));
            }
        }
        Some(Ok(Viewed::Taken))
    }

    #[cfg(test)]
    fn on_chunk(&mut self, chunk: Value) -> Result<Step, StreamError> {
        self.on_chunk_with(chunk, None)
    }

    /// [`on_chunk`](Self::on_chunk), choice 0's content step already taken
    /// (`taken`: [`on_text_chunk`](Self::on_text_chunk) ran the gate on it).
    fn on_chunk_with(
        &mut self,
        mut chunk: Value,
        taken: Option<ContentStep>,
    ) -> Result<Step, StreamError> {
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
            return Ok(Step::Emit(vec![chunk]));
        };
        let Some(pos) = choices
            .iter()
            .position(|c| c["index"].as_u64().unwrap_or(0) == 0)
        else {
            return Ok(Step::Emit(vec![chunk]));
        };
        let choice = &mut choices[pos];
        // Whether the chunk still is what the upstream sent (then its own bytes go out).
        let mut changed = false;
        if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
            // Taken out whatever it holds (an array of fragments, or a `null` some
            // servers send): the chunk changed either way.
            if let Some(calls) = delta.remove("tool_calls") {
                changed = true;
                if let Value::Array(parts) = calls {
                    for p in &parts {
                        self.asm.push_call(CallDelta::from_value(p))?;
                    }
                }
            }
            let text = delta
                .get("content")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(text) = text {
                let step = match taken {
                    Some(step) => Some(step),
                    None => self.content_step(&text)?,
                };
                if let Some(step) = step {
                    changed |= self.apply_content(delta, &text, step);
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
            // Reasoning of the finishing delta goes out before the content left, with
            // what the tap kept back.
            let mut reasoning = String::new();
            if self.tap.is_some()
                && let Some(r) = finish_choice
                    .get_mut("delta")
                    .and_then(Value::as_object_mut)
                    .and_then(|d| d.remove("reasoning_content"))
            {
                reasoning.push_str(r.as_str().unwrap_or_default());
            }
            let mut released = released;
            if let Some(tap) = self.tap.as_mut() {
                let mut rest = if self.gate_content {
                    tap.push(&self.asm.flush_reasoning())
                } else {
                    Parts::default()
                };
                let end = tap.finish();
                rest.content.push_str(&end.content);
                rest.reasoning.push_str(&end.reasoning);
                if !self.gate_content {
                    released.push_str(&rest.content);
                }
                if self.move_reasoning {
                    reasoning.push_str(&rest.reasoning);
                }
            }
            let done = self.asm.finish();
            let thinking_stripped = done.thinking_stripped;
            let tail = released + &done.tail;
            let message = done.message;
            // The message's text is all of it (released, then held); what is left to
            // send is the held part.
            let held_text = message
                .text()
                .map(|t| toolmend::stream::unreleased(&t, &done.released).to_owned());
            self.released = done.released;
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
            return Ok(Step::Finish(Box::new(Finished {
                message,
                held_text,
                tail,
                finish: step_finish,
                thinking_stripped,
                reasoning,
            })));
        }
        // Drop a chunk left with nothing to say (a tool-call fragment, held content).
        let empty = choices[pos]["delta"].as_object().is_some_and(Map::is_empty)
            && choices[pos].get("logprobs").is_none_or(Value::is_null);
        if empty {
            choices.remove(pos);
            if choices.is_empty() && chunk.get("usage").is_none_or(Value::is_null) {
                return Ok(Step::Emit(vec![]));
            }
            changed = true;
        }
        if changed {
            Ok(Step::Emit(vec![chunk]))
        } else {
            Ok(Step::Forward(chunk))
        }
    }

    /// The chunks that carry the mended calls (one per call, whole arguments), the content
    /// that was kept back or held, as the plan left it (the prose before calls read from
    /// the text, a re-ask's text), then the finish chunk.
    fn finish_chunks(
        &self,
        mended: Option<&Resolved>,
        message: &AssistantMessage,
        held_text: Option<String>,
        tail: String,
        finish: Value,
        reasoning: &str,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        if !reasoning.is_empty() {
            out.push(self.chunk(
                json!({"index": 0, "delta": {"reasoning_content": reasoning},
                "logprobs": null, "finish_reason": null}),
            ));
        }
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
        match mended {
            // The plan read the whole text: send what of its content did not go out yet.
            Some(m) => {
                let planned = m.message.text().unwrap_or_default();
                text.push_str(toolmend::stream::unreleased(&planned, &self.released));
            }
            None => text.push_str(held_text.as_deref().unwrap_or_default()),
        }
        out.extend(self.message_chunks(0, &text, &calls));
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

impl Transformer {
    /// The chunks of one whole choice (a chat-completion `choice` object, its message as
    /// written): its reasoning (`reasoning_content`, when any), its text, its calls; not
    /// its role or finish chunks.
    fn whole_choice_chunks(&self, index: usize, choice: &Value) -> Vec<Value> {
        let message = <AssistantMessage as serde::Deserialize>::deserialize(&choice["message"])
            .unwrap_or_default();
        let mut out = Vec::new();
        // What an upstream of another API sent that the chat form has no field for
        // (`upstreams`), first: the translating fronts write it back where it was.
        let mut carried = serde_json::Map::new();
        for key in ["thinking_blocks", "server_blocks", "reasoning_items"] {
            if let Some(v) = choice["message"].get(key).filter(|v| v.is_array()) {
                carried.insert(key.to_owned(), v.clone());
            }
        }
        if !carried.is_empty() {
            out.push(self.chunk(json!({"index": index, "delta": carried,
                "logprobs": null, "finish_reason": null})));
        }
        if let Some(r) = choice["message"]["reasoning_content"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            out.push(
                self.chunk(json!({"index": index, "delta": {"reasoning_content": r},
                "logprobs": null, "finish_reason": null})),
            );
        }
        let text = message.text().unwrap_or_default();
        out.extend(self.message_chunks(
            index,
            &text,
            message.tool_calls.as_deref().unwrap_or_default(),
        ));
        out
    }

    /// The chunks of one choice's whole message: its text in one content chunk (none when
    /// empty), then one chunk per call with its whole arguments, in OpenAI's format
    /// (`index`, `id`, `type`, `function.name`, `function.arguments`).
    fn message_chunks(&self, choice: usize, text: &str, calls: &[ToolCall]) -> Vec<Value> {
        let mut out = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() {
            out.push(self.chunk(json!({"index": choice, "delta": {"content": text}, "logprobs": null, "finish_reason": null})));
        }
        for (i, c) in calls.iter().enumerate() {
            out.push(
                self.chunk(json!({"index": choice, "delta": {"tool_calls": [{
                "index": i, "id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments}}]},
                "logprobs": null, "finish_reason": null})),
            );
        }
        out
    }
}

/// A whole answer written as a stream (the round trip: every round was read as JSON, so
/// the first event waits for the last round): per choice a role chunk, its content, its
/// calls and its finish chunk, in OpenAI's chunk format; the usage chunk when the client
/// asked for it (`stream_options.include_usage`); the closing `: toolmend {…}` report;
/// `data: [DONE]`. Every `x-toolmend-*` header of the answer is set: it is known before
/// the first byte.
pub(crate) fn replay(answer: Answer, include_usage: bool) -> Response {
    let report = answer.report();
    let account = answer.account();
    let mut answer = answer;
    let response = match answer.take_response() {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let Answer { headers, .. } = answer;
    let mut t = Transformer::new(None, usize::MAX, usize::MAX);
    for key in [
        "id",
        "created",
        "model",
        "service_tier",
        "system_fingerprint",
    ] {
        if let Some(v) = response.get(key) {
            t.meta.insert(key.to_owned(), v.clone());
        }
    }
    t.meta
        .insert("object".to_owned(), json!("chat.completion.chunk"));
    let mut chunks = Vec::new();
    for (i, choice) in response["choices"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let index = choice["index"].as_u64().map_or(i, |n| n as usize);
        chunks.push(t.chunk(
            json!({"index": index, "delta": {"role": "assistant", "content": ""},
            "logprobs": null, "finish_reason": null}),
        ));
        chunks.extend(t.whole_choice_chunks(index, choice));
        chunks.push(
            t.chunk(json!({"index": index, "delta": {}, "logprobs": null,
            "finish_reason": choice["finish_reason"]})),
        );
    }
    if include_usage && let Some(usage) = response.get("usage").filter(|u| !u.is_null()) {
        let mut c = t.meta.clone();
        c.insert("choices".to_owned(), json!([]));
        c.insert("usage".to_owned(), usage.clone());
        chunks.push(Value::Object(c));
    }
    if let (Some(account), Some(last)) = (account, chunks.last_mut()) {
        last[ACCOUNT_KEY] = account;
    }
    let mut frames: Vec<Bytes> = chunks.iter().map(frame).collect();
    frames.push(Bytes::from(format!(": toolmend {report}\n\n")));
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let body = stream::iter(frames.into_iter().map(Ok::<_, std::convert::Infallible>));
    let mut out = event_stream(Body::from_stream(body));
    crate::server::headers::set_headers(out.headers_mut(), headers);
    out
}

/// The event of `chunk` (an object without `key`) with `key: value` as its last member.
fn frame_with(chunk: &Value, key: &str, value: &impl serde::Serialize) -> Bytes {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"data: ");
    let _ = serde_json::to_writer(&mut out, chunk);
    if out.last() == Some(&b'}') {
        out.pop();
        if out.last() != Some(&b'{') {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut out, key);
        out.push(b':');
        let _ = serde_json::to_writer(&mut out, value);
        out.push(b'}');
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

fn frame(v: &Value) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"data: ");
    // Writing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, v);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// What the gate and the tap made of a text delta ([`Transformer::content_step`]).
struct ContentStep {
    /// What of the text goes out now (`None`: the gate does not run, the tap decides).
    now: Option<String>,
    /// The tap's split (`None` without a tap).
    parts: Option<Parts>,
}

/// What [`Transformer::on_text_chunk`] made of a chunk it read without a tree.
enum Viewed {
    /// Choice 0's text, through the gate and the tap unchanged: the chunk goes out as it
    /// came.
    AsItCame,
    /// Choice 0's text, changed by the gate or the tap: the step is taken, the chunk is
    /// then read as a tree and [`Transformer::on_chunk_with`] writes it.
    Changed(ContentStep),
    /// Choice 0's tool-call fragments alone, taken into the assembler: nothing goes out
    /// (the tree would drop the emptied chunk).
    Taken,
}

/// The member names a chunk forwarded as it came may hold at most once each.
const VERBATIM_KEYS: &[&str] = &[
    "\"choices\"",
    "\"delta\"",
    "\"content\"",
    "\"tool_calls\"",
    "\"reasoning_content\"",
];

/// True when no string of `keys` (each a quoted name) occurs twice in `data`: one pass
/// over its bytes, a key compared only where a quote is followed by its first letter.
fn at_most_once(data: &str, keys: &[&str]) -> bool {
    let bytes = data.as_bytes();
    let mut seen = 0u32;
    for at in memchr::memchr_iter(b'"', bytes) {
        let Some(&first) = bytes.get(at + 1) else {
            break;
        };
        for (k, key) in keys.iter().enumerate() {
            let key = key.as_bytes();
            if key.get(1) == Some(&first) && bytes[at..].starts_with(key) {
                let bit = 1u32 << k;
                if seen & bit != 0 {
                    return false;
                }
                seen |= bit;
            }
        }
    }
    true
}

/// A chunk's event as the upstream sent it: its `data` (one line of JSON) unchanged.
fn raw_frame(data: &str) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.as_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
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
    /// With `calls.account`, from choice 0's finish on: the last chunk, kept back until
    /// the next one (or the end, when the account joins it).
    last: Option<Value>,
    account: bool,
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
            Ok(None) if self.finished && self.t.others_pending().is_none() => {
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
            if let Some(index) = self.t.others_pending() {
                m::upstream_error("stream");
                self.fail(&format!(
                    "the upstream stream ended ([DONE]) before choice {index}'s finish_reason; \
                     what was buffered for it was not released"
                ));
                return false;
            }
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
        // Forwarded as it came only when nothing below changes it: choice 0 alone (the
        // others are taken out of the chunk), its data on one line (an event's `data`
        // over several lines is one JSON text that goes out as one line).
        let one_line = !data.contains(['\n', '\r']);
        // Choice 0's text alone, the common chunk: read without a tree, and sent as it
        // came when the gate and the tap leave it so. A member it reads given twice fails
        // that read (`chunk_view` refuses a member it reads twice), so what it forwards
        // names each once.
        let mut taken = None;
        if one_line && !self.finished {
            match self.t.on_text_chunk(&data) {
                Some(Ok(Viewed::AsItCame)) => {
                    self.queue.push_back(raw_frame(&data));
                    return true;
                }
                Some(Ok(Viewed::Taken)) => return true,
                Some(Ok(Viewed::Changed(step))) => taken = Some(step),
                Some(Err(e)) => {
                    self.too_large(e);
                    return false;
                }
                None => {}
            }
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
            m::upstream_error("stream");
            self.fail("the upstream sent a stream chunk that is not JSON");
            return false;
        };
        if chunk.get("error").is_some() {
            self.flush_last();
            self.queue.push_back(frame(&chunk));
            return true;
        }
        let mut chunk = chunk;
        // A key written twice (the tree keeps the last) would reach a client that reads
        // the first: never verbatim then. Counting the names is enough (a quote inside a
        // string is escaped), at the price of re-encoding a rare chunk that did not need it.
        let verbatim = one_line
            && at_most_once(&data, VERBATIM_KEYS)
            && chunk
                .get("choices")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().all(|c| c["index"].as_u64().unwrap_or(0) == 0));
        // The choices after the first are held whole and planned at their finish.
        let (others, silent) = match self.t.take_others(&mut chunk) {
            Ok(taken) => taken,
            Err(why) => {
                m::upstream_error("too_large");
                self.fail_with(GatewayError::UpstreamTooLarge(format!(
                    "{why}; it was not read further"
                )));
                return false;
            }
        };
        let step = match if silent {
            Ok(Step::Emit(Vec::new()))
        } else {
            self.t.on_chunk_with(chunk, taken)
        } {
            Ok(step) => step,
            Err(e) => {
                self.too_large(e);
                return false;
            }
        };
        match step {
            Step::Emit(chunks) => self.send(chunks),
            // Kept back from choice 0's finish on (the account joins the last chunk).
            Step::Forward(chunk) if !verbatim || (self.finished && self.account) => {
                self.send(vec![chunk]);
            }
            Step::Forward(_) => self.queue.push_back(raw_frame(&data)),
            Step::Finish(f) => {
                self.finished = true;
                let Finished {
                    message,
                    held_text,
                    tail,
                    finish,
                    thinking_stripped: stripped,
                    reasoning,
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
                        let answered = pipeline
                            .answer(
                                &message,
                                wire::cut_off(upstream_finish.as_deref()),
                                &ex.history,
                                toolbox,
                                ex.session(),
                                ex,
                                &mut self.summary,
                            )
                            .await
                            .map(|(mut answered, _)| {
                                if stripped || self.t.saw_thinking() {
                                    answered
                                        .message_fixes
                                        .insert(0, toolmend::message::thinking_stripped());
                                }
                                answered
                            });
                        match answered {
                            Ok(mended) => {
                                self.summary.choice = 0;
                                self.summary.add(&mended, toolbox, &pipeline.labels);
                                ex.log_calls(&mended, toolbox);
                                Some(mended)
                            }
                            Err(e) => {
                                // The head went out with 200: the refusal ends the
                                // stream as an error event in OpenAI's shape, and the
                                // closing report says what the guard did (its headers).
                                self.refuse_with(e);
                                return false;
                            }
                        }
                    }
                    None => None,
                };
                let plan_stripped = mended.as_ref().is_some_and(|m| {
                    m.message_fixes
                        .iter()
                        .any(|f| f.kind == toolmend::FixKind::ThinkingStripped)
                });
                if stripped || plan_stripped || self.t.saw_thinking() {
                    self.summary.reasoning = Some(
                        if self.ex.gw.config.calls.reasoning_policy() == ReasoningPolicy::Move {
                            "moved"
                        } else {
                            "dropped"
                        },
                    );
                }
                let chunks = self.t.finish_chunks(
                    mended.as_ref(),
                    &message,
                    held_text,
                    tail,
                    finish,
                    &reasoning,
                );
                self.send(chunks);
            }
        }
        for other in others {
            let chunks = self.other_choice(other);
            self.send(chunks);
        }
        true
    }

    /// A choice after the first, finished: planned and written by the JSON path's rule
    /// ([`json::write_choice`], or the reasoning policy alone without tools), then sent
    /// whole: its reasoning, text and calls, then its finish chunk.
    fn other_choice(&mut self, o: OtherChoice) -> Vec<Value> {
        let ex = &self.ex;
        let index = usize::try_from(o.index).unwrap_or(usize::MAX);
        let upstream_finish = o.finish["finish_reason"].clone();
        let mut choice = json!({"index": o.index, "message": o.message,
            "finish_reason": upstream_finish});
        let calls = &ex.gw.config.calls;
        if calls.opens_thinking() {
            wire::open_thinking_in_prompt(&mut choice["message"]);
        }
        let message = <AssistantMessage as serde::Deserialize>::deserialize(&choice["message"])
            .unwrap_or(o.message);
        match &ex.toolbox {
            Some(toolbox) => {
                let mended = plan_only(
                    &message,
                    &ex.history,
                    toolbox,
                    &ex.gw.pipeline.plan,
                    wire::cut_off(upstream_finish.as_str()),
                );
                self.summary.choice = index;
                json::write_choice(&mut choice, &mended, &mut self.summary, toolbox, ex);
            }
            None if calls.mend => {
                json::reason_alone(
                    &mut choice["message"],
                    calls.reasoning_policy(),
                    &mut self.summary,
                );
            }
            None => {}
        }
        let mut out = self.t.whole_choice_chunks(index, &choice);
        let mut finish = o.finish;
        finish["finish_reason"] = choice["finish_reason"].clone();
        out.push(self.t.chunk(finish));
        out
    }

    /// Queues `chunks`; from choice 0's finish on (with the account) the last one is kept
    /// back for the account to join.
    fn send(&mut self, chunks: Vec<Value>) {
        if !(self.finished && self.account) {
            self.queue.extend(chunks.iter().map(frame));
            return;
        }
        for c in chunks {
            if let Some(prev) = self.last.replace(c) {
                self.queue.push_back(frame(&prev));
            }
        }
    }

    /// Sends the chunk kept back as it is.
    fn flush_last(&mut self) {
        if let Some(prev) = self.last.take() {
            self.queue.push_back(frame(&prev));
        }
    }

    fn end(&mut self) {
        if let Some(mut last) = self.last.take() {
            let account = self.summary.account_view(&self.ex.notes, None);
            match last.as_object() {
                // The account written straight after the chunk's last member.
                Some(o) if !o.contains_key(ACCOUNT_KEY) => {
                    self.queue
                        .push_back(frame_with(&last, ACCOUNT_KEY, &account));
                }
                _ => {
                    last[ACCOUNT_KEY] = serde_json::to_value(account).unwrap_or(Value::Null);
                    self.queue.push_back(frame(&last));
                }
            }
        }
        // An SSE comment: clients ignore it; people and tests can read it.
        let mut stats = b": toolmend ".to_vec();
        let _ = serde_json::to_writer(&mut stats, &self.summary.report(&self.ex.notes));
        stats.extend_from_slice(b"\n\n");
        self.queue.push_back(Bytes::from(stats));
        self.queue
            .push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        m::request("ok", self.ex.started.elapsed(), std::time::Duration::ZERO);
        self.done = true;
    }

    /// Ends the stream on a bound of choice 0's buffer (`limits.max_upstream_bytes`,
    /// `limits.max_calls_per_message`).
    fn too_large(&mut self, e: StreamError) {
        m::upstream_error("too_large");
        let what = match e {
            StreamError::TooLarge { limit } => format!(
                "more than limits.max_upstream_bytes ({limit} bytes) of content and tool calls"
            ),
            StreamError::TooManyCalls { limit } => {
                format!("more than limits.max_calls_per_message ({limit}) tool calls")
            }
        };
        self.fail_with(GatewayError::UpstreamTooLarge(format!(
            "the upstream stream held {what}; it was not read further"
        )));
    }

    fn fail(&mut self, message: &str) {
        self.fail_with(GatewayError::UpstreamStream(message.to_owned()));
    }

    /// Ends the stream with the guard's refusal as an error event (as the JSON path's
    /// 429 or 400), the closing `: toolmend {…}` report (the guard's counts, a failed
    /// re-ask: what the JSON path's headers say), then `[DONE]`.
    fn refuse_with(&mut self, e: GatewayError) {
        self.flush_last();
        self.queue.push_back(frame(&e.body()));
        let stats = self.summary.to_json(&self.ex.notes);
        self.queue
            .push_back(Bytes::from(format!(": toolmend {stats}\n\n")));
        self.queue
            .push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        self.done = true;
    }

    /// Ends the stream with an error event in OpenAI's shape (the same `code` as the
    /// JSON path's answer to the same fault), then `[DONE]`.
    fn fail_with(&mut self, e: GatewayError) {
        self.flush_last();
        self.queue.push_back(frame(&e.body()));
        self.queue
            .push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        self.done = true;
    }
}

/// The streaming answer to `ex`. `unchanged`: the client's body when the request path
/// changed nothing in it (sent as it came, no second serialization).
pub(crate) async fn respond(ex: Exchange, unchanged: Option<Bytes>) -> Response {
    let deadline = ex.gw.upstream.deadline();
    let req = match unchanged {
        Some(body) => ex.gw.upstream.post_bytes(wire::PATH, &ex.headers, body),
        None => match ex.request.full() {
            Ok(request) => ex.gw.upstream.post(wire::PATH, &ex.headers, &request),
            Err(e) => return e.into_response(),
        },
    };
    let resp = match Box::pin(ex.gw.upstream.send(req, deadline)).await {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    // The gate runs whenever the answer is planned and the plan may read calls from the
    // text or strip thinking from it: what it would remove must not have gone out.
    let plan = &ex.gw.pipeline.plan;
    let gate = ex.toolbox.is_some() && (plan.calls_in_text || plan.strip_thinking);
    let thinking = if plan.strip_thinking {
        Thinking::Strip
    } else {
        Thinking::Pass
    };
    let calls = &ex.gw.config.calls;
    let mut t = Transformer::new(
        gate.then_some(thinking),
        ex.gw.upstream.max_bytes(),
        ex.gw.config.limits.max_calls_per_message,
    );
    if calls.mend {
        t = t
            .with_reasoning(calls.reasoning_policy())
            .holding_other_choices();
        t.open_thinking = calls.opens_thinking();
    }
    let account = calls.account;
    if gate && let Some(toolbox) = &ex.toolbox {
        // A leading pythonic call `get_weather(…)` is held only for a declared tool.
        t.asm = std::mem::take(&mut t.asm).with_call_names(toolbox.names());
    }
    let upstream: Upstream = Box::pin(sse_stream::SseStream::new(resp.into_body()));
    let history_header = ex
        .notes
        .history
        .as_deref()
        .and_then(|h| HeaderValue::from_str(h).ok());
    let driver = Driver {
        ex,
        upstream,
        t,
        queue: VecDeque::new(),
        summary: Summary::default(),
        done: false,
        finished: false,
        last: None,
        account,
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
    let mut out = event_stream(Body::from_stream(body));
    if let Some(v) = history_header {
        out.headers_mut().insert("x-toolmend-history", v);
    }
    out.into_response()
}

/// A `text/event-stream` answer of `body`.
fn event_stream(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap_or_else(|_| {
            GatewayError::Internal {
                code: "stream",
                message: "stream setup failed".to_owned(),
            }
            .into_response()
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use toolmend::stream::Thinking;

    use super::{Step, Transformer, VERBATIM_KEYS, Viewed, at_most_once, frame_with};

    /// What a step sends, to compare two transformers: the chunks, or the finish's parts.
    fn sent(step: Step) -> String {
        match step {
            Step::Emit(chunks) => format!("emit {chunks:?}"),
            Step::Forward(chunk) => format!("forward {chunk}"),
            Step::Finish(f) => format!(
                "finish {:?} held={:?} tail={:?} finish={} stripped={} reasoning={:?}",
                f.message, f.held_text, f.tail, f.finish, f.thinking_stripped, f.reasoning
            ),
        }
    }

    /// A chunk as the text path takes it: read without a tree first, a tree only where
    /// the gate or the tap changed it or the chunk is not choice 0's text alone.
    fn by_text_path(t: &mut Transformer, chunk: serde_json::Value) -> Step {
        match t.on_text_chunk(&chunk.to_string()) {
            Some(Ok(Viewed::AsItCame)) => Step::Forward(chunk),
            Some(Ok(Viewed::Taken)) => Step::Emit(vec![]),
            Some(Ok(Viewed::Changed(step))) => t.on_chunk_with(chunk, Some(step)).unwrap(),
            Some(Err(e)) => panic!("{e}"),
            None => t.on_chunk(chunk).unwrap(),
        }
    }

    #[test]
    fn text_chunks_read_without_a_tree_send_what_the_tree_sends() {
        use crate::config::ReasoningPolicy;
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let texts = [
            "<think>The user wants Paris.</think>It is sunny.",
            "Checking. <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>",
            "Use `<think>` in code: ```\n<tool_call>\n``` and then nothing.",
            "Plain text, é and \"quotes\", nothing held.",
        ];
        let gates = [None, Some(Thinking::Strip), Some(Thinking::Pass)];
        let policies = [
            ReasoningPolicy::Keep,
            ReasoningPolicy::Move,
            ReasoningPolicy::Drop,
        ];
        for text in texts {
            for cut in 1..text.len() {
                if !text.is_char_boundary(cut) {
                    continue;
                }
                for gate in gates {
                    for policy in policies {
                        let make = || {
                            Transformer::new(gate, usize::MAX, usize::MAX).with_reasoning(policy)
                        };
                        let (mut tree, mut text_path) = (make(), make());
                        let mut chunks = vec![chunk(
                            json!({"role": "assistant", "content": ""}),
                            json!(null),
                        )];
                        chunks.push(chunk(json!({"content": &text[..cut]}), json!(null)));
                        chunks.push(chunk(json!({"content": &text[cut..]}), json!(null)));
                        chunks.push(chunk(json!({}), json!("stop")));
                        for (i, c) in chunks.into_iter().enumerate() {
                            let a = sent(tree.on_chunk(c.clone()).unwrap());
                            let b = sent(by_text_path(&mut text_path, c));
                            assert_eq!(
                                a, b,
                                "{text:?} cut at {cut}, {gate:?}, {policy:?}, chunk {i}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn only_choice_zeros_text_alone_is_read_without_a_tree() {
        let mut t = Transformer::new(Some(Thinking::Strip), usize::MAX, usize::MAX);
        let first = json!({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]});
        assert!(
            t.on_text_chunk(&first.to_string()).is_none(),
            "the first chunk's members are kept"
        );
        t.on_chunk(first).unwrap();
        let text =
            r#"{"id":"x","choices":[{"index":0,"delta":{"content":"Hi."},"finish_reason":null}]}"#;
        assert!(
            matches!(t.on_text_chunk(text), Some(Ok(Viewed::AsItCame))),
            "sent as it came"
        );
        // A member's name written with an escape is that member.
        let escaped = r#"{"id":"x","choices":[{"index":0,"\u0064elta":{"\u0063ontent":"Hi."}}]}"#;
        assert!(
            matches!(t.on_text_chunk(escaped), Some(Ok(Viewed::AsItCame))),
            "{escaped}"
        );
        for other in [
            r#"{"id":"x","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}"#,
            r#"{"id":"x","choices":[{"index":0,"delta":{"content":"a","tool_calls":null}}]}"#,
            r#"{"id":"x","choices":[{"index":1,"delta":{"content":"a"}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"content":"a"}},{"index":1,"delta":{}}]}"#,
            r#"{"id":"x","choices":[{"index":0,"delta":["a"]}]}"#,
            r#"{"id":"x","choices":[[0,{"content":"a"}]]}"#,
            r#"{"id":"x","error":null,"choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"content":null}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            // Whatever it reads named twice: never forwarded as it came (a client reads
            // the first, the tree the last).
            r#"{"id":"x","choices":[],"choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"content":"a"},"delta":{"content":"b"}}]}"#,
            r#"{"id":"x","choices":[{"index":0,"index":0,"delta":{"content":"a"}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"content":"a","tool_calls":[],"tool_calls":[]}}]}"#,
        ] {
            assert!(t.on_text_chunk(other).is_none(), "{other}");
        }
    }

    #[test]
    fn tool_call_chunks_read_without_a_tree_assemble_what_the_tree_assembles() {
        let chunk = |choice: serde_json::Value| {
            json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [choice]})
        };
        let part = |index: serde_json::Value,
                    id: serde_json::Value,
                    name: serde_json::Value,
                    args: &str| {
            json!({"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": args}})
        };
        let args = r#"{"city": "Z\u00fcrich \"old town\"", "days": 3, "note": "é\n"}"#;
        // Each stream: its chunks after the first (the role), the finish chunk last.
        let mut streams: Vec<Vec<serde_json::Value>> = Vec::new();
        for cut in 1..args.len() {
            if !args.is_char_boundary(cut) {
                continue;
            }
            streams.push(vec![
                chunk(json!({"index": 0, "delta": {"tool_calls": [part(json!(0), json!("call_1"), json!("get_weather"), "")]}})),
                chunk(json!({"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": &args[..cut]}}]}, "finish_reason": null})),
                chunk(json!({"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": &args[cut..]}}]}, "logprobs": null})),
            ]);
        }
        // Parallel calls in one chunk, a name in pieces, and chunks the tree must read.
        streams.push(vec![
            chunk(json!({"delta": {"tool_calls": [
                part(json!(0), json!("a"), json!("get_"), "{\"city\":"),
                part(json!(1), json!("b"), json!("get_weather"), "{}")]}})),
            chunk(json!({"delta": {"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": "\"Oslo\"}"}}]}})),
        ]);
        for odd in [
            json!({"delta": {"role": "assistant", "tool_calls": [part(json!(0), json!("c"), json!("get_weather"), "{}")]}}),
            json!({"delta": {"tool_calls": [part(json!(0), json!("c"), json!("get_weather"), "{}")]}, "logprobs": {"content": []}}),
            json!({"delta": {"tool_calls": [part(json!("0"), json!(7), json!(["n"]), "{}")]}}),
            json!({"delta": {"tool_calls": [{"index": 0, "function": null}, {"index": 0, "function": ["f", "{}"]}]}}),
            json!({"delta": {"tool_calls": [[0, "c", {"name": "f"}]]}}),
            json!({"delta": {"tool_calls": [], "content": null}}),
            json!({"delta": {"tool_calls": null}}),
        ] {
            streams.push(vec![chunk(odd)]);
        }
        let mut with_usage = chunk(
            json!({"delta": {"tool_calls": [part(json!(0), json!("u"), json!("get_weather"), "{}")]}}),
        );
        with_usage["usage"] =
            json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2});
        streams.push(vec![with_usage]);
        for (n, stream) in streams.into_iter().enumerate() {
            let make = || Transformer::new(Some(Thinking::Strip), usize::MAX, usize::MAX);
            let (mut tree, mut view) = (make(), make());
            let mut chunks = vec![chunk(
                json!({"index": 0, "delta": {"role": "assistant", "content": null}}),
            )];
            chunks.extend(stream);
            chunks.push(chunk(
                json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}),
            ));
            for (i, c) in chunks.into_iter().enumerate() {
                let a = sent(tree.on_chunk(c.clone()).unwrap());
                let b = sent(by_text_path(&mut view, c));
                assert_eq!(a, b, "stream {n}, chunk {i}");
            }
        }
    }

    #[test]
    fn only_choice_zeros_tool_call_fragments_alone_are_taken_without_a_tree() {
        let mut t = Transformer::new(None, usize::MAX, usize::MAX);
        t.on_chunk(json!({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
            .unwrap();
        for taken in [
            r#"{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]},"finish_reason":null,"logprobs":null}],"usage":null}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[]}}]}"#,
        ] {
            assert!(
                matches!(t.on_text_chunk(taken), Some(Ok(Viewed::Taken))),
                "{taken}"
            );
        }
        for tree in [
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0}]},"logprobs":{"content":[]}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0}]}}],"usage":{"total_tokens":1}}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0}],"role":"assistant"}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0}],"content":"a"}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0,"index":1}]}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0,"function":"f"}]}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0}]}},{"index":1,"delta":{}}]}"#,
            r#"{"id":"x","choices":[{"index":1,"delta":{"tool_calls":[{"index":0}]}}]}"#,
            // Named twice at a level the view reads, or an object where it reads none.
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","name":"g"}}]}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","id":"b"}]}}]}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":[{"index":0}]}}],"usage":null,"usage":null}"#,
            r#"{"id":"x","choices":{"0":{"delta":{"tool_calls":[{"index":0}]}}}}"#,
            r#"{"id":"x","choices":[{"delta":{"tool_calls":{"0":{"index":0}}}}]}"#,
            r#"[{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}]"#,
        ] {
            assert!(t.on_text_chunk(tree).is_none(), "{tree}");
        }
    }

    use proptest::prelude::Strategy as _;

    /// A member that may be absent: `None` leaves it out.
    fn member(
        values: Vec<Option<serde_json::Value>>,
    ) -> impl proptest::strategy::Strategy<Value = Option<serde_json::Value>> {
        proptest::sample::select(values)
    }

    /// An object of the members given (an absent one left out).
    fn object(members: &[(&str, Option<serde_json::Value>)]) -> serde_json::Value {
        let mut o = serde_json::Map::new();
        for (k, v) in members {
            if let Some(v) = v {
                o.insert((*k).to_owned(), v.clone());
            }
        }
        serde_json::Value::Object(o)
    }

    /// Tool-call fragments and text deltas in every shape a chunk's levels can take: the
    /// expected ones, `null`, values of another type, arrays where objects go, other
    /// members beside them.
    fn odd_choice() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        let function = (
            member(vec![
                None,
                Some(json!("get_weather")),
                Some(json!(null)),
                Some(json!(3)),
            ]),
            member(vec![
                None,
                Some(json!("{\"city\":")),
                Some(json!("\"Oslo\"}")),
                Some(json!("")),
                Some(json!(null)),
                Some(json!([])),
            ]),
            member(vec![None, Some(json!("x"))]),
        )
            .prop_map(|(name, arguments, other)| {
                object(&[("name", name), ("arguments", arguments), ("other", other)])
            });
        let fragment = proptest::prop_oneof![
            4 => (
                member(vec![None, Some(json!(0)), Some(json!(1)), Some(json!(-1)), Some(json!("0"))]),
                member(vec![None, Some(json!("call_1")), Some(json!(7)), Some(json!(null))]),
                proptest::prop_oneof![
                    function.prop_map(Some),
                    proptest::strategy::Just(None),
                    proptest::strategy::Just(Some(json!(null))),
                    proptest::strategy::Just(Some(json!(["f", "{}"]))),
                ],
                member(vec![None, Some(json!("function"))]),
            )
                .prop_map(|(index, id, function, kind)| {
                    object(&[("index", index), ("id", id), ("function", function), ("type", kind)])
                }),
            1 => proptest::sample::select(vec![json!([0, "c"]), json!(0), json!(null)]),
        ];
        let tool_calls = proptest::prop_oneof![
            3 => proptest::collection::vec(fragment, 0..3).prop_map(|v| Some(json!(v))),
            2 => proptest::strategy::Just(None),
            1 => proptest::sample::select(vec![Some(json!(null)), Some(json!("x")), Some(json!({}))]),
        ];
        let delta = proptest::prop_oneof![
            6 => (
                member(vec![None, Some(json!(null)), Some(json!("Hi. ")), Some(json!("")), Some(json!(5))]),
                tool_calls,
                member(vec![None, Some(json!("assistant"))]),
            )
                .prop_map(|(content, tool_calls, role)| {
                    object(&[("content", content), ("tool_calls", tool_calls), ("role", role)])
                }),
            1 => proptest::sample::select(vec![json!(["a"]), json!(null), json!("a")]),
        ];
        let choice = (
            member(vec![
                None,
                Some(json!(0)),
                Some(json!(1)),
                Some(json!(null)),
                Some(json!("0")),
            ]),
            delta.prop_map(Some),
            member(vec![None, Some(json!(null)), Some(json!("stop"))]),
            member(vec![None, Some(json!(null)), Some(json!({"content": []}))]),
        )
            .prop_map(|(index, delta, finish, logprobs)| {
                object(&[
                    ("index", index),
                    ("delta", delta),
                    ("finish_reason", finish),
                    ("logprobs", logprobs),
                ])
            });
        proptest::prop_oneof![
            8 => choice,
            1 => proptest::sample::select(vec![json!([0, {"content": "a"}]), json!(null)]),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// The one-pass view sends what the tree sends, chunk after chunk, whatever shape
        /// each level of the chunk has.
        #[test]
        fn the_one_pass_view_sends_what_the_tree_sends(
            chunks in proptest::collection::vec(
                (
                    proptest::collection::vec(odd_choice(), 0..3),
                    member(vec![None, Some(json!(null)), Some(json!({"total_tokens": 2}))]),
                    member(vec![None, Some(json!(null))]),
                ),
                1..5,
            )
        ) {
            let make = || Transformer::new(Some(Thinking::Strip), usize::MAX, usize::MAX);
            let (mut tree, mut view) = (make(), make());
            let first = json!({"id": "x", "object": "chat.completion.chunk", "created": 1,
                "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]});
            tree.on_chunk(first.clone()).unwrap();
            view.on_chunk(first).unwrap();
            for (i, (choices, usage, error)) in chunks.into_iter().enumerate() {
                let mut c = object(&[("usage", usage), ("error", error)]);
                c["id"] = json!("x");
                c["choices"] = json!(choices);
                let a = tree.on_chunk(c.clone()).map(sent).map_err(|e| e.to_string());
                let b = match view.on_text_chunk(&c.to_string()) {
                    Some(Ok(Viewed::AsItCame)) => Ok(Step::Forward(c.clone())),
                    Some(Ok(Viewed::Taken)) => Ok(Step::Emit(vec![])),
                    Some(Ok(Viewed::Changed(step))) => view.on_chunk_with(c.clone(), Some(step)),
                    Some(Err(e)) => Err(e),
                    None => view.on_chunk(c.clone()),
                }
                .map(sent)
                .map_err(|e| e.to_string());
                proptest::prop_assert_eq!(a, b, "chunk {}: {}", i, c);
            }
        }
    }

    proptest::proptest! {
        /// The one-pass check says what counting each name's occurrences says.
        #[test]
        fn the_duplicate_name_check_counts_as_a_search_would(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(VERBATIM_KEYS.to_vec()).prop_map(str::to_owned),
                    "[\"a-z:{}\\[\\], ]{0,12}",
                ],
                0..12,
            )
        ) {
            let data = parts.concat();
            let counted = VERBATIM_KEYS.iter().all(|k| data.matches(k).count() <= 1);
            proptest::prop_assert_eq!(at_most_once(&data, VERBATIM_KEYS), counted, "{}", data);
        }
    }

    #[test]
    fn a_chunk_naming_a_key_twice_is_never_forwarded_verbatim() {
        let one = r#"{"choices":[{"index":0,"delta":{"content":"a \"content\" b"}}]}"#;
        assert!(at_most_once(one, VERBATIM_KEYS));
        let reasoning = r#"{"choices":[{"delta":{"reasoning_content":"x","content":"y"}}]}"#;
        assert!(
            at_most_once(reasoning, VERBATIM_KEYS),
            "two names, each once"
        );
        for twice in [
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[],"choices":[{"delta":{}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":null},"delta":{"content":"x"}}]}"#,
        ] {
            assert!(!at_most_once(twice, VERBATIM_KEYS), "{twice}");
        }
    }

    #[test]
    fn the_last_chunk_gains_its_account_as_its_last_member() {
        let frame = |v: serde_json::Value| {
            String::from_utf8(frame_with(&v, "toolmend", &json!({"calls": []})).to_vec()).unwrap()
        };
        assert_eq!(
            frame(json!({"id": "x", "choices": []})),
            "data: {\"id\":\"x\",\"choices\":[],\"toolmend\":{\"calls\":[]}}\n\n"
        );
        assert_eq!(frame(json!({})), "data: {\"toolmend\":{\"calls\":[]}}\n\n");
    }

    #[test]
    fn only_a_chunk_left_as_it_came_is_forwarded_verbatim() {
        let chunk = |delta: serde_json::Value| {
            json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        };
        let mut t = Transformer::new(Some(Thinking::Strip), usize::MAX, usize::MAX);
        let plain = chunk(json!({"content": "The weather is fine."}));
        match t.on_chunk(plain.clone()).unwrap() {
            Step::Forward(c) => assert_eq!(c, plain),
            _ => panic!("plain text released whole is forwarded"),
        }
        // `tool_calls: null` (some servers send it with every text delta) is taken out too.
        let null_calls = chunk(json!({"content": "More.", "tool_calls": null}));
        assert!(matches!(t.on_chunk(null_calls).unwrap(), Step::Emit(_)));
        // A call's fragment is taken out (buffered): the chunk changed.
        let call = chunk(
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{"}}]}),
        );
        assert!(matches!(t.on_chunk(call).unwrap(), Step::Emit(_)));
        // A marker the gate holds back: the content changed (or was removed).
        let mut t = Transformer::new(Some(Thinking::Strip), usize::MAX, usize::MAX);
        let held = chunk(json!({"content": "ok <tool_call>{\"name\""}));
        assert!(matches!(t.on_chunk(held).unwrap(), Step::Emit(_)));
        // Thinking stripped by the gate: changed.
        let mut t = Transformer::new(Some(Thinking::Strip), usize::MAX, usize::MAX);
        let think = chunk(json!({"content": "<think>hmm</think>Hi"}));
        assert!(matches!(t.on_chunk(think).unwrap(), Step::Emit(_)));
    }

    #[test]
    fn usage_in_the_finishing_chunk_survives() {
        // Some servers send `usage` with `finish_reason` rather than in a chunk of its own.
        let mut t = Transformer::new(Some(Thinking::Strip), usize::MAX, usize::MAX);
        let first = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null}]});
        // Released whole by the gate: the chunk as it came (its own bytes go out).
        assert!(matches!(t.on_chunk(first).unwrap(), Step::Forward(_)));
        let last = json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}});
        let Step::Finish(f) = t.on_chunk(last).unwrap() else {
            panic!("no finish")
        };
        let chunks = t.finish_chunks(None, &f.message, f.held_text, f.tail, f.finish, "");
        assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 6);
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "stop"
        );
    }

    /// This thread's time on a CPU so far (the core's test helper): time spent waiting
    /// for a CPU, as on a loaded machine, is not in it.
    fn cpu_time() -> std::time::Duration {
        std::time::Duration::from_nanos(crate::test_cpu::cpu_ns())
    }

    /// Feeds `n` deltas (content and tool-call fragments, alternately) through the
    /// assembler and finishes, `times` times; the CPU time per delta, in nanoseconds.
    /// Long deltas (248 bytes of prose, 80 of arguments): what is held grows fast, so a
    /// rescan of it per delta outweighs the fixed cost of a delta well before 20,000.
    fn per_delta(n: usize, times: usize) -> f64 {
        let prose = "some words of prose, then more ".repeat(8);
        let args = "\"k\": 1, ".repeat(10);
        let chunks: Vec<_> = (0..n)
            .map(|i| {
                let delta = if i % 2 == 0 {
                    json!({"content": prose})
                } else {
                    json!({"tool_calls": [{"index": i % 4, "id": if i < 4 { json!(format!("c{i}")) } else { json!(null) },
                        "function": {"arguments": args}}]})
                };
                json!({"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
            })
            .collect();
        let last = json!({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
        let streams: Vec<_> = (0..times).map(|_| chunks.clone()).collect();
        // One reading before and one after: the scheduler's count is exact to a tick.
        let started = cpu_time();
        for chunks in streams {
            let mut t = Transformer::new(Some(Thinking::Strip), usize::MAX, usize::MAX);
            for c in chunks {
                let _ = t.on_chunk(c).unwrap();
            }
            let Step::Finish(f) = t.on_chunk(last.clone()).unwrap() else {
                panic!("no finish")
            };
            let out = t.finish_chunks(None, &f.message, f.held_text, f.tail, f.finish, "");
            assert!(!out.is_empty());
        }
        let spent = cpu_time() - started;
        spent.as_nanos() as f64 / (n * times) as f64
    }

    /// The content a client receives for `chunks` (choice 0, no mending).
    fn streamed_text(gate: bool, chunks: &[serde_json::Value]) -> String {
        let mut t = Transformer::new(gate.then_some(Thinking::Strip), usize::MAX, usize::MAX);
        let mut out = Vec::new();
        for c in chunks {
            match t.on_chunk(c.clone()).unwrap() {
                Step::Emit(v) => out.extend(v),
                Step::Forward(chunk) => {
                    // Forwarded only as it came.
                    assert_eq!(&chunk, c);
                    out.push(chunk);
                }
                Step::Finish(f) => {
                    out.extend(t.finish_chunks(
                        None,
                        &f.message,
                        f.held_text,
                        f.tail,
                        f.finish,
                        "",
                    ));
                }
            }
        }
        out.iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect()
    }

    #[test]
    fn held_choices_are_bounded_in_number_and_in_bytes_together() {
        let chunk = |index: u64, text: &str| {
            json!({"id": "x", "choices": [{"index": index, "delta": {"content": text},
                "finish_reason": null}]})
        };
        // 128 choices after the first are held; a 129th is refused, not held.
        let mut t = Transformer::new(None, 1 << 20, 8).holding_other_choices();
        for i in 1..=128 {
            let (done, silent) = t.take_others(&mut chunk(i, "a")).unwrap();
            assert!(done.is_empty() && silent);
        }
        let err = t.take_others(&mut chunk(129, "a")).err().unwrap();
        assert!(err.contains("more than 128 choices"), "{err}");
        // Ten choices of 60 bytes each under a 500-byte budget: the budget is shared.
        let mut t = Transformer::new(None, 500, 8).holding_other_choices();
        let text = "x".repeat(60);
        let results: Vec<_> = (1..=10)
            .map(|i| t.take_others(&mut chunk(i, &text)))
            .collect();
        assert!(results[..8].iter().all(Result::is_ok));
        assert!(results[8].as_ref().err().unwrap().contains("(500 bytes)"));
        // Choice 0 stays in the chunk; a finished choice comes back whole.
        let mut t = Transformer::new(None, 1 << 20, 8).holding_other_choices();
        let mut c = json!({"id": "x", "choices": [
            {"index": 0, "delta": {"content": "zero"}, "finish_reason": null},
            {"index": 1, "delta": {"content": "one"}, "finish_reason": "stop"}]});
        let (done, silent) = t.take_others(&mut c).unwrap();
        assert!(!silent);
        assert_eq!(c["choices"].as_array().unwrap().len(), 1);
        assert_eq!(done[0].index, 1);
        assert_eq!(done[0].message.text().as_deref(), Some("one"));
        assert_eq!(t.others_pending(), None);
        // A choice that began with its role alone holds nothing: not pending; with text, it is.
        let mut role = json!({"id": "x", "choices": [
            {"index": 2, "delta": {"role": "assistant"}, "finish_reason": null}]});
        let (_, silent) = t.take_others(&mut role).unwrap();
        assert!(!silent, "the role delta still goes out");
        assert_eq!(t.others_pending(), None);
        t.take_others(&mut chunk(2, "held")).unwrap();
        assert_eq!(t.others_pending(), Some(2));
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
    fn the_assembler_is_linear_in_the_deltas() {
        // The same number of deltas (20,000) as 80 streams of 250 and as one stream of
        // 20,000: linear work costs the same per delta in both; quadratic work (a rescan of
        // everything held per delta) costs 80 times as much per delta in the long stream.
        // CPU time: what a loaded machine adds (waiting for a CPU) is not in it. The margin
        // (10x) is for caches (the long stream's buffers do not fit in them), far below
        // the 80x of quadratic work. Measured once, never retried.
        let short = per_delta(250, 80);
        let long = per_delta(20_000, 1);
        let ratio = long / short.max(1.0);
        assert!(
            ratio < 10.0,
            "a delta of a 20,000-delta stream cost {ratio:.1}x one of a 250-delta stream \
             ({long:.0} ns vs {short:.0} ns): not linear"
        );
    }

    #[test]
    fn a_new_id_on_the_same_index_starts_its_own_call() {
        // Issue 11: ids A then B on index 0 reached the client as one call B.
        let mut t = Transformer::new(None, usize::MAX, usize::MAX);
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
            let _ = t.on_chunk(c).unwrap();
        }
        let last = json!({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
        let Step::Finish(f) = t.on_chunk(last).unwrap() else {
            panic!("no finish")
        };
        let calls = f.message.tool_calls.unwrap();
        let got: Vec<(Option<&str>, &str)> = calls
            .iter()
            .map(|c| (c.id.as_deref(), c.arguments.as_str()))
            .collect();
        assert_eq!(got, [(Some("A"), "{\"a\": 1}"), (Some("B"), "{\"b\": 2}")]);
    }
}
