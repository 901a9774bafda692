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

// ---- merged calls and lost values (issue 15, deliver 6) ----

/// A fx-rate tool, with names unlike the corpus's.
fn fx_rate() -> CompiledTool {
    CompiledTool::compile(
        "fx_rate",
        "The exchange rate of a currency pair.",
        &json!({"type": "object", "properties": {
            "pair": {"type": "string", "pattern": "^[A-Z]{3}/[A-Z]{3}$"},
            "at": {"type": "string", "format": "date"}},
            "required": ["pair"], "additionalProperties": false}),
    )
    .unwrap()
}

/// The default: a merged call is split (`split_merged_calls` is on).
fn splitting() -> MendOptions {
    MendOptions::default()
}

/// The switch off: a merged call is feedback.
fn unsplit() -> MendOptions {
    let mut o = MendOptions::default();
    o.coercions.split_merged_calls = false;
    o
}

#[test]
fn the_merged_call_switch_is_on_by_default_off_in_strict_mode() {
    assert!(toolmend::schema::Coercions::default().split_merged_calls);
    assert!(MendOptions::default().coercions.split_merged_calls);
    assert!(!MendOptions::strict().coercions.split_merged_calls);
    assert_eq!(
        toolmend::schema::Coercions::switch_of(FixKind::MergedCallSplit),
        Some("split_merged_calls")
    );
    let off = toolmend::schema::Coercions::from_names([("split_merged_calls", false)]).unwrap();
    assert!(!off.split_merged_calls && off.numeric_strings);
}

#[test]
fn a_merged_call_is_split_by_default() {
    let raw = r#"{"pair": ["EUR/CHF", "GBP/JPY", "USD/SEK"], "at": "2026-02-03"}"#;
    let m = mend_call(raw, &fx_rate(), &MendOptions::default());
    assert_eq!(m.calls.len(), 3, "{m:?}");
    assert!(m.is_runnable());
    assert!(m.calls.iter().all(|c| c.outcome == Outcome::Repaired
        && c.fixes.iter().any(|f| f.kind == FixKind::MergedCallSplit)));
    // Parsed arguments (LangChain's `args`, a gateway's parsed call) split the same way.
    let tools = Toolbox::from_tools([fx_rate()]).unwrap();
    let ctx = toolmend::schema::ValidationContext::new("", toolmend::schema::Phase::Initial);
    let parsed: serde_json::Value = serde_json::from_str(raw).unwrap();
    let calls =
        toolmend::mend::mend_parsed_in("fx_rate", &parsed, &tools, &MendOptions::default(), &ctx);
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[2].arguments,
        Some(json!({"pair": "USD/SEK", "at": "2026-02-03"}))
    );
}

#[test]
fn a_merged_call_is_feedback_asking_for_one_call_per_value_when_the_switch_is_off() {
    let raw = r#"{"pair": ["EUR/CHF", "GBP/JPY", "USD/SEK"], "at": "2026-02-03"}"#;
    for opts in [unsplit(), MendOptions::strict()] {
        let m = mend_call(raw, &fx_rate(), &opts);
        assert_eq!(m.calls.len(), 1);
        let c = &m.calls[0];
        assert_eq!(c.outcome, Outcome::Feedback);
        assert!(!kinds(c).contains(&FixKind::MergedCallSplit));
        let issue = c.issues.iter().find(|i| i.path == "/pair").unwrap();
        assert_eq!(issue.kind, IssueKind::WrongType);
        let s = issue.suggestion.as_deref().unwrap();
        assert!(
            s.starts_with("make one call per value: 3 calls to fx_rate"),
            "{s}"
        );
        let text = toolmend::feedback::render("fx_rate", &c.issues).text;
        assert!(
            text.to_lowercase().contains("make one call per value"),
            "{text}"
        );
    }
}

#[test]
fn a_merged_call_splits_into_one_call_per_value() {
    let raw = r#"{"pair": ["EUR/CHF", "GBP/JPY", "USD/SEK"], "at": "2026-02-03"}"#;
    let m = mend_call(raw, &fx_rate(), &splitting());
    assert_eq!(m.calls.len(), 3);
    assert!(m.is_runnable());
    let pairs: Vec<_> = m
        .calls
        .iter()
        .map(|c| c.arguments.as_ref().unwrap()["pair"].clone())
        .collect();
    assert_eq!(
        pairs,
        [json!("EUR/CHF"), json!("GBP/JPY"), json!("USD/SEK")]
    );
    for (i, c) in m.calls.iter().enumerate() {
        assert_eq!(c.outcome, Outcome::Repaired);
        assert_eq!(c.arguments.as_ref().unwrap()["at"], json!("2026-02-03"));
        let f = c
            .fixes
            .iter()
            .find(|f| f.kind == FixKind::MergedCallSplit)
            .unwrap();
        assert_eq!(f.safety(), toolmend::Safety::Unsafe);
        assert_eq!(f.path, "/pair");
        assert!(
            f.detail.ends_with(&format!("call {} of 3", i + 1)),
            "{}",
            f.detail
        );
    }
    // Through a toolbox too (the path the message plan takes: the extra calls get their
    // ids as glued calls do).
    let tools = Toolbox::from_tools([fx_rate()]).unwrap();
    assert_eq!(
        mend_named("fx_rate", raw, &tools, &splitting()).calls.len(),
        3
    );
}

#[test]
fn a_list_is_not_split_when_an_element_alone_is_not_a_valid_call() {
    // One element breaks the pattern; another problem beside the list; a repeated value;
    // two scalar fields given lists; a list of lists or objects; one value; more than 32.
    // None is a merged call.
    let many = json!({"pair": (0..33u8)
        .map(|i| format!("A{}{}/XYZ", char::from(b'A' + i / 26), char::from(b'A' + i % 26)))
        .collect::<Vec<_>>()})
    .to_string();
    for raw in [
        r#"{"pair": ["EUR/CHF", "euro"]}"#,
        r#"{"pair": ["EUR/CHF", "GBP/JPY"], "at": "soon"}"#,
        r#"{"pair": ["EUR/CHF", "EUR/CHF"]}"#,
        r#"{"pair": ["EUR/CHF", "GBP/JPY"], "at": ["2026-02-03", "2026-02-04"]}"#,
        r#"{"pair": [["EUR/CHF"], ["GBP/JPY"]]}"#,
        r#"{"pair": [{"p": "EUR/CHF"}, {"p": "GBP/JPY"}]}"#,
        r#"{"pair": ["EUR/CHF"]}"#,
        many.as_str(),
    ] {
        let m = mend_call(raw, &fx_rate(), &splitting());
        assert_eq!(m.calls.len(), 1, "{raw}");
        assert_eq!(m.calls[0].outcome, Outcome::Feedback, "{raw}");
        assert!(
            !m.calls[0]
                .fixes
                .iter()
                .any(|f| f.kind == FixKind::MergedCallSplit)
        );
    }
}

