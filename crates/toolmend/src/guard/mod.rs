//! Guard: the last word before a valid call runs.
//!
//! ```text
//! calls of one message ─► RuleGuard ─┬─ history rules (loops.rs): repeat, ping-pong, no progress
//!                                    └─ store rules, one round trip (store.rs): windows per
//!                                       session / tool / tool across sessions, duplicates,
//!                                       thread and run budgets, seen ids
//!                       ◄─ one Verdict per call: allow, deny (flooded), end the run, error
//! ```
//!
//! Every front (node, Python, gateway) calls [`Guard::check`] once per message with all its
//! runnable calls. [`RuleGuard`] is the configured guard; [`NoGuard`] allows everything.
//! A refused call is still answered: its tool message begins with [`FLOOD_PREFIX`].

pub mod config;
mod fail_log;
pub mod fingerprint;
pub mod loops;
mod rules;
pub mod stage;
pub mod store;

use std::{fmt, time::Duration};

use serde::Serialize;
use serde_json::Value;

pub use config::{
    Budget, Duplicate, ExitBehavior, FailMode, GuardConfig, Ladder, NoProgress, PingPong,
    ToolRules, Window,
};
pub use fail_log::FAIL_LOG_EVERY;
pub use rules::{DEFAULT_TIMEOUT, RuleGuard, session_key};
pub use store::{GuardStore, MemoryStore, StoreError};

use crate::{conversation::Message, future::BoxFuture};

/// How a refusal's message begins (the field's wording, so agents and logs that look
/// for it find it), for every rule but a store outage ([`UNCHECKED_PREFIX`]).
pub const FLOOD_PREFIX: &str = "tool call cancelled because tool-call flooding was detected";

/// How a refusal begins when the guard could not decide (its store did not answer and
/// it fails closed): that is no flood, and the agent is not told it is.
pub const UNCHECKED_PREFIX: &str = "tool call cancelled because the flood guard could not check it";

/// True when `text` is a guard's refusal (either prefix): the call did not run.
pub fn is_refusal(text: &str) -> bool {
    text.starts_with(FLOOD_PREFIX) || text.starts_with(UNCHECKED_PREFIX)
}

/// What the guard sees of the conversation.
#[derive(Debug, Clone, Copy, Default)]
pub struct GuardContext<'a> {
    /// The session (conversation, thread) the calls belong to, if the caller named one.
    /// Without one, only the rules that need none apply (history rules, windows across
    /// sessions).
    pub session: Option<&'a str>,
    /// The messages before the one whose calls are checked.
    pub history: &'a [Message],
}

/// One call about to run.
#[derive(Debug, Clone, Copy)]
pub struct GuardRequest<'a> {
    /// The call id.
    pub call_id: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// The validated (mended) arguments.
    pub arguments: &'a Value,
}

/// A rule, as named in metrics, logs and messages (a bounded set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// `[guard.session]`: calls per session.
    SessionWindow,
    /// `[guard.tools.X.session]`: calls of one tool per session.
    ToolWindow,
    /// `[guard.tools.X.global]`: calls of one tool across sessions.
    ToolGlobalWindow,
    /// `[guard.duplicate]`: the same call within a window.
    Duplicate,
    /// `[guard.repeat]`: the same call in consecutive turns.
    Repeat,
    /// `[guard.ping_pong]`: A B A B.
    PingPong,
    /// `[guard.no_progress]`: the same call, the same result.
    NoProgress,
    /// `thread_limit`: calls that ran in the thread.
    ThreadLimit,
    /// `run_limit`: calls that ran in the run.
    RunLimit,
    /// The store did not answer in time or failed, and the guard fails closed.
    StoreUnavailable,
    /// A guard of the caller's own.
    Custom,
}

