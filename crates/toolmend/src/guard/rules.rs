//! [`RuleGuard`]: the configured rules over a store. Per message: the history rules first
//! (no store), then one store admission for the calls they let through, then one verdict
//! per call, the most severe non-shadow decision winning.

use std::{collections::BTreeMap, fmt, sync::Arc, time::Duration};

use super::{
    Action, Decision, FLOOD_PREFIX, Guard, GuardContext, GuardRequest, Rule, UNCHECKED_PREFIX,
    Verdict,
    config::{Budget, ExitBehavior, FailMode, GuardConfig, ToolRules, Window},
    fail_log::{FAIL_LOG_EVERY, FailLog},
    fingerprint::fingerprint,
    loops::{NewCall, RunIndex, run_number},
    store::{Admission, AdmitCall, CallAnswer, Check, GuardStore, MemoryStore, Scope, StoreError},
};
use crate::future::BoxFuture;

/// The configured guard.
///
/// ```
/// use serde_json::json;
/// use toolmend::guard::{
///     Action, FLOOD_PREFIX, Guard, GuardConfig, GuardContext, GuardRequest, RuleGuard, Window,
/// };
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// // `send_email`: at most 2 per minute per session (`[guard.tools.send_email.session]`).
/// let mut config = GuardConfig::default();
/// config.tools.entry("send_email".into()).or_default().session = Some(Window::new(2, 60.0));
/// let guard = RuleGuard::new(config).unwrap();
/// let args = json!({"to": "ana@example.org"});
/// let calls: Vec<GuardRequest> = ["c1", "c2", "c3"]
///     .iter()
///     .map(|id| GuardRequest { call_id: id, tool: "send_email", arguments: &args })
///     .collect();
/// let ctx = GuardContext { session: Some("thread-42"), history: &[] };
/// let verdicts = guard.check(ctx, &calls).await;
/// assert!(verdicts[0].is_allowed() && verdicts[1].is_allowed());
/// assert_eq!(verdicts[2].action, Action::Deny);
/// assert!(verdicts[2].reason.as_deref().unwrap().starts_with(FLOOD_PREFIX));
/// # });
/// ```
///
/// In a tool node: `ToolNode::builder(registry).rule_guard(guard)` (with the limits tools
/// declare on themselves), sessions from `InvokeOptions::session`.
pub struct RuleGuard {
    config: Arc<GuardConfig>,
    /// The configured tools' names, shared by every check that names one.
    names: BTreeMap<String, Arc<str>>,
    store: Option<Arc<dyn GuardStore>>,
    fail: FailMode,
    timeout: Duration,
    /// The store's failures, said once per change and then at most every 30 s.
    fail_log: FailLog,
}

impl fmt::Debug for RuleGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleGuard")
            .field("config", &self.config)
            .field("store", &self.store.as_ref().map(|s| s.name()))
            .field("fail", &self.fail)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Default time a store may take per decision.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(20);

impl RuleGuard {
    /// The rules of `config` over an in-memory store (when a rule needs one), failing
    /// open after [`DEFAULT_TIMEOUT`]. The error names the first setting that cannot work.
    pub fn new(config: GuardConfig) -> Result<Self, String> {
        config.validate()?;
        let store: Option<Arc<dyn GuardStore>> = if config.needs_store() {
            Some(Arc::new(MemoryStore::default()))
        } else {
            None
        };
        Ok(RuleGuard {
            names: names_of(&config),
            config: Arc::new(config),
            store,
            fail: FailMode::Open,
            timeout: DEFAULT_TIMEOUT,
            fail_log: FailLog::new(FAIL_LOG_EVERY),
        })
    }

