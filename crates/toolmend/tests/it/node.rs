//! The tool node: one answer per call id, in call order, whatever the model sent.

#![allow(clippy::disallowed_methods)] // tests spawn the node to prove its futures are Send

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc,
    },
    time::Duration,
};

use proptest::prelude::*;
use serde_json::{Value, json};
use toolmend::{
    Error, FixKind, Issue, IssueKind,
    conversation::{AssistantMessage, Content, Message, TextMessage, ToolCall, ToolMessage},
    correct::{CorrectError, Correction, CorrectionRequest, Corrector, Scripted, Usage},
    feedback,
    guard::{Guard, GuardContext, GuardRequest, Verdict},
    history::{self, ViolationKind},
    node::{
        BoxFuture, CallContext, CallOutcome, CallSource, CallStats, InvokeOptions, NodeError,
        NodeOutput, NodeStats, OnUnresolved, Registry, Resolution, ResultStatus, StatsCollector,
        TOOL_ERROR_TEMPLATE, Tool, ToolError, ToolErrorPolicy, ToolNode, ToolOptions, ToolOutput,
        ToolResult, tool_fn, typed_tool, typed_tool_with_context,
    },
    schema::{Phase, ValidationContext},
};

// ---- fixtures ----

fn weather_schema() -> Value {
    json!({"type": "object",
           "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
           "required": ["city"], "additionalProperties": false})
}

/// `get_weather`, counting its runs.
fn weather(runs: &Arc<AtomicUsize>) -> impl Tool + 'static {
    let runs = Arc::clone(runs);
    tool_fn(
        "get_weather",
        "Weather for a city.",
        weather_schema(),
        move |args: Value, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok::<_, ToolError>(format!("sunny in {}", args["city"].as_str().unwrap_or("?")))
            }
        },
    )
}

/// `get_time`, counting its runs.
fn time(runs: &Arc<AtomicUsize>) -> impl Tool + 'static {
    let runs = Arc::clone(runs);
    tool_fn(
        "get_time",
        "The time in a zone.",
        json!({"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}),
        move |args: Value, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok::<_, ToolError>(format!("noon in {}", args["zone"].as_str().unwrap_or("?")))
            }
        },
    )
}

/// `get_weather` and `get_time`, both counting into `runs`.
fn tools(runs: &Arc<AtomicUsize>) -> Registry {
    let mut r = Registry::new();
    r.add(weather(runs)).unwrap();
    r.add(time(runs)).unwrap();
    r
}

fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

fn runs(c: &Arc<AtomicUsize>) -> usize {
    c.load(Ordering::SeqCst)
}

fn user(text: &str) -> Message {
    Message::User(TextMessage {
        content: text.into(),
        name: None,
        extra: Default::default(),
    })
}

fn assistant(calls: Vec<ToolCall>) -> Message {
    Message::Assistant(AssistantMessage {
        content: Some(None),
        tool_calls: Some(calls),
        ..Default::default()
    })
}

fn said(text: &str) -> Message {
    Message::Assistant(AssistantMessage {
        content: Some(Some(text.into())),
        ..Default::default()
    })
}

fn answer(id: &str, text: &str) -> Message {
    Message::Tool(ToolMessage {
        content: text.into(),
        call_id: id.to_owned(),
        extra: Default::default(),
    })
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}

fn call_id(id: Option<&str>, name: &str, args: &str) -> ToolCall {
    let mut tc = ToolCall::new("", name, args);
    tc.id = id.map(str::to_owned);
    tc
}

/// The call ids of the sanitized assistant message, in order.
fn sanitized_ids(out: &NodeOutput) -> Vec<String> {
    out.assistant
        .tool_calls
        .iter()
        .flatten()
        .map(|c| c.id.clone().unwrap())
        .collect()
}

fn result_ids(out: &NodeOutput) -> Vec<String> {
    out.results.iter().map(|r| r.call_id.clone()).collect()
}

fn result<'a>(out: &'a NodeOutput, id: &str) -> &'a ToolResult {
    out.results.iter().find(|r| r.call_id == id).unwrap()
}

fn text(out: &NodeOutput, id: &str) -> String {
    result(out, id).content.text()
}

fn sanitized_call<'a>(out: &'a NodeOutput, id: &str) -> &'a ToolCall {
    out.assistant
        .tool_calls
        .iter()
        .flatten()
        .find(|c| c.id.as_deref() == Some(id))
        .unwrap()
}

fn parsed_args(tc: &ToolCall) -> Value {
    serde_json::from_str(&tc.arguments).unwrap()
}

/// What is wrong with the pairing of a history, if anything: every call of every assistant
/// message answered exactly once by the tool messages right after it, no other tool message,
/// every call with an id, and ids unique in the whole history.
fn pairing_problem(history: &[Message]) -> Option<String> {
    let mut seen = HashSet::new();
    let mut i = 0;
    while i < history.len() {
        match &history[i] {
            Message::Assistant(a) => {
                let mut calls = Vec::new();
                for c in a.tool_calls.iter().flatten() {
                    let Some(id) = c.id.clone().filter(|id| !id.trim().is_empty()) else {
                        return Some(format!("message {i}: a call without a usable id"));
                    };
                    if !seen.insert(id.clone()) {
                        return Some(format!("message {i}: id {id:?} used twice"));
                    }
                    calls.push(id);
                }
                if a.tool_calls.as_ref().is_some_and(Vec::is_empty) {
                    return Some(format!("message {i}: an empty tool_calls list"));
                }
                if a.tool_calls.is_none() && !matches!(a.content, Some(Some(_))) {
                    return Some(format!("message {i}: neither content nor tool calls"));
                }
                let mut answers = Vec::new();
                i += 1;
                while let Some(Message::Tool(t)) = history.get(i) {
                    answers.push(t.call_id.clone());
                    i += 1;
                }
                calls.sort();
                answers.sort();
                if calls != answers {
                    return Some(format!("calls {calls:?} answered by {answers:?}"));
                }
            }
            Message::Tool(t) => {
                return Some(format!("message {i}: orphan result {:?}", t.call_id));
            }
            _ => i += 1,
        }
    }
    None
}

#[track_caller]
fn assert_paired(history: &[Message]) {
    if let Some(problem) = pairing_problem(history) {
        panic!("{problem}\n{history:#?}");
    }
}

fn applied(messages: &[Message], out: NodeOutput) -> Vec<Message> {
    let mut history = messages.to_vec();
    out.apply_to(&mut history);
    history
}

// ---- 1. one result per call id, in call order ----

