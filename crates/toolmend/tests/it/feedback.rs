//! Feedback: exact texts (they are deterministic) and the JSON form.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use toolmend::feedback::{error_id, render};
use toolmend::schema::{Coercions, CompiledTool, Phase, Toolbox, ValidationContext};
use toolmend::{Issue, IssueKind};

fn weather() -> CompiledTool {
    CompiledTool::compile(
        "get_weather",
        "Current weather and forecast.",
        &json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "hourly": {"type": "boolean"},
                "start": {"type": "string", "format": "date"}
            },
            "required": ["city"],
            "additionalProperties": false
        }),
    )
    .unwrap()
}

fn strict_feedback(tool: &CompiledTool, args: Value) -> String {
    let ctx = ValidationContext::new(tool.name(), Phase::Initial);
    let checked = tool.check(args, &Coercions::none(), &ctx);
    render(tool.name(), &checked.issues).text
}

fn lax_feedback(tool: &CompiledTool, args: Value) -> String {
    let ctx = ValidationContext::new(tool.name(), Phase::Initial);
    let checked = tool.check(args, &Coercions::default(), &ctx);
    render(tool.name(), &checked.issues).text
}

#[test]
fn the_brief_example() {
    let text = strict_feedback(&weather(), json!({"town": "Paris", "units": "Kelvin"}));
    assert_eq!(
        text,
        "get_weather was not called. Fix these 3 problems and call it again:\n\
         - city: required, missing. Add \"city\" (string).\n\
         - town: unknown key; did you mean \"city\"?\n\
         - units: \"Kelvin\" is not allowed; use one of \"celsius\", \"fahrenheit\"."
    );
}

#[test]
fn lax_mode_leaves_only_what_cannot_be_fixed() {
    // town -> city and "5" -> 5 are fixed; "Kelvin" and "sometimes" are not guessed.
    let text = lax_feedback(
        &weather(),
        json!({"town": "Paris", "units": "Kelvin", "days": "5", "hourly": "sometimes"}),
    );
    assert_eq!(
        text,
        "get_weather was not called. Fix these 2 problems and call it again:\n\
         - hourly: expected boolean (true or false), got \"sometimes\".\n\
         - units: \"Kelvin\" is not allowed; use one of \"celsius\", \"fahrenheit\"."
    );
}

#[test]
fn one_line_per_schema_issue_kind() {
    let text = strict_feedback(
        &weather(),
        json!({"city": 5, "units": "celcius", "days": 30, "start": "2026-02-30", "junk": 1}),
    );
    assert_eq!(
        text,
        "get_weather was not called. Fix these 5 problems and call it again:\n\
         - city: expected string, got 5.\n\
         - days: 30 is out of range; it must be <= 14.\n\
         - junk: unknown key; remove it.\n\
         - start: \"2026-02-30\" is not a valid date; use YYYY-MM-DD, e.g. \"2026-01-19\".\n\
         - units: \"celcius\" is not allowed; did you mean \"celsius\"? Use one of \"celsius\", \"fahrenheit\"."
    );
}

#[test]
fn length_pattern_composition_and_nested_paths() {
    let tool = CompiledTool::compile(
        "create_invoice",
        "",
        &json!({
            "type": "object",
            "properties": {
                "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
                "items": {"type": "array", "minItems": 1},
                "lines": {"type": "array", "items": {"type": "object",
                    "properties": {"sku": {"type": "string"}}, "required": ["sku"]}},
                "ref": {"oneOf": [{"type": "integer"}, {"type": "number"}]}
            }
        }),
    )
    .unwrap();
    let text = strict_feedback(
        &tool,
        json!({"country": "fr", "items": [], "lines": [{"sku": "A"}, {}], "ref": 3}),
    );
    assert_eq!(
        text,
        "create_invoice was not called. Fix these 4 problems and call it again:\n\
         - country: \"fr\" does not match the pattern ^[A-Z]{2}$.\n\
         - items: must have at least 1 item.\n\
         - lines[1].sku: required, missing. Add \"sku\" (string).\n\
         - ref: 3 matches more than one alternative; it must match exactly one."
    );
}

#[test]
fn unknown_tool() {
    let tools = Toolbox::from_tools([weather()]).unwrap();
    let issue = tools.unknown_tool_issue("get_wether");
    let fb = render("get_wether", &[issue]);
    assert_eq!(
        fb.text,
        "No tool named get_wether; did you mean \"get_weather\"?"
    );
    assert_eq!(fb.json["error"], "unknown_tool");
}

