//! The gateway's bar, randomized: thousands of requests with broken histories and
//! responses with malformed calls, through the gateway to the strict scripted provider
//! (every rule `history::check` knows). Zero requests may be refused upstream, and every
//! tool call a client receives is valid for its tool, or flagged in
//! `x-toolmend-unresolved` (the deliberate path, with `calls.invalid = "pass"`).

use std::sync::Arc;

use serde_json::{Value, json};
use toolmend::{
    CompiledTool, MendOptions,
    agent::Strictness,
    conversation::{AssistantMessage, Content, ToolCall},
    schema::{Phase, ValidationContext},
};
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::common;

/// xorshift64*: deterministic, so a failure names its seed and replays.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap()
    }
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    pub(crate) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

pub(crate) fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                "units": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "search", "description": "Search.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["query"]}}}
    ])
}

/// Argument texts as models break them.
pub(crate) const ARGS: [&str; 14] = [
    r#"{"city": "Paris"}"#,
    "{'city': 'Paris', 'days': '3',}",
    "```json\n{\"city\": \"Oslo\", \"units\": \"Celsius\"}\n```",
    "<think>the user wants Rome</think>{\"city\": \"Rome\"}",
    r#"{"city": "Par"#,
    r#"{"city": "Paris"}{"city": "Lima"}"#,
    r#"{"days": 2}"#,
    r#"{"town": "Kyiv"}"#,
    "",
    "not json at all",
    r#"{"city": "Nice", "days": 0}"#,
    r#"{"city": "Nice", "extra": true}"#,
    r#"{"query": "rust", "tags": "a, b"}"#,
    r#"{"name": "get_weather", "arguments": {"city": "Bern"}}"#,
];

pub(crate) const NAMES: [&str; 5] = [
    "get_weather",
    "search",
    "Get-Weather",
    "get.weather",
    "launch",
];

fn id(rng: &mut Rng, n: usize) -> Option<String> {
    match rng.below(10) {
        0 => None,
        1 => Some(String::new()),
        2 => Some("call_0".to_owned()),
        3 => Some("x".repeat(48)),
        _ => Some(format!("call_{n}_{}", rng.below(3))),
    }
}

/// A conversation with every kind of pairing defect.
fn history(rng: &mut Rng) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "be brief"}),
        json!({"role": "user", "content": "hi"}),
    ];
    for turn in 0..rng.below(4) {
        let n_calls = rng.below(3) + 1;
        let mut ids = Vec::new();
        let mut calls = Vec::new();
        for k in 0..n_calls {
            let i = id(rng, turn * 10 + k);
            ids.push(i.clone());
            let mut c = json!({"type": "function", "function": {"name": rng.pick(&NAMES), "arguments": rng.pick(&ARGS)}});
            if let Some(i) = i {
                c["id"] = json!(i);
            }
            calls.push(c);
        }
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
        if rng.chance(20) {
            messages.push(json!({"role": "user", "content": "hurry"}));
        }
        for i in &ids {
            if rng.chance(75) {
                messages.push(json!({"role": "tool", "tool_call_id": i.clone().unwrap_or_default(), "content": if rng.chance(10) { "" } else { "ok" }}));
            }
            if rng.chance(10) {
                messages
                    .push(json!({"role": "tool", "tool_call_id": "ghost", "content": "orphan"}));
            }
        }
        messages.push(json!({"role": "user", "content": "next"}));
    }
    Value::Array(messages)
}

/// A response with malformed calls, or calls written into the text.
pub(crate) fn reply(rng: &mut Rng) -> Step {
    if rng.chance(15) {
        return Step::Reply(AssistantMessage {
            content: Some(Some(Content::Text(format!(
                "On it.<tool_call>{{\"name\": \"get_weather\", \"arguments\": {}}}</tool_call>",
                rng.pick(&[
                    r#"{"city": "Oslo"}"#,
                    r#"{"city": "Oslo", "days": "2"}"#,
                    r#"{"days": 2}"#
                ])
            )))),
            ..Default::default()
        });
    }
    if rng.chance(10) {
        return Step::Reply(AssistantMessage {
            content: Some(Some(Content::Text("Just text.".into()))),
            ..Default::default()
        });
    }
    let calls = (0..rng.below(3) + 1)
        .map(|k| {
            let mut c = ToolCall::new(format!("r{k}"), *rng.pick(&NAMES), *rng.pick(&ARGS));
            if rng.chance(15) {
                c.id = Some("r0".to_owned());
            }
            c
        })
        .collect();
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(calls),
        ..Default::default()
    })
}

