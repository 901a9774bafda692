//! Kimi K3 (XTML), unlike K2's tokens ([`super::kimi`]): a `tools` channel of calls whose
//! arguments carry their type, `<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>
//! <|open|>argument key="k" type="string"<|sep|>v<|close|>argument<|sep|><|close|>call<|sep|>
//! <|close|>tools<|sep|>`. A `string` argument is text as it stands (typed by the schema
//! afterwards, as DSML's), any other type JSON; `index` is the model's count, not kept.
//! Its `<|…|>` tokens come before [`super::tokens`], which would take them as noise.

use super::{Dialect, ParseError, Walk, dsml::TypedTags};
use crate::FixKind;

/// What opens K3's channel of calls.
pub const KIMI3_TOOLS: &str = "<|open|>tools<|sep|>";
/// What opens one K3 call (`tool="f"` follows).
pub const KIMI3_CALL: &str = "<|open|>call ";
/// What ends K3's reply channel (its opener is normally in the prompt): a marker, so the
/// prose before it is the content and the channel of calls after it is held back.
pub const KIMI3_RESPONSE_CLOSE: &str = "<|close|>response<|sep|>";
/// What opens K3's reply channel when the model writes it: a template token before the
/// prose, not the prose's.
pub const KIMI3_RESPONSE_OPEN: &str = "<|open|>response<|sep|>";
/// What ends K3's message: a marker too (nothing of the reply follows it).
pub const KIMI3_MESSAGE_CLOSE: &str = "<|close|>message<|sep|>";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[
        KIMI3_TOOLS,
        KIMI3_CALL,
        KIMI3_RESPONSE_CLOSE,
        KIMI3_MESSAGE_CLOSE,
    ],
    openers: &[KIMI3_CALL],
    read: Some(read),
    ..Dialect::NONE
};

/// Channel tokens that carry nothing of a call.
const CHANNEL_TOKENS: &[&str] = &[
    KIMI3_RESPONSE_CLOSE,
    KIMI3_RESPONSE_OPEN,
    "<|close|>tools<|sep|>",
    KIMI3_MESSAGE_CLOSE,
];

const TAGS: TypedTags = TypedTags {
    invoke: KIMI3_CALL,
    name_attr: "tool",
    head_end: "<|sep|>",
    invoke_close: "<|close|>call<|sep|>",
    param: "<|open|>argument ",
    key_attr: "key",
    type_attr: "type",
    string_type: "string",
    param_close: "<|close|>argument<|sep|>",
    what: "Kimi K3 call",
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    if !rest.starts_with("<|open|>") && !rest.starts_with("<|close|>") {
        return None;
    }
    if rest.starts_with(KIMI3_TOOLS) {
        w.out.envelope_call = true;
        w.global(FixKind::ToolCallTagUnwrapped, at);
        w.pos = at + KIMI3_TOOLS.len();
        return Some(Ok(()));
    }
    if rest.starts_with(KIMI3_CALL) {
        return Some(w.read_typed_invoke(&TAGS));
    }
    let token = CHANNEL_TOKENS.iter().find(|t| rest.starts_with(*t))?;
    w.global(FixKind::SpecialTokensStripped, at);
    w.pos = at + token.len();
    Some(Ok(()))
}
