//! The plan stage: the core's plan of the message ([`crate::message`]) as the driver's
//! [`Resolved`] answer; it keeps no rule of its own.

use super::{CallReport, Resolved, Timings, Turn};
use crate::{
    Toolbox, feedback,
    message::{self, CallOutcome, PlanOptions},
    schema::{Phase, ValidationContext},
};

/// Plans `turn.message` against `tools`: its calls extracted (sent, or written into the
/// text), ids settled by the one rule against the history, each call mended, a cut-off
/// answer's last call marked, the content shaped; the sanitized message and one report
/// per call.
pub fn plan(turn: Turn<'_>, tools: &Toolbox, opts: &PlanOptions) -> Resolved {
    let ctx = ValidationContext {
        tool: "",
        phase: Phase::Initial,
        messages: turn.history,
        state: turn.state,
    };
    let plan = match turn.place {
        None => message::plan_assistant(
            turn.message,
            turn.history,
            turn.later,
            turn.cut_off,
            tools,
            opts,
            &ctx,
        ),
        Some(place) => {
            let sent = turn.message.tool_calls.as_deref().unwrap_or_default();
            let input = message::MessageInput {
                text: turn.message.text().map(std::borrow::Cow::Owned),
                calls: sent
                    .iter()
                    .zip(place.parsed.iter().map(Some).chain(std::iter::repeat(None)))
                    .map(|(tc, parsed)| match parsed {
                        Some(Some(v)) => message::SentCall {
                            arguments: message::Args::Value(v),
                            ..message::SentCall::from(tc)
                        },
                        _ => message::SentCall::from(tc),
                    })
                    .collect(),
                position: place.position,
                cut_off: turn.cut_off,
            };
            message::plan(&input, place.around, tools, opts, &ctx)
        }
    };
    let sanitized = message::sanitize_assistant(turn.message, &plan.shape, &plan.calls);
    let from_text = plan.shape.from_text;
    let calls = plan
        .calls
        .into_iter()
        .map(|p| CallReport {
            id: p.id.or_else(|| p.original_id.clone()).unwrap_or_default(),
            original_id: p.original_id,
            feedback: (p.outcome == CallOutcome::Feedback)
                .then(|| feedback::render(&p.call.tool, &p.call.issues).text),
            tool: p.call.tool,
            outcome: p.outcome,
            source: p.source,
            index: p.index,
            split: p.split,
            front_answers: false,
            mend: p.call.outcome,
            fixes: p.call.fixes,
            issues: p.call.issues,
            note: p.note,
            correctable: p.correctable,
            arguments: p.call.arguments,
            from_text,
            correction_attempts: 0,
            correction_usage: Vec::new(),
            guard: Vec::new(),
            timings: Timings {
                mend: p.mend_time,
                ..Timings::default()
            },
        })
        .collect();
    let changed = sanitized != *turn.message;
    Resolved {
        message: sanitized,
        calls,
        message_fixes: plan.shape.message_fixes,
        text_calls: plan.shape.text_calls,
        answered: plan.answered,
        changed,
        added_text: None,
    }
}
