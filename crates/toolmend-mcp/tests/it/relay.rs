//! The relay on its own: JSON-RPC messages in, messages for each side out.

use std::sync::Arc;

use serde_json::{Value, json};
use toolmend::{
    guard::{GuardConfig, MemoryStore, RuleGuard, Window},
    message::PlanOptions,
};
use toolmend_mcp::{Mender, Out, ProxyGuard, Relay, relay::Dropped};

fn relay() -> Relay {
    Relay::new(
        Arc::new(Mender::new(PlanOptions::default(), None)),
        "s",
        false,
    )
}

fn tools() -> Value {
    json!([
        {"name": "add", "inputSchema": {"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]}},
        {"name": "write_file", "inputSchema": {"type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                           "mode": {"enum": ["overwrite", "append"]}},
            "required": ["path", "content"], "additionalProperties": false}},
        {"name": "tag", "inputSchema": {"type": "object",
            "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}}
    ])
}

async fn client(r: &mut Relay, m: Value) -> Vec<Out> {
    let mut out = Vec::new();
    r.from_client(m.to_string().into_bytes(), &mut out).await;
    out
}

async fn server(r: &mut Relay, m: Value) -> Vec<Out> {
    let mut out = Vec::new();
    r.from_server(m.to_string().into_bytes(), &mut out).await;
    out
}

fn parsed(o: &Out) -> (&'static str, Value) {
    match o {
        Out::Server(b) => ("server", serde_json::from_slice(b).unwrap_or(Value::Null)),
        Out::Client(b) => ("client", serde_json::from_slice(b).unwrap_or(Value::Null)),
    }
}

/// A relay guarded by `rules` (in memory) for `session`, its tools listed.
async fn guarded(rules: GuardConfig, session: &str) -> Relay {
    let guard = RuleGuard::new(rules)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_store(MemoryStore::new(1000));
    let mender = Arc::new(Mender::new(
        PlanOptions::default(),
        Some(ProxyGuard {
            guard: Arc::new(guard),
        }),
    ));
    let mut r = Relay::new(mender, session, true);
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}),
    )
    .await;
    server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": "l", "result": {"tools": tools()}}),
    )
    .await;
    r
}

/// A relay whose client initialized (the server has tools) and listed nothing yet.
async fn initialized() -> Relay {
    let mut r = relay();
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}),
    )
    .await;
    server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 0, "result": {"capabilities": {"tools": {}}}}),
    )
    .await;
    r
}

/// A relay whose client initialized and listed the tools (one page).
async fn listed() -> Relay {
    let mut r = initialized().await;
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}),
    )
    .await;
    server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": "l", "result": {"tools": tools()}}),
    )
    .await;
    r
}

#[tokio::test]
async fn everything_but_a_call_passes_byte_for_byte() {
    let mut r = relay();
    for raw in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
        r#"{"method":"notifications/initialized","jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":"r1","method":"resources/read","params":{"uri":"file:///a  b"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"role":"assistant"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#,
    ] {
        let mut out = Vec::new();
        r.from_client(raw.as_bytes().to_vec(), &mut out).await;
        assert_eq!(out, vec![Out::Server(raw.as_bytes().to_vec())], "{raw}");
    }
    for raw in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{}},"x":  1}}"#,
        r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}"#,
        r#"not json at all"#,
    ] {
        let mut out = Vec::new();
        r.from_server(raw.as_bytes().to_vec(), &mut out).await;
        assert_eq!(out, vec![Out::Client(raw.as_bytes().to_vec())], "{raw}");
    }
}

#[tokio::test]
async fn a_broken_call_is_mended_forwarded_and_its_result_says_what_was_done() {
    let mut r = listed().await;
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "add", "arguments": {"a": "5", "b": 7}, "_meta": {"progressToken": 9}}}),
    )
    .await;
    let [o] = out.as_slice() else {
        panic!("{out:?}")
    };
    let (to, sent) = parsed(o);
    assert_eq!(to, "server");
    assert_eq!(sent["params"]["arguments"], json!({"a": 5, "b": 7}));
    // Everything else of the request as it was.
    assert_eq!(sent["params"]["_meta"], json!({"progressToken": 9}));
    assert_eq!(sent["id"], json!(5));
    let out = server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "12"}]}}),
    )
    .await;
    let (to, answer) = parsed(&out[0]);
    assert_eq!(to, "client");
    assert_eq!(answer["result"]["content"][0]["text"], "12");
    let record = &answer["result"]["_meta"]["io.toolmend/mend"];
    assert_eq!(record["mend"], "repaired");
    assert_eq!(record["fixes"][0]["kind"], "string_to_integer");
    assert_eq!(record["fixes"][0]["path"], "/a");
    assert_eq!(record["fixes"][0]["safety"], "unsafe");
}

