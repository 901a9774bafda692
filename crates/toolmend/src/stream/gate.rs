//! The content gate: delta by delta, which streamed content may reach the client now.
//!
//! A model that writes its call into the text (`<tool_call>{…}`, `[TOOL_CALLS][…]`, a
//! leading `{` …) must not have that text reach the client as prose: the plan turns it
//! into a real call at the end. So the gate releases content up to where a call may
//! begin and holds everything from there on; the caller plans the held text when the
//! stream ends and releases whatever of it was no call.
//!
//! - A call marker ([`markers::CALL_MARKERS`]) outside Markdown code holds the rest; one
//!   shown in a code fence or a code span ([`markers::Code`]) is prose, as the plan reads
//!   it. Backticks whose closing run may still come are kept back until it comes, a blank
//!   line or a thinking tag comes, or [`markers::MAX_SPAN`] bytes pass; at the end a
//!   marker after backticks never closed holds what is kept.
//! - At the start of the text (after whitespace, or a stripped thinking block) a token
//!   that opens the reply ([`markers::REPLY_OPEN`], Kimi K3's) is dropped, as the plan
//!   drops it; the tokens that end it are markers.
//! - At the start of the text (after whitespace, or right after a thinking block) a
//!   leading marker ([`markers::LEADING_MARKERS`]: `{`, `[`, a fence) holds the rest.
//! - Elsewhere, what the parser also reads after prose: a fence whose first line opens a
//!   JSON value (```` ```json\n{ ````), and an object outside code whose first key is
//!   `name`, `arguments` or `parameters` (`{"name": …`); other fences and objects are
//!   prose.
//! - With the tool names known ([`ContentGate::with_call_names`]), a pythonic call of a
//!   known tool `get_weather(` at the start, at the start of a line, or after `[` (the
//!   parser reads such calls only for a known tool, so a first word that begins no tool's
//!   name goes out at once).
//! - A hold begins at the whitespace before its marker (a plan that trims the prose
//!   before the calls drops it), and at a `[` that opens a list of calls before it
//!   ([`markers::hold_start`]: `Sure! [{"name": …}]` leaves `Sure!`, no lone `[`). Trailing whitespace is kept back until text follows, and
//!   so is a tail that may still grow into a marker or a thinking tag (`<tool`, `[TOOL_`,
//!   `` ` ``, `{"na`); at the end the tail is released.
//! - Thinking ([`markers::THINKING_TAGS`], any ASCII case): with [`Thinking::Pass`] it is
//!   text like any other; with [`Thinking::Strip`] a block is withheld and dropped (an
//!   unclosed one to the end), as the plan's `strip_thinking` drops it, and the text
//!   around it is trimmed as that trims it. A bare closing tag cannot take back what was
//!   already released: the tag alone is dropped. A tag shown in Markdown code is text,
//!   and one after a hold is the held call's (an argument's text): neither is stripped
//!   ([`markers::reasoning_spans`], the plan's rule).
//!
//! Nothing is lost or repeated: released + [`GateEnd::tail`] + [`GateEnd::held`] is the
//! content (less the thinking stripped, and the whitespace that trimming drops). Linear in
//! the content: each delta is scanned once, plus a kept-back tail of bounded length (at
//! most [`MAX_KEPT_WS`] bytes of whitespace and a marker's length); the gate keeps only
//! what it has not released.

use crate::repair::markers::{self, Code, InCode, LEADING_MARKERS, Leading};

/// Trailing whitespace kept back at most; past it whitespace is released as it comes.
pub const MAX_KEPT_WS: usize = 1024;

use markers::{MAX_UNDECIDED, opening};

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
    /// Bytes of that block given out as reasoning already.
    emitted: usize,
    /// Reasoning stripped, not taken yet ([`Self::take_reasoning`]).
    reasoning: String,
    /// The stripped reasoning is kept for [`Self::take_reasoning`].
    collect: bool,
    /// Whitespace before the block being withheld (it rejoins the text after it).
    before_block: String,
    stripped: bool,
    /// A token that opens the reply ([`markers::REPLY_OPEN`]) was dropped.
    unframed: bool,
    /// Some text other than whitespace was released.
    released_any: bool,
    /// Tool names (normalized) a pythonic call may name.
    names: Vec<String>,
    /// Markdown code at the start of `buf` (after what was released): a call marker
    /// shown in code is released as prose, as the plan reads it.
    code: Code,
}

impl Default for ContentGate {
    fn default() -> Self {
        ContentGate::new(Thinking::Pass)
    }
}

/// OpenAI's namespace for function names, dropped before names are compared.
const PREFIX: &str = "functions.";

