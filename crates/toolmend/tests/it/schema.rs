//! Schema: compile, validate (issue mapping), check (coercions on and off), custom validators.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use serde_json::{Value, json};
use toolmend::schema::{Checked, Coercions, CompiledTool, Phase, Toolbox, ValidationContext};
use toolmend::{Error, Fix, FixKind, Issue, IssueKind, Safety};

// ---- helpers ----

fn tool(schema: Value) -> CompiledTool {
    CompiledTool::compile("t", "A test tool.", &schema).unwrap()
}

fn ctx() -> ValidationContext<'static> {
    ValidationContext::new("t", Phase::Initial)
}

fn lax(t: &CompiledTool, args: Value) -> Checked {
    t.check(args, &Coercions::default(), &ctx())
}

fn with(t: &CompiledTool, args: Value, coercions: &Coercions) -> Checked {
    t.check(args, coercions, &ctx())
}

fn kinds(fixes: &[Fix]) -> Vec<FixKind> {
    fixes.iter().map(|f| f.kind).collect()
}

fn issue_kinds(issues: &[Issue]) -> Vec<(IssueKind, &str)> {
    issues.iter().map(|i| (i.kind, i.path.as_str())).collect()
}

/// A schema with one property `x` of the given schema (optional), closed.
fn one(x: Value) -> CompiledTool {
    tool(json!({"type": "object", "properties": {"x": x}, "additionalProperties": false}))
}

/// Asserts `x: input` becomes `x: output` with exactly the fix `kind` at `/x`.
#[track_caller]
fn coerces(t: &CompiledTool, input: Value, output: Value, kind: FixKind) {
    let c = lax(t, json!({ "x": input }));
    assert_eq!(c.value, json!({ "x": output }), "value for {input}");
    assert_eq!(kinds(&c.fixes), [kind], "fixes for {input}: {:?}", c.fixes);
    assert_eq!(c.fixes[0].path, "/x");
    assert!(c.issues.is_empty(), "issues for {input}: {:?}", c.issues);
}

/// Asserts `x: input` is left alone and reported as `issue` at `/x`.
#[track_caller]
fn refuses(t: &CompiledTool, input: Value, issue: IssueKind) {
    let c = lax(t, json!({ "x": input.clone() }));
    assert_eq!(c.value, json!({ "x": input }), "value changed");
    assert!(c.fixes.is_empty(), "fixes: {:?}", c.fixes);
    assert_eq!(issue_kinds(&c.issues), [(issue, "/x")], "{:?}", c.issues);
}

fn only(mut f: impl FnMut(&mut Coercions)) -> Coercions {
    let mut c = Coercions::default();
    f(&mut c);
    c
}

fn weather() -> CompiledTool {
    CompiledTool::compile(
        "get_weather",
        "Current weather and forecast.",
        &json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "hourly": {"type": "boolean"}
            },
            "required": ["city"],
            "additionalProperties": false
        }),
    )
    .unwrap()
}

// ---- compile ----

#[test]
fn compiled_tool_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledTool>();
    assert_send_sync::<Toolbox>();
}

#[test]
fn missing_or_empty_parameters_accept_any_object() {
    for params in [Value::Null, json!({})] {
        let t = CompiledTool::compile("noop", "", &params).unwrap();
        assert!(t.is_valid(&json!({})));
        assert!(t.is_valid(&json!({"anything": [1, 2]})));
        assert!(!t.is_valid(&json!([1])));
        assert_eq!(t.parameters(), &params);
        let c = lax(&t, json!({"a": "5"}));
        assert_eq!(c.value, json!({"a": "5"}));
        assert!(c.fixes.is_empty() && c.issues.is_empty());
    }
}

#[test]
fn invalid_schema_is_an_error() {
    let e = CompiledTool::compile("bad", "", &json!({"type": 5})).unwrap_err();
    assert!(
        matches!(e, Error::InvalidSchema { ref tool, .. } if tool == "bad"),
        "{e}"
    );
    let e = CompiledTool::compile(
        "bad",
        "",
        &json!({"properties": {"a": {"$ref": "#/$defs/nope"}}}),
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidSchema { .. }));
}

#[test]
fn remote_refs_are_not_fetched() {
    let e = CompiledTool::compile(
        "remote",
        "",
        &json!({"properties": {"a": {"$ref": "https://example.com/schema.json"}}}),
    )
    .unwrap_err();
    assert!(e.to_string().contains("example.com"), "{e}");
}

#[test]
fn draft_comes_from_dollar_schema() {
    let d7 = tool(json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}));
    assert_eq!(d7.draft(), jsonschema::Draft::Draft7);
    let d2020 = tool(json!({"type": "object"}));
    assert_eq!(d2020.draft(), jsonschema::Draft::Draft202012);
    // An unknown meta-schema does not make us fetch it; 2020-12 applies.
    let custom = tool(json!({"$schema": "https://example.com/my-meta", "type": "object"}));
    assert_eq!(custom.draft(), jsonschema::Draft::Draft202012);
}

#[test]
fn formats_are_asserted_in_draft_7_and_2020_12() {
    // In 2020-12 `format` is only an annotation unless asked; we always assert it.
    let props = json!({"d": {"type": "string", "format": "date"}});
    let d7 =
        tool(json!({"$schema": "http://json-schema.org/draft-07/schema#", "properties": props}));
    let d2020 = tool(
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "properties": props}),
    );
    for t in [&d7, &d2020] {
        assert!(t.is_valid(&json!({"d": "2024-12-01"})));
        assert!(!t.is_valid(&json!({"d": "2024-13-01"})));
        let issues = t.validate(&json!({"d": "2024-13-01"}));
        assert_eq!(issue_kinds(&issues), [(IssueKind::Format, "/d")]);
        assert_eq!(issues[0].expected.as_deref(), Some("date"));
    }
}

