//! The resolve chain, front-neutral: the `calls.invalid` policies run in order on the
//! calls that stayed invalid: `re_ask` (the upstream model is shown its calls and their
//! feedback, through the front's [`ReAsk`]), `correct` (the correction model), `pass`.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use serde_json::Value;
use toolmend::{
    Fix, FixKind, Toolbox,
    correct::{Attempts, CorrectionRequest, correct_calls},
    future::BoxFuture,
    mend::Outcome,
    message::CallOutcome,
    protocol::{AssistantMessage, Content, Message, ToolCall, ToolMessage},
    schema::{Phase, ValidationContext},
};

use crate::{
    config::InvalidPolicy,
    metrics as m,
    pipeline::{
        Pipeline,
        plan::{CallReport, Mended, plan_message},
        report::Summary,
    },
    server::error::GatewayError,
};

/// How a front asks its upstream again: it sends the conversation, then an assistant
/// message with `calls` (the model's invalid calls, arguments kept JSON), then one tool
/// result per `(id, feedback)`, in its own wire format, not streamed. The answer's
/// message and `finish_reason`; the failure when the upstream refused, failed or
/// answered nothing usable (the chain stops there, and the failure is reported).
pub(crate) trait ReAsk: Sync {
    fn re_ask<'a>(
        &'a self,
        calls: Vec<ToolCall>,
        feedback: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<(AssistantMessage, Option<String>), ReAskFailure>>;
}

/// A re-ask that got no answer to merge: the upstream refused it (a status: 429, 5xx
/// …), failed (unreachable, a timeout, a body that is not JSON) or answered no message.
/// The calls it asked about stay as they were: flagged unresolved (`calls.invalid`), or
/// refused (the guard). Reported in the account (`re_asks.failed`), in the stream's
/// closing report and in `x-toolmend-re-ask`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReAskFailure {
    /// What the re-ask was for: `invalid` (`calls.invalid = "re_ask"`) or `refused` (the
    /// guard's `on_flood = "feedback"`); the pipeline's to fill.
    pub asked_for: &'static str,
    /// The upstream's HTTP status, when it answered one.
    pub upstream_status: Option<u16>,
    /// The `code` the gateway answers the same fault with (`upstream_status`,
    /// `upstream_timeout`, `upstream_unreachable`, `upstream_invalid_json` …;
    /// `upstream_no_message` for an answer without an assistant message).
    pub code: &'static str,
    /// What happened, in a sentence; never the upstream's body (it may quote the
    /// request or an account).
    pub reason: String,
    /// The ids of the calls it asked about; the pipeline's to fill.
    pub calls: Vec<String>,
}

impl ReAskFailure {
    /// The failure of a re-ask the upstream answered with `e`.
    pub(crate) fn from_error(e: &GatewayError) -> Self {
        let upstream_status = match e {
            GatewayError::UpstreamStatus(f) => Some(f.status.as_u16()),
            _ => None,
        };
        ReAskFailure {
            asked_for: "",
            upstream_status,
            code: e.code(),
            reason: e.to_string(),
            calls: Vec::new(),
        }
    }

    /// The failure of a re-ask answered without an assistant message.
    pub(crate) fn no_message() -> Self {
        ReAskFailure {
            asked_for: "",
            upstream_status: None,
            code: "upstream_no_message",
            reason: "the upstream's answer held no assistant message".to_owned(),
            calls: Vec::new(),
        }
    }

    /// This failure marked with what the re-ask was for and the calls it asked about,
    /// and said at warn (target `toolmend::re_ask`) with what becomes of them.
    pub(crate) fn noted(
        mut self,
        asked_for: &'static str,
        feedback: Vec<(String, String)>,
        then: &str,
    ) -> Self {
        self.asked_for = asked_for;
        self.calls = feedback.into_iter().map(|(id, _)| id).collect();
        tracing::warn!(
            target: "toolmend::re_ask",
            code = self.code,
            upstream_status = self.upstream_status,
            calls = self.calls.len(),
            "a re-ask for {asked_for} calls failed: {}; {then}",
            self.reason
        );
        self
    }

    /// `failed for=invalid status=429 code=upstream_status` (`status=` only when the
    /// upstream answered one).
    pub(crate) fn header(&self) -> String {
        let status = self
            .upstream_status
            .map(|s| format!(" status={s}"))
            .unwrap_or_default();
        format!("failed for={}{status} code={}", self.asked_for, self.code)
    }

    /// The same as JSON, with the reason and the calls.
    pub(crate) fn to_json(&self) -> Value {
        serde_json::json!({
            "status": "failed", "for": self.asked_for, "upstream_status": self.upstream_status,
            "code": self.code, "reason": self.reason, "calls": self.calls,
        })
    }
}

