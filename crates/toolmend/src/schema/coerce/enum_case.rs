//! `enum_case`: `"Celsius"` -> `"celsius"`, `"no-preference"` -> `"no_preference"`: a
//! unique match ignoring case, `-`, `_` and spaces. No match is never guessed.

use serde_json::Value;

use crate::FixKind;

/// The one enum string `s` matches ignoring case and separators.
pub(super) fn enum_member<'a>(s: &str, allowed: &'a [Value]) -> Option<(FixKind, &'a Value)> {
    let n = enum_norm(s);
    let mut hits = allowed
        .iter()
        .filter(|a| a.as_str().is_some_and(|x| enum_norm(x) == n));
    match (hits.next(), hits.next()) {
        (Some(one), None) if !n.is_empty() => Some((FixKind::EnumCaseFixed, one)),
        _ => None,
    }
}

/// Lower case without `-`, `_` or spaces: `"No-Preference"` ~ `"no_preference"`.
fn enum_norm(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}
