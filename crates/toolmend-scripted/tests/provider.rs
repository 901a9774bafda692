//! The scripted provider over real HTTP on 127.0.0.1: OpenAI's response formats, and its
//! refusals of every history `history::check` flags.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolmend::{
    agent::Strictness,
    conversation::{AssistantMessage, Content, Message, ToolCall},
    history::{self, SanitizePolicy},
};
use toolmend_scripted::{Script, ScriptedProvider, Step};

/// One HTTP/1.1 request; the status and the body (de-chunked).
async fn post(provider: &ScriptedProvider, body: &Value) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(provider.addr())
        .await
        .unwrap();
    let payload = body.to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    )
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
}

fn calls(list: Vec<ToolCall>) -> AssistantMessage {
    AssistantMessage {
        content: Some(None),
        tool_calls: Some(list),
        ..Default::default()
    }
}

fn request(messages: Value) -> Value {
    json!({"model": "small", "messages": messages,
           "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})
}

#[tokio::test]
async fn answers_in_openai_json_format() {
    let script = Script::new().reply(calls(vec![ToolCall::new(
        "call_1",
        "get_weather",
        "{'city': 'Paris',}",
    )]));
    let provider = ScriptedProvider::start(script).await.unwrap();
    let (status, body) = post(
        &provider,
        &request(json!([{"role": "user", "content": "hi"}])),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "small");
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], Value::Null);
    let tc = &choice["message"]["tool_calls"][0];
    assert_eq!(tc["id"], "call_1");
    assert_eq!(tc["type"], "function");
    // The broken arguments go out exactly as scripted.
    assert_eq!(tc["function"]["arguments"], "{'city': 'Paris',}");
    let usage = &v["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );
    assert_eq!(provider.remaining(), 0);
    assert_eq!(provider.requests().len(), 1);
}

#[tokio::test]
async fn streams_openai_chunks_that_reassemble_to_the_reply() {
    let reply = AssistantMessage {
        content: Some(Some(Content::Text(
            "<think>which city?</think>Checking the weather.".into(),
        ))),
        tool_calls: Some(vec![
            ToolCall::new(
                "call_1",
                "get_weather",
                r#"{"city": "Paris", "unit": "celsius"}"#,
            ),
            ToolCall::new("call_2", "get_weather", r#"{"city": "Ro"#),
        ]),
        ..Default::default()
    };
    let provider = ScriptedProvider::start(Script::new().reply(reply.clone()))
        .await
        .unwrap();
    let mut req = request(json!([{"role": "user", "content": "hi"}]));
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let (status, body) = post(&provider, &req).await;
    assert_eq!(status, 200);
    // SSE framing: `data: …` events separated by blank lines, ending with [DONE].
    let events: Vec<&str> = body.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert!(events.iter().all(|e| e.starts_with("data: ")), "{body}");
    assert_eq!(*events.last().unwrap(), "data: [DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(&e["data: ".len()..]).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let mut content = String::new();
    let mut args = [String::new(), String::new()];
    let mut ids = [Value::Null, Value::Null];
    let mut finish = Value::Null;
    for c in &chunks {
        let Some(choice) = c["choices"].get(0) else {
            continue;
        };
        if let Some(t) = choice["delta"]["content"].as_str() {
            content.push_str(t);
        }
        for d in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let k = d["index"].as_u64().unwrap() as usize;
            if !d["id"].is_null() {
                ids[k] = d["id"].clone();
            }
            args[k].push_str(d["function"]["arguments"].as_str().unwrap_or(""));
        }
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
    }
    assert_eq!(content, reply.text().unwrap());
    assert_eq!(ids, [json!("call_1"), json!("call_2")]);
    assert_eq!(args[0], r#"{"city": "Paris", "unit": "celsius"}"#);
    assert_eq!(args[1], r#"{"city": "Ro"#);
    assert_eq!(finish, "tool_calls");
    // The usage chunk: no choices.
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert!(last["usage"]["total_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn refuses_broken_histories_with_openai_bodies_and_wording() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}});
    let cases = [
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": null, "tool_calls": [call("c1")]},
                   {"role": "user", "content": "and?"}]),
            "must be followed by tool messages responding to each 'tool_call_id'",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "tool", "tool_call_id": "zz", "content": "x"}]),
            "must be a response to a preceeding message with 'tool_calls'",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": null, "tool_calls": [call("c1")]},
                   {"role": "tool", "tool_call_id": "c1", "content": "x"},
                   {"role": "tool", "tool_call_id": "c1", "content": "y"}]),
            "Duplicate value for 'tool_call_id'",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": null, "tool_calls": [call("c1")]},
                   {"role": "user", "content": "wait"},
                   {"role": "tool", "tool_call_id": "c1", "content": "x"}]),
            "must be followed by tool messages responding to each 'tool_call_id'",
        ),
        (
            json!([{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": null, "tool_calls": [
                       {"id": "c1", "type": "function", "function": {"name": "multi_tool_use.parallel", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "x"}]),
            "does not match '^[a-zA-Z0-9_-]{1,64}$'",
        ),
    ];
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    for (messages, wording) in cases {
        let (status, body) = post(&provider, &request(messages.clone())).await;
        assert_eq!(status, 400, "{messages}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(v["error"]["param"].is_string(), "{v}");
        assert_eq!(v["error"]["code"], Value::Null);
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(wording), "{message}");
    }
    // A tool definition with a name OpenAI refuses.
    let mut req = request(json!([{"role": "user", "content": "hi"}]));
    req["tools"][0]["function"]["name"] = json!("search.web");
    let (status, body) = post(&provider, &req).await;
    assert_eq!(status, 400);
    assert!(body.contains("tools[0].name"), "{body}");
    // Not JSON at all.
    let mut stream = tokio::net::TcpStream::connect(provider.addr())
        .await
        .unwrap();
    stream
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n{x}")
        .await
        .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    assert!(raw.starts_with("HTTP/1.1 400"), "{raw}");
    assert!(raw.contains("We could not parse the JSON body"), "{raw}");
    // Nothing was answered from the (empty) script.
    // Every JSON body is kept, refused ones included (the unreadable one cannot be).
    assert_eq!(provider.requests().len(), 6);
}

