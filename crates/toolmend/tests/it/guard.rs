//! The rule guard in the tool node: scripted agent loops (the same call again and again,
//! a poll whose answer moves on), windows, budgets and their exit behaviours.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use serde_json::{Value, json};
use toolmend::{
    conversation::{AssistantMessage, Content, Message, TextMessage, ToolCall},
    guard::{Budget, ExitBehavior, FLOOD_PREFIX, GuardConfig, Ladder, RuleGuard, Window},
    node::{CallOutcome, InvokeOptions, NodeError, Registry, ToolError, ToolNode, tool_fn},
};

/// `status(job)`: counts its runs; answers `answer(run)`.
fn registry(runs: &Arc<AtomicUsize>, answer: fn(usize) -> String) -> Registry {
    let runs = Arc::clone(runs);
    let mut reg = Registry::new();
    reg.add(tool_fn(
        "status",
        "A job's status.",
        json!({"type": "object", "properties": {"job": {"type": "integer"}}, "required": ["job"]}),
        move |_args: Value, _| {
            let n = runs.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, ToolError>(answer(n)) }
        },
    ))
    .unwrap();
    reg
}

fn assistant(id: &str, args: &str) -> Message {
    Message::Assistant(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![ToolCall::new(id, "status", args)]),
        ..Default::default()
    })
}

fn user() -> Message {
    Message::User(TextMessage {
        content: Content::Text("is the job done?".into()),
        name: None,
        extra: Default::default(),
    })
}

/// A scripted agent: `turns` times the same call (the model writes it differently each
/// time: key order, a number as text), each answered by the node and appended.
async fn agent(node: &ToolNode, turns: usize, opts: &InvokeOptions) -> (Vec<CallOutcome>, bool) {
    let mut history = vec![user()];
    let mut outcomes = Vec::new();
    for t in 0..turns {
        let args = if t % 2 == 0 {
            r#"{"job": 7}"#
        } else {
            r#"{"job": "7"}"#
        };
        history.push(assistant(&format!("c{t}"), args));
        let out = node.invoke_with(&history, opts).await.unwrap();
        outcomes.push(out.results[0].outcome);
        let stopped = out.stats.stopped.is_some();
        out.apply_to(&mut history);
        if stopped {
            return (outcomes, true);
        }
    }
    (outcomes, false)
}

fn ladder_node(runs: &Arc<AtomicUsize>, answer: fn(usize) -> String) -> ToolNode {
    let guard = RuleGuard::new(GuardConfig {
        repeat: Some(Ladder::default()),
        ..GuardConfig::default()
    })
    .unwrap();
    ToolNode::builder(registry(runs, answer))
        .guard(guard)
        .build()
}

#[tokio::test]
async fn an_agent_repeating_one_call_is_blocked_then_stopped_at_the_ladders_steps() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = ladder_node(&runs, |_| "pending".into());
    let (outcomes, stopped) = agent(&node, 20, &InvokeOptions::default()).await;
    assert!(stopped, "the loop was not stopped: {outcomes:?}");
    assert_eq!(outcomes.len(), 6, "stopped at the sixth identical call");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the tool ran twice, then was refused"
    );
    assert!(outcomes[2..].iter().all(|o| *o == CallOutcome::Flooded));
}

#[tokio::test]
async fn an_agent_polling_a_job_that_moves_on_is_never_stopped() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = ladder_node(&runs, |n| format!("{}% done", n * 5));
    let (outcomes, stopped) = agent(&node, 20, &InvokeOptions::default()).await;
    assert!(!stopped);
    assert_eq!(runs.load(Ordering::SeqCst), 20);
    assert!(outcomes.iter().all(|o| *o == CallOutcome::Executed));
}