#[test]
fn a_command_line_in_words_is_not_split_and_the_feedback_says_so() {
    // `["bash", "-lc", "ls -la"]` for a string `command`: an option (`-lc`) cannot stand
    // alone as a value, so these are one command's words, not three commands. Splitting ran
    // `bash`, then `-lc`. Without an option the list is alternatives and is split.
    let tool = CompiledTool::compile(
        "Bash",
        "Executes a given bash command.",
        &json!({"type": "object", "properties": {
            "command": {"type": "string", "description": "The command to execute"},
            "description": {"type": "string"}},
            "required": ["command"], "additionalProperties": false}),
    )
    .unwrap();
    for (raw, option) in [
        (
            r#"{"command": ["bash", "-lc", "ls -la"], "description": "List"}"#,
            "-lc",
        ),
        (r#"{"command": ["git", "push", "--force"]}"#, "--force"),
        (
            r#"{"command": ["rg", "--glob=*.rs", "TODO"]}"#,
            "--glob=*.rs",
        ),
    ] {
        let m = mend_call(raw, &tool, &splitting());
        assert_eq!(m.calls.len(), 1, "{raw}: {m:?}");
        let c = &m.calls[0];
        assert_eq!(c.outcome, Outcome::Feedback, "{raw}");
        assert!(!kinds(c).contains(&FixKind::MergedCallSplit), "{raw}");
        let issue = c.issues.iter().find(|i| i.path == "/command").unwrap();
        assert!(
            issue.message.contains("one command line") && issue.message.contains(option),
            "{}",
            issue.message
        );
        assert!(issue.suggestion.as_deref().unwrap().contains("one string"));
    }
    // Values that begin with a dash but are no options (`-5`, `-`, a phrase) do not stop a
    // split of alternatives.
    for raw in [
        r#"{"command": ["npm test", "npm run lint"]}"#,
        r#"{"command": ["-5", "7"]}"#,
        r#"{"command": ["- item", "cat"]}"#,
    ] {
        let m = mend_call(raw, &tool, &splitting());
        assert_eq!(m.calls.len(), 2, "{raw}: {m:?}");
        assert!(m.is_runnable(), "{raw}");
    }
}

#[test]
fn a_list_for_a_field_that_holds_a_document_is_not_split() {
    // A file's content, code, a body given as a list of strings: the text in pieces (its
    // lines), never one call per piece (each writing one line as the whole file).
    let tool = CompiledTool::compile(
        "save",
        "Save a file.",
        &json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "note": {"type": "string", "description": "The file's body text"},
            "lines": {"type": "string", "description": "Lines to write to the file"}},
            "required": ["path"], "additionalProperties": false}),
    )
    .unwrap();
    for raw in [
        r##"{"path": "a.md", "content": ["# Title", "", "- one"]}"##,
        r#"{"path": "a.py", "note": ["import os", "print(1)"]}"#,
        r#"{"path": "a.txt", "lines": ["first", "second"]}"#,
    ] {
        let m = mend_call(raw, &tool, &splitting());
        assert_eq!(m.calls.len(), 1, "{raw}: {m:?}");
        assert_eq!(m.calls[0].outcome, Outcome::Feedback, "{raw}");
    }
    // A file's name is no document: "Path of the file to read" given two paths is two
    // reads.
    let read = CompiledTool::compile(
        "read_file",
        "Read a file.",
        &json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Path of the file to read"}},
            "required": ["path"], "additionalProperties": false}),
    )
    .unwrap();
    let m = mend_call(r#"{"path": ["a.py", "b.py"]}"#, &read, &splitting());
    let paths: Vec<_> = m.calls.iter().map(|c| c.arguments.clone()).collect();
    assert_eq!(
        paths,
        [Some(json!({"path": "a.py"})), Some(json!({"path": "b.py"}))],
        "{m:?}"
    );
}

#[test]
fn a_list_of_objects_for_an_object_field_is_not_split() {
    // Only a scalar field is split: each element here would be valid alone, but a list of
    // filters for one filter is not read as several calls.
    let search = CompiledTool::compile(
        "search",
        "",
        &json!({"type": "object", "properties": {
            "filter": {"type": "object", "properties": {"city": {"type": "string"}}}},
            "required": ["filter"]}),
    )
    .unwrap();
    let raw = r#"{"filter": [{"city": "Oslo"}, {"city": "Bergen"}]}"#;
    let m = mend_call(raw, &search, &MendOptions::default());
    assert_eq!(m.calls.len(), 1, "{m:?}");
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
    // A number or a boolean field is a scalar field.
    let days = CompiledTool::compile(
        "forecast",
        "",
        &json!({"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer", "maximum": 10}},
            "required": ["city", "days"]}),
    )
    .unwrap();
    let m = mend_call(
        r#"{"city": "Oslo", "days": [1, 3, "7"]}"#,
        &days,
        &MendOptions::default(),
    );
    let got: Vec<_> = m
        .calls
        .iter()
        .map(|c| c.arguments.clone().unwrap()["days"].clone())
        .collect();
    assert_eq!(got, [json!(1), json!(3), json!(7)]);
    let m = mend_call(
        r#"{"city": "Oslo", "days": [1, 30]}"#,
        &days,
        &MendOptions::default(),
    );
    assert_eq!(m.calls.len(), 1, "30 is above the maximum: no split");
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
}

#[test]
fn a_correction_that_drops_values_of_a_list_is_not_clean() {
    use toolmend::mend::{flag_values_lost, mend_value_named_in, values_lost};
    let first = json!({"pair": ["EUR/CHF", "GBP/JPY", "USD/SEK"]});
    // The re-asked model kept one pair: valid for the schema, but two values are gone.
    let corrected = json!({"pair": "EUR/CHF"});
    assert_eq!(values_lost(&first, &corrected), ["/pair/1", "/pair/2"]);
    let tools = Toolbox::from_tools([fx_rate()]).unwrap();
    let ctx = toolmend::schema::ValidationContext::new("", toolmend::schema::Phase::Correction);
    let mut call = mend_value_named_in(
        "fx_rate",
        corrected.clone(),
        &tools,
        &MendOptions::default(),
        &ctx,
    );
    assert_eq!(call.outcome, Outcome::Valid);
    assert!(flag_values_lost(&mut call, &first, &corrected));
    assert_eq!(call.outcome, Outcome::Feedback);
    let lost: Vec<_> = call
        .issues
        .iter()
        .map(|i| (i.kind, i.path.as_str()))
        .collect();
    assert_eq!(
        lost,
        [
            (IssueKind::ValuesLost, "/pair/1"),
            (IssueKind::ValuesLost, "/pair/2")
        ]
    );
    assert_eq!(call.issues[0].got, Some(json!("GBP/JPY")));

    // One call per value, a renamed key, a coerced type, a case change: nothing lost.
    let split = json!([{"pair": "EUR/CHF"}, {"pair": "gbp/jpy"}, {"currency_pair": "USD/SEK"}]);
    assert!(values_lost(&first, &split).is_empty());
    assert!(values_lost(&json!({"ids": ["7", 8]}), &json!({"ids": [7, "8"]})).is_empty());
    assert!(values_lost(&first, &json!({"pair": "EUR/CHF, GBP/JPY, USD/SEK"})).is_empty());
    // A list replaced as a whole is what a correction is for; not a narrowing.
    assert!(values_lost(&first, &json!({"pair": "CHF/NOK"})).is_empty());
    // Nested lists are followed.
    let nested = json!({"legs": [{"stops": ["Ghent", "Liège", "Namur"]}]});
    let narrowed = json!({"legs": [{"stops": ["Ghent"]}]});
    assert_eq!(
        values_lost(&nested, &narrowed),
        ["/legs/0/stops/1", "/legs/0/stops/2"]
    );
    let mut clean = call.clone();
    clean.issues.clear();
    clean.outcome = Outcome::Valid;
    assert!(!flag_values_lost(&mut clean, &first, &split));
    assert_eq!(clean.outcome, Outcome::Valid);
}