#[tokio::test]
async fn every_call_gets_exactly_one_result_in_call_order() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("weather?"),
        assistant(vec![
            call("c1", "get_weather", r#"{"city": "Paris"}"#),
            call("c2", "get_weather", "{'city': 'Rome',}"),
            call("c3", "get_weather", r#"{"days": 2}"#),
            call("c4", "send_email", r#"{"to": "x"}"#),
            call("c5", "get_time", r#"{"zone": "CET"}"#),
        ]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(result_ids(&out), ["c1", "c2", "c3", "c4", "c5"]);
    assert_eq!(sanitized_ids(&out), result_ids(&out));
    assert_eq!(runs(&n), 3);
    let statuses: Vec<ResultStatus> = out.results.iter().map(|r| r.status).collect();
    use ResultStatus::{Error as E, Success as S};
    assert_eq!(statuses, [S, S, E, E, S]);
    assert_eq!(out.assistant_index, 1);

    let history = applied(&messages, out.clone());
    assert_paired(&history);
    assert_eq!(history.len(), 2 + 5);
    assert_eq!(history[2..], out.messages()[..]);
}

// ---- 2. no usable id ----

#[tokio::test]
async fn calls_without_a_usable_id_get_minted_ids_and_run() {
    // One id rule in every front: a call without a usable id (none, empty, blanks) gets
    // `call_tm_{message}_{call}`, recorded as a fix; it is not dropped.
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("weather?"),
        assistant(vec![
            call_id(None, "get_weather", r#"{"city": "Oslo"}"#),
            call("c1", "get_weather", r#"{"city": "Paris"}"#),
            call_id(Some(""), "get_weather", r#"{"city": "Rome"}"#),
            call_id(Some("  "), "get_time", r#"{"zone": "CET"}"#),
        ]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    let minted = ["call_tm_1_0", "c1", "call_tm_1_2", "call_tm_1_3"];
    assert_eq!(result_ids(&out), minted);
    assert_eq!(sanitized_ids(&out), minted);
    assert_eq!(runs(&n), 4, "every call ran");
    assert_eq!(text(&out, "call_tm_1_2"), "sunny in Rome");
    for c in out
        .stats
        .calls
        .iter()
        .filter(|c| c.call_id.as_deref() != Some("c1"))
    {
        assert_eq!(c.outcome, CallOutcome::Executed);
        assert_eq!(c.fixes[0].kind, FixKind::CallIdMinted, "{c:?}");
    }
    assert!(out.changed);
    assert_paired(&applied(&messages, out));
}

#[tokio::test]
async fn a_minted_id_never_takes_an_id_the_history_uses() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        assistant(vec![call("call_tm_2_0", "get_time", r#"{"zone": "UTC"}"#)]),
        answer("call_tm_2_0", "noon"),
        assistant(vec![call_id(None, "get_weather", r#"{"city": "Oslo"}"#)]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(result_ids(&out), ["call_tm_2_0_2"]);
    assert_paired(&applied(&messages, out));
}

// ---- 3. duplicate ids ----

#[tokio::test]
async fn duplicate_ids_are_dropped_or_minted_deterministically() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("hi"),
        assistant(vec![call("old", "get_time", r#"{"zone": "UTC"}"#)]),
        answer("old", "noon"),
        user("and the weather?"),
        assistant(vec![
            call("c1", "get_weather", r#"{"city": "Paris"}"#),
            call("c1", "get_weather", r#"{"city": "Paris"}"#),
            call("c1", "get_weather", r#"{"city": "Rome"}"#),
            call("old", "get_weather", r#"{"city": "Oslo"}"#),
        ]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(sanitized_ids(&out), ["c1", "c1_2", "old_2"]);
    assert_eq!(result_ids(&out), ["c1", "c1_2", "old_2"]);
    assert_eq!(text(&out, "c1"), "sunny in Paris");
    assert_eq!(text(&out, "c1_2"), "sunny in Rome");
    assert_eq!(text(&out, "old_2"), "sunny in Oslo");
    assert_eq!(runs(&n), 3, "the exact repeat did not run");
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1_2")),
        json!({"city": "Rome"})
    );

    let calls = &out.stats.calls;
    assert_eq!(calls[1].outcome, CallOutcome::Dropped);
    assert_eq!(calls[1].original_id.as_deref(), Some("c1"));
    // The record names the id whose result answers it: the repeated call's.
    assert_eq!(calls[1].call_id.as_deref(), Some("c1"));
    assert!(calls.iter().all(|c| c.call_id.is_some()));
    assert_eq!(calls[2].call_id.as_deref(), Some("c1_2"));
    assert_eq!(calls[2].original_id.as_deref(), Some("c1"));
    assert_eq!(calls[3].call_id.as_deref(), Some("old_2"));
    assert_eq!(calls[3].original_id.as_deref(), Some("old"));
    assert_paired(&applied(&messages, out.clone()));

    let again = node.invoke(&messages).await.unwrap();
    assert_eq!(again.assistant, out.assistant);
    assert_eq!(again.results, out.results);
}

#[tokio::test]
async fn minted_ids_never_take_an_id_of_the_message_or_of_its_results() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    // `c_2` is the id a mint would pick for the second `c`, but the model used it already,
    // and its call was answered.
    let messages = vec![
        assistant(vec![
            call("c", "get_weather", r#"{"city": "Paris"}"#),
            call("c", "get_weather", r#"{"city": "Rome"}"#),
            call("c_2", "get_weather", r#"{"city": "Oslo"}"#),
            call("d", "get_weather", r#"{"city": "Paris"}"#),
            call("d", "get_weather", r#"{"city": "Rome"}"#),
            call("d_2", "get_time", r#"{"zone": "CET"}"#),
        ]),
        answer("c_2", "sunny in Oslo"),
    ];
    let out = node.invoke(&messages).await.unwrap();
    let ids = sanitized_ids(&out);
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    assert_eq!(out.stats.already_answered, ["c_2"]);
    // Calls whose id was unique keep it.
    assert!(ids.contains(&"d_2".to_owned()), "{ids:?}");
    assert_paired(&applied(&messages, out));
}

// ---- 4. already answered ----

#[tokio::test]
async fn calls_already_answered_are_not_run_again() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("weather?"),
        assistant(vec![
            call("c1", "get_weather", r#"{"city": "Paris"}"#),
            call("c2", "get_weather", r#"{"city": "Rome"}"#),
            call("c3", "get_time", r#"{"zone": "CET"}"#),
        ]),
        answer("c1", "sunny in Paris"),
        answer("c3", "noon in CET"),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 1);
    assert_eq!(result_ids(&out), ["c2"]);
    assert_eq!(sanitized_ids(&out), ["c1", "c2", "c3"]);
    assert_eq!(out.stats.already_answered, ["c1", "c3"]);
    let history = applied(&messages, out);
    assert_paired(&history);
    assert_eq!(history.len(), 5);
}

// ---- 5. unknown tool ----

#[tokio::test]
async fn an_unknown_tool_gets_feedback_naming_the_tools() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![assistant(vec![call(
        "c1",
        "send_email",
        r#"{"to": "a@b.c"}"#,
    )])];
    let out = node.invoke(&messages).await.unwrap();
    let r = result(&out, "c1");
    assert_eq!(r.status, ResultStatus::Error);
    assert_eq!(r.outcome, CallOutcome::Feedback);
    assert_eq!(r.tool, "send_email");
    let t = r.content.text();
    assert!(t.contains("send_email"), "{t}");
    assert!(t.contains("get_weather") && t.contains("get_time"), "{t}");
    assert_eq!(runs(&n), 0);
    assert_eq!(out.stats.calls[0].issues[0].kind, IssueKind::UnknownTool);
}

// ---- 6. truncated calls ----

#[tokio::test]
async fn a_truncated_call_is_not_run_unless_the_tool_accepts_it() {
    let messages = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"{"city": "Par"#,
    )])];

    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 0);
    let r = result(&out, "c1");
    assert_eq!(r.outcome, CallOutcome::Feedback);
    assert!(r.content.text().contains("again"), "{}", r.content.text());
    assert_eq!(out.stats.calls[0].issues[0].kind, IssueKind::Truncated);
    // Feedback calls stay as the model sent them.
    assert_eq!(sanitized_call(&out, "c1").arguments, r#"{"city": "Par"#);

    let n = counter();
    let mut reg = Registry::new();
    reg.add_with(weather(&n), ToolOptions::default().accept_truncated())
        .unwrap();
    let node = ToolNode::builder(reg).build();
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 1);
    assert_eq!(text(&out, "c1"), "sunny in Par");
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1")),
        json!({"city": "Par"})
    );
    assert!(out.stats.calls[0].fixes.iter().any(|f| f.is_lossy()));
}

// ---- 7. glued calls ----

#[tokio::test]
async fn glued_calls_become_two_answered_calls() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city":"Paris"}{"city":"Rome"}"#),
        call("c2", "get_time", r#"{"zone": "CET"}"#),
    ])];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 3);
    assert_eq!(result_ids(&out), ["c1", "c1_2", "c2"]);
    assert_eq!(sanitized_ids(&out), ["c1", "c1_2", "c2"]);
    assert_eq!(text(&out, "c1"), "sunny in Paris");
    assert_eq!(text(&out, "c1_2"), "sunny in Rome");
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1")),
        json!({"city": "Paris"})
    );
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1_2")),
        json!({"city": "Rome"})
    );
    let glued = &out.stats.calls[1];
    assert_eq!(glued.source, CallSource::Glued);
    assert_eq!(glued.outcome, CallOutcome::Executed);
    assert_eq!(glued.call_id.as_deref(), Some("c1_2"));
    assert!(
        glued
            .fixes
            .iter()
            .any(|f| f.kind == FixKind::ConcatenatedCallsSplit)
    );
    assert_eq!(out.stats.calls[0].source, CallSource::ToolCalls);
    assert_paired(&applied(&messages, out));
}

// ---- 8. the sanitized assistant message ----

#[tokio::test]
async fn the_sanitized_message_is_valid_json_without_thinking() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let broken = call("c2", "get_weather", r#"{"days": "x",}"#);
    let unknown = call("c3", "send_email", "{'to': 'a'}");
    let messages = vec![Message::Assistant(AssistantMessage {
        content: Some(Some("<think>which city?</think>Checking.".into())),
        tool_calls: Some(vec![
            call("c1", "get_weather", "{'city': 'Paris', 'days': '2',}"),
            broken.clone(),
            unknown.clone(),
        ]),
        ..Default::default()
    })];
    let out = node.invoke(&messages).await.unwrap();
    assert!(out.changed);
    assert_eq!(out.assistant.content, Some(Some("Checking.".into())));
    let c1 = sanitized_call(&out, "c1");
    assert_eq!(parsed_args(c1), json!({"city": "Paris", "days": 2}));
    assert_eq!(sanitized_call(&out, "c2"), &broken);
    assert_eq!(sanitized_call(&out, "c3"), &unknown);
}

#[tokio::test]
async fn an_already_valid_message_is_unchanged() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    // As many servers send it: `json.dumps` spacing, a float, unicode.
    let messages = vec![
        user("weather?"),
        Message::Assistant(AssistantMessage {
            content: Some(Some("Let me look.".into())),
            tool_calls: Some(vec![
                call("c1", "get_weather", r#"{"city": "Paris", "days": 2}"#),
                call("c2", "get_time", "{\"zone\": \"Europe/Z\\u00fcrich\"}"),
            ]),
            ..Default::default()
        }),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 2);
    assert!(!out.changed, "{:#?}", out.assistant);
    let Message::Assistant(original) = &messages[1] else {
        unreachable!()
    };
    assert_eq!(&out.assistant, original);
}

// ---- 9. calls written into the text ----

#[tokio::test]
async fn calls_in_the_text_are_extracted_run_and_given_ids() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("weather?"),
        said(
            r#"Let me check.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#,
        ),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 1);
    assert_eq!(out.results.len(), 1);
    let id = out.results[0].call_id.clone();
    assert!(!id.trim().is_empty());
    assert_eq!(sanitized_ids(&out), std::slice::from_ref(&id));
    assert_eq!(text(&out, &id), "sunny in Paris");
    assert_eq!(out.assistant.content, Some(Some("Let me check.".into())));
    let tc = sanitized_call(&out, &id);
    assert_eq!(tc.name, "get_weather");
    assert_eq!(parsed_args(tc), json!({"city": "Paris"}));
    assert_eq!(out.stats.calls[0].source, CallSource::Text);
    assert!(out.changed);
    assert_paired(&applied(&messages, out));
}

#[tokio::test]
async fn i11_a_call_cut_off_in_the_text_keeps_its_lossy_fix_and_is_not_run() {
    // Reading the call out of the text closed the cut string; that fix used to be dropped,
    // so the call ran on `{"city": "Pa"}` as if whole.
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("weather?"),
        said(r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Pa"#),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 0);
    assert_eq!(out.results.len(), 1);
    let id = out.results[0].call_id.clone();
    assert!(text(&out, &id).contains("cut off"), "{}", text(&out, &id));
    let kinds: Vec<&str> = out.stats.calls[0]
        .fixes
        .iter()
        .map(|f| f.kind.id())
        .collect();
    assert!(kinds.contains(&"truncated_string"), "{kinds:?}");
    assert!(kinds.contains(&"tool_call_tag_unwrapped"), "{kinds:?}");
    assert_paired(&applied(&messages, out));
}

#[tokio::test]
async fn bare_json_calls_in_the_text_are_extracted() {
    // Llama-style: the call as a bare or fenced JSON object with name and arguments.
    for text_call in [
        r#"{"name": "get_weather", "parameters": {"city": "Oslo"}}"#,
        "```json\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n```",
    ] {
        let n = counter();
        let node = ToolNode::builder(tools(&n)).build();
        let messages = vec![user("weather?"), said(text_call)];
        let out = node.invoke(&messages).await.unwrap();
        assert_eq!(runs(&n), 1, "{text_call}");
        assert_eq!(text(&out, &out.results[0].call_id), "sunny in Oslo");
        assert_paired(&applied(&messages, out));
    }
}

#[tokio::test]
async fn plain_answers_are_not_turned_into_calls() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    for answer_text in [
        r#"Here is the JSON you asked for: {"city": "Paris", "days": 2}"#,
        r#"<tool_call>{"name": "launch_rockets", "arguments": {"count": 3}}</tool_call>"#,
        r#"{"name": "launch_rockets", "arguments": {"count": 3}}"#,
        r#"{"name": "get_weather", "arguments": {"city": "Paris"}, "note": "extra key: data"}"#,
        "It is sunny in Paris.",
    ] {
        let messages = vec![user("hi"), said(answer_text)];
        let out = node.invoke(&messages).await.unwrap();
        assert!(out.results.is_empty(), "{answer_text}");
        assert!(!out.changed, "{answer_text}");
        assert_eq!(out.assistant.tool_calls, None);
    }
    assert_eq!(runs(&n), 0);

    // And with text calls off, not even a real one.
    let node = ToolNode::builder(tools(&n)).calls_in_text(false).build();
    let messages = vec![said(
        r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#,
    )];
    let out = node.invoke(&messages).await.unwrap();
    assert!(out.results.is_empty());
    assert_eq!(runs(&n), 0);
}

// ---- 10. raise ----

#[tokio::test]
async fn raise_lists_every_unresolved_call_and_runs_nothing() {
    let n = counter();
    let node = ToolNode::builder(tools(&n))
        .on_unresolved(OnUnresolved::Raise)
        .build();
    let messages = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city": "Paris"}"#),
        call("c2", "get_weather", r#"{"days": 2}"#),
        call("c3", "send_email", "{}"),
        call("c4", "get_time", r#"{"zone": "CET"}"#),
    ])];
    let err = node.invoke(&messages).await.unwrap_err();
    let NodeError::Unresolved(calls) = &err else {
        panic!("{err:?}")
    };
    let ids: Vec<&str> = calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(ids, ["c2", "c3"]);
    assert_eq!(calls[0].issues[0].kind, IssueKind::MissingRequired);
    assert_eq!(calls[0].raw_arguments, r#"{"days": 2}"#);
    assert_eq!(calls[1].tool, "send_email");
    let message = err.to_string();
    assert!(
        message.contains("c2") && message.contains("c3"),
        "{message}"
    );
    assert_eq!(runs(&n), 0, "valid siblings did not run either");

    // Nothing unresolved: everything runs.
    let ok = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"{"city": "Paris"}"#,
    )])];
    assert_eq!(node.invoke(&ok).await.unwrap().results.len(), 1);
}

// ---- 11. hook ----

#[tokio::test]
async fn a_hook_salvages_or_words_unresolved_calls() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = {
        let seen = Arc::clone(&seen);
        OnUnresolved::hook(move |c, history| {
            seen.lock()
                .unwrap()
                .push((c.call_id.clone(), history.to_vec()));
            match c.call_id.as_str() {
                "c1" => Resolution::Salvage(json!({"city": "Oslo"})),
                "c2" => Resolution::Salvage(json!({"days": "x"})),
                "c3" => Resolution::Feedback("ask the user which city".to_owned()),
                _ => Resolution::Default,
            }
        })
    };
    let n = counter();
    let node = ToolNode::builder(tools(&n)).on_unresolved(hook).build();
    let messages = vec![
        user("weather?"),
        assistant(vec![
            call("c1", "get_weather", r#"{"days": 1}"#),
            call("c2", "get_weather", r#"{"days": 2}"#),
            call("c3", "get_weather", r#"{"days": 3}"#),
            call("c4", "get_weather", r#"{"days": 4}"#),
            call("c5", "get_weather", r#"{"city": "Paris"}"#),
        ]),
    ];
    let out = node.invoke(&messages).await.unwrap();

    let salvaged = result(&out, "c1");
    assert_eq!(salvaged.outcome, CallOutcome::Salvaged);
    assert_eq!(salvaged.status, ResultStatus::Success);
    assert_eq!(salvaged.content.text(), "sunny in Oslo");
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1")),
        json!({"city": "Oslo"})
    );
    assert_eq!(runs(&n), 2, "the salvaged call and the valid one");

    let plain = ToolNode::builder(tools(&counter())).build();
    let default = plain.invoke(&messages).await.unwrap();
    for id in ["c2", "c4"] {
        assert_eq!(result(&out, id).outcome, CallOutcome::Feedback);
        assert_eq!(result(&out, id).status, ResultStatus::Error);
        assert_eq!(text(&out, id), text(&default, id), "{id}");
    }
    assert!(
        out.stats.calls[1]
            .note
            .as_deref()
            .unwrap()
            .contains("salvage")
    );
    assert_eq!(text(&out, "c3"), "ask the user which city");
    assert_eq!(result(&out, "c3").status, ResultStatus::Error);

    let seen = seen.lock().unwrap();
    let asked: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        asked,
        ["c1", "c2", "c3", "c4"],
        "the valid call is not asked about"
    );
    assert_eq!(seen[0].1, messages[..1], "the hook sees the conversation");
}

// ---- 12. custom validators ----

#[tokio::test]
async fn custom_validators_see_phase_history_and_state() {
    type Seen = (Phase, String, usize, Option<Value>);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let validator = {
        let seen = Arc::clone(&seen);
        move |args: &Value, ctx: &ValidationContext<'_>| -> Vec<Issue> {
            seen.lock().unwrap().push((
                ctx.phase,
                ctx.tool.to_owned(),
                ctx.messages.len(),
                ctx.state.cloned(),
            ));
            let banned = ctx
                .state
                .and_then(|s| s["banned"].as_str())
                .unwrap_or_default();
            if args["city"] == banned {
                vec![Issue::new(
                    IssueKind::Custom,
                    "/city",
                    format!("{banned} cannot be reached"),
                )]
            } else {
                Vec::new()
            }
        }
    };
    let n = counter();
    let mut reg = Registry::new();
    reg.add_with(weather(&n), ToolOptions::default().validator(validator))
        .unwrap();
    let node = ToolNode::builder(reg).build();
    let messages = vec![
        user("weather?"),
        said("Which cities?"),
        user("Atlantis and Paris"),
        assistant(vec![
            call("c1", "get_weather", r#"{"city": "Atlantis"}"#),
            call("c2", "get_weather", r#"{"city": "Paris"}"#),
        ]),
    ];
    let state = json!({"banned": "Atlantis"});
    let opts = InvokeOptions {
        state: Some(Arc::new(state.clone())),
        ..InvokeOptions::default()
    };
    let out = node.invoke_with(&messages, &opts).await.unwrap();
    assert_eq!(runs(&n), 1);
    let r = result(&out, "c1");
    assert_eq!(r.outcome, CallOutcome::Feedback);
    assert!(
        r.content.text().contains("Atlantis cannot be reached"),
        "{}",
        r.content.text()
    );
    assert_eq!(out.stats.calls[0].issues[0].kind, IssueKind::Custom);
    assert_eq!(text(&out, "c2"), "sunny in Paris");

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for s in seen.iter() {
        assert_eq!(
            s,
            &(
                Phase::Initial,
                "get_weather".to_owned(),
                3,
                Some(state.clone())
            )
        );
    }
}

// ---- 13. corrector ----

fn scripted_node(corrector: &Arc<Scripted>, n: &Arc<AtomicUsize>) -> ToolNode {
    ToolNode::builder(tools(n))
        .corrector(Arc::clone(corrector), 2)
        .build()
}

/// Mend options with merged calls answered by feedback, not split.
fn unsplit() -> toolmend::MendOptions {
    let mut o = toolmend::MendOptions::default();
    o.coercions.split_merged_calls = false;
    o
}

/// A merged call (three cities for one) runs as three calls by default: each its own id,
/// in the sanitized message and in the results, the history paired.
#[tokio::test]
async fn a_merged_call_runs_as_one_call_per_value_by_default() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("weather in Lima, Quito and Bogota"),
        assistant(vec![call(
            "c1",
            "get_weather",
            r#"{"city": ["Lima", "Quito", "Bogota"]}"#,
        )]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 3);
    assert_eq!(result_ids(&out), ["c1", "c1_2", "c1_3"]);
    assert_eq!(sanitized_ids(&out), ["c1", "c1_2", "c1_3"]);
    assert_eq!(text(&out, "c1_3"), "sunny in Bogota");
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1_2")),
        json!({"city": "Quito"})
    );
    for c in &out.stats.calls {
        assert_eq!(c.outcome, CallOutcome::Executed);
        assert!(
            c.fixes.iter().any(|f| f.kind == FixKind::MergedCallSplit),
            "{c:?}"
        );
    }
    assert_paired(&applied(&messages, out));

    // The switch off: one call, answered with feedback that asks for one call per value.
    let n = counter();
    let node = ToolNode::builder(tools(&n)).mend_options(unsplit()).build();
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(runs(&n), 0);
    assert_eq!(result_ids(&out), ["c1"]);
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Feedback);
    let t = text(&out, "c1").to_lowercase();
    assert!(t.contains("one call per value"), "{t}");
}

/// A corrected call that keeps fewer of the values the model sent (three cities merged
/// into one call, "corrected" to one) is never reported clean: the loop asks again with
/// the loss named, and what stays narrowed goes back as feedback, not run.
#[tokio::test]
async fn a_correction_that_drops_values_the_model_sent_is_not_clean() {
    let corrector = Arc::new(
        Scripted::new()
            .answer("get_weather", Ok(Some(json!({"city": "Lima"}))))
            .answer("get_weather", Ok(Some(json!({"city": "Lima"})))),
    );
    let n = counter();
    // Merged calls are split by default: here they are feedback, for the corrector.
    let node = ToolNode::builder(tools(&n))
        .corrector(Arc::clone(&corrector), 2)
        .mend_options(unsplit())
        .build();
    let messages = vec![
        user("weather in Lima, Quito and Bogota"),
        assistant(vec![call(
            "c1",
            "get_weather",
            r#"{"city": ["Lima", "Quito", "Bogota"]}"#,
        )]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    let r = result(&out, "c1");
    assert_eq!(r.outcome, CallOutcome::Feedback, "{:?}", r.content);
    assert_eq!(runs(&n), 0, "a narrowed call never runs");
    let asked = corrector.asked();
    assert_eq!(asked.len(), 2);
    assert!(
        asked[1].issues.contains(&IssueKind::ValuesLost),
        "{:?}",
        asked[1].issues
    );
}

#[tokio::test]
async fn a_corrector_fixes_invalid_calls() {
    let corrector = Arc::new(
        Scripted::new().answer("get_weather", Ok(Some(json!({"city": "Paris", "days": 3})))),
    );
    let collector = Arc::new(StatsCollector::new());
    let n = counter();
    let node = ToolNode::builder(tools(&n))
        .corrector(Arc::clone(&corrector), 2)
        .listener(Arc::clone(&collector))
        .build();
    let messages = vec![
        user("weather for 3 days in Paris"),
        assistant(vec![
            call("c1", "get_weather", r#"{"city": "Paris", "days": "three"}"#),
            call("c2", "get_time", r#"{"zone": "CET"}"#),
        ]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    let r = result(&out, "c1");
    assert_eq!(r.outcome, CallOutcome::Corrected);
    assert_eq!(r.status, ResultStatus::Success);
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1")),
        json!({"city": "Paris", "days": 3})
    );
    assert_eq!(runs(&n), 2);
    let asked = corrector.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].call_id, "c1");
    assert_eq!(asked[0].issues, [IssueKind::WrongType]);
    assert_eq!(asked[0].messages, 1);

    let stats = &out.stats.calls[0];
    assert_eq!(stats.correction_attempts, 1);
    let usage = Usage {
        model: "scripted".to_owned(),
        prompt_tokens: 100,
        completion_tokens: 20,
    };
    assert_eq!(stats.correction_usage, [usage]);
    let total = collector.snapshot();
    assert_eq!(total.correction_attempts, 1);
    assert_eq!(total.correction_tokens["scripted"], (100, 20));
    assert_eq!(total.outcomes[&CallOutcome::Corrected], 1);
}

#[tokio::test]
async fn a_corrector_that_keeps_failing_leaves_the_models_feedback() {
    let bad = || Ok(Some(json!({"days": "x"})));
    let corrector = Arc::new(
        Scripted::new()
            .answer("get_weather", bad())
            .answer("get_weather", bad())
            .answer("get_weather", bad()),
    );
    let n = counter();
    let node = scripted_node(&corrector, &n);
    let sent = call("c1", "get_weather", r#"{"city": "Paris", "days": "three"}"#);
    let messages = vec![assistant(vec![sent.clone()])];
    let out = node.invoke(&messages).await.unwrap();
    let r = result(&out, "c1");
    assert_eq!(r.outcome, CallOutcome::Feedback);
    assert_eq!(r.status, ResultStatus::Error);
    assert_eq!(out.stats.calls[0].correction_attempts, 2, "max retries");
    assert_eq!(corrector.asked().len(), 2);
    assert_eq!(runs(&n), 0);
    assert_eq!(sanitized_call(&out, "c1"), &sent);
    // The feedback is about the call the model sent, not about the corrector's attempts.
    let plain = ToolNode::builder(tools(&counter())).build();
    let without = plain.invoke(&messages).await.unwrap();
    assert_eq!(text(&out, "c1"), text(&without, "c1"));
}

#[tokio::test]
async fn missing_values_are_not_invented_by_the_corrector() {
    let fixed = || Ok(Some(json!({"city": "Paris"})));
    let messages = vec![assistant(vec![call("c1", "get_weather", r#"{"days": 2}"#)])];

    let corrector = Arc::new(Scripted::new().answer("get_weather", fixed()));
    let n = counter();
    let out = scripted_node(&corrector, &n)
        .invoke(&messages)
        .await
        .unwrap();
    assert!(corrector.asked().is_empty());
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Feedback);
    assert_eq!(runs(&n), 0);

    // Opted in (the answer keeps what the call sent: a correction changes only what the
    // issues name).
    let kept = || Ok(Some(json!({"city": "Paris", "days": 2})));
    let corrector = Arc::new(Scripted::new().answer("get_weather", kept()));
    let out = ToolNode::builder(tools(&n))
        .corrector(Arc::clone(&corrector), 2)
        .correct_missing_fields(true)
        .build()
        .invoke(&messages)
        .await
        .unwrap();
    assert_eq!(corrector.asked().len(), 1);
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Corrected);

    // An unknown key that could be the missing one: a misnaming, worth a correction.
    let corrector = Arc::new(Scripted::new().answer("get_weather", fixed()));
    let misnamed = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"{"xyz": "Paris"}"#,
    )])];
    let out = scripted_node(&corrector, &n)
        .invoke(&misnamed)
        .await
        .unwrap();
    let asked = corrector.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].issues.contains(&IssueKind::UnknownKey),
        "{asked:?}"
    );
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Corrected);
}

#[tokio::test]
async fn a_failing_corrector_leaves_the_call_to_feedback_and_siblings_alone() {
    let corrector = Arc::new(Scripted::new().answer(
        "get_weather",
        Err(CorrectError {
            message: "rate limited".to_owned(),
            transient: true,
        }),
    ));
    let n = counter();
    let node = scripted_node(&corrector, &n);
    let messages = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city": "Paris", "days": "three"}"#),
        call("c2", "get_time", r#"{"zone": "CET"}"#),
        call("c3", "get_weather", r#"{"city": "Rome"}"#),
    ])];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Feedback);
    assert!(
        out.stats.calls[0]
            .note
            .as_deref()
            .unwrap()
            .contains("rate limited")
    );
    assert_eq!(text(&out, "c2"), "noon in CET");
    assert_eq!(text(&out, "c3"), "sunny in Rome");
    assert_eq!(runs(&n), 2);
}

// ---- 14. guard ----

/// Denies calls for one city.
struct DenyCity(&'static str);

impl Guard for DenyCity {
    fn check<'a>(
        &'a self,
        ctx: GuardContext<'a>,
        calls: &'a [GuardRequest<'a>],
    ) -> BoxFuture<'a, Vec<Verdict>> {
        let verdicts = calls
            .iter()
            .map(|c| {
                if c.arguments["city"] == self.0 {
                    Verdict::deny(format!(
                        "too many calls for {} in session {:?}",
                        self.0, ctx.session
                    ))
                } else {
                    Verdict::allow()
                }
            })
            .collect();
        Box::pin(std::future::ready(verdicts))
    }
}

#[tokio::test]
async fn a_guard_refuses_calls_with_its_reason() {
    let n = counter();
    let node = ToolNode::builder(tools(&n))
        .guard(Arc::new(DenyCity("Rome")))
        .build();
    let messages = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city": "Paris"}"#),
        call("c2", "get_weather", r#"{"city": "Rome"}"#),
        call("c3", "get_time", r#"{"zone": "CET"}"#),
    ])];
    let opts = InvokeOptions {
        session: Some("s1".to_owned()),
        ..InvokeOptions::default()
    };
    let out = node.invoke_with(&messages, &opts).await.unwrap();
    let r = result(&out, "c2");
    assert_eq!(r.outcome, CallOutcome::Flooded);
    assert_eq!(r.status, ResultStatus::Error);
    assert_eq!(
        r.content.text(),
        "too many calls for Rome in session Some(\"s1\")"
    );
    assert_eq!(runs(&n), 2);
    assert_eq!(text(&out, "c1"), "sunny in Paris");
    assert_eq!(text(&out, "c3"), "noon in CET");
    assert_eq!(sanitized_ids(&out), ["c1", "c2", "c3"]);
    assert_eq!(out.stats.count(CallOutcome::Flooded), 1);
}

// ---- 15. tool errors ----

/// `fine`, `fail` (an error), `explode` (panics while building its future), `blowup`
/// (panics inside its future), `slow` (sleeps two minutes; 10 ms timeout), `lazy` (sleeps
/// two minutes; no timeout of its own): far past any timeout, however loaded the machine.
fn failing_tools() -> Registry {
    let any = || json!({"type": "object"});
    let mut r = Registry::new();
    r.add(tool_fn("fine", "", any(), |_, _| async {
        Ok::<_, ToolError>("fine")
    }))
    .unwrap();
    r.add(tool_fn("fail", "", any(), |_, _| async {
        Err::<String, _>(ToolError::failed("boom"))
    }))
    .unwrap();
    r.add(tool_fn(
        "explode",
        "",
        any(),
        |_, _| -> std::future::Ready<Result<String, ToolError>> { panic!("kaboom") },
    ))
    .unwrap();
    r.add(tool_fn("blowup", "", any(), |args: Value, _| async move {
        assert!(args.is_null(), "blown up");
        Ok::<_, ToolError>("unreachable")
    }))
    .unwrap();
    r.add_with(
        tool_fn("slow", "", any(), |_, _| async {
            tokio::time::sleep(Duration::from_secs(120)).await;
            Ok::<_, ToolError>("late")
        }),
        ToolOptions::default().timeout(Duration::from_millis(10)),
    )
    .unwrap();
    r.add(tool_fn("lazy", "", any(), |_, _| async {
        tokio::time::sleep(Duration::from_secs(120)).await;
        Ok::<_, ToolError>("late")
    }))
    .unwrap();
    r
}

fn calls_to(names: &[&str]) -> Vec<Message> {
    let calls = names
        .iter()
        .enumerate()
        .map(|(i, n)| call(&format!("c{i}"), n, "{}"))
        .collect();
    vec![assistant(calls)]
}

#[tokio::test]
async fn each_tool_error_is_worded_for_whose_fault_it_is() {
    use toolmend::node::{
        Fault, TOOL_FAILED_TEMPLATE, TOOL_TIMEOUT_TEMPLATE, TOOL_UNAVAILABLE_TEMPLATE,
        tool_error_template,
    };
    let mut r = failing_tools();
    r.add(tool_fn(
        "down",
        "",
        json!({"type": "object"}),
        |_, _| async {
            Err::<String, _>(ToolError::service(
                Fault::Unavailable,
                "down: connection refused",
            ))
        },
    ))
    .unwrap();
    let node = ToolNode::builder(r).build();
    let out = node
        .invoke(&calls_to(&["fail", "down", "slow", "explode", "fine"]))
        .await
        .unwrap();
    let fault = |id: &str| (result(&out, id).fault, stats_of(&out, id).fault);
    // The tool said the call is wrong: LangGraph's words.
    assert_eq!(
        text(&out, "c0"),
        TOOL_ERROR_TEMPLATE.replace("{error}", "boom")
    );
    assert_eq!(fault("c0"), (Some(Fault::Call), Some(Fault::Call)));
    // Not reached: it did not run, and the call is not blamed.
    assert_eq!(
        text(&out, "c1"),
        TOOL_UNAVAILABLE_TEMPLATE.replace("{error}", "down: connection refused")
    );
    assert_eq!(
        fault("c1"),
        (Some(Fault::Unavailable), Some(Fault::Unavailable))
    );
    // A timeout and a panic: it may have run.
    assert_eq!(
        text(&out, "c2"),
        TOOL_TIMEOUT_TEMPLATE.replace("{error}", "the tool did not finish within 10 ms")
    );
    assert_eq!(fault("c2"), (Some(Fault::Timeout), Some(Fault::Timeout)));
    assert!(text(&out, "c3").starts_with("Error: the tool panicked"));
    assert!(text(&out, "c3").ends_with(&TOOL_FAILED_TEMPLATE["Error: {error}".len()..]));
    assert_eq!(fault("c3"), (Some(Fault::Failed), Some(Fault::Failed)));
    assert_eq!(fault("c4"), (None, None));
    for f in [Fault::Unavailable, Fault::Timeout, Fault::Failed] {
        assert!(!tool_error_template(f).contains("fix your mistakes"), "{f}");
    }
    let stats = serde_json::to_value(&out.stats).unwrap();
    assert_eq!(stats["calls"][1]["fault"], "unavailable");
    assert!(stats["calls"][4].get("fault").is_none());
}

#[tokio::test]
async fn tool_errors_follow_the_policy() {
    let messages = calls_to(&["fine", "fail"]);
    let boom = TOOL_ERROR_TEMPLATE.replace("{error}", "boom");

    let out = ToolNode::builder(failing_tools())
        .build()
        .invoke(&messages)
        .await
        .unwrap();
    assert_eq!(text(&out, "c0"), "fine");
    assert_eq!(text(&out, "c1"), boom);
    assert_eq!(result(&out, "c1").status, ResultStatus::Error);
    assert!(out.stats.calls[1].tool_error);
    assert!(!out.stats.calls[0].tool_error);

    let err = ToolNode::builder(failing_tools())
        .tool_errors(ToolErrorPolicy::Propagate)
        .build()
        .invoke(&messages)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        NodeError::Tool {
            call_id: "c1".to_owned(),
            tool: "fail".to_owned(),
            error: ToolError::failed("boom"),
        }
    );

    let caught = ToolErrorPolicy::only(|e| matches!(e, ToolError::Failed(m) if m == "boom"));
    let out = ToolNode::builder(failing_tools())
        .tool_errors(caught)
        .build()
        .invoke(&messages)
        .await
        .unwrap();
    assert_eq!(text(&out, "c1"), boom);
    let err = ToolNode::builder(failing_tools())
        .tool_errors(ToolErrorPolicy::only(|e| {
            matches!(e, ToolError::Timeout(_))
        }))
        .build()
        .invoke(&messages)
        .await
        .unwrap_err();
    assert!(matches!(err, NodeError::Tool { ref call_id, .. } if call_id == "c1"));

    let out = ToolNode::builder(failing_tools())
        .tool_errors(ToolErrorPolicy::format(|e| Some(format!("custom: {e}"))))
        .build()
        .invoke(&messages)
        .await
        .unwrap();
    assert_eq!(text(&out, "c1"), "custom: boom");
    let err = ToolNode::builder(failing_tools())
        .tool_errors(ToolErrorPolicy::format(|_| None))
        .build()
        .invoke(&messages)
        .await
        .unwrap_err();
    assert!(matches!(err, NodeError::Tool { .. }));

    let out = ToolNode::builder(failing_tools())
        .tool_errors(ToolErrorPolicy::Message("that failed".to_owned()))
        .build()
        .invoke(&messages)
        .await
        .unwrap();
    assert_eq!(text(&out, "c1"), "that failed");
    assert_eq!(text(&out, "c0"), "fine");
}

