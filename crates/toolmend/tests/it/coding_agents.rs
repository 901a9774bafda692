//! Coding agents' arguments: the project's own cases, written apart from the engine.
//!
//! `tests/data/code_args_own.jsonl` holds calls as file-editing and shell agents emit them
//! (whole files, `old_string`/`new_string`, diffs, heredocs, SQL, regexes, Windows paths),
//! in the record format of the shared coding-agent corpus (`id`, `category`, `tool`,
//! `raw_arguments`, `expected_outcome`, `expected_arguments`, `json_string_fields`), over
//! tools of many agents (Claude Code, Codex, OpenHands, Cline, Roo, Aider, Cursor). They
//! were written in rounds, each with other tools and contents, from the conventions of
//! `../shared/corpus/README.md`, each raw text built from its intended value and then broken,
//! and scored before any rule here was changed for them.
//!
//! What is held: a refusal is better than a wrong value, so no record may be answered with
//! a value other than its expected one; and at least 95 % of the records, and 80 % of each
//! category, get their expected answer (issue 29's bars for the held-back split: 95 %, 10
//! of 12 per category).

use std::collections::BTreeMap;

use serde_json::Value;
use toolmend::{
    MendOptions,
    mend::{Mended, mend_call},
    schema::CompiledTool,
};

/// The `toolmend mend --lines` answer: the arguments (several calls: a list), or `None`
/// for a refusal.
fn answer(m: &Mended) -> Option<Value> {
    if !m.is_runnable() {
        return None;
    }
    let args: Vec<Value> = m.calls.iter().filter_map(|c| c.arguments.clone()).collect();
    Some(match <[Value; 1]>::try_from(args) {
        Ok([one]) => one,
        Err(many) => Value::Array(many),
    })
}

/// `v` with the fields that hold JSON text read as JSON (compared decoded, as the shared
/// scorer does).
fn decoded(v: &Value, json_fields: &[String]) -> Value {
    let mut v = v.clone();
    if let Some(obj) = v.as_object_mut() {
        for f in json_fields {
            if let Some(Value::String(s)) = obj.get(f)
                && let Ok(parsed) = serde_json::from_str::<Value>(s)
            {
                obj.insert(f.clone(), parsed);
            }
        }
    }
    v
}

/// JSON equality as the shared scorer (Python's `==`) sees it: numbers by their value
/// (`-0` and `-0.0`, `1E5` and `100000.0` are the same number), all else exactly.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i128(), y.as_i128()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn coding_agents_calls_get_their_answer_or_a_refusal_never_a_wrong_value() {
    let text = include_str!("../data/code_args_own.jsonl");
    let opts = MendOptions {
        // The records expect the salvage of a cut-off call (marked lossy), as the shared
        // corpus does: `--accept-truncated`.
        refuse_lossy: false,
        ..MendOptions::default()
    };
    let mut per_category: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let (mut passed, mut total) = (0, 0);
    let mut wrong = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        let id = r["id"].as_str().unwrap();
        let t = &r["tool"];
        let tool = CompiledTool::compile(
            t["name"].as_str().unwrap(),
            t["description"].as_str().unwrap_or(""),
            &t["parameters"],
        )
        .unwrap();
        let got = answer(&mend_call(
            r["raw_arguments"].as_str().unwrap(),
            &tool,
            &opts,
        ));
        let fields: Vec<String> = r["json_string_fields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let expected = &r["expected_arguments"];
        let pass = match (r["expected_outcome"].as_str().unwrap(), &got) {
            ("feedback", got) => got.is_none(),
            (_, None) => false,
            ("split", Some(Value::Array(calls))) => {
                let want = expected.as_array().unwrap();
                calls.len() == want.len()
                    && calls
                        .iter()
                        .zip(want)
                        .all(|(g, w)| same(&decoded(g, &fields), &decoded(w, &fields)))
            }
            (_, Some(got)) => same(&decoded(got, &fields), &decoded(expected, &fields)),
        };
        let cat = per_category
            .entry(r["category"].as_str().unwrap().to_owned())
            .or_default();
        cat.1 += 1;
        total += 1;
        if pass {
            cat.0 += 1;
            passed += 1;
        } else if got.is_some() {
            wrong.push(format!("{id}: got {}", got.unwrap()));
        }
    }
    eprintln!("{passed}/{total} answered as expected; by category: {per_category:?}");
    assert!(total >= 300, "{total} records");
    assert!(wrong.is_empty(), "wrong values:\n{}", wrong.join("\n"));
    assert!(
        passed * 100 >= total * 95,
        "{passed}/{total} records answered as expected"
    );
    for (cat, (ok, n)) in &per_category {
        assert!(ok * 5 >= n * 4, "{cat}: {ok}/{n}");
    }
}
