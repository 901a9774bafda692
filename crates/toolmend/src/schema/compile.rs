//! Compiling a tool schema, and reading it while walking a value.
//!
//! The validator is built once by `jsonschema` (draft from `$schema`, formats asserted, no
//! remote references). The coercion walk reads the schema `Value` itself: [`flatten`] gathers
//! the parts that apply together to one value (the schema, what its local `$ref` points to,
//! its `allOf` members) so that `properties`, `type`, `enum`, `format` … can be looked up
//! across them.

use jsonschema::{Draft, Validator, ValidatorMap};
use serde_json::{Map, Value};

use crate::Error;

/// The draft a schema asks for with `$schema`; 2020-12 when it names none we know.
pub(crate) fn draft_of(schema: &Value) -> Draft {
    let Some(uri) = schema.get("$schema").and_then(Value::as_str) else {
        return Draft::Draft202012;
    };
    if uri.contains("draft-07") || uri.contains("draft/7") {
        Draft::Draft7
    } else if uri.contains("draft-06") {
        Draft::Draft6
    } else if uri.contains("draft-04") {
        Draft::Draft4
    } else if uri.contains("2019-09") {
        Draft::Draft201909
    } else {
        Draft::Draft202012
    }
}

fn options(draft: Draft) -> jsonschema::ValidationOptions<'static> {
    jsonschema::options()
        .with_draft(draft)
        .should_validate_formats(true)
        .offline()
}

/// Builds the root validator.
pub(crate) fn build(tool: &str, schema: &Value, draft: Draft) -> Result<Validator, Error> {
    options(draft)
        .build(schema)
        .map_err(|e| Error::InvalidSchema {
            tool: tool.to_owned(),
            reason: e.to_string(),
        })
}

/// Builds validators for every sub-schema (used to test `anyOf`/`oneOf` branches).
pub(crate) fn build_map(schema: &Value, draft: Draft) -> Option<ValidatorMap> {
    options(draft).build_map(schema).ok()
}

/// JSON Schema's name for a type named as a programming language names it; `None` for a
/// name JSON Schema has or one not known here.
fn json_type_name(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "int" | "int8" | "int16" | "int32" | "int64" | "uint" | "uint8" | "uint16" | "uint32"
        | "uint64" | "long" | "short" | "i32" | "i64" | "u32" | "u64" => "integer",
        "float" | "double" | "decimal" | "float32" | "float64" | "f32" | "f64" => "number",
        "str" | "text" => "string",
        "bool" => "boolean",
        "list" | "tuple" | "set" | "vec" => "array",
        "dict" | "map" | "hash" => "object",
        "none" | "nil" => "null",
        _ => return None,
    })
}

/// `parameters` with every `type` that names a type as a programming language does
/// (`"int"`, `["str", "null"]`) renamed as JSON Schema names it; `None` when there is none
/// (the values of `enum`, `const`, `default` and `examples` are data, left as they are).
pub(crate) fn with_json_type_names(parameters: &Value) -> Option<Value> {
    fn walk(v: &mut Value, depth: usize, changed: &mut bool) {
        if depth > 64 {
            return;
        }
        match v {
            Value::Object(map) => {
                for (k, child) in map.iter_mut() {
                    match (k.as_str(), child) {
                        ("enum" | "const" | "default" | "examples", _) => {}
                        ("type", Value::String(t)) => {
                            if let Some(n) = json_type_name(t) {
                                *t = n.to_owned();
                                *changed = true;
                            }
                        }
                        ("type", Value::Array(ts)) => {
                            for t in ts.iter_mut() {
                                if let Value::String(s) = t
                                    && let Some(n) = json_type_name(s)
                                {
                                    *s = n.to_owned();
                                    *changed = true;
                                }
                            }
                        }
                        (_, child) => walk(child, depth + 1, changed),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|c| walk(c, depth + 1, changed)),
            _ => {}
        }
    }
    let mut named = parameters.clone();
    let mut changed = false;
    walk(&mut named, 0, &mut changed);
    changed.then_some(named)
}

/// The schema used when a tool declares no parameters: any object.
pub(crate) fn effective_schema(parameters: &Value) -> Value {
    match parameters {
        Value::Null => serde_json::json!({"type": "object"}),
        Value::Object(m) if m.is_empty() => serde_json::json!({"type": "object"}),
        other => other.clone(),
    }
}

/// True when the schema has an `anyOf`/`oneOf` with two or more non-null branches
/// somewhere, i.e. when branch validators may be needed.
pub(crate) fn needs_branch_validators(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.iter().any(|(k, v)| {
            if (k == "anyOf" || k == "oneOf")
                && let Some(branches) = v.as_array()
                && branches.iter().filter(|b| !is_null_schema(b)).count() >= 2
            {
                return true;
            }
            // Skip values that are data, not schemas.
            if matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                return false;
            }
            needs_branch_validators(v)
        }),
        Value::Array(a) => a.iter().any(needs_branch_validators),
        _ => false,
    }
}

