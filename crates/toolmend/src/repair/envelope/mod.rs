//! The envelope: what wraps the JSON a model meant.
//!
//! One left-to-right walk over the text. Reasoning blocks, chat-template tokens,
//! tool-call tags, code fences and prose are skipped (each recorded once); every
//! document found on the way is read: a JSON value, object members without
//! braces, a pythonic call, Qwen3 XML parameters. Several documents mean several
//! calls (or one call repeated), which [`super::interpret`] sorts out.
//!
//! Each model family's way of writing calls (its dialect) is a file here, registered once
//! in [`DIALECTS`]; the marker table ([`super::markers`]) is derived from that list, so the
//! extractor and the streaming gate know every marker the walk reads.

pub(super) mod apertus;
pub(super) mod deepseek;
pub(super) mod dsml;
pub(super) mod functools;
pub(super) mod gcml;
pub(super) mod gemma;
pub(super) mod gemma4;
pub(super) mod gigachat;
mod glm;
pub(super) mod harmony;
pub(super) mod hermes;
pub(super) mod hunyuan;
mod ifm;
pub(super) mod kimi;
pub(super) mod kimi3;
pub(super) mod minicpm;
pub(super) mod minimax;
pub(super) mod mistral;
mod plamo;
mod pythonic;
pub(super) mod qwen_coder;
mod solar;
pub(super) mod step;
mod tokens;
mod xml;

use serde_json::{Map, Value};

use super::{
    RepairError, RepairOptions,
    markers::{self, FENCE, THINKING_TAGS},
    parser::{Ctx, ParseError, Parser, utf8_len},
};
use crate::{Fix, FixKind};

/// How the error begins when the arguments closed early and their rest stands as prose
/// after them: the one failed reading that reading by the tool's keys may still settle.
pub(crate) const ENDED_EARLY: &str = "the arguments seem to end early";

/// One document read from the text.
#[derive(Debug)]
pub(crate) struct Doc {
    pub value: Value,
    pub fixes: Vec<Fix>,
    /// The tool name when the document itself is a call (`f(a=1)`, `<function=f>`).
    pub name: Option<String>,
    /// Prose or a code fence stood between this document and the one before it (a draft
    /// and its correction are written apart; glued calls are not).
    pub apart: bool,
    /// Prose follows it (`The config now sets {"debug": true} for local runs.`): a
    /// snippet inside a sentence.
    pub prose_after: bool,
}

/// Everything read from one text.
#[derive(Debug)]
pub(crate) struct Docs {
    pub docs: Vec<Doc>,
    /// Fixes that apply to the whole text (envelope).
    pub fixes: Vec<Fix>,
    /// A tool-call envelope (`<tool_call>`, `<|python_tag|>`, `[TOOL_CALLS]`) was seen:
    /// a `{"name", "arguments"}` object inside is a call, not arguments.
    pub envelope_call: bool,
}

/// A model family's way of writing calls into its text.
#[derive(Debug)]
struct Dialect {
    /// What begins a call wherever it stands (a closing tag `</…` here only ends one).
    markers: &'static [&'static str],
    /// `<|…|>` chat-template tokens that open calls (they begin a call too).
    call_tokens: &'static [&'static str],
    /// What begins one call of a block of several (not what opens a whole list).
    openers: &'static [&'static str],
    /// What begins a call only at the start of a text.
    leading: &'static [&'static str],
    /// Template tokens that carry nothing: stripped.
    noise: &'static [&'static str],
    /// Reads the dialect's envelope at the walk's position; `None` when none is there.
    /// Without a reader the walk reaches it otherwise (GLM inside `<tool_call>`, a
    /// pythonic call where a document starts).
    read: Option<Read>,
}

