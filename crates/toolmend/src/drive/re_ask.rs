//! Asking the model again, for both re-asks (invalid calls; refused calls): the one rule
//! for the history it is shown, and the one merge of its answer into the first.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{CallReport, Resolved, Stages, Tally, Turn, observed_plan};
use crate::{
    conversation::{AssistantMessage, Content, Message, ToolCall, ToolMessage},
    feedback,
    future::BoxFuture,
    mend::Outcome,
    message::CallOutcome,
};

/// What a re-ask sends: the model's calls (arguments kept JSON) and one result per
/// `(id, text)`, after the conversation the front holds.
#[derive(Debug, Clone)]
pub struct ReAskRequest {
    /// Which re-ask of this answer it is (from 1).
    pub round: u32,
    /// The calls shown back to the model.
    pub calls: Vec<ToolCall>,
    /// One result per call: its feedback or refusal.
    pub results: Vec<(String, String)>,
}

/// The model's new answer.
#[derive(Debug, Clone)]
pub struct ReAnswer {
    /// Its message.
    pub message: AssistantMessage,
    /// It stopped at its token limit.
    pub cut_off: bool,
}

/// How a front asks its model again: the conversation, then an assistant message with
/// the request's calls, then their results, in its own wire format, not streamed.
pub trait ReAsk: Sync {
    /// The answer, or why there is none to merge.
    fn re_ask(&self, request: ReAskRequest) -> BoxFuture<'_, Result<ReAnswer, ReAskFailure>>;
}

/// A re-ask that got no answer to merge: the model's server refused it (a status: 429,
/// 5xx …), failed (unreachable, a timeout, a body that is not JSON) or answered no
/// message. The calls it asked about stay as they were: flagged unresolved, or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReAskFailure {
    /// What the re-ask was for: `invalid` or `refused`; the driver fills it.
    pub asked_for: &'static str,
    /// The server's HTTP status, when it answered one.
    pub upstream_status: Option<u16>,
    /// The error code the front answers the same fault with (`upstream_status`,
    /// `upstream_timeout`, `upstream_no_message` …).
    pub code: &'static str,
    /// What happened, in a sentence; never the server's body (it may quote the request).
    pub reason: String,
    /// The ids of the calls it asked about; the driver fills them.
    pub calls: Vec<String>,
}

impl ReAskFailure {
    /// A failure with `code` and `reason`.
    pub fn new(
        code: &'static str,
        upstream_status: Option<u16>,
        reason: impl Into<String>,
    ) -> Self {
        ReAskFailure {
            asked_for: "",
            upstream_status,
            code,
            reason: reason.into(),
            calls: Vec::new(),
        }
    }

    /// The failure of a re-ask answered without an assistant message.
    pub fn no_message() -> Self {
        Self::new(
            "upstream_no_message",
            None,
            "the upstream's answer held no assistant message",
        )
    }

    /// This failure marked with what the re-ask was for and the calls it asked about,
    /// and said at warn (target `toolmend::re_ask`) with what becomes of them.
    pub(super) fn noted(
        mut self,
        asked_for: &'static str,
        results: &[(String, String)],
        then: &str,
    ) -> Self {
        self.asked_for = asked_for;
        self.calls = results.iter().map(|(id, _)| id.clone()).collect();
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
    /// server answered one).
    pub fn header(&self) -> String {
        let status = self
            .upstream_status
            .map(|s| format!(" status={s}"))
            .unwrap_or_default();
        format!("failed for={}{status} code={}", self.asked_for, self.code)
    }

    /// The same as JSON, with the reason and the calls.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "status": "failed", "for": self.asked_for, "upstream_status": self.upstream_status,
            "code": self.code, "reason": self.reason, "calls": self.calls,
        })
    }
}

/// The history a re-asked answer follows: the conversation, the calls shown back, their
/// results (so every id stays taken, and the guard's loop rules see them).
pub(super) fn history_after(
    before: &[Message],
    shown: AssistantMessage,
    results: &[(String, String)],
) -> Vec<Message> {
    let mut next = Vec::with_capacity(before.len() + 1 + results.len());
    next.extend_from_slice(before);
    next.push(Message::Assistant(shown));
    next.extend(results.iter().map(|(id, text)| {
        Message::Tool(ToolMessage {
            call_id: id.clone(),
            content: Content::Text(text.clone()),
            extra: Default::default(),
        })
    }));
    next
}

/// The calls of `resolved.message` with these ids, arguments kept JSON (providers such
/// as vLLM decode historical arguments).
pub(super) fn calls_shown(resolved: &Resolved, ids: &HashSet<&str>) -> Vec<ToolCall> {
    resolved
        .message
        .tool_calls
        .iter()
        .flatten()
        .filter(|c| c.id.as_deref().is_some_and(|id| ids.contains(id)))
        .map(|c| {
            let args = if serde_json::from_str::<Value>(&c.arguments).is_ok() {
                c.arguments.clone()
            } else {
                "{}".to_owned()
            };
            let mut call = ToolCall::new(String::new(), &c.name, args);
            call.id.clone_from(&c.id);
            call
        })
        .collect()
}

