//! Policies: what the node does with a call that stays invalid ([`OnUnresolved`]) and
//! with a tool that fails ([`ToolErrorPolicy`]), and the typed errors it returns.

use std::{fmt, sync::Arc};

use super::{Fault, ToolError};
use crate::conversation::Message;
pub use crate::drive::{Resolution, UnresolvedCall};

/// A hook deciding unresolved calls; sees the call and the conversation.
pub type ResolveHook = Arc<dyn Fn(&UnresolvedCall, &[Message]) -> Resolution + Send + Sync>;

/// An async hook: gets the call and the conversation (shared), answers later (it may ask
/// a person, a database, another model).
pub type AsyncResolveHook = Arc<
    dyn Fn(UnresolvedCall, Arc<[Message]>) -> crate::future::BoxFuture<'static, Resolution>
        + Send
        + Sync,
>;

/// What to do with calls that stay invalid.
#[derive(Clone, Default)]
pub enum OnUnresolved {
    /// Answer each with feedback the agent can act on (the default).
    #[default]
    Feedback,
    /// Return [`NodeError::Unresolved`] listing every unresolved call, before anything runs.
    Raise,
    /// Ask a hook.
    Hook(ResolveHook),
    /// Ask an async hook (bounded by the node's `stage_timeout`; past it, the default).
    AsyncHook(AsyncResolveHook),
}

impl fmt::Debug for OnUnresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OnUnresolved::Feedback => "Feedback",
            OnUnresolved::Raise => "Raise",
            OnUnresolved::Hook(_) => "Hook",
            OnUnresolved::AsyncHook(_) => "AsyncHook",
        })
    }
}

impl OnUnresolved {
    /// An async hook from a closure returning a future.
    pub fn hook_async<F, Fut>(f: F) -> Self
    where
        F: Fn(UnresolvedCall, Arc<[Message]>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Resolution> + Send + 'static,
    {
        OnUnresolved::AsyncHook(Arc::new(move |call, history| Box::pin(f(call, history))))
    }

    /// A hook from a closure.
    pub fn hook(
        f: impl Fn(&UnresolvedCall, &[Message]) -> Resolution + Send + Sync + 'static,
    ) -> Self {
        OnUnresolved::Hook(Arc::new(f))
    }
}

/// The template LangGraph's `ToolNode` uses for a caught tool error: for an error that
/// is the call's own ([`Fault::Call`]: the tool refused or failed on these arguments).
pub const TOOL_ERROR_TEMPLATE: &str = "Error: {error}\n Please fix your mistakes.";

/// For a tool that could not be reached or would not take the call
/// ([`Fault::Unavailable`]): it did not run, and nothing says the call is wrong.
pub const TOOL_UNAVAILABLE_TEMPLATE: &str = "Error: {error}\n The tool is unavailable, so the call did not run. Nothing is known to be wrong with your call: try again later, or reach your goal another way.";

/// For a tool that did not answer in time ([`Fault::Timeout`]): the call may or may not
/// have run.
pub const TOOL_TIMEOUT_TEMPLATE: &str = "Error: {error}\n The tool did not answer in time: the call may or may not have run. Nothing is known to be wrong with your call: try again later or another way, and before repeating a call that changes something, check whether it took effect.";

/// For a tool or service that failed ([`Fault::Failed`]: a 5xx, a broken answer, a
/// panic): the call may or may not have run.
pub const TOOL_FAILED_TEMPLATE: &str = "Error: {error}\n The tool failed on its side: the call may or may not have run. Nothing is known to be wrong with your call: try again later or another way, and before repeating a call that changes something, check whether it took effect.";

/// The template for a fault: [`TOOL_ERROR_TEMPLATE`] for the call's own,
/// [`TOOL_UNAVAILABLE_TEMPLATE`], [`TOOL_TIMEOUT_TEMPLATE`] or [`TOOL_FAILED_TEMPLATE`]
/// for the tool's.
pub fn tool_error_template(fault: Fault) -> &'static str {
    match fault {
        Fault::Call => TOOL_ERROR_TEMPLATE,
        Fault::Unavailable => TOOL_UNAVAILABLE_TEMPLATE,
        Fault::Timeout => TOOL_TIMEOUT_TEMPLATE,
        Fault::Failed => TOOL_FAILED_TEMPLATE,
    }
}

