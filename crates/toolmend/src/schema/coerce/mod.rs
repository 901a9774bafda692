//! Lax mode: walk the arguments along the schema and apply the coercions the
//! [`Coercions`] switch on, recording each as a [`Fix`] (with its safety: safe, unsafe or
//! lossy).
//!
//! The walk never invents a value: a missing required field stays missing, no default is
//! added, and an enum value with no unique case-insensitive match is left for validation
//! to report.
//!
//! Each rule is a file named after its switch and a row of [`RULES`]; this file is the
//! walk that calls them, in a fixed order (which rule wins when two could apply is
//! behaviour, so the order is written here, once).

mod boolean_strings;
mod csv_split;
mod dates;
mod drop_unknown_keys;
mod enum_case;
mod json_strings;
pub(crate) mod json_text;
mod null_omitted;
mod numeric_strings;
mod rename_keys;
mod scalar_to_string;
mod unwrap_arguments;
mod wrap_in_array;

use std::cell::Cell;
use std::rc::Rc;

use serde_json::{Map, Value};

use super::compile::{
    ARR, Additional, BOOL, Flat, Node, OBJ, STR, escape, flatten, is_null_schema, push_escaped,
    value_mask,
};
use super::{Coercions, CompiledTool};
use crate::{Fix, FixKind, Issue};

/// Values nested deeper are left alone (the repair parser bounds depth too).
const MAX_DEPTH: usize = 64;

/// Most `anyOf`/`oneOf` branch tries nested on one value (a schema may recurse through
/// `$ref` without the value getting any deeper).
const MAX_HOPS: usize = 8;

/// Most schema positions one check visits (sub-walks for `anyOf` branches and key renames
/// included); past it the rest of the value is left as it is, for validation to report.
const MAX_STEPS: usize = 100_000;

/// Longest text shown on each side of a fix's detail.
const DETAIL_CHARS: usize = 40;

/// One coercion: its switch, the fixes it records, whether it runs by default.
#[derive(Debug)]
pub(crate) struct Rule {
    /// Its switch: a field of [`Coercions`], by the name Python's `coerce=` takes (and the
    /// name of the file that holds the rule).
    pub switch: &'static str,
    /// The fixes it records, by which a switch can be named too; each fix's id and safety
    /// are [`FixKind::id`] and [`FixKind::safety`].
    pub fixes: &'static [FixKind],
    /// On in [`Coercions::default`].
    pub default_on: bool,
    /// Its switch in a [`Coercions`].
    pub field: fn(&mut Coercions) -> &mut bool,
}

/// Every coercion, in [`Coercions::SWITCHES`]' order: the one table the switches' names,
/// defaults and fixes are read from.
pub(crate) const RULES: &[Rule] = &[
    Rule {
        switch: "numeric_strings",
        fixes: &[
            FixKind::StringToNumber,
            FixKind::StringToInteger,
            FixKind::FloatToInteger,
        ],
        default_on: true,
        field: |c| &mut c.numeric_strings,
    },
    Rule {
        switch: "boolean_strings",
        fixes: &[FixKind::StringToBoolean],
        default_on: true,
        field: |c| &mut c.boolean_strings,
    },
    Rule {
        switch: "scalar_to_string",
        fixes: &[FixKind::ScalarToString],
        default_on: true,
        field: |c| &mut c.scalar_to_string,
    },
    Rule {
        switch: "wrap_in_array",
        fixes: &[FixKind::WrappedInArray],
        default_on: true,
        field: |c| &mut c.wrap_in_array,
    },
    Rule {
        switch: "csv_split",
        fixes: &[FixKind::CsvSplit],
        default_on: true,
        field: |c| &mut c.csv_split,
    },
    Rule {
        switch: "enum_case",
        fixes: &[FixKind::EnumCaseFixed],
        default_on: true,
        field: |c| &mut c.enum_case,
    },
    Rule {
        switch: "rename_keys",
        fixes: &[
            FixKind::KeyRenamed,
            FixKind::KeyCaseFixed,
            FixKind::KeySpellingFixed,
            FixKind::KeyRenamedByTokens,
            FixKind::KeyRenamedByDescription,
            FixKind::KeyRenamedByStructure,
        ],
        default_on: true,
        field: |c| &mut c.rename_keys,
    },
    Rule {
        switch: "drop_unknown_keys",
        fixes: &[FixKind::UnknownKeyDropped],
        default_on: true,
        field: |c| &mut c.drop_unknown_keys,
    },
    Rule {
        switch: "json_strings",
        fixes: &[FixKind::JsonStringDecoded, FixKind::JsonTextEncoded],
        default_on: true,
        field: |c| &mut c.json_strings,
    },
    Rule {
        switch: "dates",
        fixes: &[FixKind::DateNormalized],
        default_on: true,
        field: |c| &mut c.dates,
    },
    Rule {
        switch: "null_omitted",
        fixes: &[FixKind::NullOmitted],
        default_on: true,
        field: |c| &mut c.null_omitted,
    },
    Rule {
        switch: "unwrap_arguments",
        fixes: &[FixKind::ArgumentsUnwrapped],
        default_on: true,
        field: |c| &mut c.unwrap_arguments,
    },
    // Not run by this walk: it makes several calls of one (`crate::mend`).
    Rule {
        switch: "split_merged_calls",
        fixes: &[FixKind::MergedCallSplit],
        default_on: true,
        field: |c| &mut c.split_merged_calls,
    },
];

