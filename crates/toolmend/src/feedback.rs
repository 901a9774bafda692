//! Feedback: deterministic text (and JSON) telling the agent what to change.
//!
//! The text is what goes back to the model as the tool result of a call that was not run:
//! one line saying so and asking for a corrected call, then one line per problem naming the
//! field and what to send instead. A call-level problem (unknown tool, unreadable or cut-off
//! arguments) gets its own first line and a closing instruction. The same input always gives the same text (issues are sorted
//! with [`crate::issue::sort_issues`] first), so it can be asserted on and cached.
//!
//! ```
//! use serde_json::json;
//! use toolmend::{feedback::render, Issue, IssueKind};
//!
//! let issues = vec![
//!     Issue::new(IssueKind::MissingRequired, "/city", "required key \"city\" is missing")
//!         .expected("string"),
//!     Issue::new(IssueKind::NotInEnum, "/units", "\"Kelvin\" is not one of the allowed values")
//!         .got(json!("Kelvin"))
//!         .allowed(vec![json!("celsius"), json!("fahrenheit")]),
//! ];
//! let feedback = render("get_weather", &issues);
//! assert_eq!(
//!     feedback.text,
//!     "get_weather was not called. Fix these 2 problems and call it again:\n\
//!      - city: required, missing. Add \"city\" (string).\n\
//!      - units: \"Kelvin\" is not allowed; use one of \"celsius\", \"fahrenheit\"."
//! );
//! assert_eq!(feedback.json["error"], "invalid_arguments");
//! ```

use serde_json::{Value, json};

use crate::{Issue, IssueKind};

/// Feedback for one invalid call, as text for the model and as JSON for programs.
#[derive(Debug, Clone, PartialEq)]
pub struct Feedback {
    /// The text sent back to the agent as the tool result.
    pub text: String,
    /// The same content as JSON (`{"tool", "error", "issues": [...]}`).
    pub json: Value,
}

/// Most allowed values (enum members, tool names) listed on one line.
const MAX_LISTED: usize = 20;
/// Most problem lines; the rest are counted.
const MAX_LINES: usize = 20;
/// Longest preview of a value the model sent.
const MAX_GOT_CHARS: usize = 60;

/// The stable error id of the JSON form for these issues:
/// `unknown_tool`, `unparseable_arguments`, `truncated_arguments`, `not_an_object`,
/// `invalid_arguments`, or `none` when there are no issues.
pub fn error_id(issues: &[Issue]) -> &'static str {
    let has = |k: IssueKind| issues.iter().any(|i| i.kind == k);
    if issues.is_empty() {
        "none"
    } else if has(IssueKind::UnknownTool) {
        "unknown_tool"
    } else if has(IssueKind::Unparseable) {
        "unparseable_arguments"
    } else if has(IssueKind::Truncated) {
        "truncated_arguments"
    } else if has(IssueKind::NotAnObject) {
        "not_an_object"
    } else {
        "invalid_arguments"
    }
}

/// Renders feedback for a call to `tool` that has `issues`.
pub fn render(tool: &str, issues: &[Issue]) -> Feedback {
    let mut sorted = issues.to_vec();
    crate::issue::sort_issues(&mut sorted);
    let error = error_id(&sorted);
    let text = render_text(tool, &sorted);
    let json = json!({
        "tool": tool,
        "error": error,
        "issues": serde_json::to_value(&sorted).unwrap_or(Value::Array(Vec::new())),
    });
    Feedback { text, json }
}

fn is_call_level(kind: IssueKind) -> bool {
    matches!(
        kind,
        IssueKind::UnknownTool
            | IssueKind::Unparseable
            | IssueKind::Truncated
            | IssueKind::NotAnObject
    )
}