#[test]
fn draft_2020_prefix_items_and_draft_7_tuple_items() {
    let d2020 = tool(json!({"properties": {"p": {"type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}]}}}));
    let c = lax(&d2020, json!({"p": ["5", 6]}));
    assert_eq!(c.value, json!({"p": [5, "6"]}));
    assert_eq!(
        kinds(&c.fixes),
        [FixKind::StringToInteger, FixKind::ScalarToString]
    );
    assert_eq!(c.fixes[0].path, "/p/0");
    assert_eq!(c.fixes[1].path, "/p/1");

    let d7 = tool(json!({"$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"p": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}}}));
    let c = lax(&d7, json!({"p": ["5", 6]}));
    assert_eq!(c.value, json!({"p": [5, "6"]}));
}

// ---- validate: one test per issue kind ----

#[test]
fn validate_missing_required() {
    let issues = weather().validate(&json!({}));
    assert_eq!(
        issue_kinds(&issues),
        [(IssueKind::MissingRequired, "/city")]
    );
    assert_eq!(issues[0].expected.as_deref(), Some("string"));
    assert!(issues[0].message.contains("city"), "{}", issues[0].message);
    assert_eq!(issues[0].got, None);
}

#[test]
fn validate_nested_missing_required_path() {
    let t = tool(json!({"properties": {"contact": {"type": "object",
        "properties": {"phone": {"type": "string"}}, "required": ["phone"]}}}));
    let issues = t.validate(&json!({"contact": {}}));
    assert_eq!(
        issue_kinds(&issues),
        [(IssueKind::MissingRequired, "/contact/phone")]
    );
    assert_eq!(issues[0].expected.as_deref(), Some("string"));
}

#[test]
fn validate_wrong_type() {
    let issues = weather().validate(&json!({"city": "Oslo", "days": "five"}));
    assert_eq!(issue_kinds(&issues), [(IssueKind::WrongType, "/days")]);
    assert_eq!(issues[0].expected.as_deref(), Some("integer"));
    assert_eq!(issues[0].got, Some(json!("five")));
}

#[test]
fn validate_enum_and_const() {
    let issues = weather().validate(&json!({"city": "Oslo", "units": "kelvin"}));
    assert_eq!(issue_kinds(&issues), [(IssueKind::NotInEnum, "/units")]);
    assert_eq!(issues[0].allowed, [json!("celsius"), json!("fahrenheit")]);
    assert_eq!(issues[0].got, Some(json!("kelvin")));
    assert_eq!(issues[0].suggestion, None);

    // A near spelling gets a display-only suggestion.
    let issues = weather().validate(&json!({"city": "Oslo", "units": "celcius"}));
    assert_eq!(
        issues[0].suggestion.as_deref(),
        Some("did you mean \"celsius\"?")
    );

    let t = one(json!({"const": "v1"}));
    let issues = t.validate(&json!({"x": "v2"}));
    assert_eq!(issue_kinds(&issues), [(IssueKind::NotInEnum, "/x")]);
    assert_eq!(issues[0].allowed, [json!("v1")]);
}

#[test]
fn validate_unknown_keys_one_issue_each_with_did_you_mean() {
    let issues = weather().validate(&json!({"town": "Oslo", "unit": "celsius", "zzz": 1}));
    assert_eq!(
        issue_kinds(&issues),
        [
            (IssueKind::MissingRequired, "/city"),
            (IssueKind::UnknownKey, "/town"),
            (IssueKind::UnknownKey, "/unit"),
            (IssueKind::UnknownKey, "/zzz"),
        ]
    );
    let town = &issues[1];
    assert_eq!(town.suggestion.as_deref(), Some("did you mean \"city\"?"));
    assert_eq!(town.got, Some(json!("Oslo")));
    assert_eq!(
        town.allowed,
        [
            json!("city"),
            json!("units"),
            json!("days"),
            json!("hourly")
        ]
    );
    assert_eq!(
        issues[2].suggestion.as_deref(),
        Some("did you mean \"units\"?")
    );
    assert_eq!(issues[3].suggestion, None);
}

#[test]
fn validate_format_range_length_pattern() {
    let t = tool(json!({"type": "object", "properties": {
        "email": {"type": "string", "format": "email"},
        "min": {"type": "integer", "minimum": 1},
        "max": {"type": "integer", "maximum": 14},
        "xmin": {"type": "number", "exclusiveMinimum": 0},
        "step": {"type": "integer", "multipleOf": 5},
        "name": {"type": "string", "minLength": 2, "maxLength": 4},
        "list": {"type": "array", "minItems": 1, "maxItems": 2},
        "obj": {"type": "object", "minProperties": 1},
        "code": {"type": "string", "pattern": "^[A-Z]{2}$"}
    }}));
    let issues = t.validate(&json!({
        "email": "nope", "min": 0, "max": 15, "xmin": 0, "step": 7,
        "name": "x", "list": [1, 2, 3], "obj": {}, "code": "fr"
    }));
    let got: Vec<(IssueKind, &str, Option<&str>)> = issues
        .iter()
        .map(|i| (i.kind, i.path.as_str(), i.expected.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (IssueKind::Pattern, "/code", Some("^[A-Z]{2}$")),
            (IssueKind::Format, "/email", Some("email")),
            (IssueKind::Length, "/list", Some("at most 2 items")),
            (IssueKind::Range, "/max", Some("<= 14")),
            (IssueKind::Range, "/min", Some(">= 1")),
            (IssueKind::Length, "/name", Some("at least 2 characters")),
            (IssueKind::Length, "/obj", Some("at least 1 key")),
            (IssueKind::Range, "/step", Some("a multiple of 5")),
            (IssueKind::Range, "/xmin", Some("> 0")),
        ]
    );
    assert!(issues.iter().all(|i| i.got.is_some()));
}

#[test]
fn validate_composition() {
    let t = tool(json!({"properties": {
        "a": {"anyOf": [{"type": "string", "minLength": 3}, {"type": "integer", "minimum": 10}]},
        "b": {"not": {"type": "string"}},
        "c": {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    }}));
    let issues = t.validate(&json!({"a": "x", "b": "s", "c": 5}));
    // `a`: only the string branch takes a string, so its own issue is reported.
    assert_eq!(
        issue_kinds(&issues),
        [
            (IssueKind::Length, "/a"),
            (IssueKind::Composition, "/b"),
            (IssueKind::Composition, "/c"),
        ]
    );
    // No branch takes the value's type: a wrong type listing the alternatives.
    let issues = t.validate(&json!({"a": true}));
    assert_eq!(issue_kinds(&issues), [(IssueKind::WrongType, "/a")]);
    assert_eq!(issues[0].expected.as_deref(), Some("string or integer"));
    // Both branches take a number: a composition issue.
    let t2 = one(
        json!({"anyOf": [{"type": "integer", "minimum": 10}, {"type": "number", "maximum": 1}]}),
    );
    let issues = t2.validate(&json!({"x": 5}));
    assert_eq!(issue_kinds(&issues), [(IssueKind::Composition, "/x")]);
}

#[test]
fn validate_other_keywords_are_composition_with_a_message() {
    let t = tool(json!({"properties": {
        "tags": {"type": "array", "uniqueItems": true},
        "ids": {"type": "array", "contains": {"type": "integer"}}
    }}));
    let issues = t.validate(&json!({"tags": ["a", "a"], "ids": ["x"]}));
    assert_eq!(
        issue_kinds(&issues),
        [
            (IssueKind::Composition, "/ids"),
            (IssueKind::Composition, "/tags")
        ]
    );
    assert!(
        issues
            .iter()
            .all(|i| !i.message.is_empty() && i.got.is_some())
    );
}

#[test]
fn validate_not_an_object() {
    for v in [json!([1]), json!("x"), json!(5), Value::Null] {
        let issues = weather().validate(&v);
        assert_eq!(issue_kinds(&issues), [(IssueKind::NotAnObject, "")], "{v}");
        assert_eq!(issues[0].got, Some(v));
    }
    assert!(!weather().is_valid(&json!([])));
}

#[test]
fn validate_is_sorted_and_deterministic() {
    let args = json!({"zeta": 1, "units": "k", "days": "x", "alpha": 2});
    let a = weather().validate(&args);
    let b = weather().validate(&args);
    assert_eq!(a, b);
    let mut sorted = a.clone();
    toolmend::issue::sort_issues(&mut sorted);
    assert_eq!(a, sorted);
    assert_eq!(a[0].kind, IssueKind::UnknownKey); // "/alpha" first
}

// ---- check: fast path ----

#[test]
fn valid_arguments_take_the_fast_path() {
    let t = weather();
    let args = json!({"city": "Oslo", "days": 3});
    let c = lax(&t, args.clone());
    assert_eq!(c.value, args);
    assert!(c.is_valid());
    // Nothing was allocated for fixes or issues.
    assert_eq!(c.fixes.capacity(), 0);
    assert_eq!(c.issues.capacity(), 0);
}

// ---- check: coercions, each on and off ----

#[test]
fn numeric_strings_to_integer() {
    let t = one(json!({"type": "integer"}));
    coerces(&t, json!("5"), json!(5), FixKind::StringToInteger);
    coerces(&t, json!(" 12 "), json!(12), FixKind::StringToInteger);
    coerces(&t, json!("5.0"), json!(5), FixKind::StringToInteger);
    coerces(&t, json!("1e3"), json!(1000), FixKind::StringToInteger);
    coerces(&t, json!("-7"), json!(-7), FixKind::StringToInteger);
    refuses(&t, json!("5 apples"), IssueKind::WrongType);
    refuses(&t, json!("5.5"), IssueKind::WrongType);
    refuses(&t, json!("0x1F"), IssueKind::WrongType);
    let c = lax(&t, json!({"x": "5"}));
    assert_eq!(c.fixes[0].detail, "\"5\" -> 5");
    let off = only(|c| c.numeric_strings = false);
    let c = with(&t, json!({"x": "5"}), &off);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::WrongType, "/x")]);
    assert!(c.fixes.is_empty());
}

#[test]
fn numeric_strings_to_number() {
    let t = one(json!({"type": "number"}));
    coerces(&t, json!("1200"), json!(1200), FixKind::StringToNumber);
    coerces(&t, json!("21.5"), json!(21.5), FixKind::StringToNumber);
    coerces(&t, json!("1e3"), json!(1000.0), FixKind::StringToNumber);
    refuses(&t, json!("1,200"), IssueKind::WrongType);
    refuses(&t, json!("NaN"), IssueKind::WrongType);
}

#[test]
fn float_with_zero_fraction_to_integer() {
    let t = tool(
        json!({"properties": {"x": {"type": "integer"}, "y": {"type": "string"}},
        "required": ["y"]}),
    );
    // Invalid elsewhere, so the walk runs: 3.0 becomes 3 on the way.
    let c = lax(&t, json!({"x": 3.0}));
    assert_eq!(c.value, json!({"x": 3}));
    assert_eq!(kinds(&c.fixes), [FixKind::FloatToInteger]);
    let c = lax(&t, json!({"x": 3.5, "y": "a"}));
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::WrongType, "/x")]);
}

#[test]
fn boolean_strings() {
    let t = one(json!({"type": "boolean"}));
    for (s, b) in [
        ("true", true),
        ("False", false),
        ("TRUE", true),
        ("FALSE", false),
        ("yes", true),
        ("no", false),
        ("1", true),
        ("0", false),
    ] {
        coerces(&t, json!(s), json!(b), FixKind::StringToBoolean);
    }
    refuses(&t, json!("sometimes"), IssueKind::WrongType);
    refuses(&t, json!("depends"), IssueKind::WrongType);
    let off = only(|c| c.boolean_strings = false);
    let c = with(&t, json!({"x": "true"}), &off);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::WrongType, "/x")]);
}