/// True when some object schema below the root lists `properties` and says nothing of
/// other keys (a nested pydantic model's): a key it does not list would reach nothing.
/// A scan of the schema's JSON, used as a gate for the valid-call fast path: a false yes
/// costs one coercion walk, never a wrong answer.
pub(crate) fn has_silent_nested_object(schema: &Value) -> bool {
    fn silent(m: &serde_json::Map<String, Value>) -> bool {
        m.get("properties").is_some_and(Value::is_object)
            && ![
                "additionalProperties",
                "unevaluatedProperties",
                "patternProperties",
            ]
            .iter()
            .any(|kw| m.contains_key(*kw))
    }
    fn below(v: &Value) -> bool {
        match v {
            Value::Object(m) => silent(m) || children(m),
            Value::Array(a) => a.iter().any(below),
            _ => false,
        }
    }
    fn children(m: &serde_json::Map<String, Value>) -> bool {
        m.iter().any(|(k, v)| {
            // Values that are data, not schemas.
            !matches!(k.as_str(), "enum" | "const" | "default" | "examples") && below(v)
        })
    }
    schema.as_object().is_some_and(children)
}

/// `{"type": "null"}` (or `{"const": null}`, `{"enum": [null]}`).
pub(crate) fn is_null_schema(schema: &Value) -> bool {
    let Some(m) = schema.as_object() else {
        return false;
    };
    m.get("type").and_then(Value::as_str) == Some("null")
        || m.get("const").is_some_and(Value::is_null)
        || m.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.len() == 1 && e[0].is_null())
}

// ---- type masks ----

pub(crate) const NULL: u8 = 1;
pub(crate) const BOOL: u8 = 2;
pub(crate) const INT: u8 = 4;
pub(crate) const NUM: u8 = 8;
pub(crate) const STR: u8 = 16;
pub(crate) const ARR: u8 = 32;
pub(crate) const OBJ: u8 = 64;

fn type_bit(name: &str) -> u8 {
    match name {
        "null" => NULL,
        "boolean" => BOOL,
        "integer" => INT,
        "number" => NUM,
        "string" => STR,
        "array" => ARR,
        "object" => OBJ,
        _ => 0,
    }
}

/// The type bits a value has (an integral number is both integer and number).
pub(crate) fn value_mask(v: &Value) -> u8 {
    match v {
        Value::Null => NULL,
        Value::Bool(_) => BOOL,
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                INT | NUM
            } else {
                NUM
            }
        }
        Value::String(_) => STR,
        Value::Array(_) => ARR,
        Value::Object(_) => OBJ,
    }
}

/// `integer or string` for a mask.
pub(crate) fn mask_names(mask: u8) -> String {
    let names = [
        (STR, "string"),
        (INT, "integer"),
        (NUM, "number"),
        (BOOL, "boolean"),
        (ARR, "array"),
        (OBJ, "object"),
        (NULL, "null"),
    ];
    let mut out = Vec::new();
    for (bit, name) in names {
        if mask & bit != 0 && !(bit == INT && mask & NUM != 0) {
            out.push(name);
        }
    }
    out.join(" or ")
}

// ---- walking the schema ----

/// A sub-schema of the tool's schema document. Positions are told apart by address: every
/// sub-schema is its own `Value` inside the document, which is never changed after compile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'s> {
    pub schema: &'s Value,
}

impl<'s> Node<'s> {
    pub(crate) fn root(schema: &'s Value) -> Self {
        Node { schema }
    }

