//! The driver: every stage after the model's answer, in one order, for every front.
//!
//! ```text
//! plan      the message's plan (crate::message): calls, ids by the one rule, mending
//! front     calls the front's runtime takes as sent; the front's validators (initial)
//! invalid   the fronts' chain, in its order: re-ask (the model shown its invalid calls
//!           and their feedback, its new calls merged in), correct (a corrector), pass
//! settle    what stays invalid: raise, or a hook's salvage / feedback, else feedback
//! budget    calls past the run's call budget are refused
//! guard     one verdict per call that may run (a panic, a timeout, a missing verdict
//!           deny); reused ids renamed; a refusal answered, re-asked, rejected or flagged
//! ```
//!
//! A front converts its wire format into a [`Turn`] (neutral messages, `cut_off` for a
//! model stopped by its token limit), hands in its capabilities as [`Stages`] (a
//! corrector, a way to ask the model again, a hook, a guard, an observer for its metrics)
//! and converts the [`Resolved`] answer back. Running the calls that may run is the
//! node's (and the gateway's server-side tools'); the driver never runs a tool.

mod correct;
mod front;
mod guard;
mod plan;
mod re_ask;
mod settle;

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use crate::validate::{Validate, Validation};
pub use front::{Accept, Taken};
pub use guard::{GuardTally, OnRefused, Refusal, Rejected};
pub use plan::plan;
pub use re_ask::{ReAnswer, ReAsk, ReAskFailure, ReAskRequest, merge};
pub use settle::{Resolution, Settle, UnresolvedCall};

use crate::{
    Fix, Issue, Toolbox,
    conversation::{AssistantMessage, Message},
    correct::{Corrector, Usage},
    guard::{Decision, Guard},
    mend::Outcome,
    message::{AnsweredCall, Around, CallOutcome, CallSource, PlanOptions, TimeOrderedIds},
};

/// One model answer to resolve, in neutral terms.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    /// The assistant message.
    pub message: &'a AssistantMessage,
    /// The messages before it.
    pub history: &'a [Message],
    /// The messages after it (results already there answer their calls), if any.
    pub later: &'a [Message],
    /// The model stopped at its token limit: its last call may be cut off.
    pub cut_off: bool,
    /// Caller state, for custom validators.
    pub state: Option<&'a Value>,
    /// Where the message stands, for a front whose history is not in these terms
    /// (Python's LangChain messages): the ids around it and its index. `None`: read from
    /// `history` and `later`.
    pub place: Option<Place<'a>>,
}

/// The ids around a message and its index in the conversation.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// Ids used before it, and ids the results right after it answer.
    pub around: Around<'a>,
    /// Its index (minted ids name it).
    pub position: usize,
    /// Per sent call, the arguments a framework parsed already (LangChain's `args`), when
    /// it did: planned from the value, as parsed arguments are (the message carries their
    /// JSON text).
    pub parsed: &'a [Option<Value>],
}

impl<'a> Turn<'a> {
    /// A fresh answer to a request whose messages are `history` (nothing after it, no
    /// caller state).
    pub fn fresh(message: &'a AssistantMessage, history: &'a [Message], cut_off: bool) -> Self {
        Turn {
            message,
            history,
            later: &[],
            cut_off,
            state: None,
            place: None,
        }
    }
}

/// What a front hands the driver: its tools, options and capabilities.
#[derive(Clone, Copy)]
pub struct Stages<'a> {
    /// The tools calls are mended against.
    pub toolbox: &'a Toolbox,
    /// Invalid calls the front's runtime takes as sent.
    pub accept: Option<&'a dyn Accept>,
    /// The front's own validators (phases initial, correction, salvage).
    pub validate: Option<&'a dyn Validate>,
    /// How the message is planned (and every later re-validation's coercions).
    pub plan: &'a PlanOptions,
    /// What is done, in order, with calls that stayed invalid.
    pub invalid: &'a [Invalid],
    /// The corrector, for [`Invalid::Correct`].
    pub correction: Option<Correcting<'a>>,
    /// The way to ask the model again, for [`Invalid::ReAsk`] and [`OnRefused::ReAsk`].
    pub re_ask: Option<&'a dyn ReAsk>,
    /// At most this many re-asks for invalid calls.
    pub max_re_asks: u32,
    /// What stays invalid after the chain: raise ([`Stop::Unresolved`]) instead of
    /// answering it with feedback.
    pub raise_unresolved: bool,
    /// A hook deciding what stays invalid (salvage, own feedback), bounded by
    /// `stage_timeout`; a panic or a late answer gives the default feedback.
    pub settle: Option<&'a dyn Settle>,
    /// At most this many calls may run (a run's remaining budget).
    pub budget: Option<usize>,
    /// The guard.
    pub guard: Option<Guarding<'a>>,
    /// How long a hook may take.
    pub stage_timeout: Duration,
    /// Told of what the stages do, for the front's metrics.
    pub observer: &'a dyn Observer,
}

