//! The vocabulary of calls: where each came from, what became of it.

use serde::Serialize;

/// What became of a call. One vocabulary in every front: node stats, gateway headers and
/// metrics, Python stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// Valid (as sent or after recorded repairs) and run.
    Executed,
    /// Fixed by the corrector, then run.
    Corrected,
    /// Arguments from the unresolved hook, re-validated, then run.
    Salvaged,
    /// Not run; answered with feedback.
    Feedback,
    /// Not run and not answered: no usable id, or an exact repeat of another call.
    Dropped,
    /// Valid but not run: past the invocation's call budget (`InvokeOptions::max_calls`)
    /// or refused by the guard; answered with the reason.
    Flooded,
}

impl CallOutcome {
    /// True for the outcomes whose call may run (executed, corrected, salvaged): what the
    /// guard checks and the executor runs, in every front.
    pub fn may_run(self) -> bool {
        matches!(
            self,
            CallOutcome::Executed | CallOutcome::Corrected | CallOutcome::Salvaged
        )
    }

    /// Every outcome, in order.
    pub const ALL: [CallOutcome; 6] = [
        CallOutcome::Executed,
        CallOutcome::Corrected,
        CallOutcome::Salvaged,
        CallOutcome::Feedback,
        CallOutcome::Dropped,
        CallOutcome::Flooded,
    ];

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Executed => "executed",
            CallOutcome::Corrected => "corrected",
            CallOutcome::Salvaged => "salvaged",
            CallOutcome::Feedback => "feedback",
            CallOutcome::Dropped => "dropped",
            CallOutcome::Flooded => "flooded",
        }
    }
}

/// Where a call came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallSource {
    /// The message's `tool_calls`.
    ToolCalls,
    /// Written into the message text (`<tool_call>…`, fences, `[TOOL_CALLS]` …).
    Text,
    /// Glued after another call in one argument string; its id was minted.
    Glued,
}

impl CallSource {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallSource::ToolCalls => "tool_calls",
            CallSource::Text => "text",
            CallSource::Glued => "glued",
        }
    }
}
