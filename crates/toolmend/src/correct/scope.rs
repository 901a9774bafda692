//! What a correction may change: the values the call's issues name, and a key no property
//! matched moved onto the field it meant. A corrector that rewrites a value that had no
//! problem (`Oslo` -> `Paris`) or adds one nobody asked for would run what the model never
//! sent; its answer is not clean (`value_changed` issues), whatever the schema says.

use std::collections::HashSet;

use serde_json::Value;

use crate::{Issue, IssueKind, schema::preview};

/// What becomes of an answer that changed a value no issue named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorrectionScope {
    /// Refused: the answer is not clean (`value_changed` issues); the original reading
    /// stays, with its feedback, unless a later attempt keeps to the scope.
    #[default]
    Issues,
    /// Kept, each change recorded as an unsafe fix (`correction_beyond_issues`): for a
    /// corrector trusted to rewrite the whole call.
    Unsafe,
}

impl CorrectionScope {
    /// The name in configuration and Python (`issues`, `unsafe`).
    pub fn as_str(self) -> &'static str {
        match self {
            CorrectionScope::Issues => "issues",
            CorrectionScope::Unsafe => "unsafe",
        }
    }

    /// The scope of a name; `None` for another.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "issues" => Some(CorrectionScope::Issues),
            "unsafe" => Some(CorrectionScope::Unsafe),
            _ => None,
        }
    }
}

/// Nesting followed (deeper values are compared whole).
const MAX_DEPTH: usize = 64;

/// The `value_changed` issues of a corrector's answer `corrected` for a call whose
/// arguments were read as `first` (coerced) from `sent` (as the model wrote them, stray
/// keys included), whose problems were `issues`: one per value outside the issues' paths
/// that the answer changed or dropped, and one per key it added that no issue names and
/// that does not carry a stray key's value or text found in a value a problem names. Empty when the answer kept to its scope (or an
/// issue concerns the whole call).
pub fn values_changed_issues(
    first: &Value,
    sent: &Value,
    issues: &[Issue],
    corrected: &Value,
) -> Vec<Issue> {
    if issues.iter().any(|i| i.path.is_empty()) || !first.is_object() {
        return Vec::new();
    }
    // Sets, so that a call with many keys and many issues stays linear.
    let open = Open::new(issues);
    let mut stray = Vec::new();
    stray_values(sent, first, 0, &mut stray);
    for i in issues.iter().filter(|i| i.kind == IssueKind::UnknownKey) {
        if let Some(v) = first.pointer(&i.path).or_else(|| sent.pointer(&i.path)) {
            stray.push(v);
        }
    }
    let strays: HashSet<String> = stray.into_iter().map(Value::to_string).collect();
    // The text of every value a problem names: a value split out of one (`Paris, France`
    // -> `city` and `country_code: FR`) comes from what the call sent.
    let mut sources = Vec::new();
    for i in issues {
        for v in [first.pointer(&i.path), sent.pointer(&i.path)]
            .into_iter()
            .flatten()
        {
            leaf_texts(v, 0, &mut sources);
        }
    }
    // One text, the pieces apart: a piece is looked for once, not once per source.
    let sources = sources.join("\u{0}");
    let from = From {
        strays: &strays,
        sources: &sources,
    };
    let mut out = Vec::new();
    let mut path = String::new();
    compare(first, Some(corrected), &open, &from, &mut path, 0, &mut out);
    out
}

/// Where an added value may come from.
struct From<'a> {
    /// Values of keys no property matched, as JSON text.
    strays: &'a HashSet<String>,
    /// The text of the values the problems name, lowercased, joined by NUL.
    sources: &'a str,
}

impl From<'_> {
    /// True when `v` is a stray key's value, or every piece of it is found in a value a
    /// problem names.
    fn holds(&self, v: &Value) -> bool {
        if self.strays.contains(&v.to_string()) {
            return true;
        }
        let mut pieces = Vec::new();
        leaf_texts(v, 0, &mut pieces);
        !pieces.is_empty()
            && pieces
                .iter()
                .all(|p| !p.is_empty() && !p.contains('\u{0}') && self.sources.contains(p.as_str()))
    }
}

/// The text of every scalar in `v`, lowercased and trimmed.
fn leaf_texts(v: &Value, depth: usize, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.trim().to_lowercase()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Bool(b) => out.push(b.to_string()),
        Value::Array(items) if depth < MAX_DEPTH => {
            items.iter().for_each(|i| leaf_texts(i, depth + 1, out));
        }
        Value::Object(m) if depth < MAX_DEPTH => {
            m.values().for_each(|i| leaf_texts(i, depth + 1, out));
        }
        _ => {}
    }
}

/// The paths the issues name, and every value that holds one.
struct Open<'a> {
    named: HashSet<&'a str>,
    holding: HashSet<&'a str>,
}

impl<'a> Open<'a> {
    fn new(issues: &'a [Issue]) -> Self {
        let named: HashSet<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        let holding = named.iter().flat_map(|p| ancestors(p)).collect();
        Open { named, holding }
    }

    /// True when an issue names `path` or a value that holds it.
    fn names(&self, path: &str) -> bool {
        self.named.contains(path) || ancestors(path).any(|a| self.named.contains(a))
    }

    /// True when an issue names a value inside `path` (an element of a list it holds).
    fn holds(&self, path: &str) -> bool {
        self.holding.contains(path)
    }
}

/// The proper prefixes of a JSON Pointer that are pointers themselves (`/a/b` -> `/a`),
/// the root left out; at most [`MAX_DEPTH`].
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .map(|(k, _)| &path[..k])
        .filter(|a| !a.is_empty())
        .take(MAX_DEPTH)
}

