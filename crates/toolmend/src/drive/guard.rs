//! The budget and the guard stage: the calls that may run go through the core's guard
//! stage ([`crate::guard::stage::verdicts`]: one verdict per call, a panic, a timeout or
//! a missing verdict deny), ids the session used before are renamed, and [`OnRefused`]
//! says what a refusal does.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use serde_json::Value;

use super::{
    Guarding, Resolved, Stages, Stop, Turn, observed_plan,
    re_ask::{self, ReAskFailure, ReAskRequest},
};
use crate::{
    conversation::{AssistantMessage, Message},
    guard::{Action, GuardContext, GuardRequest, stage},
    message::{CallOutcome, reused_id_fix},
};

/// The reason calls past a run's call budget get.
pub const BUDGET_USED: &str =
    "Not run: the tool-call budget of this run is used up. Answer with what you have.";

/// What a refusal does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnRefused {
    /// The refused call stays in the message and is answered with the reason (the tool
    /// node); a rule whose action is `error` stops the driver.
    Answer,
    /// The refused calls leave the answer; the model is asked again with the reason as
    /// their result, up to [`Guarding::max_re_asks`] times (when every call was refused),
    /// then the answer is rejected.
    ReAsk,
    /// The answer is rejected.
    Reject,
    /// The refused calls pass, flagged.
    Flag,
}

/// What the guard did to one answer.
#[derive(Debug, Default, Clone)]
pub struct GuardTally {
    /// Calls checked.
    pub checked: usize,
    /// Calls refused.
    pub refused: usize,
    /// Decisions that refuse nothing: observations and shadow decisions.
    pub observed: usize,
    /// Rules that decided something, each once, in order.
    pub rules: Vec<&'static str>,
    /// Re-asks made for refused calls.
    pub re_asks: u32,
    /// Refused calls passed through ([`OnRefused::Flag`]).
    pub flagged: usize,
    /// Ids renamed because the session had used them.
    pub renamed: usize,
    /// Where the session came from (`none` when nowhere); the front's to fill.
    pub session: &'static str,
    /// The policy's name; the front's to fill (empty: no guard ran).
    pub policy: &'static str,
    /// The re-ask for refused calls that failed, when one did.
    pub re_ask_failed: Option<ReAskFailure>,
    /// Time spent asking the model again for refused calls.
    pub re_ask_took: Duration,
}

impl GuardTally {
    /// The `x-toolmend-guard` value, when a guard ran.
    pub fn header(&self) -> Option<String> {
        if self.policy.is_empty() {
            return None;
        }
        let mut s = format!(
            "checked={} refused={} flagged={} observed={} re_asks={} renamed={} policy={} session={}",
            self.checked,
            self.refused,
            self.flagged,
            self.observed,
            self.re_asks,
            self.renamed,
            self.policy,
            self.session
        );
        if !self.rules.is_empty() {
            s.push_str(" rules=");
            s.push_str(&self.rules.join(","));
        }
        Some(s)
    }

    /// The same as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "checked": self.checked, "refused": self.refused, "flagged": self.flagged,
            "observed": self.observed, "re_asks": self.re_asks, "renamed": self.renamed,
            "rules": self.rules, "policy": self.policy, "session": self.session,
            "re_ask_failed": self.re_ask_failed.as_ref().map(ReAskFailure::to_json),
        })
    }

    fn note_rule(&mut self, rule: &'static str) {
        if !self.rules.contains(&rule) {
            self.rules.push(rule);
        }
    }
}

/// One refused call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its id.
    pub id: String,
    /// Its tool.
    pub tool: String,
    /// The guard's decisions on it.
    pub decisions: Vec<crate::guard::Decision>,
    /// The guard's reason.
    pub reason: String,
    /// What the guard decided.
    pub action: Action,
    /// When it may pass again, if known.
    pub retry_after: Option<Duration>,
}

/// Refused calls that cannot be answered: the answer is refused whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The refusals.
    pub refused: Vec<Refusal>,
    /// Calls of the answer checked (refused and admitted).
    pub checked: usize,
    /// Why re-asking could not answer it (asked again in vain, or the re-ask failed).
    pub why: Option<String>,
}

impl Rejected {
    /// The gravest refusal's reason, then how many of the answer's calls were refused and
    /// admitted (admitted calls were counted by the guard, yet not sent), then why
    /// re-asking could not help.
    pub fn message(&self) -> String {
        let mut message = self
            .refused
            .iter()
            .max_by_key(|r| r.action)
            .map(|r| r.reason.clone())
            .unwrap_or_default();
        let admitted = self.checked.saturating_sub(self.refused.len());
        if self.checked > 1 {
            message.push_str(&format!(
                " ({} of the answer's {} calls refused, {admitted} admitted; none was sent)",
                self.refused.len(),
                self.checked
            ));
        }
        if let Some(why) = &self.why {
            message.push_str(&format!(" ({why})"));
        }
        message
    }

