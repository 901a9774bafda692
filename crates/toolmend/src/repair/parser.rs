//! The tolerant JSON parser: reads what a model meant, records every fix.
//!
//! One pass over the bytes, recursive descent with an explicit depth bound.
//! Where a character allows two readings (is this `"` the end of the string or
//! a quote inside it?) a bounded lookahead decides, so the whole parse stays
//! linear in the input length.

use serde_json::{Map, Number, Value};

use crate::{Fix, FixKind, Safety};

/// How far a lookahead may scan (whitespace, a key) before deciding.
const LOOKAHEAD: usize = 256;

/// Why the parser gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// Stop reading altogether (the depth bound), rather than look for JSON further on.
    pub fatal: bool,
    pub offset: usize,
    pub reason: String,
}

/// A parsed value and whether the text ran out inside it.
pub(crate) struct Parsed {
    pub value: Value,
    /// The input ended before the value was complete (truncation).
    pub truncated: bool,
    /// The value is a scalar (string, number, literal), for the array truncation rule.
    pub scalar: bool,
}

/// The delimiter a string was opened with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    Double,
    Single,
    /// `“` … `”`
    SmartDouble,
    /// `‘` … `’`
    SmartSingle,
}

/// What encloses the value being parsed: decides which characters end a bare word
/// or a string whose closing quote is in doubt.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ctx {
    Top,
    ObjectKey,
    ObjectValue,
    Array,
    /// Arguments of a pythonic call `f(a=1, b='x')`.
    Call,
}

pub(crate) struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pub pos: usize,
    /// Offset of `src` within the raw text, so fixes point into what the model sent.
    base: usize,
    max_depth: usize,
    pub fixes: Vec<Fix>,
    /// Kinds recorded once per text (see [`Parser::fix`]), as bits.
    seen: u128,
    /// Set where the text ends: true when it ended right after a complete object member
    /// with only `}` left to close (nothing was cut), false when it ended anywhere else.
    /// The enclosing containers read it to record the same kind of fix.
    clean_end: bool,
}

impl<'a> Parser<'a> {
    pub fn new(src: &'a str, base: usize, max_depth: usize) -> Self {
        Parser {
            src,
            b: src.as_bytes(),
            pos: 0,
            base,
            max_depth,
            fixes: Vec::new(),
            seen: 0,
            clean_end: false,
        }
    }

    fn fix(&mut self, kind: FixKind, at: usize) {
        // A style that runs through the whole text (quotes, bare keys) is one fix,
        // at its first place, not one per string.
        let pervasive = matches!(
            kind,
            FixKind::SingleQuotes
                | FixKind::SmartQuotes
                | FixKind::UnquotedKey
                | FixKind::ControlCharEscaped
                | FixKind::CommentRemoved
                | FixKind::InvalidEscapeKept
        );
        if pervasive
            || matches!(
                kind,
                FixKind::UnclosedBrackets | FixKind::ClosingBracesAdded
            )
        {
            // Once per text; a bit per kind keeps this O(1).
            let bit = 1u128 << (kind as u32 % 128);
            if self.seen & bit != 0 {
                return;
            }
            self.seen |= bit;
        }
        self.fixes.push(Fix::at(kind, self.base + at));
    }

    fn fix_detail(&mut self, kind: FixKind, at: usize, detail: impl Into<String>) {
        self.fixes
            .push(Fix::at(kind, self.base + at).with_detail(detail));
    }

    fn err(&self, at: usize, reason: impl Into<String>) -> ParseError {
        ParseError {
            fatal: false,
            offset: self.base + at,
            reason: reason.into(),
        }
    }

    fn depth_error(&self, at: usize) -> ParseError {
        ParseError {
            fatal: true,
            offset: self.base + at,
            reason: format!("nesting deeper than {} levels", self.max_depth),
        }
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.b
    }