#[test]
fn unknown_tool_lists_are_capped() {
    let names: Vec<Value> = (0..25).map(|i| json!(format!("tool_{i:02}"))).collect();
    let issue = Issue::new(IssueKind::UnknownTool, "", "there is no tool named \"x\"")
        .got(json!("x"))
        .allowed(names);
    let text = render("x", &[issue]).text;
    assert!(
        text.starts_with("No tool named x. Use one of: tool_00, tool_01,"),
        "{text}"
    );
    assert!(text.ends_with("tool_18, tool_19, …."), "{text}");
    assert!(!text.contains("tool_20"));
}

#[test]
fn unparseable_truncated_not_an_object() {
    let unparseable = Issue::new(
        IssueKind::Unparseable,
        "",
        "the arguments could not be read as JSON: expected ',' or '}' at byte 14",
    );
    assert_eq!(
        render("get_weather", &[unparseable]).text,
        "get_weather was not called: the arguments could not be read as JSON: expected ',' or '}' at byte 14.\n\
         Call get_weather again with the arguments as one JSON object."
    );
    let truncated = Issue::new(
        IssueKind::Truncated,
        "",
        "the text stopped inside a string at byte 120",
    );
    let fb = render("send_email", &[truncated]);
    assert_eq!(
        fb.text,
        "send_email was not called: the text stopped inside a string at byte 120.\n\
         Send the whole send_email call again, complete."
    );
    assert_eq!(fb.json["error"], "truncated_arguments");
    // A suggestion on a call-level issue becomes the closing instruction.
    let truncated = Issue::new(IssueKind::Truncated, "", "the arguments were cut off")
        .suggestion("send the whole call again");
    assert_eq!(
        render("send_email", &[truncated]).text,
        "send_email was not called: the arguments were cut off.\nSend the whole call again."
    );
    let tool = weather();
    let text = strict_feedback(&tool, json!(["Paris"]));
    assert_eq!(
        text,
        "get_weather was not called: the arguments must be a JSON object, got array.\n\
         Call get_weather again with the arguments as one JSON object."
    );
}

#[test]
fn custom_issues() {
    let issues = [
        Issue::new(
            IssueKind::Custom,
            "/date",
            "the date must be at most 30 days from today",
        ),
        Issue::new(
            IssueKind::Custom,
            "",
            "only one booking per day is allowed.",
        ),
    ];
    assert_eq!(
        render("book", &issues).text,
        "book was not called. Fix these 2 problems and call it again:\n\
         - only one booking per day is allowed.\n\
         - date: the date must be at most 30 days from today."
    );
}

#[test]
fn long_values_and_enums_are_capped() {
    let allowed: Vec<Value> = (0..30).map(|i| json!(format!("v{i}"))).collect();
    let long = "x".repeat(200);
    let issue = Issue::new(IssueKind::NotInEnum, "/mode", "not allowed")
        .got(json!(long))
        .allowed(allowed);
    let text = render("t", &[issue]).text;
    let line = text.lines().nth(1).unwrap();
    assert!(
        line.starts_with(&format!("- mode: \"{}…", "x".repeat(58))),
        "{line}"
    );
    assert!(line.contains("\"v19\", …."), "{line}");
    assert!(!line.contains("v20"), "{line}");
    assert!(line.chars().count() < 300);
}

#[test]
fn many_issues_are_capped() {
    let issues: Vec<Issue> = (0..25)
        .map(|i| Issue::new(IssueKind::UnknownKey, format!("/k{i:02}"), "unknown"))
        .collect();
    let text = render("t", &issues).text;
    assert!(text.starts_with("t was not called. Fix these 25 problems and call it again:\n"));
    assert!(
        text.ends_with("\n- k19: unknown key; remove it.\n- … and 5 more."),
        "{text}"
    );
}

#[test]
fn json_form() {
    let fb = render(
        "get_weather",
        &[Issue::new(
            IssueKind::MissingRequired,
            "/city",
            "required key \"city\" is missing",
        )
        .expected("string")],
    );
    assert_eq!(
        fb.json,
        json!({
            "tool": "get_weather",
            "error": "invalid_arguments",
            "issues": [{"kind": "missing_required", "path": "/city",
                        "message": "required key \"city\" is missing", "expected": "string"}]
        })
    );
    assert_eq!(error_id(&[]), "none");
    assert_eq!(render("t", &[]).text, "t: the arguments are valid.");
}

