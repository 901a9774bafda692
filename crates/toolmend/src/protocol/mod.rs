//! Protocol: the OpenAI chat-completions wire format, exactly.
//!
//! Messages of every role, string or content-part content, `tool_calls` with
//! `{id, type, function{name, arguments}}`, `tool_call_id`, and tool definitions
//! `{type: "function", function{name, description, parameters, strict}}`. Every
//! struct keeps the fields it does not know in `extra`, so a message read and
//! written again is the same message. [`Call`] is the normalized form the
//! pipeline works on.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

mod call;
pub use call::Call;

/// Fields a struct does not model, kept for the round trip.
pub type Extra = Map<String, Value>;

/// A chat message, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// `system`: instructions.
    System(TextMessage),
    /// `developer`: instructions (newer OpenAI models).
    Developer(TextMessage),
    /// `user`.
    User(TextMessage),
    /// `assistant`: text and/or tool calls.
    Assistant(AssistantMessage),
    /// `tool`: the result of one tool call.
    Tool(ToolMessage),
    /// `function`: the deprecated single-function result.
    Function(FunctionMessage),
}

impl Message {
    /// The role as sent on the wire.
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

/// An assistant message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The text; `null` (kept as `Some(None)`) when the message only calls tools.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub content: Option<Option<Content>>,
    /// An optional participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Fields not modelled here (`refusal`, `audio`, `function_call`, `reasoning_content` …).
    #[serde(flatten)]
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
}

/// A tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolMessage {
    /// The result content.
    pub content: Content,
    /// The id of the call this answers.
    pub tool_call_id: String,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A legacy function result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionMessage {
    /// The function's name.
    pub name: String,
    /// The result.
    #[serde(default, deserialize_with = "present")]
    pub content: Option<Option<Content>>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Message content: a string, or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts (`text`, `image_url`, `input_audio`, `file`, `refusal` …).
    Parts(Vec<ContentPart>),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id; the join key to the tool result. Models (and some servers) omit it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Always `"function"` today.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function called.
    pub function: FunctionCall,
    /// Fields not modelled here (`index` in stream deltas …).
    #[serde(flatten)]
    pub extra: Extra,
}

impl ToolCall {
    /// A `function` tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: Some(id.into()),
            kind: function_type(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
                extra: Extra::new(),
            },
            extra: Extra::new(),
        }
    }
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    #[serde(default)]
    pub name: String,
    /// The arguments as the model wrote them: JSON text, perhaps broken. Servers that
    /// send an object here (some open-model servers do) are read as its JSON text.
    #[serde(default, deserialize_with = "arguments_text")]
    pub arguments: String,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool definition in a request's `tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Always `"function"` for function tools.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function.
    pub function: FunctionDef,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A function tool's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    /// The name the model calls it by.
    pub name: String,
    /// What it does (the model reads this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// OpenAI structured-outputs strict mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Tool {
    /// A function tool.
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        Tool {
            kind: function_type(),
            function: FunctionDef {
                name: name.into(),
                description: Some(description.into()),
                parameters: Some(parameters),
                strict: None,
                extra: Extra::new(),
            },
            extra: Extra::new(),
        }
    }
}

fn function_type() -> String {
    "function".to_owned()
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

fn arguments_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}
