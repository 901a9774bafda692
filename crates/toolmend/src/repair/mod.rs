//! Repair: raw argument text -> JSON value(s) + the fixes applied.
//!
//! Valid JSON takes a fast path (serde_json, plus a duplicate-key check). Anything
//! else goes through three steps:
//!
//! 1. `envelope`: walk the text, skipping what wraps the JSON (reasoning blocks,
//!    chat-template tokens, `<tool_call>` tags, code fences, prose) and finding each
//!    document in it: a JSON value, members without braces, a pythonic call
//!    `f(a=1)`, Qwen3 XML parameters.
//! 2. `parser`: read each document with the tolerant parser (quotes, commas,
//!    literals, comments, truncation, …).
//! 3. `interpret`: turn the documents into calls: unwrap `{"name", "arguments"}`
//!    wrappers, decode double-encoded strings, split glued calls, drop duplicates.
//!
//! Where the text allows two readings (a wrapper object that might be the
//! arguments themselves), the preferred one is in [`Repaired::calls`] and the
//! others in [`Repaired::alternatives`], for a tool's schema to choose
//! ([`crate::mend`]). Linear time, bounded depth, no panics.

pub(crate) mod anchored;
mod envelope;
mod fast;
mod interpret;
pub mod markers;
pub(crate) mod parser;

pub(crate) use envelope::ENDED_EARLY;

use serde_json::Value;

use crate::Fix;

/// The largest `max_depth` honoured; larger values are clamped to it.
pub const MAX_DEPTH_LIMIT: usize = 1000;

/// Options of the repair parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairOptions {
    /// Repair nothing: valid JSON passes, anything else is an error naming the first problem.
    pub strict: bool,
    /// Remove `<think>…</think>` and similar reasoning blocks (on by default). When off,
    /// text holding a reasoning block is an error, so the caller decides.
    pub strip_thinking: bool,
    /// Deepest nesting of arrays/objects accepted (default 128, at most [`MAX_DEPTH_LIMIT`]).
    pub max_depth: usize,
    /// Longest input accepted, in bytes (default 4 MiB).
    pub max_len: usize,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions {
            strict: false,
            strip_thinking: true,
            max_depth: 128,
            max_len: 4 << 20,
        }
    }
}

impl RepairOptions {
    /// Strict mode: valid JSON only, nothing repaired.
    pub fn strict() -> Self {
        RepairOptions {
            strict: true,
            ..RepairOptions::default()
        }
    }
}

/// One call read from the text.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairedCall {
    /// The tool name the text itself announced (`<tool_call>{"name": …}`, `f(a=1)`), if any.
    pub name: Option<String>,
    /// The arguments: always a JSON object.
    pub arguments: Value,
    /// Every fix applied to reach them, in text order.
    pub fixes: Vec<Fix>,
}

impl RepairedCall {
    /// True when a fix lost information (the text was cut off).
    pub fn is_lossy(&self) -> bool {
        self.fixes.iter().any(Fix::is_lossy)
    }
}

/// The calls read from one argument text: usually one; two or more when calls were glued together.
#[derive(Debug, Clone, PartialEq)]
pub struct Repaired {
    /// The preferred reading.
    pub calls: Vec<RepairedCall>,
    /// Other plausible readings, for a schema to choose from (see [`crate::mend`]).
    pub alternatives: Vec<Vec<RepairedCall>>,
}

impl Repaired {
    /// The arguments of the first call of the preferred reading.
    pub fn value(&self) -> &Value {
        &self.calls[0].arguments
    }

    /// True when no fix was needed.
    pub fn is_clean(&self) -> bool {
        self.calls.len() == 1 && self.calls[0].fixes.is_empty()
    }

    /// Every reading, the preferred one first.
    pub fn readings(&self) -> impl Iterator<Item = &[RepairedCall]> {
        std::iter::once(self.calls.as_slice()).chain(self.alternatives.iter().map(Vec::as_slice))
    }
}

