//! Repair: one test per defect category, with our own cases.

use serde_json::{Value, json};
use toolmend::{
    FixKind, RepairOptions,
    repair::{Repaired, repair},
};

fn ok(raw: &str) -> Repaired {
    match repair(raw, &RepairOptions::default()) {
        Ok(r) => r,
        Err(e) => panic!("repair failed for {raw:?}: {e}"),
    }
}

/// The single call's arguments and its fix kinds.
fn one(raw: &str) -> (Value, Vec<FixKind>) {
    let r = ok(raw);
    assert_eq!(r.calls.len(), 1, "expected one call from {raw:?}: {r:?}");
    let c = &r.calls[0];
    (
        c.arguments.clone(),
        c.fixes.iter().map(|f| f.kind).collect(),
    )
}

fn assert_fixed(raw: &str, expected: Value, kind: FixKind) {
    let (v, kinds) = one(raw);
    assert_eq!(v, expected, "value for {raw:?}");
    assert!(
        kinds.contains(&kind),
        "{kind:?} not in {kinds:?} for {raw:?}"
    );
}

#[test]
fn valid_json_takes_the_fast_path_unchanged() {
    let raw =
        r#"{"q": "True, False and None", "n": 1.5, "a": [1, {"b": null}], "s": "it's \"ok\"\n"}"#;
    let (v, kinds) = one(raw);
    assert_eq!(v, serde_json::from_str::<Value>(raw).unwrap());
    assert!(kinds.is_empty());
}

#[test]
fn single_quotes_and_python_reprs() {
    assert_fixed(
        "{'city': 'Oslo', 'n': 2}",
        json!({"city": "Oslo", "n": 2}),
        FixKind::SingleQuotes,
    );
    assert_fixed(
        "{'ok': True, 'gone': None, 'no': False, 'name': \"Ana's\"}",
        json!({"ok": true, "gone": null, "no": false, "name": "Ana's"}),
        FixKind::PythonLiteral,
    );
    // An apostrophe inside a single-quoted string is content, not the end.
    assert_fixed(
        "{'note': 'it's fine', 'x': 1}",
        json!({"note": "it's fine", "x": 1}),
        FixKind::SingleQuotes,
    );
    assert_fixed(
        r"{'a': 'don\'t'}",
        json!({"a": "don't"}),
        FixKind::SingleQuotes,
    );
}

#[test]
fn commas_trailing_missing_and_doubled() {
    assert_fixed(
        r#"{"a": [1, 2,], "b": 3,}"#,
        json!({"a": [1, 2], "b": 3}),
        FixKind::TrailingComma,
    );
    assert_fixed(
        "{\"a\": \"x\"\n \"b\": 2\n \"c\": [1 2]}",
        json!({"a": "x", "b": 2, "c": [1, 2]}),
        FixKind::MissingComma,
    );
    assert_fixed(
        r#"{"a": 1,, "b": 2}"#,
        json!({"a": 1, "b": 2}),
        FixKind::TrailingComma,
    );
}

