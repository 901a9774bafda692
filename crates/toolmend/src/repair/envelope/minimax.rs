//! MiniMax M2 (and Anthropic-style XML):
//! `<invoke name="n"><parameter name="k">v</parameter></invoke>`, always inside
//! `<minimax:tool_call>` (Anthropic's `<function_calls>`, dots' `<dots_function_call>`:
//! [`super::hermes`]). Step-3 writes the same in its own namespace ([`super::step`]).
//!
//! A bare `<invoke name=…>` is a call only at the start of a text or inside such a
//! wrapper: after prose it is an example of the syntax (an answer about Anthropic's or
//! MiniMax's format), and stays prose.

use serde_json::Value;

use super::{Dialect, ParseError, Walk, tag_end, unquote, xml::XmlParams};
use crate::{Fix, FixKind};

/// MiniMax M2 (and Anthropic-style XML): `<invoke name="n"><parameter name="k">v</parameter></invoke>`.
pub const XML_INVOKE: &str = "<invoke name=";

pub(super) const DIALECT: Dialect = Dialect {
    // One call of a block; a marker only at the start of a text (see above).
    openers: &[XML_INVOKE],
    leading: &[XML_INVOKE],
    noise: &["</invoke>"],
    read: Some(read),
    ..Dialect::NONE
};

/// The tags of an `<invoke>`-style call (MiniMax M2, Step-3).
pub(super) struct InvokeTags {
    pub open: &'static str,
    pub close: &'static str,
    /// What opens a parameter; with `param_forms`, their common beginning.
    pub param: &'static str,
    /// The ways a parameter's opener may go on after `param` (see `XmlParams::start_forms`).
    pub param_forms: &'static [&'static str],
    pub param_close: &'static str,
    /// How an error names the tag.
    pub what: &'static str,
}

const MINIMAX_INVOKE: InvokeTags = InvokeTags {
    open: XML_INVOKE,
    close: "</invoke>",
    param: "<parameter name=",
    param_forms: &[],
    param_close: "</parameter>",
    what: "<invoke name=…>",
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    (w.rest().starts_with(XML_INVOKE) && (w.at_text_start() || w.out.envelope_call))
        .then(|| w.read_invoke(&MINIMAX_INVOKE))
}

impl Walk<'_> {
    /// An `<invoke>`-style call at the walk's position, in `x`'s tags.
    pub(super) fn read_invoke(&mut self, x: &InvokeTags) -> Result<(), ParseError> {
        let at = self.pos;
        let rest = self.rest();
        let head_end = tag_end(rest, at, x.what)?;
        let name = unquote(&rest[x.open.len()..head_end]).to_owned();
        let body_start = head_end + 1;
        let next = rest[body_start..]
            .find(x.open)
            .map_or(rest.len(), |i| body_start + i);
        let close = rest[body_start..next].find(x.close).map(|i| body_start + i);
        let body = &rest[body_start..close.unwrap_or(next)];
        let truncated_call = close.is_none() && next == rest.len();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at)];
        let params = XmlParams {
            start: x.param,
            start_forms: x.param_forms,
            key_close: ">",
            value_open: None,
            close: x.param_close,
        };
        let args = self.read_params(&params, body, at + body_start, truncated_call, &mut fixes);
        self.out.envelope_call = true;
        self.pos = at + body_start + body.len() + close.map_or(0, |_| x.close.len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }
}
