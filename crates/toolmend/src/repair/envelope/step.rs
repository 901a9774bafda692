//! Step-3: DeepSeek's fullwidth call tokens around MiniMax's `<invoke>` in the `steptml:`
//! namespace.

use super::{Dialect, ParseError, Walk, minimax::InvokeTags};
use crate::FixKind;

/// Step-3: `<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke
/// name="n"><steptml:parameter name="k">v</steptml:parameter></steptml:invoke><｜tool_call_end｜>`
/// (fullwidth `｜`, underscores where DeepSeek writes `▁`).
pub const STEP_CALL_BEGIN: &str = "<｜tool_call_begin｜>";
/// Step-3's separator between the call's type (`function`) and its invoke.
pub const STEP_SEP: &str = "<｜tool_sep｜>";
/// Step-3's invoke: MiniMax's XML in the `steptml:` namespace.
pub const STEP_INVOKE: &str = "<steptml:invoke name=";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &["<｜tool_calls_begin｜>", STEP_CALL_BEGIN, STEP_INVOKE],
    openers: &[STEP_CALL_BEGIN],
    read: Some(read),
    ..Dialect::NONE
};

const STEP_XML_INVOKE: InvokeTags = InvokeTags {
    open: STEP_INVOKE,
    close: "</steptml:invoke>",
    param: "<steptml:parameter name=",
    param_forms: &[],
    param_close: "</steptml:parameter>",
    what: "<steptml:invoke name=…>",
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    if let Some(after) = rest.strip_prefix(STEP_CALL_BEGIN) {
        // `function<｜tool_sep｜>` before the invoke.
        w.out.envelope_call = true;
        w.global(FixKind::ToolCallTagUnwrapped, at);
        let t = after.trim_start();
        let skip = t
            .strip_prefix("function")
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix(STEP_SEP))
            .map_or(0, |r| after.len() - r.len());
        w.pos = at + STEP_CALL_BEGIN.len() + skip;
        return Some(Ok(()));
    }
    rest.starts_with(STEP_INVOKE)
        .then(|| w.read_invoke(&STEP_XML_INVOKE))
}
