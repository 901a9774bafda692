//! The envelope: what wraps the JSON a model meant.
//!
//! One left-to-right walk over the text. Reasoning blocks, chat-template tokens,
//! tool-call tags, code fences and prose are skipped (each recorded once); every
//! document found on the way is read: a JSON value, object members without
//! braces, a pythonic call, Qwen3 XML parameters. Several documents mean several
//! calls (or one call repeated), which [`super::interpret`] sorts out.

use serde_json::{Map, Value};

use super::{
    RepairError, RepairOptions,
    markers::{self, FENCE, MISTRAL_TOOL_CALLS, THINKING_TAGS, TOOL_CALL_TAGS, XML_FUNCTION},
    parser::{Ctx, ParseError, Parser, is_ident, utf8_len},
};
use crate::{Fix, FixKind};

/// One document read from the text.
#[derive(Debug)]
pub(crate) struct Doc {
    pub value: Value,
    pub fixes: Vec<Fix>,
    /// The tool name when the document itself is a call (`f(a=1)`, `<function=f>`).
    pub name: Option<String>,
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

const OTHER_TOKENS: &[&str] = &[
    "[/TOOL_CALLS]",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "<start_of_turn>",
    "<end_of_turn>",
    "</function>",
    "<eos>",
    "<bos>",
];

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
        let at = self.pos;
        let rest = self.rest();

