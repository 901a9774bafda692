//! A small agent loop: ask the model, answer its tool calls with the [`ToolNode`], repeat,
//! until the model answers without calling a tool or a [`Limits`] fires.
//!
//! [`ChatModel`] is the seam a provider client fills (an OpenAI-compatible client comes
//! with the correction part); [`ScriptedModel`] stands in for a model in tests and demos
//! and checks every request the way a strict provider does: a history that breaks the
//! call/result pairing is refused with the provider's HTTP 400 wording.

use std::{
    collections::VecDeque,
    fmt,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde::Serialize;

use crate::{
    conversation::{AssistantMessage, Message, Tool},
    future::BoxFuture,
    history::{self, Budget, ByteEstimate, SanitizePolicy, TokenCounter, ViolationKind},
    node::{InvokeOptions, NodeError, NodeStats, ToolNode},
};

/// Why a model request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", .status.map(|s| format!("HTTP {s}: ")).unwrap_or_default())]
pub struct ModelError {
    /// The HTTP status, when the provider answered.
    pub status: Option<u16>,
    /// The provider's message (or the transport error).
    pub message: String,
}

/// A chat model: the messages and the tools in, one assistant message out.
pub trait ChatModel: Send + Sync {
    /// One completion.
    fn complete<'a>(
        &'a self,
        messages: &'a [Message],
        tools: &'a [Tool],
    ) -> BoxFuture<'a, Result<AssistantMessage, ModelError>>;
}

impl fmt::Debug for dyn ChatModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChatModel")
    }
}

/// When the loop stops besides the model's final answer.
#[derive(Clone)]
pub struct Limits {
    /// Model turns (default 25).
    pub max_turns: usize,
    /// Tool calls run, over the whole run (default 200); calls past it are answered
    /// without running (outcome `flooded`).
    pub max_tool_calls: usize,
    /// Wall time (default none).
    pub max_time: Option<Duration>,
    /// Trim what is sent to the model to this budget (whole groups move together;
    /// system messages and the first user message stay). The run keeps the full history.
    pub history_budget: Option<Budget>,
    /// Counts tokens for a token budget (default: the byte estimate).
    pub counter: Arc<dyn TokenCounter>,
    /// Sanitize what is sent to the model (after trimming): for providers stricter than
    /// OpenAI, such as vLLM and Anthropic, which also refuse argument text that is not a
    /// JSON object (calls answered with feedback keep the model's text) and empty results.
    pub sanitize: Option<SanitizePolicy>,
}

impl fmt::Debug for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limits")
            .field("max_turns", &self.max_turns)
            .field("max_tool_calls", &self.max_tool_calls)
            .field("max_time", &self.max_time)
            .field("history_budget", &self.history_budget)
            .finish_non_exhaustive()
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turns: 25,
            max_tool_calls: 200,
            max_time: None,
            history_budget: None,
            counter: Arc::new(ByteEstimate),
            sanitize: None,
        }
    }
}

/// Why the loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without calling a tool.
    Answered,
    /// `max_turns` model turns were used.
    MaxTurns,
    /// `max_tool_calls` calls were run.
    MaxToolCalls,
    /// `max_time` passed.
    MaxTime,
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutput {
    /// The full history: the input, every (sanitized) assistant message, every result.
    pub messages: Vec<Message>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Model turns taken.
    pub turns: usize,
    /// Tool calls run.
    pub tool_calls: usize,
    /// The node's stats, one per turn with calls.
    pub stats: Vec<NodeStats>,
}

/// Why a run failed, with what it had done until then.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{cause}")]
pub struct RunError {
    /// What failed.
    pub cause: RunFailure,
    /// The run so far: its history ends before the turn that failed (so it is valid to
    /// send again), with the turns, calls and stats until then.
    pub output: Box<RunOutput>,
}

/// What failed in a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RunFailure {
    /// The model request failed.
    #[error("model request failed: {0}")]
    Model(#[from] ModelError),
    /// The node returned an error (raise policy, a propagated tool error).
    #[error(transparent)]
    Node(#[from] NodeError),
}

/// Runs the loop. See the module docs.
pub async fn run(
    model: &dyn ChatModel,
    node: &ToolNode,
    mut messages: Vec<Message>,
    limits: &Limits,
) -> Result<RunOutput, RunError> {
    let started = Instant::now();
    let deadline = limits.max_time.map(|t| started + t);
    let tools = node.registry().definitions();
    let mut stats = Vec::new();
    let (mut turns, mut tool_calls) = (0, 0);
    let fail = |cause: RunFailure, messages: Vec<Message>, turns, tool_calls, stats| RunError {
        cause,
        output: Box::new(RunOutput {
            messages,
            stop: StopReason::Answered,
            turns,
            tool_calls,
            stats,
        }),
    };
    let stop = loop {
        if turns >= limits.max_turns {
            break StopReason::MaxTurns;
        }
        let remaining = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => break StopReason::MaxTime,
            },
            None => None,
        };
        let mut request = match limits.history_budget {
            Some(budget) => history::trim_ref(&messages, budget, &*limits.counter).messages,
            None => messages.clone(),
        };
        if let Some(policy) = &limits.sanitize {
            request = history::sanitize(request, policy).messages;
        }
        let answer = match remaining {
            Some(left) => {
                match tokio::time::timeout(left, model.complete(&request, &tools)).await {
                    Ok(r) => r,
                    Err(_) => break StopReason::MaxTime,
                }
            }
            None => model.complete(&request, &tools).await,
        };
        let reply = match answer {
            Ok(reply) => reply,
            Err(e) => return Err(fail(e.into(), messages, turns, tool_calls, stats)),
        };
        turns += 1;
        messages.push(Message::Assistant(reply));
        // Tool bodies get what is left of the time, and the calls of what is left of the
        // budget: a limit holds inside a turn too, and every call is still answered.
        let opts = InvokeOptions {
            deadline,
            max_calls: Some(limits.max_tool_calls.saturating_sub(tool_calls)),
            ..InvokeOptions::default()
        };
        let out = match node.invoke_with(&messages, &opts).await {
            Ok(out) => out,
            Err(e) => {
                messages.pop();
                return Err(fail(e.into(), messages, turns - 1, tool_calls, stats));
            }
        };
        let had_calls = !out.stats.calls.is_empty() || !out.stats.already_answered.is_empty();
        let ran = out
            .stats
            .calls
            .iter()
            .filter(|c| c.outcome.may_run())
            .count();
        if had_calls {
            stats.push(out.stats.clone());
        }
        out.apply_to(&mut messages);
        if !had_calls {
            break StopReason::Answered;
        }
        tool_calls += ran;
        if tool_calls >= limits.max_tool_calls {
            break StopReason::MaxToolCalls;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break StopReason::MaxTime;
        }
    };
    Ok(RunOutput {
        messages,
        stop,
        turns,
        tool_calls,
        stats,
    })
}

