//! The Responses front's bar, randomized: input items with every pairing defect (a
//! `function_call` without its output, an orphan output, a reused `call_id`), answers
//! with malformed calls or calls written into the text, a third of them streamed, through
//! the gateway to the strict scripted provider speaking Chat Completions. Zero requests
//! may be refused upstream; every `function_call` a client receives has a fresh
//! `call_id` and arguments valid for its tool, or is flagged unresolved in the account.

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
    randomized::{ARGS, NAMES, Rng, compiled, reply, tools},
};

/// The chat tools as Responses tools.
fn responses_tools() -> Value {
    tools()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            json!({"type": "function", "name": f["name"], "description": f["description"],
                "parameters": f["parameters"]})
        })
        .collect()
}

/// Input items with every kind of pairing defect.
fn input(rng: &mut Rng) -> Value {
    let mut items = vec![json!({"role": "user", "content": "hi"})];
    for turn in 0..rng.below(4) {
        if rng.chance(30) {
            items.push(json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Let me check."}]}));
        }
        let mut ids = Vec::new();
        for k in 0..rng.below(3) + 1 {
            let id = if rng.chance(10) {
                "call_0".to_owned()
            } else {
                format!("call_{turn}_{k}")
            };
            ids.push(id.clone());
            items.push(json!({"type": "function_call", "call_id": id,
                "name": NAMES[rng.below(NAMES.len())], "arguments": ARGS[rng.below(ARGS.len())]}));
        }
        for id in &ids {
            if rng.chance(75) {
                items.push(json!({"type": "function_call_output", "call_id": id, "output": "ok"}));
            }
            if rng.chance(10) {
                items.push(
                    json!({"type": "function_call_output", "call_id": "ghost", "output": "orphan"}),
                );
            }
        }
        items.push(json!({"role": "user", "content": "next"}));
    }
    Value::Array(items)
}

/// The response a streaming client assembles from the events: `response.completed`'s.
fn assemble(sse: &str) -> Value {
    let mut seq = 0;
    let mut done = Value::Null;
    for frame in sse.split("\n\n") {
        let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
            continue;
        };
        let e: Value = serde_json::from_str(data).unwrap();
        assert_eq!(e["sequence_number"], seq, "{sse}");
        seq += 1;
        match e["type"].as_str().unwrap() {
            "error" => panic!("an error event: {e}"),
            "response.completed" | "response.incomplete" => done = e["response"].clone(),
            _ => {}
        }
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_hundred_broken_responses_requests_reach_the_strict_chat_provider_valid() {
    run(0x5EED_0004, "chat_completions").await;
}

/// The same toward an upstream speaking Responses itself (stateless: `store: false`):
/// the client's body passed through when its input is sound, translated back when it
/// was mended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_hundred_broken_responses_requests_reach_the_strict_responses_provider_valid() {
    run(0x5EED_0014, "responses").await;
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
    let (mut seen, mut unresolved) = (0, 0);
    for n in 0..requests {
        let stream = n % 3 == 0;
        let body = json!({"model": "m", "instructions": "be brief", "input": input(&mut rng),
            "tools": responses_tools(), "stream": stream, "store": false});
        let resp = http
            .post(format!("http://{addr}/v1/responses"))
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
        let response = if stream {
            assemble(&text)
        } else {
            serde_json::from_str(&text).unwrap()
        };
        let translation = &response["toolmend"]["translation"];
        assert_eq!(translation["to"], api, "{translation}");
        passed += usize::from(translation["passed_through"] == true);
        let flagged: Vec<&str> = response["toolmend"]["calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["status"] == "unresolved")
            .filter_map(|c| c["id"].as_str())
            .collect();
        let calls: Vec<&Value> = response["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["type"] == "function_call")
            .collect();
        let mut ids = Vec::new();
        for c in &calls {
            seen += 1;
            let id = c["call_id"].as_str().unwrap_or_default();
            assert!(
                !id.is_empty() && !ids.contains(&id),
                "seed {seed} request {n}: ids {calls:?}"
            );
            ids.push(id);
            if flagged.contains(&id) {
                unresolved += 1;
                continue;
            }
            let name = c["name"].as_str().unwrap();
            let tool = schemas
                .iter()
                .find(|t| t.name() == name)
                .unwrap_or_else(|| {
                    panic!("seed {seed} request {n}: unknown tool {name} passed unflagged")
                });
            let args: Value = serde_json::from_str(c["arguments"].as_str().unwrap())
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
    assert!(seen > requests / 2, "the generator produced calls");
    assert!(
        unresolved > 0,
        "the generator produced calls that stay invalid"
    );
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
                .all(|r| r["input"].is_number() || r["input"].is_array())
        );
    }
}
