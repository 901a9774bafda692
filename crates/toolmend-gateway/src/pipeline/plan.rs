//! The plan of one assistant message: its calls mended against the request's `tools`.
//! Pure (no I/O), front-neutral (a neutral [`AssistantMessage`] in and out), so every
//! front and both its JSON and streaming paths share it.

use std::collections::HashSet;

use serde::Serialize;
use toolmend::{
    Fix, Issue, MendOptions, Toolbox, feedback,
    mend::{self, Outcome},
    node::{prose_before_calls, read_calls_in_text},
    protocol::{AssistantMessage, Content, ToolCall},
    schema::{Phase, ValidationContext},
};

/// What became of one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallReport {
    /// The id it goes out under.
    pub id: String,
    /// The tool (resolved name).
    pub tool: String,
    /// `valid`, `repaired` or `feedback`.
    pub outcome: Outcome,
    /// Every fix.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
    /// What is still wrong.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<Issue>,
    /// For feedback: the text a re-ask sends back to the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// True when the call was read from the message text.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_text: bool,
}

/// The mended message and what was done.
#[derive(Debug, Clone, PartialEq)]
pub struct Mended {
    /// The message to forward: runnable calls with valid JSON arguments, calls read from
    /// the text moved into `tool_calls`, unique ids.
    pub message: AssistantMessage,
    /// One report per call, in order.
    pub calls: Vec<CallReport>,
    /// True when anything in the message changed.
    pub changed: bool,
    /// Text a re-ask answered with (the model asked the user instead of calling again):
    /// it reaches the client as content.
    pub added_text: Option<String>,
}

impl Mended {
    /// The calls that stayed invalid.
    pub fn unresolved(&self) -> impl Iterator<Item = &CallReport> {
        self.calls.iter().filter(|c| c.outcome == Outcome::Feedback)
    }
}

/// Options of the response path.
#[derive(Debug, Clone)]
pub struct MendConfig {
    /// Repair and coercion options.
    pub mend: MendOptions,
    /// Read calls written into the content.
    pub calls_in_content: bool,
    /// Run cut-off calls on what could be read.
    pub accept_truncated: bool,
}

/// A token for minted call ids, unique per response in this process: a call id must not
/// repeat across the turns of a conversation, and the next request carries the previous
/// answers back (`call_tm_<token>_<n>`, at most 40 characters).
pub fn mint_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "{:x}",
        nanos ^ NEXT.fetch_add(1, Ordering::Relaxed).rotate_left(40)
    )
}

/// Mends `message` against `tools`. Never drops a call: one that cannot be mended is
/// reported as feedback and kept as sent (with a unique id). Ids a call lacks are minted
/// from `token` ([`mint_token`]).
///
/// `finish_reason` is the upstream's for this message: `"length"` (the model hit its
/// token limit) marks the last call as cut off, so it is refused like any cut-off call
/// unless `accept_truncated`, and never goes out looking whole.
pub fn mend_message(
    message: &AssistantMessage,
    tools: &Toolbox,
    cfg: &MendConfig,
    token: &str,
    finish_reason: Option<&str>,
) -> Mended {
    let mut out = message.clone();
    let mut reports = Vec::new();
    let sent: Vec<ToolCall> = message.tool_calls.clone().unwrap_or_default();
    let (calls, read_fixes, from_text): (Vec<ToolCall>, Vec<Vec<Fix>>, bool) =
        if sent.is_empty() && cfg.calls_in_content && !tools.is_empty() {
            let (found, fixes): (Vec<ToolCall>, Vec<Vec<Fix>>) =
                read_calls_in_text(message, tools, &cfg.mend.repair)
                    .into_iter()
                    .map(|t| (t.call, t.fixes))
                    .unzip();
            let moved = !found.is_empty();
            (found, fixes, moved)
        } else {
            (sent, Vec::new(), false)
        };
    let cut_off = finish_reason == Some("length");
    let last = calls.len().saturating_sub(1);
    let mut changed = from_text;
    let mut used: HashSet<String> = HashSet::new();
    let mut new_calls = Vec::with_capacity(calls.len());
    let ctx = ValidationContext::new("", Phase::Initial);
    for (n, call) in calls.iter().enumerate() {
        let base = call
            .id
            .clone()
            .filter(|id| !id.trim().is_empty() && id.len() <= toolmend::history::MAX_ID_LEN)
            .unwrap_or_else(|| format!("call_tm_{token}_{n}"));
        let mended = mend::mend_named_in(
            &call.function.name,
            &call.function.arguments,
            tools,
            &cfg.mend,
            &ctx,
        );
        let parts = mended.calls.len();
        for (part, mut m) in mended.calls.into_iter().enumerate() {
            if let Some(fixes) = read_fixes.get(n) {
                mend::with_prior_fixes(&mut m, fixes);
            }
            if cut_off && n == last && part + 1 == parts {
                mend::cut_off_at_token_limit(&mut m);
            }
            if !cfg.accept_truncated {
                mend::refuse_lossy(&mut m);
            }
            let mut id = if part == 0 {
                base.clone()
            } else {
                format!("{base}_{}", part + 1)
            };
            let mut k = 2;
            while used.contains(&id) {
                id = format!("{base}_{k}");
                k += 1;
            }
            used.insert(id.clone());
            let mut tc = call.clone();
            if tc.id.as_deref() != Some(id.as_str()) {
                changed = true;
                tc.id = Some(id.clone());
            }
            if tc.kind != "function" {
                tc.kind = "function".to_owned();
                changed = true;
            }
            let feedback_text =
                (m.outcome == Outcome::Feedback).then(|| feedback::render(&m.tool, &m.issues).text);
            match (m.outcome, &m.arguments) {
                (Outcome::Valid, _) if part == 0 && !from_text => {}
                (Outcome::Valid | Outcome::Repaired, Some(args)) => {
                    tc.function.name.clone_from(&m.tool);
                    tc.function.arguments = args.to_string();
                    changed = true;
                }
                _ => {
                    // Feedback: kept as sent, so a re-ask shows the model its own call.
                }
            }
            reports.push(CallReport {
                id,
                tool: m.tool,
                outcome: m.outcome,
                fixes: m.fixes,
                issues: m.issues,
                feedback: feedback_text,
                from_text,
            });
            new_calls.push(tc);
        }
    }
    if from_text {
        let prose = message
            .text()
            .and_then(|t| prose_before_calls(&t))
            .filter(|p| !p.trim().is_empty());
        out.content = Some(prose.map(Content::Text));
    }
    if !new_calls.is_empty() || message.tool_calls.is_some() {
        out.tool_calls = Some(new_calls);
    }
    Mended {
        message: out,
        calls: reports,
        changed,
        added_text: None,
    }
}
