//! Prometheus metrics through the `metrics` facade: requests, call outcomes per tool,
//! fixes and issue kinds (also per tool and field path, bounded), history actions, re-asks, upstream errors, upstream latency and
//! the gateway's own overhead; the round trip through server-side tools (its rounds,
//! its time, each server-side call). The tools' own series (`toolmend_tool_*`: the four
//! SLA histograms, calls, dirty answers, SLA changes) are recorded by `toolmend-tools`
//! through the same facade and rendered here.

use std::{
    collections::{HashMap, HashSet},
    sync::{Mutex, OnceLock},
    time::Duration,
};

use metrics::{Counter, counter, histogram};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::Value;
use toolmend::{
    Fix, Issue,
    message::{CallOutcome, CallSource},
};

/// Seconds: 25 µs to 10 s, dense below a millisecond where the overhead lives.
const BUCKETS: [f64; 16] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 1.0, 2.5, 10.0,
];

/// Seconds, for tool services and the round trip: 25 µs (a result shaped) to 120 s (a
/// slow service, a round trip of several model answers).
const SLOW_BUCKETS: [f64; 20] = [
    0.000_025, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// Model answers per round trip.
const ROUND_BUCKETS: [f64; 9] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 12.0, 16.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide Prometheus recorder (once; later calls return the same
/// handle) and returns the handle `/metrics` renders.
///
/// # Errors
///
/// Another recorder is already installed.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    // The most specific matcher wins (full name, then prefix, then suffix): every
    // histogram gets buckets, none falls back to a summary.
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &BUCKETS)?
        .set_buckets_for_metric(Matcher::Prefix("toolmend_tool_".to_owned()), &SLOW_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full("toolmend_round_trip_seconds".to_owned()),
            &SLOW_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full("toolmend_round_trip_rounds".to_owned()),
            &ROUND_BUCKETS,
        )?
        .install_recorder()?;
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// One guard decision: its rule, action (`allow` for an observation), shadow or not.
pub(crate) fn guard_decision(rule: &'static str, action: &'static str, shadow: bool) {
    counter!("toolmend_guard_decisions_total", "rule" => rule, "action" => action,
        "shadow" => if shadow { "true" } else { "false" })
    .increment(1);
}

/// One call decided by the guard's fail mode (`open`: admitted, `closed`: refused)
/// because `store` gave no answer.
pub(crate) fn guard_fail_mode(store: &'static str, mode: &'static str) {
    counter!("toolmend_guard_fail_mode_total", "store" => store, "mode" => mode).increment(1);
}

/// One guard check of a message: how long, through which store.
pub(crate) fn guard_check(store: &'static str, took: Duration) {
    histogram!("toolmend_guard_seconds", "store" => store).record(took.as_secs_f64());
}

/// A response whose refused calls were handled by `policy`.
pub(crate) fn guard_flood(policy: &'static str) {
    counter!("toolmend_guard_floods_total", "policy" => policy).increment(1);
}

pub(crate) fn request(outcome: &'static str, overhead: Duration, upstream: Duration) {
    counter!("toolmend_requests_total", "outcome" => outcome).increment(1);
    histogram!("toolmend_gateway_overhead_seconds").record(overhead.as_secs_f64());
    histogram!("toolmend_upstream_seconds").record(upstream.as_secs_f64());
}

/// The `tool` label of a call to a tool the request did not declare.
pub(crate) const UNDECLARED: &str = "undeclared";
/// The `tool` label once `limits.max_tool_labels` names are in use.
pub(crate) const OTHER: &str = "other";

/// Segments of a field path kept in the `field` label (`/a/b/c` of `/a/b/c/d`).
pub(crate) const FIELD_DEPTH: usize = 3;
/// Distinct `toolmend_field_fixes_total` and `toolmend_field_issues_total` series; past
/// it a new one counts as `field="other"` (its tool and kind kept).
pub(crate) const MAX_FIELD_SERIES: usize = 2000;
/// The `field` of a fix to the argument text itself (quotes, commas, a fence): no field.
pub(crate) const TEXT_FIELD: &str = "(text)";

/// The per-field series handed out: (metric, tool, field, kind) and its counter.
type FieldSeries = HashMap<(&'static str, String, String, &'static str), Counter>;

/// The tool names that have a series of their own: at most `max`, first come first
/// served; the rest count as [`OTHER`]. Clients declare the tools, so without a cap a
/// client could make as many series (and as much memory) as it likes. Likewise the
/// per-field series, at most [`MAX_FIELD_SERIES`].
#[derive(Debug)]
pub(crate) struct ToolLabels {
    max: usize,
    names: Mutex<HashSet<String>>,
    /// (metric, tool, field, kind) of the per-field series handed out, with each one's
    /// counter: a request with fixes counts them without a lookup in the recorder's
    /// registry (its labels built, hashed and found: about 17,000 instructions for an
    /// answer with a few fixes).
    fields: Mutex<FieldSeries>,
    max_fields: usize,
}

impl ToolLabels {
    pub(crate) fn new(max: usize) -> Self {
        ToolLabels {
            max,
            names: Mutex::new(HashSet::new()),
            fields: Mutex::new(HashMap::new()),
            max_fields: MAX_FIELD_SERIES,
        }
    }

    /// The counter of the per-field series (`metric`, `tool`, `field`, `kind`), or of
    /// `field="other"` once [`MAX_FIELD_SERIES`] series are handed out.
    fn field_counter(
        &self,
        metric: &'static str,
        tool: &str,
        field: String,
        kind: &'static str,
    ) -> Counter {
        let other =
            || counter!(metric, "tool" => tool.to_owned(), "field" => OTHER, "kind" => kind);
        let Ok(mut seen) = self.fields.lock() else {
            return other();
        };
        let key = (metric, tool.to_owned(), field, kind);
        if let Some(c) = seen.get(&key) {
            return c.clone();
        }
        if seen.len() < self.max_fields {
            let c =
                counter!(metric, "tool" => key.1.clone(), "field" => key.2.clone(), "kind" => kind);
            seen.insert(key, c.clone());
            return c;
        }
        other()
    }

    /// The label for `tool`.
    pub(crate) fn label(&self, tool: &str) -> String {
        let Ok(mut names) = self.names.lock() else {
            return OTHER.to_owned();
        };
        if names.contains(tool) {
            return tool.to_owned();
        }
        if names.len() < self.max {
            names.insert(tool.to_owned());
            return tool.to_owned();
        }
        OTHER.to_owned()
    }
}

/// One call: `outcome` and `source` in the core's vocabulary (`executed`, `corrected`,
/// `feedback`, `dropped`; `tool_calls`, `text`, `glued`), as the node's stats and the
/// Python package's name them.
pub(crate) fn call(
    tool: impl Into<String>,
    outcome: CallOutcome,
    source: CallSource,
    fixes: &[Fix],
    issues: &[Issue],
) {
    counter!("toolmend_calls_total", "tool" => tool.into(), "outcome" => outcome.as_str(),
        "source" => source.as_str())
    .increment(1);
    kinds(fixes, issues);
}

/// Fixes and issues by kind.
pub(crate) fn kinds(fixes: &[Fix], issues: &[Issue]) {
    for f in fixes {
        counter!("toolmend_fixes_total", "kind" => f.kind.id()).increment(1);
    }
    for i in issues {
        counter!("toolmend_issues_total", "kind" => i.kind.id()).increment(1);
    }
}

/// The fixes and issues of one call by tool and field: `tool` its label (a declared
/// tool's name, [`OTHER`], [`UNDECLARED`]), `schema` the declared tool's parameters.
/// `field` is the JSON Pointer cut to [`FIELD_DEPTH`] segments, array indexes as `*`, a
/// segment the schema does not declare as `?` (and the path cut there);
/// a fix to the text itself is [`TEXT_FIELD`]. No value and no key the model made up ever
/// becomes a label; a tool without its own series (`other`, `undeclared`) has
/// `field="other"`.
pub(crate) fn fields(
    labels: &ToolLabels,
    tool: &str,
    schema: Option<&Value>,
    fixes: &[Fix],
    issues: &[Issue],
) {
    const FIXES: &str = "toolmend_field_fixes_total";
    const ISSUES: &str = "toolmend_field_issues_total";
    let field_of = |path: &str| match schema {
        Some(s) => field_path(s, path),
        None => OTHER.to_owned(),
    };
    for f in fixes {
        let field = if f.offset.is_some() && schema.is_some() {
            TEXT_FIELD.to_owned()
        } else {
            field_of(&f.path)
        };
        labels
            .field_counter(FIXES, tool, field, f.kind.id())
            .increment(1);
    }
    for i in issues {
        labels
            .field_counter(ISSUES, tool, field_of(&i.path), i.kind.id())
            .increment(1);
    }
}

/// The `field` label of the JSON Pointer `pointer` into arguments of the tool whose
/// parameters are `schema`: the core's [`toolmend::schema::declared_path`] at most
/// [`FIELD_DEPTH`] segments deep (declared keys kept, an array index as `*`, the first
/// undeclared key `?` and the path cut there, deeper than the bound
/// `/…`); `/` for the whole arguments.
pub(crate) fn field_path(schema: &Value, pointer: &str) -> String {
    let path = toolmend::schema::declared_path(Some(schema), pointer, FIELD_DEPTH);
    if path.is_empty() {
        "/".to_owned()
    } else {
        path
    }
}

/// One call the gateway ran itself (round trip or `/v1/tools/execute`): `tool` a
/// configured name (or `undeclared`), `outcome` `success`, `error`, `feedback`,
/// `flooded`.
pub(crate) fn server_tool_call(tool: String, outcome: &'static str) {
    counter!("toolmend_server_tool_calls_total", "tool" => tool, "outcome" => outcome).increment(1);
}

/// One round trip that ran server-side calls: its model answers and its time.
pub(crate) fn round_trip(rounds: u32, took: Duration) {
    histogram!("toolmend_round_trip_rounds").record(f64::from(rounds));
    histogram!("toolmend_round_trip_seconds").record(took.as_secs_f64());
}

pub(crate) fn history(action: &'static str) {
    counter!("toolmend_histories_total", "action" => action).increment(1);
}

pub(crate) fn re_ask() {
    counter!("toolmend_re_asks_total").increment(1);
}

/// `attempts` requests to the correction model.
pub(crate) fn corrections(attempts: u32) {
    counter!("toolmend_corrections_total").increment(u64::from(attempts));
}

pub(crate) fn upstream_error(kind: &'static str) {
    counter!("toolmend_upstream_errors_total", "kind" => kind).increment(1);
}

/// A request refused for want of a valid key: `route` one of the routes
/// (`server::access::ROUTES`), `reason` `missing` or `invalid`.
pub(crate) fn auth_refused(route: &'static str, reason: &'static str) {
    counter!("toolmend_auth_refused_total", "route" => route, "reason" => reason).increment(1);
}

/// A request admitted with the key of the `[access]` client `name` (a configured name:
/// the label is bounded by the configuration).
pub(crate) fn client_request(name: &str) {
    counter!("toolmend_client_requests_total", "client" => name.to_owned()).increment(1);
}

pub(crate) fn connection_refused() {
    counter!("toolmend_connections_refused_total").increment(1);
}

pub(crate) fn panic() {
    counter!("toolmend_panics_total").increment(1);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{ToolLabels, field_path};

    #[test]
    fn a_field_path_keeps_only_what_the_schema_declares() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string"},
            "stops": {"type": "array", "items": {"$ref": "#/$defs/stop"}},
            "a": {"type": "object", "properties": {"b": {"type": "object", "properties": {
                "c": {"type": "object", "properties": {"d": {"type": "string"}}}}}}},
            "opt": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"x": {}}}]},
            "odd~/key": {"type": "string"}},
            "$defs": {"stop": {"type": "object", "properties": {"at": {"type": "integer"}}}}});
        for (pointer, field) in [
            ("", "/"),
            ("/city", "/city"),
            ("/stops/0/at", "/stops/*/at"),
            ("/stops/12/secret", "/stops/*/?"),
            ("/a/b/c/d", "/a/b/c/…"),
            ("/opt/x", "/opt/x"),
            ("/town", "/?"),
            ("/town/0", "/?"),
            ("/odd~0~1key", "/odd~0~1key"),
        ] {
            assert_eq!(field_path(&schema, pointer), field, "{pointer}");
        }
    }

    #[test]
    fn field_series_are_capped() {
        let labels = ToolLabels {
            max_fields: 2,
            ..ToolLabels::new(10)
        };
        let fields = |l: &ToolLabels| {
            let mut f: Vec<String> = l
                .fields
                .lock()
                .unwrap()
                .keys()
                .map(|k| k.2.clone())
                .collect();
            f.sort();
            f
        };
        for field in ["/a", "/b", "/a", "/c"] {
            labels
                .field_counter("m", "t", field.into(), "k")
                .increment(1);
        }
        // `/c` came third: counted as `other`, its series never handed out.
        assert_eq!(fields(&labels), ["/a", "/b"]);
    }
}
