//! One pipeline: the same assistant messages through every front give the same calls.
//!
//! Each case of `tests/equivalence/cases.jsonl` (a history, an assistant message, the
//! tools) goes through the core plan (`toolmend::message`), the tool node, `toolmend mend`,
//! and `toolmend serve` in front of the scripted provider, as JSON and as a stream, as chat
//! completions and through the Messages and Responses fronts (the case's history in
//! Anthropic's blocks or as Responses input items; what it gets back read as their clients
//! read it). Every
//! front must give the same calls (ids, names, arguments, disposition: may run or
//! feedback) and the same remaining content. A front that plans on its own drifts from the
//! others on some case and fails here. The Python package is held to the same cases by
//! `python/tests/test_equivalence.py`.
//!
//! The MCP proxy takes one call a request: each sent call of every case goes through its
//! relay as a `tools/call` (an object as arguments, any other text as a JSON string) and
//! must be forwarded with the arguments, or answered with feedback, as the core plans
//! that one call on its own.
//!
//! The cases with a `guard` (the gateway's `[guard]` table) go once more through the fronts
//! that guard (the node, the gateway as JSON and as a stream; Python in its own test): each
//! call's id, tool and outcome (`flooded` for a refused one) must be the same. The CLI's
//! `mend` has no guard.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use serde_json::{Value, json};
use toolmend::{
    CompiledTool, Toolbox,
    conversation::{AssistantMessage, Message, Tool},
    message::{self, CallOutcome, PlanOptions},
    node::{Registry, ToolError, ToolNode, tool_fn},
    schema::{Phase, ValidationContext},
};
use toolmend_scripted::{Script, ScriptedProvider, Step};

const BIN: &str = env!("CARGO_BIN_EXE_toolmend");

#[derive(Debug, Clone)]
struct Case {
    name: String,
    /// The gateway's `[guard]` table, for the guard cases.
    guard: Option<Value>,
    /// False: the guarding fronts are given no session (`"session": false`).
    session: bool,
    history: Vec<Message>,
    message: AssistantMessage,
    tools: Vec<Tool>,
    raw: Value,
}

/// What a front made of a message: its calls in order and its remaining content.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    /// (id, name, arguments, disposition) per call.
    calls: Vec<(String, String, Value, &'static str)>,
    content: Option<String>,
}

fn cases() -> Vec<Case> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/equivalence/cases.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let raw: Value = serde_json::from_str(l).unwrap();
            let message = match serde_json::from_value(raw["message"].clone()).unwrap() {
                Message::Assistant(a) => a,
                other => panic!("not an assistant message: {other:?}"),
            };
            Case {
                name: raw["name"].as_str().unwrap().to_owned(),
                guard: raw.get("guard").cloned(),
                session: raw["session"].as_bool() != Some(false),
                history: serde_json::from_value(raw["history"].clone()).unwrap(),
                message,
                tools: serde_json::from_value(raw["tools"].clone()).unwrap(),
                raw,
            }
        })
        .collect()
}

/// The cases that carry `key`.
fn cases_with(key: &str) -> Vec<Case> {
    cases()
        .into_iter()
        .filter(|c| c.raw.get(key).is_some())
        .collect()
}

/// A runtime for the node and the scripted provider.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn args_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn content_text(m: &AssistantMessage) -> Option<String> {
    m.text().filter(|t| !t.is_empty())
}

/// The calls of a sanitized message, each with the disposition `of` gives its id.
fn outcome_of(m: &AssistantMessage, of: impl Fn(&str) -> &'static str) -> Outcome {
    let calls = m
        .tool_calls
        .iter()
        .flatten()
        .map(|tc| {
            let id = tc.id.clone().unwrap_or_default();
            let d = of(&id);
            (id, tc.name.clone(), args_value(&tc.arguments), d)
        })
        .collect();
    Outcome {
        calls,
        content: content_text(m),
    }
}

fn disposition(o: CallOutcome) -> &'static str {
    match o {
        CallOutcome::Feedback => "feedback",
        CallOutcome::Dropped => "dropped",
        _ => "executed",
    }
}