/// What the chain cost, for the response's account: each re-ask is an upstream call the
/// client never sees, each correction attempt a call to the correction model.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    /// Re-asks made (upstream requests).
    pub re_asks: u32,
    /// The ids of the calls sent back, in order (a call asked twice is listed twice).
    pub re_asked: Vec<String>,
    /// Requests to the correction model.
    pub corrections: u32,
    /// The re-ask that failed (the chain stopped there), when one did; over the rounds
    /// of a round trip, the last.
    pub failed: Option<ReAskFailure>,
}

impl Pipeline {
    /// Runs the `calls.invalid` policies, in order, on the calls that stayed invalid; what
    /// is still invalid at the end goes out flagged. `history`: the request's messages
    /// (the correction model's context). Returns the time spent upstream; what it cost is
    /// added to `tally`.
    pub(crate) async fn resolve(
        &self,
        history: &[Message],
        toolbox: &Toolbox,
        mut mended: Mended,
        reask: &dyn ReAsk,
        tally: &mut Tally,
    ) -> (Mended, Duration) {
        let mut took = Duration::ZERO;
        for policy in self.calls.invalid.list() {
            if mended.unresolved().next().is_none() {
                break;
            }
            match policy {
                InvalidPolicy::ReAsk => {
                    let (m2, t) = self.re_ask(history, toolbox, mended, reask, tally).await;
                    mended = m2;
                    took += t;
                }
                InvalidPolicy::Correct => {
                    let t = Instant::now();
                    let (m2, attempts) = self.correct(history, toolbox, mended).await;
                    mended = m2;
                    tally.corrections += attempts;
                    took += t.elapsed();
                }
                InvalidPolicy::Pass => break,
            }
        }
        (mended, took)
    }

