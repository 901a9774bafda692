//! The Messages front's three translations on arbitrary input. The first byte picks:
//!
//! - 0 (mod 3): the rest as a `POST /v1/messages` body through `request_to_chat`. Invariants:
//!   nothing panics; a refusal is a 400; an accepted body gives a chat request whose
//!   `messages` is a list of objects with a known role, every tool message naming a
//!   string `tool_call_id`, every assistant call a string `arguments` that is JSON.
//! - 1 (mod 3): the rest as the chat front's SSE, cut into pieces at the positions the next
//!   bytes give, through the stream translator. Invariants: nothing panics; every frame
//!   out is `event: NAME` + `data: JSON` whose `type` is NAME; blocks open and close in
//!   order with consecutive indexes, one open at a time; `message_start` comes first
//!   and at most once, nothing follows `message_stop` or `error`.
//! - 2 (mod 3): the rest as the answer of an upstream speaking Messages, read as a chat
//!   completion and written back as the next request carries it. Invariants: nothing
//!   panics; what is not JSON or not a Messages message is a 502; every call and every block or
//!   item the chat form has no field for (signed thinking, server-tool blocks, reasoning
//!   items) reaches the next request, every call's arguments JSON text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolmend_gateway::fuzzing::{MessagesStream, messages_answer_round_trip, messages_to_chat};

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
        assert!(messages_answer_round_trip(bytes).is_err());
        return;
    };
    let (completion, request) = match messages_answer_round_trip(bytes) {
        Err(status) => {
            assert_eq!(status, 502);
            return;
        }
        Ok(both) => both,
    };
    // Every block of the answer reaches the next request: text joined, thinking and
    // server blocks as they came, each tool_use with its input.
    let blocks = answer["content"].as_array().expect("a message has content");
    let uses = blocks.iter().filter(|b| b["type"] == "tool_use").count();
    let calls = completion["choices"][0]["message"]["tool_calls"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(uses, calls, "{completion}");
    for c in completion["choices"][0]["message"]["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let args = c["function"]["arguments"]
            .as_str()
            .expect("string arguments");
        assert!(serde_json::from_str::<Value>(args).is_ok(), "{c}");
    }
    let kept = |v: &Value| -> usize {
        v.as_array()
            .into_iter()
            .flatten()
            .filter(|b| !matches!(b["type"].as_str(), Some("text" | "tool_use")))
            .count()
    };
    let next = &request["messages"];
    let sent = next
        .as_array()
        .and_then(|m| m.first())
        .map_or(0, |m| kept(&m["content"]));
    assert_eq!(sent, kept(&answer["content"]), "{answer} -> {request}");
}

fn request(bytes: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    match messages_to_chat(&body) {
        Err(status) => assert_eq!(status, 400),
        Ok(chat) => {
            let messages = chat["messages"].as_array().expect("a messages list");
            for m in messages {
                let role = m["role"].as_str().expect("a role");
                assert!(
                    ["system", "user", "assistant", "tool"].contains(&role),
                    "{m}"
                );
                if role == "tool" {
                    assert!(m["tool_call_id"].is_string(), "{m}");
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let args = c["function"]["arguments"]
                        .as_str()
                        .expect("string arguments");
                    assert!(serde_json::from_str::<Value>(args).is_ok(), "{c}");
                }
            }
        }
    }
}

fn stream(bytes: &[u8]) {
    // The first 4 bytes (if any) say where to cut; the rest is the stream.
    let (cuts, body) = bytes.split_at(bytes.len().min(4));
    let mut t = MessagesStream::new();
    let mut out = String::new();
    let mut at = 0;
    for &c in cuts {
        let end = (at + usize::from(c)).min(body.len());
        out.push_str(&t.feed(&body[at..end]));
        at = end;
    }
    out.push_str(&t.feed(&body[at..]));
    out.push_str(&t.finish());
    check(&out);
}

fn check(out: &str) {
    let mut started = false;
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
        match name {
            "message_start" => {
                assert!(!started, "two starts");
                started = true;
            }
            "error" => ended = true,
            "message_stop" => {
                assert!(open.is_none(), "a block left open");
                ended = true;
            }
            "content_block_start" => {
                assert!(started && open.is_none(), "{out}");
                assert_eq!(e["index"].as_u64(), Some(next));
                open = Some(next);
            }
            "content_block_delta" => assert_eq!(e["index"].as_u64(), open, "{out}"),
            "content_block_stop" => {
                assert_eq!(e["index"].as_u64(), open, "{out}");
                open = None;
                next += 1;
            }
            "ping" | "message_delta" => assert!(started),
            other => panic!("an unknown event {other}"),
        }
    }
}
