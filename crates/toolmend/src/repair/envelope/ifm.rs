//! K2 Horizon (vLLM `k2_horizon`): GLM's keys and values in `ifm|` tags,
//! `<ifm|tool_calls><ifm|tool_call>name<ifm|arg_key>k</ifm|arg_key><ifm|arg_value>v
//! </ifm|arg_value></ifm|tool_call></ifm|tool_calls>`, a key optionally followed by
//! `<ifm|arg_type>t</ifm|arg_type>`; or a JSON call object inside `<ifm|tool_call>`. The
//! values are text typed by the schema afterwards, as GLM's are: the model's `arg_type` is
//! its word for the type, and the tool's schema has the last word, so it is passed over.

use std::borrow::Cow;

use super::{
    Dialect, ParseError, Walk, ws_after,
    xml::{NamedCall, XmlParams},
};
use crate::FixKind;

/// A block of K2 Horizon calls.
pub const IFM_CALLS: &str = "<ifm|tool_calls>";
/// One K2 Horizon call: `<ifm|tool_call>name…` or `<ifm|tool_call>{…}`.
pub const IFM_CALL: &str = "<ifm|tool_call>";
const IFM_CALL_CLOSE: &str = "</ifm|tool_call>";
const TYPE_OPEN: &str = "<ifm|arg_type>";
const TYPE_CLOSE: &str = "</ifm|arg_type>";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[IFM_CALLS, IFM_CALL],
    openers: &[IFM_CALL],
    noise: &["</ifm|tool_calls>", IFM_CALL_CLOSE],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    if rest.starts_with(IFM_CALLS) {
        w.out.envelope_call = true;
        w.global(FixKind::ToolCallTagUnwrapped, at);
        w.pos = at + IFM_CALLS.len();
        return Some(Ok(()));
    }
    if !rest.starts_with(IFM_CALL) {
        return None;
    }
    // A JSON call inside the tag is read by the walk as any document.
    let from = ws_after(w.b, at + IFM_CALL.len());
    if w.b.get(from) == Some(&b'{') {
        w.out.envelope_call = true;
        w.global(FixKind::ToolCallTagUnwrapped, at);
        w.pos = from;
        return Some(Ok(()));
    }
    Some(w.read_named_call(at + IFM_CALL.len(), &CALL))
}

const CALL: NamedCall<'static> = NamedCall {
    opener: IFM_CALL,
    close: IFM_CALL_CLOSE,
    sep: None,
    params: XmlParams {
        start: "<ifm|arg_key>",
        start_forms: &[],
        key_close: "</ifm|arg_key>",
        value_open: Some("<ifm|arg_value>"),
        close: "</ifm|arg_value>",
    },
    what: "K2 Horizon",
    // The type tags passed over (the offsets of the fixes after one then approximate
    // the text's).
    body: without_types,
};

/// `body` without its `<ifm|arg_type>…</ifm|arg_type>` elements (one pass).
fn without_types(body: &str) -> Cow<'_, str> {
    if !body.contains(TYPE_OPEN) {
        return body.into();
    }
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(i) = rest.find(TYPE_OPEN) {
        out.push_str(&rest[..i]);
        let after = &rest[i + TYPE_OPEN.len()..];
        // Its closer is the next tag, or it is no type tag: a type never swallows a value,
        // and each byte is looked at once.
        match after.find('<') {
            Some(e) if after[e..].starts_with(TYPE_CLOSE) => {
                rest = &after[e + TYPE_CLOSE.len()..];
            }
            _ => {
                out.push_str(TYPE_OPEN);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.into()
}
