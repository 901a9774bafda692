//! What the response path did, counted: the `x-toolmend-*` header values, the body
//! report (`: toolmend {…}` at the end of a stream), the account (the `toolmend` object
//! of the completion and of a stream's last chunk, where SDKs keep it) and the per-call
//! metrics. Outcomes and sources are the core's words
//! (`toolmend::message::{CallOutcome, CallSource}`), as the node's stats and the Python
//! package's use them.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer, ser::SerializeMap};
use serde_json::{Map, Value, json};
use toolmend::{
    Toolbox,
    drive::{CallReport, ReAskFailure, Resolved, Tally},
    mend::Outcome,
    message::{CallOutcome, CallSource},
};

use crate::{metrics as m, pipeline::request::RequestNotes};

/// Issues listed per call in the account (the rest counted): a call may carry thousands.
const ISSUES_LISTED: usize = 16;

/// One call in the account.
#[derive(Debug, Clone)]
pub(crate) struct CallEntry {
    /// The choice it belongs to.
    choice: usize,
    id: String,
    tool: String,
    /// `valid`, `repaired`, `unresolved`, `dropped`, `flooded`: the headers' words.
    status: &'static str,
    outcome: CallOutcome,
    source: CallSource,
    /// Fix kinds, each once.
    fixes: Vec<&'static str>,
    /// (kind, path) of the first [`ISSUES_LISTED`] issues.
    issues: Vec<(&'static str, String)>,
    /// Issues not listed.
    more_issues: usize,
}

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
    pub guard: toolmend::drive::GuardTally,
    /// What the resolve chain cost (re-asks, corrections).
    pub resolve: Tally,
    /// Reasoning taken out of the content: `moved` (to `reasoning_content`) or
    /// `dropped`.
    pub reasoning: Option<&'static str>,
    /// The choice the next [`add`](Self::add) counts.
    pub choice: usize,
    /// Every call, in order.
    pub calls: Vec<CallEntry>,
}

impl Summary {
    /// Counts `mended`'s calls (and records their metrics: only a tool the request
    /// declared names a series, and only so many do).
    pub(crate) fn add(&mut self, mended: &Resolved, tools: &Toolbox, labels: &m::ToolLabels) {
        for c in &mended.calls {
            let tool = tools.get(&c.tool);
            let label = if tool.is_some() {
                labels.label(&c.tool)
            } else {
                m::UNDECLARED.to_owned()
            };
            if !(c.fixes.is_empty() && c.issues.is_empty()) {
                // Fields only of a tool with a series of its own (not `other`).
                let schema = tool.filter(|_| label == c.tool).map(|t| t.parameters());
                m::fields(labels, &label, schema, &c.fixes, &c.issues);
            }
            m::call(label, c.outcome, c.source, &c.fixes, &c.issues);
            *self.outcomes.entry(c.outcome.as_str()).or_default() += 1;
            *self.sources.entry(c.source.as_str()).or_default() += 1;
            let status = match c.outcome {
                CallOutcome::Feedback => "unresolved",
                CallOutcome::Dropped => "dropped",
                CallOutcome::Flooded => "flooded",
                CallOutcome::Executed if c.mend == Outcome::Valid => "valid",
                _ => "repaired",
            };
            let mut fixes: Vec<&'static str> = Vec::new();
            for f in &c.fixes {
                if !fixes.contains(&f.kind.id()) {
                    fixes.push(f.kind.id());
                }
            }
            self.calls.push(CallEntry {
                choice: self.choice,
                id: c.id.clone(),
                tool: c.tool.clone(),
                status,
                outcome: c.outcome,
                source: c.source,
                fixes,
                issues: c
                    .issues
                    .iter()
                    .take(ISSUES_LISTED)
                    .map(|i| (i.kind.id(), i.path.clone()))
                    .collect(),
                more_issues: c.issues.len().saturating_sub(ISSUES_LISTED),
            });
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

    /// The fixes and issues of calls that leave the answer unseen (re-asked: replaced by
    /// the new answer's calls), by kind and by field: the model got them wrong all the
    /// same. Their outcome is not counted (the calls that replace them are).
    pub(crate) fn count_replaced<'c>(
        calls: impl IntoIterator<Item = &'c CallReport>,
        tools: &Toolbox,
        labels: &m::ToolLabels,
    ) {
        for c in calls {
            let tool = tools.get(&c.tool);
            let label = if tool.is_some() {
                labels.label(&c.tool)
            } else {
                m::UNDECLARED.to_owned()
            };
            let schema = tool.filter(|_| label == c.tool).map(|t| t.parameters());
            m::fields(labels, &label, schema, &c.fixes, &c.issues);
            m::kinds(&c.fixes, &c.issues);
        }
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
        out.extend(self.refusal_headers());
        out
    }

    /// The headers of what the guard and the re-asks did, the ones a guard's refusal
    /// carries too: `x-toolmend-guard` when the guard ran, `x-toolmend-re-ask` when a
    /// re-ask failed (`failed for=invalid status=429 code=upstream_status`; the
    /// resolve chain's, then the guard's, comma-separated).
    pub(crate) fn refusal_headers(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(g) = self.guard.header() {
            out.push(("x-toolmend-guard", g));
        }
        let failed: Vec<String> = self
            .resolve
            .failed
            .iter()
            .chain(&self.guard.re_ask_failed)
            .map(ReAskFailure::header)
            .collect();
        if !failed.is_empty() {
            out.push(("x-toolmend-re-ask", failed.join(", ")));
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
        serde_json::to_value(self.report(notes)).unwrap_or(Value::Null)
    }

    /// The report as a serializer writes it (no JSON tree in between).
    pub(crate) fn report<'a>(&'a self, notes: &'a RequestNotes) -> Report<'a> {
        Report {
            valid: self.valid,
            repaired: self.repaired,
            unresolved: &self.unresolved,
            fixes: &self.fixes,
            from_text: self.from_text,
            history: notes.history.as_deref(),
            outcomes: &self.outcomes,
            sources: &self.sources,
            re_asks: self.resolve.re_asks,
            re_ask_failed: self.resolve.failed.as_ref().map(ReAskFailure::to_json),
            guard: (!self.guard.policy.is_empty()).then(|| self.guard.to_json()),
        }
    }

    /// The account: the `toolmend` object of the completion (and of a stream's last
    /// chunk). Every call with its id, tool, status (the headers' words), outcome and
    /// source (the core's), fix kinds and issues (kind and path, never a value); the
    /// counts; every fix kind; the re-asks made (each an upstream call the client never
    /// saw), the calls they asked about and the one that failed; the correction model's
    /// requests; the reasoning taken out of the content; what the request path did to the
    /// history; what the guard decided; `round_trip`, the server-side tools' account, as
    /// its last member. Written by a serializer, without a JSON tree in between (the JSON
    /// answer's path and a stream's last chunk write it after the upstream's members).
    pub(crate) fn account_view<'a>(
        &'a self,
        notes: &'a RequestNotes,
        round_trip: Option<&'a Value>,
    ) -> AccountView<'a> {
        AccountView {
            summary: self,
            history: notes.history.as_deref(),
            round_trip,
        }
    }
}

