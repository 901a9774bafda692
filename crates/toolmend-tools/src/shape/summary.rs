//! The generic summary of a payload without a template: bounded, whatever its size.

use super::*;

/// `1234567` as `1,234,567`.
pub(super) fn group(n: usize) -> String {
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

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{} {}", group(n), if n == 1 { one } else { many })
}

/// A writer that fails past `cap` bytes (to test "is the compact JSON small" without
/// writing all of a large payload).
pub(super) struct Capped {
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

pub(super) fn compact_json_within(data: &Value, cap: usize) -> Option<String> {
    let mut w = Capped {
        buf: Vec::new(),
        cap,
    };
    serde_json::to_writer(&mut w, data).ok()?;
    String::from_utf8(w.buf).ok()
}

/// The generic shaping: the text, the small JSON whole, or a summary.
pub(super) fn generic(
    data: &Value,
    message: Option<&str>,
    budget: usize,
) -> (String, &'static str) {
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

pub(super) fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

pub(super) fn push_key(out: &mut String, key: &str) {
    let short: String = truncate_chars(key, 40);
    out.push_str(&serde_json::to_string(&short).unwrap_or_default());
}

pub(super) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// A scalar, an `[N items]` or a `{N fields}`.
pub(super) fn push_value(out: &mut String, v: &Value, max_chars: usize) {
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

pub(super) fn is_id_like(key: &str) -> bool {
    key.ends_with("_id") || (key.len() > 2 && key.ends_with("Id"))
}

/// The fields of `map` a summary shows: identifying scalars, else the first scalars.
pub(super) fn shown_fields(
    map: &serde_json::Map<String, Value>,
    most: usize,
    fallback: usize,
) -> Vec<&str> {
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

pub(super) fn push_fields(
    out: &mut String,
    map: &serde_json::Map<String, Value>,
    keys: &[&str],
    max: usize,
) {
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
pub(super) fn push_item(out: &mut String, v: &Value) {
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
pub(super) fn push_items(out: &mut String, items: &[Value]) {
    for (i, item) in items.iter().take(FIRST_ITEMS).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_item(out, item);
    }
}

pub(super) fn summarize_array(out: &mut String, items: &[Value]) {
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
pub(super) fn push_names<'a>(
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

pub(super) fn summarize_object(out: &mut String, map: &serde_json::Map<String, Value>) {
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
pub(super) fn summarize(data: &Value) -> String {
    let mut out = String::with_capacity(256);
    match data {
        Value::Array(items) => summarize_array(&mut out, items),
        Value::Object(map) => summarize_object(&mut out, map),
        other => push_value(&mut out, other, 200),
    }
    out
}
