//! The correction model at work inside the tool node, against the scripted provider.

use std::sync::Arc;

use serde_json::{Value, json};
use toolmend::{
    conversation::{AssistantMessage, Content, Message, ToolCall},
    node::{CallOutcome, Registry, StatsCollector, ToolError, ToolNode, tool_fn},
};
use toolmend_openai::{CorrectionMode, ModelCorrector, OpenAiClient};
use toolmend_scripted::{Script, ScriptedProvider, Step};

fn tools() -> Registry {
    let mut r = Registry::new();
    r.add(tool_fn(
        "get_weather",
        "Weather for a city over some days.",
        json!({"type": "object",
               "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
               "required": ["city", "days"], "additionalProperties": false}),
        |a: Value, _| async move { Ok::<_, ToolError>(format!("{} for {} days", a["city"], a["days"])) },
    ))
    .unwrap();
    r
}

fn messages(calls: Vec<ToolCall>) -> Vec<Message> {
    let mut m: Vec<Message> = serde_json::from_value(json!([
        {"role": "system", "content": "SECRET SYSTEM PROMPT"},
        {"role": "user", "content": "What is the weather in Paris for three days?"},
    ]))
    .unwrap();
    m.push(Message::Assistant(AssistantMessage {
        content: Some(Some(Content::Text("Let me look that up.".into()))),
        tool_calls: Some(calls),
        ..Default::default()
    }));
    m
}

/// The model's answer in tool-calling mode: a call with these arguments.
fn answer(args: &Value) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![ToolCall::new(
            "fix_1",
            "get_weather",
            args.to_string(),
        )]),
        ..Default::default()
    })
}

