//! Solar Open 2 (vLLM `solar_open2`): `<|tool_call:start|>name` + newline +
//! `<|tool_arg:start|>k<|tool_arg:value|>v<|tool_arg:end|>` per argument +
//! `<|tool_call:end|>`, one per call. The values are text typed by the schema afterwards,
//! as GLM's are. Its tokens are `<|…|>`, so it comes before [`super::tokens`], whose reader
//! takes any other such token as noise.

use super::{
    Dialect, ParseError, Walk,
    xml::{NamedCall, XmlParams, as_written},
};

/// What opens one Solar Open 2 call (its name follows).
pub const SOLAR_CALL: &str = "<|tool_call:start|>";
const SOLAR_CALL_END: &str = "<|tool_call:end|>";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[SOLAR_CALL],
    openers: &[SOLAR_CALL],
    noise: &[SOLAR_CALL_END],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    w.rest()
        .starts_with(SOLAR_CALL)
        .then(|| w.read_named_call(at + SOLAR_CALL.len(), &CALL))
}

const CALL: NamedCall<'static> = NamedCall {
    opener: SOLAR_CALL,
    close: SOLAR_CALL_END,
    sep: None,
    params: XmlParams {
        start: "<|tool_arg:start|>",
        start_forms: &[],
        key_close: "<|tool_arg:value|>",
        value_open: None,
        close: "<|tool_arg:end|>",
    },
    what: "Solar Open",
    body: as_written,
};