#[test]
fn values_lost_and_the_merged_call_check_scale_linearly() {
    use toolmend::mend::values_lost;
    let list = |n: usize| -> serde_json::Value {
        json!({"pair": (0..n).map(|i| format!("V{i:06}")).collect::<Vec<_>>()})
    };
    let (small, large) = (list(2_000), list(20_000));
    let kept = json!({"pair": "V000000"});
    assert_eq!(values_lost(&small, &kept).len(), 1_999);
    assert_eq!(values_lost(&large, &kept).len(), 19_999);
    crate::work::assert_linear("values_lost", &small, &large, |v: &serde_json::Value| {
        values_lost(v, &kept)
    });

    // A long list for a scalar field: more than 32 values is never split (feedback), and
    // the check does not look at every element, so the cost stays linear.
    let (r1, r10) = (small.to_string(), large.to_string());
    assert_eq!(mend_call(&r10, &fx_rate(), &splitting()).calls.len(), 1);
    let (tool, options) = (fx_rate(), splitting());
    crate::work::assert_linear("mend of a merged call", r1.as_str(), r10.as_str(), |raw| {
        mend_call(raw, &tool, &options)
    });
}

#[test]
fn splitting_merged_calls_scales_linearly_with_the_calls_of_a_message() {
    use toolmend::conversation::{AssistantMessage, ToolCall};
    use toolmend::message::{self, PlanOptions};
    // A message of n merged calls (three pairs each, split by default): 10x the calls
    // cost about 10x, and every call becomes three.
    let message = |n: usize| AssistantMessage {
        tool_calls: Some(
            (0..n)
                .map(|i| {
                    ToolCall::new(
                        format!("call_{i}"),
                        "fx_rate",
                        r#"{"pair": ["EUR/CHF", "GBP/JPY", "USD/SEK"], "at": "2026-02-03"}"#,
                    )
                })
                .collect(),
        ),
        ..AssistantMessage::default()
    };
    let tools = Toolbox::from_tools([fx_rate()]).unwrap();
    let ctx = toolmend::schema::ValidationContext::new("", toolmend::schema::Phase::Initial);
    let opts = PlanOptions::default();
    let plan =
        |m: &AssistantMessage| message::plan_assistant(m, &[], &[], false, &tools, &opts, &ctx);
    let (small, large) = (message(20), message(200));
    assert_eq!(plan(&small).calls.len(), 60);
    let p = plan(&large);
    assert_eq!(p.calls.len(), 600);
    let mut ids: Vec<_> = p.calls.iter().map(|c| c.id.clone().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 600, "every split call has its own id");
    crate::work::assert_linear("a message of merged calls", &small, &large, plan);
}

#[test]
fn a_split_merged_call_gets_its_ids_in_the_message_plan_as_glued_calls_do() {
    use toolmend::conversation::{AssistantMessage, ToolCall};
    use toolmend::message::{self, CallSource, PlanOptions};
    let tools = Toolbox::from_tools([fx_rate()]).unwrap();
    let message = AssistantMessage {
        tool_calls: Some(vec![ToolCall::new(
            "call_fx",
            "fx_rate",
            r#"{"pair": ["EUR/CHF", "GBP/JPY"]}"#,
        )]),
        ..AssistantMessage::default()
    };
    let ctx = toolmend::schema::ValidationContext::new("", toolmend::schema::Phase::Initial);
    let opts = PlanOptions {
        mend: splitting(),
        ..PlanOptions::default()
    };
    let p = message::plan_assistant(&message, &[], &[], false, &tools, &opts, &ctx);
    let got: Vec<_> = p
        .calls
        .iter()
        .map(|c| {
            (
                c.id.clone().unwrap(),
                c.source,
                c.call.arguments.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "call_fx".to_owned(),
                CallSource::ToolCalls,
                json!({"pair": "EUR/CHF"})
            ),
            (
                "call_fx_2".to_owned(),
                CallSource::Glued,
                json!({"pair": "GBP/JPY"})
            ),
        ]
    );
    // The switch off: one call, feedback.
    let off = PlanOptions {
        mend: unsplit(),
        ..PlanOptions::default()
    };
    let p = message::plan_assistant(&message, &[], &[], false, &tools, &off, &ctx);
    assert_eq!(p.calls.len(), 1);
    assert_eq!(p.calls[0].call.outcome, Outcome::Feedback);
}

fn booking() -> CompiledTool {
    CompiledTool::compile(
        "book_room",
        "",
        &json!({"type": "object", "properties": {
            "hotel": {"type": "string"}, "nights": {"type": "integer", "minimum": 1}},
            "required": ["hotel", "nights"], "additionalProperties": false}),
    )
    .unwrap()
}

#[test]
fn of_several_json_candidates_the_schema_keeps_the_last_when_only_it_fits() {
    // A draft in one fence, the answer in the next; a draft with prose between.
    for raw in [
        "First try:\n```json\n{\"hotel\": \"Astoria\"}\n```\nCorrected:\n```json\n{\"hotel\": \"Astoria\", \"nights\": 4}\n```",
        "{\"hotel\": \"Astoria\", \"nights\": 0} -- no, nights must be positive: {\"hotel\": \"Astoria\", \"nights\": 4}",
        "{\"hotel\": 7} then {\"hotel\": \"X\"} and finally {\"hotel\": \"Astoria\", \"nights\": 4}",
    ] {
        let m = mend_call(raw, &booking(), &MendOptions::default());
        assert_eq!(m.calls.len(), 1, "{raw}: {m:?}");
        let c = &m.calls[0];
        assert_eq!(c.outcome, Outcome::Repaired, "{raw}");
        assert_eq!(c.arguments, Some(json!({"hotel": "Astoria", "nights": 4})));
        let f = c
            .fixes
            .iter()
            .find(|f| f.kind == FixKind::JsonCandidateChosen)
            .unwrap_or_else(|| panic!("{raw}: {:?}", kinds(c)));
        assert_eq!(f.safety(), toolmend::Safety::Unsafe);
        assert!(f.detail.contains("earlier draft"), "{}", f.detail);
        assert!(!kinds(c).contains(&FixKind::ConcatenatedCallsSplit));
    }
}