#[test]
fn scalar_to_string() {
    let t = one(json!({"type": "string"}));
    coerces(&t, json!(11524), json!("11524"), FixKind::ScalarToString);
    coerces(&t, json!(2.5), json!("2.5"), FixKind::ScalarToString);
    coerces(&t, json!(true), json!("true"), FixKind::ScalarToString);
    refuses(&t, json!({"a": 1}), IssueKind::WrongType);
    let off = only(|c| c.scalar_to_string = false);
    let c = with(&t, json!({"x": 5}), &off);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::WrongType, "/x")]);
}

#[test]
fn scalar_wrapped_in_array() {
    let strings = one(json!({"type": "array", "items": {"type": "string"}}));
    coerces(
        &strings,
        json!("docs"),
        json!(["docs"]),
        FixKind::WrappedInArray,
    );
    let ints = one(json!({"type": "array", "items": {"type": "integer"}}));
    coerces(&ints, json!(7), json!([7]), FixKind::WrappedInArray);
    // Wrapped, then the element is coerced too.
    let c = lax(&ints, json!({"x": "7"}));
    assert_eq!(c.value, json!({"x": [7]}));
    assert_eq!(
        kinds(&c.fixes),
        [FixKind::WrappedInArray, FixKind::StringToInteger]
    );
    assert_eq!(c.fixes[1].path, "/x/0");
    let objects = one(json!({"type": "array", "items": {"type": "object"}}));
    coerces(
        &objects,
        json!({"sku": "A"}),
        json!([{"sku": "A"}]),
        FixKind::WrappedInArray,
    );
    let off = only(|c| c.wrap_in_array = false);
    let c = with(&strings, json!({"x": "docs"}), &off);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::WrongType, "/x")]);
}

#[test]
fn csv_split_for_arrays_of_strings() {
    let t = one(json!({"type": "array", "items": {"type": "string"}}));
    coerces(&t, json!("a, b"), json!(["a", "b"]), FixKind::CsvSplit);
    coerces(
        &t,
        json!("a,b,,c "),
        json!(["a", "b", "c"]),
        FixKind::CsvSplit,
    );
    coerces(
        &t,
        json!("solo, "),
        json!(["solo"]),
        FixKind::WrappedInArray,
    );
    // Integer items are not split.
    let ints = one(json!({"type": "array", "items": {"type": "integer"}}));
    refuses(&ints, json!("1, 2"), IssueKind::WrongType);
    // Off: the whole string is wrapped instead.
    let off = only(|c| c.csv_split = false);
    let c = with(&t, json!({"x": "a, b"}), &off);
    assert_eq!(c.value, json!({"x": ["a, b"]}));
    assert_eq!(kinds(&c.fixes), [FixKind::WrappedInArray]);
    // Text that looks like broken JSON is neither split nor wrapped.
    refuses(&t, json!("['a', 'b']"), IssueKind::WrongType);
}

#[test]
fn json_encoded_strings_are_decoded_and_coerced() {
    let t = tool(json!({"type": "object", "properties": {
        "to": {"type": "array", "items": {"type": "string"}},
        "contact": {"type": "object", "properties": {"phone": {"type": "string"},
            "size": {"type": "integer"}}, "additionalProperties": false}
    }, "additionalProperties": false}));
    let c = lax(
        &t,
        json!({"to": "[\"a@example.com\"]", "contact": "{\"phone\": 5551234, \"size\": \"2\"}"}),
    );
    assert_eq!(
        c.value,
        json!({"to": ["a@example.com"], "contact": {"phone": "5551234", "size": 2}})
    );
    assert_eq!(
        kinds(&c.fixes),
        [
            FixKind::JsonStringDecoded,
            FixKind::JsonStringDecoded,
            FixKind::ScalarToString,
            FixKind::StringToInteger
        ]
    );
    assert_eq!(c.fixes[3].path, "/contact/size");
    let off = only(|c| c.json_strings = false);
    let c = with(&t, json!({"to": "[\"a\"]"}), &off);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::WrongType, "/to")]);
}

#[test]
fn enum_case_and_separators() {
    let t = one(json!({"type": "string", "enum": ["celsius", "no_preference", "utf-8"]}));
    coerces(
        &t,
        json!("Celsius"),
        json!("celsius"),
        FixKind::EnumCaseFixed,
    );
    coerces(
        &t,
        json!("no-preference"),
        json!("no_preference"),
        FixKind::EnumCaseFixed,
    );
    coerces(
        &t,
        json!("No Preference"),
        json!("no_preference"),
        FixKind::EnumCaseFixed,
    );
    coerces(&t, json!("UTF-8"), json!("utf-8"), FixKind::EnumCaseFixed);
    coerces(&t, json!("utf8"), json!("utf-8"), FixKind::EnumCaseFixed);
    // No match: never guess a different value.
    refuses(&t, json!("kelvin"), IssueKind::NotInEnum);
    refuses(&t, json!("celcius"), IssueKind::NotInEnum);
    let off = only(|c| c.enum_case = false);
    let c = with(&t, json!({"x": "Celsius"}), &off);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::NotInEnum, "/x")]);
}

#[test]
fn enum_ambiguous_match_is_refused() {
    let t = one(json!({"enum": ["a-b", "a_b"]}));
    refuses(&t, json!("A B"), IssueKind::NotInEnum);
}

#[test]
fn enum_numbers_and_strings() {
    let t = one(json!({"enum": [1, 2, 3]}));
    coerces(&t, json!("2"), json!(2), FixKind::StringToInteger);
    let s = one(json!({"enum": ["10", "20"]}));
    coerces(&s, json!(10), json!("10"), FixKind::ScalarToString);
}

fn invoice() -> CompiledTool {
    CompiledTool::compile(
        "create_invoice",
        "Create an invoice.",
        &json!({
            "type": "object",
            "properties": {
                "customer_id": {"type": "integer"},
                "currency": {"type": "string", "enum": ["EUR", "USD"]},
                "notify_customer": {"type": "boolean"},
                "due_date": {"type": "string", "format": "date"},
                "items": {"type": "array", "minItems": 1, "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"type": "integer", "minimum": 1}
                    },
                    "required": ["sku", "quantity"],
                    "additionalProperties": false
                }}
            },
            "required": ["customer_id", "items"],
            "additionalProperties": false
        }),
    )
    .unwrap()
}

#[test]
fn nested_objects_in_arrays_are_coerced_with_paths() {
    let c = lax(
        &invoice(),
        json!({"customer_id": "42", "items": [{"sku": "A", "quantity": "2"}, {"sku": 7, "quantity": 1}]}),
    );
    assert_eq!(
        c.value,
        json!({"customer_id": 42, "items": [{"sku": "A", "quantity": 2}, {"sku": "7", "quantity": 1}]})
    );
    let paths: Vec<&str> = c.fixes.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["/customer_id", "/items/0/quantity", "/items/1/sku"]);
    assert!(c.issues.is_empty());
}

// ---- keys ----

#[test]
fn key_case_styles_are_renamed() {
    let t = tool(json!({"type": "object", "properties": {
        "timeout_seconds": {"type": "integer"}, "create_dirs": {"type": "boolean"},
        "max_price": {"type": "number"}}, "additionalProperties": false}));
    let c = lax(
        &t,
        json!({"timeoutSeconds": 30, "create-dirs": true, "MaxPrice": 9.5}),
    );
    assert_eq!(
        c.value,
        json!({"timeout_seconds": 30, "create_dirs": true, "max_price": 9.5})
    );
    assert_eq!(kinds(&c.fixes), [FixKind::KeyCaseFixed; 3]);
    assert!(c.fixes.iter().all(|f| f.safety() == Safety::Safe));
    let details: Vec<&str> = c.fixes.iter().map(|f| f.detail.as_str()).collect();
    assert!(
        details.contains(&"\"timeoutSeconds\" -> \"timeout_seconds\""),
        "{details:?}"
    );
    assert!(c.fixes.iter().any(|f| f.path == "/max_price"));
}

