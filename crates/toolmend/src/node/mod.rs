//! The tool node: answers the last assistant message's tool calls, exactly once each.
//!
//! ```text
//! plan      the message's plan ([`crate::message`]): tool_calls, or calls written into
//!           the text; ids by the one rule (none: minted; exact repeat: dropped; repeated
//!           otherwise, used earlier, or over 40 chars: renamed; answered by the tool
//!           messages right after it: skipped); repair + validate + custom validators
//!           (phase initial); glued calls split
//! correct   a Corrector rewrites what stayed invalid (phase correction), re-validated
//! resolve   feedback (default) | raise before anything runs | hook (salvage / own text)
//! guard     calls past InvokeOptions::max_calls, then a Guard, may be refused (flooded)
//! execute   valid calls concurrently (bounded), each with its timeout; panics caught
//! answer    one result per call id, in call order; a sanitized assistant message; stats
//! ```
//!
//! ```
//! # tokio_test();
//! # fn tokio_test() { tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use serde_json::json;
//! use toolmend::{node::{tool_fn, Registry, ToolNode, ToolError}, conversation::{Message, AssistantMessage, ToolCall}};
//!
//! let mut tools = Registry::new();
//! tools.add(tool_fn("get_weather", "Weather for a city.",
//!     json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
//!     |args, _| async move { Ok::<_, ToolError>(format!("sunny in {}", args["city"].as_str().unwrap_or("?"))) },
//! )).unwrap();
//! let node = ToolNode::builder(tools).build();
//! let messages = vec![Message::Assistant(AssistantMessage {
//!     tool_calls: Some(vec![ToolCall::new("call_1", "get_weather", "{'city': 'Paris',}")]),
//!     ..Default::default()
//! })];
//! let out = node.invoke(&messages).await.unwrap();
//! assert_eq!(out.results[0].content.text(), "sunny in Paris");
//! assert_eq!(out.assistant.tool_calls.as_ref().unwrap()[0].arguments, r#"{"city":"Paris"}"#);
//! # }) }
//! ```

pub use crate::message::{
    TextCall, calls_in_text, prose_before_calls, read_calls_in_text, strip_thinking,
};
mod policy;
mod stats;
mod tool;