    /// Keeps the counted state in `store` (Redis, to share it between instances).
    #[must_use]
    pub fn with_store(mut self, store: impl GuardStore + 'static) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// What to do when the store gives no answer in time.
    #[must_use]
    pub fn fail_mode(mut self, fail: FailMode) -> Self {
        self.fail = fail;
        self
    }

    /// How long the store may take per decision.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a whole check may take before the guard stage refuses its calls
    /// ([`super::stage::verdicts`]): the store's timeout and a margin, so that a slow
    /// store is judged by the fail mode, and only a guard that hangs past it (a local
    /// store that never answers) by the stage.
    pub fn stage_limit(&self) -> Duration {
        self.timeout + super::stage::MARGIN
    }

    /// While the store gives no answer, the pause between two reminders (one WARN when it
    /// stops answering, then at most one per `every`, each with how many decisions took
    /// the fail mode meanwhile; one INFO when it answers again). Default 30 s.
    #[must_use]
    pub fn fail_log_every(mut self, every: Duration) -> Self {
        self.fail_log = FailLog::new(every);
        self
    }

    /// Adds limits a tool declares on itself; the configuration's own entry for the
    /// tool, if any, wins key by key.
    pub fn declare_tool(&mut self, tool: &str, rules: ToolRules) -> Result<(), String> {
        let mut config = (*self.config).clone();
        let entry = config.tools.entry(tool.to_owned()).or_default();
        let merged = ToolRules {
            session: entry.session.take().or(rules.session),
            global: entry.global.take().or(rules.global),
            limits: entry.limits.take().or(rules.limits),
            duplicate: entry.duplicate.or(rules.duplicate),
            repeat: entry.repeat.take().or(rules.repeat),
        };
        *entry = merged;
        config.validate()?;
        if config.needs_store() && self.store.is_none() {
            self.store = Some(Arc::new(MemoryStore::default()));
        }
        self.names = names_of(&config);
        self.config = Arc::new(config);
        Ok(())
    }

    /// The rules.
    pub fn config(&self) -> &GuardConfig {
        &self.config
    }

    /// The store's name, if the rules use one.
    pub fn store_name(&self) -> Option<&'static str> {
        self.store.as_ref().map(|s| s.name())
    }

    /// The checks one call needs from the store.
    fn checks(&self, tool: &str, fp: u64, session: bool, run: u64) -> Vec<Check> {
        let c = &self.config;
        let mut out = Vec::with_capacity(8);
        let window = |rule, scope, w: &Window| Check {
            rule,
            scope,
            limit: w.limit,
            window_ms: Some(w.window_ms()),
            shadow: w.shadow,
        };
        let rules = c.tools.get(tool);
        let name = || -> Arc<str> {
            self.names
                .get(tool)
                .cloned()
                .unwrap_or_else(|| Arc::from(tool))
        };
        if let Some(g) = rules.and_then(|r| r.global.as_ref()) {
            out.push(window(Rule::ToolGlobalWindow, Scope::Tool(name()), g));
        }
        if !session {
            return out;
        }
        if let Some(w) = &c.session {
            out.push(window(Rule::SessionWindow, Scope::Session, w));
        }
        if let Some(w) = rules.and_then(|r| r.session.as_ref()) {
            out.push(window(Rule::ToolWindow, Scope::SessionTool(name()), w));
        }
        if let Some(d) = c.duplicate_for(tool) {
            out.push(Check {
                rule: Rule::Duplicate,
                scope: Scope::Call(fp),
                limit: 1,
                window_ms: Some(super::config::Window::new(1, d.window_secs).window_ms()),
                shadow: d.shadow,
            });
        }
        let budget = |out: &mut Vec<Check>, b: &Budget, thread: Scope, run_scope: Scope| {
            if let Some(l) = b.thread_limit {
                out.push(Check {
                    rule: Rule::ThreadLimit,
                    scope: thread,
                    limit: l,
                    window_ms: None,
                    shadow: b.shadow,
                });
            }
            if let Some(l) = b.run_limit {
                out.push(Check {
                    rule: Rule::RunLimit,
                    scope: run_scope,
                    limit: l,
                    window_ms: None,
                    shadow: b.shadow,
                });
            }
        };
        if let Some(b) = &c.limits {
            budget(&mut out, b, Scope::Thread, Scope::Run(run));
        }
        if let Some(b) = rules.and_then(|r| r.limits.as_ref()) {
            budget(
                &mut out,
                b,
                Scope::ThreadTool(name()),
                Scope::RunTool(run, name()),
            );
        }
        out
    }

