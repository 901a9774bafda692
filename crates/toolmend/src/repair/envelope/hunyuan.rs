//! Hunyuan v3 / v4 (Hy3, vLLM's `hy_v3` / `hy_v4`): GLM's parameters inside tags that carry
//! a per-checkpoint suffix, `<tool_calls:6124c78e><tool_call:6124c78e>name<tool_sep:…>
//! <arg_key:…>k</arg_key:…><arg_value:…>v</arg_value:…></tool_call:…></tool_calls:…>`.
//! Without a suffix the tags are Hermes's and GLM's ([`super::glm`] reads them, with
//! `<tool_sep>`). Hunyuan A13B writes a JSON list in the bare `<tool_calls>` ([`super::hermes`]).

use serde_json::Value;

use super::{Dialect, ParseError, Walk, name_len, prefix, ws_after, xml::XmlParams};
use crate::{Fix, FixKind};

/// A suffixed block of Hunyuan calls: `<tool_calls:suffix>`.
pub const HUNYUAN_CALLS: &str = "<tool_calls:";
/// A suffixed Hunyuan call: `<tool_call:suffix>name…`.
pub const HUNYUAN_CALL: &str = "<tool_call:";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[HUNYUAN_CALLS, HUNYUAN_CALL, "</tool_calls:", "</tool_call:"],
    openers: &[HUNYUAN_CALL],
    read: Some(read),
    ..Dialect::NONE
};

/// The suffix at the start of `s` (`:6124c78e` before `>`): its length, `>` not counted.
fn suffix_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let n = b
        .iter()
        .take(65)
        .skip(1)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
        .count();
    (b.first() == Some(&b':') && n > 0 && n <= 64 && b.get(n + 1) == Some(&b'>')).then_some(n + 1)
}

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    for (tag, call) in [
        (HUNYUAN_CALLS, false),
        ("</tool_calls:", false),
        ("</tool_call:", false),
        (HUNYUAN_CALL, true),
    ] {
        if !rest.starts_with(tag) {
            continue;
        }
        let colon = tag.len() - 1;
        let suffix = &rest[colon..colon + suffix_len(&rest[colon..])?];
        let tag_end = colon + suffix.len() + 1;
        if call {
            return Some(w.read_hunyuan(suffix, at + tag_end));
        }
        if !tag.starts_with("</") {
            w.out.envelope_call = true;
        }
        w.global(FixKind::ToolCallTagUnwrapped, at);
        w.pos = at + tag_end;
        return Some(Ok(()));
    }
    None
}

impl Walk<'_> {
    /// After `<tool_call{suffix}>` (`from`): the name, an optional `<tool_sep{suffix}>`,
    /// the parameters, up to `</tool_call{suffix}>` or the next call.
    fn read_hunyuan(&mut self, suffix: &str, from: usize) -> Result<(), ParseError> {
        self.out.envelope_call = true;
        self.global(FixKind::ToolCallTagUnwrapped, self.pos);
        let tags = |t: &str| format!("<{t}{suffix}>");
        let (close, sep) = (tags("/tool_call"), tags("tool_sep"));
        let (k, kc, v, vc) = (
            tags("arg_key"),
            tags("/arg_key"),
            tags("arg_value"),
            tags("/arg_value"),
        );
        let start = ws_after(self.b, from);
        let n = name_len(&self.b[start..]);
        if n == 0 {
            return Err(ParseError {
                fatal: false,
                offset: start,
                reason: "a Hunyuan call without a tool name".to_owned(),
            });
        }
        let name = self.raw[start..start + n].to_owned();
        let mut body_at = start + n;
        let head = prefix(&self.raw[body_at..], 256);
        if let Some(r) = head.trim_start().strip_prefix(sep.as_str()) {
            body_at += head.len() - r.len();
        }
        let rest = &self.raw[body_at..];
        // The next call of any suffix bounds this one (each byte searched once: linear).
        let next = rest.find(HUNYUAN_CALL).unwrap_or(rest.len());
        let end = rest[..next].find(close.as_str());
        let body = &rest[..end.unwrap_or(next)];
        let truncated_call = end.is_none() && next == rest.len();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, self.pos)];
        let params = XmlParams {
            start: &k,
            start_forms: &[],
            key_close: &kc,
            value_open: Some(&v),
            close: &vc,
        };
        let args = self.read_params(&params, body, body_at, truncated_call, &mut fixes);
        self.pos = body_at + body.len() + end.map_or(0, |_| close.len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }
}
