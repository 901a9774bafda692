//! The guard stage of the response path, front-neutral: the calls of the model's answer
//! that may run go through the core's [`RuleGuard`] (one check per message: the history
//! rules, then one store round trip), and `guard.on_flood` says what a refusal does:
//! `feedback` (the refused calls are answered with the guard's message and the model is
//! asked again without them), `reject` (429 / 400) or `flag` (passed, flagged).

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::http::HeaderMap;
use serde_json::Value;
use toolmend::{
    Toolbox,
    guard::{
        Action, GuardContext, GuardRequest, GuardStore, MemoryStore, Rule, RuleGuard,
        fingerprint::result_hash, stage,
    },
    message::{CallOutcome, TimeOrderedIds},
    protocol::{AssistantMessage, Content, Message, ToolCall, ToolMessage},
};

use crate::{
    config::{self, FloodPolicy, SessionSource},
    metrics as m,
    pipeline::{
        Pipeline,
        plan::{Mended, plan_message},
        report::Summary,
        resolve::{ReAsk, ReAskFailure, merge},
    },
    server::error::GatewayError,
};

/// The header a client names its session in.
pub(crate) const SESSION_HEADER: &str = "x-toolmend-session";

/// The configured guard and how the gateway applies it.
#[derive(Debug)]
pub(crate) struct GatewayGuard {
    /// Shared with the tool node of `/v1/tools/execute`: one set of counts.
    guard: Arc<RuleGuard>,
    policy: FloodPolicy,
    session_from: Vec<SessionSource>,
    metadata_key: String,
    max_re_asks: u32,
    fresh_ids: TimeOrderedIds,
    store: &'static str,
}

impl GatewayGuard {
    /// The guard of `[guard]`, or `None` when no rule is set. `store`: the shared store
    /// the caller built (`guard.store = "redis"`); `None` keeps the counts in memory.
    /// `cfg.rules` already holds the limits the server-side tools declare
    /// ([`merged_rules`]).
    pub(crate) fn new(
        cfg: &config::Guard,
        store: Option<Arc<dyn GuardStore>>,
    ) -> Result<Option<Self>, String> {
        if !cfg.rules.any_rule() {
            return Ok(None);
        }
        let mut guard = RuleGuard::new(cfg.rules.clone())?
            .fail_mode(cfg.fail)
            .timeout(Duration::from_millis(cfg.timeout_ms));
        if cfg.rules.needs_store() {
            guard = match store {
                Some(s) => guard.with_store(s),
                None => guard.with_store(MemoryStore::new(cfg.max_keys)),
            };
        }
        let store = guard.store_name().unwrap_or("none");
        tracing::info!(
            store,
            on_flood = cfg.on_flood.as_str(),
            fail = ?cfg.fail,
            timeout_ms = cfg.timeout_ms,
            tools_with_rules = cfg.rules.tools.len(),
            "guard on"
        );
        Ok(Some(GatewayGuard {
            guard: Arc::new(guard),
            policy: cfg.on_flood,
            session_from: cfg.session_from.clone(),
            metadata_key: cfg.metadata_key.clone(),
            max_re_asks: cfg.max_re_asks,
            fresh_ids: TimeOrderedIds::new(),
            store,
        }))
    }

    /// The rule guard itself (its store included), for a tool node.
    pub(crate) fn rule_guard(&self) -> Arc<RuleGuard> {
        Arc::clone(&self.guard)
    }

    /// The request's session and where it came from, by `guard.session_from`. With an
    /// `[access]` client, the client's name is the prefix of whatever source found it
    /// (`c:ci/h:alice`), so two clients never share a session; `client` is the name alone.
    pub(crate) fn session(
        &self,
        headers: &HeaderMap,
        request: &Value,
    ) -> Option<(String, SessionSource)> {
        self.session_of(headers, request).map(|(s, src)| match src {
            SessionSource::Client => (s, src),
            _ => (client_scoped(s), src),
        })
    }