#[test]
fn renamed_keys_keep_their_position() {
    let t = tool(
        json!({"properties": {"a": {}, "limit": {"type": "integer"}, "z": {}},
        "additionalProperties": false}),
    );
    let c = lax(&t, json!({"a": 1, "max_rows": 5, "z": 2}));
    let keys: Vec<&String> = c.value.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["a", "limit", "z"]);
}

#[test]
fn key_aliases_are_renamed() {
    let cases = [
        (
            json!({"city": {"type": "string"}, "days": {"type": "integer"}, "units": {"type": "string"}}),
            "forecast_days",
            json!(3),
            "days",
        ),
        (
            json!({"city": {"type": "string"}, "units": {"type": "string"}}),
            "town",
            json!("Oslo"),
            "city",
        ),
        (
            json!({"query": {"type": "string"}, "limit": {"type": "integer"}}),
            "max_rows",
            json!(500),
            "limit",
        ),
        (
            json!({"query": {"type": "string"}, "safe_search": {"type": "boolean"}}),
            "search_query",
            json!("rust"),
            "query",
        ),
        (
            json!({"text": {"type": "string"}, "target_language": {"type": "string"}}),
            "source_text",
            json!("hi"),
            "text",
        ),
        (
            json!({"customer_id": {"type": "integer"}, "send_to_customer": {"type": "boolean"}}),
            "customer",
            json!(17),
            "customer_id",
        ),
        (
            json!({"title": {"type": "string"}, "reminder_minutes": {"type": "integer"}}),
            "reminder",
            json!(15),
            "reminder_minutes",
        ),
        (
            json!({"date": {"type": "string"}, "time": {"type": "string"}}),
            "reservation_date",
            json!("2026-05-06"),
            "date",
        ),
        (
            json!({"mode": {"type": "string"}, "target_temperature": {"type": "number"}}),
            "temp",
            json!(21),
            "target_temperature",
        ),
        (
            json!({"code": {"type": "string"}, "language": {"type": "string"}}),
            "lang",
            json!("python"),
            "language",
        ),
        (
            json!({"user_id": {"type": "string"}, "birth_date": {"type": "string", "description": "Date of birth"}}),
            "dob",
            json!("1990-01-02"),
            "birth_date",
        ),
        (
            json!({"path": {"type": "string"}, "content": {"type": "string"}}),
            "text",
            json!("hello"),
            "content",
        ),
        (
            json!({"repo": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}}}),
            "tags",
            json!(["bug"]),
            "labels",
        ),
        (
            json!({"city": {"type": "string"}, "country": {"type": "string"}}),
            "citty",
            json!("Oslo"),
            "city",
        ),
    ];
    for (props, from, value, to) in cases {
        let t = tool(json!({"type": "object", "properties": props, "additionalProperties": false}));
        let c = lax(&t, json!({ from: value.clone() }));
        assert_eq!(
            c.value,
            json!({ to: value }),
            "{from} -> {to}: {:?}",
            c.fixes
        );
        let want = if from == "citty" {
            FixKind::KeySpellingFixed
        } else {
            FixKind::KeyRenamed
        };
        assert_eq!(kinds(&c.fixes), [want], "{from}");
        assert_eq!(c.fixes[0].detail, format!("\"{from}\" -> \"{to}\""));
    }
}

#[test]
fn renames_are_coerced_after() {
    let t =
        tool(json!({"properties": {"limit": {"type": "integer"}}, "additionalProperties": false}));
    let c = lax(&t, json!({"max_rows": "50"}));
    assert_eq!(c.value, json!({"limit": 50}));
    assert_eq!(
        kinds(&c.fixes),
        [FixKind::KeyRenamed, FixKind::StringToInteger]
    );
}

#[test]
fn ambiguous_renames_are_refused() {
    // One key, two equally good properties.
    let t = tool(
        json!({"properties": {"user_id": {"type": "string"}, "account_id": {"type": "string"}},
        "additionalProperties": false}),
    );
    let c = with(
        &t,
        json!({"id": "7"}),
        &only(|c| c.drop_unknown_keys = false),
    );
    assert_eq!(c.value, json!({"id": "7"}));
    assert!(c.fixes.is_empty());
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::UnknownKey, "/id")]);
    // Two keys competing for one property: neither is renamed.
    let t =
        tool(json!({"properties": {"days": {"type": "integer"}}, "additionalProperties": false}));
    let c = with(
        &t,
        json!({"forecast_days": 3, "num_days": 4}),
        &only(|c| c.drop_unknown_keys = false),
    );
    assert!(c.fixes.is_empty(), "{:?}", c.fixes);
    assert_eq!(c.issues.len(), 2);
}

#[test]
fn a_present_property_is_never_overwritten() {
    let t = tool(
        json!({"properties": {"timeout_seconds": {"type": "integer"}},
        "additionalProperties": false}),
    );
    let c = lax(&t, json!({"timeout_seconds": 5, "timeoutSeconds": 9}));
    assert_eq!(c.value, json!({"timeout_seconds": 5}));
    assert_eq!(kinds(&c.fixes), [FixKind::UnknownKeyDropped]);
}

#[test]
fn renamed_value_must_fit() {
    let t =
        tool(json!({"properties": {"limit": {"type": "integer"}}, "additionalProperties": false}));
    let c = with(
        &t,
        json!({"max_rows": "lots"}),
        &only(|c| c.drop_unknown_keys = false),
    );
    assert_eq!(c.value, json!({"max_rows": "lots"}));
    assert!(c.fixes.is_empty());
    let e = tool(
        json!({"properties": {"units": {"enum": ["celsius", "fahrenheit"]}},
        "additionalProperties": false}),
    );
    let c = with(
        &e,
        json!({"unit": "kelvin"}),
        &only(|c| c.drop_unknown_keys = false),
    );
    assert!(c.fixes.is_empty(), "{:?}", c.fixes);
    let c = lax(&e, json!({"unit": "Celsius"}));
    assert_eq!(c.value, json!({"units": "celsius"}));
    assert_eq!(
        kinds(&c.fixes),
        [FixKind::KeyRenamed, FixKind::EnumCaseFixed]
    );
}

#[test]
fn rename_off_leaves_unknown_keys() {
    let c = with(
        &weather(),
        json!({"town": "Oslo"}),
        &only(|c| c.rename_keys = false),
    );
    assert_eq!(c.value, json!({"town": "Oslo"}));
    assert!(c.fixes.is_empty());
    assert_eq!(
        issue_kinds(&c.issues),
        [
            (IssueKind::MissingRequired, "/city"),
            (IssueKind::UnknownKey, "/town")
        ]
    );
    assert_eq!(
        c.issues[1].suggestion.as_deref(),
        Some("did you mean \"city\"?")
    );
}

#[test]
fn unknown_keys_are_dropped_when_forbidden() {
    let c = lax(
        &weather(),
        json!({"city": "Oslo", "reasoning": "the user asked", "tool_name": "get_weather"}),
    );
    assert_eq!(c.value, json!({"city": "Oslo"}));
    assert_eq!(kinds(&c.fixes), [FixKind::UnknownKeyDropped; 2]);
    assert_eq!(c.fixes[0].path, "/reasoning");
    assert!(c.issues.is_empty());
    let off = only(|c| c.drop_unknown_keys = false);
    let c = with(&weather(), json!({"city": "Oslo", "reasoning": "x"}), &off);
    assert_eq!(
        issue_kinds(&c.issues),
        [(IssueKind::UnknownKey, "/reasoning")]
    );
}

#[test]
fn a_key_no_argument_takes_is_an_issue_where_the_schema_says_nothing_of_other_keys() {
    // The schema says nothing of other keys (a pydantic model's, which ignores them): a
    // key no property takes would reach nothing. It is kept, and reported, never lost.
    let t = tool(json!({"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}));
    let c = lax(&t, json!({"city": "Oslo", "extra": 1}));
    assert_eq!(c.value, json!({"city": "Oslo", "extra": 1}));
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::UnknownKey, "/extra")]);
    assert!(
        c.issues[0].message.contains("would be ignored"),
        "{}",
        c.issues[0].message
    );
    // A key that clearly names a property is renamed, as before: no issue.
    let c = lax(&t, json!({"city": "Oslo", "dayz": 3}));
    assert_eq!(c.value, json!({"city": "Oslo", "days": 3}));
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    // Chatter beside the arguments is left alone.
    let c = lax(&t, json!({"city": "Oslo", "explanation": "the user asked"}));
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    // A schema that says other keys are welcome keeps them, without a word.
    for open in [json!(true), json!({"type": "integer"})] {
        let t =
            tool(json!({"properties": {"city": {"type": "string"}}, "additionalProperties": open}));
        let c = lax(&t, json!({"city": "Oslo", "extra": 1}));
        assert_eq!(c.value, json!({"city": "Oslo", "extra": 1}));
        assert!(c.fixes.is_empty() && c.issues.is_empty(), "{:?}", c.issues);
    }
    let t = tool(json!({"properties": {"city": {"type": "string"}},
        "patternProperties": {"^x_": {}}}));
    assert!(lax(&t, json!({"city": "Oslo", "x_a": 1})).issues.is_empty());
}