/// A tool name as names are compared ([`markers::name_key`]).
fn normalize(name: &str) -> String {
    markers::name_key(name)
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

/// Where the whitespace run that ends at `at` begins (at most [`MAX_KEPT_WS`] back).
fn ws_start(text: &str, at: usize) -> usize {
    let mut i = at;
    for (j, c) in text[..at].char_indices().rev() {
        if !c.is_whitespace() || at - j > MAX_KEPT_WS {
            break;
        }
        i = j;
    }
    i
}

/// What a scan of the unreleased text found.
enum Scan {
    /// A marker at this byte: hold from here.
    Marker(usize),
    /// Something at this byte that more text decides: keep it back.
    Undecided(usize),
    /// A thinking tag.
    Tag(usize, markers::ThinkingTag),
    /// Nothing.
    None,
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
            emitted: 0,
            reasoning: String::new(),
            collect: false,
            before_block: String::new(),
            stripped: false,
            unframed: false,
            released_any: false,
            names: Vec::new(),
            code: Code::default(),
        }
    }

    /// Holds a pythonic call `name(…)` that names one of `names` (compared as the
    /// parser resolves names: ASCII case and separators ignored, a `functions.` prefix
    /// dropped); without names no pythonic call is held.
    #[must_use]
    pub fn with_call_names<'n>(mut self, names: impl IntoIterator<Item = &'n str>) -> Self {
        self.names = names.into_iter().map(normalize).collect();
        self
    }

    /// Bytes the gate keeps (not released): what a byte limit must count.
    pub fn pending(&self) -> usize {
        self.buf.len() + self.before_block.len() + self.reasoning.len()
    }

    /// Keeps the reasoning it strips for [`Self::take_reasoning`] (else it is dropped as
    /// it goes, and nothing is kept for it).
    #[must_use]
    pub fn collecting_reasoning(mut self) -> Self {
        self.collect = true;
        self
    }

    /// The reasoning stripped since the last call ([`Thinking::Strip`]; with
    /// [`Self::collecting_reasoning`]), as the model
    /// wrote it, tags included: each block (an open one as far as it is known not to be
    /// its closing tag) and each bare closing tag. A tag quoted in code, or inside a held
    /// call, is none of it. A front that moves reasoning elsewhere splits this text, not
    /// the raw content, so it moves what the gate took out.
    pub fn take_reasoning(&mut self) -> String {
        std::mem::take(&mut self.reasoning)
    }

    /// [`Self::take_reasoning`], and at the end of the stream the rest of a block never
    /// closed (call it before [`Self::finish`]).
    pub fn flush_reasoning(&mut self) -> String {
        if self.collect && self.in_thinking && !self.held {
            let rest = &self.buf[self.emitted.min(self.buf.len())..];
            self.reasoning.push_str(rest);
            self.emitted = self.buf.len();
        }
        self.take_reasoning()
    }

    /// True when something is kept back or held.
    pub fn holds_anything(&self) -> bool {
        self.pending() > 0
    }

    /// True once a marker was found: everything from it on is held.
    pub fn is_holding(&self) -> bool {
        self.held
    }

    /// Takes a content delta; returns the text that may go to the client now.
    pub fn push(&mut self, delta: &str) -> String {
        self.buf.push_str(delta);
        self.advance(false)
    }

    /// Releases what the unreleased text allows; `complete`: the stream has ended (text
    /// after backticks never closed is decided).
    fn advance(&mut self, complete: bool) -> String {
        // Scanned from the start of what is not released: when nothing is held that is a
        // kept-back tail (bounded: whitespace, a marker's prefix, an undecided opening).
        let mut out = String::new();
        loop {
            if self.held {
                return out;
            }
            if self.in_thinking {
                let from = self.scanned.saturating_sub(longest_tag());
                match markers::find_thinking(&self.buf, from, true) {
                    Some(t) => {
                        let end = t.at + t.len;
                        if self.collect {
                            self.reasoning.push_str(&self.buf[self.emitted..end]);
                        }
                        self.emitted = 0;
                        self.buf.drain(..end);
                        self.after_block();
                        continue;
                    }
                    None => {
                        self.scanned = self.buf.len();
                        // The block so far goes out as reasoning, less what may still
                        // be the start of its closing tag.
                        let mut safe = self.buf.len().saturating_sub(longest_tag() - 1);
                        while !self.buf.is_char_boundary(safe) {
                            safe -= 1;
                        }
                        if self.collect && safe > self.emitted {
                            self.reasoning.push_str(&self.buf[self.emitted..safe]);
                            self.emitted = safe;
                        }
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
                if !self.released_any && rest.starts_with(markers::REPLY_OPEN) {
                    // A template token that opens the reply is no prose (the plan drops
                    // it from the content's start too); what follows is at the start.
                    let upto = self.ws + markers::REPLY_OPEN.len();
                    self.buf.drain(..upto);
                    self.ws = 0;
                    self.unframed = true;
                    continue;
                }
                let tag = markers::thinking_tag_at(rest, 0).is_some()
                    || markers::call_marker_at(rest, 0).is_some();
                if !tag {
                    // `[` may still become `[THINK]` or `[TOOL_CALLS]`: tags decide first.
                    if markers::may_start_marker(rest) {
                        return out;
                    }
                    let pythonic = self.pythonic(rest);
                    if LEADING_MARKERS.iter().any(|m| rest.starts_with(m))
                        || pythonic == Leading::Call
                    {
                        self.held = true;
                        return out;
                    }
                    if LEADING_MARKERS.iter().any(|m| m.starts_with(rest))
                        || pythonic == Leading::Maybe
                    {
                        return out; // may still become a leading marker: wait for more
                    }
                }
                self.at_start = false;
                if (self.stripped || self.unframed) && !self.released_any {
                    // Text after stripped thinking or a dropped reply token: the plan
                    // trims its start.
                    let ws = self.ws;
                    self.buf.drain(..ws);
                }
                self.ws = 0;
            }
            match self.scan_from(0, self.code, complete) {
                Scan::Marker(i) => {
                    // From the whitespace before it, and a `[` that opens the calls.
                    let from = ws_start(&self.buf, i).min(markers::hold_start(&self.buf, i));
                    self.release(&mut out, from, complete);
                    self.held = true;
                    return out;
                }
                Scan::Undecided(i) => {
                    let from = ws_start(&self.buf, i).min(markers::hold_start(&self.buf, i));
                    self.release(&mut out, from, complete);
                    return out;
                }
                Scan::Tag(i, tag) => {
                    match (self.thinking, tag.closing) {
                        (Thinking::Strip, closing) => {
                            let w = ws_start(&self.buf, i);
                            self.release(&mut out, w, complete);
                            self.before_block = self.buf.drain(..i - w).collect();
                            if closing {
                                // A bare closing tag: only the tag can still be dropped.
                                let t: String = self.buf.drain(..tag.len).collect();
                                if self.collect {
                                    self.reasoning.push_str(&t);
                                }
                                self.after_block();
                            } else {
                                self.in_thinking = true;
                                self.scanned = tag.len;
                                self.emitted = 0;
                            }
                        }
                        (Thinking::Pass, closing) => {
                            self.release(&mut out, i + tag.len, complete);
                            self.at_start = closing;
                        }
                    }
                }
                Scan::None => {
                    let keep = markers::marker_prefix_len(&self.buf);
                    let end = ws_start(&self.buf, self.buf.len() - keep);
                    self.release(&mut out, end, complete);
                    return out;
                }
            }
        }
    }

    /// At the end of the stream: what is held, and the tail to release.
    pub fn finish(&mut self) -> GateEnd {
        // Backticks the stream never closed were text: what was kept back after them is
        // read again as complete (a thinking tag there is stripped; a marker begins a
        // call, and what is kept from the backticks on is held, not released).
        let mut kept = if self.held || self.in_thinking {
            String::new()
        } else {
            self.advance(true)
        };
        let buf = std::mem::take(&mut self.buf);
        if !self.in_thinking {
            // (An unclosed block runs to the end: all of it was thinking.)
            kept.push_str(&buf);
        }
        let mut end = GateEnd {
            held: None,
            tail: String::new(),
            thinking_stripped: self.stripped || self.in_thinking,
        };
        if self.held {
            end.held = Some(kept);
        } else {
            end.tail = kept;
        }
        if end.thinking_stripped || self.unframed {
            // The plan trims what stripping leaves.
            let keep = end.tail.trim_end().len();
            end.tail.truncate(keep);
            if !self.released_any {
                end.tail = end.tail.trim_start().to_owned();
            }
        }
        let names = std::mem::take(&mut self.names);
        let collect = self.collect;
        *self = ContentGate::new(self.thinking);
        self.names = names;
        self.collect = collect;
        end
    }

    /// A stripped block ended: the whitespace before it rejoins what follows, and what
    /// follows is at the start again (leading markers count).
    fn after_block(&mut self) {
        let mut joined = std::mem::take(&mut self.before_block);
        joined.push_str(&self.buf);
        self.buf = joined;
        if !self.released_any {
            let ws = self.buf.len() - self.buf.trim_start().len();
            self.buf.drain(..ws);
        }
        self.in_thinking = false;
        self.stripped = true;
        self.at_start = true;
        self.ws = 0;
    }

    /// Releases `buf[..upto]` (`complete`: the stream has ended, so backticks at its end
    /// are decided as the scan decided them).
    fn release(&mut self, out: &mut String, upto: usize, complete: bool) {
        for i in 0..upto {
            self.code.step(&self.buf, i, complete);
        }
        let part = &self.buf[..upto];
        if !self.released_any && part.chars().any(|c| !c.is_whitespace()) {
            self.released_any = true;
        }
        out.push_str(part);
        self.buf.drain(..upto);
        self.ws = 0;
    }

    /// [`Self::scan`] from byte `from` of the unreleased text (a char boundary), `code`
    /// the Markdown code there; `complete`: the stream has ended.
    fn scan_from(&self, from: usize, mut code: Code, complete: bool) -> Scan {
        let text = self.buf.as_str();
        let b = text.as_bytes();
        for i in from..b.len() {
            let in_code = code.step(text, i, complete);
            match b[i] {
                // A marker or a thinking tag shown in code is prose (the model's text).
                b'<' | b'[' if in_code == InCode::Yes => {}
                b'<' | b'[' => {
                    if markers::call_marker_at(text, i).is_some() {
                        return Scan::Marker(i);
                    }
                    if let Some(t) = markers::thinking_tag_at(text, i) {
                        return Scan::Tag(i, t);
                    }
                    // Gemma 4's `<|tool_call>` degraded into `<call>`: held once its body
                    // shows Gemma's string delimiter, kept back until it does or cannot.
                    let bare = markers::bare_call_at(text, i, false);
                    if bare == Some(true) {
                        return Scan::Marker(i);
                    }
                    if markers::may_start_marker(&text[i..])
                        || markers::dsml_token_pending(text, i)
                        || bare.is_none()
                    {
                        // The rest may still grow into a marker (`<|message_sep|>\n\nfunc`
                        // of GigaChat 3's): nothing after it is released before it is
                        // decided; a marker inside it holds from here.
                        return match self.scan_from(i + 1, code, complete) {
                            Scan::Marker(_) => Scan::Marker(i),
                            _ => Scan::Undecided(i),
                        };
                    }
                    if b[i] == b'[' {
                        let after = &text[i + 1..];
                        if !after.is_empty()
                            && after.len() < MAX_KEPT_WS
                            && after.bytes().all(|c| c.is_ascii_whitespace())
                        {
                            // `[` then a line break: a list of calls may open next.
                            return Scan::Undecided(i);
                        }
                        let rest = after.trim_start_matches([' ', '\t']);
                        match self.pythonic(rest) {
                            Leading::Call => return Scan::Marker(i),
                            Leading::Maybe if rest.len() < MAX_UNDECIDED => {
                                return Scan::Undecided(i);
                            }
                            _ => {}
                        }
                    }
                }
                b'{' if in_code == InCode::Yes => {}
                b'`' | b'{' => match opening(&text[i..]) {
                    Some(true) => return Scan::Marker(i),
                    // Backticks may open a code span whose end has not come yet.
                    Some(false) if in_code == InCode::Undecided => return Scan::Undecided(i),
                    Some(false) => {}
                    None => return Scan::Undecided(i),
                },
                b'~' if in_code == InCode::Undecided => return Scan::Undecided(i),
                b'\n' => {
                    let rest = text[i + 1..].trim_start_matches([' ', '\t']);
                    let at = b.len() - rest.len();
                    // A bare Gemma 4 `call:f{…}` at a line's start, with the evidence
                    // [`markers::bare_call_at`] asks for.
                    match markers::bare_call_at(text, at, true) {
                        Some(true) => return Scan::Marker(at),
                        None => return Scan::Undecided(at),
                        Some(false) => {}
                    }
                    if self.names.is_empty() {
                        continue;
                    }
                    match self.pythonic(rest) {
                        Leading::Call => return Scan::Marker(at),
                        Leading::Maybe if !rest.is_empty() && rest.len() < MAX_UNDECIDED => {
                            return Scan::Undecided(at);
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        Scan::None
    }

    /// What a text's start says about a pythonic call to a known tool there.
    fn pythonic(&self, rest: &str) -> Leading {
        if self.names.is_empty() {
            return Leading::No;
        }
        let ident = &rest[..rest.find('(').unwrap_or(rest.len())];
        match markers::leading_call(rest) {
            Leading::Call if self.names.contains(&normalize(ident)) => Leading::Call,
            Leading::Maybe
                if PREFIX.starts_with(ident) || {
                    let n = normalize(ident);
                    self.names.iter().any(|name| name.starts_with(&n))
                } =>
            {
                Leading::Maybe
            }
            _ => Leading::No,
        }
    }
}