#[tokio::test]
async fn scripted_errors_and_an_exhausted_script() {
    let script = Script::from_jsonl(
        "# a rate limit, then a reply\n\
         {\"error\": {\"status\": 429, \"body\": {\"error\": {\"message\": \"Rate limit reached\", \"type\": \"requests\", \"param\": null, \"code\": \"rate_limit_exceeded\"}}}}\n\
         {\"content\": \"done\"}\n",
    )
    .unwrap();
    let provider = ScriptedProvider::start(script).await.unwrap();
    let req = request(json!([{"role": "user", "content": "hi"}]));
    let (status, body) = post(&provider, &req).await;
    assert_eq!(status, 429);
    assert!(body.contains("rate_limit_exceeded"));
    let (status, body) = post(&provider, &req).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "done");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let (status, body) = post(&provider, &req).await;
    assert_eq!(status, 500);
    assert!(body.contains("script is exhausted"));
    // A script line that is not a message names its line.
    let err = Script::from_jsonl("{\"content\": \"ok\"}\n{\"tool_calls\": 5}").unwrap_err();
    assert_eq!(err.line, 2);
}

/// SplitMix64: deterministic random histories.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> usize {
        (self.next() % n) as usize
    }
}

fn random_history(rng: &mut Rng) -> Vec<Message> {
    let ids = ["a", "b", "c", "d", ""];
    let names = ["get_weather", "add", "multi_tool_use.parallel"];
    let args = [
        "{}",
        r#"{"city": "Paris"}"#,
        "{'city': 'Rome',}",
        r#"{"a": 1"#,
        "",
    ];
    let mut out = vec![json!({"role": "system", "content": "s"})];
    for _ in 0..rng.below(8) + 1 {
        let m = match rng.below(4) {
            0 => json!({"role": "user", "content": "u"}),
            1 => {
                let calls: Vec<Value> = (0..rng.below(3) + 1)
                    .map(|_| {
                        let mut c = json!({"type": "function", "function": {
                            "name": names[rng.below(names.len() as u64)],
                            "arguments": args[rng.below(args.len() as u64)]}});
                        let id = ids[rng.below(ids.len() as u64)];
                        if !id.is_empty() {
                            c["id"] = json!(id);
                        }
                        c
                    })
                    .collect();
                json!({"role": "assistant", "content": null, "tool_calls": calls})
            }
            2 => {
                let content = ["r", ""][rng.below(2)];
                json!({"role": "tool", "tool_call_id": ids[rng.below(4)], "content": content})
            }
            _ => json!({"role": "assistant", "content": "text"}),
        };
        out.push(m);
    }
    serde_json::from_value(Value::Array(out)).unwrap()
}

/// The issue's bar: the provider rejects every history `history::check` flags (as OpenAI
/// would) and accepts every history `sanitize` returns.
#[tokio::test]
async fn rejects_what_check_flags_and_accepts_what_sanitize_returns() {
    for strictness in [Strictness::OpenAi, Strictness::All] {
        let mut script = Script::new();
        for _ in 0..400 {
            script = script.then(Step::Reply(AssistantMessage {
                content: Some(Some(Content::Text("ok".into()))),
                ..Default::default()
            }));
        }
        let provider = ScriptedProvider::start_with(script, strictness, 0)
            .await
            .unwrap();
        let mut rng = Rng(42);
        let (mut refused, mut flagged) = (0, 0);
        for _ in 0..200 {
            let h = random_history(&mut rng);
            let refuses = history::check(&h)
                .iter()
                .any(|v| strictness.refuses(v.kind));
            let (status, body) = post(&provider, &request(serde_json::to_value(&h).unwrap())).await;
            assert_eq!(status == 400, refuses, "{status} {body}\n{h:#?}");
            flagged += usize::from(refuses);
            refused += usize::from(status == 400);
            let clean = history::sanitize(h, &SanitizePolicy::default()).messages;
            if clean.is_empty() {
                continue;
            }
            let (status, body) =
                post(&provider, &request(serde_json::to_value(&clean).unwrap())).await;
            assert_eq!(status, 200, "{body}\n{clean:#?}");
        }
        assert_eq!(refused, flagged);
        assert!(
            flagged > 50,
            "the generator should break most histories: {flagged}"
        );
    }
}

#[tokio::test]
async fn a_repeating_script_never_runs_out_and_kept_requests_are_bounded() {
    let script = Script::from_jsonl("{\"content\": \"one\"}\n{\"content\": \"two\"}\n")
        .unwrap()
        .repeating();
    let provider =
        ScriptedProvider::start_keeping(script, toolmend::agent::Strictness::OpenAi, 0, 3)
            .await
            .unwrap();
    let mut said = Vec::new();
    for _ in 0..5 {
        let (status, text) = post(
            &provider,
            &serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        said.push(
            body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(said, ["one", "two", "one", "two", "one"]);
    assert_eq!(provider.remaining(), 2);
    assert_eq!(provider.requests().len(), 3);
}