use std::{
    collections::{HashMap, HashSet},
    panic::{AssertUnwindSafe, catch_unwind},
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{FutureExt, StreamExt, stream};
use serde::Serialize;
use serde_json::Value;

pub use policy::{
    AsyncResolveHook, ErrorFormatter, ErrorPredicate, NodeError, OnUnresolved, Resolution,
    ResolveHook, TOOL_ERROR_TEMPLATE, TOOL_FAILED_TEMPLATE, TOOL_TIMEOUT_TEMPLATE,
    TOOL_UNAVAILABLE_TEMPLATE, ToolErrorPolicy, UnresolvedCall, tool_error_template,
};
pub use stats::{
    Aggregate, CallOutcome, CallSource, CallStats, Listener, NodeStats, StatsCollector, Timings,
};
pub use tool::{
    BoxFuture, CallContext, Fault, FnTool, Registry, Tool, ToolError, ToolOptions, ToolOutput,
    tool_fn,
};
#[cfg(feature = "typed")]
pub use tool::{TypedTool, typed_tool, typed_tool_with_context};

use crate::{
    Fix, FixKind, MendOptions,
    conversation::{AssistantMessage, Content, Message, ToolMessage},
    correct::{Corrector, NoCorrector},
    drive::{
        self, CallReport, Correcting, Driven, Guarding, Invalid, NoObserver, OnRefused, Resolved,
        Settle, Stages, Stop, Turn,
    },
    guard::{Action, Guard, NoGuard},
    history,
    message::{self, AcceptTruncated, PlanOptions},
};

/// The tool node. Build one with [`ToolNode::builder`]; share it (`&self` everywhere).
#[derive(Debug)]
pub struct ToolNode {
    name: String,
    registry: Registry,
    /// How messages are planned (mend options, calls in the text, cut-off calls per tool).
    plan: PlanOptions,
    max_concurrency: usize,
    default_timeout: Option<Duration>,
    max_correction_retries: u32,
    correction_scope: crate::correct::CorrectionScope,
    spawn_tools: bool,
    stage_timeout: Duration,
    on_unresolved: OnUnresolved,
    on_tool_error: ToolErrorPolicy,
    corrector: Arc<dyn Corrector>,
    guard: Arc<dyn Guard>,
    /// Ids for calls whose id the guard's store saw in an earlier turn.
    fresh_ids: Arc<message::TimeOrderedIds>,
    listeners: Vec<Arc<dyn Listener>>,
}

/// Builds a [`ToolNode`].
#[derive(Debug)]
pub struct ToolNodeBuilder {
    node: ToolNode,
}

impl ToolNodeBuilder {
    /// The node's name in stats (default `"tools"`, as LangGraph's).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.node.name = name.into();
        self
    }

    /// Repair and coercion options (default: every coercion on, a merged call, a list for
    /// a scalar field, run as one call per value with ids as for glued calls;
    /// `coercions.split_merged_calls = false` answers it with feedback). Leave `refuse_lossy` off:
    /// the node refuses cut-off calls per tool ([`ToolOptions::accept_truncated`]); on, it
    /// refuses them for every tool.
    #[must_use]
    pub fn mend_options(mut self, opts: MendOptions) -> Self {
        self.node.plan.mend = opts;
        self
    }

    /// At most this many tool bodies (and corrections) run at once (default 16; at least 1).
    #[must_use]
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.node.max_concurrency = n.max(1);
        self
    }

    /// A timeout for every tool without its own (default: none).
    #[must_use]
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.node.default_timeout = Some(timeout);
        self
    }

    /// What to do with calls that stay invalid (default: feedback).
    #[must_use]
    pub fn on_unresolved(mut self, policy: OnUnresolved) -> Self {
        self.node.on_unresolved = policy;
        self
    }

    /// Which tool failures the agent reads as error results (default: all).
    #[must_use]
    pub fn tool_errors(mut self, policy: ToolErrorPolicy) -> Self {
        self.node.on_tool_error = policy;
        self
    }

    /// A corrector for invalid calls, tried up to `max_retries` times per call. 0 with a
    /// corrector is a configuration error ([`try_build`](Self::try_build) reports it;
    /// [`build`](Self::build) uses 1).
    #[must_use]
    pub fn corrector(mut self, corrector: impl Corrector + 'static, max_retries: u32) -> Self {
        self.node.corrector = Arc::new(corrector);
        self.node.max_correction_retries = max_retries;
        self
    }

    /// What becomes of a corrector's answer that changed a value no issue named: refused
    /// (`Issues`, the default: the original reading stays, with its feedback) or kept and
    /// recorded as the unsafe fix `correction_beyond_issues` (`Unsafe`).
    #[must_use]
    pub fn correction_scope(mut self, scope: crate::correct::CorrectionScope) -> Self {
        self.node.correction_scope = scope;
        self
    }

    /// Let the corrector see calls whose only problem is a missing required value (off:
    /// it would have to invent the value; unless an unknown key suggests a misnamed field).
    #[must_use]
    pub fn correct_missing_fields(mut self, on: bool) -> Self {
        self.node.plan.correct_missing_fields = on;
        self
    }

    /// Read calls a model wrote into its text when it sent no `tool_calls` (default on).
    #[must_use]
    pub fn calls_in_text(mut self, on: bool) -> Self {
        self.node.plan.calls_in_text = on;
        self
    }

    /// Run each tool body as its own tokio task (default off: bodies run as futures inside
    /// the invoking task, which costs nothing). Turn it on for tools that compute or block:
    /// on a multi-thread runtime they then run in parallel, a blocking tool does not stall
    /// its siblings, and its timeout fires (the task is aborted). Needs a tokio runtime.
    #[must_use]
    pub fn spawn_tools(mut self, on: bool) -> Self {
        self.node.spawn_tools = on;
        self
    }

    /// How long one correction attempt and one guard check may take (default 60 s). A
    /// correction past it fails (transient); a guard past it refuses the calls.
    #[must_use]
    pub fn stage_timeout(mut self, timeout: Duration) -> Self {
        self.node.stage_timeout = timeout;
        self
    }

    /// The guard valid calls pass before running (default: allow all).
    #[must_use]
    pub fn guard(mut self, guard: impl Guard + 'static) -> Self {
        self.node.guard = Arc::new(guard);
        self
    }

    /// The configured rule guard, with the limits each registered tool declares on itself
    /// ([`ToolOptions::guard`]) merged in (the guard's own entry for a tool wins key by
    /// key).
    ///
    /// # Errors
    ///
    /// A declared limit that cannot work, naming the tool and the key.
    pub fn rule_guard(mut self, mut guard: crate::guard::RuleGuard) -> Result<Self, crate::Error> {
        let names: Vec<String> = self
            .node
            .registry
            .toolbox()
            .names()
            .map(str::to_owned)
            .collect();
        for name in names {
            if let Some(rules) = self
                .node
                .registry
                .entry(&name)
                .and_then(|e| e.options.guard.clone())
            {
                guard
                    .declare_tool(&name, rules)
                    .map_err(crate::Error::Config)?;
            }
        }
        self.node.guard = Arc::new(guard);
        Ok(self)
    }

    /// Adds a stats listener.
    #[must_use]
    pub fn listener(mut self, listener: impl Listener + 'static) -> Self {
        self.node.listeners.push(Arc::new(listener));
        self
    }

    /// The node.
    pub fn build(self) -> ToolNode {
        let mut node = self.node;
        node.max_correction_retries = node.max_correction_retries.max(1);
        let accepting: HashSet<String> = node
            .registry
            .toolbox()
            .names()
            .filter(|n| {
                node.registry
                    .entry(n)
                    .is_some_and(|e| e.options.accept_truncated)
            })
            .map(str::to_owned)
            .collect();
        node.plan.accept_truncated = if accepting.is_empty() {
            AcceptTruncated::None
        } else {
            AcceptTruncated::Only(accepting)
        };
        node
    }

    /// The node, or the configuration error: a corrector with 0 retries.
    pub fn try_build(self) -> Result<ToolNode, crate::Error> {
        if self.node.corrector.is_enabled() && self.node.max_correction_retries == 0 {
            return Err(crate::Error::Config(
                "a corrector is configured with 0 correction retries: it would never be asked; \
                 use at least 1, or no corrector"
                    .to_owned(),
            ));
        }
        Ok(self.build())
    }
}

