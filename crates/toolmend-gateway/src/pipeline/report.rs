//! What the response path did, counted: the `x-toolmend-*` header values, the body
//! report (`: toolmend {…}` at the end of a stream) and the per-call metrics. Outcomes
//! and sources are the core's words (`toolmend::message::{CallOutcome, CallSource}`),
//! as the node's stats and the Python package's use them.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use toolmend::{Toolbox, mend::Outcome, message::CallOutcome};

use crate::{
    metrics as m,
    pipeline::{plan::Mended, request::RequestNotes},
};

/// Counts for the `x-toolmend-*` headers and the metrics.
#[derive(Debug, Default, Clone)]
pub(crate) struct Summary {
    /// Calls that may run as sent.
    pub valid: usize,
    /// Calls that may run once repaired or corrected.
    pub repaired: usize,
    /// The ids of the calls that stayed invalid (`feedback`).
    pub unresolved: Vec<String>,
    /// Fix kinds, each once, in the order first seen (the message's own included).
    pub fixes: Vec<String>,
    /// Calls read from the text.
    pub from_text: usize,
    /// Calls by outcome (`executed`, `corrected`, `feedback`, `dropped`).
    pub outcomes: BTreeMap<&'static str, usize>,
    /// Calls by source (`tool_calls`, `text`, `glued`).
    pub sources: BTreeMap<&'static str, usize>,
    /// What the guard did.
    pub guard: crate::pipeline::guard::GuardSummary,
}

impl Summary {
    /// Counts `mended`'s calls (and records their metrics: only a tool the request
    /// declared names a series, and only so many do).
    pub(crate) fn add(&mut self, mended: &Mended, tools: &Toolbox, labels: &m::ToolLabels) {
        for c in &mended.calls {
            let label = if tools.get(&c.tool).is_some() {
                labels.label(&c.tool)
            } else {
                m::UNDECLARED.to_owned()
            };
            m::call(label, c.outcome, c.source, &c.fixes, &c.issues);
            *self.outcomes.entry(c.outcome.as_str()).or_default() += 1;
            *self.sources.entry(c.source.as_str()).or_default() += 1;
            match c.outcome {
                CallOutcome::Feedback => self.unresolved.push(c.id.clone()),
                CallOutcome::Dropped | CallOutcome::Flooded => continue,
                CallOutcome::Executed if c.mend == Outcome::Valid => self.valid += 1,
                _ => self.repaired += 1,
            }
            self.from_text += usize::from(c.from_text);
            self.note_fixes(c.fixes.iter().map(|f| f.kind.id()));
        }
        self.note_fixes(mended.message_fixes.iter().map(|f| f.kind.id()));
    }

    fn note_fixes<'k>(&mut self, kinds: impl Iterator<Item = &'k str>) {
        for id in kinds {
            if !self.fixes.iter().any(|f| f == id) {
                self.fixes.push(id.to_owned());
            }
        }
    }

    /// The `x-toolmend-*` headers: `calls` and `outcomes` always, `fixes`, `unresolved`
    /// and `history` when there is something to say.
    pub(crate) fn headers(&self, notes: &RequestNotes) -> Vec<(&'static str, String)> {
        let mut out = vec![
            (
                "x-toolmend-calls",
                format!(
                    "valid={} repaired={} unresolved={} from_text={}",
                    self.valid,
                    self.repaired,
                    self.unresolved.len(),
                    self.from_text
                ),
            ),
            ("x-toolmend-outcomes", self.outcomes_text()),
        ];
        if !self.fixes.is_empty() {
            out.push(("x-toolmend-fixes", self.fixes.join(",")));
        }
        if !self.unresolved.is_empty() {
            out.push(("x-toolmend-unresolved", self.unresolved.join(",")));
        }
        if let Some(h) = &notes.history {
            out.push(("x-toolmend-history", h.clone()));
        }
        if let Some(g) = self.guard.header() {
            out.push(("x-toolmend-guard", g));
        }
        out
    }

    /// `executed=2 feedback=1; tool_calls=2 glued=1` (nonzero counts only; empty when
    /// there were no calls).
    fn outcomes_text(&self) -> String {
        let list = |m: &BTreeMap<&str, usize>| {
            m.iter()
                .map(|(k, n)| format!("{k}={n}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if self.outcomes.is_empty() {
            return "none".to_owned();
        }
        format!("{}; {}", list(&self.outcomes), list(&self.sources))
    }

    /// The same counts as JSON (the report at the end of a stream).
    pub(crate) fn to_json(&self, notes: &RequestNotes) -> Value {
        json!({
            "valid": self.valid, "repaired": self.repaired, "unresolved": self.unresolved,
            "fixes": self.fixes, "from_text": self.from_text, "history": notes.history,
            "outcomes": self.outcomes, "sources": self.sources,
            "guard": (!self.guard.policy.is_empty()).then(|| self.guard.to_json()),
        })
    }
}
