//! The front's own rules, at their one place in the order. Right after the plan: the
//! calls the front's runtime takes as they were sent ([`Accept`]: LangGraph's `ToolNode`
//! runs a call its tool's own schema accepts and answers an unknown tool with its own
//! error), then the front's validators ([`Validate`]) on every call that may run (phase
//! `initial`). The correction and settle stages ask the same validators about the
//! arguments they produce (phases `correction` and `salvage`).

use serde_json::Value;

use super::{Resolved, Stages};
use crate::{
    Issue, feedback,
    message::CallOutcome,
    schema::Phase,
    validate::{Validation, custom_issues},
};

/// What the front's runtime does with an invalid call it takes over.
#[derive(Debug, Clone, PartialEq)]
pub enum Taken {
    /// It runs, with these arguments (the runtime's own validation passes them); the
    /// note says why.
    Runs {
        /// The arguments it runs with (as sent).
        arguments: Option<Value>,
        /// Why it runs.
        note: String,
    },
    /// The runtime answers it itself (its own error text); the note says why.
    Answers(String),
}

/// Calls the front's runtime takes as they were sent.
pub trait Accept: Sync {
    /// Asked about each call that is invalid as planned and was sent whole among the
    /// message's calls (not read from the text, not split): `index` is its place in the
    /// sent calls. `None`: toolmend answers it.
    fn accept(&self, index: usize, tool: &str, issues: &[Issue]) -> Option<Taken>;
}

/// The front's step after the plan: accepted calls, then the validators on every call
/// that may run.
pub(super) async fn stage(resolved: &mut Resolved, stages: &Stages<'_>) {
    if let Some(accept) = stages.accept {
        for report in &mut resolved.calls {
            let whole = report.source == crate::message::CallSource::ToolCalls && !report.split;
            if report.outcome != CallOutcome::Feedback || !whole {
                continue;
            }
            match accept.accept(report.index, &report.tool, &report.issues) {
                Some(Taken::Runs { arguments, note }) => {
                    report.outcome = CallOutcome::Executed;
                    report.correctable = false;
                    report.feedback = None;
                    report.arguments = arguments;
                    report.note = Some(note);
                }
                Some(Taken::Answers(note)) => {
                    report.front_answers = true;
                    report.correctable = false;
                    report.note = Some(note);
                }
                None => {}
            }
        }
    }
    let Some(validate) = stages.validate else {
        return;
    };
    let jobs: Vec<usize> = (0..resolved.calls.len())
        .filter(|&i| resolved.calls[i].may_run() && resolved.calls[i].arguments.is_some())
        .collect();
    if jobs.is_empty() {
        return;
    }
    let asks = jobs.iter().filter_map(|&i| {
        let r = &resolved.calls[i];
        Some(validate.validate(Validation {
            tool: &r.tool,
            call_id: &r.id,
            arguments: r.arguments.as_ref()?,
            phase: Phase::Initial,
        }))
    });
    let found = futures::future::join_all(asks).await;
    for (i, problems) in jobs.into_iter().zip(found) {
        if problems.is_empty() {
            continue;
        }
        let r = &mut resolved.calls[i];
        r.outcome = CallOutcome::Feedback;
        r.issues.extend(custom_issues(problems));
        r.correctable =
            crate::correct::correctable(&r.issues, &r.fixes, stages.plan.correct_missing_fields);
        r.feedback = Some(feedback::render(&r.tool, &r.issues).text);
    }
}
