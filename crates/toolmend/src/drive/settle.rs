//! The settle stage: what stays invalid after the chain is raised, decided by a hook
//! (salvaged with arguments it supplies, re-validated; answered with its own text), or
//! answered with its feedback.

use std::{collections::HashMap, panic::AssertUnwindSafe, time::Instant};

use futures::FutureExt;
use serde::Serialize;
use serde_json::Value;

use super::{Resolved, Stages, Stop, Turn, correct::replace_arguments};
use crate::{
    Fix, FixKind, Issue,
    conversation::Message,
    future::BoxFuture,
    message::CallOutcome,
    schema::{Phase, ValidationContext},
    validate::{Validation, custom_issues},
};

/// A call still invalid after repair, validation and the invalid chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnresolvedCall {
    /// The call id.
    pub call_id: String,
    /// The sent call it came from ([`CallReport::index`](super::CallReport::index)).
    #[serde(skip)]
    pub index: usize,
    /// One of several calls glued into one sent call.
    #[serde(skip)]
    pub split: bool,
    /// The tool (the name sent, for an unknown tool).
    pub tool: String,
    /// The best reading of the arguments, if any could be read.
    pub arguments: Option<Value>,
    /// The argument text as the model sent it.
    pub raw_arguments: String,
    /// What is wrong.
    pub issues: Vec<Issue>,
    /// The feedback text the agent gets by default.
    pub feedback: String,
    /// Correction attempts made.
    pub correction_attempts: u32,
}

/// What a hook decides for an unresolved call.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// Run with these arguments (re-validated first, phase `salvage`; if they fail, the
    /// call gets the default feedback and a warning is logged).
    Salvage(Value),
    /// Answer with this text instead of the default feedback.
    Feedback(String),
    /// The default feedback.
    Default,
}

/// A front's hook for unresolved calls (the node's `OnUnresolved::Hook`).
pub trait Settle: Sync {
    /// The decision on `call`, which follows `history`. A panic, or no answer within the
    /// stage's timeout, gives the default feedback.
    fn settle<'a>(
        &'a self,
        call: UnresolvedCall,
        history: &'a [Message],
    ) -> BoxFuture<'a, Resolution>;
}

/// The unresolved calls of `resolved`, as a hook sees them; `place`: each call's place
/// in the message ([`Resolved::places`]).
fn unresolved_calls(resolved: &Resolved, place: &HashMap<String, usize>) -> Vec<UnresolvedCall> {
    let sent = resolved.message.tool_calls.as_deref().unwrap_or_default();
    resolved
        .unresolved()
        .map(|c| UnresolvedCall {
            call_id: c.id.clone(),
            index: c.index,
            split: c.split,
            tool: c.tool.clone(),
            arguments: c.arguments.clone(),
            raw_arguments: place
                .get(&c.id)
                .and_then(|&k| sent.get(k))
                .map(|tc| tc.arguments.clone())
                .unwrap_or_default(),
            issues: c.issues.clone(),
            feedback: c.feedback.clone().unwrap_or_default(),
            correction_attempts: c.correction_attempts,
        })
        .collect()
}

pub(super) async fn stage(
    turn: Turn<'_>,
    resolved: &mut Resolved,
    stages: &Stages<'_>,
) -> Result<(), Stop> {
    if resolved.unresolved().next().is_none() {
        return Ok(());
    }
    if !stages.raise_unresolved && stages.settle.is_none() {
        return Ok(());
    }
    let place = resolved.places();
    if stages.raise_unresolved {
        return Err(Stop::Unresolved(unresolved_calls(resolved, &place)));
    }
    let Some(hook) = stages.settle else {
        return Ok(());
    };
    let jobs: Vec<usize> = (0..resolved.calls.len())
        .filter(|&i| resolved.calls[i].is_unresolved())
        .collect();
    let calls = unresolved_calls(resolved, &place);
    for (i, call) in jobs.into_iter().zip(calls) {
        let t0 = Instant::now();
        let tool = call.tool.clone();
        let raw = call.raw_arguments.clone();
        // Built inside the caught future: a panic while building it counts too.
        let answer =
            AssertUnwindSafe(async { hook.settle(call, turn.history).await }).catch_unwind();
        let resolution = match tokio::time::timeout(stages.stage_timeout, answer).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => {
                tracing::warn!(tool = %tool, "the unresolved-call hook panicked; default feedback given");
                Resolution::Default
            }
            Err(_) => {
                tracing::warn!(tool = %tool, "the unresolved-call hook did not answer in time; default feedback given");
                Resolution::Default
            }
        };
        match resolution {
            Resolution::Salvage(value) => {
                if let Err(why) = salvage(turn, resolved, &place, i, value, &raw, stages).await {
                    tracing::warn!(tool = %tool, "salvaged arguments rejected: {why}");
                    resolved.calls[i].note = Some(format!("salvage rejected: {why}"));
                }
            }
            Resolution::Feedback(text) => resolved.calls[i].feedback = Some(text),
            Resolution::Default => {}
        }
        resolved.calls[i].timings.resolve = t0.elapsed();
    }
    Ok(())
}

/// Re-validates a hook's arguments for call `i` (phase `salvage`); valid, they replace
/// the call's.
async fn salvage(
    turn: Turn<'_>,
    resolved: &mut Resolved,
    place: &HashMap<String, usize>,
    i: usize,
    value: Value,
    raw: &str,
    stages: &Stages<'_>,
) -> Result<(), String> {
    let report = &resolved.calls[i];
    let tool = stages
        .toolbox
        .get(&report.tool)
        .ok_or_else(|| format!("there is no tool named {:?}", report.tool))?;
    let ctx = ValidationContext {
        tool: tool.name(),
        phase: Phase::Salvage,
        messages: turn.history,
        state: turn.state,
    };
    let mut checked = tool.check(value, &stages.plan.mend_for(tool.name()).coercions, &ctx);
    if let Some(v) = stages.validate.filter(|_| checked.is_valid()) {
        let problems = v
            .validate(Validation {
                tool: tool.name(),
                call_id: &report.id,
                arguments: &checked.value,
                phase: Phase::Salvage,
            })
            .await;
        checked.issues.extend(custom_issues(problems));
    }
    if !checked.is_valid() {
        let first = checked.issues.first().map_or("", |i| i.message.as_str());
        return Err(first.to_owned());
    }
    let mut fixes = vec![Fix::replaced(
        FixKind::ArgumentsSalvaged,
        report.arguments.as_ref(),
        raw,
        &checked.value,
    )];
    fixes.extend(checked.fixes);
    replace_arguments(
        resolved,
        place,
        i,
        checked.value,
        fixes,
        CallOutcome::Salvaged,
    );
    Ok(())
}