/// Per-invocation inputs besides the messages.
#[derive(Debug, Clone, Default)]
pub struct InvokeOptions {
    /// Caller state, passed to custom validators and tools.
    pub state: Option<Arc<Value>>,
    /// The session the calls belong to (for the guard).
    pub session: Option<String>,
    /// Tool bodies must finish by then (their timeouts are cut to it); a call that does
    /// not is answered with a timeout error, so the pairing holds.
    pub deadline: Option<Instant>,
    /// At most this many calls of the message may run (a run's remaining tool-call
    /// budget); the calls past it are answered, not run (outcome `flooded`).
    pub max_calls: Option<usize>,
    /// The trace this invocation belongs to, passed to every tool
    /// ([`CallContext::trace_id`]; tool services get it as `X-Trace-ID`).
    pub trace_id: Option<Arc<str>>,
    /// When the model's answer holding these calls arrived (a gateway's upstream answer,
    /// before it was planned): tools get it as [`CallContext::received_at`], the start of
    /// their call-initiation latency. Unset, the start of this invocation.
    pub received_at: Option<Instant>,
}

/// Success or error, as LangChain's `ToolMessage.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    /// The tool ran and returned.
    Success,
    /// Feedback, a refusal, or a tool failure.
    Error,
}

/// The answer to one call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call id it answers.
    pub call_id: String,
    /// The tool (the name sent, for an unknown tool).
    pub tool: String,
    /// What the model reads.
    pub content: Content,
    /// Success or error.
    pub status: ResultStatus,
    /// Data for the caller only.
    pub artifact: Option<Value>,
    /// How the result was made (received at, service latency, template), for the caller
    /// only; see [`ToolOutput::metadata`].
    pub metadata: Option<Value>,
    /// What became of the call.
    pub outcome: CallOutcome,
    /// For a tool that ran and failed: whose fault it is (the call's, or the tool's:
    /// unavailable, timed out, failed). `None` otherwise (a success, feedback, a refusal).
    pub fault: Option<Fault>,
}

impl ToolResult {
    /// The wire form: a `tool` message.
    pub fn to_message(&self) -> Message {
        Message::Tool(ToolMessage {
            content: self.content.clone(),
            call_id: self.call_id.clone(),
            extra: Default::default(),
        })
    }
}