#[test]
fn a_key_that_may_be_a_missing_required_value_is_not_dropped() {
    // `place` could be the missing `city` (a number the string field would take): keep it
    // and say so, do not drop it silently. (A string there would be the structural reading.)
    let c = lax(&weather(), json!({"place": 7, "days": 2}));
    assert_eq!(c.value, json!({"place": 7, "days": 2}));
    assert!(c.fixes.is_empty(), "{:?}", c.fixes);
    assert_eq!(
        issue_kinds(&c.issues),
        [
            (IssueKind::MissingRequired, "/city"),
            (IssueKind::UnknownKey, "/place")
        ]
    );
    // A value that cannot be the missing one (an object for a string) is dropped.
    let c = lax(&weather(), json!({"meta": {"a": 1}}));
    assert_eq!(kinds(&c.fixes), [FixKind::UnknownKeyDropped]);
    assert_eq!(
        issue_kinds(&c.issues),
        [(IssueKind::MissingRequired, "/city")]
    );
}

#[test]
fn missing_required_values_are_never_invented() {
    let t = tool(json!({"type": "object", "properties": {
        "query": {"type": "string", "default": "everything"},
        "limit": {"type": "integer", "default": 10}},
        "required": ["query"], "additionalProperties": false}));
    let c = lax(&t, json!({}));
    assert_eq!(c.value, json!({}));
    assert!(c.fixes.is_empty());
    assert_eq!(
        issue_kinds(&c.issues),
        [(IssueKind::MissingRequired, "/query")]
    );
    // Defaults are not added for optional fields either.
    let c = lax(&t, json!({"query": "x"}));
    assert_eq!(c.value, json!({"query": "x"}));
    // A required null is an issue, not an omission.
    let c = lax(&t, json!({"query": null}));
    assert_eq!(c.value, json!({"query": null}));
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::WrongType, "/query")]);
}

// ---- null, unwrap ----

#[test]
fn null_for_optional_field_is_omitted() {
    let t = tool(json!({"type": "object", "properties": {
        "id": {"type": "string"}, "name": {"type": "string"},
        "address": {"type": "object"}, "note": {"type": ["string", "null"]},
        "alt": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "free": {}
    }, "required": ["id"], "additionalProperties": false}));
    let c = lax(
        &t,
        json!({"id": "1", "name": null, "address": null, "note": null, "alt": null, "free": null}),
    );
    assert_eq!(
        c.value,
        json!({"id": "1", "note": null, "alt": null, "free": null})
    );
    assert_eq!(kinds(&c.fixes), [FixKind::NullOmitted; 2]);
    assert_eq!(c.fixes[0].path, "/name");
    assert!(c.issues.is_empty());
    let off = only(|c| c.null_omitted = false);
    let c = with(&t, json!({"id": "1", "name": null}), &off);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::WrongType, "/name")]);
}

#[test]
fn arguments_nested_under_one_key_are_unwrapped() {
    for wrapper in [
        "input",
        "arguments",
        "args",
        "parameters",
        "params",
        "properties",
        "kwargs",
        "get_weather",
    ] {
        let c = lax(
            &weather(),
            json!({ wrapper: {"city": "Oslo", "days": "2"} }),
        );
        assert_eq!(c.value, json!({"city": "Oslo", "days": 2}), "{wrapper}");
        assert_eq!(
            kinds(&c.fixes),
            [FixKind::ArgumentsUnwrapped, FixKind::StringToInteger]
        );
        assert!(c.issues.is_empty());
    }
    let c = lax(&weather(), json!({"arguments": "{\"city\": \"Oslo\"}"}));
    assert_eq!(c.value, json!({"city": "Oslo"}));
    let off = only(|c| c.unwrap_arguments = false);
    let c = with(&weather(), json!({"input": {"city": "Oslo"}}), &off);
    assert!(
        c.issues
            .iter()
            .any(|i| i.kind == IssueKind::MissingRequired)
    );
}

#[test]
fn a_wrapper_key_that_is_a_property_is_not_unwrapped() {
    let t = tool(
        json!({"properties": {"input": {"type": "object"}, "mode": {"type": "string"}},
        "required": ["input"]}),
    );
    let c = lax(&t, json!({"input": {"mode": "x"}}));
    assert_eq!(c.value, json!({"input": {"mode": "x"}}));
    assert!(c.fixes.is_empty());
}

#[test]
fn a_wrapper_whose_contents_do_not_look_like_the_arguments_is_kept() {
    let t = tool(json!({"properties": {"query": {"type": "string"}}}));
    let c = lax(&t, json!({"params": {"page": 2}}));
    assert_eq!(c.value, json!({"params": {"page": 2}}));
    assert!(c.fixes.is_empty());
    let c = lax(&t, json!({"params": {"Query": "x"}}));
    assert_eq!(c.value, json!({"query": "x"}));
    assert_eq!(
        kinds(&c.fixes),
        [FixKind::ArgumentsUnwrapped, FixKind::KeyCaseFixed]
    );
}

#[test]
fn double_encoded_root_object_is_decoded() {
    let c = lax(&weather(), json!("{\"city\": \"Oslo\"}"));
    assert_eq!(c.value, json!({"city": "Oslo"}));
    assert_eq!(kinds(&c.fixes), [FixKind::JsonStringDecoded]);
    let c = lax(&weather(), json!([{"city": "Oslo"}]));
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::NotAnObject, "")]);
}

// ---- dates ----

#[test]
fn dates_are_normalized() {
    let t = one(json!({"type": "string", "format": "date"}));
    for (input, output) in [
        ("01/19/2026", "2026-01-19"),
        ("19/01/2026", "2026-01-19"),
        ("28.02.2025", "2025-02-28"),
        ("20010113", "2001-01-13"),
        ("27 July 2026", "2026-07-27"),
        ("February 14, 1985", "1985-02-14"),
        ("Feb 14 1985", "1985-02-14"),
        ("2026-06-24T00:00:00", "2026-06-24"),
    ] {
        coerces(&t, json!(input), json!(output), FixKind::DateNormalized);
    }
    let c = lax(&t, json!({"x": "01/19/2026"}));
    assert_eq!(c.fixes[0].detail, "\"01/19/2026\" -> \"2026-01-19\"");
    refuses(&t, json!("02/30/2026"), IssueKind::Format);
    refuses(&t, json!("2026-13-01"), IssueKind::Format);
    refuses(&t, json!("next Tuesday"), IssueKind::Format);
    let off = only(|c| c.dates = false);
    let c = with(&t, json!({"x": "01/19/2026"}), &off);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::Format, "/x")]);
}

#[test]
fn date_times_are_normalized_without_inventing_a_zone() {
    let t = one(json!({"type": "string", "format": "date-time"}));
    coerces(
        &t,
        json!("2025-07-02 18:45:00Z"),
        json!("2025-07-02T18:45:00Z"),
        FixKind::DateNormalized,
    );
    coerces(
        &t,
        json!("2025-07-02T18:45+0200"),
        json!("2025-07-02T18:45:00+02:00"),
        FixKind::DateNormalized,
    );
    // No time zone: left for validation to report.
    refuses(&t, json!("2025-07-02T18:45:00"), IssueKind::Format);
    refuses(&t, json!("2025-07-02"), IssueKind::Format);
}

#[test]
fn a_number_for_a_date_string_becomes_a_date() {
    let t = one(json!({"type": "string", "format": "date"}));
    let c = lax(&t, json!({"x": 20010113}));
    assert_eq!(c.value, json!({"x": "2001-01-13"}));
    assert_eq!(
        kinds(&c.fixes),
        [FixKind::ScalarToString, FixKind::DateNormalized]
    );
}

// ---- $ref, allOf, anyOf ----

#[test]
fn refs_to_defs_and_definitions_are_followed() {
    let t = tool(json!({
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/Address"}, "work": {"$ref": "#/definitions/Address"}},
        "$defs": {"Address": {"type": "object", "properties": {"zip": {"type": "string"}},
            "additionalProperties": false}},
        "definitions": {"Address": {"$ref": "#/$defs/Address"}}
    }));
    let c = lax(
        &t,
        json!({"home": {"zip": 12345}, "work": {"ZIP": "1", "junk": true}}),
    );
    assert_eq!(
        c.value,
        json!({"home": {"zip": "12345"}, "work": {"zip": "1"}})
    );
    assert_eq!(
        kinds(&c.fixes),
        [
            FixKind::ScalarToString,
            FixKind::KeyCaseFixed,
            FixKind::UnknownKeyDropped
        ]
    );
    assert_eq!(c.fixes[1].path, "/work/zip");
}

