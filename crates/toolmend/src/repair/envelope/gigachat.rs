//! GigaChat 3 (vLLM / SGLang `gigachat3`): the call is a message of the role `function
//! call`, `<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": …, "arguments": …}`.
//! GigaChat 3.1 writes `<|function_call|>{…}` ([`super::tokens`]).

use super::{Dialect, ParseError, Walk};
use crate::FixKind;

/// GigaChat 3's call message, as its template writes it after an answer's text.
pub const GIGACHAT_CALL: &str = "<|message_sep|>\n\nfunction call<|role_sep|>";
/// The same role header at the start of a text (the separator before it not kept).
pub const GIGACHAT_ROLE: &str = "function call<|role_sep|>";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[GIGACHAT_CALL],
    leading: &[GIGACHAT_ROLE],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    let len = if rest.starts_with(GIGACHAT_CALL) {
        GIGACHAT_CALL.len()
    } else if rest.starts_with(GIGACHAT_ROLE) && w.at_text_start() {
        GIGACHAT_ROLE.len()
    } else {
        return None;
    };
    w.out.envelope_call = true;
    w.global(FixKind::ToolCallTagUnwrapped, at);
    w.pos = at + len;
    Some(Ok(()))
}