/// What one invocation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeOutput {
    /// Where the answered assistant message is in the input.
    pub assistant_index: usize,
    /// The sanitized copy of it: repaired arguments as valid JSON text, minted ids,
    /// dropped calls removed, leaked thinking removed. Calls valid as sent, and calls
    /// answered with feedback, stay as the model sent them.
    pub assistant: AssistantMessage,
    /// True when the copy differs from the input.
    pub changed: bool,
    /// One result per answered call, in call order.
    pub results: Vec<ToolResult>,
    /// What happened to every call.
    pub stats: NodeStats,
}

impl NodeOutput {
    /// The results as `tool` messages, in call order.
    pub fn messages(&self) -> Vec<Message> {
        self.results.iter().map(ToolResult::to_message).collect()
    }

    /// Writes the output into the history it came from: the sanitized assistant message
    /// replaces the original, the results follow the results it already had, and a stray
    /// result of an answered call further down is removed. Prefer this to appending
    /// [`messages`](Self::messages): minted ids only join if the sanitized message is kept.
    pub fn apply_to(self, history: &mut Vec<Message>) {
        let at = self.assistant_index;
        if at >= history.len() {
            return;
        }
        history[at] = Message::Assistant(self.assistant);
        let mut end = at + 1;
        while end < history.len() && matches!(history[end], Message::Tool(_)) {
            end += 1;
        }
        // A result of one of these calls further down (after a user message) is out of
        // place: the call is answered here now, so the stray one goes.
        let answered: HashSet<&str> = self.results.iter().map(|r| r.call_id.as_str()).collect();
        let mut i = end;
        while i < history.len() {
            if matches!(&history[i], Message::Tool(t) if answered.contains(t.call_id.as_str())) {
                history.remove(i);
            } else {
                i += 1;
            }
        }
        let results: Vec<Message> = self.results.iter().map(ToolResult::to_message).collect();
        history.splice(end..end, results);
    }
}

/// What running one call produced (beside its report, [`CallReport`]).
#[derive(Debug)]
struct Run {
    /// The answer, once known (feedback, refusal, tool output).
    answer: Option<ToolOutput>,
    status: ResultStatus,
    tool_error: bool,
    /// Whose fault the tool's failure is.
    fault: Option<Fault>,
    /// Time the tool body took.
    execute: Duration,
}

impl ToolNode {
    /// A builder over these tools.
    pub fn builder(registry: Registry) -> ToolNodeBuilder {
        ToolNodeBuilder {
            node: ToolNode {
                name: "tools".to_owned(),
                registry,
                plan: PlanOptions::default(),
                max_concurrency: 16,
                default_timeout: None,
                max_correction_retries: 2,
                correction_scope: crate::correct::CorrectionScope::Issues,
                spawn_tools: false,
                stage_timeout: Duration::from_secs(60),
                on_unresolved: OnUnresolved::Feedback,
                on_tool_error: ToolErrorPolicy::All,
                corrector: Arc::new(NoCorrector),
                guard: Arc::new(NoGuard),
                fresh_ids: Arc::new(message::TimeOrderedIds::new()),
                listeners: Vec::new(),
            },
        }
    }

    /// The tools.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Answers the tool calls of the last assistant message in `messages`.
    pub async fn invoke(&self, messages: &[Message]) -> Result<NodeOutput, NodeError> {
        self.invoke_with(messages, &InvokeOptions::default()).await
    }