/// The re-ask step of the invalid chain: the model is shown its invalid calls and their
/// feedback (the client never sees them); valid calls of the first answer are kept, the
/// new answer's calls replace the invalid ones. The new answer is planned after the first
/// and the feedback, so the one id rule keeps every id unique.
pub(super) async fn invalid(
    turn: Turn<'_>,
    mut resolved: Resolved,
    stages: &Stages<'_>,
    tally: &mut Tally,
) -> Resolved {
    let Some(asker) = stages.re_ask else {
        return resolved;
    };
    let mut asked = 0;
    while asked < stages.max_re_asks && resolved.unresolved().next().is_some() {
        asked += 1;
        let bad: Vec<&CallReport> = resolved.unresolved().collect();
        stages.observer.re_asking(&bad);
        let bad_ids: HashSet<&str> = bad.iter().map(|c| c.id.as_str()).collect();
        let calls = calls_shown(&resolved, &bad_ids);
        let results: Vec<(String, String)> = bad
            .iter()
            .map(|c| (c.id.clone(), c.feedback.clone().unwrap_or_default()))
            .collect();
        tally.re_asks += 1;
        tally
            .re_asked
            .extend(results.iter().map(|(id, _)| id.clone()));
        let request = ReAskRequest {
            round: asked,
            calls: calls.clone(),
            results: results.clone(),
        };
        let answer = match asker.re_ask(request).await {
            Ok(answer) => answer,
            Err(failure) => {
                tally.failed =
                    Some(failure.noted("invalid", &results, "its calls go out flagged unresolved"));
                break;
            }
        };
        // What the answer follows: the conversation, the first answer as it stands (all
        // its ids taken), the feedback.
        let before = history_after(turn.history, resolved.message.clone(), &results);
        let again_turn = Turn {
            message: &answer.message,
            history: &before,
            later: &[],
            cut_off: answer.cut_off,
            state: turn.state,
            place: None,
        };
        let mut again = observed_plan(again_turn, stages);
        flag_values_lost(&calls, &mut again);
        let replaced: HashSet<String> = calls.iter().filter_map(|c| c.id.clone()).collect();
        resolved = merge(resolved, again, &replaced, false);
    }
    resolved
}

/// A re-asked answer that keeps fewer of the values the model first sent (three symbols
/// merged into one call, "fixed" by keeping one) is not clean: its calls of that tool go
/// back as feedback naming what was lost (asked again, or flagged at the end).
fn flag_values_lost(asked: &[ToolCall], again: &mut Resolved) {
    /// Lost values named on each call of the tool (the first ones; a message may hold
    /// 100,000 calls, and each does not need every loss of its siblings).
    const NAMED: usize = 16;
    let args_of = |c: &ToolCall| serde_json::from_str::<Value>(&c.arguments).ok();
    // Per tool, every first reading and every new answer, each gathered once: one
    // comparison per tool, linear in the calls.
    let mut firsts: HashMap<&str, Vec<Value>> = HashMap::new();
    for c in asked {
        if let Some(v) = args_of(c) {
            firsts.entry(c.name.as_str()).or_default().push(v);
        }
    }
    let mut answers: HashMap<&str, Vec<Value>> = HashMap::new();
    for c in again.message.tool_calls.as_deref().unwrap_or_default() {
        if firsts.contains_key(c.name.as_str())
            && let Some(v) = args_of(c)
        {
            answers.entry(c.name.as_str()).or_default().push(v);
        }
    }
    let mut lost_by_tool: HashMap<String, Vec<crate::Issue>> = HashMap::new();
    for (tool, firsts) in firsts {
        let Some(answers) = answers.remove(tool) else {
            continue;
        };
        let mut lost =
            crate::mend::values_lost_issues(&Value::Array(firsts), &Value::Array(answers));
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
        report.feedback = Some(feedback::render(&report.tool, &report.issues).text);
    }
}

/// The one merge of a re-asked answer into the first, for both re-asks: the first
/// answer's calls but the `replaced` ones, then the re-asked calls (their ids already
/// unique: the re-asked answer was planned after the first). The replaced calls' reports
/// are dropped (invalid: counted as replaced already) or kept (`keep_replaced`: refused,
/// reported `flooded`). The re-ask's text never lands in a message whose calls it did not
/// produce: when calls of the first answer are kept, the content stays the first
/// answer's (the re-ask's text, "Done.", would speak for calls it never made); when every
/// call was replaced, its text follows the first's. Linear in the calls.
pub fn merge(
    first: Resolved,
    again: Resolved,
    replaced: &HashSet<String>,
    keep_replaced: bool,
) -> Resolved {
    let added_text = again.message.text().filter(|t| !t.trim().is_empty());
    let mut message = first.message;
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
    Resolved {
        message,
        calls: reports,
        message_fixes,
        answered: first.answered,
        changed: true,
        added_text,
        text_calls: Vec::new(),
    }
}
