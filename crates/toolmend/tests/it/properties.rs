//! Property tests: the guarantees that hold for every input.

use proptest::prelude::*;
use serde_json::{Value, json};
use toolmend::{
    FixKind, MendOptions, RepairOptions, mend::mend_call, repair::repair, schema::CompiledTool,
};

fn arb_json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1.0e9f64..1.0e9).prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        "[ -~]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z_ ]{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-z_]{1,8}", arb_json(3), 0..6)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// Text that looks like what models emit: JSON-ish fragments glued together.
fn arb_jsonish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("\"".to_owned()),
        Just("'".to_owned()),
        Just("\\".to_owned()),
        Just("“".to_owned()),
        Just("<think>".to_owned()),
        Just("</think>".to_owned()),
        Just("```json\n".to_owned()),
        Just("<tool_call>".to_owned()),
        Just("<|python_tag|>".to_owned()),
        Just("<function=f>".to_owned()),
        Just("<parameter=a>".to_owned()),
        Just("True".to_owned()),
        Just("NaN".to_owned()),
        Just("f(a=".to_owned()),
        Just("//".to_owned()),
        Just("/*".to_owned()),
        Just("#".to_owned()),
        Just("\n".to_owned()),
        "[a-z0-9 ]{0,5}".prop_map(|s| s),
        "\\PC{0,3}".prop_map(|s| s),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

fn tool() -> CompiledTool {
    CompiledTool::compile(
        "t",
        "",
        &json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "required": ["a"], "additionalProperties": false}),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let s = String::from_utf8_lossy(&bytes);
        let _ = repair(&s, &RepairOptions::default());
        let _ = repair(&s, &RepairOptions::strict());
        let _ = mend_call(&s, &tool(), &MendOptions::default());
    }

    #[test]
    fn never_panics_on_jsonish_text(s in arb_jsonish()) {
        let _ = repair(&s, &RepairOptions::default());
        let m = mend_call(&s, &tool(), &MendOptions::default());
        prop_assert!(!m.calls.is_empty());
    }

    #[test]
    fn output_is_always_an_object_or_an_error(s in arb_jsonish()) {
        if let Ok(r) = repair(&s, &RepairOptions::default()) {
            prop_assert!(!r.calls.is_empty());
            for reading in r.readings() {
                for c in reading {
                    prop_assert!(c.arguments.is_object(), "{:?} -> {:?}", s, c.arguments);
                }
            }
        }
    }

    #[test]
    fn valid_json_comes_back_unchanged(v in arb_object()) {
        for text in [serde_json::to_string(&v).unwrap(), serde_json::to_string_pretty(&v).unwrap()] {
            let r = repair(&text, &RepairOptions::default()).unwrap();
            prop_assert_eq!(&r.calls[0].arguments, &v);
            prop_assert!(r.calls[0].fixes.is_empty());
        }
    }

    #[test]
    fn mending_mended_output_changes_nothing(s in arb_jsonish()) {
        if let Ok(r) = repair(&s, &RepairOptions::default()) {
            for c in &r.calls {
                let again = repair(&c.arguments.to_string(), &RepairOptions::default()).unwrap();
                prop_assert_eq!(&again.calls[0].arguments, &c.arguments);
                prop_assert!(again.calls[0].fixes.is_empty());
            }
        }
        let m = mend_call(&s, &tool(), &MendOptions::default());
        for c in m.calls.iter().filter(|c| c.outcome.is_runnable()) {
            let args = c.arguments.as_ref().unwrap();
            let again = mend_call(&args.to_string(), &tool(), &MendOptions::default());
            prop_assert_eq!(again.calls.len(), 1);
            prop_assert_eq!(again.calls[0].arguments.as_ref(), Some(args));
            prop_assert!(again.calls[0].fixes.is_empty());
        }
    }

    #[test]
    fn same_input_same_output(s in arb_jsonish()) {
        prop_assert_eq!(
            repair(&s, &RepairOptions::default()),
            repair(&s, &RepairOptions::default())
        );
        prop_assert_eq!(
            mend_call(&s, &tool(), &MendOptions::default()),
            mend_call(&s, &tool(), &MendOptions::default())
        );
    }

    #[test]
    fn single_quoted_python_reprs_read_back(v in arb_object()) {
        // Python's repr of a dict of strings, numbers and literals.
        let text = python_repr(&v);
        let r = repair(&text, &RepairOptions::default()).unwrap();
        if r.calls[0].arguments != v {
            // `'A:\ta'` is also how a model writes the Windows path `A:\ta` unescaped, and a
            // drive path is read as written (docs/issue-kinds.md, `escapes_kept_literal`):
            // the one place a repr may read otherwise, and never silently.
            prop_assert!(holds_drive_then_control(&v), "{} -> {:?}", text, r.calls[0].arguments);
            prop_assert!(
                r.calls[0].fixes.iter().any(|f| f.kind == FixKind::EscapesKeptLiteral),
                "{}", text
            );
        }
    }

    #[test]
    fn truncation_anywhere_never_fails_and_is_lossy(v in arb_object(), cut in 0.0f64..1.0) {
        // Lossy, unless the cut fell right after a complete member: then the only fix is
        // `closing_braces_added`, and the result is the cut text plus `}`s, nothing else.
        let text = serde_json::to_string(&v).unwrap();
        let mut at = ((text.len() as f64) * cut) as usize;
        while !text.is_char_boundary(at) { at -= 1; }
        if at >= 1 && at < text.len() {
            let cut_text = &text[..at];
            let call = &repair(cut_text, &RepairOptions::default()).unwrap().calls[0];
            if !call.is_lossy() && !call.fixes.is_empty() {
                prop_assert!(call.fixes.iter().all(|f| f.kind == FixKind::ClosingBracesAdded), "{}", cut_text);
                let closed = (1..=8).any(|k| {
                    serde_json::from_str::<Value>(&format!("{cut_text}{}", "}".repeat(k)))
                        .is_ok_and(|v| v == call.arguments)
                });
                prop_assert!(closed, "{} -> {}", cut_text, call.arguments);
            }
        }
    }
}

