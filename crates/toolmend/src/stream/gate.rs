//! The content gate: delta by delta, which streamed content may reach the client now.
//!
//! A model that writes its call into the text (`<tool_call>{…}`, `[TOOL_CALLS][…]`, a
//! leading `{` …) must not have that text reach the client as prose: the plan turns it
//! into a real call at the end. So the gate releases content up to where a call may
//! begin and holds everything from there on; the caller plans the held text when the
//! stream ends and releases whatever of it was no call.
//!
//! - A call marker ([`markers::CALL_MARKERS`]) anywhere holds the rest.
//! - At the start of the text (after whitespace, or right after a thinking block) a
//!   leading marker ([`markers::LEADING_MARKERS`]: `{`, `[`, a fence) or a pythonic call
//!   `name(` holds the rest, the leading whitespace with it.
//! - A tail that may still grow into a marker or a thinking tag (`<tool`, `[TOOL_`) is
//!   kept back until the next delta says; at the end it is released.
//! - Thinking ([`markers::THINKING_TAGS`], any ASCII case): with [`Thinking::Pass`] it is
//!   text like any other; with [`Thinking::Strip`] a block is withheld and dropped (an
//!   unclosed one to the end), as the plan's `strip_thinking` drops it. A bare closing tag
//!   cannot take back what was already released: the tag alone is dropped.
//!
//! Nothing is lost or repeated: released + [`GateEnd::tail`] + [`GateEnd::held`] is the
//! content (less the thinking blocks stripped). Linear in the content: each delta is
//! scanned once, plus a kept-back tail shorter than the longest marker; the gate keeps
//! only what it has not released.

use crate::repair::markers::{self, LEADING_MARKERS, Leading};

/// What the gate does with a thinking block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Thinking {
    /// Released like any text; a leading marker right after it counts as at the start.
    #[default]
    Pass,
    /// Withheld and dropped, never released.
    Strip,
}

/// What the gate holds at the end of the stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateEnd {
    /// The text held from a marker on (a possible call): the plan reads it.
    pub held: Option<String>,
    /// The tail kept back (it did not grow into a marker): release it now.
    pub tail: String,
    /// A thinking block was dropped ([`Thinking::Strip`]).
    pub thinking_stripped: bool,
}

/// Decides, delta by delta, which content can be released now.
#[derive(Debug, Clone)]
pub struct ContentGate {
    thinking: Thinking,
    /// Not released yet: a kept-back tail, leading whitespace, a thinking block being
    /// withheld, or (once `held`) everything from a marker on.
    buf: String,
    held: bool,
    /// Leading markers count (nothing but whitespace, or a thinking block, before).
    at_start: bool,
    /// Leading whitespace bytes of `buf` already counted (at the start).
    ws: usize,
    /// Inside a withheld thinking block: `buf` is the block so far.
    in_thinking: bool,
    /// Bytes of that block searched for its closing tag already.
    scanned: usize,
    stripped: bool,
}

impl Default for ContentGate {
    fn default() -> Self {
        ContentGate::new(Thinking::Pass)
    }
}

/// The longest thinking tag: a closing tag split across deltas is searched for again
/// this far back.
fn longest_tag() -> usize {
    markers::THINKING_TAGS
        .iter()
        .map(|(o, c)| o.len().max(c.len()))
        .max()
        .unwrap_or(0)
}

impl ContentGate {
    /// A gate that has seen nothing.
    pub fn new(thinking: Thinking) -> Self {
        ContentGate {
            thinking,
            buf: String::new(),
            held: false,
            at_start: true,
            ws: 0,
            in_thinking: false,
            scanned: 0,
            stripped: false,
        }
    }

    /// Bytes the gate keeps (not released): what a byte limit must count.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// True when something is kept back or held.
    pub fn holds_anything(&self) -> bool {
        !self.buf.is_empty()
    }

    /// True once a marker was found: everything from it on is held.
    pub fn is_holding(&self) -> bool {
        self.held
    }

