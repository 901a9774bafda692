//! The metrics as a person reads them: the per-field series (bounded, never a value or
//! a key the model made up), and the Grafana dashboard of the repository
//! (`deploy/grafana/toolmend.json`), every query of which must name metrics a real
//! gateway exports: scraped from its `/metrics` after real requests (the scripted
//! provider upstream, all on 127.0.0.1).

use std::collections::BTreeSet;

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, ToolCall};
use toolmend_scripted::{Script, Step};

use crate::common::{Running, start};

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "plan_trip", "description": "A trip.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "stops": {"type": "array", "items": {"type": "object",
                "properties": {"name": {"type": "string"}, "at": {"type": "integer"}}}}},
            "required": ["city"], "additionalProperties": false}}}])
}

fn calls(args: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![ToolCall::new("c1", "plan_trip", args)]),
        ..Default::default()
    })
}

async fn chat(r: &Running, messages: Value, stream: bool) -> String {
    let body = json!({"model": "m", "messages": messages, "tools": tools(), "stream": stream});
    r.http
        .post(format!("{}/chat/completions", r.url))
        .header("x-toolmend-session", "dash")
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn scrape(r: &Running) -> String {
    r.http
        .get(format!("{}/metrics", r.root))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn ask() -> Value {
    json!([{"role": "user", "content": "Plan a trip."}])
}

/// The series lines of a scrape whose name is `name`.
fn series<'s>(scrape: &'s str, name: &str) -> Vec<&'s str> {
    scrape
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .collect()
}

#[tokio::test]
async fn field_series_name_the_tool_and_the_declared_field_only() {
    let r = start(
        Script::new()
            // `days` a string that is no number (stays invalid), a stop's `at` likewise,
            // and a key the model made up: never a label.
            .then(calls(
                r#"{"city": "Oslo", "days": "many", "stops": [{"name": "a", "at": "noon"}], "zzz_private_key": 1}"#,
            ))
            // A mended one: single quotes (the text), "3" for an integer (the field).
            .then(calls("{'city': 'Rome', 'days': '3'}")),
        "calls.invalid = \"pass\"",
    )
    .await;
    chat(&r, ask(), false).await;
    chat(&r, ask(), false).await;
    let s = scrape(&r).await;
    let issues = series(&s, "toolmend_field_issues_total");
    let has = |lines: &[&str], tool: &str, field: &str| {
        lines.iter().any(|l| {
            l.contains(&format!("tool=\"{tool}\"")) && l.contains(&format!("field=\"{field}\""))
        })
    };
    assert!(has(&issues, "plan_trip", "/days"), "{issues:#?}");
    assert!(has(&issues, "plan_trip", "/stops/*/at"), "{issues:#?}");
    let fixes = series(&s, "toolmend_field_fixes_total");
    // The made-up key was dropped (`unknown_key_dropped`): its field is `?`.
    assert!(has(&fixes, "plan_trip", "/?"), "{fixes:#?}");
    assert!(has(&fixes, "plan_trip", "(text)"), "{fixes:#?}");
    assert!(has(&fixes, "plan_trip", "/days"), "{fixes:#?}");
    assert!(
        !s.contains("zzz_private_key") && !s.contains("noon") && !s.contains("many"),
        "no key the model made up, no value, in any label"
    );
}

/// The metric names a PromQL expression reads: identifiers outside label matchers,
/// ranges and strings, that are no function, keyword or grouping label.
fn metric_names(expr: &str) -> Vec<String> {
    const KEYWORDS: [&str; 12] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "le",
    ];
    // Aggregations may take their grouping before the parenthesis: `sum by (le) (…)`.
    const AGGREGATIONS: [&str; 12] = [
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
    ];
    let b = expr.as_bytes();
    let mut names = Vec::new();
    let mut i = 0;
    let skip_to = |i: usize, close: u8| {
        let mut j = i + 1;
        while j < b.len() && b[j] != close {
            if b[j] == b'"' {
                j += 1;
                while j < b.len() && b[j] != b'"' {
                    j += usize::from(b[j] == b'\\') + 1;
                }
            }
            j += 1;
        }
        j + 1
    };
    while i < b.len() {
        let c = b[i];
        if c == b'{' {
            i = skip_to(i, b'}');
        } else if c == b'[' {
            i = skip_to(i, b']');
        } else if c == b'"' {
            i = skip_to(i, b'"');
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b':' | b'$'))
            {
                i += 1;
            }
            let word = &expr[start..i];
            let rest = expr[i..].trim_start();
            if matches!(word, "by" | "without" | "on" | "ignoring") && rest.starts_with('(') {
                // The grouping labels: skip the parenthesis.
                i = expr.len() - rest.len();
                i = skip_to(i, b')');
                continue;
            }
            if rest.starts_with('(')
                || KEYWORDS.contains(&word)
                || AGGREGATIONS.contains(&word)
                || word.starts_with('$')
            {
                continue;
            }
            names.push(word.to_owned());
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn the_query_reader_finds_metric_names_only() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (le, store) (rate(toolmend_guard_seconds_bucket{x="a{b}"}[$__rate_interval])))"#
        ),
        ["toolmend_guard_seconds_bucket"]
    );
    assert_eq!(
        metric_names(
            "sum(rate(a_total{outcome=\"feedback\"}[5m])) / sum without (tool) (rate(b_total[5m]))"
        ),
        ["a_total", "b_total"]
    );
}