    pub fn slice(&self, from: usize, to: usize) -> &'a str {
        &self.src[from..to]
    }

    /// A quote of any kind at the current position.
    pub fn quote_start(&self) -> bool {
        self.quote_at(self.pos).is_some()
    }

    /// A key (`"k":`, `k:`) at the current position.
    pub fn key_starts(&self) -> bool {
        self.key_at(self.pos)
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.b.len()
    }

    pub fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Skips whitespace and comments (`//`, `#`, `/* */`), recording comments.
    pub fn skip_ws(&mut self) {
        loop {
            // Plain whitespace first: the common case, without the checks below.
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
                self.pos += 1;
            }
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(0xC2) if self.b.get(self.pos + 1) == Some(&0xA0) => self.pos += 2, // nbsp
                Some(0xEF) if self.b.get(self.pos + 1..self.pos + 3) == Some(&[0xBB, 0xBF]) => {
                    self.pos += 3; // BOM
                }
                Some(b'/') if self.b.get(self.pos + 1) == Some(&b'/') => {
                    self.fix(FixKind::CommentRemoved, self.pos);
                    self.skip_line();
                }
                Some(b'/') if self.b.get(self.pos + 1) == Some(&b'*') => {
                    self.fix(FixKind::CommentRemoved, self.pos);
                    match find(&self.b[self.pos + 2..], b"*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        None => self.pos = self.b.len(),
                    }
                }
                Some(b'#') => {
                    self.fix(FixKind::CommentRemoved, self.pos);
                    self.skip_line();
                }
                _ => return,
            }
        }
    }

    fn skip_line(&mut self) {
        match memchr(b'\n', &self.b[self.pos..]) {
            Some(i) => self.pos += i + 1,
            None => self.pos = self.b.len(),
        }
    }

    /// Position after whitespace from `from`, without consuming or recording (bounded).
    /// Comments count as whitespace when whitespace precedes them (`"x"  # note`),
    /// so that `"#42"` stays text.
    fn ws_from(&self, mut i: usize) -> usize {
        let limit = (i + LOOKAHEAD).min(self.b.len());
        loop {
            while i < limit && matches!(self.b[i], b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
            }
            if i < limit && i > 0 && self.b[i - 1].is_ascii_whitespace() {
                let line_comment =
                    self.b[i] == b'#' || (self.b[i] == b'/' && self.b.get(i + 1) == Some(&b'/'));
                if line_comment {
                    while i < limit && self.b[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                if self.b[i] == b'/' && self.b.get(i + 1) == Some(&b'*') {
                    match find(&self.b[i + 2..limit.max(i + 2)], b"*/") {
                        Some(k) => i += 2 + k + 2,
                        None => return limit,
                    }
                    continue;
                }
            }
            return i;
        }
    }

    /// True if a quote of any kind starts at `i`.
    fn quote_at(&self, i: usize) -> Option<(Quote, usize)> {
        match self.b.get(i)? {
            b'"' => Some((Quote::Double, 1)),
            b'\'' => Some((Quote::Single, 1)),
            0xE2 if self.b.get(i + 1) == Some(&0x80) => match self.b.get(i + 2)? {
                0x9C | 0x9D => Some((Quote::SmartDouble, 3)),
                0x98 | 0x99 => Some((Quote::SmartSingle, 3)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Does a key (`"k":`, `'k':`, `k:`) start at `i`? Bounded lookahead.
    fn key_at(&self, i: usize) -> bool {
        let limit = (i + LOOKAHEAD).min(self.b.len());
        if let Some((q, n)) = self.quote_at(i) {
            let mut j = i + n;
            while j < limit {
                if let Some((q2, n2)) = self.quote_at(j)
                    && closes(q, q2)
                {
                    let k = self.ws_from(j + n2);
                    return self.b.get(k) == Some(&b':');
                }
                if self.b[j] == b'\n' || (self.b[j] == b'\\' && q != Quote::Double) {
                    return false;
                }
                j += if self.b[j] == b'\\' { 2 } else { 1 };
            }
            // The text ends inside the key: still a key (cut off), unless what follows the
            // quote holds closing brackets (`"}]}`): a key cut off does not hold the
            // closers of its own containers; they close them, after a quote of the value.
            j >= self.b.len() && !self.b[i + n..].iter().any(|c| matches!(c, b'}' | b']'))
        } else {
            let j = self.key_token_end(i, limit);
            if j == i {
                return false;
            }
            let k = self.ws_from(j);
            k >= self.b.len() || self.b.get(k) == Some(&b':')
        }
    }

    /// Does a value start at `i` (for deciding whether a quote ended a string)?
    fn value_start_at(&self, i: usize) -> bool {
        match self.b.get(i) {
            Some(b'{' | b'[' | b'-' | b'0'..=b'9') => true,
            Some(_) => {
                self.quote_at(i).is_some()
                    || ["true", "false", "null", "True", "False", "None"]
                        .iter()
                        .any(|w| self.b[i..].starts_with(w.as_bytes()))
            }
            None => false,
        }
    }

    // ------------------------------------------------------------------ values

    pub fn parse_value(&mut self, ctx: Ctx, depth: usize) -> Result<Parsed, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let Some(c) = self.peek() else {
            return Err(self.err(start, "the text ends where a value should start"));
        };
        match c {
            b'{' => {
                if depth >= self.max_depth {
                    return Err(self.depth_error(start));
                }
                self.pos += 1;
                self.parse_object(depth + 1, false)
            }
            b'[' => {
                if depth >= self.max_depth {
                    return Err(self.depth_error(start));
                }
                self.pos += 1;
                self.parse_array(depth + 1)
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' => self.parse_number_or_word(ctx),
            _ => {
                if let Some((q, n)) = self.quote_at(start) {
                    if n == 1 && self.b.get(start + 1..start + 3) == Some(&[c, c]) {
                        // `"""…"""`: valid JSON never has three quotes where a value starts.
                        self.pos += 3;
                        let (s, truncated) = self.parse_triple(c, start, ctx);
                        return Ok(scalar(Value::String(s), truncated));
                    }
                    self.pos += n;
                    let (s, truncated) = self.parse_string(q, ctx, start)?;
                    Ok(Parsed {
                        value: Value::String(s),
                        truncated,
                        scalar: true,
                    })
                } else {
                    self.parse_word(ctx)
                }
            }
        }
    }

    /// Parses object members after the `{` (or from the start when `braceless`).
    pub fn parse_object(&mut self, depth: usize, braceless: bool) -> Result<Parsed, ParseError> {
        let mut map = Map::new();
        let mut expect_member = true; // after `{` or `,`
        loop {
            self.skip_ws();
            let here = self.pos;
            let Some(c) = self.peek() else {
                // After a complete member (no `,` or `{` waiting for one) nothing was cut:
                // only the closing braces are missing.
                self.clean_end = !expect_member && self.ends_on_complete_value();
                if !braceless {
                    self.fix(self.closing_kind(), here);
                }
                return Ok(container(Value::Object(map), !braceless));
            };
            match c {
                b'}' => {
                    self.pos += 1;
                    return Ok(container(Value::Object(map), false));
                }
                b']' => {
                    self.fix(FixKind::MismatchedBracket, here);
                    self.pos += 1;
                    return Ok(container(Value::Object(map), false));
                }
                b',' => {
                    self.pos += 1;
                    if expect_member {
                        // `{,` or `,,`: an empty member.
                        self.fix(FixKind::TrailingComma, here);
                    } else {
                        expect_member = true;
                        let next = self.next_significant();
                        if matches!(next, Some(b'}' | b']')) {
                            self.fix(FixKind::TrailingComma, here);
                        }
                    }
                    continue;
                }
                _ => {}
            }
            if !expect_member {
                if self.key_at(here) {
                    self.fix(FixKind::MissingComma, here);
                } else {
                    // Something that is neither a member nor a separator.
                    self.skip_garbage(here);
                    continue;
                }
            }
            expect_member = false;
            // ---- key
            let key_start = self.pos;
            let key = if let Some((q, n)) = self.quote_at(key_start) {
                self.pos += n;
                let (k, truncated) = self.parse_string(q, Ctx::ObjectKey, key_start)?;
                if truncated {
                    self.fix_detail(FixKind::TruncatedMemberDropped, key_start, k);
                    return Ok(self.truncated_object(map));
                }
                k
            } else if is_ident(c) || c == b'@' {
                let end = self.key_token_end(key_start, self.b.len());
                let k = self.src[key_start..end].to_owned();
                self.pos = end;
                if self.at_end() {
                    self.fix_detail(FixKind::TruncatedMemberDropped, key_start, k);
                    return Ok(self.truncated_object(map));
                }
                self.fix(FixKind::UnquotedKey, key_start);
                k
            } else {
                self.skip_garbage(key_start);
                expect_member = true;
                continue;
            };
            // ---- colon
            self.skip_ws();
            match self.peek() {
                Some(b':') => self.pos += 1,
                Some(b'=') => {
                    self.fix(FixKind::MissingColon, self.pos);
                    self.pos += 1;
                }
                None => {
                    self.fix_detail(FixKind::TruncatedMemberDropped, key_start, key);
                    return Ok(self.truncated_object(map));
                }
                Some(b',' | b'}') => {
                    // A key with nothing after it.
                    self.fix_detail(FixKind::MissingValueDropped, key_start, key);
                    continue;
                }
                Some(_) => self.fix(FixKind::MissingColon, self.pos),
            }
            // ---- value
            self.skip_ws();
            match self.peek() {
                None => {
                    self.fix_detail(FixKind::TruncatedMemberDropped, key_start, key);
                    return Ok(self.truncated_object(map));
                }
                Some(b',' | b'}' | b']') => {
                    // `]` here closes the object (recorded as a mismatched bracket next).
                    self.fix_detail(FixKind::MissingValueDropped, key_start, key);
                    continue;
                }
                _ => {}
            }
            let parsed = self.parse_value(Ctx::ObjectValue, depth)?;
            match map.entry(key) {
                serde_json::map::Entry::Vacant(e) => {
                    e.insert(parsed.value);
                }
                serde_json::map::Entry::Occupied(mut e) => {
                    let k = e.key().clone();
                    let kind = Fix::duplicate_key(e.get(), &parsed.value);
                    let first = e.insert(parsed.value);
                    // The first value is replaced: named in the detail, not lost silently.
                    let was = cut(&first.to_string(), 40);
                    self.fix_detail(kind, key_start, format!("{k} (was {was})"));
                }
            }
            if parsed.truncated {
                // A cut scalar (string, literal) is never a clean end.
                self.clean_end &= !parsed.scalar;
                self.fix(self.closing_kind(), self.pos);
                return Ok(container(Value::Object(map), true));
            }
        }
    }

    /// The fix for brackets closed at the end of the text: harmless when the text ended
    /// cleanly inside objects only and nothing before needed a guess (a string read past
    /// an inner quote may really be a cut member), lossy otherwise.
    fn closing_kind(&self) -> FixKind {
        if self.clean_end && self.fixes.iter().all(|f| f.safety() == Safety::Safe) {
            FixKind::ClosingBracesAdded
        } else {
            FixKind::UnclosedBrackets
        }
    }

    /// Whether the text's last significant bytes end a value for sure: a digit, a closing
    /// quote or bracket, or a whole literal (`1.`, `1e` or `-` are numbers cut short).
    fn ends_on_complete_value(&self) -> bool {
        let text = self.src.trim_end().as_bytes();
        match text.last() {
            Some(b'0'..=b'9' | b'"' | b'\'' | b'}' | b']') => true,
            Some(_) => [
                b"true".as_slice(),
                b"false",
                b"null",
                b"True",
                b"False",
                b"None",
            ]
            .iter()
            .any(|lit| text.ends_with(lit)),
            None => false,
        }
    }

    fn truncated_object(&mut self, map: Map<String, Value>) -> Parsed {
        self.clean_end = false;
        self.fix(FixKind::UnclosedBrackets, self.pos);
        container(Value::Object(map), true)
    }

    fn parse_array(&mut self, depth: usize) -> Result<Parsed, ParseError> {
        let mut items = Vec::new();
        let mut expect_item = true;
        loop {
            self.skip_ws();
            let here = self.pos;
            let Some(c) = self.peek() else {
                // An open array may have had more elements.
                self.clean_end = false;
                self.fix(FixKind::UnclosedBrackets, here);
                return Ok(container(Value::Array(items), true));
            };
            match c {
                b']' => {
                    self.pos += 1;
                    return Ok(container(Value::Array(items), false));
                }
                b'}' => {
                    self.fix(FixKind::MismatchedBracket, here);
                    self.pos += 1;
                    return Ok(container(Value::Array(items), false));
                }
                b',' => {
                    self.pos += 1;
                    if expect_item || matches!(self.next_significant(), Some(b']' | b'}')) {
                        self.fix(FixKind::TrailingComma, here);
                    }
                    expect_item = true;
                    continue;
                }
                _ => {}
            }
            if !expect_item {
                if self.value_start_at(here) {
                    self.fix(FixKind::MissingComma, here);
                } else {
                    self.skip_garbage(here);
                    continue;
                }
            }
            expect_item = false;
            let parsed = self.parse_value(Ctx::Array, depth)?;
            if parsed.truncated {
                if parsed.scalar {
                    // Inside an array only complete elements are kept.
                    self.fix(FixKind::TruncatedMemberDropped, here);
                } else {
                    items.push(parsed.value);
                }
                self.clean_end = false;
                self.fix(FixKind::UnclosedBrackets, self.pos);
                return Ok(container(Value::Array(items), true));
            }
            items.push(parsed.value);
        }
    }

    /// The next byte after whitespace and comments, without consuming it.
    fn next_significant(&mut self) -> Option<u8> {
        self.skip_ws();
        self.peek()
    }

    /// Skips one run of characters that cannot continue the container, and records it.
    /// The skipped text is the fix's detail (cut to 40 characters): dropped, not silently.
    fn skip_garbage(&mut self, from: usize) {
        let mut i = from;
        // Always make progress by at least one character.
        i += utf8_len(self.b[i]).min(self.b.len() - i);
        while i < self.b.len()
            && !matches!(self.b[i], b',' | b'}' | b']' | b'{' | b'[' | b'"' | b'\n')
        {
            i += 1;
        }
        let skipped = self.src.get(from..i).unwrap_or("").trim_end();
        self.fix_detail(FixKind::GarbageSkipped, from, cut(skipped, 40));
        self.pos = i;
    }

    /// Where a bare key ends: an identifier, or a number or `null` written as a key
    /// (`{5: "b", 2.17: "e", null: 1}`: JSON keys are strings, so they are read as the
    /// text `"5"`, `"2.17"`, `"null"`). A `.` continues the key (`2.17`, `v1.2`, `a.b`);
    /// an `@` may start it (JSON-LD's `@type`, `@id`).
    fn key_token_end(&self, mut i: usize, limit: usize) -> usize {
        while i < limit && (is_ident(self.b[i]) || matches!(self.b[i], b'.' | b'@')) {
            i += 1;
        }
        i
    }

    fn ident_end(&self, mut i: usize) -> usize {
        while i < self.b.len() && is_ident(self.b[i]) {
            i += 1;
        }
        i
    }

    // ----------------------------------------------------------------- strings

    /// Parses a string after its opening quote; returns it and whether the text ended inside it.
    fn parse_string(
        &mut self,
        q: Quote,
        ctx: Ctx,
        open_at: usize,
    ) -> Result<(String, bool), ParseError> {
        match q {
            Quote::Single => self.fix(FixKind::SingleQuotes, open_at),
            Quote::SmartDouble | Quote::SmartSingle => self.fix(FixKind::SmartQuotes, open_at),
            Quote::Double => {}
        }
        let mut out = String::new();
        let start = self.pos;
        let mut run = self.pos; // start of the pending run of plain bytes
        // What the string's escapes show, so that they are read one way within it.
        let mut seen = Escapes::default();
        // The quotes kept inside this string (each followed by what cannot follow a value).
        let mut kept_quotes = 0usize;
        loop {
            // Fast scan to the next interesting byte (one table lookup per byte).
            self.pos += self.b[self.pos..]
                .iter()
                .position(|&c| STRING_STOP[c as usize])
                .unwrap_or(self.b.len() - self.pos);
            let Some(c) = self.peek() else {
                out.push_str(&self.src[run..]);
                self.fix(FixKind::TruncatedString, self.pos);
                self.escapes_as_written(&mut out, start, self.pos, &seen);
                return Ok((out, true));
            };
            match c {
                b'\\' => {
                    seen.note(self.b, self.pos);
                    if q == Quote::Double && self.b.get(self.pos + 1) == Some(&b'\'') {
                        seen.apostrophe_at.get_or_insert(self.pos);
                    }
                    out.push_str(&self.src[run..self.pos]);
                    if !self.read_escape(&mut out, false) {
                        self.escapes_as_written(&mut out, start, self.pos, &seen);
                        return Ok((out, true));
                    }
                    run = self.pos;
                }
                0xE2 => {
                    let here = self.pos;
                    if let Some((q2, n)) = self.quote_at(here)
                        && closes(q, q2)
                        && self.ends_string(here + n, ctx)
                    {
                        out.push_str(&self.src[run..here]);
                        self.pos = here + n;
                        self.escapes_as_written(&mut out, start, here, &seen);
                        return Ok((out, false));
                    }
                    self.pos += 1;
                }
                b'"' | b'\'' => {
                    let here = self.pos;
                    let this = if c == b'"' {
                        Quote::Double
                    } else {
                        Quote::Single
                    };
                    if closes(q, this) {
                        if (q == Quote::Double
                            && ctx != Ctx::Call
                            && self.strictly_closes(here, ctx))
                            || self.ends_string(here + 1, ctx)
                        {
                            out.push_str(&self.src[run..here]);
                            self.pos = here + 1;
                            self.escapes_as_written(&mut out, start, here, &seen);
                            if kept_quotes % 2 == 1 && self.clean_boundary(here + 1, ctx) {
                                // An odd number of quotes kept inside, and the one that
                                // closes leaves a clean parse: it may be the last of them,
                                // its own closing quote missing (`"echo "done", "b"`:
                                // `echo "done` or `echo "done"`).
                                self.fix(FixKind::InnerQuotesAmbiguous, here);
                            }
                            return Ok((out, false));
                        }
                        if q == Quote::Double {
                            kept_quotes += 1;
                            self.fix(FixKind::InnerQuoteEscaped, here);
                        }
                    }
                    self.pos += 1;
                }
                _ => {
                    // A raw control character: keep it, as its escape would mean.
                    self.fix(FixKind::ControlCharEscaped, self.pos);
                    seen.raw_newline |= c == b'\n';
                    self.pos += 1;
                }
            }
        }
    }

    /// A string whose text shows that its backslashes were not escaped reads its
    /// valid-looking escapes as written too ([`kept_as_written`] says which): the string
    /// `src[start..end]` is read again (one more pass over this string: linear).
    fn escapes_as_written(&mut self, out: &mut String, start: usize, end: usize, seen: &Escapes) {
        let proof = seen.raw_newline || seen.invalid;
        let apostrophes = proof && seen.apostrophe_at.is_some();
        if seen.lookalike_at.is_none() && !apostrophes {
            return;
        }
        let text = &self.src[start..end];
        // Without proof, only a drive path (`C:\\new`) can hold one.
        if !seen.raw_newline && !seen.invalid && !text.contains(":\\") {
            return;
        }
        let b = text.as_bytes();
        let mut path = PathCache::default();
        let mut literal = String::with_capacity(text.len());
        let mut kept: Vec<u8> = Vec::new();
        let mut kept_at = None;
        let mut rest = 0;
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'\\' {
                i += 1;
                continue;
            }
            literal.push_str(&text[rest..i]);
            let after = &text[i + 1..];
            let mut chars = after.chars();
            match chars.next() {
                Some('\'') if apostrophes => {
                    literal.push_str("\\'");
                    kept_at.get_or_insert(start + i);
                    if !kept.contains(&b'\'') {
                        kept.push(b'\'');
                    }
                    i += 2;
                }
                Some(c @ ('"' | '\\' | '/' | '\'')) => {
                    literal.push(c);
                    i += 2;
                }
                Some('u') => match unicode_escape(after) {
                    Some((ch, n)) => {
                        literal.push(ch);
                        i += 1 + n;
                    }
                    None => {
                        literal.push('\\');
                        i += 1;
                    }
                },
                Some(c @ ('b' | 'f' | 'n' | 'r' | 't')) => {
                    if kept_as_written(b, i, seen, &mut path) {
                        literal.push('\\');
                        literal.push(c);
                        kept_at.get_or_insert(start + i);
                        if !kept.contains(&(c as u8)) {
                            kept.push(c as u8);
                        }
                    } else {
                        literal.push(match c {
                            'b' => '\u{8}',
                            'f' => '\u{c}',
                            'n' => '\n',
                            'r' => '\r',
                            _ => '\t',
                        });
                    }
                    i += 2;
                }
                Some(_) => {
                    literal.push('\\');
                    i += 1;
                }
                // A backslash cut off at the end: dropped, as the first reading did.
                None => i += 1,
            }
            rest = i;
        }
        let Some(at) = kept_at else {
            return;
        };
        literal.push_str(&text[rest.min(text.len())..]);
        *out = literal;
        self.fix_detail(
            FixKind::EscapesKeptLiteral,
            at,
            format!(
                "the string's backslashes were not escaped (an invalid escape, a raw line \
                 break or a Windows path in it): {} kept as written",
                kept.iter()
                    .map(|&c| format!("\\{}", c as char))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        );
    }

    /// Reads the escape whose backslash is at `pos` into `out`; false (and a lossy fix)
    /// when the text ends right after the backslash.
    fn read_escape(&mut self, out: &mut String, python: bool) -> bool {
        let esc_at = self.pos;
        self.pos += 1;
        let Some(e) = self.peek() else {
            self.fix(FixKind::TruncatedString, esc_at);
            return false;
        };
        self.pos += 1;
        match e {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'\'' => out.push('\''),
            b'u' => self.parse_unicode_escape(out, esc_at),
            b'x' => self.parse_hex_escape(out, esc_at),
            // A backslash before a raw line break: Python and JavaScript read a line
            // continuation and drop both, JSON has no such escape. In a triple-quoted
            // (Python) string Python's reading holds; elsewhere both are kept as written
            // (a shell command's `\` at a line end), never dropped silently.
            b'\n' if python => {}
            b'\n' => {
                self.fix(FixKind::InvalidEscapeKept, esc_at);
                self.fix(FixKind::ControlCharEscaped, esc_at + 1);
                out.push_str("\\\n");
            }
            _ => {
                // `\w`, `\d`, a Windows path: the backslash was meant literally.
                self.fix(FixKind::InvalidEscapeKept, esc_at);
                out.push('\\');
                self.pos -= 1; // re-read the character as content
            }
        }
        true
    }

    /// Parses a Python triple-quoted string after its opening `"""` (or `'''`), as Python
    /// reads it: everything up to the closing triple is content, inner quotes and raw line
    /// breaks included (no fix for those: they are legal there); escapes mean what they
    /// mean in a Python string. One linear scan; the text ending first is a truncation.
    ///
    /// Where the end is a guess, the reading is marked `triple_quoted_ambiguous` (lossy):
    /// a closing run of five or more quotes (`"""a"""""` is `a""` or, as Python joins
    /// adjacent strings, `a`), or a closer followed by what cannot follow a value in `ctx`
    /// (`"""print("""hi""")"""`: the string holds a triple quote, and where it ends is
    /// unknown). The value is kept as read, for display; it is not run.
    fn parse_triple(&mut self, qb: u8, open_at: usize, ctx: Ctx) -> (String, bool) {
        self.fix(FixKind::TripleQuotedString, open_at);
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            self.pos += self.b[self.pos..]
                .iter()
                .position(|&c| c == qb || c == b'\\')
                .unwrap_or(self.b.len() - self.pos);
            let Some(c) = self.peek() else {
                out.push_str(&self.src[run..]);
                self.fix(FixKind::TruncatedString, self.pos);
                return (out, true);
            };
            if c == b'\\' {
                out.push_str(&self.src[run..self.pos]);
                if !self.read_escape(&mut out, true) {
                    return (out, true);
                }
                run = self.pos;
                continue;
            }
            let first = self.pos;
            let mut end = first;
            while self.b.get(end) == Some(&qb) {
                end += 1;
            }
            self.pos = end;
            if end - first >= 3 {
                // The last three close the string. Python would stop at the first three;
                // a model writing `"""say "hi""""` meant the quote before the closer as
                // content, so it is kept (a chosen reading: recorded). Two or more quotes
                // before the closer have a second reading (`"""a"""""`: `a` joined with
                // `""`), and a closer that nothing plausible follows may be inner.
                let close = end - 3;
                if close > first {
                    self.fix(FixKind::InnerQuoteEscaped, first);
                }
                if close > first + 1 {
                    self.fix_detail(
                        FixKind::TripleQuotedAmbiguous,
                        first,
                        format!("{} quotes in a row end the string", end - first),
                    );
                } else if !self.ends_string(end, ctx) {
                    self.fix_detail(
                        FixKind::TripleQuotedAmbiguous,
                        close,
                        "text that cannot follow a value comes after the closing triple quote",
                    );
                }
                out.push_str(&self.src[run..close]);
                return (out, false);
            }
        }
    }

    /// For a `"` in a `"` string: true when what follows is plainly structural (`}` `]`,
    /// end of text; `:` after a key), the common case, decided without a lookahead.
    /// A `,` is not enough: `"She said "yes", and left"` needs the lookahead.
    fn strictly_closes(&self, at: usize, ctx: Ctx) -> bool {
        match self.b.get(at + 1) {
            None | Some(b'}' | b']') => true,
            Some(b':') => ctx == Ctx::ObjectKey,
            _ => false,
        }
    }

    /// Is what follows a string closed just before `after` the clean continuation of a
    /// member's value or an array's element (its own container's closer, or a `,` and the
    /// next key or element)? Not a bracket of the other kind, not a missing comma.
    fn clean_boundary(&self, after: usize, ctx: Ctx) -> bool {
        let i = self.ws_from(after);
        match (ctx, self.b.get(i)) {
            (Ctx::ObjectValue, Some(b'}')) | (Ctx::Array, Some(b']')) => true,
            (Ctx::ObjectValue, Some(b',')) => self.key_at(self.ws_from(i + 1)),
            (Ctx::Array, Some(b',')) => self.value_start_at(self.ws_from(i + 1)),
            _ => false,
        }
    }

    /// Decides whether a closing quote just before `after` ends the string, by what follows.
    fn ends_string(&self, after: usize, ctx: Ctx) -> bool {
        let i = self.ws_from(after);
        let Some(&c) = self.b.get(i) else {
            return true;
        };
        match ctx {
            Ctx::ObjectKey => c == b':' || (i > after && self.key_at(i)),
            Ctx::ObjectValue => match c {
                b'}' | b']' => true,
                b',' => {
                    let j = self.ws_from(i + 1);
                    j >= self.b.len() || matches!(self.b[j], b'}' | b']') || self.key_at(j)
                }
                // A missing comma: the next member's key follows.
                _ => self.key_at(i) && (i > after || self.quote_at(i).is_some()),
            },
            Ctx::Array => match c {
                b']' | b'}' => true,
                b',' => {
                    let j = self.ws_from(i + 1);
                    j >= self.b.len() || matches!(self.b[j], b']') || self.value_start_at(j)
                }
                // A missing comma between two strings (`["a"\n  "b"]`, `["a" "b"]`): after
                // whitespace, a whole string element starts. Two strings, not one with
                // quotes inside (`["say "hi" now"]` has no whitespace-then-element).
                _ => i > after && self.string_element_at(i),
            },
            Ctx::Call => match c {
                b')' => true,
                b',' => {
                    let j = self.ws_from(i + 1);
                    j >= self.b.len() || self.b[j] == b')' || self.kwarg_at(j).is_some()
                }
                _ => false,
            },
            Ctx::Top => matches!(c, b'}' | b']' | b',' | b'{' | b'<' | b'`') || i > after,
        }
    }

    /// Does a whole string element of an array start at `i`: a quoted string closed on
    /// its line and followed by `,`, `]`, the end of the text, or (after whitespace)
    /// another string? Bounded lookahead.
    fn string_element_at(&self, i: usize) -> bool {
        let Some((q, n)) = self.quote_at(i) else {
            return false;
        };
        let limit = (i + LOOKAHEAD).min(self.b.len());
        let mut j = i + n;
        while j < limit {
            match self.b[j] {
                b'\\' => j += 2,
                b'\n' => return false,
                _ => {
                    if let Some((q2, n2)) = self.quote_at(j)
                        && closes(q, q2)
                    {
                        let k = self.ws_from(j + n2);
                        return match self.b.get(k) {
                            None | Some(b',' | b']') => true,
                            Some(_) => k > j + n2 && self.quote_at(k).is_some(),
                        };
                    }
                    j += 1;
                }
            }
        }
        false
    }

    /// Does a pythonic keyword argument `name=` start at `i`? Returns where the name
    /// ends and where its value starts.
    pub fn kwarg_at(&self, i: usize) -> Option<(usize, usize)> {
        let mut end = i;
        while end < self.b.len() && (self.b[end].is_ascii_alphanumeric() || self.b[end] == b'_') {
            end += 1;
        }
        if end == i {
            return None;
        }
        let k = self.ws_from(end);
        (self.b.get(k) == Some(&b'=') && self.b.get(k + 1) != Some(&b'=')).then_some((end, k + 1))
    }

    fn parse_unicode_escape(&mut self, out: &mut String, esc_at: usize) {
        let Some(hi) = self.hex4(self.pos) else {
            self.fix(FixKind::InvalidEscapeKept, esc_at);
            out.push_str("\\u");
            return;
        };
        self.pos += 4;
        if (0xD800..0xDC00).contains(&hi) {
            if self.b.get(self.pos..self.pos + 2) == Some(b"\\u")
                && let Some(lo) = self.hex4(self.pos + 2)
                && (0xDC00..0xE000).contains(&lo)
            {
                self.pos += 6;
                let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                return;
            }
            // A lone surrogate has no character: the escape is kept as written
            // (`\ud83d`), not replaced by U+FFFD, so no text the model sent is lost.
            self.fix(FixKind::InvalidEscapeKept, esc_at);
            out.push_str(&self.src[esc_at..self.pos]);
            return;
        }
        if (0xDC00..0xE000).contains(&hi) {
            self.fix(FixKind::InvalidEscapeKept, esc_at);
            out.push_str(&self.src[esc_at..self.pos]);
            return;
        }
        out.push(char::from_u32(hi).unwrap_or('\u{FFFD}'));
    }

    /// Python's `\xNN`.
    fn parse_hex_escape(&mut self, out: &mut String, esc_at: usize) {
        let hex = self
            .src
            .get(self.pos..self.pos + 2)
            .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
        match hex
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32)
        {
            Some(c) => {
                self.pos += 2;
                out.push(c);
            }
            None => {
                self.fix(FixKind::InvalidEscapeKept, esc_at);
                out.push_str("\\x");
            }
        }
    }

    fn hex4(&self, i: usize) -> Option<u32> {
        let s = self.src.get(i..i + 4)?;
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(s, 16).ok()
    }

    // ----------------------------------------------------- numbers and words

    fn parse_number_or_word(&mut self, ctx: Ctx) -> Result<Parsed, ParseError> {
        let start = self.pos;
        let end = self.token_end(start, ctx);
        let tok = self.src[start..end].trim_end();
        if tok == "-Infinity" || tok == "+Infinity" || tok == "-inf" {
            self.pos = start + tok.len();
            self.fix_detail(FixKind::NonFiniteNumber, start, tok);
            return Ok(scalar(Value::Null, false));
        }
        // The number itself ends at whitespace; what follows decides whether it was
        // a number (`1 2` in a list: a missing comma) or text (`12 apples`).
        let num_end = tok
            .bytes()
            .position(|c| c.is_ascii_whitespace())
            .map_or(start + tok.len(), |i| start + i);
        let num_tok = &self.src[start..num_end];
        let followed_ok = num_end == start + tok.len() || {
            let j = self.ws_from(num_end);
            match ctx {
                Ctx::Array => self.value_start_at(j),
                Ctx::ObjectValue => self.key_at(j),
                _ => false,
            }
        };
        if followed_ok && let Some(n) = parse_number(num_tok) {
            let tok = num_tok;
            self.pos = start + tok.len();
            if n.normalized {
                self.fix_detail(FixKind::NumberNormalized, start, tok);
            }
            // A number cut off by the end of text is kept; its closing brackets are lossy anyway.
            return Ok(scalar(n.value, false));
        }
        self.parse_word(ctx)
    }

    /// Where a bare token (number or word) ends.
    fn token_end(&self, start: usize, ctx: Ctx) -> usize {
        let mut i = start;
        while i < self.b.len() {
            let c = self.b[i];
            let stop = match c {
                b',' | b'}' | b']' | b'\n' | b'\r' => true,
                b')' => ctx == Ctx::Call,
                b':' => ctx == Ctx::ObjectKey,
                b'"' => true,
                // A comment after a bare token: `12  # optional`.
                // `#` only before whitespace: `#42` in `[see #42, x]` is text.
                b'#' | b'/' => {
                    i > start
                        && self.b[i - 1].is_ascii_whitespace()
                        && matches!(
                            (c, self.b.get(i + 1)),
                            (b'#', None | Some(b' ' | b'\t' | b'\n' | b'\r' | b'#'))
                                | (b'/', Some(b'/' | b'*'))
                        )
                }
                _ => false,
            };
            if stop {
                break;
            }
            i += 1;
        }
        i
    }

    fn parse_word(&mut self, ctx: Ctx) -> Result<Parsed, ParseError> {
        let start = self.pos;
        let id_end = self.ident_end(start);
        let word = &self.src[start..id_end];
        let literal = match word {
            "true" => Some((Value::Bool(true), None)),
            "false" => Some((Value::Bool(false), None)),
            "null" => Some((Value::Null, None)),
            "True" => Some((Value::Bool(true), Some(FixKind::PythonLiteral))),
            "False" => Some((Value::Bool(false), Some(FixKind::PythonLiteral))),
            "None" | "undefined" | "nil" => Some((Value::Null, Some(FixKind::PythonLiteral))),
            "NaN" | "Infinity" | "nan" | "inf" => {
                Some((Value::Null, Some(FixKind::NonFiniteNumber)))
            }
            _ => None,
        };
        if let Some((v, fix)) = literal {
            self.pos = id_end;
            if let Some(k) = fix {
                self.fix_detail(k, start, word);
            }
            return Ok(scalar(v, false));
        }
        // A literal cut off by the end of the text: complete it.
        if id_end == self.b.len() && !word.is_empty() {
            for (full, v) in [
                ("true", Value::Bool(true)),
                ("false", Value::Bool(false)),
                ("null", Value::Null),
                ("True", Value::Bool(true)),
                ("False", Value::Bool(false)),
                ("None", Value::Null),
            ] {
                if full.starts_with(word) {
                    self.pos = id_end;
                    self.fix_detail(
                        FixKind::TruncatedLiteral,
                        start,
                        format!("{word} -> {full}"),
                    );
                    return Ok(scalar(v, true));
                }
            }
        }
        // A bare word: read it as a string up to the next structural character (in an
        // object, up to the next member: see `bare_value_end`).
        let (end, kind) = if ctx == Ctx::ObjectValue {
            self.bare_value_end(start)
        } else {
            (self.token_end(start, ctx), FixKind::UnquotedString)
        };
        let text = self.src[start..end].trim_end();
        if text.is_empty() {
            return Err(self.err(
                start,
                format!("unexpected character {:?}", self.char_at(start)),
            ));
        }
        self.pos = start + text.len();
        // Wrapped in backticks (`` `ls -la` ``, a fence): delimiters, as a JavaScript
        // template literal or a Markdown span reads them, or text? Kept as written, lossy.
        let kind = if text.len() > 1 && text.starts_with('`') && text.ends_with('`') {
            FixKind::UnquotedTextAmbiguous
        } else {
            kind
        };
        self.fix_detail(kind, start, text);
        Ok(scalar(Value::String(text.to_owned()), end == self.b.len()))
    }

    /// Where an object value without quotes ends, and the fix that reads it.
    ///
    /// The value runs until the next plausible member, not the first comma: it ends
    /// - at a `}` or `]` that closes no bracket opened inside the text (`see [1]`);
    /// - at a `,` or line break after which (whitespace and comments skipped) come a key
    ///   with its colon (`"k":`, `'k':`, `k:`), a `}` or `]`, or the end of the text;
    /// - at a `"` that starts a key with its colon (a missing comma: `auto "n": 1`);
    /// - at a comment after whitespace: `//`, `/*`, or `#` followed by whitespace
    ///   (`#42` is text), unless the rest of its line holds a `"`, `}` or `]`: a comment
    ///   runs to the line's end, so `done # see PR, "n": 1}` is text followed by a member.
    ///
    /// A `,` or line break followed by anything else is part of the text (`First part,
    /// second part`), read as `unquoted_text_joined` (unsafe). The reading is ambiguous
    /// when such a continuation could also be a member whose colon was forgotten: it starts
    /// with a quoted token (`, "days" 3`), or with a bare key followed by `=` or, after
    /// whitespace, by a value (`, days 3`, `, ok true`, `, tags [1]`). Then the member,
    /// if one was meant, is lost inside the text: `unquoted_text_ambiguous` (lossy), never
    /// safe. Nothing is dropped either way: every character up to the end stays in the value.
    /// The end itself is a guess, with the same fix, when the value stops at a `}` or `]`
    /// that may be text ([`Parser::closer_in_doubt`]: `a } b, "n": 1}`), or at a key inside
    /// a bracket the text opened (`a {"b": 1}, "n": 2}`: text, or an object begun there?).
    ///
    /// Linear: each separator costs one bounded lookahead, and the scan resumes after the
    /// whitespace that lookahead skipped.
    fn bare_value_end(&self, start: usize) -> (usize, FixKind) {
        let n = self.b.len();
        let mut i = start;
        let mut joined = false;
        let mut ambiguous = false;
        // Brackets opened inside the text (`see [1]`) close inside it.
        let mut open = 0usize;
        while i < n {
            match self.b[i] {
                b'{' | b'[' => {
                    open += 1;
                    i += 1;
                }
                b'}' | b']' if open > 0 => {
                    open -= 1;
                    i += 1;
                }
                b'}' | b']' => {
                    ambiguous = ambiguous || self.closer_in_doubt(i);
                    break;
                }
                b',' | b'\n' | b'\r' => {
                    let next = self.ws_from(i + 1);
                    if next >= n || matches!(self.b[next], b'}' | b']') || self.key_at(next) {
                        break;
                    }
                    joined = true;
                    ambiguous = ambiguous || self.member_without_colon_at(next);
                    i = next;
                }
                b'"' if self.key_at(i) => {
                    // Inside a bracket the text opened, the key may be the start of an
                    // object the bracket began (`a {"b": 1}`) or text: a guess either way.
                    ambiguous = ambiguous || open > 0;
                    break;
                }
                b'#' | b'/' if i > start && self.b[i - 1].is_ascii_whitespace() => {
                    let comment = matches!(
                        (self.b[i], self.b.get(i + 1)),
                        (b'#', None | Some(b' ' | b'\t' | b'\n' | b'\r' | b'#'))
                            | (b'/', Some(b'/' | b'*'))
                    );
                    if comment && !self.structure_on_line(i) {
                        break;
                    }
                    i += 1;
                }
                _ => i += 1,
            }
        }
        let kind = match (joined, ambiguous) {
            (_, true) => FixKind::UnquotedTextAmbiguous,
            (true, false) => FixKind::UnquotedTextJoined,
            (false, false) => FixKind::UnquotedString,
        };
        (i, kind)
    }

    /// Is the `}` or `]` at `i`, which ends a value without quotes, possibly text? Not when
    /// what follows it is plainly structure: the end, another bracket, or a `,` before a
    /// member, an element or a closer. Otherwise it is in doubt when the rest of its line
    /// holds another `}` or `]` (`a } b, "n": 1}`: the object may close there, not at the
    /// first); prose after a closed object (`} Hope this helps`) leaves none. Bounded.
    fn closer_in_doubt(&self, i: usize) -> bool {
        let j = self.ws_from(i + 1);
        let Some(&c) = self.b.get(j) else {
            return false;
        };
        let plain = match c {
            b'}' | b']' | b'{' | b'[' => true,
            b',' => {
                let k = self.ws_from(j + 1);
                k >= self.b.len()
                    || matches!(self.b[k], b'}' | b']')
                    || self.key_at(k)
                    || self.value_start_at(k)
            }
            _ => false,
        };
        let limit = (j + LOOKAHEAD).min(self.b.len());
        !plain
            && self.b[j..limit]
                .iter()
                .take_while(|&&c| c != b'\n')
                .any(|&c| matches!(c, b'}' | b']'))
    }

    /// Does the rest of the line from `i` hold a `"`, `}` or `]` (bounded)?
    fn structure_on_line(&self, i: usize) -> bool {
        let limit = (i + LOOKAHEAD).min(self.b.len());
        self.b[i..limit]
            .iter()
            .take_while(|&&c| c != b'\n')
            .any(|&c| matches!(c, b'"' | b'}' | b']'))
    }

    /// Could a member without its colon start at `j`: a quoted token, or a bare key
    /// followed by `=` or by whitespace and a value (`days 3`, `"days" 3`, `days=3`)?
    /// Bounded lookahead.
    fn member_without_colon_at(&self, j: usize) -> bool {
        if self.quote_at(j).is_some() {
            return true;
        }
        let limit = (j + LOOKAHEAD).min(self.b.len());
        let k = self.key_token_end(j, limit);
        if k == j || k >= limit {
            return false;
        }
        let v = self.ws_from(k);
        // `steep "priority": 2`: what follows is the next key, not this one's value.
        self.b.get(v) == Some(&b'=') || (v > k && self.value_start_at(v) && !self.key_at(v))
    }

    fn char_at(&self, i: usize) -> char {
        self.src
            .get(i..)
            .and_then(|s| s.chars().next())
            .unwrap_or('?')
    }
}

/// Bytes that end a run of plain string content: quotes, backslash, control
/// characters, and 0xE2 (the lead byte of typographic quotes).
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\'' as usize] = true;
    t[b'\\' as usize] = true;
    t[0xE2] = true;
    t
};

fn container(value: Value, truncated: bool) -> Parsed {
    Parsed {
        value,
        truncated,
        scalar: false,
    }
}

fn scalar(value: Value, truncated: bool) -> Parsed {
    Parsed {
        value,
        truncated,
        scalar: true,
    }
}

/// Whether a quote of kind `close` ends a string opened with `open`.
/// What one string's escapes show about how it was written.
#[derive(Debug, Default)]
struct Escapes {
    /// `\s`, `\U`, `\.`: no JSON escape, so the backslashes were not escaped.
    invalid: bool,
    /// A raw line break: the text was not escaped for JSON at all.
    raw_newline: bool,
    /// The first `\b` `\f` `\n` `\r` `\t`.
    lookalike_at: Option<usize>,
    /// A `\n`: the string may have been escaped for JSON's control characters (its line
    /// breaks) if not for its backslashes.
    newline_escape: bool,
    /// The first `\'` in a double-quoted string: no JSON escape, but Python's habit for an
    /// apostrophe (`don\'t`), read so unless the string shows its backslashes were not
    /// escaped (SQL's `ESCAPE '\'` beside a raw line break keeps its backslash).
    apostrophe_at: Option<usize>,
}

impl Escapes {
    /// Notes the escape whose backslash is at `i`.
    fn note(&mut self, b: &[u8], i: usize) {
        match escape_kind(b, i + 1) {
            Escape::Invalid => self.invalid = true,
            Escape::Lookalike => {
                self.lookalike_at.get_or_insert(i);
                self.newline_escape |= b[i + 1] == b'n';
            }
            Escape::Json => {}
        }
    }
}

/// Whether the lookalike escape (`\b` `\f` `\n` `\r` `\t`) whose backslash is at `i`
/// of `b` (one string's text) is meant as written, by what the string shows:
/// - a raw line break in the string: yes, every one (nothing in it was escaped);
/// - in a Windows path (a run of path characters with an uppercase drive, `C:\new`, or with an
///   invalid escape in the string and two backslashes, `Queue\src\runtime`): yes;
/// - `\b` or `\f` beside an invalid escape (a regex's `\b\d+\b`): yes (a backspace or a
///   form feed is never what code means);
/// - `\t` or `\r` beside an invalid escape in a string with no `\n`: yes (one line, no
///   sign that its control characters were escaped: `awk '/\tERR\[/'` is the regex);
/// - otherwise no: `\n` in `import re\nprint(r'\d')` is the line break JSON says, and a
///   `\t` after it the indentation.
fn kept_as_written(b: &[u8], i: usize, seen: &Escapes, path: &mut PathCache) -> bool {
    if seen.raw_newline {
        return true;
    }
    if seen.invalid
        && (matches!(b[i + 1], b'b' | b'f')
            || (!seen.newline_escape && matches!(b[i + 1], b't' | b'r')))
    {
        return true;
    }
    let (start, drive, backslashes) = path.at(b, i);
    if !(drive || (seen.invalid && backslashes >= 2)) {
        return false;
    }
    // A separator follows a directory's name, not a file's (`install.log\nxcopy` is a
    // line break after a path).
    let segment = b[start..i]
        .rsplit(|&c| c == b'\\')
        .next()
        .unwrap_or_default();
    // And a name follows it (`C:\\new`), not one letter (`if m:\\n` is code).
    let (end, _, _) = path.run_end();
    let next = b[i + 1..end]
        .split(|&c| c == b'\\')
        .next()
        .unwrap_or_default();
    !segment.contains(&b'.') && next.len() >= 2
}

/// The run of path characters around a position, computed once per run (linear).
#[derive(Debug, Default)]
struct PathCache {
    /// The run `start..end`, whether it starts with a drive (`C:\`), its backslashes.
    run: Option<(usize, usize, bool, usize)>,
}

impl PathCache {
    /// Most bytes looked at on each side of a position (a path is short).
    const REACH: usize = 256;

    /// Where the run last looked at ends.
    fn run_end(&self) -> (usize, bool, usize) {
        self.run.map_or((0, false, 0), |(_, end, d, n)| (end, d, n))
    }

    /// The run around `i`: where it starts, whether it is a drive path, its backslashes
    /// (none when it is no path).
    fn at(&mut self, b: &[u8], i: usize) -> (usize, bool, usize) {
        if let Some((start, end, drive, n)) = self.run
            && (start..end).contains(&i)
        {
            return (start, drive, n);
        }
        let path_char = |c: u8| {
            c.is_ascii_alphanumeric()
                || matches!(c, b'_' | b'.' | b'-' | b':' | b'\\' | b'~' | b'%')
        };
        let mut start = i;
        while start > 0 && i - start < Self::REACH && path_char(b[start - 1]) {
            start -= 1;
        }
        let mut end = i;
        while end < b.len() && end - i < Self::REACH && path_char(b[end]) {
            end += 1;
        }
        let run = &b[start..end];
        // Escaped line breaks in a row (`Counter\\n\\nLINE`) are code, not a path.
        let breaks = run
            .windows(3)
            .any(|w| w[0] == b'\\' && matches!(w[1], b'n' | b'r' | b't') && w[2] == b'\\');
        let drive = !breaks
            && run.len() >= 3
            && run[0].is_ascii_uppercase()
            && run[1] == b':'
            && run[2] == b'\\';
        let n = if breaks {
            0
        } else {
            run.iter().filter(|&&c| c == b'\\').count()
        };
        self.run = Some((start, end, drive, n));
        (start, drive, n)
    }
}

/// How JSON reads the escape whose letter is at `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    /// `\"` `\\` `\/` `\'` `\uXXXX`: the same whether or not the text was escaped.
    Json,
    /// `\b` `\f` `\n` `\r` `\t`: valid JSON, but in unescaped text a letter after a
    /// backslash (a regex's `\b`, a path's `\new`).
    Lookalike,
    /// No JSON escape (`\s`, `\U`, `\.`, a backslash before a raw line break): proof
    /// that the string's backslashes were not escaped.
    Invalid,
}

