//! The client against the scripted provider over real HTTP on 127.0.0.1.

use std::time::Duration;

use serde_json::json;
use toolmend::{
    agent::{Limits, StopReason, run},
    conversation::{AssistantMessage, Content, Message, ToolCall},
    history,
    node::{Registry, ToolError, ToolNode, tool_fn},
};
use toolmend_openai::{ChatRequest, ClientError, OpenAiClient, OpenAiModel};
use toolmend_scripted::{Script, ScriptedProvider, Step};

fn user(text: &str) -> Message {
    serde_json::from_value(json!({"role": "user", "content": text})).unwrap()
}

fn reply_with_calls() -> AssistantMessage {
    AssistantMessage {
        content: Some(Some(Content::Text("<think>hm</think>Checking.".into()))),
        tool_calls: Some(vec![
            ToolCall::new("call_1", "get_weather", "{'city': 'Paris',}"),
            ToolCall::new("call_2", "get_weather", r#"{"city": "Ro"#),
        ]),
        ..Default::default()
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "small".into(),
        messages: vec![user("weather?")],
        ..ChatRequest::default()
    }
}

#[tokio::test]
async fn json_and_streamed_answers_are_the_same_message() {
    let script = Script::new()
        .reply(reply_with_calls())
        .reply(reply_with_calls());
    let provider = ScriptedProvider::start(script).await.unwrap();
    let client = OpenAiClient::new(provider.base_url()).unwrap();
    let plain = client.chat(&request()).await.unwrap();
    let streamed = client.chat_streamed(&request()).await.unwrap();
    // The same content and calls either way (the JSON answer also carries
    // `refusal: null`, kept as an unknown field).
    let expected = reply_with_calls();
    for got in [&plain.message, &streamed.message] {
        assert_eq!(got.content, expected.content);
        assert_eq!(got.tool_calls, expected.tool_calls);
    }
    assert_eq!(plain.message.extra["refusal"], serde_json::Value::Null);
    assert_eq!(plain.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(streamed.finish_reason, plain.finish_reason);
    assert_eq!(plain.model, "small");
    let usage = plain.usage.unwrap();
    assert_eq!(
        usage.total_tokens,
        usage.prompt_tokens + usage.completion_tokens
    );
    assert_eq!(streamed.usage, plain.usage);
    // The request carried what was asked (and `stream` only when streaming).
    let sent = provider.requests();
    assert_eq!(sent[0]["model"], "small");
    assert!(sent[0].get("stream").is_none());
    assert_eq!(sent[1]["stream"], true);
    assert_eq!(sent[1]["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn errors_keep_the_status_and_body_and_say_whether_to_retry() {
    let script = Script::new().then(Step::Error {
        status: 429,
        body: json!({"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}),
    });
    let provider = ScriptedProvider::start(script).await.unwrap();
    let client = OpenAiClient::new(provider.base_url()).unwrap();
    let err = client.chat(&request()).await.unwrap_err();
    match &err {
        ClientError::Status {
            status,
            message,
            body,
        } => {
            assert_eq!(*status, 429);
            assert_eq!(message, "Rate limit reached");
            assert!(body.contains("rate_limit_exceeded"));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.is_transient());
    // A broken history: the provider's 400, not retryable.
    let mut broken = request();
    broken.messages = serde_json::from_value(json!([
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "zz", "content": "x"}
    ]))
    .unwrap();
    let err = client.chat_streamed(&broken).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Status { status: 400, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("preceeding message with 'tool_calls'"),
        "{err}"
    );
    assert!(!err.is_transient());
}

#[tokio::test]
async fn a_provider_that_never_answers_times_out() {
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    let client = OpenAiClient::new(url)
        .unwrap()
        .timeout(Duration::from_millis(100));
    let err = client.chat(&request()).await.unwrap_err();
    assert_eq!(err, ClientError::Timeout(Duration::from_millis(100)));
    assert!(err.is_transient());
    drop(silent);
}

/// The agent loop over HTTP: the provider checks every request strictly, the node mends
/// the broken calls it sends, the loop ends on the final answer.
#[tokio::test]
async fn the_agent_loop_runs_over_http_against_the_strict_provider() {
    for stream in [false, true] {
        let script = Script::new()
            .reply(reply_with_calls())
            .reply(AssistantMessage {
                content: Some(Some(Content::Text("Sunny.".into()))),
                ..Default::default()
            });
        let provider = ScriptedProvider::start(script).await.unwrap();
        let model = OpenAiModel::new(OpenAiClient::new(provider.base_url()).unwrap(), "small")
            .streaming(stream);
        let mut tools = Registry::new();
        tools
            .add(tool_fn(
                "get_weather",
                "Weather for a city.",
                json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
                |a, _| async move { Ok::<_, ToolError>(format!("sunny in {}", a["city"])) },
            ))
            .unwrap();
        let node = ToolNode::builder(tools).build();
        let out = run(&model, &node, vec![user("weather?")], &Limits::default())
            .await
            .unwrap();
        assert_eq!(out.stop, StopReason::Answered);
        assert_eq!(out.turns, 2);
        assert!(
            history::check(&out.messages)
                .iter()
                .all(|v| v.kind == history::ViolationKind::ArgumentsNotObject)
        );
        // The second request carried the mended call and both answers.
        let second = &provider.requests()[1];
        assert_eq!(
            second["messages"][1]["tool_calls"][0]["function"]["arguments"],
            r#"{"city":"Paris"}"#
        );
        assert_eq!(second["messages"][1]["content"], "Checking.");
        assert_eq!(second["messages"][2]["tool_call_id"], "call_1");
        assert_eq!(second["messages"][3]["tool_call_id"], "call_2");
        assert!(
            second["messages"][3]["content"]
                .as_str()
                .unwrap()
                .contains("cut off")
        );
    }
}