    /// The exit behaviour of a budget check.
    fn exit_of(&self, tool: &str, check: &Check) -> ExitBehavior {
        let b = match check.scope {
            Scope::Thread | Scope::Run(_) => self.config.limits.as_ref(),
            _ => self.config.tools.get(tool).and_then(|t| t.limits.as_ref()),
        };
        b.map_or(ExitBehavior::Continue, |b| b.exit_behavior)
    }

    async fn decide(&self, ctx: GuardContext<'_>, calls: &[GuardRequest<'_>]) -> Vec<Verdict> {
        let fps: Vec<u64> = calls
            .iter()
            .map(|c| fingerprint(c.tool, c.arguments))
            .collect();
        let mut decisions: Vec<Vec<Decision>> = vec![Vec::new(); calls.len()];
        self.history_rules(ctx, calls, &fps, &mut decisions);

        let mut id_reused = vec![false; calls.len()];
        if let Some(store) = &self.store {
            let session_key = ctx.session.map(session_key);
            let run = run_number(ctx.history);
            // Calls a history rule already refuses are not counted.
            let mut asked: Vec<usize> = Vec::new();
            let mut admit: Vec<AdmitCall> = Vec::new();
            for (i, c) in calls.iter().enumerate() {
                if decisions[i].iter().any(Decision::refuses) {
                    continue;
                }
                let checks = self.checks(c.tool, fps[i], session_key.is_some(), run);
                if checks.is_empty() && session_key.is_none() {
                    continue;
                }
                asked.push(i);
                admit.push(AdmitCall {
                    call_id: c.call_id.to_owned(),
                    checks,
                });
            }
            if !admit.is_empty() {
                let admission = Admission {
                    session: session_key.as_deref(),
                    ttl_ms: self.config.session_ttl_ms(),
                    calls: &admit,
                };
                // A local store answers at once: no timer for it.
                let answered: Result<Vec<CallAnswer>, StoreError> = if store.is_local() {
                    store.admit(admission).await
                } else {
                    match tokio::time::timeout(self.timeout, store.admit(admission)).await {
                        Ok(r) => r,
                        Err(_) => Err(StoreError {
                            kind: super::store::StoreErrorKind::Timeout,
                            message: format!("no answer within {} ms", self.timeout.as_millis()),
                        }),
                    }
                };
                // A store that answers for fewer (or more) calls than it was asked about
                // answered wrongly: the fail mode decides, never a call left unchecked.
                let answered = answered.and_then(|answers| {
                    let whole = answers.len() == admit.len()
                        && answers
                            .iter()
                            .zip(&admit)
                            .all(|(a, c)| a.checks.len() == c.checks.len());
                    if whole {
                        Ok(answers)
                    } else {
                        Err(StoreError {
                            kind: super::store::StoreErrorKind::Protocol,
                            message: format!(
                                "an answer that does not match its {} calls' checks",
                                admit.len()
                            ),
                        })
                    }
                });
                match answered {
                    Ok(answers) => {
                        self.fail_log.answered(store.name(), self.fail);
                        for ((&i, call), answer) in asked.iter().zip(&admit).zip(answers) {
                            id_reused[i] = answer.id_seen;
                            for (check, r) in call.checks.iter().zip(&answer.checks) {
                                if r.passed {
                                    continue;
                                }
                                let action = match check.window_ms {
                                    Some(_) => Action::Deny,
                                    None => match self.exit_of(calls[i].tool, check) {
                                        ExitBehavior::Continue => Action::Deny,
                                        ExitBehavior::Error => Action::Error,
                                        ExitBehavior::End => Action::End,
                                    },
                                };
                                decisions[i].push(Decision {
                                    rule: check.rule,
                                    action,
                                    shadow: check.shadow,
                                    count: r.count + 1,
                                    limit: check.limit,
                                    window: check.window_ms.map(Duration::from_millis),
                                    retry_after: (r.retry_after_ms > 0)
                                        .then(|| Duration::from_millis(r.retry_after_ms)),
                                });
                            }
                        }
                    }
                    Err(e) => {
                        self.fail_log.failed(
                            store.name(),
                            e.kind.as_str(),
                            &e.message,
                            self.fail,
                            asked.len() as u64,
                        );
                        for &i in &asked {
                            decisions[i].push(Decision {
                                rule: Rule::StoreUnavailable,
                                action: match self.fail {
                                    FailMode::Open => Action::Allow,
                                    FailMode::Closed => Action::Deny,
                                },
                                shadow: false,
                                count: 0,
                                limit: 0,
                                window: None,
                                retry_after: Some(Duration::from_secs(1)),
                            });
                        }
                    }
                }
            }
        }

        let mut verdicts: Vec<Verdict> = decisions
            .into_iter()
            .zip(calls)
            .zip(id_reused)
            .map(|((decisions, call), id_reused)| verdict(call.tool, decisions, id_reused))
            .collect();
        // Ending the run refuses every call of the message, each answered.
        if let Some(end) = verdicts.iter().position(|v| v.action == Action::End) {
            let rule = verdicts[end]
                .decisions
                .iter()
                .find(|d| d.refuses() && d.action == Action::End)
                .map_or("guard", |d| d.rule.as_str());
            for v in &mut verdicts {
                if v.action < Action::End {
                    v.action = Action::End;
                    v.reason = Some(format!(
                        "{FLOOD_PREFIX}: rule {rule} ended the run on another call of this \
                         message; this call was not run. Stop calling tools and answer with \
                         what you have."
                    ));
                }
            }
        }
        for (v, c) in verdicts.iter().zip(calls) {
            for d in &v.decisions {
                tracing::info!(
                    target: "toolmend::guard",
                    session = ctx.session.map(session_key).as_deref().unwrap_or("-"),
                    tool = c.tool,
                    rule = d.rule.as_str(),
                    action = d.action.as_str(),
                    shadow = d.shadow,
                    count = d.count,
                    limit = d.limit,
                    "guard decision"
                );
            }
        }
        verdicts
    }

    fn history_rules(
        &self,
        ctx: GuardContext<'_>,
        calls: &[GuardRequest<'_>],
        fps: &[u64],
        decisions: &mut [Vec<Decision>],
    ) {
        let c = &self.config;
        let any_ladder = c.repeat.is_some() || c.tools.values().any(|t| t.repeat.is_some());
        if !any_ladder && c.ping_pong.is_none() && c.no_progress.is_none() {
            return;
        }
        let index = RunIndex::new(ctx.history);
        if index.turns() == 0 {
            return;
        }
        let new: Vec<NewCall<'_>> = calls
            .iter()
            .zip(fps)
            .map(|(c, &fp)| NewCall {
                tool: c.tool,
                fingerprint: fp,
            })
            .collect();
        let cap = c
            .tools
            .values()
            .filter_map(|t| t.repeat.as_ref())
            .chain(c.repeat.as_ref())
            .map(|l| l.observe.max(l.block).max(l.stop))
            .max()
            .unwrap_or(2);
        // Parallel duplicates in this message count once: only the first of each is asked.
        let mut first_of: BTreeMap<u64, usize> = BTreeMap::new();
        for (i, s) in index.signals(&new, cap).into_iter().enumerate() {
            let dup_in_message = *first_of.entry(fps[i]).or_insert(i) != i;
            if let Some(l) = c.ladder(calls[i].tool) {
                let n = u64::from(s.repeat);
                let step = |at: u32| at > 0 && s.repeat >= at;
                let action = if step(l.stop) {
                    Some((Action::End, l.stop))
                } else if step(l.block) {
                    Some((Action::Deny, l.block))
                } else if step(l.observe) {
                    Some((Action::Allow, l.observe))
                } else {
                    None
                };
                if let Some((action, at)) = action.filter(|_| !dup_in_message) {
                    decisions[i].push(Decision {
                        rule: Rule::Repeat,
                        action,
                        shadow: l.shadow,
                        count: n,
                        limit: u64::from(at),
                        window: None,
                        retry_after: None,
                    });
                }
            }
            if let Some(p) = &c.ping_pong
                && s.ping_pong >= p.cycles
            {
                decisions[i].push(Decision {
                    rule: Rule::PingPong,
                    action: Action::Deny,
                    shadow: p.shadow,
                    count: u64::from(s.ping_pong),
                    limit: u64::from(p.cycles),
                    window: None,
                    retry_after: None,
                });
            }
            if let Some(np) = &c.no_progress
                && s.same_result >= np.block
            {
                decisions[i].push(Decision {
                    rule: Rule::NoProgress,
                    action: Action::Deny,
                    shadow: np.shadow,
                    count: u64::from(s.same_result) + 1,
                    limit: u64::from(np.block),
                    window: None,
                    retry_after: None,
                });
            }
        }
    }
}

