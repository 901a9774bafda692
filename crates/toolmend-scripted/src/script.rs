//! The script: what the provider answers, request after request.

use std::collections::VecDeque;

use serde_json::Value;
use toolmend::conversation::AssistantMessage;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// An assistant message (content and/or tool calls, as broken as the script wants).
    Reply(AssistantMessage),
    /// An error response: a status (429, 500, 503 …) and its JSON body.
    Error {
        /// The HTTP status.
        status: u16,
        /// The body, e.g. `{"error": {"message": …, "type": …}}`.
        body: Value,
    },
}

/// The answers, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    steps: VecDeque<Step>,
    /// Each step used goes back to the end (benchmarks, long demos).
    repeat: bool,
}

/// A script line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("script line {line}: {reason}")]
pub struct ScriptError {
    /// The 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub reason: String,
}

impl Script {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a step.
    #[must_use]
    pub fn then(mut self, step: Step) -> Self {
        self.steps.push_back(step);
        self
    }

    /// Appends an assistant reply.
    #[must_use]
    pub fn reply(self, message: AssistantMessage) -> Self {
        self.then(Step::Reply(message))
    }

    /// Reads a JSON Lines script. Each line is an assistant message (`{"content": …,
    /// "tool_calls": […]}`, `role` optional), or `{"error": {"status": 429, "body": {…}}}`.
    /// Blank lines and lines starting with `#` are skipped.
    pub fn from_jsonl(text: &str) -> Result<Self, ScriptError> {
        let mut script = Script::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let err = |reason: String| ScriptError {
                line: line_no,
                reason,
            };
            let mut value: Value = serde_json::from_str(trimmed).map_err(|e| err(e.to_string()))?;
            if let Some(error) = value.get("error") {
                let status = error
                    .get("status")
                    .and_then(Value::as_u64)
                    .and_then(|s| u16::try_from(s).ok())
                    .ok_or_else(|| err("an error step needs a numeric `status`".to_owned()))?;
                let body = error.get("body").cloned().unwrap_or_else(|| {
                    serde_json::json!({"error": {"message": "scripted error", "type": "server_error", "param": null, "code": null}})
                });
                script = script.then(Step::Error { status, body });
                continue;
            }
            if let Some(obj) = value.as_object_mut() {
                obj.remove("role");
            }
            let message: AssistantMessage = serde_json::from_value(value)
                .map_err(|e| err(format!("not an assistant message: {e}")))?;
            script = script.reply(message);
        }
        Ok(script)
    }

    /// The same script, played in a loop: a step used goes back to the end, so it never
    /// runs out (for benchmarks and long demos).
    #[must_use]
    pub fn repeating(mut self) -> Self {
        self.repeat = true;
        self
    }

    /// The next step, if any.
    pub fn pop_step(&mut self) -> Option<Step> {
        let step = self.steps.pop_front()?;
        if self.repeat {
            self.steps.push_back(step.clone());
        }
        Some(step)
    }

    /// Steps left.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True when no step is left.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}
