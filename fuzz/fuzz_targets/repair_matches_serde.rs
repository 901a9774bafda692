//! Valid JSON passes unchanged: when serde_json parses the input as an object,
//! `repair` must return exactly one call whose arguments equal serde_json's value
//! (same keys in the same order) with no fixes. A repeated key is the one
//! allowed difference: serde_json keeps the last value too, so only a
//! `duplicate_key` fix (`duplicate_key_conflict` when the values differ) is
//! tolerated, and then key order is not compared.
//! Objects that look like a whole call (`{"name", "arguments"}`) are skipped:
//! repair may unwrap them. Modelled on jiter's `compare_to_serde` target.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolmend::FixKind;
use toolmend::repair::{RepairOptions, repair};

fuzz_target!(|text: &str| {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return;
    };
    if common::looks_like_call_wrapper(&map) {
        return;
    }
    let expected = Value::Object(map);

    let repaired = match repair(text, &RepairOptions::default()) {
        Ok(r) => r,
        Err(e) => panic!("repair rejected valid JSON ({e}): {text:?}"),
    };
    assert_eq!(
        repaired.calls.len(),
        1,
        "valid JSON object read as {} calls: {text:?}",
        repaired.calls.len()
    );
    let call = &repaired.calls[0];
    assert_eq!(
        call.arguments, expected,
        "repair changed valid JSON: {text:?}"
    );
    assert!(
        call.fixes.iter().all(|f| matches!(
            f.kind,
            FixKind::DuplicateKey | FixKind::DuplicateKeyConflict
        )),
        "fixes on valid JSON: {:?} for {text:?}",
        call.fixes
    );
    if call.fixes.is_empty() {
        let ours = serde_json::to_string(&call.arguments).unwrap_or_default();
        let theirs = serde_json::to_string(&expected).unwrap_or_default();
        assert_eq!(ours, theirs, "key order differs from the input: {text:?}");
    }

    // Strict mode accepts the same text with the same value.
    let strict = RepairOptions {
        strict: true,
        ..RepairOptions::default()
    };
    match repair(text, &strict) {
        Ok(r) => {
            assert_eq!(
                r.calls.len(),
                1,
                "strict: {} calls for valid JSON: {text:?}",
                r.calls.len()
            );
            assert_eq!(
                r.calls[0].arguments, expected,
                "strict repair changed valid JSON: {text:?}"
            );
        }
        Err(e) => panic!("strict repair rejected valid JSON ({e}): {text:?}"),
    }
});
