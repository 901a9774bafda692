//! The JSON answer and the streamed answer agree, whatever the cut: answers written the
//! way the model servers' tool parsers document them (vLLM, SGLang, llama.cpp: Hermes and
//! Qwen `<tool_call>`, Mistral `[TOOL_CALLS]` old and new, Llama `<|python_tag|>` and
//! `<function=…>`, pythonic lists, DeepSeek's and Kimi's section tokens, GLM's
//! `<arg_key>`, Granite's `<|tool_call|>`, bare JSON; the 2026 families: Gemma 4's
//! `<|tool_call>`, DeepSeek's DSML (V3.2 and V4), Kimi K3's `<|open|>tools`, Mistral v13's
//! `[CALL_ID]`, Apertus, LongCat, suffixed Hunyuan, MiniCPM 5, GigaChat 3, dots, Nemotron's
//! `<TOOLCALL>`, Phi-4-mini's `functools[`; thinking tags the model wrote as text, in an
//! argument and quoted in code), each with and without thinking
//! (a whole `<think>` block, and the bare `</think>` of templates that open the block in
//! the prompt), each answer sent whole (JSON) and streamed in deltas of 1, 2, 3 and 7
//! characters. Content, moved reasoning, calls (ids, names, arguments) and
//! `finish_reason` must be the same, under `calls.reasoning` `move` and `drop`, with and
//! without `calls.template_opens_thinking`.

use std::{net::SocketAddr, sync::Arc};

use axum::{Router, body::Bytes, response::IntoResponse, routing::post as route_post};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolmend_gateway::{Config, Gateway};

use crate::common;

const WEATHER: &str = r#"{"city": "Paris", "days": 3}"#;

