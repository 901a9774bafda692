//! The normalized tool call the pipeline works on.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ToolCall;

/// A tool call, whatever form it came in: id (optional: models omit it), name,
/// the raw argument text as sent, and the parsed arguments once known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The call id, if the call had a usable one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The argument text exactly as the model wrote it.
    pub raw_arguments: String,
    /// The arguments, once parsed (and mended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

impl Call {
    /// A call with a raw argument text, not yet parsed.
    pub fn new(
        id: Option<String>,
        name: impl Into<String>,
        raw_arguments: impl Into<String>,
    ) -> Self {
        Call {
            id,
            name: name.into(),
            raw_arguments: raw_arguments.into(),
            arguments: None,
        }
    }
}

impl From<&ToolCall> for Call {
    fn from(tc: &ToolCall) -> Self {
        // An empty or whitespace id is no id: it cannot join a result.
        let id = tc.id.as_ref().filter(|id| !id.trim().is_empty()).cloned();
        Call::new(id, tc.name.clone(), tc.arguments.clone())
    }
}

impl From<&Call> for ToolCall {
    /// The wire form; the arguments are the parsed ones when known (as valid JSON text).
    fn from(c: &Call) -> Self {
        let arguments = c
            .arguments
            .as_ref()
            .map_or_else(|| c.raw_arguments.clone(), Value::to_string);
        let mut tc = ToolCall::new(c.id.clone().unwrap_or_default(), c.name.clone(), arguments);
        tc.id = c.id.clone();
        tc
    }
}