fn render_text(tool: &str, issues: &[Issue]) -> String {
    if issues.is_empty() {
        return format!("{tool}: the arguments are valid.");
    }
    let mut out = String::new();
    // The call-level issue that decides the headline, if any (sorted first by rank).
    let head = issues
        .iter()
        .filter(|i| is_call_level(i.kind))
        .min_by_key(|i| i.rank());
    let rest: Vec<&Issue> = issues
        .iter()
        .filter(|i| head.is_none_or(|h| !std::ptr::eq(*i, h)))
        .collect();
    let closing = match head {
        Some(h) => {
            let (headline, closing) = headline(tool, h);
            out.push_str(&headline);
            closing
        }
        None => {
            match rest.len() {
                1 => out.push_str(&format!(
                    "{tool} was not called. Fix this and call it again:"
                )),
                n => out.push_str(&format!(
                    "{tool} was not called. Fix these {n} problems and call it again:"
                )),
            }
            None
        }
    };
    for issue in rest.iter().take(MAX_LINES) {
        out.push_str("\n- ");
        out.push_str(&line(issue));
    }
    if rest.len() > MAX_LINES {
        out.push_str(&format!("\n- … and {} more.", rest.len() - MAX_LINES));
    }
    if let Some(c) = closing {
        out.push('\n');
        out.push_str(&c);
    }
    out
}

/// The first line (and the closing instruction) for a call-level issue. The issue's message
/// says what went wrong (`the arguments could not be read as JSON: … at byte 14`); its
/// suggestion, if any, becomes the closing instruction.
fn headline(tool: &str, issue: &Issue) -> (String, Option<String>) {
    if issue.kind == IssueKind::UnknownTool {
        let called = issue.got.as_ref().and_then(Value::as_str).unwrap_or(tool);
        let s = match &issue.suggestion {
            // A close name is enough: the agent has its tool list.
            Some(sug) => format!("No tool named {called}; {}", end_sentence(sug)),
            None if issue.allowed.is_empty() => format!("No tool named {called}."),
            None => format!(
                "No tool named {called}. Use one of: {}.",
                list_names(&issue.allowed)
            ),
        };
        return (s, None);
    }
    let detail = sentence(&issue.message);
    let what = if detail.is_empty() {
        match issue.kind {
            IssueKind::Unparseable => "its arguments are not valid JSON".to_owned(),
            IssueKind::Truncated => "the arguments were cut off".to_owned(),
            _ => "the arguments must be a JSON object".to_owned(),
        }
    } else {
        detail
    };
    let closing = match (&issue.suggestion, issue.kind) {
        (Some(sug), _) => capitalize(&end_sentence(sug)),
        (None, IssueKind::Truncated) => format!("Send the whole {tool} call again, complete."),
        (None, _) => format!("Call {tool} again with the arguments as one JSON object."),
    };
    (format!("{tool} was not called: {what}."), Some(closing))
}

/// One problem line, without the leading `- `.
fn line(issue: &Issue) -> String {
    let field = field_name(&issue.path);
    let got = issue.got.as_ref().map(preview);
    let got_text = got.clone().unwrap_or_else(|| "the value".to_owned());
    let body = match issue.kind {
        IssueKind::MissingRequired => {
            let key = last_segment(&issue.path);
            match &issue.expected {
                Some(t) => format!("required, missing. Add \"{key}\" ({t})."),
                None => format!("required, missing. Add \"{key}\"."),
            }
        }
        IssueKind::WrongType => {
            let expected = issue.expected.as_deref().unwrap_or("another type");
            let hint = if expected == "boolean" {
                " (true or false)"
            } else {
                ""
            };
            format!("expected {expected}{hint}, got {got_text}.")
        }
        IssueKind::NotInEnum => {
            let mut s = format!("{got_text} is not allowed");
            if let Some(sug) = &issue.suggestion {
                s.push_str("; ");
                s.push_str(&end_sentence(sug));
                s.push(' ');
                s.push_str(&capitalize(&use_values(&issue.allowed)));
            } else {
                s.push_str("; ");
                s.push_str(&use_values(&issue.allowed));
            }
            s.push('.');
            s
        }
        IssueKind::UnknownKey => match &issue.suggestion {
            Some(sug) => format!("unknown key; {}", end_sentence(sug)),
            None => "unknown key; remove it.".to_owned(),
        },
        IssueKind::Format => {
            let format = issue.expected.as_deref().unwrap_or("value");
            match format_hint(format) {
                Some(hint) => format!("{got_text} is not a valid {format}; use {hint}."),
                None => format!("{got_text} is not a valid {format}."),
            }
        }
        IssueKind::Range => match &issue.expected {
            Some(e) => format!("{got_text} is out of range; it must be {e}."),
            None => sentence_end(&issue.message),
        },
        IssueKind::Length => match &issue.expected {
            Some(e) => format!("must have {e}."),
            None => sentence_end(&issue.message),
        },
        IssueKind::Pattern => match &issue.expected {
            Some(p) => format!("{got_text} does not match the pattern {p}."),
            None => sentence_end(&issue.message),
        },
        _ => sentence_end(&issue.message),
    };
    let mut body = body;
    let suggestion_in_body = matches!(
        issue.kind,
        IssueKind::NotInEnum | IssueKind::UnknownKey | IssueKind::UnknownTool
    );
    if !suggestion_in_body && let Some(sug) = &issue.suggestion {
        body.push(' ');
        body.push_str(&capitalize(&end_sentence(sug)));
    }
    if issue.path.is_empty() {
        body
    } else {
        format!("{field}: {body}")
    }
}

