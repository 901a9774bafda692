//! Mend: one call's raw argument text -> valid arguments with every fix recorded,
//! or issues for feedback. Repair, then check each reading against the tool's
//! schema, and keep the reading that fits best (the idea behind schema-aligned
//! parsing): fewest issues first, then the cheapest fixes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Fix, FixKind, Issue, IssueKind, RepairOptions, Safety,
    repair::{RepairError, RepairedCall, anchored, repair},
    schema::{Coercions, CompiledTool, Phase, Toolbox, ValidationContext},
};

/// Options for [`mend_call`] and [`mend_named`].
#[derive(Debug, Clone, Default)]
pub struct MendOptions {
    /// Repair parser options (strict mode, thinking-stripping, limits).
    pub repair: RepairOptions,
    /// Which schema coercions run ([`Coercions::none`] for strict validation).
    pub coercions: Coercions,
    /// Answer a call whose text was cut off with a `truncated` issue instead of its salvage.
    /// Off here, so that the salvage is visible (and marked lossy); the tool node applies it
    /// per tool, unless the tool has `ToolOptions::accept_truncated`.
    pub refuse_lossy: bool,
}

impl MendOptions {
    /// Strict: repair nothing, coerce nothing; only valid calls pass.
    pub fn strict() -> Self {
        MendOptions {
            repair: RepairOptions::strict(),
            coercions: Coercions::none(),
            refuse_lossy: true,
        }
    }
}

/// What became of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Valid as the model sent it.
    Valid,
    /// Valid after the recorded fixes.
    Repaired,
    /// Still invalid: the issues go back to the agent as feedback.
    Feedback,
}

impl Outcome {
    /// True when the call may run (valid, or repaired).
    pub fn is_runnable(self) -> bool {
        self != Outcome::Feedback
    }
}

/// One mended call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MendedCall {
    /// The tool this call is for: the tool checked against (or, for an unknown tool, the name sent).
    pub tool: String,
    /// The arguments: valid when the outcome is runnable; otherwise the best reading, if any
    /// (for display or correction, never to run).
    pub arguments: Option<Value>,
    /// Every fix applied, repair then coercion.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
    /// What is still wrong; empty when runnable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
    /// The outcome.
    pub outcome: Outcome,
}

impl MendedCall {
    /// True when the model never finished the call (a cut-off fix, [`Fix::is_cut_off`]). A
    /// dropped key is lossy too but does not count here: see [`worst_safety`](Self::worst_safety).
    pub fn is_lossy(&self) -> bool {
        self.fixes.iter().any(Fix::is_cut_off)
    }

    /// The least safe fix applied, if any.
    pub fn worst_safety(&self) -> Option<Safety> {
        self.fixes.iter().map(Fix::safety).max()
    }
}

/// All calls read from one argument text (two or more when calls were glued together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mended {
    /// The calls, in text order; never empty.
    pub calls: Vec<MendedCall>,
}

impl Mended {
    /// True when every call may run.
    pub fn is_runnable(&self) -> bool {
        self.calls.iter().all(|c| c.outcome.is_runnable())
    }
}