#[test]
fn several_json_candidates_stay_several_calls_unless_only_the_last_fits() {
    // Both fit: two calls. The first fits and the last does not: the last is not hidden
    // behind the first, it gets feedback. Neither fits: both get feedback.
    for (raw, outcomes) in [
        (
            "{\"hotel\": \"Astoria\", \"nights\": 4} {\"hotel\": \"Ritz\", \"nights\": 1}",
            [Outcome::Repaired, Outcome::Repaired],
        ),
        (
            "{\"hotel\": \"Astoria\", \"nights\": 4} and {\"hotel\": \"Ritz\"}",
            [Outcome::Repaired, Outcome::Feedback],
        ),
        (
            "{\"hotel\": \"Astoria\"} and {\"hotel\": \"Ritz\"}",
            [Outcome::Feedback, Outcome::Feedback],
        ),
    ] {
        let m = mend_call(raw, &booking(), &MendOptions::default());
        let got: Vec<_> = m.calls.iter().map(|c| c.outcome).collect();
        assert_eq!(got, outcomes, "{raw}");
        for c in &m.calls {
            assert!(kinds(c).contains(&FixKind::ConcatenatedCallsSplit), "{raw}");
            assert!(!kinds(c).contains(&FixKind::JsonCandidateChosen), "{raw}");
        }
    }
    // Inside a call envelope each candidate is a call of its own, never a draft.
    let tools = Toolbox::from_tools([booking()]).unwrap();
    let raw = "<tool_call>{\"name\": \"book_room\", \"arguments\": {\"hotel\": \"Ritz\"}}</tool_call>\n<tool_call>{\"name\": \"book_room\", \"arguments\": {\"hotel\": \"Astoria\", \"nights\": 4}}</tool_call>";
    let m = mend_named("book_room", raw, &tools, &MendOptions::default());
    let got: Vec<_> = m.calls.iter().map(|c| c.outcome).collect();
    assert_eq!(got, [Outcome::Feedback, Outcome::Repaired]);
}

#[test]
fn a_merged_call_with_parsed_arguments_splits_in_the_plan_or_asks_for_one_call_per_value() {
    use toolmend::message::{self, Args, Around, MessageInput, NoIds, PlanOptions, SentCall};
    use toolmend::schema::{Phase, ValidationContext};
    // LangChain hands over `args` already parsed: the same rule as for text.
    let args = json!({"pair": ["EUR/CHF", "GBP/JPY"], "at": "2026-02-03"});
    let tools = Toolbox::from_tools([fx_rate()]).unwrap();
    let ctx = ValidationContext::new("", Phase::Initial);
    let plan_with = |mend: MendOptions| {
        let input = MessageInput {
            text: None,
            calls: vec![SentCall {
                id: Some("call_1"),
                name: "fx_rate",
                arguments: Args::Value(&args),
            }],
            position: 1,
            cut_off: false,
        };
        let opts = PlanOptions {
            mend,
            ..PlanOptions::default()
        };
        let around = Around {
            earlier: &NoIds,
            answered: &NoIds,
        };
        message::plan(&input, around, &tools, &opts, &ctx)
    };
    let split = plan_with(splitting());
    let got: Vec<_> = split
        .calls
        .iter()
        .map(|c| {
            (
                c.id.clone().unwrap(),
                c.call.arguments.clone().unwrap()["pair"].clone(),
            )
        })
        .collect();
    assert_eq!(got.len(), 2, "{split:?}");
    assert_eq!(got[0], ("call_1".to_owned(), json!("EUR/CHF")));
    assert_eq!(got[1].1, json!("GBP/JPY"));
    assert_ne!(got[1].0, "call_1");
    assert!(split.calls.iter().all(|c| {
        c.call
            .fixes
            .iter()
            .any(|f| f.kind == FixKind::MergedCallSplit)
    }));
    // The switch off: one call, feedback that names the way out.
    let one = plan_with(unsplit());
    assert_eq!(one.calls.len(), 1);
    let issue = &one.calls[0].call.issues[0];
    assert!(
        issue
            .suggestion
            .as_deref()
            .unwrap_or("")
            .contains("make one call per value"),
        "{issue:?}"
    );
    // The single-call entry point never splits, and says the same.
    let c =
        toolmend::mend::mend_value_named_in("fx_rate", args.clone(), &tools, &splitting(), &ctx);
    assert_eq!(c.outcome, Outcome::Feedback);
    assert!(
        c.issues[0]
            .suggestion
            .as_deref()
            .unwrap_or("")
            .contains("one call per value")
    );
}

/// One message of parsed calls (LangChain's `args`), planned with `opts`.
fn plan_parsed(
    calls: &[(&str, serde_json::Value)],
    tools: &Toolbox,
    opts: &toolmend::message::PlanOptions,
) -> toolmend::message::MessagePlan {
    use toolmend::message::{self, Args, Around, MessageInput, NoIds, SentCall};
    use toolmend::schema::{Phase, ValidationContext};
    let ids: Vec<String> = (0..calls.len()).map(|k| format!("call_{k}")).collect();
    let input = MessageInput {
        text: None,
        calls: calls
            .iter()
            .zip(&ids)
            .map(|((name, args), id)| SentCall {
                id: Some(id),
                name,
                arguments: Args::Value(args),
            })
            .collect(),
        position: 1,
        cut_off: false,
    };
    let around = Around {
        earlier: &NoIds,
        answered: &NoIds,
    };
    let ctx = ValidationContext::new("", Phase::Initial);
    message::plan(&input, around, tools, opts, &ctx)
}