#[test]
fn recursive_refs_terminate() {
    let t = tool(json!({
        "$defs": {"Node": {"type": "object", "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
        "$ref": "#/$defs/Node"
    }));
    let c = lax(
        &t,
        json!({"value": "1", "children": [{"value": "2", "children": [{"value": "3"}]}]}),
    );
    assert_eq!(
        c.value,
        json!({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]})
    );
    assert_eq!(c.fixes.len(), 3);
    let self_ref = tool(json!({"$ref": "#", "properties": {"a": {"type": "integer"}}}));
    let c = lax(&self_ref, json!({"a": "1"}));
    assert_eq!(c.value, json!({"a": 1}));
}

#[test]
fn all_of_properties_are_merged_for_walking() {
    let t = tool(json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}},
        {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}
    ]}));
    let c = lax(&t, json!({"a": "1", "b": "yes"}));
    assert_eq!(c.value, json!({"a": 1, "b": true}));
    assert!(c.issues.is_empty());
}

#[test]
fn nullable_any_of_with_ref() {
    let t = tool(json!({
        "type": "object",
        "properties": {"address": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]}},
        "$defs": {"Address": {"type": "object", "properties": {
            "zip": {"type": "string"}, "city": {"type": "string"}},
            "required": ["city"], "additionalProperties": false}}
    }));
    let c = lax(&t, json!({"address": null}));
    assert_eq!(c.value, json!({"address": null}));
    assert!(c.fixes.is_empty() && c.issues.is_empty());
    let c = lax(&t, json!({"address": {"zip": 1234, "town": "Oslo"}}));
    assert_eq!(c.value, json!({"address": {"zip": "1234", "city": "Oslo"}}));
    assert!(c.issues.is_empty());
    // Validation reports the non-null branch's problem, not an opaque anyOf.
    let issues = t.validate(&json!({"address": {"zip": "1"}}));
    assert_eq!(
        issue_kinds(&issues),
        [(IssueKind::MissingRequired, "/address/city")]
    );
}

#[test]
fn any_of_keeps_the_branch_that_validates_with_fewest_fixes() {
    let t = one(json!({"anyOf": [
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        {"type": "string", "format": "date"}
    ]}));
    coerces(
        &t,
        json!("01/19/2026"),
        json!("2026-01-19"),
        FixKind::DateNormalized,
    );
    let c = lax(&t, json!({"x": {"n": "4"}}));
    assert_eq!(c.value, json!({"x": {"n": 4}}));
    // Already valid for a branch: untouched.
    let s = one(json!({"anyOf": [{"type": "integer"}, {"type": "string"}]}));
    let c = lax(&s, json!({"x": "5"}));
    assert_eq!(c.value, json!({"x": "5"}));
    assert!(c.fixes.is_empty());
    // Valid for none, even after coercion: left alone and reported.
    let n = one(json!({"oneOf": [{"type": "integer", "minimum": 10}, {"type": "boolean"}]}));
    let c = lax(&n, json!({"x": "3"}));
    assert_eq!(c.value, json!({"x": "3"}));
    assert!(c.fixes.is_empty());
    assert_eq!(c.issues.len(), 1);
}

#[test]
fn type_arrays() {
    let t = one(json!({"type": ["integer", "null"]}));
    coerces(&t, json!("5"), json!(5), FixKind::StringToInteger);
    let c = lax(&t, json!({"x": null}));
    assert!(c.fixes.is_empty() && c.issues.is_empty());
    let b = one(json!({"type": ["boolean", "string"]}));
    let c = lax(&b, json!({"x": 5}));
    assert_eq!(c.value, json!({"x": "5"}));
}

// ---- strict mode ----

#[test]
fn strict_mode_changes_nothing() {
    let args = json!({"input": {"City": "Oslo", "days": "2", "units": "Celsius", "junk": null}});
    let c = with(&weather(), args.clone(), &Coercions::none());
    assert_eq!(c.value, args);
    assert!(c.fixes.is_empty());
    assert_eq!(
        issue_kinds(&c.issues),
        [
            (IssueKind::MissingRequired, "/city"),
            (IssueKind::UnknownKey, "/input")
        ]
    );
}

// ---- custom validators ----

/// "A date at most 30 days ahead", with today from the caller's state.
fn at_most_30_days_ahead(args: &Value, ctx: &ValidationContext<'_>) -> Vec<Issue> {
    let Some(today) = ctx.state.and_then(|s| s["today"].as_str()) else {
        return vec![Issue::new(
            IssueKind::Custom,
            "",
            "no date for today in the state",
        )];
    };
    let Some(date) = args["date"].as_str() else {
        return Vec::new();
    };
    let days = |d: &str| -> i64 {
        // Days since 0000-03-01, enough to compare dates.
        let y: i64 = d[0..4].parse().unwrap();
        let m: i64 = d[5..7].parse().unwrap();
        let day: i64 = d[8..10].parse().unwrap();
        let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
        365 * y + y / 4 - y / 100 + y / 400 + (153 * m + 2) / 5 + day
    };
    if days(date) - days(today) > 30 {
        vec![
            Issue::new(
                IssueKind::Custom,
                "/date",
                "the date must be at most 30 days from today",
            )
            .got(json!(date))
            .expected(format!("on or before 30 days after {today}")),
        ]
    } else {
        Vec::new()
    }
}

fn booking() -> CompiledTool {
    CompiledTool::compile(
        "book",
        "Book a table.",
        &json!({"type": "object", "properties": {"date": {"type": "string", "format": "date"},
            "party": {"type": "integer"}}, "required": ["date"], "additionalProperties": false}),
    )
    .unwrap()
    .with_validator(Arc::new(at_most_30_days_ahead))
}

#[test]
fn custom_validator_runs_after_the_schema_passes() {
    let t = booking();
    let state = json!({"today": "2026-01-10"});
    let mut cx = ValidationContext::new("book", Phase::Initial);
    cx.state = Some(&state);
    // Fast path (valid as sent) runs it too.
    let c = t.check(json!({"date": "2026-03-01"}), &Coercions::default(), &cx);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::Custom, "/date")]);
    // After coercion: the normalised date is what the validator sees.
    let c = t.check(
        json!({"date": "02/01/2026", "party": "2"}),
        &Coercions::default(),
        &cx,
    );
    assert_eq!(c.value, json!({"date": "2026-02-01", "party": 2}));
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    let c = t.check(json!({"date": "03/15/2026"}), &Coercions::default(), &cx);
    assert_eq!(issue_kinds(&c.issues), [(IssueKind::Custom, "/date")]);
    // Not run while the schema fails.
    let c = t.check(json!({"party": 2}), &Coercions::default(), &cx);
    assert_eq!(
        issue_kinds(&c.issues),
        [(IssueKind::MissingRequired, "/date")]
    );
}

// ---- determinism ----

#[test]
fn check_is_deterministic() {
    let args = json!({"customer": "42", "currency": "eur", "notes": "x", "items": "[{\"sku\": \"A\", \"qty\": \"2\"}]",
        "due_date": "01/02/2026", "notify-customer": "yes", "zzz": null});
    let a = lax(&invoice(), args.clone());
    let b = lax(&invoice(), args);
    assert_eq!(a, b);
    let mut sorted = a.issues.clone();
    toolmend::issue::sort_issues(&mut sorted);
    assert_eq!(a.issues, sorted);
    assert_eq!(
        a.value,
        json!({"customer_id": 42, "currency": "EUR", "items": [{"sku": "A", "quantity": 2}],
            "due_date": "2026-01-02", "notify_customer": true})
    );
    assert!(a.issues.is_empty(), "{:?}", a.issues);
}

// ---- toolbox ----

#[test]
fn toolbox_from_tools_and_unknown_tool_issue() {
    let b = Toolbox::from_tools([weather(), invoice()]).unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(
        b.names().collect::<Vec<_>>(),
        ["get_weather", "create_invoice"]
    );
    let e = Toolbox::from_tools([weather(), weather()]).unwrap_err();
    assert!(matches!(e, Error::DuplicateTool(ref n) if n == "get_weather"));
    let issue = b.unknown_tool_issue("get_wether");
    assert_eq!(issue.kind, IssueKind::UnknownTool);
    assert_eq!(
        issue.allowed,
        [json!("get_weather"), json!("create_invoice")]
    );
    assert_eq!(
        issue.suggestion.as_deref(),
        Some("did you mean \"get_weather\"?")
    );
    assert_eq!(b.unknown_tool_issue("send_fax").suggestion, None);
}

