//! Upstreams that speak Messages or Responses (`upstream.api`), against the strict
//! scripted provider speaking that API: signed thinking and encrypted reasoning come back
//! to the provider unchanged on the next turn (it refuses any other), a call the
//! provider left in the text reaches the client as a call, a broken history is mended
//! before it goes up, and every front reaches every upstream.

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, ToolCall};
use toolmend_scripted::{Script, Step};

use crate::common::{self, Running};

fn messages_tools() -> Value {
    json!([{"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"], "additionalProperties": false}}])
}

fn responses_tools() -> Value {
    json!([{"type": "function", "name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"], "additionalProperties": false}}])
}

/// A reply that thinks, then calls `get_weather` with `arguments`.
fn thinking_call(arguments: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        reasoning: Some("The user wants the weather.".to_owned()),
        tool_calls: Some(vec![ToolCall::new("toolu_w1", "get_weather", arguments)]),
        ..Default::default()
    })
}

fn text(t: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(Some(t.into())),
        ..Default::default()
    })
}

async fn start(steps: Vec<Step>, api: &str) -> Running {
    let script = steps.into_iter().fold(Script::new(), Script::then);
    common::start(script, &format!("upstream.api = \"{api}\"")).await
}

/// The JSON of each SSE frame's `data:` line.
fn events(sse: &str) -> Vec<Value> {
    sse.split("\n\n")
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// The Messages message a streaming client assembles from the events.
fn assemble_message(sse: &str) -> Value {
    let mut content: Vec<Value> = Vec::new();
    let mut out = json!({});
    for e in events(sse) {
        match e["type"].as_str().unwrap() {
            "error" => panic!("an error event: {e}"),
            "content_block_start" => {
                assert_eq!(
                    e["index"].as_u64().unwrap() as usize,
                    content.len(),
                    "{sse}"
                );
                let mut b = e["content_block"].clone();
                if b["type"] == "tool_use" {
                    b["input"] = json!("");
                }
                content.push(b);
            }
            "content_block_delta" => {
                let b = content.last_mut().unwrap();
                let d = &e["delta"];
                let append = |b: &mut Value, key: &str, s: &Value| {
                    b[key] = json!(format!(
                        "{}{}",
                        b[key].as_str().unwrap_or(""),
                        s.as_str().unwrap()
                    ));
                };
                match d["type"].as_str().unwrap() {
                    "text_delta" => append(b, "text", &d["text"]),
                    "thinking_delta" => append(b, "thinking", &d["thinking"]),
                    "signature_delta" => append(b, "signature", &d["signature"]),
                    "input_json_delta" => append(b, "input", &d["partial_json"]),
                    other => panic!("delta {other}"),
                }
            }
            "message_delta" => {
                out["stop_reason"] = e["delta"]["stop_reason"].clone();
                out["toolmend"] = e["toolmend"].clone();
            }
            _ => {}
        }
    }
    for b in &mut content {
        if b["type"] == "tool_use" {
            b["input"] = serde_json::from_str(b["input"].as_str().unwrap()).unwrap();
        }
    }
    out["content"] = Value::Array(content);
    out
}

async fn post_messages(r: &Running, body: &Value) -> Value {
    let resp = r
        .http
        .post(format!("{}/messages", r.url))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    if body["stream"] == true {
        assemble_message(&text)
    } else {
        serde_json::from_str(&text).unwrap()
    }
}

#[tokio::test]
async fn signed_thinking_goes_back_to_a_messages_upstream_as_it_came() {
    for stream in [false, true] {
        let r = start(
            vec![
                thinking_call(r#"{"city": "Paris", "days": "2"}"#),
                text("Sunny."),
                thinking_call(r#"{"city": "Oslo"}"#),
                text("Rain."),
            ],
            "messages",
        )
        .await;
        let user = json!({"role": "user", "content": "Weather in Paris?"});
        let first = post_messages(
            &r,
            &json!({"model": "m", "max_tokens": 200, "stream": stream, "tools": messages_tools(),
                "messages": [user]}),
        )
        .await;
        let content = first["content"].as_array().unwrap();
        assert_eq!(content[0]["type"], "thinking", "{first}");
        assert!(
            content[0]["signature"]
                .as_str()
                .unwrap()
                .starts_with("scripted-sig-")
        );
        let call = content.iter().find(|b| b["type"] == "tool_use").unwrap();
        // Mended on the way: "2" for an integer.
        assert_eq!(
            call["input"],
            json!({"city": "Paris", "days": 2}),
            "{first}"
        );
        assert_eq!(first["stop_reason"], "tool_use");
        assert_eq!(first["toolmend"]["translation"]["passed_through"], true);
        // The next turn: the thinking block as it came; the provider checks its seal.
        let assistant = json!({"role": "assistant", "content": content});
        let result = json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": call["id"], "content": "sunny"}]});
        let second = post_messages(
            &r,
            &json!({"model": "m", "max_tokens": 200, "stream": stream, "tools": messages_tools(),
                "messages": [user, assistant, result]}),
        )
        .await;
        assert_eq!(second["content"][0]["text"], "Sunny.", "{second}");
        assert_eq!(second["toolmend"]["translation"]["passed_through"], true);
        // A broken history (an orphan result) is mended, so translated: the signed
        // thinking still goes up as it came.
        let orphan = json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": call["id"], "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_ghost", "content": "?"}]});
        let third = post_messages(
            &r,
            &json!({"model": "m", "max_tokens": 200, "stream": stream, "tools": messages_tools(),
                "messages": [user, assistant, orphan]}),
        )
        .await;
        assert_eq!(third["toolmend"]["translation"]["passed_through"], false);
        let sent = r.provider.requests();
        assert_eq!(
            sent[2]["messages"][1]["content"][0], content[0],
            "{}",
            sent[2]
        );
        assert_eq!(
            sent[2]["messages"][2]["content"].as_array().unwrap().len(),
            1
        );
        assert_eq!(r.provider.requests().len(), 3, "stream {stream}");
    }
}

/// The Responses object a streaming client assembles: `response.completed`'s, the
/// numbers consecutive.
fn assemble_response(sse: &str) -> Value {
    let mut done = Value::Null;
    for (seq, e) in events(sse).into_iter().enumerate() {
        assert_eq!(e["sequence_number"], seq, "{sse}");
        match e["type"].as_str().unwrap() {
            "error" => panic!("an error event: {e}"),
            "response.completed" | "response.incomplete" => done = e["response"].clone(),
            _ => {}
        }
    }
    done
}

async fn post_responses(r: &Running, body: &Value) -> Value {
    let resp = r
        .http
        .post(format!("{}/responses", r.url))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    if body["stream"] == true {
        assemble_response(&text)
    } else {
        serde_json::from_str(&text).unwrap()
    }
}

#[tokio::test]
async fn encrypted_reasoning_goes_back_to_a_responses_upstream_as_it_came() {
    for stream in [false, true] {
        let r = start(
            vec![
                thinking_call(r#"{"city": "Paris", "days": "2"}"#),
                text("Sunny."),
            ],
            "responses",
        )
        .await;
        let user = json!({"role": "user", "content": "Weather in Paris?"});
        let base = json!({"model": "m", "stream": stream, "store": false,
            "include": ["reasoning.encrypted_content"], "tools": responses_tools()});
        let mut body = base.clone();
        body["input"] = json!([user]);
        let first = post_responses(&r, &body).await;
        let output = first["output"].as_array().unwrap();
        assert_eq!(output[0]["type"], "reasoning", "{first}");
        assert!(
            output[0]["encrypted_content"]
                .as_str()
                .unwrap()
                .starts_with("scripted-enc-")
        );
        let call = output
            .iter()
            .find(|i| i["type"] == "function_call")
            .unwrap();
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": "Paris", "days": 2}), "{first}");
        assert_eq!(first["toolmend"]["translation"]["passed_through"], true);
        let mut input = vec![user];
        input.extend(output.iter().cloned());
        input.push(
            json!({"type": "function_call_output", "call_id": call["call_id"],
            "output": "sunny"}),
        );
        let mut body = base.clone();
        body["input"] = Value::Array(input);
        let second = post_responses(&r, &body).await;
        assert_eq!(
            second["output"][0]["content"][0]["text"], "Sunny.",
            "{second}"
        );
        assert_eq!(r.provider.requests().len(), 2);
        assert_eq!(r.provider.requests()[1]["input"][1], output[0]);
    }
}

#[tokio::test]
async fn a_call_a_messages_upstream_left_in_its_text_reaches_the_client_as_a_call() {
    for stream in [false, true] {
        // Arguments that are no object: the provider writes the call into its text.
        let r = start(
            vec![thinking_call(r#"{"city": "Paris", "days": 2"#)],
            "messages",
        )
        .await;
        let answer = post_messages(
            &r,
            &json!({"model": "m", "max_tokens": 200, "stream": stream, "tools": messages_tools(),
                "messages": [{"role": "user", "content": "Weather?"}]}),
        )
        .await;
        let uses: Vec<&Value> = answer["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .collect();
        assert_eq!(uses.len(), 1, "{answer}");
        assert_eq!(uses[0]["input"], json!({"city": "Paris", "days": 2}));
        assert!(
            !answer["content"].to_string().contains("<tool_call>"),
            "{answer}"
        );
        assert_eq!(answer["stop_reason"], "tool_use");
    }
}

/// Each front's request with a broken history (a call without its result) and the
/// call it gets back.
async fn ask(r: &Running, front: &str, stream: bool) -> Value {
    match front {
        "chat" => {
            let body = json!({"model": "m", "stream": stream, "tools": common::weather_tools(),
                "messages": [{"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_old",
                     "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                    {"role": "user", "content": "Paris."}]});
            let resp = r
                .http
                .post(format!("{}/chat/completions", r.url))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let text = resp.text().await.unwrap();
            if !stream {
                let c: Value = serde_json::from_str(&text).unwrap();
                return c["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
                    .clone();
            }
            let mut args = String::new();
            for e in events(&text) {
                for tc in e["choices"][0]["delta"]["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    args.push_str(tc["function"]["arguments"].as_str().unwrap_or(""));
                }
            }
            json!(args)
        }
        "messages" => {
            let answer = post_messages(
                r,
                &json!({"model": "m", "max_tokens": 100, "stream": stream,
                "tools": messages_tools(), "messages": [{"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_old",
                     "name": "get_weather", "input": {}}]},
                    {"role": "user", "content": "Paris."}]}),
            )
            .await;
            let call = answer["content"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["type"] == "tool_use")
                .unwrap()
                .clone();
            json!(call["input"].to_string())
        }
        _ => {
            let answer = post_responses(
                r,
                &json!({"model": "m", "stream": stream,
                "tools": responses_tools(), "input": [{"role": "user", "content": "Weather?"},
                    {"type": "function_call", "call_id": "call_old", "name": "get_weather",
                     "arguments": "{}"},
                    {"role": "user", "content": "Paris."}]}),
            )
            .await;
            answer["output"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["type"] == "function_call")
                .unwrap()["arguments"]
                .clone()
        }
    }
}

#[tokio::test]
async fn every_front_reaches_every_upstream_mended() {
    for api in ["chat_completions", "messages", "responses"] {
        for front in ["chat", "messages", "responses"] {
            for stream in [false, true] {
                let r = start(
                    vec![thinking_call(r#"{"city": "Paris", "days": "2",}"#)],
                    api,
                )
                .await;
                let args = ask(&r, front, stream).await;
                let args: Value = serde_json::from_str(args.as_str().unwrap()).unwrap();
                assert_eq!(
                    args,
                    json!({"city": "Paris", "days": 2}),
                    "{front} -> {api}, stream {stream}"
                );
                assert_eq!(r.provider.requests().len(), 1);
            }
        }
    }
}

#[tokio::test]
async fn pointed_directly_at_the_strict_provider_the_same_turns_fail() {
    let r = start(vec![text("ok"), text("ok")], "messages").await;
    let http = reqwest::Client::new();
    let base = r.provider.base_url();
    // A tool_use without its tool_result: Anthropic's 400 and wording.
    let body = json!({"model": "m", "max_tokens": 100, "tools": messages_tools(),
        "messages": [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_old",
             "name": "get_weather", "input": {}}]},
            {"role": "user", "content": "Paris."}]});
    let direct = http
        .post(format!("{base}/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 400);
    let e: Value = direct.json().await.unwrap();
    assert_eq!(e["type"], "error");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("without `tool_result` blocks immediately after: toolu_old"),
        "{e}"
    );
    let through = post_messages(&r, &body).await;
    assert_eq!(through["content"][0]["text"], "ok");
    // A function_call without its output: OpenAI's Responses 400.
    let body = json!({"model": "m", "tools": responses_tools(),
        "input": [{"role": "user", "content": "Weather?"},
            {"type": "function_call", "call_id": "call_old", "name": "get_weather", "arguments": "{}"},
            {"role": "user", "content": "Paris."}]});
    let direct = http
        .post(format!("{base}/responses"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 400);
    let e: Value = direct.json().await.unwrap();
    assert_eq!(
        e["error"]["message"],
        "No tool output found for function call call_old."
    );
}

#[tokio::test]
async fn count_tokens_is_the_messages_upstreams_own_count() {
    let r = start(vec![], "messages").await;
    let body = json!({"model": "m", "tools": messages_tools(),
        "messages": [{"role": "user", "content": "Weather?"}]});
    let resp = r
        .http
        .post(format!("{}/messages/count_tokens", r.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let counted: Value = resp.json().await.unwrap();
    let sent = r.provider.requests();
    assert_eq!(sent.len(), 1, "the provider counted it");
    assert_eq!(sent[0], body, "as the client sent it");
    let bytes = body["messages"].to_string().len() + body["tools"].to_string().len();
    assert_eq!(counted["input_tokens"], bytes.div_ceil(4));
    // Its refusal comes back as it said it.
    let bad = json!({"model": "m", "messages": []});
    let resp = r
        .http
        .post(format!("{}/messages/count_tokens", r.url))
        .json(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let e: Value = resp.json().await.unwrap();
    assert_eq!(
        e["error"]["message"],
        "messages: at least one message is required"
    );
}

/// Codex's free-form tools (`custom`, e.g. its `apply_patch` with a grammar) toward a
/// chat upstream: a function of one string `input`; the model's call (its JSON broken)
/// comes back a `custom_tool_call` with that input, JSON and streamed, and the next
/// turn's `custom_tool_call` and its output go up as the call and its result.
#[tokio::test]
async fn a_custom_tool_is_a_function_of_its_input_toward_a_chat_upstream() {
    let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";
    let broken = format!("{{\"input\": {},}}", serde_json::to_string(patch).unwrap());
    let tools = json!([{"type": "custom", "name": "apply_patch", "description": "Edit files.",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: patch"}}]);
    for stream in [false, true] {
        let step = Step::Reply(AssistantMessage {
            content: Some(None),
            tool_calls: Some(vec![ToolCall::new(
                "call_p1",
                "apply_patch",
                broken.as_str(),
            )]),
            ..Default::default()
        });
        let r = start(vec![step, text("Patched.")], "chat_completions").await;
        let ask = json!({"role": "user", "content": "Add a.txt."});
        let first = post_responses(
            &r,
            &json!({"model": "m", "stream": stream, "tools": tools, "input": [ask]}),
        )
        .await;
        let item = &first["output"][0];
        assert_eq!(item["type"], "custom_tool_call", "{first}");
        assert_eq!(item["input"], patch);
        assert_eq!(item["call_id"], "call_p1");
        let sent = &r.provider.requests()[0];
        let function = &sent["tools"][0]["function"];
        assert_eq!(function["name"], "apply_patch");
        assert_eq!(function["parameters"]["required"], json!(["input"]));
        assert!(
            function["description"]
                .as_str()
                .unwrap()
                .contains("start: patch")
        );
        let next = json!({"model": "m", "stream": stream, "tools": tools, "input": [ask, item,
            {"type": "custom_tool_call_output", "call_id": "call_p1", "output": "Done."}]});
        let second = post_responses(&r, &next).await;
        assert_eq!(
            second["output"][0]["content"][0]["text"], "Patched.",
            "{second}"
        );
        let sent = &r.provider.requests()[1]["messages"];
        let args: Value = serde_json::from_str(
            sent[1]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(args, json!({"input": patch}));
        assert_eq!(
            sent[2],
            json!({"role": "tool", "tool_call_id": "call_p1", "content": "Done."})
        );
    }
}
