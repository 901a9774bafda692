//! Gemma 4: `<|tool_call>call:name{key:<|"|>text<|"|>,n:5}<tool_call|>`. The call is
//! FunctionGemma's ([`super::gemma`]); its own asymmetric tokens open and close it, and
//! `<|"|>` delimits strings where FunctionGemma writes `<escape>`. Its reasoning channel
//! (`<|channel>thought…<channel|>`) is a thinking block ([`super::super::markers`]).

use super::{Dialect, ParseError, Walk, gemma::GEMMA_CALL, name_len};
use crate::{Fix, FixKind};

/// What opens one Gemma 4 call (its close is `<tool_call|>`).
pub const GEMMA4_CALL_START: &str = "<|tool_call>";

/// What closes one call: stripped after the call is read.
const CALL_END: &str = "<tool_call|>";

/// `<|tool_call>` degraded into a plain tag (`<call>get_weather{…}`, with or without
/// `call:`): a call only with the evidence [`bare_call_at`] asks for.
pub const GEMMA4_DEGRADED_START: &str = "<call>";

/// Gemma 4's string delimiter: a special token its template emits only inside calls.
pub const GEMMA4_STRING: &str = "<|\"|>";

/// How far after a bare call's `{` its first string delimiter is looked for, in bytes.
const MAX_EVIDENCE: usize = 256;

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[GEMMA4_CALL_START],
    openers: &[GEMMA4_CALL_START],
    // Its turn and tool-result tokens carry nothing of a call.
    noise: &[
        CALL_END,
        "<|turn>model",
        "<|turn>",
        "<turn|>",
        "<|tool_response>",
        "<tool_response|>",
    ],
    read: Some(read),
    ..Dialect::NONE
};

/// Whether a Gemma 4 call without its full opener begins at `at` of `text`: `<call>`
/// (then `call:` or not) or, `line` set, a bare `call:`, then a tool name and `{` whose
/// body reaches Gemma 4's string delimiter ([`GEMMA4_STRING`]) before its braces close,
/// within `MAX_EVIDENCE` (256) bytes. That token is emitted only in calls: it tells a call
/// from prose about one. `None` while the text so far cannot tell (a stream's gate keeps
/// it back). Before the first delimiter a Gemma body holds no string, so its braces are
/// counted as they stand.
pub fn bare_call_at(text: &str, at: usize, line: bool) -> Option<bool> {
    let rest = &text[at..];
    let b = rest.as_bytes();
    let prefix_of = |whole: &str, part: &str| {
        if whole.starts_with(part) {
            None
        } else {
            Some(false)
        }
    };
    let mut i = if rest.starts_with(GEMMA4_DEGRADED_START) {
        let mut i = GEMMA4_DEGRADED_START.len();
        while i < b.len() && i < 32 && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            return None;
        }
        if rest[i..].starts_with(GEMMA_CALL) {
            i += GEMMA_CALL.len();
        } else if GEMMA_CALL.starts_with(&rest[i..]) {
            return None;
        }
        i
    } else if b.first() == Some(&b'<') {
        return prefix_of(GEMMA4_DEGRADED_START, rest);
    } else if !line {
        return Some(false);
    } else if rest.starts_with(GEMMA_CALL) {
        GEMMA_CALL.len()
    } else {
        return if rest.is_empty() {
            Some(false)
        } else {
            prefix_of(GEMMA_CALL, rest)
        };
    };
    match b.get(i) {
        None => return None,
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        Some(_) => return Some(false),
    }
    let n = name_len(&b[i..]);
    if n > 64 {
        return Some(false);
    }
    i += n;
    match b.get(i) {
        None => return None,
        Some(b'{') => {}
        Some(_) => return Some(false),
    }
    let body = i;
    let mut depth = 0usize;
    while i < b.len() && i - body < MAX_EVIDENCE {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(false);
                }
            }
            b'<' if rest[i..].starts_with(GEMMA4_STRING) => return Some(true),
            b'<' if GEMMA4_STRING.starts_with(&rest[i..]) => return None,
            _ => {}
        }
        i += 1;
    }
    if i - body >= MAX_EVIDENCE {
        Some(false)
    } else {
        None
    }
}

