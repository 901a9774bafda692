//! Cleaning, Markdown escaping and fitting the content to the budget.

use super::*;

/// Without control characters (C0, DEL, C1) other than `\n`, `\t`, `\r`.
pub(super) fn strip_controls(s: String) -> String {
    let bad = |c: char| c.is_control() && !matches!(c, '\n' | '\t' | '\r');
    if !s.contains(bad) {
        return s;
    }
    s.chars().filter(|c| !bad(*c)).collect()
}

/// Appends `s` escaped for a Markdown renderer (see the module doc); `s` is taken to start
/// a line.
pub(super) fn escape_markdown(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    let mut line_start = true;
    let mut indent = 0;
    let mut prev = '\n';
    // The byte of a `12.` / `12)` list marker's punctuation, once seen.
    let mut list_mark: Option<usize> = None;
    for (i, c) in s.char_indices() {
        let next = bytes.get(i + c.len_utf8()).copied();
        let escape = match c {
            '\\' | '`' | '*' | '{' | '}' | '[' | ']' | '<' | '>' | '|' => true,
            '_' => {
                !(prev.is_alphanumeric()
                    && s[i + 1..].chars().next().is_some_and(char::is_alphanumeric))
            }
            '!' => next == Some(b'['),
            '(' => prev == ']',
            '#' | '+' | '-' | '=' => line_start,
            '.' | ')' => list_mark == Some(i),
            '0'..='9' if line_start => {
                let run = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                if run <= 9 && matches!(bytes.get(i + run), Some(b'.' | b')')) {
                    list_mark = Some(i + run);
                }
                false
            }
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
        if c == '\n' || c == '\r' {
            line_start = true;
            indent = 0;
        } else if c == ' ' && line_start && indent < 3 {
            indent += 1;
        } else {
            line_start = false;
        }
        prev = c;
    }
}

pub(super) fn marker(omitted: usize, markdown: bool) -> String {
    if markdown {
        format!(
            " … \\[{} bytes omitted; full result kept as artifact\\] … ",
            group(omitted)
        )
    } else {
        format!(
            " … [{} bytes omitted; full result kept as artifact] … ",
            group(omitted)
        )
    }
}

/// True when the byte at `at` is the char of a `\X` escape (an odd run of `\` before it).
pub(super) fn escaped_at(s: &str, at: usize) -> bool {
    s.as_bytes()[..at]
        .iter()
        .rev()
        .take_while(|b| **b == b'\\')
        .count()
        % 2
        == 1
}

/// The char boundary at or before `at` (`str::floor_char_boundary` is newer than our MSRV).
pub(super) fn floor_boundary(s: &str, mut at: usize) -> usize {
    at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The char boundary at or after `at`.
pub(super) fn ceil_boundary(s: &str, mut at: usize) -> usize {
    at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// `s` within `budget` bytes: 40% head, 60% tail, the marker between.
pub(super) fn fit(s: String, budget: usize, markdown: bool) -> (String, usize) {
    if budget == 0 || s.len() <= budget {
        return (s, 0);
    }
    let total = s.len();
    let widest = marker(total, markdown).len();
    if budget <= widest {
        return (marker(total, markdown).trim().to_owned(), total);
    }
    let room = budget - widest;
    let mut head = floor_boundary(&s, room * 2 / 5);
    if markdown && head > 0 && escaped_at(&s, head) {
        head -= 1;
    }
    let mut tail = ceil_boundary(&s, total - (room - room * 2 / 5));
    if markdown && tail < total && escaped_at(&s, tail) {
        tail = ceil_boundary(&s, tail + 1);
    }
    let omitted = tail - head;
    let mark = marker(omitted, markdown);
    let mut out = String::with_capacity(head + mark.len() + total - tail);
    out.push_str(&s[..head]);
    out.push_str(&mark);
    out.push_str(&s[tail..]);
    (out, omitted)
}