#[tokio::test]
async fn a_panic_answers_its_own_call_under_every_policy() {
    let policies = [
        ToolErrorPolicy::All,
        ToolErrorPolicy::Propagate,
        ToolErrorPolicy::Message("that failed".to_owned()),
        ToolErrorPolicy::only(|_| false),
        ToolErrorPolicy::format(|_| None),
    ];
    let messages = calls_to(&["explode", "fine", "blowup"]);
    for policy in policies {
        let name = format!("{policy:?}");
        let out = ToolNode::builder(failing_tools())
            .tool_errors(policy)
            .build()
            .invoke(&messages)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(result_ids(&out), ["c0", "c1", "c2"], "{name}");
        for id in ["c0", "c2"] {
            let r = result(&out, id);
            assert_eq!(r.status, ResultStatus::Error, "{name}");
            assert!(r.content.text().contains("panicked"), "{name}: {r:?}");
        }
        assert!(text(&out, "c0").contains("kaboom"));
        assert!(text(&out, "c2").contains("blown up"));
        assert_eq!(text(&out, "c1"), "fine", "{name}");
        assert_eq!(result(&out, "c1").status, ResultStatus::Success);
    }
}

#[tokio::test]
async fn tools_that_do_not_finish_in_time_get_an_error_result() {
    // The outcome, not the time: without the timeouts the node would wait two minutes and
    // the slow tool would answer "late".
    let out = ToolNode::builder(failing_tools())
        .build()
        .invoke(&calls_to(&["slow", "fine"]))
        .await
        .unwrap();
    let t = text(&out, "c0");
    assert!(t.contains("did not finish"), "{t}");
    assert_eq!(result(&out, "c0").status, ResultStatus::Error);
    assert!(out.stats.calls[0].tool_error);
    assert_eq!(text(&out, "c1"), "fine");

    // The node's default covers tools without their own.
    let out = ToolNode::builder(failing_tools())
        .default_timeout(Duration::from_millis(10))
        .build()
        .invoke(&calls_to(&["lazy", "fine"]))
        .await
        .unwrap();
    let t = text(&out, "c0");
    assert!(t.contains("did not finish"), "{t}");
    assert_eq!(text(&out, "c1"), "fine");
}

