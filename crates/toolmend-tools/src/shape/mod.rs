//! Result shaping: what the model reads of a tool's payload. The caller keeps the whole
//! payload elsewhere (the artifact); [`Shaper::shape`] makes the `content` the model
//! reads, always within the tool's budget, deterministically (same input, same output),
//! in time linear in the input and bounded for the generic summary.
//!
//! # With a template
//!
//! Each tool's template is compiled once ([`Shaper::new`]; a syntax error is an `Err`
//! naming the line in the template, and so are an unknown filter, function or test and an
//! `include` / `import` / `extends` as far as one trial render over a `null` payload
//! reaches them: minijinja looks names up only as it renders). It renders in a sandbox: no loader, fuel [`TEMPLATE_FUEL`] (about that many
//! instructions, or ~3 MB of values), recursion limit [`TEMPLATE_RECURSION`], no HTML
//! auto-escaping, undefined values *chainable* (`{{ data.user.name }}` with no `user`
//! prints nothing instead of failing: payloads leave out optional fields), and
//! toolmend's own output cap [`TEMPLATE_OUTPUT_CAP`] (or the budget when larger).
//!
//! In scope: `data` (the payload), `message` (the service's message; undefined when there
//! is none, so it prints nothing and `{% if message %}` is false), and, when
//! the payload is an object, each of its top-level fields by name (`data` and `message`
//! are always the two above; a payload field of those names is `data.data`,
//! `data.message`). Helpers, each as a function and as a filter: `sum(xs)`,
//! `sum(orders, "amount")`, `orders|sum(attribute="amount")`; `len` / `length` /
//! `count`; `join(xs, ", ")`; `round(x, 2)`; `date(value, "%d %b %Y")`; `tojson`. `date`
//! reads an ISO date (`2024-03-05`), an ISO date-time (`2024-03-05T14:07:09.5+02:00`,
//! `T` or a space; the wall-clock time is used as written, the offset is not applied),
//! or unix seconds (a number or a string of digits, UTC) and writes `%Y %m %d %H %M %S
//! %b %B %a %A %%`; any other directive is an error. The format defaults to `%Y-%m-%d`
//! for a date and `%Y-%m-%d %H:%M:%S` otherwise. Mappings iterate in key order.
//!
//! A render that fails (out of fuel, recursion, a runtime error, over the output cap)
//! shapes nothing: `how = "template_failed"`, `content` empty, and `template_error` says
//! why (`line 1: engine ran out of fuel`, `line 1: invalid operation: recursion limit
//! exceeded`, `the output passed 1,048,576 bytes (toolmend's cap)`), redacted and with
//! every value of the payload in it blanked out: the template was written to show part
//! of the payload, so a failed one never falls back to showing all of it (the tool
//! answers an error result naming the template's error). Otherwise `how = "template"`. The payload is converted into template values once per render
//! (linear); the render itself is bounded by the fuel and the cap.
//!
//! # Without a template
//!
//! With a service `message`, it is the first line (alone when the payload is `null`).
//! Then, in this order:
//! - a string payload is the text as it is: `how = "text"`;
//! - a payload whose compact JSON is at most `max(200, budget / 4)` bytes (and within the
//!   budget) is that JSON, read whole (`how = "json"`; numbers, booleans, `null` always
//!   land here);
//! - otherwise a summary (`how = "summary"`) that looks at a bounded part of the payload
//!   only (the first 3 items, the first 64 fields), however large it is:
//!   - an array: `1,000 items; first 3: {"id": 1, "name": "a", …}, {"id": 2, …}, …; item
//!     fields: id, name, price, owner` (`3 items: …` when all are shown; the item fields
//!     are the first item's, when some were not shown);
//!   - an object: `{"id": 7, "status": "open"} +4 more fields: items [12 items], owner {3
//!     fields}, note, tags [2 items]; first of items: {"id": 1, …}, …` (or `4 fields: …`
//!     when none is shown), at most 8 other fields named, then `… (+N more)`.
//!
//!   The fields shown are the identifying ones ([`KEY_FIELDS`], then `*_id` / `*Id`)
//!   with a scalar value, up to 6 (4 in an item); when there are none, the first scalar
//!   fields (4; 3 in an item). Values are JSON; strings longer than 80 characters (60 in
//!   an item) end in `…`; an array is `[N items]`, an object `{N fields}`.
//!
//! # Always
//!
//! 1. Control characters (C0, DEL, C1) other than `\n`, `\t`, `\r` are removed (NUL,
//!    ESC, DEL, …).
//! 2. `markdown`: the content is escaped (with `\`) for a Markdown renderer: the
//!    backslash, the backtick, `*`, `{`, `}`, `[`, `]`, `<`, `>`, `|` everywhere; `_` at
//!    a word edge (not in `order_id`); `!` before `[`; `(` after `]`; `#`, `+`, `-`, `=`
//!    first on a line; the `.` / `)` of `12.` / `12)` first on a line. `<script>`, links
//!    and images are text (a bare `https://…` that a GFM renderer autolinks stays one).
//!    With a template, the template's own text is the author's Markdown and is kept; each
//!    value it prints with `{{ … }}` is escaped (a value marked `|safe`, or a macro's
//!    output, is not escaped again).
//! 3. The budget: content over `budget_bytes` keeps its first 40% and its last 60% (the
//!    start says what it is, the end holds the errors and totals), cut at a character
//!    (and escape) boundary, joined by the marker ` … [1,234 bytes omitted; full result
//!    kept as artifact] … `; the marker counts within the budget, and `omitted_bytes` is
//!    the number in it. A budget smaller than the marker gets the marker alone (so the
//!    content is at most `max(budget, MARKER_MAX_BYTES)`). `budget_bytes = 0` is no
//!    budget.

