//! Protocol: the OpenAI chat-completions wire format. STUB: being written.

/// A chat message (placeholder).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Message {}