    fn child(self, schema: &'s Value) -> Node<'s> {
        Node { schema }
    }

    /// True when both are the same position in the document.
    pub(crate) fn same(self, other: Node<'_>) -> bool {
        std::ptr::eq(self.schema, other.schema)
    }
}

/// The JSON Pointer of every `anyOf`/`oneOf` branch, by the branch's address (to find its
/// validator in a `jsonschema::ValidatorMap`, keyed `#<pointer>`).
pub(crate) fn branch_locations(schema: &Value) -> std::collections::HashMap<usize, String> {
    fn visit(v: &Value, pointer: &mut String, out: &mut std::collections::HashMap<usize, String>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let len = pointer.len();
                    pointer.push('/');
                    push_escaped(pointer, k);
                    if (k == "anyOf" || k == "oneOf")
                        && let Value::Array(branches) = child
                    {
                        for (i, b) in branches.iter().enumerate() {
                            out.insert(std::ptr::from_ref(b) as usize, format!("#{pointer}/{i}"));
                        }
                    }
                    if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                        visit(child, pointer, out);
                    }
                    pointer.truncate(len);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    visit(child, pointer, out);
                    pointer.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = std::collections::HashMap::new();
    visit(schema, &mut String::new(), &mut out);
    out
}

/// Appends a JSON Pointer segment, escaped.
pub(crate) fn push_escaped(out: &mut String, segment: &str) {
    if !segment.contains(['~', '/']) {
        out.push_str(segment);
        return;
    }
    for c in segment.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// A JSON Pointer segment, escaped.
pub(crate) fn escape(segment: &str) -> String {
    let mut s = String::with_capacity(segment.len());
    push_escaped(&mut s, segment);
    s
}

/// A JSON Pointer segment, unescaped (`~1` is `/`, `~0` is `~`, in that order, RFC 6901
/// §4); borrowed when it holds no `~`.
pub(crate) fn unescape(segment: &str) -> std::borrow::Cow<'_, str> {
    if segment.contains('~') {
        segment.replace("~1", "/").replace("~0", "~").into()
    } else {
        segment.into()
    }
}

/// What `additionalProperties` says.
#[derive(Debug, Clone)]
pub(crate) enum Additional<'s> {
    /// Absent or `true`.
    Allowed,
    /// `false`.
    Forbidden,
    /// A schema for the other keys.
    Schema(Node<'s>),
}

/// The keywords the walk reads, picked out of a schema object in one pass (cheaper than a
/// hashed lookup per keyword per visit).
const KEYWORDS: [&str; 18] = [
    "type",
    "enum",
    "const",
    "format",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "unevaluatedProperties",
    "patternProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "anyOf",
    "oneOf",
    "$ref",
    "allOf",
    "contentMediaType",
];

/// A schema object's keywords (see [`KEYWORDS`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Keywords<'s> {
    values: [Option<&'s Value>; KEYWORDS.len()],
}

/// The index of `keyword` in [`KEYWORDS`] (a `match`: no string compared in vain, and a
/// constant once inlined for a literal).
#[inline]
fn keyword_index(keyword: &str) -> Option<usize> {
    Some(match keyword {
        "type" => 0,
        "enum" => 1,
        "const" => 2,
        "format" => 3,
        "description" => 4,
        "properties" => 5,
        "required" => 6,
        "additionalProperties" => 7,
        "unevaluatedProperties" => 8,
        "patternProperties" => 9,
        "items" => 10,
        "prefixItems" => 11,
        "additionalItems" => 12,
        "anyOf" => 13,
        "oneOf" => 14,
        "$ref" => 15,
        "allOf" => 16,
        "contentMediaType" => 17,
        _ => return None,
    })
}

impl<'s> Keywords<'s> {
    fn of(m: &'s Map<String, Value>) -> Self {
        let mut values = [None; KEYWORDS.len()];
        for (k, v) in m {
            if let Some(i) = keyword_index(k) {
                values[i] = Some(v);
            }
        }
        Keywords { values }
    }

    /// The keyword's value; `None` if absent or not one of [`KEYWORDS`].
    #[inline]
    pub(crate) fn get(&self, keyword: &str) -> Option<&'s Value> {
        keyword_index(keyword).and_then(|i| self.values[i])
    }
}

/// The conjunctive parts of one schema position.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flat<'s> {
    pub parts: Vec<(Node<'s>, Keywords<'s>)>,
}

const MAX_FLATTEN: usize = 32;

/// Gathers `node`, the targets of its local `$ref`s and its `allOf` members.
pub(crate) fn flatten<'s>(root: &'s Value, node: Node<'s>) -> Flat<'s> {
    let mut flat = Flat::default();
    collect(root, node, &mut flat.parts);
    flat
}

fn collect<'s>(root: &'s Value, node: Node<'s>, out: &mut Vec<(Node<'s>, Keywords<'s>)>) {
    if out.len() >= MAX_FLATTEN || out.iter().any(|(p, _)| p.same(node)) {
        return;
    }
    let Some(obj) = node.schema.as_object() else {
        return;
    };
    let kw = Keywords::of(obj);
    let reference = kw.get("$ref").and_then(Value::as_str);
    let all_of = kw.get("allOf").and_then(Value::as_array);
    out.push((node, kw));
    if let Some(target) = reference.and_then(|r| resolve(root, r)) {
        collect(root, target, out);
    }
    if let Some(all) = all_of {
        for s in all {
            collect(root, node.child(s), out);
        }
    }
}