// ---- 16. concurrency ----

#[tokio::test]
async fn at_most_max_concurrency_tools_run_at_once() {
    let running = counter();
    let peak = counter();
    let probe = {
        let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
        tool_fn("probe", "", json!({"type": "object"}), move |_, _| {
            let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, ToolError>("done")
            }
        })
    };
    let mut reg = Registry::new();
    reg.add(probe).unwrap();
    let node = ToolNode::builder(reg).max_concurrency(2).build();
    let out = node.invoke(&calls_to(&["probe"; 6])).await.unwrap();
    assert_eq!(out.results.len(), 6);
    let peak = runs(&peak);
    assert!(peak <= 2 && peak > 1, "peak {peak}");
}

#[tokio::test]
async fn tools_run_concurrently() {
    // Each call waits until all eight are running: one at a time, the first would wait
    // forever.
    let all_in = Arc::new(tokio::sync::Barrier::new(8));
    let mut reg = Registry::new();
    reg.add(tool_fn(
        "nap",
        "",
        json!({"type": "object"}),
        move |_, _| {
            let all_in = Arc::clone(&all_in);
            async move {
                all_in.wait().await;
                Ok::<_, ToolError>("rested")
            }
        },
    ))
    .unwrap();
    let node = ToolNode::builder(reg).max_concurrency(8).build();
    let out = tokio::time::timeout(Duration::from_secs(60), node.invoke(&calls_to(&["nap"; 8])))
        .await
        .expect("the calls ran one after another")
        .unwrap();
    assert_eq!(out.results.len(), 8);
    assert!(out.results.iter().all(|r| r.content.text() == "rested"));
}