#[tokio::test]
async fn a_window_refuses_with_the_flood_message_and_frees_nothing_early() {
    let runs = Arc::new(AtomicUsize::new(0));
    let guard = RuleGuard::new(GuardConfig {
        session: Some(Window::new(3, 60.0)),
        ..GuardConfig::default()
    })
    .unwrap();
    let node = ToolNode::builder(registry(&runs, |n| format!("{n}")))
        .guard(guard)
        .build();
    let opts = InvokeOptions {
        session: Some("thread-1".into()),
        ..InvokeOptions::default()
    };
    let (outcomes, _) = agent(&node, 5, &opts).await;
    assert_eq!(
        outcomes,
        [
            CallOutcome::Executed,
            CallOutcome::Executed,
            CallOutcome::Executed,
            CallOutcome::Flooded,
            CallOutcome::Flooded
        ]
    );
    let history = vec![user(), assistant("x", r#"{"job": 1}"#)];
    let out = node.invoke_with(&history, &opts).await.unwrap();
    let text = out.results[0].content.text();
    assert!(text.starts_with(FLOOD_PREFIX), "{text}");
    assert!(
        text.contains("rule session_window") && text.contains("Retry after"),
        "{text}"
    );
    assert_eq!(out.stats.calls[0].guard[0].limit, 3);
}

#[tokio::test]
async fn a_thread_budget_with_exit_behavior_error_raises() {
    let runs = Arc::new(AtomicUsize::new(0));
    let guard = RuleGuard::new(GuardConfig {
        limits: Some(Budget {
            thread_limit: Some(2),
            exit_behavior: ExitBehavior::Error,
            ..Budget::default()
        }),
        ..GuardConfig::default()
    })
    .unwrap();
    let node = ToolNode::builder(registry(&runs, |n| format!("{n}")))
        .guard(guard)
        .build();
    let opts = InvokeOptions {
        session: Some("t".into()),
        ..InvokeOptions::default()
    };
    for i in 0..2 {
        let h = vec![user(), assistant(&format!("a{i}"), r#"{"job": 1}"#)];
        node.invoke_with(&h, &opts).await.unwrap();
    }
    let h = vec![user(), assistant("a3", r#"{"job": 1}"#)];
    let err = node.invoke_with(&h, &opts).await.unwrap_err();
    assert!(matches!(err, NodeError::LimitExceeded { .. }), "{err}");
    assert!(err.to_string().contains("rule thread_limit"), "{err}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_tool_declares_its_own_limit_and_the_configuration_wins_where_it_speaks() {
    use toolmend::{guard::ToolRules, node::ToolOptions};
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let mut reg = Registry::new();
    reg.add_with(
        tool_fn(
            "send_email",
            "Send an e-mail.",
            json!({"type": "object", "properties": {"to": {"type": "string"}}}),
            move |_: Value, _| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, ToolError>("sent") }
            },
        ),
        ToolOptions::default().guard(ToolRules {
            session: Some(Window::new(2, 60.0)),
            ..ToolRules::default()
        }),
    )
    .unwrap();
    let node = ToolNode::builder(reg)
        .rule_guard(RuleGuard::new(GuardConfig::default()).unwrap())
        .unwrap()
        .build();
    let opts = InvokeOptions {
        session: Some("t".into()),
        ..InvokeOptions::default()
    };
    let mut outcomes = Vec::new();
    for i in 0..3 {
        let h = vec![
            user(),
            Message::Assistant(AssistantMessage {
                content: Some(None),
                tool_calls: Some(vec![ToolCall::new(
                    format!("e{i}"),
                    "send_email",
                    format!(r#"{{"to": "a{i}@x.org"}}"#),
                )]),
                ..Default::default()
            }),
        ];
        outcomes.push(node.invoke_with(&h, &opts).await.unwrap().results[0].outcome);
    }
    assert_eq!(
        outcomes,
        [
            CallOutcome::Executed,
            CallOutcome::Executed,
            CallOutcome::Flooded
        ]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Ends the run at the call named `status` with job 1; allows the others.
struct EndsAtJobOne;

impl toolmend::guard::Guard for EndsAtJobOne {
    fn check<'a>(
        &'a self,
        _ctx: toolmend::guard::GuardContext<'a>,
        calls: &'a [toolmend::guard::GuardRequest<'a>],
    ) -> toolmend::future::BoxFuture<'a, Vec<toolmend::guard::Verdict>> {
        Box::pin(async move {
            calls
                .iter()
                .map(|c| {
                    if c.arguments["job"] == 1 {
                        toolmend::guard::Verdict {
                            action: toolmend::guard::Action::End,
                            reason: Some("stop: the job loops".into()),
                            ..Default::default()
                        }
                    } else {
                        toolmend::guard::Verdict::allow()
                    }
                })
                .collect()
        })
    }
}

#[tokio::test]
async fn a_rule_that_ends_the_run_answers_every_call_of_the_message_and_runs_none() {
    let runs = Arc::new(AtomicUsize::new(0));
    let node = ToolNode::builder(registry(&runs, |n| format!("{n}")))
        .guard(EndsAtJobOne)
        .build();
    let message = Message::Assistant(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![
            ToolCall::new("a", "status", r#"{"job": 2}"#),
            ToolCall::new("b", "status", r#"{"job": 1}"#),
            ToolCall::new("c", "status", r#"{"job": 3}"#),
        ]),
        ..Default::default()
    });
    let out = node.invoke(&[user(), message]).await.unwrap();
    assert_eq!(out.stats.stopped.as_deref(), Some("stop: the job loops"));
    assert_eq!(runs.load(Ordering::SeqCst), 0, "no call of the message ran");
    assert_eq!(out.results.len(), 3, "every call answered");
    for r in &out.results {
        assert_eq!(r.outcome, CallOutcome::Flooded, "{}", r.call_id);
        assert_eq!(r.content.text(), "stop: the job loops");
    }
}
