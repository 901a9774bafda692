//! The conversation, in no API's shape: what every front converts its wire format into
//! and the core works on.
//!
//! Messages by role (instructions, user text, an assistant turn, a tool's result); an
//! assistant turn has its text, its reasoning and its calls (`id`, `name`, the argument
//! text as the model wrote it); a result names the call it answers; a tool is a name, a
//! description and the JSON Schema of its arguments. Every struct keeps the fields of
//! its wire it does not model in `extra`, so a message read and written again is the
//! same message. [`Call`] is the normalized form the plan works on.
//!
//! The serde form of these types is the OpenAI Chat Completions wire, the format the
//! core's files, the CLI and the Python binding read and write: a conversion beside the
//! model, in [`chat`]. The other fronts (the gateway's Messages and Responses) convert
//! their items and blocks into these types in their own folders.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod call;
pub mod chat;
pub use call::Call;

/// Fields a struct does not model, kept for the round trip.
pub type Extra = Map<String, Value>;

/// A message, by role.
///
/// Read by role: when `role` is the object's first member (as every SDK writes it), the
/// rest is read straight into the role's struct; otherwise the object is read whole
/// first, then by its tag (serde's internally tagged reading).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// `system`: instructions.
    System(TextMessage),
    /// `developer`: instructions (newer OpenAI models).
    Developer(TextMessage),
    /// `user`.
    User(TextMessage),
    /// `assistant`: text, reasoning and/or tool calls.
    Assistant(AssistantMessage),
    /// `tool`: the result of one tool call.
    Tool(ToolMessage),
    /// `function`: the deprecated single-function result.
    Function(FunctionMessage),
}

/// The roles, as an unknown one's error names them.
const ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];

/// [`Message`] read by serde's internally tagged reading (the whole object buffered, then
/// read by its tag): the way of a message whose `role` is not its first member.
#[derive(Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Tagged {
    System(TextMessage),
    Developer(TextMessage),
    User(TextMessage),
    Assistant(AssistantMessage),
    Tool(ToolMessage),
    Function(FunctionMessage),
}

impl From<Tagged> for Message {
    fn from(t: Tagged) -> Self {
        match t {
            Tagged::System(m) => Message::System(m),
            Tagged::Developer(m) => Message::Developer(m),
            Tagged::User(m) => Message::User(m),
            Tagged::Assistant(m) => Message::Assistant(m),
            Tagged::Tool(m) => Message::Tool(m),
            Tagged::Function(m) => Message::Function(m),
        }
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MessageVisitor)
    }
}

struct MessageVisitor;

impl<'de> serde::de::Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a message: an object with a role")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        use serde::de::{Error, value::MapAccessDeserializer};
        let first: Option<std::borrow::Cow<'de, str>> = map.next_key()?;
        if first.as_deref() == Some("role") {
            let role: std::borrow::Cow<'de, str> = map.next_value()?;
            let rest = MapAccessDeserializer::new(map);
            let message = match role.as_ref() {
                "system" => Message::System(TextMessage::deserialize(rest)?),
                "developer" => Message::Developer(TextMessage::deserialize(rest)?),
                "user" => Message::User(TextMessage::deserialize(rest)?),
                "assistant" => Message::Assistant(AssistantMessage::deserialize(rest)?),
                "tool" => Message::Tool(ToolMessage::deserialize(rest)?),
                "function" => Message::Function(FunctionMessage::deserialize(rest)?),
                other => return Err(A::Error::unknown_variant(other, ROLES)),
            };
            // A second `role` would have landed among the fields not modelled.
            if message.extra().contains_key("role") {
                return Err(A::Error::duplicate_field("role"));
            }
            return Ok(message);
        }
        // The tag elsewhere: the object read whole, then by its tag. A member given twice
        // is refused, as the tagged reading refuses it.
        let mut whole = Map::new();
        if let Some(key) = first {
            whole.insert(key.into_owned(), map.next_value()?);
            while let Some((key, value)) = map.next_entry::<String, Value>()? {
                if whole.contains_key(&key) {
                    return Err(A::Error::custom(format_args!("duplicate field `{key}`")));
                }
                whole.insert(key, value);
            }
        }
        Tagged::deserialize(Value::Object(whole))
            .map(Message::from)
            .map_err(A::Error::custom)
    }
}

