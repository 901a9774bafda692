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

// ---------------------------------------------------------------------------------------
// Templates

fn describe(e: &Error) -> String {
    let what = match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    };
    match e.line() {
        Some(line) => format!("line {line}: {what}"),
        None => what,
    }
}

fn compile(source: &str, markdown: bool) -> Result<Environment<'static>, String> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_undefined_behavior(UndefinedBehavior::Chainable);
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.set_recursion_limit(TEMPLATE_RECURSION);
    if markdown {
        env.set_formatter(|out, _state, value| {
            if value.is_safe() || value.is_undefined() {
                return write!(out, "{value}").map_err(Error::from);
            }
            let text = value.to_string();
            let mut escaped = String::with_capacity(text.len() + 8);
            escape_markdown(&text, &mut escaped);
            out.write_str(&escaped).map_err(Error::from)
        });
    }
    env.add_function("sum", minijinja::filters::sum);
    env.add_function("join", minijinja::filters::join);
    env.add_function("round", minijinja::filters::round);
    for name in ["len", "length", "count"] {
        env.add_function(name, minijinja::filters::length);
    }
    env.add_filter("len", minijinja::filters::length);
    env.add_function("date", date);
    env.add_filter("date", date);
    env.add_function("tojson", tojson);
    env.add_filter("tojson", tojson);
    env.add_template_owned(TEMPLATE_NAME, source.to_owned())
        .map_err(|e| describe(&e))?;
    // minijinja looks filters, functions and included templates up as it renders: one
    // trial render over an empty payload finds those it reaches (best effort: a name in a
    // branch the trial does not take is found at shape time, and falls back).
    let trial = env.get_template(TEMPLATE_NAME).and_then(|t| {
        t.render_captured_to(context(&Value::Null, None), io::sink())
            .map(drop)
    });
    if let Err(e) = trial
        && matches!(
            e.kind(),
            ErrorKind::UnknownFilter
                | ErrorKind::UnknownFunction
                | ErrorKind::UnknownTest
                | ErrorKind::TemplateNotFound
        )
    {
        let mut reason = describe(&e);
        if e.kind() == ErrorKind::TemplateNotFound {
            reason.push_str(" (a result template cannot include, import or extend another)");
        }
        return Err(reason);
    }
    Ok(env)
}

fn context(data: &Value, message: Option<&str>) -> Mj {
    let whole = Mj::from(Serde(data));
    let mut scope: BTreeMap<String, Mj> = BTreeMap::new();
    if let Value::Object(map) = data {
        for key in map.keys() {
            scope.insert(key.clone(), whole.get_attr(key).unwrap_or_default());
        }
    }
    scope.insert("message".into(), message.map_or(Mj::UNDEFINED, Mj::from));
    scope.insert("data".into(), whole);
    Mj::from(scope)
}

/// An `io::Write` that refuses to grow past `cap` (which stops the render).
struct CapWriter {
    buf: Vec<u8>,
    cap: usize,
    over: bool,
}

