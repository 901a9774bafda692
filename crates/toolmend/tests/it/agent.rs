//! agent: the loop over a scripted model that refuses broken histories like a provider.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};
use std::time::Duration;

use serde_json::{Value, json};
use toolmend::{
    FixKind,
    agent::{Limits, RunFailure, ScriptedModel, StopReason, Strictness, run},
    conversation::{AssistantMessage, Content, Message, ToolCall},
    history::{self, Budget, SanitizePolicy, ViolationKind},
    node::{
        CallOutcome, CallStats, NodeError, Registry, ToolError, ToolErrorPolicy, ToolNode,
        ToolOptions, ToolOutput, tool_fn,
    },
};

fn user(text: &str) -> Message {
    serde_json::from_value(json!({"role": "user", "content": text})).unwrap()
}

fn system(text: &str) -> Message {
    serde_json::from_value(json!({"role": "system", "content": text})).unwrap()
}

fn calls(calls: Vec<ToolCall>) -> AssistantMessage {
    AssistantMessage {
        content: Some(None),
        tool_calls: Some(calls),
        ..Default::default()
    }
}

fn answer(text: &str) -> AssistantMessage {
    AssistantMessage {
        content: Some(Some(Content::Text(text.to_owned()))),
        ..Default::default()
    }
}

fn node(runs: Arc<AtomicUsize>) -> ToolNode {
    ToolNode::builder(registry(runs)).build()
}

