//! Mapping `jsonschema` errors to [`Issue`]s.
//!
//! | jsonschema kind | issue |
//! | --- | --- |
//! | `Required` | `missing_required` at `/prop`, `expected` = its type |
//! | `Type` | `wrong_type`, `expected` = the type(s) |
//! | `Enum`, `Constant` | `not_in_enum`, `allowed` = the values |
//! | `AdditionalProperties`, `UnevaluatedProperties` | one `unknown_key` per key at `/key`, `allowed` = the schema's keys, `suggestion` = `did you mean "city"?` |
//! | `Format` | `format`, `expected` = the format name |
//! | `Minimum`, `Maximum`, `Exclusive*`, `MultipleOf` | `range`, `expected` = `>= 1` … |
//! | `Min/MaxLength`, `Min/MaxItems`, `Min/MaxProperties` | `length` |
//! | `Pattern` | `pattern`, `expected` = the pattern |
//! | `AnyOf`, `OneOf` | the one applicable branch's issues; `wrong_type` when no branch takes the value's type; else `composition` |
//! | `Custom` (a custom keyword) | `custom` |
//! | anything else | `composition` |

use jsonschema::ValidationError;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

use super::CompiledTool;
use super::compile::{Node, escape, flatten, mask_names};
use super::suggest::{Candidate, CandidateData, key_suggestion};
use crate::issue::sort_issues;
use crate::{Issue, IssueKind};

/// Longest rendering of a value inside an issue message.
const MESSAGE_VALUE_CHARS: usize = 60;

/// Every issue `validator` finds in `instance`, sorted and without repeats.
pub(crate) fn collect(tool: &CompiledTool, instance: &Value) -> Vec<Issue> {
    let mut out = Vec::new();
    for e in tool.validator.iter_errors(instance) {
        map_error(tool, e, &mut out);
    }
    sort_issues(&mut out);
    out.dedup();
    out
}

/// `arguments must be a JSON object, got array`.
pub(crate) fn not_an_object(arguments: &Value) -> Issue {
    Issue::new(
        IssueKind::NotAnObject,
        "",
        format!(
            "the arguments must be a JSON object, got {}",
            json_type(arguments)
        ),
    )
    .expected("object")
    .got(arguments.clone())
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value for a message, cut to a readable length.
pub(crate) fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= MESSAGE_VALUE_CHARS {
        return s;
    }
    let mut out: String = s.chars().take(MESSAGE_VALUE_CHARS - 1).collect();
    out.push('…');
    out
}

fn parent(pointer: &str, suffix: &str) -> String {
    pointer.strip_suffix(suffix).unwrap_or(pointer).to_owned()
}

fn node_at<'s>(root: &'s Value, pointer: &str) -> Option<Node<'s>> {
    root.pointer(pointer).map(Node::root)
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

