//! Phi-4-mini (vLLM `phi4_mini_json`): `functools[{"name": "f", "arguments": {…}}, …]`,
//! `functools` one token of its vocabulary. It opens a call only at the start of a text:
//! after prose the word is read as prose.

use super::{Dialect, ParseError, Walk};
use crate::FixKind;

/// Phi-4-mini's list of calls, at the start of a text.
pub const FUNCTOOLS: &str = "functools[";

pub(super) const DIALECT: Dialect = Dialect {
    leading: &[FUNCTOOLS],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    if !(w.rest().starts_with(FUNCTOOLS) && w.at_text_start()) {
        return None;
    }
    w.out.envelope_call = true;
    w.global(FixKind::ToolCallTagUnwrapped, at);
    // The list's `[` is the document's.
    w.pos = at + FUNCTOOLS.len() - 1;
    Some(Ok(()))
}
