//! The stdio wrapper around real child processes: the Python SDK's own MCP server, and
//! small servers that misbehave on purpose.

use std::{ffi::OsString, path::PathBuf, sync::Arc, time::Duration};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use toolmend::message::PlanOptions;
use toolmend_mcp::{Mender, Relay, StdioOptions, stdio};

/// The client's ends of the pipes, and the proxy's task.
struct Session {
    to_proxy: Option<DuplexStream>,
    from_proxy: BufReader<DuplexStream>,
    proxy: tokio::task::JoinHandle<std::io::Result<i32>>,
}

impl Session {
    fn start(program: impl Into<OsString>, args: &[&str], max: usize) -> Self {
        Self::with_grace(program, args, max, Duration::from_secs(10))
    }

    fn with_grace(
        program: impl Into<OsString>,
        args: &[&str],
        max: usize,
        grace: Duration,
    ) -> Self {
        let (client_side, proxy_in) = tokio::io::duplex(1 << 16);
        let (proxy_out, client_read) = tokio::io::duplex(1 << 16);
        let opts = StdioOptions {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
            max_message_bytes: max,
            grace,
        };
        let relay = Relay::new(
            Arc::new(Mender::new(PlanOptions::default(), None)),
            "t",
            false,
        );
        #[allow(clippy::disallowed_methods)]
        let proxy =
            tokio::spawn(async move { stdio::run(&opts, relay, proxy_in, proxy_out).await });
        Session {
            to_proxy: Some(client_side),
            from_proxy: BufReader::new(client_read),
            proxy,
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        let w = self.to_proxy.as_mut().unwrap_or_else(|| panic!("closed"));
        w.write_all(bytes).await.unwrap_or_else(|e| panic!("{e}"));
        w.write_all(b"\n").await.unwrap_or_else(|e| panic!("{e}"));
    }

    async fn send(&mut self, m: Value) {
        self.send_raw(m.to_string().as_bytes()).await;
    }

    /// The next message for the client (within 20 s: nothing may hang).
    async fn recv(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(
            Duration::from_secs(20),
            self.from_proxy.read_line(&mut line),
        )
        .await
        .unwrap_or_else(|_| panic!("no message within 20 s"))
        .unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// The answer to request `id`, skipping notifications.
    async fn answer(&mut self, id: Value) -> Value {
        loop {
            let m = self.recv().await;
            if m.get("id") == Some(&id) && m.get("method").is_none() {
                return m;
            }
        }
    }

    async fn end(mut self) -> i32 {
        self.to_proxy = None;
        tokio::time::timeout(Duration::from_secs(20), self.proxy)
            .await
            .unwrap_or_else(|_| panic!("the proxy did not end"))
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

/// The interpreter with `mcp` importable: `TOOLMEND_PYTHON`, or the workspace's `.venv`
/// (scripts/python-env.sh). Neither is a failure, not a skip.
pub(crate) fn python_with_mcp() -> PathBuf {
    let candidates: Vec<PathBuf> = std::env::var_os("TOOLMEND_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python")])
        .collect();
    candidates
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "no Python with the mcp package: run scripts/python-env.sh, or point \
                 TOOLMEND_PYTHON at an interpreter that has mcp 2.x"
            )
        })
}

pub(crate) fn python_server() -> String {
    format!(
        "{}/../toolmend-tools/tests/mcp_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A stdio MCP server in plain Python that answers `initialize` and `tools/list` (one
/// tool, `add`) and then does what `on_call` says when called.
fn tiny_server(on_call: &str) -> Vec<String> {
    let script = format!(
        r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    i = m.get("id")
    meth = m.get("method")
    if meth == "initialize":
        r = {{"protocolVersion": "2025-06-18", "capabilities": {{"tools": {{}}}}, "serverInfo": {{"name": "tiny", "version": "0"}}}}
    elif meth == "tools/list":
        r = {{"tools": [{{"name": "add", "inputSchema": {{"type": "object", "properties": {{"a": {{"type": "integer"}}}}, "required": ["a"]}}}}]}}
    elif meth == "tools/call":
{on_call}
    elif i is None:
        continue
    else:
        r = {{}}
    print(json.dumps({{"jsonrpc": "2.0", "id": i, "result": r}}), flush=True)
"#
    );
    vec!["-c".to_owned(), script]
}

async fn initialize(s: &mut Session) {
    s.send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "it", "version": "0"}}}),
    )
    .await;
    let init = s.answer(json!(0)).await;
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
}

