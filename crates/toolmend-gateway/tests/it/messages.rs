//! The Messages front's bar, randomized: Messages histories with every pairing defect
//! (a `tool_use` without its `tool_result`, an orphan result, a reused id), answers with
//! malformed calls or calls written into the text, a third of them streamed, through the
//! gateway to the strict scripted provider speaking Chat Completions. Zero requests may be
//! refused upstream; every `tool_use` a client receives has a fresh id and an `input`
//! valid for its tool, or is flagged unresolved in the account.

use std::sync::Arc;

use serde_json::{Value, json};
use toolmend::{
    MendOptions,
    agent::Strictness,
    schema::{Phase, ValidationContext},
};
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::{
    common,
    randomized::{NAMES, Rng, compiled, reply, tools},
};

/// The chat tools as Messages tools.
fn messages_tools() -> Value {
    tools()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            json!({"name": f["name"], "description": f["description"], "input_schema": f["parameters"]})
        })
        .collect()
}

const INPUTS: [&str; 6] = [
    r#"{"city": "Paris"}"#,
    r#"{"city": "Oslo", "days": "2"}"#,
    r#"{"town": "Kyiv"}"#,
    r#"{}"#,
    r#"{"query": "rust", "tags": ["a"]}"#,
    r#"{"days": 0}"#,
];

/// A Messages conversation with every kind of pairing defect.
fn history(rng: &mut Rng) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "hi"})];
    for turn in 0..rng.below(4) {
        let mut blocks = Vec::new();
        if rng.chance(30) {
            blocks.push(json!({"type": "text", "text": "Let me check."}));
        }
        let mut ids = Vec::new();
        for k in 0..rng.below(3) + 1 {
            let id = if rng.chance(10) {
                "toolu_0".to_owned()
            } else {
                format!("toolu_{turn}_{k}")
            };
            ids.push(id.clone());
            let text = INPUTS[rng.below(INPUTS.len())];
            let input: Value = serde_json::from_str(text).unwrap();
            blocks.push(
                json!({"type": "tool_use", "id": id, "name": *rng.pick(&NAMES), "input": input}),
            );
        }
        messages.push(json!({"role": "assistant", "content": blocks}));
        let mut answer = Vec::new();
        for id in &ids {
            if rng.chance(75) {
                let content = if rng.chance(50) {
                    json!("ok")
                } else {
                    json!([{"type": "text", "text": "ok"}])
                };
                answer.push(
                    json!({"type": "tool_result", "tool_use_id": id, "content": content,
                    "is_error": rng.chance(10)}),
                );
            }
            if rng.chance(10) {
                answer.push(
                    json!({"type": "tool_result", "tool_use_id": "ghost", "content": "orphan"}),
                );
            }
        }
        answer.push(json!({"type": "text", "text": "next"}));
        messages.push(json!({"role": "user", "content": answer}));
    }
    Value::Array(messages)
}

/// The message a streaming client assembles from the events, and the account.
fn assemble(sse: &str) -> (Value, Value) {
    let mut content: Vec<Value> = Vec::new();
    let mut account = Value::Null;
    for frame in sse.split("\n\n") {
        let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
            continue;
        };
        let e: Value = serde_json::from_str(data).unwrap();
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
                    b["partial"] = json!("");
                }
                content.push(b);
            }
            "content_block_delta" => {
                let b = content.last_mut().unwrap();
                if let Some(p) = e["delta"]["partial_json"].as_str() {
                    b["partial"] = json!(format!("{}{p}", b["partial"].as_str().unwrap()));
                }
            }
            "message_delta" => account = e["toolmend"].clone(),
            _ => {}
        }
    }
    for b in &mut content {
        if let Some(p) = b.get("partial").and_then(Value::as_str) {
            b["input"] = serde_json::from_str(p).unwrap();
        }
    }
    (json!({"content": content}), account)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_hundred_broken_messages_requests_reach_the_strict_chat_provider_valid() {
    run(0x5EED_0003, "chat_completions").await;
}