fn prompt_of(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_correction_model_fixes_what_rules_cannot_in_one_call() {
    let provider =
        ScriptedProvider::start(Script::new().then(answer(&json!({"city": "Paris", "days": 3}))))
            .await
            .unwrap();
    let corrector = ModelCorrector::new(OpenAiClient::new(provider.base_url()).unwrap(), "small");
    let stats = Arc::new(StatsCollector::new());
    let node = ToolNode::builder(tools())
        .corrector(corrector, 2)
        .listener(Arc::clone(&stats))
        .build();
    let history = messages(vec![ToolCall::new(
        "c1",
        "get_weather",
        r#"{"city": "Paris", "days": "three"}"#,
    )]);
    let out = node.invoke(&history).await.unwrap();
    let r = &out.results[0];
    assert_eq!(r.outcome, CallOutcome::Corrected);
    assert_eq!(r.content.text(), "\"Paris\" for 3 days");
    assert_eq!(out.stats.calls[0].correction_attempts, 1);
    // One model call; the tool bound and forced; the correction never enters the history.
    let sent = provider.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["tool_choice"]["function"]["name"], "get_weather");
    assert_eq!(sent[0]["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(sent[0]["messages"].as_array().unwrap().len(), 1);
    // Tokens per model, in the call's stats and in the totals.
    let usage = &out.stats.calls[0].correction_usage;
    assert_eq!(usage.len(), 1);
    assert!(usage[0].prompt_tokens > 0 && usage[0].completion_tokens > 0);
    let totals = stats.snapshot();
    assert_eq!(
        totals.correction_tokens["small"],
        (usage[0].prompt_tokens, usage[0].completion_tokens)
    );
    // The prompt: tool, schema, invalid arguments, issues, context without the system message.
    let prompt = prompt_of(&sent[0]);
    for part in [
        "'get_weather'",
        "Weather for a city over some days.",
        "\"minimum\":1",
        r#"{"city": "Paris", "days": "three"}"#,
        "days",
        "[user] What is the weather in Paris for three days?",
        "[assistant] Let me look that up.",
        "never invent a missing value",
    ] {
        assert!(prompt.contains(part), "missing {part:?} in:\n{prompt}");
    }
    assert!(!prompt.contains("SECRET SYSTEM PROMPT"));
}

#[tokio::test]
async fn retries_run_out_and_transient_failures_degrade_to_feedback() {
    // Two invalid answers: both attempts used, the call ends as feedback.
    let script = Script::new()
        .then(answer(&json!({"city": "Paris", "days": "3 days"})))
        .then(answer(&json!({"city": "Paris", "days": 0})));
    let provider = ScriptedProvider::start(script).await.unwrap();
    let node = ToolNode::builder(tools())
        .corrector(
            ModelCorrector::new(OpenAiClient::new(provider.base_url()).unwrap(), "small"),
            2,
        )
        .build();
    let out = node
        .invoke(&messages(vec![ToolCall::new(
            "c1",
            "get_weather",
            r#"{"city": "Paris", "days": "x"}"#,
        )]))
        .await
        .unwrap();
    assert_eq!(out.results[0].outcome, CallOutcome::Feedback);
    assert_eq!(out.stats.calls[0].correction_attempts, 2);
    assert_eq!(provider.requests().len(), 2);
    // The second attempt was told what was wrong with the first.
    assert!(prompt_of(&provider.requests()[1]).contains("3 days"));

    // A rate limit: that call stays unresolved; its valid sibling runs.
    let script = Script::new().then(Step::Error {
        status: 429,
        body: json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}),
    });
    let provider = ScriptedProvider::start(script).await.unwrap();
    let node = ToolNode::builder(tools())
        .corrector(
            ModelCorrector::new(OpenAiClient::new(provider.base_url()).unwrap(), "small"),
            2,
        )
        .build();
    let out = node
        .invoke(&messages(vec![
            ToolCall::new("c1", "get_weather", r#"{"city": "Paris", "days": "x"}"#),
            ToolCall::new("c2", "get_weather", r#"{"city": "Rome", "days": 2}"#),
        ]))
        .await
        .unwrap();
    assert_eq!(out.results[0].outcome, CallOutcome::Feedback);
    assert!(out.stats.calls[0].note.as_deref().unwrap().contains("429"));
    assert_eq!(out.results[1].outcome, CallOutcome::Executed);
    assert_eq!(
        provider.requests().len(),
        1,
        "a transient failure is not retried at once"
    );
}

#[tokio::test]
async fn missing_fields_are_not_sent_and_privacy_holds() {
    // Only a missing required value: the model would have to invent it; not asked.
    let provider = ScriptedProvider::start(Script::new()).await.unwrap();
    let node = ToolNode::builder(tools())
        .corrector(
            ModelCorrector::new(OpenAiClient::new(provider.base_url()).unwrap(), "small"),
            2,
        )
        .build();
    let out = node
        .invoke(&messages(vec![ToolCall::new(
            "c1",
            "get_weather",
            r#"{"city": "Paris"}"#,
        )]))
        .await
        .unwrap();
    assert_eq!(out.results[0].outcome, CallOutcome::Feedback);
    assert!(provider.requests().is_empty());

    // N = 0: no conversation in the prompt; JSON mode asks for a JSON object.
    let script = Script::new().reply(AssistantMessage {
        content: Some(Some(Content::Text(
            r#"{"city": "Paris", "days": 3}"#.into(),
        ))),
        ..Default::default()
    });
    let provider = ScriptedProvider::start(script).await.unwrap();
    let corrector = ModelCorrector::new(OpenAiClient::new(provider.base_url()).unwrap(), "small")
        .context_messages(0)
        .mode(CorrectionMode::Json);
    let node = ToolNode::builder(tools()).corrector(corrector, 1).build();
    let out = node
        .invoke(&messages(vec![ToolCall::new(
            "c1",
            "get_weather",
            r#"{"city": "Paris", "days": "three"}"#,
        )]))
        .await
        .unwrap();
    assert_eq!(out.results[0].outcome, CallOutcome::Corrected);
    let sent = &provider.requests()[0];
    assert_eq!(sent["response_format"]["type"], "json_object");
    assert!(sent.get("tools").is_none());
    let prompt = prompt_of(sent);
    assert!(!prompt.contains("Conversation so far"), "{prompt}");
    assert!(!prompt.contains("What is the weather"), "{prompt}");
    assert!(
        prompt.ends_with("Answer with the arguments as one JSON object and nothing else."),
        "{prompt}"
    );

    // JSON-schema mode: the tool's schema constrains the answer.
    let script = Script::new().reply(AssistantMessage {
        content: Some(Some(Content::Text(
            r#"{"city": "Paris", "days": 3}"#.into(),
        ))),
        ..Default::default()
    });
    let provider = ScriptedProvider::start(script).await.unwrap();
    let corrector = ModelCorrector::new(OpenAiClient::new(provider.base_url()).unwrap(), "small")
        .mode(CorrectionMode::JsonSchema);
    let node = ToolNode::builder(tools()).corrector(corrector, 1).build();
    let out = node
        .invoke(&messages(vec![ToolCall::new(
            "c1",
            "get_weather",
            r#"{"city": "Paris", "days": "three"}"#,
        )]))
        .await
        .unwrap();
    assert_eq!(out.results[0].outcome, CallOutcome::Corrected);
    let format = &provider.requests()[0]["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "get_weather");
    assert_eq!(
        format["json_schema"]["schema"]["required"],
        json!(["city", "days"])
    );
}

/// The client re-exports the core's context rendering (one implementation).
#[test]
fn context_keeps_the_last_n_messages_without_system_each_cut_to_2000_chars() {
    let long = "x".repeat(3_000);
    let history: Vec<Message> = serde_json::from_value(json!([
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
        {"role": "developer", "content": "dev"},
        {"role": "user", "content": long},
    ]))
    .unwrap();
    let text = toolmend_openai::render_context(&history, 2, Some("my own text"));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0], "[user] second");
    assert_eq!(lines[1].chars().count(), toolmend_openai::CONTEXT_CHARS + 1);
    assert!(lines[1].ends_with('…'));
    assert_eq!(lines[2], "[assistant] my own text");
    assert!(toolmend_openai::render_context(&history, 0, Some("x")).is_empty());
    assert_eq!(
        text,
        toolmend::correct::render_context(&history, 2, Some("my own text"))
    );
}