    /// Every refusal was the guard's store not answering (it fails closed): an outage,
    /// not a flood; a front answers it as its server's failure, not the client's.
    pub fn is_outage(&self) -> bool {
        !self.refused.is_empty()
            && self.refused.iter().all(|r| {
                r.decisions
                    .iter()
                    .any(|d| d.rule == crate::guard::Rule::StoreUnavailable && d.refuses())
            })
    }

    /// A refusal ends the run.
    pub fn ends_run(&self) -> bool {
        self.refused.iter().any(|r| r.action >= Action::End)
    }

    /// The latest time any refused call may pass again.
    pub fn retry_after(&self) -> Option<Duration> {
        self.refused.iter().filter_map(|r| r.retry_after).max()
    }

    /// The gravest action.
    pub fn action(&self) -> Action {
        self.refused
            .iter()
            .map(|r| r.action)
            .max()
            .unwrap_or_default()
    }
}

/// Calls that may run past `budget` are refused.
pub(super) fn budget(resolved: &mut Resolved, budget: Option<usize>) {
    let Some(budget) = budget else { return };
    for c in resolved
        .calls
        .iter_mut()
        .filter(|c| c.may_run())
        .skip(budget)
    {
        c.outcome = CallOutcome::Flooded;
        c.note = Some(BUDGET_USED.to_owned());
    }
}

/// The guard stage; the refusal that ends the run, when one did.
pub(super) async fn stage(
    turn: Turn<'_>,
    resolved: &mut Resolved,
    stages: &Stages<'_>,
    g: &Guarding<'_>,
    tally: &mut GuardTally,
) -> Result<Option<String>, Stop> {
    if !g.guard.is_enabled() {
        return Ok(None);
    }
    let mut before: Option<Vec<Message>> = None;
    loop {
        let history = before.as_deref().unwrap_or(turn.history);
        let (refused, checked) = check(history, resolved, stages, g, tally).await;
        if refused.is_empty() {
            return Ok(None);
        }
        stages.observer.refused(refused.len());
        let by_id: HashMap<&str, &Refusal> = refused.iter().map(|r| (r.id.as_str(), r)).collect();
        match g.on_refused {
            OnRefused::Flag => {
                tally.flagged += refused.len();
                return Ok(None);
            }
            OnRefused::Answer => {
                tally.refused += refused.len();
                if refused.iter().any(|r| r.action == Action::Error) {
                    return Err(Stop::Rejected(Rejected {
                        refused,
                        checked,
                        why: None,
                    }));
                }
                for c in &mut resolved.calls {
                    if let Some(r) = by_id.get(c.id.as_str()).filter(|_| c.may_run()) {
                        c.outcome = CallOutcome::Flooded;
                        c.note = Some(r.reason.clone());
                    }
                }
                let stopped = refused
                    .iter()
                    .find(|r| r.action == Action::End)
                    .map(|r| r.reason.clone());
                // A rule that ends the run: no call of the message runs; each is answered
                // with the reason (Python's nodes do the same).
                if let Some(reason) = &stopped {
                    for c in resolved
                        .calls
                        .iter_mut()
                        .filter(|c| c.may_run() || c.front_answers)
                    {
                        c.outcome = CallOutcome::Flooded;
                        c.note = Some(reason.clone());
                    }
                }
                return Ok(stopped);
            }
            OnRefused::Reject => {
                tally.refused += refused.len();
                return Err(Stop::Rejected(Rejected {
                    refused,
                    checked,
                    why: None,
                }));
            }
            // A rule that ends the run (or fails it) is not the model's to route around:
            // asking it again would continue the run the rule ended. The refusal stands.
            OnRefused::ReAsk if refused.iter().any(|r| r.action >= Action::End) => {
                tally.refused += refused.len();
                return Err(Stop::Rejected(Rejected {
                    refused,
                    checked,
                    why: None,
                }));
            }
            OnRefused::ReAsk => {}
        }
        tally.refused += refused.len();
        // The refused calls leave the answer; their reports stay (outcome `flooded`).
        for c in &mut resolved.calls {
            if let Some(r) = by_id.get(c.id.as_str()).filter(|_| c.may_run()) {
                c.outcome = CallOutcome::Flooded;
                c.note = Some(r.reason.clone());
            }
        }
        let sent = resolved.message.tool_calls.take().unwrap_or_default();
        let (out, kept): (Vec<_>, Vec<_>) = sent
            .into_iter()
            .partition(|c| c.id.as_deref().is_some_and(|id| by_id.contains_key(id)));
        resolved.changed = true;
        if !kept.is_empty() {
            // The other calls go on; the refused ones are reported.
            resolved.message.tool_calls = Some(kept);
            return Ok(None);
        }
        let Some(asker) = stages.re_ask.filter(|_| tally.re_asks < g.max_re_asks) else {
            // Refused again (or no re-ask allowed): the model was told and called refused
            // tools anyway; the refusal stands, not retried.
            let why = (tally.re_asks > 0).then(|| {
                format!(
                    "the model was asked again {} time(s) (guard.max_re_asks = {}) with \
                     the refusal as the calls' result and called refused tools again",
                    tally.re_asks, g.max_re_asks
                )
            });
            return Err(Stop::Rejected(Rejected {
                refused,
                checked,
                why,
            }));
        };
        tally.re_asks += 1;
        let results: Vec<(String, String)> = refused
            .iter()
            .map(|r| (r.id.clone(), r.reason.clone()))
            .collect();
        let t = Instant::now();
        let asked = asker
            .re_ask(ReAskRequest {
                round: tally.re_asks,
                calls: out.clone(),
                results: results.clone(),
            })
            .await;
        tally.re_ask_took += t.elapsed();
        let answer = match asked {
            Ok(answer) => answer,
            Err(failure) => {
                let failure = failure.noted("refused", &results, "the refusal goes to the client");
                let why = format!("the model could not be asked again: {}", failure.reason);
                tally.re_ask_failed = Some(failure);
                return Err(Stop::Rejected(Rejected {
                    refused,
                    checked,
                    why: Some(why),
                }));
            }
        };
        // What the new answer follows: the conversation, the refused calls, the guard's
        // answers to them (so the loop rules see them too).
        let shown = AssistantMessage {
            content: Some(None),
            tool_calls: Some(out),
            ..AssistantMessage::default()
        };
        let next = re_ask::history_after(history, shown, &results);
        let again = observed_plan(
            Turn {
                message: &answer.message,
                history: &next,
                later: &[],
                cut_off: answer.cut_off,
                state: turn.state,
                place: None,
            },
            stages,
        );
        // The refused calls' reports stay (`flooded`); their calls left the answer.
        let replaced: HashSet<String> = by_id.keys().map(|id| (*id).to_owned()).collect();
        *resolved = re_ask::merge(std::mem::take(resolved), again, &replaced, true);
        before = Some(next);
    }
}

