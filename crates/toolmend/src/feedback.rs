//! Feedback: deterministic text (and JSON) telling the agent what to change.
//!
//! STUB: the interface is fixed, the implementation is being written.

use serde_json::Value;

use crate::Issue;

/// Feedback for one invalid call, as text for the model and as JSON for programs.
#[derive(Debug, Clone, PartialEq)]
pub struct Feedback {
    /// The text sent back to the agent as the tool result.
    pub text: String,
    /// The same content as JSON (`{"tool", "error", "issues": [...]}`).
    pub json: Value,
}

/// Renders feedback for a call to `tool` that has `issues`.
pub fn render(tool: &str, issues: &[Issue]) -> Feedback {
    Feedback {
        text: format!("{tool}: {} issue(s)", issues.len()),
        json: Value::Null,
    }
}
