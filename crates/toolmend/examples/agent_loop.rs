//! An agent loop over a scripted model that sends the broken calls real models send,
//! answered by the tool node. Prints the history the provider saw and the node's stats.
//!
//! Run: `cargo run -p toolmend --example agent_loop`
#![allow(clippy::print_stdout, clippy::unwrap_used)] // an example prints and stops loudly

use serde::Deserialize;
use serde_json::json;
use toolmend::{
    agent::{Limits, ScriptedModel, run},
    conversation::{AssistantMessage, Content, Message, ToolCall},
    history,
    node::{Registry, StatsCollector, ToolError, ToolNode, typed_tool},
};

/// Arguments of `get_weather`, its JSON Schema derived from the type.
#[derive(Deserialize, schemars::JsonSchema)]
struct Weather {
    /// The city.
    city: String,
    /// The unit of temperature.
    unit: Option<Unit>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Celsius,
    Fahrenheit,
}

fn calls(list: Vec<ToolCall>) -> AssistantMessage {
    AssistantMessage {
        content: Some(Some(Content::Text(
            "<think>The user wants weather.</think>Let me check.".into(),
        ))),
        tool_calls: Some(list),
        ..Default::default()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut tools = Registry::new();
    tools
        .add(typed_tool(
            "get_weather",
            "Current weather for a city.",
            |w: Weather| async move {
                let unit = match w.unit {
                    Some(Unit::Fahrenheit) => "F",
                    _ => "C",
                };
                Ok::<_, ToolError>(format!("{}: 21°{unit}, sunny", w.city))
            },
        ))
        .unwrap();
    let stats = std::sync::Arc::new(StatsCollector::new());
    let node = ToolNode::builder(tools).listener(stats.clone()).build();

    let model = ScriptedModel::new()
        .reply(calls(vec![
            // Python-style quotes, a trailing comma and a wrong enum case: repaired.
            ToolCall::new(
                "call_1",
                "get_weather",
                "{'city': 'Paris', 'unit': 'Celsius',}",
            ),
            // A misnamed key: renamed (town -> city), recorded.
            ToolCall::new("call_2", "get_weather", r#"{"town": "Oslo"}"#),
            // Two calls glued into one argument string: split, the second gets an id.
            ToolCall::new(
                "call_3",
                "get_weather",
                r#"{"city": "Rome"}{"city": "Lima"}"#,
            ),
            // A tool that does not exist: feedback listing the tools.
            ToolCall::new("call_4", "get_forecast", r#"{"city": "Paris"}"#),
        ]))
        .reply(AssistantMessage {
            content: Some(Some(Content::Text(
                "Paris 21°C, Oslo 21°C, Rome 21°C, Lima 21°C.".into(),
            ))),
            ..Default::default()
        });
    let start = vec![
        serde_json::from_value::<Message>(json!({"role": "user", "content": "Weather?"})).unwrap(),
    ];
    let out = run(&model, &node, start, &Limits::default()).await.unwrap();

    println!("stopped: {:?} after {} turns\n", out.stop, out.turns);
    for m in &out.messages {
        println!("{}", serde_json::to_string(m).unwrap());
    }
    println!(
        "\nprovider check: {} violations",
        history::check(&out.messages).len()
    );
    for s in &out.stats {
        for c in &s.calls {
            let fixes: Vec<&str> = c.fixes.iter().map(|f| f.kind.id()).collect();
            println!(
                "{:<10} {:<12} {:<9} fixes={fixes:?}",
                c.call_id.as_deref().unwrap_or("-"),
                c.tool,
                c.outcome.as_str()
            );
        }
    }
    println!(
        "\ntotals: {}",
        serde_json::to_string(&stats.snapshot()).unwrap()
    );
}
