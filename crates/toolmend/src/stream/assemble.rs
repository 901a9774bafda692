//! The assembler: neutral stream deltas in ([`Delta`]: text, reasoning, a call's start,
//! an argument fragment, a call's end, the finish), the assembled message out. Every
//! API's stream events convert into these; OpenAI's chat-completion `delta` objects by
//! [`chat_deltas`] (`content` text pieces, `tool_calls` fragments `{index, id, type,
//! function: {name, arguments}}` whose names and arguments arrive in pieces and are
//! joined, and, on the choice beside it, `finish_reason`).
//!
//! Which call a fragment feeds:
//! - With an `index`: the call that index feeds. An index not seen before starts a new
//!   call; so does an `id` that differs from the id the index's call already has (some
//!   servers reuse index 0 for every call: nothing is merged away).
//! - Without an `index` (OpenAI always sends one; some compatible servers do not): an
//!   `id` that differs from the current call's starts the call after the last one;
//!   otherwise (no id, or the same one) the fragment feeds the current call, the one the
//!   previous fragment fed. With no call yet, it starts one.
//!
//! An empty `id` counts as none. Content is kept, passed or gated ([`ContentMode`]).
//! Bounded: past `max_bytes` retained (call names and arguments, and the content kept or
//! held) or `max_calls` calls, [`StreamError`]. Linear in the deltas.

use std::collections::HashMap;

use serde_json::Value;

use super::gate::{ContentGate, Thinking};
use crate::conversation::{AssistantMessage, Content, ToolCall};

/// What the assembler does with content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentMode {
    /// Kept whole in the message (a client putting the answer back together); each piece
    /// is also returned as released.
    Keep,
    /// Released as it comes, not kept (a proxy with nothing to hold back).
    Pass,
    /// Through the [`ContentGate`]: released up to where a call written into the text may
    /// begin; the held rest is the message's content.
    Gate(Thinking),
}

/// The assembler's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssembleOptions {
    /// Bytes retained at most (call names and arguments, content kept or held).
    pub max_bytes: usize,
    /// Calls at most.
    pub max_calls: usize,
    /// What becomes of content.
    pub content: ContentMode,
}

impl Default for AssembleOptions {
    /// 32 MiB, 100,000 calls, content kept.
    fn default() -> Self {
        AssembleOptions {
            max_bytes: 32 << 20,
            max_calls: 100_000,
            content: ContentMode::Keep,
        }
    }
}

/// A stream past the assembler's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// More than `limit` bytes retained.
    #[error("the stream held more than {limit} bytes of content and tool calls")]
    TooLarge {
        /// `max_bytes`.
        limit: usize,
    },
    /// More than `limit` calls.
    #[error("the stream held more than {limit} tool calls")]
    TooManyCalls {
        /// `max_calls`.
        limit: usize,
    },
}

/// One tool-call fragment of a delta.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallDelta<'a> {
    /// `index`.
    pub index: Option<u64>,
    /// `id` (empty counts as none).
    pub id: Option<&'a str>,
    /// A piece of `function.name`.
    pub name: Option<&'a str>,
    /// A piece of `function.arguments`.
    pub arguments: Option<&'a str>,
}

impl<'a> CallDelta<'a> {
    /// The fragment in a `tool_calls` entry (fields of the wrong type count as absent).
    pub fn from_value(part: &'a Value) -> Self {
        CallDelta {
            index: part.get("index").and_then(Value::as_u64),
            id: part.get("id").and_then(Value::as_str),
            name: part.pointer("/function/name").and_then(Value::as_str),
            arguments: part.pointer("/function/arguments").and_then(Value::as_str),
        }
    }
}

/// One piece of a streamed answer, whatever API streamed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta<'a> {
    /// A piece of the answer's text.
    Text(&'a str),
    /// A piece of its reasoning (a thinking block the API streams apart).
    Reasoning(&'a str),
    /// A fragment of a tool call: its start (an id, a name or a name's piece), an
    /// argument fragment, or both (OpenAI's fragments may carry any of them).
    Call(CallDelta<'a>),
    /// The call at `index` (the current one without) is complete: a later fragment
    /// without an index starts the next call.
    CallEnd {
        /// The call's stream index.
        index: Option<u64>,
    },
    /// The answer ended; `cut_off` when the model hit its token limit.
    Finish {
        /// Stopped at the token limit.
        cut_off: bool,
    },
}

/// The neutral deltas of one OpenAI chat-completion `delta` object: its `tool_calls`
/// fragments, then its `content`.
pub fn chat_deltas(delta: &Value) -> impl Iterator<Item = Delta<'_>> {
    let calls = delta
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|part| Delta::Call(CallDelta::from_value(part)));
    let text = delta
        .get("content")
        .and_then(Value::as_str)
        .map(Delta::Text);
    calls.chain(text)
}

