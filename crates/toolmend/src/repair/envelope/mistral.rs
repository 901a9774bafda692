//! Mistral: `[TOOL_CALLS][{"name": …, "arguments": …}]`, or in newer templates
//! `[TOOL_CALLS]name[ARGS]{…}`, `[TOOL_CALLS]name[CALL_ID]id[ARGS]{…}` and
//! `[TOOL_CALLS]name{…}`.

use super::{super::parser::is_ident, Dialect, ParseError, Walk, ws_after};
use crate::FixKind;

/// Mistral's call marker (`[TOOL_CALLS][…]`, or `[TOOL_CALLS]name[ARGS]{…}`).
pub const MISTRAL_TOOL_CALLS: &str = "[TOOL_CALLS]";

/// What stands between a v13 call's name and its id.
const CALL_ID: &str = "[CALL_ID]";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[MISTRAL_TOOL_CALLS],
    openers: &[MISTRAL_TOOL_CALLS],
    // Its template's tokens, and Llama 2's it shares.
    noise: &["[/TOOL_CALLS]", "<s>", "</s>", "[INST]", "[/INST]"],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    if !w.rest().starts_with(MISTRAL_TOOL_CALLS) {
        return None;
    }
    w.out.envelope_call = true;
    w.global(FixKind::MistralToolCallsUnwrapped, at);
    w.pos = at + MISTRAL_TOOL_CALLS.len();
    // Newer Mistral templates: `[TOOL_CALLS]name[ARGS]{…}`.
    let r = w.pos;
    let mut i = r;
    while i < w.b.len() && (is_ident(w.b[i]) || w.b[i] == b'.') {
        i += 1;
    }
    let mut args = i;
    if i > r && w.raw[i..].starts_with(CALL_ID) {
        // v13: `name[CALL_ID]id[ARGS]{…}`; the id (9 alphanumerics in Mistral's templates,
        // `_` and `-` in others') is the model's own: the call gets one where calls are
        // planned.
        args = i + CALL_ID.len();
        while args < w.b.len()
            && args - i < 64
            && (w.b[args].is_ascii_alphanumeric() || matches!(w.b[args], b'_' | b'-'))
        {
            args += 1;
        }
    }
    if i > r && w.raw[args..].starts_with("[ARGS]") {
        w.pending_name = Some(w.raw[r..i].to_owned());
        w.pos = args + "[ARGS]".len();
    } else if args > i && w.b.get(ws_after(w.b, args)) == Some(&b'{') {
        // An id without `[ARGS]`.
        w.pending_name = Some(w.raw[r..i].to_owned());
        w.pos = args;
    } else if i > r && w.b.get(ws_after(w.b, i)) == Some(&b'{') {
        // Mistral v11 without `[ARGS]`: `[TOOL_CALLS]name{…}`.
        w.pending_name = Some(w.raw[r..i].to_owned());
        w.pos = i;
    }
    Some(Ok(()))
}