    /// Asks the correction model to fix each invalid call (concurrently), re-validating
    /// each answer. Only calls the core's plan marked correctable are sent (not a call
    /// missing a required value with no unknown key that may be its misnaming, nor a
    /// cut-off one, nor one to an unknown tool: the model would invent what was never
    /// said).
    async fn correct(
        &self,
        history: &[Message],
        toolbox: &Toolbox,
        mut mended: Mended,
    ) -> (Mended, u32) {
        let Some(corrector) = &self.corrector else {
            return (mended, 0);
        };
        let assistant_text = mended.message.text();
        // Each call's place in the message, by id: looked up once per correctable call
        // (a message may hold 100,000 calls; a scan per call would be quadratic).
        let place: HashMap<String, usize> = mended
            .message
            .tool_calls
            .iter()
            .flatten()
            .enumerate()
            .filter_map(|(k, c)| Some((c.id.clone()?, k)))
            .collect();
        let calls_sent = mended.message.tool_calls.as_deref().unwrap_or_default();
        let raw_of = |id: &str| {
            place
                .get(id)
                .and_then(|&k| calls_sent.get(k))
                .map(|c| c.function.arguments.clone())
                .unwrap_or_default()
        };
        let jobs: Vec<(usize, String)> = mended
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.outcome == CallOutcome::Feedback && c.correctable)
            .filter(|(_, c)| toolbox.get(&c.tool).is_some())
            .map(|(i, c)| (i, raw_of(&c.id)))
            .collect();
        // The core's correction stage: the one loop per call (asked, re-validated, asked
        // again with the new issues), at most `correction.max_concurrency` at a time, with
        // the configured coercions (`calls.strict`, `calls.coercions`), as the node runs it.
        let requests = jobs
            .iter()
            .filter_map(|(i, raw)| {
                let report = &mended.calls[*i];
                Some(CorrectionRequest {
                    tool: toolbox.get(&report.tool)?,
                    call_id: &report.id,
                    raw_arguments: raw,
                    arguments: report.arguments.as_ref(),
                    issues: &report.issues,
                    attempt: 1,
                    messages: history,
                    assistant_text: assistant_text.as_deref(),
                })
            })
            .collect();
        let attempts = Attempts {
            max: self.correction_retries,
            timeout: self.correction_timeout,
            coercions: &self.plan.mend.coercions,
            ctx: ValidationContext {
                messages: history,
                ..ValidationContext::new("", Phase::Correction)
            },
        };
        let done = correct_calls(corrector, requests, attempts, self.correction_concurrency).await;
        let mut attempts = 0;
        let mut fixed: Vec<(usize, Value, Vec<Fix>)> = Vec::new();
        for ((i, raw), done) in jobs.iter().zip(done) {
            m::corrections(done.attempts);
            attempts += done.attempts;
            // The model's rewrite, then what re-validating it fixed: the node's record.
            if let Some((value, checked)) = done.value {
                let before = mended.calls[*i].arguments.as_ref();
                let mut fixes = vec![Fix::replaced(
                    FixKind::ArgumentsCorrected,
                    before,
                    raw,
                    &value,
                )];
                fixes.extend(checked);
                fixed.push((*i, value, fixes));
            }
        }
        for (i, value, fixes) in fixed {
            let text = value.to_string();
            let at = place.get(&mended.calls[i].id).copied();
            if let Some(call) = at.and_then(|k| mended.message.tool_calls.as_mut()?.get_mut(k)) {
                call.function.arguments.clone_from(&text);
                call.function.name.clone_from(&mended.calls[i].tool);
            }
            let report = &mut mended.calls[i];
            report.outcome = CallOutcome::Corrected;
            report.mend = Outcome::Repaired;
            report.correctable = false;
            report.fixes.extend(fixes);
            report.arguments = Some(value);
            report.issues.clear();
            report.feedback = None;
            mended.changed = true;
        }
        (mended, attempts)
    }

    /// Re-asks the upstream model for the calls that stayed invalid (policy `re_ask`):
    /// the conversation, the model's invalid calls and their feedback go back, the client
    /// never sees them. Valid calls of the first answer are kept; the new answer's calls
    /// replace the invalid ones. The new answer is planned after the first and the
    /// feedback, so the core's id rule keeps every id unique.
    async fn re_ask(
        &self,
        history: &[Message],
        toolbox: &Toolbox,
        mut mended: Mended,
        reask: &dyn ReAsk,
        tally: &mut Tally,
    ) -> (Mended, Duration) {
        let mut took = Duration::ZERO;
        let mut asked = 0;
        while asked < self.calls.max_re_asks && mended.unresolved().next().is_some() {
            asked += 1;
            m::re_ask();
            let bad: Vec<&CallReport> = mended.unresolved().collect();
            // What the model got wrong is counted even though the client never sees it.
            Summary::count_replaced(bad.iter().copied(), toolbox, &self.labels);
            let bad_ids: HashSet<&str> = bad.iter().map(|c| c.id.as_str()).collect();
            let calls: Vec<ToolCall> = mended
                .message
                .tool_calls
                .iter()
                .flatten()
                .filter(|c| c.id.as_deref().is_some_and(|id| bad_ids.contains(id)))
                .map(|c| {
                    // Providers (vLLM) decode historical arguments: keep them JSON.
                    let args = if serde_json::from_str::<Value>(&c.function.arguments).is_ok() {
                        c.function.arguments.clone()
                    } else {
                        "{}".to_owned()
                    };
                    let mut call = ToolCall::new(String::new(), &c.function.name, args);
                    call.id.clone_from(&c.id);
                    call
                })
                .collect();
            let feedback: Vec<(String, String)> = bad
                .iter()
                .map(|c| (c.id.clone(), c.feedback.clone().unwrap_or_default()))
                .collect();
            tally.re_asks += 1;
            tally
                .re_asked
                .extend(feedback.iter().map(|(id, _)| id.clone()));
            let t = Instant::now();
            // The re-ask's span (the `otel` feature): docs/gateway.md, "Tracing".
            #[cfg(feature = "otel")]
            let asking = tracing::Instrument::instrument(
                reask.re_ask(calls.clone(), feedback.clone()),
                crate::telemetry::re_ask_span(asked, calls.len()),
            );
            #[cfg(not(feature = "otel"))]
            let asking = reask.re_ask(calls.clone(), feedback.clone());
            let (message, finish) = match asking.await {
                Ok(answer) => answer,
                Err(failure) => {
                    took += t.elapsed();
                    tally.failed = Some(failure.noted(
                        "invalid",
                        feedback,
                        "its calls go out flagged unresolved",
                    ));
                    break;
                }
            };
            took += t.elapsed();
            // What the answer follows: the conversation, the first answer as it stands (all
            // its ids taken), the feedback.
            let mut before = history.to_vec();
            before.push(Message::Assistant(mended.message.clone()));
            before.extend(feedback.into_iter().map(|(id, text)| {
                Message::Tool(ToolMessage {
                    tool_call_id: id,
                    content: Content::Text(text),
                    extra: Default::default(),
                })
            }));
            let mut again = plan_message(&message, &before, toolbox, &self.plan, finish.as_deref());
            flag_values_lost(&calls, &mut again);
            let replaced: HashSet<String> = calls.iter().filter_map(|c| c.id.clone()).collect();
            mended = merge(mended, again, &replaced, false);
        }
        (mended, took)
    }
}

