//! The `toolmend mend` contracts the README promises, run against the real binary.

use std::{
    io::{Read, Write},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// Runs `toolmend mend <args>` on `stdin`; returns (stdout, exit code).
fn mend(args: &[&str], stdin: &[u8]) -> (String, i32) {
    let (code, out, _) = toolmend(&[&["mend"], args].concat(), stdin);
    (out, code)
}

const TOOL: &str = r#"{"name": "get_weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
  "required": ["city"], "additionalProperties": false}}"#;

fn record(raw: &str) -> String {
    let tool: serde_json::Value = serde_json::from_str(TOOL).unwrap();
    serde_json::json!({"tool": tool, "raw_arguments": raw}).to_string()
}

#[test]
fn lines_answers_every_input_line_exactly_once() {
    let mut input = Vec::new();
    for line in [
        record("{'city': 'Oslo', 'days': '2',}"),
        "not json".to_owned(),
        String::new(),
        record(r#"{"city": "Rome"}{"city": "Milan"}"#),
        record(r#"{"days": 3}"#),
    ] {
        input.extend_from_slice(line.as_bytes());
        input.push(b'\n');
    }
    input.extend_from_slice(b"\xff\xfe\n");
    input.extend_from_slice(record(r#"{"city": "Lima"}"#).as_bytes());
    let (out, code) = mend(&["--lines"], &input);
    // Lines 2 and 6 are malformed: every line is answered, and the status says so.
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "{out}");
    assert_eq!(lines[0], r#"{"city":"Oslo","days":2}"#);
    assert!(lines[1].starts_with("ERROR line 2: "), "{}", lines[1]);
    assert!(lines[2].starts_with("ERROR line 3: "), "{}", lines[2]);
    assert_eq!(lines[3], r#"[{"city":"Rome"},{"city":"Milan"}]"#);
    assert!(
        lines[4].starts_with("ERROR ") && lines[4].contains("/city"),
        "{}",
        lines[4]
    );
    assert!(
        lines[5].starts_with("ERROR line 6: ") && lines[5].contains("UTF-8"),
        "{}",
        lines[5]
    );
    assert_eq!(lines[6], r#"{"city":"Lima"}"#);
}

#[test]
fn json_report_ends_with_a_summary_and_names_bad_lines() {
    let input = format!("{}\n{{\"tool\": 1}}\n", record("{'city': 'Oslo'}"));
    let (out, code) = mend(&["--format", "json"], input.as_bytes());
    assert_eq!(code, 1, "a malformed line: exit 1\n{out}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["calls"][0]["outcome"], "repaired");
    assert!(lines[1]["error"].as_str().unwrap().starts_with("line 2: "));
    let summary = &lines[2]["summary"];
    assert_eq!(summary["calls"], 1);
    assert_eq!(summary["malformed_lines"], 1);
    assert_eq!(summary["fixes"]["single_quotes"], 1);
}

#[test]
fn strict_repairs_nothing() {
    let (out, code) = mend(
        &["--lines", "--strict"],
        format!("{}\n", record("{'city': 'Oslo'}")).as_bytes(),
    );
    // Feedback is an answer, not a malformed line.
    assert_eq!(code, 0);
    assert!(out.starts_with("ERROR "), "{out}");
}

/// A merged call (three cities for one): one call per value by default, in a call record
/// and in a message (ids as for glued calls); feedback with `--coerce
/// split_merged_calls=false` (the fix id names it too) and with `--strict`.
#[test]
fn a_merged_call_is_split_by_default_and_feedback_when_switched_off() {
    let merged = record(r#"{"city": ["Lima", "Quito", "Bogota"], "days": 2}"#);
    let input = format!("{merged}\n");
    let (out, code) = mend(&["--lines"], input.as_bytes());
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out.trim_end(),
        r#"[{"city":"Lima","days":2},{"city":"Quito","days":2},{"city":"Bogota","days":2}]"#
    );
    let (out, _) = mend(&["--format", "json"], input.as_bytes());
    let report: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(report["calls"].as_array().unwrap().len(), 3, "{report}");
    assert!(
        report["calls"][1].to_string().contains("merged_call_split"),
        "{report}"
    );

    for off in [
        &["--lines", "--coerce", "split_merged_calls=false"][..],
        &["--lines", "--coerce", "merged_call_split=false"],
        &["--lines", "--strict"],
    ] {
        let (out, code) = mend(off, input.as_bytes());
        assert_eq!(code, 0, "{off:?}: {out}");
        assert!(out.starts_with("ERROR "), "{off:?}: {out}");
        assert!(out.contains("3 calls merged into one"), "{off:?}: {out}");
    }

    // A message: the extra calls get ids after the call's own.
    let tool = r#"{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#;
    let line = format!(
        r#"{{"message": {{"role": "assistant", "content": null, "tool_calls": [{{"id": "c1", "type": "function", "function": {{"name": "get_weather", "arguments": "{{\"city\": [\"Lima\", \"Quito\"]}}"}}}}]}}, "tools": [{tool}]}}"#
    );
    let (out, code) = mend(&["--format", "json"], line.as_bytes());
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let ids: Vec<&str> = report["message"]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1", "c1_2"], "{report}");
    let (out, _) = mend(
        &["--format", "json", "--coerce", "split_merged_calls=false"],
        line.as_bytes(),
    );
    let report: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(report["message"]["tool_calls"].as_array().unwrap().len(), 1);
    assert_eq!(report["calls"][0]["disposition"], "feedback", "{report}");

    // An unknown switch is a usage error naming the valid ones; --coerce with --strict too.
    let (code, _, err) = toolmend(&["mend", "--coerce", "split_merged=false"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("split_merged_calls"), "{err}");
    let (code, _, _) = toolmend(
        &["mend", "--strict", "--coerce", "split_merged_calls=false"],
        b"",
    );
    assert_eq!(code, 2);
}

/// A call cut off mid-string, as a call record and as the last call of a message.
fn cut_off_input() -> String {
    let tool = r#"{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#;
    let message = serde_json::json!({"message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lis"}}
    ]}, "tools": [serde_json::from_str::<serde_json::Value>(tool).unwrap()]});
    format!("{}\n{message}\n", record(r#"{"city": "San Franc"#))
}

#[test]
fn a_cut_off_call_is_refused_by_default_as_every_front_refuses_it() {
    let (out, code) = mend(&["--format", "json"], cut_off_input().as_bytes());
    assert_eq!(code, 0, "{out}");
    let lines = json_lines(&out);
    let call = &lines[0]["calls"][0];
    assert_eq!(call["outcome"], "feedback", "{call}");
    assert_eq!(call["lossy"], true, "{call}");
    assert_eq!(call["issues"][0]["kind"], "truncated", "{call}");
    assert!(
        lines[0]["feedback"]["text"]
            .as_str()
            .unwrap()
            .contains("cut off"),
        "{}",
        lines[0]
    );
    let planned = &lines[1]["calls"][0];
    assert_eq!(planned["disposition"], "feedback", "{planned}");
    assert_eq!(planned["lossy"], true, "{planned}");
    assert_eq!(lines[2]["summary"]["lossy"], 2);

    // --lines: the cut-off call is an ERROR answer, never its prefix.
    let (out, _) = mend(&["--lines"], cut_off_input().as_bytes());
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with("ERROR ") && first.contains("cut off"),
        "{first}"
    );

    // The old flag still runs (it is the default now) and says so on stderr.
    let (default, _) = mend(&["--format", "json"], cut_off_input().as_bytes());
    let (code, same, err) = toolmend(
        &["mend", "--format", "json", "--refuse-truncated"],
        cut_off_input().as_bytes(),
    );
    assert_eq!((code, same), (0, default));
    assert!(err.contains("--refuse-truncated is deprecated"), "{err}");
}

#[test]
fn accept_truncated_runs_the_salvage_and_marks_it_lossy() {
    let (out, code) = mend(
        &["--format", "json", "--accept-truncated"],
        cut_off_input().as_bytes(),
    );
    assert_eq!(code, 0, "{out}");
    let lines = json_lines(&out);
    let call = &lines[0]["calls"][0];
    assert_eq!(call["outcome"], "repaired", "{call}");
    assert_eq!(call["lossy"], true, "{call}");
    assert_eq!(call["arguments"], serde_json::json!({"city": "San Franc"}));
    let planned = &lines[1]["calls"][0];
    assert_eq!(planned["disposition"], "executed", "{planned}");
    assert_eq!(planned["lossy"], true, "{planned}");
    // A call that was not cut off is not lossy.
    let (out, _) = mend(
        &["--format", "json"],
        format!("{}\n", record("{'city': 'Oslo'}")).as_bytes(),
    );
    assert_eq!(json_lines(&out)[0]["calls"][0]["lossy"], false, "{out}");
    // The text report says the same.
    let (out, _) = mend(&["--accept-truncated"], cut_off_input().as_bytes());
    assert!(out.contains("repaired (cut off: salvaged prefix)"), "{out}");
    let (out, _) = mend(&[], cut_off_input().as_bytes());
    assert!(out.contains("feedback (cut off)"), "{out}");
}

#[test]
fn mend_exit_status_tells_a_clean_batch_from_one_with_malformed_lines() {
    let good = format!(
        "{}\n\n{}\n",
        record("{'city': 'Oslo'}"),
        record(r#"{"days": 3}"#)
    );
    // Feedback and blank lines are not malformed: 0.
    for format in ["text", "json"] {
        let (out, code) = mend(&["--format", format], good.as_bytes());
        assert_eq!(code, 0, "{format}: {out}");
    }
    assert_eq!(mend(&["--lines"], good.as_bytes()).1, 0);
    // Not JSON, not UTF-8, not a record: 1, in every format, the other lines reported.
    for bad in [&b"not json\n"[..], b"\xff\n", b"{\"tool\": 1}\n", b"[1]\n"] {
        let input = [good.as_bytes(), bad].concat();
        for args in [
            &["--format", "text"][..],
            &["--format", "json"],
            &["--lines"],
        ] {
            let (out, code) = mend(args, &input);
            assert_eq!(code, 1, "{args:?} {bad:?}: {out}");
            assert!(out.contains(r#""city":"Oslo""#), "{args:?}: {out}");
        }
    }
    // Usage and input errors: 2.
    let (code, _, err) = toolmend(&["mend", "/no/such/file.jsonl"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("cannot open /no/such/file.jsonl"), "{err}");
    let (code, _, err) = toolmend(&["mend", "--no-such-flag"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("--no-such-flag"), "{err}");
    let (code, _, err) = toolmend(&["mend", "--strict", "--accept-truncated"], b"");
    assert_eq!(code, 2, "{err}");
}

// `toolmend history`: check, sanitize, trim.

/// How long one command may run before the test fails: minutes, so that only a command
/// that hangs (or has turned quadratic on a large input) reaches it, never a debug build
/// on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(300);

/// Runs `toolmend <args>` with `stdin`; returns (exit code, stdout, stderr). A command
/// still running after [`PATIENCE`] is killed and the test fails.
fn toolmend(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolmend"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Fed and drained by threads of their own, so the wait below is the only one.
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        // A command refused on its arguments exits before it reads stdin; the
        // broken pipe that leaves is expected, not a failure of the test.
        match input.write_all(&stdin) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.unwrap(),
        }
    });
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            String::from_utf8(bytes).unwrap()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("toolmend {args:?} still running after {PATIENCE:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    writer.join().unwrap();
    (
        status.code().expect("exited, not killed"),
        stdout.join().unwrap(),
        stderr.join().unwrap(),
    )
}

const BROKEN_HISTORY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/broken_history.json"
);

fn broken_history() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(BROKEN_HISTORY).unwrap()).unwrap()
}

/// The example wrapped in a chat-completions request, `messages` in the middle.
fn broken_request() -> String {
    serde_json::json!({
        "model": "gpt-4o",
        "temperature": 0.2,
        "messages": broken_history(),
        "tools": [{"type": "function", "function": {"name": "get_weather",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        "tool_choice": "auto",
        "metadata": {"trace": "abc", "n": [1, 2.5, null]}
    })
    .to_string()
}

fn json_lines(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn history_check_finds_every_violation_of_the_example() {
    let (code, out, _) = toolmend(
        &["history", "check", "--format", "json", BROKEN_HISTORY],
        b"",
    );
    assert_eq!(code, 1, "{out}");
    let lines = json_lines(&out);
    let (summary, violations) = lines.split_last().unwrap();
    let found: Vec<(&str, u64)> = violations
        .iter()
        .map(|v| (v["kind"].as_str().unwrap(), v["message"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        found,
        [
            ("unanswered_call", 2),      // call_h1: its result comes after a user message
            ("arguments_not_object", 2), // {'city': 'Lisbon', …,}
            ("result_out_of_place", 5),
            ("duplicate_call_id", 6), // call_w1 again
            ("orphan_result", 8),     // call_b0: no call has it
            ("unanswered_call", 11),  // call_b1, at the end
            ("arguments_not_object", 11)
        ]
    );
    let first = &violations[0];
    assert_eq!(first["call"], 1);
    assert_eq!(first["ids"], serde_json::json!(["call_h1"]));
    assert_eq!(first["provider"], "openai");
    assert!(
        first["provider_error"]
            .as_str()
            .unwrap()
            .contains("call_h1")
    );
    assert_eq!(first["line"], 4);
    assert_eq!(summary["summary"]["violations"], 7);
    assert_eq!(summary["summary"]["valid"], false);

    // Text: one block per violation, then the summary; same exit code from stdin.
    let input = std::fs::read(BROKEN_HISTORY).unwrap();
    let (code, text, _) = toolmend(&["history", "check"], &input);
    assert_eq!(code, 1);
    assert!(
        text.starts_with("messages[2].tool_calls[1] (line 4) call_h1: unanswered_call\n  openai "),
        "{text}"
    );
    assert!(
        text.contains("summary: 12 message(s), 7 violation(s)"),
        "{text}"
    );
}

#[test]
fn history_sanitize_output_passes_check_for_both_shapes() {
    let array = std::fs::read_to_string(BROKEN_HISTORY).unwrap();
    for input in [array, broken_request()] {
        let (code, mended, report) = toolmend(&["history", "sanitize"], input.as_bytes());
        assert_eq!(code, 0, "{report}");
        assert!(report.contains("call_b1: result_synthesized: "), "{report}");
        assert!(report.contains("call_b0: result_dropped: "), "{report}");
        assert!(report.contains("call_w1_2: call_id_renamed: "), "{report}");
        assert!(report.contains("call_w1: arguments_repaired: "), "{report}");
        let (code, out, _) = toolmend(&["history", "check"], mended.as_bytes());
        assert_eq!(code, 0, "{out}");
        assert_eq!(out, "summary: 12 message(s), valid\n");
        // A valid history comes back as it is.
        let (code, again, report) = toolmend(&["history", "sanitize"], mended.as_bytes());
        assert_eq!(code, 0);
        assert_eq!(again, mended);
        assert!(report.contains("nothing changed"), "{report}");
    }

    // The request keeps every other key, in its order, with its values.
    let input: serde_json::Value = serde_json::from_str(&broken_request()).unwrap();
    let (_, mended, _) = toolmend(
        &["history", "sanitize", "--compact"],
        broken_request().as_bytes(),
    );
    assert_eq!(mended.lines().count(), 1);
    let mended: serde_json::Value = serde_json::from_str(&mended).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&mended), keys(&input));
    for key in ["model", "temperature", "tools", "tool_choice", "metadata"] {
        assert_eq!(mended[key], input[key], "{key}");
    }
    assert_ne!(mended["messages"], input["messages"]);
}

#[test]
fn history_sanitize_writes_a_json_report_to_a_file() {
    let dir = std::env::temp_dir().join(format!("toolmend-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("actions.jsonl");
    let (code, mended, stderr) = toolmend(
        &[
            "history",
            "sanitize",
            "--orphans",
            "rehome",
            "--report-format",
            "json",
            "--report",
            report.to_str().unwrap(),
            BROKEN_HISTORY,
        ],
        b"",
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    serde_json::from_str::<Vec<serde_json::Value>>(&mended).unwrap();
    let lines = json_lines(&std::fs::read_to_string(&report).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    let (summary, actions) = lines.split_last().unwrap();
    assert!(
        actions.iter().any(|a| a["kind"] == "result_rehomed"
            && a["call_id"] == "call_h1"
            && a["message"] == 5)
    );
    let repaired = actions
        .iter()
        .find(|a| a["kind"] == "arguments_repaired")
        .unwrap();
    assert_eq!(repaired["raw"], "{'city': 'Lisbon', 'date': '2025-06-13',}");
    assert_eq!(summary["summary"]["actions"], actions.len());
}

/// Roles of a history written by `history trim`, and the summary line.
fn trim(budget: &[&str], input: &str) -> (Vec<serde_json::Value>, String) {
    let mut args = vec!["history", "trim", "--compact"];
    args.extend_from_slice(budget);
    let (code, out, summary) = toolmend(&args, input.as_bytes());
    assert_eq!(code, 0, "{summary}");
    (serde_json::from_str(&out).unwrap(), summary)
}

#[test]
fn history_trim_respects_both_budgets_and_never_starts_with_a_result() {
    let (_, sanitized, _) = toolmend(&["history", "sanitize", BROKEN_HISTORY], b"");
    let full: Vec<serde_json::Value> = serde_json::from_str(&sanitized).unwrap();
    let check_kept = |kept: &[serde_json::Value], summary: &str| {
        // Pinned: the system message and the first user message.
        assert_eq!(kept[0], full[0]);
        assert_eq!(kept[1], full[1]);
        // Then a contiguous tail of the history, never starting with a tool result.
        if kept.len() > 2 {
            assert_ne!(kept[2]["role"], "tool", "{summary}");
            assert_eq!(kept[2..], full[full.len() - (kept.len() - 2)..]);
        }
        assert_eq!(kept.last(), full.last());
        let (code, out, _) = toolmend(
            &["history", "check"],
            serde_json::to_string(kept).unwrap().as_bytes(),
        );
        assert_eq!(code, 0, "{out}");
    };
    for n in 0..=full.len() {
        let (kept, summary) = trim(&["--messages", &n.to_string()], &sanitized);
        check_kept(&kept, &summary);
        if summary.contains("over budget") {
            assert!(kept.len() > n, "{summary}");
        } else {
            assert!(kept.len() <= n, "{summary}");
        }
        assert!(summary.starts_with(&format!("trim: kept {} of 12 message(s)", kept.len())));
    }
    // Unsanitized, a tool result can start a unit (messages[5], after a user message):
    // trim drops it rather than let it lead.
    let broken = std::fs::read_to_string(BROKEN_HISTORY).unwrap();
    for n in 0..=12 {
        let (kept, summary) = trim(&["--messages", &n.to_string()], &broken);
        assert!(kept.len() <= n.max(3), "{summary}");
        assert!(
            kept.len() < 3 || kept[2]["role"] != "tool",
            "{n}: {summary}"
        );
    }
    let mut seen_sizes = std::collections::BTreeSet::new();
    for tokens in (0..400).step_by(20) {
        let (kept, summary) = trim(
            &["--tokens", &tokens.to_string(), "--encoding", "bytes"],
            &sanitized,
        );
        check_kept(&kept, &summary);
        let size: usize = summary
            .split("; size ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            size <= tokens || summary.contains("over budget"),
            "{summary}"
        );
        seen_sizes.insert(kept.len());
    }
    assert!(
        seen_sizes.len() > 3,
        "the budgets should cut at several places"
    );
    // An OpenAI encoding, chosen by model name; the request shape is kept.
    let request = serde_json::json!({"model": "gpt-4o", "messages": full}).to_string();
    let (code, out, summary) = toolmend(
        &["history", "trim", "--tokens", "150", "--model", "gpt-4o"],
        request.as_bytes(),
    );
    assert_eq!(code, 0, "{summary}");
    assert!(
        summary.contains("token(s) (o200k_base), budget 150"),
        "{summary}"
    );
    let out: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["model"], "gpt-4o");
    check_kept(out["messages"].as_array().unwrap(), &summary);
}

#[test]
fn history_bad_input_is_a_clear_error_with_exit_2() {
    for (input, says) in [
        ("", "the input is empty"),
        (
            "[\n  {\"role\": \"user\", \"content\": \"hi\"}\n  {\"role\": \"user\"}\n]",
            "not valid JSON: expected `,` or `]` at line 3 column 3",
        ),
        ("{\"model\": \"gpt-4o\"}", "no `messages` key"),
        (
            "{\"messages\": {}}",
            "`messages` (line 1) is an object, not a JSON array",
        ),
        ("\"hello\"", "the input is a string"),
        (
            "[\"hello\"]",
            "messages[0] (line 1) is a string, not a message object",
        ),
        (
            "[{\"role\": \"user\", \"content\": \"hi\"},\n {\"role\": \"tool\", \"content\": \"x\"}]",
            "messages[1] (line 2) is not an OpenAI chat message: missing field `tool_call_id`",
        ),
        (
            "[\n {\"role\": \"robot\", \"content\": \"hi\"}]",
            "messages[0] (line 2) is not an OpenAI chat message: unknown variant `robot`",
        ),
    ] {
        for action in [&["check"][..], &["sanitize"], &["trim", "--messages", "5"]] {
            let mut args = vec!["history"];
            args.extend_from_slice(action);
            let (code, out, err) = toolmend(&args, input.as_bytes());
            assert_eq!(code, 2, "{action:?} {input:?}: {err}");
            assert!(out.is_empty(), "{out}");
            assert!(
                err.starts_with("toolmend: cannot read the history in standard input: ")
                    && err.contains(says),
                "{input:?}: {err}"
            );
        }
    }
    let (code, _, err) = toolmend(&["history", "check", "no/such/file.json"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("cannot read no/such/file.json"), "{err}");
    let (code, _, err) = toolmend(
        &["history", "trim", "--tokens", "9", "--model", "llama-3"],
        b"[]",
    );
    assert_eq!(code, 2);
    assert!(err.contains("unknown model `llama-3`"), "{err}");
    let (code, _, _) = toolmend(
        &["history", "trim", "--messages", "1", "--tokens", "9"],
        b"[]",
    );
    assert_eq!(code, 2, "one budget only");
}

#[test]
fn history_of_twelve_thousand_messages_on_one_line_reads_in_one_pass() {
    // Message positions are found in one pass: this took minutes when each was counted
    // from the start of the text. Each command's bound (`PATIENCE`) ends a run that hangs;
    // the time itself is not measured.
    let one = broken_history();
    let many: Vec<&serde_json::Value> = one
        .as_array()
        .unwrap()
        .iter()
        .cycle()
        .take(12_000)
        .collect();
    let input = serde_json::to_string(&many).unwrap();
    let (code, out, err) = toolmend(&["history", "check", "--format", "json"], input.as_bytes());
    assert_eq!(code, 1, "{err}");
    let last = json_lines(&out).pop().unwrap();
    assert_eq!(last["summary"]["messages"], 12_000);
    let (code, mended, _) = toolmend(&["history", "sanitize", "--compact"], input.as_bytes());
    assert_eq!(code, 0);
    let (code, _, _) = toolmend(&["history", "check"], mended.as_bytes());
    assert_eq!(code, 0);
}

#[test]
fn scripted_provider_serves_the_example_script_and_refuses_a_broken_history() {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolmend"))
        .args(["scripted-provider", "examples/script.jsonl"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    // "scripted provider: http://127.0.0.1:PORT/v1 (5 step(s)); Ctrl-C stops it"
    assert!(line.contains("(5 step(s))"), "{line}");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split("/v1").next())
        .unwrap()
        .to_owned();
    let post = |body: &str| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let ok = post(r#"{"model": "m", "messages": [{"role": "user", "content": "weather?"}]}"#);
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(
        ok.contains(r#""arguments":"{'city': 'Paris', 'unit': 'Celsius',}""#),
        "{ok}"
    );
    let refused = post(
        r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "user", "content": "and?"}]}"#,
    );
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert!(
        refused.contains("did not have response messages: c1"),
        "{refused}"
    );
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn a_message_record_is_planned_as_every_front_plans_it() {
    // A Mistral `[TOOL_CALLS]` content: the calls are read from the text (as the gateway
    // and the node read them), get minted ids naming the message's place in the history,
    // and the content keeps the prose before them.
    let tool = r#"{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#;
    let history = r#"[{"role": "user", "content": "weather?"}]"#;
    let content = r#"Checking. [TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]"#;
    let line = format!(
        r#"{{"message": {{"role": "assistant", "content": "{content}"}}, "tools": [{tool}], "history": {history}}}"#
    );
    let (out, code) = mend(&["--format", "json"], line.as_bytes());
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let calls = report["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{report}");
    assert_eq!(calls[0]["id"], "call_tm_1_0");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(report["message"]["content"], "Checking.");
    assert_eq!(report["calls"][0]["source"], "text");
    assert_eq!(report["calls"][0]["disposition"], "executed");

    // Ids: a repeat is renamed, an exact repeat dropped, a missing one minted.
    let line = format!(
        r#"{{"message": {{"role": "assistant", "content": null, "tool_calls": [
            {{"id": "a", "type": "function", "function": {{"name": "get_weather", "arguments": "{{\"city\": \"Oslo\"}}"}}}},
            {{"id": "a", "type": "function", "function": {{"name": "get_weather", "arguments": "{{\"city\": \"Oslo\"}}"}}}},
            {{"id": "a", "type": "function", "function": {{"name": "get_weather", "arguments": "{{\"city\": \"Rome\"}}"}}}},
            {{"type": "function", "function": {{"name": "get_weather", "arguments": "{{'city': 'Bern'}}"}}}}
        ]}}, "tools": [{tool}]}}"#
    )
    .replace('\n', " ");
    let (out, code) = mend(&["--format", "json"], line.as_bytes());
    assert_eq!(code, 0, "{out}");
    let report: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let ids: Vec<&str> = report["message"]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "a_2", "call_tm_0_3"]);
    assert_eq!(report["calls"][1]["disposition"], "dropped");
}

/// The items of the comma-separated list that follows `marker` in `text` (up to the
/// next `.`), backticks and line breaks aside.
fn listed_after(text: &str, marker: &str) -> std::collections::BTreeSet<String> {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = flat
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in:\n{text}"))
        + marker.len();
    let rest = &flat[at..];
    let end = rest.find('.').unwrap_or(rest.len());
    rest[..end]
        .split(',')
        .map(|s| s.trim().trim_matches('`').to_owned())
        .collect()
}

/// One vocabulary of safety: `--help` and the README's first screen name exactly the
/// fixes the core's table calls unsafe and runs by default (`FixKind::safety`,
/// `FixKind::runs_by_default`); a kind whose safety or default changes fails here until
/// both say so. Both say how to turn them off, the gateway's keys included.
#[test]
fn the_help_and_the_readme_list_the_unsafe_fixes_that_run_by_default() {
    use toolmend::{FixKind, Safety};
    let want: std::collections::BTreeSet<String> = FixKind::ALL
        .iter()
        .filter(|k| k.safety() == Safety::Unsafe && k.runs_by_default())
        .map(|k| k.id().to_owned())
        .collect();
    assert!(want.contains("string_to_integer") && want.contains("key_renamed"));
    let (code, help, _) = toolmend(&["--help"], b"");
    assert_eq!(code, 0);
    assert_eq!(
        listed_after(&help, "The unsafe fixes that run by default:"),
        want
    );
    assert!(
        !help.contains("safe coercions"),
        "\"5\" -> 5 is not safe: {help}"
    );
    let readme = include_str!("../../../../README.md");
    let first_screen: String = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    assert_eq!(
        listed_after(&first_screen, "Unsafe fixes that run by default:"),
        want
    );
    // And how to turn them off, the gateway included, with keys it reads.
    for (name, text) in [("--help", &help), ("README", &first_screen)] {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            !flat.contains("gateway runs the defaults"),
            "{name}: {flat}"
        );
        for key in [
            "calls.strict = true",
            "calls.coercions = { string_to_integer = false",
            "--strict",
            "coerce=",
        ] {
            assert!(flat.contains(key), "{name} does not say {key:?}: {flat}");
        }
    }
    let config = toolmend_gateway::Config::from_toml_and_env(
        "upstream.base_url = \"http://127.0.0.1:9/v1\"\n\
         calls.coercions = { string_to_integer = false }",
        Vec::new(),
    )
    .unwrap();
    assert!(!config.calls.mend_options().coercions.numeric_strings);
    let strict = toolmend_gateway::Config::from_toml_and_env(
        "upstream.base_url = \"http://127.0.0.1:9/v1\"\ncalls.strict = true",
        Vec::new(),
    )
    .unwrap();
    assert_eq!(
        strict.calls.mend_options().coercions,
        toolmend::schema::Coercions::none()
    );
}