#[tokio::test]
async fn arguments_sent_as_json_text_or_broken_json_are_read() {
    let mut r = listed().await;
    for (args, want, fix) in [
        (
            json!("{\"a\": 1, \"b\": 2}"),
            json!({"a": 1, "b": 2}),
            "double_encoded_decoded",
        ),
        (
            json!("{'a': 1, 'b': 2,}"),
            json!({"a": 1, "b": 2}),
            "single_quotes",
        ),
        (
            json!({"A": 1, "b": "2"}),
            json!({"a": 1, "b": 2}),
            "key_case_fixed",
        ),
    ] {
        let out = client(
            &mut r,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "add", "arguments": args}}),
        )
        .await;
        let (to, sent) = parsed(&out[0]);
        assert_eq!(
            (to, &sent["params"]["arguments"]),
            ("server", &want),
            "{args}"
        );
        let out = server(
            &mut r,
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}),
        )
        .await;
        let (_, answer) = parsed(&out[0]);
        let fixes = &answer["result"]["_meta"]["io.toolmend/mend"]["fixes"];
        assert!(
            fixes
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f["kind"] == fix)),
            "{args}: {fixes}"
        );
    }
}

#[tokio::test]
async fn a_valid_call_passes_untouched_and_its_result_too() {
    let mut r = listed().await;
    let raw = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}"#;
    let mut out = Vec::new();
    r.from_client(raw.as_bytes().to_vec(), &mut out).await;
    assert_eq!(out, vec![Out::Server(raw.as_bytes().to_vec())]);
    let answer = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"3"}]}}"#;
    let mut out = Vec::new();
    r.from_server(answer.as_bytes().to_vec(), &mut out).await;
    assert_eq!(out, vec![Out::Client(answer.as_bytes().to_vec())]);
}

#[tokio::test]
async fn what_cannot_be_mended_is_answered_here_and_never_reaches_the_server() {
    let mut r = listed().await;
    for (params, names) in [
        (json!({"name": "add", "arguments": {"a": 1}}), "b"),
        (
            json!({"name": "add", "arguments": {"a": "five", "b": 1}}),
            "a",
        ),
        (json!({"name": "nope", "arguments": {}}), "nope"),
        // One call is one call: a list for a scalar field is not split here.
        (
            json!({"name": "tag", "arguments": {"symbol": ["AAPL", "MSFT"]}}),
            "symbol",
        ),
    ] {
        let out = client(
            &mut r,
            json!({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": params}),
        )
        .await;
        let [o] = out.as_slice() else {
            panic!("{out:?}")
        };
        let (to, answer) = parsed(o);
        assert_eq!(to, "client", "{params}");
        assert_eq!(answer["id"], "x");
        assert_eq!(answer["result"]["isError"], true);
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(text.contains(names), "{text}");
        assert_eq!(
            answer["result"]["_meta"]["io.toolmend/mend"]["outcome"],
            "feedback"
        );
    }
    // A cancel for a call answered here has nothing to reach.
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "x"}}),
    )
    .await;
    assert!(out.is_empty(), "{out:?}");
}

#[tokio::test]
async fn a_cancel_reaches_the_server_for_a_call_it_has() {
    let mut r = listed().await;
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
    )
    .await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8, "reason": "user"}});
    let out = client(&mut r, cancel.clone()).await;
    assert_eq!(out, vec![Out::Server(cancel.to_string().into_bytes())]);
}

