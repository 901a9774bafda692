//! What the response path did, counted: the `x-toolmend-*` header values, the body
//! report (`: toolmend {…}` at the end of a stream) and the per-call metrics.

use serde_json::{Value, json};
use toolmend::{Toolbox, mend::Outcome};

use crate::{
    metrics as m,
    pipeline::{plan::Mended, request::RequestNotes},
};

/// Counts for the `x-toolmend-*` headers and the metrics.
#[derive(Debug, Default, Clone)]
pub(crate) struct Summary {
    pub valid: usize,
    pub repaired: usize,
    pub unresolved: Vec<String>,
    pub fixes: Vec<String>,
    pub from_text: usize,
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
            m::call(label, c.outcome, &c.fixes, &c.issues);
            match c.outcome {
                Outcome::Valid => self.valid += 1,
                Outcome::Repaired => self.repaired += 1,
                Outcome::Feedback => self.unresolved.push(c.id.clone()),
            }
            self.from_text += usize::from(c.from_text);
            for f in &c.fixes {
                let id = f.kind.id().to_owned();
                if !self.fixes.contains(&id) {
                    self.fixes.push(id);
                }
            }
        }
    }

    /// The `x-toolmend-*` headers: `calls` always, `fixes`, `unresolved` and `history`
    /// when there is something to say.
    pub(crate) fn headers(&self, notes: &RequestNotes) -> Vec<(&'static str, String)> {
        let mut out = vec![(
            "x-toolmend-calls",
            format!(
                "valid={} repaired={} unresolved={} from_text={}",
                self.valid,
                self.repaired,
                self.unresolved.len(),
                self.from_text
            ),
        )];
        if !self.fixes.is_empty() {
            out.push(("x-toolmend-fixes", self.fixes.join(",")));
        }
        if !self.unresolved.is_empty() {
            out.push(("x-toolmend-unresolved", self.unresolved.join(",")));
        }
        if let Some(h) = &notes.history {
            out.push(("x-toolmend-history", h.clone()));
        }
        out
    }

    /// The same counts as JSON (the report at the end of a stream).
    pub(crate) fn to_json(&self, notes: &RequestNotes) -> Value {
        json!({
            "valid": self.valid, "repaired": self.repaired, "unresolved": self.unresolved,
            "fixes": self.fixes, "from_text": self.from_text, "history": notes.history,
        })
    }
}
