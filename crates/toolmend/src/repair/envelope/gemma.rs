//! Gemma: FunctionGemma's `call:name{key:<escape>text<escape>,…}` and its template tokens.
//! Gemma 3's ```` ```tool_code ```` fence holds a pythonic call ([`super::pythonic`]).

use serde_json::{Map, Value};

use super::{Dialect, ParseError, Walk, name_len, unquote, ws_after};
use crate::{Fix, FixKind};

/// FunctionGemma: `<start_function_call>call:name{k:<escape>v<escape>}<end_function_call>`.
pub const GEMMA_CALL_START: &str = "<start_function_call>";
/// What opens a Gemma call (`call:name{…}`), after [`GEMMA_CALL_START`] or at the start
/// of a text.
pub const GEMMA_CALL: &str = "call:";
/// Code-fence languages that mark a call (Gemma 3: ```` ```tool_code\nf(a=1)\n``` ````):
/// such a fence holds a pythonic call wherever it stands; any other fence is code.
pub const TOOL_CODE_LANGS: &[&str] = &["tool_code"];

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[GEMMA_CALL_START],
    openers: &[GEMMA_CALL_START],
    leading: &[GEMMA_CALL],
    noise: &[
        "<start_of_turn>",
        "<end_of_turn>",
        "<eos>",
        "<bos>",
        "<end_function_call>",
    ],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    if rest.starts_with(GEMMA_CALL_START) {
        w.out.envelope_call = true;
        w.global(FixKind::ToolCallTagUnwrapped, at);
        w.pos = at + GEMMA_CALL_START.len();
        w.skip_ws();
        if w.rest().starts_with(GEMMA_CALL) {
            return Some(w.read_gemma(w.pos));
        }
        return Some(Ok(()));
    }
    (rest.starts_with(GEMMA_CALL)
        && (w.at_text_start() || w.out.envelope_call)
        && gemma_head(w.b, at).is_some())
    .then(|| w.read_gemma(at))
}

impl Walk<'_> {
    /// Gemma / FunctionGemma: `call:name{key:<escape>text<escape>,n:5,list:[…],obj:{…}}`
    /// (Gemma 4 writes `<|"|>` for `<escape>`).
    pub(super) fn read_gemma(&mut self, at: usize) -> Result<(), ParseError> {
        let head = gemma_head(self.b, at).ok_or_else(|| gemma_fail(at))?;
        self.read_gemma_named(at, head, None)
    }

    /// A Gemma call at `at` whose name is `name_start..name_end` (its `{` at the end);
    /// `extra`: a fix the call's envelope took.
    pub(super) fn read_gemma_named(
        &mut self,
        at: usize,
        (name_start, name_end): (usize, usize),
        extra: Option<Fix>,
    ) -> Result<(), ParseError> {
        let fail = gemma_fail;
        let name = self.raw[name_start..name_end].to_owned();
        let mut pos = name_end;
        let mut opened = Vec::new();
        let value = gemma_value(self.raw, &mut pos, 0, self.opts.max_depth, &mut opened)
            .ok_or_else(|| fail(pos))?;
        self.out.envelope_call = true;
        self.pos = pos;
        let mut fixes: Vec<Fix> = extra.into_iter().collect();
        fixes.push(Fix::at(FixKind::PythonicCallRead, at).with_detail("gemma call:name{…}"));
        fixes.extend(opened.into_iter().map(|(at, delim)| {
            Fix::at(FixKind::UnquotedString, at)
                .with_detail(format!("a string closed by {delim} it never opened"))
        }));
        self.push(value, fixes, Some(name));
        Ok(())
    }
}

fn gemma_fail(offset: usize) -> ParseError {
    ParseError {
        fatal: false,
        offset,
        reason: "expected a Gemma call `call:name{key:value,…}`".to_owned(),
    }
}

/// Gemma's `call:name{` at `at`: the name's range (the `{` at its end).
pub(super) fn gemma_head(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let start = at + GEMMA_CALL.len();
    if !b.get(start)?.is_ascii_alphabetic() && b[start] != b'_' {
        return None;
    }
    let end = start + name_len(&b[start..]);
    (end - start <= 64 && b.get(end) == Some(&b'{')).then_some((start, end))
}

/// The string delimiters of each generation: FunctionGemma's `<escape>`, Gemma 4's `<|"|>`.
/// A string ends at the delimiter that opened it.
const STRING_DELIMITERS: [&str; 2] = ["<escape>", "<|\"|>"];