#[test]
fn a_parsed_call_wrapper_is_read_as_the_text_it_was_only_when_the_call_then_runs() {
    use toolmend::message::{CallOutcome, PlanOptions};
    let tools = Toolbox::from_tools([weather()]).unwrap();
    let opts = PlanOptions::default();
    let wrapped = json!({"name": "get_weather", "parameters": {"city": "Paris"}});
    let p = plan_parsed(&[("get_weather", wrapped.clone())], &tools, &opts);
    assert_eq!(p.calls.len(), 1);
    assert_eq!(p.calls[0].outcome, CallOutcome::Executed);
    assert_eq!(p.calls[0].call.arguments, Some(json!({"city": "Paris"})));
    // The same reading as the text path (what the gateway receives).
    let text = mend_named(
        "get_weather",
        &wrapped.to_string(),
        &tools,
        &MendOptions::default(),
    );
    assert_eq!(p.calls[0].call.arguments, text.calls[0].arguments);
    assert_eq!(
        p.calls[0].arguments_text.as_deref(),
        Some(r#"{"city":"Paris"}"#)
    );
    // A wrapper whose inside is invalid too stays the call as sent, answered with feedback
    // about it (not about the wrapper's inside).
    let bad = json!({"name": "get_weather", "parameters": {"town": 5, "days": "x"}});
    let p = plan_parsed(&[("get_weather", bad)], &tools, &opts);
    assert_eq!(p.calls[0].outcome, CallOutcome::Feedback);
}

#[test]
fn a_tool_with_coercions_of_its_own_is_mended_with_them_and_the_others_with_the_plans() {
    use toolmend::message::{CallOutcome, PlanOptions};
    use toolmend::schema::Coercions;
    let count = |name: &str| {
        CompiledTool::compile(
            name,
            "",
            &json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
        .unwrap()
    };
    let tools = Toolbox::from_tools([count("strict"), count("lax")]).unwrap();
    let mut opts = PlanOptions {
        mend: MendOptions {
            coercions: Coercions::none(),
            ..MendOptions::default()
        },
        ..PlanOptions::default()
    };
    opts.tool_mend.insert("lax".into(), MendOptions::default());
    let p = plan_parsed(
        &[("strict", json!({"n": "5"})), ("lax", json!({"n": "5"}))],
        &tools,
        &opts,
    );
    let got: Vec<_> = p
        .calls
        .iter()
        .map(|c| (c.outcome, c.call.arguments.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (CallOutcome::Feedback, Some(json!({"n": "5"}))),
            (CallOutcome::Executed, Some(json!({"n": 5}))),
        ]
    );
    assert_eq!(opts.mend_for("lax").coercions, Coercions::default());
    assert_eq!(opts.mend_for("strict").coercions, Coercions::none());
}

#[test]
fn an_object_for_a_string_field_meant_for_json_text_becomes_that_text() {
    let tool = CompiledTool::compile(
        "write_file",
        "Write a file.",
        &json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "content": {"type": "string", "description": "The file's text"},
            "city": {"type": "string"},
            "mode": {"type": "string", "enum": ["a", "w"]},
            "payload": {"type": "string"}
        }, "required": ["path"], "additionalProperties": false}),
    )
    .unwrap();
    let tools = Toolbox::from_tools([tool]).unwrap();
    let opts = MendOptions::default();
    let m = mend_named(
        "write_file",
        r#"{"path": "a.json", "content": {"b": 1, "a": [true, "x\"y"]}, "payload": [1, 2]}"#,
        &tools,
        &opts,
    );
    let c = &m.calls[0];
    assert_eq!(
        c.arguments.as_ref().unwrap(),
        &json!({"path": "a.json", "content": "{\"b\":1,\"a\":[true,\"x\\\"y\"]}", "payload": "[1,2]"})
    );
    assert!(c.fixes.iter().any(|f| f.kind == FixKind::JsonTextEncoded));
    // A misplaced structure for a plain string field, or an enum, stays an issue.
    for raw in [
        r#"{"path": "a", "city": {"name": "Paris"}}"#,
        r#"{"path": "a", "mode": {"w": true}}"#,
    ] {
        let m = mend_named("write_file", raw, &tools, &opts);
        assert_eq!(m.calls[0].outcome, Outcome::Feedback, "{raw}");
    }
    // A file named beside it whose extension is another format's (Markdown, Python, YAML,
    // TOML): a structure for its content is no JSON text, and stays an issue. A JSON
    // family name, a dotfile without an extension, or no name at all says nothing.
    for raw in [
        r#"{"path": "docs/a.md", "content": {"title": "x"}}"#,
        r#"{"path": "src\app.py", "content": {"code": "print(1)"}}"#,
        r#"{"path": "ci.yaml", "content": {"on": "push"}}"#,
        r#"{"path": "Cargo.toml", "content": {"package": {"name": "x"}}}"#,
    ] {
        let m = mend_named("write_file", raw, &tools, &opts);
        assert_eq!(m.calls[0].outcome, Outcome::Feedback, "{raw}");
    }
    for (raw, want) in [
        (
            r#"{"path": "tsconfig.jsonc", "content": {"a": 1}}"#,
            json!({"path": "tsconfig.jsonc", "content": "{\"a\":1}"}),
        ),
        (
            r#"{"path": ".prettierrc", "content": {"semi": false}}"#,
            json!({"path": ".prettierrc", "content": "{\"semi\":false}"}),
        ),
        (
            r#"{"path": "out", "content": [1, 2]}"#,
            json!({"path": "out", "content": "[1,2]"}),
        ),
    ] {
        let m = mend_named("write_file", raw, &tools, &opts);
        assert_eq!(m.calls[0].arguments.as_ref(), Some(&want), "{raw}");
    }
    // A list of strings is names or the text in pieces, not JSON text: feedback (the
    // merged-call split takes no document field), unless the schema declares JSON.
    let m = mend_named(
        "write_file",
        r##"{"path": "out", "content": ["# Title", "- one"]}"##,
        &tools,
        &opts,
    );
    assert_eq!(m.calls[0].outcome, Outcome::Feedback, "{m:?}");
    let declared = Toolbox::from_tools([CompiledTool::compile(
        "post",
        "",
        &json!({"type": "object", "properties": {
            "body": {"type": "string", "contentMediaType": "application/json"}}}),
    )
    .unwrap()])
    .unwrap();
    let m = mend_named("post", r#"{"body": ["a", "b"]}"#, &declared, &opts);
    assert_eq!(
        m.calls[0].arguments.as_ref(),
        Some(&json!({"body": "[\"a\",\"b\"]"})),
        "{m:?}"
    );
    // The switch off (json_strings): feedback.
    let mut strict = MendOptions::default();
    strict.coercions.json_strings = false;
    let m = mend_named(
        "write_file",
        r#"{"path": "a", "content": {"b": 1}}"#,
        &tools,
        &strict,
    );
    assert_eq!(m.calls[0].outcome, Outcome::Feedback);
}

fn write_file() -> CompiledTool {
    CompiledTool::compile(
        "write_file",
        "Write a file.",
        &json!({"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"},
            "create_dirs": {"type": "boolean"}},
            "required": ["path", "content"], "additionalProperties": false}),
    )
    .unwrap()
}

fn bash() -> CompiledTool {
    CompiledTool::compile(
        "bash",
        "Run a command.",
        &json!({"type": "object", "properties": {
            "command": {"type": "string"}, "timeout": {"type": "integer"},
            "description": {"type": "string"}},
            "required": ["command"], "additionalProperties": false}),
    )
    .unwrap()
}

#[test]
fn unescaped_quotes_in_code_are_read_by_the_tools_keys() {
    // Quotes followed by `,` `:` `}` inside the code: only the cut before the tool's own
    // next key reads whole.
    let raw = "{\"path\": \"a.json\", \"content\": \"{\n  \"root\": true,\n  \"x\": [\"a\", \"b\"]\n}\n\", \"create_dirs\": true}";
    let m = mend_call(raw, &write_file(), &MendOptions::default());
    let c = &m.calls[0];
    assert_eq!(c.outcome, Outcome::Repaired, "{c:?}");
    assert_eq!(
        c.arguments.as_ref().unwrap(),
        &json!({"path": "a.json", "content": "{\n  \"root\": true,\n  \"x\": [\"a\", \"b\"]\n}\n", "create_dirs": true})
    );
    assert!(kinds(c).contains(&FixKind::InnerQuoteEscaped));
    // A command with inline JSON; the next member is not swallowed into the string.
    let raw = r#"{"command": "curl -H "A: b" -d '{"n": "w", "p": true}' https://x", "description": "post"}"#;
    let m = mend_call(raw, &bash(), &MendOptions::default());
    assert_eq!(
        m.calls[0].arguments.as_ref().unwrap(),
        &json!({"command": "curl -H \"A: b\" -d '{\"n\": \"w\", \"p\": true}' https://x", "description": "post"})
    );
    // A comma missing before a known key.
    let raw = r#"{"command": "echo "hi"" "timeout": 5}"#;
    let m = mend_call(raw, &bash(), &MendOptions::default());
    assert_eq!(
        m.calls[0].arguments.as_ref().unwrap(),
        &json!({"command": "echo \"hi\"", "timeout": 5})
    );
    assert!(kinds(&m.calls[0]).contains(&FixKind::MissingComma));
}

