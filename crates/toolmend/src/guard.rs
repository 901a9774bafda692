//! Guard: the last word before a valid call runs. Flood windows, identical-call loops and
//! per-run budgets live behind [`Guard`] (a later part; in memory and in Redis). Here the
//! trait and [`NoGuard`], which allows everything.

use std::fmt;

use serde_json::Value;

use crate::future::BoxFuture;

/// One call about to run.
#[derive(Debug, Clone, Copy)]
pub struct GuardRequest<'a> {
    /// The session (conversation, thread) the call belongs to, if the caller named one.
    pub session: Option<&'a str>,
    /// The call id.
    pub call_id: &'a str,
    /// The tool.
    pub tool: &'a str,
    /// The validated arguments.
    pub arguments: &'a Value,
}

/// A guard's decision for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Do not run it; the reason goes to the agent (outcome `flooded`).
    Deny {
        /// Why, in words the agent can act on.
        reason: String,
    },
}

/// Decides which valid calls may run. Gets every runnable call of one assistant message
/// at once, so a shared backend can answer them in one round trip.
pub trait Guard: Send + Sync {
    /// False for the allow-all guard: the node then skips the stage.
    fn is_enabled(&self) -> bool {
        true
    }
    /// One verdict per request, in order.
    fn check<'a>(&'a self, calls: &'a [GuardRequest<'a>]) -> BoxFuture<'a, Vec<Verdict>>;
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
    fn check<'a>(&'a self, calls: &'a [GuardRequest<'a>]) -> BoxFuture<'a, Vec<Verdict>> {
        (**self).check(calls)
    }
}

/// The default: every call may run.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoGuard;

impl Guard for NoGuard {
    fn is_enabled(&self) -> bool {
        false
    }
    fn check<'a>(&'a self, calls: &'a [GuardRequest<'a>]) -> BoxFuture<'a, Vec<Verdict>> {
        Box::pin(std::future::ready(vec![Verdict::Allow; calls.len()]))
    }
}