/// The name's range of the Gemma 4 call without its opener at `at` ([`bare_call_at`]
/// says it has the evidence), and where the call ends when its braces close.
pub fn bare_call_read(text: &str, at: usize, max_depth: usize) -> Option<((usize, usize), usize)> {
    let b = text.as_bytes();
    let mut head = at;
    if text[at..].starts_with(GEMMA4_DEGRADED_START) {
        head += GEMMA4_DEGRADED_START.len();
        while b.get(head).is_some_and(u8::is_ascii_whitespace) {
            head += 1;
        }
    }
    let name_start = if text[head..].starts_with(GEMMA_CALL) {
        head + GEMMA_CALL.len()
    } else {
        head
    };
    let name_end = name_start + name_len(&b[name_start..]);
    let mut pos = name_end;
    super::gemma::gemma_value(text, &mut pos, 0, max_depth, &mut Vec::new())?;
    Some(((name_start, name_end), pos))
}

/// True when byte `at` of `b` begins a line after prose: after a line break and spaces
/// or tabs only.
pub fn at_line_start(b: &[u8], at: usize) -> bool {
    let mut i = at;
    while i > 0 && matches!(b[i - 1], b' ' | b'\t') {
        i -= 1;
    }
    i > 0 && b[i - 1] == b'\n'
}

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    let degraded = rest.starts_with(GEMMA4_DEGRADED_START);
    let bare = !degraded
        && rest.starts_with(GEMMA_CALL)
        && !w.at_text_start()
        && !w.out.envelope_call
        && at_line_start(w.b, at);
    if degraded || bare {
        return w.read_bare_gemma4(at, degraded);
    }
    if !rest.starts_with(GEMMA4_CALL_START) {
        return None;
    }
    w.out.envelope_call = true;
    w.global(FixKind::ToolCallTagUnwrapped, at);
    w.pos = at + GEMMA4_CALL_START.len();
    w.skip_ws();
    if !w.rest().starts_with(super::gemma::GEMMA_CALL) {
        return Some(Ok(()));
    }
    let r = w.read_gemma(w.pos);
    if r.is_ok() {
        w.skip_ws();
        if w.rest().starts_with(CALL_END) {
            w.pos += CALL_END.len();
        }
    }
    Some(r)
}

impl Walk<'_> {
    /// A Gemma 4 call without its full opener at `at` ([`bare_call_at`]): read when its
    /// body holds Gemma's string delimiter and its braces close, recorded as
    /// `missing_call_opener` (unsafe: the token that marks a call was not written). After
    /// one that does not read no other is tried (each is searched once: linear).
    fn read_bare_gemma4(&mut self, at: usize, degraded: bool) -> Option<Result<(), ParseError>> {
        if self.unclosed.contains(&GEMMA4_DEGRADED_START)
            || bare_call_at(self.raw, at, !degraded) != Some(true)
        {
            return None;
        }
        let Some((name, _)) = bare_call_read(self.raw, at, self.opts.max_depth) else {
            self.unclosed.push(GEMMA4_DEGRADED_START);
            return None;
        };
        let detail = if degraded {
            "<|tool_call> written as <call>"
        } else {
            "no <|tool_call> before call:"
        };
        let extra = Fix::at(FixKind::MissingCallOpener, at).with_detail(detail);
        match self.read_gemma_named(at, name, Some(extra)) {
            Ok(()) => {
                self.skip_ws();
                if self.rest().starts_with(CALL_END) {
                    self.pos += CALL_END.len();
                }
                Some(Ok(()))
            }
            Err(e) => Some(Err(e)),
        }
    }
}