// ---- 17. typed tools, registry ----

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Forecast {
    /// The city.
    city: String,
    /// How many days.
    days: u8,
}

fn forecast() -> impl Tool + 'static {
    typed_tool("forecast", "A forecast.", |f: Forecast| async move {
        Ok::<_, ToolError>(format!("{} for {} days", f.city, f.days))
    })
}

#[tokio::test]
async fn typed_tools_derive_their_schema_and_get_their_struct() {
    let tool = forecast();
    let schema = tool.parameters();
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["city", "days"]);
    assert_eq!(schema["properties"]["city"]["type"], "string");
    assert_eq!(schema["properties"]["days"]["type"], "integer");

    let mut reg = Registry::new();
    reg.add(tool).unwrap();
    let node = ToolNode::builder(reg).build();
    let messages = vec![assistant(vec![
        call("c1", "forecast", r#"{"city": "Paris", "days": "3"}"#),
        call("c2", "forecast", r#"{"city": "Paris"}"#),
        call("c3", "forecast", r#"{"city": "Paris", "days": 300}"#),
    ])];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(text(&out, "c1"), "Paris for 3 days");
    assert!(
        out.stats.calls[0]
            .fixes
            .iter()
            .any(|f| f.kind == FixKind::StringToInteger)
    );
    assert_eq!(result(&out, "c2").outcome, CallOutcome::Feedback);
    assert!(text(&out, "c2").contains("days"));
    assert_eq!(result(&out, "c3").outcome, CallOutcome::Feedback);
}

#[test]
fn duplicate_tool_names_are_rejected() {
    let n = counter();
    let mut reg = Registry::new();
    reg.add(weather(&n)).unwrap();
    let err = reg.add(weather(&n)).unwrap_err();
    assert!(
        matches!(&err, Error::DuplicateTool(name) if name == "get_weather"),
        "{err}"
    );
    assert_eq!(reg.len(), 1);
    assert_eq!(reg.names().collect::<Vec<_>>(), ["get_weather"]);
}

// ---- 18. listeners ----

#[tokio::test]
async fn every_listener_gets_one_event_per_invocation() {
    let events: Arc<Mutex<Vec<NodeStats>>> = Arc::default();
    let closure = {
        let events = Arc::clone(&events);
        move |s: &NodeStats| events.lock().unwrap().push(s.clone())
    };
    let (tx, rx) = mpsc::channel::<NodeStats>();
    let collector = Arc::new(StatsCollector::new());
    let mut reg = Registry::new();
    reg.add(tool_fn("get_weather", "", weather_schema(), |_, _| async {
        tokio::time::sleep(Duration::from_millis(2)).await;
        Ok::<_, ToolError>("sunny")
    }))
    .unwrap();
    let node = ToolNode::builder(reg)
        .name("weather_tools")
        .listener(Arc::new(closure))
        .listener(Arc::new(tx))
        .listener(Arc::clone(&collector))
        .build();

    let first = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city": "Paris"}"#),
        call("c2", "get_weather", "{'city': 'Rome',}"),
        call("c3", "get_weather", r#"{"days": 2}"#),
        call("c4", "send_email", "{}"),
    ])];
    let second = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"{"city": "Oslo"}"#,
    )])];
    let out = node.invoke(&first).await.unwrap();
    node.invoke(&second).await.unwrap();

    let events = events.lock().unwrap();
    assert_eq!(events.len(), 2);
    let sent: Vec<NodeStats> = rx.try_iter().collect();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], events[0]);
    assert_eq!(events[0], out.stats);
    assert_eq!(events[0].node, "weather_tools");
    assert_eq!(events[1].calls.len(), 1);

    let total = collector.snapshot();
    assert_eq!(total.invocations, 2);
    assert_eq!(total.calls, 5);
    assert_eq!(total.outcomes[&CallOutcome::Executed], 3);
    assert_eq!(total.outcomes[&CallOutcome::Feedback], 2);
    assert_eq!(total.fixes["single_quotes"], 1);
    assert_eq!(total.fixes["trailing_comma"], 1);
    assert_eq!(total.issues["missing_required"], 1);
    assert_eq!(total.issues["unknown_tool"], 1);
    assert_eq!(total.tools["get_weather"], 4);
    assert_eq!(total.tool_errors, 0);

    for c in &out.stats.calls {
        assert!(c.timings.mend > Duration::ZERO, "{c:?}");
        if c.outcome == CallOutcome::Executed {
            assert!(c.timings.execute >= Duration::from_millis(2), "{c:?}");
        } else {
            assert_eq!(c.timings.execute, Duration::ZERO, "{c:?}");
        }
    }
    assert!(out.stats.elapsed >= Duration::from_millis(2));
}

// ---- misuse ----

#[tokio::test]
async fn no_assistant_message_is_an_error() {
    let node = ToolNode::builder(tools(&counter())).build();
    let err = node.invoke(&[user("hi")]).await.unwrap_err();
    assert_eq!(err, NodeError::NoAssistantMessage);
}

// ---- 19. the pairing invariant, for any message ----

fn arb_id() -> impl Strategy<Value = Option<String>> {
    prop::sample::select(vec![
        None,
        Some(""),
        Some("  "),
        Some("a"),
        Some("a_2"),
        Some("b"),
        Some("old"),
        Some("call_tm_2"),
        // Over OpenAI's 40 characters; the two share their first 40.
        Some("call_0123456789012345678901234567890123456789_a"),
        Some("call_0123456789012345678901234567890123456789_b"),
    ])
    .prop_map(|id| id.map(str::to_owned))
}

fn arb_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "get_weather",
        "get_time",
        "GetWeather",
        "nope",
        "",
        "multi_tool_use.parallel",
        "functions.get_time",
    ])
    .prop_map(str::to_owned)
}

fn arb_arguments() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        r#"{"city": "Paris"}"#,
        r#"{"zone": "CET"}"#,
        r#"{"city":"Paris"}"#,
        "{'city': 'Rome',}",
        r#"{"city": "Par"#,
        r#"{"city":"Paris"}{"city":"Rome"}"#,
        r#"{"city":"Paris"}{"zone":"CET"}"#,
        r#"{"city":"Paris"}{"city":"Paris"}"#,
        r#"<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call>"#,
        r#"{"days": 2}"#,
        r#"{"xyz": "Paris"}"#,
        "I cannot do that.",
        "",
        "{}",
        "null",
        "[1, 2]",
    ])
    .prop_map(str::to_owned);
    prop_oneof![4 => fixed, 1 => "[ -~]{0,24}"]
}

fn arb_call() -> impl Strategy<Value = ToolCall> {
    (arb_id(), arb_name(), arb_arguments()).prop_map(|(id, name, args)| {
        let mut tc = ToolCall::new("", name, args);
        tc.id = id;
        tc
    })
}

