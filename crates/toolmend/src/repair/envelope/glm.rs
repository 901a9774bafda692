//! GLM-4.5 / 4.6, inside Hermes's `<tool_call>`:
//! `name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>`. Poolside writes
//! the same; Hunyuan v3 (Hy3) puts `<tool_sep>` after the name ([`super::hunyuan`] reads
//! its suffixed tags).

use super::{Dialect, ParseError, Walk, name_len, ws_after, xml::XmlParams};
use crate::{Fix, FixKind};
use serde_json::Value;

/// No reader of its own: [`super::hermes`] hands over after `<tool_call>`.
pub(super) const DIALECT: Dialect = Dialect { ..Dialect::NONE };

/// Hunyuan v3's separator between the name and the parameters.
const TOOL_SEP: &str = "<tool_sep>";

const PARAMS: XmlParams<'static> = XmlParams {
    start: "<arg_key>",
    start_forms: &[],
    key_close: "</arg_key>",
    value_open: Some("<arg_value>"),
    close: "</arg_value>",
};

impl Walk<'_> {
    /// After `<tool_call>`, the name's range given by [`name`].
    pub(super) fn read_glm(
        &mut self,
        (name_start, name_end): (usize, usize),
    ) -> Result<(), ParseError> {
        let at = self.pos;
        let name = self.raw[name_start..name_end].to_owned();
        let rest = &self.raw[name_end..];
        let next = rest.find("<tool_call>").unwrap_or(rest.len());
        let close = rest[..next].find("</tool_call>");
        let body = &rest[..close.unwrap_or(next)];
        let truncated_call = close.is_none() && next == rest.len();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at)];
        let args = self.read_params(&PARAMS, body, name_end, truncated_call, &mut fixes);
        self.pos = name_end + body.len() + close.map_or(0, |_| "</tool_call>".len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }
}

/// GLM's call after `<tool_call>` at `from`: a tool name alone on its line, then
/// `<arg_key>` or `</tool_call>` (Hunyuan v3: `<tool_sep>` first). The name's range.
pub(super) fn name(b: &[u8], from: usize) -> Option<(usize, usize)> {
    let start = ws_after(b, from);
    let first = *b.get(start)?;
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return None;
    }
    let end = start + name_len(&b[start..]);
    if end - start > 64 {
        return None;
    }
    let mut next = ws_after(b, end);
    if b[next..].starts_with(TOOL_SEP.as_bytes()) {
        next = ws_after(b, next + TOOL_SEP.len());
    }
    (b[next..].starts_with(b"<arg_key>") || b[next..].starts_with(b"</tool_call>"))
        .then_some((start, end))
}