/// The assistant contents, as the servers' parsers expect them.
fn answers() -> Vec<String> {
    let bodies = [
        format!(r#"<tool_call>{{"name": "get_weather", "arguments": {WEATHER}}}</tool_call>"#),
        format!("Let me check.\n<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {WEATHER}}}\n</tool_call>"),
        format!(r#"[TOOL_CALLS][{{"name": "get_weather", "arguments": {WEATHER}}}]"#),
        format!(r#"Sure.[TOOL_CALLS][{{"name": "get_weather", "arguments": {WEATHER}}}]"#),
        format!("[TOOL_CALLS]get_weather[ARGS]{WEATHER}"),
        format!(r#"<|python_tag|>{{"name": "get_weather", "parameters": {WEATHER}}}"#),
        format!("<function=get_weather>{WEATHER}</function>"),
        r#"[get_weather(city="Paris", days=3)]"#.to_owned(),
        format!(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{WEATHER}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        ),
        format!(
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{WEATHER}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>".to_owned(),
        format!(r#"<|tool_call|>[{{"name": "get_weather", "arguments": {WEATHER}}}]"#),
        format!(r#"{{"name": "get_weather", "arguments": {WEATHER}}}"#),
        format!("```json\n{{\"name\": \"get_weather\", \"arguments\": {WEATHER}}}\n```"),
        // The 2026 families (docs/formats.md).
        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>".to_owned(),
        "Checking.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>".to_owned(),
        "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>".to_owned(),
        "Let me look.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>".to_owned(),
        "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"integer\"<|sep|>3<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>".to_owned(),
        format!("Sure.[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{WEATHER}"),
        format!(r#"<|tools_prefix|>[{{"get_weather": {WEATHER}}}]<|tools_suffix|>"#),
        format!(r#"<longcat_tool_call>{{"name": "get_weather", "arguments": {WEATHER}}}</longcat_tool_call>"#),
        "One moment.<tool_calls:6124c78e><tool_call:6124c78e>get_weather<tool_sep:6124c78e><arg_key:6124c78e>city</arg_key:6124c78e><arg_value:6124c78e>Paris</arg_value:6124c78e><arg_key:6124c78e>days</arg_key:6124c78e><arg_value:6124c78e>3</arg_value:6124c78e></tool_call:6124c78e></tool_calls:6124c78e>".to_owned(),
        "<function name=\"get_weather\"><param name=\"city\">Paris</param><param name=\"days\">3</param></function>".to_owned(),
        format!("<|message_sep|>\n\nfunction call<|role_sep|>\n{{\"name\": \"get_weather\", \"arguments\": {WEATHER}}}"),
        format!("One moment.<|message_sep|>\n\nfunction call<|role_sep|>\n{{\"name\": \"get_weather\", \"arguments\": {WEATHER}}}"),
        "<dots_function_call><invoke name=\"get_weather\"><parameter name=\"city\">Paris</parameter><parameter name=\"days\">3</parameter></invoke></dots_function_call>".to_owned(),
        format!(r#"<TOOLCALL>[{{"name": "get_weather", "arguments": {WEATHER}}}]</TOOLCALL>"#),
        format!(r#"functools[{{"name": "get_weather", "arguments": {WEATHER}}}]"#),
        // A call shown in Markdown code is prose; a call after it is a call (SGLang's
        // `test_quoted_dsml_is_not_executed_or_removed`).
        "Example:\n```xml\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">literal</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>\n```\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>".to_owned(),
        format!("Example: `<tool_call>{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"literal\"}}}}</tool_call>`\n<tool_call>{{\"name\": \"get_weather\", \"arguments\": {WEATHER}}}</tool_call>"),
        format!("```xml\n<tool_call>{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"literal\"}}}}</tool_call>\n```\nSo:<tool_call>{{\"name\": \"get_weather\", \"arguments\": {WEATHER}}}</tool_call>"),
        "Mistral calls look so:\n~~~\n[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"literal\"}}]\n~~~\nI will not call one now.".to_owned(),
        // Kimi K3's reply channel tokens are the template's, never content.
        "<|open|>response<|sep|>Let me look.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>".to_owned(),
        "<|open|>response<|sep|>It is sunny.<|close|>response<|sep|><|close|>message<|sep|>".to_owned(),
        // A thinking tag the model wrote as text: in an argument, quoted in code.
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</think></｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>".to_owned(),
        "Literal `<think>` and `</think>` in an explanation.".to_owned(),
        r#"get_weather(city="Paris</think>", days=3)"#.to_owned(),
        "The weather in Paris is sunny.".to_owned(),
        "Use <tool_call> tags to call tools; I will not call one now.".to_owned(),
    ];
    let mut out = Vec::new();
    for b in &bodies {
        out.push(b.clone());
        out.push(format!("<think>The user wants Paris, 3 days.</think>\n{b}"));
        out.push(format!("The user wants Paris, 3 days.\n</think>\n\n{b}"));
    }
    out
}

/// An upstream answering the case the request names (`case N split K` in the last
/// message): whole as JSON, or streamed in deltas of K characters.
async fn upstream() -> String {
    let app = Router::new().route(
        "/v1/chat/completions",
        route_post(|body: Bytes| async move {
            let req: Value = serde_json::from_slice(&body).unwrap();
            let ask = req["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned();
            let words: Vec<&str> = ask.split(' ').collect();
            let case: usize = words[1].parse().unwrap();
            let split: usize = words[3].parse().unwrap();
            let content = answers()[case].clone();
            if req["stream"] == json!(true) {
                let chunk = |delta: Value, finish: Value| {
                    let c = json!({"id": "chatcmpl-s", "object": "chat.completion.chunk",
                        "created": 1, "model": "m", "choices": [{"index": 0, "delta": delta,
                        "logprobs": null, "finish_reason": finish}]});
                    format!("data: {c}\n\n")
                };
                let mut sse = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
                let chars: Vec<char> = content.chars().collect();
                for piece in chars.chunks(split) {
                    let text: String = piece.iter().collect();
                    sse.push_str(&chunk(json!({"content": text}), Value::Null));
                }
                sse.push_str(&chunk(json!({}), json!("stop")));
                sse.push_str("data: [DONE]\n\n");
                ([("content-type", "text/event-stream")], sse).into_response()
            } else {
                let c = json!({"id": "chatcmpl-s", "object": "chat.completion", "created": 1,
                    "model": "m", "choices": [{"index": 0, "message": {"role": "assistant",
                    "content": content}, "logprobs": null, "finish_reason": "stop"}]});
                ([("content-type", "application/json")], c.to_string()).into_response()
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

async fn gateway(upstream: &str, reasoning: &str, opened: bool) -> SocketAddr {
    let toml = format!(
        "upstream.base_url = \"{upstream}\"\ncalls.reasoning = \"{reasoning}\"\n\
         calls.template_opens_thinking = {opened}\n"
    );
    let config = Config::from_toml_and_env(&toml, Vec::<(String, String)>::new()).unwrap();
    common::serve(Arc::new(Gateway::new(config, None).unwrap())).await
}

/// What a client makes of an answer: content, reasoning, calls (id, name, arguments as
/// JSON), finish_reason.
type Seen = (String, String, Vec<(String, String, Value)>, String);

fn args(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn from_json(body: &Value) -> Seen {
    let c = &body["choices"][0];
    let m = &c["message"];
    let calls = m["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["id"].as_str().unwrap_or_default().to_owned(),
                t["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                args(t["function"]["arguments"].as_str().unwrap_or_default()),
            )
        })
        .collect();
    (
        m["content"].as_str().unwrap_or_default().to_owned(),
        m["reasoning_content"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        calls,
        c["finish_reason"].as_str().unwrap_or_default().to_owned(),
    )
}

fn from_stream(text: &str) -> Seen {
    let (mut content, mut reasoning, mut finish) = (String::new(), String::new(), String::new());
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for data in text.split("\n\n").filter_map(|b| b.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let e: Value = serde_json::from_str(data).unwrap();
        assert!(e.get("error").is_none(), "{text}");
        let c = &e["choices"][0];
        content.push_str(c["delta"]["content"].as_str().unwrap_or_default());
        reasoning.push_str(c["delta"]["reasoning_content"].as_str().unwrap_or_default());
        for t in c["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let i = usize::try_from(t["index"].as_u64().unwrap()).unwrap();
            if calls.len() <= i {
                calls.resize(i + 1, Default::default());
            }
            calls[i].0.push_str(t["id"].as_str().unwrap_or_default());
            calls[i]
                .1
                .push_str(t["function"]["name"].as_str().unwrap_or_default());
            calls[i]
                .2
                .push_str(t["function"]["arguments"].as_str().unwrap_or_default());
        }
        if let Some(f) = c["finish_reason"].as_str() {
            finish = f.to_owned();
        }
    }
    let calls = calls
        .into_iter()
        .map(|(i, n, a)| (i, n, args(&a)))
        .collect();
    (content, reasoning, calls, finish)
}

#[tokio::test]
async fn the_json_and_the_streamed_answer_agree_on_every_dialect_and_cut() {
    let up = upstream().await;
    let http = reqwest::Client::new();
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "description": "Weather.", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]);
    let mut differ = Vec::new();
    for (policy, opened) in [
        ("move", false),
        ("drop", false),
        ("move", true),
        ("drop", true),
    ] {
        let gw = gateway(&up, policy, opened).await;
        for case in 0..answers().len() {
            let ask = |split: usize, stream: bool| {
                json!({"model": "m", "tools": tools, "stream": stream,
                    "messages": [{"role": "user", "content": format!("case {case} split {split}")}]})
            };
            let post = |body: Value| {
                http.post(format!("http://{gw}/v1/chat/completions"))
                    .json(&body)
                    .send()
            };
            let whole: Value = post(ask(0, false)).await.unwrap().json().await.unwrap();
            let want = from_json(&whole);
            for split in [1, 2, 3, 7] {
                let text = post(ask(split, true)).await.unwrap().text().await.unwrap();
                let got = from_stream(&text);
                if got != want {
                    differ.push(format!(
                        "{policy} (opened {opened}), case {case} {:?}, split {split}:\n  json   {want:?}\n  stream {got:?}",
                        answers()[case]
                    ));
                }
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{} disagreements:\n{}",
        differ.len(),
        differ.join("\n")
    );
}
