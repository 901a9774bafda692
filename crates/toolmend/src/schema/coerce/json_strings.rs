//! `json_strings`: `"[\\"a\\"]"` -> `["a"]` for object/array fields, and arguments sent as a
//! JSON-encoded object.

use serde_json::Value;

use super::super::compile::{ARR, OBJ, value_mask};
use crate::FixKind;

/// A string that decodes to what a field of `types` takes (an object or array).
pub(super) fn decoded(s: &str, types: u8) -> Option<(FixKind, Value)> {
    decode_json(s)
        .filter(|d| value_mask(d) & types & (OBJ | ARR) != 0)
        .map(|d| (FixKind::JsonStringDecoded, d))
}

/// The whole arguments sent as a string holding an object: that object.
pub(super) fn decoded_arguments(value: &Value) -> Option<Value> {
    match value {
        Value::String(s) => decode_json(s).filter(Value::is_object),
        _ => None,
    }
}

/// A JSON object or array held in a string.
pub(super) fn decode_json(s: &str) -> Option<Value> {
    let t = s.trim();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<Value>(t)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
}
