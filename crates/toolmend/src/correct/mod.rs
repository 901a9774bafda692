//! Correct: a model (or anything else) rewrites a call the rules could not mend.
//!
//! Written once, used by every front:
//!
//! - [`correctable`]: the one rule for which invalid calls are worth asking about;
//! - [`prompt`] and [`render_context`]: the one prompt and the context it shows;
//! - [`read_answer`]: the arguments in a model's text answer (mended, one call only);
//! - the [`Corrector`] trait the node asks, [`NoCorrector`] (the default) and
//!   [`Scripted`], a test double answering from a script.
//!
//! The node asks a [`Corrector`] for new arguments, re-validates every answer (phase
//! `correction`), and asks again with the new issues up to its retry limit. A corrector
//! never sees a call whose only problem is a missing required value, unless the caller
//! opts in: it would have to invent the value. The Python package runs the same loop
//! around a LangChain chat model: the prompt, the rule and the re-validation come from
//! here, only the model call is Python's.

mod prompt;
mod retry;
mod scope;

use std::{collections::HashMap, fmt, sync::Mutex};

use serde::Serialize;
use serde_json::Value;

pub use prompt::{CONTEXT_CHARS, PromptOptions, prompt, render_context};
pub use retry::{Attempts, Corrected, correct_call, correct_calls};
pub use scope::{CorrectionScope, values_changed_issues};

use crate::{
    Fix, FixKind, Issue, IssueKind, RepairOptions, conversation::Message, future::BoxFuture,
    repair::repair, schema::CompiledTool,
};

/// The one rule for "is this invalid call worth asking a corrector about", from its
/// issues and the fixes mending took. Not for an unknown tool (no schema to correct to),
/// nor a cut-off call (the corrector would have to finish it, inventing what the model
/// never sent), nor a call missing a required value (it would have to be invented),
/// unless an unknown key (kept as an issue, or dropped by coercion) may be that value
/// misnamed or one level too high (`adults` for `passengers.adults`), or the caller opts
/// in with `correct_missing_fields`. Whether the call is invalid at all, and whether a
/// corrector is configured, is the caller's to check.
///
/// ```
/// use toolmend::{Issue, IssueKind, correct::correctable};
///
/// let wrong = [Issue::new(IssueKind::WrongType, "/days", "expected an integer")];
/// let missing = [Issue::new(IssueKind::MissingRequired, "", "city is required")];
/// assert!(correctable(&wrong, &[], false));
/// assert!(!correctable(&missing, &[], false));
/// assert!(correctable(&missing, &[], true));
/// ```
pub fn correctable(issues: &[Issue], fixes: &[Fix], correct_missing_fields: bool) -> bool {
    if issues
        .iter()
        .any(|i| matches!(i.kind, IssueKind::UnknownTool | IssueKind::Truncated))
    {
        return false;
    }
    let missing = issues.iter().any(|i| i.kind == IssueKind::MissingRequired);
    let unknown_key = issues.iter().any(|i| i.kind == IssueKind::UnknownKey)
        || fixes.iter().any(|f| f.kind == FixKind::UnknownKeyDropped);
    !missing || unknown_key || correct_missing_fields
}

/// The arguments in a correction model's text answer (a tool call's argument text, or a
/// JSON answer): the model's own JSON may need mending too, and what it means is kept;
/// `None` when no object can be read, or the text holds several calls or readings. The
/// caller re-validates the value against the schema (phase `correction`).
///
/// ```
/// use serde_json::json;
/// use toolmend::correct::read_answer;
///
/// assert_eq!(read_answer("```json\n{'a': 1, 'b': 2,}\n```"), Some(json!({"a": 1, "b": 2})));
/// assert_eq!(read_answer("I cannot tell."), None);
/// ```
pub fn read_answer(text: &str) -> Option<Value> {
    repair(text, &RepairOptions::default())
        .ok()
        .filter(|r| r.alternatives.is_empty() && r.calls.len() == 1)
        .map(|r| r.value().clone())
}

/// What a corrector is asked.
#[derive(Debug, Clone, Copy)]
pub struct CorrectionRequest<'a> {
    /// The tool, with its description and schema.
    pub tool: &'a CompiledTool,
    /// The call id (for logs; correction traffic never enters the agent's history).
    pub call_id: &'a str,
    /// The argument text as the model sent it.
    pub raw_arguments: &'a str,
    /// The best reading of the arguments so far, if any could be read.
    pub arguments: Option<&'a Value>,
    /// What is wrong with them.
    pub issues: &'a [Issue],
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The conversation before the assistant message.
    pub messages: &'a [Message],
    /// The assistant message's own text, if any.
    pub assistant_text: Option<&'a str>,
}

