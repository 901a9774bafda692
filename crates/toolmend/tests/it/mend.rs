//! Mend: repair and schema together; the schema picks among readings.

use serde_json::json;
use toolmend::{
    FixKind, IssueKind, MendOptions,
    mend::{Outcome, mend_call, mend_named},
    schema::{CompiledTool, Toolbox},
};

fn weather() -> CompiledTool {
    CompiledTool::compile(
        "get_weather",
        "Weather for a city.",
        &json!({"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "units": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"], "additionalProperties": false}),
    )
    .unwrap()
}

fn kinds(c: &toolmend::MendedCall) -> Vec<FixKind> {
    c.fixes.iter().map(|f| f.kind).collect()
}

#[test]
fn valid_calls_pass_untouched() {
    let m = mend_call(
        r#"{"city": "Rome", "days": 2}"#,
        &weather(),
        &MendOptions::default(),
    );
    assert_eq!(m.calls.len(), 1);
    assert_eq!(m.calls[0].outcome, Outcome::Valid);
    assert!(m.calls[0].fixes.is_empty());
    assert_eq!(
        m.calls[0].arguments,
        Some(json!({"city": "Rome", "days": 2}))
    );
}

#[test]
fn repair_and_coercion_fixes_are_both_recorded() {
    let m = mend_call(
        "{'city': 'Rome', 'days': '2', 'units': 'Celsius',}",
        &weather(),
        &MendOptions::default(),
    );
    let c = &m.calls[0];
    assert_eq!(c.outcome, Outcome::Repaired);
    assert_eq!(
        c.arguments,
        Some(json!({"city": "Rome", "days": 2, "units": "celsius"}))
    );
    let k = kinds(c);
    for want in [
        FixKind::SingleQuotes,
        FixKind::TrailingComma,
        FixKind::StringToInteger,
        FixKind::EnumCaseFixed,
    ] {
        assert!(k.contains(&want), "{want:?} missing from {k:?}");
    }
}

#[test]
fn the_schema_picks_between_a_wrapper_and_arguments() {
    // For get_weather, a whole call object is a wrapper to unwrap.
    let raw = r#"{"name": "get_weather", "arguments": {"city": "Rome"}}"#;
    let m = mend_call(raw, &weather(), &MendOptions::default());
    assert_eq!(m.calls[0].arguments, Some(json!({"city": "Rome"})));
    assert!(kinds(&m.calls[0]).contains(&FixKind::CallWrapperUnwrapped));
    // For a tool whose parameters are `name` and `arguments`, the same text is its arguments.
    let register = CompiledTool::compile(
        "register_function",
        "",
        &json!({"type": "object", "properties": {"name": {"type": "string"},
            "arguments": {"type": "object"}}, "required": ["name", "arguments"]}),
    )
    .unwrap();
    let m = mend_call(raw, &register, &MendOptions::default());
    assert_eq!(m.calls[0].outcome, Outcome::Valid);
    assert_eq!(
        m.calls[0].arguments,
        Some(json!({"name": "get_weather", "arguments": {"city": "Rome"}}))
    );
}

#[test]
fn a_cut_off_call_is_salvaged_and_marked_or_refused() {
    let raw = r#"{"city": "Ro"#;
    let m = mend_call(raw, &weather(), &MendOptions::default());
    assert!(m.calls[0].is_lossy());
    assert_eq!(m.calls[0].outcome, Outcome::Repaired);
    let refuse = MendOptions {
        refuse_lossy: true,
        ..MendOptions::default()
    };
    let m = mend_call(raw, &weather(), &refuse);
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
    assert_eq!(m.calls[0].issues[0].kind, IssueKind::Truncated);
}

#[test]
fn missing_required_is_feedback_never_invented() {
    let m = mend_call(
        r#"{"town_name": 5, "days": 3}"#,
        &weather(),
        &MendOptions::default(),
    );
    let c = &m.calls[0];
    assert_eq!(c.outcome, Outcome::Feedback);
    assert!(
        c.issues
            .iter()
            .any(|i| i.kind == IssueKind::MissingRequired && i.path == "/city")
    );
    assert!(c.arguments.as_ref().is_none_or(|a| a.get("city").is_none()));
}

#[test]
fn unparseable_text_is_feedback_naming_where() {
    let m = mend_call("I cannot do that.", &weather(), &MendOptions::default());
    let c = &m.calls[0];
    assert_eq!(c.outcome, Outcome::Feedback);
    assert_eq!(c.issues[0].kind, IssueKind::Unparseable);
    assert!(c.issues[0].suggestion.as_deref().unwrap().contains("byte"));
}

#[test]
fn glued_calls_become_two_calls() {
    let m = mend_call(
        r#"{"city": "Rome"}{"city": "Oslo", "days": "2"}"#,
        &weather(),
        &MendOptions::default(),
    );
    assert_eq!(m.calls.len(), 2);
    assert_eq!(
        m.calls[1].arguments,
        Some(json!({"city": "Oslo", "days": 2}))
    );
    assert!(m.is_runnable());
}

