//! Arbitrary bytes (read as lossy UTF-8) through `repair` (default and strict
//! options) and `mend_call` against a small fixed schema: nothing may panic,
//! overflow the stack or hang, and the arguments of every call `mend_call` deems
//! runnable (outcome `valid` or `repaired`) must be valid against the schema.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use toolmend::mend::{MendOptions, Outcome, mend_call};
use toolmend::repair::{RepairOptions, repair};
use toolmend::schema::{Coercions, CompiledTool, Phase, ValidationContext};

static TOOL: LazyLock<CompiledTool> = LazyLock::new(|| {
    let parameters = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "hourly": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "start": {"type": "string", "format": "date"},
            "contact": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "phone": {"type": "string"}},
                "required": ["name"],
                "additionalProperties": false
            }
        },
        "required": ["city"],
        "additionalProperties": false
    });
    match CompiledTool::compile("get_weather", "Weather for a city.", &parameters) {
        Ok(tool) => tool,
        Err(e) => panic!("fixed fuzz schema must compile: {e}"),
    }
});

static STRICT: LazyLock<RepairOptions> = LazyLock::new(|| RepairOptions {
    strict: true,
    ..RepairOptions::default()
});

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);

    let _ = repair(&text, &RepairOptions::default());
    let _ = repair(&text, &STRICT);

    let mended = mend_call(&text, &TOOL, &MendOptions::default());
    for call in &mended.calls {
        if call.outcome == Outcome::Feedback {
            continue;
        }
        match &call.arguments {
            Some(arguments) => assert!(
                TOOL.is_valid(arguments),
                "mend_call deemed {:?} arguments the schema rejects: {arguments}",
                call.outcome
            ),
            None => panic!("mend_call outcome {:?} without arguments", call.outcome),
        }
    }

    // The schema stage on its own, over whatever JSON the text parses to.
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
        let _ = TOOL.validate(&value);
        let ctx = ValidationContext::new(TOOL.name(), Phase::Initial);
        let _ = TOOL.check(value, &Coercions::default(), &ctx);
    }
});