/// `get_weather`, `add` and `search`, counting their runs.
fn registry(runs: Arc<AtomicUsize>) -> Registry {
    let mut tools = Registry::new();
    let r = Arc::clone(&runs);
    tools
        .add(tool_fn(
            "get_weather",
            "Weather for a city.",
            json!({"type": "object",
                   "properties": {"city": {"type": "string"},
                                  "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"], "additionalProperties": false}),
            move |a: Value, _| {
                r.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, ToolError>(format!("sunny in {}", a["city"])) }
            },
        ))
        .unwrap();
    let r = Arc::clone(&runs);
    tools
        .add(tool_fn(
            "add",
            "Adds two integers.",
            json!({"type": "object",
                   "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}),
            move |a: Value, _| {
                r.fetch_add(1, Ordering::SeqCst);
                async move {
                    let sum = a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0);
                    Ok::<_, ToolError>(ToolOutput::text(sum.to_string()))
                }
            },
        ))
        .unwrap();
    let r = Arc::clone(&runs);
    tools
        .add_with(
            tool_fn(
                "search",
                "Web search.",
                json!({"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}),
                move |a: Value, _| {
                    r.fetch_add(1, Ordering::SeqCst);
                    async move { Ok::<_, ToolError>(format!("results for {}", a["query"])) }
                },
            ),
            ToolOptions::default().accept_truncated(),
        )
        .unwrap();
    tools
}

#[tokio::test]
async fn the_loop_runs_tools_until_the_model_answers() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = node(Arc::clone(&runs));
    let model = ScriptedModel::new()
        .reply(calls(vec![
            ToolCall::new("c1", "get_weather", "{'city': 'Paris',}"),
            ToolCall::new("c2", "add", r#"{"a": "2", "b": 3}"#),
        ]))
        .reply(answer("Sunny in Paris, and 2 + 3 = 5."));
    let out = run(
        &model,
        &node,
        vec![system("be brief"), user("weather and sum")],
        &Limits::default(),
    )
    .await
    .unwrap();
    assert_eq!(out.stop, StopReason::Answered);
    assert_eq!((out.turns, out.tool_calls), (2, 2));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert!(history::check(&out.messages).is_empty());
    // The second request carried the sanitized calls and their results.
    let second = &model.requests()[1];
    let Message::Assistant(a) = &second[2] else {
        panic!("expected the assistant message, got {:?}", second[2])
    };
    let sent = a.tool_calls.as_ref().unwrap();
    assert_eq!(sent[0].arguments, r#"{"city":"Paris"}"#);
    assert_eq!(sent[1].arguments, r#"{"a":2,"b":3}"#);
    assert!(matches!(&second[3], Message::Tool(t) if t.call_id == "c1"));
    assert!(matches!(&second[4], Message::Tool(t) if t.call_id == "c2" && t.content.text() == "5"));
}

#[tokio::test]
async fn every_limit_stops_the_loop() {
    let looping = || {
        ScriptedModel::new().otherwise(|m: &[Message]| {
            calls(vec![ToolCall::new(
                format!("c{}", m.len()),
                "add",
                r#"{"a": 1, "b": 2}"#,
            )])
        })
    };
    let node = node(Arc::new(AtomicUsize::new(0)));
    let start = vec![user("loop")];

    let limits = Limits {
        max_turns: 3,
        ..Limits::default()
    };
    let out = run(&looping(), &node, start.clone(), &limits)
        .await
        .unwrap();
    assert_eq!((out.stop, out.turns), (StopReason::MaxTurns, 3));

    let limits = Limits {
        max_tool_calls: 4,
        ..Limits::default()
    };
    let out = run(&looping(), &node, start.clone(), &limits)
        .await
        .unwrap();
    assert_eq!((out.stop, out.tool_calls), (StopReason::MaxToolCalls, 4));

    let limits = Limits {
        max_time: Some(Duration::ZERO),
        ..Limits::default()
    };
    let out = run(&looping(), &node, start, &limits).await.unwrap();
    assert_eq!((out.stop, out.turns), (StopReason::MaxTime, 0));
}

#[tokio::test]
async fn the_scripted_model_refuses_a_broken_history_like_a_provider() {
    let model = ScriptedModel::new().reply(answer("never sent"));
    let node = node(Arc::new(AtomicUsize::new(0)));
    let broken = vec![
        user("hi"),
        Message::Assistant(calls(vec![ToolCall::new("c1", "add", "{}")])),
        user("and?"),
    ];
    let err = run(&model, &node, broken, &Limits::default())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("HTTP 400"), "{text}");
    assert!(
        text.contains("must be followed by tool messages responding to each 'tool_call_id'"),
        "{text}"
    );
    assert!(model.requests().is_empty());
}

/// SplitMix64: a tiny deterministic generator (same seed, same run).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One malformed-or-not call, as open models send them.
fn random_call(rng: &mut Rng, turn: usize, k: usize) -> ToolCall {
    let city = ["Paris", "Rome", "Oslo"][rng.below(3) as usize];
    let (name, args) = match rng.below(16) {
        0 => ("get_weather", format!(r#"{{"city": "{city}"}}"#)),
        1 => (
            "get_weather",
            format!("{{'city': '{city}', 'unit': 'Celsius',}}"),
        ),
        2 => ("get_weather", format!(r#"{{"town": "{city}"}}"#)),
        3 => (
            "get_weather",
            format!(r#"<think>which city?</think>{{"city": "{city}"}}"#),
        ),
        4 => (
            "get_weather",
            format!(r#"{{"city": "{city}"}}{{"city": "Rome"}}"#),
        ),
        5 => ("get_weather", "{}".to_owned()),
        6 => ("add", r#"{"a": "5", "b": 7}"#.to_owned()),
        7 => ("add", r#"{"a": 1, "b": "#.to_owned()),
        8 => ("add", "```json\n{\"a\": 1, \"b\": 2}\n```".to_owned()),
        9 => ("search", r#"{"query": "rust async tra"#.to_owned()),
        10 => ("search", "not json at all".to_owned()),
        11 => ("Get-Weather", format!(r#"{{"city": "{city}"}}"#)),
        12 => ("delete_everything", "{}".to_owned()),
        13 => ("multi_tool_use.parallel", "{}".to_owned()),
        14 => ("noop", "{}".to_owned()), // answers ""
        _ => ("search", r#"{"query": "toolmend"}"#.to_owned()),
    };
    let id = match rng.below(12) {
        0 => None,
        1 => Some(String::new()),
        2 => Some("call_0".to_owned()), // servers that number calls per turn
        3 => Some(format!("dup_{turn}")),
        // Over OpenAI's 40 characters: the same one every turn, and one per call.
        4 => Some(format!("toolu_{}", "0123456789".repeat(4))),
        5 => Some(format!("call_{turn}_{k}_{}", "x".repeat(40))),
        _ => Some(format!("call_{turn}_{k}")),
    };
    let mut tc = ToolCall::new("", name, args);
    tc.id = id;
    tc
}

fn random_reply(rng: &mut Rng, turn: usize) -> AssistantMessage {
    if rng.below(12) == 0 {
        // A call written into the text, with leaked thinking.
        return answer(&format!(
            "<think>need weather</think>Checking.\n<tool_call>{{\"name\": \"get_weather\", \
             \"arguments\": {{\"city\": \"Turn{turn}\"}}}}</tool_call>"
        ));
    }
    let n = 1 + rng.below(4) as usize;
    let mut list: Vec<ToolCall> = (0..n).map(|k| random_call(rng, turn, k)).collect();
    if rng.below(6) == 0 {
        // The same call twice, same id: a stream glitch.
        list.push(list[0].clone());
    }
    let mut msg = calls(list);
    if rng.below(5) == 0 {
        msg.content = Some(Some(Content::Text("<think>plan</think>On it.".to_owned())));
    }
    msg
}

/// The issue's bar: a randomized 1,000-turn run with malformed calls, duplicate ids and
/// trimming; the strict provider check (the scripted model) finds zero violations.
#[tokio::test]
async fn a_thousand_random_turns_never_send_a_broken_history() {
    // OpenAI's rules on the node's own histories; every rule (vLLM, Anthropic) with the
    // loop sanitizing what it sends.
    for (seed, turns, budget, strictness) in [
        (7u64, 1000usize, Budget::Tokens(1_500), Strictness::OpenAi),
        (8, 1000, Budget::Tokens(1_500), Strictness::All),
        (11, 300, Budget::Messages(12), Strictness::OpenAi),
        (13, 300, Budget::Messages(3), Strictness::All),
    ] {
        let rng = Mutex::new(Rng(seed));
        let model = ScriptedModel::new()
            .strictness(strictness)
            .forget_requests()
            .otherwise(move |m: &[Message]| {
                let turn = m.len();
                random_reply(&mut rng.lock().unwrap(), turn)
            });
        let mut tools = registry(Arc::new(AtomicUsize::new(0)));
        tools
            .add(tool_fn(
                "noop",
                "Returns nothing.",
                json!({"type": "object"}),
                |_, _| async move { Ok::<_, ToolError>("") },
            ))
            .unwrap();
        let node = ToolNode::builder(tools).build();
        let limits = Limits {
            max_turns: turns,
            max_tool_calls: usize::MAX,
            history_budget: Some(budget),
            sanitize: (strictness == Strictness::All).then(SanitizePolicy::default),
            ..Limits::default()
        };
        let start = vec![system("You are a travel agent."), user("Plan my week.")];
        let out = run(&model, &node, start, &limits)
            .await
            .unwrap_or_else(|e| {
                panic!("seed {seed}: the provider refused a request: {e}");
            });
        assert_eq!(out.stop, StopReason::MaxTurns, "seed {seed}");
        assert_eq!(out.turns, turns);
        // The node's own history breaks no pairing rule; only feedback calls keep the
        // model's (non-JSON) argument text.
        let violations: Vec<_> = history::check(&out.messages)
            .into_iter()
            .filter(|v| v.kind != ViolationKind::ArgumentsNotObject)
            .collect();
        assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
        // The run really exercised the hard cases.
        let outcomes: Vec<CallOutcome> = out
            .stats
            .iter()
            .flat_map(|s| s.calls.iter().map(|c| c.outcome))
            .collect();
        for o in [
            CallOutcome::Executed,
            CallOutcome::Feedback,
            CallOutcome::Dropped,
        ] {
            assert!(outcomes.contains(&o), "seed {seed}: no {o:?} call");
        }
        let minted = out
            .stats
            .iter()
            .flat_map(|s| &s.calls)
            .filter(|c| c.original_id.is_some())
            .count();
        assert!(minted > 0, "seed {seed}: no duplicate id was re-minted");
        let calls: Vec<&CallStats> = out.stats.iter().flat_map(|s| &s.calls).collect();
        assert!(
            calls
                .iter()
                .any(|c| c.original_id.as_ref().is_some_and(|id| id.len() > 40)),
            "seed {seed}: no id over 40 characters"
        );
        for kind in [FixKind::EmptyResultFilled, FixKind::FunctionNameSanitized] {
            assert!(
                calls.iter().any(|c| c.fixes.iter().any(|f| f.kind == kind)),
                "seed {seed}: no {kind:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_name_providers_refuse_is_sanitized_and_an_empty_result_filled() {
    let mut tools = Registry::new();
    tools
        .add(tool_fn(
            "noop",
            "Returns nothing.",
            json!({"type": "object"}),
            |_, _| async move { Ok::<_, ToolError>("") },
        ))
        .unwrap();
    let node = ToolNode::builder(tools).build();
    let messages = vec![
        user("go"),
        Message::Assistant(calls(vec![
            ToolCall::new("c1", "multi_tool_use.parallel", "{}"),
            ToolCall::new("c2", "noop", "{}"),
        ])),
    ];
    let out = node.invoke(&messages).await.unwrap();
    let sent = out.assistant.tool_calls.clone().unwrap();
    assert_eq!(sent[0].name, "multi_tool_use_parallel");
    assert_eq!(out.results[1].content.text(), history::EMPTY_RESULT);
    let mut h = messages;
    out.apply_to(&mut h);
    let strict: Vec<_> = history::check(&h)
        .into_iter()
        .filter(|v| Strictness::OpenAi.refuses(v.kind))
        .collect();
    assert!(strict.is_empty(), "{strict:#?}");
}

#[tokio::test]
async fn a_failed_run_keeps_the_run_so_far() {
    let start = vec![system("be brief"), user("sum twice")];
    let first = calls(vec![ToolCall::new("c1", "add", r#"{"a": 1, "b": 2}"#)]);

    // The model fails on turn 2 (its script is exhausted).
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new().reply(first.clone());
    let err = run(
        &model,
        &node(Arc::clone(&runs)),
        start.clone(),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err.cause, RunFailure::Model(e) if e.status == Some(500)),
        "{err}"
    );
    let out = &err.output;
    assert_eq!((out.turns, out.tool_calls, out.stats.len()), (1, 1, 1));
    assert_eq!(out.messages.len(), start.len() + 2);
    assert!(matches!(&out.messages[3], Message::Tool(t) if t.content.text() == "3"));
    assert_eq!(history::check(&out.messages), []);
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // A tool failure the node propagates on turn 2: the failed turn is not kept.
    let mut tools = registry(Arc::clone(&runs));
    tools
        .add(tool_fn(
            "fail",
            "Fails.",
            json!({"type": "object"}),
            |_, _| async { Err::<String, _>(ToolError::failed("boom")) },
        ))
        .unwrap();
    let node = ToolNode::builder(tools)
        .tool_errors(ToolErrorPolicy::Propagate)
        .build();
    let model = ScriptedModel::new()
        .reply(first)
        .reply(calls(vec![ToolCall::new("c2", "fail", "{}")]))
        .reply(answer("never asked"));
    let err = run(&model, &node, start.clone(), &Limits::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err.cause, RunFailure::Node(NodeError::Tool { call_id, .. }) if call_id == "c2"),
        "{err}"
    );
    let out = &err.output;
    assert_eq!((out.turns, out.tool_calls, out.stats.len()), (1, 1, 1));
    assert_eq!(out.messages.len(), start.len() + 2, "{:#?}", out.messages);
    assert!(
        !out.messages
            .iter()
            .any(|m| m.tool_calls().iter().any(|c| c.id.as_deref() == Some("c2")))
    );
    assert_eq!(history::check(&out.messages), []);
}

#[tokio::test]
async fn max_time_holds_while_a_tool_runs() {
    let mut tools = Registry::new();
    tools
        .add(tool_fn(
            "sleepy",
            "Sleeps.",
            json!({"type": "object"}),
            |_, _| async {
                // Far past max_time: the outcome tells whether the limit held.
                tokio::time::sleep(Duration::from_secs(120)).await;
                Ok::<_, ToolError>("rested")
            },
        ))
        .unwrap();
    let node = ToolNode::builder(tools).build();
    let model = ScriptedModel::new()
        .reply(calls(vec![ToolCall::new("c1", "sleepy", "{}")]))
        .otherwise(|_: &[Message]| answer("done"));
    let limits = Limits {
        max_time: Some(Duration::from_millis(100)),
        ..Limits::default()
    };
    let out = run(&model, &node, vec![user("sleep")], &limits)
        .await
        .unwrap();
    assert_eq!(out.stop, StopReason::MaxTime);
    assert_eq!(out.turns, 1);
    let Some(Message::Tool(t)) = out.messages.last() else {
        panic!("{:#?}", out.messages)
    };
    assert_eq!(t.call_id, "c1");
    assert!(
        t.content.text().contains("did not finish"),
        "{}",
        t.content.text()
    );
    assert!(out.stats[0].calls[0].tool_error);
    assert_eq!(history::check(&out.messages), []);
}

#[tokio::test]
async fn max_tool_calls_holds_inside_a_turn() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = node(Arc::clone(&runs));
    let five = (0..5)
        .map(|i| ToolCall::new(format!("c{i}"), "add", r#"{"a": 1, "b": 2}"#))
        .collect();
    let model = ScriptedModel::new()
        .reply(calls(five))
        .otherwise(|_: &[Message]| answer("done"));
    let limits = Limits {
        max_tool_calls: 2,
        ..Limits::default()
    };
    let out = run(&model, &node, vec![user("add five times")], &limits)
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        (out.stop, out.tool_calls, out.turns),
        (StopReason::MaxToolCalls, 2, 1)
    );
    let outcomes: Vec<CallOutcome> = out.stats[0].calls.iter().map(|c| c.outcome).collect();
    use CallOutcome::{Executed as X, Flooded as F};
    assert_eq!(outcomes, [X, X, F, F, F]);
    let results: Vec<String> = out
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool(t) => Some(t.content.text()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 5);
    assert_eq!(results[..2], ["3", "3"]);
    for r in &results[2..] {
        assert!(r.contains("budget"), "{r}");
    }
    assert_eq!(history::check(&out.messages), []);
}