/// The switches' names, in [`RULES`]' order ([`Coercions::SWITCHES`]).
pub(crate) const fn switches<const N: usize>() -> [&'static str; N] {
    assert!(
        N == RULES.len(),
        "Coercions::SWITCHES: a switch without a rule"
    );
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = RULES[i].switch;
        i += 1;
    }
    out
}

pub(crate) struct Walker<'t> {
    tool: &'t CompiledTool,
    opts: &'t Coercions,
    pub(crate) fixes: Vec<Fix>,
    /// Problems the walk found that validation cannot see (an unknown key an open schema
    /// accepts but gives two homes).
    pub(crate) issues: Vec<Issue>,
    /// How deep in the value the walk is.
    depth: usize,
    /// Branch tries nested on the current value.
    hops: usize,
    /// Steps left, shared with sub-walkers.
    steps: Rc<Cell<usize>>,
    /// Coerce the value itself only, not its members (used to test whether a value fits).
    shallow: bool,
    /// The members of the object being walked name a file whose format is not JSON (a
    /// sibling path's extension): its content is no JSON text.
    non_json_file: bool,
}

impl<'t> Walker<'t> {
    pub(crate) fn new(tool: &'t CompiledTool, opts: &'t Coercions) -> Self {
        Walker {
            tool,
            opts,
            fixes: Vec::new(),
            issues: Vec::new(),
            depth: 0,
            hops: 0,
            steps: Rc::new(Cell::new(MAX_STEPS)),
            shallow: false,
            non_json_file: false,
        }
    }