/// Which tool failures become an error result the agent reads, and in what words
/// (LangGraph's `handle_tool_errors`). A panic always becomes an error result for its
/// call alone, whatever the policy.
#[derive(Clone, Default)]
pub enum ToolErrorPolicy {
    /// None: the first failure is returned as [`NodeError::Tool`] (results of the other
    /// calls are lost with it, as in LangGraph).
    Propagate,
    /// All failures, in the words for whose fault each is (the default):
    /// [`TOOL_ERROR_TEMPLATE`] when it is the call's, LangGraph's; another template when
    /// it is the tool's ([`tool_error_template`]).
    #[default]
    All,
    /// All failures, answered with this fixed text.
    Message(String),
    /// Failures the predicate accepts, worded as with `All`; others propagate.
    Predicate(ErrorPredicate),
    /// The formatter's text; `None` propagates.
    Format(ErrorFormatter),
}

/// Decides whether a tool failure is caught.
pub type ErrorPredicate = Arc<dyn Fn(&ToolError) -> bool + Send + Sync>;
/// Words a tool failure for the agent; `None` propagates it.
pub type ErrorFormatter = Arc<dyn Fn(&ToolError) -> Option<String> + Send + Sync>;

impl fmt::Debug for ToolErrorPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolErrorPolicy::Propagate => f.write_str("Propagate"),
            ToolErrorPolicy::All => f.write_str("All"),
            ToolErrorPolicy::Message(m) => f.debug_tuple("Message").field(m).finish(),
            ToolErrorPolicy::Predicate(_) => f.write_str("Predicate"),
            ToolErrorPolicy::Format(_) => f.write_str("Format"),
        }
    }
}

impl ToolErrorPolicy {
    /// Only failures the predicate accepts are caught.
    pub fn only(f: impl Fn(&ToolError) -> bool + Send + Sync + 'static) -> Self {
        ToolErrorPolicy::Predicate(Arc::new(f))
    }

    /// A custom formatter.
    pub fn format(f: impl Fn(&ToolError) -> Option<String> + Send + Sync + 'static) -> Self {
        ToolErrorPolicy::Format(Arc::new(f))
    }

    /// The error result's text, or `None` to propagate.
    pub(crate) fn render(&self, e: &ToolError) -> Option<String> {
        let template = || tool_error_template(e.fault()).replace("{error}", &e.to_string());
        match self {
            _ if matches!(e, ToolError::Panicked(_)) => Some(template()),
            ToolErrorPolicy::Propagate => None,
            ToolErrorPolicy::All => Some(template()),
            ToolErrorPolicy::Message(m) => Some(m.clone()),
            ToolErrorPolicy::Predicate(p) => p(e).then(template),
            ToolErrorPolicy::Format(f) => f(e),
        }
    }
}

/// Why an invocation returned no results.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// No assistant message in the input.
    #[error(
        "no assistant message in the input: the node answers the last assistant message's tool calls"
    )]
    NoAssistantMessage,
    /// `OnUnresolved::Raise`: these calls stayed invalid; nothing was run.
    #[error("{} tool call(s) stayed invalid, nothing was run: {}", .0.len(), summary(.0))]
    Unresolved(Vec<UnresolvedCall>),
    /// A guard budget with `exit_behavior = "error"` was exceeded; nothing was run
    /// (LangChain's `ToolCallLimitExceededError`).
    #[error("{reason}")]
    LimitExceeded {
        /// The guard's message (rule, count, limit).
        reason: String,
    },
    /// `ToolErrorPolicy` let a tool failure through.
    #[error("tool `{tool}` (call {call_id}) failed: {error}")]
    Tool {
        /// The call id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The failure.
        error: ToolError,
    },
}

fn summary(calls: &[UnresolvedCall]) -> String {
    calls
        .iter()
        .map(|c| {
            let first = c.issues.first().map_or("invalid", |i| i.message.as_str());
            format!("{} (id {}): {first}", c.tool, c.call_id)
        })
        .collect::<Vec<_>>()
        .join("; ")
}