#[tokio::test]
async fn the_python_sdks_server_gets_mended_calls_and_answers_them() {
    let server = python_server();
    let mut s = Session::start(python_with_mcp(), &[&server, "stdio"], 1 << 20);
    initialize(&mut s).await;
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    let list = s.answer(json!(1)).await;
    assert!(
        list["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() == 3),
        "{list}"
    );
    // Integers as strings: the SDK's server would refuse them (it validates).
    s.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "add", "arguments": {"a": "5", "b": "7"}}}))
        .await;
    let sum = s.answer(json!(2)).await;
    assert_eq!(sum["result"]["isError"], json!(false), "{sum}");
    assert_eq!(
        sum["result"]["structuredContent"],
        json!({"result": 12}),
        "{sum}"
    );
    assert_eq!(
        sum["result"]["_meta"]["io.toolmend/mend"]["mend"],
        "repaired"
    );
    s.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "echo", "arguments": "{'text': 'hi'}"}}))
        .await;
    let echo = s.answer(json!(3)).await;
    assert_eq!(echo["result"]["content"][0]["text"], "hi", "{echo}");
    // Missing a required value: answered here, with the field named.
    s.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                  "params": {"name": "add", "arguments": {"a": 1}}}))
        .await;
    let refused = s.answer(json!(4)).await;
    assert_eq!(refused["result"]["isError"], true);
    assert!(
        refused["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("\"b\"")),
        "{refused}"
    );
    // The server's own errors pass as they came.
    s.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "boom", "arguments": {}}}))
        .await;
    let boom = s.answer(json!(5)).await;
    assert_eq!(boom["result"]["isError"], true);
    assert!(
        boom["result"]
            .get("_meta")
            .and_then(|m| m.get("io.toolmend/mend"))
            .is_none(),
        "{boom}"
    );
    s.send(json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}))
        .await;
    assert_eq!(s.answer(json!(6)).await["result"], json!({}));
    assert_eq!(s.end().await, 0);
}

#[tokio::test]
async fn a_server_that_dies_mid_call_answers_the_call_with_an_error_and_ends_the_proxy() {
    let mut s = Session::start(
        "python3",
        &as_strs(&tiny_server("        sys.exit(3)")),
        1 << 20,
    );
    initialize(&mut s).await;
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1}}}))
        .await;
    let err = s.answer(json!(1)).await;
    assert_eq!(err["error"]["code"], -32000, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("status 3")),
        "{err}"
    );
    assert_eq!(s.end().await, 3);
}

#[tokio::test]
async fn a_line_over_the_limit_is_refused_and_the_session_goes_on() {
    let mut s = Session::start("python3", &as_strs(&tiny_server("        r = {}")), 1 << 20);
    initialize(&mut s).await;
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"add","arguments":{{"a":"{}"}}}}}}"#,
        "9".repeat(3 << 20)
    );
    s.send_raw(huge.as_bytes()).await;
    let err = s.answer(json!(7)).await;
    assert_eq!(err["error"]["code"], -32600, "{err}");
    s.send_raw(b"{not json").await;
    let err = s.recv().await;
    assert_eq!(err["error"]["code"], -32700, "{err}");
    s.send(json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
        .await;
    assert_eq!(s.answer(json!(8)).await["result"], json!({}));
    assert_eq!(s.end().await, 0);
}

#[tokio::test]
async fn a_server_answer_over_the_limit_answers_its_request_with_an_error() {
    let on_call = "        r = {\"content\": [{\"type\": \"text\", \"text\": \"x\" * 3000000}]}";
    let mut s = Session::start("python3", &as_strs(&tiny_server(on_call)), 1 << 20);
    initialize(&mut s).await;
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1}}}))
        .await;
    let err = s.answer(json!(1)).await;
    assert_eq!(err["error"]["code"], -32603, "{err}");
    assert_eq!(s.end().await, 0);
}

#[tokio::test]
async fn a_server_that_ignores_the_closed_stdin_is_killed_after_the_grace() {
    let script =
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)";
    let s = Session::with_grace(
        "python3",
        &["-c", script],
        1 << 20,
        Duration::from_millis(300),
    );
    let status = s.end().await;
    assert_ne!(status, 0);
}

#[tokio::test]
async fn a_command_that_does_not_exist_is_an_error_naming_it() {
    let s = Session::start("/nonexistent/mcp-server", &[], 1 << 20);
    let err = tokio::time::timeout(Duration::from_secs(5), s.proxy)
        .await
        .unwrap_or_else(|_| panic!("hung"))
        .unwrap_or_else(|e| panic!("{e}"))
        .err()
        .unwrap_or_else(|| panic!("started"));
    assert!(err.to_string().contains("/nonexistent/mcp-server"), "{err}");
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test]
async fn a_call_waiting_for_the_tool_list_is_answered_though_the_client_closed_its_side() {
    let mut s = Session::start(
        "python3",
        &as_strs(&tiny_server(
            "        r = {\"content\": [{\"type\": \"text\", \"text\": \"done\"}]}",
        )),
        1 << 20,
    );
    initialize(&mut s).await;
    // No listing by the client: the call waits for the relay's own, and the client
    // closes its side at once.
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": "1"}}}))
        .await;
    s.to_proxy = None;
    let answer = s.answer(json!(1)).await;
    assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["io.toolmend/mend"]["mend"],
        "repaired"
    );
    assert_eq!(s.end().await, 0);
}