/// Values of `sent` under keys `first` does not have (dropped as stray by coercion).
fn stray_values<'a>(sent: &'a Value, first: &Value, depth: usize, out: &mut Vec<&'a Value>) {
    let (Value::Object(s), Value::Object(f)) = (sent, first) else {
        return;
    };
    for (k, v) in s {
        match f.get(k) {
            None => out.push(v),
            Some(fv) if depth < MAX_DEPTH => stray_values(v, fv, depth + 1, out),
            Some(_) => {}
        }
    }
}

fn push_key(path: &mut String, key: &str) {
    path.push('/');
    path.push_str(&key.replace('~', "~0").replace('/', "~1"));
}

fn compare(
    first: &Value,
    corrected: Option<&Value>,
    open: &Open<'_>,
    from: &From<'_>,
    path: &mut String,
    depth: usize,
    out: &mut Vec<Issue>,
) {
    if open.names(path) && !path.is_empty() {
        return;
    }
    match (first, corrected) {
        (Value::Object(f), Some(Value::Object(c))) if depth < MAX_DEPTH => {
            let at = path.len();
            for (k, v) in f {
                push_key(path, k);
                compare(v, c.get(k), open, from, path, depth + 1, out);
                path.truncate(at);
            }
            for (k, v) in c.iter().filter(|(k, _)| !f.contains_key(*k)) {
                push_key(path, k);
                if !open.names(path) && !from.holds(v) {
                    out.push(
                        Issue::new(
                            IssueKind::ValueChanged,
                            path.clone(),
                            format!(
                                "the correction added {}, which the call never sent and no problem asked for",
                                preview(v)
                            ),
                        )
                        .got(v.clone())
                        .suggestion("change only what the problems name; never add a value the user did not give"),
                    );
                }
                path.truncate(at);
            }
        }
        (f, Some(c)) if f == c => {}
        // A list (or a value) whose inside an issue names: it may change as a whole.
        _ if open.holds(path) => {}
        (f, c) => {
            let message = match c {
                Some(c) => format!(
                    "the correction changed {} to {}, a value that had no problem",
                    preview(f),
                    preview(c)
                ),
                None => format!(
                    "the correction dropped {}, a value that had no problem",
                    preview(f)
                ),
            };
            out.push(
                Issue::new(IssueKind::ValueChanged, path.clone(), message)
                    .got(f.clone())
                    .suggestion("keep every value that had no problem exactly as the call sent it"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kinds_at(issues: &[Issue]) -> Vec<&str> {
        issues.iter().map(|i| i.path.as_str()).collect()
    }

    #[test]
    fn only_what_the_issues_name_may_change() {
        let first = json!({"city": "Oslo", "units": "kelvin", "days": 2});
        let issues = [Issue::new(IssueKind::NotInEnum, "/units", "not one of")];
        let ok = json!({"city": "Oslo", "units": "celsius", "days": 2});
        assert!(values_changed_issues(&first, &first, &issues, &ok).is_empty());
        let moved = json!({"city": "Paris", "units": "celsius"});
        let got = values_changed_issues(&first, &first, &issues, &moved);
        assert_eq!(kinds_at(&got), ["/city", "/days"]);
        assert!(got[0].message.contains("\"Oslo\""), "{}", got[0].message);
        let added = json!({"city": "Oslo", "units": "celsius", "days": 2, "hourly": true});
        assert_eq!(
            kinds_at(&values_changed_issues(&first, &first, &issues, &added)),
            ["/hourly"]
        );
        // A value split out of one a problem names comes from what was sent.
        let first = json!({"city": "Paris, France"});
        let issues = [Issue::new(IssueKind::Pattern, "/city", "no comma")];
        let split = json!({"city": "Paris", "country_code": "FR"});
        assert!(values_changed_issues(&first, &first, &issues, &split).is_empty());
        let invented = json!({"city": "Paris", "country_code": "DE"});
        assert_eq!(
            kinds_at(&values_changed_issues(&first, &first, &issues, &invented)),
            ["/country_code"]
        );
    }

    #[test]
    fn a_stray_key_may_move_onto_the_field_it_meant_and_a_whole_call_issue_opens_all() {
        // `town` dropped by coercion (it is in what was sent, not in the reading).
        let sent = json!({"town": "Oslo", "days": 2});
        let first = json!({"days": 2});
        let issues = [Issue::new(IssueKind::MissingRequired, "/city", "required")];
        let moved = json!({"city": "Oslo", "days": 2});
        assert!(values_changed_issues(&first, &sent, &issues, &moved).is_empty());
        let invented = json!({"city": "Bergen", "days": 2});
        assert!(!values_changed_issues(&first, &first, &[], &invented).is_empty());
        // Kept as an unknown-key issue: the same.
        let first = json!({"town": "Oslo", "days": 2});
        let issues = [Issue::new(IssueKind::UnknownKey, "/town", "unknown")];
        assert!(values_changed_issues(&first, &first, &issues, &moved).is_empty());
        // An issue about the whole call (unparseable, not an object): nothing to keep.
        let whole = [Issue::new(IssueKind::NotAnObject, "", "not an object")];
        assert!(values_changed_issues(&first, &first, &whole, &invented).is_empty());
        // Nested: only the named branch may change.
        let first = json!({"trip": {"from": "Oslo", "to": "Rome", "pax": "two"}});
        let issues = [Issue::new(IssueKind::WrongType, "/trip/pax", "integer")];
        let ok = json!({"trip": {"from": "Oslo", "to": "Rome", "pax": 2}});
        assert!(values_changed_issues(&first, &first, &issues, &ok).is_empty());
        let bad = json!({"trip": {"from": "Oslo", "to": "Milan", "pax": 2}});
        assert_eq!(
            kinds_at(&values_changed_issues(&first, &first, &issues, &bad)),
            ["/trip/to"]
        );
    }
}