/// Mends one call's raw argument text against its tool.
///
/// ```
/// use serde_json::json;
/// use toolmend::{mend::{mend_call, Outcome}, schema::CompiledTool, MendOptions, IssueKind};
/// let tool = CompiledTool::compile("translate", "", &json!({
///     "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})).unwrap();
/// let m = mend_call("{}", &tool, &MendOptions::default());
/// assert_eq!(m.calls[0].outcome, Outcome::Feedback);
/// assert_eq!(m.calls[0].issues[0].kind, IssueKind::MissingRequired);
/// ```
pub fn mend_call(raw: &str, tool: &CompiledTool, opts: &MendOptions) -> Mended {
    if let Some(empty) = empty_arguments(raw, opts) {
        let ctx = ValidationContext::new(tool.name(), Phase::Initial);
        return Mended {
            calls: check_call_split(empty, tool, opts, &ctx),
        };
    }
    let repaired = match repair(raw, &opts.repair) {
        Ok(r) => r,
        Err(e) => {
            let ctx = ValidationContext::new("", Phase::Initial);
            let calls = ended_early(&e)
                .then(|| read_by_keys(raw, None, tool, opts, &ctx))
                .flatten()
                .unwrap_or_else(|| vec![unparseable(tool.name(), &e)]);
            return Mended { calls };
        }
    };
    // Fast path: valid JSON that fits the schema as it is.
    if repaired.is_clean()
        && repaired.alternatives.is_empty()
        && tool.is_valid(&repaired.calls[0].arguments)
    {
        let call = repaired.calls.into_iter().next();
        return Mended {
            calls: vec![MendedCall {
                tool: tool.name().to_owned(),
                arguments: call.map(|c| c.arguments),
                fixes: Vec::new(),
                issues: Vec::new(),
                outcome: Outcome::Valid,
            }],
        };
    }
    let ctx = ValidationContext::new("", Phase::Initial);
    if let Some(calls) = read_by_keys(raw, Some(&repaired), tool, opts, &ctx) {
        return Mended { calls };
    }
    let readings = std::iter::once(repaired.calls).chain(repaired.alternatives);
    // A call that the text itself names as another tool is not run as this one.
    best_reading(
        readings,
        |c| match &c.name {
            Some(n) if normalize_name(n) != normalize_name(tool.name()) => Err(Box::new(
                Issue::new(
                    IssueKind::UnknownTool,
                    "",
                    format!("the text calls {n:?}, not {:?}", tool.name()),
                )
                .got(Value::String(n.clone()))
                .allowed(vec![Value::String(tool.name().to_owned())]),
            )),
            _ => Ok(tool),
        },
        opts,
        &ValidationContext::new("", Phase::Initial),
    )
}

/// Mends a call to the tool named `name` among `tools`: an unknown name is feedback
/// listing the valid names, unless it matches exactly one tool up to case and separators.
pub fn mend_named(name: &str, raw: &str, tools: &Toolbox, opts: &MendOptions) -> Mended {
    mend_named_in(
        name,
        raw,
        tools,
        opts,
        &ValidationContext::new("", Phase::Initial),
    )
}

