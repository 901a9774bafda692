//! Protocol: the OpenAI wire format read and written back unchanged.

use serde_json::{Value, json};
use toolmend::protocol::{Call, Content, Message, Tool, ToolCall};

fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(v: &Value) -> Value {
    let typed: T = serde_json::from_value(v.clone()).unwrap();
    serde_json::to_value(&typed).unwrap()
}

#[test]
fn messages_of_every_role_round_trip_with_unknown_fields() {
    let messages = json!([
        {"role": "system", "content": "Be brief.", "x_custom": 1},
        {"role": "developer", "content": [{"type": "text", "text": "Rules", "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}
        ], "name": "ana"},
        {"role": "assistant", "content": null, "refusal": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18°C"},
        {"role": "assistant", "content": "Done.", "reasoning_content": "hidden", "audio": {"id": "a1"}},
        {"role": "function", "name": "legacy", "content": "{}"}
    ]);
    let back = round_trip::<Vec<Message>>(&messages);
    assert_eq!(back, messages);
}

#[test]
fn absent_content_stays_absent_and_null_stays_null() {
    let with_null = json!({"role": "assistant", "content": null, "tool_calls": []});
    assert_eq!(round_trip::<Message>(&with_null), with_null);
    let without = json!({"role": "assistant", "tool_calls": []});
    assert_eq!(round_trip::<Message>(&without), without);
}

#[test]
fn tool_definitions_round_trip() {
    let tools = json!([
        {"type": "function", "function": {"name": "f", "description": "d",
            "parameters": {"type": "object", "properties": {}}, "strict": true}},
        {"type": "function", "function": {"name": "g"}, "x_vendor": [1]}
    ]);
    assert_eq!(round_trip::<Vec<Tool>>(&tools), tools);
}

#[test]
fn arguments_sent_as_an_object_are_read_as_text() {
    // Some open-model servers send arguments as an object; the wire format says text.
    let tc: ToolCall = serde_json::from_value(json!(
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    ))
    .unwrap();
    assert_eq!(tc.function.arguments, r#"{"a":1}"#);
}

#[test]
fn roles_and_accessors() {
    let m: Message = serde_json::from_value(json!({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})).unwrap();
    assert_eq!(m.role(), "assistant");
    assert_eq!(m.tool_calls().len(), 1);
    let Message::Assistant(a) = &m else { panic!() };
    assert_eq!(a.text().as_deref(), Some("ab"));
    assert!(Content::from("").is_empty());
    assert!(serde_json::from_value::<Message>(json!({"role": "robot", "content": "x"})).is_err());
}

#[test]
fn normalized_call_drops_unusable_ids_and_writes_parsed_arguments() {
    let tc = ToolCall::new("  ", "f", "{'a': 1}");
    let mut call = Call::from(&tc);
    assert_eq!(call.id, None);
    assert_eq!(call.raw_arguments, "{'a': 1}");
    call.arguments = Some(json!({"a": 1}));
    call.id = Some("c1".into());
    let back = ToolCall::from(&call);
    assert_eq!(back.function.arguments, r#"{"a":1}"#);
    assert_eq!(back.id.as_deref(), Some("c1"));
}
