//! `dates`: `"01/19/2026"` -> `"2026-01-19"` for `format: date`; near-RFC 3339 forms for
//! `format: date-time` (a missing time zone is never invented).

use serde_json::Value;

use super::super::dates::{is_iso_date, is_rfc3339, normalize_date, normalize_date_time};
use crate::FixKind;

/// A string of `format` in ISO 8601, when it was written otherwise.
pub(super) fn normalized(format: &str, value: &Value) -> Option<(FixKind, Value)> {
    let Value::String(s) = value else {
        return None;
    };
    let normalized = match format {
        "date" if !is_iso_date(s) => normalize_date(s),
        "date-time" if !is_rfc3339(s) => normalize_date_time(s),
        _ => None,
    };
    normalized.map(|n| (FixKind::DateNormalized, Value::String(n)))
}