/// [`Summary::to_json`], the report at the end of a stream, member by member.
#[derive(Serialize)]
pub(crate) struct Report<'a> {
    valid: usize,
    repaired: usize,
    unresolved: &'a [String],
    fixes: &'a [String],
    from_text: usize,
    history: Option<&'a str>,
    outcomes: &'a BTreeMap<&'static str, usize>,
    sources: &'a BTreeMap<&'static str, usize>,
    re_asks: u32,
    re_ask_failed: Option<Value>,
    guard: Option<Value>,
}

/// [`Summary::account`] written member by member, in the order a reader sees.
pub(crate) struct AccountView<'a> {
    summary: &'a Summary,
    history: Option<&'a str>,
    round_trip: Option<&'a Value>,
}

impl Serialize for AccountView<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let s = self.summary;
        let n = |k: &str| s.outcomes.get(k).copied().unwrap_or(0);
        let mut o = ser.serialize_map(None)?;
        o.serialize_entry("calls", &s.calls)?;
        o.serialize_entry(
            "counts",
            &Counts {
                valid: s.valid,
                repaired: s.repaired,
                unresolved: s.unresolved.len(),
                dropped: n("dropped"),
                flooded: n("flooded"),
                from_text: s.from_text,
            },
        )?;
        o.serialize_entry("fixes", &s.fixes)?;
        o.serialize_entry(
            "re_asks",
            &ReAsks {
                made: s.resolve.re_asks,
                calls: &s.resolve.re_asked,
                failed: s.resolve.failed.as_ref().map(ReAskFailure::to_json),
            },
        )?;
        o.serialize_entry("corrections", &s.resolve.corrections)?;
        o.serialize_entry("reasoning", &s.reasoning)?;
        o.serialize_entry("history", &self.history.map(history_json))?;
        o.serialize_entry(
            "guard",
            &(!s.guard.policy.is_empty()).then(|| s.guard.to_json()),
        )?;
        if let Some(trip) = self.round_trip {
            o.serialize_entry("round_trip", trip)?;
        }
        o.end()
    }
}

#[derive(Serialize)]
struct Counts {
    valid: usize,
    repaired: usize,
    unresolved: usize,
    dropped: usize,
    flooded: usize,
    from_text: usize,
}

#[derive(Serialize)]
struct ReAsks<'a> {
    made: u32,
    calls: &'a [String],
    failed: Option<Value>,
}