#[tokio::test]
async fn a_call_before_any_listing_waits_for_the_relays_own_listing_of_every_page() {
    let mut r = initialized().await;
    let stamp =
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "progressToken": 3});
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "add", "arguments": {"a": "1", "b": 2}, "_meta": stamp}}),
    )
    .await;
    let [o] = out.as_slice() else {
        panic!("{out:?}")
    };
    let (to, list) = parsed(o);
    assert_eq!(to, "server");
    assert_eq!(list["method"], "tools/list");
    // The protocol's stamps go along; the call's own progress token does not.
    assert_eq!(
        list["params"]["_meta"],
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})
    );
    let all = tools();
    let out = server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": [all[1]], "nextCursor": "p2"}}),
    )
    .await;
    let (_, page2) = parsed(&out[0]);
    assert_eq!(page2["params"]["cursor"], "p2");
    // A cancel for the waiting call drops it: it never runs.
    let out = server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": page2["id"], "result": {"tools": [all[0], all[2]]}}),
    )
    .await;
    let [o] = out.as_slice() else {
        panic!("{out:?}")
    };
    let (to, call) = parsed(o);
    assert_eq!(to, "server");
    assert_eq!(call["params"]["arguments"], json!({"a": 1, "b": 2}));
    assert_eq!(call["id"], 1);
}

#[tokio::test]
async fn a_waiting_call_that_is_cancelled_never_runs() {
    let mut r = relay();
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
    )
    .await;
    let (_, list) = parsed(&out[0]);
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .await;
    assert!(out.is_empty());
    let out = server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": tools()}}),
    )
    .await;
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(r.in_flight(), 0);
}

#[tokio::test]
async fn a_changed_list_is_read_again_before_the_next_call() {
    let mut r = listed().await;
    server(
        &mut r,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
    )
    .await;
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
    )
    .await;
    let (_, list) = parsed(&out[0]);
    assert_eq!(list["method"], "tools/list");
    // Now `add` takes strings: the call is mended against the new schema.
    let out = server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": [
            {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}
        ]}}),
    )
    .await;
    let (_, call) = parsed(&out[0]);
    assert_eq!(call["params"]["arguments"], json!({"a": "1", "b": "2"}));
}

#[tokio::test]
async fn when_the_server_is_gone_every_request_it_had_gets_an_error() {
    let mut r = listed().await;
    for id in [json!(1), json!("two")] {
        client(
            &mut r,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
        )
        .await;
    }
    client(&mut r, json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})).await;
    let mut out = Vec::new();
    r.server_gone("it exited with status 1", &mut out);
    let mut ids: Vec<Value> = out
        .iter()
        .map(|o| {
            let (to, m) = parsed(o);
            assert_eq!(to, "client");
            assert_eq!(m["error"]["code"], -32000);
            assert!(
                m["error"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("status 1")
            );
            m["id"].clone()
        })
        .collect();
    ids.sort_by_key(Value::to_string);
    assert_eq!(ids, vec![json!("two"), json!(1), json!(3)]);
    assert_eq!(r.in_flight(), 0);
}

#[tokio::test]
async fn bad_input_gets_a_json_rpc_error() {
    let mut r = relay();
    let mut out = Vec::new();
    r.from_client(b"{\"jsonrpc\":\"2.0\",\"id\":1,".to_vec(), &mut out)
        .await;
    r.from_client(b"42".to_vec(), &mut out).await;
    r.from_client(b"[]".to_vec(), &mut out).await;
    r.from_client(br#"{"jsonrpc":"2.0","id":9}"#.to_vec(), &mut out)
        .await;
    let codes: Vec<(Value, Value)> = out
        .iter()
        .map(|o| {
            let (to, m) = parsed(o);
            assert_eq!(to, "client");
            (m["id"].clone(), m["error"]["code"].clone())
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            (Value::Null, json!(-32700)),
            (Value::Null, json!(-32600)),
            (Value::Null, json!(-32600)),
            (json!(9), json!(-32600)),
        ]
    );
}

#[tokio::test]
async fn a_message_over_the_limit_answers_its_request() {
    let mut r = listed().await;
    let mut out = Vec::new();
    let request = Dropped {
        len: 20_000_000,
        id: Some(json!(4)),
        request: true,
    };
    r.client_too_long(&request, 16 << 20, &mut out);
    let (to, m) = parsed(&out[0]);
    assert_eq!(
        (to, m["id"].clone(), m["error"]["code"].clone()),
        ("client", json!(4), json!(-32600))
    );
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {}}),
    )
    .await;
    let mut out = Vec::new();
    let answer = Dropped {
        len: 20_000_000,
        id: Some(json!(6)),
        request: false,
    };
    r.server_too_long(&answer, 16 << 20, &mut out).await;
    let (to, m) = parsed(&out[0]);
    assert_eq!(
        (to, m["id"].clone(), m["error"]["code"].clone()),
        ("client", json!(6), json!(-32603))
    );
    assert_eq!(r.in_flight(), 0);
    // A request of the server's over the limit is answered to the server; the client's
    // own request with that id is not touched.
    client(&mut r, json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})).await;
    let mut out = Vec::new();
    let server_request = Dropped {
        len: 20_000_000,
        id: Some(json!(7)),
        request: true,
    };
    r.server_too_long(&server_request, 16 << 20, &mut out).await;
    assert_eq!(parsed(&out[0]).0, "server");
    assert_eq!(r.in_flight(), 1);
    // The client's answer to a request of the server's, over the limit: an error to the
    // server, not to the client.
    let mut out = Vec::new();
    let client_answer = Dropped {
        len: 20_000_000,
        id: Some(json!("s1")),
        request: false,
    };
    r.client_too_long(&client_answer, 16 << 20, &mut out);
    assert_eq!(parsed(&out[0]).0, "server");
}