/// One check of the calls of `resolved` that may run: renames applied, decisions
/// recorded. The refusals, and how many calls were checked.
async fn check(
    history: &[Message],
    resolved: &mut Resolved,
    stages: &Stages<'_>,
    g: &Guarding<'_>,
    tally: &mut GuardTally,
) -> (Vec<Refusal>, usize) {
    let place = resolved.places();
    let asked: Vec<(usize, usize)> = resolved
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.may_run())
        .filter_map(|(i, c)| Some((i, *place.get(c.id.as_str())?)))
        .collect();
    if asked.is_empty() {
        return (Vec::new(), 0);
    }
    let checked = asked.len();
    tally.checked += checked;
    let t = Instant::now();
    let verdicts = {
        let requests: Vec<GuardRequest<'_>> = asked
            .iter()
            .map(|&(i, _)| {
                let c = &resolved.calls[i];
                GuardRequest {
                    call_id: &c.id,
                    tool: &c.tool,
                    arguments: c.arguments.as_ref().unwrap_or(&Value::Null),
                }
            })
            .collect();
        let ctx = GuardContext {
            session: g.session,
            history,
        };
        stage::verdicts(g.guard, ctx, &requests, g.timeout).await
    };
    let took = t.elapsed();
    stages.observer.guard_checked(checked, took);
    let share = took / u32::try_from(checked).unwrap_or(u32::MAX);
    let mut refused = Vec::new();
    // Exactly one verdict per call asked about (the stage's promise).
    for ((i, k), v) in asked.into_iter().zip(verdicts) {
        for d in &v.decisions {
            stages.observer.guard_decision(d);
            tally.note_rule(d.rule.as_str());
            if !d.refuses() {
                tally.observed += 1;
            }
        }
        let report = &mut resolved.calls[i];
        report.timings.guard += share;
        if v.id_reused && g.rename_reused {
            let new = g.fresh_ids.next_id();
            report.fixes.push(reused_id_fix(&report.id, &new));
            let old = std::mem::replace(&mut report.id, new.clone());
            report.original_id.get_or_insert(old);
            if let Some(calls) = &mut resolved.message.tool_calls {
                calls[k].id = Some(new);
            }
            resolved.changed = true;
            tally.renamed += 1;
        }
        if v.action > Action::Allow {
            refused.push(Refusal {
                id: report.id.clone(),
                tool: report.tool.clone(),
                decisions: v.decisions.clone(),
                reason: v
                    .reason
                    .unwrap_or_else(|| "the call was not run: refused by the guard".into()),
                action: v.action,
                retry_after: v.retry_after,
            });
        }
        report.guard.extend(v.decisions);
    }
    (refused, checked)
}