    fn session_of(&self, headers: &HeaderMap, request: &Value) -> Option<(String, SessionSource)> {
        let text = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        self.session_from.iter().find_map(|&src| {
            let found = match src {
                SessionSource::Header => headers
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| format!("h:{s}")),
                SessionSource::User => text(request.get("user")).map(|s| format!("u:{s}")),
                SessionSource::Metadata => {
                    text(request.pointer(&format!("/metadata/{}", self.metadata_key)))
                        .map(|s| format!("m:{s}"))
                }
                SessionSource::Client => {
                    crate::server::access::current_client().map(|c| format!("c:{c}"))
                }
                // Only a hash of the key is ever kept.
                SessionSource::ApiKey => headers
                    .get(axum::http::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|k| format!("k:{:016x}", result_hash(k))),
            };
            found.map(|s| (s, src))
        })
    }
}

/// `session` within the request's `[access]` client, if any: `c:NAME/` in front, so two
/// clients never share a session whatever they name it.
pub(crate) fn client_scoped(session: String) -> String {
    match crate::server::access::current_client() {
        Some(client) => format!("c:{client}/{session}"),
        None => session,
    }
}

/// `rules` with the flood limits tools declare on themselves (`[tools.limits]` of the
/// server-side tools) merged in, the configuration's own entry for a tool winning key by
/// key (as `ToolNodeBuilder::rule_guard` merges them).
///
/// # Errors
///
/// A limit that cannot work, naming the tool.
pub(crate) fn merged_rules(
    rules: &toolmend::guard::GuardConfig,
    tools: &[(String, toolmend::guard::ToolRules)],
) -> Result<toolmend::guard::GuardConfig, String> {
    if tools.is_empty() {
        return Ok(rules.clone());
    }
    let mut guard = RuleGuard::new(rules.clone())?;
    for (name, limits) in tools {
        guard
            .declare_tool(name, limits.clone())
            .map_err(|e| format!("tool {name:?}: [tools.limits]: {e}"))?;
    }
    Ok(guard.config().clone())
}

/// What the guard did to one response (the `x-toolmend-guard` header, the stream's
/// closing report).
#[derive(Debug, Default, Clone)]
pub(crate) struct GuardSummary {
    /// Calls checked.
    pub checked: usize,
    /// Calls refused (answered with the guard's message, not sent to the client).
    pub refused: usize,
    /// Decisions that refuse nothing: observations and shadow decisions.
    pub observed: usize,
    /// Rules that decided something, each once, in order.
    pub rules: Vec<&'static str>,
    /// Re-asks made for refused calls.
    pub re_asks: u32,
    /// Refused calls passed through (`on_flood = "flag"`).
    pub flagged: usize,
    /// Ids renamed because the session had used them.
    pub renamed: usize,
    /// Where the session came from (`none` when nowhere).
    pub session: &'static str,
    /// The policy.
    pub policy: &'static str,
    /// The guard's re-ask that failed (the upstream refused it or failed), when one did.
    pub re_ask_failed: Option<ReAskFailure>,
}

