//! Business rules declared in a schema, beside the JSON Schema keywords JSON Schema
//! itself ignores: `x-business-rules` on a date field.
//!
//! ```toml
//! [tools.parameters.properties.start]
//! type = "string"
//! format = "date"
//! x-business-rules = { max_days_from_now = 30, min_date = "2020-01-01" }
//! ```
//!
//! | rule | the value (a `YYYY-MM-DD` date, or the date part of a date-time) must be |
//! | --- | --- |
//! | `min_date`, `max_date` | on or after / on or before that date |
//! | `max_days_from_now`, `min_days_from_now` | at most / at least that many days after today (UTC; negative: before) |
//! | `not_in_past` | today or later |
//!
//! [`CompiledTool::compile`](super::CompiledTool::compile) finds them wherever a tool's
//! schema comes from (a tools file, a request's `tools`, a Python tool) and runs them as a
//! custom validator after the schema passes, so a breach is an issue (`custom`) the model
//! gets back as feedback, like any other, in every front. An unknown rule name, or a rule
//! whose value has the wrong type, makes the schema invalid, naming the rule and field.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::{Issue, IssueKind, calendar, schema::ValidationContext};

#[derive(Debug, Clone, PartialEq)]
enum Rule {
    MinDate(i64),
    MaxDate(i64),
    MaxDaysFromNow(i64),
    MinDaysFromNow(i64),
    NotInPast,
}

/// The rules of one schema, by the JSON Pointer of the field they guard.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BusinessRules {
    fields: Vec<(Vec<Step>, String, Vec<Rule>)>,
    /// Today, in days since 1970-01-01 (fixed for tests; the clock otherwise).
    today: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Items,
}

/// The date part of `YYYY-MM-DD…`, as days since the epoch.
fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<u32>().ok();
    let (y, m, d) = (i64::from(num(0..4)?), num(5..7)?, num(8..10)?);
    if d < 1 || d > calendar::days_in_month(y, m) {
        return None;
    }
    Some(calendar::days_from_civil(y, m, d))
}

fn today() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs() / 86_400).unwrap_or(0))
}

impl BusinessRules {
    /// The rules in `schema` (an empty set when it declares none).
    ///
    /// # Errors
    ///
    /// An unknown rule, or a rule value of the wrong type: the field and the rule.
    pub fn from_schema(schema: &Value) -> Result<Self, String> {
        let mut out = BusinessRules::default();
        collect(schema, &mut Vec::new(), &mut out.fields, 0)?;
        Ok(out)
    }

    /// True when the schema declares no rule.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Fixes "today" (days since 1970-01-01), for tests.
    #[must_use]
    pub fn with_today(mut self, days: i64) -> Self {
        self.today = Some(days);
        self
    }

    /// The issues of `args`.
    pub fn check(&self, args: &Value) -> Vec<Issue> {
        let mut issues = Vec::new();
        let today = self.today.unwrap_or_else(today);
        for (steps, pointer, rules) in &self.fields {
            visit(args, steps, String::new(), &mut |path, v| {
                let Some(s) = v.as_str() else { return };
                let Some(day) = parse_date(s) else { return };
                for r in rules {
                    let broken = match r {
                        Rule::MinDate(min) if day < *min => Some(format!(
                            "{s:?} is before the earliest allowed date, {}",
                            show(*min)
                        )),
                        Rule::MaxDate(max) if day > *max => Some(format!(
                            "{s:?} is after the latest allowed date, {}",
                            show(*max)
                        )),
                        Rule::MaxDaysFromNow(n) if day > today + n => Some(format!(
                            "{s:?} is more than {n} days from today ({}); the latest allowed is {}",
                            show(today),
                            show(today + n)
                        )),
                        Rule::MinDaysFromNow(n) if day < today + n => Some(format!(
                            "{s:?} is less than {n} days from today ({}); the earliest allowed is {}",
                            show(today),
                            show(today + n)
                        )),
                        Rule::NotInPast if day < today => {
                            Some(format!("{s:?} is in the past (today is {})", show(today)))
                        }
                        _ => None,
                    };
                    if let Some(message) = broken {
                        issues.push(
                            Issue::new(IssueKind::Custom, path.clone(), message).got(v.clone()),
                        );
                    }
                }
            });
            let _ = pointer;
        }
        issues
    }
}

impl crate::schema::CustomValidator for BusinessRules {
    fn validate(&self, arguments: &Value, _ctx: &ValidationContext<'_>) -> Vec<Issue> {
        self.check(arguments)
    }
}

/// `YYYY-MM-DD` of days since the epoch.
fn show(days: i64) -> String {
    crate::calendar::format_date(days)
}

fn visit(v: &Value, steps: &[Step], path: String, f: &mut impl FnMut(String, &Value)) {
    match steps.split_first() {
        None => f(path, v),
        Some((Step::Key(k), rest)) => {
            if let Some(child) = v.get(k) {
                visit(
                    child,
                    rest,
                    format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                    f,
                );
            }
        }
        Some((Step::Items, rest)) => {
            if let Some(items) = v.as_array() {
                for (i, item) in items.iter().enumerate() {
                    visit(item, rest, format!("{path}/{i}"), f);
                }
            }
        }
    }
}

