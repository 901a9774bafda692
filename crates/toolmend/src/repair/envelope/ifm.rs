//! K2 Horizon (vLLM `k2_horizon`): GLM's keys and values in `ifm|` tags,
//! `<ifm|tool_calls><ifm|tool_call>name<ifm|arg_key>k</ifm|arg_key><ifm|arg_value>v
//! </ifm|arg_value></ifm|tool_call></ifm|tool_calls>`, a key optionally followed by
//! `<ifm|arg_type>t</ifm|arg_type>`; or a JSON call object inside `<ifm|tool_call>`. The
//! values are text typed by the schema afterwards, as GLM's are: the model's `arg_type` is
//! its word for the type, and the tool's schema has the last word, so it is passed over.

use serde_json::Value;

use super::{Dialect, ParseError, Walk, name_len, ws_after, xml::XmlParams};
use crate::{Fix, FixKind};

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
    rest.starts_with(IFM_CALL)
        .then(|| w.read_ifm(at + IFM_CALL.len()))
}

impl Walk<'_> {
    /// After `<ifm|tool_call>` (`from`): a JSON call (read by the walk as any document), or
    /// the name and the parameters, up to `</ifm|tool_call>` or the next call.
    fn read_ifm(&mut self, from: usize) -> Result<(), ParseError> {
        self.out.envelope_call = true;
        self.global(FixKind::ToolCallTagUnwrapped, self.pos);
        let start = ws_after(self.b, from);
        if self.b.get(start) == Some(&b'{') {
            self.pos = start;
            return Ok(());
        }
        let n = name_len(&self.b[start..]);
        if n == 0 {
            return Err(ParseError {
                fatal: false,
                offset: start,
                reason: "a K2 Horizon call without a tool name".to_owned(),
            });
        }
        let name = self.raw[start..start + n].to_owned();
        let body_at = start + n;
        let rest = &self.raw[body_at..];
        // The next call bounds this one (each byte searched once: linear).
        let next = rest.find(IFM_CALL).unwrap_or(rest.len());
        let end = rest[..next].find(IFM_CALL_CLOSE);
        let body = &rest[..end.unwrap_or(next)];
        let truncated_call = end.is_none() && next == rest.len();
        // The type tags passed over (the offsets of the fixes after one then approximate
        // the text's).
        let untyped = without_types(body);
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, self.pos)];
        let params = XmlParams {
            start: "<ifm|arg_key>",
            start_forms: &[],
            key_close: "</ifm|arg_key>",
            value_open: Some("<ifm|arg_value>"),
            close: "</ifm|arg_value>",
        };
        let args = self.read_params(&params, &untyped, body_at, truncated_call, &mut fixes);
        self.pos = body_at + body.len() + end.map_or(0, |_| IFM_CALL_CLOSE.len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }
}

/// `body` without its `<ifm|arg_type>…</ifm|arg_type>` elements (one pass).
fn without_types(body: &str) -> std::borrow::Cow<'_, str> {
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
