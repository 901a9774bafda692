//! Hermes-style tool-call tags (Hermes, Qwen, GLM-4.5, OLMo, MiniMax M2, ERNIE 4.5,
//! Hunyuan A13B, LongCat, dots, Nemotron, Seed-OSS and their variants):
//! `<tool_call>{"name": …, "arguments": …}</tool_call>`. The tags are unwrapped and what
//! they hold is read as any document is.

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
    // LongCat-Flash: Hermes's JSON in its own tags.
    LONGCAT_CALL,
    "</longcat_tool_call>",
    // dots.llm1 (vLLM `dots`): `<invoke name=…>` calls or a JSON call inside.
    DOTS_CALL,
    "</dots_function_call>",
    // Nemotron Nano v2 / Llama-Nemotron (vLLM `nemotron_json`): a JSON list of calls.
    "<TOOLCALL>",
    "</TOOLCALL>",
    // Seed-OSS (vLLM `seed_oss`): Qwen3-Coder's `<function=…>` XML in its own tags.
    SEED_CALL,
    "</seed:tool_call>",
];

/// Seed-OSS's call tag.
const SEED_CALL: &str = "<seed:tool_call>";

/// LongCat-Flash's call tag.
const LONGCAT_CALL: &str = "<longcat_tool_call>";
/// dots.llm1's call tag.
const DOTS_CALL: &str = "<dots_function_call>";

pub(super) const DIALECT: Dialect = Dialect {
    markers: TOOL_CALL_TAGS,
    // `<tool_calls>`, `<function_calls>` and `<TOOLCALL>` open a whole list, not one call.
    openers: &[TOOL_CALL, FUNCTION_CALL, LONGCAT_CALL, DOTS_CALL, SEED_CALL],
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
