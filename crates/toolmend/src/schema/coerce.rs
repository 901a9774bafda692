//! Lax mode: walk the arguments along the schema and apply the coercions the
//! [`Coercions`] switch on, recording each as a [`Fix`] (with its safety: safe, unsafe or
//! lossy).
//!
//! The walk never invents a value: a missing required field stays missing, no default is
//! added, and an enum value with no unique case-insensitive match is left for validation
//! to report.

use std::cell::Cell;
use std::rc::Rc;

use serde_json::{Map, Number, Value};

use super::compile::{
    ARR, Additional, BOOL, Flat, INT, NULL, NUM, Node, OBJ, STR, escape, flatten, is_null_schema,
    push_escaped, value_mask,
};
use super::dates::{is_iso_date, is_rfc3339, normalize_date, normalize_date_time};
use super::suggest::{
    Candidate, CandidateData, Key, Via, contenders, key_suggestion, plan_renames,
};
use super::{Coercions, CompiledTool};
use crate::{Fix, FixKind, Issue, IssueKind};

/// Keys a model nests the arguments under (besides the tool's own name).
const WRAPPER_KEYS: &[&str] = &[
    "input",
    "inputs",
    "arguments",
    "args",
    "parameters",
    "params",
    "properties",
    "kwargs",
    "tool_input",
];

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
            && let Value::String(s) = value
            && let Some(decoded @ Value::Object(_)) = decode_json(s)
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
            && let (Some(format), Value::String(s)) = (flat.format(), &*value)
        {
            let normalized = match format {
                "date" if !is_iso_date(s) => normalize_date(s),
                "date-time" if !is_rfc3339(s) => normalize_date_time(s),
                _ => None,
            };
            if let Some(n) = normalized {
                let new = Value::String(n);
                let detail = format!("{} -> {}", preview(value), preview(&new));
                *value = new;
                self.fix(FixKind::DateNormalized, path, detail);
            }
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

    fn coerce_type(&mut self, value: &mut Value, types: u8, flat: &Flat<'t>, path: &str) {
        let o = self.opts;
        if value_mask(value) & types != 0 {
            // Allowed. A float with no fraction for an integer-only field becomes an integer.
            if o.numeric_strings
                && types & INT != 0
                && types & NUM == 0
                && let Value::Number(n) = value
                && n.is_f64()
                && let Some(i) = n.as_f64().and_then(f64_to_i64)
            {
                let new = Value::from(i);
                let detail = format!("{} -> {}", preview(value), preview(&new));
                *value = new;
                self.fix(FixKind::FloatToInteger, path, detail);
            }
            return;
        }
        let replacement: Option<(FixKind, Value)> = match &*value {
            Value::String(s) => self.coerce_string(s, types, flat),
            Value::Number(n) => {
                if types & STR != 0 && o.scalar_to_string {
                    Some((FixKind::ScalarToString, Value::String(n.to_string())))
                } else if types & ARR != 0 && o.wrap_in_array && self.item_fits(flat, value) {
                    Some((FixKind::WrappedInArray, Value::Array(vec![value.clone()])))
                } else {
                    None
                }
            }
            Value::Bool(b) => {
                if types & STR != 0 && o.scalar_to_string {
                    Some((FixKind::ScalarToString, Value::String(b.to_string())))
                } else if types & ARR != 0 && o.wrap_in_array && self.item_fits(flat, value) {
                    Some((FixKind::WrappedInArray, Value::Array(vec![value.clone()])))
                } else {
                    None
                }
            }
            Value::Object(_) => {
                (types & ARR != 0 && o.wrap_in_array && self.item_fits(flat, value))
                    .then(|| (FixKind::WrappedInArray, Value::Array(vec![value.clone()])))
            }
            Value::Array(_) | Value::Null => None,
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
                .then(|| decode_json(s))
                .flatten()
                .filter(|d| value_mask(d) & types & (OBJ | ARR) != 0)
                .map(|d| (FixKind::JsonStringDecoded, d));
        }
        if o.numeric_strings {
            if types & INT != 0 && types & NUM == 0 {
                if let Some(i) = parse_integer(trimmed) {
                    return Some((FixKind::StringToInteger, i));
                }
            } else if types & NUM != 0
                && let Some(n) = parse_number(trimmed)
            {
                return Some((FixKind::StringToNumber, n));
            }
        }
        if types & BOOL != 0
            && o.boolean_strings
            && let Some(b) = parse_bool(trimmed)
        {
            return Some((FixKind::StringToBoolean, Value::Bool(b)));
        }
        if types & ARR != 0 && !trimmed.is_empty() {
            let strings = flat.item(0).is_some_and(|n| {
                let f = flatten(self.root(), n);
                f.types()
                    .is_some_and(|t| t & STR != 0 && t & !(STR | NULL) == 0)
                    || f.enum_values()
                        .is_some_and(|e| e.iter().all(Value::is_string))
            });
            if strings && o.csv_split && trimmed.contains(',') {
                let parts: Vec<Value> = trimmed
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| Value::String(p.to_owned()))
                    .collect();
                if parts.len() >= 2 {
                    return Some((FixKind::CsvSplit, Value::Array(parts)));
                }
                if let [one] = parts.as_slice()
                    && o.wrap_in_array
                    && self.item_fits(flat, one)
                {
                    return Some((FixKind::WrappedInArray, Value::Array(vec![one.clone()])));
                }
            }
            let whole = Value::String(s.to_owned());
            if o.wrap_in_array && self.item_fits(flat, &whole) {
                return Some((FixKind::WrappedInArray, Value::Array(vec![whole])));
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
            Value::String(s) => {
                let t = s.trim();
                let by_case = || {
                    let n = enum_norm(s);
                    let mut hits = allowed
                        .iter()
                        .filter(|a| a.as_str().is_some_and(|x| enum_norm(x) == n));
                    match (hits.next(), hits.next()) {
                        (Some(one), None) if !n.is_empty() => Some((FixKind::EnumCaseFixed, one)),
                        _ => None,
                    }
                };
                let by_number = || {
                    allowed
                        .iter()
                        .find(|a| {
                            a.is_number()
                                && parse_number(t).is_some_and(|n| n.as_f64() == a.as_f64())
                        })
                        .map(|a| {
                            let kind = if a.is_f64() {
                                FixKind::StringToNumber
                            } else {
                                FixKind::StringToInteger
                            };
                            (kind, a)
                        })
                };
                (if o.enum_case { by_case() } else { None })
                    .or_else(|| if o.numeric_strings { by_number() } else { None })
            }
            Value::Number(_) | Value::Bool(_) if o.scalar_to_string => {
                let text = value.to_string();
                allowed
                    .iter()
                    .find(|a| a.as_str() == Some(text.as_str()))
                    .map(|a| (FixKind::ScalarToString, a))
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
            let mut omit: Vec<String> = Vec::new();
            for (k, v) in map.iter() {
                if v.is_null()
                    && !required.contains(&k.as_str())
                    && props.contains(&k.as_str())
                    && flat
                        .property(k)
                        .into_iter()
                        .any(|n| !flatten(self.root(), n).allows_null())
                {
                    omit.push(k.clone());
                }
            }
            if !omit.is_empty() {
                map.retain(|k, _| !omit.contains(k));
                for k in omit {
                    let p = child_path(path, &k);
                    self.fix(
                        FixKind::NullOmitted,
                        &p,
                        format!("{} -> omitted", quote(&k)),
                    );
                }
            }
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
            if matches!(flat.additional(), Additional::Forbidden) && self.opts.drop_unknown_keys {
                let missing: Vec<&str> = required
                    .iter()
                    .copied()
                    .filter(|r| !map.contains_key(*r))
                    .collect();
                let drop: Vec<String> = remaining
                    .into_iter()
                    .filter(|k| {
                        // Keep a key that could have been a missing required value, or that
                        // some free property could be (by name or description): the agent
                        // gets "unknown key" with the candidates, not a silent loss.
                        let v = &map[k.as_str()];
                        !missing.iter().any(|r| self.fits(v, &flat.property(r)))
                            && !self.has_home(map, flat, &props, k)
                    })
                    .collect();
                if !drop.is_empty() {
                    map.retain(|k, _| !drop.contains(k));
                    for k in drop {
                        let p = child_path(path, &k);
                        self.fix(
                            FixKind::UnknownKeyDropped,
                            &p,
                            format!("{} dropped", quote(&k)),
                        );
                    }
                }
            }
        }

        let additional = flat.additional();
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
    }

    /// `{"input": {...}}`, `{"<tool name>": {...}}` … -> `{...}` (root only).
    fn unwrap_arguments(&mut self, map: &mut Map<String, Value>, props: &[&str]) {
        for _ in 0..3 {
            if map.len() != 1 {
                return;
            }
            let Some((key, inner)) = map.iter().next() else {
                return;
            };
            let wrapper = WRAPPER_KEYS.contains(&key.to_ascii_lowercase().as_str())
                || key.eq_ignore_ascii_case(self.tool.name());
            if !wrapper || props.contains(&key.as_str()) {
                return;
            }
            let inner = match inner {
                Value::Object(m) => m.clone(),
                Value::String(s) => match decode_json(s) {
                    Some(Value::Object(m)) => m,
                    _ => return,
                },
                _ => return,
            };
            // The inner object must look like these arguments (or be empty).
            let names: Vec<Key> = props.iter().map(|p| Key::new(p)).collect();
            let looks_right = inner.is_empty()
                || inner.keys().any(|k| {
                    let key = Key::new(k);
                    names.iter().any(|n| n.same_key(&key))
                });
            if !looks_right {
                return;
            }
            let detail = format!("{} unwrapped", quote(key));
            *map = inner;
            self.fix(FixKind::ArgumentsUnwrapped, "", detail);
        }
    }

    /// Renames unknown keys onto schema keys; returns the keys still unknown.
    fn rename_keys(
        &mut self,
        map: &mut Map<String, Value>,
        flat: &Flat<'t>,
        props: &[&'t str],
        unknown: Vec<String>,
        path: &str,
    ) -> Vec<String> {
        // `flat` is the flattening of its first part's node, so that node's address names
        // these properties (rename_keys only runs with properties, so there is a part).
        let data = match flat.parts.first() {
            Some((node, _)) => self.tool.candidate_data(node.schema, true, || {
                props
                    .iter()
                    .map(|p| {
                        let desc = flat
                            .property(p)
                            .into_iter()
                            .find_map(|n| flatten(self.root(), n).description());
                        CandidateData::new(p, desc)
                    })
                    .collect()
            }),
            None => return unknown,
        };
        let cands: Vec<Candidate<'_>> = props
            .iter()
            .zip(data.iter())
            .map(|(p, d)| Candidate::borrowed(p, d))
            .collect();
        let available: Vec<bool> = props.iter().map(|p| !map.contains_key(*p)).collect();
        let keys: Vec<&str> = unknown.iter().map(String::as_str).collect();
        let mut renames = plan_renames(&keys, &cands, &available, |u, c| {
            self.fits(&map[keys[u]], &flat.property(props[c]))
        });
        // The structural reading: one required key missing, one unknown key left beside it
        // (chatter aside), its value fitting: the schema leaves no other home for it.
        let left: Vec<usize> = (0..keys.len())
            .filter(|u| !renames.iter().any(|(r, _, _)| r == u))
            .filter(|&u| !Key::new(keys[u]).is_chatter())
            .collect();
        // A key too short to name anything (`xyz`, `v`) is no evidence: the agent or the
        // corrector says what it meant.
        let named = |u: usize| keys[u].chars().filter(char::is_ascii_alphabetic).count() >= 4;
        let required = flat.required();
        let missing: Vec<usize> = (0..props.len())
            .filter(|&c| available[c] && required.contains(&props[c]))
            .filter(|c| !renames.iter().any(|(_, r, _)| r == c))
            .collect();
        // The value must fit as sent: a reading this weak takes no coercion on top.
        if let ([u], [c]) = (left.as_slice(), missing.as_slice())
            && named(*u)
            && let nodes = flat.property(props[*c])
            && !nodes.is_empty()
            && nodes
                .iter()
                .all(|n| loosely_fits(self.root(), &map[keys[*u]], n))
        {
            renames.push((*u, *c, Via::Structure));
        }
        if self.opts_open_ambiguity(flat) {
            let taken: Vec<usize> = renames.iter().map(|(_, c, _)| *c).collect();
            for &u in &left {
                if renames.iter().any(|(r, _, _)| *r == u) {
                    continue;
                }
                let tied = contenders(&Key::new(keys[u]), &cands, |c| {
                    available[c] && !taken.contains(&c)
                });
                if tied.len() >= 2 {
                    let names: Vec<Value> = tied
                        .iter()
                        .map(|&c| Value::String(props[c].to_owned()))
                        .collect();
                    let suggestion = key_suggestion(keys[u], &cands).unwrap_or_default();
                    self.issues.push(
                        Issue::new(
                            IssueKind::UnknownKey,
                            child_path(path, keys[u]),
                            format!(
                                "\"{}\" is not a known key, and the schema has more than one \
                                 key it could be",
                                keys[u]
                            ),
                        )
                        .got(map[keys[u]].clone())
                        .allowed(names)
                        .suggestion(suggestion),
                    );
                }
            }
        }
        if renames.is_empty() {
            return unknown;
        }
        let mut new_names: Vec<(&str, &str, Via)> = Vec::new();
        for &(u, c, v) in &renames {
            new_names.push((keys[u], props[c], v));
        }
        let old = std::mem::take(map);
        for (k, v) in old {
            match new_names.iter().find(|(from, _, _)| *from == k) {
                Some((_, to, _)) => {
                    map.insert((*to).to_owned(), v);
                }
                None => {
                    map.insert(k, v);
                }
            }
        }
        for (from, to, via) in &new_names {
            let p = child_path(path, to);
            let kind = match via {
                Via::Case => FixKind::KeyCaseFixed,
                Via::Spelling => FixKind::KeySpellingFixed,
                Via::Alias => FixKind::KeyRenamed,
                Via::Tokens => FixKind::KeyRenamedByTokens,
                Via::Description => FixKind::KeyRenamedByDescription,
                Via::Structure => FixKind::KeyRenamedByStructure,
            };
            self.fix(kind, &p, format!("{} -> {}", quote(from), quote(to)));
        }
        unknown
            .iter()
            .filter(|k| !new_names.iter().any(|(from, _, _)| from == k))
            .cloned()
            .collect()
    }

    /// An open object (other keys allowed) reports an unknown key the schema gives two
    /// homes (validation would accept it, and the value would reach no property); a
    /// closed one leaves that to validation's `unknown_key` issue.
    fn opts_open_ambiguity(&self, flat: &Flat<'t>) -> bool {
        !matches!(flat.additional(), Additional::Forbidden)
    }

    /// True when some property not present in `map` could be `key`'s home (a reading of
    /// any strength): the key is not dropped, the agent is told instead.
    fn has_home(
        &self,
        map: &Map<String, Value>,
        flat: &Flat<'t>,
        props: &[&'t str],
        key: &str,
    ) -> bool {
        let k = Key::new(key);
        if k.is_chatter() {
            return false;
        }
        let free: Vec<Candidate<'_>> = props
            .iter()
            .filter(|p| !map.contains_key(**p))
            .map(|p| {
                let desc = flat
                    .property(p)
                    .into_iter()
                    .find_map(|n| flatten(self.root(), n).description());
                Candidate::new(p, desc)
            })
            .collect();
        !contenders(&k, &free, |_| true).is_empty()
    }

    /// True when `value` could be the first element of the array `flat` describes.
    fn item_fits(&self, flat: &Flat<'t>, value: &Value) -> bool {
        match flat.item(0) {
            Some(node) => self.fits(value, &[node]),
            None => true,
        }
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

/// Lower case without `-`, `_` or spaces: `"No-Preference"` ~ `"no_preference"`.
fn enum_norm(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// A JSON object or array held in a string.
fn decode_json(s: &str) -> Option<Value> {
    let t = s.trim();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<Value>(t)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
}

/// `[+-]digits[.digits][e[+-]digits]` (also `.5` and `5.`); no hex, no separators.
fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut digits = i - int_start;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        digits += i - frac_start;
    }
    if digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

fn f64_to_i64(f: f64) -> Option<i64> {
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15).then_some(f as i64)
}

/// `"5"`, `" 12 "`, `"5.0"`, `"1e3"` -> an integer; not `"5.5"` or `"5 apples"`.
fn parse_integer(s: &str) -> Option<Value> {
    if !is_decimal(s) {
        return None;
    }
    let plain = s.strip_prefix('+').unwrap_or(s);
    if let Ok(i) = plain.parse::<i64>() {
        return Some(Value::from(i));
    }
    if let Ok(u) = plain.parse::<u64>() {
        return Some(Value::from(u));
    }
    plain
        .parse::<f64>()
        .ok()
        .and_then(f64_to_i64)
        .map(Value::from)
}

/// `"21.5"`, `"1200"`, `"1e3"` -> a number (an integer when written as one).
fn parse_number(s: &str) -> Option<Value> {
    if !is_decimal(s) {
        return None;
    }
    let plain = s.strip_prefix('+').unwrap_or(s);
    if let Ok(i) = plain.parse::<i64>() {
        return Some(Value::from(i));
    }
    plain
        .parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Some(true),
        "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_integer("5"), Some(Value::from(5)));
        assert_eq!(parse_integer("5.0"), Some(Value::from(5)));
        assert_eq!(parse_integer("1e3"), Some(Value::from(1000)));
        assert_eq!(parse_integer("+7"), Some(Value::from(7)));
        assert_eq!(parse_integer("5.5"), None);
        assert_eq!(parse_integer("5 apples"), None);
        assert_eq!(parse_integer("0x1F"), None);
        assert_eq!(parse_integer(""), None);
        assert_eq!(parse_integer("."), None);
        assert_eq!(parse_number("21.5"), Some(serde_json::json!(21.5)));
        assert_eq!(parse_number("1200"), Some(Value::from(1200)));
        assert_eq!(parse_number("1e3"), Some(serde_json::json!(1000.0)));
        assert_eq!(parse_number("NaN"), None);
        assert_eq!(parse_number("inf"), None);
        assert_eq!(parse_number("1,200"), None);
    }
}