type Read = fn(&mut Walk<'_>) -> Option<Result<(), ParseError>>;

impl Dialect {
    const NONE: Dialect = Dialect {
        markers: &[],
        call_tokens: &[],
        openers: &[],
        leading: &[],
        noise: &[],
        read: None,
    };
}

/// Every dialect, in the order the walk tries them. Order matters only where markers
/// overlap: Step-3's, harmony's, DSML's, GCML's, DeepSeek's and Kimi K3's own tokens come before
/// [`tokens`] and DeepSeek's reader of any `<｜…｜>` token, which would take them as noise;
/// so do Apertus's, GigaChat's, Solar Open's and PLaMo's `<|…|>` tokens.
const DIALECTS: &[Dialect] = &[
    step::DIALECT,
    harmony::DIALECT,
    dsml::DIALECT,
    gcml::DIALECT,
    deepseek::DIALECT,
    apertus::DIALECT,
    gigachat::DIALECT,
    kimi3::DIALECT,
    solar::DIALECT,
    plamo::DIALECT,
    tokens::DIALECT,
    kimi::DIALECT,
    hermes::DIALECT,
    glm::DIALECT,
    minimax::DIALECT,
    minicpm::DIALECT,
    hunyuan::DIALECT,
    ifm::DIALECT,
    functools::DIALECT,
    gemma4::DIALECT,
    gemma::DIALECT,
    mistral::DIALECT,
    qwen_coder::DIALECT,
    pythonic::DIALECT,
];

/// A table of markers derived from [`DIALECTS`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Table {
    /// Call tokens and markers, closing tags left out.
    Markers,
    /// Call tokens.
    CallTokens,
    /// Openers of one call.
    Openers,
    /// Leading markers.
    Leading,
}

const fn lists(d: &Dialect, table: Table) -> [&'static [&'static str]; 2] {
    match table {
        Table::Markers => [d.call_tokens, d.markers],
        Table::CallTokens => [d.call_tokens, &[]],
        Table::Openers => [d.openers, &[]],
        Table::Leading => [d.leading, &[]],
    }
}

const fn counted(table: Table, m: &str) -> bool {
    let b = m.as_bytes();
    !(matches!(table, Table::Markers) && b.len() > 1 && b[0] == b'<' && b[1] == b'/')
}

/// The length of `first` followed by `table` ([`collect`]'s `N`).
pub(crate) const fn count(first: &[&str], table: Table) -> usize {
    let mut n = first.len();
    let mut d = 0;
    while d < DIALECTS.len() {
        let lists = lists(&DIALECTS[d], table);
        let mut l = 0;
        while l < lists.len() {
            let mut i = 0;
            while i < lists[l].len() {
                if counted(table, lists[l][i]) {
                    n += 1;
                }
                i += 1;
            }
            l += 1;
        }
        d += 1;
    }
    n
}

/// `first`, then every dialect's entries of `table` in registry order (computed at
/// compile time, so the marker table is a constant).
pub(crate) const fn collect<const N: usize>(
    first: &[&'static str],
    table: Table,
) -> [&'static str; N] {
    let mut out = [""; N];
    let mut n = 0;
    while n < first.len() {
        out[n] = first[n];
        n += 1;
    }
    let mut d = 0;
    while d < DIALECTS.len() {
        let lists = lists(&DIALECTS[d], table);
        let mut l = 0;
        while l < lists.len() {
            let mut i = 0;
            while i < lists[l].len() {
                if counted(table, lists[l][i]) {
                    out[n] = lists[l][i];
                    n += 1;
                }
                i += 1;
            }
            l += 1;
        }
        d += 1;
    }
    assert!(n == N, "collect::<N>: N is not count()");
    out
}

struct Walk<'a> {
    raw: &'a str,
    b: &'a [u8],
    pos: usize,
    opts: &'a RepairOptions,
    out: Docs,
    prose_at: Option<usize>,
    fence_seen: bool,
    /// A Mistral `name[ARGS]` seen: the next document is that tool's arguments.
    pending_name: Option<String>,
    /// Openers known to have no closer further on (each searched for once: linear).
    unclosed: Vec<&'static str>,
    /// Prose or a fence seen since the last document.
    gap: bool,
    /// A double quote read as prose after the first document (JSON's, not a sentence's:
    /// a document that ended early may have left its members there).
    quote_after_doc: bool,
}