#[allow(clippy::too_many_lines)]
fn map_error(tool: &CompiledTool, e: ValidationError<'_>, out: &mut Vec<Issue>) {
    let root = &tool.schema;
    // jsonschema's own sentence, only for kinds without a mapping of their own.
    let message = match e.kind() {
        ValidationErrorKind::Required { .. }
        | ValidationErrorKind::Type { .. }
        | ValidationErrorKind::Enum { .. }
        | ValidationErrorKind::Constant { .. }
        | ValidationErrorKind::AdditionalProperties { .. }
        | ValidationErrorKind::UnevaluatedProperties { .. }
        | ValidationErrorKind::Format { .. }
        | ValidationErrorKind::Minimum { .. }
        | ValidationErrorKind::Maximum { .. }
        | ValidationErrorKind::ExclusiveMinimum { .. }
        | ValidationErrorKind::ExclusiveMaximum { .. }
        | ValidationErrorKind::MultipleOf { .. }
        | ValidationErrorKind::MinLength { .. }
        | ValidationErrorKind::MaxLength { .. }
        | ValidationErrorKind::MinItems { .. }
        | ValidationErrorKind::MaxItems { .. }
        | ValidationErrorKind::MinProperties { .. }
        | ValidationErrorKind::MaxProperties { .. }
        | ValidationErrorKind::Pattern { .. }
        | ValidationErrorKind::AnyOf { .. }
        | ValidationErrorKind::OneOfNotValid { .. }
        | ValidationErrorKind::OneOfMultipleValid { .. }
        | ValidationErrorKind::Not { .. }
        | ValidationErrorKind::Custom { .. } => String::new(),
        _ => e.to_string(),
    };
    let parts = e.into_parts();
    let path = parts.instance_path.as_str().to_owned();
    let schema_path = parts.schema_path.as_str().to_owned();
    // A missing key needs neither the (whole) object nor its rendering.
    let kind = match parts.kind {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            let object = parent(&schema_path, "/required");
            let expected = node_at(root, &object).and_then(|n| {
                let flat = flatten(root, n);
                let prop = flat.property(&name).into_iter().next()?;
                let t = flatten(root, prop).types()?;
                Some(mask_names(t))
            });
            let mut issue = Issue::new(
                IssueKind::MissingRequired,
                format!("{path}/{}", escape(&name)),
                format!("required key \"{name}\" is missing"),
            );
            if let Some(t) = expected {
                issue = issue.expected(t);
            }
            out.push(issue);
            return;
        }
        other => other,
    };
    let got = parts.instance.into_owned();
    let issue = match kind {
        ValidationErrorKind::Type { kind } => {
            let expected = type_names(&kind);
            Issue::new(
                IssueKind::WrongType,
                path,
                format!("expected {expected}, got {shown}", shown = show(&got)),
            )
            .expected(expected)
            .got(got)
        }
        ValidationErrorKind::Enum { options } => {
            let allowed = options.as_array().cloned().unwrap_or_default();
            let mut issue = Issue::new(
                IssueKind::NotInEnum,
                path,
                format!(
                    "{shown} is not one of the allowed values",
                    shown = show(&got)
                ),
            );
            if let Some(s) = enum_suggestion(&got, &allowed) {
                issue = issue.suggestion(format!("did you mean {}?", Value::String(s)));
            }
            issue.allowed(allowed).got(got)
        }
        ValidationErrorKind::Constant { expected_value } => {
            let v = (*expected_value).clone();
            Issue::new(
                IssueKind::NotInEnum,
                path,
                format!(
                    "{shown} is not allowed; the only allowed value is {}",
                    show(&v),
                    shown = show(&got)
                ),
            )
            .allowed(vec![v])
            .got(got)
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            let object = parent(
                &parent(&schema_path, "/additionalProperties"),
                "/unevaluatedProperties",
            );
            let node = node_at(root, &object);
            let props: Vec<&str> = node
                .map(|n| flatten(root, n).property_names())
                .unwrap_or_default();
            // The same names as `props`, tokenised once per schema position.
            let data = match node {
                Some(n) => tool.candidate_data(n.schema, false, || {
                    props.iter().map(|p| CandidateData::new(p, None)).collect()
                }),
                None => std::sync::Arc::new(Vec::new()),
            };
            let present = got.as_object();
            let free: Vec<Candidate<'_>> = props
                .iter()
                .zip(data.iter())
                .filter(|(p, _)| present.is_none_or(|m| !m.contains_key(**p)))
                .map(|(p, d)| Candidate::borrowed(p, d))
                .collect();
            let allowed: Vec<Value> = props
                .iter()
                .map(|p| Value::String((*p).to_owned()))
                .collect();
            for key in unexpected {
                out.push(unknown_key_issue(
                    format!("{path}/{}", escape(&key)),
                    format!("\"{key}\" is not a known key"),
                    &allowed,
                    present.and_then(|m| m.get(&key)),
                    key_suggestion(&key, &free),
                ));
            }
            return;
        }
        ValidationErrorKind::Format { format } => Issue::new(
            IssueKind::Format,
            path,
            format!("{shown} is not a valid {format}", shown = show(&got)),
        )
        .expected(format)
        .got(got),
        ValidationErrorKind::Minimum { limit } => range(path, got, &format!(">= {limit}")),
        ValidationErrorKind::Maximum { limit } => range(path, got, &format!("<= {limit}")),
        ValidationErrorKind::ExclusiveMinimum { limit } => range(path, got, &format!("> {limit}")),
        ValidationErrorKind::ExclusiveMaximum { limit } => range(path, got, &format!("< {limit}")),
        ValidationErrorKind::MultipleOf { multiple_of } => {
            range(path, got, &format!("a multiple of {}", number(multiple_of)))
        }
        ValidationErrorKind::MinLength { limit } => length(
            path,
            got,
            &format!("at least {}", plural(limit, "character", "characters")),
        ),
        ValidationErrorKind::MaxLength { limit } => length(
            path,
            got,
            &format!("at most {}", plural(limit, "character", "characters")),
        ),
        ValidationErrorKind::MinItems { limit } => length(
            path,
            got,
            &format!("at least {}", plural(limit, "item", "items")),
        ),
        ValidationErrorKind::MaxItems { limit } => length(
            path,
            got,
            &format!("at most {}", plural(limit, "item", "items")),
        ),
        ValidationErrorKind::MinProperties { limit } => length(
            path,
            got,
            &format!("at least {}", plural(limit, "key", "keys")),
        ),
        ValidationErrorKind::MaxProperties { limit } => length(
            path,
            got,
            &format!("at most {}", plural(limit, "key", "keys")),
        ),
        ValidationErrorKind::Pattern { pattern } => Issue::new(
            IssueKind::Pattern,
            path,
            format!(
                "{shown} does not match the pattern {pattern}",
                shown = show(&got)
            ),
        )
        .expected(pattern)
        .got(got),
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            composition(tool, path, got, context, out);
            return;
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => Issue::new(
            IssueKind::Composition,
            path,
            format!(
                "{shown} matches more than one alternative; it must match exactly one",
                shown = show(&got)
            ),
        )
        .got(got),
        ValidationErrorKind::Not { .. } => Issue::new(
            IssueKind::Composition,
            path,
            format!("{shown} is not allowed here", shown = show(&got)),
        )
        .got(got),
        ValidationErrorKind::Custom { message, .. } => {
            Issue::new(IssueKind::Custom, path, message).got(got)
        }
        _ => Issue::new(IssueKind::Composition, path, message).got(got),
    };
    out.push(issue);
}

