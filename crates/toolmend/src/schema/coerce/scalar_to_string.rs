//! `scalar_to_string`: `5` -> `"5"`, `true` -> `"true"` for string fields and string enums.

use serde_json::Value;

use crate::FixKind;

/// A number's or boolean's text.
pub(super) fn from_scalar(value: &Value) -> Option<(FixKind, Value)> {
    match value {
        Value::Number(n) => Some((FixKind::ScalarToString, Value::String(n.to_string()))),
        Value::Bool(b) => Some((FixKind::ScalarToString, Value::String(b.to_string()))),
        _ => None,
    }
}

/// The enum's string that is a number's or boolean's text.
pub(super) fn enum_member<'a>(value: &Value, allowed: &'a [Value]) -> Option<(FixKind, &'a Value)> {
    let text = value.to_string();
    allowed
        .iter()
        .find(|a| a.as_str() == Some(text.as_str()))
        .map(|a| (FixKind::ScalarToString, a))
}