/// The same toward an upstream speaking Messages itself: the client's body passed
/// through when its history is sound, translated back when it was mended; every answer
/// read from the provider's Messages (a call it could not parse left in the text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_hundred_broken_messages_requests_reach_the_strict_messages_provider_valid() {
    run(0x5EED_0013, "messages").await;
}

async fn run(seed: u64, api: &str) {
    let requests = 1200;
    let mut rng = Rng(seed);
    let steps: Vec<Step> = (0..requests).map(|_| reply(&mut rng)).collect();
    let script = steps.into_iter().fold(Script::new(), Script::then);
    let provider = ScriptedProvider::start_with(script, Strictness::All, 0)
        .await
        .unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\nupstream.api = \"{api}\"\ncalls.invalid = \"pass\"",
        provider.base_url()
    );
    let gateway = Arc::new(
        Gateway::new(Config::from_toml_and_env(&toml, Vec::new()).unwrap(), None).unwrap(),
    );
    let addr = common::serve(gateway).await;
    let http = reqwest::Client::new();
    let schemas = compiled();
    let ctx = ValidationContext::new("", Phase::Initial);
    let mut passed = 0;
    let (mut seen, mut unresolved, mut streamed) = (0, 0, 0);
    for n in 0..requests {
        let stream = n % 3 == 0;
        let body = json!({"model": "m", "max_tokens": 100, "system": "be brief",
            "messages": history(&mut rng), "tools": messages_tools(), "stream": stream});
        let resp = http
            .post(format!("http://{addr}/v1/messages"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert_eq!(
            status, 200,
            "seed {seed} request {n}: refused: {text}\n{body}"
        );
        let (message, account) = if stream {
            streamed += 1;
            assemble(&text)
        } else {
            let m: Value = serde_json::from_str(&text).unwrap();
            let a = m["toolmend"].clone();
            (m, a)
        };
        let translation = &account["translation"];
        assert_eq!(translation["to"], api, "{translation}");
        passed += usize::from(translation["passed_through"] == true);
        let flagged: Vec<&str> = account["calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["status"] == "unresolved")
            .filter_map(|c| c["id"].as_str())
            .collect();
        let uses: Vec<&Value> = message["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .collect();
        let mut ids = Vec::new();
        for u in &uses {
            seen += 1;
            let id = u["id"].as_str().unwrap_or_default();
            assert!(
                !id.is_empty() && !ids.contains(&id),
                "seed {seed} request {n}: ids {uses:?}"
            );
            ids.push(id);
            if flagged.contains(&id) {
                unresolved += 1;
                continue;
            }
            let name = u["name"].as_str().unwrap();
            let tool = schemas
                .iter()
                .find(|t| t.name() == name)
                .unwrap_or_else(|| {
                    panic!("seed {seed} request {n}: unknown tool {name} passed unflagged")
                });
            let checked = tool.check(u["input"].clone(), &MendOptions::default().coercions, &ctx);
            assert!(
                checked.is_valid() && checked.fixes.is_empty(),
                "seed {seed} request {n}: invalid call passed unflagged: {u}"
            );
        }
    }
    assert!(seen > requests / 2, "the generator produced calls");
    assert!(
        unresolved > 0,
        "the generator produced calls that stay invalid"
    );
    assert!(streamed >= requests / 3);
    assert_eq!(provider.requests().len(), requests);
    // Each request went up in the upstream's own API; a sound one as the client sent it.
    if api == "chat_completions" {
        assert_eq!(passed, 0);
        assert!(provider.requests().iter().all(|r| r["messages"].is_array()));
    } else {
        assert!(passed > 0 && passed < requests, "passed through: {passed}");
        assert!(
            provider
                .requests()
                .iter()
                .all(|r| r["max_tokens"].is_number() || r["max_tokens"].is_array())
        );
    }
}
