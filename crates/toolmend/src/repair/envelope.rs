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
    parser::{Ctx, ParseError, Parser, is_ident},
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

const THINK: &[(&str, &str)] = &[
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<thought>", "</thought>"),
    ("<reflection>", "</reflection>"),
    ("[THINK]", "[/THINK]"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
];

const TOOL_TAGS: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<tool_calls>",
    "</tool_calls>",
    "<function_call>",
    "</function_call>",
    "<functioncall>",
    "</functioncall>",
    "<toolcall>",
    "</toolcall>",
];

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
                if first_error.is_none() {
                    first_error = Some(e);
                }
                if w.pos <= before {
                    w.pos = before + 1;
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

        for (open, close) in THINK {
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
                self.pos = match rest.find(close) {
                    Some(i) => at + i + close.len(),
                    // Unclosed: drop the tag, let the walk find the JSON after the reasoning.
                    None => at + open.len(),
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
                if self.out.docs.is_empty() {
                    self.prose_at = None;
                }
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
            match token {
                "python_tag" | "python_start" | "tool_call" | "tool_calls_begin"
                | "tool_call_begin" => {
                    self.out.envelope_call = true;
                    self.global(FixKind::PythonTagUnwrapped, at);
                }
                _ => self.global(FixKind::SpecialTokensStripped, at),
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
        for tag in TOOL_TAGS {
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
        if rest.starts_with("[TOOL_CALLS]") {
            self.out.envelope_call = true;
            self.global(FixKind::MistralToolCallsUnwrapped, at);
            self.pos = at + "[TOOL_CALLS]".len();
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
        if rest.starts_with("<function=") {
            return self.read_xml_function();
        }
        if rest.starts_with("```") {
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
                if pythonic_list {
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
                    if self.b.get(e) == Some(&b'(') && looks_like_call_args(self.b, e + 1) {
                        return self.read_pythonic(at);
                    }
                    if self.at_text_start()
                        && p.key_starts()
                        && !self.raw[e..].starts_with("://")
                        && value_on_same_line(self.b, at)
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
                        fatal: true,
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
    fn read_xml_function(&mut self) -> Result<(), ParseError> {
        let at = self.pos;
        let rest = self.rest();
        let head_end = rest.find('>').ok_or_else(|| ParseError {
            fatal: false,
            offset: at,
            reason: "unterminated <function=…> tag".to_owned(),
        })?;
        let name = rest["<function=".len()..head_end].trim().to_owned();
        let body_start = head_end + 1;
        let body_end = rest[body_start..]
            .find("</function>")
            .map_or(rest.len(), |i| body_start + i);
        let truncated_fn = body_end == rest.len();
        let body = &rest[body_start..body_end];
        let mut args = Map::new();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at)];
        let mut truncated = truncated_fn;
        let mut i = 0;
        while let Some(pi) = body[i..].find("<parameter=") {
            let p_at = i + pi;
            let Some(ke) = body[p_at..].find('>') else {
                truncated = true;
                break;
            };
            let key = body[p_at + "<parameter=".len()..p_at + ke]
                .trim()
                .to_owned();
            let v_start = p_at + ke + 1;
            let (v_end, next) = match body[v_start..].find("</parameter>") {
                Some(e) => (v_start + e, v_start + e + "</parameter>".len()),
                None => {
                    // Missing close tag: the value runs to the next parameter or the end.
                    let e = body[v_start..]
                        .find("<parameter=")
                        .map_or(body.len(), |e| v_start + e);
                    if e == body.len() && truncated_fn {
                        truncated = true;
                        fixes.push(Fix::at(FixKind::TruncatedString, at + body_start + e));
                    }
                    (e, e)
                }
            };
            let raw_value = body[v_start..v_end]
                .strip_prefix('\n')
                .unwrap_or(&body[v_start..v_end]);
            let raw_value = raw_value.strip_suffix('\n').unwrap_or(raw_value);
            args.insert(key, self.xml_value(raw_value, at + body_start + v_start));
            i = next;
        }
        self.pos = at + body_end + if truncated_fn { 0 } else { "</function>".len() };
        if truncated && !fixes.iter().any(|f| f.is_lossy()) {
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

/// After `name(`: keyword arguments or `)` follow.
fn looks_like_call_args(b: &[u8], i: usize) -> bool {
    let j = ws_after(b, i);
    if b.get(j) == Some(&b')') {
        return true;
    }
    let e = ident_end(b, j);
    e > j && {
        let k = ws_after(b, e);
        b.get(k) == Some(&b'=') && b.get(k + 1) != Some(&b'=')
    }
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}