/// Whether a string in `v` holds an uppercase drive (`A:`) and after it a tab, a carriage
/// return or a line break: what an unescaped Windows path (`C:\temp`) reads as.
fn holds_drive_then_control(v: &Value) -> bool {
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            b.windows(2)
                .position(|w| w[0].is_ascii_uppercase() && w[1] == b':')
                .is_some_and(|at| b[at..].iter().any(|c| matches!(c, b'\t' | b'\r' | b'\n')))
        }
        Value::Array(items) => items.iter().any(holds_drive_then_control),
        Value::Object(m) => m.iter().any(|(k, v)| {
            holds_drive_then_control(&Value::String(k.clone())) || holds_drive_then_control(v)
        }),
        _ => false,
    }
}

fn python_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            // Python picks double quotes when the text holds a single quote and no double one.
            if s.contains('\'') && !s.contains('"') {
                serde_json::to_string(s).unwrap()
            } else {
                let mut out = String::from("'");
                for ch in s.chars() {
                    match ch {
                        '\'' => out.push_str("\\'"),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('\'');
                out
            }
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!(
                    "{}: {}",
                    python_repr(&Value::String(k.clone())),
                    python_repr(v)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Code-bearing argument text: quoted keys of the tool, unescaped quotes, commas, braces,
/// backslashes and line breaks, in any order.
fn arb_code_args() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("\"a\": ".to_owned()),
        Just("\"b\": ".to_owned()),
        Just(", ".to_owned()),
        Just("\"".to_owned()),
        Just("'".to_owned()),
        Just("\\".to_owned()),
        Just("\\n".to_owned()),
        Just("C:\\new\\tests".to_owned()),
        Just("\n".to_owned()),
        Just("\"}\n{\"".to_owned()),
        Just("\"\"\"".to_owned()),
        "[0-9]{1,3}",
        "[a-z ]{0,6}",
    ];
    prop::collection::vec(piece, 0..30).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    // The reading by the tool's keys: no panic, the same answer twice, and a runnable
    // call always fits the schema.
    #[test]
    fn code_args_read_by_keys_are_deterministic_and_fit(text in arb_code_args()) {
        let raw = format!("{{\"b\": \"{text}\", \"a\": 1}}");
        let first = mend_call(&raw, &tool(), &MendOptions::default());
        let again = mend_call(&raw, &tool(), &MendOptions::default());
        prop_assert_eq!(format!("{first:?}"), format!("{again:?}"));
        for c in &first.calls {
            if c.outcome != toolmend::mend::Outcome::Feedback {
                prop_assert!(tool().is_valid(c.arguments.as_ref().unwrap()), "{raw}: {c:?}");
            }
        }
    }
}