/// `5` for `5.0`, `0.5` for `0.5`.
fn number(f: f64) -> String {
    #[allow(clippy::cast_possible_truncation)]
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

fn range(path: String, got: Value, expected: &str) -> Issue {
    Issue::new(
        IssueKind::Range,
        path,
        format!("{} is out of range; it must be {expected}", show(&got)),
    )
    .expected(expected)
    .got(got)
}

fn length(path: String, got: Value, expected: &str) -> Issue {
    let what = match &got {
        Value::String(_) => "text",
        Value::Array(_) => "list",
        _ => "object",
    };
    Issue::new(
        IssueKind::Length,
        path,
        format!("the {what} must have {expected}"),
    )
    .expected(expected)
    .got(got)
}

fn type_names(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => t.as_str().to_owned(),
        TypeKind::Multiple(set) => set
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

/// `anyOf`/`oneOf` with no valid branch. Branches that reject the value's type outright are
/// not applicable; if one applicable branch remains, its errors are the issues.
fn composition(
    tool: &CompiledTool,
    path: String,
    got: Value,
    context: Vec<Vec<ValidationError<'static>>>,
    out: &mut Vec<Issue>,
) {
    let type_only = |errors: &[ValidationError<'static>]| {
        errors.len() == 1
            && matches!(errors[0].kind(), ValidationErrorKind::Type { .. })
            && errors[0].instance_path().as_str() == path
    };
    let applicable: Vec<usize> = context
        .iter()
        .enumerate()
        .filter(|(_, errs)| !type_only(errs))
        .map(|(i, _)| i)
        .collect();
    if let [only] = applicable.as_slice() {
        let errors = context.into_iter().nth(*only).unwrap_or_default();
        for e in errors {
            map_error(tool, e, out);
        }
        return;
    }
    if applicable.is_empty() && !context.is_empty() {
        let mut names: Vec<String> = Vec::new();
        for errs in &context {
            if let ValidationErrorKind::Type { kind } = errs[0].kind() {
                let n = type_names(kind);
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        let expected = names.join(" or ");
        out.push(
            Issue::new(
                IssueKind::WrongType,
                path,
                format!("expected {expected}, got {}", show(&got)),
            )
            .expected(expected)
            .got(got),
        );
        return;
    }
    out.push(
        Issue::new(
            IssueKind::Composition,
            path,
            format!(
                "{} does not match any of the allowed alternatives",
                show(&got)
            ),
        )
        .got(got),
    );
}

/// A close spelling among string enum values (display only).
fn enum_suggestion(got: &Value, allowed: &[Value]) -> Option<String> {
    let g = got.as_str()?.to_lowercase();
    let mut best: Option<(&str, f64)> = None;
    let mut tie = false;
    for a in allowed.iter().filter_map(Value::as_str) {
        let s = strsim::jaro_winkler(&g, &a.to_lowercase());
        if s < 0.85 {
            continue;
        }
        match best {
            Some((_, b)) if s > b => {
                best = Some((a, s));
                tie = false;
            }
            Some((_, b)) if (s - b).abs() < f64::EPSILON => tie = true,
            Some(_) => {}
            None => best = Some((a, s)),
        }
    }
    if tie {
        None
    } else {
        best.map(|(a, _)| a.to_owned())
    }
}

/// One `unknown_key` issue: validation's (a key the schema forbids) and the coercion
/// walk's (a key no property takes in a schema silent on other keys) are built alike.
pub(crate) fn unknown_key_issue(
    path: String,
    message: String,
    allowed: &[Value],
    got: Option<&Value>,
    suggestion: Option<String>,
) -> Issue {
    let mut issue = Issue::new(IssueKind::UnknownKey, path, message).allowed(allowed.to_vec());
    if let Some(v) = got {
        issue = issue.got(v.clone());
    }
    if let Some(s) = suggestion {
        issue = issue.suggestion(s);
    }
    issue
}