/// Every panel's queries, with the panel's title.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(p) = stack.pop() {
        if let Some(inner) = p["panels"].as_array() {
            stack.extend(inner);
        }
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push((
                p["title"].as_str().unwrap_or("").to_owned(),
                t["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

/// The names metrics.rs declares (`"toolmend_…"` literals), histograms' series included.
fn declared_in_metrics_rs() -> BTreeSet<String> {
    let src = include_str!("../../src/metrics.rs");
    let mut out = BTreeSet::new();
    for piece in src.split('"').skip(1).step_by(2) {
        if piece.starts_with("toolmend_")
            && piece
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            for suffix in ["", "_bucket", "_sum", "_count"] {
                out.insert(format!("{piece}{suffix}"));
            }
        }
    }
    out
}

#[tokio::test]
async fn every_dashboard_query_names_a_metric_the_gateway_exports() {
    let dashboard: Value =
        serde_json::from_str(include_str!("../../../../deploy/grafana/toolmend.json")).unwrap();
    let r = start(
        Script::new()
            .then(calls("{'city': 'Rome', 'days': '3'}"))
            .then(calls(r#"{"days": 2}"#))
            .then(calls(r#"{"city": "Rome", "days": 2}"#))
            .then(calls(r#"{"city": "Oslo"}"#))
            .then(calls(r#"{"city": "Oslo"}"#))
            .then(Step::Error {
                status: 503,
                body: json!({"error": {"message": "busy", "type": "server_error"}}),
            }),
        "[guard]\non_flood = \"flag\"\n[guard.session]\nlimit = 2\nwindow_secs = 60\n",
    )
    .await;
    // A broken call (fixes), a call re-asked (issues, a re-ask), a broken history
    // (sanitized), a stream, a call past the guard's limit (decisions, a flood), an
    // upstream error.
    chat(&r, ask(), false).await;
    chat(&r, ask(), false).await;
    let orphan = json!([{"role": "user", "content": "Plan."},
        {"role": "tool", "tool_call_id": "nobody", "content": "x"},
        {"role": "user", "content": "Plan a trip."}]);
    chat(&r, orphan, false).await;
    chat(&r, ask(), true).await;
    chat(&r, ask(), false).await;
    let s = scrape(&r).await;
    let scraped: BTreeSet<String> = s
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_owned())
        .collect();
    // What these requests cannot provoke (a panic, a refused connection, the correction
    // model, server-side tools): named in metrics.rs instead. The list is exact: a
    // metric that shows up in the scrape must leave it.
    const NOT_PROVOKED: [&str; 6] = [
        "toolmend_panics_total",
        "toolmend_connections_refused_total",
        "toolmend_corrections_total",
        "toolmend_server_tool_calls_total",
        "toolmend_round_trip_rounds_bucket",
        "toolmend_round_trip_seconds_bucket",
    ];
    let declared = declared_in_metrics_rs();
    let mut referenced = BTreeSet::new();
    let list = queries(&dashboard);
    assert!(list.len() >= 20, "{} queries", list.len());
    for (title, expr) in &list {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{title}: no metric in {expr}");
        for name in names {
            if NOT_PROVOKED.contains(&name.as_str()) {
                assert!(
                    declared.contains(&name),
                    "{title}: {name} is not a metric of metrics.rs"
                );
            } else {
                assert!(
                    scraped.contains(&name),
                    "{title}: {name} is not in the gateway's /metrics:\n{s}"
                );
            }
            referenced.insert(name);
        }
    }
    for name in NOT_PROVOKED {
        assert!(
            !scraped.contains(name),
            "{name} was scraped: take it off NOT_PROVOKED"
        );
        assert!(referenced.contains(name), "{name} is in no panel");
    }
    // The questions the dashboard is for have panels.
    for needed in [
        "toolmend_field_issues_total",
        "toolmend_field_fixes_total",
        "toolmend_re_asks_total",
        "toolmend_gateway_overhead_seconds_bucket",
    ] {
        assert!(referenced.contains(needed), "{needed}");
    }
}
