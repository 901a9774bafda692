//! `unwrap_arguments`: `{"input"|"arguments"|"parameters"|<tool name>: {...}}` -> `{...}`
//! (the root only, and only when the inner object looks like these arguments).

use serde_json::{Map, Value};

use crate::{RepairOptions, repair};

use super::{super::suggest::Key, Walker, json_strings::decode_json, quote};
use crate::FixKind;

/// Keys a model nests the arguments under (besides the tool's own name).
pub(super) const WRAPPER_KEYS: &[&str] = &[
    "input",
    "inputs",
    "arguments",
    "args",
    "parameters",
    "params",
    "properties",
    "kwargs",
    "tool_input",
];

impl Walker<'_> {
    /// `{"input": {...}}`, `{"<tool name>": {...}}` … -> `{...}` (root only).
    pub(super) fn unwrap_arguments(&mut self, map: &mut Map<String, Value>, props: &[&str]) {
        for _ in 0..3 {
            if map.len() != 1 {
                return;
            }
            let Some((key, inner)) = map.iter().next() else {
                return;
            };
            let wrapper = WRAPPER_KEYS.contains(&key.to_ascii_lowercase().as_str())
                || key.eq_ignore_ascii_case(self.tool.name());
            if !wrapper || props.contains(&key.as_str()) {
                return;
            }
            let mut repaired = Vec::new();
            let inner = match inner {
                Value::Object(m) => m.clone(),
                Value::String(s) => match decode_json(s) {
                    Some(Value::Object(m)) => m,
                    Some(_) => return,
                    // A wrapper a dialect gave as text in a language of its own (MiniCPM 5's
                    // `<param name="properties">{'phone_number': '555'}</param>`): read as
                    // the repair reads arguments, when that reading is the only one and
                    // lost nothing.
                    None => match read_object(s) {
                        Some((m, fixes)) => {
                            repaired = fixes;
                            m
                        }
                        None => return,
                    },
                },
                _ => return,
            };
            // The inner object must look like these arguments (or be empty).
            let names: Vec<Key> = props.iter().map(|p| Key::new(p)).collect();
            let looks_right = inner.is_empty()
                || inner.keys().any(|k| {
                    let key = Key::new(k);
                    names.iter().any(|n| n.same_key(&key))
                });
            if !looks_right {
                return;
            }
            let detail = if repaired.is_empty() {
                format!("{} unwrapped", quote(key))
            } else {
                format!(
                    "{} unwrapped, its text read as arguments ({})",
                    quote(key),
                    repaired.join(", ")
                )
            };
            *map = inner;
            self.fix(FixKind::ArgumentsUnwrapped, "", detail);
        }
    }
}

/// `text` read by the repair as one object, with the kinds of the fixes it took; `None`
/// when it is no object, has more than one reading, names a tool, or took a fix that is
/// not safe (a cut-off text among them).
fn read_object(text: &str) -> Option<(Map<String, Value>, Vec<&'static str>)> {
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let r = repair(text, &RepairOptions::default()).ok()?;
    let [call] = r.calls.as_slice() else {
        return None;
    };
    // Only safe fixes (quotes, Python's literals): `arguments_unwrapped` is a safe fix.
    let safe = call.fixes.iter().all(|f| f.safety() == crate::Safety::Safe);
    if !r.alternatives.is_empty() || call.name.is_some() || !safe {
        return None;
    }
    let Value::Object(m) = &call.arguments else {
        return None;
    };
    let kinds = call.fixes.iter().map(|f| f.kind.id()).collect();
    Some((m.clone(), kinds))
}