#[tokio::test]
async fn an_unusable_answer_to_the_relays_own_listing_lets_the_waiting_calls_pass() {
    for answer in [Dropped {
        len: 20_000_000,
        id: None,
        request: false,
    }] {
        let mut r = relay();
        let out = client(
            &mut r,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": "1"}}}),
        )
        .await;
        let (_, list) = parsed(&out[0]);
        let mut out = Vec::new();
        let answer = Dropped {
            id: Some(list["id"].clone()),
            ..answer
        };
        r.server_too_long(&answer, 16 << 20, &mut out).await;
        // The call goes on as sent: nothing to mend it against.
        let (to, call) = parsed(&out[0]);
        assert_eq!(
            (to, call["params"]["arguments"].clone()),
            ("server", json!({"a": "1"}))
        );
    }
    // Not JSON at all.
    let mut r = relay();
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": "1"}}}),
    )
    .await;
    let (_, list) = parsed(&out[0]);
    let mut out = Vec::new();
    let garbled = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"tools":[oops"#,
        list["id"]
    );
    r.from_server(garbled.into_bytes(), &mut out).await;
    assert_eq!(parsed(&out[0]).0, "server");
    assert_eq!(r.in_flight(), 1);
}

#[tokio::test]
async fn a_client_id_in_the_relays_own_namespace_is_refused() {
    let mut r = listed().await;
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": "io.toolmend/tools/list#1", "method": "ping"}),
    )
    .await;
    let (to, m) = parsed(&out[0]);
    assert_eq!((to, m["error"]["code"].clone()), ("client", json!(-32600)));
}

#[tokio::test]
async fn a_mended_call_the_server_refuses_keeps_its_record_in_the_error() {
    let mut r = listed().await;
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": "1", "b": 2}}}),
    )
    .await;
    let out = server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "no"}}),
    )
    .await;
    let (_, m) = parsed(&out[0]);
    assert_eq!(m["error"]["code"], -32602);
    assert_eq!(m["error"]["data"]["io.toolmend/mend"]["mend"], "repaired");
    // A result whose _meta is null gets the record too.
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "add", "arguments": {"a": "1", "b": 2}}}),
    )
    .await;
    let out = server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 4, "result": {"content": [], "_meta": null}}),
    )
    .await;
    let (_, m) = parsed(&out[0]);
    assert_eq!(m["result"]["_meta"]["io.toolmend/mend"]["mend"], "repaired");
}

#[tokio::test]
async fn a_batch_with_calls_is_mended_call_by_call() {
    let mut r = listed().await;
    let out = client(
        &mut r,
        json!([
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": "1", "b": 2}}},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {}}},
            {"jsonrpc": "2.0", "id": 3, "method": "ping"}
        ]),
    )
    .await;
    let got: Vec<(&str, Value)> = out.iter().map(parsed).collect();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].0, "server");
    assert_eq!(got[0].1["params"]["arguments"], json!({"a": 1, "b": 2}));
    assert_eq!((got[1].0, got[1].1["id"].clone()), ("client", json!(2)));
    assert_eq!(
        (got[2].0, got[2].1["method"].clone()),
        ("server", json!("ping"))
    );
}