/// Why no JSON object could be read from the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (at byte {offset})")]
pub struct RepairError {
    /// Byte offset where reading failed.
    pub offset: usize,
    /// What was wrong there.
    pub reason: String,
}

/// Reads the JSON a model meant from `raw`, recording each fix.
///
/// ```
/// use toolmend::{repair, RepairOptions, FixKind};
/// let r = repair("```json\n{'city': 'Paris', 'days': 3,}\n```", &RepairOptions::default()).unwrap();
/// assert_eq!(r.value(), &serde_json::json!({"city": "Paris", "days": 3}));
/// let kinds: Vec<_> = r.calls[0].fixes.iter().map(|f| f.kind).collect();
/// assert!(kinds.contains(&FixKind::FenceStripped) && kinds.contains(&FixKind::TrailingComma));
/// ```
pub fn repair(raw: &str, opts: &RepairOptions) -> Result<Repaired, RepairError> {
    repair_at(raw, opts, 0)
}

/// `level` counts nested decodes (a JSON string holding JSON), bounded.
fn repair_at(raw: &str, opts: &RepairOptions, level: usize) -> Result<Repaired, RepairError> {
    // Deeper than this would risk the stack of a small thread; no tool needs it.
    if opts.max_depth > MAX_DEPTH_LIMIT {
        let clamped = RepairOptions {
            max_depth: MAX_DEPTH_LIMIT,
            ..opts.clone()
        };
        return repair_at(raw, &clamped, level);
    }
    if raw.len() > opts.max_len {
        return Err(RepairError {
            offset: opts.max_len,
            reason: format!(
                "arguments are {} bytes, more than the limit of {} bytes",
                raw.len(),
                opts.max_len
            ),
        });
    }
    // Text that cannot start a JSON document (prose, tags, fences) skips the fast path.
    let promising = matches!(
        raw.trim_start().as_bytes().first(),
        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
    );
    if promising || opts.strict {
        match fast::parse(raw, opts.max_depth) {
            Ok((value, fixes)) => {
                let doc = envelope::Doc {
                    value,
                    fixes,
                    name: None,
                    apart: false,
                    prose_after: false,
                };
                return interpret::interpret(vec![doc], false, opts, level);
            }
            Err(e) if opts.strict => return strict_fallback(raw, &e, opts, level),
            Err(_) => {}
        }
    }
    let docs = envelope::read_documents(raw, opts)?;
    interpret::interpret(docs.docs, docs.envelope_call, opts, level)
        .map(|r| with_global_fixes(r, &docs.fixes))
}

/// Strict mode when serde_json refused: valid JSON beyond serde_json's own nesting limit
/// (128) is still valid, so the text is accepted exactly when the tolerant reading
/// needed no fix at all; otherwise the first problem is the error.
fn strict_fallback(
    raw: &str,
    serde_error: &serde_json::Error,
    opts: &RepairOptions,
    level: usize,
) -> Result<Repaired, RepairError> {
    let refuse = |offset: usize, reason: String| RepairError {
        offset,
        reason: format!("not valid JSON: {reason}"),
    };
    let docs = envelope::read_documents(raw, opts).map_err(|e| refuse(e.offset, e.reason))?;
    let first_fix = docs
        .fixes
        .iter()
        .chain(docs.docs.iter().flat_map(|d| d.fixes.iter()))
        .min_by_key(|f| f.offset);
    if docs.docs.len() == 1 && first_fix.is_none() {
        return interpret::interpret(docs.docs, false, opts, level);
    }
    let e = fast::error(raw, serde_error);
    Err(refuse(e.offset, e.reason))
}

/// Prepends the fixes that apply to the whole text (envelope) to every call.
fn with_global_fixes(mut r: Repaired, global: &[Fix]) -> Repaired {
    if global.is_empty() {
        return r;
    }
    let add = |calls: &mut Vec<RepairedCall>| {
        for c in calls {
            let mut fixes = global.to_vec();
            fixes.append(&mut c.fixes);
            c.fixes = fixes;
        }
    };
    add(&mut r.calls);
    for alt in &mut r.alternatives {
        add(alt);
    }
    r
}
