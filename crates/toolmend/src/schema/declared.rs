//! Where in a tool's schema a JSON Pointer into its arguments lands: the path the gateway's
//! field metrics and its event log name a fix or an issue by. Only what the schema
//! declares is kept, so no key or value the model made up ever leaves through it.

use serde_json::Value;

/// Schemas expanded at one level at most (`$ref`s and branches): bounds a schema that
/// fans out.
const MAX_EXPANDED: usize = 64;

/// The JSON Pointer `pointer` (into a call's arguments) as a path of `schema`: each
/// segment the schema declares (`properties`, through local `$ref`s, `allOf` / `anyOf` /
/// `oneOf`, `then` / `else`) kept as written in the pointer, an array index written `*`,
/// and at the first segment the schema does not declare, `?` and nothing after it. At most
/// `max_depth` segments, then `/…`. `""` (the whole arguments) stays `""`; without a
/// schema every key is `?`. Linear in the pointer; each level expands at most 64 schemas.
///
/// ```
/// use serde_json::json;
/// use toolmend::schema::declared_path;
/// let s = json!({"properties": {"stops": {"type": "array", "items": {"properties": {"at": {}}}}}});
/// assert_eq!(declared_path(Some(&s), "/stops/4/at", 8), "/stops/*/at");
/// assert_eq!(declared_path(Some(&s), "/stops/4/secret", 8), "/stops/*/?");
/// assert_eq!(declared_path(Some(&s), "/stops/4/at", 1), "/stops/…");
/// ```
pub fn declared_path(schema: Option<&Value>, pointer: &str, max_depth: usize) -> String {
    if pointer.is_empty() {
        return String::new();
    }
    let Some(root) = schema else {
        return "/?".to_owned();
    };
    let mut out = String::new();
    let mut nodes = vec![root];
    for (depth, raw) in pointer.split('/').skip(1).enumerate() {
        if depth == max_depth {
            out.push_str("/…");
            break;
        }
        let seg = super::unescape_pointer(raw);
        let expanded = expand(root, &nodes);
        let props: Vec<&Value> = expanded
            .iter()
            .filter_map(|n| n.get("properties")?.get(seg.as_ref()))
            .collect();
        if !props.is_empty() {
            out.push('/');
            out.push_str(raw);
            nodes = props;
            continue;
        }
        let index = !seg.is_empty() && seg.len() <= 10 && seg.bytes().all(|b| b.is_ascii_digit());
        let items: Vec<&Value> = if index {
            expanded
                .iter()
                .filter_map(|n| item_schema(n, &seg))
                .collect()
        } else {
            Vec::new()
        };
        if !items.is_empty() {
            out.push_str("/*");
            nodes = items;
            continue;
        }
        out.push_str("/?");
        break;
    }
    out
}

/// The schema of element `index` of an array schema.
fn item_schema<'a>(node: &'a Value, index: &str) -> Option<&'a Value> {
    let i: usize = index.parse().ok()?;
    if let Some(Value::Array(prefix)) = node.get("prefixItems")
        && let Some(s) = prefix.get(i)
    {
        return Some(s);
    }
    match node.get("items")? {
        Value::Array(tuple) => tuple.get(i).or_else(|| node.get("additionalItems")),
        items => Some(items),
    }
}

/// `nodes` with what they point to: local `$ref`s and the branches of `allOf`, `anyOf`,
/// `oneOf`, `then`, `else` (at most [`MAX_EXPANDED`] schemas; a cycle is seen once).
fn expand<'a>(root: &'a Value, nodes: &[&'a Value]) -> Vec<&'a Value> {
    let mut out: Vec<&Value> = Vec::new();
    let mut todo: Vec<&Value> = nodes.to_vec();
    while let Some(n) = todo.pop() {
        if out.len() >= MAX_EXPANDED {
            break;
        }
        if out.iter().any(|o| std::ptr::eq(*o, n)) {
            continue;
        }
        out.push(n);
        if let Some(target) = n
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|p| root.pointer(p))
        {
            todo.push(target);
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = n.get(key) {
                todo.extend(list.iter());
            }
        }
        for key in ["then", "else"] {
            if let Some(s) = n.get(key) {
                todo.push(s);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::declared_path;

    #[test]
    fn a_path_keeps_only_what_the_schema_declares() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string"},
            "stops": {"type": "array", "items": {"$ref": "#/$defs/stop"}},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"properties": {"n": {}}}]},
            "a/b": {"type": "string"},
            "opt": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"x": {}}}]}},
            "$defs": {"stop": {"type": "object", "properties": {"at": {"type": "integer"}}}}});
        let p = |ptr| declared_path(Some(&schema), ptr, 8);
        assert_eq!(p(""), "");
        assert_eq!(p("/city"), "/city");
        assert_eq!(p("/stops/3/at"), "/stops/*/at");
        assert_eq!(p("/stops/3/secret/deeper"), "/stops/*/?");
        assert_eq!(p("/pair/1/n"), "/pair/*/n");
        assert_eq!(p("/a~1b"), "/a~1b");
        assert_eq!(p("/opt/x"), "/opt/x");
        // The model's own keys never leave: an undeclared key, an index into no array.
        assert_eq!(p("/Paris is lovely"), "/?");
        assert_eq!(p("/town/0"), "/?");
        assert_eq!(p("/city/0"), "/city/?");
        assert_eq!(declared_path(None, "/city", 8), "/?");
        let deep = json!({"properties": {"a": {"$ref": "#"}}});
        assert_eq!(
            declared_path(Some(&deep), "/a/a/a/a/a/a/a/a/a/a", 8),
            "/a/a/a/a/a/a/a/a/…"
        );
        assert_eq!(declared_path(Some(&deep), "/a/a/a/a", 3), "/a/a/a/…");
    }

    #[test]
    fn a_long_pointer_and_a_wide_schema_stay_linear() {
        // A pointer of 100,000 segments stops at the depth; a schema of 100,000
        // branches expands at most 64 per level.
        let deep = json!({"properties": {"a": {"$ref": "#"}}});
        let long = "/a".repeat(100_000);
        assert_eq!(declared_path(Some(&deep), &long, 8).matches('/').count(), 9);
        let wide = |n: usize| {
            let branches: Vec<_> = (0..n)
                .map(|i| json!({"properties": {format!("k{i}"): {}}}))
                .collect();
            json!({"anyOf": branches})
        };
        let (small, large) = (wide(10_000), wide(100_000));
        // (A branch past the 64 expanded is not followed: its key stays undeclared.)
        assert_eq!(declared_path(Some(&large), "/k50000", 8), "/?");
        crate::work::assert_linear("declared_path, wide", &small, &large, |w: &Value| {
            declared_path(Some(w), "/k5000", 8)
        });
    }
}