#[test]
fn comments_of_every_style() {
    let raw =
        "{\n  // the city\n  \"city\": \"Rome\", # hash\n  /* block */ \"days\": 4  // inline\n}";
    assert_fixed(
        raw,
        json!({"city": "Rome", "days": 4}),
        FixKind::CommentRemoved,
    );
    let raw = "{\"tags\": [  # list\n  \"a\"  # first\n ], \"n\": 1}";
    assert_fixed(raw, json!({"tags": ["a"], "n": 1}), FixKind::CommentRemoved);
    // A hash inside a string is text.
    let (v, _) = one(r##"{"issue": "#42", "x": "a # b"}"##);
    assert_eq!(v, json!({"issue": "#42", "x": "a # b"}));
}

#[test]
fn unquoted_keys_and_bare_words() {
    assert_fixed(
        "{city: \"Lima\", $ref_id: 7, days_2: 3}",
        json!({"city": "Lima", "$ref_id": 7, "days_2": 3}),
        FixKind::UnquotedKey,
    );
    assert_fixed(
        "{\"mode\": auto, \"n\": 1}",
        json!({"mode": "auto", "n": 1}),
        FixKind::UnquotedString,
    );
}

#[test]
fn truncation_follows_the_salvage_conventions() {
    // Inside the last string: keep the prefix.
    let (v, k) = one(r#"{"a": 1, "note": "Meet at the sta"#);
    assert_eq!(v, json!({"a": 1, "note": "Meet at the sta"}));
    assert!(k.contains(&FixKind::TruncatedString));
    // Inside a key: drop that member.
    let (v, k) = one(r#"{"a": 1, "ta"#);
    assert_eq!(v, json!({"a": 1}));
    assert!(k.contains(&FixKind::TruncatedMemberDropped));
    // Right after the colon: drop that member.
    let (v, _) = one(r#"{"a": 1, "b": "#);
    assert_eq!(v, json!({"a": 1}));
    // Inside an array: keep complete elements only.
    let (v, _) = one(r#"{"a": 1, "tags": ["x", "y", "z"#);
    assert_eq!(v, json!({"a": 1, "tags": ["x", "y"]}));
    // Inside a literal: complete it.
    let (v, k) = one(r#"{"a": 1, "ok": fal"#);
    assert_eq!(v, json!({"a": 1, "ok": false}));
    assert!(k.contains(&FixKind::TruncatedLiteral));
    // Only closing braces missing, after a complete member: nothing was cut.
    let (v, k) = one("{\"a\": {\"b\": [1, 2]");
    assert_eq!(v, json!({"a": {"b": [1, 2]}}));
    assert_eq!(k, vec![FixKind::ClosingBracesAdded]);
    assert!(!ok("{\"a\": 350").calls[0].is_lossy());
    assert!(!ok("{\"a\": true\n").calls[0].is_lossy());
    // More was coming (a `,`, an open array, a number or a literal cut short, a string
    // read past an inner quote): lossy.
    for cut in [
        "{\"a\": 1,",
        "{\"a\": [1, 2",
        "{\"a\": 35.",
        "{\"a\": 1e",
        "{\"a\": {",
        "{\"a\": \"x\",\"c\"",
    ] {
        let call = &ok(cut).calls[0];
        assert!(call.is_lossy(), "{cut}: {:?}", call.fixes);
        assert!(
            call.fixes
                .iter()
                .all(|f| f.kind != FixKind::ClosingBracesAdded),
            "{cut}"
        );
    }
}

#[test]
fn truncation_is_marked_lossy_and_nothing_else_is() {
    assert!(ok(r#"{"city": "Par"#).calls[0].is_lossy());
    assert!(ok(r#"{"city": "Paris", "days": [1, 2"#).calls[0].is_lossy());
    assert!(!ok("{'city': 'Paris',}").calls[0].is_lossy());
    assert!(!ok("```json\n{\"city\": \"Paris\"}\n```").calls[0].is_lossy());
}

#[test]
fn strings_with_raw_newlines_inner_quotes_and_backslashes() {
    assert_fixed(
        "{\"body\": \"line one\nline two\ttab\"}",
        json!({"body": "line one\nline two\ttab"}),
        FixKind::ControlCharEscaped,
    );
    assert_fixed(
        r#"{"subject": "Mark it "urgent" please", "to": "a@b.c"}"#,
        json!({"subject": "Mark it \"urgent\" please", "to": "a@b.c"}),
        FixKind::InnerQuoteEscaped,
    );
    // `\U` shows the path's backslashes were not escaped: its `\n` is one too.
    assert_fixed(
        r#"{"path": "C:\Users\dev\new", "re": "\d+\s"}"#,
        json!({"path": "C:\\Users\\dev\\new", "re": "\\d+\\s"}),
        FixKind::EscapesKeptLiteral,
    );
}

#[test]
fn escapes_are_read_one_way_within_a_string() {
    // A regex: `\s` and `\w` prove the backslashes single, so `\b` is a word boundary.
    assert_fixed(
        r#"{"pattern": "\bclass\s+\w+\b"}"#,
        json!({"pattern": "\\bclass\\s+\\w+\\b"}),
        FixKind::EscapesKeptLiteral,
    );
    // Raw line breaks: nothing in the string was escaped for JSON; `\"` stays a quote.
    assert_fixed(
        "{\"content\": \"echo -e \\\"a\\nb\\\" > f\nsed 's/\\t/,/g' f\n\"}",
        json!({"content": "echo -e \"a\\nb\" > f\nsed 's/\\t/,/g' f\n"}),
        FixKind::EscapesKeptLiteral,
    );
    // Quotes and line breaks escaped, only the regex's backslashes single: `\n` is JSON's.
    let (v, kinds) = one(r#"{"c": "import re\nP = re.compile(r\"\w+@\w+\")\n"}"#);
    assert_eq!(
        v,
        json!({"c": "import re\nP = re.compile(r\"\\w+@\\w+\")\n"})
    );
    assert!(!kinds.contains(&FixKind::EscapesKeptLiteral), "{kinds:?}");
    // A line break by its place (`\nFROM`, the end) keeps `\n` JSON's beside `\d`.
    let (v, _) = one(r#"{"q": "SELECT 1\nFROM t WHERE p ~ '\d+'\n"}"#);
    assert_eq!(v, json!({"q": "SELECT 1\nFROM t WHERE p ~ '\\d+'\n"}));
    // Without proof, `\n` and `\t` are JSON's; another string's proof does not count.
    let (v, kinds) = one(r#"{"a": "x\ty\nz", "b": "D:\Users\u"}"#);
    assert_eq!(v, json!({"a": "x\ty\nz", "b": "D:\\Users\\u"}));
    assert!(!kinds.contains(&FixKind::EscapesKeptLiteral), "{kinds:?}");
    // One line with an invalid escape and no `\n`: nothing shows that its control
    // characters were escaped, so `\t` and `\r` are as written, like `\b`.
    assert_fixed(
        r#"{"cmd": "awk '/\tWARN\[/' x.log", "re": "\r?\d+"}"#,
        json!({"cmd": "awk '/\\tWARN\\[/' x.log", "re": "\\r?\\d+"}),
        FixKind::EscapesKeptLiteral,
    );
    // With a `\n` (line breaks escaped), a `\t` beside `\d` is JSON's: indentation.
    let (v, _) = one(r#"{"c": "func f() {\n\tre := regexp.MustCompile(`\d+`)\n}"}"#);
    assert_eq!(
        v,
        json!({"c": "func f() {\n\tre := regexp.MustCompile(`\\d+`)\n}"})
    );
    // Unicode escapes, a surrogate pair included, read the same either way.
    let (v, _) = one(r#"{"p": "C:\Users\new \u00e9\ud83d\ude00"}"#);
    assert_eq!(v, json!({"p": "C:\\Users\\new é😀"}));
}

#[test]
fn the_second_reading_of_a_string_stays_linear() {
    let unit = r#"\bword\s+"#;
    let text = |n: usize| format!("{{\"p\": \"{}\"}}", unit.repeat(n));
    let (small, big) = (text(2_000), text(20_000));
    let cost = |t: &str| {
        let start = std::time::Instant::now();
        for _ in 0..5 {
            ok(t);
        }
        start.elapsed()
    };
    let (s, b) = (cost(&small), cost(&big));
    assert_eq!(
        one(&small).0["p"].as_str().unwrap().len(),
        2_000 * unit.len()
    );
    assert!(b < s * 30, "10x input took {b:?} vs {s:?}");
}

#[test]
fn smart_quotes_and_non_finite_numbers_and_number_quirks() {
    assert_fixed(
        "{“city”: “Kyiv”, ‘n’: 2}",
        json!({"city": "Kyiv", "n": 2}),
        FixKind::SmartQuotes,
    );
    assert_fixed(
        r#"{"a": NaN, "b": -Infinity, "c": Infinity}"#,
        json!({"a": null, "b": null, "c": null}),
        FixKind::NonFiniteNumber,
    );
    assert_fixed(
        r#"{"a": 12., "b": .5, "c": +3, "d": 1_000, "e": 0x1F}"#,
        json!({"a": 12, "b": 0.5, "c": 3, "d": 1000, "e": 31}),
        FixKind::NumberNormalized,
    );
    // Leading zeros are an identifier more often than a number: kept as text.
    let (v, _) = one(r#"{"zip": 01234}"#);
    assert_eq!(v, json!({"zip": "01234"}));
}

#[test]
fn duplicate_keys_keep_the_last_and_are_recorded() {
    // Two different values: the last wins, but a reading was chosen (not safe). On the
    // fast path (valid JSON) too.
    assert_fixed(
        r#"{"a": 1, "b": 2, "a": 3}"#,
        json!({"a": 3, "b": 2}),
        FixKind::DuplicateKeyConflict,
    );
    assert_fixed(
        r#"{'a': 1, 'a': 2}"#,
        json!({"a": 2}),
        FixKind::DuplicateKeyConflict,
    );
    assert_eq!(
        FixKind::DuplicateKeyConflict.safety(),
        toolmend::Safety::Unsafe
    );
    // The same value twice loses nothing: safe.
    assert_fixed(
        r#"{"a": 1, "b": 2, "a": 1}"#,
        json!({"a": 1, "b": 2}),
        FixKind::DuplicateKey,
    );
    assert_fixed(
        r#"{'a': 1, 'a': 1}"#,
        json!({"a": 1}),
        FixKind::DuplicateKey,
    );
}

#[test]
fn braces_missing_extra_and_mismatched() {
    assert_fixed(
        "\"city\": \"Quito\",\n\"days\": 2",
        json!({"city": "Quito", "days": 2}),
        FixKind::OuterBracesAdded,
    );
    assert_fixed(
        "city: 'Quito', days: 2",
        json!({"city": "Quito", "days": 2}),
        FixKind::OuterBracesAdded,
    );
    assert_fixed(
        r#"{"a": 1}}]"#,
        json!({"a": 1}),
        FixKind::ExtraClosingRemoved,
    );
    assert_fixed(
        r#"{"a": [1, 2}"#,
        json!({"a": [1, 2]}),
        FixKind::MismatchedBracket,
    );
    // After a quote, a closer of the wrong kind is read as the right one.
    assert_fixed(
        r#"{"a": "x"]"#,
        json!({"a": "x"}),
        FixKind::MismatchedBracket,
    );
    assert_fixed(
        r#"{"a": ["x"}"#,
        json!({"a": ["x"]}),
        FixKind::MismatchedBracket,
    );
    // A quote, then one more and the closers to the end: the string's last quote and its
    // closer, not a comma missing before a key cut off (a key holds no closers of its own).
    let (v, kinds, lossy) = kinds_and_lossy(r#"{"e": [{"a": "x", "b": "say "hi""}]}"#);
    assert_eq!(v, json!({"e": [{"a": "x", "b": "say \"hi\""}]}));
    assert!(
        !lossy && kinds.contains(&FixKind::InnerQuoteEscaped),
        "{kinds:?}"
    );
    // A key cut off is still one.
    let (v, _, lossy) = kinds_and_lossy(r#"{"a": "x" "b"#);
    assert_eq!(v, json!({"a": "x"}));
    assert!(lossy);
}

#[test]
fn envelopes_think_fence_prose_tokens() {
    assert_fixed(
        "<think>The user wants {city}. I'll call it.</think>\n{\"city\": \"Cairo\"}",
        json!({"city": "Cairo"}),
        FixKind::ThinkingStripped,
    );
    // A closing tag whose opener was in the prompt.
    assert_fixed(
        "reasoning about {x} here</think>{\"city\": \"Cairo\"}",
        json!({"city": "Cairo"}),
        FixKind::ThinkingStripped,
    );
    assert_fixed(
        "Here you go:\n```json\n{\"city\": \"Cairo\"}\n```\nAnything else?",
        json!({"city": "Cairo"}),
        FixKind::FenceStripped,
    );
    assert_fixed(
        "Sure! I will call the tool with {\"city\": \"Cairo\"} now.",
        json!({"city": "Cairo"}),
        FixKind::ProseStripped,
    );
    assert_fixed(
        "<|im_start|>assistant\n{\"city\": \"Cairo\"}<|im_end|>",
        json!({"city": "Cairo"}),
        FixKind::SpecialTokensStripped,
    );
    // A heading with a colon is prose, not a key.
    let (v, _) = one("Arguments:\n\n{\"city\": \"Cairo\"}");
    assert_eq!(v, json!({"city": "Cairo"}));
}

#[test]
fn thinking_kept_when_asked_is_an_error() {
    let opts = RepairOptions {
        strip_thinking: false,
        ..RepairOptions::default()
    };
    let e = repair("<think>hmm</think>{\"a\": 1}", &opts).unwrap_err();
    assert!(e.reason.contains("strip_thinking"), "{e}");
}

#[test]
fn tokens_inside_string_values_are_content() {
    let raw = r#"{"content": "<think>not a leak</think> and <|im_end|>"}"#;
    let (v, kinds) = one(raw);
    assert_eq!(
        v,
        json!({"content": "<think>not a leak</think> and <|im_end|>"})
    );
    assert!(kinds.is_empty());
}

#[test]
fn double_encoded_and_overescaped() {
    assert_fixed(
        r#""{\"city\": \"Lyon\", \"days\": 2}""#,
        json!({"city": "Lyon", "days": 2}),
        FixKind::DoubleEncodedDecoded,
    );
    assert_fixed(
        r#"{\"city\": \"Lyon\", \"note\": \"a\\nb\"}"#,
        json!({"city": "Lyon", "note": "a\nb"}),
        FixKind::OverescapedQuotesUnescaped,
    );
}

#[test]
fn call_envelopes_of_open_models() {
    let r = ok(
        "<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Bern\"}}\n</tool_call>",
    );
    assert_eq!(r.calls[0].name.as_deref(), Some("weather"));
    assert_eq!(r.calls[0].arguments, json!({"city": "Bern"}));

    let r =
        ok("<|python_tag|>{\"name\": \"weather\", \"parameters\": {\"city\": \"Bern\"}}<|eom_id|>");
    assert_eq!(r.calls[0].arguments, json!({"city": "Bern"}));
    assert!(
        r.calls[0]
            .fixes
            .iter()
            .any(|f| f.kind == FixKind::PythonTagUnwrapped)
    );

    let r = ok("[TOOL_CALLS][{\"name\": \"weather\", \"arguments\": {\"city\": \"Bern\"}}]");
    assert_eq!(r.calls[0].arguments, json!({"city": "Bern"}));

    let r = ok("[TOOL_CALLS]weather[ARGS]{\"city\": \"Bern\"}");
    assert_eq!(r.calls[0].name.as_deref(), Some("weather"));
    assert_eq!(r.calls[0].arguments, json!({"city": "Bern"}));

    let r = ok(
        "{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"arguments\": \"{\\\"city\\\": \\\"Bern\\\"}\"}}",
    );
    // Valid JSON: the as-is reading comes first, the unwrapped call is the alternative.
    assert_eq!(r.alternatives[0][0].arguments, json!({"city": "Bern"}));
    assert_eq!(r.alternatives[0][0].name.as_deref(), Some("weather"));
}

#[test]
fn qwen3_xml_parameters() {
    let raw = "<tool_call>\n<function=book>\n<parameter=title>\nDune\n</parameter>\n<parameter=copies>\n2\n</parameter>\n<parameter=meta>\n{\"shelf\": \"A1\"}\n</parameter>\n</function>\n</tool_call>";
    let r = ok(raw);
    assert_eq!(r.calls[0].name.as_deref(), Some("book"));
    // Values stay text, JSON ones too; the schema step types them (a string property
    // keeps JSON text as written).
    assert_eq!(
        r.calls[0].arguments,
        json!({"title": "Dune", "copies": "2", "meta": "{\"shelf\": \"A1\"}"})
    );
}

#[test]
fn pythonic_calls() {
    let r = ok("<|python_start|>weather(city=\"Bern\", days=3, hourly=True)<|python_end|>");
    assert_eq!(r.calls[0].name.as_deref(), Some("weather"));
    assert_eq!(
        r.calls[0].arguments,
        json!({"city": "Bern", "days": 3, "hourly": true})
    );
    let r = ok("[weather(city='Bern'), time(zone='CET')]");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[1].arguments, json!({"zone": "CET"}));
    let r = ok("search(q='a, b (c)', n=2)");
    assert_eq!(r.calls[0].arguments, json!({"q": "a, b (c)", "n": 2}));
    // Positional arguments cannot be named without guessing: an error, not a guess.
    assert!(repair("weather('Bern')", &RepairOptions::default()).is_err());
}

#[test]
fn concatenated_calls_split_and_duplicates_dropped() {
    let r = ok("{\"city\": \"A\"}{\"city\": \"B\"}");
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[1].arguments, json!({"city": "B"}));
    assert!(
        r.calls[0]
            .fixes
            .iter()
            .any(|f| f.kind == FixKind::ConcatenatedCallsSplit)
    );

    let r = ok("{\"city\": \"A\", \"d\": 1}\n{\"city\": \"A\", \"d\": 1}");
    assert_eq!(r.calls.len(), 1);
    assert!(
        r.calls[0]
            .fixes
            .iter()
            .any(|f| f.kind == FixKind::DuplicateCallDropped)
    );

    // The repeat was cut off: still the same call, once.
    let r = ok("{\"city\": \"Accra\", \"d\": 1}\n\n{\"city\": \"Acc");
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].arguments, json!({"city": "Accra", "d": 1}));
    assert!(!r.calls[0].is_lossy());
}

#[test]
fn strict_mode_repairs_nothing() {
    let strict = RepairOptions::strict();
    assert!(repair(r#"{"a": 1}"#, &strict).is_ok());
    let e = repair("{'a': 1}", &strict).unwrap_err();
    assert!(e.reason.contains("not valid JSON"), "{e}");
}

#[test]
fn depth_and_size_are_bounded() {
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let e = repair(&format!("{{\"a\": {deep}}}"), &RepairOptions::default()).unwrap_err();
    assert!(e.reason.contains("nesting deeper"), "{e}");
    let opts = RepairOptions {
        max_len: 10,
        ..RepairOptions::default()
    };
    assert!(repair(r#"{"a": "0123456789"}"#, &opts).is_err());
    // Unbalanced garbage deep enough to overflow a naive recursive parser.
    assert!(repair(&"{\"a\":".repeat(100_000), &RepairOptions::default()).is_err());
}

#[test]
fn non_objects_are_errors_with_reasons() {
    for (raw, word) in [
        ("42", "number"),
        ("[]", "empty list"),
        ("", "empty"),
        ("hello there", "no JSON"),
    ] {
        let e = repair(raw, &RepairOptions::default()).unwrap_err();
        assert!(e.reason.contains(word), "{raw:?}: {e}");
    }
}

#[test]
fn fixes_point_into_the_raw_text() {
    let raw = "Sure: {'a': 1,}";
    let r = ok(raw);
    let tc = r.calls[0]
        .fixes
        .iter()
        .find(|f| f.kind == FixKind::TrailingComma)
        .unwrap();
    assert_eq!(&raw[tc.offset.unwrap()..=tc.offset.unwrap()], ",");
}

#[test]
fn regression_pythonic_keyword_with_non_ascii_name_never_panics() {
    // Found by the property tests: a keyword made of a multi-byte character
    // moved the parser into the middle of that character.
    for raw in ["f(a=<think>\n“=", "f(a=\\,𝒥=", "f(𝒥=1)", "[f(é=1)]"] {
        let _ = repair(raw, &RepairOptions::default());
    }
}

#[test]
fn regression_empty_special_token_never_panics() {
    // Found by the fuzzer: `<|>` read as a token with a negative length.
    for raw in ["<|>", "{\"a\": 1}<|>", "<||>{\"a\": 1}", "<|"] {
        let _ = repair(raw, &RepairOptions::default());
    }
    assert_eq!(ok("<||>{\"a\": 1}").calls[0].arguments, json!({"a": 1}));
}

// ---- from the review of the first version (each failed before its fix) ----

#[test]
fn regression_valid_json_that_looks_like_a_wrapper_is_read_as_is() {
    for raw in [
        r#"{"name": "Bob", "input": "hello"}"#,
        r#"{"function": "sum", "args": "1, 2, 3"}"#,
    ] {
        let r = ok(raw);
        assert_eq!(
            r.calls[0].arguments,
            serde_json::from_str::<Value>(raw).unwrap()
        );
    }
}

#[test]
fn regression_a_document_without_a_call_fails_alone() {
    let r = ok(r#"Per the docs [2], {"city": "Paris"}"#);
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
}

#[test]
fn regression_a_string_is_not_cut_at_a_quote_comma() {
    let (v, _) = one(r#"{"text": "She said "yes", and left", "n": 1}"#);
    assert_eq!(v, json!({"text": "She said \"yes\", and left", "n": 1}));
    let (v, _) = one(r#"{"msg": "set "mode": fast"}"#);
    assert_eq!(v, json!({"msg": "set \"mode\": fast"}));
}

#[test]
fn regression_headings_and_prose_calls_are_prose() {
    let (v, _) = one("Arguments: {\"city\": \"Paris\"}");
    assert_eq!(v, json!({"city": "Paris"}));
    let (v, _) = one("Note: use {\"city\": \"Paris\"}");
    assert_eq!(v, json!({"city": "Paris"}));
    // A pythonic call in prose is not a call.
    let r = ok(r#"Sure, calling print(end="") now: {"city": "Paris"}"#);
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
    let r = ok(r#"I will call f(a=1, b) now. {"city": "Paris"}"#);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
}

#[test]
fn regression_json_inside_reasoning_before_a_bare_closer_is_reasoning() {
    let r = ok(r#"maybe {"city": "Lyon"}? no.</think>{"city": "Paris"}"#);
    assert_eq!(r.calls.len(), 1);
    assert_eq!(r.calls[0].arguments, json!({"city": "Paris"}));
}

#[test]
fn regression_missing_value_before_a_bracket_and_signed_hex() {
    let (v, k) = one(r#"{"city": "Paris", "days": ]"#);
    assert_eq!(v, json!({"city": "Paris"}));
    assert!(k.contains(&FixKind::MissingValueDropped));
    let (v, _) = one(r#"{"a": 0x-5, "b": -0x10}"#);
    assert_eq!(v, json!({"a": "0x-5", "b": -16}));
    let _ = repair(r#"{"a": -0x-8000000000000000}"#, &RepairOptions::default());
}

#[test]
fn regression_qwen_call_without_close_does_not_absorb_the_next() {
    let raw = "<function=a>\n<parameter=x>\n1\n</parameter>\n<function=b>\n<parameter=y>\n2\n</parameter>\n</function>";
    let r = ok(raw);
    assert_eq!(r.calls.len(), 2);
    assert_eq!(r.calls[0].name.as_deref(), Some("a"));
    assert_eq!(r.calls[0].arguments, json!({"x": "1"}));
    assert_eq!(r.calls[1].arguments, json!({"y": "2"}));
    assert!(!r.calls[0].is_lossy());
}

#[test]
fn regression_repeats_dropped_only_when_adjacent() {
    let r = ok(r#"{"q":"a"}{"x":1}{"q":"a"}"#);
    assert_eq!(r.calls.len(), 3);
}

#[test]
fn regression_strict_accepts_valid_json_deeper_than_serde_json_allows() {
    let deep = format!("{{\"a\": {}1{}}}", "[".repeat(200), "]".repeat(200));
    let opts = RepairOptions {
        max_depth: 300,
        ..RepairOptions::strict()
    };
    assert!(repair(&deep, &opts).is_ok());
    assert!(repair(&deep, &RepairOptions::strict()).is_err());
}

#[test]
fn regression_pathological_inputs_stay_fast() {
    // Each of these took seconds (quadratic) before: at a tenth and at the full size, the
    // work must grow about 10x, not 100x.
    // (the full size, the input at a size)
    type Case = (usize, fn(usize) -> String);
    let cases: [Case; 6] = [
        (4000, |n| {
            format!(
                "[{}]",
                (0..n)
                    .map(|i| format!("{{\"a\":{i},}}"))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }),
        (20000, |n| {
            (0..n).map(|i| format!("{{\"a\":{i}}}")).collect::<String>()
        }),
        (8000, |n| format!("{}\", \"a\": ]", "{\"x\": \"".repeat(n))),
        (20000, |n| "<think>".repeat(n)),
        (40000, |n| "<function=".repeat(n)),
        (80000, |n| {
            format!(
                "{{\"a\":[{}], \"b\": \"{}\"}}",
                "1,,".repeat(n),
                "\t".repeat(n)
            )
        }),
    ];
    for (n, make) in cases {
        let (small, large) = (make(n / 10), make(n));
        crate::work::assert_linear(&large[..40], small.as_str(), large.as_str(), |s| {
            repair(s, &RepairOptions::default())
        });
    }
}

#[test]
fn regression_xml_tags_cut_at_a_character_boundary() {
    // Found by the fuzzer: a 256-byte window ended inside a multi-byte character.
    let long = "é".repeat(200);
    for raw in [
        format!("<function={long}>\n<parameter=a>\n1\n</parameter>\n</function>"),
        format!("<function=f>\n<parameter={long}>\n1\n</parameter>\n</function>"),
    ] {
        let _ = repair(&raw, &RepairOptions::default());
    }
}

// ---- issue 15: repair never loses text silently ----

/// The fixes of the single call, with their safety.
fn kinds_and_lossy(raw: &str) -> (Value, Vec<FixKind>, bool) {
    let r = ok(raw);
    assert_eq!(r.calls.len(), 1, "expected one call from {raw:?}: {r:?}");
    let c = &r.calls[0];
    (
        c.arguments.clone(),
        c.fixes.iter().map(|f| f.kind).collect(),
        c.is_lossy(),
    )
}

#[test]
fn i15_unquoted_value_runs_to_the_next_key_not_the_first_comma() {
    // Commas and blank lines inside a value without quotes are text.
    let (v, kinds, lossy) =
        kinds_and_lossy("{\"summary\": Shipped late, crate dented\n\nrefund asked}");
    assert_eq!(
        v,
        json!({"summary": "Shipped late, crate dented\n\nrefund asked"})
    );
    assert!(kinds.contains(&FixKind::UnquotedTextJoined), "{kinds:?}");
    assert!(!kinds.contains(&FixKind::GarbageSkipped), "{kinds:?}");
    assert!(!lossy);
    assert_eq!(
        FixKind::UnquotedTextJoined.safety(),
        toolmend::Safety::Unsafe
    );
    // It ends at the next key, quoted or bare, after a comma or a line break.
    assert_fixed(
        "{\"remark\": wet roads, low sun, \"priority\": 2}",
        json!({"remark": "wet roads, low sun", "priority": 2}),
        FixKind::UnquotedTextJoined,
    );
    assert_fixed(
        "{\n  remark: wet roads,\n  hail later\n  priority: 2\n}",
        json!({"remark": "wet roads,\n  hail later", "priority": 2}),
        FixKind::UnquotedTextJoined,
    );
    // A missing comma before a quoted key still ends it.
    assert_fixed(
        "{\"remark\": muddy, steep \"priority\": 2}",
        json!({"remark": "muddy, steep", "priority": 2}),
        FixKind::UnquotedTextJoined,
    );
    // One word is still an ordinary bare word (unchanged reading and fix).
    assert_fixed(
        "{\"lane\": left, \"width\": 3}",
        json!({"lane": "left", "width": 3}),
        FixKind::UnquotedString,
    );
    // Quotes, hashes and URLs inside the text are text.
    assert_fixed(
        "{\"memo\": ticket #318 says \"later\", see https://x.test/a, \"n\": 1}",
        json!({"memo": "ticket #318 says \"later\", see https://x.test/a", "n": 1}),
        FixKind::UnquotedTextJoined,
    );
    // A comment after the value is still a comment.
    assert_fixed(
        "{\"lane\": left  # for now\n, \"width\": 3}",
        json!({"lane": "left", "width": 3}),
        FixKind::CommentRemoved,
    );
}

#[test]
fn i15_unquoted_value_that_may_hide_a_member_is_lossy() {
    // `, berth 4` could be the member `berth: 4` without its colon: kept as text, lossy.
    let (v, kinds, lossy) = kinds_and_lossy("{\"cabin\": upper deck, berth 4}");
    assert_eq!(v, json!({"cabin": "upper deck, berth 4"}));
    assert!(kinds.contains(&FixKind::UnquotedTextAmbiguous), "{kinds:?}");
    assert!(lossy);
    for raw in [
        "{\"cabin\": upper deck, \"berth\" 4}",
        "{\"cabin\": upper deck\n  berth=4}",
        "{\"cabin\": upper deck, window true}",
    ] {
        let (_, kinds, lossy) = kinds_and_lossy(raw);
        assert!(
            kinds.contains(&FixKind::UnquotedTextAmbiguous) && lossy,
            "{raw:?}: {kinds:?}"
        );
    }
}

#[test]
fn i15_triple_quoted_strings_read_as_python_does() {
    assert_fixed(
        "{\"snippet\": \"\"\"print(\"ok\")\nx = 'y'\"\"\", \"lang\": \"py\"}",
        json!({"snippet": "print(\"ok\")\nx = 'y'", "lang": "py"}),
        FixKind::TripleQuotedString,
    );
    assert_fixed(
        "{'verse': '''Ode's \"first\"\nline''', 'n': 3}",
        json!({"verse": "Ode's \"first\"\nline", "n": 3}),
        FixKind::TripleQuotedString,
    );
    // Escapes mean what they mean in Python; an empty one is empty.
    assert_fixed(
        r#"{"t": """tab\there""", "e": """"""}"#,
        json!({"t": "tab\there", "e": ""}),
        FixKind::TripleQuotedString,
    );
    // In a pythonic call.
    let (v, _) = one("<|python_tag|>draft(body=\"\"\"Dear \"Sam\",\nthanks\"\"\")");
    assert_eq!(v, json!({"body": "Dear \"Sam\",\nthanks"}));
    // Safe, and nothing else recorded for the inner quotes and line breaks.
    let (_, kinds, lossy) = kinds_and_lossy("{\"q\": \"\"\"a \"b\"\nc\"\"\"}");
    assert_eq!(kinds, vec![FixKind::TripleQuotedString]);
    assert!(!lossy);
    // Cut off inside: the prefix kept, lossy.
    let (v, kinds, lossy) = kinds_and_lossy("{\"q\": \"\"\"half a tho");
    assert_eq!(v, json!({"q": "half a tho"}));
    assert!(kinds.contains(&FixKind::TruncatedString) && lossy);
}

#[test]
fn i15_numbers_and_null_as_bare_keys() {
    assert_fixed(
        r#"{7: "north", 3.25: "east", null: 0, -4: "west"}"#,
        json!({"7": "north", "3.25": "east", "null": 0, "-4": "west"}),
        FixKind::UnquotedKey,
    );
    // A pythonic dict of scores keyed by floats.
    assert_fixed(
        "{'grid': {0.5: 'low', 1.75: 'high'}, 'on': True}",
        json!({"grid": {"0.5": "low", "1.75": "high"}, "on": true}),
        FixKind::SingleQuotes,
    );
}

#[test]
fn i15_strings_in_an_array_without_comma_are_split() {
    assert_fixed(
        "{\"plans\": [\"basic\"\n      \"premium\"\n      \"custom\"]}",
        json!({"plans": ["basic", "premium", "custom"]}),
        FixKind::MissingComma,
    );
    assert_fixed(
        r#"{"plans": ["basic" "premium", "custom"]}"#,
        json!({"plans": ["basic", "premium", "custom"]}),
        FixKind::MissingComma,
    );
    assert_fixed(
        "{'plans': ['basic'\n 'premium']}",
        json!({"plans": ["basic", "premium"]}),
        FixKind::MissingComma,
    );
    // Quotes inside one element are still read as inner quotes.
    assert_fixed(
        r#"{"lines": ["she said "go" now", "b"]}"#,
        json!({"lines": ["she said \"go\" now", "b"]}),
        FixKind::InnerQuoteEscaped,
    );
    let (_, kinds) = one("{\"plans\": [\"basic\"\n \"premium\"]}");
    assert!(!kinds.contains(&FixKind::InnerQuoteEscaped), "{kinds:?}");
}

#[test]
fn i15_audit_text_is_kept_or_named_in_the_fix() {
    // `#` before a word is text, in objects and in arrays (it used to start a comment
    // that ate the rest of the line, the next members included, reported as safe).
    assert_fixed(
        "{\"memo\": blocked by #77, \"owner\": \"kim\"}",
        json!({"memo": "blocked by #77", "owner": "kim"}),
        FixKind::UnquotedString,
    );
    let (v, _) = one("{\"refs\": [see #77, later], \"n\": 2}");
    assert_eq!(v, json!({"refs": ["see #77", "later"], "n": 2}));
    // `# word` with more members after it on the line is not a comment either.
    let (v, _) = one("{\"memo\": merged # after review, \"owner\": \"kim\"}");
    assert_eq!(v, json!({"memo": "merged # after review", "owner": "kim"}));
    // A backslash at a line end inside an ordinary string is kept, not dropped silently.
    let (v, kinds) = one("{\"run\": \"tar -czf out.tgz \\\n  ./src\", \"n\": 1}");
    assert_eq!(v, json!({"run": "tar -czf out.tgz \\\n  ./src", "n": 1}));
    assert!(kinds.contains(&FixKind::InvalidEscapeKept), "{kinds:?}");
    // A lone surrogate escape is kept as written, not replaced by U+FFFD.
    let (v, kinds) = one(r#"{"glyph": "a\udc05b", "n": 1}"#);
    assert_eq!(v, json!({"glyph": "a\\udc05b", "n": 1}));
    assert!(kinds.contains(&FixKind::InvalidEscapeKept), "{kinds:?}");
    // JSON-LD keys.
    assert_fixed(
        "{@id: \"urn:x:9\", @type: \"Event\", \"when\": \"noon\"}",
        json!({"@id": "urn:x:9", "@type": "Event", "when": "noon"}),
        FixKind::UnquotedKey,
    );
    // A replaced duplicate and skipped garbage say what was lost.
    let r = ok("{\"lvl\": 3, \"lvl\": 4, 'x': 1}");
    let dup = r.calls[0]
        .fixes
        .iter()
        .find(|f| f.kind == FixKind::DuplicateKeyConflict)
        .unwrap();
    assert!(
        dup.detail.contains("lvl") && dup.detail.contains('3'),
        "{dup}"
    );
    let r = ok("{\"a\": \"x\" ;; oops \"b\": 2}");
    let g = r.calls[0]
        .fixes
        .iter()
        .find(|f| f.kind == FixKind::GarbageSkipped);
    if let Some(g) = g {
        assert!(g.detail.contains(";;"), "{g}");
    }
}

#[test]
fn i15_new_readers_stay_linear() {
    // Scanning ahead for the next key must not be quadratic on long values.
    let n = 60_000;
    let cases = [
        // A long unquoted value with many commas and line breaks, and quotes after them.
        format!(
            "{{\"note\": {}, \"z\": 1}}",
            "part one, two\n three, \"four".repeat(n / 4)
        ),
        format!("{{\"note\": {}}}", "w, ".repeat(n)),
        format!("{{\"note\": x{}}}", ", \"y".repeat(n)),
        format!("{{\"note\": x{}}}", " # c".repeat(n)),
        // A long triple-quoted string full of quotes.
        format!(
            "{{\"t\": \"\"\"{}\"\"\"}}",
            "a \"b\" ''c'' \"\"\n".repeat(n / 2)
        ),
        // Many strings without commas, one line and many.
        format!("[{}]", "\"ab\" \n".repeat(n)),
        format!("{{\"l\": [{}]}}", "\"a\" \"b c".repeat(n / 2)),
        // Many numeric keys.
        format!(
            "{{{}}}",
            (0..n / 4)
                .map(|i| format!("{i}.5: \"v\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ];
    let opts = RepairOptions {
        max_len: 64 << 20,
        ..RepairOptions::default()
    };
    for raw in &cases {
        // Linear is about 10x from a tenth to the whole; quadratic about 100x.
        let tenth = &raw[..raw.floor_char_boundary(raw.len() / 10)];
        crate::work::assert_linear(&raw[..40], tenth, raw.as_str(), |s| repair(s, &opts));
    }
}

mod i15_properties {
    use proptest::prelude::*;
    use serde_json::Value;
    use toolmend::{FixKind, RepairOptions, repair::repair};

    /// Every string value (not key) in `v`, concatenated.
    fn value_strings(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => out.push_str(s),
            Value::Array(a) => a.iter().for_each(|x| value_strings(x, out)),
            Value::Object(m) => m.values().for_each(|x| value_strings(x, out)),
            _ => {}
        }
    }

    fn alnum_counts(s: &str) -> std::collections::BTreeMap<char, usize> {
        let mut m = std::collections::BTreeMap::new();
        for c in s.chars().filter(char::is_ascii_alphanumeric) {
            *m.entry(c).or_default() += 1;
        }
        m
    }

    /// Text a model writes where a quoted value belongs: words, numbers, literals, quoted
    /// bits, `=`, joined by commas, spaces and line breaks.
    fn unquoted_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-z][a-z0-9]{0,6}",
            "[0-9]{1,3}",
            Just("true".to_owned()),
            Just("\"q\"".to_owned()),
            Just("=".to_owned()),
            Just("[1]".to_owned()),
        ];
        let sep = prop_oneof![
            Just(", ".to_owned()),
            Just(",\n  ".to_owned()),
            Just("\n\n".to_owned()),
            Just(" ".to_owned()),
        ];
        ("w[a-z]{0,5}", prop::collection::vec((sep, piece), 0..12)).prop_map(|(first, rest)| {
            let mut s = first;
            for (sep, p) in rest {
                s.push_str(&sep);
                s.push_str(&p);
            }
            s
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// No new fix loses characters silently: the value's strings keep every letter and
        /// digit of the unquoted text, or a fix says it is lossy; the next member survives.
        #[test]
        fn unquoted_text_loses_no_character_silently(text in unquoted_text()) {
            let raw = format!("{{\"note\": {text}, \"zz\": 7}}");
            let r = repair(&raw, &RepairOptions::default()).unwrap();
            let call = &r.calls[0];
            let mut got = String::new();
            value_strings(&call.arguments, &mut got);
            let lossy = call.is_lossy();
            let want = alnum_counts(&text);
            let have = alnum_counts(&got);
            let kept = want.iter().all(|(c, n)| have.get(c).copied().unwrap_or(0) >= *n);
            prop_assert!(kept || lossy, "{raw:?} -> {} {:?}", call.arguments, call.fixes);
            prop_assert_eq!(&call.arguments["zz"], &Value::from(7), "{:?}", raw);
            prop_assert!(
                !call.fixes.iter().any(|f| f.kind == FixKind::GarbageSkipped),
                "{:?}: {:?}", raw, call.fixes
            );
        }

        /// Triple-quoted content comes back verbatim.
        #[test]
        fn triple_quoted_content_is_verbatim(
            content in "[a-z \"'\n,:{}\\[\\]#]{0,30}".prop_filter("no closer inside", |s| !s.contains("\"\"\"")),
        ) {
            let raw = format!("{{\"t\": \"\"\"{content}\"\"\", \"n\": 1}}");
            let r = repair(&raw, &RepairOptions::default()).unwrap();
            prop_assert_eq!(&r.calls[0].arguments["t"], &Value::String(content), "{:?}", raw);
            prop_assert_eq!(&r.calls[0].arguments["n"], &Value::from(1));
        }

        /// Strings in an array separated by whitespace only are the same strings.
        #[test]
        fn strings_without_commas_stay_apart(
            items in prop::collection::vec(("[a-z][a-z ]{0,7}", prop_oneof![Just(" "), Just("\n    "), Just(", ")]), 1..8),
        ) {
            let mut raw = String::from("{\"l\": [");
            for (k, (s, sep)) in items.iter().enumerate() {
                if k > 0 {
                    raw.push_str(sep);
                }
                raw.push('"');
                raw.push_str(s);
                raw.push('"');
            }
            raw.push_str("]}");
            let r = repair(&raw, &RepairOptions::default()).unwrap();
            let want: Vec<Value> = items.iter().map(|(s, _)| Value::String(s.clone())).collect();
            prop_assert_eq!(&r.calls[0].arguments["l"], &Value::Array(want), "{:?}", raw);
        }

        /// Numbers and `null` as bare keys are those keys, and the values stay whole.
        #[test]
        fn numeric_bare_keys_read_as_written(
            keys in prop::collection::btree_set(prop_oneof!["-?[1-9][0-9]{0,3}", "[0-9]\\.[0-9]{1,3}", Just("null".to_owned())], 1..6),
        ) {
            let members: Vec<String> = keys.iter().map(|k| format!("{k}: \"v {k}\"")).collect();
            let raw = format!("{{{}}}", members.join(", "));
            let r = repair(&raw, &RepairOptions::default()).unwrap();
            let obj = r.calls[0].arguments.as_object().unwrap();
            prop_assert_eq!(obj.len(), keys.len(), "{:?}", raw);
            for k in &keys {
                prop_assert_eq!(&obj[k.as_str()], &Value::String(format!("v {k}")));
            }
        }
    }
}

#[test]
fn a_list_that_holds_no_call_is_named_as_a_list() {
    for (raw, item) in [
        ("[1, 2", "a number"),
        ("[true]", "a boolean"),
        ("[null, {}]", "null"),
    ] {
        let e = repair(raw, &RepairOptions::default()).unwrap_err();
        assert!(
            e.reason.starts_with("the arguments are a list of"),
            "{raw}: {e}"
        );
        assert!(
            e.reason.contains(&format!("item 0 is {item}")),
            "{raw}: {e}"
        );
    }
}

#[test]
fn windows_paths_keep_their_backslashes_and_code_its_line_breaks() {
    // A path run with an invalid escape in the string: `\t` `\r` are separators.
    let (v, _) = one(r#"{"p": "AppData\Programs\tests\retry.go"}"#);
    assert_eq!(v, json!({"p": "AppData\\Programs\\tests\\retry.go"}));
    // A drive path is proof enough.
    let (v, _) = one(r#"{"p": "C:\new_app\tools", "q": 1,}"#);
    assert_eq!(v, json!({"p": "C:\\new_app\\tools", "q": 1}));
    // After a file name, `\n` is a line break; so it is in code beside a regex.
    let (v, _) = one(r#"{"c": "set L=E:\Logs\install.log\nxcopy a b\n"}"#);
    assert_eq!(v, json!({"c": "set L=E:\\Logs\\install.log\nxcopy a b\n"}));
    let (v, _) = one(r#"{"c": "import re\nprint(re.findall(r'^\d+$', t))"}"#);
    assert_eq!(
        v,
        json!({"c": "import re\nprint(re.findall(r'^\\d+$', t))"})
    );
    let (v, _) = one(r#"{"c": "from x import C\n\nL = re.compile(r'\S+')\n    if m:\n        y"}"#);
    assert_eq!(
        v,
        json!({"c": "from x import C\n\nL = re.compile(r'\\S+')\n    if m:\n        y"})
    );
}

#[test]
fn i29_unquoted_value_ending_at_a_closer_in_doubt_is_lossy() {
    // A `}` or `]` that may be text, with more closers after it on the line: reading the
    // value up to it drops the rest (`"n": 1` here), reading past it keeps it. No pick.
    for raw in [
        "{\"topic\": pros } cons, \"rank\": 1}",
        "{\"path\": see ] below, \"depth\": 2}",
        "{\"tag\": beta} final}",
        "{\"inner\": {\"mode\": fast}, eco}, \"level\": 3}",
        // A key inside a bracket the text opened: text, or an object begun there?
        "{\"expr\": sum {\"w\": 2}, \"n\": 5}",
    ] {
        let (_, kinds, lossy) = kinds_and_lossy(raw);
        assert!(
            kinds.contains(&FixKind::UnquotedTextAmbiguous) && lossy,
            "{raw:?}: {kinds:?}"
        );
    }
    // A closer that plainly ends the value: the end, another bracket, a `,` before a
    // member or element, a glued document, or prose after the object.
    for (raw, want) in [
        (
            "{\"hub\": {\"city\": Oslo}}",
            json!({"hub": {"city": "Oslo"}}),
        ),
        (
            "{\"stops\": [{\"at\": Bergen}, {\"at\": Voss}], \"n\": 2}",
            json!({"stops": [{"at": "Bergen"}, {"at": "Voss"}], "n": 2}),
        ),
        (
            "{\"hub\": {\"city\": Oslo} , \"n\": 2}",
            json!({"hub": {"city": "Oslo"}, "n": 2}),
        ),
        ("{\"city\": Oslo} Hope this helps.", json!({"city": "Oslo"})),
        (
            "{\"memo\": see [1] and [2], \"n\": 1}",
            json!({"memo": "see [1] and [2]", "n": 1}),
        ),
    ] {
        let (v, kinds, lossy) = kinds_and_lossy(raw);
        assert_eq!(v, want, "{raw:?}");
        assert!(
            !lossy && !kinds.contains(&FixKind::UnquotedTextAmbiguous),
            "{raw:?}: {kinds:?}"
        );
    }
}

#[test]
fn i29_triple_quoted_string_whose_end_is_a_guess_is_lossy() {
    for raw in [
        // Five or six quotes: `a""` (content) or `a` joined with `""` (Python).
        "{\"q\": \"\"\"yes\"\"\"\"\", \"n\": 1}",
        "{'q': '''yes'''''', 'n': 1}",
        // A triple quote inside the string: its first closer leaves text no value is
        // followed by.
        "{\"code\": \"\"\"run(\"\"\"doc\"\"\")\"\"\", \"n\": 1}",
        "{\"xs\": [\"\"\"a\"\"\" b\"\"\", 2]}",
    ] {
        let (_, kinds, lossy) = kinds_and_lossy(raw);
        assert!(
            kinds.contains(&FixKind::TripleQuotedAmbiguous) && lossy,
            "{raw:?}: {kinds:?}"
        );
    }
    // One reading: four quotes (the one before the closer is content), a closer followed
    // by a member, a line break, a comment, a `)` or `,` in a call.
    for (raw, want) in [
        (
            "{\"q\": \"\"\"say \"hi\"\"\"\"}",
            json!({"q": "say \"hi\""}),
        ),
        (
            "{\"code\": \"\"\"\n\"quoted\"\n\"\"\"\n\"lang\": \"py\"}",
            json!({"code": "\n\"quoted\"\n", "lang": "py"}),
        ),
        ("{\"q\": \"\"\"x\"\"\"  # note\n}", json!({"q": "x"})),
        (
            "<|python_tag|>send(body=\"\"\"Hi\"\"\", n=1)",
            json!({"body": "Hi", "n": 1}),
        ),
    ] {
        let (v, kinds, lossy) = kinds_and_lossy(raw);
        assert_eq!(v, want, "{raw:?}");
        assert!(
            !lossy && !kinds.contains(&FixKind::TripleQuotedAmbiguous),
            "{raw:?}: {kinds:?}"
        );
    }
}

#[test]
fn i29_unquoted_value_wrapped_in_backticks_is_lossy() {
    // Backticks as delimiters (a template literal) or as text (command substitution, a
    // Markdown span): the value is kept as written, and not run.
    for raw in [
        "{\"cmd\": `ls -la`, \"cwd\": \"/srv\"}",
        "{\"code\": ```\nconst a = 1;\n```, \"lang\": \"js\"}",
        "{\"args\": [`x`, 2]}",
    ] {
        let (_, kinds, lossy) = kinds_and_lossy(raw);
        assert!(
            kinds.contains(&FixKind::UnquotedTextAmbiguous) && lossy,
            "{raw:?}: {kinds:?}"
        );
    }
    // A backtick inside the text, not around it: one reading.
    let (v, kinds, lossy) = kinds_and_lossy("{\"note\": run `make` first, \"n\": 1}");
    assert_eq!(v, json!({"note": "run `make` first", "n": 1}));
    assert!(!lossy, "{kinds:?}");
}