/// Resolves a local `$ref` (`#`, `#/$defs/x`, `#/definitions/x`); `None` for anything else.
pub(crate) fn resolve<'s>(root: &'s Value, reference: &str) -> Option<Node<'s>> {
    let fragment = reference.strip_prefix('#')?;
    let pointer = percent_decode(fragment)?;
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return None; // an anchor; not followed
    }
    root.pointer(&pointer).map(Node::root)
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `map.get(key)`; a scan for small maps (keys are unique, so the same entry), cheaper than
/// hashing the key.
fn lookup<'m>(map: &'m Map<String, Value>, key: &str) -> Option<&'m Value> {
    if map.len() <= 12 {
        map.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        map.get(key)
    }
}

impl<'s> Flat<'s> {
    fn objects(&self) -> impl Iterator<Item = (&Node<'s>, &Keywords<'s>)> + '_ {
        self.parts.iter().map(|(p, kw)| (p, kw))
    }

    /// The allowed types (intersection of every `type`), `None` when no part says.
    pub(crate) fn types(&self) -> Option<u8> {
        let mut mask: Option<u8> = None;
        for (_, m) in self.objects() {
            let bits = match m.get("type") {
                Some(Value::String(t)) => type_bit(t),
                Some(Value::Array(ts)) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .fold(0, |acc, t| acc | type_bit(t)),
                _ => continue,
            };
            // An integer schema also accepts what a number schema does not; keep it simple.
            mask = Some(mask.map_or(bits, |m| {
                let both = m & bits;
                if both == 0 && (m | bits) & (INT | NUM) == (INT | NUM) {
                    INT
                } else {
                    both
                }
            }));
        }
        mask
    }

    /// The first `enum` list.
    pub(crate) fn enum_values(&self) -> Option<&'s [Value]> {
        self.objects()
            .find_map(|(_, m)| m.get("enum").and_then(Value::as_array))
            .map(Vec::as_slice)
    }

    /// The first `const`.
    pub(crate) fn const_value(&self) -> Option<&'s Value> {
        self.objects().find_map(|(_, m)| m.get("const"))
    }

    /// The first `format`.
    pub(crate) fn format(&self) -> Option<&'s str> {
        self.objects()
            .find_map(|(_, m)| m.get("format").and_then(Value::as_str))
    }

    /// The first `contentMediaType` (`application/json` for a string holding JSON text).
    pub(crate) fn content_media_type(&self) -> Option<&'s str> {
        self.objects()
            .find_map(|(_, m)| m.get("contentMediaType").and_then(Value::as_str))
    }

    /// The first `description`.
    pub(crate) fn description(&self) -> Option<&'s str> {
        self.objects()
            .find_map(|(_, m)| m.get("description").and_then(Value::as_str))
    }

    /// True when `null` is acceptable (no type constraint, a `null` type, a `null` enum
    /// member, or a null branch in `anyOf`/`oneOf`).
    pub(crate) fn allows_null(&self) -> bool {
        if let Some(e) = self.enum_values() {
            return e.iter().any(Value::is_null);
        }
        if let Some(c) = self.const_value() {
            return c.is_null();
        }
        if let Some(t) = self.types() {
            return t & NULL != 0;
        }
        let groups = self.branch_groups();
        if !groups.is_empty() {
            return groups
                .iter()
                .all(|g| g.iter().any(|b| is_null_schema(b.schema)));
        }
        true
    }

    /// Every property name, in schema order, without repeats.
    pub(crate) fn property_names(&self) -> Vec<&'s str> {
        let mut out: Vec<&'s str> = Vec::new();
        for (_, m) in self.objects() {
            if let Some(props) = m.get("properties").and_then(Value::as_object) {
                for k in props.keys() {
                    if !out.contains(&k.as_str()) {
                        out.push(k.as_str());
                    }
                }
            }
        }
        out
    }

    /// The schemas of property `name` (one per part that lists it).
    pub(crate) fn property(&self, name: &str) -> Vec<Node<'s>> {
        let mut out = Vec::new();
        for (p, m) in self.objects() {
            if let Some(s) = m
                .get("properties")
                .and_then(Value::as_object)
                .and_then(|props| lookup(props, name))
            {
                out.push(p.child(s));
            }
        }
        out
    }

    /// Every `required` name, without repeats.
    pub(crate) fn required(&self) -> Vec<&'s str> {
        let mut out: Vec<&'s str> = Vec::new();
        for (_, m) in self.objects() {
            if let Some(req) = m.get("required").and_then(Value::as_array) {
                for r in req.iter().filter_map(Value::as_str) {
                    if !out.contains(&r) {
                        out.push(r);
                    }
                }
            }
        }
        out
    }

    /// True when some part has `patternProperties` (unknown keys may then be allowed).
    pub(crate) fn has_pattern_properties(&self) -> bool {
        self.objects()
            .any(|(_, m)| m.get("patternProperties").is_some())
    }

    /// Other keys are allowed because the schema says so (`additionalProperties` or
    /// `unevaluatedProperties` as `true` or a schema), not merely because it says nothing.
    pub(crate) fn declares_other_keys(&self) -> bool {
        self.objects().any(|(_, m)| {
            ["additionalProperties", "unevaluatedProperties"]
                .iter()
                .any(|kw| matches!(m.get(kw), Some(Value::Bool(true) | Value::Object(_))))
        })
    }

    /// What `additionalProperties` (or `unevaluatedProperties`) says about other keys.
    pub(crate) fn additional(&self) -> Additional<'s> {
        let mut result = Additional::Allowed;
        for (p, m) in self.objects() {
            for kw in ["additionalProperties", "unevaluatedProperties"] {
                match m.get(kw) {
                    Some(Value::Bool(false)) => return Additional::Forbidden,
                    Some(s @ Value::Object(_)) if matches!(result, Additional::Allowed) => {
                        result = Additional::Schema(p.child(s));
                    }
                    _ => {}
                }
            }
        }
        result
    }

    /// The schema for array element `index` (`prefixItems`, draft-7 tuple `items`, `items`).
    pub(crate) fn item(&self, index: usize) -> Option<Node<'s>> {
        for (p, m) in self.objects() {
            if let Some(prefix) = m.get("prefixItems").and_then(Value::as_array) {
                if let Some(s) = prefix.get(index) {
                    return Some(p.child(s));
                }
                if let Some(s) = m.get("items").filter(|i| i.is_object()) {
                    return Some(p.child(s));
                }
                continue;
            }
            match m.get("items") {
                Some(Value::Array(tuple)) => {
                    if let Some(s) = tuple.get(index) {
                        return Some(p.child(s));
                    }
                    if let Some(s) = m.get("additionalItems").filter(|i| i.is_object()) {
                        return Some(p.child(s));
                    }
                }
                Some(s @ Value::Object(_)) => return Some(p.child(s)),
                _ => {}
            }
        }
        None
    }

    /// The `anyOf`/`oneOf` groups, each a list of branches.
    pub(crate) fn branch_groups(&self) -> Vec<Vec<Node<'s>>> {
        let mut out = Vec::new();
        for (p, m) in self.objects() {
            for kw in ["anyOf", "oneOf"] {
                if let Some(branches) = m.get(kw).and_then(Value::as_array) {
                    out.push(branches.iter().map(|b| p.child(b)).collect());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_indexes_match_the_list() {
        for (i, kw) in KEYWORDS.iter().enumerate() {
            assert_eq!(keyword_index(kw), Some(i), "{kw}");
        }
        assert_eq!(keyword_index("minimum"), None);
    }

    #[test]
    fn programming_type_names_are_renamed_and_data_is_not() {
        let named = with_json_type_names(&serde_json::json!({
            "type": "object",
            "properties": {
                "n": {"type": "int"},
                "tags": {"type": "list", "items": {"type": "str"}},
                "maybe": {"type": ["float", "None"]},
                "kind": {"type": "string", "enum": ["int", "list"], "default": "int"},
                "type": {"type": "bool"}}}))
        .unwrap();
        assert_eq!(
            named,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "n": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "maybe": {"type": ["number", "null"]},
                    "kind": {"type": "string", "enum": ["int", "list"], "default": "int"},
                    "type": {"type": "boolean"}}})
        );
        assert_eq!(
            with_json_type_names(&serde_json::json!({"type": "object"})),
            None
        );
    }

    #[test]
    fn a_pointer_segment_unescapes_what_escape_wrote() {
        // `~01` is `~1` (RFC 6901 §4: `~1` first, then `~0`), not `/`.
        for key in ["a/b", "~1", "~0", "a~b/c", "~01", "plain", ""] {
            assert_eq!(unescape(&escape(key)), key);
        }
        assert_eq!(unescape("~01"), "~1");
        assert!(matches!(unescape("plain"), std::borrow::Cow::Borrowed(_)));
    }
}
