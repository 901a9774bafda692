//! Solar Open 2 (vLLM `solar_open2`): `<|tool_call:start|>name` + newline +
//! `<|tool_arg:start|>k<|tool_arg:value|>v<|tool_arg:end|>` per argument +
//! `<|tool_call:end|>`, one per call. The values are text typed by the schema afterwards,
//! as GLM's are. Its tokens are `<|…|>`, so it comes before [`super::tokens`], whose reader
//! takes any other such token as noise.

use serde_json::Value;

use super::{Dialect, ParseError, Walk, name_len, ws_after, xml::XmlParams};
use crate::{Fix, FixKind};

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
        .then(|| w.read_solar(at + SOLAR_CALL.len()))
}

impl Walk<'_> {
    /// After `<|tool_call:start|>` (`from`): the name and the arguments, up to
    /// `<|tool_call:end|>` or the next call.
    fn read_solar(&mut self, from: usize) -> Result<(), ParseError> {
        self.out.envelope_call = true;
        self.global(FixKind::ToolCallTagUnwrapped, self.pos);
        let start = ws_after(self.b, from);
        let n = name_len(&self.b[start..]);
        if n == 0 {
            return Err(ParseError {
                fatal: false,
                offset: start,
                reason: "a Solar Open call without a tool name".to_owned(),
            });
        }
        let name = self.raw[start..start + n].to_owned();
        let body_at = start + n;
        let rest = &self.raw[body_at..];
        // The next call bounds this one (each byte searched once: linear).
        let next = rest.find(SOLAR_CALL).unwrap_or(rest.len());
        let end = rest[..next].find(SOLAR_CALL_END);
        let body = &rest[..end.unwrap_or(next)];
        let truncated_call = end.is_none() && next == rest.len();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, self.pos)];
        let params = XmlParams {
            start: "<|tool_arg:start|>",
            start_forms: &[],
            key_close: "<|tool_arg:value|>",
            value_open: None,
            close: "<|tool_arg:end|>",
        };
        let args = self.read_params(&params, body, body_at, truncated_call, &mut fixes);
        self.pos = body_at + body.len() + end.map_or(0, |_| SOLAR_CALL_END.len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }
}