fn escape_kind(b: &[u8], i: usize) -> Escape {
    match b.get(i) {
        None | Some(b'"' | b'\\' | b'/' | b'\'') => Escape::Json,
        Some(b'b' | b'f' | b'n' | b'r' | b't') => Escape::Lookalike,
        Some(b'u') if b.len() > i + 4 && b[i + 1..i + 5].iter().all(u8::is_ascii_hexdigit) => {
            Escape::Json
        }
        Some(b'x') if b.len() > i + 2 && b[i + 1..i + 3].iter().all(u8::is_ascii_hexdigit) => {
            Escape::Json
        }
        Some(_) => Escape::Invalid,
    }
}

/// `\uXXXX` (or a surrogate pair `\uD83D\uDE00`) at the start of `after` (the text after
/// the backslash): the character and the length read.
fn unicode_escape(after: &str) -> Option<(char, usize)> {
    let hex = |s: &str| {
        let h = s.get(1..5)?;
        (s.starts_with('u') && h.bytes().all(|c| c.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(h, 16).ok())
            .flatten()
    };
    let hi = hex(after)?;
    if let Some(c) = char::from_u32(hi) {
        return Some((c, 5));
    }
    let lo = hex(after.get(5..)?.strip_prefix('\\')?)?;
    ((0xD800..0xDC00).contains(&hi) && (0xDC00..0xE000).contains(&lo))
        .then(|| char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)))
        .flatten()
        .map(|c| (c, 11))
}