#[test]
fn a_quote_that_may_close_its_string_or_belong_to_it_is_refused() {
    // The value's last quote doubles as the closing one: `"notify-send "Build done"` reads
    // as `notify-send "Build done` or as `notify-send "Build done"` with its closer missing.
    for raw in [
        r#"{"command": "ssh web-1 "sudo systemctl restart app", "timeout": 60000}"#,
        "{\n  \"description\": \"x\",\n  \"command\": \"notify-send \"Build done\"\n}",
        r#"{"command": "git log --author="Priya", "timeout": 30000}"#,
    ] {
        let m = mend_call(raw, &bash(), &MendOptions::default());
        assert_eq!(
            m.calls[0].outcome,
            Outcome::Feedback,
            "{raw}: {:?}",
            m.calls[0]
        );
        assert!(m.calls[0].arguments.is_none(), "{raw}");
    }
    // Balanced quotes and apostrophes between letters read whole.
    let raw = r#"{"command": "echo "it's "done"" && ls", "timeout": 5}"#;
    let m = mend_call(raw, &bash(), &MendOptions::default());
    assert_eq!(
        m.calls[0].arguments.as_ref().unwrap(),
        &json!({"command": "echo \"it's \"done\"\" && ls", "timeout": 5})
    );
}

#[test]
fn a_text_that_reads_more_than_one_way_is_refused_even_where_cut_off_calls_are_accepted() {
    // An unquoted value whose end is a guess, a triple-quoted string whose end is a guess:
    // nothing was cut, so accepting cut-off calls does not make either reading the answer.
    let accepting = MendOptions {
        refuse_lossy: false,
        ..MendOptions::default()
    };
    for raw in [
        r#"{"command": echo a } b, "timeout": 1}"#,
        r#"{"command": `ls -la`}"#,
        r#"{"command": """a""""", "timeout": 1}"#,
    ] {
        let m = mend_call(raw, &bash(), &accepting);
        assert_eq!(m.calls.len(), 1, "{raw}");
        assert_eq!(
            m.calls[0].outcome,
            Outcome::Feedback,
            "{raw}: {:?}",
            m.calls[0]
        );
    }
}

/// A tool whose argv is an array of strings, and whose edits are objects in an array.
fn argv_and_edits() -> CompiledTool {
    CompiledTool::compile(
        "run_edits",
        "Run a program, then apply edits.",
        &json!({"type": "object", "properties": {
            "argv": {"type": "array", "items": {"type": "string"}},
            "edits": {"type": "array", "items": {"type": "object", "properties": {
                "find": {"type": "string"}, "put": {"type": "string"}},
                "required": ["find", "put"], "additionalProperties": false}}},
            "additionalProperties": false}),
    )
    .unwrap()
}

#[test]
fn a_quote_that_may_close_a_nested_string_or_belong_to_it_is_refused() {
    // Inside an array or a nested object the tool's keys cannot cut the text, but the
    // same doubt holds: an odd number of quotes kept inside, then one that closes at a
    // boundary, reads as the string ending there or as its own last quote (the closer
    // missing). Refused, even where cut-off calls are accepted: nothing was cut.
    let accepting = MendOptions {
        refuse_lossy: false,
        ..MendOptions::default()
    };
    for raw in [
        r#"{"argv": ["sh", "-c", "printf "x", "y"]}"#,
        r#"{"argv": ["sh", "-c", "echo "ok"]}"#,
        r#"{"edits": [{"find": "v = "1", "put": "v = 2"}]}"#,
        r#"{"edits": [{"find": "a", "put": "say "hi"}]}"#,
    ] {
        for opts in [MendOptions::default(), accepting.clone()] {
            let m = mend_call(raw, &argv_and_edits(), &opts);
            assert_eq!(m.calls.len(), 1, "{raw}: {m:?}");
            assert_eq!(
                m.calls[0].outcome,
                Outcome::Feedback,
                "{raw}: {:?}",
                m.calls[0]
            );
            assert!(
                kinds(&m.calls[0]).contains(&FixKind::InnerQuotesAmbiguous),
                "{raw}: {:?}",
                m.calls[0]
            );
        }
    }
    // Balanced quotes, each followed by what cannot follow a value, read whole.
    for (raw, want) in [
        (
            r#"{"argv": ["sh", "-c", "grep -n "x y" f | wc -l"]}"#,
            json!({"argv": ["sh", "-c", "grep -n \"x y\" f | wc -l"]}),
        ),
        (
            r#"{"edits": [{"find": "f("a")", "put": "f("b")"}]}"#,
            json!({"edits": [{"find": "f(\"a\")", "put": "f(\"b\")"}]}),
        ),
    ] {
        let m = mend_call(raw, &argv_and_edits(), &accepting);
        assert_eq!(m.calls[0].arguments.as_ref(), Some(&want), "{raw}");
        assert_eq!(m.calls[0].outcome, Outcome::Repaired, "{raw}");
    }
}

#[test]
fn glued_objects_are_not_read_as_one_string() {
    let raw = "{\"path\": \"a\", \"content\": \"x\"}\n{\"path\": \"b\", \"content\": \"y\", \"create_dirs\": true}";
    let m = mend_call(raw, &write_file(), &MendOptions::default());
    assert_eq!(m.calls.len(), 2, "{m:?}");
}

#[test]
fn a_json_snippet_in_the_prose_after_the_arguments_is_no_call() {
    let raw = "{\"command\": \"ls\", \"timeout\": 5}\n\nThe config now sets {\"debug\": true} for local runs only.";
    let m = mend_call(raw, &bash(), &MendOptions::default());
    assert_eq!(m.calls.len(), 1, "{m:?}");
    assert_eq!(
        m.calls[0].arguments.as_ref().unwrap(),
        &json!({"command": "ls", "timeout": 5})
    );
    assert!(kinds(&m.calls[0]).contains(&FixKind::JsonInProseDropped));
}