use std::{collections::BTreeMap, fmt::Write as _, io};

use minijinja::{
    AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior,
    value::{Kwargs, Serde, Value as Mj},
};
use serde_json::Value;
use toolmend::calendar::{civil_from_days, days_from_civil, days_in_month};

mod date;
mod fit;
mod summary;
mod template;
#[cfg(test)]
mod tests;

use date::*;
use fit::*;
use summary::*;
use template::*;

/// Fuel for one render: about this many instructions (or ~64 bytes of values each).
pub const TEMPLATE_FUEL: u64 = 50_000;
/// Recursion limit of a render (loops and conditions count 1, macros more).
pub const TEMPLATE_RECURSION: usize = 100;
/// toolmend's own cap on a template's output (minijinja has none); more is a failed
/// render. The budget, when larger, is the cap.
pub const TEMPLATE_OUTPUT_CAP: usize = 1 << 20;
/// The largest marker (20-digit count): the content never exceeds
/// `max(budget_bytes, MARKER_MAX_BYTES)`.
pub const MARKER_MAX_BYTES: usize = 84;
/// Identifying fields, in the order a summary shows them.
pub const KEY_FIELDS: &[&str] = &[
    "id", "name", "title", "status", "state", "type", "kind", "key", "code", "slug", "label",
    "email", "url", "error", "message",
];

/// A payload whose compact JSON is at most this many bytes (or a quarter of the budget,
/// when larger) is read whole.
const WHOLE_JSON_MIN: usize = 200;
/// How many fields of an object the summary looks at.
const SCAN_FIELDS: usize = 64;
/// Items of an array shown.
const FIRST_ITEMS: usize = 3;
/// Other fields named.
const OTHER_FIELDS: usize = 8;
const TEMPLATE_NAME: &str = "template";

/// How one tool's results are shaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeSpec {
    /// A minijinja template.
    pub template: Option<String>,
    /// At most this many bytes of content (0: no budget).
    pub budget_bytes: usize,
    /// Escape the content as Markdown.
    pub markdown: bool,
}

/// A tool's compiled shaping.
#[derive(Debug)]
pub struct Shaper {
    spec: ShapeSpec,
    /// The environment holding the compiled template, when there is one.
    env: Option<Environment<'static>>,
}

