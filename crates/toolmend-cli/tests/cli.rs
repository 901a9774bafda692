//! The `toolmend mend` contracts the README promises, run against the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    io::Write,
    process::{Command, Stdio},
};

fn mend(args: &[&str], stdin: &[u8]) -> (String, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolmend"))
        .arg("mend")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (String::from_utf8(out.stdout).unwrap(), out.status.success())
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
    let (out, ok) = mend(&["--lines"], &input);
    assert!(ok);
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
    let (out, ok) = mend(&["--format", "json"], input.as_bytes());
    assert!(ok);
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
    let (out, ok) = mend(
        &["--lines", "--strict"],
        format!("{}\n", record("{'city': 'Oslo'}")).as_bytes(),
    );
    assert!(ok);
    assert!(out.starts_with("ERROR "), "{out}");
}
