//! Reading an object by its keys: where the text's quotes cannot say where a string ends.
//!
//! Coding agents write code into string arguments without escaping its quotes:
//! `{"content": "{\n  "root": true,\n  "rules": {"eqeqeq": "warn"}\n}"}`. Quote by quote,
//! the tolerant parser must guess whether `"` ends the string, and a quote followed by
//! `,`, `:` or `}` is often code, not the end. The tool's schema knows better: its keys.
//! This reader cuts the object only where `, "key":` names one of the tool's top-level
//! keys, and keeps a cut only where every member's value then reads whole (a string
//! property's value from its first quote to its last, any other as JSON); a value ends
//! at the first such cut, so there is one reading or none. [`crate::mend`] takes it when
//! it fits the schema, and refuses it when a string in it holds an odd number of quotes
//! (the value's last quote might have been meant as its own, the closing quote missing:
//! `"notify-send "Build done"`).
//!
//! Bounded: the cuts are found in one pass (each quote looks at most 128 bytes ahead for a
//! key), and at most [`MAX_CUTS`] of them are tried (at most its square checks); past the
//! limit nothing is read here and the tolerant reading stands.

use serde_json::{Map, Value};

use super::{
    RepairedCall,
    parser::{Ctx, Parser},
};
use crate::{Fix, FixKind};

/// Most places a member may start (`, "key":` of a known key) that are tried.
const MAX_CUTS: usize = 64;
/// Longest key looked for after a comma.
const MAX_KEY: usize = 128;

/// A top-level property of the tool: its name and whether it takes a string.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key<'k> {
    pub name: &'k str,
    pub string: bool,
}

/// The object read by its keys.
#[derive(Debug)]
pub(crate) struct Reading {
    pub call: RepairedCall,
    /// A string member whose inner quotes are odd in number (its value's last quote may
    /// have been its own): the key.
    pub odd_quotes: Option<String>,
}

/// Where a member starts: its key (index into the keys) and where its value starts.
#[derive(Debug, Clone, Copy)]
struct Cut {
    /// The comma before the member (the `{` for the first).
    at: usize,
    key: usize,
    value: usize,
}

/// `raw` read as one object of `keys`; `None` when the text is not such an object, no
/// cut reads, or past the limit.
pub(crate) fn reading(raw: &str, keys: &[Key<'_>], max_depth: usize) -> Option<Reading> {
    let b = raw.as_bytes();
    if keys.is_empty() || keys.len() > 64 {
        return None;
    }
    let open = b.iter().position(|c| !c.is_ascii_whitespace())?;
    let close = b.iter().rposition(|c| !c.is_ascii_whitespace())?;
    if b[open] != b'{' || b[close] != b'}' || close <= open {
        return None;
    }
    // A comma after the last member (`"b"\n,}`): the last value ends before it.
    let before_close = b[..close].iter().rposition(|c| !c.is_ascii_whitespace())?;
    let trailing_comma = (b[before_close] == b',' && before_close > open).then_some(before_close);
    let close = trailing_comma.unwrap_or(close);
    let first = ws(b, open + 1);
    let q = match b.get(first) {
        Some(&c @ (b'"' | b'\'')) => c,
        _ => return None,
    };
    let head = member_at(b, raw, first, q, keys, open)?;
    let mut cuts = vec![head];
    let mut missing_comma = Vec::new();
    for i in first + 1..close {
        if b[i] != q {
            continue;
        }
        // A known key: the member starts after a comma, or (a comma missing) after
        // whitespace that follows the end of a value.
        let before = i - b[..i]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_whitespace())
            .count();
        let cut = match b[before - 1] {
            b',' => member_at(b, raw, i, q, keys, before - 1),
            c if before < i && (c == q || matches!(c, b'}' | b']' | b'0'..=b'9' | b'e' | b'l')) => {
                let cut = member_at(b, raw, i, q, keys, before);
                if cut.is_some() {
                    missing_comma.push(before);
                }
                cut
            }
            _ => None,
        };
        if let Some(cut) = cut {
            if cuts.len() == MAX_CUTS {
                return None;
            }
            cuts.push(cut);
        }
    }
    let read = Read { raw, b, q, keys };
    let chosen = read.cuts(&cuts, close)?;
    let mut r = build(raw, q, keys, &cuts, &chosen, close, max_depth)?;
    for &j in &chosen {
        if missing_comma.contains(&cuts[j].at) {
            r.call
                .fixes
                .push(Fix::at(FixKind::MissingComma, cuts[j].at));
        }
    }
    if let Some(at) = trailing_comma {
        r.call.fixes.push(Fix::at(FixKind::TrailingComma, at));
    }
    r.call.fixes.sort_by_key(|f| f.offset);
    Some(r)
}