// ---- bounds ----

#[test]
fn deep_recursive_any_of_input_stays_fast() {
    let t = tool(json!({
        "$defs": {"Node": {"anyOf": [
            {"type": "string"},
            {"type": "object", "properties": {
                "n": {"type": "integer"},
                "c": {"$ref": "#/$defs/Node"}
            }, "additionalProperties": false}
        ]}},
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}}
    }));
    let nested = |depth: usize| {
        let mut v = json!({"n": "0", "extra_key": 1});
        for i in 1..depth {
            v = json!({"n": i.to_string(), "cc": v});
        }
        json!({ "root": v })
    };
    // Twice the depth: polynomial work grows a few times (8x if cubic), exponential work
    // (each level's branches tried under every choice made above it) 2^30 times. The
    // allocations are counted (deterministic), not timed.
    let (half, full) = (nested(30), nested(60));
    let (_, w30) = crate::work::measure(|| lax(&t, half));
    let (c, w60) = crate::work::measure(|| lax(&t, full));
    assert!(
        w60.allocations < 16 * w30.allocations.max(64),
        "depth 30: {w30:?}, depth 60: {w60:?}"
    );
    // Every level was coerced ("cc" -> "c", "5" -> 5) and the extra key dropped.
    assert!(c.issues.is_empty(), "{:?}", c.issues.first());
    assert_eq!(c.value["root"]["n"], json!(59));
    assert_eq!(c.fixes.len(), 59 * 2 + 2);
}

#[test]
fn schemas_that_recurse_without_the_value_getting_deeper_terminate() {
    let schema = json!({
        "$defs": {
            "N": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]},
            "M": {"anyOf": [{"$ref": "#/$defs/M"}, {"type": "integer"}, {"type": "boolean"}]}
        },
        "properties": {"n": {"$ref": "#/$defs/N"}, "m": {"$ref": "#/$defs/M"}}
    });
    // Whether or not the validator accepts such a schema, checking must not hang.
    if let Ok(t) = CompiledTool::compile("loop", "", &schema) {
        let c = lax(&t, json!({"n": "x", "m": "5"}));
        assert_eq!(c, lax(&t, json!({"n": "x", "m": "5"})));
    }
}

#[test]
fn chatter_keys_are_dropped_not_renamed_into_a_near_property() {
    // `note` beside an invoice's `notes` is the model talking about the call, not its notes.
    let t = tool(json!({"type": "object", "properties": {
        "customer_id": {"type": "integer"}, "notes": {"type": "string"}},
        "required": ["customer_id"], "additionalProperties": false}));
    let c = lax(
        &t,
        json!({"customer_id": 7, "note": "assumed defaults", "reasoning": "asked"}),
    );
    assert_eq!(c.value, json!({"customer_id": 7}));
    assert_eq!(kinds(&c.fixes), [FixKind::UnknownKeyDropped; 2]);
    // Named exactly (up to case style), a chatter-like property is still matched.
    let t = tool(
        json!({"type": "object", "properties": {"note": {"type": "string"}},
        "additionalProperties": false}),
    );
    let c = lax(&t, json!({"Note": "x"}));
    assert_eq!(c.value, json!({"note": "x"}));
}

// ---- keys the schema gives a home (issue 15, deliver 5) ----

/// A parcel tool, with names unlike the ones the other tests use.
fn parcel() -> CompiledTool {
    CompiledTool::compile(
        "ship_parcel",
        "Ships a parcel.",
        &json!({"type": "object", "properties": {
            "parcel_ref": {"type": "string", "description": "The parcel's tracking reference"},
            "courier_instructions": {"type": "string"},
            "shipping_label": {"type": "string"},
            "dest": {"type": "string", "description": "City of arrival"},
            "weight_kg": {"type": "number"}},
            "required": ["parcel_ref"], "additionalProperties": false}),
    )
    .unwrap()
}

fn fix_of(c: &Checked, kind: FixKind) -> &Fix {
    c.fixes
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} in {:?}", c.fixes))
}

#[test]
fn a_key_naming_the_head_word_is_renamed_and_marked_unsafe() {
    // `instructions` for `courier_instructions`, `labels` (a plural) for `shipping_label`.
    let c = lax(
        &parcel(),
        json!({"parcel_ref": "PX-9", "instructions": "ring twice", "labels": "fragile"}),
    );
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    assert_eq!(
        c.value,
        json!({"parcel_ref": "PX-9", "courier_instructions": "ring twice", "shipping_label": "fragile"})
    );
    assert_eq!(kinds(&c.fixes), [FixKind::KeyRenamedByTokens; 2]);
    assert!(c.fixes.iter().all(|f| f.safety() == Safety::Unsafe));
    assert_eq!(
        fix_of(&c, FixKind::KeyRenamedByTokens).detail,
        "\"instructions\" -> \"courier_instructions\""
    );
}

#[test]
fn a_key_found_in_a_description_is_renamed_and_marked_unsafe() {
    let c = lax(
        &parcel(),
        json!({"parcel_ref": "PX-9", "arrival_city": "Lyon"}),
    );
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    assert_eq!(c.value, json!({"parcel_ref": "PX-9", "dest": "Lyon"}));
    let f = fix_of(&c, FixKind::KeyRenamedByDescription);
    assert_eq!(f.path, "/dest");
    assert_eq!(f.safety(), Safety::Unsafe);
}

#[test]
fn the_one_missing_required_key_takes_the_one_unknown_key_of_its_type() {
    // `tracking_id` shares no word with `parcel_ref`, but it is the one unknown key and
    // `parcel_ref` the one required key missing; the value is a string, as it must be.
    let c = lax(&parcel(), json!({"tracking_id": "PX-10", "weight_kg": 2.5}));
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    assert_eq!(c.value, json!({"parcel_ref": "PX-10", "weight_kg": 2.5}));
    let f = fix_of(&c, FixKind::KeyRenamedByStructure);
    assert_eq!(f.safety(), Safety::Unsafe);
    assert_eq!(f.detail, "\"tracking_id\" -> \"parcel_ref\"");

    // Not when the value is of another type (it would take a coercion on top).
    let c = lax(&parcel(), json!({"tracking_id": 10}));
    assert!(
        !c.fixes
            .iter()
            .any(|f| f.kind == FixKind::KeyRenamedByStructure)
    );
    assert!(issue_kinds(&c.issues).contains(&(IssueKind::MissingRequired, "/parcel_ref")));

    // Not with two unknown keys left, nor two required keys missing: no single reading.
    let c = lax(&parcel(), json!({"tracking_id": "PX-10", "colour": "red"}));
    assert!(
        !c.fixes
            .iter()
            .any(|f| f.kind == FixKind::KeyRenamedByStructure)
    );
    let two = tool(json!({"type": "object", "properties": {
        "origin_iata": {"type": "string"}, "target_iata": {"type": "string"}},
        "required": ["origin_iata", "target_iata"], "additionalProperties": false}));
    let c = lax(&two, json!({"start_port": "LHR"}));
    assert_eq!(c.value, json!({"start_port": "LHR"}));
    assert!(c.fixes.is_empty(), "{:?}", c.fixes);

    // Nor for a key that only talks about the call.
    let c = lax(&parcel(), json!({"reasoning": "the user wants it shipped"}));
    assert!(
        !c.fixes
            .iter()
            .any(|f| f.kind == FixKind::KeyRenamedByStructure)
    );

    // Nor for a key whose name says it holds no argument (a placeholder, a leftover, a
    // private `_` key): the required key stays missing, the key stays unknown.
    for key in [
        "unknown",
        "extra",
        "Placeholder",
        "unused",
        "ignored",
        "_scratch",
    ] {
        let c = lax(&parcel(), json!({key: "PX-10"}));
        assert_eq!(c.value, json!({key: "PX-10"}), "{key}");
        assert!(
            issue_kinds(&c.issues).contains(&(IssueKind::MissingRequired, "/parcel_ref")),
            "{key}: {:?}",
            c.issues
        );
        assert!(
            !c.fixes
                .iter()
                .any(|f| f.kind == FixKind::KeyRenamedByStructure),
            "{key}"
        );
    }
}