#[test]
fn named_calls_resolve_tools_fix_case_and_list_unknown_ones() {
    let mut tools = Toolbox::new();
    tools.add(weather()).unwrap();
    tools
        .add(
            CompiledTool::compile(
                "get_time",
                "",
                &json!({"type": "object", "properties": {"zone": {"type": "string"}}}),
            )
            .unwrap(),
        )
        .unwrap();
    assert!(
        tools.add(weather()).is_err(),
        "duplicate names are rejected"
    );

    let m = mend_named(
        "GetWeather",
        r#"{"city": "Rome"}"#,
        &tools,
        &MendOptions::default(),
    );
    assert_eq!(m.calls[0].tool, "get_weather");
    assert_eq!(m.calls[0].outcome, Outcome::Repaired);
    assert!(kinds(&m.calls[0]).contains(&FixKind::ToolNameFixed));

    let m = mend_named("get_wether", "{}", &tools, &MendOptions::default());
    let issue = &m.calls[0].issues[0];
    assert_eq!(issue.kind, IssueKind::UnknownTool);
    assert_eq!(issue.allowed, vec![json!("get_weather"), json!("get_time")]);
    assert!(issue.suggestion.as_deref().unwrap().contains("get_weather"));

    // Two calls of two tools glued in one text: each goes to its own tool.
    let raw = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>\n<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}</tool_call>";
    let m = mend_named("get_weather", raw, &tools, &MendOptions::default());
    let names: Vec<&str> = m.calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(names, ["get_weather", "get_time"]);
    assert!(m.is_runnable());
}

#[test]
fn strict_options_repair_and_coerce_nothing() {
    let m = mend_call("{'city': 'Rome'}", &weather(), &MendOptions::strict());
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
    let m = mend_call(
        r#"{"city": "Rome", "days": "2"}"#,
        &weather(),
        &MendOptions::strict(),
    );
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
    assert_eq!(m.calls[0].issues[0].kind, IssueKind::WrongType);
}

#[test]
fn nan_becomes_null_then_the_schema_decides() {
    let t = CompiledTool::compile(
        "search",
        "",
        &json!({"type": "object", "properties": {
            "q": {"type": "string"}, "max_price": {"type": "number"},
            "min_price": {"type": ["number", "null"]}, "limit": {"type": "integer"}},
            "required": ["q", "limit"], "additionalProperties": false}),
    )
    .unwrap();
    // Optional number: the field is omitted (null is not a number); both steps recorded.
    let m = mend_call(
        r#"{"q": "x", "limit": 1, "max_price": NaN}"#,
        &t,
        &MendOptions::default(),
    );
    assert_eq!(m.calls[0].arguments, Some(json!({"q": "x", "limit": 1})));
    let k = kinds(&m.calls[0]);
    assert!(
        k.contains(&FixKind::NonFiniteNumber) && k.contains(&FixKind::NullOmitted),
        "{k:?}"
    );
    // Nullable: null is a value the tool accepts.
    let m = mend_call(
        r#"{"q": "x", "limit": 1, "min_price": -Infinity}"#,
        &t,
        &MendOptions::default(),
    );
    assert_eq!(
        m.calls[0].arguments,
        Some(json!({"q": "x", "limit": 1, "min_price": null}))
    );
    // Required: no number can be invented, so it is feedback.
    let m = mend_call(r#"{"q": "x", "limit": NaN}"#, &t, &MendOptions::default());
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
}

#[test]
fn regression_a_wrapped_call_is_unwrapped_not_emptied() {
    // Both readings are valid; the one that drops nothing wins.
    let t = CompiledTool::compile(
        "get_weather",
        "",
        &json!({"type": "object", "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
                "additionalProperties": false}),
    )
    .unwrap();
    let m = mend_call(
        r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#,
        &t,
        &MendOptions::default(),
    );
    assert_eq!(m.calls[0].arguments, Some(json!({"city": "Paris"})));
}

#[test]
fn regression_a_call_named_for_another_tool_is_not_run() {
    let m = mend_call(
        "<tool_call>{\"name\": \"delete_all\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>",
        &weather(),
        &MendOptions::default(),
    );
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
    assert_eq!(m.calls[0].issues[0].kind, IssueKind::UnknownTool);
}

#[test]
fn empty_arguments_are_an_empty_object_and_the_schema_decides() {
    let now =
        CompiledTool::compile("now", "", &json!({"type": "object", "properties": {}})).unwrap();
    for raw in ["", "  ", "\n"] {
        let m = mend_call(raw, &now, &MendOptions::default());
        assert_eq!(m.calls[0].outcome, Outcome::Repaired, "{raw:?}");
        assert_eq!(m.calls[0].arguments, Some(json!({})));
        assert_eq!(m.calls[0].fixes[0].kind, FixKind::EmptyArgumentsAsObject);
    }
    let needs = CompiledTool::compile(
        "get_weather",
        "",
        &json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )
    .unwrap();
    let m = mend_call("", &needs, &MendOptions::default());
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
    assert_eq!(m.calls[0].issues[0].kind, IssueKind::MissingRequired);
    // Strict mode repairs nothing.
    let m = mend_call("", &now, &MendOptions::strict());
    assert_eq!(m.calls[0].issues[0].kind, IssueKind::Unparseable);
}
