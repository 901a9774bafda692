//! The conversation's Chat Completions wire (`conversation::chat`): read into the neutral
//! model and written back unchanged.

use proptest::prelude::*;
use serde_json::{Value, json};
use toolmend::conversation::{Call, Content, Message, Tool, ToolCall};

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
    assert_eq!(tc.arguments, r#"{"a":1}"#);
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
    assert_eq!(back.arguments, r#"{"a":1}"#);
    assert_eq!(back.id.as_deref(), Some("c1"));
}

/// A JSON value of a few shapes, for unknown fields.
fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z ]{0,8}".prop_map(Value::String),
        prop::collection::vec("[a-z]{0,4}", 0..3).prop_map(|v| json!(v)),
    ]
}

/// Unknown keys (none of the ones the conversion models).
fn extra() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    prop::collection::vec(("x_[a-z]{1,6}", any_value()), 0..4)
        .prop_map(|kv| kv.into_iter().collect())
}

proptest! {
    /// Any assistant message of calls, with unknown keys at every level, a `type` of any
    /// name and arguments as text, is the same JSON after the neutral model; its calls'
    /// names and argument texts are the wire's.
    #[test]
    fn assistant_messages_round_trip_through_the_neutral_model(
        calls in prop::collection::vec(
            (proptest::option::of("[a-z0-9_]{0,10}"), "[a-z_]{0,10}", ".{0,20}",
             proptest::option::of(prop_oneof![Just("function"), Just("custom")]),
             extra(), extra()),
            0..4),
        content in proptest::option::of(proptest::option::of(".{0,20}")),
        reasoning in proptest::option::of(".{0,20}"),
        top in extra(),
    ) {
        let mut wire_calls = Vec::new();
        for (id, name, arguments, kind, call_extra, fn_extra) in &calls {
            let mut function = serde_json::Map::new();
            function.insert("name".into(), json!(name));
            function.insert("arguments".into(), json!(arguments));
            function.extend(fn_extra.clone());
            let mut c = serde_json::Map::new();
            if let Some(id) = id {
                c.insert("id".into(), json!(id));
            }
            c.insert("type".into(), json!(kind.unwrap_or("function")));
            c.insert("function".into(), Value::Object(function));
            c.extend(call_extra.clone());
            wire_calls.push(Value::Object(c));
        }
        let mut m = serde_json::Map::new();
        m.insert("role".into(), json!("assistant"));
        if let Some(c) = &content {
            m.insert("content".into(), json!(c));
        }
        if !wire_calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(wire_calls));
        }
        if let Some(r) = &reasoning {
            m.insert("reasoning_content".into(), json!(r));
        }
        m.extend(top);
        let wire = Value::Object(m);
        let read: Message = serde_json::from_value(wire.clone()).unwrap();
        let sent = read.tool_calls();
        prop_assert_eq!(sent.len(), calls.len());
        for (c, (_, name, arguments, ..)) in sent.iter().zip(&calls) {
            prop_assert_eq!(&c.name, name);
            prop_assert_eq!(&c.arguments, arguments);
        }
        if let Message::Assistant(a) = &read {
            prop_assert_eq!(a.reasoning.as_ref(), reasoning.as_ref());
        }
        prop_assert_eq!(serde_json::to_value(&read).unwrap(), wire);
    }
}
