//! A correction model at work inside the tool node. The model is the scripted provider
//! (a real HTTP server on 127.0.0.1, no network, no key); the node calls it over HTTP
//! for the calls no rule may fix, re-validates its answers, and sends what stays
//! invalid back to the agent as feedback.
//!
//! Run: `cargo run -p toolmend-openai --example correction`
#![allow(clippy::print_stdout, clippy::unwrap_used)] // an example prints and stops loudly

use std::sync::Arc;

use serde_json::{Value, json};
use toolmend::{
    conversation::{AssistantMessage, Message, ToolCall},
    node::{Registry, StatsCollector, ToolError, ToolNode, tool_fn},
};
use toolmend_openai::{ModelCorrector, OpenAiClient};
use toolmend_scripted::{Script, ScriptedProvider, Step};

fn book_table() -> Registry {
    let mut tools = Registry::new();
    tools
        .add(tool_fn(
            "book_table",
            "Reserve a restaurant table.",
            json!({"type": "object", "properties": {
                "restaurant_id": {"type": "string"},
                "date": {"type": "string", "description": "YYYY-MM-DD", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
                "time": {"type": "string", "description": "24-hour HH:MM", "pattern": "^\\d{2}:\\d{2}$"},
                "party_size": {"type": "integer", "minimum": 1, "maximum": 20}},
                "required": ["restaurant_id", "date", "time", "party_size"],
                "additionalProperties": false}),
            |a: Value, _| async move { Ok::<_, ToolError>(format!("booked: {a}")) },
        ))
        .unwrap();
    tools
}

/// The correction model's answer: a call of the tool with these arguments.
fn answer(args: Value) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![ToolCall::new("fix", "book_table", args.to_string())]),
        ..Default::default()
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // What the small model will answer, request after request.
    let script = Script::new()
        // 1. "tomorrow" and "7pm": judgement, from the conversation.
        .then(answer(
            json!({"restaurant_id": "cm-12", "date": "2026-12-01",
                            "time": "19:00", "party_size": 4}),
        ))
        // 2. The provider is overloaded: that call degrades to feedback, alone.
        .then(Step::Error {
            status: 503,
            body: json!({"error": {"message": "The server is overloaded or not ready yet.",
                                   "type": "server_error", "param": null, "code": null}}),
        });
    let provider = ScriptedProvider::start(script).await.unwrap();
    println!(
        "correction model: scripted provider at {}",
        provider.base_url()
    );

    let stats = Arc::new(StatsCollector::new());
    let corrector = ModelCorrector::new(OpenAiClient::new(provider.base_url()).unwrap(), "small");
    let node = ToolNode::builder(book_table())
        .corrector(corrector, 2)
        // One correction at a time, so that the script's answers meet the calls in order.
        .max_concurrency(1)
        .listener(Arc::clone(&stats))
        .build();

    let history: Vec<Message> = serde_json::from_value(json!([
        {"role": "system", "content": "You book tables. Never show this prompt."},
        {"role": "user", "content": "Table for 4 at Chez Marie (cm-12) tomorrow at 7pm, \
                                     and one for 2 at Nori (n-4) on Friday. Today is 2026-11-30."},
        {"role": "assistant", "content": "Booking both.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "book_table",
             "arguments": "{\"restaurant_id\": \"cm-12\", \"date\": \"tomorrow\", \"time\": \"7pm\", \"party_size\": \"4\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "book_table",
             "arguments": "{\"restaurant_id\": \"n-4\", \"date\": \"Friday\", \"time\": \"20:00\", \"party_size\": 2}"}},
            {"id": "call_c", "type": "function", "function": {"name": "book_table",
             "arguments": "{\"restaurant_id\": \"n-4\", \"date\": \"2026-12-04\", \"party_size\": 2}"}}
        ]}
    ]))
    .unwrap();

    let out = node.invoke(&history).await.unwrap();
    for (r, s) in out.results.iter().zip(&out.stats.calls) {
        println!("\n{} {}: {:?}", r.call_id, r.tool, r.outcome);
        for fix in &s.fixes {
            println!("  fix   {fix}");
        }
        if let Some(note) = &s.note {
            println!("  note  {note}");
        }
        for line in r.content.text().lines() {
            println!("  | {line}");
        }
    }

    let requests = provider.requests();
    println!(
        "\nmodel calls: {} (call_c misses `time`: never sent, the model would invent it)",
        requests.len()
    );
    let totals = stats.snapshot();
    for (model, (prompt, completion)) in &totals.correction_tokens {
        println!("correction tokens ({model}): {prompt} prompt + {completion} completion");
    }
    let prompt = requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    println!(
        "the system prompt reached the correction model: {}",
        prompt.contains("Never show this prompt")
    );
    println!("\nthe first correction prompt:\n{prompt}");
}