impl io::Write for CapWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len().saturating_add(bytes.len()) > self.cap {
            self.over = true;
            return Err(io::Error::other("over the output cap"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn render(
    env: &Environment<'static>,
    data: &Value,
    message: Option<&str>,
    budget: usize,
) -> Result<String, String> {
    let template = env.get_template(TEMPLATE_NAME).map_err(|e| describe(&e))?;
    let cap = TEMPLATE_OUTPUT_CAP.max(budget);
    let mut w = CapWriter {
        buf: Vec::new(),
        cap,
        over: false,
    };
    let done = template
        .render_captured_to(context(data, message), &mut w)
        .map(drop);
    if w.over {
        return Err(format!(
            "the output passed {} bytes (toolmend's cap)",
            group(cap)
        ));
    }
    done.map_err(|e| describe(&e))?;
    Ok(match String::from_utf8(w.buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

fn tojson(value: &Mj, indent: Option<Mj>, kwargs: Kwargs) -> Result<Mj, Error> {
    let json = minijinja::filters::tojson(value, indent, kwargs)?;
    // Not marked safe: in Markdown mode it is escaped like every other value.
    Ok(Mj::from(json.as_str().unwrap_or_default()))
}

// ---------------------------------------------------------------------------------------
// date()

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A civil date-time (no zone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DateTime {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// Read from a date without a time.
    date_only: bool,
}

fn from_unix(secs: i64) -> Option<DateTime> {
    // Years 0..=9999.
    if !(-62_167_219_200..=253_402_300_799).contains(&secs) {
        return None;
    }
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400) as u32;
    Some(DateTime {
        year: y,
        month: m,
        day: d,
        hour: s / 3600,
        minute: s / 60 % 60,
        second: s % 60,
        date_only: false,
    })
}

fn digits(s: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = s.get(at..at + n)?;
    part.iter().try_fold(0u32, |acc, b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

fn parse_iso(s: &str) -> Option<DateTime> {
    let b = s.trim().as_bytes();
    let year = i64::from(digits(b, 0, 4)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let mut dt = DateTime {
        year,
        month,
        day,
        hour: 0,
        minute: 0,
        second: 0,
        date_only: b.len() == 10,
    };
    if dt.date_only {
        return Some(dt);
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) || b.get(13) != Some(&b':') {
        return None;
    }
    dt.hour = digits(b, 11, 2)?;
    dt.minute = digits(b, 14, 2)?;
    let mut at = 16;
    if b.get(at) == Some(&b':') {
        dt.second = digits(b, at + 1, 2)?;
        at += 3;
        if matches!(b.get(at), Some(b'.' | b',')) {
            at += 1;
            let start = at;
            while b.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            if at == start {
                return None;
            }
        }
    }
    if dt.hour > 23 || dt.minute > 59 || dt.second > 60 {
        return None;
    }
    // The zone: read, not applied.
    match &b[at..] {
        [] | [b'Z' | b'z'] => {}
        [b'+' | b'-', rest @ ..] => {
            let ok = match rest {
                [h1, h2] | [h1, h2, b':', _, _] | [h1, h2, _, _] => {
                    h1.is_ascii_digit() && h2.is_ascii_digit()
                }
                _ => false,
            };
            if !ok || !rest.iter().all(|c| c.is_ascii_digit() || *c == b':') {
                return None;
            }
        }
        _ => return None,
    }
    Some(dt)
}

fn read_date(value: &Mj) -> Option<DateTime> {
    if let Some(s) = value.as_str() {
        let t = s.trim();
        if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) {
            return from_unix(t.parse().ok()?);
        }
        return parse_iso(t);
    }
    if let Ok(i) = i64::try_from(value.clone()) {
        return from_unix(i);
    }
    let f = f64::try_from(value.clone()).ok()?;
    if !f.is_finite() || f.abs() > 1e12 {
        return None;
    }
    from_unix(f.floor() as i64)
}

fn format_date(dt: &DateTime, fmt: &str) -> Result<String, String> {
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let month = MONTHS[(dt.month - 1) as usize];
        let weekday =
            WEEKDAYS[(days_from_civil(dt.year, dt.month, dt.day) + 4).rem_euclid(7) as usize];
        let _ = match chars.next() {
            Some('Y') => write!(out, "{:04}", dt.year),
            Some('m') => write!(out, "{:02}", dt.month),
            Some('d') => write!(out, "{:02}", dt.day),
            Some('H') => write!(out, "{:02}", dt.hour),
            Some('M') => write!(out, "{:02}", dt.minute),
            Some('S') => write!(out, "{:02}", dt.second),
            Some('b') => out.write_str(&month[..3]),
            Some('B') => out.write_str(month),
            Some('a') => out.write_str(&weekday[..3]),
            Some('A') => out.write_str(weekday),
            Some('%') => out.write_str("%"),
            Some(other) => {
                return Err(format!(
                    "date: unsupported directive %{other} (supported: %Y %m %d %H %M %S %b %B %a %A %%)"
                ));
            }
            None => return Err("date: the format ends with a lone %".into()),
        };
    }
    Ok(out)
}

fn date(value: &Mj, fmt: Option<&str>) -> Result<String, Error> {
    let dt = read_date(value).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("date: cannot read {value:?} as an ISO date, date-time or unix seconds"),
        )
    })?;
    let fmt = fmt.unwrap_or(if dt.date_only {
        "%Y-%m-%d"
    } else {
        "%Y-%m-%d %H:%M:%S"
    });
    format_date(&dt, fmt).map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
}

// ---------------------------------------------------------------------------------------
// The generic summary

/// `1234567` as `1,234,567`.
fn group(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{} {}", group(n), if n == 1 { one } else { many })
}

/// A writer that fails past `cap` bytes (to test "is the compact JSON small" without
/// writing all of a large payload).
struct Capped {
    buf: Vec<u8>,
    cap: usize,
}

impl io::Write for Capped {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len() + bytes.len() > self.cap {
            return Err(io::Error::other("too large"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn compact_json_within(data: &Value, cap: usize) -> Option<String> {
    let mut w = Capped {
        buf: Vec::new(),
        cap,
    };
    serde_json::to_writer(&mut w, data).ok()?;
    String::from_utf8(w.buf).ok()
}

/// The generic shaping: the text, the small JSON whole, or a summary.
fn generic(data: &Value, message: Option<&str>, budget: usize) -> (String, &'static str) {
    let message = message.filter(|m| !m.is_empty());
    let (body, how) = match data {
        Value::Null if message.is_some() => (String::new(), "text"),
        Value::String(s) => (s.clone(), "text"),
        _ => {
            let limit = WHOLE_JSON_MIN.max(budget / 4);
            let limit = if budget > 0 { limit.min(budget) } else { limit };
            match compact_json_within(data, limit) {
                Some(json) => (json, "json"),
                None => (summarize(data), "summary"),
            }
        }
    };
    match message {
        Some(m) if body.is_empty() => (m.to_owned(), how),
        Some(m) => (format!("{m}\n{body}"), how),
        None => (body, how),
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

fn push_key(out: &mut String, key: &str) {
    let short: String = truncate_chars(key, 40);
    out.push_str(&serde_json::to_string(&short).unwrap_or_default());
}

fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// A scalar, an `[N items]` or a `{N fields}`.
fn push_value(out: &mut String, v: &Value, max_chars: usize) {
    match v {
        Value::String(s) => {
            out.push_str(&serde_json::to_string(&truncate_chars(s, max_chars)).unwrap_or_default());
        }
        Value::Array(a) => {
            let _ = write!(out, "[{}]", plural(a.len(), "item", "items"));
        }
        Value::Object(o) => {
            let _ = write!(out, "{{{}}}", plural(o.len(), "field", "fields"));
        }
        other => out.push_str(&other.to_string()),
    }
}

fn is_id_like(key: &str) -> bool {
    key.ends_with("_id") || (key.len() > 2 && key.ends_with("Id"))
}

/// The fields of `map` a summary shows: identifying scalars, else the first scalars.
fn shown_fields(map: &serde_json::Map<String, Value>, most: usize, fallback: usize) -> Vec<&str> {
    let mut shown: Vec<&str> = KEY_FIELDS
        .iter()
        .filter_map(|k| map.get_key_value(*k))
        .filter(|(_, v)| is_scalar(v))
        .map(|(k, _)| k.as_str())
        .take(most)
        .collect();
    for (k, v) in map.iter().take(SCAN_FIELDS) {
        if shown.len() >= most {
            break;
        }
        if is_id_like(k) && is_scalar(v) && !shown.contains(&k.as_str()) {
            shown.push(k);
        }
    }
    if shown.is_empty() {
        shown = map
            .iter()
            .take(SCAN_FIELDS)
            .filter(|(_, v)| is_scalar(v))
            .map(|(k, _)| k.as_str())
            .take(fallback)
            .collect();
    }
    shown
}

fn push_fields(out: &mut String, map: &serde_json::Map<String, Value>, keys: &[&str], max: usize) {
    out.push('{');
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_key(out, k);
        out.push_str(": ");
        if let Some(v) = map.get(*k) {
            push_value(out, v, max);
        }
    }
}

/// One item of an array.
fn push_item(out: &mut String, v: &Value) {
    let Value::Object(map) = v else {
        push_value(out, v, 60);
        return;
    };
    if map.is_empty() {
        out.push_str("{}");
        return;
    }
    let shown = shown_fields(map, 4, 3);
    if shown.is_empty() {
        push_value(out, v, 60);
        return;
    }
    push_fields(out, map, &shown, 60);
    if shown.len() < map.len() {
        out.push_str(", …");
    }
    out.push('}');
}

/// The first items of `items`, `, `-separated.
fn push_items(out: &mut String, items: &[Value]) {
    for (i, item) in items.iter().take(FIRST_ITEMS).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_item(out, item);
    }
}

fn summarize_array(out: &mut String, items: &[Value]) {
    out.push_str(&plural(items.len(), "item", "items"));
    if items.is_empty() {
        return;
    }
    if items.len() <= FIRST_ITEMS {
        out.push_str(": ");
    } else {
        let _ = write!(out, "; first {FIRST_ITEMS}: ");
    }
    push_items(out, items);
    if let Some(Value::Object(first)) = items.first() {
        let shown = shown_fields(first, 4, 3);
        if !shown.is_empty() && shown.len() < first.len() {
            out.push_str("; item fields: ");
            push_names(
                out,
                first.keys().map(String::as_str),
                first.len(),
                OTHER_FIELDS,
            );
        }
    }
}

/// `a, b, c, … (+N more)`.
fn push_names<'a>(
    out: &mut String,
    names: impl Iterator<Item = &'a str>,
    total: usize,
    most: usize,
) {
    for (i, name) in names.take(most).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&truncate_chars(name, 40));
    }
    if total > most {
        let _ = write!(out, ", … (+{} more)", group(total - most));
    }
}

fn summarize_object(out: &mut String, map: &serde_json::Map<String, Value>) {
    let shown = shown_fields(map, 6, 4);
    let others = map.len() - shown.len();
    if !shown.is_empty() {
        push_fields(out, map, &shown, 80);
        out.push('}');
        if others > 0 {
            let _ = write!(out, " +{}: ", plural(others, "more field", "more fields"));
        }
    } else {
        let _ = write!(out, "{}: ", plural(map.len(), "field", "fields"));
    }
    let mut first_array: Option<(&str, &Vec<Value>)> = None;
    let rest = map.iter().filter(|(k, _)| !shown.contains(&k.as_str()));
    for (listed, (k, v)) in rest.enumerate() {
        if listed == OTHER_FIELDS {
            let _ = write!(out, ", … (+{} more)", group(others - listed));
            break;
        }
        if listed > 0 {
            out.push_str(", ");
        }
        out.push_str(&truncate_chars(k, 40));
        match v {
            Value::Array(a) => {
                let _ = write!(out, " [{}]", plural(a.len(), "item", "items"));
                if first_array.is_none() && !a.is_empty() {
                    first_array = Some((k, a));
                }
            }
            Value::Object(o) => {
                let _ = write!(out, " {{{}}}", plural(o.len(), "field", "fields"));
            }
            _ => {}
        }
    }
    if let Some((k, items)) = first_array {
        let _ = write!(out, "; first of {}: ", truncate_chars(k, 40));
        push_items(out, items);
    }
}

/// The summary of a payload too large to read whole; looks at a bounded part of it.
fn summarize(data: &Value) -> String {
    let mut out = String::with_capacity(256);
    match data {
        Value::Array(items) => summarize_array(&mut out, items),
        Value::Object(map) => summarize_object(&mut out, map),
        other => push_value(&mut out, other, 200),
    }
    out
}

// ---------------------------------------------------------------------------------------
// Cleaning, escaping, the budget

/// Without control characters (C0, DEL, C1) other than `\n`, `\t`, `\r`.
fn strip_controls(s: String) -> String {
    let bad = |c: char| c.is_control() && !matches!(c, '\n' | '\t' | '\r');
    if !s.contains(bad) {
        return s;
    }
    s.chars().filter(|c| !bad(*c)).collect()
}

/// Appends `s` escaped for a Markdown renderer (see the module doc); `s` is taken to start
/// a line.
fn escape_markdown(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    let mut line_start = true;
    let mut indent = 0;
    let mut prev = '\n';
    // The byte of a `12.` / `12)` list marker's punctuation, once seen.
    let mut list_mark: Option<usize> = None;
    for (i, c) in s.char_indices() {
        let next = bytes.get(i + c.len_utf8()).copied();
        let escape = match c {
            '\\' | '`' | '*' | '{' | '}' | '[' | ']' | '<' | '>' | '|' => true,
            '_' => {
                !(prev.is_alphanumeric()
                    && s[i + 1..].chars().next().is_some_and(char::is_alphanumeric))
            }
            '!' => next == Some(b'['),
            '(' => prev == ']',
            '#' | '+' | '-' | '=' => line_start,
            '.' | ')' => list_mark == Some(i),
            '0'..='9' if line_start => {
                let run = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                if run <= 9 && matches!(bytes.get(i + run), Some(b'.' | b')')) {
                    list_mark = Some(i + run);
                }
                false
            }
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
        if c == '\n' || c == '\r' {
            line_start = true;
            indent = 0;
        } else if c == ' ' && line_start && indent < 3 {
            indent += 1;
        } else {
            line_start = false;
        }
        prev = c;
    }
}

fn marker(omitted: usize, markdown: bool) -> String {
    if markdown {
        format!(
            " … \\[{} bytes omitted; full result kept as artifact\\] … ",
            group(omitted)
        )
    } else {
        format!(
            " … [{} bytes omitted; full result kept as artifact] … ",
            group(omitted)
        )
    }
}

/// True when the byte at `at` is the char of a `\X` escape (an odd run of `\` before it).
fn escaped_at(s: &str, at: usize) -> bool {
    s.as_bytes()[..at]
        .iter()
        .rev()
        .take_while(|b| **b == b'\\')
        .count()
        % 2
        == 1
}

/// The char boundary at or before `at` (`str::floor_char_boundary` is newer than our MSRV).
fn floor_boundary(s: &str, mut at: usize) -> usize {
    at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The char boundary at or after `at`.
fn ceil_boundary(s: &str, mut at: usize) -> usize {
    at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// `s` within `budget` bytes: 40% head, 60% tail, the marker between.
fn fit(s: String, budget: usize, markdown: bool) -> (String, usize) {
    if budget == 0 || s.len() <= budget {
        return (s, 0);
    }
    let total = s.len();
    let widest = marker(total, markdown).len();
    if budget <= widest {
        return (marker(total, markdown).trim().to_owned(), total);
    }
    let room = budget - widest;
    let mut head = floor_boundary(&s, room * 2 / 5);
    if markdown && head > 0 && escaped_at(&s, head) {
        head -= 1;
    }
    let mut tail = ceil_boundary(&s, total - (room - room * 2 / 5));
    if markdown && tail < total && escaped_at(&s, tail) {
        tail = ceil_boundary(&s, tail + 1);
    }
    let omitted = tail - head;
    let mark = marker(omitted, markdown);
    let mut out = String::with_capacity(head + mark.len() + total - tail);
    out.push_str(&s[..head]);
    out.push_str(&mark);
    out.push_str(&s[tail..]);
    (out, omitted)
}

#[cfg(test)]
mod tests {
    use std::{borrow::Cow, time::Duration};

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn shaper(template: Option<&str>, budget: usize, markdown: bool) -> Shaper {
        Shaper::new(&ShapeSpec {
            template: template.map(str::to_owned),
            budget_bytes: budget,
            markdown,
        })
        .unwrap()
    }

    fn render_t(template: &str, data: &Value) -> Shaped {
        shaper(Some(template), 4_000, false).shape(data, None)
    }

    #[test]
    fn template_helpers_sum_len_join_round() {
        let data = json!({"orders": [{"id": 1, "amount": 2.5}, {"id": 2, "amount": 4}], "tags": ["a", "b"]});
        let s = render_t(
            "{{ len(orders) }} orders, total {{ sum(orders, \"amount\") }} = {{ orders|sum(attribute=\"amount\") }}; \
             {{ orders|length }}/{{ orders|len }}/{{ length(tags) }}; {{ join(tags, \", \") }}|{{ tags|join(\"-\") }}; \
             {{ round(2.345, 1) }} {{ 7.5|round }} {{ round(sum(orders, \"amount\") / 3, 2) }}",
            &data,
        );
        assert_eq!(s.how, "template", "{s:?}");
        assert_eq!(
            s.content,
            "2 orders, total 6.5 = 6.5; 2/2/2; a, b|a-b; 2.3 8.0 2.17"
        );
        assert_eq!(s.template_error, None);
    }

    #[test]
    fn template_scope_data_message_and_top_level_fields() {
        let sh = shaper(
            Some(
                "{{ message }}|{{ id }}|{{ data.id }}|{{ data.message }}|{{ missing.deeper.still }}|",
            ),
            0,
            false,
        );
        let s = sh.shape(&json!({"id": 7, "message": "own"}), Some("ok"));
        assert_eq!(s.content, "ok|7|7|own||");
        let s = sh.shape(&json!([1, 2]), None);
        assert_eq!(s.content, "|||||");
        let s = render_t(
            "{{ tojson(data) }} {{ data|tojson }}",
            &json!({"a": [1, "<x>"]}),
        );
        assert_eq!(
            s.content,
            r#"{"a": [1, "\u003cx\u003e"]} {"a": [1, "\u003cx\u003e"]}"#
        );
    }

    #[test]
    fn template_date() {
        let data = json!({"d": "2024-03-05", "dt": "2024-03-05T14:07:09.123+02:00", "u": 1_700_000_000, "s": "1700000000"});
        let s = render_t(
            "{{ date(d, \"%a %d %b %Y\") }}|{{ dt|date(\"%A %B %d, %H:%M:%S\") }}|{{ date(u) }}|{{ s|date(\"%Y-%m-%dT%H:%M:%SZ %%\") }}|{{ d|date }}",
            &data,
        );
        assert_eq!(
            s.content,
            "Tue 05 Mar 2024|Tuesday March 05, 14:07:09|2023-11-14 22:13:20|2023-11-14T22:13:20Z %|2024-03-05"
        );
        // Leap day, pre-1970, a space separator.
        let s = render_t(
            "{{ date(\"2000-02-29 23:59\", \"%a %Y-%m-%d %H:%M\") }} {{ date(-86400) }}",
            &json!(null),
        );
        assert_eq!(s.content, "Tue 2000-02-29 23:59 1969-12-31 00:00:00");
        // Unreadable dates and formats fail the template (and fall back).
        for bad in [
            "{{ date(\"2024-02-30\") }}",
            "{{ date(\"yesterday\") }}",
            "{{ date(d, \"%j\") }}",
        ] {
            let s = shaper(Some(bad), 4_000, false).shape(&json!({"d": "2024-01-01"}), None);
            assert_eq!(s.how, "template_failed", "{bad}");
            assert!(
                s.template_error.as_deref().unwrap().contains("date:"),
                "{s:?}"
            );
        }
    }

    #[test]
    fn template_that_does_not_compile_names_its_line() {
        let e = Shaper::new(&ShapeSpec {
            template: Some("line one\n{{ ok }}\n{% for x in items %}\n{{ x }".into()),
            budget_bytes: 100,
            markdown: false,
        })
        .unwrap_err();
        assert!(e.starts_with("line 4: syntax error"), "{e}");
        let e = Shaper::new(&ShapeSpec {
            template: Some("a\n{{ data|nosuchfilter }}".into()),
            budget_bytes: 100,
            markdown: false,
        })
        .unwrap_err();
        assert!(e.starts_with("line 2: unknown filter"), "{e}");
        let e = Shaper::new(&ShapeSpec {
            template: Some("{% include \"other\" %}".into()),
            budget_bytes: 100,
            markdown: false,
        })
        .unwrap_err();
        assert!(e.contains("cannot include"), "{e}");
    }

    #[test]
    fn runaway_templates_fall_back_without_hanging() {
        let data = json!({"id": 3, "items": [1, 2, 3]});
        let runaway = [
            "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}",
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            "{{ \"x\" * 2000000 }}",
            "{% for a in range(100000) %}{{ \"y\" * 1000 }}{% endfor %}",
        ];
        for t in runaway {
            let s = shaper(Some(t), 500, false).shape(&data, None);
            assert_eq!(s.how, "template_failed", "{t}: {s:?}");
            // Stopped by a bound (the fuel, the output cap, the recursion limit), not run
            // to its end: that is what keeps it from hanging.
            let why = s.template_error.as_deref().unwrap_or_default();
            assert!(
                ["fuel", "cap", "recursion limit"]
                    .iter()
                    .any(|bound| why.contains(bound)),
                "{t}: {why}"
            );
            // Nothing of the payload: the template was written to choose what shows.
            assert_eq!(s.content, "");
        }
        let s = shaper(Some("{{ \"x\" * 2000000 }}"), 500, false).shape(&data, None);
        let why = s.template_error.unwrap();
        assert!(why.contains("fuel") || why.contains("cap"), "{why}");
        let s = shaper(
            Some("{% for a in range(100000) %}{{ a }}{% endfor %}"),
            500,
            false,
        )
        .shape(&data, None);
        assert!(s.template_error.unwrap().contains("fuel"));
        // A runtime error (the payload's shape is not what the template expected).
        let s = shaper(Some("{{ id + \"x\" }}"), 500, false).shape(&data, Some("done"));
        assert_eq!(s.how, "template_failed");
        assert!(s.template_error.unwrap().starts_with("line 1: "));
        assert_eq!(s.content, "");
    }

    #[test]
    fn a_failed_template_shows_no_value_of_the_payload_even_in_its_error() {
        // `date` quotes the value it cannot read; the error keeps its words, not the value.
        let data = json!({"card": "4111-SECRET-1111", "when": "not a date SECRET2"});
        for t in ["{{ date(when) }}", "{{ date(card) }}"] {
            let s = shaper(Some(t), 4_000, false).shape(&data, Some("msg"));
            assert_eq!((s.how, s.content.as_str()), ("template_failed", ""));
            let why = s.template_error.unwrap();
            assert!(why.contains("date: cannot read"), "{why}");
            assert!(!why.contains("SECRET"), "{why}");
        }
    }

    #[test]
    fn template_output_over_budget_is_cut_with_a_marker() {
        let sh = shaper(
            Some("{% for i in range(2000) %}{{ i }},{% endfor %}END"),
            300,
            false,
        );
        let s = sh.shape(&json!(null), None);
        assert_eq!(s.how, "template");
        assert!(s.content.len() <= 300, "{}", s.content.len());
        assert!(s.content.starts_with("0,1,2,"), "{}", s.content);
        assert!(s.content.ends_with("1998,1999,END"), "{}", s.content);
        let full: String = (0..2000).map(|i| format!("{i},")).collect::<String>() + "END";
        assert_eq!(
            s.content.len() - marker(s.omitted_bytes, false).len() + s.omitted_bytes,
            full.len()
        );
        assert!(s.content.contains(&format!(
            " … [{} bytes omitted; full result kept as artifact] … ",
            group(s.omitted_bytes)
        )));
    }

    #[test]
    fn budget_cut_head_tail_and_marker() {
        let text: String = "é".repeat(1_000); // 2,000 bytes, 2-byte chars
        let s = shaper(None, 500, false).shape(&json!(text), None);
        assert_eq!(s.how, "text");
        assert!(s.content.len() <= 500);
        // The room is 500 less the widest marker (61): 175 head (174 at a char), 264 tail.
        let mark = " … [1,562 bytes omitted; full result kept as artifact] … ";
        let (head, tail) = s.content.split_once(mark).expect(&s.content);
        assert_eq!((head.len(), tail.len(), s.content.len()), (174, 264, 499));
        assert_eq!(s.omitted_bytes, 1_562);
        assert_eq!(head.len() + tail.len() + s.omitted_bytes, 2_000);
        // 40 / 60 of the room left by the widest marker.
        assert!(
            head.len() * 3 <= tail.len() * 2 + 2,
            "{} {}",
            head.len(),
            tail.len()
        );
        // Within the budget: untouched; 0: no budget.
        assert_eq!(
            shaper(None, 2_000, false)
                .shape(&json!(text), None)
                .omitted_bytes,
            0
        );
        assert_eq!(
            shaper(None, 0, false).shape(&json!(text), None).content,
            text
        );
        // A budget below the marker: the marker alone.
        let s = shaper(None, 10, false).shape(&json!(text), None);
        assert_eq!(
            s.content,
            "… [2,000 bytes omitted; full result kept as artifact] …"
        );
        assert_eq!(s.omitted_bytes, 2_000);
        assert_eq!(marker(usize::MAX, true).len(), MARKER_MAX_BYTES);
    }

    #[test]
    fn generic_shapes() {
        let sh = shaper(None, 4_000, false);
        // Small: whole compact JSON.
        assert_eq!(
            sh.shape(&json!(42), None),
            Shaped {
                content: "42".into(),
                how: "json",
                omitted_bytes: 0,
                template_error: None
            }
        );
        assert_eq!(sh.shape(&json!(true), None).content, "true");
        assert_eq!(sh.shape(&json!(null), None).content, "null");
        assert_eq!(sh.shape(&json!(null), Some("deleted")).content, "deleted");
        assert_eq!(
            sh.shape(&json!({"id": 7, "ok": true}), Some("found"))
                .content,
            "found\n{\"id\":7,\"ok\":true}"
        );
        assert_eq!(sh.shape(&json!("plain text\nhere"), None).how, "text");
        assert_eq!(
            sh.shape(&json!("plain text\nhere"), None).content,
            "plain text\nhere"
        );
        let long = "x".repeat(300);

        // An array of objects.
        let items: Vec<Value> = (1..=1000)
            .map(|i| json!({"id": i, "name": format!("item {i}"), "price": i * 3, "owner": {"id": 1}, "notes": long}))
            .collect();
        let s = sh.shape(&Value::Array(items.clone()), None);
        assert_eq!(s.how, "summary");
        assert_eq!(
            s.content,
            r#"1,000 items; first 3: {"id": 1, "name": "item 1", …}, {"id": 2, "name": "item 2", …}, {"id": 3, "name": "item 3", …}; item fields: id, name, price, owner, notes"#
        );
        let s = sh.shape(&Value::Array(items[..3].to_vec()), None);
        assert!(
            s.content
                .starts_with(r#"3 items: {"id": 1, "name": "item 1", …}, "#),
            "{}",
            s.content
        );
        let s = sh.shape(&json!((0..500).collect::<Vec<_>>()), None);
        assert_eq!(s.content, "500 items; first 3: 0, 1, 2");

        // An object.
        let obj = json!({
            "id": 7, "status": "open", "created_at": "2024-01-01", "items": items[..12].to_vec(),
            "owner": {"id": 1, "name": "n", "email": "e"}, "tags": ["a", "b"], "note": long,
        });
        let s = sh.shape(&obj, None);
        assert_eq!(s.how, "summary");
        assert_eq!(
            s.content,
            r#"{"id": 7, "status": "open"} +5 more fields: created_at, items [12 items], owner {3 fields}, tags [2 items], note; first of items: {"id": 1, "name": "item 1", …}, {"id": 2, "name": "item 2", …}, {"id": 3, "name": "item 3", …}"#
        );
        // No identifying fields: the first scalars; none at all: the field list.
        let s = sh.shape(
            &json!({"alpha": long.repeat(4), "beta": 2, "gamma": [1], "delta": {}}),
            None,
        );
        assert_eq!(
            s.content,
            format!(
                "{{\"alpha\": \"{}…\", \"beta\": 2}} +2 more fields: gamma [1 item], delta {{0 fields}}; first of gamma: 1",
                "x".repeat(80)
            )
        );
        let many: serde_json::Map<String, Value> = (0..20)
            .map(|i| (format!("k{i:02}"), json!({"v": long})))
            .collect();
        let s = sh.shape(&Value::Object(many), None);
        assert!(
            s.content
                .starts_with("20 fields: k00 {1 field}, k01 {1 field}, ")
                && s.content.ends_with("k07 {1 field}, … (+12 more)"),
            "{}",
            s.content
        );
    }

    #[test]
    fn markdown_escaping() {
        let sh = shaper(None, 0, true);
        let s = sh.shape(&json!("<script>alert(1)</script> [click](http://x) ![i](y) *b* _e_ a_b `c` {x} |t|\n# title\n- item\n12. twelve\n  + plus\nC:\\dir 3.14 (ok) a-b"), None);
        assert_eq!(
            s.content,
            "\\<script\\>alert(1)\\</script\\> \\[click\\]\\(http://x) \\!\\[i\\]\\(y) \\*b\\* \\_e\\_ a_b \\`c\\` \\{x\\} \\|t\\|\n\\# title\n\\- item\n12\\. twelve\n  \\+ plus\nC:\\\\dir 3.14 (ok) a-b"
        );
        // A template: its own Markdown is kept, the values are escaped.
        let sh = shaper(
            Some("## {{ title }}\n- **{{ data.items|length }}** items: {{ tojson(data.items) }}"),
            0,
            true,
        );
        let s = sh.shape(&json!({"title": "<b>[x](y)</b>", "items": ["*"]}), None);
        assert_eq!(
            s.content,
            "## \\<b\\>\\[x\\]\\(y)\\</b\\>\n- **1** items: \\[\"\\*\"\\]"
        );
        // A cut never splits an escape, and the marker's brackets are escaped.
        for budget in 90..140 {
            let s = shaper(None, budget, true).shape(&json!("[".repeat(200)), None);
            assert!(s.content.len() <= budget);
            let (head, tail) = s.content.split_once(" … \\[").unwrap();
            assert!(
                head.len() % 2 == 0
                    && head
                        .chars()
                        .collect::<Vec<_>>()
                        .chunks(2)
                        .all(|p| p == ['\\', '[']),
                "{head}"
            );
            let tail = tail.split_once("\\] … ").unwrap().1;
            assert!(
                tail.len() % 2 == 0 && tail.starts_with("\\["),
                "{budget}: {tail}"
            );
        }
    }

    #[test]
    fn control_characters_and_invalid_utf8() {
        let (text, lossy) = clean_utf8(b"ok \xff\xfe end\x00\x1b[31m\tx\r\n");
        assert!(lossy);
        let s = shaper(None, 100, false).shape(&json!(text), None);
        assert_eq!(s.content, "ok \u{fffd}\u{fffd} end[31m\tx\r\n");
        assert_eq!(clean_utf8(b"fine"), (Cow::Borrowed("fine"), false));
        let s = render_t("a\u{0}b{{ data }}", &json!("c\u{7}d"));
        assert_eq!(s.content, "abcd");
    }

    #[test]
    fn deterministic_and_shareable() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Shaper>();
        let data = json!({"z": [1, 2, {"a": "b"}], "id": "x", "big": "y".repeat(5_000)});
        let sh = shaper(None, 300, true);
        assert_eq!(sh.shape(&data, Some("m")), sh.shape(&data, Some("m")));
        let sh = shaper(
            Some("{% for k, v in data|items %}{{ k }}={{ v }};{% endfor %}"),
            300,
            false,
        );
        assert_eq!(sh.shape(&data, None), sh.shape(&data, None));
    }

    use crate::test_cpu::cpu_ns;

    /// The CPU time of one shape, the least of five.
    fn time_shape(sh: &Shaper, data: &Value) -> Duration {
        (0..5)
            .map(|_| {
                let start = cpu_ns();
                std::hint::black_box(sh.shape(data, None));
                Duration::from_nanos(cpu_ns() - start)
            })
            .min()
            .unwrap()
    }

    /// Linear: 10x the input costs under 35x the CPU time (quadratic: about 100x; the room
    /// is for the larger input missing the caches more, with other processes evicting them
    /// up to a load of 8 on two cores, as in the core's `MAX_CPU_RATIO`).
    #[test]
    fn shape_scales_with_input() {
        let floor = Duration::from_micros(200);
        let sh = shaper(None, 4_000, false);
        let array = |n: usize| {
            Value::Array(
                (0..n)
                    .map(|i| json!({"id": i, "name": "n", "v": [i]}))
                    .collect(),
            )
        };
        let (small, big) = (array(100_000), array(1_000_000));
        let (t1, t10) = (time_shape(&sh, &small), time_shape(&sh, &big));
        assert!(t10 < 35 * t1.max(floor), "summary: {t1:?} vs {t10:?}");
        // Text: linear (cleaning, escaping), the cut itself constant.
        let sh = shaper(None, 4_000, true);
        let (small, big) = (
            json!("ab_c*\n".repeat(100_000)),
            json!("ab_c*\n".repeat(1_000_000)),
        );
        let (t1, t10) = (time_shape(&sh, &small), time_shape(&sh, &big));
        assert!(t10 < 35 * t1.max(floor), "text: {t1:?} vs {t10:?}");
        // A template over the payload: bounded by fuel.
        let sh = shaper(
            Some("{{ len(data) }} {% for x in data %}{{ x.id }}{% endfor %}"),
            4_000,
            false,
        );
        let (small, big) = (array(10_000), array(100_000));
        let (t1, t10) = (time_shape(&sh, &small), time_shape(&sh, &big));
        assert!(t10 < 35 * t1.max(floor), "template: {t1:?} vs {t10:?}");
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::from),
            "[\\[\\]()<>*_#`\\\\\n -]{0,40}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..8)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn shape_never_panics_and_keeps_the_budget(
            data in json_value(),
            budget in prop_oneof![Just(0usize), 0usize..400, 400usize..3000],
            markdown in any::<bool>(),
            message in proptest::option::of(any::<String>()),
            template in prop_oneof![
                Just(None),
                Just(Some("{{ data }}")),
                Just(Some("{% for k in data %}{{ k }}: {{ tojson(k) }}\n{% endfor %}{{ message }}")),
            ],
        ) {
            let sh = shaper(template, budget, markdown);
            let s = sh.shape(&data, message.as_deref());
            if budget > 0 {
                prop_assert!(s.content.len() <= budget.max(MARKER_MAX_BYTES), "{} > {budget}", s.content.len());
            }
            prop_assert_eq!(s.omitted_bytes > 0, s.content.contains("bytes omitted; full result kept as artifact"));
            prop_assert!(!s.content.chars().any(|c| c < ' ' && !matches!(c, '\n' | '\t' | '\r')));
            prop_assert_eq!(&s, &sh.shape(&data, message.as_deref()));
        }
    }

    /// Found by the fuzz target `tool_answers`: DEL (and C1 controls) inside a string
    /// payload reached the content.
    #[test]
    fn del_and_c1_controls_are_removed() {
        let shaper = Shaper::new(&ShapeSpec {
            template: None,
            budget_bytes: 64,
            markdown: false,
        })
        .unwrap();
        let shaped = shaper.shape(&Value::String("fusion energ\u{7f}y \u{85}now".into()), None);
        assert_eq!(shaped.content, "fusion energy now");
    }
}