pub(crate) fn read_documents(raw: &str, opts: &RepairOptions) -> Result<Docs, RepairError> {
    let mut w = Walk {
        raw,
        b: raw.as_bytes(),
        pos: 0,
        opts,
        out: Docs {
            docs: Vec::new(),
            fixes: Vec::new(),
            envelope_call: false,
        },
        prose_at: None,
        fence_seen: false,
        pending_name: None,
        unclosed: Vec::new(),
        gap: false,
        quote_after_doc: false,
    };
    let mut first_error: Option<ParseError> = None;
    while w.pos < w.b.len() {
        let before = w.pos;
        match w.step() {
            Ok(()) => {}
            Err(e) if e.fatal => {
                return Err(RepairError {
                    offset: e.offset,
                    reason: e.reason,
                });
            }
            Err(e) => {
                // A document that cannot be read where one seemed to start: prose, perhaps.
                // Go on past where reading failed, so no text is read twice.
                w.pos = w.pos.max(before + 1).max(e.offset.min(w.b.len()));
                if first_error.is_none() {
                    first_error = Some(e);
                }
                w.prose(before);
            }
        }
        if w.pos <= before {
            // Never loop in place.
            w.pos = before + 1;
        }
        while w.pos < w.b.len() && !w.raw.is_char_boundary(w.pos) {
            w.pos += 1;
        }
    }
    let Walk {
        mut out, prose_at, ..
    } = w;
    if out.docs.is_empty() {
        let e = first_error.unwrap_or(ParseError {
            fatal: false,
            offset: 0,
            reason: if raw.trim().is_empty() {
                "the arguments are empty".to_owned()
            } else {
                "no JSON object found in the text".to_owned()
            },
        });
        return Err(RepairError {
            offset: e.offset,
            reason: e.reason,
        });
    }
    // Stray `{…}` in prose that read as nothing: drop empty objects when real ones exist.
    if out.docs.len() > 1 && prose_at.is_some() {
        let any_full = out.docs.iter().any(|d| !is_empty_object(&d.value));
        if any_full {
            out.docs.retain(|d| !is_empty_object(&d.value));
        }
    }
    if let Some(at) = prose_at {
        out.fixes.push(Fix::at(FixKind::ProseStripped, at));
    }
    out.fixes.sort_by_key(|f| f.offset);
    Ok(out)
}

fn is_empty_object(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty)
}