        for (open, close) in THINKING_TAGS {
            if rest.starts_with(open) {
                if !self.opts.strip_thinking {
                    return Err(ParseError {
                        fatal: true,
                        offset: at,
                        reason: format!(
                            "a reasoning block ({open}) is in the arguments; \
                             turn on strip_thinking to remove it"
                        ),
                    });
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
                return Ok(());
            }
            if rest.starts_with(close) {
                // A closing tag whose opener was in the prompt: all before it was reasoning.
                if !self.opts.strip_thinking {
                    return Err(ParseError {
                        fatal: true,
                        offset: at,
                        reason: format!(
                            "a reasoning block (ending in {close}) is in the arguments; \
                             turn on strip_thinking to remove it"
                        ),
                    });
                }
                self.global(FixKind::ThinkingStripped, 0);
                // Whatever was read before it (`maybe {"city": "Lyon"}?`) was reasoning too.
                self.out.docs.clear();
                self.pending_name = None;
                self.prose_at = None;
                self.pos = at + close.len();
                return Ok(());
            }
        }

        if rest.starts_with("<|")
            && let Some(end) = rest.as_bytes().iter().take(64).position(|&c| c == b'>')
            && end >= 3
            && rest.as_bytes()[end - 1] == b'|'
        {
            let token = &rest[2..end - 1];
            self.pos = at + end + 1;
            if markers::is_call_token(&rest[..=end]) {
                self.out.envelope_call = true;
                self.global(FixKind::PythonTagUnwrapped, at);
            } else {
                self.global(FixKind::SpecialTokensStripped, at);
            }
            if matches!(token, "im_start" | "start_header_id" | "start") {
                // The role name that follows (`assistant`) is part of the token.
                let r = self.pos;
                let mut i = r;
                while i < self.b.len() && is_ident(self.b[i]) && self.b[i] < 0x80 {
                    i += 1;
                }
                if i - r <= 12 {
                    self.pos = i;
                }
            }
            return Ok(());
        }
        for tag in TOOL_CALL_TAGS {
            if rest.starts_with(tag) {
                self.out.envelope_call = true;
                self.global(FixKind::ToolCallTagUnwrapped, at);
                self.pos = at + tag.len();
                return Ok(());
            }
        }
        for tok in OTHER_TOKENS {
            if rest.starts_with(tok) {
                self.global(FixKind::SpecialTokensStripped, at);
                self.pos = at + tok.len();
                return Ok(());
            }
        }
        if rest.starts_with(MISTRAL_TOOL_CALLS) {
            self.out.envelope_call = true;
            self.global(FixKind::MistralToolCallsUnwrapped, at);
            self.pos = at + MISTRAL_TOOL_CALLS.len();
            // Newer Mistral templates: `[TOOL_CALLS]name[ARGS]{…}`.
            let r = self.pos;
            let mut i = r;
            while i < self.b.len() && (is_ident(self.b[i]) || self.b[i] == b'.') {
                i += 1;
            }
            if i > r && self.raw[i..].starts_with("[ARGS]") {
                self.pending_name = Some(self.raw[r..i].to_owned());
                self.pos = i + "[ARGS]".len();
            }
            return Ok(());
        }
        if rest.starts_with(XML_FUNCTION) {
            return self.read_xml_function();
        }
        if rest.starts_with(FENCE) {
            if !self.fence_seen {
                self.fence_seen = true;
                self.global(FixKind::FenceStripped, at);
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
                        && looks_like_call_args(&p, e + 1 - at)
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

    fn push(&mut self, value: Value, fixes: Vec<Fix>, name: Option<String>) {
        let name = name.or_else(|| self.pending_name.take());
        self.out.docs.push(Doc { value, fixes, name });
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

    /// `f(a=1, b='x')` or `[f(a=1), g(b=2)]` (Llama 3.2/4 and others).
    fn read_pythonic(&mut self, at: usize) -> Result<(), ParseError> {
        let mut p = Parser::new(&self.raw[at..], at, self.opts.max_depth);
        let list = p.peek() == Some(b'[');
        if list {
            p.pos += 1;
        }
        loop {
            p.skip_ws();
            match p.peek() {
                None => break,
                Some(b']') if list => {
                    p.pos += 1;
                    break;
                }
                Some(b',') if list => {
                    p.pos += 1;
                    continue;
                }
                _ => {}
            }
            let name_start = p.pos;
            let name_end = ident_end(p.bytes(), name_start);
            if name_end == name_start || p.bytes().get(name_end) != Some(&b'(') {
                return Err(ParseError {
                    fatal: false,
                    offset: at + name_start,
                    reason: "expected a function call `name(arg=value, …)`".to_owned(),
                });
            }
            let name = p.slice(name_start, name_end).to_owned();
            p.pos = name_end + 1;
            let mut args = Map::new();
            let mut fixes = vec![Fix::at(FixKind::PythonicCallRead, at + name_start)];
            let mut truncated = false;
            loop {
                p.skip_ws();
                match p.peek() {
                    None => {
                        truncated = true;
                        fixes.push(Fix::at(FixKind::UnclosedBrackets, at + p.pos));
                        break;
                    }
                    Some(b')') => {
                        p.pos += 1;
                        break;
                    }
                    Some(b',') => {
                        p.pos += 1;
                        continue;
                    }
                    _ => {}
                }
                let Some((k_end, value_at)) = p.kwarg_at(p.pos) else {
                    return Err(ParseError {
                        fatal: false,
                        offset: at + p.pos,
                        reason: format!(
                            "positional argument in the call to `{name}`: \
                             name every argument (`{name}(city=\"Paris\")`)"
                        ),
                    });
                };
                let k_start = p.pos;
                let key = p.slice(k_start, k_end).to_owned();
                p.pos = value_at;
                p.skip_ws();
                if p.at_end() {
                    truncated = true;
                    fixes.push(Fix::at(FixKind::TruncatedMemberDropped, at + k_start));
                    break;
                }
                let v = p.parse_value(Ctx::Call, 1)?;
                args.insert(key, v.value);
                if v.truncated {
                    truncated = true;
                    break;
                }
            }
            fixes.append(&mut p.fixes);
            self.push(Value::Object(args), fixes, Some(name));
            if !list || truncated {
                break;
            }
        }
        self.pos = at + p.pos;
        Ok(())
    }

    /// Qwen3-Coder: `<function=name>\n<parameter=key>\nvalue\n</parameter>\n</function>`.
    ///
    /// Every search is bounded by the next tag it must not pass (the next `<function=`,
    /// the next `<parameter=`), so the whole read stays linear.
    fn read_xml_function(&mut self) -> Result<(), ParseError> {
        let at = self.pos;
        let rest = self.rest();
        let head = prefix(rest, 256);
        let head_end = head.find('>').ok_or_else(|| ParseError {
            fatal: false,
            offset: at + head.len(),
            reason: "unterminated <function=…> tag".to_owned(),
        })?;
        let name = rest["<function=".len()..head_end].trim().to_owned();
        let body_start = head_end + 1;
        // The body ends at `</function>`, or at the next `<function=` when the close is missing.
        let next_fn = rest[body_start..]
            .find("<function=")
            .map_or(rest.len(), |i| body_start + i);
        let close = rest[body_start..next_fn]
            .find("</function>")
            .map(|i| body_start + i);
        let body_end = close.unwrap_or(next_fn);
        let truncated_fn = close.is_none() && next_fn == rest.len();
        let body = &rest[body_start..body_end];
        let mut args = Map::new();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at)];
        if close.is_none() && !truncated_fn {
            // Another call follows without this one's `</function>`: recorded, not merged.
            fixes.push(Fix::at(FixKind::MissingCloseTag, at + body_end));
        }
        let mut truncated = truncated_fn;
        let mut i = 0;
        while let Some(pi) = body[i..].find("<parameter=") {
            let p_at = i + pi;
            let tag = prefix(&body[p_at..], 256);
            let Some(ke) = tag.find('>') else {
                truncated = true;
                break;
            };
            let key = body[p_at + "<parameter=".len()..p_at + ke]
                .trim()
                .to_owned();
            let v_start = p_at + ke + 1;
            let next_param = body[v_start..]
                .find("<parameter=")
                .map_or(body.len(), |e| v_start + e);
            let (v_end, next) = match body[v_start..next_param].find("</parameter>") {
                Some(e) => (v_start + e, v_start + e + "</parameter>".len()),
                None => {
                    // Missing close tag: the value runs to the next parameter or the end.
                    if next_param == body.len() && truncated_fn {
                        truncated = true;
                        fixes.push(Fix::at(
                            FixKind::TruncatedString,
                            at + body_start + next_param,
                        ));
                    } else {
                        fixes.push(Fix::at(
                            FixKind::MissingCloseTag,
                            at + body_start + next_param,
                        ));
                    }
                    (next_param, next_param)
                }
            };
            let raw_value = body[v_start..v_end]
                .strip_prefix('\n')
                .unwrap_or(&body[v_start..v_end]);
            let raw_value = raw_value.strip_suffix('\n').unwrap_or(raw_value);
            let value = self.xml_value(raw_value, at + body_start + v_start);
            if args.insert(key.clone(), value).is_some() {
                fixes.push(Fix::at(FixKind::DuplicateKey, at + body_start + p_at).with_detail(key));
            }
            i = next;
        }
        self.pos = at
            + body_end
            + if close.is_some() {
                "</function>".len()
            } else {
                0
            };
        if truncated && !fixes.iter().any(Fix::is_lossy) {
            fixes.push(Fix::at(FixKind::UnclosedBrackets, self.pos));
        }
        self.out.envelope_call = true;
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }

    /// A parameter's text: JSON when it is an object or array; otherwise the text
    /// itself, which the schema step types (`"5"` -> `5` for an integer).
    fn xml_value(&self, text: &str, base: usize) -> Value {
        let t = text.trim();
        if t.starts_with('{') || t.starts_with('[') {
            let mut p = Parser::new(t, base, self.opts.max_depth);
            if let Ok(v) = p.parse_value(Ctx::Top, 1) {
                p.skip_ws();
                if p.at_end() && !v.truncated && p.fixes.is_empty() {
                    return v.value;
                }
            }
        }
        Value::String(text.to_owned())
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

/// After `name(` (at `i` in `p`'s text): keyword arguments or `)` follow.
fn looks_like_call_args(p: &Parser<'_>, i: usize) -> bool {
    let j = ws_after(p.bytes(), i);
    p.bytes().get(j) == Some(&b')') || p.kwarg_at(j).is_some()
}

/// A `{` or `[` on the rest of the line from `from`.
fn line_has_bracket(b: &[u8], from: usize) -> bool {
    b[from..]
        .iter()
        .take(512)
        .take_while(|&&c| c != b'\n')
        .any(|&c| c == b'{' || c == b'[')
}
