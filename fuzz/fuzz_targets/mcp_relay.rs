//! Arbitrary lines through the MCP proxy's relay, both ways, and through its framing.
//!
//! Each line of the input goes to the client's side or the server's (its first byte
//! says which); the relay knows three tools from a listing first. Invariants: nothing
//! panics; what the relay sends the server is JSON (a line that is not JSON never
//! reaches it); what it answers the client itself is JSON-RPC; the requests it holds
//! never outnumber the lines read; the framing never yields a line over its bound.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tokio::io::BufReader;
use toolmend::message::PlanOptions;
use toolmend_mcp::{
    Mender, Out, Relay,
    frame::{Frame, Lines, sniff_id},
    relay::Dropped,
};

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut relay = Relay::new(Arc::new(Mender::new(PlanOptions::default(), None)), "f", false);
        let mut out = Vec::new();
        let tools = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"});
        relay.from_client(tools.to_string().into_bytes(), &mut out).await;
        let listed = json!({"jsonrpc": "2.0", "id": "l", "result": {"tools": [
            {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
            {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
            {"name": "bad", "inputSchema": {"type": "nonsense"}}
        ]}});
        relay.from_server(listed.to_string().into_bytes(), &mut out).await;
        out.clear();
        let mut lines = 0usize;
        for line in data.split(|&b| b == b'\n') {
            let Some((&side, rest)) = line.split_first() else {
                continue;
            };
            lines += 1;
            if side % 2 == 0 {
                relay.from_client(rest.to_vec(), &mut out).await;
            } else {
                relay.from_server(rest.to_vec(), &mut out).await;
                if side % 3 == 0 {
                    let dropped = Dropped::of(rest.len(), rest, rest);
                    relay.server_too_long(&dropped, 1, &mut out).await;
                } else if side % 5 == 0 {
                    relay.client_too_long(&Dropped::of(rest.len(), rest, rest), 1, &mut out);
                }
            }
            for o in out.drain(..) {
                match o {
                    Out::Server(b) => {
                        assert!(serde_json::from_slice::<Value>(&b).is_ok(), "{:?}", String::from_utf8_lossy(&b));
                    }
                    Out::Client(b) => {
                        // Pass-through of the server's own bytes may be anything; the
                        // relay's own answers are JSON-RPC.
                        if side % 2 == 0 {
                            let v: Value = serde_json::from_slice(&b).expect("a JSON answer");
                            assert_eq!(v["jsonrpc"], "2.0");
                        }
                    }
                }
            }
            assert!(relay.in_flight() <= lines + 1);
        }
        let mut out = Vec::new();
        relay.server_gone("fuzz", &mut out);
        assert_eq!(relay.in_flight(), 0);

        let mut framed = Lines::new(BufReader::with_capacity(5, data), 64);
        while let Ok(Some(f)) = framed.next().await {
            match f {
                Frame::Line(l) => assert!(l.len() <= 64),
                Frame::TooLong { len, head, tail } => {
                    assert!(len > 64 && head.len() <= 512 && tail.len() <= 512);
                    let _ = sniff_id(&head, &tail);
                }
            }
        }
    });
});
