//! From documents to calls: unwrap call wrappers, decode double-encoded
//! arguments, read lists of calls, drop repeated calls, split glued ones.

use serde_json::{Map, Value};

use super::{RepairError, RepairOptions, Repaired, RepairedCall, envelope::Doc, repair_at};
use crate::{Fix, FixKind};

/// How many times a JSON string holding JSON is decoded before giving up.
const MAX_DECODES: usize = 3;

/// Keys that name the tool in a call object.
const NAME_KEYS: &[&str] = &[
    "name",
    "tool",
    "tool_name",
    "function",
    "function_name",
    "recipient_name",
];
/// Keys that hold the arguments in a call object.
const ARGS_KEYS: &[&str] = &[
    "arguments",
    "parameters",
    "args",
    "input",
    "tool_input",
    "kwargs",
    "params",
    "tool_args",
    "function_args",
];
/// Other keys a call object may carry.
const CALL_META_KEYS: &[&str] = &["type", "id", "call_id", "tool_call_id", "index"];

pub(crate) fn interpret(
    docs: Vec<Doc>,
    envelope_call: bool,
    opts: &RepairOptions,
    level: usize,
) -> Result<Repaired, RepairError> {
    let single = docs.len() == 1;
    let mut calls = Vec::new();
    let mut alternatives = Vec::new();
    let mut first_error = None;
    // How many documents gave calls, and where the last one's start in `calls`.
    let (mut candidates, mut last_start) = (0, 0);
    let mut last_apart = false;
    // Where the first document's calls end, and whether every later one stood inside
    // prose (prose before and after it).
    let (mut first_end, mut later_inline) = (0, true);
    for doc in docs {
        let (apart, prose_after) = (doc.apart, doc.prose_after);
        match doc_calls(doc, envelope_call, opts, level) {
            Ok((pref, alt)) => {
                candidates += 1;
                last_apart = apart;
                last_start = calls.len();
                if candidates >= 2 {
                    later_inline &= apart && prose_after;
                }
                calls.extend(pref);
                if candidates == 1 {
                    first_end = calls.len();
                }
                if single {
                    alternatives.extend(alt);
                }
            }
            // A document that holds no call (`[1]` in prose) fails alone.
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if calls.is_empty() {
        return Err(first_error.unwrap_or(RepairError {
            offset: 0,
            reason: "no call found in the text".to_owned(),
        }));
    }
    // Several documents outside a call envelope, the last written apart (prose or a fence
    // before it), may be drafts of one call ("first try: {…}. Corrected: {…}"): the last
    // one alone is a second reading, which the schema
    // takes only where it fits better than running every candidate. Only the last: a
    // model's later text supersedes its earlier, and a fitting first call never hides
    // a later one (that one gets feedback instead).
    let last_alone = (candidates > 1 && last_apart && !envelope_call && same_tool(&calls))
        .then(|| last_candidate(&calls[last_start..], candidates));
    // The other way round: the arguments, then prose that shows a JSON snippet inside a
    // sentence ("The config now sets {"debug": true} for local runs.", "If that passes I
    // will run {"command": ["pytest"]}."). Such a snippet is no call, whether it fits or
    // not: the first document alone is the reading tried first, and it stands unless
    // reading every candidate as a call has fewer issues (it holds the first's too, so
    // it does not when the first's are its own). A document that ends the text (`… and
    // {…}`) is not inside prose: it may be a second call, and gets feedback if it does not
    // fit.
    let first_alone = (candidates > 1 && later_inline && !envelope_call && same_tool(&calls))
        .then(|| first_candidate(&calls[..first_end], candidates));
    let calls = drop_repeats(calls);
    if calls.len() > 1 {
        let calls = mark_split(calls);
        if let Some(first) = first_alone {
            return Ok(Repaired {
                calls: first,
                alternatives: std::iter::once(calls).chain(last_alone).collect(),
            });
        }
        return Ok(Repaired {
            calls,
            alternatives: last_alone.into_iter().collect(),
        });
    }
    Ok(Repaired {
        calls,
        alternatives,
    })
}

type Readings = (Vec<RepairedCall>, Vec<Vec<RepairedCall>>);

fn doc_calls(
    doc: Doc,
    envelope_call: bool,
    opts: &RepairOptions,
    level: usize,
) -> Result<Readings, RepairError> {
    let Doc {
        value, fixes, name, ..
    } = doc;
    if name.is_some() {
        // The document is already a call (pythonic, XML): its value is the arguments. Text
        // that reads as no arguments (harmony's `<|message|>foo<|call|>`) stays the call's,
        // as text, for the schema step to answer with feedback: the call is not dropped.
        let text = matches!(value, Value::String(_)).then(|| value.clone());
        let (arguments, mut more) = match (arguments_value(value, opts, level), text) {
            (Ok(read), _) => read,
            (Err(_), Some(text)) => (text, Vec::new()),
            (Err(e), None) => return Err(e),
        };
        let mut all = fixes;
        all.append(&mut more);
        return Ok((
            vec![RepairedCall {
                name,
                arguments,
                fixes: all,
            }],
            Vec::new(),
        ));
    }
    match value {
        Value::Object(obj) => {
            let Some((call_name, args)) = as_wrapper(&obj) else {
                return Ok((
                    vec![RepairedCall {
                        name: None,
                        arguments: Value::Object(obj),
                        fixes,
                    }],
                    Vec::new(),
                ));
            };
            let as_is = RepairedCall {
                name: None,
                arguments: Value::Object(obj.clone()),
                fixes: fixes.clone(),
            };
            // The wrapper reading needs readable arguments; if they are not, the object is
            // read as it is (`{"name": "Bob", "input": "hello"}` is arguments).
            let Ok((arguments, mut inner)) = arguments_value(args, opts, level) else {
                return Ok((vec![as_is], Vec::new()));
            };
            let mut unwrapped_fixes = fixes;
            unwrapped_fixes.push(Fix::on(
                FixKind::CallWrapperUnwrapped,
                "",
                format!("call of `{call_name}`"),
            ));
            unwrapped_fixes.append(&mut inner);
            let unwrapped = RepairedCall {
                name: Some(call_name),
                arguments,
                fixes: unwrapped_fixes,
            };
            // Inside a tool-call envelope the object is a call; otherwise it may be
            // arguments that merely look like one, and a schema decides (mend).
            if envelope_call || level > 0 {
                Ok((vec![unwrapped], vec![vec![as_is]]))
            } else {
                Ok((vec![as_is], vec![vec![unwrapped]]))
            }
        }
        Value::String(s) => {
            if level >= MAX_DECODES {
                return Err(RepairError {
                    offset: 0,
                    reason: "the arguments are a string, not a JSON object".to_owned(),
                });
            }
            let inner = repair_at(&s, opts, level + 1).map_err(|e| RepairError {
                offset: 0,
                reason: format!("the arguments are a string that holds no JSON object: {e}"),
            })?;
            let wrap = |calls: Vec<RepairedCall>| -> Vec<RepairedCall> {
                calls
                    .into_iter()
                    .map(|mut c| {
                        let mut f = fixes.clone();
                        f.push(Fix::on(FixKind::DoubleEncodedDecoded, "", ""));
                        f.append(&mut c.fixes);
                        c.fixes = f;
                        c
                    })
                    .collect()
            };
            let alts = inner.alternatives.into_iter().map(&wrap).collect();
            Ok((wrap(inner.calls), alts))
        }
        Value::Array(items) => {
            if items.is_empty() {
                return Err(RepairError {
                    offset: 0,
                    reason: "the arguments are an empty list, not a JSON object".to_owned(),
                });
            }
            let mut out = Vec::new();
            // The document's fixes go with its first call only: copying them to every
            // item would grow with the square of the list.
            let mut doc_fixes = Some(fixes);
            let len = items.len();
            for (i, item) in items.into_iter().enumerate() {
                // An item that is no call makes the whole list the arguments: say so, not
                // what the item is ("[1, 2]" is a list, not "a number").
                let item_kind = kind_of(&item);
                let (pref, _) = doc_calls(
                    Doc {
                        value: item,
                        fixes: doc_fixes.take().unwrap_or_default(),
                        name: None,
                        apart: false,
                        prose_after: false,
                    },
                    true,
                    opts,
                    level,
                )
                .map_err(|e| RepairError {
                    offset: e.offset,
                    reason: format!(
                        "the arguments are a list of {len} item(s), not a JSON object (item \
                         {i} is {item_kind}, not a call)"
                    ),
                })?;
                out.extend(pref);
            }
            if !envelope_call {
                for c in &mut out {
                    add_once(
                        &mut c.fixes,
                        FixKind::CallWrapperUnwrapped,
                        "a list of calls",
                    );
                }
            }
            Ok((out, Vec::new()))
        }
        other => Err(RepairError {
            offset: 0,
            reason: format!("the arguments are {}, not a JSON object", kind_of(&other)),
        }),
    }
}

/// The arguments inside a call: an object, a JSON string holding one, or nothing.
fn arguments_value(
    v: Value,
    opts: &RepairOptions,
    level: usize,
) -> Result<(Value, Vec<Fix>), RepairError> {
    match v {
        Value::Object(_) => Ok((v, Vec::new())),
        Value::Null => Ok((Value::Object(Map::new()), Vec::new())),
        Value::String(s) if s.trim().is_empty() => Ok((Value::Object(Map::new()), Vec::new())),
        Value::String(_) if level >= MAX_DECODES => Err(RepairError {
            offset: 0,
            reason: "the call's arguments are a string, not a JSON object".to_owned(),
        }),
        Value::String(s) => {
            let inner = repair_at(&s, opts, level + 1)?;
            let mut calls = inner.calls.into_iter();
            match (calls.next(), calls.next()) {
                (Some(c), None) => Ok((c.arguments, c.fixes)),
                _ => Err(RepairError {
                    offset: 0,
                    reason: "the call's arguments hold several calls".to_owned(),
                }),
            }
        }
        other => Err(RepairError {
            offset: 0,
            reason: format!(
                "the call's arguments are {}, not a JSON object",
                kind_of(&other)
            ),
        }),
    }
}

/// `{"name": "f", "arguments": {…}}`, `{"type": "function", "function": {…}}` and friends.
fn as_wrapper(obj: &Map<String, Value>) -> Option<(String, Value)> {
    if let Some(Value::Object(f)) = obj.get("function")
        && obj
            .keys()
            .all(|k| k == "function" || CALL_META_KEYS.contains(&k.as_str()))
    {
        return as_wrapper(f);
    }
    let mut name = None;
    let mut args = None;
    for (k, v) in obj {
        if NAME_KEYS.contains(&k.as_str()) {
            let s = v.as_str()?;
            if name.is_some() {
                return None;
            }
            name = Some(s.strip_prefix("functions.").unwrap_or(s).to_owned());
        } else if ARGS_KEYS.contains(&k.as_str()) {
            if args.is_some() || !matches!(v, Value::Object(_) | Value::String(_) | Value::Null) {
                return None;
            }
            args = Some(v.clone());
        } else if !CALL_META_KEYS.contains(&k.as_str()) {
            return None;
        }
    }
    Some((name?, args?))
}

/// The same call emitted twice in a row (the second copy possibly cut off) is one call.
/// Only the call just before is compared: linear, and calls repeated on purpose further
/// apart stay.
fn drop_repeats(calls: Vec<RepairedCall>) -> Vec<RepairedCall> {
    let mut out: Vec<RepairedCall> = Vec::with_capacity(calls.len());
    for c in calls {
        if let Some(kept) = out.last_mut()
            && kept.name == c.name
            && (kept.arguments == c.arguments
                || (c.is_lossy() && prefix_of(&c.arguments, &kept.arguments)))
        {
            add_once(
                &mut kept.fixes,
                FixKind::DuplicateCallDropped,
                "same arguments twice in a row",
            );
            continue;
        }
        out.push(c);
    }
    out
}

/// Records a fix of the whole call once.
fn add_once(fixes: &mut Vec<Fix>, kind: FixKind, detail: &str) {
    if !fixes.iter().any(|f| f.kind == kind) {
        fixes.push(Fix::on(kind, "", detail));
    }
}

/// Is `part` (a cut-off copy) a prefix-compatible part of `full`?
fn prefix_of(part: &Value, full: &Value) -> bool {
    match (part, full) {
        (Value::Object(p), Value::Object(f)) => p
            .iter()
            .all(|(k, v)| f.get(k).is_some_and(|fv| prefix_of(v, fv))),
        (Value::Array(p), Value::Array(f)) => {
            p.len() <= f.len() && p.iter().zip(f).all(|(a, b)| prefix_of(a, b))
        }
        (Value::String(p), Value::String(f)) => f.starts_with(p.as_str()),
        _ => part == full,
    }
}

/// True when every call names the same tool, or none does.
fn same_tool(calls: &[RepairedCall]) -> bool {
    calls.windows(2).all(|w| w[0].name == w[1].name)
}

/// The last candidate's calls read alone, each with the fix that says so.
fn last_candidate(calls: &[RepairedCall], candidates: usize) -> Vec<RepairedCall> {
    let dropped = candidates - 1;
    let s = if dropped == 1 { "" } else { "s" };
    chosen(
        calls,
        FixKind::JsonCandidateChosen,
        format!(
            "the last of {candidates} JSON candidates kept; {dropped} earlier draft{s} dropped"
        ),
    )
}

/// The first candidate's calls read alone: the later documents, written inside the prose
/// after it, were snippets in a sentence (`The config now sets {"debug": true}.`), not calls.
fn first_candidate(calls: &[RepairedCall], candidates: usize) -> Vec<RepairedCall> {
    let dropped = candidates - 1;
    let s = if dropped == 1 { "" } else { "s" };
    chosen(
        calls,
        FixKind::JsonInProseDropped,
        format!(
            "the first of {candidates} JSON candidates kept; {dropped} later one{s}, inside \
             the prose after it, dropped with the prose"
        ),
    )
}

/// `calls`, each with the fix (`kind`) saying which candidate was kept.
fn chosen(calls: &[RepairedCall], kind: FixKind, detail: String) -> Vec<RepairedCall> {
    calls
        .iter()
        .cloned()
        .map(|mut c| {
            c.fixes.push(Fix::on(kind, "", detail.clone()));
            c
        })
        .collect()
}

fn mark_split(calls: Vec<RepairedCall>) -> Vec<RepairedCall> {
    let n = calls.len();
    calls
        .into_iter()
        .enumerate()
        .map(|(i, mut c)| {
            c.fixes.push(Fix::on(
                FixKind::ConcatenatedCallsSplit,
                "",
                format!("call {} of {n}", i + 1),
            ));
            c
        })
        .collect()
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