fn collect(
    schema: &Value,
    steps: &mut Vec<Step>,
    out: &mut Vec<(Vec<Step>, String, Vec<Rule>)>,
    depth: usize,
) -> Result<(), String> {
    if depth > 32 {
        return Ok(());
    }
    let Some(obj) = schema.as_object() else {
        return Ok(());
    };
    let here = || {
        let mut p = String::new();
        for s in steps.iter() {
            match s {
                Step::Key(k) => {
                    p.push('/');
                    p.push_str(k);
                }
                Step::Items => p.push_str("/*"),
            }
        }
        if p.is_empty() { "/".to_owned() } else { p }
    };
    if let Some(rules) = obj.get("x-business-rules") {
        let Some(map) = rules.as_object() else {
            return Err(format!(
                "x-business-rules at {} must be a table of rules",
                here()
            ));
        };
        let mut parsed = Vec::new();
        for (name, v) in map {
            let int = || {
                v.as_i64().ok_or_else(|| {
                    format!(
                        "x-business-rules.{name} at {} must be an integer number of days",
                        here()
                    )
                })
            };
            let date = || {
                v.as_str().and_then(parse_date).ok_or_else(|| {
                    format!(
                        "x-business-rules.{name} at {} must be a date, YYYY-MM-DD",
                        here()
                    )
                })
            };
            parsed.push(match name.as_str() {
                "min_date" => Rule::MinDate(date()?),
                "max_date" => Rule::MaxDate(date()?),
                "max_days_from_now" => Rule::MaxDaysFromNow(int()?),
                "min_days_from_now" => Rule::MinDaysFromNow(int()?),
                "not_in_past" => match v.as_bool() {
                    Some(true) => Rule::NotInPast,
                    Some(false) => continue,
                    None => return Err(format!("x-business-rules.not_in_past at {} must be true or false", here())),
                },
                other => {
                    return Err(format!(
                        "unknown business rule {other:?} at {} (known: min_date, max_date, max_days_from_now, min_days_from_now, not_in_past)",
                        here()
                    ));
                }
            });
        }
        if !parsed.is_empty() {
            out.push((steps.clone(), here(), parsed));
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            steps.push(Step::Key(k.clone()));
            collect(sub, steps, out, depth + 1)?;
            steps.pop();
        }
    }
    if let Some(items) = obj.get("items") {
        steps.push(Step::Items);
        collect(items, steps, out, depth + 1)?;
        steps.pop();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "start": {"type": "string", "format": "date",
                      "x-business-rules": {"max_days_from_now": 30, "min_date": "2020-01-01"}},
            "legs": {"type": "array", "items": {"type": "object", "properties": {
                "day": {"type": "string", "x-business-rules": {"not_in_past": true}}}}}
        }})
    }

    #[test]
    fn dates_round_trip() {
        for s in [
            "1970-01-01",
            "2000-02-29",
            "2026-12-02",
            "2020-01-01",
            "1999-12-31",
        ] {
            assert_eq!(show(parse_date(s).unwrap()), s);
        }
        assert_eq!(parse_date("2026-02-30"), None);
        assert_eq!(parse_date("2026-13-01"), None);
        assert_eq!(parse_date("tomorrow"), None);
    }

    #[test]
    fn rules_check_dates_against_today() {
        let today = parse_date("2026-12-02").unwrap();
        let r = BusinessRules::from_schema(&schema())
            .unwrap()
            .with_today(today);
        assert!(r.check(&json!({"start": "2026-12-20"})).is_empty());
        let far = r.check(&json!({"start": "2027-03-01"}));
        assert_eq!(far.len(), 1);
        assert_eq!(far[0].path, "/start");
        assert!(
            far[0].message.contains("more than 30 days"),
            "{}",
            far[0].message
        );
        let old = r.check(&json!({"start": "2019-05-01T10:00:00Z"}));
        assert!(old[0].message.contains("earliest allowed date, 2020-01-01"));
        let legs = r.check(&json!({"legs": [{"day": "2026-12-05"}, {"day": "2026-11-30"}]}));
        assert_eq!(legs.len(), 1);
        assert_eq!(legs[0].path, "/legs/1/day");
        // Not a date: the schema's `format` speaks to that, not the rules.
        assert!(r.check(&json!({"start": "soon"})).is_empty());
    }

    #[test]
    fn unknown_rules_fail_at_load() {
        let bad = json!({"properties": {"d": {"x-business-rules": {"max_days": 3}}}});
        let e = BusinessRules::from_schema(&bad).unwrap_err();
        assert!(
            e.contains("unknown business rule \"max_days\" at /d"),
            "{e}"
        );
        let bad = json!({"properties": {"d": {"x-business-rules": {"min_date": "soon"}}}});
        assert!(
            BusinessRules::from_schema(&bad)
                .unwrap_err()
                .contains("must be a date")
        );
        assert!(
            BusinessRules::from_schema(&json!({"type": "object"}))
                .unwrap()
                .is_empty()
        );
    }
}