/// Tokens a correction used.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// The model that answered.
    pub model: String,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// A corrector's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Correction {
    /// New arguments (re-validated by the node), or `None` when the corrector gives up.
    pub arguments: Option<Value>,
    /// Tokens spent, if a model answered.
    pub usage: Option<Usage>,
}

/// Why a correction failed (the call then stays unresolved; siblings are not touched).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("correction failed: {message}")]
pub struct CorrectError {
    /// What went wrong.
    pub message: String,
    /// True for failures worth retrying later (rate limits, 5xx, timeouts).
    pub transient: bool,
}

/// Rewrites invalid calls.
pub trait Corrector: Send + Sync {
    /// False for the no-op corrector: the node then skips the stage.
    fn is_enabled(&self) -> bool {
        true
    }
    /// New arguments for the call, or `None`.
    fn correct<'a>(
        &'a self,
        request: CorrectionRequest<'a>,
    ) -> BoxFuture<'a, Result<Correction, CorrectError>>;
}

impl fmt::Debug for dyn Corrector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Corrector")
    }
}

impl<T: Corrector + ?Sized> Corrector for std::sync::Arc<T> {
    fn is_enabled(&self) -> bool {
        (**self).is_enabled()
    }
    fn correct<'a>(
        &'a self,
        request: CorrectionRequest<'a>,
    ) -> BoxFuture<'a, Result<Correction, CorrectError>> {
        (**self).correct(request)
    }
}

/// The default: no correction.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCorrector;

impl Corrector for NoCorrector {
    fn is_enabled(&self) -> bool {
        false
    }
    fn correct<'a>(
        &'a self,
        _request: CorrectionRequest<'a>,
    ) -> BoxFuture<'a, Result<Correction, CorrectError>> {
        Box::pin(std::future::ready(Ok(Correction {
            arguments: None,
            usage: None,
        })))
    }
}

/// A test double: answers per tool from a queue, and records what it was asked.
#[derive(Debug, Default)]
pub struct Scripted {
    answers: Mutex<HashMap<String, Vec<Answer>>>,
    asked: Mutex<Vec<AskedFor>>,
}

/// A scripted answer: new arguments, a give-up (`None`), or a failure.
pub type Answer = Result<Option<Value>, CorrectError>;

/// One request a [`Scripted`] corrector received.
#[derive(Debug, Clone, PartialEq)]
pub struct AskedFor {
    /// The tool.
    pub tool: String,
    /// The call id.
    pub call_id: String,
    /// The attempt number.
    pub attempt: u32,
    /// The issue kinds it was shown.
    pub issues: Vec<crate::IssueKind>,
    /// How many conversation messages it saw.
    pub messages: usize,
}

impl Scripted {
    /// An empty script (every request answers `None`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues an answer for `tool` (answers are used in order).
    #[must_use]
    pub fn answer(self, tool: &str, answer: Answer) -> Self {
        if let Ok(mut a) = self.answers.lock() {
            a.entry(tool.to_owned()).or_default().push(answer);
        }
        self
    }

    /// The requests received so far.
    pub fn asked(&self) -> Vec<AskedFor> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl Corrector for Scripted {
    fn correct<'a>(
        &'a self,
        request: CorrectionRequest<'a>,
    ) -> BoxFuture<'a, Result<Correction, CorrectError>> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(AskedFor {
                tool: request.tool.name().to_owned(),
                call_id: request.call_id.to_owned(),
                attempt: request.attempt,
                issues: request.issues.iter().map(|i| i.kind).collect(),
                messages: request.messages.len(),
            });
        }
        let next = self.answers.lock().ok().and_then(|mut a| {
            let q = a.get_mut(request.tool.name())?;
            (!q.is_empty()).then(|| q.remove(0))
        });
        let answer = next.unwrap_or(Ok(None)).map(|arguments| Correction {
            arguments,
            usage: Some(Usage {
                model: "scripted".to_owned(),
                prompt_tokens: 100,
                completion_tokens: 20,
            }),
        });
        Box::pin(std::future::ready(answer))
    }
}