#[test]
fn a_wrapper_given_as_python_literal_text_is_read_and_unwrapped() {
    // MiniCPM 5 writes `<param name="properties">{'phone_number': '555'}</param>`: the
    // wrapper's value arrives as text in Python's literal syntax, not JSON.
    let t = tool(json!({"type": "object", "properties": {
        "phone_number": {"type": "string"}}, "required": ["phone_number"]}));
    let c = lax(
        &t,
        json!({"properties": "{'phone_number': '555-123-2002'}"}),
    );
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    assert_eq!(c.value, json!({"phone_number": "555-123-2002"}));
    let f = fix_of(&c, FixKind::ArgumentsUnwrapped);
    assert!(
        f.detail.contains("its text read as arguments"),
        "{}",
        f.detail
    );
    assert!(
        !c.fixes
            .iter()
            .any(|f| f.kind == FixKind::KeyRenamedByStructure)
    );

    // Text that holds no object of these arguments is not unwrapped, and a wrapper key is
    // never the home structure gives a missing key: its text was no one argument's value.
    for text in ["{'page': 2}", "call me at 555", "{'phone_number': '555"] {
        let c = lax(&t, json!({"properties": text}));
        assert_eq!(c.value, json!({"properties": text}), "{text}");
        assert!(
            issue_kinds(&c.issues).contains(&(IssueKind::MissingRequired, "/phone_number")),
            "{text}: {:?}",
            c.issues
        );
    }
    // An ordinary key in the same place still takes the one missing key.
    let c = lax(&t, json!({"telephone": "555-123-2002"}));
    assert_eq!(c.value, json!({"phone_number": "555-123-2002"}));
}

#[test]
fn two_homes_for_a_key_is_feedback_naming_both() {
    let closed = tool(json!({"type": "object", "properties": {
        "billing_street": {"type": "string"}, "delivery_street": {"type": "string"},
        "customer": {"type": "string"}},
        "required": ["customer"], "additionalProperties": false}));
    let c = lax(&closed, json!({"customer": "Ada", "street": "Elm Row 4"}));
    // Kept and reported, never dropped.
    assert_eq!(c.value, json!({"customer": "Ada", "street": "Elm Row 4"}));
    assert!(c.fixes.is_empty(), "{:?}", c.fixes);
    let issue = c.issues.iter().find(|i| i.path == "/street").unwrap();
    assert_eq!(issue.kind, IssueKind::UnknownKey);
    let s = issue.suggestion.as_deref().unwrap();
    assert!(
        s.contains("\"billing_street\"") && s.contains("\"delivery_street\""),
        "{s}"
    );

    // An open schema would accept the key and the value would reach neither: an issue too.
    let open = tool(json!({"type": "object", "properties": {
        "billing_street": {"type": "string"}, "delivery_street": {"type": "string"}}}));
    let c = lax(&open, json!({"street": "Elm Row 4"}));
    let issue = c.issues.iter().find(|i| i.path == "/street").unwrap();
    assert_eq!(issue.kind, IssueKind::UnknownKey);
    assert_eq!(
        issue.allowed,
        [json!("billing_street"), json!("delivery_street")]
    );
}

#[test]
fn an_unknown_key_with_a_home_is_not_dropped_and_a_dropped_key_is_lossy() {
    // `shipping` could be `shipping_label` only by a weak reading whose type does not fit
    // (a number for a string would take a coercion): kept and reported, not dropped.
    let c = lax(
        &parcel(),
        json!({"parcel_ref": "PX-9", "label": {"text": "x"}}),
    );
    assert!(
        !c.fixes.iter().any(|f| f.kind == FixKind::UnknownKeyDropped),
        "{:?}",
        c.fixes
    );
    let issue = c.issues.iter().find(|i| i.path == "/label").unwrap();
    assert_eq!(
        issue.suggestion.as_deref(),
        Some("did you mean \"shipping_label\"?")
    );

    // A key no property could be is dropped, and that is recorded as a loss.
    let c = lax(
        &parcel(),
        json!({"parcel_ref": "PX-9", "debug_trace": true}),
    );
    assert!(c.issues.is_empty());
    assert_eq!(kinds(&c.fixes), [FixKind::UnknownKeyDropped]);
    assert_eq!(c.fixes[0].safety(), Safety::Lossy);
}

#[test]
fn case_and_spelling_fixes_of_keys_are_safe() {
    let c = lax(&parcel(), json!({"ParcelRef": "PX-9", "wieght_kg": 1.0}));
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    assert_eq!(
        kinds(&c.fixes),
        [FixKind::KeyCaseFixed, FixKind::KeySpellingFixed]
    );
    assert!(c.fixes.iter().all(|f| f.safety() == Safety::Safe));
    // A synonym is an alias, not a spelling: unsafe.
    let c = lax(&weather(), json!({"town": "Oslo"}));
    assert_eq!(kinds(&c.fixes), [FixKind::KeyRenamed]);
    assert_eq!(c.fixes[0].safety(), Safety::Unsafe);
}

#[test]
fn a_nested_key_no_field_takes_is_an_issue_in_a_valid_call_too() {
    // A nested pydantic model's schema: `$defs`, properties listed, nothing said of other
    // keys. The call is valid, so only the fast path's gate sends it to the walk.
    let t = tool(json!({
        "$defs": {"Address": {"type": "object", "properties": {
            "city": {"type": "string"}, "postcode": {"type": "string"}},
            "required": ["city"]}},
        "properties": {"to": {"$ref": "#/$defs/Address"},
                       "stops": {"type": "array", "items": {"$ref": "#/$defs/Address"}}},
        "required": ["to"],
        "additionalProperties": false
    }));
    let c = lax(&t, json!({"to": {"city": "Oslo", "floor": 3}}));
    assert_eq!(c.value, json!({"to": {"city": "Oslo", "floor": 3}}));
    assert_eq!(
        issue_kinds(&c.issues),
        [(IssueKind::UnknownKey, "/to/floor")]
    );
    let c = lax(
        &t,
        json!({"to": {"city": "Oslo"}, "stops": [{"city": "Bergen", "zip": "5003"}]}),
    );
    assert_eq!(
        issue_kinds(&c.issues),
        [(IssueKind::UnknownKey, "/stops/0/zip")]
    );
    // A key that names a field is renamed there, as at the top.
    let c = lax(&t, json!({"to": {"city": "Oslo", "post_code": "0150"}}));
    assert_eq!(c.value, json!({"to": {"city": "Oslo", "postcode": "0150"}}));
    assert!(c.issues.is_empty(), "{:?}", c.issues);
    // With coercion off the key is still reported, not lost.
    let c = with(
        &t,
        json!({"to": {"city": "Oslo", "floor": 3}}),
        &Coercions::none(),
    );
    assert_eq!(
        issue_kinds(&c.issues),
        [(IssueKind::UnknownKey, "/to/floor")]
    );
    assert!(c.fixes.is_empty());
    // A clean call passes as sent; so does one under a nested object that welcomes keys.
    let c = lax(&t, json!({"to": {"city": "Oslo"}}));
    assert!(c.issues.is_empty() && c.fixes.is_empty(), "{:?}", c.issues);
    let open = tool(json!({"properties": {"to": {"type": "object",
        "properties": {"city": {"type": "string"}}, "additionalProperties": true}}}));
    let c = lax(&open, json!({"to": {"city": "Oslo", "floor": 3}}));
    assert!(c.issues.is_empty() && c.fixes.is_empty(), "{:?}", c.issues);
    assert!(open.passes_as_sent(
        &json!({"to": {"city": "Oslo", "floor": 3}}),
        &Coercions::default()
    ));
}

#[test]
fn a_tool_whose_types_are_named_as_in_python_compiles_and_types_its_values() {
    use toolmend::{
        MendOptions,
        mend::{Outcome, mend_call},
    };
    let tool = CompiledTool::compile(
        "typed",
        "",
        &json!({"type": "object", "properties": {
            "i": {"type": "int"}, "u": {"type": "uint32"}, "l": {"type": "list"}},
            "additionalProperties": false}),
    )
    .unwrap();
    let m = mend_call(
        r#"{"i": "-7", "u": 3, "l": "[1, 2]"}"#,
        &tool,
        &MendOptions::default(),
    );
    assert_eq!(m.calls[0].outcome, Outcome::Repaired, "{m:?}");
    assert_eq!(
        m.calls[0].arguments,
        Some(json!({"i": -7, "u": 3, "l": [1, 2]}))
    );
    // A schema invalid for another reason is still refused, with JSON Schema's error.
    let e = CompiledTool::compile("bad", "", &json!({"type": "int", "minimum": "x"})).unwrap_err();
    assert!(e.to_string().contains("invalid JSON Schema"), "{e}");
}