impl Message {
    /// The fields of the message not modelled here.
    fn extra(&self) -> &Extra {
        match self {
            Message::System(m) | Message::Developer(m) | Message::User(m) => &m.extra,
            Message::Assistant(m) => &m.extra,
            Message::Tool(m) => &m.extra,
            Message::Function(m) => &m.extra,
        }
    }

    /// The role's name.
    pub fn role(&self) -> &'static str {
        match self {
            Message::System(_) => "system",
            Message::Developer(_) => "developer",
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::Tool(_) => "tool",
            Message::Function(_) => "function",
        }
    }

    /// The tool calls of an assistant message (empty for other roles).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Message::Assistant(a) => a.tool_calls.as_deref().unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// A system, developer or user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextMessage {
    /// The content: a string or content parts.
    pub content: Content,
    /// An optional participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An assistant turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AssistantMessage {
    /// The text; `Some(None)` when the message says so explicitly (chat's `null`, a turn
    /// that only calls tools), `None` when it says nothing.
    pub content: Option<Option<Content>>,
    /// An optional participant name.
    pub name: Option<String>,
    /// The tool calls.
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The reasoning the model gave apart from its text (chat's `reasoning_content`,
    /// the field vLLM, SGLang and DeepSeek use; Messages' `thinking` blocks).
    pub reasoning: Option<String>,
    /// Fields not modelled here (`refusal`, `audio`, `function_call` …).
    pub extra: Extra,
}

impl AssistantMessage {
    /// The text content, if any (content parts joined).
    pub fn text(&self) -> Option<String> {
        match &self.content {
            Some(Some(c)) => Some(c.text()),
            _ => None,
        }
    }

    /// Adds `reasoning` after the reasoning the message already has (a newline between).
    pub fn add_reasoning(&mut self, reasoning: &str) {
        if reasoning.is_empty() {
            return;
        }
        self.reasoning = Some(match self.reasoning.take() {
            Some(before) if !before.is_empty() => format!("{before}\n{reasoning}"),
            _ => reasoning.to_owned(),
        });
    }
}

/// A tool's result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolMessage {
    /// The result content.
    pub content: Content,
    /// The id of the call this answers.
    pub call_id: String,
    /// Fields not modelled here.
    pub extra: Extra,
}

/// A legacy function result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionMessage {
    /// The function's name.
    pub name: String,
    /// The result.
    #[serde(default, deserialize_with = "chat::present")]
    pub content: Option<Option<Content>>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Message content: a string, or a list of parts.
///
/// Read by what the value is (a string or an array), without buffering it first as
/// serde's untagged reading does: a long tool result is read once.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts (`text`, `image_url`, `input_audio`, `file`, `refusal` …).
    Parts(Vec<ContentPart>),
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> serde::de::Visitor<'de> for ContentVisitor {
    type Value = Content;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string or a list of content parts")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Content, E> {
        Ok(Content::Text(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Content, E> {
        Ok(Content::Text(v))
    }

    /// UTF-8 bytes (a Python `bytes`) are text, as a `String` takes them.
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Content, E> {
        std::str::from_utf8(v)
            .map(|s| Content::Text(s.to_owned()))
            .map_err(|_| E::invalid_value(serde::de::Unexpected::Bytes(v), &self))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Content, A::Error> {
        Vec::<ContentPart>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
            .map(Content::Parts)
    }
}

impl Content {
    /// The text of the content: the string, or the text parts joined.
    pub fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join(""),
        }
    }

    /// True for `""` or no parts.
    pub fn is_empty(&self) -> bool {
        match self {
            Content::Text(s) => s.is_empty(),
            Content::Parts(p) => p.is_empty(),
        }
    }
}

impl From<&str> for Content {
    fn from(s: &str) -> Self {
        Content::Text(s.to_owned())
    }
}

impl From<String> for Content {
    fn from(s: String) -> Self {
        Content::Text(s)
    }
}

/// One content part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// `text`, `image_url`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Everything else (`image_url`, `input_audio`, `cache_control` …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool call in an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id; the join key to the tool result. Models (and some servers) omit it.
    pub id: Option<String>,
    /// The tool called.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, perhaps broken. A wire that
    /// sends an object here (some open-model servers do) is read as its JSON text.
    pub arguments: String,
    /// Fields not modelled here (`index` in stream deltas …).
    pub extra: Extra,
}