/// A reply function: the request's messages in, the next assistant message out.
pub type Reply = Box<dyn Fn(&[Message]) -> AssistantMessage + Send + Sync>;

/// Which history rules a [`ScriptedModel`] enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strictness {
    /// What OpenAI refuses: unanswered calls, orphan, duplicate and misplaced results,
    /// missing or too long ids, duplicate call ids, invalid function names. Argument text
    /// that is not JSON and empty results pass, as they do at OpenAI.
    #[default]
    OpenAi,
    /// Every rule [`history::check`] knows, as the strictest of vLLM, Anthropic and
    /// Bedrock together.
    All,
}

impl Strictness {
    /// True when this strictness refuses `kind`.
    pub fn refuses(self, kind: ViolationKind) -> bool {
        match self {
            Strictness::All => true,
            Strictness::OpenAi => !matches!(
                kind,
                ViolationKind::ArgumentsNotObject | ViolationKind::EmptyToolContent
            ),
        }
    }
}

/// A model that answers from a script, and refuses a broken history the way providers do.
///
/// Every request is checked with [`history::check`]; a violation its [`Strictness`]
/// refuses is answered with `HTTP 400` and the provider's wording (the first violation),
/// as a strict provider would. The requests are kept for inspection.
pub struct ScriptedModel {
    strictness: Strictness,
    replies: Mutex<VecDeque<Reply>>,
    fallback: Option<Reply>,
    requests: Mutex<Vec<Vec<Message>>>,
    keep_requests: bool,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel").finish_non_exhaustive()
    }
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedModel {
    /// An empty script; a request past its end is an error (HTTP 500: "script exhausted").
    pub fn new() -> Self {
        ScriptedModel {
            strictness: Strictness::OpenAi,
            replies: Mutex::new(VecDeque::new()),
            fallback: None,
            requests: Mutex::new(Vec::new()),
            keep_requests: true,
        }
    }

    /// Queues a fixed reply.
    #[must_use]
    pub fn reply(self, message: AssistantMessage) -> Self {
        self.reply_with(move |_| message.clone())
    }

    /// Queues a reply computed from the request.
    #[must_use]
    pub fn reply_with(
        self,
        f: impl Fn(&[Message]) -> AssistantMessage + Send + Sync + 'static,
    ) -> Self {
        if let Ok(mut r) = self.replies.lock() {
            r.push_back(Box::new(f));
        }
        self
    }

    /// Answers every request past the queued replies with `f`.
    #[must_use]
    pub fn otherwise(
        mut self,
        f: impl Fn(&[Message]) -> AssistantMessage + Send + Sync + 'static,
    ) -> Self {
        self.fallback = Some(Box::new(f));
        self
    }

    /// Which rules to enforce (default: OpenAI's).
    #[must_use]
    pub fn strictness(mut self, strictness: Strictness) -> Self {
        self.strictness = strictness;
        self
    }

    /// Do not keep the requests (long runs).
    #[must_use]
    pub fn forget_requests(mut self) -> Self {
        self.keep_requests = false;
        self
    }

    /// The requests received, in order.
    pub fn requests(&self) -> Vec<Vec<Message>> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn answer(&self, messages: &[Message]) -> Result<AssistantMessage, ModelError> {
        let violations = history::check(messages);
        if let Some(v) = violations.iter().find(|v| self.strictness.refuses(v.kind)) {
            return Err(ModelError {
                status: Some(400),
                message: v.provider_error.clone(),
            });
        }
        if self.keep_requests
            && let Ok(mut r) = self.requests.lock()
        {
            r.push(messages.to_vec());
        }
        let next = self.replies.lock().ok().and_then(|mut r| r.pop_front());
        match (next, &self.fallback) {
            (Some(reply), _) => Ok(reply(messages)),
            (None, Some(fallback)) => Ok(fallback(messages)),
            (None, None) => Err(ModelError {
                status: Some(500),
                message: "script exhausted: no reply left for this request".to_owned(),
            }),
        }
    }
}

impl ChatModel for ScriptedModel {
    fn complete<'a>(
        &'a self,
        messages: &'a [Message],
        _tools: &'a [Tool],
    ) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        Box::pin(std::future::ready(self.answer(messages)))
    }
}
