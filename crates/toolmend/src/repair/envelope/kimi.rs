//! Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{…}`.
//! Its tokens are read with the other chat-template tokens ([`super::tokens`]); here is
//! the call id after them.

use super::{Dialect, Walk, prefix, strip_namespace};

/// Kimi K2: `<|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{…}`: the call
/// id (the name, `functions.` before it, `:index` after it) ends at this token.
pub const KIMI_ARGUMENT_BEGIN: &str = "<|tool_call_argument_begin|>";

/// What opens one call; its id follows.
const CALL_BEGIN: &str = "<|tool_call_begin|>";

pub(super) const DIALECT: Dialect = Dialect {
    call_tokens: &[CALL_BEGIN, "<|tool_calls_section_begin|>"],
    openers: &[CALL_BEGIN],
    ..Dialect::NONE
};

/// After the call token `token`: the call id, when `token` opens one call.
pub(super) fn read_call_id(w: &mut Walk<'_>, token: &str) {
    if token != CALL_BEGIN {
        return;
    }
    let head = prefix(w.rest(), 256);
    if let Some(i) = head.find(KIMI_ARGUMENT_BEGIN) {
        let id = strip_namespace(head[..i].trim());
        let name = match id.rsplit_once(':') {
            Some((n, index)) if index.bytes().all(|c| c.is_ascii_digit()) => n,
            _ => id,
        };
        if !name.is_empty() {
            w.pending_name = Some(name.to_owned());
        }
        w.pos += i + KIMI_ARGUMENT_BEGIN.len();
    }
}
