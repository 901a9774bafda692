//! The batch summary: counts per outcome, per fix and per issue.

use std::collections::BTreeMap;

use serde::Serialize;
use toolmend::{MendedCall, Outcome};

/// Counts over a whole batch. BTreeMaps keep the output deterministic.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// Input lines read (blank lines skipped).
    pub lines: usize,
    /// Lines that could not be read as a record.
    pub malformed_lines: usize,
    /// Calls mended.
    pub calls: usize,
    /// Calls per outcome.
    pub outcomes: BTreeMap<Outcome, usize>,
    /// Calls whose text was cut off (salvaged or refused).
    pub lossy: usize,
    /// Fixes applied, per kind.
    pub fixes: BTreeMap<String, usize>,
    /// Issues left, per kind.
    pub issues: BTreeMap<String, usize>,
}

impl Summary {
    pub fn add(&mut self, call: &MendedCall) {
        self.calls += 1;
        *self.outcomes.entry(call.outcome).or_default() += 1;
        if call.is_lossy() {
            self.lossy += 1;
        }
        for f in &call.fixes {
            *self.fixes.entry(f.kind.id().to_owned()).or_default() += 1;
        }
        for i in &call.issues {
            *self.issues.entry(i.kind.id().to_owned()).or_default() += 1;
        }
    }

    pub fn to_text(&self) -> String {
        let mut out = format!("summary: {} line(s), {} call(s)", self.lines, self.calls);
        if self.malformed_lines > 0 {
            out.push_str(&format!(", {} malformed line(s)", self.malformed_lines));
        }
        out.push('\n');
        let outcomes: Vec<String> = self
            .outcomes
            .iter()
            .map(|(o, n)| format!("{} {n}", outcome_id(*o)))
            .collect();
        out.push_str(&format!("  outcomes: {}\n", join_or_none(&outcomes)));
        if self.lossy > 0 {
            out.push_str(&format!("  cut off (lossy): {}\n", self.lossy));
        }
        let fixes: Vec<String> = self.fixes.iter().map(|(k, n)| format!("{k} {n}")).collect();
        out.push_str(&format!("  fixes: {}\n", join_or_none(&fixes)));
        let issues: Vec<String> = self
            .issues
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        out.push_str(&format!("  issues: {}\n", join_or_none(&issues)));
        out
    }
}

pub fn outcome_id(o: Outcome) -> &'static str {
    match o {
        Outcome::Valid => "valid",
        Outcome::Repaired => "repaired",
        Outcome::Feedback => "feedback",
    }
}

fn join_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}