impl std::fmt::Debug for Stages<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stages")
            .field("invalid", &self.invalid)
            .field("max_re_asks", &self.max_re_asks)
            .field("raise_unresolved", &self.raise_unresolved)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl<'a> Stages<'a> {
    /// Plan only: no chain, no guard, nothing observed.
    pub fn plan_only(toolbox: &'a Toolbox, plan: &'a PlanOptions) -> Self {
        Stages {
            toolbox,
            accept: None,
            validate: None,
            plan,
            invalid: &[],
            correction: None,
            re_ask: None,
            max_re_asks: 0,
            raise_unresolved: false,
            settle: None,
            budget: None,
            guard: None,
            stage_timeout: Duration::from_secs(60),
            observer: &NoObserver,
        }
    }
}

/// One step of the chain for invalid calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Ask the model again with its invalid calls and their feedback.
    ReAsk,
    /// Ask the corrector.
    Correct,
    /// Leave them (the chain ends).
    Pass,
}

/// The corrector and how it runs.
#[derive(Clone, Copy)]
pub struct Correcting<'a> {
    /// The corrector.
    pub corrector: &'a dyn Corrector,
    /// Attempts per call (at least 1).
    pub max_retries: u32,
    /// How long one attempt may take.
    pub timeout: Duration,
    /// Calls corrected at once (at least 1).
    pub concurrency: usize,
    /// What becomes of an answer that changed a value no issue named.
    pub scope: crate::correct::CorrectionScope,
}

impl std::fmt::Debug for Correcting<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Correcting")
            .field("max_retries", &self.max_retries)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

/// The guard and what a refusal does.
#[derive(Clone, Copy)]
pub struct Guarding<'a> {
    /// The guard.
    pub guard: &'a dyn Guard,
    /// The session the calls belong to.
    pub session: Option<&'a str>,
    /// How long the guard may take in all; past it every call it was asked about is
    /// refused.
    pub timeout: Duration,
    /// Where ids come from for calls whose id the session used before.
    pub fresh_ids: &'a TimeOrderedIds,
    /// Rename a call whose id the session used before (off for a front whose message
    /// cannot carry a new id: LangGraph's `Send` payloads).
    pub rename_reused: bool,
    /// What a refusal does.
    pub on_refused: OnRefused,
    /// At most this many re-asks for refused calls ([`OnRefused::ReAsk`]).
    pub max_re_asks: u32,
}

impl std::fmt::Debug for Guarding<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarding")
            .field("session", &self.session)
            .field("on_refused", &self.on_refused)
            .field("max_re_asks", &self.max_re_asks)
            .finish_non_exhaustive()
    }
}

/// Told of what the stages do; every method does nothing by default.
pub trait Observer: Sync {
    /// Invalid calls are about to be re-asked; the client never sees them.
    fn re_asking(&self, _replaced: &[&CallReport]) {}
    /// A call's correction made `attempts` requests.
    fn corrected(&self, _attempts: u32) {}
    /// The guard was asked about `calls` calls and took `took`.
    fn guard_checked(&self, _calls: usize, _took: Duration) {}
    /// One decision of the guard.
    fn guard_decision(&self, _decision: &Decision) {}
    /// The guard refused calls of the answer.
    fn refused(&self, _calls: usize) {}
    /// The span each plan of an answer (the first, each re-asked one) runs in.
    fn plan_span(&self) -> tracing::Span {
        tracing::Span::none()
    }
    /// An answer was planned in `span`.
    fn planned(&self, _span: &tracing::Span, _calls: &[CallReport]) {}
}