#[test]
fn output_does_not_depend_on_issue_order() {
    let tool = weather();
    let ctx = ValidationContext::new("get_weather", Phase::Initial);
    let mut issues = tool
        .check(
            json!({"units": "k", "days": 0, "zz": 1}),
            &Coercions::none(),
            &ctx,
        )
        .issues;
    let a = render("get_weather", &issues);
    issues.reverse();
    let b = render("get_weather", &issues);
    assert_eq!(a, b);
}

// ---- docs ----

fn doc(name: &str) -> String {
    let path = format!("{}/../../docs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// LangGraph's ToolNode text for an argument error, from its template.
fn langgraph(kwargs: &str, errors: &[&str]) -> String {
    format!(
        "Error invoking tool 'get_weather' with kwargs {kwargs} with error:\n {}\n Please fix the error and try again.",
        errors.join("\n ")
    )
}

#[test]
fn docs_feedback_md_shows_current_output() {
    let page = doc("feedback.md");
    let tool = CompiledTool::compile(
        "get_weather",
        "Current weather and forecast for a city.",
        &json!({"type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                           "days": {"type": "integer", "minimum": 1, "maximum": 14},
                           "hourly": {"type": "boolean"}},
            "required": ["city"], "additionalProperties": false}),
    )
    .unwrap();
    let cases = [
        (
            json!({"town": "Paris", "units": "Kelvin"}),
            langgraph(
                "{'town': 'Paris', 'units': 'Kelvin'}",
                &[
                    "city: Field required",
                    "units: Input should be 'celsius' or 'fahrenheit'",
                ],
            ),
        ),
        (
            json!({"units": "celsius"}),
            langgraph("{'units': 'celsius'}", &["city: Field required"]),
        ),
        (
            json!({"city": "Paris", "days": "five"}),
            langgraph(
                "{'city': 'Paris', 'days': 'five'}",
                &["days: Input should be a valid integer, unable to parse string as an integer"],
            ),
        ),
        (
            json!({"city": "Paris", "days": 30, "hourly": "sometimes"}),
            langgraph(
                "{'city': 'Paris', 'days': 30, 'hourly': 'sometimes'}",
                &[
                    "days: Input should be less than or equal to 14",
                    "hourly: Input should be a valid boolean, unable to interpret input",
                ],
            ),
        ),
    ];
    for (args, theirs) in cases {
        let ours = lax_feedback(&tool, args.clone());
        assert!(
            page.contains(&format!("```text\n{ours}\n```")),
            "not in docs/feedback.md:\n{ours}"
        );
        assert!(
            page.contains(&format!("```text\n{theirs}\n```")),
            "not in docs/feedback.md:\n{theirs}"
        );
        assert!(
            page.contains(&format!("({} characters", ours.chars().count())),
            "count for {args}"
        );
        assert!(page.contains(&format!("({} characters", theirs.chars().count())));
        // Shorter than LangGraph (and far below SAIDEX's measured 394..470).
        assert!(ours.len() < theirs.len(), "{ours}");
    }
    let strict = strict_feedback(&tool, json!({"town": "Paris", "units": "Kelvin"}));
    assert!(
        page.contains(&format!("```text\n{strict}\n```")),
        "{strict}"
    );
    let tools = Toolbox::from_tools([tool]).unwrap();
    let unknown = render("get_wether", &[tools.unknown_tool_issue("get_wether")]).text;
    assert!(
        page.contains(&format!("```text\n{unknown}\n```")),
        "{unknown}"
    );
    assert!(
        unknown.len() < "Error: get_wether is not a valid tool, try one of [get_weather].".len()
    );
    let truncated = render(
        "get_weather",
        &[Issue::new(
            IssueKind::Truncated,
            "",
            "the arguments stop inside a string at byte 13",
        )],
    )
    .text;
    assert!(
        page.contains(&format!("```text\n{truncated}\n```")),
        "{truncated}"
    );
}

#[test]
fn docs_issue_kinds_md_lists_every_id() {
    let page = doc("issue-kinds.md");
    for kind in IssueKind::ALL {
        assert!(
            page.contains(&format!("| `{}` |", kind.id())),
            "issue kind {kind} missing"
        );
    }
    for kind in toolmend::FixKind::ALL {
        assert!(
            page.contains(&format!("| `{}` |", kind.id())),
            "fix kind {kind} missing"
        );
    }
    for id in [
        "unknown_tool",
        "unparseable_arguments",
        "truncated_arguments",
        "not_an_object",
        "invalid_arguments",
        "none",
    ] {
        assert!(
            page.contains(&format!("| `{id}` |")),
            "error id {id} missing"
        );
    }
}