impl Serialize for CallEntry {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        struct Issue<'a>(&'a (&'static str, String));
        impl Serialize for Issue<'_> {
            fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
                let mut o = ser.serialize_map(Some(2))?;
                o.serialize_entry("kind", self.0.0)?;
                o.serialize_entry("path", &self.0.1)?;
                o.end()
            }
        }
        struct Issues<'a>(&'a [(&'static str, String)]);
        impl Serialize for Issues<'_> {
            fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
                ser.collect_seq(self.0.iter().map(Issue))
            }
        }
        let mut o = ser.serialize_map(None)?;
        if self.choice > 0 {
            o.serialize_entry("choice", &self.choice)?;
        }
        o.serialize_entry("id", &self.id)?;
        o.serialize_entry("tool", &self.tool)?;
        o.serialize_entry("status", self.status)?;
        o.serialize_entry("outcome", self.outcome.as_str())?;
        o.serialize_entry("source", self.source.as_str())?;
        o.serialize_entry("fixes", &self.fixes)?;
        o.serialize_entry("issues", &Issues(&self.issues))?;
        if self.more_issues > 0 {
            o.serialize_entry("more_issues", &self.more_issues)?;
        }
        o.end()
    }
}

/// The request path's note (`sanitized; actions=3; kinds=a,b; trimmed; dropped=2`) as
/// JSON: `{"sanitized": {"actions": 3, "kinds": ["a", "b"]}, "trimmed": {"dropped": 2}}`.
fn history_json(note: &str) -> Value {
    let mut out = Map::new();
    let mut current: Option<String> = None;
    for part in note.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            None => {
                out.insert(part.to_owned(), json!({}));
                current = Some(part.to_owned());
            }
            Some((key, value)) => {
                let value = if key == "kinds" {
                    json!(
                        value
                            .split(',')
                            .filter(|k| !k.is_empty())
                            .collect::<Vec<_>>()
                    )
                } else {
                    value
                        .parse::<u64>()
                        .map_or_else(|_| json!(value), |n| json!(n))
                };
                if let Some(Value::Object(o)) = current.as_ref().and_then(|c| out.get_mut(c)) {
                    o.insert(key.to_owned(), value);
                }
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolmend::message::{CallOutcome, CallSource};

    use super::{CallEntry, Summary};
    use crate::pipeline::request::RequestNotes;

    /// The account is written member by member: the bytes a client reads, in this order.
    #[test]
    fn the_account_is_written_in_the_readers_order() {
        let mut s = Summary {
            valid: 1,
            repaired: 1,
            from_text: 1,
            fixes: vec!["number_from_string".into()],
            reasoning: Some("moved"),
            ..Summary::default()
        };
        s.outcomes.insert("executed", 2);
        s.calls.push(CallEntry {
            choice: 0,
            id: "c1".into(),
            tool: "get_weather".into(),
            status: "valid",
            outcome: CallOutcome::Executed,
            source: CallSource::ToolCalls,
            fixes: vec![],
            issues: vec![],
            more_issues: 0,
        });
        s.calls.push(CallEntry {
            choice: 1,
            id: "c\"2".into(),
            tool: "get_weather".into(),
            status: "repaired",
            outcome: CallOutcome::Executed,
            source: CallSource::Text,
            fixes: vec!["number_from_string"],
            issues: vec![("type_mismatch", "/days".into())],
            more_issues: 3,
        });
        let notes = RequestNotes {
            history: Some("sanitized; actions=1; kinds=id_renamed".into()),
            changed: false,
        };
        let trip = json!({"rounds": 1});
        let written = serde_json::to_string(&s.account_view(&notes, Some(&trip))).unwrap();
        assert_eq!(
            written,
            concat!(
                r#"{"calls":[{"id":"c1","tool":"get_weather","status":"valid","#,
                r#""outcome":"executed","source":"tool_calls","fixes":[],"issues":[]},"#,
                r#"{"choice":1,"id":"c\"2","tool":"get_weather","status":"repaired","#,
                r#""outcome":"executed","source":"text","fixes":["number_from_string"],"#,
                r#""issues":[{"kind":"type_mismatch","path":"/days"}],"more_issues":3}],"#,
                r#""counts":{"valid":1,"repaired":1,"unresolved":0,"dropped":0,"flooded":0,"#,
                r#""from_text":1},"fixes":["number_from_string"],"#,
                r#""re_asks":{"made":0,"calls":[],"failed":null},"corrections":0,"#,
                r#""reasoning":"moved","#,
                r#""history":{"sanitized":{"actions":1,"kinds":["id_renamed"]}},"#,
                r#""guard":null,"round_trip":{"rounds":1}}"#
            )
        );
        // The report at a stream's end, in its order.
        assert_eq!(
            serde_json::to_string(&s.report(&notes)).unwrap(),
            concat!(
                r#"{"valid":1,"repaired":1,"unresolved":[],"fixes":["number_from_string"],"#,
                r#""from_text":1,"history":"sanitized; actions=1; kinds=id_renamed","#,
                r#""outcomes":{"executed":2},"sources":{},"re_asks":0,"re_ask_failed":null,"#,
                r#""guard":null}"#
            )
        );
    }

    #[test]
    fn the_history_note_reads_as_json() {
        assert_eq!(
            super::history_json(
                "sanitized; actions=3; kinds=id_renamed,result_synthesized; trimmed; dropped=2"
            ),
            json!({"sanitized": {"actions": 3, "kinds": ["id_renamed", "result_synthesized"]},
                   "trimmed": {"dropped": 2}})
        );
        assert_eq!(
            super::history_json("passed; violations=1"),
            json!({"passed": {"violations": 1}})
        );
    }
}
