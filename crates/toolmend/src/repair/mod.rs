//! Repair: raw argument text -> JSON value(s) + the fixes applied.
//!
//! STUB: being written.

use serde_json::Value;

use crate::Fix;

/// Options of the repair parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairOptions {
    /// Repair nothing: valid JSON (an object) passes, anything else is an error naming the first problem.
    pub strict: bool,
    /// Remove `<think>…</think>` and similar reasoning blocks (on by default).
    pub strip_thinking: bool,
    /// Deepest nesting of arrays/objects accepted (default 128).
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

/// One call read from the text.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairedCall {
    /// The tool name the text itself announced (`<tool_call>{"name": …}`, `f(a=1)`), if any.
    pub name: Option<String>,
    /// The arguments.
    pub arguments: Value,
    /// Every fix applied to reach them.
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

/// Why no JSON could be read from the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at byte {offset}")]
pub struct RepairError {
    /// Byte offset where reading failed.
    pub offset: usize,
    /// What was wrong there.
    pub reason: String,
}

/// Reads the JSON a model meant from `raw`, recording each fix.
pub fn repair(raw: &str, _opts: &RepairOptions) -> Result<Repaired, RepairError> {
    let value: Value = serde_json::from_str(raw).map_err(|e| RepairError {
        offset: e.column(),
        reason: e.to_string(),
    })?;
    Ok(Repaired {
        calls: vec![RepairedCall {
            name: None,
            arguments: value,
            fixes: Vec::new(),
        }],
        alternatives: Vec::new(),
    })
}