impl<'a> Walk<'a> {
    fn rest(&self) -> &'a str {
        &self.raw[self.pos..]
    }

    fn global(&mut self, kind: FixKind, at: usize) {
        if !self.out.fixes.iter().any(|f| f.kind == kind) {
            self.out.fixes.push(Fix::at(kind, at));
        }
    }

    fn prose(&mut self, at: usize) {
        self.gap = true;
        if let Some(last) = self.out.docs.last_mut() {
            last.prose_after = true;
            self.quote_after_doc |= self.b.get(at) == Some(&b'"');
        }
        if self.prose_at.is_none() {
            self.prose_at = Some(at);
        }
    }

    /// Nothing but envelope (tokens, thinking, fences) seen so far.
    fn at_text_start(&self) -> bool {
        self.out.docs.is_empty() && self.prose_at.is_none()
    }

    fn skip_ws(&mut self) {
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    /// One step: skip one piece of envelope, or read one document.
    fn step(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        if self.pos >= self.b.len() {
            return Ok(());
        }
        if let Some(r) = self.thinking() {
            return r;
        }
        for d in DIALECTS {
            if let Some(read) = d.read
                && let Some(r) = read(self)
            {
                return r;
            }
        }
        let at = self.pos;
        let rest = self.rest();
        for tok in DIALECTS.iter().flat_map(|d| d.noise) {
            if rest.starts_with(tok) {
                self.global(FixKind::SpecialTokensStripped, at);
                self.pos = at + tok.len();
                return Ok(());
            }
        }
        if rest.starts_with(FENCE) {
            self.gap = true;
            if !self.fence_seen {
                self.fence_seen = true;
                self.global(FixKind::FenceStripped, at);
            }
            if markers::is_tool_code_fence(rest) {
                // Gemma 3's ```` ```tool_code ````: a call wherever it stands.
                self.out.envelope_call = true;
                self.global(FixKind::ToolCallTagUnwrapped, at);
            }
            let mut i = at + 3;
            while i < self.b.len() && (self.b[i].is_ascii_alphanumeric() || self.b[i] == b'_') {
                i += 1;
            }
            self.pos = i;
            return Ok(());
        }

        let c = self.b[at];
        match c {
            b'{' => {
                let j = ws_after(self.b, at + 1);
                if self.b.get(j) == Some(&b'\\') && self.b.get(j + 1) == Some(&b'"') {
                    return self.read_overescaped(at);
                }
                self.read_json(at)
            }
            b'[' => {
                let j = ws_after(self.b, at + 1);
                let pythonic_list = {
                    let e = ident_end(self.b, j);
                    e > j && self.b.get(e) == Some(&b'(')
                };
                // Pythonic calls only where a call is expected: at the start of the text or
                // inside a call envelope (`f(x=1)` in prose is prose).
                if pythonic_list && (self.at_text_start() || self.out.envelope_call) {
                    return self.read_pythonic(at);
                }
                match self.b.get(j) {
                    Some(b'{' | b'"' | b'\'' | b']' | b'[' | b'-' | b'0'..=b'9') | None => {
                        self.read_json(at)
                    }
                    _ => {
                        self.prose(at);
                        self.pos = at + 1;
                        Ok(())
                    }
                }
            }
            b'}' | b']' if !self.out.docs.is_empty() => {
                // `…src"} | .private = true' pkg.json"], "workdir": "/w"}`: after the
                // document, text that reads as prose but holds a double quote, then a
                // closer after a quote or another closer: JSON's structure, not a
                // sentence's (`drops it again }]` has no quote). The document ended early
                // (at a quote inside a string that was not escaped) and its rest is here:
                // dropping it as prose would cut the value short.
                let structure_before = self.b[..at]
                    .iter()
                    .rev()
                    .find(|c| !c.is_ascii_whitespace())
                    .is_some_and(|&c| matches!(c, b'"' | b']' | b'}'));
                if self.quote_after_doc && structure_before {
                    return Err(ParseError {
                        fatal: true,
                        offset: at,
                        reason: format!(
                            "{ENDED_EARLY}: after them, text closes a bracket after a quote \
                             or a bracket (byte {at}), so a quote inside a string was \
                             probably not escaped and ended it"
                        ),
                    });
                }
                self.global(FixKind::ExtraClosingRemoved, at);
                self.pos = at + 1;
                Ok(())
            }
            _ => {
                let p = Parser::new(rest, at, self.opts.max_depth);
                if p.quote_start() {
                    if self.at_text_start() {
                        if p.key_starts() && value_on_same_line(self.b, at) {
                            return self.read_members(at);
                        }
                        return self.read_json(at);
                    }
                    self.prose(at);
                    self.pos = at + utf8_len(c);
                    return Ok(());
                }
                if c.is_ascii_alphabetic() || c == b'_' {
                    let e = ident_end(self.b, at);
                    if self.b.get(e) == Some(&b'(')
                        && (self.at_text_start() || self.out.envelope_call)
                        && pythonic::looks_like_call_args(&p, e + 1 - at)
                    {
                        return self.read_pythonic(at);
                    }
                    // `city: "Quito", days: 2` is members without braces; `Arguments: {…}`
                    // and `Note: use {…}` are a heading and prose.
                    if self.at_text_start()
                        && p.key_starts()
                        && !self.raw[e..].starts_with("://")
                        && value_on_same_line(self.b, at)
                        && !line_has_bracket(self.b, e)
                    {
                        return self.read_members(at);
                    }
                    self.prose(at);
                    self.pos = e.max(at + 1);
                    return Ok(());
                }
                self.prose(at);
                self.pos = at + utf8_len(c);
                Ok(())
            }
        }
    }

    /// A reasoning block's tag at the walk's position: the block skipped (or refused).
    fn thinking(&mut self) -> Option<Result<(), ParseError>> {
        let at = self.pos;
        let rest = self.rest();
        for (open, close) in THINKING_TAGS {
            if rest.starts_with(open) {
                if !self.opts.strip_thinking {
                    return Some(Err(ParseError {
                        fatal: true,
                        offset: at,
                        reason: format!(
                            "a reasoning block ({open}) is in the arguments; \
                                 turn on strip_thinking to remove it"
                        ),
                    }));
                }
                self.global(FixKind::ThinkingStripped, at);
                let found = if self.unclosed.contains(open) {
                    None
                } else {
                    rest.find(close)
                };
                self.pos = match found {
                    Some(i) => at + i + close.len(),
                    // Unclosed: drop the tag, let the walk find the JSON after the reasoning;
                    // remember it, so that the next opener does not search again.
                    None => {
                        self.unclosed.push(open);
                        at + open.len()
                    }
                };
                return Some(Ok(()));
            }
            if rest.starts_with(close) {
                // A closing tag whose opener was in the prompt: all before it was reasoning.
                if !self.opts.strip_thinking {
                    return Some(Err(ParseError {
                        fatal: true,
                        offset: at,
                        reason: format!(
                            "a reasoning block (ending in {close}) is in the arguments; \
                                 turn on strip_thinking to remove it"
                        ),
                    }));
                }
                self.global(FixKind::ThinkingStripped, 0);
                // Whatever was read before it (`maybe {"city": "Lyon"}?`) was reasoning too.
                self.out.docs.clear();
                self.quote_after_doc = false;
                self.pending_name = None;
                self.prose_at = None;
                self.pos = at + close.len();
                return Some(Ok(()));
            }
        }
        None
    }

    fn push(&mut self, value: Value, fixes: Vec<Fix>, name: Option<String>) {
        // A quote in the prose before a call's document is no longer the prose after the
        // last one (`{…}` + `Then "b":` + `{…}}`: the stray brace is only a stray brace).
        if value.as_object().is_some_and(|o| !o.is_empty()) {
            self.quote_after_doc = false;
        }
        let name = name.or_else(|| self.pending_name.take());
        let apart = std::mem::take(&mut self.gap) && !self.out.docs.is_empty();
        self.out.docs.push(Doc {
            value,
            fixes,
            name,
            apart,
            prose_after: false,
        });
    }

    fn read_json(&mut self, at: usize) -> Result<(), ParseError> {
        let mut p = Parser::new(&self.raw[at..], at, self.opts.max_depth);
        let parsed = p.parse_value(Ctx::Top, 0)?;
        self.pos = at + p.pos;
        self.push(parsed.value, p.fixes, None);
        Ok(())
    }

    fn read_members(&mut self, at: usize) -> Result<(), ParseError> {
        let mut p = Parser::new(&self.raw[at..], at, self.opts.max_depth);
        let parsed = p.parse_object(1, true)?;
        self.pos = at + p.pos;
        let mut fixes = vec![Fix::at(FixKind::OuterBracesAdded, at)];
        fixes.append(&mut p.fixes);
        self.push(parsed.value, fixes, None);
        Ok(())
    }

    /// `{\"a\": \"b\"}`: every quote escaped, no enclosing string. Unescape one level, then read.
    fn read_overescaped(&mut self, at: usize) -> Result<(), ParseError> {
        let text = &self.raw[at..];
        let mut un = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(ch) = chars.next() {
            if ch == '\\' {
                match chars.next() {
                    Some('"') => un.push('"'),
                    Some('\\') => un.push('\\'),
                    Some(other) => {
                        un.push('\\');
                        un.push(other);
                    }
                    None => un.push('\\'),
                }
            } else {
                un.push(ch);
            }
        }
        let mut p = Parser::new(&un, at, self.opts.max_depth);
        let parsed = p.parse_value(Ctx::Top, 0)?;
        p.skip_ws();
        if !p.at_end() {
            self.prose(at + p.pos.min(text.len()));
        }
        self.pos = self.b.len();
        let mut fixes = vec![Fix::at(FixKind::OverescapedQuotesUnescaped, at)];
        // Offsets inside the unescaped copy only approximate the raw text.
        fixes.append(&mut p.fixes);
        self.push(parsed.value, fixes, None);
        Ok(())
    }
}

