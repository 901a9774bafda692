// Shared helpers for the fuzz targets (included with `#[path]`/`mod common;`).
#![allow(dead_code)]

use serde_json::{Map, Value};

/// True when a JSON object looks like a whole call (`{"name", "arguments"}`,
/// `{"type": "function", "function": {...}}` …) rather than arguments: the repair
/// stage may legitimately unwrap such an object (fix `call_wrapper_unwrapped`), so
/// the "valid JSON passes unchanged" properties do not apply to it.
pub fn looks_like_call_wrapper(map: &Map<String, Value>) -> bool {
    const ARGS: [&str; 6] = [
        "arguments",
        "parameters",
        "args",
        "input",
        "kwargs",
        "params",
    ];
    const CALL: [&str; 5] = [
        "function",
        "tool_call",
        "tool_calls",
        "function_call",
        "tool_use",
    ];
    CALL.iter().any(|k| map.contains_key(*k))
        || ((map.contains_key("name") || map.contains_key("tool") || map.contains_key("tool_name"))
            && ARGS.iter().any(|k| map.contains_key(*k)))
}