impl GuardSummary {
    /// The `x-toolmend-guard` header value, when the guard ran.
    pub(crate) fn header(&self) -> Option<String> {
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
    pub(crate) fn to_json(&self) -> Value {
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
struct Refusal {
    id: String,
    reason: String,
    action: Action,
    retry_after: Option<Duration>,
}

impl Pipeline {
    /// The guard stage for the answer `mended` to a request whose messages are
    /// `history`, in `session`; what it did goes into `report.guard`. Returns the answer
    /// to send on, or the rejection (carrying `report`'s `x-toolmend-guard` and
    /// `x-toolmend-re-ask`: every response the guard checked says what it did).
    pub(crate) async fn guard(
        &self,
        session: Option<(&str, SessionSource)>,
        history: &[Message],
        toolbox: &Toolbox,
        mended: Mended,
        reask: &dyn ReAsk,
        report: &mut Summary,
    ) -> Result<Mended, GatewayError> {
        let out = self
            .guard_inner(session, history, toolbox, mended, reask, &mut report.guard)
            .await;
        out.map_err(|r| r.into_error(report.refusal_headers()))
    }

    async fn guard_inner(
        &self,
        session: Option<(&str, SessionSource)>,
        history: &[Message],
        toolbox: &Toolbox,
        mut mended: Mended,
        reask: &dyn ReAsk,
        summary: &mut GuardSummary,
    ) -> Result<Mended, Rejection> {
        let Some(g) = &self.guard else {
            return Ok(mended);
        };
        summary.policy = g.policy.as_str();
        summary.session = session.map_or("none", |(_, s)| s.as_str());
        let session = session.map(|(s, _)| s);
        let mut before: Option<Vec<Message>> = None;
        loop {
            let (refused, checked) = self
                .guard_once(
                    g,
                    session,
                    before.as_deref().unwrap_or(history),
                    &mut mended,
                    summary,
                )
                .await;
            if refused.is_empty() {
                return Ok(mended);
            }
            m::guard_flood(g.policy.as_str());
            if g.policy == FloodPolicy::Flag {
                summary.flagged += refused.len();
                return Ok(mended);
            }
            summary.refused += refused.len();
            if g.policy == FloodPolicy::Reject {
                return Err(Rejection::new(refused, checked, None));
            }
            // The refused calls leave the answer; their reports stay (outcome `flooded`).
            let by_id: HashMap<&str, &Refusal> =
                refused.iter().map(|r| (r.id.as_str(), r)).collect();
            for c in &mut mended.calls {
                if by_id.contains_key(c.id.as_str()) {
                    c.outcome = CallOutcome::Flooded;
                }
            }
            let sent = mended.message.tool_calls.take().unwrap_or_default();
            let (out, kept): (Vec<ToolCall>, Vec<ToolCall>) = sent
                .into_iter()
                .partition(|c| c.id.as_deref().is_some_and(|id| by_id.contains_key(id)));
            mended.changed = true;
            if !kept.is_empty() {
                // The other calls go on to the client; the refused ones are reported.
                mended.message.tool_calls = Some(kept);
                return Ok(mended);
            }
            if summary.re_asks >= g.max_re_asks {
                // `feedback` refused again (or allowed no re-ask): the model was told and
                // called refused tools anyway; the client gets the refusal, not retried.
                let asked = (summary.re_asks > 0).then(|| {
                    format!(
                        "the model was asked again {} time(s) (guard.max_re_asks = {}) with \
                         the refusal as the calls' result and called refused tools again",
                        summary.re_asks, g.max_re_asks
                    )
                });
                return Err(Rejection::new(refused, checked, asked));
            }
            summary.re_asks += 1;
            m::re_ask();
            let feedback: Vec<(String, String)> = refused
                .iter()
                .map(|r| (r.id.clone(), r.reason.clone()))
                .collect();
            let (message, finish) = match reask.re_ask(out.clone(), feedback.clone()).await {
                Ok(answer) => answer,
                Err(failure) => {
                    let failure =
                        failure.noted("refused", feedback, "the refusal goes to the client");
                    let why = format!("the model could not be asked again: {}", failure.reason);
                    summary.re_ask_failed = Some(failure);
                    return Err(Rejection::new(refused, checked, Some(why)));
                }
            };
            // What the new answer follows: the conversation, the refused calls, the
            // guard's answers to them (so the loop rules see them too).
            let mut next = before.take().unwrap_or_else(|| history.to_vec());
            next.push(Message::Assistant(AssistantMessage {
                content: Some(None),
                tool_calls: Some(out),
                ..AssistantMessage::default()
            }));
            next.extend(feedback.into_iter().map(|(id, text)| {
                Message::Tool(ToolMessage {
                    tool_call_id: id,
                    content: Content::Text(text),
                    extra: Default::default(),
                })
            }));
            let again = plan_message(&message, &next, toolbox, &self.plan, finish.as_deref());
            // The refused calls' reports stay (`flooded`); their calls left the answer.
            let replaced = by_id.keys().map(|id| (*id).to_owned()).collect();
            mended = merge(mended, again, &replaced, true);
            before = Some(next);
        }
    }

    /// One check of `mended`'s runnable calls; applies renames and records decisions.
    /// The refusals, and how many calls were checked.
    async fn guard_once(
        &self,
        g: &GatewayGuard,
        session: Option<&str>,
        history: &[Message],
        mended: &mut Mended,
        summary: &mut GuardSummary,
    ) -> (Vec<Refusal>, usize) {
        let sent = mended.message.tool_calls.as_deref().unwrap_or_default();
        let place: HashMap<&str, usize> = sent
            .iter()
            .enumerate()
            .filter_map(|(k, c)| Some((c.id.as_deref()?, k)))
            .collect();
        let asked: Vec<(usize, usize, Value)> = mended
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.outcome.may_run())
            .filter_map(|(i, c)| {
                let k = *place.get(c.id.as_str())?;
                let args =
                    serde_json::from_str::<Value>(&sent[k].function.arguments).unwrap_or_default();
                Some((i, k, args))
            })
            .collect();
        if asked.is_empty() {
            return (Vec::new(), 0);
        }
        let checked = asked.len();
        summary.checked += checked;
        let t = Instant::now();
        let verdicts = {
            let requests: Vec<GuardRequest<'_>> = asked
                .iter()
                .map(|(i, _, args)| GuardRequest {
                    call_id: &mended.calls[*i].id,
                    tool: &mended.calls[*i].tool,
                    arguments: args,
                })
                .collect();
            // The core's guard stage: one verdict per call, a panic or a guard past its
            // limit refusing (a call is never run unchecked).
            let ctx = GuardContext { session, history };
            stage::verdicts(&*g.guard, ctx, &requests, g.guard.stage_limit()).await
        };
        m::guard_check(g.store, t.elapsed());
        let mut refused = Vec::new();
        for ((i, k, _), v) in asked.into_iter().zip(verdicts) {
            for d in &v.decisions {
                m::guard_decision(d.rule.as_str(), d.action.as_str(), d.shadow);
                if d.rule == Rule::StoreUnavailable {
                    let mode = if d.refuses() { "closed" } else { "open" };
                    m::guard_fail_mode(g.store, mode);
                }
                summary.note_rule(d.rule.as_str());
                if !d.refuses() {
                    summary.observed += 1;
                }
            }
            if v.id_reused {
                let new = g.fresh_ids.next_id();
                let report = &mut mended.calls[i];
                report
                    .fixes
                    .push(toolmend::message::reused_id_fix(&report.id, &new));
                report.id.clone_from(&new);
                if let Some(calls) = &mut mended.message.tool_calls {
                    calls[k].id = Some(new);
                }
                mended.changed = true;
                summary.renamed += 1;
            }
            if v.action > Action::Allow {
                refused.push(Refusal {
                    id: mended.calls[i].id.clone(),
                    reason: v.reason.unwrap_or_default(),
                    action: v.action,
                    retry_after: v.retry_after,
                });
            }
        }
        (refused, checked)
    }
}

/// Refused calls that cannot be answered for the client: the rejection, before the
/// headers of what the guard did are known.
struct Rejection {
    refused: Vec<Refusal>,
    /// Calls of the answer checked (refused and admitted).
    checked: usize,
    /// Why `feedback` could not answer it (asked again in vain, or the re-ask failed).
    why: Option<String>,
}

impl Rejection {
    fn new(refused: Vec<Refusal>, checked: usize, why: Option<String>) -> Self {
        Rejection {
            refused,
            checked,
            why,
        }
    }

    /// The answer to the client (429 `toolmend_tool_flood`, 400 `toolmend_tool_loop`):
    /// the gravest refusal's reason, then how many of the answer's calls were refused and
    /// admitted (admitted calls were counted by the guard, yet not sent: the answer is
    /// refused whole), then why `feedback` could not help.
    fn into_error(self, headers: Vec<(&'static str, String)>) -> GatewayError {
        let refused = &self.refused;
        let ends_run = refused.iter().any(|r| r.action >= Action::End);
        let mut message = refused
            .iter()
            .max_by_key(|r| r.action)
            .map(|r| r.reason.clone())
            .unwrap_or_default();
        let admitted = self.checked.saturating_sub(refused.len());
        if self.checked > 1 {
            message.push_str(&format!(
                " ({} of the answer's {} calls refused, {admitted} admitted; none was sent)",
                refused.len(),
                self.checked
            ));
        }
        if let Some(why) = self.why {
            message.push_str(&format!(" ({why})"));
        }
        GatewayError::Flooded {
            message,
            retry_after: refused.iter().filter_map(|r| r.retry_after).max(),
            ends_run,
            headers,
        }
    }
}