    /// [`invoke`](Self::invoke) with caller state, a session, a deadline for tool bodies
    /// and a call budget ([`InvokeOptions`]).
    ///
    /// # Errors
    ///
    /// [`NodeError::NoAssistantMessage`]; [`NodeError::Unresolved`] with
    /// [`OnUnresolved::Raise`]; [`NodeError::Tool`] when the [`ToolErrorPolicy`] lets a
    /// failure through.
    pub async fn invoke_with(
        &self,
        messages: &[Message],
        opts: &InvokeOptions,
    ) -> Result<NodeOutput, NodeError> {
        let started = Instant::now();
        let Some((at, assistant)) = messages
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, m)| match m {
                Message::Assistant(a) => Some((i, a)),
                _ => None,
            })
        else {
            return Err(NodeError::NoAssistantMessage);
        };
        let history = &messages[..at];
        let correction = self.corrector.is_enabled().then(|| Correcting {
            corrector: &*self.corrector,
            max_retries: self.max_correction_retries,
            timeout: self.stage_timeout,
            concurrency: self.max_concurrency,
            scope: self.correction_scope,
        });
        let guard = self.guard.is_enabled().then(|| Guarding {
            guard: &*self.guard,
            session: opts.session.as_deref(),
            timeout: self.stage_timeout,
            fresh_ids: &self.fresh_ids,
            rename_reused: true,
            on_refused: OnRefused::Answer,
            max_re_asks: 0,
        });
        let hook = HookSettle {
            policy: &self.on_unresolved,
            shared: std::sync::Mutex::new(None),
        };
        let stages = Stages {
            toolbox: self.registry.toolbox(),
            accept: None,
            validate: None,
            plan: &self.plan,
            invalid: &[Invalid::Correct],
            correction,
            re_ask: None,
            max_re_asks: 0,
            raise_unresolved: matches!(self.on_unresolved, OnUnresolved::Raise),
            settle: matches!(
                self.on_unresolved,
                OnUnresolved::Hook(_) | OnUnresolved::AsyncHook(_)
            )
            .then_some(&hook as &dyn Settle),
            budget: opts.max_calls,
            guard,
            stage_timeout: self.stage_timeout,
            observer: &NoObserver,
        };
        let turn = Turn {
            message: assistant,
            history,
            later: &messages[at + 1..],
            cut_off: false,
            state: opts.state.as_deref(),
            place: None,
        };
        let driven = drive::drive(
            turn,
            &stages,
            &mut drive::Tally::default(),
            &mut drive::GuardTally::default(),
        )
        .await;
        let Driven { resolved, stopped } = match driven {
            Ok(driven) => driven,
            Err(Stop::Unresolved(calls)) => return Err(NodeError::Unresolved(calls)),
            Err(Stop::Rejected(r)) => {
                let reason = r
                    .refused
                    .iter()
                    .find(|x| x.action == Action::Error)
                    .map_or_else(|| r.message(), |x| x.reason.clone());
                return Err(NodeError::LimitExceeded { reason });
            }
        };
        let Resolved {
            message: mut sanitized,
            calls: mut reports,
            mut message_fixes,
            answered,
            ..
        } = resolved;
        // What stays invalid is answered with its feedback; a refused call with the reason.
        let mut runs: Vec<Run> = reports
            .iter()
            .map(|c| {
                let text = match c.outcome {
                    CallOutcome::Feedback => c.feedback.clone(),
                    CallOutcome::Flooded => c.note.clone(),
                    _ => None,
                };
                Run {
                    answer: text.map(ToolOutput::text),
                    status: ResultStatus::Error,
                    tool_error: false,
                    fault: None,
                    execute: Duration::ZERO,
                }
            })
            .collect();
        self.execute(
            &mut reports,
            &mut runs,
            opts,
            opts.received_at.unwrap_or(started),
        )
        .await?;

        // A name OpenAI's pattern rejects would fail the next request (HTTP 400), even for
        // a call answered with feedback or one answered before (recorded as a fix).
        if let Some(calls) = &mut sanitized.tool_calls
            && calls
                .iter()
                .any(|tc| !history::is_valid_function_name(&tc.name))
        {
            let by_id: HashMap<&str, usize> = reports
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some((c.answered_id()?, i)))
                .collect();
            let answered_ids: HashSet<&str> = answered.iter().map(|a| a.id.as_str()).collect();
            let mut call_fixes = Vec::new();
            for tc in calls.iter_mut() {
                if history::is_valid_function_name(&tc.name) {
                    continue;
                }
                let fixed = history::sanitize_name(&tc.name);
                let fix = Fix::on(
                    FixKind::FunctionNameSanitized,
                    "",
                    format!("{:?} -> {fixed:?}", tc.name),
                );
                let id = tc.id.as_deref().unwrap_or_default();
                if let Some(&i) = by_id.get(id) {
                    call_fixes.push((i, fix));
                } else if answered_ids.contains(id) {
                    message_fixes.push(fix);
                }
                tc.name = fixed;
            }
            for (i, fix) in call_fixes {
                reports[i].fixes.push(fix);
            }
        }
        // Anthropic and Bedrock refuse an empty result, whoever wrote it.
        for (c, run) in reports.iter_mut().zip(&mut runs) {
            if let Some(answer) = &mut run.answer
                && history::is_blank(&answer.content)
            {
                answer.content = Content::Text(history::EMPTY_RESULT.to_owned());
                c.fixes.push(Fix::on(
                    FixKind::EmptyResultFilled,
                    "",
                    history::EMPTY_RESULT,
                ));
            }
        }
        let changed = &sanitized != assistant;
        let mut results = Vec::with_capacity(reports.len());
        let mut calls = Vec::with_capacity(reports.len());
        // Every record names the id it was answered under: a dropped exact repeat the
        // settled id of the call it repeats (same sent id, tool and arguments: the first
        // such), whose result answers both. Looked up in a map: linear in the calls.
        let repeat_key = |c: &CallReport| {
            let sent = c.original_id.clone().unwrap_or_else(|| c.id.clone());
            let args = c.arguments.as_ref().map(Value::to_string);
            (sent, c.tool.clone(), args)
        };
        // Built only when a call was dropped: the common answer pays nothing for it.
        let mut kept: HashMap<(String, String, Option<String>), String> = HashMap::new();
        if reports.iter().any(|c| c.answered_id().is_none()) {
            for c in reports.iter().filter(|c| c.answered_id().is_some()) {
                kept.entry(repeat_key(c)).or_insert_with(|| c.id.clone());
            }
        }
        for (c, run) in reports.into_iter().zip(runs) {
            let answered = c.answered_id().is_some();
            let call_id = if answered {
                Some(c.id.clone())
            } else {
                kept.get(&repeat_key(&c)).cloned()
            };
            if let (Some(id), Some(answer), true) = (&call_id, run.answer, answered) {
                results.push(ToolResult {
                    call_id: id.clone(),
                    tool: c.tool.clone(),
                    content: answer.content,
                    status: run.status,
                    artifact: answer.artifact,
                    metadata: answer.metadata,
                    outcome: c.outcome,
                    fault: run.fault,
                });
            }
            calls.push(CallStats {
                call_id,
                original_id: c.original_id,
                tool: c.tool,
                outcome: c.outcome,
                source: c.source,
                fixes: c.fixes,
                issues: c.issues,
                correction_attempts: c.correction_attempts,
                correction_usage: c.correction_usage,
                tool_error: run.tool_error,
                fault: run.fault,
                note: c.note,
                guard: c.guard,
                timings: Timings {
                    execute: run.execute,
                    ..c.timings
                },
            });
        }
        let stats = NodeStats {
            node: self.name.clone(),
            calls,
            already_answered: answered.into_iter().map(|a| a.id).collect(),
            message_fixes,
            stopped,
            elapsed: started.elapsed(),
        };
        self.notify(&stats);
        Ok(NodeOutput {
            assistant_index: at,
            assistant: sanitized,
            changed,
            results,
            stats,
        })
    }

    /// Sends the stats to every listener; a panicking listener is skipped, not fatal.
    fn notify(&self, stats: &NodeStats) {
        for l in &self.listeners {
            if catch_unwind(AssertUnwindSafe(|| l.on_stats(stats))).is_err() {
                tracing::warn!(node = %self.name, "a stats listener panicked");
            }
        }
    }

    /// Execute: every runnable call, concurrently (bounded), in call order.
    async fn execute(
        &self,
        reports: &mut [CallReport],
        runs: &mut [Run],
        opts: &InvokeOptions,
        received_at: Instant,
    ) -> Result<(), NodeError> {
        let jobs: Vec<Job> = reports
            .iter_mut()
            .zip(runs.iter())
            .enumerate()
            .filter(|(_, (c, run))| c.may_run() && run.answer.is_none())
            .filter_map(|(i, (c, _))| {
                let entry = self.registry.entry(&c.tool)?;
                let ctx = CallContext {
                    call_id: c.id.clone(),
                    tool: c.tool.clone(),
                    state: opts.state.clone(),
                    trace_id: opts.trace_id.clone(),
                    received_at: Some(received_at),
                };
                let mut timeout = entry.options.timeout.or(self.default_timeout);
                if let Some(deadline) = opts.deadline {
                    let left = deadline.saturating_duration_since(Instant::now());
                    timeout = Some(timeout.map_or(left, |t| t.min(left)));
                }
                let args = c.arguments.take().unwrap_or(Value::Null);
                Some((i, Arc::clone(&entry.tool), timeout, args, ctx))
            })
            .collect();
        let spawn = self.spawn_tools;
        let running = jobs
            .into_iter()
            .map(move |(i, tool, timeout, args, ctx)| async move {
                let t0 = Instant::now();
                let result = if spawn {
                    run_spawned(tool, args, ctx, timeout).await
                } else {
                    run_in_task(&*tool, args, ctx, timeout).await
                };
                (i, result, t0.elapsed())
            });
        let mut running: Vec<_> = running.collect();
        let done: Vec<_> = if running.len() == 1 {
            // One call: no scheduling to do.
            let only = running.pop();
            match only {
                Some(run) => vec![run.await],
                None => Vec::new(),
            }
        } else {
            stream::iter(running)
                .buffered(self.max_concurrency)
                .collect()
                .await
        };
        let mut propagate = None;
        for (i, result, elapsed) in done {
            let (c, run) = (&mut reports[i], &mut runs[i]);
            run.execute = elapsed;
            match result {
                Ok(out) => {
                    run.answer = Some(out);
                    run.status = ResultStatus::Success;
                }
                Err(e) => {
                    run.tool_error = true;
                    run.fault = Some(e.fault());
                    c.note = Some(e.to_string());
                    run.status = ResultStatus::Error;
                    match self.on_tool_error.render(&e) {
                        Some(text) => {
                            // What the service sent beside its failure stays the caller's.
                            let mut out = ToolOutput::text(text);
                            (out.artifact, out.metadata) = e.into_details();
                            run.answer = Some(out);
                        }
                        None => {
                            propagate.get_or_insert(NodeError::Tool {
                                call_id: c.id.clone(),
                                tool: c.tool.clone(),
                                error: e,
                            });
                        }
                    }
                }
            }
        }
        propagate.map_or(Ok(()), Err)
    }
}