#[test]
fn a_json_snippet_in_the_prose_after_the_arguments_is_no_call_even_where_it_fits() {
    // The snippet is a call the agent plans for later, quoted in its sentence: running it
    // now as a second call would run what the model did not ask for.
    for tail in [
        "If that passes I will run the full suite with {\"command\": \"pytest -q\"}.",
        "Next I will run {\"command\": \"make\", \"timeout\": 60} if it builds.",
    ] {
        let raw = format!("{{\"command\": \"pytest -x tests/a.py\", \"timeout\": 120}}\n{tail}");
        let m = mend_call(&raw, &bash(), &MendOptions::default());
        assert_eq!(m.calls.len(), 1, "{raw}: {m:?}");
        assert_eq!(
            m.calls[0].arguments.as_ref().unwrap(),
            &json!({"command": "pytest -x tests/a.py", "timeout": 120})
        );
        let fixes = kinds(&m.calls[0]);
        assert!(fixes.contains(&FixKind::JsonInProseDropped), "{fixes:?}");
        assert!(
            !fixes.contains(&FixKind::ConcatenatedCallsSplit),
            "{fixes:?}"
        );
    }
    // A document that ends the text, with no prose after it, may be a second call.
    let raw = "{\"command\": \"ls\"}\nand then {\"command\": \"pwd\"}";
    let m = mend_call(raw, &bash(), &MendOptions::default());
    assert_eq!(m.calls.len(), 2, "{m:?}");
}

#[test]
fn reading_by_keys_stays_linear() {
    let unit = "x = f(\"a\", \"b\"): {\"k\": 1},\n";
    let text = |n: usize| {
        format!(
            "{{\"path\": \"p\", \"content\": \"{}\", \"create_dirs\": true}}",
            unit.repeat(n)
        )
    };
    let (small, big) = (text(2_000), text(20_000));
    crate::work::assert_linear("read by keys", small.as_str(), big.as_str(), |t| {
        let m = mend_call(t, &write_file(), &MendOptions::default());
        assert_eq!(m.calls[0].outcome, Outcome::Repaired);
    });
}

#[test]
fn of_several_json_candidates_none_is_picked_when_an_earlier_one_fits_too() {
    // The first and the last fit, the middle does not: dropping the drafts would pick the
    // last over the first, which fits as well. Every candidate stays a call.
    let raw = "{\"hotel\": \"Astoria\", \"nights\": 4}\nhmm, no: {\"hotel\": \"Astoria\", \"nights\": 0}\nfinal: {\"hotel\": \"Ritz\", \"nights\": 2}";
    let m = mend_call(raw, &booking(), &MendOptions::default());
    let got: Vec<_> = m.calls.iter().map(|c| c.outcome).collect();
    assert_eq!(
        got,
        [Outcome::Repaired, Outcome::Feedback, Outcome::Repaired],
        "{m:?}"
    );
    for c in &m.calls {
        assert!(!kinds(c).contains(&FixKind::JsonCandidateChosen), "{c:?}");
    }
    // The same drafts with the first one broken too: only the last fits, it is kept.
    let raw = "{\"hotel\": \"Astoria\"}\nhmm, no: {\"hotel\": \"Astoria\", \"nights\": 0}\nfinal: {\"hotel\": \"Ritz\", \"nights\": 2}";
    let m = mend_call(raw, &booking(), &MendOptions::default());
    assert_eq!(m.calls.len(), 1, "{m:?}");
    assert_eq!(
        m.calls[0].arguments,
        Some(json!({"hotel": "Ritz", "nights": 2}))
    );
    assert!(kinds(&m.calls[0]).contains(&FixKind::JsonCandidateChosen));
}

#[test]
fn a_reading_in_doubt_is_refused_as_ambiguous_not_as_cut_off() {
    let tool = CompiledTool::compile(
        "note",
        "",
        &json!({"type": "object", "properties": {
            "topic": {"type": "string"}, "rank": {"type": "integer"}}}),
    )
    .unwrap();
    let opts = MendOptions {
        refuse_lossy: true,
        ..MendOptions::default()
    };
    for raw in [
        "{\"topic\": pros } cons, \"rank\": 1}",
        "{\"topic\": \"\"\"a\"\"\"\"\", \"rank\": 1}",
    ] {
        let m = mend_call(raw, &tool, &opts);
        let c = &m.calls[0];
        assert_eq!(c.outcome, Outcome::Feedback, "{raw:?}: {c:?}");
        assert!(
            c.issues[0].message.contains("more than one way")
                && !c.issues[0].message.contains("cut off"),
            "{raw:?}: {}",
            c.issues[0].message
        );
    }
}

/// A closer of the wrong kind after a call's last value, then the next call glued on: two
/// calls, each as written. And a drive path followed by a switch or a word, then `\n`: the
/// line break the model escaped, not a folder name. (Both were wrong values under rules
/// tried and taken back: a closer ending a string only where a container ends there, and
/// a drive path's names running through spaces.)
#[test]
fn glued_calls_after_a_wrong_closer_and_a_line_break_after_a_path_read_as_written() {
    let shell = CompiledTool::compile(
        "run_shell",
        "Run a shell command.",
        &json!({"type": "object", "properties": {
            "command": {"type": "string"}, "timeout": {"type": "integer"}},
            "required": ["command"], "additionalProperties": false}),
    )
    .unwrap();
    let commands = |raw: &str| -> Vec<Option<serde_json::Value>> {
        mend_call(raw, &shell, &MendOptions::default())
            .calls
            .into_iter()
            .map(|c| c.arguments)
            .collect()
    };
    for raw in [
        "{\"command\":\"npm test\"]\n{\"command\":\"npm run lint\"}",
        "{\"command\":\"npm test\"]{\"command\":\"npm run lint\"}",
    ] {
        assert_eq!(
            commands(raw),
            [
                Some(json!({"command": "npm test"})),
                Some(json!({"command": "npm run lint"}))
            ],
            "{raw}"
        );
    }
    for (raw, want) in [
        (
            r#"{"command":"Get-ChildItem C:\Temp\logs -Recurse\nWrite-Host done"}"#,
            "Get-ChildItem C:\\Temp\\logs -Recurse\nWrite-Host done",
        ),
        (
            r#"{"command":"copy C:\build\out dist\nrmdir C:\build\tmp"}"#,
            "copy C:\\build\\out dist\nrmdir C:\\build\\tmp",
        ),
    ] {
        assert_eq!(commands(raw), [Some(json!({"command": want}))], "{raw}");
    }
}

#[test]
fn text_after_the_arguments_that_closes_after_a_quote_is_refused_not_dropped() {
    // The quotes around `b` were not escaped: the tolerant reading ends the third string
    // at `c"`, closes there, and would drop `| .d = 1' f.json"]` with `"edits"` as prose.
    let raw = r#"{"argv": ["bash", "-lc", "jq '.a += {"b": "c"} | .d = 1' f.json"], "edits": []}"#;
    let m = mend_call(raw, &argv_and_edits(), &MendOptions::default());
    assert_eq!(m.calls.len(), 1, "{m:?}");
    assert_eq!(m.calls[0].outcome, Outcome::Feedback, "{m:?}");
    assert_eq!(m.calls[0].arguments, None, "{m:?}");
    let text = &m.calls[0].issues[0].message;
    assert!(text.contains("end early"), "{text}");
    // Closers in a sentence without a double quote are the sentence's.
    let raw = "{\"argv\": [\"ls\"]}\nNote: this drops it again }] - nothing else.";
    let m = mend_call(raw, &argv_and_edits(), &MendOptions::default());
    assert_eq!(m.calls[0].arguments, Some(json!({"argv": ["ls"]})), "{m:?}");
    // A closer with no prose before it is a stray one, removed as before.
    let m = mend_call(
        r#"{"argv": ["ls"]}]"#,
        &argv_and_edits(),
        &MendOptions::default(),
    );
    assert_eq!(m.calls[0].arguments, Some(json!({"argv": ["ls"]})), "{m:?}");
}