fn arb_content() -> impl Strategy<Value = Option<Content>> {
    prop::sample::select(vec![
        None,
        Some("<think>hmm</think>On it."),
        Some(r#"Let me check.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#),
        Some(r#"<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call><tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>"#),
        Some(r#"{"city": "Paris"}"#),
    ])
    .prop_map(|c| c.map(Content::from))
}

/// A conversation: perhaps an earlier turn using some ids, then the assistant message, then
/// results already given for some of its calls.
fn conversation(
    earlier: &[String],
    calls: Vec<ToolCall>,
    empty_list: bool,
    content: Option<Content>,
    answered: &[bool],
) -> Vec<Message> {
    let mut messages = vec![user("go")];
    if !earlier.is_empty() {
        let calls = earlier
            .iter()
            .map(|id| call(id, "get_time", r#"{"zone": "UTC"}"#))
            .collect();
        messages.push(assistant(calls));
        messages.extend(earlier.iter().map(|id| answer(id, "noon")));
        messages.push(user("more"));
    }
    let mut answers = Vec::new();
    for (tc, &a) in calls.iter().zip(answered) {
        // A result already given for an id over 40 characters is the history's problem
        // (`history::sanitize`), not the node's: its result cannot be renamed.
        if let Some(id) = tc.id.as_deref()
            && a
            && !id.trim().is_empty()
            && id.chars().count() <= 40
            && !earlier.iter().any(|e| e == id)
            && !answers.contains(&id.to_owned())
        {
            answers.push(id.to_owned());
        }
    }
    let tool_calls = if calls.is_empty() && !empty_list {
        None
    } else {
        Some(calls)
    };
    // An assistant message has content or tool calls (an empty list included: the node
    // has to mend that one).
    let content = match (content, &tool_calls) {
        (None, None) => Some("Done.".into()),
        (c, _) => c,
    };
    messages.push(Message::Assistant(AssistantMessage {
        content: Some(content),
        tool_calls,
        ..Default::default()
    }));
    messages.extend(answers.iter().map(|id| answer(id, "done before")));
    messages
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_call_is_answered_exactly_once(
        calls in prop::collection::vec(arb_call(), 0..7),
        earlier in prop::sample::subsequence(vec!["old".to_owned(), "a_2".to_owned(), "call_tm_2".to_owned()], 0..=3),
        answered in prop::collection::vec(any::<bool>(), 7),
        empty_list in any::<bool>(),
        content in arb_content(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let n = counter();
        let node = ToolNode::builder(tools(&n)).build();
        let messages = conversation(&earlier, calls, empty_list, content, &answered);
        let before: HashSet<String> = messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some(t.call_id.clone()),
                _ => None,
            })
            .collect();

        let out = rt.block_on(node.invoke(&messages)).unwrap();
        let again = rt.block_on(node.invoke(&messages)).unwrap();
        prop_assert_eq!(&again.assistant, &out.assistant);
        prop_assert_eq!(&again.results, &out.results);

        let sanitized: Vec<String> = sanitized_ids(&out);
        let mut expected_new: Vec<&String> = sanitized.iter().filter(|id| !before.contains(*id)).collect();
        let new: Vec<&String> = out.results.iter().map(|r| &r.call_id).collect();
        prop_assert_eq!(&new, &expected_new, "new results answer the unanswered calls, in order");
        expected_new.retain(|id| out.stats.already_answered.contains(id));
        prop_assert!(expected_new.is_empty());
        let executed = out
            .stats
            .calls
            .iter()
            .filter(|c| c.outcome == CallOutcome::Executed)
            .count();
        prop_assert_eq!(runs(&n), 2 * executed);

        // One record per answered id; a dropped exact repeat names the id of the call it
        // repeats, which one other record answers.
        let mut outcomes: HashMap<Option<String>, usize> = HashMap::new();
        for c in out.stats.calls.iter().filter(|c| c.outcome != CallOutcome::Dropped) {
            *outcomes.entry(c.call_id.clone()).or_default() += 1;
        }
        outcomes.remove(&None);
        prop_assert!(outcomes.values().all(|&k| k == 1), "one record per answered id");
        for c in out.stats.calls.iter().filter(|c| c.outcome == CallOutcome::Dropped) {
            prop_assert!(
                c.call_id.is_none() || outcomes.contains_key(&c.call_id),
                "a dropped repeat names an id this message answers: {:?}",
                c.call_id
            );
        }

        let history = applied(&messages, out);
        prop_assert_eq!(pairing_problem(&history), None, "{:#?}", history);
        // Every rule providers enforce holds, but feedback calls keep the model's text.
        prop_assert_eq!(violations(&history), [], "{:#?}", history);
    }
}

// Checked here rather than in `feedback` tests: the node's default feedback is the
// renderer's text for the call's issues.
#[tokio::test]
async fn default_feedback_is_the_rendered_issues() {
    let node = ToolNode::builder(tools(&counter())).build();
    let out = node
        .invoke(&[assistant(vec![call("c1", "get_weather", r#"{"days": 2}"#)])])
        .await
        .unwrap();
    let issues = &out.stats.calls[0].issues;
    assert_eq!(
        text(&out, "c1"),
        feedback::render("get_weather", issues).text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_tools_catch_panics_and_time_out_even_when_blocking() {
    let mut tools = failing_tools();
    tools
        .add_with(
            tool_fn("blocking", "", json!({"type": "object"}), |_, _| async {
                // Blocks its worker thread: only a spawned task lets the timeout fire (a
                // future polled in place would answer "late" once the sleep ends).
                std::thread::sleep(Duration::from_millis(2_500));
                Ok::<_, ToolError>("late")
            }),
            ToolOptions::default().timeout(Duration::from_millis(30)),
        )
        .unwrap();
    let node = ToolNode::builder(tools).spawn_tools(true).build();
    let messages = calls_to(&["fine", "explode", "blowup", "fail", "slow", "blocking"]);
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(text(&out, "c0"), "fine");
    for id in ["c1", "c2"] {
        assert!(
            text(&out, id).contains("panicked"),
            "{id}: {}",
            text(&out, id)
        );
    }
    assert_eq!(
        text(&out, "c3"),
        TOOL_ERROR_TEMPLATE.replace("{error}", "boom")
    );
    for id in ["c4", "c5"] {
        assert!(
            text(&out, id).contains("did not finish"),
            "{id}: {}",
            text(&out, id)
        );
    }
    assert_eq!(sanitized_ids(&out), ["c0", "c1", "c2", "c3", "c4", "c5"]);
}

/// The node and the loop run inside spawned tasks (axum handlers, tokio::spawn).
#[test]
fn invoke_and_run_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let node = ToolNode::builder(Registry::new()).build();
    let messages: Vec<Message> = Vec::new();
    send(&node.invoke(&messages));
    let model = toolmend::agent::ScriptedModel::new();
    send(&toolmend::agent::run(
        &model,
        &node,
        Vec::new(),
        &toolmend::agent::Limits::default(),
    ));
}

// ---- 20. regressions from the review ----

/// History rules broken by `history`, except the feedback calls' own argument text.
fn violations(history: &[Message]) -> Vec<ViolationKind> {
    history::check(history)
        .into_iter()
        .map(|v| v.kind)
        .filter(|&k| k != ViolationKind::ArgumentsNotObject)
        .collect()
}

fn has_fix(c: &CallStats, kind: FixKind) -> bool {
    c.fixes.iter().any(|f| f.kind == kind)
}

fn stats_of<'a>(out: &'a NodeOutput, id: &str) -> &'a CallStats {
    out.stats
        .calls
        .iter()
        .find(|c| c.call_id.as_deref() == Some(id))
        .unwrap()
}

#[tokio::test]
async fn invoke_and_run_futures_can_be_spawned() {
    let n = counter();
    let node = Arc::new(ToolNode::builder(tools(&n)).build());
    let messages = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"{"city": "Paris"}"#,
    )])];
    let out = {
        let node = Arc::clone(&node);
        tokio::spawn(async move { node.invoke(&messages).await })
    }
    .await
    .unwrap()
    .unwrap();
    assert_eq!(text(&out, "c1"), "sunny in Paris");

    let model = toolmend::agent::ScriptedModel::new()
        .reply(AssistantMessage {
            content: Some(None),
            tool_calls: Some(vec![call("c1", "get_time", r#"{"zone": "CET"}"#)]),
            ..Default::default()
        })
        .reply(AssistantMessage {
            content: Some(Some("Noon.".into())),
            ..Default::default()
        });
    let run = tokio::spawn(async move {
        toolmend::agent::run(
            &model,
            &node,
            vec![user("time?")],
            &toolmend::agent::Limits::default(),
        )
        .await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!((run.turns, run.tool_calls), (2, 1));
    assert_eq!(runs(&n), 2);
}

#[tokio::test]
async fn a_truncated_call_never_goes_to_the_corrector() {
    // The corrector would finish the call; it must not be asked to invent the rest.
    let corrector =
        Arc::new(Scripted::new().answer("get_weather", Ok(Some(json!({"city": "Paris"})))));
    let n = counter();
    let node = scripted_node(&corrector, &n);
    let messages = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"{"city": "Par"#,
    )])];
    let out = node.invoke(&messages).await.unwrap();
    assert!(corrector.asked().is_empty(), "{:?}", corrector.asked());
    assert_eq!(runs(&n), 0);
    let r = result(&out, "c1");
    assert_eq!(r.outcome, CallOutcome::Feedback);
    assert_eq!(out.stats.calls[0].issues[0].kind, IssueKind::Truncated);
    assert_eq!(out.stats.calls[0].correction_attempts, 0);
    assert!(r.content.text().contains("again"), "{}", r.content.text());
}

/// One text part holding only whitespace.
fn blank_parts() -> Content {
    Content::Parts(vec![
        serde_json::from_value(json!({"type": "text", "text": "  "})).unwrap(),
    ])
}

/// Denies calls for one city, without a reason.
struct DenySilently(&'static str);

impl Guard for DenySilently {
    fn check<'a>(
        &'a self,
        _ctx: GuardContext<'a>,
        calls: &'a [GuardRequest<'a>],
    ) -> BoxFuture<'a, Vec<Verdict>> {
        let verdicts = calls
            .iter()
            .map(|c| {
                if c.arguments["city"] == self.0 {
                    Verdict::deny(String::new())
                } else {
                    Verdict::allow()
                }
            })
            .collect();
        Box::pin(std::future::ready(verdicts))
    }
}

#[tokio::test]
async fn blank_answers_are_filled_and_recorded() {
    let mut reg = Registry::new();
    reg.add(tool_fn(
        "blank",
        "",
        json!({"type": "object"}),
        |_, _| async {
            Ok::<_, ToolError>(ToolOutput {
                content: blank_parts(),
                artifact: None,
                metadata: None,
            })
        },
    ))
    .unwrap();
    reg.add(tool_fn(
        "fail",
        "",
        json!({"type": "object"}),
        |_, _| async { Err::<String, _>(ToolError::failed("boom")) },
    ))
    .unwrap();
    let n = counter();
    reg.add(weather(&n)).unwrap();
    let node = ToolNode::builder(reg)
        .tool_errors(ToolErrorPolicy::Message(String::new()))
        .on_unresolved(OnUnresolved::hook(|_, _| {
            Resolution::Feedback(String::new())
        }))
        .guard(DenySilently("Rome"))
        .build();
    let messages = vec![
        user("go"),
        assistant(vec![
            call("c1", "blank", "{}"),
            call("c2", "fail", "{}"),
            call("c3", "get_weather", r#"{"days": 2}"#),
            call("c4", "get_weather", r#"{"city": "Rome"}"#),
            call("c5", "get_weather", r#"{"city": "Oslo"}"#),
        ]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    for id in ["c1", "c2", "c3", "c4"] {
        assert_eq!(text(&out, id), history::EMPTY_RESULT, "{id}");
        assert!(
            has_fix(stats_of(&out, id), FixKind::EmptyResultFilled),
            "{id}"
        );
    }
    assert_eq!(result(&out, "c1").status, ResultStatus::Success);
    assert_eq!(result(&out, "c2").status, ResultStatus::Error);
    assert_eq!(result(&out, "c3").outcome, CallOutcome::Feedback);
    assert_eq!(result(&out, "c4").outcome, CallOutcome::Flooded);
    assert_eq!(text(&out, "c5"), "sunny in Oslo");
    assert!(!has_fix(stats_of(&out, "c5"), FixKind::EmptyResultFilled));
    let history = applied(&messages, out);
    assert!(
        !violations(&history).contains(&ViolationKind::EmptyToolContent),
        "{history:#?}"
    );
    assert_eq!(violations(&history), []);
}

#[tokio::test]
async fn the_first_glued_part_keeps_its_own_reading_when_it_gets_feedback() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"{"days":"x"}{"city":"Rome"}"#,
    )])];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(sanitized_ids(&out), ["c1", "c1_2"]);
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Feedback);
    assert_eq!(text(&out, "c1_2"), "sunny in Rome");
    assert_eq!(runs(&n), 1);
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1")),
        json!({"days": "x"})
    );
    assert_eq!(
        parsed_args(sanitized_call(&out, "c1_2")),
        json!({"city": "Rome"})
    );
    for tc in out.assistant.tool_calls.iter().flatten() {
        let args = &tc.arguments;
        assert!(!(args.contains("days") && args.contains("Rome")), "{args}");
    }
    assert_paired(&applied(&messages, out));
}

#[tokio::test]
async fn glued_parts_aimed_at_another_tool_carry_its_name() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"<tool_call>{"name":"get_weather","arguments":{"city":"Rome"}}</tool_call><tool_call>{"name":"get_time","arguments":{"tz":5}}</tool_call>"#,
    )])];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(sanitized_ids(&out), ["c1", "c1_2"]);
    assert_eq!(text(&out, "c1"), "sunny in Rome");
    let second = result(&out, "c1_2");
    assert_eq!(second.outcome, CallOutcome::Feedback);
    assert_eq!(second.tool, "get_time");
    let tc = sanitized_call(&out, "c1_2");
    assert_eq!(tc.name, "get_time");
    assert_eq!(parsed_args(tc), json!({"tz": 5}));
    assert_eq!(sanitized_call(&out, "c1").name, "get_weather");
    assert_eq!(runs(&n), 1);
}

