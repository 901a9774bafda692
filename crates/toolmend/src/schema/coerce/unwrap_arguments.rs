//! `unwrap_arguments`: `{"input"|"arguments"|"parameters"|<tool name>: {...}}` -> `{...}`
//! (the root only, and only when the inner object looks like these arguments).

use serde_json::{Map, Value};

use super::{super::suggest::Key, Walker, json_strings::decode_json, quote};
use crate::FixKind;

/// Keys a model nests the arguments under (besides the tool's own name).
const WRAPPER_KEYS: &[&str] = &[
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
            let inner = match inner {
                Value::Object(m) => m.clone(),
                Value::String(s) => match decode_json(s) {
                    Some(Value::Object(m)) => m,
                    _ => return,
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
            let detail = format!("{} unwrapped", quote(key));
            *map = inner;
            self.fix(FixKind::ArgumentsUnwrapped, "", detail);
        }
    }
}
