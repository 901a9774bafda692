//! The OpenAI Chat Completions wire format of the conversation, as serde: an assistant
//! message's `tool_calls` as `{id, type: "function", function: {name, arguments}}` and
//! its reasoning as `reasoning_content`; a result's `tool_call_id`; a tool as `{type:
//! "function", function: {name, description, parameters, strict}}`.
//!
//! Lossless both ways: a key the model does not have stays in `extra` (a `type` other
//! than `"function"` under `type`, the unknown keys of a `function` object under
//! `function`), and is written back where it came from. Reading never fails on what the
//! core can carry: arguments sent as an object are read as their JSON text, an absent
//! `name` as `""`, a `reasoning_content` that is not a string stays in `extra`.

use serde::{Deserialize, Deserializer, Serialize, Serializer, ser::SerializeMap};
use serde_json::Value;

use super::{AssistantMessage, Content, Extra, Tool, ToolCall, ToolMessage};

/// The key chat gives an assistant message's reasoning.
pub const REASONING_KEY: &str = "reasoning_content";

/// Keys of `extra` that hold what a wire object nests: written back into it, not beside.
const NESTED: [&str; 2] = ["type", "function"];

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
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

/// The `type` a wire object had, kept when it is not `"function"`, and the unknown keys
/// of its `function` object, kept when there are any.
fn keep_nested(extra: &mut Extra, kind: Option<String>, function_extra: Extra) {
    if let Some(k) = kind.filter(|k| k != "function") {
        extra.insert("type".to_owned(), Value::String(k));
    }
    if !function_extra.is_empty() {
        extra.insert("function".to_owned(), Value::Object(function_extra));
    }
}

fn kind(extra: &Extra) -> &str {
    extra
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("function")
}

/// The unknown keys of the `function` object, kept by [`keep_nested`].
fn function_extra(extra: &Extra) -> impl Iterator<Item = (&String, &Value)> {
    extra
        .get("function")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

fn beside(extra: &Extra) -> impl Iterator<Item = (&String, &Value)> {
    extra.iter().filter(|(k, _)| !NESTED.contains(&k.as_str()))
}

// ---- tool calls ----

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    function: WireFunction,
    #[serde(flatten)]
    extra: Extra,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: String,
    #[serde(default, deserialize_with = "arguments_text")]
    arguments: String,
    #[serde(flatten)]
    extra: Extra,
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let WireCall {
            id,
            kind,
            function,
            mut extra,
        } = WireCall::deserialize(d)?;
        keep_nested(&mut extra, kind, function.extra);
        Ok(ToolCall {
            id,
            name: function.name,
            arguments: function.arguments,
            extra,
        })
    }
}

struct FunctionOut<'a> {
    name: &'a str,
    arguments: &'a str,
    extra: &'a Extra,
}

impl Serialize for FunctionOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", self.name)?;
        m.serialize_entry("arguments", self.arguments)?;
        for (k, v) in function_extra(self.extra) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(id) = &self.id {
            m.serialize_entry("id", id)?;
        }
        m.serialize_entry("type", kind(&self.extra))?;
        m.serialize_entry(
            "function",
            &FunctionOut {
                name: &self.name,
                arguments: &self.arguments,
                extra: &self.extra,
            },
        )?;
        for (k, v) in beside(&self.extra) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

// ---- tools ----

#[derive(Deserialize)]
struct WireTool {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    function: WireDef,
    #[serde(flatten)]
    extra: Extra,
}

#[derive(Deserialize)]
struct WireDef {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    strict: Option<bool>,
    #[serde(flatten)]
    extra: Extra,
}

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let WireTool {
            kind,
            function,
            mut extra,
        } = WireTool::deserialize(d)?;
        keep_nested(&mut extra, kind, function.extra);
        Ok(Tool {
            name: function.name,
            description: function.description,
            parameters: function.parameters,
            strict: function.strict,
            extra,
        })
    }
}

struct DefOut<'a>(&'a Tool);

