//! Arbitrary bytes as a `POST /v1/chat/completions` body through the gateway's request
//! path, as `chat` runs it: the body must be a JSON object, then `prepare` (messages
//! decoded, the `[limits]`, the history checked and sanitized / refused / passed, trimmed)
//! and the `tools` compiled by the gateway's `ToolCache`; then the request's assistant
//! messages are mended against those tools. Four gateways (sanitize + drop + a token
//! trim, sanitize + rehome, reject with small limits, pass); their upstream,
//! http://127.0.0.1:9/v1, is never contacted (building a gateway opens no connection).
//!
//! Invariants: nothing panics; a refusal is a 4xx; a body `prepare` did not change is
//! left as it was; whatever `prepare` accepts still decodes as messages, and under the
//! sanitize or reject policy those messages pass `history::check` with no violation.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolmend::{
    conversation::Message,
    drive::{self, Turn},
    history::check,
    mend::MendOptions,
};
use toolmend_gateway::{
    Config, Gateway,
    fuzzing::{prepare, prepare_bytes, tools},
    plan::MendConfig,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    Sanitize,
    Reject,
    Pass,
}

const UPSTREAM: &str = r#"upstream.base_url = "http://127.0.0.1:9/v1""#;

static GATEWAYS: LazyLock<Vec<(Policy, Gateway)>> = LazyLock::new(|| {
    [
        (
            Policy::Sanitize,
            "[history]\npolicy = \"sanitize\"\norphans = \"drop\"\nmax_tokens = 200\nencoding = \"o200k_base\"",
        ),
        (
            Policy::Sanitize,
            "[history]\npolicy = \"sanitize\"\norphans = \"rehome\"",
        ),
        (
            Policy::Reject,
            "[history]\npolicy = \"reject\"\n[limits]\nmax_messages = 12\nmax_calls_per_message = 4\n\
             max_argument_bytes = 256\nmax_tools = 4\nmax_schema_bytes = 2048\ntool_cache = 2",
        ),
        (
            Policy::Pass,
            "[history]\npolicy = \"pass\"\nmax_tokens = 60\nencoding = \"bytes\"",
        ),
    ]
    .into_iter()
    .map(|(policy, rest)| {
        let text = format!("{UPSTREAM}\n{rest}\n");
        let config = match Config::from_toml_and_env(&text, std::iter::empty()) {
            Ok(c) => c,
            Err(e) => panic!("fuzz config must load: {e}\n{text}"),
        };
        match Gateway::new(config, None) {
            Ok(gw) => (policy, gw),
            Err(e) => panic!("fuzz gateway must build: {e}"),
        }
    })
    .collect()
});

static MEND: LazyLock<MendConfig> = LazyLock::new(|| MendConfig {
    mend: MendOptions::default(),
    calls_in_text: true,
    accept_truncated: false,
});

fuzz_target!(|data: &[u8]| {
    // The chat front reads the client's bytes with `messages` and `tools` left as bytes:
    // the same refusal, or the same body and notes, as the whole read and `prepare`.
    for (policy, gw) in GATEWAYS.iter() {
        let whole = match serde_json::from_slice::<Value>(data) {
            Ok(mut body @ Value::Object(_)) => prepare(gw, &mut body).map(|n| (body, n)),
            _ => Err(400),
        };
        match (whole, prepare_bytes(gw, data)) {
            (Ok((a, na)), Ok((b, nb))) => {
                assert_eq!(a, b, "{policy:?}: the bytes' reading wrote another body");
                assert_eq!(
                    (na.changed, na.history),
                    (nb.changed, nb.history),
                    "{policy:?}"
                );
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "{policy:?}: another refusal"),
            (a, b) => panic!("{policy:?}: the whole read gave {a:?}, the bytes' {b:?}"),
        }
    }
    // `chat_inner`: anything but a JSON object is refused before `prepare`.
    let Ok(body @ Value::Object(_)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    for (policy, gw) in GATEWAYS.iter() {
        let mut request = body.clone();
        match prepare(gw, &mut request) {
            Err(status) => assert!(
                (400..500).contains(&status),
                "{policy:?}: prepare refused with {status}"
            ),
            Ok(notes) => {
                if !notes.changed {
                    assert_eq!(request, body, "{policy:?}: body changed without notice");
                }
                let messages: Vec<Message> =
                    match serde_json::from_value(request["messages"].clone()) {
                        Ok(m) => m,
                        Err(e) => panic!("{policy:?}: accepted messages no longer decode: {e}"),
                    };
                if *policy != Policy::Pass {
                    let left = check(&messages);
                    assert!(
                        left.is_empty(),
                        "{policy:?}: prepare accepted a history with violations {left:?} \
                         (notes {:?})",
                        notes.history
                    );
                }
                // The response path's tools: compiled once per distinct `tools` text.
                let Some(defs) = request.get("tools").filter(|t| t.is_array()) else {
                    continue;
                };
                let Ok(toolbox) = tools(gw, defs) else {
                    continue;
                };
                for m in &messages {
                    if let Message::Assistant(a) = m {
                        for cut_off in [false, true] {
                            let opts = MEND.plan_options();
                            let turn = Turn {
                                message: a,
                                history: &[],
                                later: &[],
                                cut_off,
                                state: None,
                                place: None,
                            };
                            let mended = drive::plan(turn, &toolbox, &opts);
                            // "Never drops a call", but for an exact repeat (the same id,
                            // name and arguments as an earlier call): the one id rule drops
                            // it, recorded. Distinct (id, name, arguments) count once.
                            let mut seen = std::collections::HashSet::new();
                            let sent = a
                                .tool_calls
                                .iter()
                                .flatten()
                                .filter(|c| {
                                    match c.id.as_deref().filter(|i| !i.trim().is_empty()) {
                                        Some(id) => seen.insert((id, &c.name, &c.arguments)),
                                        None => true,
                                    }
                                })
                                .count();
                            let out = mended.message.tool_calls.as_ref().map_or(0, Vec::len);
                            assert!(
                                out >= sent,
                                "the plan dropped calls: {sent} distinct sent, {out} out"
                            );
                        }
                    }
                }
            }
        }
    }
});
