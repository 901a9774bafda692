//! DeepSeek V3 / R1 / V3.1: fullwidth template tokens around each call. Step-3 writes the
//! same token family, so any other `<｜…｜>` token is read here too.

use super::{Dialect, ParseError, Walk, prefix, strip_namespace};
use crate::FixKind;

/// DeepSeek V3 / R1 / V3.1 tokens (fullwidth `｜` U+FF5C and `▁` U+2581; some servers
/// write ASCII `|`): a call is `<｜tool▁call▁begin｜>function<｜tool▁sep｜>name` then a
/// fenced JSON object (V3, R1), or `<｜tool▁call▁begin｜>name<｜tool▁sep｜>{…}` (V3.1).
pub const DEEPSEEK_CALL_BEGIN: [&str; 2] = ["<｜tool▁call▁begin｜>", "<|tool▁call▁begin|>"];
/// DeepSeek's separator between a call's type (or name) and the rest.
pub const DEEPSEEK_SEP: [&str; 2] = ["<｜tool▁sep｜>", "<|tool▁sep|>"];

/// What opens a block of calls.
const CALLS_BEGIN: [&str; 2] = ["<|tool▁calls▁begin|>", "<｜tool▁calls▁begin｜>"];

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[
        CALLS_BEGIN[0],
        DEEPSEEK_CALL_BEGIN[1],
        CALLS_BEGIN[1],
        DEEPSEEK_CALL_BEGIN[0],
    ],
    openers: &DEEPSEEK_CALL_BEGIN,
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    if let Some(begin) = DEEPSEEK_CALL_BEGIN.iter().find(|m| rest.starts_with(*m)) {
        return Some(w.read_deepseek(at + begin.len()));
    }
    if !rest.starts_with("<｜") {
        return None;
    }
    let end = prefix(rest, 96).find("｜>")?;
    // The other fullwidth tokens (`<｜tool▁calls▁begin｜>`, `<｜end▁of▁sentence｜>`).
    let token = &rest[..end + "｜>".len()];
    if token.contains("tool▁call") || token.contains("tool_call") {
        w.out.envelope_call = true;
        w.global(FixKind::ToolCallTagUnwrapped, at);
    } else {
        w.global(FixKind::SpecialTokensStripped, at);
    }
    w.pos = at + token.len();
    Some(Ok(()))
}

impl Walk<'_> {
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
}
