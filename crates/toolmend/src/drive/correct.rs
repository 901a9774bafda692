//! The correction step of the invalid chain: each call the plan marked correctable (not
//! one missing a required value with no unknown key that may be its misnaming, nor a
//! cut-off one, nor one to an unknown tool: a corrector would invent what was never said)
//! goes through the core's one correction loop ([`crate::correct::correct_calls`]),
//! bounded, with the configured coercions; an answer that passes replaces the arguments.

use serde_json::Value;

use super::{Resolved, Stages, Tally, Turn};
use crate::{
    Fix, FixKind,
    correct::{Attempts, CorrectionRequest, correct_calls},
    mend::Outcome,
    message::CallOutcome,
    schema::{Phase, ValidationContext},
};

pub(super) async fn stage(
    turn: Turn<'_>,
    resolved: &mut Resolved,
    stages: &Stages<'_>,
    tally: &mut Tally,
) {
    let Some(c) = &stages.correction else {
        return;
    };
    let jobs: Vec<usize> = resolved
        .calls
        .iter()
        .enumerate()
        .filter(|(_, r)| r.outcome == CallOutcome::Feedback && r.correctable)
        .filter(|(_, r)| stages.toolbox.get(&r.tool).is_some())
        .map(|(i, _)| i)
        .collect();
    if jobs.is_empty() {
        return;
    }
    let place = resolved.places();
    let sent = resolved.message.tool_calls.as_deref().unwrap_or_default();
    let raw_of = |id: &str| {
        place
            .get(id)
            .and_then(|&k| sent.get(k))
            .map_or("", |c| c.arguments.as_str())
    };
    let assistant_text = resolved.message.text();
    let requests = jobs
        .iter()
        .filter_map(|&i| {
            let report = &resolved.calls[i];
            Some(CorrectionRequest {
                tool: stages.toolbox.get(&report.tool)?,
                call_id: &report.id,
                raw_arguments: raw_of(&report.id),
                arguments: report.arguments.as_ref(),
                issues: &report.issues,
                attempt: 1,
                messages: turn.history,
                assistant_text: assistant_text.as_deref(),
            })
        })
        .collect();
    let attempts = Attempts {
        max: c.max_retries,
        timeout: c.timeout,
        coercions: &stages.plan.mend.coercions,
        tool_mend: Some(&stages.plan.tool_mend),
        validate: stages.validate,
        ctx: ValidationContext {
            tool: "",
            phase: Phase::Correction,
            messages: turn.history,
            state: turn.state,
        },
        scope: c.scope,
    };
    let done = correct_calls(c.corrector, requests, attempts, c.concurrency).await;
    // The model's rewrite, then what re-validating it fixed: one record for every front.
    let mut fixed: Vec<(usize, Value, Vec<Fix>)> = Vec::new();
    for (&i, done) in jobs.iter().zip(done) {
        stages.observer.corrected(done.attempts);
        tally.corrections += done.attempts;
        let report = &mut resolved.calls[i];
        report.correction_attempts = done.attempts;
        report.correction_usage = done.usage;
        report.timings.correct = done.elapsed;
        report.note = done.note;
        if let Some((value, checked)) = done.value {
            let mut fixes = vec![Fix::replaced(
                FixKind::ArgumentsCorrected,
                report.arguments.as_ref(),
                raw_of(&report.id),
                &value,
            )];
            fixes.extend(checked);
            fixed.push((i, value, fixes));
        }
    }
    // A failed correction leaves the call's own issues: the feedback is about the call
    // the model sent (and still sees), not about the corrector's attempts.
    for (i, value, fixes) in fixed {
        replace_arguments(resolved, &place, i, value, fixes, CallOutcome::Corrected);
    }
}

/// Gives call `i` the valid arguments `value` (corrected, salvaged): in the message under
/// its registered name, and in its report with `fixes`.
pub(super) fn replace_arguments(
    resolved: &mut Resolved,
    place: &std::collections::HashMap<String, usize>,
    i: usize,
    value: Value,
    fixes: Vec<Fix>,
    outcome: CallOutcome,
) {
    let at = place.get(&resolved.calls[i].id).copied();
    if let Some(call) = at.and_then(|k| resolved.message.tool_calls.as_mut()?.get_mut(k)) {
        call.arguments = value.to_string();
        call.name.clone_from(&resolved.calls[i].tool);
    }
    let report = &mut resolved.calls[i];
    report.outcome = outcome;
    report.mend = Outcome::Repaired;
    report.correctable = false;
    report.fixes.extend(fixes);
    report.arguments = Some(value);
    report.issues.clear();
    report.feedback = None;
    resolved.changed = true;
}
