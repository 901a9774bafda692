//! `boolean_strings`: `"true"`, `"False"`, `"yes"`, `"no"`, `"1"`, `"0"` (any case) ->
//! booleans for boolean fields; anything else stays a `wrong_type` issue.

use serde_json::Value;

use crate::FixKind;

/// A string (trimmed) as the boolean it writes.
pub(super) fn from_string(trimmed: &str) -> Option<(FixKind, Value)> {
    parse_bool(trimmed).map(|b| (FixKind::StringToBoolean, Value::Bool(b)))
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Some(true),
        "false" | "no" | "0" => Some(false),
        _ => None,
    }
}