#[tokio::test]
async fn a_result_after_a_user_message_does_not_answer_the_call() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("weather?"),
        assistant(vec![call("c1", "get_weather", r#"{"city": "Paris"}"#)]),
        user("hello?"),
        answer("c1", "stray"),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert!(out.stats.already_answered.is_empty());
    assert_eq!(runs(&n), 1);
    assert_eq!(result_ids(&out), ["c1"]);
    let history = applied(&messages, out);
    assert_eq!(history::check(&history), []);
    assert_eq!(history.len(), 4);
    assert!(matches!(&history[2], Message::Tool(t) if t.content.text() == "sunny in Paris"));
    assert!(matches!(&history[3], Message::User(_)));
}

#[tokio::test]
async fn an_id_over_40_characters_is_minted_anew() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let long = format!("call_{}", "x".repeat(50));
    let messages = vec![
        user("weather?"),
        assistant(vec![call(&long, "get_weather", r#"{"city": "Paris"}"#)]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    let ids = sanitized_ids(&out);
    assert_eq!(ids.len(), 1);
    assert!(ids[0].chars().count() <= 40, "{ids:?}");
    assert_ne!(ids[0], long);
    assert_eq!(result_ids(&out), ids);
    assert_eq!(
        out.stats.calls[0].original_id.as_deref(),
        Some(long.as_str())
    );
    assert_eq!(text(&out, &ids[0]), "sunny in Paris");
    let history = applied(&messages, out);
    assert!(
        !history::check(&history)
            .iter()
            .any(|v| v.kind == ViolationKind::CallIdTooLong),
        "{history:#?}"
    );
    assert_eq!(history::check(&history), []);
}

#[tokio::test]
async fn name_sanitizing_and_message_changes_are_recorded() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![Message::Assistant(AssistantMessage {
        content: Some(Some("<think>both at once</think>On it.".into())),
        tool_calls: Some(vec![
            call("c1", "multi_tool_use.parallel", "{}"),
            call("c2", "get_time", r#"{"zone": "CET"}"#),
        ]),
        ..Default::default()
    })];
    let out = node.invoke(&messages).await.unwrap();
    let tc = sanitized_call(&out, "c1");
    assert_eq!(tc.name, "multi_tool_use_parallel");
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Feedback);
    let c1 = stats_of(&out, "c1");
    let fix = c1
        .fixes
        .iter()
        .find(|f| f.kind == FixKind::FunctionNameSanitized)
        .unwrap();
    assert!(fix.detail.contains("multi_tool_use.parallel"), "{fix:?}");
    assert!(!has_fix(
        stats_of(&out, "c2"),
        FixKind::FunctionNameSanitized
    ));
    let kinds: Vec<FixKind> = out.stats.message_fixes.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FixKind::ThinkingStripped]);
    assert_eq!(out.assistant.content, Some(Some("On it.".into())));

    let messages = vec![said(
        r#"Let me check.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#,
    )];
    let out = node.invoke(&messages).await.unwrap();
    let kinds: Vec<FixKind> = out.stats.message_fixes.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FixKind::CallsMovedFromText]);

    // A message left as it was has none.
    let messages = vec![assistant(vec![call(
        "c1",
        "get_time",
        r#"{"zone": "CET"}"#,
    )])];
    let out = node.invoke(&messages).await.unwrap();
    assert!(out.stats.message_fixes.is_empty());
}

/// A corrector that panics, inside its future (`in_future`) or while building it.
struct PanickingCorrector {
    in_future: bool,
}

impl Corrector for PanickingCorrector {
    fn correct<'a>(
        &'a self,
        _request: CorrectionRequest<'a>,
    ) -> BoxFuture<'a, Result<Correction, CorrectError>> {
        assert!(self.in_future, "the corrector broke before its future");
        Box::pin(async { panic!("the corrector broke") })
    }
}

/// A guard that panics, inside its future (`in_future`) or while building it.
struct PanickingGuard {
    in_future: bool,
}

impl Guard for PanickingGuard {
    fn check<'a>(
        &'a self,
        _ctx: GuardContext<'a>,
        _calls: &'a [GuardRequest<'a>],
    ) -> BoxFuture<'a, Vec<Verdict>> {
        assert!(self.in_future, "the guard broke before its future");
        Box::pin(async { panic!("the guard broke") })
    }
}

#[tokio::test]
async fn panics_in_validators_hooks_correctors_guards_and_listeners_are_contained() {
    let messages = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city": "Paris", "days": "three"}"#),
        call("c2", "get_time", r#"{"zone": "CET"}"#),
    ])];

    // A validator.
    let n = counter();
    let mut reg = Registry::new();
    let broken = |_: &Value, _: &ValidationContext<'_>| -> Vec<Issue> { panic!("rule broke") };
    reg.add_with(weather(&n), ToolOptions::default().validator(broken))
        .unwrap();
    reg.add(time(&n)).unwrap();
    let ok = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city": "Paris"}"#),
        call("c2", "get_time", r#"{"zone": "CET"}"#),
    ])];
    let out = ToolNode::builder(reg).build().invoke(&ok).await.unwrap();
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Feedback);
    assert_eq!(out.stats.calls[0].issues[0].kind, IssueKind::Custom);
    assert_eq!(text(&out, "c2"), "noon in CET");
    assert_eq!(runs(&n), 1);

    // A hook.
    let n = counter();
    let node = ToolNode::builder(tools(&n))
        .on_unresolved(OnUnresolved::hook(|_, _| panic!("hook broke")))
        .build();
    let out = node.invoke(&messages).await.unwrap();
    let plain = ToolNode::builder(tools(&counter())).build();
    let default = plain.invoke(&messages).await.unwrap();
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Feedback);
    assert_eq!(text(&out, "c1"), text(&default, "c1"));
    assert_eq!(text(&out, "c2"), "noon in CET");

    // A corrector, inside its future and before it.
    for in_future in [true, false] {
        let n = counter();
        let node = ToolNode::builder(tools(&n))
            .corrector(PanickingCorrector { in_future }, 2)
            .build();
        let out = node.invoke(&messages).await.unwrap();
        let r = result(&out, "c1");
        assert_eq!(r.outcome, CallOutcome::Feedback, "in future: {in_future}");
        assert_eq!(text(&out, "c1"), text(&default, "c1"));
        let note = out.stats.calls[0].note.as_deref().unwrap();
        assert!(note.contains("panicked"), "{note}");
        assert_eq!(text(&out, "c2"), "noon in CET");
        assert_eq!(runs(&n), 1);
    }

    // A guard, inside its future and before it: nothing runs unchecked.
    for in_future in [true, false] {
        let n = counter();
        let node = ToolNode::builder(tools(&n))
            .guard(PanickingGuard { in_future })
            .build();
        let out = node.invoke(&ok).await.unwrap();
        assert_eq!(runs(&n), 0, "in future: {in_future}");
        for r in &out.results {
            assert_eq!(r.outcome, CallOutcome::Flooded);
            assert_eq!(r.status, ResultStatus::Error);
        }
        assert_eq!(result_ids(&out), ["c1", "c2"]);
    }

    // A listener; the next one still hears.
    let heard = counter();
    let node = ToolNode::builder(tools(&counter()))
        .listener(|_: &NodeStats| panic!("listener broke"))
        .listener({
            let heard = Arc::clone(&heard);
            move |_: &NodeStats| {
                heard.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build();
    let out = node.invoke(&ok).await.unwrap();
    assert_eq!(out.results.len(), 2);
    assert_eq!(runs(&heard), 1);
}

/// A guard that never answers.
struct Silent;

impl Guard for Silent {
    fn check<'a>(
        &'a self,
        _ctx: GuardContext<'a>,
        _calls: &'a [GuardRequest<'a>],
    ) -> BoxFuture<'a, Vec<Verdict>> {
        Box::pin(std::future::pending())
    }
}

/// A corrector that never answers.
struct Mute;

impl Corrector for Mute {
    fn correct<'a>(
        &'a self,
        _request: CorrectionRequest<'a>,
    ) -> BoxFuture<'a, Result<Correction, CorrectError>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn a_guard_or_corrector_that_never_answers_times_out() {
    let n = counter();
    let node = ToolNode::builder(tools(&n))
        .guard(Silent)
        .stage_timeout(Duration::from_millis(50))
        .build();
    let messages = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city": "Paris"}"#),
        call("c2", "get_time", r#"{"zone": "CET"}"#),
    ])];
    let out = tokio::time::timeout(Duration::from_secs(60), node.invoke(&messages))
        .await
        .expect("the guard held the node")
        .unwrap();
    assert_eq!(runs(&n), 0);
    for r in &out.results {
        assert_eq!(r.outcome, CallOutcome::Flooded);
        assert!(r.content.text().contains("in time"), "{}", r.content.text());
    }

    let n = counter();
    let node = ToolNode::builder(tools(&n))
        .corrector(Mute, 3)
        .stage_timeout(Duration::from_millis(50))
        .build();
    let messages = vec![assistant(vec![
        call("c1", "get_weather", r#"{"city": "Paris", "days": "three"}"#),
        call("c2", "get_time", r#"{"zone": "CET"}"#),
    ])];
    let out = tokio::time::timeout(Duration::from_secs(60), node.invoke(&messages))
        .await
        .expect("the corrector held the node")
        .unwrap();
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Feedback);
    let note = out.stats.calls[0].note.as_deref().unwrap();
    assert!(note.contains("did not answer"), "{note}");
    assert_eq!(text(&out, "c2"), "noon in CET");
}

