//! The Responses front's three translations on arbitrary input. The first byte picks:
//!
//! - 0 (mod 3): the rest as a `POST /v1/responses` body through `request_to_chat`. Invariants:
//!   nothing panics; a refusal is a 400; an accepted body gives a chat request whose
//!   `messages` is a list with known roles, every tool message naming a string
//!   `tool_call_id`, every assistant call a string id and string `arguments`.
//! - 1 (mod 3): the rest as the chat front's SSE, cut at the positions the next bytes give,
//!   through the stream translator. Invariants: nothing panics; every frame out is
//!   `event: NAME` + `data: JSON` whose `type` is NAME; `sequence_number`s are 0, 1, 2 …;
//!   an item is added, then done, one at a time, `output_index` consecutive; nothing
//!   follows `response.completed`, `response.incomplete` or `error`.
//! - 2 (mod 3): the rest as the answer of an upstream speaking Responses, read as a chat
//!   completion and written back as the next request carries it. Invariants: nothing
//!   panics; what is not JSON or not a Responses object is a 502; every call and every block or
//!   item the chat form has no field for (signed thinking, server-tool blocks, reasoning
//!   items) reaches the next request, every call's arguments JSON text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolmend_gateway::fuzzing::{ResponsesStream, responses_answer_round_trip, responses_to_chat};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => request(rest),
        1 => stream(rest),
        _ => upstream(rest),
    }
});

/// An upstream's answer of this API: read as a chat completion and written back as the
/// next request would carry it, nothing lost.
fn upstream(bytes: &[u8]) {
    let Ok(answer) = serde_json::from_slice::<Value>(bytes) else {
        assert!(responses_answer_round_trip(bytes).is_err());
        return;
    };
    let (completion, request) = match responses_answer_round_trip(bytes) {
        Err(status) => {
            assert_eq!(status, 502);
            return;
        }
        Ok(both) => both,
    };
    // Every reasoning item and call of the answer reaches the next request as it came.
    let items = answer["output"].as_array().expect("a response has output");
    let count = |v: &[Value], kind: &str| v.iter().filter(|i| i["type"] == kind).count();
    let next = request["input"].as_array().expect("an input list");
    assert_eq!(
        count(items, "reasoning"),
        count(next, "reasoning"),
        "{answer} -> {request}"
    );
    let named = items
        .iter()
        .filter(|i| i["type"] == "function_call" || i["type"] == "custom_tool_call")
        .filter(|i| i["name"].is_string())
        .count();
    assert_eq!(named, count(next, "function_call"), "{answer} -> {request}");
    let calls = completion["choices"][0]["message"]["tool_calls"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(named, calls, "{completion}");
}

fn request(bytes: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    match responses_to_chat(&body) {
        Err(status) => assert_eq!(status, 400),
        Ok(chat) => {
            for m in chat["messages"].as_array().expect("a messages list") {
                let role = m["role"].as_str().expect("a role");
                assert!(
                    ["system", "user", "assistant", "tool"].contains(&role),
                    "{m}"
                );
                if role == "tool" {
                    assert!(m["tool_call_id"].is_string(), "{m}");
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    assert!(c["id"].is_string(), "{c}");
                    assert!(c["function"]["arguments"].is_string(), "{c}");
                }
            }
        }
    }
}

fn stream(bytes: &[u8]) {
    let (cuts, body) = bytes.split_at(bytes.len().min(4));
    let mut t = ResponsesStream::new();
    let mut out = String::new();
    let mut at = 0;
    for &c in cuts {
        let end = (at + usize::from(c)).min(body.len());
        out.push_str(&t.feed(&body[at..end]));
        at = end;
    }
    out.push_str(&t.feed(&body[at..]));
    out.push_str(&t.finish());
    let mut seq = 0u64;
    let mut ended = false;
    let mut open: Option<u64> = None;
    let mut next = 0u64;
    for frame in out.split("\n\n").filter(|f| !f.is_empty()) {
        assert!(!ended, "a frame after the end: {out}");
        let mut lines = frame.lines();
        let name = lines
            .next()
            .and_then(|l| l.strip_prefix("event: "))
            .expect("event line");
        let data = lines
            .next()
            .and_then(|l| l.strip_prefix("data: "))
            .expect("data line");
        assert!(lines.next().is_none(), "one data line: {frame}");
        let e: Value = serde_json::from_str(data).expect("JSON data");
        assert_eq!(e["type"], name);
        assert_eq!(e["sequence_number"].as_u64(), Some(seq), "{out}");
        seq += 1;
        match name {
            "response.output_item.added" => {
                assert!(open.is_none(), "{out}");
                assert_eq!(e["output_index"].as_u64(), Some(next));
                open = Some(next);
            }
            "response.output_item.done" => {
                assert_eq!(e["output_index"].as_u64(), open, "{out}");
                open = None;
                next += 1;
            }
            "response.completed" | "response.incomplete" => {
                assert!(open.is_none(), "{out}");
                assert_eq!(
                    e["response"]["output"].as_array().map(Vec::len),
                    Some(next as usize)
                );
                ended = true;
            }
            "error" => ended = true,
            _ => {
                if let Some(i) = e.get("output_index") {
                    assert_eq!(i.as_u64(), open, "{out}");
                }
            }
        }
    }
}
