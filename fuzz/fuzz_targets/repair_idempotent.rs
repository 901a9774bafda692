//! Repair is idempotent: when `repair` succeeds without lossy fixes, every
//! object it returns, serialised back to JSON text and repaired again, comes
//! back as exactly one call with the same value and no fixes.
//! (Objects that look like a whole call are skipped: repair may unwrap them.)
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolmend::repair::{RepairOptions, repair};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let opts = RepairOptions::default();
    let Ok(first) = repair(&text, &opts) else {
        return;
    };
    if first.calls.iter().any(|c| c.is_lossy()) {
        return;
    }
    for call in &first.calls {
        let Value::Object(map) = &call.arguments else {
            continue;
        };
        if common::looks_like_call_wrapper(map) {
            continue;
        }
        let Ok(again_text) = serde_json::to_string(&call.arguments) else {
            continue;
        };
        let again = match repair(&again_text, &opts) {
            Ok(r) => r,
            Err(e) => {
                panic!("repair rejected its own output ({e}): {again_text:?} (from {text:?})")
            }
        };
        assert_eq!(
            again.calls.len(),
            1,
            "own output read as {} calls: {again_text:?}",
            again.calls.len()
        );
        assert_eq!(
            again.calls[0].arguments, call.arguments,
            "not idempotent: {again_text:?} (from {text:?})"
        );
        assert!(
            again.calls[0].fixes.is_empty(),
            "fixes on repair's own output: {:?} for {again_text:?}",
            again.calls[0].fixes
        );
    }
});