/// A re-asked answer that keeps fewer of the values the model first sent (three symbols
/// merged into one call, "fixed" by keeping one) is not clean: its calls of that tool go
/// back as feedback naming what was lost (asked again, or flagged at the end).
fn flag_values_lost(asked: &[ToolCall], again: &mut Mended) {
    /// Lost values named on each call of the tool (the first ones; a message may hold
    /// 100,000 calls, and each does not need every loss of its siblings).
    const NAMED: usize = 16;
    let args_of = |c: &ToolCall| serde_json::from_str::<Value>(&c.function.arguments).ok();
    // Per tool, every first reading and every new answer, each gathered once: one
    // comparison per tool, linear in the calls.
    let mut firsts: HashMap<&str, Vec<Value>> = HashMap::new();
    for c in asked {
        if let Some(v) = args_of(c) {
            firsts.entry(c.function.name.as_str()).or_default().push(v);
        }
    }
    let mut answers: HashMap<&str, Vec<Value>> = HashMap::new();
    for c in again.message.tool_calls.as_deref().unwrap_or_default() {
        if firsts.contains_key(c.function.name.as_str())
            && let Some(v) = args_of(c)
        {
            answers.entry(c.function.name.as_str()).or_default().push(v);
        }
    }
    let mut lost_by_tool: HashMap<String, Vec<toolmend::Issue>> = HashMap::new();
    for (tool, firsts) in firsts {
        let Some(answers) = answers.remove(tool) else {
            continue;
        };
        let mut lost =
            toolmend::mend::values_lost_issues(&Value::Array(firsts), &Value::Array(answers));
        // Paths start with the first call's index in the list compared: drop it, so the
        // path is the field's, as the model wrote it.
        for issue in &mut lost {
            let rest = issue
                .path
                .get(1..)
                .and_then(|p| p.find('/'))
                .map_or("", |i| &issue.path[i + 1..]);
            issue.path = rest.to_owned();
        }
        lost.truncate(NAMED);
        if !lost.is_empty() {
            lost_by_tool.insert(tool.to_owned(), lost);
        }
    }
    if lost_by_tool.is_empty() {
        return;
    }
    for report in &mut again.calls {
        let Some(lost) = lost_by_tool.get(&report.tool) else {
            continue;
        };
        if report.outcome != CallOutcome::Executed {
            continue;
        }
        report.issues.extend(lost.iter().cloned());
        report.outcome = CallOutcome::Feedback;
        report.mend = Outcome::Feedback;
        report.feedback = Some(toolmend::feedback::render(&report.tool, &report.issues).text);
    }
}

/// The one merge of a re-asked answer into the first, for both re-asks (invalid calls,
/// `calls.invalid = "re_ask"`; refused calls, the guard's `on_flood = "feedback"`): the
/// first answer's calls but the `replaced` ones, then the re-asked calls (their ids
/// already unique: the re-asked answer was planned after the first). The replaced calls'
/// reports are dropped (invalid: counted as replaced already) or kept (`keep_replaced`:
/// refused, reported `flooded`). The re-ask's text never lands in a message whose calls
/// it did not produce: when calls of the first answer are kept, the content stays the
/// first answer's (the re-ask's text, "Done.", would speak for calls it never made); when
/// every call was replaced, its text follows the first's. Linear in the calls.
pub(crate) fn merge(
    first: Mended,
    again: Mended,
    replaced: &HashSet<String>,
    keep_replaced: bool,
) -> Mended {
    let added_text = again.message.text().filter(|t| !t.trim().is_empty());
    let mut message = first.message.clone();
    let mut calls: Vec<_> = message
        .tool_calls
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !c.id.as_deref().is_some_and(|id| replaced.contains(id)))
        .collect();
    let mut reports: Vec<CallReport> = first
        .calls
        .into_iter()
        .filter(|c| {
            keep_replaced || !(c.outcome == CallOutcome::Feedback && replaced.contains(&c.id))
        })
        .collect();
    let kept_first = !calls.is_empty();
    calls.extend(again.message.tool_calls.unwrap_or_default());
    reports.extend(again.calls);
    let mut message_fixes = first.message_fixes;
    message_fixes.extend(again.message_fixes);
    // The model may answer the feedback with text (a question for the user): it reaches
    // the client, unless the message carries calls of the first answer, which the text
    // would then be read as speaking for. An empty `tool_calls` is dropped (providers
    // refuse `[]`).
    if let Some(text) = added_text.as_ref().filter(|_| !kept_first) {
        let joined = match message.text().filter(|t| !t.trim().is_empty()) {
            Some(first) => format!("{first}\n{text}"),
            None => text.clone(),
        };
        message.content = Some(Some(Content::Text(joined)));
    }
    message.tool_calls = (!calls.is_empty()).then_some(calls);
    Mended {
        message,
        calls: reports,
        message_fixes,
        changed: true,
        added_text,
    }
}