/// The assembled message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assembled {
    /// The message: its calls in the order they began; its content by the mode (kept:
    /// the whole text, empty as none; gated: the whole text when the gate held a possible
    /// call (what it released, then what it held: the plan reads the text as the model
    /// wrote it, so a call after prose is judged as the JSON path judges it), else none;
    /// passed: none).
    pub message: AssistantMessage,
    /// Gated: the content already released to the client (a prefix of the message's
    /// text when the gate held something). [`unreleased`] gives what is left to send.
    pub released: String,
    /// The `finish_reason` seen, if any.
    pub finish_reason: Option<String>,
    /// Gated content kept back at the end (no marker after all): release it now.
    pub tail: String,
    /// The gate dropped a thinking block.
    pub thinking_stripped: bool,
    /// The reasoning streamed apart ([`Delta::Reasoning`]), joined.
    pub reasoning: String,
    /// The answer was cut off at the token limit ([`Delta::Finish`]).
    pub cut_off: bool,
}

#[derive(Debug, Default)]
struct Partial {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Joins one choice's deltas.
#[derive(Debug)]
pub struct Assembler {
    opts: AssembleOptions,
    calls: Vec<Partial>,
    /// `index` -> the call it currently feeds.
    slot: HashMap<u64, usize>,
    /// The call the last fragment fed.
    current: Option<usize>,
    call_bytes: usize,
    content: String,
    /// Gated: what the gate released so far, for the plan to read the whole text; kept
    /// up to `max_bytes` (past it, dropped: the plan then reads the held text alone).
    released: String,
    released_overflow: bool,
    gate: ContentGate,
    finish_reason: Option<String>,
    reasoning: String,
    cut_off: bool,
}

impl Default for Assembler {
    fn default() -> Self {
        Assembler::new(AssembleOptions::default())
    }
}

impl Assembler {
    /// An assembler that has seen nothing.
    pub fn new(opts: AssembleOptions) -> Self {
        let thinking = match opts.content {
            ContentMode::Gate(t) => t,
            _ => Thinking::Pass,
        };
        Assembler {
            opts,
            calls: Vec::new(),
            slot: HashMap::new(),
            current: None,
            call_bytes: 0,
            content: String::new(),
            released: String::new(),
            released_overflow: false,
            gate: ContentGate::new(thinking),
            finish_reason: None,
            reasoning: String::new(),
            cut_off: false,
        }
    }

    /// A leading pythonic call naming one of `names` is held by the gate too
    /// ([`ContentGate::with_call_names`]).
    #[must_use]
    pub fn with_call_names<'n>(mut self, names: impl IntoIterator<Item = &'n str>) -> Self {
        self.gate = self.gate.with_call_names(names);
        self
    }

    /// Takes one neutral delta. Returns the text that may reach the client now (`None`
    /// for a delta that carries no text).
    ///
    /// # Errors
    ///
    /// The stream went past a bound.
    pub fn push(&mut self, delta: Delta<'_>) -> Result<Option<String>, StreamError> {
        match delta {
            Delta::Text(text) => return self.push_content(text).map(Some),
            Delta::Reasoning(text) => {
                self.reasoning.push_str(text);
                self.check()?;
            }
            Delta::Call(part) => self.push_call(part)?,
            Delta::CallEnd { index } => {
                let ended = match index {
                    Some(i) => self.slot.get(&i).copied(),
                    None => self.current,
                };
                if ended.is_some() && ended == self.current {
                    self.current = None;
                }
            }
            Delta::Finish { cut_off } => self.cut_off |= cut_off,
        }
        Ok(None)
    }

    /// Takes an OpenAI chat-completion `delta` object ([`chat_deltas`]). Returns the
    /// content that may reach the client now (`None` when the delta carried none).
    ///
    /// # Errors
    ///
    /// The stream went past a bound.
    pub fn push_delta(&mut self, delta: &Value) -> Result<Option<String>, StreamError> {
        let mut out = None;
        for d in chat_deltas(delta) {
            if let Some(text) = self.push(d)? {
                out = Some(text);
            }
        }
        Ok(out)
    }

    /// Takes a content piece; returns what may reach the client now.
    ///
    /// # Errors
    ///
    /// Past `max_bytes` retained.
    pub fn push_content(&mut self, text: &str) -> Result<String, StreamError> {
        let out = match self.opts.content {
            ContentMode::Keep => {
                self.content.push_str(text);
                text.to_owned()
            }
            ContentMode::Pass => text.to_owned(),
            ContentMode::Gate(_) => {
                let out = self.gate.push(text);
                if self.released.len() + out.len() > self.opts.max_bytes {
                    self.released_overflow = true;
                    self.released = String::new();
                } else if !self.released_overflow {
                    self.released.push_str(&out);
                }
                out
            }
        };
        self.check()?;
        Ok(out)
    }