/// One Gemma value at `*pos` of `raw`: `<escape>text<escape>` or `<|"|>text<|"|>` (a
/// string as it is), an object `{key:value,…}`, a list `[…]`, or a bare word (a number,
/// `true`, `false`, `null`, else a string). `None` when it does not read (or nests deeper
/// than `max`).
///
/// A string whose opening delimiter was left out (`query:weather in Tokyo<|"|>}`: SGLang's
/// `test_gemma4_detector_string_delimiters.py`) is read up to its closing one where that
/// is the one reading: the text before it holds no bracket, brace or colon, and (in a
/// list) no comma, and in a list the item before it did not end as a bare word (whose
/// start the string may have opened at): then no other member or item can have begun in
/// it (`Paris, France<|"|>` is one value; `,key:` is member syntax). Its offset and
/// delimiter are pushed on `opened` (an `unquoted_string` fix). Elsewhere (after a colon,
/// a list's comma, or a bare item) it is no such reading: the value does not read, or
/// the delimiter left after a bare word makes the call fail to read (feedback), never a
/// value with the delimiter in it.
pub(super) fn gemma_value(
    raw: &str,
    pos: &mut usize,
    depth: usize,
    max: usize,
    opened: &mut Vec<(usize, &'static str)>,
) -> Option<Value> {
    gemma_value_in(raw, pos, depth, max, opened, Place::Member, &mut false)
}

/// Where a value stands, for a string whose opening delimiter was left out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A member's value: the text before the delimiter holds no colon.
    Member,
    /// A list's first item, or one after an item that ended in a delimiter, a list or an
    /// object: the text before the delimiter holds no comma.
    Item,
    /// A list item after a bare word: the delimiter may close a string opened before that
    /// word, so no reading is chosen.
    ItemAfterWord,
}

/// [`gemma_value`] at `place`; `word`: set when the value read was a bare word.
fn gemma_value_in(
    raw: &str,
    pos: &mut usize,
    depth: usize,
    max: usize,
    opened: &mut Vec<(usize, &'static str)>,
    place: Place,
    word: &mut bool,
) -> Option<Value> {
    let b = raw.as_bytes();
    *pos = ws_after(b, *pos);
    if depth > max {
        return None;
    }
    let rest = &raw[*pos..];
    for delim in STRING_DELIMITERS {
        if let Some(r) = rest.strip_prefix(delim) {
            let end = r.find(delim)?;
            *pos += delim.len() + end + delim.len();
            return Some(Value::String(r[..end].to_owned()));
        }
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
                let key = unquote(&raw[*pos..*pos + key_len]);
                // Gemma 4 may quote a key as it quotes a string.
                let key = STRING_DELIMITERS
                    .iter()
                    .find_map(|d| key.strip_prefix(d).and_then(|k| k.strip_suffix(d)))
                    .unwrap_or(key)
                    .to_owned();
                *pos += key_len + 1;
                let v = gemma_value_in(raw, pos, depth + 1, max, opened, Place::Member, word)?;
                map.insert(key, v);
            }
        }
        b'[' => {
            *pos += 1;
            let mut list = Vec::new();
            let mut after_word = false;
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
                    _ => {
                        let place = if after_word {
                            Place::ItemAfterWord
                        } else {
                            Place::Item
                        };
                        after_word = false;
                        let item = gemma_value_in(
                            raw,
                            pos,
                            depth + 1,
                            max,
                            opened,
                            place,
                            &mut after_word,
                        )?;
                        list.push(item);
                    }
                }
            }
        }
        _ => {
            if let Some((end, delim)) = orphan_close(raw, *pos, place != Place::Member) {
                if place == Place::ItemAfterWord {
                    return None;
                }
                let text = raw[*pos..end].to_owned();
                opened.push((*pos, delim));
                *pos = end + delim.len();
                return Some(Value::String(text));
            }
            let len = b[*pos..]
                .iter()
                .position(|&c| matches!(c, b',' | b'}' | b']'))
                .unwrap_or(b.len() - *pos);
            let text = raw[*pos..*pos + len].trim();
            *pos += len;
            // A delimiter inside a bare word closes a string opened nowhere the reading
            // could tell: no value keeps it.
            if text.is_empty() || STRING_DELIMITERS.iter().any(|d| text.contains(d)) {
                return None;
            }
            *word = true;
            Some(bare_word(text))
        }
    }
}

/// The closing string delimiter that ends a value at `from` whose opening one was left
/// out, when it is the one reading ([`gemma_value`]): the first delimiter before any of
/// `{ } [ ] :` (and, `in_list`, `,`). Its offset and the delimiter. Linear in what it
/// passes, which a bare word's reading passes too (up to a colon in an object: the next
/// member's key, read next).
fn orphan_close(raw: &str, from: usize, in_list: bool) -> Option<(usize, &'static str)> {
    let b = raw.as_bytes();
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'{' | b'}' | b'[' | b']' | b':' => return None,
            b',' if in_list => return None,
            b'<' => {
                if let Some(d) = STRING_DELIMITERS.iter().find(|d| raw[i..].starts_with(**d)) {
                    return (i > from).then_some((i, *d));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
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