/// One tool run: the plan's index, the tool, its timeout, the arguments, the context.
type Job = (usize, Arc<dyn Tool>, Option<Duration>, Value, CallContext);

/// The node's [`OnUnresolved`] hook as the driver's settle capability.
struct HookSettle<'a> {
    policy: &'a OnUnresolved,
    /// The conversation an async hook shares, copied once per invocation.
    shared: std::sync::Mutex<Option<Arc<[Message]>>>,
}

impl Settle for HookSettle<'_> {
    fn settle<'a>(
        &'a self,
        call: UnresolvedCall,
        history: &'a [Message],
    ) -> BoxFuture<'a, Resolution> {
        Box::pin(async move {
            match self.policy {
                OnUnresolved::Hook(hook) => hook(&call, history),
                OnUnresolved::AsyncHook(hook) => {
                    let shared = {
                        let mut slot = self
                            .shared
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        slot.get_or_insert_with(|| Arc::from(history.to_vec()))
                            .clone()
                    };
                    hook(call, shared).await
                }
                _ => Resolution::Default,
            }
        })
    }
}

/// Aborts a spawned tool task when dropped (finished tasks ignore it).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs a tool body inside the invoking task: no scheduling cost; a panic is caught.
async fn run_in_task(
    tool: &dyn Tool,
    args: Value,
    ctx: CallContext,
    timeout: Option<Duration>,
) -> Result<ToolOutput, ToolError> {
    // Called inside the future, so that a panic before the tool's first await is caught too.
    let body = AssertUnwindSafe(async move { tool.call(args, ctx).await }).catch_unwind();
    let result = match timeout {
        Some(limit) => match tokio::time::timeout(limit, body).await {
            Ok(r) => r,
            Err(_) => return Err(ToolError::Timeout(limit)),
        },
        None => body.await,
    };
    result.unwrap_or_else(|panic| Err(ToolError::Panicked(panic_text(&*panic))))
}

/// Runs a tool body as its own tokio task: other worker threads keep going while it
/// blocks or computes, and a timed-out task is aborted.
async fn run_spawned(
    tool: Arc<dyn Tool>,
    args: Value,
    ctx: CallContext,
    timeout: Option<Duration>,
) -> Result<ToolOutput, ToolError> {
    #[allow(clippy::disallowed_methods)] // the one place that spawns (see clippy.toml)
    let handle = tokio::spawn(async move { tool.call(args, ctx).await });
    // If the caller gives up (drops the invocation), the tool stops too.
    let abort = AbortOnDrop(handle.abort_handle());
    let joined = match timeout {
        Some(limit) => match tokio::time::timeout(limit, handle).await {
            Ok(j) => j,
            Err(_) => {
                drop(abort);
                return Err(ToolError::Timeout(limit));
            }
        },
        None => handle.await,
    };
    match joined {
        Ok(result) => result,
        Err(e) if e.is_panic() => Err(ToolError::Panicked(panic_text(&*e.into_panic()))),
        Err(e) => Err(ToolError::Failed(format!("the tool's task ended: {e}"))),
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