impl Serialize for DefOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", &t.name)?;
        if let Some(d) = &t.description {
            m.serialize_entry("description", d)?;
        }
        if let Some(p) = &t.parameters {
            m.serialize_entry("parameters", p)?;
        }
        if let Some(strict) = t.strict {
            m.serialize_entry("strict", &strict)?;
        }
        for (k, v) in function_extra(&t.extra) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for Tool {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("type", kind(&self.extra))?;
        m.serialize_entry("function", &DefOut(self))?;
        for (k, v) in beside(&self.extra) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Tool {
    /// The definition's `type` on the chat wire: `"function"` unless it said otherwise.
    pub fn wire_type(&self) -> &str {
        kind(&self.extra)
    }
}

// ---- results ----

#[derive(Deserialize)]
struct WireResult {
    content: Content,
    tool_call_id: String,
    #[serde(flatten)]
    extra: Extra,
}

impl<'de> Deserialize<'de> for ToolMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WireResult::deserialize(d)?;
        Ok(ToolMessage {
            content: w.content,
            call_id: w.tool_call_id,
            extra: w.extra,
        })
    }
}

impl Serialize for ToolMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("content", &self.content)?;
        m.serialize_entry("tool_call_id", &self.call_id)?;
        for (k, v) in &self.extra {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

// ---- assistant messages ----

#[derive(Deserialize)]
struct WireAssistant {
    #[serde(default, deserialize_with = "present")]
    content: Option<Option<Content>>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
    #[serde(flatten)]
    extra: Extra,
}

impl<'de> Deserialize<'de> for AssistantMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let WireAssistant {
            content,
            name,
            tool_calls,
            mut extra,
        } = WireAssistant::deserialize(d)?;
        let reasoning = match extra.get(REASONING_KEY) {
            Some(Value::String(_)) => match extra.shift_remove(REASONING_KEY) {
                Some(Value::String(s)) => Some(s),
                _ => None,
            },
            _ => None,
        };
        Ok(AssistantMessage {
            content,
            name,
            tool_calls,
            reasoning,
            extra,
        })
    }
}

impl Serialize for AssistantMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if let Some(content) = &self.content {
            m.serialize_entry("content", content)?;
        }
        if let Some(name) = &self.name {
            m.serialize_entry("name", name)?;
        }
        if let Some(calls) = &self.tool_calls {
            m.serialize_entry("tool_calls", calls)?;
        }
        if let Some(r) = &self.reasoning {
            m.serialize_entry(REASONING_KEY, r)?;
        }
        for (k, v) in &self.extra {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conversation::Message;

    /// Read and written again, a message is the same JSON, whatever it carries.
    #[test]
    fn round_trips_every_shape() {
        let cases = [
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}),
            json!({"role": "assistant", "content": "hi", "reasoning_content": "because",
                   "refusal": null}),
            json!({"role": "assistant", "content": "x", "reasoning_content": null}),
            json!({"role": "assistant", "tool_calls": [
                {"type": "custom", "function": {"name": "f", "arguments": "", "x": 1}, "index": 0}]}),
            json!({"role": "tool", "content": "42", "tool_call_id": "c1", "name": "f"}),
            json!({"role": "user", "content": [{"type": "text", "text": "a"}]}),
        ];
        for case in cases {
            let m: Message = serde_json::from_value(case.clone()).unwrap();
            let back = serde_json::to_value(&m).unwrap();
            let mut want = case.clone();
            // An absent `type` is written as `"function"`: the only default filled in.
            if let Some(calls) = want.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for c in calls {
                    c.as_object_mut()
                        .unwrap()
                        .entry("type")
                        .or_insert(json!("function"));
                }
            }
            assert_eq!(back, want, "{case}");
        }
    }

    #[test]
    fn reads_the_model_not_the_wire() {
        let m: Message = serde_json::from_value(json!({"role": "assistant",
            "reasoning_content": "r", "tool_calls": [
                {"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}))
        .unwrap();
        let Message::Assistant(a) = m else { panic!() };
        assert_eq!(a.reasoning.as_deref(), Some("r"));
        assert!(a.extra.is_empty());
        let c = &a.tool_calls.unwrap()[0];
        assert_eq!((c.name.as_str(), c.arguments.as_str()), ("f", r#"{"a":1}"#));
        assert!(c.extra.is_empty());
        let t: Tool = serde_json::from_value(json!({"type": "function",
            "function": {"name": "t", "parameters": {"type": "object"}}}))
        .unwrap();
        assert_eq!((t.name.as_str(), t.wire_type()), ("t", "function"));
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!({"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}})
        );
    }
}