/// What shaping made of one payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaped {
    /// What the model reads.
    pub content: String,
    /// How: `template`, `summary`, `json` (small, read whole), `text`, or
    /// `template_failed` (then `content` is empty: nothing of the payload is shown).
    pub how: &'static str,
    /// Bytes cut to fit the budget.
    pub omitted_bytes: usize,
    /// Why the template failed, when it did: redacted, bounded, without any value of the
    /// payload.
    pub template_error: Option<String>,
}

impl Shaper {
    /// Compiles `spec`.
    ///
    /// # Errors
    ///
    /// The template does not compile: the reason, with its line in the template.
    pub fn new(spec: &ShapeSpec) -> Result<Shaper, String> {
        let env = match &spec.template {
            None => None,
            Some(source) => Some(compile(source, spec.markdown)?),
        };
        Ok(Shaper {
            spec: spec.clone(),
            env,
        })
    }

    /// The spec this shaper was compiled from.
    pub fn spec(&self) -> &ShapeSpec {
        &self.spec
    }

    /// Shapes `data` (and the service's `message`).
    pub fn shape(&self, data: &Value, message: Option<&str>) -> Shaped {
        if let Some(env) = &self.env {
            match render(env, data, message, self.spec.budget_bytes) {
                Ok(out) => {
                    let out = strip_controls(out);
                    // The values were escaped as they were printed; the text is the author's.
                    let (content, omitted_bytes) =
                        fit(out, self.spec.budget_bytes, self.spec.markdown);
                    return Shaped {
                        content,
                        how: "template",
                        omitted_bytes,
                        template_error: None,
                    };
                }
                Err(reason) => {
                    return Shaped {
                        content: String::new(),
                        how: "template_failed",
                        omitted_bytes: 0,
                        template_error: Some(scrub(&reason, data, message)),
                    };
                }
            }
        }
        let (raw, how) = generic(data, message, self.spec.budget_bytes);
        let mut content = strip_controls(raw);
        if self.spec.markdown {
            let mut escaped = String::with_capacity(content.len() + content.len() / 8);
            escape_markdown(&content, &mut escaped);
            content = escaped;
        }
        let (content, omitted_bytes) = fit(content, self.spec.budget_bytes, self.spec.markdown);
        Shaped {
            content,
            how,
            omitted_bytes,
            template_error: None,
        }
    }
}

/// The longest template error kept, in characters.
const MAX_TEMPLATE_ERROR_CHARS: usize = 300;

/// A template's error as anyone may read it: redacted, bounded, and with every string
/// (of 3 characters or more) and long number of the payload and the message in it
/// replaced by `***` (an engine's error may quote the value it failed on).
fn scrub(reason: &str, data: &Value, message: Option<&str>) -> String {
    let mut text =
        toolmend::redact::text(&toolmend::redact::brief(reason, MAX_TEMPLATE_ERROR_CHARS));
    let mut leaves: Vec<String> = Vec::new();
    let mut stack = vec![data];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => leaves.push(s.clone()),
            Value::Number(n) => leaves.push(n.to_string()),
            Value::Array(items) => stack.extend(items),
            Value::Object(fields) => stack.extend(fields.values()),
            _ => {}
        }
    }
    leaves.extend(message.map(str::to_owned));
    // Longest first: a value that holds another is blanked whole.
    leaves.sort_by_key(|l| std::cmp::Reverse(l.len()));
    for leaf in leaves {
        if leaf.chars().count() >= 3 && text.contains(leaf.as_str()) {
            text = text.replace(leaf.as_str(), toolmend::redact::MASK);
        }
    }
    text
}

/// Text from bytes that may not be UTF-8: invalid sequences replaced (U+FFFD); true when any was.
pub fn clean_utf8(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, bool) {
    let s = String::from_utf8_lossy(bytes);
    let lossy = matches!(s, std::borrow::Cow::Owned(_));
    (s, lossy)
}
