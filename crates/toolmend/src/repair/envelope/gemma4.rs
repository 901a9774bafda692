//! Gemma 4: `<|tool_call>call:name{key:<|"|>text<|"|>,n:5}<tool_call|>`. The call is
//! FunctionGemma's ([`super::gemma`]); its own asymmetric tokens open and close it, and
//! `<|"|>` delimits strings where FunctionGemma writes `<escape>`. Its reasoning channel
//! (`<|channel>thought…<channel|>`) is a thinking block ([`super::super::markers`]).

use super::{Dialect, ParseError, Walk};
use crate::FixKind;

/// What opens one Gemma 4 call (its close is `<tool_call|>`).
pub const GEMMA4_CALL_START: &str = "<|tool_call>";

/// What closes one call: stripped after the call is read.
const CALL_END: &str = "<tool_call|>";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[GEMMA4_CALL_START],
    openers: &[GEMMA4_CALL_START],
    // Its turn and tool-result tokens carry nothing of a call.
    noise: &[
        CALL_END,
        "<|turn>model",
        "<|turn>",
        "<turn|>",
        "<|tool_response>",
        "<tool_response|>",
    ],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    if !w.rest().starts_with(GEMMA4_CALL_START) {
        return None;
    }
    w.out.envelope_call = true;
    w.global(FixKind::ToolCallTagUnwrapped, at);
    w.pos = at + GEMMA4_CALL_START.len();
    w.skip_ws();
    if !w.rest().starts_with(super::gemma::GEMMA_CALL) {
        return Some(Ok(()));
    }
    let r = w.read_gemma(w.pos);
    if r.is_ok() {
        w.skip_ws();
        if w.rest().starts_with(CALL_END) {
            w.pos += CALL_END.len();
        }
    }
    Some(r)
}
