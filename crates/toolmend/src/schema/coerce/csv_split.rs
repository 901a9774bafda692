//! `csv_split`: `"a, b"` -> `["a", "b"]` for arrays of strings.

use serde_json::Value;

use super::{
    super::compile::{Flat, NULL, STR, flatten},
    Walker,
};
use crate::FixKind;

impl<'t> Walker<'t> {
    /// A comma-separated string (trimmed) as the array of strings `flat` describes.
    pub(super) fn csv_split(&self, trimmed: &str, flat: &Flat<'t>) -> Option<(FixKind, Value)> {
        let strings = flat.item(0).is_some_and(|n| {
            let f = flatten(self.root(), n);
            f.types()
                .is_some_and(|t| t & STR != 0 && t & !(STR | NULL) == 0)
                || f.enum_values()
                    .is_some_and(|e| e.iter().all(Value::is_string))
        });
        if !strings || !trimmed.contains(',') {
            return None;
        }
        let parts: Vec<Value> = trimmed
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| Value::String(p.to_owned()))
            .collect();
        if parts.len() >= 2 {
            return Some((FixKind::CsvSplit, Value::Array(parts)));
        }
        // One part (`"a,"`): wrapped alone, when wrapping is on.
        match parts.as_slice() {
            [one] if self.opts.wrap_in_array => self.wrapped(flat, one),
            _ => None,
        }
    }
}