fn closes(open: Quote, close: Quote) -> bool {
    match open {
        Quote::Double => close == Quote::Double,
        Quote::Single => close == Quote::Single,
        // Models mix them: “text" or “text”.
        Quote::SmartDouble => matches!(close, Quote::SmartDouble | Quote::Double),
        Quote::SmartSingle => matches!(close, Quote::SmartSingle | Quote::Single),
    }
}

pub(crate) fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'-' || c >= 0x80
}

pub(crate) fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

pub(crate) fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == needle)
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

struct Num {
    value: Value,
    normalized: bool,
}

/// Reads a number, JSON or one of the forms models write (`31800.`, `.5`, `+1`, `1_000`, `0x1F`).
fn parse_number(tok: &str) -> Option<Num> {
    if tok.is_empty() || tok.len() > 64 {
        return None;
    }
    // Plain JSON first.
    if let Some(v) = json_number(tok) {
        return Some(Num {
            value: v,
            normalized: false,
        });
    }
    let (neg, body) = match tok.as_bytes()[0] {
        b'-' => (true, &tok[1..]),
        b'+' => (false, &tok[1..]),
        _ => (false, tok),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        // Digits only: `from_str_radix` would also take a sign (`0x-5`).
        if hex.is_empty() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let n = i64::from_str_radix(hex, 16).ok()?;
        let n = if neg { n.checked_neg()? } else { n };
        return Some(Num {
            value: Value::from(n),
            normalized: true,
        });
    }
    // Leading zeros (`007`) are an identifier more often than a number: not a number here.
    if body.len() > 1 && body.starts_with('0') && body.as_bytes()[1].is_ascii_digit() {
        return None;
    }
    let mut cleaned = String::with_capacity(body.len() + 2);
    if neg {
        cleaned.push('-');
    }
    let body = body.replace('_', "");
    let body = body.strip_suffix('.').unwrap_or(&body);
    if body.starts_with('.') {
        cleaned.push('0');
    }
    cleaned.push_str(body);
    let cleaned = cleaned.replace(".e", ".0e").replace(".E", ".0E");
    let v = json_number(&cleaned)?;
    // `31800.` is an integer written with a dot: keep it integral.
    let v = match v.as_f64() {
        Some(f) if tok.ends_with('.') && f.fract() == 0.0 && f.abs() < 9.0e15 =>
        {
            #[allow(clippy::cast_possible_truncation)]
            Value::from(f as i64)
        }
        _ => v,
    };
    Some(Num {
        value: v,
        normalized: true,
    })
}

fn json_number(tok: &str) -> Option<Value> {
    let b = tok.as_bytes();
    let first = *b.first()?;
    if !(first == b'-' || first.is_ascii_digit()) {
        return None;
    }
    if !b
        .iter()
        .all(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
    {
        return None;
    }
    serde_json::from_str::<Number>(tok).ok().map(Value::Number)
}

/// `s` cut to `max` characters (with `…`), for a fix's detail.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}
