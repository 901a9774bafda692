//! Tool-node overhead per call (criterion), tool body excluded.
//!
//! The workload is `bench/node_workload.json`, written by `bench/node_peers.py
//! --dump-workload`, so the Python peers (LangGraph's ToolNode, SAIDEX's node) and this
//! bench run the same tools and the same calls: 1, 8 and 64 valid calls in one assistant
//! message, alternating `search_flights` (enum, range) and `add`.
//!
//! Groups: `node/invoke/N` runs `ToolNode::invoke` on the message (`invoke_spawned/N`
//! with `spawn_tools(true)`: a tokio task per body); `node/body/N` runs
//! the same tool bodies directly, N times, under the same `block_on`. Overhead per call =
//! (invoke - body) / N; `bench/node.sh` prints it beside the peers' (ratios).
#![allow(clippy::expect_used, clippy::unwrap_used)] // a bench may stop loudly on bad setup

use std::{hint::black_box, path::PathBuf, sync::Arc};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolmend::{
    conversation::{AssistantMessage, Message, ToolCall},
    node::{CallContext, Registry, Tool, ToolError, ToolNode, ToolOutput, tool_fn},
};

fn workload() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/node_workload.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("bench/node_workload.json"))
        .expect("workload JSON")
}

fn spec<'a>(tools: &'a Value, name: &str) -> &'a Value {
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["function"])
        .find(|f| f["name"] == name)
        .unwrap()
}

/// The peers' trivial bodies: `add` returns a + b; `search_flights` a one-line summary.
fn tools(defs: &Value) -> Vec<Arc<dyn Tool>> {
    let add = spec(defs, "add");
    let flights = spec(defs, "search_flights");
    vec![
        Arc::new(tool_fn(
            "add",
            add["description"].as_str().unwrap(),
            add["parameters"].clone(),
            |a, _| async move {
                let sum = a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0);
                Ok::<_, ToolError>(ToolOutput::text(sum.to_string()))
            },
        )),
        Arc::new(tool_fn(
            "search_flights",
            flights["description"].as_str().unwrap(),
            flights["parameters"].clone(),
            |a, _| async move {
                Ok::<_, ToolError>(ToolOutput::text(format!(
                    "{} flights {}->{} on {}",
                    a["cabin"].as_str().unwrap_or("economy"),
                    a["origin"].as_str().unwrap_or(""),
                    a["destination"].as_str().unwrap_or(""),
                    a["date"].as_str().unwrap_or("")
                )))
            },
        )),
    ]
}

fn bench_node(c: &mut Criterion) {
    let w = workload();
    let tools = tools(&w["tools"]);
    let mut registry = Registry::new();
    for t in &tools {
        registry
            .add_shared(Arc::clone(t), Default::default())
            .unwrap();
    }
    let node = ToolNode::builder(registry).max_concurrency(64).build();
    let mut registry = Registry::new();
    for t in &tools {
        registry
            .add_shared(Arc::clone(t), Default::default())
            .unwrap();
    }
    let spawning = ToolNode::builder(registry)
        .max_concurrency(64)
        .spawn_tools(true)
        .build();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("node");
    for n in [1usize, 8, 64] {
        let calls = w["calls"][n.to_string()].as_array().unwrap();
        let message = Message::Assistant(AssistantMessage {
            content: Some(None),
            tool_calls: Some(
                calls
                    .iter()
                    .map(|c| {
                        ToolCall::new(
                            c["id"].as_str().unwrap(),
                            c["name"].as_str().unwrap(),
                            c["args"].to_string(),
                        )
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        let messages = vec![
            Message::User(serde_json::from_value(json!({"content": "plan my trip"})).unwrap()),
            message,
        ];
        let out = rt.block_on(node.invoke(&messages)).unwrap();
        assert_eq!(out.results.len(), n);
        assert!(
            out.stats
                .calls
                .iter()
                .all(|c| c.fixes.is_empty() && !c.tool_error)
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("invoke", n), &messages, |b, m| {
            b.iter(|| rt.block_on(node.invoke(black_box(m))).unwrap());
        });
        group.bench_with_input(BenchmarkId::new("invoke_spawned", n), &messages, |b, m| {
            b.iter(|| rt.block_on(spawning.invoke(black_box(m))).unwrap());
        });
        let direct: Vec<(Arc<dyn Tool>, Value, String)> = calls
            .iter()
            .map(|c| {
                let t = tools.iter().find(|t| t.name() == c["name"]).unwrap();
                (
                    Arc::clone(t),
                    c["args"].clone(),
                    c["id"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        group.bench_with_input(BenchmarkId::new("body", n), &direct, |b, d| {
            b.iter(|| {
                rt.block_on(async {
                    for (tool, args, id) in d {
                        let ctx = CallContext {
                            call_id: id.clone(),
                            tool: tool.name().to_owned(),
                            state: None,
                            trace_id: None,
                            received_at: None,
                        };
                        black_box(tool.call(args.clone(), ctx).await.unwrap());
                    }
                });
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_node);
criterion_main!(benches);