fn use_values(allowed: &[Value]) -> String {
    match allowed {
        [] => "use an allowed value".to_owned(),
        [one] => format!("use {}", preview(one)),
        many => format!("use one of {}", list(many)),
    }
}

/// `a, b, c` (names shown bare), capped with `…`.
fn list_names(values: &[Value]) -> String {
    let mut parts: Vec<String> = values
        .iter()
        .take(MAX_LISTED)
        .map(|v| v.as_str().map_or_else(|| preview(v), str::to_owned))
        .collect();
    if values.len() > MAX_LISTED {
        parts.push("…".to_owned());
    }
    parts.join(", ")
}

/// `"a", "b", "c"`, capped with `…`.
fn list(values: &[Value]) -> String {
    let mut parts: Vec<String> = values.iter().take(MAX_LISTED).map(preview).collect();
    if values.len() > MAX_LISTED {
        parts.push("…".to_owned());
    }
    parts.join(", ")
}

fn format_hint(format: &str) -> Option<&'static str> {
    Some(match format {
        "date" => "YYYY-MM-DD, e.g. \"2026-01-19\"",
        "date-time" => "RFC 3339 with a time zone, e.g. \"2026-01-19T09:30:00Z\"",
        "time" => "HH:MM:SS with a time zone, e.g. \"09:30:00Z\"",
        "email" => "an address like \"name@example.com\"",
        "uri" | "url" | "iri" => "an absolute URI like \"https://example.com/page\"",
        "uuid" => "a UUID like \"123e4567-e89b-12d3-a456-426614174000\"",
        "ipv4" => "an address like \"192.0.2.1\"",
        "ipv6" => "an address like \"2001:db8::1\"",
        "hostname" => "a host name like \"example.com\"",
        "duration" => "an ISO 8601 duration like \"PT30M\"",
        _ => return None,
    })
}

/// `/line_items/0/sku` -> `line_items[0].sku`; `""` -> `arguments`.
fn field_name(path: &str) -> String {
    if path.is_empty() {
        return "arguments".to_owned();
    }
    let mut out = String::new();
    for seg in path.split('/').skip(1) {
        let seg = crate::schema::unescape_pointer(seg);
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) && !out.is_empty() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

fn last_segment(path: &str) -> String {
    crate::schema::unescape_pointer(path.rsplit('/').next().unwrap_or("")).into_owned()
}

/// The value as JSON, cut to [`MAX_GOT_CHARS`].
fn preview(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= MAX_GOT_CHARS {
        return s;
    }
    let mut out: String = s.chars().take(MAX_GOT_CHARS - 1).collect();
    out.push('…');
    out
}

/// A message as a clause: no trailing period.
fn sentence(s: &str) -> String {
    s.trim().trim_end_matches('.').to_owned()
}

/// A message as a sentence: with a closing period.
fn sentence_end(s: &str) -> String {
    end_sentence(s.trim())
}

fn end_sentence(s: &str) -> String {
    let s = s.trim();
    if s.ends_with(['.', '?', '!']) {
        s.to_owned()
    } else {
        format!("{s}.")
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