    /// Takes a content delta; returns the text that may go to the client now.
    pub fn push(&mut self, delta: &str) -> String {
        self.buf.push_str(delta);
        let mut out = String::new();
        loop {
            if self.held {
                return out;
            }
            if self.in_thinking {
                let from = self.scanned.saturating_sub(longest_tag());
                match markers::find_thinking(&self.buf, from, true) {
                    Some(t) => {
                        self.drain(t.at + t.len);
                        self.in_thinking = false;
                        self.stripped = true;
                        self.at_start = true;
                        continue;
                    }
                    None => {
                        self.scanned = self.buf.len();
                        return out;
                    }
                }
            }
            if self.at_start {
                if let Some((i, _)) = self.buf[self.ws..]
                    .char_indices()
                    .find(|(_, c)| !c.is_whitespace())
                {
                    self.ws += i;
                } else {
                    self.ws = self.buf.len();
                    return out; // only whitespace so far: held, so none of a call goes out
                }
                let rest = &self.buf[self.ws..];
                let tag = markers::thinking_tag_at(rest, 0).is_some()
                    || markers::call_marker_at(rest, 0).is_some();
                if !tag {
                    // `[` may still become `[THINK]` or `[TOOL_CALLS]`: tags decide first.
                    if markers::may_start_marker(rest) {
                        return out;
                    }
                    if LEADING_MARKERS.iter().any(|m| rest.starts_with(m))
                        || markers::leading_call(rest) == Leading::Call
                    {
                        self.held = true;
                        return out;
                    }
                    if LEADING_MARKERS.iter().any(|m| m.starts_with(rest))
                        || markers::leading_call(rest) == Leading::Maybe
                    {
                        return out; // may still become a leading marker: wait for more
                    }
                }
                self.at_start = false;
            }
            let b = self.buf.as_bytes();
            let found = (0..b.len())
                .filter(|&i| matches!(b[i], b'<' | b'['))
                .find_map(|i| {
                    if markers::call_marker_at(&self.buf, i).is_some() {
                        Some((i, None))
                    } else {
                        markers::thinking_tag_at(&self.buf, i).map(|t| (i, Some(t)))
                    }
                });
            match found {
                Some((i, None)) => {
                    out.push_str(&self.buf[..i]);
                    self.drain(i);
                    self.held = true;
                    return out;
                }
                Some((i, Some(tag))) => match (self.thinking, tag.closing) {
                    (Thinking::Strip, false) => {
                        out.push_str(&self.buf[..i]);
                        self.drain(i);
                        self.in_thinking = true;
                        self.scanned = tag.len;
                    }
                    (Thinking::Strip, true) => {
                        out.push_str(&self.buf[..i]);
                        self.drain(i + tag.len);
                        self.stripped = true;
                        self.at_start = true;
                    }
                    (Thinking::Pass, closing) => {
                        out.push_str(&self.buf[..i + tag.len]);
                        self.drain(i + tag.len);
                        self.at_start = closing;
                    }
                },
                None => {
                    let keep = markers::marker_prefix_len(&self.buf);
                    let end = self.buf.len() - keep;
                    out.push_str(&self.buf[..end]);
                    self.drain(end);
                    return out;
                }
            }
        }
    }

    /// At the end of the stream: what is held, and the tail to release.
    pub fn finish(&mut self) -> GateEnd {
        let buf = std::mem::take(&mut self.buf);
        let mut end = GateEnd {
            held: None,
            tail: String::new(),
            thinking_stripped: self.stripped,
        };
        if self.in_thinking {
            // An unclosed block runs to the end: all of it was thinking.
            end.thinking_stripped = true;
        } else if self.held {
            end.held = Some(buf);
        } else {
            end.tail = buf;
        }
        *self = ContentGate::new(self.thinking);
        end
    }

    fn drain(&mut self, upto: usize) {
        self.buf.drain(..upto);
        self.ws = 0;
    }
}