fn toolbox(tools: &[Tool]) -> Toolbox {
    let mut b = Toolbox::new();
    for t in tools {
        let f = t;
        b.add(
            CompiledTool::compile(
                &f.name,
                f.description.as_deref().unwrap_or_default(),
                f.parameters.as_ref().unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
    }
    b
}

fn core(case: &Case) -> Outcome {
    let tools = toolbox(&case.tools);
    let ctx = ValidationContext::new("", Phase::Initial);
    let opts = PlanOptions::default();
    let plan = message::plan_assistant(
        &case.message,
        &case.history,
        &[],
        false,
        &tools,
        &opts,
        &ctx,
    );
    let sanitized = message::sanitize_assistant(&case.message, &plan.shape, &plan.calls);
    let by_id: BTreeMap<String, CallOutcome> = plan
        .calls
        .iter()
        .filter_map(|c| Some((c.id.clone()?, c.outcome)))
        .collect();
    outcome_of(&sanitized, |id| disposition(by_id[id]))
}

/// The case's tools, each answering "ok".
fn registry(case: &Case) -> Registry {
    let mut registry = Registry::new();
    for t in &case.tools {
        let f = t;
        registry
            .add(tool_fn(
                f.name.clone(),
                f.description.clone().unwrap_or_default(),
                f.parameters.clone().unwrap(),
                |_, _| async move { Ok::<_, ToolError>("ok".to_owned()) },
            ))
            .unwrap();
    }
    registry
}

async fn node(case: &Case) -> Outcome {
    let node = ToolNode::builder(registry(case)).build();
    let mut messages = case.history.clone();
    messages.push(Message::Assistant(case.message.clone()));
    let out = node.invoke(&messages).await.unwrap();
    let by_id: BTreeMap<String, CallOutcome> = out
        .stats
        .calls
        .iter()
        // A dropped exact repeat names the id of the call it repeats: that call's outcome
        // is the one its id has.
        .filter(|c| c.outcome != CallOutcome::Dropped)
        .filter_map(|c| Some((c.call_id.clone()?, c.outcome)))
        .collect();
    outcome_of(&out.assistant, |id| disposition(by_id[id]))
}

fn cli(cases: &[Case]) -> Vec<Outcome> {
    let input: String = cases
        .iter()
        .map(|c| {
            let line = json!({"message": c.raw["message"], "tools": c.raw["tools"], "history": c.raw["history"]});
            format!("{line}\n")
        })
        .collect();
    let mut child = Command::new(BIN)
        .args(["mend", "--format", "json", "--refuse-truncated"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("summary").is_none())
        .map(|report| {
            let m: AssistantMessage = serde_json::from_value(report["message"].clone()).unwrap();
            let by_id: BTreeMap<String, String> = report["calls"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| {
                    Some((
                        c["id"].as_str()?.to_owned(),
                        c["disposition"].as_str()?.to_owned(),
                    ))
                })
                .collect();
            outcome_of(&m, |id| match by_id[id].as_str() {
                "feedback" => "feedback",
                "dropped" => "dropped",
                _ => "executed",
            })
        })
        .collect()
}

/// `toolmend serve` on a free port, in front of `upstream`.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(upstream: &str) -> Serve {
    // Invalid calls pass, flagged: the plan is what is compared, not a re-ask.
    serve_with(
        &["--upstream", upstream],
        &[("TOOLMEND_CALLS__INVALID", "pass")],
    )
}

/// `toolmend serve` on a free port with `args`, in an environment cleared of
/// `TOOLMEND_*` but for `env`.
fn serve_with(args: &[&str], env: &[(&str, &str)]) -> Serve {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0"]).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("TOOLMEND_") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    let addr = banner
        .strip_prefix("toolmend gateway: http://")
        .and_then(|rest| rest.split_once("/v1"))
        .map(|(addr, _)| addr.parse().unwrap())
        .unwrap_or_else(|| panic!("unexpected banner: {banner}"));
    Serve { child, addr }
}

/// One POST; the response head and its (de-chunked) body.
fn post(addr: SocketAddr, body: &Value) -> (String, Vec<u8>) {
    post_as(addr, body, None)
}

/// [`post`] in `session` (`x-toolmend-session`), when one is given.
fn post_as(addr: SocketAddr, body: &Value, session: Option<&str>) -> (String, Vec<u8>) {
    post_to(addr, "/v1/chat/completions", body, session)
}

/// One POST to `path`.
fn post_to(addr: SocketAddr, path: &str, body: &Value, session: Option<&str>) -> (String, Vec<u8>) {
    let body = body.to_string();
    let session = session
        .map(|s| format!("x-toolmend-session: {s}\r\n"))
        .unwrap_or_default();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         {session}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let rest = &raw[end + 4..];
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "{head}\n{}",
        String::from_utf8_lossy(&body)
    );
    (head, body)
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&rest[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&rest[eol + 2..eol + 2 + size]);
        rest = &rest[eol + 2 + size + 2..];
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn request(case: &Case, stream: bool) -> Value {
    json!({"model": "m", "messages": case.raw["history"], "tools": case.raw["tools"], "stream": stream})
}

fn gateway_json(addr: SocketAddr, case: &Case) -> Outcome {
    let (head, body) = post(addr, &request(case, false));
    let v: Value = serde_json::from_slice(&body).unwrap();
    let m: AssistantMessage = serde_json::from_value(v["choices"][0]["message"].clone()).unwrap();
    let unresolved: Vec<String> = header(&head, "x-toolmend-unresolved")
        .map(|h| h.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    outcome_of(&m, |id| {
        if unresolved.iter().any(|u| u == id) {
            "feedback"
        } else {
            "executed"
        }
    })
}

/// The stream assembled as a client does: content concatenated, calls by `index`.
fn gateway_stream(addr: SocketAddr, case: &Case) -> Outcome {
    let (_, body) = post(addr, &request(case, true));
    let text = String::from_utf8(body).unwrap();
    let mut unresolved: Vec<String> = Vec::new();
    let mut chunks = Vec::new();
    for event in text.split("\n\n") {
        if let Some(stats) = event.strip_prefix(": toolmend ") {
            let v: Value = serde_json::from_str(stats).unwrap();
            unresolved = v["unresolved"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect();
            continue;
        }
        let Some(data) = event.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            continue;
        }
        let v: Value = serde_json::from_str(data).unwrap();
        assert!(v.get("error").is_none(), "{}: {v}", case.name);
        chunks.push(v);
    }
    let message = assemble_choices(&chunks).remove(&0).unwrap_or_default();
    outcome_of(&message, |id| {
        if unresolved.iter().any(|u| u == id) {
            "feedback"
        } else {
            "executed"
        }
    })
}

/// A case's request in Anthropic's Messages wire: the history's system text on top, each
/// assistant turn as blocks (`text`, `tool_use` with its arguments as the input), the
/// tool messages after it as one user turn of `tool_result` blocks; the tools with
/// `input_schema`.
fn messages_request(case: &Case, stream: bool) -> Value {
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for m in case.raw["history"].as_array().unwrap() {
        let text = m["content"].as_str().unwrap_or_default();
        match m["role"].as_str().unwrap() {
            "system" => system.push(text.to_owned()),
            "user" => messages.push(json!({"role": "user", "content": text})),
            "assistant" => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for tc in m["tool_calls"].as_array().into_iter().flatten() {
                    let input: Value =
                        serde_json::from_str(tc["function"]["arguments"].as_str().unwrap())
                            .unwrap();
                    blocks.push(json!({"type": "tool_use", "id": tc["id"],
                        "name": tc["function"]["name"], "input": input}));
                }
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            "tool" => {
                let result = json!({"type": "tool_result", "tool_use_id": m["tool_call_id"],
                    "content": text});
                match messages.last_mut() {
                    Some(last) if last["role"] == "user" && last["content"].is_array() => {
                        last["content"].as_array_mut().unwrap().push(result);
                    }
                    _ => messages.push(json!({"role": "user", "content": [result]})),
                }
            }
            other => panic!("{}: a {other} message", case.name),
        }
    }
    let tools: Vec<Value> = case.raw["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            json!({"name": f["name"], "description": f["description"],
                "input_schema": f["parameters"]})
        })
        .collect();
    let mut body = json!({"model": "m", "max_tokens": 100, "messages": messages,
        "tools": tools, "stream": stream});
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    body
}