/// `raw` without what may wrap a call's object: reasoning blocks before it (with
/// `strip_thinking`) and a code fence around it. The object's text, where it starts in
/// `raw`, and the fixes that say what was taken off; `raw` itself when nothing wraps it.
pub(crate) fn unwrapped(raw: &str, strip_thinking: bool) -> (usize, &str, Vec<Fix>) {
    let mut fixes = Vec::new();
    let mut start = raw.len() - raw.trim_start().len();
    let mut end = raw.trim_end().len();
    if strip_thinking {
        'blocks: loop {
            for (open, close) in super::markers::THINKING_TAGS {
                if raw[start..end].starts_with(open)
                    && let Some(e) = raw[start + open.len()..end].find(close)
                {
                    fixes.push(Fix::at(FixKind::ThinkingStripped, start));
                    start += open.len() + e + close.len();
                    start = ws(raw.as_bytes(), start).min(end);
                    continue 'blocks;
                }
            }
            break;
        }
    }
    let text = &raw[start..end];
    if let Some(after) = text.strip_prefix("```")
        && let Some(line_end) = after.find('\n')
        && after[..line_end]
            .trim()
            .bytes()
            .all(|c| c.is_ascii_alphanumeric())
        && let Some(inner) = after[line_end + 1..].trim_end().strip_suffix("```")
        && !inner.contains("\n```")
    {
        fixes.push(Fix::at(FixKind::FenceStripped, start));
        start += 3 + line_end + 1;
        end = start + inner.len();
    }
    (start, &raw[start..end], fixes)
}

/// A known key quoted with `q` at `j` followed by `:`: the member's cut.
fn member_at(b: &[u8], raw: &str, j: usize, q: u8, keys: &[Key<'_>], at: usize) -> Option<Cut> {
    let end = j + 1 + b[j + 1..].iter().take(MAX_KEY).position(|&c| c == q)?;
    let name = raw.get(j + 1..end)?;
    let key = keys.iter().position(|k| k.name == name)?;
    let colon = ws(b, end + 1);
    (b.get(colon) == Some(&b':')).then(|| Cut {
        at,
        key,
        value: ws(b, colon + 1),
    })
}

struct Read<'a, 'k> {
    raw: &'a str,
    b: &'a [u8],
    q: u8,
    keys: &'a [Key<'k>],
}

impl Read<'_, '_> {
    /// The cuts the object is read at, from the first member on: each value ends at the
    /// first cut after it (of a key not yet used) where it reads whole, so `", "key":`
    /// after a string is a member boundary, never string content (a string that
    /// swallowed it would hold the next member); the last value runs to the closing
    /// brace. `None` when a value reads nowhere. At most [`MAX_CUTS`]² checks.
    fn cuts(&self, cuts: &[Cut], close: usize) -> Option<Vec<usize>> {
        let mut chosen = vec![0];
        let mut used = 1u64 << cuts[0].key;
        loop {
            let i = *chosen.last()?;
            let cut = cuts[i];
            let key = self.keys[cut.key];
            let next = (i + 1..cuts.len()).find(|&j| {
                cuts[j].at > cut.value
                    && used & (1u64 << cuts[j].key) == 0
                    && self.fits(key, cut.value, cuts[j].at)
            });
            match next {
                Some(j) => {
                    used |= 1u64 << cuts[j].key;
                    chosen.push(j);
                }
                None => return self.fits(key, cut.value, close).then_some(chosen),
            }
        }
    }

