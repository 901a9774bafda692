//! Stats: one record per call (outcome, fixes, issues, correction attempts, time per
//! stage), one [`NodeStats`] per invocation, sent to every [`Listener`]; a
//! [`StatsCollector`] adds them up.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Mutex, mpsc},
    time::Duration,
};

use serde::Serialize;

use crate::drive::micros;

use crate::{Fix, Issue, correct::Usage};

pub use crate::message::{CallOutcome, CallSource};

pub use crate::drive::Timings;

/// One call's record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallStats {
    /// The call id it was answered under (minted ids included); for a dropped exact
    /// repeat, the settled id of the call of this message it repeats, whose result
    /// answers both.
    pub call_id: Option<String>,
    /// The id the model sent, when the node minted a new one (repeated in the message,
    /// used by an earlier turn, over 40 chars) or dropped the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_id: Option<String>,
    /// The tool (the registered name once resolved; else the name sent).
    pub tool: String,
    /// The outcome.
    pub outcome: CallOutcome,
    /// Where the call came from.
    pub source: CallSource,
    /// Every fix applied (repair, coercion), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
    /// The issues that kept it from running (for feedback), or that correction fixed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
    /// Correction attempts made.
    pub correction_attempts: u32,
    /// Tokens the corrections spent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub correction_usage: Vec<Usage>,
    /// True when the tool ran and failed (timeout, panic, error).
    pub tool_error: bool,
    /// Whose fault the tool's failure is (`call`, `unavailable`, `timeout`, `failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<super::Fault>,
    /// Why it was dropped or flooded, or the tool error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What the guard's rules said about it (refusals, observations, shadow decisions).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guard: Vec<crate::guard::Decision>,
    /// Time per stage.
    pub timings: Timings,
}

impl CallStats {
    /// True when fixes were applied.
    pub fn repaired(&self) -> bool {
        !self.fixes.is_empty()
    }
}

/// One invocation's record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeStats {
    /// The node's name.
    pub node: String,
    /// One record per call, in call order (dropped calls included).
    pub calls: Vec<CallStats>,
    /// Ids of calls already answered in the history (not run again).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub already_answered: Vec<String>,
    /// Changes to the assistant message itself (reasoning removed, calls moved out of the text).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub message_fixes: Vec<Fix>,
    /// The guard ended the run (`exit_behavior = "end"`, the repeat ladder's `stop`): the
    /// reason. No call of the message ran; the caller should stop calling tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Wall time of the invocation.
    #[serde(serialize_with = "micros")]
    pub elapsed: Duration,
}

impl NodeStats {
    /// How many calls had `outcome`.
    pub fn count(&self, outcome: CallOutcome) -> usize {
        self.calls.iter().filter(|c| c.outcome == outcome).count()
    }
}

/// Receives every invocation's stats. Closures, std and tokio channel senders are listeners.
pub trait Listener: Send + Sync {
    /// Called once per invocation, after the results are ready.
    fn on_stats(&self, stats: &NodeStats);
}

impl fmt::Debug for dyn Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Listener")
    }
}

impl<T: Listener + ?Sized> Listener for std::sync::Arc<T> {
    fn on_stats(&self, stats: &NodeStats) {
        (**self).on_stats(stats);
    }
}

impl<F: Fn(&NodeStats) + Send + Sync> Listener for F {
    fn on_stats(&self, stats: &NodeStats) {
        self(stats);
    }
}

impl Listener for mpsc::Sender<NodeStats> {
    fn on_stats(&self, stats: &NodeStats) {
        // A receiver that hung up is not the node's failure.
        let _ = self.send(stats.clone());
    }
}

impl Listener for tokio::sync::mpsc::UnboundedSender<NodeStats> {
    fn on_stats(&self, stats: &NodeStats) {
        let _ = self.send(stats.clone());
    }
}

/// Totals over many invocations.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Aggregate {
    /// Invocations seen.
    pub invocations: u64,
    /// Calls seen.
    pub calls: u64,
    /// Calls per outcome.
    pub outcomes: BTreeMap<CallOutcome, u64>,
    /// Fixes per kind id.
    pub fixes: BTreeMap<&'static str, u64>,
    /// Issues per kind id (of calls answered with feedback).
    pub issues: BTreeMap<&'static str, u64>,
    /// Calls per tool.
    pub tools: BTreeMap<String, u64>,
    /// Tool runs that failed.
    pub tool_errors: u64,
    /// Correction attempts.
    pub correction_attempts: u64,
    /// Correction tokens per model: (prompt, completion).
    pub correction_tokens: BTreeMap<String, (u64, u64)>,
}

/// A listener that adds every invocation into an [`Aggregate`].
#[derive(Debug, Default)]
pub struct StatsCollector {
    total: Mutex<Aggregate>,
}

impl StatsCollector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// The totals so far.
    pub fn snapshot(&self) -> Aggregate {
        self.total.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl Listener for StatsCollector {
    fn on_stats(&self, stats: &NodeStats) {
        let Ok(mut t) = self.total.lock() else {
            return;
        };
        t.invocations += 1;
        for f in &stats.message_fixes {
            *t.fixes.entry(f.kind.id()).or_default() += 1;
        }
        for c in &stats.calls {
            t.calls += 1;
            *t.outcomes.entry(c.outcome).or_default() += 1;
            for f in &c.fixes {
                *t.fixes.entry(f.kind.id()).or_default() += 1;
            }
            if c.outcome == CallOutcome::Feedback {
                for i in &c.issues {
                    *t.issues.entry(i.kind.id()).or_default() += 1;
                }
            }
            *t.tools.entry(c.tool.clone()).or_default() += 1;
            t.tool_errors += u64::from(c.tool_error);
            t.correction_attempts += u64::from(c.correction_attempts);
            for u in &c.correction_usage {
                let e = t.correction_tokens.entry(u.model.clone()).or_default();
                e.0 += u.prompt_tokens;
                e.1 += u.completion_tokens;
            }
        }
    }
}