fn names_of(config: &GuardConfig) -> BTreeMap<String, Arc<str>> {
    config
        .tools
        .keys()
        .map(|k| (k.clone(), Arc::from(k.as_str())))
        .collect()
}

/// The session as the store sees it: a hash, never the caller's value (it may be a user
/// id or carry braces that would break a Redis hash tag).
pub fn session_key(session: &str) -> String {
    format!("{:016x}", super::fingerprint::result_hash(session))
}

fn verdict(tool: &str, decisions: Vec<Decision>, id_reused: bool) -> Verdict {
    let worst = decisions
        .iter()
        .filter(|d| d.refuses())
        .max_by_key(|d| d.action)
        .cloned();
    let Some(worst) = worst else {
        return Verdict {
            decisions,
            id_reused,
            ..Verdict::default()
        };
    };
    Verdict {
        action: worst.action,
        reason: Some(reason(tool, &worst)),
        retry_after: worst.retry_after,
        decisions,
        id_reused,
    }
}

fn secs(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// The refusal the agent reads: the prefix, the rule, the count, the window, and what to do.
/// A counted rule says how many calls it admitted (its count before this one: the limit,
/// unless the limit changed), and that this one is refused.
fn reason(tool: &str, d: &Decision) -> String {
    let admitted = d.count.saturating_sub(1);
    let retry = d
        .retry_after
        .map(|r| format!(" Retry after {}.", secs(r)))
        .unwrap_or_default();
    let what = match d.rule {
        Rule::SessionWindow => format!(
            "{admitted} calls admitted in this session within {}, limit {}; this one is \
             refused.{retry}",
            d.window.map(secs).unwrap_or_default(),
            d.limit
        ),
        Rule::ToolWindow => format!(
            "{admitted} calls of `{tool}` admitted in this session within {}, limit {}; this \
             one is refused.{retry}",
            d.window.map(secs).unwrap_or_default(),
            d.limit
        ),
        Rule::ToolGlobalWindow => format!(
            "{admitted} calls of `{tool}` admitted across all sessions within {}, limit {}; \
             this one is refused.{retry}",
            d.window.map(secs).unwrap_or_default(),
            d.limit
        ),
        Rule::Duplicate => format!(
            "the same call to `{tool}` with the same arguments was already made within {}. \
             Use its result instead of calling again.{retry}",
            d.window.map(secs).unwrap_or_default()
        ),
        Rule::Repeat => format!(
            "the same call to `{tool}` with the same arguments {} times in a row with the \
             same result (limit {}). Do not repeat it: use the result you have, or change \
             the arguments.",
            d.count, d.limit
        ),
        Rule::PingPong => format!(
            "the calls have alternated between the same two steps {} times with unchanged \
             results (limit {}). Stop alternating: answer with what you have, or try \
             something else.",
            d.count, d.limit
        ),
        Rule::NoProgress => format!(
            "`{tool}` with these arguments returned the same result {} times in this run \
             (limit {}). Calling again will not change it.",
            d.count - 1,
            d.limit
        ),
        Rule::ThreadLimit => format!(
            "{admitted} calls admitted in this thread, limit {}; this one is refused. Tool \
             call limit exceeded. Do not call '{tool}' again.",
            d.limit
        ),
        Rule::RunLimit => format!(
            "{admitted} calls admitted in this run, limit {}; this one is refused. Tool call \
             limit exceeded. Do not call '{tool}' again.",
            d.limit
        ),
        Rule::StoreUnavailable => format!(
            "the flood guard's store did not answer and the guard fails closed; the call \
             was not run. This is an outage, not a flood: the call itself may be fine.{retry}"
        ),
        Rule::Custom => "refused by a custom guard.".to_owned(),
    };
    let end = if d.action >= Action::End {
        " The run is ended."
    } else {
        ""
    };
    let prefix = if d.rule == Rule::StoreUnavailable {
        UNCHECKED_PREFIX
    } else {
        FLOOD_PREFIX
    };
    format!("{prefix}: rule {}: {what}{end}", d.rule)
}

impl Guard for RuleGuard {
    fn is_enabled(&self) -> bool {
        self.config.any_rule()
    }

    fn check<'a>(
        &'a self,
        ctx: GuardContext<'a>,
        calls: &'a [GuardRequest<'a>],
    ) -> BoxFuture<'a, Vec<Verdict>> {
        Box::pin(self.decide(ctx, calls))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::{conversation::Message, guard::config::Ladder};

    fn req<'a>(id: &'a str, tool: &'a str, args: &'a Value) -> GuardRequest<'a> {
        GuardRequest {
            call_id: id,
            tool,
            arguments: args,
        }
    }

    #[tokio::test]
    async fn a_session_window_refuses_with_the_prefix_the_rule_and_when_to_retry() {
        let guard = RuleGuard::new(GuardConfig {
            session: Some(Window::new(2, 60.0)),
            ..GuardConfig::default()
        })
        .expect("config");
        let a = json!({"q": 1});
        let calls = [req("a", "s", &a), req("b", "s", &a), req("c", "s", &a)];
        let ctx = GuardContext {
            session: Some("u1"),
            history: &[],
        };
        let v = guard.check(ctx, &calls).await;
        assert!(v[0].is_allowed() && v[1].is_allowed());
        assert_eq!(v[2].action, Action::Deny);
        let reason = v[2].reason.as_deref().expect("reason");
        assert!(reason.starts_with(FLOOD_PREFIX), "{reason}");
        assert!(reason.contains("rule session_window"), "{reason}");
        assert!(
            reason.contains(
                "2 calls admitted in this session within 60 s, limit 2; this one is refused."
            ),
            "{reason}"
        );
        assert!(reason.contains("Retry after 60 s"), "{reason}");
        assert_eq!(v[2].retry_after, Some(Duration::from_secs(60)));
        // Without a session the session rules do not apply.
        let none = guard.check(GuardContext::default(), &calls).await;
        assert!(none.iter().all(Verdict::is_allowed));
    }

    #[tokio::test]
    async fn duplicates_collapse_after_mending_and_shadow_refuses_nothing() {
        let mut config = GuardConfig {
            duplicate: Some(crate::guard::Duplicate {
                window_secs: 60.0,
                shadow: false,
            }),
            ..GuardConfig::default()
        };
        let guard = RuleGuard::new(config.clone()).expect("config");
        let a = json!({"city": "rome", "days": 3});
        let b = json!({"days": 3.0, "city": "rome"});
        let ctx = GuardContext {
            session: Some("u"),
            history: &[],
        };
        let v = guard
            .check(ctx, &[req("1", "w", &a), req("2", "w", &b)])
            .await;
        assert!(v[0].is_allowed());
        assert_eq!(v[1].decisions[0].rule, Rule::Duplicate);
        assert!(!v[1].is_allowed());
        config.duplicate.as_mut().expect("dup").shadow = true;
        let shadow = RuleGuard::new(config).expect("config");
        let v = shadow
            .check(ctx, &[req("1", "w", &a), req("2", "w", &b)])
            .await;
        assert!(v[1].is_allowed());
        assert!(v[1].decisions[0].shadow);
    }

    fn turn(id: &str, tool: &str, args: &Value, result: &str) -> Vec<Message> {
        vec![
            serde_json::from_value(json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": tool, "arguments": args.to_string()}}]}))
            .expect("assistant"),
            serde_json::from_value(json!({"role": "tool", "tool_call_id": id, "content": result}))
                .expect("tool"),
        ]
    }

    #[tokio::test]
    async fn the_ladder_observes_blocks_and_ends() {
        let guard = RuleGuard::new(GuardConfig {
            repeat: Some(Ladder::default()),
            ..GuardConfig::default()
        })
        .expect("config");
        let args = json!({"q": "x"});
        let mut history: Vec<Message> =
            vec![serde_json::from_value(json!({"role": "user", "content": "hi"})).expect("u")];
        let mut seen = Vec::new();
        for n in 0..6 {
            let v = guard
                .check(
                    GuardContext {
                        session: None,
                        history: &history,
                    },
                    &[req("x", "search", &args)],
                )
                .await;
            seen.push(v[0].action);
            history.extend(turn(&format!("c{n}"), "search", &args, "same"));
        }
        use Action::{Allow, Deny, End};
        assert_eq!(seen, [Allow, Allow, Deny, Deny, Deny, End]);
    }

    #[tokio::test]
    async fn a_failing_store_fails_as_configured() {
        #[derive(Debug)]
        struct Down;
        impl GuardStore for Down {
            fn name(&self) -> &'static str {
                "down"
            }
            fn admit<'a>(
                &'a self,
                _a: Admission<'a>,
            ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
                Box::pin(std::future::pending())
            }
        }
        let config = GuardConfig {
            session: Some(Window::new(2, 60.0)),
            ..GuardConfig::default()
        };
        let args = json!({});
        let calls = [req("a", "s", &args)];
        let ctx = GuardContext {
            session: Some("u"),
            history: &[],
        };
        let open = RuleGuard::new(config.clone())
            .expect("config")
            .with_store(Down)
            .timeout(Duration::from_millis(5));
        let v = open.check(ctx, &calls).await;
        assert!(v[0].is_allowed());
        assert_eq!(v[0].decisions[0].rule, Rule::StoreUnavailable);
        let closed = RuleGuard::new(config)
            .expect("config")
            .with_store(Down)
            .timeout(Duration::from_millis(5))
            .fail_mode(FailMode::Closed);
        let v = closed.check(ctx, &calls).await;
        assert_eq!(v[0].action, Action::Deny);
        // An outage is told as one, not as a flood; still a refusal by every reader's test.
        let reason = v[0].reason.as_deref().unwrap();
        assert!(reason.starts_with(UNCHECKED_PREFIX), "{reason}");
        assert!(!reason.contains("flooding"), "{reason}");
        assert!(super::super::is_refusal(reason));
    }

    #[tokio::test]
    async fn a_store_that_answers_for_too_few_calls_fails_as_configured() {
        // Answers for the first call only: the second is never left unchecked.
        #[derive(Debug)]
        struct Short;
        impl GuardStore for Short {
            fn name(&self) -> &'static str {
                "short"
            }
            fn is_local(&self) -> bool {
                true
            }
            fn admit<'a>(
                &'a self,
                _a: Admission<'a>,
            ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
                Box::pin(std::future::ready(Ok(vec![CallAnswer::default()])))
            }
        }
        let config = GuardConfig {
            session: Some(Window::new(10, 60.0)),
            ..GuardConfig::default()
        };
        let args = json!({});
        let calls = [req("a", "s", &args), req("b", "s", &args)];
        let ctx = GuardContext {
            session: Some("u"),
            history: &[],
        };
        let closed = RuleGuard::new(config.clone())
            .expect("config")
            .with_store(Short)
            .fail_mode(FailMode::Closed);
        let v = closed.check(ctx, &calls).await;
        assert!(v.iter().all(|v| v.action == Action::Deny), "{v:?}");
        assert!(
            v.iter()
                .all(|v| v.decisions[0].rule == Rule::StoreUnavailable)
        );
        let open = RuleGuard::new(config).expect("config").with_store(Short);
        let v = open.check(ctx, &calls).await;
        assert!(
            v.iter()
                .all(|v| v.is_allowed() && v.decisions[0].rule == Rule::StoreUnavailable)
        );
    }

    #[tokio::test]
    async fn a_budget_that_ends_refuses_every_call_of_the_message() {
        let guard = RuleGuard::new(GuardConfig {
            limits: Some(Budget {
                run_limit: Some(1),
                exit_behavior: ExitBehavior::End,
                ..Budget::default()
            }),
            ..GuardConfig::default()
        })
        .expect("config");
        let a = json!({});
        let ctx = GuardContext {
            session: Some("t"),
            history: &[],
        };
        let v = guard
            .check(ctx, &[req("1", "a", &a), req("2", "b", &a)])
            .await;
        assert_eq!(v[1].decisions[0].rule, Rule::RunLimit);
        assert!(v.iter().all(|v| v.action == Action::End));
        assert!(
            v[0].reason
                .as_deref()
                .is_some_and(|r| r.contains("ended the run"))
        );
    }
}