/// What a Messages client gets, as an [`Outcome`]: the text blocks joined, each
/// `tool_use` with its input, its disposition from the account.
fn messages_outcome(content: &[Value], account: &Value) -> Outcome {
    let unresolved: Vec<&str> = account["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "unresolved")
        .filter_map(|c| c["id"].as_str())
        .collect();
    let text: String = content
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    let calls = content
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| {
            let id = b["id"].as_str().unwrap().to_owned();
            let d = if unresolved.contains(&id.as_str()) {
                "feedback"
            } else {
                "executed"
            };
            (
                id,
                b["name"].as_str().unwrap().to_owned(),
                b["input"].clone(),
                d,
            )
        })
        .collect();
    Outcome {
        calls,
        content: Some(text).filter(|t| !t.is_empty()),
    }
}

fn messages_json(addr: SocketAddr, case: &Case) -> Outcome {
    let (_, body) = post_to(addr, "/v1/messages", &messages_request(case, false), None);
    let v: Value = serde_json::from_slice(&body).unwrap();
    messages_outcome(v["content"].as_array().unwrap(), &v["toolmend"])
}

/// The Messages stream assembled as a client does: each block from its start event and
/// deltas; the account from `message_delta`.
fn messages_stream(addr: SocketAddr, case: &Case) -> Outcome {
    let (_, body) = post_to(addr, "/v1/messages", &messages_request(case, true), None);
    let text = String::from_utf8(body).unwrap();
    let mut content: Vec<Value> = Vec::new();
    let mut account = Value::Null;
    let events = text
        .split("\n\n")
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str::<Value>(d).unwrap());
    for event in events {
        match event["type"].as_str().unwrap() {
            "error" => panic!("{}: {event}", case.name),
            "content_block_start" => {
                let mut b = event["content_block"].clone();
                if b["type"] == "tool_use" {
                    b["partial"] = json!("");
                }
                content.push(b);
            }
            "content_block_delta" => {
                let b = content.last_mut().unwrap();
                let d = &event["delta"];
                if let Some(t) = d["text"].as_str() {
                    b["text"] = json!(format!("{}{t}", b["text"].as_str().unwrap_or_default()));
                }
                if let Some(p) = d["partial_json"].as_str() {
                    b["partial"] = json!(format!("{}{p}", b["partial"].as_str().unwrap()));
                }
            }
            "message_delta" => account = event["toolmend"].clone(),
            _ => {}
        }
    }
    for b in &mut content {
        if let Some(p) = b.get("partial").and_then(Value::as_str) {
            b["input"] = serde_json::from_str(p).unwrap();
        }
    }
    messages_outcome(&content, &account)
}

/// A case's request in the Responses wire: the history as input items (messages,
/// `function_call`, `function_call_output`); the tools flat.
fn responses_request(case: &Case, stream: bool) -> Value {
    let mut input = Vec::new();
    for m in case.raw["history"].as_array().unwrap() {
        let text = m["content"].as_str().unwrap_or_default();
        match m["role"].as_str().unwrap() {
            "tool" => input.push(json!({"type": "function_call_output",
                "call_id": m["tool_call_id"], "output": text})),
            "assistant" => {
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]}));
                }
                for tc in m["tool_calls"].as_array().into_iter().flatten() {
                    input.push(json!({"type": "function_call", "call_id": tc["id"],
                        "name": tc["function"]["name"], "arguments": tc["function"]["arguments"]}));
                }
            }
            role => input.push(json!({"role": role, "content": text})),
        }
    }
    let tools: Vec<Value> = case.raw["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            json!({"type": "function", "name": f["name"], "description": f["description"],
                "parameters": f["parameters"]})
        })
        .collect();
    json!({"model": "m", "input": input, "tools": tools, "stream": stream, "store": false})
}