/// [`mend_named`] with the conversation and caller state the tools' custom validators see
/// (`ctx.tool` is set per call; `ctx.phase` is passed on as given).
pub fn mend_named_in(
    name: &str,
    raw: &str,
    tools: &Toolbox,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> Mended {
    let (tool, name_fix) = match resolve_tool(name, tools) {
        Ok(found) => found,
        Err(issue) => {
            return Mended {
                calls: vec![MendedCall {
                    tool: name.to_owned(),
                    arguments: None,
                    fixes: Vec::new(),
                    issues: vec![*issue],
                    outcome: Outcome::Feedback,
                }],
            };
        }
    };
    let repaired = match empty_arguments(raw, opts) {
        Some(empty) => Ok(crate::Repaired {
            calls: vec![empty],
            alternatives: Vec::new(),
        }),
        None => repair(raw, &opts.repair),
    };
    let mut mended = match repaired {
        Ok(repaired) if let Some(calls) = read_by_keys(raw, Some(&repaired), tool, opts, ctx) => {
            Mended { calls }
        }
        Ok(repaired) => {
            let readings = std::iter::once(repaired.calls).chain(repaired.alternatives);
            // A call that announces another known tool (glued calls of two tools) goes to it.
            best_reading(
                readings,
                |c| match &c.name {
                    Some(n) if n != tool.name() => resolve_tool(n, tools).map(|(t, _)| t),
                    _ => Ok(tool),
                },
                opts,
                ctx,
            )
        }
        Err(e) => Mended {
            calls: ended_early(&e)
                .then(|| read_by_keys(raw, None, tool, opts, ctx))
                .flatten()
                .unwrap_or_else(|| vec![unparseable(tool.name(), &e)]),
        },
    };
    if let Some(fix) = name_fix {
        for c in &mut mended.calls {
            c.fixes.insert(0, fix.clone());
            if c.outcome == Outcome::Valid {
                c.outcome = Outcome::Repaired;
            }
        }
    }
    mended
}

/// Mends arguments that are already parsed (a framework parsed the JSON, e.g. LangChain's
/// `tool_calls[].args`): the tool name is resolved as in [`mend_named_in`], then the value
/// is coerced and validated. No text repair runs, so nothing can be lossy.
///
/// One call in, one call out: a merged call (a list for a scalar field) is feedback that
/// says "make one call per value", whatever [`Coercions::split_merged_calls`] says;
/// [`mend_value_named_split_in`] splits it where that option is on.
pub fn mend_value_named_in(
    name: &str,
    arguments: Value,
    tools: &Toolbox,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> MendedCall {
    let unsplit;
    let opts = if opts.coercions.split_merged_calls {
        unsplit = MendOptions {
            coercions: Coercions {
                split_merged_calls: false,
                ..opts.coercions.clone()
            },
            ..opts.clone()
        };
        &unsplit
    } else {
        opts
    };
    let mut calls = mend_value_named_split_in(name, arguments, tools, opts, ctx);
    // Without splitting, exactly one call comes back.
    calls.swap_remove(0)
}

/// [`mend_value_named_in`], where a merged call becomes one call per value when
/// [`Coercions::split_merged_calls`] is on (what the message plan uses: the extra calls
/// get ids as glued calls do).
pub fn mend_value_named_split_in(
    name: &str,
    arguments: Value,
    tools: &Toolbox,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> Vec<MendedCall> {
    match resolve_tool(name, tools) {
        Ok((tool, name_fix)) => {
            let repaired = RepairedCall {
                name: None,
                arguments,
                fixes: name_fix.into_iter().collect(),
            };
            check_call_split(repaired, tool, opts, ctx)
        }
        Err(issue) => vec![MendedCall {
            tool: name.to_owned(),
            arguments: Some(arguments),
            fixes: Vec::new(),
            issues: vec![*issue],
            outcome: Outcome::Feedback,
        }],
    }
}

/// Mends arguments a framework parsed already (LangChain's `args`): coerced and
/// validated as they are, split when merged. A call wrapper parsed as the arguments
/// (`{"name": …, "parameters": {…}}`, `{"type": "function", "function": {…}}`) that fails
/// the schema is read as the JSON text it was, as a front receiving text reads it
/// (unwrapped); taken only when the call then runs as one call.
pub fn mend_parsed_in(
    name: &str,
    arguments: &Value,
    tools: &Toolbox,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> Vec<MendedCall> {
    let calls = mend_value_named_split_in(name, arguments.clone(), tools, opts, ctx);
    let unwrappable = matches!(calls.as_slice(), [c] if c.outcome == Outcome::Feedback)
        && arguments.is_object()
        && tools.get(name).is_some();
    if !unwrappable {
        return calls;
    }
    let read = mend_named_in(name, &arguments.to_string(), tools, opts, ctx);
    if read.is_runnable() && read.calls.len() == 1 {
        read.calls
    } else {
        calls
    }
}

fn resolve_tool<'t>(
    name: &str,
    tools: &'t Toolbox,
) -> Result<(&'t CompiledTool, Option<Fix>), Box<Issue>> {
    if let Some(t) = tools.get(name) {
        return Ok((t, None));
    }
    let norm = normalize_name(name);
    let mut matches = tools
        .tools()
        .iter()
        .filter(|t| normalize_name(t.name()) == norm);
    if let (Some(t), None) = (matches.next(), matches.next()) {
        let fix = Fix::on(
            FixKind::ToolNameFixed,
            "",
            format!("{name:?} -> {:?}", t.name()),
        );
        return Ok((t, Some(fix)));
    }
    let names: Vec<Value> = tools.names().map(|n| Value::String(n.to_owned())).collect();
    let mut issue = Issue::new(
        IssueKind::UnknownTool,
        "",
        format!("there is no tool named {name:?}"),
    )
    .got(Value::String(name.to_owned()))
    .allowed(names);
    let close = tools
        .names()
        .map(|n| (strsim::jaro_winkler(&norm, &normalize_name(n)), n))
        .filter(|(s, _)| *s >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((_, n)) = close {
        issue = issue.suggestion(format!("did you mean {n:?}?"));
    }
    Err(Box::new(issue))
}

/// Blank argument text as `{}` (LangChain and OpenAI read it so for a call without
/// arguments); the schema then decides (a required field is reported missing, never invented).
fn empty_arguments(raw: &str, opts: &MendOptions) -> Option<RepairedCall> {
    if !raw.trim().is_empty() || opts.repair.strict {
        return None;
    }
    Some(RepairedCall {
        name: None,
        arguments: Value::Object(serde_json::Map::new()),
        fixes: vec![Fix::on(
            FixKind::EmptyArgumentsAsObject,
            "",
            "empty arguments read as {}",
        )],
    })
}

/// True when `name` is a tool of `tools`, exactly or up to case and separators.
pub(crate) fn knows_tool(name: &str, tools: &Toolbox) -> bool {
    resolve_tool(name, tools).is_ok()
}

/// A tool name up to case and separators; OpenAI's `functions.` namespace dropped.
fn normalize_name(name: &str) -> String {
    name.strip_prefix("functions.")
        .unwrap_or(name)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Checks every reading and keeps the best: fewest issues, then fewest unsafe or lossy
/// fixes, then fewest fixes; ties keep the earlier (preferred) reading.
fn best_reading<'t>(
    readings: impl Iterator<Item = Vec<RepairedCall>>,
    tool_for: impl Fn(&RepairedCall) -> Result<&'t CompiledTool, Box<Issue>>,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> Mended {
    /// Issues, drafts dropped, unsafe fixes, fixes: compared in that order.
    type Cost = (usize, bool, usize, usize);
    let mut best: Option<(Cost, Vec<MendedCall>)> = None;
    // The arguments of the calls that fit in the preferred reading (every candidate read,
    // or the first alone where the later ones stand inside prose).
    let mut fitting: Option<Vec<Value>> = None;
    for reading in readings {
        let calls: Vec<MendedCall> = reading
            .into_iter()
            .flat_map(|c| match tool_for(&c) {
                Ok(tool) => check_call_split(c, tool, opts, ctx),
                Err(issue) => vec![unknown_tool_call(c, *issue)],
            })
            .collect();
        // Fewest issues first; then a reading that keeps every candidate of the text
        // over one that drops drafts; then the fewest unsafe fixes, the fewest fixes.
        let cost = calls.iter().fold((0, false, 0, 0), |(i, d, u, f), c| {
            let unsafe_fixes = c
                .fixes
                .iter()
                .filter(|x| x.safety() != Safety::Safe)
                .count();
            let drops = c
                .fixes
                .iter()
                .any(|x| x.kind == FixKind::JsonCandidateChosen);
            (
                i + c.issues.len(),
                d || drops,
                u + unsafe_fixes,
                f + c.fixes.len(),
            )
        });
        // Drafts are dropped only for a reading that fits: never to trade feedback on
        // several calls for feedback on one.
        if cost.1 && cost.0 > 0 {
            continue;
        }
        // Nor when a dropped draft fits too: two candidates fit and disagree, and the
        // schema cannot say which is the answer (every candidate then gets its outcome).
        let fits = fitting.get_or_insert_with(|| {
            calls
                .iter()
                .filter(|c| c.issues.is_empty())
                .filter_map(|c| c.arguments.clone())
                .collect()
        });
        if cost.1
            && fits
                .iter()
                .any(|a| !calls.iter().any(|c| c.arguments.as_ref() == Some(a)))
        {
            continue;
        }
        if best.as_ref().is_none_or(|(b, _)| cost < *b) {
            best = Some((cost, calls));
        }
    }
    Mended {
        calls: best.map(|(_, c)| c).unwrap_or_default(),
    }
}

fn unknown_tool_call(c: RepairedCall, issue: Issue) -> MendedCall {
    let name = c.name.clone().unwrap_or_default();
    MendedCall {
        tool: name,
        arguments: Some(c.arguments),
        fixes: c.fixes,
        issues: vec![issue],
        outcome: Outcome::Feedback,
    }
}

/// Most calls one merged call is split into; a longer list is feedback.
const MAX_SPLIT: usize = 32;

/// [`check_call`], and a merged call (a list for a scalar field, each element valid there)
/// split into one call per element when [`Coercions::split_merged_calls`] is on.
fn check_call_split(
    c: RepairedCall,
    tool: &CompiledTool,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> Vec<MendedCall> {
    let prior = c.fixes.clone();
    let mut call = check_call(c, tool, opts, ctx);
    let Some((key, parts)) = merged_parts(&call, tool, opts, ctx) else {
        explain_command_words(&mut call);
        return vec![call];
    };
    let n = parts.len();
    if !opts.coercions.split_merged_calls {
        let path = format!("/{}", crate::schema::escape_pointer(&key));
        if let Some(issue) = call
            .issues
            .iter_mut()
            .find(|i| i.kind == IssueKind::WrongType && i.path == path)
        {
            issue.message = format!(
                "{} holds {n} values where the tool takes one: this is {n} calls merged into one",
                issue.path.trim_start_matches('/')
            );
            issue.suggestion = Some(format!(
                "make one call per value: {n} calls to {}, each with one {key}",
                tool.name()
            ));
        }
        return vec![call];
    }
    let whole = call
        .arguments
        .as_ref()
        .and_then(|a| a.get(&key))
        .map(crate::schema::preview)
        .unwrap_or_default();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, mut part)| {
            let detail = format!("{whole} -> call {} of {n}", i + 1);
            let path = format!("/{}", crate::schema::escape_pointer(&key));
            let mut fixes = prior.clone();
            fixes.push(Fix::on(FixKind::MergedCallSplit, path, detail));
            fixes.append(&mut part.fixes);
            part.fixes = fixes;
            part.outcome = Outcome::Repaired;
            part
        })
        .collect()
}

/// When `call` failed only because one top-level field holds a list of 2 to 32 distinct
/// scalar values for a field that takes one (every issue a wrong type at that field: two
/// fields given lists are not one merged call), and each value alone makes a valid call:
/// that key and the calls (checked, without the repair fixes).
fn merged_parts(
    call: &MendedCall,
    tool: &CompiledTool,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> Option<(String, Vec<MendedCall>)> {
    if call.outcome != Outcome::Feedback || call.issues.is_empty() {
        return None;
    }
    let args = call.arguments.as_ref()?.as_object()?;
    // Every issue is a wrong type on the same top-level list.
    let first = &call.issues[0];
    let key = first.path.strip_prefix('/')?;
    if key.contains('/') || first.kind != IssueKind::WrongType {
        return None;
    }
    let key = crate::schema::unescape_pointer(key).into_owned();
    // A document's field (a file's content, code) given a list: the text in pieces, its
    // lines, not one call per piece (each would write a line as the whole file).
    if tool.holds_document(&key) {
        return None;
    }
    let items = args.get(&key)?.as_array()?;
    if items.len() < 2
        || items.len() > MAX_SPLIT
        || call
            .issues
            .iter()
            .any(|i| i.path != first.path || i.kind != IssueKind::WrongType)
    {
        return None;
    }
    // Scalars only (a string, a number, a boolean: the field takes one of them, not a
    // list of objects or lists), and distinct: a repeated value is not another call.
    for (i, v) in items.iter().enumerate() {
        if !matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
            || items[..i].contains(v)
        {
            return None;
        }
    }
    // The words of one command line (`["bash", "-lc", "ls -la"]`): an option cannot stand
    // alone as a value, so the list is one value in pieces, not several calls.
    if items.iter().any(is_option_word) {
        return None;
    }
    let mut parts = Vec::with_capacity(items.len());
    for item in items {
        let mut one = args.clone();
        one.insert(key.clone(), item.clone());
        let part = check_call(
            RepairedCall {
                name: None,
                arguments: Value::Object(one),
                fixes: Vec::new(),
            },
            tool,
            opts,
            ctx,
        );
        if !part.outcome.is_runnable() {
            return None;
        }
        parts.push(part);
    }
    Some((key, parts))
}

/// A command-line option standing alone: `-l`, `-lc`, `--force`, `--out=x` (not `-5` or
/// `-`, which can be values).
fn is_option_word(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let rest = s.strip_prefix("--").or_else(|| s.strip_prefix('-'));
    rest.and_then(|r| r.chars().next())
        .is_some_and(|c| c.is_ascii_alphabetic())
        && !s.contains(char::is_whitespace)
}

/// A top-level list of words with an option among them, given where the tool takes one
/// string (`{"command": ["bash", "-lc", "ls -la"]}`), is one command line in pieces: the
/// feedback says so, rather than leaving the model to guess between one call and several.
fn explain_command_words(call: &mut MendedCall) {
    let Some(args) = call.arguments.as_ref().and_then(Value::as_object) else {
        return;
    };
    for issue in call.issues.iter_mut() {
        if issue.kind != IssueKind::WrongType {
            continue;
        }
        let Some(key) = issue.path.strip_prefix('/').filter(|k| !k.contains('/')) else {
            continue;
        };
        let key = crate::schema::unescape_pointer(key).into_owned();
        let Some(items) = args.get(&key).and_then(Value::as_array) else {
            continue;
        };
        if items.len() < 2 || !items.iter().all(Value::is_string) {
            continue;
        }
        let Some(option) = items.iter().find(|v| is_option_word(v)) else {
            continue;
        };
        issue.message = format!(
            "{key} holds the words of one command line ({} is an option), where the tool takes it as one string",
            option
        );
        issue.suggestion = Some(format!(
            "send {key} as one string, quoted as a shell would read it"
        ));
    }
}

/// The values a first call sent that a corrected or re-asked answer no longer carries:
/// JSON Pointers into `first`, in document order.
///
/// `corrected` is the new arguments, or an array of every new call's arguments (a re-ask
/// may answer with one call per value). Only the elements of lists are compared: a list of
/// which some elements survive anywhere in `corrected` and others do not was narrowed (three
/// symbols asked for, one left), and the missing ones are lost. A list none of whose values
/// survive was replaced, which is what a correction is for. Values compare by their text,
/// case-insensitively (`"5"` ~ `5`, `"Oslo"` ~ `"oslo"`), wherever they stand, so renamed
/// keys and coerced types are not losses. Linear in the size of both values.
///
/// ```
/// use serde_json::json;
/// use toolmend::mend::values_lost;
/// let first = json!({"ticker": ["NVDA", "AMD", "INTC"]});
/// assert_eq!(values_lost(&first, &json!({"ticker": "NVDA"})), ["/ticker/1", "/ticker/2"]);
/// let split = json!([{"ticker": "NVDA"}, {"ticker": "AMD"}, {"ticker": "INTC"}]);
/// assert!(values_lost(&first, &split).is_empty());
/// ```
pub fn values_lost(first: &Value, corrected: &Value) -> Vec<String> {
    let mut kept = std::collections::HashSet::new();
    collect_leaves(corrected, 0, &mut kept);
    let mut out = Vec::new();
    let mut path = String::new();
    lost_in(first, &kept, &mut path, 0, &mut out);
    out
}

/// Nesting followed by [`values_lost`] (deeper values are not compared).
const MAX_LOST_DEPTH: usize = 64;

fn leaf_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_lowercase()),
        Value::Number(n) => n
            .as_f64()
            .map(|f| f.to_string())
            .or_else(|| Some(n.to_string())),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn collect_leaves(v: &Value, depth: usize, out: &mut std::collections::HashSet<String>) {
    if depth > MAX_LOST_DEPTH {
        return;
    }
    match v {
        Value::Array(items) => items.iter().for_each(|i| collect_leaves(i, depth + 1, out)),
        Value::Object(m) => m.values().for_each(|i| collect_leaves(i, depth + 1, out)),
        Value::String(s) => {
            // A list may come back as one text (`"NVDA, AMD"`): its parts survive too.
            if s.contains(',') {
                for part in s.split(',') {
                    out.insert(part.trim().to_lowercase());
                }
            }
            out.extend(leaf_text(v));
        }
        _ => out.extend(leaf_text(v)),
    }
}

fn lost_in(
    v: &Value,
    kept: &std::collections::HashSet<String>,
    path: &mut String,
    depth: usize,
    out: &mut Vec<String>,
) {
    if depth > MAX_LOST_DEPTH {
        return;
    }
    let len = path.len();
    match v {
        Value::Object(m) => {
            for (k, item) in m {
                path.push('/');
                path.push_str(&crate::schema::escape_pointer(k));
                lost_in(item, kept, path, depth + 1, out);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            let texts: Vec<Option<String>> = items.iter().map(leaf_text).collect();
            let survives = texts.iter().flatten().any(|t| kept.contains(t));
            for (i, item) in items.iter().enumerate() {
                path.push('/');
                path.push_str(&i.to_string());
                match &texts[i] {
                    Some(t) if survives && !kept.contains(t) => out.push(path.clone()),
                    Some(_) => {}
                    None => lost_in(item, kept, path, depth + 1, out),
                }
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// The `values_lost` issues of a corrected or re-asked answer: one per value of `first`
/// that `corrected` dropped ([`values_lost`]); empty when every value was kept. For a
/// correction loop that re-validates an answer: a valid answer with these issues is not
/// clean (`checked.issues.extend(values_lost_issues(first, &checked.value))`).
pub fn values_lost_issues(first: &Value, corrected: &Value) -> Vec<Issue> {
    values_lost(first, corrected)
        .into_iter()
        .map(|p| {
            let got = first.pointer(&p).cloned().unwrap_or(Value::Null);
            Issue::new(
                IssueKind::ValuesLost,
                p,
                format!(
                    "the first call sent {}, the corrected call dropped it",
                    crate::schema::preview(&got)
                ),
            )
            .got(got)
            .suggestion("make one call per value, keeping every value the user asked for")
        })
        .collect()
}

/// Flags a corrected or re-asked call that lost values the first call sent
/// ([`values_lost_issues`] of `first` against `corrected`, the arguments of every call the
/// answer gave): the issues are added and the call becomes feedback. Returns true when it
/// flagged something; a call whose answer kept every value is left as it is.
pub fn flag_values_lost(call: &mut MendedCall, first: &Value, corrected: &Value) -> bool {
    let lost = values_lost_issues(first, corrected);
    if lost.is_empty() {
        return false;
    }
    call.issues.extend(lost);
    crate::issue::sort_issues(&mut call.issues);
    call.outcome = Outcome::Feedback;
    true
}

fn check_call(
    c: RepairedCall,
    tool: &CompiledTool,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> MendedCall {
    let ctx = ValidationContext {
        tool: tool.name(),
        ..*ctx
    };
    let checked = tool.check(c.arguments, &opts.coercions, &ctx);
    let mut fixes = c.fixes;
    fixes.extend(checked.fixes);
    let outcome = if !checked.issues.is_empty() {
        Outcome::Feedback
    } else if fixes.is_empty() {
        Outcome::Valid
    } else {
        Outcome::Repaired
    };
    let mut call = MendedCall {
        tool: tool.name().to_owned(),
        arguments: Some(checked.value),
        fixes,
        issues: checked.issues,
        outcome,
    };
    // A text that reads more than one way (quotes that may close a string or be its own,
    // an unquoted value or a triple-quoted string whose end is a guess) is refused even
    // where cut-off calls are accepted, as a top-level string's quotes are
    // ([`read_by_keys`]): nothing was cut, so there is no prefix to salvage, only a guess.
    if opts.refuse_lossy
        || call.fixes.iter().any(|f| {
            matches!(
                f.kind,
                FixKind::InnerQuotesAmbiguous
                    | FixKind::UnquotedTextAmbiguous
                    | FixKind::TripleQuotedAmbiguous
            )
        })
    {
        refuse_lossy(&mut call);
    }
    call
}

/// Puts `fixes` (taken before the arguments were mended: reading the call out of a text)
/// first in the call's record. A call that was valid as read becomes repaired.
pub fn with_prior_fixes(call: &mut MendedCall, fixes: &[Fix]) {
    if fixes.is_empty() {
        return;
    }
    call.fixes.splice(0..0, fixes.iter().cloned());
    if call.outcome == Outcome::Valid {
        call.outcome = Outcome::Repaired;
    }
}

/// Records that the answer holding this call stopped at the model's token limit
/// (`finish_reason: "length"`): a lossy fix, so the call is refused like any cut-off call
/// unless the caller accepts those.
pub fn cut_off_at_token_limit(call: &mut MendedCall) {
    if call
        .fixes
        .iter()
        .any(|f| f.kind == FixKind::CutOffAtTokenLimit)
    {
        return;
    }
    call.fixes.push(Fix::on(
        FixKind::CutOffAtTokenLimit,
        "",
        "finish_reason: length",
    ));
    if call.outcome == Outcome::Valid {
        call.outcome = Outcome::Repaired;
    }
}

/// Turns a call whose text was cut off into feedback: a `truncated` issue asking for the
/// whole call again. Does nothing to a call with no lossy fix.
pub fn refuse_lossy(call: &mut MendedCall) {
    let Some(fix) = call.fixes.iter().find(|f| f.is_cut_off()) else {
        return;
    };
    if matches!(
        fix.kind,
        FixKind::UnquotedTextAmbiguous
            | FixKind::TripleQuotedAmbiguous
            | FixKind::InnerQuotesAmbiguous
    ) {
        // Nothing was cut: the text reads more than one way.
        let at = fix
            .offset
            .map(|o| format!(" at byte {o}"))
            .unwrap_or_default();
        call.issues.insert(
            0,
            Issue::new(
                IssueKind::Truncated,
                "",
                format!(
                    "the arguments read more than one way{at} ({}): no reading was chosen",
                    fix.kind
                ),
            )
            .suggestion(
                "send the whole call again as plain JSON: every string in double quotes, \
                 with its inner quotes escaped",
            ),
        );
        call.outcome = Outcome::Feedback;
        return;
    }
    let message = match fix.offset {
        _ if fix.kind == FixKind::CutOffAtTokenLimit => {
            "the answer was cut off by the model's token limit (finish_reason \"length\") \
             in or after this call"
                .to_owned()
        }
        Some(at) => format!("the arguments were cut off (the text ends at byte {at})"),
        None => "the arguments were cut off".to_owned(),
    };
    call.issues.insert(
        0,
        Issue::new(IssueKind::Truncated, "", message)
            .suggestion("send the whole call again, with every argument complete"),
    );
    call.outcome = Outcome::Feedback;
}

/// The text read by the tool's top-level keys ([`crate::repair::anchored`]) where the
/// tolerant reading had to decide where a string ends: `Some` with the answer when that
/// settles it, `None` to keep the tolerant reading (nothing read by the keys fits).
///
/// The reading, when it fits, is the call; one whose string holds an odd number of
/// quotes (its last quote may be its own, the closing one missing: `"notify-send "Build
/// done"`) is feedback: a refusal is better than a wrong value.
fn read_by_keys(
    raw: &str,
    repaired: Option<&crate::Repaired>,
    tool: &CompiledTool,
    opts: &MendOptions,
    ctx: &ValidationContext<'_>,
) -> Option<Vec<MendedCall>> {
    // Glued calls (`{…}\n{…}`) are several documents, not one object to cut. Where the
    // tolerant reading failed (`None`: it found the arguments ended early, at a quote),
    // the keys are the only reading left.
    if opts.repair.strict || repaired.is_some_and(|r| r.is_clean() || !quote_decided(r)) {
        return None;
    }
    let props = tool.parameters().get("properties")?.as_object()?;
    let keys: Vec<anchored::Key<'_>> = props
        .iter()
        .map(|(name, s)| anchored::Key {
            name,
            string: match s.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                _ => true,
            },
        })
        .collect();
    // Reasoning before the object and a fence around it are no part of it.
    let (base, object, mut envelope) = anchored::unwrapped(raw, opts.repair.strip_thinking);
    let mut reading = anchored::reading(object, &keys, opts.repair.max_depth)?;
    for f in &mut reading.call.fixes {
        f.offset = f.offset.map(|o| o + base);
    }
    envelope.append(&mut reading.call.fixes);
    reading.call.fixes = envelope;
    let call = check_call(reading.call, tool, opts, ctx);
    if !call.issues.is_empty() {
        return None;
    }
    let Some(key) = reading.odd_quotes else {
        return Some(vec![call]);
    };
    Some(vec![MendedCall {
        tool: tool.name().to_owned(),
        arguments: None,
        fixes: Vec::new(),
        issues: vec![
            Issue::new(
                IssueKind::Unparseable,
                "",
                format!(
                    "the arguments could not be read as JSON: the value of {key:?} holds an \
                     odd number of unescaped quotes, so its last quote may be its own and the \
                     closing one missing, or close the string: it cannot be told which"
                ),
            )
            .expected("a JSON object with the quotes inside its strings escaped")
            .suggestion(
                "escape every double quote inside a string value as \\\" and send the \
                 arguments again",
            ),
        ],
        outcome: Outcome::Feedback,
    }])
}

/// Did the tolerant reading fail because the arguments closed early (their rest stands
/// as prose after them)? Only then does reading by the keys run without it: every other
/// failure (the size and depth limits above all) stands.
fn ended_early(e: &crate::repair::RepairError) -> bool {
    e.reason.starts_with(crate::repair::ENDED_EARLY)
}

/// Did the tolerant reading decide where a string ends (a quote kept inside one, text
/// skipped after one)?
fn quote_decided(repaired: &crate::Repaired) -> bool {
    repaired
        .readings()
        .flatten()
        .flat_map(|c| &c.fixes)
        .any(|f| {
            matches!(
                f.kind,
                FixKind::InnerQuoteEscaped
                    | FixKind::GarbageSkipped
                    | FixKind::SingleQuotes
                    | FixKind::MissingComma
                    | FixKind::MissingColon
                    | FixKind::UnquotedString
                    | FixKind::ExtraClosingRemoved
                    | FixKind::ProseStripped
                    | FixKind::UnclosedBrackets
                    | FixKind::ClosingBracesAdded
                    | FixKind::TruncatedString
            )
        })
}

fn unparseable(tool: &str, e: &RepairError) -> MendedCall {
    MendedCall {
        tool: tool.to_owned(),
        arguments: None,
        fixes: Vec::new(),
        issues: vec![
            Issue::new(
                IssueKind::Unparseable,
                "",
                format!("the arguments could not be read as JSON: {}", e.reason),
            )
            .expected("a JSON object")
            .suggestion(format!(
                "send the arguments as one JSON object; reading failed at byte {}",
                e.offset
            )),
        ],
        outcome: Outcome::Feedback,
    }
}
