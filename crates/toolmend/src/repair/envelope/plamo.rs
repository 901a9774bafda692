//! PLaMo 3 (vLLM `plamo3`): `<|plamo:begin_tool_requests:plamo|>` around calls, each
//! `<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>f
//! <|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json
//! <|plamo:msg|>{…}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>`.
//! The name is read here; the JSON after `<|plamo:msg|>` is read as any document, as that
//! tool's arguments. The closing tokens are `<|…|>` noise ([`super::tokens`]), so it comes
//! before that reader.

use super::{Dialect, ParseError, Walk, prefix};
use crate::FixKind;

/// What opens a block of PLaMo calls.
pub const PLAMO_CALLS: &str = "<|plamo:begin_tool_requests:plamo|>";
/// What opens one PLaMo call.
pub const PLAMO_CALL: &str = "<|plamo:begin_tool_request:plamo|>";
const NAME_OPEN: &str = "<|plamo:begin_tool_name:plamo|>";
const NAME_CLOSE: &str = "<|plamo:end_tool_name:plamo|>";
const ARGS_OPEN: &str = "<|plamo:begin_tool_arguments:plamo|>";
/// What may stand between the arguments' opener and the JSON.
const ARGS_HEAD: [&str; 3] = ["<|plamo:constrain|>", "json", "<|plamo:msg|>"];

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[PLAMO_CALLS, PLAMO_CALL],
    openers: &[PLAMO_CALL],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    if rest.starts_with(PLAMO_CALLS) {
        w.out.envelope_call = true;
        w.global(FixKind::ToolCallTagUnwrapped, at);
        w.pos = at + PLAMO_CALLS.len();
        return Some(Ok(()));
    }
    if !rest.starts_with(PLAMO_CALL) {
        return None;
    }
    w.out.envelope_call = true;
    w.global(FixKind::ToolCallTagUnwrapped, at);
    let mut pos = at + PLAMO_CALL.len();
    // The name, on one short stretch (bounded: linear).
    let head = prefix(&w.raw[pos..], 512);
    if let Some(h) = head.trim_start().strip_prefix(NAME_OPEN)
        && let Some(e) = h.find(NAME_CLOSE)
    {
        let name = h[..e].trim();
        if !name.is_empty() {
            w.pending_name = Some(name.to_owned());
        }
        pos += head.len() - h.len() + e + NAME_CLOSE.len();
        let mut r = w.raw[pos..].trim_start();
        if let Some(a) = r.strip_prefix(ARGS_OPEN) {
            r = a;
            for t in ARGS_HEAD {
                r = r.trim_start();
                r = r.strip_prefix(t).unwrap_or(r);
            }
        }
        pos = w.raw.len() - r.len();
    }
    w.pos = pos;
    Some(Ok(()))
}