/// What a Responses client gets, as an [`Outcome`]: the `output_text` of the message
/// items, each `function_call` with its arguments, its disposition from the account.
fn responses_outcome(response: &Value) -> Outcome {
    let unresolved: Vec<&str> = response["toolmend"]["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "unresolved")
        .filter_map(|c| c["id"].as_str())
        .collect();
    let output = response["output"].as_array().unwrap();
    let text: String = output
        .iter()
        .filter(|o| o["type"] == "message")
        .flat_map(|o| o["content"].as_array().unwrap().iter())
        .filter_map(|p| p["text"].as_str())
        .collect();
    let calls = output
        .iter()
        .filter(|o| o["type"] == "function_call")
        .map(|o| {
            let id = o["call_id"].as_str().unwrap().to_owned();
            let d = if unresolved.contains(&id.as_str()) {
                "feedback"
            } else {
                "executed"
            };
            let args = args_value(o["arguments"].as_str().unwrap());
            (id, o["name"].as_str().unwrap().to_owned(), args, d)
        })
        .collect();
    Outcome {
        calls,
        content: Some(text).filter(|t| !t.is_empty()),
    }
}

fn responses_json(addr: SocketAddr, case: &Case) -> Outcome {
    let (_, body) = post_to(addr, "/v1/responses", &responses_request(case, false), None);
    responses_outcome(&serde_json::from_slice(&body).unwrap())
}

/// The Responses stream as a client reads it: `response.completed`'s response.
fn responses_stream(addr: SocketAddr, case: &Case) -> Outcome {
    let (_, body) = post_to(addr, "/v1/responses", &responses_request(case, true), None);
    let text = String::from_utf8(body).unwrap();
    let done = text
        .split("\n\n")
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .inspect(|e| assert_ne!(e["type"], "error", "{}: {e}", case.name))
        .find(|e| e["type"] == "response.completed" || e["type"] == "response.incomplete")
        .unwrap_or_else(|| panic!("{}: no response.completed in {text}", case.name));
    responses_outcome(&done["response"])
}

/// The core's outcome as a Messages client can see it: a call whose arguments are not a
/// JSON object (one that stays invalid, passed on) has the input `{}` (named in the
/// account's `translation.left_out`).
fn as_messages_see_it(mut o: Outcome) -> Outcome {
    for c in &mut o.calls {
        if !c.2.is_object() {
            c.2 = json!({});
        }
    }
    o
}

#[test]
fn every_front_plans_every_message_the_same() {
    let cases = cases();
    assert!(cases.len() >= 20, "the case set shrank");
    let rt = runtime();
    // Each case is answered six times by the scripted upstream: to chat completions, to
    // the Messages front and to the Responses front, each as JSON, then streamed.
    let script = cases.iter().fold(Script::new(), |s, c| {
        (0..6).fold(s, |s, _| s.then(Step::Reply(c.message.clone())))
    });
    let provider = Arc::new(rt.block_on(ScriptedProvider::start(script)).unwrap());
    let gateway = serve(&provider.base_url());
    let from_cli = cli(&cases);
    let mut failures = Vec::new();
    for (case, cli_out) in cases.iter().zip(from_cli) {
        let reference = core(case);
        let fronts = [
            ("node", rt.block_on(node(case))),
            ("cli", cli_out),
            ("gateway json", gateway_json(gateway.addr, case)),
            ("gateway stream", gateway_stream(gateway.addr, case)),
            ("responses json", responses_json(gateway.addr, case)),
            ("responses stream", responses_stream(gateway.addr, case)),
        ];
        let messages = [
            ("messages json", messages_json(gateway.addr, case)),
            ("messages stream", messages_stream(gateway.addr, case)),
        ];
        let seen_as_messages = as_messages_see_it(reference.clone());
        for (front, got) in messages {
            if got != seen_as_messages {
                failures.push(format!(
                    "{}: {front} differs from the core plan\n  core:  {seen_as_messages:?}\n  {front}: {got:?}",
                    case.name
                ));
            }
        }
        for (front, got) in fronts {
            if got != reference {
                failures.push(format!(
                    "{}: {front} differs from the core plan\n  core:  {reference:?}\n  {front}: {got:?}",
                    case.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether the upstream's own API carries `case`'s message as it is: every call with its
/// id (a provider speaking Messages or Responses gives a call without one an id of its
/// own) and, for Messages, arguments that are a JSON object (Messages has no place for
/// others: a model server writes such a call into its text instead).
fn carried(case: &Case, api: &str) -> bool {
    case.message.tool_calls.iter().flatten().all(|c| {
        c.id.is_some()
            && (api != "messages"
                || serde_json::from_str::<Value>(&c.arguments).is_ok_and(|v| v.is_object()))
    })
}

#[test]
fn every_front_plans_the_same_from_a_messages_or_responses_upstream() {
    // One pipeline whatever the upstream speaks: the same message, sent by the provider
    // in Messages or Responses, read back and planned, gives every front the core's plan.
    let rt = runtime();
    for api in ["messages", "responses"] {
        let cases: Vec<Case> = cases().into_iter().filter(|c| carried(c, api)).collect();
        assert!(cases.len() >= 10, "{api}: {} cases", cases.len());
        let script = cases.iter().fold(Script::new(), |s, c| {
            (0..6).fold(s, |s, _| s.then(Step::Reply(c.message.clone())))
        });
        let provider = Arc::new(rt.block_on(ScriptedProvider::start(script)).unwrap());
        let gateway = serve_with(
            &["--upstream", &provider.base_url()],
            &[
                ("TOOLMEND_CALLS__INVALID", "pass"),
                ("TOOLMEND_UPSTREAM__API", api),
            ],
        );
        let mut failures = Vec::new();
        for case in &cases {
            let reference = core(case);
            let seen_as_messages = as_messages_see_it(reference.clone());
            let fronts = [
                ("gateway json", gateway_json(gateway.addr, case), &reference),
                (
                    "gateway stream",
                    gateway_stream(gateway.addr, case),
                    &reference,
                ),
                (
                    "responses json",
                    responses_json(gateway.addr, case),
                    &reference,
                ),
                (
                    "responses stream",
                    responses_stream(gateway.addr, case),
                    &reference,
                ),
                (
                    "messages json",
                    messages_json(gateway.addr, case),
                    &seen_as_messages,
                ),
                (
                    "messages stream",
                    messages_stream(gateway.addr, case),
                    &seen_as_messages,
                ),
            ];
            for (front, got, want) in fronts {
                if got != *want {
                    failures.push(format!(
                        "{}: {front} through a {api} upstream differs from the core plan\n  \
                         core:  {want:?}\n  {front}: {got:?}",
                        case.name
                    ));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn the_cases_cover_every_source_and_id_rule() {
    // The set must keep exercising what the fronts used to disagree on.
    let cases = cases();
    let tools = toolbox(&cases[0].tools);
    let ctx = ValidationContext::new("", Phase::Initial);
    let mut fixes = std::collections::BTreeSet::new();
    let mut sources = std::collections::BTreeSet::new();
    let mut outcomes = std::collections::BTreeSet::new();
    for c in &cases {
        let plan = message::plan_assistant(
            &c.message,
            &c.history,
            &[],
            false,
            &tools,
            &PlanOptions::default(),
            &ctx,
        );
        for p in &plan.calls {
            sources.insert(p.source.as_str());
            outcomes.insert(p.outcome.as_str());
            for f in &p.call.fixes {
                fixes.insert(f.kind.id());
            }
        }
        for f in &plan.shape.message_fixes {
            fixes.insert(f.kind.id());
        }
    }
    for s in ["tool_calls", "text", "glued"] {
        assert!(sources.contains(s), "no case with source {s}");
    }
    for o in ["executed", "feedback", "dropped"] {
        assert!(outcomes.contains(o), "no case with outcome {o}");
    }
    for f in [
        "call_id_minted",
        "call_id_renamed",
        "thinking_stripped",
        "calls_moved_from_text",
        "concatenated_calls_split",
        "tool_name_fixed",
    ] {
        assert!(fixes.contains(f), "no case with fix {f}: {fixes:?}");
    }
}

// ---- the guard cases ----------------------------------------------------------------

/// What a guarding front made of a message: (id, tool, outcome) per call, in order.
type Guarded = Vec<(String, String, String)>;

/// The case's `[guard]` as the gateway reads it (the rules and how they are kept).
fn guard_config(case: &Case) -> toolmend_gateway::config::Guard {
    serde_json::from_value(case.guard.clone().unwrap()).unwrap()
}

async fn node_guarded(case: &Case, session: &str) -> Guarded {
    let cfg = guard_config(case);
    let mut guard = toolmend::guard::RuleGuard::new(cfg.rules.clone())
        .unwrap()
        .fail_mode(cfg.fail)
        .timeout(Duration::from_millis(cfg.timeout_ms));
    if let Some(url) = &cfg.redis_url {
        let opts = toolmend_redis::RedisOptions {
            timeout: Duration::from_millis(cfg.timeout_ms),
            ..toolmend_redis::RedisOptions::default()
        };
        guard = guard.with_store(toolmend_redis::redis_guard_store(url, opts).unwrap());
    }
    let node = ToolNode::builder(registry(case))
        .rule_guard(guard)
        .unwrap()
        .build();
    let mut messages = case.history.clone();
    messages.push(Message::Assistant(case.message.clone()));
    let opts = toolmend::node::InvokeOptions {
        session: case.session.then(|| session.to_owned()),
        ..Default::default()
    };
    let out = node.invoke_with(&messages, &opts).await.unwrap();
    out.stats
        .calls
        .iter()
        .map(|c| {
            (
                c.call_id.clone().unwrap_or_default(),
                c.tool.clone(),
                c.outcome.as_str().to_owned(),
            )
        })
        .collect()
}

/// `toolmend serve` on the configuration `toml`, written to a file of its own.
fn serve_toml(toml: &str) -> Serve {
    static SERVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SERVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("toolmend-eq-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gateway.toml");
    std::fs::write(&path, toml).unwrap();
    serve_with(&["--config", path.to_str().unwrap()], &[])
}

/// The JSON objects of an SSE body's `data:` events (`[DONE]` aside).
fn data_events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .collect()
}

/// The case's `[guard]` as TOML dotted keys under `guard.`.
fn toml_lines(prefix: &str, v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                toml_lines(&format!("{prefix}.{k}"), v, out);
            }
        }
        other => out.push_str(&format!("{prefix} = {other}\n")),
    }
}

/// The calls of a gateway's account (the `toolmend` object of the completion, or of the
/// stream's last chunk).
fn account_calls(account: &Value) -> Guarded {
    account["calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no account calls: {account}"))
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (s("id"), s("tool"), s("outcome"))
        })
        .collect()
}

fn gateway_guarded(case: &Case, upstream: &str, session: &str, stream: bool) -> Guarded {
    let mut toml = format!("upstream.base_url = \"{upstream}\"\ncalls.invalid = \"pass\"\n");
    toml_lines("guard", case.guard.as_ref().unwrap(), &mut toml);
    let served = serve_toml(&toml);
    let session = case.session.then_some(session);
    let (_, answer) = post_as(served.addr, &request(case, stream), session);
    let text = String::from_utf8(answer).unwrap();
    let account = if stream {
        data_events(&text)
            .into_iter()
            .find_map(|v| v.get("toolmend").cloned())
            .unwrap_or_else(|| panic!("{}: no account in the stream: {text}", case.name))
    } else {
        serde_json::from_str::<Value>(&text).unwrap()["toolmend"].clone()
    };
    account_calls(&account)
}

#[test]
fn every_guarding_front_refuses_the_same_calls() {
    let cases = cases_with("guard");
    assert!(cases.len() >= 3, "the guard cases shrank");
    let rt = runtime();
    let script = cases.iter().fold(Script::new(), |s, c| {
        s.then(Step::Reply(c.message.clone()))
            .then(Step::Reply(c.message.clone()))
    });
    let provider = Arc::new(rt.block_on(ScriptedProvider::start(script)).unwrap());
    let mut failures = Vec::new();
    let mut refused_somewhere = 0;
    for (i, case) in cases.iter().enumerate() {
        let session = format!("eq{i}");
        let node = rt.block_on(node_guarded(case, &session));
        // The case says what a guard must refuse: (id, tool, outcome) per call.
        let expected: Guarded = serde_json::from_value(case.raw["expect"].clone()).unwrap();
        if node != expected {
            failures.push(format!(
                "{}: the node differs from the case\n  case: {expected:?}\n  node: {node:?}",
                case.name
            ));
        }
        refused_somewhere += usize::from(expected.iter().any(|c| c.2 == "flooded"));
        let fronts = [
            (
                "gateway json",
                gateway_guarded(case, &provider.base_url(), &format!("{session}j"), false),
            ),
            (
                "gateway stream",
                gateway_guarded(case, &provider.base_url(), &format!("{session}s"), true),
            ),
        ];
        for (front, got) in fronts {
            if got != node {
                failures.push(format!(
                    "{}: {front} differs from the node\n  node:  {node:?}\n  {front}: {got:?}",
                    case.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every case refuses something: a guard that refuses nothing would pass in silence.
    assert_eq!(refused_somewhere, cases.len());
}

// ---- the correction cases -----------------------------------------------------------

/// What a correcting front made of a message: (id, tool, outcome, fix kinds, arguments)
/// per call, in order.
type Corrected = Vec<(String, String, String, Vec<String>, Value)>;

/// The arguments of `m`'s calls, by id.
fn arguments_by_id(m: &AssistantMessage) -> BTreeMap<String, Value> {
    m.tool_calls
        .iter()
        .flatten()
        .map(|tc| (tc.id.clone().unwrap_or_default(), args_value(&tc.arguments)))
        .collect()
}

/// The node, correcting through the model client the gateway uses, against `base_url`.
async fn node_corrected(case: &Case, base_url: &str) -> Corrected {
    let client = toolmend_openai::OpenAiClient::new(base_url).unwrap();
    let corrector = toolmend_openai::ModelCorrector::new(client, "m").context_messages(10);
    let node = ToolNode::builder(registry(case))
        .corrector(corrector, 1)
        .build();
    let mut messages = case.history.clone();
    messages.push(Message::Assistant(case.message.clone()));
    let out = node.invoke(&messages).await.unwrap();
    let args = arguments_by_id(&out.assistant);
    out.stats
        .calls
        .iter()
        .map(|c| {
            let id = c.call_id.clone().unwrap_or_default();
            let mut kinds: Vec<String> = c.fixes.iter().map(|f| f.kind.id().to_owned()).collect();
            kinds.dedup();
            let a = args.get(&id).cloned().unwrap_or(Value::Null);
            (id, c.tool.clone(), c.outcome.as_str().to_owned(), kinds, a)
        })
        .collect()
}

fn gateway_corrected(case: &Case, upstream: &str, stream: bool) -> Corrected {
    let toml = format!(
        "upstream.base_url = \"{upstream}\"\ncalls.invalid = \"correct\"\n\
         correction.base_url = \"{upstream}\"\ncorrection.model = \"m\"\n\
         correction.max_retries = 1\n"
    );
    let served = serve_toml(&toml);
    let (_, answer) = post(served.addr, &request(case, stream));
    let text = String::from_utf8(answer).unwrap();
    let (account, args) = if stream {
        let chunks = data_events(&text);
        let account = chunks
            .iter()
            .find_map(|v| v.get("toolmend").cloned())
            .unwrap_or_else(|| panic!("{}: no account in the stream: {text}", case.name));
        let message = assemble_choices(&chunks).remove(&0).unwrap_or_default();
        (account, arguments_by_id(&message))
    } else {
        let v: Value = serde_json::from_str(&text).unwrap();
        let m: AssistantMessage =
            serde_json::from_value(v["choices"][0]["message"].clone()).unwrap();
        (v["toolmend"].clone(), arguments_by_id(&m))
    };
    account["calls"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no account calls: {account}", case.name))
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            let kinds = c["fixes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect();
            let a = args.get(&s("id")).cloned().unwrap_or(Value::Null);
            (s("id"), s("tool"), s("outcome"), kinds, a)
        })
        .collect()
}

#[test]
fn every_correcting_front_corrects_the_same_calls() {
    let cases = cases_with("correct");
    assert!(cases.len() >= 3, "the correction cases shrank");
    let rt = runtime();
    // Per case: the node's correction; the gateway's answer and correction, as JSON,
    // then streamed. The corrector answers with the case's `correct` arguments.
    // The correction model is asked to call the tool (tool-calling mode): its call, to
    // the tool of the case's first call that does not run as sent.
    let answer = |c: &Case| {
        let expect = c.raw["expect"].as_array().unwrap();
        let tool = expect
            .iter()
            .find(|e| e[2] != "executed")
            .and_then(|e| e[1].as_str())
            .unwrap();
        Step::Reply(AssistantMessage {
            tool_calls: Some(vec![toolmend::conversation::ToolCall::new(
                "fix",
                tool,
                c.raw["correct"].as_str().unwrap(),
            )]),
            ..AssistantMessage::default()
        })
    };
    let script = cases.iter().fold(Script::new(), |s, c| {
        s.then(answer(c))
            .then(Step::Reply(c.message.clone()))
            .then(answer(c))
            .then(Step::Reply(c.message.clone()))
            .then(answer(c))
    });
    let provider = Arc::new(rt.block_on(ScriptedProvider::start(script)).unwrap());
    let mut failures = Vec::new();
    let mut corrected_somewhere = 0;
    for case in &cases {
        let node = rt.block_on(node_corrected(case, &provider.base_url()));
        let expected: Guarded = serde_json::from_value(case.raw["expect"].clone()).unwrap();
        let got: Guarded = node
            .iter()
            .map(|(id, tool, outcome, ..)| (id.clone(), tool.clone(), outcome.clone()))
            .collect();
        if got != expected {
            failures.push(format!(
                "{}: the node differs from the case\n  case: {expected:?}\n  node: {node:?}",
                case.name
            ));
        }
        for (id, _, outcome, kinds, _) in &node {
            if outcome == "corrected" {
                corrected_somewhere += 1;
                assert!(
                    kinds.iter().any(|k| k == "arguments_corrected"),
                    "{}: {id} corrected without its fix: {kinds:?}",
                    case.name
                );
            }
        }
        for (front, got) in [
            (
                "gateway json",
                gateway_corrected(case, &provider.base_url(), false),
            ),
            (
                "gateway stream",
                gateway_corrected(case, &provider.base_url(), true),
            ),
        ] {
            if got != node {
                failures.push(format!(
                    "{}: {front} differs from the node\n  node:  {node:?}\n  {front}: {got:?}",
                    case.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // A corrector that never answers usefully would pass in silence.
    assert!(corrected_somewhere >= 2, "{corrected_somewhere} corrected");
}

// ---- the n > 1 cases ------------------------------------------------------------------

/// The choices of a stream, assembled as a client does: per choice index, content
/// concatenated and calls by `index`.
fn assemble_choices(chunks: &[Value]) -> BTreeMap<u64, AssistantMessage> {
    let mut content: BTreeMap<u64, String> = BTreeMap::new();
    let mut calls: BTreeMap<u64, BTreeMap<u64, (String, String, String)>> = BTreeMap::new();
    for v in chunks {
        for choice in v["choices"].as_array().into_iter().flatten() {
            let i = choice["index"].as_u64().unwrap_or(0);
            let delta = &choice["delta"];
            let text = content.entry(i).or_default();
            if let Some(c) = delta["content"].as_str() {
                text.push_str(c);
            }
            let slots = calls.entry(i).or_default();
            for tc in delta["tool_calls"].as_array().into_iter().flatten() {
                let slot = slots.entry(tc["index"].as_u64().unwrap()).or_default();
                if let Some(id) = tc["id"].as_str() {
                    slot.0.push_str(id);
                }
                if let Some(n) = tc["function"]["name"].as_str() {
                    slot.1.push_str(n);
                }
                if let Some(a) = tc["function"]["arguments"].as_str() {
                    slot.2.push_str(a);
                }
            }
        }
    }
    content
        .into_iter()
        .map(|(i, text)| {
            let tool_calls: Vec<toolmend::conversation::ToolCall> = calls
                .remove(&i)
                .unwrap_or_default()
                .into_values()
                .map(|(id, name, args)| toolmend::conversation::ToolCall::new(id, name, args))
                .collect();
            let message = AssistantMessage {
                content: Some(
                    Some(text)
                        .filter(|t| !t.is_empty())
                        .map(toolmend::conversation::Content::Text),
                ),
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                ..AssistantMessage::default()
            };
            (i, message)
        })
        .collect()
}

#[test]
fn every_choice_of_an_answer_is_mended_alike_as_json_and_as_a_stream() {
    let cases = cases_with("choices");
    assert!(!cases.is_empty(), "the n > 1 cases are gone");
    let rt = runtime();
    let choices = |c: &Case| -> Vec<AssistantMessage> {
        let mut all = vec![c.message.clone()];
        all.extend(
            c.raw["choices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| serde_json::from_value(m.clone()).unwrap()),
        );
        all
    };
    let script = cases.iter().fold(Script::new(), |s, c| {
        let all = choices(c);
        let s = all.iter().fold(s, |s, m| s.then(Step::Reply(m.clone())));
        all.iter().fold(s, |s, m| s.then(Step::Reply(m.clone())))
    });
    let provider = Arc::new(rt.block_on(ScriptedProvider::start(script)).unwrap());
    let gateway = serve(&provider.base_url());
    let mut failures = Vec::new();
    for case in &cases {
        let all = choices(case);
        let n = all.len();
        // Each choice as the core plans it on its own (dispositions aside: the stream's
        // report and the JSON headers list ids, which choices may share).
        let reference: Vec<Outcome> = all
            .iter()
            .map(|m| {
                let one = Case {
                    message: m.clone(),
                    ..case.clone()
                };
                let mut o = core(&one);
                for c in &mut o.calls {
                    c.3 = "";
                }
                o
            })
            .collect();
        let mut body = request(case, false);
        body["n"] = json!(n);
        let (_, raw) = post(gateway.addr, &body);
        let v: Value = serde_json::from_slice(&raw).unwrap();
        let mut stream_body = request(case, true);
        stream_body["n"] = json!(n);
        let (_, raw) = post(gateway.addr, &stream_body);
        let text = String::from_utf8(raw).unwrap();
        let chunks = data_events(&text);
        assert!(
            chunks.iter().all(|c| c.get("error").is_none()),
            "{}: {text}",
            case.name
        );
        let mut streamed = assemble_choices(&chunks);
        for (i, want) in reference.iter().enumerate() {
            let json_message: AssistantMessage =
                serde_json::from_value(v["choices"][i]["message"].clone())
                    .unwrap_or_else(|e| panic!("{}: choice {i}: {e}: {v}", case.name));
            let stream_message = streamed
                .remove(&(i as u64))
                .unwrap_or_else(|| panic!("{}: no choice {i} in the stream", case.name));
            for (front, m) in [("json", json_message), ("stream", stream_message)] {
                let got = outcome_of(&m, |_| "");
                if &got != want {
                    failures.push(format!(
                        "{}: choice {i}, gateway {front} differs from the core plan\n  core: {want:?}\n  {front}: {got:?}",
                        case.name
                    ));
                }
            }
        }
        // Every choice changed something: a gateway passing later choices through as
        // they came would fail above, not here.
        assert!(reference.iter().skip(1).all(|o| !o.calls.is_empty()));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What the MCP proxy made of one `tools/call`: the tool and arguments it forwarded and
/// `executed`, or `feedback` when it answered the call itself.
fn mcp_call(
    relay: &mut toolmend_mcp::Relay,
    rt: &tokio::runtime::Runtime,
    id: usize,
    name: &str,
    text: &str,
) -> (String, Value, &'static str) {
    // An object as an MCP client sends it; any other text as a JSON string.
    let arguments = match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::String(text.to_owned()),
    };
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": name, "arguments": arguments}});
    let mut out = Vec::new();
    rt.block_on(relay.from_client(request.to_string().into_bytes(), &mut out));
    let [one] = out.as_slice() else {
        panic!("{out:?}")
    };
    match one {
        toolmend_mcp::Out::Server(b) => {
            let sent: Value = serde_json::from_slice(b).unwrap();
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}});
            let mut back = Vec::new();
            rt.block_on(relay.from_server(answer.to_string().into_bytes(), &mut back));
            (
                sent["params"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                sent["params"]["arguments"].clone(),
                "executed",
            )
        }
        toolmend_mcp::Out::Client(_) => (name.to_owned(), Value::Null, "feedback"),
    }
}

/// The core's plan of one sent call on its own, as the MCP proxy plans it: one call a
/// request (a list for a scalar field is not split), no calls in text.
fn core_one_call(
    case: &Case,
    call: &toolmend::conversation::ToolCall,
) -> (String, Value, &'static str) {
    let tools = toolbox(&case.tools);
    let ctx = ValidationContext::new("", Phase::Initial);
    let mut opts = PlanOptions {
        calls_in_text: false,
        ..PlanOptions::default()
    };
    opts.mend.coercions.split_merged_calls = false;
    let message = AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![call.clone()]),
        ..AssistantMessage::default()
    };
    let plan = message::plan_assistant(&message, &[], &[], false, &tools, &opts, &ctx);
    let calls: Vec<_> = plan
        .calls
        .iter()
        .filter(|c| c.outcome != CallOutcome::Dropped)
        .collect();
    match calls.as_slice() {
        [c] if disposition(c.outcome) == "executed" => {
            let sanitized = message::sanitize_assistant(&message, &plan.shape, &plan.calls);
            let sent = sanitized.tool_calls.iter().flatten().next().unwrap();
            (sent.name.clone(), args_value(&sent.arguments), "executed")
        }
        [c] => (call.name.clone(), Value::Null, disposition(c.outcome)),
        // Several calls in one: one tools/call is one call.
        _ => (call.name.clone(), Value::Null, "feedback"),
    }
}

#[test]
fn every_call_is_mended_alike_through_the_mcp_proxy() {
    let rt = runtime();
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases() {
        let mut relay = toolmend_mcp::Relay::new(
            Arc::new(toolmend_mcp::Mender::new(PlanOptions::default(), None)),
            "eq",
            false,
        );
        let tools: Vec<Value> = case
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.parameters}))
            .collect();
        let mut out = Vec::new();
        rt.block_on(relay.from_client(
            br#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#.to_vec(),
            &mut out,
        ));
        let listed = json!({"jsonrpc": "2.0", "id": "l", "result": {"tools": tools}});
        rt.block_on(relay.from_server(listed.to_string().into_bytes(), &mut out));
        for (k, call) in case.message.tool_calls.iter().flatten().enumerate() {
            let reference = core_one_call(&case, call);
            let got = mcp_call(&mut relay, &rt, k, &call.name, &call.arguments);
            checked += 1;
            if got != reference {
                failures.push(format!(
                    "{} (call {k}): the MCP proxy differs from the core plan\n  core: {reference:?}\n  mcp:  {got:?}",
                    case.name
                ));
            }
        }
    }
    assert!(
        checked >= 35,
        "only {checked} calls checked: the case set shrank"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