impl ToolCall {
    /// A call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: Some(id.into()),
            name: name.into(),
            arguments: arguments.into(),
            extra: Extra::new(),
        }
    }
}

/// A tool the model may call: its name, what it does, the schema of its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does (the model reads this).
    pub description: Option<String>,
    /// The JSON Schema of the arguments.
    pub parameters: Option<Value>,
    /// Strict mode: the provider constrains the arguments to the schema.
    pub strict: Option<bool>,
    /// Fields not modelled here.
    pub extra: Extra,
}

impl Tool {
    /// A tool.
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        Tool {
            name: name.into(),
            description: Some(description.into()),
            parameters: Some(parameters),
            strict: None,
            extra: Extra::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::{Message, Tagged};

    /// The fast reading (the role first) and the tagged one give the same message, from
    /// a tree and from text.
    #[test]
    fn a_message_reads_the_same_whatever_the_place_of_its_role() {
        let messages = [
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "developer", "content": [{"type": "text", "text": "x"}], "name": "d"}),
            json!({"role": "user", "content": "Hi", "name": "u", "x-extra": {"a": [1, 2]}}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}],
                "reasoning_content": "think", "refusal": null}),
            json!({"role": "assistant", "content": "text only"}),
            json!({"role": "assistant"}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"}),
            json!({"role": "function", "name": "f", "content": "r"}),
        ];
        for m in messages {
            let Value::Object(map) = &m else {
                unreachable!()
            };
            // The same object with its role last: the tagged way.
            let mut last: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(k, _)| *k != "role")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            last.insert("role".into(), map["role"].clone());
            let tagged = Message::from(Tagged::deserialize(&m).unwrap());
            let fast = Message::deserialize(&m).unwrap();
            let from_text: Message = serde_json::from_str(&m.to_string()).unwrap();
            let role_last: Message = serde_json::from_value(Value::Object(last.clone())).unwrap();
            let role_last_text: Message =
                serde_json::from_str(&Value::Object(last).to_string()).unwrap();
            for got in [&fast, &from_text, &role_last, &role_last_text] {
                assert_eq!(got, &tagged, "{m}");
            }
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&tagged).unwrap()
            );
        }
    }

    /// Content is a string or parts, read as serde's untagged reading read it.
    #[test]
    fn content_reads_a_string_or_parts_and_nothing_else() {
        use super::Content;
        let text: Content = serde_json::from_str(r#""a \"quoted\" text""#).unwrap();
        assert_eq!(text, Content::Text("a \"quoted\" text".into()));
        let parts: Content = serde_json::from_value(json!([{"type": "text", "text": "hi"},
            {"type": "image_url", "image_url": {"url": "u"}}]))
        .unwrap();
        let Content::Parts(p) = &parts else {
            panic!("{parts:?}")
        };
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].extra["image_url"]["url"], "u");
        assert_eq!(
            serde_json::from_str::<Content>("[]").unwrap(),
            Content::Parts(Vec::new())
        );
        for bad in [
            "5",
            "null",
            "{\"type\": \"text\"}",
            "[5]",
            "[{\"text\": \"no type\"}]",
        ] {
            assert!(serde_json::from_str::<Content>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_message_without_a_known_role_once_is_refused() {
        for (text, says) in [
            (
                r#"{"role": "robot", "content": "x"}"#,
                "unknown variant `robot`",
            ),
            (
                r#"{"content": "x", "role": "robot"}"#,
                "unknown variant `robot`",
            ),
            (
                r#"{"role": "user", "content": "x", "role": "user"}"#,
                "duplicate field `role`",
            ),
            (
                r#"{"content": "x", "role": "user", "role": "assistant"}"#,
                "duplicate field `role`",
            ),
            (
                r#"{"content": "a", "content": "b", "role": "user"}"#,
                "duplicate field `content`",
            ),
            (
                r#"{"role": "user", "content": "a", "content": "b"}"#,
                "duplicate field `content`",
            ),
            (r#"{"content": "x"}"#, "missing field `role`"),
            (r#"{}"#, "missing field `role`"),
            (r#"{"role": "user"}"#, "missing field `content`"),
            (r#"{"role": 5, "content": "x"}"#, "invalid type"),
            (r#""user""#, "invalid type"),
        ] {
            let err = serde_json::from_str::<Message>(text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