    /// Takes a tool-call fragment (see the module docs for which call it feeds).
    ///
    /// # Errors
    ///
    /// Past `max_bytes` retained or `max_calls` calls.
    pub fn push_call(&mut self, part: CallDelta<'_>) -> Result<(), StreamError> {
        let id = part.id.filter(|s| !s.is_empty());
        let feeds = match part.index {
            Some(index) => self.slot.get(&index).copied(),
            None => self.current,
        };
        let at = match feeds {
            Some(at) if !self.is_other_id(at, id) => at,
            _ => {
                if self.calls.len() >= self.opts.max_calls {
                    return Err(StreamError::TooManyCalls {
                        limit: self.opts.max_calls,
                    });
                }
                self.calls.push(Partial::default());
                let at = self.calls.len() - 1;
                if let Some(index) = part.index {
                    self.slot.insert(index, at);
                }
                at
            }
        };
        self.current = Some(at);
        let call = &mut self.calls[at];
        if let Some(id) = id {
            call.id = Some(id.to_owned());
        }
        if let Some(name) = part.name {
            call.name.push_str(name);
            self.call_bytes += name.len();
        }
        if let Some(args) = part.arguments {
            call.arguments.push_str(args);
            self.call_bytes += args.len();
        }
        self.check()
    }

    /// The gate keeps the reasoning it strips for [`Self::take_reasoning`]
    /// ([`super::ContentGate::collecting_reasoning`]).
    #[must_use]
    pub fn collecting_reasoning(mut self) -> Self {
        self.gate = self.gate.collecting_reasoning();
        self
    }

    /// The reasoning the gate stripped since the last call
    /// ([`super::ContentGate::take_reasoning`]).
    pub fn take_reasoning(&mut self) -> String {
        self.gate.take_reasoning()
    }

    /// At the end of the stream, before [`Self::finish`]: the reasoning the gate stripped,
    /// a block never closed included ([`super::ContentGate::flush_reasoning`]).
    pub fn flush_reasoning(&mut self) -> String {
        self.gate.flush_reasoning()
    }

    /// Records the choice's `finish_reason` (`length`: cut off).
    pub fn set_finish_reason(&mut self, reason: &str) {
        self.cut_off |= reason == "length";
        self.finish_reason = Some(reason.to_owned());
    }

    /// Bytes retained now (what `max_bytes` bounds). The released text kept for the plan
    /// is bounded by `max_bytes` on its own and not counted: a long answer never fails.
    pub fn retained(&self) -> usize {
        self.call_bytes + self.content.len() + self.reasoning.len() + self.gate.pending()
    }

    /// True when calls, or content the gate holds or keeps back, wait for the end.
    pub fn holds_anything(&self) -> bool {
        !self.calls.is_empty() || self.gate.holds_anything()
    }

    /// The calls begun so far.
    pub fn calls_begun(&self) -> usize {
        self.calls.len()
    }

    /// The assembled message; the assembler starts over.
    pub fn finish(&mut self) -> Assembled {
        let end = self.gate.finish();
        let calls: Vec<ToolCall> = std::mem::take(&mut self.calls)
            .into_iter()
            .map(|p| ToolCall {
                id: p.id,
                name: p.name,
                arguments: p.arguments,
                extra: serde_json::Map::new(),
            })
            .collect();
        let released = std::mem::take(&mut self.released);
        let content = match self.opts.content {
            ContentMode::Keep => Some(std::mem::take(&mut self.content)).filter(|c| !c.is_empty()),
            ContentMode::Pass => None,
            ContentMode::Gate(_) => end.held.map(|held| released.clone() + &held),
        };
        let out = Assembled {
            message: AssistantMessage {
                content: Some(content.map(Content::Text)),
                tool_calls: (!calls.is_empty()).then_some(calls),
                ..AssistantMessage::default()
            },
            finish_reason: self.finish_reason.take(),
            released,
            tail: end.tail,
            thinking_stripped: end.thinking_stripped,
            reasoning: std::mem::take(&mut self.reasoning),
            cut_off: std::mem::take(&mut self.cut_off),
        };
        let gate = std::mem::take(&mut self.gate);
        *self = Assembler::new(self.opts);
        self.gate = gate;
        out
    }

    /// True when `id` names another call than the one at `at` has.
    fn is_other_id(&self, at: usize, id: Option<&str>) -> bool {
        matches!((&self.calls[at].id, id), (Some(had), Some(new)) if had != new)
    }

    fn check(&self) -> Result<(), StreamError> {
        if self.retained() > self.opts.max_bytes {
            return Err(StreamError::TooLarge {
                limit: self.opts.max_bytes,
            });
        }
        Ok(())
    }
}

/// What of `planned` (the content a plan of the whole streamed text left: the prose before
/// its calls, or the text unchanged) is still to send when `released` already reached the
/// client. The plan trims its prose, so released whitespace, or a released part the trim
/// cut off, counts as sent. A text that does not continue what was released (a re-ask's
/// answer) is sent whole.
pub fn unreleased<'a>(planned: &'a str, released: &str) -> &'a str {
    let sent = released.trim_start();
    if sent.is_empty() {
        return planned;
    }
    // An untouched text keeps the leading whitespace the release already sent.
    let from = planned.trim_start();
    if let Some(rest) = from.strip_prefix(sent) {
        return rest;
    }
    if sent.starts_with(from) {
        return "";
    }
    planned
}
