//! Apertus (vLLM / llama.cpp `apertus`): `<|tools_prefix|>[{"f": {…}}, {"g": {…}}]<|tools_suffix|>`,
//! each call an object of one member, the tool's name its key and the arguments its value.

use serde_json::Value;

use super::{
    super::parser::{Ctx, Parser},
    Dialect, ParseError, Walk, ws_after,
};
use crate::FixKind;

/// What opens Apertus's list of calls.
pub const APERTUS_PREFIX: &str = "<|tools_prefix|>";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[APERTUS_PREFIX],
    noise: &["<|tools_suffix|>"],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    if !w.rest().starts_with(APERTUS_PREFIX) {
        return None;
    }
    w.out.envelope_call = true;
    w.global(FixKind::ToolCallTagUnwrapped, at);
    let from = ws_after(w.b, at + APERTUS_PREFIX.len());
    w.pos = from;
    if !matches!(w.b.get(from), Some(b'[' | b'{')) {
        return Some(Ok(()));
    }
    Some(w.read_apertus(from))
}

impl Walk<'_> {
    /// The list (or one object) after the prefix: `{"name": {args}}` is a call of `name`;
    /// anything else (`{"name": "f", "arguments": …}`) is read as any document is.
    fn read_apertus(&mut self, at: usize) -> Result<(), ParseError> {
        let mut p = Parser::new(&self.raw[at..], at, self.opts.max_depth);
        let parsed = p.parse_value(Ctx::Top, 0)?;
        self.pos = at + p.pos;
        let items = match parsed.value {
            Value::Array(items) => items,
            one => vec![one],
        };
        // The document's fixes go with its first call only (linear, as a list's are).
        let mut fixes = Some(p.fixes);
        for item in items {
            let fixes = fixes.take().unwrap_or_default();
            match item {
                Value::Object(obj)
                    if obj.len() == 1
                        && !obj.contains_key("function")
                        && obj.values().all(|v| v.is_object() || v.is_null()) =>
                {
                    if let Some((name, args)) = obj.into_iter().next() {
                        self.push(args, fixes, Some(name));
                    }
                }
                other => self.push(other, fixes, None),
            }
        }
        Ok(())
    }
}