    fn sub(&self) -> Walker<'t> {
        Walker {
            tool: self.tool,
            opts: self.opts,
            fixes: Vec::new(),
            issues: Vec::new(),
            depth: self.depth,
            hops: self.hops + 1,
            steps: Rc::clone(&self.steps),
            shallow: self.shallow,
            non_json_file: self.non_json_file,
        }
    }

    fn root(&self) -> &'t Value {
        &self.tool.schema
    }

    fn fix(&mut self, kind: FixKind, path: &str, detail: String) {
        self.fixes.push(Fix::on(kind, path, detail));
    }

    /// Coerces the whole arguments value.
    pub(crate) fn run(&mut self, value: &mut Value) {
        let mut path = String::new();
        if self.opts.json_strings
            && let Some(decoded) = json_strings::decoded_arguments(value)
        {
            let detail = format!("{} -> {}", preview(value), preview(&decoded));
            *value = decoded;
            self.fix(FixKind::JsonStringDecoded, "", detail);
        }
        self.walk(value, Node::root(self.root()), &mut path);
    }

    fn walk(&mut self, value: &mut Value, node: Node<'t>, path: &mut String) {
        let left = self.steps.get();
        if self.depth >= MAX_DEPTH || self.hops > MAX_HOPS || left == 0 {
            return;
        }
        self.steps.set(left - 1);
        let flat = flatten(self.root(), node);
        self.walk_flat(value, &flat, path);
    }

    /// Walks a member of the current value (one level deeper).
    fn walk_member(&mut self, value: &mut Value, node: Node<'t>, path: &mut String) {
        let (depth, hops) = (self.depth, self.hops);
        self.depth += 1;
        self.hops = 0;
        self.walk(value, node, path);
        (self.depth, self.hops) = (depth, hops);
    }

    fn walk_flat(&mut self, value: &mut Value, flat: &Flat<'t>, path: &mut String) {
        for group in flat.branch_groups() {
            self.branches(value, &group, path);
        }
        if let Some(types) = flat.types() {
            self.coerce_type(value, types, flat, path);
        }
        if let Some(allowed) = flat.enum_values() {
            self.coerce_enum(value, allowed, path);
        } else if let Some(c) = flat.const_value() {
            self.coerce_enum(value, std::slice::from_ref(c), path);
        }
        if self.opts.dates
            && let Some(format) = flat.format()
            && let Some((kind, new)) = dates::normalized(format, value)
        {
            let detail = format!("{} -> {}", preview(value), preview(&new));
            *value = new;
            self.fix(kind, path, detail);
        }
        if self.shallow {
            return;
        }
        match value {
            Value::Object(map) => self.walk_object(map, flat, path),
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    if let Some(node) = flat.item(i) {
                        let len = path.len();
                        path.push('/');
                        path.push_str(&i.to_string());
                        self.walk_member(item, node, path);
                        path.truncate(len);
                    }
                }
            }
            _ => {}
        }
    }

    /// `anyOf`/`oneOf`: a null branch makes the value optional-nullable; otherwise each
    /// branch is tried and the coerced value that validates with the fewest fixes is kept.
    fn branches(&mut self, value: &mut Value, group: &[Node<'t>], path: &mut String) {
        let non_null: Vec<&Node<'t>> = group.iter().filter(|b| !is_null_schema(b.schema)).collect();
        if value.is_null() && non_null.len() < group.len() {
            return;
        }
        if let [only] = non_null.as_slice() {
            self.hops += 1;
            self.walk(value, **only, path);
            self.hops -= 1;
            return;
        }
        // Valid for a branch as it is: nothing to do.
        if non_null
            .iter()
            .any(|b| self.tool.branch_valid(**b, value) == Some(true))
        {
            return;
        }
        let mut best: Option<(Value, Vec<Fix>)> = None;
        for branch in non_null {
            let mut candidate = value.clone();
            let mut sub = self.sub();
            sub.walk(&mut candidate, *branch, path);
            let valid = self
                .tool
                .branch_valid(*branch, &candidate)
                .unwrap_or_else(|| loosely_fits(self.root(), &candidate, branch));
            if valid && best.as_ref().is_none_or(|(_, f)| sub.fixes.len() < f.len()) {
                let done = sub.fixes.is_empty();
                best = Some((candidate, sub.fixes));
                if done {
                    break;
                }
            }
        }
        if let Some((v, fixes)) = best {
            *value = v;
            self.fixes.extend(fixes);
        }
    }

    /// A value of a type the field does not take (or an integer field's float): the first
    /// rule that reads it as one the field takes.
    fn coerce_type(&mut self, value: &mut Value, types: u8, flat: &Flat<'t>, path: &str) {
        let o = self.opts;
        if value_mask(value) & types != 0 {
            // Allowed. A float with no fraction for an integer-only field becomes an integer.
            if o.numeric_strings
                && let Some(new) = numeric_strings::float_to_integer(value, types)
            {
                let detail = format!("{} -> {}", preview(value), preview(&new));
                *value = new;
                self.fix(FixKind::FloatToInteger, path, detail);
            }
            return;
        }
        let replacement: Option<(FixKind, Value)> = match &*value {
            Value::String(s) => self.coerce_string(s, types, flat),
            Value::Number(_) | Value::Bool(_) => {
                if types & STR != 0 && o.scalar_to_string {
                    scalar_to_string::from_scalar(value)
                } else if types & ARR != 0 && o.wrap_in_array {
                    self.wrapped(flat, value)
                } else {
                    None
                }
            }
            Value::Object(_) if types & ARR != 0 && o.wrap_in_array => self.wrapped(flat, value),
            Value::Object(_) | Value::Array(_)
                if types & STR != 0 && o.json_strings && !self.non_json_file =>
            {
                json_text::encoded(value, last_key(path), flat)
            }
            Value::Object(_) | Value::Array(_) | Value::Null => None,
        };
        if let Some((kind, new)) = replacement {
            let detail = format!("{} -> {}", preview(value), preview(&new));
            *value = new;
            self.fix(kind, path, detail);
        }
    }

    fn coerce_string(&self, s: &str, types: u8, flat: &Flat<'t>) -> Option<(FixKind, Value)> {
        let o = self.opts;
        let trimmed = s.trim();
        let looks_json = (trimmed.starts_with('{') && trimmed.ends_with('}'))
            || (trimmed.starts_with('[') && trimmed.ends_with(']'));
        if types & (OBJ | ARR) != 0 && looks_json {
            // Decoded, or left alone: never split or wrap text that is broken JSON.
            return o
                .json_strings
                .then(|| json_strings::decoded(s, types))
                .flatten();
        }
        if o.numeric_strings
            && let Some(r) = numeric_strings::from_string(trimmed, types)
        {
            return Some(r);
        }
        if types & BOOL != 0
            && o.boolean_strings
            && let Some(r) = boolean_strings::from_string(trimmed)
        {
            return Some(r);
        }
        if types & ARR != 0 && !trimmed.is_empty() {
            if o.csv_split
                && let Some(r) = self.csv_split(trimmed, flat)
            {
                return Some(r);
            }
            if o.wrap_in_array {
                return self.wrapped(flat, &Value::String(s.to_owned()));
            }
        }
        None
    }

    fn coerce_enum(&mut self, value: &mut Value, allowed: &'t [Value], path: &str) {
        if allowed.contains(value) {
            return;
        }
        let o = self.opts;
        let replacement: Option<(FixKind, &Value)> = match &*value {
            Value::String(s) => (if o.enum_case {
                enum_case::enum_member(s, allowed)
            } else {
                None
            })
            .or_else(|| {
                if o.numeric_strings {
                    numeric_strings::enum_member(s.trim(), allowed)
                } else {
                    None
                }
            }),
            Value::Number(_) | Value::Bool(_) if o.scalar_to_string => {
                scalar_to_string::enum_member(value, allowed)
            }
            _ => None,
        };
        if let Some((kind, new)) = replacement {
            let detail = format!("{} -> {}", preview(value), preview(new));
            *value = new.clone();
            self.fix(kind, path, detail);
        }
    }

    fn walk_object(&mut self, map: &mut Map<String, Value>, flat: &Flat<'t>, path: &mut String) {
        let props = flat.property_names();
        if path.is_empty() && self.opts.unwrap_arguments && !props.is_empty() {
            self.unwrap_arguments(map, &props);
        }
        let required = flat.required();

        if self.opts.null_omitted {
            self.omit_nulls(map, flat, &props, &required, path);
        }

        let unknown: Vec<String> = map
            .keys()
            .filter(|k| !props.contains(&k.as_str()))
            .cloned()
            .collect();
        if !unknown.is_empty() && !props.is_empty() && !flat.has_pattern_properties() {
            let mut remaining = unknown;
            if self.opts.rename_keys {
                remaining = self.rename_keys(map, flat, &props, remaining, path);
            }
            if matches!(flat.additional(), Additional::Forbidden) {
                if self.opts.drop_unknown_keys {
                    self.drop_unknown_keys(map, flat, &props, &required, remaining, path);
                }
            } else if !flat.declares_other_keys() {
                // Open only by saying nothing: a key no property takes would reach nothing
                // (a pydantic model ignores it), so it is an issue, never a silent loss; at
                // every depth (the fast path walks a valid call with nested values when the
                // schema has such an object below the root).
                self.stray_key_issues(map, flat, &props, &remaining, path);
            }
        }

        let additional = flat.additional();
        let outer = std::mem::replace(&mut self.non_json_file, json_text::names_non_json_file(map));
        for (k, v) in map.iter_mut() {
            let len = path.len();
            path.push('/');
            push_escaped(path, k);
            if props.contains(&k.as_str()) {
                for node in flat.property(k) {
                    self.walk_member(v, node, path);
                }
            } else if let Additional::Schema(node) = &additional {
                self.walk_member(v, *node, path);
            }
            path.truncate(len);
        }
        self.non_json_file = outer;
    }

    /// True when `value` fits (or can be coerced to fit) every one of `nodes`, judged by
    /// type, `enum` and `const` after coercion.
    fn fits(&self, value: &Value, nodes: &[Node<'t>]) -> bool {
        if nodes.is_empty() {
            return false;
        }
        let mut v = value.clone();
        let mut sub = self.sub();
        sub.shallow = true;
        let mut scratch = String::from("/_");
        for n in nodes {
            sub.walk(&mut v, *n, &mut scratch);
        }
        nodes.iter().all(|n| loosely_fits(self.root(), &v, n))
    }
}

/// Type, `enum` and `const` agree (nested values are not checked).
fn loosely_fits(root: &Value, v: &Value, node: &Node<'_>) -> bool {
    let flat = flatten(root, *node);
    if let Some(t) = flat.types()
        && value_mask(v) & t == 0
    {
        return false;
    }
    if let Some(e) = flat.enum_values()
        && !e.contains(v)
    {
        return false;
    }
    if let Some(c) = flat.const_value()
        && c != v
    {
        return false;
    }
    flat.branch_groups().iter().all(|group| {
        group.iter().any(|b| {
            let f = flatten(root, *b);
            f.types().is_none_or(|t| value_mask(v) & t != 0)
                && f.enum_values().is_none_or(|e| e.contains(v))
        })
    })
}

fn child_path(parent: &str, key: &str) -> String {
    format!("{parent}/{}", escape(key))
}

fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A short JSON rendering of a value for a fix's detail.
pub(crate) fn preview(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= DETAIL_CHARS {
        return s;
    }
    let mut out: String = s.chars().take(DETAIL_CHARS - 1).collect();
    out.push('…');
    out
}

/// The last member name of a JSON pointer (`/body` -> `body`; an array index as it is).
fn last_key(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}
