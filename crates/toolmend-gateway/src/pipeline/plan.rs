//! The plan of one assistant message, by the core: [`toolmend::message`] extracts its
//! calls (sent, or written into the text), settles their ids (the one id rule: unique in
//! the message and against the request's history, at most 40 characters, deterministic),
//! mends each, marks what a cut-off answer left incomplete, and shapes the content. This
//! module only turns that plan into the gateway's reports; it keeps no rule of its own.

use serde::Serialize;
use toolmend::{
    Fix, Issue, MendOptions, Toolbox, feedback,
    mend::Outcome,
    message::{self, AcceptTruncated, CallOutcome, CallSource, PlanOptions},
    protocol::{AssistantMessage, Message},
    schema::{Phase, ValidationContext},
};

/// What became of one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallReport {
    /// The id it goes out under (for a dropped call: the id it was sent with).
    pub id: String,
    /// The tool (resolved name).
    pub tool: String,
    /// `executed` (may run), `corrected`, `feedback` or `dropped`: the core's vocabulary.
    pub outcome: CallOutcome,
    /// `tool_calls`, `text` or `glued`.
    pub source: CallSource,
    /// What mending made of it: `valid` as sent, `repaired`, or still invalid (`feedback`).
    pub mend: Outcome,
    /// Every fix.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
    /// What is still wrong.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
    /// For feedback: the text a re-ask sends back to the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// Worth asking the correction model about (the core's rule).
    #[serde(skip)]
    pub correctable: bool,
    /// The plan's reading of the arguments (for an invalid call, what the correction
    /// model is shown and its fix's `before`), as the node keeps it.
    #[serde(skip)]
    pub arguments: Option<serde_json::Value>,
    /// True when the call was read from the message text.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_text: bool,
}

/// The planned message and what was done.
#[derive(Debug, Clone, PartialEq)]
pub struct Mended {
    /// The message to forward: the core's sanitized message (settled ids, mended
    /// arguments as valid JSON, calls read from the text moved into `tool_calls`, exact
    /// repeats dropped, leaked thinking removed).
    pub message: AssistantMessage,
    /// One report per call, in order (dropped calls included).
    pub calls: Vec<CallReport>,
    /// Fixes of the message itself (thinking stripped, calls moved from the text).
    pub message_fixes: Vec<Fix>,
    /// True when anything in the message changed.
    pub changed: bool,
    /// Text a re-ask answered with (the model asked the user instead of calling again):
    /// it reaches the client as content.
    pub added_text: Option<String>,
}

impl Mended {
    /// The calls that stayed invalid.
    pub fn unresolved(&self) -> impl Iterator<Item = &CallReport> {
        self.calls
            .iter()
            .filter(|c| c.outcome == CallOutcome::Feedback)
    }
}

/// Options of the response path (the fuzz targets build it; the gateway builds its
/// [`PlanOptions`] from the configuration).
#[derive(Debug, Clone)]
pub struct MendConfig {
    /// Repair and coercion options.
    pub mend: MendOptions,
    /// Read calls written into the content.
    pub calls_in_content: bool,
    /// Run cut-off calls on what could be read.
    pub accept_truncated: bool,
}

impl MendConfig {
    /// The core's plan options for these (thinking stripped, as the core's default).
    pub fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            mend: self.mend.clone(),
            calls_in_text: self.calls_in_content,
            accept_truncated: if self.accept_truncated {
                AcceptTruncated::All
            } else {
                AcceptTruncated::None
            },
            ..PlanOptions::default()
        }
    }
}

/// Plans `message`, a fresh answer to a request whose messages are `history`, against
/// `tools` ([`toolmend::message::plan_assistant`]): minted and renamed ids are unique
/// against the history. `finish_reason` is the upstream's for this message: `"length"`
/// (the model hit its token limit) marks the last call as cut off, so it is refused like
/// any cut-off call unless truncated calls are accepted.
pub fn plan_message(
    message: &AssistantMessage,
    history: &[Message],
    tools: &Toolbox,
    opts: &PlanOptions,
    finish_reason: Option<&str>,
) -> Mended {
    // The mending's span (the `otel` feature): docs/gateway.md, "Tracing".
    #[cfg(feature = "otel")]
    let _span = crate::telemetry::mend_span();
    let ctx = ValidationContext::new("", Phase::Initial);
    let cut_off = finish_reason == Some("length");
    let plan = message::plan_assistant(message, history, &[], cut_off, tools, opts, &ctx);
    let sanitized = message::sanitize_assistant(message, &plan.shape, &plan.calls);
    let from_text = plan.shape.from_text;
    let calls = plan
        .calls
        .into_iter()
        .map(|p| CallReport {
            id: p.id.or(p.original_id).unwrap_or_default(),
            feedback: (p.outcome == CallOutcome::Feedback)
                .then(|| feedback::render(&p.call.tool, &p.call.issues).text),
            tool: p.call.tool,
            outcome: p.outcome,
            source: p.source,
            mend: p.call.outcome,
            fixes: p.call.fixes,
            issues: p.call.issues,
            correctable: p.correctable,
            arguments: p.call.arguments,
            from_text,
        })
        .collect::<Vec<CallReport>>();
    #[cfg(feature = "otel")]
    crate::telemetry::record_mend(calls.iter().map(|c| c.outcome.as_str()));
    let changed = sanitized != *message;
    Mended {
        message: sanitized,
        calls,
        message_fixes: plan.shape.message_fixes,
        changed,
        added_text: None,
    }
}