#[test]
fn code_between_two_objects_in_a_string_is_no_seam_words_are() {
    // `"}), 400` then code then `{"id"`: one file's content, read by the keys.
    let raw = "{\"path\": \"app.py\", \"content\": \"return jsonify({\"error\": \"no\"}), 400\nTODOS.append({\"id\": 1})\n\", \"create_dirs\": true}";
    let m = mend_call(raw, &write_file(), &MendOptions::default());
    assert_eq!(m.calls.len(), 1, "{m:?}");
    assert_eq!(
        m.calls[0].arguments.as_ref().unwrap()["content"],
        json!("return jsonify({\"error\": \"no\"}), 400\nTODOS.append({\"id\": 1})\n")
    );
    // `"}` then words then `{"`: two documents, never one string holding both.
    let raw = "{\"path\": \"a\", \"content\": \"x\"}\nthen {\"path\": \"b\", \"content\": \"y\"}";
    let m = mend_call(raw, &write_file(), &MendOptions::default());
    assert_eq!(m.calls.len(), 2, "{m:?}");
}

#[test]
fn an_escaped_apostrophe_keeps_its_backslash_where_backslashes_were_not_escaped() {
    // A raw line break and `\_` show nothing in the string was escaped: SQL's `'\'`.
    let raw =
        "{\"command\": \"psql <<'SQL'\nDELETE FROM t WHERE n LIKE 'tmp\\_%' ESCAPE '\\'\nSQL\"}";
    let m = mend_call(raw, &bash(), &MendOptions::default());
    assert_eq!(
        m.calls[0].arguments.as_ref().unwrap()["command"],
        json!("psql <<'SQL'\nDELETE FROM t WHERE n LIKE 'tmp\\_%' ESCAPE '\\'\nSQL"),
        "{m:?}"
    );
    assert!(kinds(&m.calls[0]).contains(&FixKind::EscapesKeptLiteral));
    // Elsewhere `\'` is Python's habit for an apostrophe.
    for raw in [
        r#"{"command": "echo don\'t"}"#,
        r#"{"command": "echo don\'t\nls"}"#,
    ] {
        let m = mend_call(raw, &bash(), &MendOptions::default());
        let got = m.calls[0].arguments.as_ref().unwrap()["command"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(got.starts_with("echo don't"), "{raw}: {got:?}");
    }
}

#[test]
fn an_f_strings_opening_quote_counts_as_a_quote() {
    // `f"retry` has a letter on each side of its quote: a quote all the same, so each
    // line's quotes are two, and the unescaped code reads by the keys.
    let raw = "{\"path\": \"fetch.py\", \"content\": \"log.warning(f\"retry {n} for {url}\")\nlog.error(f\"giving up on {url}: {exc!r}\")\n\"}";
    let m = mend_call(raw, &write_file(), &MendOptions::default());
    assert_eq!(m.calls[0].outcome, Outcome::Repaired, "{m:?}");
    assert_eq!(
        m.calls[0].arguments.as_ref().unwrap()["content"],
        json!(
            "log.warning(f\"retry {n} for {url}\")\nlog.error(f\"giving up on {url}: {exc!r}\")\n"
        )
    );
}

#[test]
fn a_seam_look_in_a_long_string_stays_linear() {
    // Many `"}` followed by words and no `{`: each byte is looked at a bounded number of
    // times.
    let text = |n: usize| {
        format!(
            "{{\"path\": \"p\", \"content\": \"{}\", \"create_dirs\": true}}",
            "x = \"a\"} and then more words ".repeat(n)
        )
    };
    let (small, big) = (text(2_000), text(20_000));
    crate::work::assert_linear("seam look", small.as_str(), big.as_str(), |t| {
        mend_call(t, &write_file(), &MendOptions::default())
    });
}

#[test]
fn an_object_read_by_its_keys_may_be_fenced_follow_reasoning_or_end_in_a_comma() {
    let content = "{\n  \"root\": true,\n  \"rules\": {\"eqeqeq\": \"warn\"}\n}\n";
    // Its quotes and line breaks written as they are (a raw line break makes every `\n`
    // in the string literal, so there is none).
    let object = format!("{{\"path\": \".eslintrc.json\", \"content\": \"{content}\"}}");
    for (raw, envelope) in [
        (format!("```json\n{object}\n```"), FixKind::FenceStripped),
        (
            format!("<think>Write the config.</think>\n{object}"),
            FixKind::ThinkingStripped,
        ),
        (
            format!("{}\",\n}}", object.strip_suffix("\"}").unwrap()),
            FixKind::TrailingComma,
        ),
    ] {
        let m = mend_call(&raw, &write_file(), &MendOptions::default());
        assert_eq!(m.calls.len(), 1, "{raw}: {m:?}");
        assert_eq!(
            m.calls[0].arguments.as_ref().unwrap()["content"],
            json!(content),
            "{raw}"
        );
        let fixes = kinds(&m.calls[0]);
        assert!(fixes.contains(&envelope), "{raw}: {fixes:?}");
        assert!(
            fixes.contains(&FixKind::InnerQuoteEscaped),
            "{raw}: {fixes:?}"
        );
    }
}

#[test]
fn reading_by_keys_never_passes_over_the_size_and_depth_limits() {
    use toolmend::RepairOptions;
    // Valid, but past the caller's limits: refused, as before the keys could read it.
    let small = MendOptions {
        repair: RepairOptions {
            max_len: 64,
            max_depth: 4,
            ..RepairOptions::default()
        },
        ..MendOptions::default()
    };
    let long = format!(r#"{{"path": "a", "content": "{}"}}"#, "x".repeat(100));
    let m = mend_call(&long, &write_file(), &small);
    assert_eq!(m.calls[0].outcome, Outcome::Feedback, "{m:?}");
    let deep = r#"{"argv": ["a"], "edits": [[[[[[{"find": "a", "put": "b"}]]]]]]}"#;
    let m = mend_call(deep, &argv_and_edits(), &small);
    assert_eq!(m.calls[0].outcome, Outcome::Feedback, "{m:?}");
}

#[test]
fn a_quote_in_the_prose_between_two_calls_leaves_a_stray_brace_a_stray_brace() {
    let raw = "{\"path\": \"a.txt\", \"content\": \"x\"}\nThen \"b\":\n{\"path\": \"b.txt\", \"content\": \"y\"}}";
    let m = mend_call(raw, &write_file(), &MendOptions::default());
    let got: Vec<_> = m.calls.iter().map(|c| c.arguments.clone()).collect();
    assert_eq!(
        got,
        [
            Some(json!({"path": "a.txt", "content": "x"})),
            Some(json!({"path": "b.txt", "content": "y"}))
        ],
        "{m:?}"
    );
}