pub(crate) fn compiled() -> Vec<CompiledTool> {
    tools()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            CompiledTool::compile(f["name"].as_str().unwrap(), "", &f["parameters"]).unwrap()
        })
        .collect()
}

async fn run(seed: u64, requests: usize, stream: bool) {
    let mut rng = Rng(seed);
    let steps: Vec<Step> = (0..requests).map(|_| reply(&mut rng)).collect();
    let script = steps.into_iter().fold(Script::new(), Script::then);
    let provider = ScriptedProvider::start_with(script, Strictness::All, 0)
        .await
        .unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\ncalls.invalid = \"pass\"",
        provider.base_url()
    );
    let gateway = Arc::new(
        Gateway::new(Config::from_toml_and_env(&toml, Vec::new()).unwrap(), None).unwrap(),
    );
    let addr = common::serve(gateway).await;
    let http = reqwest::Client::new();
    let schemas = compiled();
    let ctx = ValidationContext::new("", Phase::Initial);
    let mut seen_calls = 0;
    let mut unresolved = 0;
    for n in 0..requests {
        let body = json!({"model": "m", "messages": history(&mut rng), "tools": tools(), "stream": stream});
        let resp = http
            .post(format!("http://{addr}/v1/chat/completions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let flagged: Vec<String> = resp
            .headers()
            .get("x-toolmend-unresolved")
            .map(|v| v.to_str().unwrap().split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        let text = resp.text().await.unwrap();
        assert_eq!(
            status, 200,
            "seed {seed} request {n}: refused: {text}\n{body}"
        );
        let message = if stream {
            assemble(&text)
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["choices"][0]["message"].clone()
        };
        let flagged = if stream {
            stream_flagged(&text)
        } else {
            flagged
        };
        let calls = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut ids = Vec::new();
        for c in &calls {
            seen_calls += 1;
            let id = c["id"].as_str().unwrap_or_default().to_owned();
            assert!(
                !id.is_empty() && !ids.contains(&id),
                "seed {seed} request {n}: ids {calls:?}"
            );
            ids.push(id.clone());
            if flagged.contains(&id) {
                unresolved += 1;
                continue;
            }
            let name = c["function"]["name"].as_str().unwrap();
            let tool = schemas
                .iter()
                .find(|t| t.name() == name)
                .unwrap_or_else(|| {
                    panic!("seed {seed} request {n}: unknown tool {name} passed unflagged")
                });
            let args: Value = serde_json::from_str(c["function"]["arguments"].as_str().unwrap())
                .unwrap_or_else(|e| {
                    panic!("seed {seed} request {n}: arguments not JSON ({e}): {c}")
                });
            let checked = tool.check(args, &MendOptions::default().coercions, &ctx);
            assert!(
                checked.is_valid() && checked.fixes.is_empty(),
                "seed {seed} request {n}: invalid call passed unflagged: {c}"
            );
        }
    }
    assert!(seen_calls > requests / 2, "the generator produced calls");
    assert!(
        unresolved > 0,
        "the generator produced calls that stay invalid"
    );
    // Every request went upstream once (no re-asks with calls.invalid = "pass").
    assert_eq!(provider.requests().len(), requests);
}

/// The assistant message a streaming client assembles from the chunks.
fn assemble(sse: &str) -> Value {
    let mut calls: Vec<Value> = Vec::new();
    for block in sse.split("\n\n") {
        let Some(data) = block.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        assert!(chunk.get("error").is_none(), "{chunk}");
        for d in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = usize::try_from(d["index"].as_u64().unwrap()).unwrap();
            if calls.len() <= i {
                calls.resize(
                    i + 1,
                    json!({"id": "", "function": {"name": "", "arguments": ""}}),
                );
            }
            if let Some(id) = d["id"].as_str() {
                calls[i]["id"] = json!(id);
            }
            for k in ["name", "arguments"] {
                if let Some(s) = d["function"][k].as_str() {
                    let joined = format!("{}{s}", calls[i]["function"][k].as_str().unwrap());
                    calls[i]["function"][k] = json!(joined);
                }
            }
        }
    }
    json!({"tool_calls": calls})
}

/// Streaming carries the unresolved ids in the closing `: toolmend {…}` comment.
fn stream_flagged(sse: &str) -> Vec<String> {
    sse.lines()
        .find_map(|l| l.strip_prefix(": toolmend "))
        .and_then(|j| serde_json::from_str::<Value>(j).ok())
        .and_then(|v| v["unresolved"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_broken_requests_reach_the_strict_provider_valid() {
    run(0x5EED_0001, 2000, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_too() {
    run(0x5EED_0002, 500, true).await;
}