/// `key: value` on one line: object members without braces, not a heading like `Arguments:`.
fn value_on_same_line(b: &[u8], from: usize) -> bool {
    let Some(colon) = b[from..].iter().take(512).position(|&c| c == b':') else {
        return false;
    };
    let mut i = from + colon + 1;
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    i < b.len() && b[i] != b'\n' && b[i] != b'\r'
}

/// At most `n` bytes of `s`, cut at a character boundary.
fn prefix(s: &str, n: usize) -> &str {
    let mut end = s.len().min(n);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn ws_after(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn ident_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
        i += 1;
    }
    i
}

/// A `{` or `[` on the rest of the line from `from`.
fn line_has_bracket(b: &[u8], from: usize) -> bool {
    b[from..]
        .iter()
        .take(512)
        .take_while(|&&c| c != b'\n')
        .any(|&c| c == b'{' || c == b'[')
}

/// `"name"`, `'name'` or `name`, trimmed.
fn unquote(s: &str) -> &str {
    let t = s.trim();
    t.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .or_else(|| t.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')))
        .unwrap_or(t)
}

/// OpenAI's `functions.` namespace, dropped from a name.
fn strip_namespace(name: &str) -> &str {
    name.strip_prefix("functions.").unwrap_or(name)
}

/// The length of the tool name at the start of `b` (letters, digits, `_`, `-`, `.`).
fn name_len(b: &[u8]) -> usize {
    b.iter()
        .take(128)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
        .count()
}

/// Where the opening tag at the start of `rest` (at `at` in the text) ends: its `>`, looked
/// for in the first 256 bytes only (a tag head is short; the search stays bounded).
fn tag_end(rest: &str, at: usize, tag: &str) -> Result<usize, ParseError> {
    let head = prefix(rest, 256);
    head.find('>').ok_or_else(|| ParseError {
        fatal: false,
        offset: at + head.len(),
        reason: format!("unterminated {tag} tag"),
    })
}
