//! A Messages answer written as Anthropic's event stream: `message_start`, `ping`, per
//! content block `content_block_start`, its delta (`text_delta`, `thinking_delta`,
//! `input_json_delta`) and `content_block_stop`, block indexes consecutive from 0, then
//! `message_delta` (the `stop_reason`, the output usage and the account) and
//! `message_stop`. The answer is whole when it is written (the upstream is read as
//! JSON): every `x-toolmend-*` header is known before the first byte.

use axum::{
    body::Body,
    http::{HeaderValue, header},
    response::Response,
};
use serde_json::{Value, json};

use crate::server::headers;

/// The events of `message`, each `(name, data)`.
pub(crate) fn events(message: &Value, account: Option<Value>) -> Vec<(&'static str, Value)> {
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["stop_sequence"] = Value::Null;
    start["usage"]["output_tokens"] = json!(0);
    if let Some(o) = start.as_object_mut() {
        o.remove(super::ACCOUNT_KEY);
    }
    let mut out = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": start}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    let blocks = message["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, block) in blocks.iter().enumerate() {
        let (opened, delta) = match block["type"].as_str() {
            Some("text") => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            ),
            Some("thinking") => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                json!({"type": "thinking_delta", "thinking": block["thinking"]}),
            ),
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
            // Any other block goes out whole in its start event.
            _ => {
                out.push((
                    "content_block_start",
                    json!({"type": "content_block_start",
                    "index": index, "content_block": block}),
                ));
                out.push((
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": index}),
                ));
                continue;
            }
        };
        out.push((
            "content_block_start",
            json!({"type": "content_block_start",
            "index": index, "content_block": opened}),
        ));
        out.push((
            "content_block_delta",
            json!({"type": "content_block_delta",
            "index": index, "delta": delta}),
        ));
        if let Some(sig) = block["signature"].as_str().filter(|s| !s.is_empty()) {
            out.push((
                "content_block_delta",
                json!({"type": "content_block_delta",
                "index": index, "delta": {"type": "signature_delta", "signature": sig}}),
            ));
        }
        out.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let mut delta = json!({"type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
        "usage": {"output_tokens": message["usage"]["output_tokens"]}});
    if let Some(a) = account {
        delta[super::ACCOUNT_KEY] = a;
    }
    out.push(("message_delta", delta));
    out.push(("message_stop", json!({"type": "message_stop"})));
    out
}

/// The stream of `message` as a response, with `x-toolmend-*` `headers`.
pub(crate) fn respond(
    message: &Value,
    account: Option<Value>,
    toolmend_headers: Vec<(&'static str, String)>,
) -> Response {
    let mut body = String::new();
    for (name, data) in events(message, account) {
        body.push_str("event: ");
        body.push_str(name);
        body.push_str("\ndata: ");
        body.push_str(&data.to_string());
        body.push_str("\n\n");
    }
    let mut out = Response::new(Body::from(body));
    let h = out.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers::set_headers(h, toolmend_headers);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::events;

    #[test]
    fn every_block_is_opened_filled_and_closed_at_consecutive_indexes() {
        let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "thinking", "thinking": "hm", "signature": ""},
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 4}});
        let ev = events(&message, Some(json!({"counts": {}})));
        let names: Vec<&str> = ev.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(ev[0].1["message"]["content"], json!([]));
        assert_eq!(ev[0].1["message"]["stop_reason"], json!(null));
        let indexes: Vec<u64> = ev.iter().filter_map(|(_, d)| d["index"].as_u64()).collect();
        assert_eq!(indexes, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(
            ev[9].1["delta"],
            json!({"type": "input_json_delta", "partial_json": "{\"a\":1}"})
        );
        assert_eq!(ev[11].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(ev[11].1["usage"]["output_tokens"], 4);
        assert!(ev[11].1.get("toolmend").is_some());
    }
}