#[tokio::test]
async fn the_guard_refuses_a_flood_per_session() {
    let mut r = guarded(
        GuardConfig {
            session: Some(Window::new(2, 60.0)),
            ..GuardConfig::default()
        },
        "session-a",
    )
    .await;
    let mut to_server = 0;
    let mut refused = 0;
    for n in 0..4 {
        let out = client(
            &mut r,
            json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "add", "arguments": {"a": n, "b": 1}}}),
        )
        .await;
        match parsed(&out[0]) {
            ("server", _) => {
                to_server += 1;
                server(
                    &mut r,
                    json!({"jsonrpc": "2.0", "id": n, "result": {"content": []}}),
                )
                .await;
            }
            (_, m) => {
                assert_eq!(m["result"]["isError"], true);
                assert!(
                    m["result"]["content"][0]["text"]
                        .as_str()
                        .unwrap_or("")
                        .starts_with(toolmend::guard::FLOOD_PREFIX)
                );
                refused += 1;
            }
        }
    }
    assert_eq!((to_server, refused), (2, 2));
}

#[tokio::test]
async fn an_answer_of_the_relays_own_is_complete_on_a_2026_07_28_connection() {
    let mut r = listed().await;
    let stamp = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "add", "arguments": {"a": 1}, "_meta": stamp}}),
    )
    .await;
    let (_, answer) = parsed(&out[0]);
    assert_eq!(answer["result"]["resultType"], "complete");
    // The handshake era has no such field.
    let out = client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1}}}),
    )
    .await;
    let (_, answer) = parsed(&out[0]);
    assert!(answer["result"].get("resultType").is_none(), "{answer}");
}

/// Collects the events a mender reports.
#[derive(Debug, Default)]
struct Collected(std::sync::Mutex<Vec<toolmend::events::CallEvent>>);

impl toolmend_mcp::Events for Collected {
    fn send(&self, event: toolmend::events::CallEvent) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(event);
    }

    fn session_hash(&self, id: &str) -> String {
        format!("h({id})")
    }
}

#[tokio::test]
async fn every_call_is_an_event_in_the_gateways_format_naming_no_value() {
    let sink = Arc::new(Collected::default());
    let mender = Mender::new(PlanOptions::default(), None).with_events(sink.clone());
    let mut r = Relay::new(Arc::new(mender), "sess", false);
    client(
        &mut r,
        json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}),
    )
    .await;
    server(
        &mut r,
        json!({"jsonrpc": "2.0", "id": "l", "result": {"tools": tools()}}),
    )
    .await;
    for (id, args) in [
        (1, json!({"a": "secret-7", "b": 1})),
        (2, json!({"a": "7", "b": 1})),
        (3, json!({"a": 1, "b": 2})),
    ] {
        client(
            &mut r,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "add", "arguments": args}}),
        )
        .await;
    }
    let events = sink
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let got: Vec<(Option<String>, &str, &str)> = events
        .iter()
        .map(|e| (e.request_id.clone(), e.outcome.as_str(), e.mend.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some("1".into()), "feedback", "feedback"),
            (Some("2".into()), "executed", "repaired"),
            (Some("3".into()), "executed", "valid"),
        ]
    );
    assert!(
        events
            .iter()
            .all(|e| e.front == "mcp" && e.session.as_deref() == Some("h(sess)"))
    );
    let line = serde_json::to_string(&events).unwrap_or_default();
    assert!(!line.contains("secret-7"), "{line}");
}

#[tokio::test]
async fn the_same_call_again_and_again_is_a_loop_the_guard_refuses() {
    let mut r = guarded(
        GuardConfig {
            repeat: Some(toolmend::guard::Ladder {
                observe: 2,
                block: 3,
                stop: 0,
                shadow: false,
            }),
            ..GuardConfig::default()
        },
        "loop",
    )
    .await;
    let mut went = Vec::new();
    for n in 0..4 {
        let out = client(
            &mut r,
            json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}}),
        )
        .await;
        let (to, _) = parsed(&out[0]);
        went.push(to);
        if to == "server" {
            server(
                &mut r,
                json!({"jsonrpc": "2.0", "id": n, "result": {"content": [{"type": "text", "text": "2"}]}}),
            )
            .await;
        }
    }
    // Two identical calls run; the third in a row is a loop.
    assert_eq!(went, ["server", "server", "client", "client"]);
}
