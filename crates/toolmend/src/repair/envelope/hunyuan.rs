//! Hunyuan v3 / v4 (Hy3, vLLM's `hy_v3` / `hy_v4`): GLM's parameters inside tags that carry
//! a per-checkpoint suffix, `<tool_calls:6124c78e><tool_call:6124c78e>name<tool_sep:…>
//! <arg_key:…>k</arg_key:…><arg_value:…>v</arg_value:…></tool_call:…></tool_calls:…>`.
//! Without a suffix the tags are Hermes's and GLM's ([`super::glm`] reads them, with
//! `<tool_sep>`). Hunyuan A13B writes a JSON list in the bare `<tool_calls>` ([`super::hermes`]).

use super::{
    Dialect, ParseError, Walk,
    xml::{NamedCall, XmlParams, as_written},
};
use crate::FixKind;

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
    /// the parameters, up to `</tool_call{suffix}>` or the next call of any suffix.
    fn read_hunyuan(&mut self, suffix: &str, from: usize) -> Result<(), ParseError> {
        let tags = |t: &str| format!("<{t}{suffix}>");
        let (close, sep) = (tags("/tool_call"), tags("tool_sep"));
        let (k, kc, v, vc) = (
            tags("arg_key"),
            tags("/arg_key"),
            tags("arg_value"),
            tags("/arg_value"),
        );
        let call = NamedCall {
            opener: HUNYUAN_CALL,
            close: &close,
            sep: Some(&sep),
            params: XmlParams {
                start: &k,
                start_forms: &[],
                key_close: &kc,
                value_open: Some(&v),
                close: &vc,
            },
            what: "Hunyuan",
            body: as_written,
        };
        self.read_named_call(from, &call)
    }
}