impl Rule {
    /// The name in metrics, logs and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::SessionWindow => "session_window",
            Rule::ToolWindow => "tool_window",
            Rule::ToolGlobalWindow => "tool_global_window",
            Rule::Duplicate => "duplicate",
            Rule::Repeat => "repeat",
            Rule::PingPong => "ping_pong",
            Rule::NoProgress => "no_progress",
            Rule::ThreadLimit => "thread_limit",
            Rule::RunLimit => "run_limit",
            Rule::StoreUnavailable => "store_unavailable",
            Rule::Custom => "custom",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a rule (or the whole verdict) decides, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Run it (a decision with this action is an observation: reported, nothing refused).
    #[default]
    Allow,
    /// Do not run it; answer it with the reason (outcome `flooded`).
    Deny,
    /// End the run: no call of the message runs, every one is answered.
    End,
    /// Fail the invocation (`exit_behavior = "error"`).
    Error,
}

impl Action {
    /// The name in metrics and headers.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::End => "end",
            Action::Error => "error",
        }
    }
}

/// One rule's decision on one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The rule.
    pub rule: Rule,
    /// What it decided (before shadow mode: a shadow decision refuses nothing).
    pub action: Action,
    /// The rule runs in shadow mode.
    pub shadow: bool,
    /// Calls counted, this one included.
    pub count: u64,
    /// The rule's limit.
    pub limit: u64,
    /// The rule's window, if it has one.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_ms")]
    pub window: Option<Duration>,
    /// When a call like this one may pass again, if known.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_ms")]
    pub retry_after: Option<Duration>,
}

fn ser_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

impl Decision {
    /// True when this decision refuses (not an observation, not shadowed).
    pub fn refuses(&self) -> bool {
        self.action > Action::Allow && !self.shadow
    }
}

/// The guard's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict {
    /// What happens to the call.
    pub action: Action,
    /// For a refusal: the message the agent gets, beginning with [`FLOOD_PREFIX`] for the
    /// configured rules.
    pub reason: Option<String>,
    /// When the refused call may pass again, if known (`Retry-After`).
    pub retry_after: Option<Duration>,
    /// Every rule that had something to say, observations and shadow decisions included.
    pub decisions: Vec<Decision>,
    /// The call's id was already used in this session (an earlier turn the history no
    /// longer shows): the front gives it a fresh one.
    pub id_reused: bool,
}

impl Verdict {
    /// Run it.
    pub fn allow() -> Self {
        Verdict::default()
    }

    /// Do not run it; answer with `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        Verdict {
            action: Action::Deny,
            reason: Some(reason.into()),
            ..Verdict::default()
        }
    }

    /// True when the call may run.
    pub fn is_allowed(&self) -> bool {
        self.action == Action::Allow
    }
}

/// Decides which valid calls may run. Gets every runnable call of one assistant message
/// at once, so a shared backend can answer them in one round trip.
pub trait Guard: Send + Sync {
    /// False for the allow-all guard: the node then skips the stage.
    fn is_enabled(&self) -> bool {
        true
    }
    /// One verdict per request, in order.
    fn check<'a>(
        &'a self,
        ctx: GuardContext<'a>,
        calls: &'a [GuardRequest<'a>],
    ) -> BoxFuture<'a, Vec<Verdict>>;
}

impl fmt::Debug for dyn Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Guard")
    }
}

impl<T: Guard + ?Sized> Guard for std::sync::Arc<T> {
    fn is_enabled(&self) -> bool {
        (**self).is_enabled()
    }
    fn check<'a>(
        &'a self,
        ctx: GuardContext<'a>,
        calls: &'a [GuardRequest<'a>],
    ) -> BoxFuture<'a, Vec<Verdict>> {
        (**self).check(ctx, calls)
    }
}

/// The default: every call may run.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoGuard;

impl Guard for NoGuard {
    fn is_enabled(&self) -> bool {
        false
    }
    fn check<'a>(
        &'a self,
        _ctx: GuardContext<'a>,
        calls: &'a [GuardRequest<'a>],
    ) -> BoxFuture<'a, Vec<Verdict>> {
        Box::pin(std::future::ready(vec![Verdict::allow(); calls.len()]))
    }
}