/// Observes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;
impl Observer for NoObserver {}

/// Time spent per stage on one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Timings {
    /// Repair and validation.
    #[serde(serialize_with = "micros")]
    pub mend: Duration,
    /// Correction (all attempts).
    #[serde(serialize_with = "micros")]
    pub correct: Duration,
    /// The unresolved hook.
    #[serde(serialize_with = "micros")]
    pub resolve: Duration,
    /// The guard (its share of the batch).
    #[serde(serialize_with = "micros")]
    pub guard: Duration,
    /// The tool body.
    #[serde(serialize_with = "micros")]
    pub execute: Duration,
}

pub(crate) fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

/// What became of one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallReport {
    /// The id it goes out under (for a dropped call: the id it was sent with).
    pub id: String,
    /// The id the model sent, when a new one replaced it or the call was dropped.
    #[serde(skip)]
    pub original_id: Option<String>,
    /// The tool (resolved name).
    pub tool: String,
    /// `executed` (may run), `corrected`, `salvaged`, `feedback`, `flooded` or `dropped`.
    pub outcome: CallOutcome,
    /// `tool_calls`, `text` or `glued`.
    pub source: CallSource,
    /// The sent call it came from: its index in the message's calls (or in the calls
    /// read from the text).
    #[serde(skip)]
    pub index: usize,
    /// One of several calls glued into one sent call.
    #[serde(skip)]
    pub split: bool,
    /// The front's runtime answers it itself ([`Taken::Answers`]): invalid, but neither
    /// corrected, settled nor raised here.
    #[serde(skip)]
    pub front_answers: bool,
    /// What mending made of it: `valid` as sent, `repaired`, or still invalid (`feedback`).
    pub mend: Outcome,
    /// Every fix.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
    /// What is still wrong.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
    /// For an invalid call: the text it is answered with (and a re-ask sends back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// Why it was dropped, refused or not corrected.
    #[serde(skip)]
    pub note: Option<String>,
    /// Worth asking a corrector about (the core's rule).
    #[serde(skip)]
    pub correctable: bool,
    /// The arguments: the mended value of a valid call, the plan's reading of an invalid
    /// one (what a corrector is shown and its fix's `before`).
    #[serde(skip)]
    pub arguments: Option<Value>,
    /// True when the call was read from the message text.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_text: bool,
    /// Requests to the corrector.
    #[serde(skip)]
    pub correction_attempts: u32,
    /// Tokens each correcting model spent.
    #[serde(skip)]
    pub correction_usage: Vec<Usage>,
    /// The guard's decisions on it.
    #[serde(skip)]
    pub guard: Vec<Decision>,
    /// Time per stage.
    #[serde(skip)]
    pub timings: Timings,
}

impl CallReport {
    /// True when the call may run: valid, with an id, not refused.
    pub fn may_run(&self) -> bool {
        self.outcome.may_run()
    }

    /// Invalid, and toolmend's to resolve (the front's runtime does not answer it).
    pub fn is_unresolved(&self) -> bool {
        self.outcome == CallOutcome::Feedback && !self.front_answers
    }

    /// The id it is answered under: `None` for a dropped call.
    pub fn answered_id(&self) -> Option<&str> {
        (self.outcome != CallOutcome::Dropped).then_some(self.id.as_str())
    }
}

/// The resolved answer and what was done.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resolved {
    /// The message to send on: settled ids, mended arguments as valid JSON, calls read
    /// from the text moved into `tool_calls`, exact repeats dropped, leaked thinking
    /// removed; re-asked calls merged in, refused ones out (as `on_refused` says).
    pub message: AssistantMessage,
    /// One report per call, in order (dropped and replaced calls included).
    pub calls: Vec<CallReport>,
    /// Fixes of the message itself (thinking stripped, calls moved from the text).
    pub message_fixes: Vec<Fix>,
    /// Calls of the message the results after it already answer.
    pub answered: Vec<AnsweredCall>,
    /// True when anything in the message changed.
    pub changed: bool,
    /// Text a re-ask answered with (the model asked the user instead of calling again).
    pub added_text: Option<String>,
    /// The calls read from the message text, as read (empty when it sent its calls): a
    /// report's `index` points here when it came from the text.
    pub text_calls: Vec<crate::conversation::ToolCall>,
}