    /// Does `raw[from..to]` (trimmed) read whole as the value of `key`?
    fn fits(&self, key: Key<'_>, from: usize, to: usize) -> bool {
        let Some((s, e)) = trimmed(self.b, from, to) else {
            return false;
        };
        if key.string && quoted(self.b, s, e, self.q) {
            return true;
        }
        // Any other value: JSON, whole (a cheap look at its ends first).
        let (first, last) = (self.b[s], self.b[e - 1]);
        let plausible = matches!(
            first,
            b'{' | b'[' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n' | b'"'
        ) && matches!(last, b'}' | b']' | b'0'..=b'9' | b'e' | b'l' | b'"' | b'.');
        plausible && serde_json::from_str::<serde::de::IgnoredAny>(&self.raw[s..e]).is_ok()
    }
}

/// The reading made of the cuts `chosen`; `None` if a value does not read after all.
fn build(
    raw: &str,
    q: u8,
    keys: &[Key<'_>],
    cuts: &[Cut],
    chosen: &[usize],
    close: usize,
    max_depth: usize,
) -> Option<Reading> {
    let b = raw.as_bytes();
    let mut map = Map::new();
    let mut fixes = Vec::new();
    let mut odd_quotes = None;
    let mut inner_at = None;
    for (n, &i) in chosen.iter().enumerate() {
        let cut = cuts[i];
        let to = chosen.get(n + 1).map_or(close, |&j| cuts[j].at);
        let (s, e) = trimmed(b, cut.value, to)?;
        let key = keys[cut.key];
        let text = &raw[s..e];
        let value = if key.string && quoted(b, s, e, q) {
            let inner = &raw[s + 1..e - 1];
            if glued(inner.as_bytes(), q) {
                return None;
            }
            let (value, mut more, quotes) = string_value(inner, q, s + 1, max_depth)?;
            if let Some(&first) = quotes.first() {
                inner_at.get_or_insert(first);
            }
            if quotes.len() % 2 == 1 && odd_quotes.is_none() {
                odd_quotes = Some(key.name.to_owned());
            }
            fixes.append(&mut more);
            value
        } else {
            serde_json::from_str(text).ok()?
        };
        map.insert(key.name.to_owned(), value);
    }
    if q == b'\'' {
        fixes.push(Fix::at(FixKind::SingleQuotes, 0));
    }
    if let Some(at) = inner_at {
        fixes.push(Fix::at(FixKind::InnerQuoteEscaped, at).with_detail(
            "quotes inside string values kept: the object was cut only before the \
                 tool's own keys",
        ));
    }
    fixes.sort_by_key(|f| f.offset);
    Some(Reading {
        call: RepairedCall {
            name: None,
            arguments: Value::Object(map),
            fixes,
        },
        odd_quotes,
    })
}

/// A string value's text between its outer quotes, read as a JSON string whose bare
/// quotes are content (the parser reads escapes and raw line breaks as in any string);
/// its fixes and where its bare quotes are (apostrophes between letters and a `'"'`
/// character literal not counted).
fn string_value(
    inner: &str,
    q: u8,
    base: usize,
    max_depth: usize,
) -> Option<(Value, Vec<Fix>, Vec<usize>)> {
    let b = inner.as_bytes();
    let mut text = String::with_capacity(inner.len() + 16);
    text.push('"');
    let mut quotes = Vec::new();
    let mut run = 0;
    let mut backslashes = 0usize;
    for (i, &c) in b.iter().enumerate() {
        let escaped = backslashes % 2 == 1;
        if c == b'\\' {
            backslashes += 1;
            continue;
        }
        backslashes = 0;
        if c == b'"' && !escaped {
            // A bare double quote: escaped for the parser.
            text.push_str(&inner[run..i]);
            text.push_str("\\\"");
            run = i + 1;
        }
        if c == q && !escaped && counts(b, i, q) {
            quotes.push(base + i);
        }
        if q == b'\'' && c == b'\'' && escaped {
            // `\'` in a single-quoted string: the apostrophe.
            text.push_str(&inner[run..i - 1]);
            text.push('\'');
            run = i + 1;
        }
    }
    text.push_str(&inner[run..]);
    text.push('"');
    let mut p = Parser::new(&text, base.saturating_sub(1), max_depth);
    let parsed = p.parse_value(Ctx::Top, 0).ok()?;
    p.skip_ws();
    if !p.at_end() || !parsed.value.is_string() {
        return None;
    }
    // Offsets past the added backslashes only approximate the raw text.
    let fixes = p
        .fixes
        .into_iter()
        .filter(|f| f.kind != FixKind::InnerQuoteEscaped)
        .collect();
    Some((parsed.value, fixes, quotes))
}

/// Is `b[s..e]` a string in `q` quotes? Not a triple-quoted one (`"""…"""`, Python's:
/// the tolerant parser reads those, and says where their end is in doubt).
fn quoted(b: &[u8], s: usize, e: usize, q: u8) -> bool {
    e - s >= 2 && b[s] == q && b[e - 1] == q && !(e - s >= 6 && b[s..s + 3] == [q, q, q])
}

/// Does a string's text hold the seam of two objects (`…"}` + `{"…`, glued or with words
/// between: `…"}` + ` and then ` + `{"…`)? Then the "string" is two documents' members
/// run together, not a value: ending it at the seam's quote reads cleanly too. Code
/// between (`"}), 400` + `  TODOS.append(` + `{"id"…`) is no seam: only letters, digits,
/// white space and a sentence's punctuation may stand there.
fn glued(b: &[u8], q: u8) -> bool {
    let wordy =
        |c: u8| c.is_ascii_alphanumeric() || c.is_ascii_whitespace() || b".,;:!?'-".contains(&c);
    let mut i = 0;
    while let Some(k) = b[i..].iter().position(|&c| c == b'}') {
        let at = i + k;
        let before = b[..at].iter().rev().find(|c| !c.is_ascii_whitespace());
        if before == Some(&q) {
            // The first byte after it that is not a word's (each byte looked at once:
            // the run ends at the next `}` at the latest, where the outer loop goes on).
            let open = at + 1 + b[at + 1..].iter().take_while(|&&c| wordy(c)).count();
            if b.get(open) == Some(&b'{') && b.get(ws(b, open + 1)) == Some(&q) {
                return true;
            }
        }
        i = at + 1;
    }
    false
}

/// Does the quote at `i` count as a quote (not an apostrophe between letters in a
/// single-quoted string, not the middle of a `'"'` character literal)? A double quote
/// between letters is one: a Python f-string's (`f"retry {n}"`).
fn counts(b: &[u8], i: usize, q: u8) -> bool {
    let before = i.checked_sub(1).map(|j| b[j]);
    let after = b.get(i + 1).copied();
    let letter = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if q == b'\'' && letter(before) && letter(after) {
        return false;
    }
    !(before == Some(b'\'') && after == Some(b'\''))
}

/// The bytes `from..to` without surrounding whitespace; `None` when nothing is left.
fn trimmed(b: &[u8], mut from: usize, mut to: usize) -> Option<(usize, usize)> {
    while from < to && b[from].is_ascii_whitespace() {
        from += 1;
    }
    while to > from && b[to - 1].is_ascii_whitespace() {
        to -= 1;
    }
    (to > from).then_some((from, to))
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}
