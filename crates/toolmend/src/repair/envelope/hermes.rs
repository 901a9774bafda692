//! Hermes-style tool-call tags (Hermes, Qwen, GLM-4.5, OLMo, MiniMax M2 and their
//! variants): `<tool_call>{"name": …, "arguments": …}</tool_call>`. The tags are unwrapped
//! and what they hold is read as any document is.

use super::{Dialect, ParseError, Walk, glm};
use crate::FixKind;

const TOOL_CALL: &str = "<tool_call>";
const FUNCTION_CALL: &str = "<function_call>";

/// Tool-call tags (Hermes, Qwen, GLM-4.5, OLMo, MiniMax M2 and their variants), openers
/// and closers: the parser unwraps them; a `{"name", "arguments"}` object inside is a call,
/// and so is a pythonic call `f(a=1)` (OLMo's `<function_calls>`).
pub const TOOL_CALL_TAGS: &[&str] = &[
    TOOL_CALL,
    "</tool_call>",
    "<tool_calls>",
    "</tool_calls>",
    FUNCTION_CALL,
    "</function_call>",
    "<functioncall>",
    "</functioncall>",
    "<toolcall>",
    "</toolcall>",
    "<function_calls>",
    "</function_calls>",
    "<minimax:tool_call>",
    "</minimax:tool_call>",
];

pub(super) const DIALECT: Dialect = Dialect {
    markers: TOOL_CALL_TAGS,
    // `<tool_calls>` and `<function_calls>` open a whole list, not one call.
    openers: &[TOOL_CALL, FUNCTION_CALL],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    let tag = TOOL_CALL_TAGS.iter().find(|t| rest.starts_with(*t))?;
    w.out.envelope_call = true;
    w.global(FixKind::ToolCallTagUnwrapped, at);
    w.pos = at + tag.len();
    if *tag == TOOL_CALL
        && let Some(name) = glm::name(w.b, w.pos)
    {
        return Some(w.read_glm(name));
    }
    Some(Ok(()))
}