impl Resolved {
    /// The calls that stayed invalid (those the front's runtime answers aside).
    pub fn unresolved(&self) -> impl Iterator<Item = &CallReport> {
        self.calls.iter().filter(|c| c.is_unresolved())
    }

    /// Each call's place in `message.tool_calls`, by id: built once (a message may hold
    /// 100,000 calls; a scan per call would be quadratic).
    fn places(&self) -> std::collections::HashMap<String, usize> {
        self.message
            .tool_calls
            .iter()
            .flatten()
            .enumerate()
            .filter_map(|(k, c)| Some((c.id.clone()?, k)))
            .collect()
    }
}

/// What the chain cost: each re-ask is a model request the client never sees, each
/// correction attempt a request to the corrector.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Re-asks made for invalid calls.
    pub re_asks: u32,
    /// The ids of the calls sent back, in order (a call asked twice is listed twice).
    pub re_asked: Vec<String>,
    /// Requests to the corrector.
    pub corrections: u32,
    /// The re-ask that failed (the chain stopped there), when one did.
    pub failed: Option<ReAskFailure>,
    /// Time spent asking the model again and correcting.
    pub took: Duration,
}

/// The driver's answer.
#[derive(Debug, Clone)]
pub struct Driven {
    /// The resolved message.
    pub resolved: Resolved,
    /// The refusal that ends the run (a guard rule's `end`), when one did.
    pub stopped: Option<String>,
}

/// Why the driver gives no message to send on.
#[derive(Debug, Clone)]
pub enum Stop {
    /// Calls stayed invalid and [`Stages::raise_unresolved`] is on.
    Unresolved(Vec<UnresolvedCall>),
    /// The guard refused calls that cannot be answered (`on_refused` rejects, a rule's
    /// action is `error`, or re-asking could not help).
    Rejected(Rejected),
}

/// Resolves `turn`: every stage, in the one order (module docs). `tally` and `guard`
/// collect what the chain and the guard did (a front adds them up over rounds).
pub async fn drive(
    turn: Turn<'_>,
    stages: &Stages<'_>,
    tally: &mut Tally,
    guard: &mut GuardTally,
) -> Result<Driven, Stop> {
    let resolved = observed_plan(turn, stages);
    drive_planned(turn, resolved, stages, tally, guard).await
}

/// The plan stage, in the observer's span.
fn observed_plan(turn: Turn<'_>, stages: &Stages<'_>) -> Resolved {
    let span = stages.observer.plan_span();
    let resolved = span.in_scope(|| plan(turn, stages.toolbox, stages.plan));
    stages.observer.planned(&span, &resolved.calls);
    resolved
}

/// [`drive`] on an answer already planned (a stream planned its message as it ended).
pub async fn drive_planned(
    turn: Turn<'_>,
    mut resolved: Resolved,
    stages: &Stages<'_>,
    tally: &mut Tally,
    guard: &mut GuardTally,
) -> Result<Driven, Stop> {
    front::stage(&mut resolved, stages).await;
    let t = std::time::Instant::now();
    for step in stages.invalid {
        if resolved.unresolved().next().is_none() {
            break;
        }
        match step {
            Invalid::ReAsk => {
                resolved = re_ask::invalid(turn, resolved, stages, tally).await;
            }
            Invalid::Correct => {
                correct::stage(turn, &mut resolved, stages, tally).await;
            }
            Invalid::Pass => break,
        }
    }
    tally.took += t.elapsed();
    settle::stage(turn, &mut resolved, stages).await?;
    guard::budget(&mut resolved, stages.budget);
    let stopped = match &stages.guard {
        Some(g) => guard::stage(turn, &mut resolved, stages, g, guard).await?,
        None => None,
    };
    Ok(Driven { resolved, stopped })
}
