//! Arbitrary bytes through what reads a tool's world: the tools file (`ToolsFile::parse`),
//! a tool service's answer (`read_envelope`, as JSON), and result shaping (the answer's
//! JSON as a payload, under a small and a large budget, with and without Markdown).
//!
//! Invariants: nothing panics; an envelope is `Success` only with this call's id and
//! `status: "success"`; a dirty answer (another id) is never `Success`; shaped content
//! stays within the budget (or the marker's size, for budgets smaller than it) and holds
//! no control characters but `\n`, `\t`, `\r`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolmend_tools::{
    ToolsFile,
    http::read_envelope,
    shape::{MARKER_MAX_BYTES, ShapeSpec, Shaper},
    transport::{Reply, TransportError},
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ToolsFile::parse(text, "fuzz");
    let _ = ToolsFile::parse_section(text, "fuzz");
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return;
    };
    match read_envelope(&v, "call_a-retry1", "call_a") {
        Ok(Reply::Success { .. }) => {
            assert_eq!(v["status"], "success");
            assert!(v["call_id"] == "call_a" || v["call_id"] == "call_a-retry1");
        }
        Ok(Reply::Failed { .. }) => assert_eq!(v["status"], "error"),
        Err(TransportError::Dirty { .. }) => {
            assert!(v["call_id"] != "call_a" && v["call_id"] != "call_a-retry1");
        }
        Err(_) => {}
    }
    for (budget, markdown) in [(64, false), (4000, true)] {
        let shaper = Shaper::new(&ShapeSpec {
            template: None,
            budget_bytes: budget,
            markdown,
        })
        .unwrap();
        let shaped = shaper.shape(&v, None);
        assert!(
            shaped.content.len() <= budget.max(MARKER_MAX_BYTES),
            "{} > {budget}",
            shaped.content.len()
        );
        assert!(
            !shaped
                .content
                .chars()
                .any(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
        );
    }
});
