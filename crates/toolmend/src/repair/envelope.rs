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
    markers::{
        self, DEEPSEEK_CALL_BEGIN, DEEPSEEK_SEP, FENCE, GEMMA_CALL, GEMMA_CALL_START,
        HARMONY_CHANNEL, HARMONY_MESSAGE, KIMI_ARGUMENT_BEGIN, MISTRAL_TOOL_CALLS, STEP_CALL_BEGIN,
        STEP_INVOKE, STEP_SEP, THINKING_TAGS, TOOL_CALL_TAGS, XML_FUNCTION, XML_INVOKE,
    },
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
    /// Prose or a code fence stood between this document and the one before it (a draft
    /// and its correction are written apart; glued calls are not).
    pub apart: bool,
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
    "<end_function_call>",
    "</invoke>",
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
    /// Prose or a fence seen since the last document.
    gap: bool,
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

        if let Some(begin) = DEEPSEEK_CALL_BEGIN.iter().find(|m| rest.starts_with(*m)) {
            return self.read_deepseek(at + begin.len());
        }
        if rest.starts_with(HARMONY_CHANNEL) {
            return self.read_harmony_header(at + HARMONY_CHANNEL.len());
        }
        if let Some(after) = rest.strip_prefix(STEP_CALL_BEGIN) {
            // Step-3: `function<｜tool_sep｜>` before the invoke.
            self.out.envelope_call = true;
            self.global(FixKind::ToolCallTagUnwrapped, at);
            let t = after.trim_start();
            let skip = t
                .strip_prefix("function")
                .map(str::trim_start)
                .and_then(|r| r.strip_prefix(STEP_SEP))
                .map_or(0, |r| after.len() - r.len());
            self.pos = at + STEP_CALL_BEGIN.len() + skip;
            return Ok(());
        }
        if rest.starts_with("<｜")
            && let Some(end) = prefix(rest, 96).find("｜>")
        {
            // DeepSeek's fullwidth template tokens (`<｜tool▁calls▁begin｜>`, `<｜end▁of▁sentence｜>`).
            let token = &rest[..end + "｜>".len()];
            if token.contains("tool▁call") || token.contains("tool_call") {
                self.out.envelope_call = true;
                self.global(FixKind::ToolCallTagUnwrapped, at);
            } else {
                self.global(FixKind::SpecialTokensStripped, at);
            }
            self.pos = at + token.len();
            return Ok(());
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
                if token == "tool_call_begin" {
                    self.read_kimi_id();
                }
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
                // harmony: `<|start|>assistant to=functions.name<|channel|>…`.
                if let Some(name) = self.raw[self.pos..].strip_prefix(" to=") {
                    let n = name_len(name.as_bytes());
                    if n > 0 {
                        self.out.envelope_call = true;
                        self.pending_name = Some(strip_namespace(&name[..n]).to_owned());
                        self.pos += " to=".len() + n;
                    }
                }
            }
            return Ok(());
        }
        for tag in TOOL_CALL_TAGS {
            if rest.starts_with(tag) {
                self.out.envelope_call = true;
                self.global(FixKind::ToolCallTagUnwrapped, at);
                self.pos = at + tag.len();
                if *tag == "<tool_call>"
                    && let Some(name_end) = glm_name(self.b, self.pos)
                {
                    return self.read_glm(name_end);
                }
                return Ok(());
            }
        }
        if rest.starts_with(XML_INVOKE) {
            return self.read_invoke(&MINIMAX_INVOKE);
        }
        if rest.starts_with(STEP_INVOKE) {
            return self.read_invoke(&STEP_XML_INVOKE);
        }
        if rest.starts_with(GEMMA_CALL_START) {
            self.out.envelope_call = true;
            self.global(FixKind::ToolCallTagUnwrapped, at);
            self.pos = at + GEMMA_CALL_START.len();
            self.skip_ws();
            if self.rest().starts_with(GEMMA_CALL) {
                return self.read_gemma(self.pos);
            }
            return Ok(());
        }
        if rest.starts_with(GEMMA_CALL)
            && (self.at_text_start() || self.out.envelope_call)
            && gemma_head(self.b, at).is_some()
        {
            return self.read_gemma(at);
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
            } else if i > r && self.b.get(ws_after(self.b, i)) == Some(&b'{') {
                // Mistral v11 without `[ARGS]`: `[TOOL_CALLS]name{…}`.
                self.pending_name = Some(self.raw[r..i].to_owned());
                self.pos = i;
            }
            return Ok(());
        }
        if rest.starts_with(XML_FUNCTION) {
            return self.read_xml_function();
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
        let apart = std::mem::take(&mut self.gap) && !self.out.docs.is_empty();
        self.out.docs.push(Doc {
            value,
            fixes,
            name,
            apart,
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
        let head_end = tag_end(rest, at, "<function=…>")?;
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

    /// DeepSeek, after `<｜tool▁call▁begin｜>`: `function<｜tool▁sep｜>name\n```json…` (V3,
    /// R1) or `name<｜tool▁sep｜>{…}` (V3.1). The name is kept for the document that follows.
    fn read_deepseek(&mut self, from: usize) -> Result<(), ParseError> {
        self.out.envelope_call = true;
        self.global(FixKind::ToolCallTagUnwrapped, self.pos);
        self.pos = from;
        let head = prefix(&self.raw[from..], 256);
        let Some((sep_at, sep)) = DEEPSEEK_SEP
            .iter()
            .filter_map(|s| head.find(s).map(|i| (i, *s)))
            .min_by_key(|(i, _)| *i)
        else {
            return Ok(());
        };
        let kind = head[..sep_at].trim();
        let after = from + sep_at + sep.len();
        let (name, end) = if kind == "function" {
            let line = prefix(&self.raw[after..], 256);
            let e = line.find(['\n', '`', '{']).unwrap_or(line.len());
            (line[..e].trim(), after + e)
        } else {
            (kind, after)
        };
        if !name.is_empty() {
            self.pending_name = Some(strip_namespace(name).to_owned());
        }
        self.pos = end;
        Ok(())
    }

    /// Kimi K2, after `<|tool_call_begin|>`: `functions.name:0<|tool_call_argument_begin|>`.
    fn read_kimi_id(&mut self) {
        let head = prefix(self.rest(), 256);
        if let Some(i) = head.find(KIMI_ARGUMENT_BEGIN) {
            let id = strip_namespace(head[..i].trim());
            let name = match id.rsplit_once(':') {
                Some((n, index)) if index.bytes().all(|c| c.is_ascii_digit()) => n,
                _ => id,
            };
            if !name.is_empty() {
                self.pending_name = Some(name.to_owned());
            }
            self.pos += i + KIMI_ARGUMENT_BEGIN.len();
        }
    }

    /// gpt-oss harmony, after `<|channel|>`: the header up to `<|message|>`. `to=name`
    /// makes the message a call's arguments; the `analysis` channel is reasoning (skipped
    /// to its `<|end|>`); any other channel's message is text.
    fn read_harmony_header(&mut self, from: usize) -> Result<(), ParseError> {
        let at = self.pos;
        let head = prefix(&self.raw[from..], 256);
        let Some(m) = head.find(HARMONY_MESSAGE) else {
            self.global(FixKind::SpecialTokensStripped, at);
            self.pos = from;
            return Ok(());
        };
        let header = &head[..m];
        let body = from + m + HARMONY_MESSAGE.len();
        self.pos = body;
        if let Some(t) = header.find("to=") {
            let name = &header[t + 3..];
            let n = name_len(name.as_bytes());
            self.out.envelope_call = true;
            self.global(FixKind::ToolCallTagUnwrapped, at);
            if n > 0 {
                self.pending_name = Some(strip_namespace(&name[..n]).to_owned());
            }
        } else if header.trim_start().starts_with("analysis") {
            self.global(FixKind::ThinkingStripped, at);
            let b = self.b;
            let end = (body..b.len())
                .filter(|&i| b[i] == b'<' && b.get(i + 1) == Some(&b'|'))
                .find_map(|i| {
                    let r = &self.raw[i..];
                    if r.starts_with("<|end|>") {
                        Some(i + "<|end|>".len())
                    } else if ["<|start|>", HARMONY_CHANNEL, "<|call|>", "<|return|>"]
                        .iter()
                        .any(|t| r.starts_with(t))
                    {
                        Some(i)
                    } else {
                        None
                    }
                });
            self.pos = end.unwrap_or(b.len());
        } else {
            self.global(FixKind::SpecialTokensStripped, at);
        }
        Ok(())
    }

    /// GLM-4.5 / 4.6, after `<tool_call>`: `name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>`.
    fn read_glm(&mut self, (name_start, name_end): (usize, usize)) -> Result<(), ParseError> {
        let at = self.pos;
        let name = self.raw[name_start..name_end].to_owned();
        let rest = &self.raw[name_end..];
        let next = rest.find("<tool_call>").unwrap_or(rest.len());
        let close = rest[..next].find("</tool_call>");
        let body = &rest[..close.unwrap_or(next)];
        let truncated_call = close.is_none() && next == rest.len();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at)];
        let params = XmlParams {
            start: "<arg_key>",
            key_close: "</arg_key>",
            value_open: Some("<arg_value>"),
            close: "</arg_value>",
        };
        let args = self.read_params(&params, body, name_end, truncated_call, &mut fixes);
        self.pos = name_end + body.len() + close.map_or(0, |_| "</tool_call>".len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }

    /// MiniMax M2: `<invoke name="n"><parameter name="k">v</parameter></invoke>`; Step-3 the
    /// same in the `steptml:` namespace.
    fn read_invoke(&mut self, x: &InvokeTags) -> Result<(), ParseError> {
        let at = self.pos;
        let rest = self.rest();
        let head_end = tag_end(rest, at, x.what)?;
        let name = unquote(&rest[x.open.len()..head_end]).to_owned();
        let body_start = head_end + 1;
        let next = rest[body_start..]
            .find(x.open)
            .map_or(rest.len(), |i| body_start + i);
        let close = rest[body_start..next].find(x.close).map(|i| body_start + i);
        let body = &rest[body_start..close.unwrap_or(next)];
        let truncated_call = close.is_none() && next == rest.len();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at)];
        let params = XmlParams {
            start: x.param,
            key_close: ">",
            value_open: None,
            close: x.param_close,
        };
        let args = self.read_params(&params, body, at + body_start, truncated_call, &mut fixes);
        self.out.envelope_call = true;
        self.pos = at + body_start + body.len() + close.map_or(0, |_| x.close.len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }

    /// The parameters of an XML-style call body (`base`: the body's offset in the text).
    /// Each value is bounded by the next parameter, so the read stays linear.
    fn read_params(
        &self,
        p: &XmlParams,
        body: &str,
        base: usize,
        truncated_call: bool,
        fixes: &mut Vec<Fix>,
    ) -> Map<String, Value> {
        let mut args = Map::new();
        let mut truncated = false;
        let mut i = 0;
        while let Some(pi) = body[i..].find(p.start) {
            let k_start = i + pi + p.start.len();
            let tag = prefix(&body[k_start..], 256);
            let Some(ke) = tag.find(p.key_close) else {
                truncated = true;
                break;
            };
            let key = unquote(&tag[..ke]).to_owned();
            let mut v_start = k_start + ke + p.key_close.len();
            if let Some(open) = p.value_open {
                let ws = body[v_start..].len() - body[v_start..].trim_start().len();
                match body[v_start + ws..].strip_prefix(open) {
                    Some(_) => v_start += ws + open.len(),
                    None => {
                        // A key without its value: nothing to read for it.
                        fixes.push(Fix::at(FixKind::TruncatedMemberDropped, base + k_start));
                        i = v_start;
                        continue;
                    }
                }
            }
            let next_param = body[v_start..]
                .find(p.start)
                .map_or(body.len(), |e| v_start + e);
            let (v_end, next) = match body[v_start..next_param].find(p.close) {
                Some(e) => (v_start + e, v_start + e + p.close.len()),
                None => {
                    if next_param == body.len() && truncated_call {
                        truncated = true;
                        fixes.push(Fix::at(FixKind::TruncatedString, base + next_param));
                    } else {
                        fixes.push(Fix::at(FixKind::MissingCloseTag, base + next_param));
                    }
                    (next_param, next_param)
                }
            };
            let raw = &body[v_start..v_end];
            let raw = raw.strip_prefix('\n').unwrap_or(raw);
            let raw = raw.strip_suffix('\n').unwrap_or(raw);
            let value = self.xml_value(raw, base + v_start);
            if args.insert(key.clone(), value).is_some() {
                fixes.push(Fix::at(FixKind::DuplicateKey, base + k_start).with_detail(key));
            }
            i = next.max(i + 1);
        }
        if (truncated || truncated_call) && !fixes.iter().any(Fix::is_lossy) {
            fixes.push(Fix::at(FixKind::UnclosedBrackets, base + body.len()));
        }
        args
    }

    /// Gemma / FunctionGemma: `call:name{key:<escape>text<escape>,n:5,list:[…],obj:{…}}`.
    fn read_gemma(&mut self, at: usize) -> Result<(), ParseError> {
        let fail = |offset: usize| ParseError {
            fatal: false,
            offset,
            reason: "expected a Gemma call `call:name{key:value,…}`".to_owned(),
        };
        let (name_start, name_end) = gemma_head(self.b, at).ok_or_else(|| fail(at))?;
        let name = self.raw[name_start..name_end].to_owned();
        let mut pos = name_end;
        let value =
            gemma_value(self.raw, &mut pos, 0, self.opts.max_depth).ok_or_else(|| fail(pos))?;
        self.out.envelope_call = true;
        self.pos = pos;
        let fixes = vec![Fix::at(FixKind::PythonicCallRead, at).with_detail("gemma call:name{…}")];
        self.push(value, fixes, Some(name));
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

/// The tags of an `<invoke>`-style call (MiniMax M2, Step-3).
struct InvokeTags {
    open: &'static str,
    close: &'static str,
    param: &'static str,
    param_close: &'static str,
    /// How an error names the tag.
    what: &'static str,
}

const MINIMAX_INVOKE: InvokeTags = InvokeTags {
    open: XML_INVOKE,
    close: "</invoke>",
    param: "<parameter name=",
    param_close: "</parameter>",
    what: "<invoke name=…>",
};

const STEP_XML_INVOKE: InvokeTags = InvokeTags {
    open: STEP_INVOKE,
    close: "</steptml:invoke>",
    param: "<steptml:parameter name=",
    param_close: "</steptml:parameter>",
    what: "<steptml:invoke name=…>",
};

/// The tags of one XML-style parameter dialect.
struct XmlParams {
    /// What opens a parameter (its key follows).
    start: &'static str,
    /// What ends the key.
    key_close: &'static str,
    /// What opens the value after the key (GLM's `<arg_value>`), if anything.
    value_open: Option<&'static str>,
    /// What closes the value.
    close: &'static str,
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

/// GLM's call after `<tool_call>` at `from`: a tool name alone on its line, then
/// `<arg_key>` or `</tool_call>`. The name's range.
fn glm_name(b: &[u8], from: usize) -> Option<(usize, usize)> {
    let start = ws_after(b, from);
    let first = *b.get(start)?;
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return None;
    }
    let end = start + name_len(&b[start..]);
    if end - start > 64 {
        return None;
    }
    let next = ws_after(b, end);
    (b[next..].starts_with(b"<arg_key>") || b[next..].starts_with(b"</tool_call>"))
        .then_some((start, end))
}

/// Gemma's `call:name{` at `at`: the name's range (the `{` at its end).
fn gemma_head(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let start = at + markers::GEMMA_CALL.len();
    if !b.get(start)?.is_ascii_alphabetic() && b[start] != b'_' {
        return None;
    }
    let end = start + name_len(&b[start..]);
    (end - start <= 64 && b.get(end) == Some(&b'{')).then_some((start, end))
}

/// One Gemma value at `*pos` of `raw`: `<escape>text<escape>` (a string as it is), an
/// object `{key:value,…}`, a list `[…]`, or a bare word (a number, `true`, `false`,
/// `null`, else a string). `None` when it does not read (or nests deeper than `max`).
fn gemma_value(raw: &str, pos: &mut usize, depth: usize, max: usize) -> Option<Value> {
    const ESCAPE: &str = "<escape>";
    let b = raw.as_bytes();
    *pos = ws_after(b, *pos);
    if depth > max {
        return None;
    }
    let rest = &raw[*pos..];
    if let Some(r) = rest.strip_prefix(ESCAPE) {
        let end = r.find(ESCAPE)?;
        *pos += ESCAPE.len() + end + ESCAPE.len();
        return Some(Value::String(r[..end].to_owned()));
    }
    match *b.get(*pos)? {
        b'{' => {
            *pos += 1;
            let mut map = Map::new();
            loop {
                *pos = ws_after(b, *pos);
                match *b.get(*pos)? {
                    b'}' => {
                        *pos += 1;
                        return Some(Value::Object(map));
                    }
                    b',' => {
                        *pos += 1;
                        continue;
                    }
                    _ => {}
                }
                let key_len = b[*pos..]
                    .iter()
                    .take(256)
                    .position(|&c| matches!(c, b':' | b'}' | b','))?;
                if b[*pos + key_len] != b':' {
                    return None;
                }
                let key = unquote(&raw[*pos..*pos + key_len]).to_owned();
                *pos += key_len + 1;
                let v = gemma_value(raw, pos, depth + 1, max)?;
                map.insert(key, v);
            }
        }
        b'[' => {
            *pos += 1;
            let mut list = Vec::new();
            loop {
                *pos = ws_after(b, *pos);
                match *b.get(*pos)? {
                    b']' => {
                        *pos += 1;
                        return Some(Value::Array(list));
                    }
                    b',' => {
                        *pos += 1;
                        continue;
                    }
                    _ => list.push(gemma_value(raw, pos, depth + 1, max)?),
                }
            }
        }
        _ => {
            let len = b[*pos..]
                .iter()
                .position(|&c| matches!(c, b',' | b'}' | b']'))
                .unwrap_or(b.len() - *pos);
            let word = raw[*pos..*pos + len].trim();
            *pos += len;
            if word.is_empty() {
                return None;
            }
            Some(bare_word(word))
        }
    }
}

/// A bare word as a JSON literal when it is one (`5`, `-2.5`, `true`, `null`), else the
/// word as a string.
fn bare_word(word: &str) -> Value {
    match word {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        _ => word
            .parse::<i64>()
            .map(Value::from)
            .ok()
            .or_else(|| {
                word.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
            })
            .unwrap_or_else(|| Value::String(word.to_owned())),
    }
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