#[tokio::test]
async fn dropping_the_invocation_aborts_spawned_tools() {
    let done = Arc::new(AtomicBool::new(false));
    let mut reg = Registry::new();
    let flag = Arc::clone(&done);
    reg.add(tool_fn(
        "side_effect",
        "",
        json!({"type": "object"}),
        move |_, _| {
            let flag = Arc::clone(&flag);
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                flag.store(true, Ordering::SeqCst);
                Ok::<_, ToolError>("done")
            }
        },
    ))
    .unwrap();
    let node = ToolNode::builder(reg).spawn_tools(true).build();
    for names in [&["side_effect"][..], &["side_effect", "side_effect"][..]] {
        let messages = calls_to(names);
        let gave_up = tokio::time::timeout(Duration::from_millis(20), node.invoke(&messages)).await;
        assert!(gave_up.is_err(), "the invocation finished in 20 ms");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            !done.load(Ordering::SeqCst),
            "a tool of a dropped invocation ran to the end ({} calls)",
            names.len()
        );
    }
}

#[test]
fn the_registry_refuses_names_providers_refuse() {
    let mut reg = Registry::new();
    let err = reg
        .add(tool_fn(
            "search.web",
            "",
            json!({"type": "object"}),
            |_, _| async { Ok::<_, ToolError>("x") },
        ))
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidToolName(name) if name == "search.web"),
        "{err}"
    );
    assert!(reg.is_empty());
}

#[tokio::test]
async fn typed_tool_schemas_have_no_meta_schema_and_context_tools_get_the_call() {
    assert!(
        forecast().parameters().get("$schema").is_none(),
        "{}",
        forecast().parameters()
    );
    let with_ctx = typed_tool_with_context(
        "forecast_for",
        "A forecast, signed with the call id.",
        |f: Forecast, ctx: CallContext| async move {
            Ok::<_, ToolError>(format!(
                "{} for {} days ({}, {})",
                f.city, f.days, ctx.call_id, ctx.tool
            ))
        },
    );
    assert!(with_ctx.parameters().get("$schema").is_none());
    assert!(with_ctx.parameters().get("title").is_none());
    let mut reg = Registry::new();
    reg.add(with_ctx).unwrap();
    let node = ToolNode::builder(reg).build();
    let messages = vec![assistant(vec![call(
        "call_77",
        "forecast_for",
        r#"{"city": "Oslo", "days": "2"}"#,
    )])];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(
        text(&out, "call_77"),
        "Oslo for 2 days (call_77, forecast_for)"
    );
}

#[tokio::test]
async fn corrections_and_salvages_are_recorded_with_before_and_after() {
    let corrector = Arc::new(
        Scripted::new().answer("get_weather", Ok(Some(json!({"city": "Paris", "days": 3})))),
    );
    let n = counter();
    let node = scripted_node(&corrector, &n);
    let messages = vec![assistant(vec![call(
        "c1",
        "get_weather",
        r#"{"city": "Paris", "days": "three"}"#,
    )])];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Corrected);
    let fix = out.stats.calls[0]
        .fixes
        .iter()
        .find(|f| f.kind == FixKind::ArgumentsCorrected)
        .unwrap();
    assert_eq!(
        fix.detail,
        r#"{"city":"Paris","days":"three"} -> {"city":"Paris","days":3}"#
    );

    let node = ToolNode::builder(tools(&n))
        .on_unresolved(OnUnresolved::hook(|_, _| {
            Resolution::Salvage(json!({"city": "Oslo"}))
        }))
        .build();
    let messages = vec![assistant(vec![call("c1", "get_weather", r#"{"days": 1}"#)])];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Salvaged);
    let fix = out.stats.calls[0]
        .fixes
        .iter()
        .find(|f| f.kind == FixKind::ArgumentsSalvaged)
        .unwrap();
    assert_eq!(fix.detail, r#"{"days":1} -> {"city":"Oslo"}"#);
    assert!(
        !out.stats.calls[0]
            .fixes
            .iter()
            .any(|f| f.kind == FixKind::ArgumentsCorrected)
    );
}

#[tokio::test]
async fn an_answered_call_with_a_name_providers_refuse_is_renamed_too() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).build();
    let messages = vec![
        user("go"),
        assistant(vec![
            call("c1", "multi_tool_use.parallel", "{}"),
            call("c2", "get_time", r#"{"zone": "CET"}"#),
        ]),
        answer("c1", "answered elsewhere"),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(out.stats.already_answered, ["c1"]);
    assert_eq!(sanitized_call(&out, "c1").name, "multi_tool_use_parallel");
    let kinds: Vec<FixKind> = out.stats.message_fixes.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FixKind::FunctionNameSanitized]);
    let history = applied(&messages, out);
    assert_eq!(history::check(&history), []);
}

#[tokio::test]
async fn an_async_hook_salvages_words_and_times_out_to_the_default() {
    let hook = OnUnresolved::hook_async(|c, history: Arc<[Message]>| async move {
        match c.call_id.as_str() {
            "c1" => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                // The hook sees the conversation before the message.
                assert_eq!(history.len(), 1);
                Resolution::Salvage(json!({"city": "Oslo"}))
            }
            "c2" => Resolution::Feedback("ask the user which city".to_owned()),
            "c3" => {
                std::future::pending::<()>().await;
                Resolution::Default
            }
            _ => panic!("hook failure"),
        }
    });
    let n = counter();
    let node = ToolNode::builder(tools(&n))
        .on_unresolved(hook)
        .stage_timeout(Duration::from_millis(50))
        .build();
    let messages = vec![
        user("weather?"),
        assistant(vec![
            call("c1", "get_weather", r#"{"days": 1}"#),
            call("c2", "get_weather", r#"{"days": 2}"#),
            call("c3", "get_weather", r#"{"days": 3}"#),
            call("c4", "get_weather", r#"{"days": 4}"#),
        ]),
    ];
    let out = tokio::time::timeout(Duration::from_secs(60), node.invoke(&messages))
        .await
        .expect("the hook that never answers held the node")
        .unwrap();
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Salvaged);
    assert_eq!(text(&out, "c1"), "sunny in Oslo");
    assert_eq!(text(&out, "c2"), "ask the user which city");
    // A hook that never answers, and one that panics: the default feedback.
    for id in ["c3", "c4"] {
        assert_eq!(result(&out, id).outcome, CallOutcome::Feedback);
        assert!(text(&out, id).contains("city"), "{id}: {}", text(&out, id));
    }
    assert_eq!(runs(&n), 1);
    assert_paired(&applied(&messages, out));
}

#[test]
fn a_corrector_with_zero_retries_is_a_configuration_error() {
    let err = ToolNode::builder(Registry::new())
        .corrector(toolmend::correct::Scripted::new(), 0)
        .try_build()
        .unwrap_err();
    assert!(err.to_string().contains("0 correction retries"), "{err}");
    assert!(
        ToolNode::builder(Registry::new())
            .corrector(toolmend::correct::Scripted::new(), 1)
            .try_build()
            .is_ok()
    );
    // No corrector: 0 is not asked for, nothing to report.
    assert!(ToolNode::builder(Registry::new()).try_build().is_ok());
}

/// A corrector that takes a while and records how many of it run at once.
struct SlowCorrector {
    running: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

impl toolmend::correct::Corrector for SlowCorrector {
    fn correct<'a>(
        &'a self,
        _request: toolmend::correct::CorrectionRequest<'a>,
    ) -> toolmend::node::BoxFuture<
        'a,
        Result<toolmend::correct::Correction, toolmend::correct::CorrectError>,
    > {
        use std::sync::atomic::Ordering::SeqCst;
        Box::pin(async move {
            let now = self.running.fetch_add(1, SeqCst) + 1;
            self.peak.fetch_max(now, SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.running.fetch_sub(1, SeqCst);
            Ok(toolmend::correct::Correction {
                arguments: Some(json!({"city": "Paris"})),
                usage: None,
            })
        })
    }
}

#[tokio::test]
async fn corrections_run_concurrently_within_the_bound() {
    let corrector = Arc::new(SlowCorrector {
        running: Default::default(),
        peak: Default::default(),
    });
    let n = counter();
    let node = ToolNode::builder(tools(&n))
        .corrector(Arc::clone(&corrector), 1)
        .max_concurrency(2)
        .build();
    // Six calls with a wrong type (not coercible): each goes to the corrector.
    let calls = (0..6)
        .map(|i| {
            call(
                &format!("c{i}"),
                "get_weather",
                r#"{"city": ["Paris"], "days": "x"}"#,
            )
        })
        .collect();
    let out = node.invoke(&[user("go"), assistant(calls)]).await.unwrap();
    let peak = corrector.peak.load(std::sync::atomic::Ordering::SeqCst);
    assert!((2..=2).contains(&peak), "peak {peak}");
    assert!(
        out.results
            .iter()
            .all(|r| r.outcome == CallOutcome::Corrected)
    );
}

/// Answers only the first call of the batch.
struct OneVerdict;

impl Guard for OneVerdict {
    fn check<'a>(
        &'a self,
        _ctx: GuardContext<'a>,
        _calls: &'a [GuardRequest<'a>],
    ) -> toolmend::node::BoxFuture<'a, Vec<Verdict>> {
        Box::pin(std::future::ready(vec![Verdict::allow()]))
    }
}

#[tokio::test]
async fn a_guard_with_too_few_verdicts_refuses_the_rest() {
    let n = counter();
    let node = ToolNode::builder(tools(&n)).guard(OneVerdict).build();
    let messages = vec![
        user("go"),
        assistant(vec![
            call("c1", "get_weather", r#"{"city": "Paris"}"#),
            call("c2", "get_weather", r#"{"city": "Rome"}"#),
        ]),
    ];
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(result(&out, "c1").outcome, CallOutcome::Executed);
    assert_eq!(result(&out, "c2").outcome, CallOutcome::Flooded);
    assert_eq!(runs(&n), 1, "a call without a verdict never runs");
}

#[tokio::test]
async fn the_collector_counts_message_level_fixes() {
    let collector = Arc::new(StatsCollector::new());
    let node = ToolNode::builder(tools(&counter()))
        .listener(Arc::clone(&collector))
        .build();
    let mut msg = AssistantMessage {
        content: Some(Some(Content::Text("<think>plan</think>On it.".into()))),
        ..Default::default()
    };
    msg.tool_calls = Some(vec![call("c1", "get_weather", r#"{"city": "Paris"}"#)]);
    node.invoke(&[user("go"), Message::Assistant(msg)])
        .await
        .unwrap();
    assert_eq!(
        collector.snapshot().fixes.get("thinking_stripped"),
        Some(&1)
    );
}
