//! The one correction prompt, and the context it shows. Every front asks its correction
//! model with this text: the Rust [`Corrector`](super::Corrector)s, the gateway, and the
//! Python package (which only makes the model call).
//!
//! One user message, no system message: the tool's name, description and JSON Schema; the
//! invalid arguments as sent; what is wrong (the feedback text of the issues); the last N
//! messages before the assistant message, system and developer messages left out, one
//! line each (an assistant's calls on lines of their own), each cut to [`CONTEXT_CHARS`];
//! then the assistant's own text (leaked reasoning removed); and the instruction to keep
//! the intent and never invent a missing value.

use std::fmt::Write as _;

use super::CorrectionRequest;
use crate::{conversation::Message, feedback, message::strip_thinking};

/// Each context line is cut to this many characters.
pub const CONTEXT_CHARS: usize = 2_000;

/// How the prompt is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptOptions {
    /// How many messages before the assistant message are shown (0: no conversation, not
    /// even the assistant's own text).
    pub context_messages: usize,
    /// Ask for the arguments as one JSON object and nothing else (for a model answering
    /// in text, without tool calling or a response format that constrains it).
    pub ask_for_json: bool,
}

impl Default for PromptOptions {
    /// Ten messages; the answer is a tool call.
    fn default() -> Self {
        PromptOptions {
            context_messages: 10,
            ask_for_json: false,
        }
    }
}

/// The closing instruction.
const REWRITE: &str = "Rewrite the arguments so that they match the schema. Keep the agent's \
                       intent; change only what the schema requires. Use only values found in \
                       the invalid arguments or in the conversation: never invent a missing value.";

/// Appended when the answer is JSON text.
const JSON_ONLY: &str = " Answer with the arguments as one JSON object and nothing else.";

/// The prompt for one attempt.
///
/// ```
/// use serde_json::json;
/// use toolmend::{CompiledTool, Issue, IssueKind, correct::{self, CorrectionRequest, PromptOptions}};
///
/// let tool = CompiledTool::compile("add", "Adds two integers.", &json!({
///     "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
///     "required": ["a", "b"]})).unwrap();
/// let issues = [Issue::new(IssueKind::WrongType, "/b", "expected an integer, got \"two\"")];
/// let request = CorrectionRequest {
///     tool: &tool, call_id: "c1", raw_arguments: r#"{"a": 1, "b": "two"}"#,
///     arguments: None, issues: &issues, attempt: 1, messages: &[], assistant_text: None,
/// };
/// let prompt = correct::prompt(&request, &PromptOptions::default());
/// assert!(prompt.starts_with("An AI agent produced an invalid call to the tool 'add'."));
/// assert!(prompt.contains(r#"{"a": 1, "b": "two"}"#) && prompt.contains("never invent"));
/// ```
pub fn prompt(request: &CorrectionRequest<'_>, options: &PromptOptions) -> String {
    let tool = request.tool;
    let mut out = format!(
        "An AI agent produced an invalid call to the tool '{}'.\n\n",
        tool.name()
    );
    if !tool.description().is_empty() {
        let _ = write!(out, "Tool description:\n{}\n\n", tool.description());
    }
    let _ = write!(
        out,
        "Tool parameters (JSON Schema):\n{}\n\n",
        tool.parameters()
    );
    let _ = write!(out, "Invalid arguments:\n{}\n\n", request.raw_arguments);
    let _ = write!(
        out,
        "What is wrong:\n{}\n\n",
        feedback::render(tool.name(), request.issues).text
    );
    let context = render_context(
        request.messages,
        options.context_messages,
        request.assistant_text,
    );
    if !context.is_empty() {
        out.push_str("Conversation so far (oldest first):\n");
        out.push_str(&context);
        out.push('\n');
    }
    out.push_str(REWRITE);
    if options.ask_for_json {
        out.push_str(JSON_ONLY);
    }
    out
}

/// The last `n` messages (system and developer left out), one line each, cut to
/// [`CONTEXT_CHARS`], then the assistant's own text (leaked reasoning removed); each line
/// ends with a newline. Empty for `n` = 0.
///
/// ```text
/// [user] What is the weather in Paris?
/// [assistant] Let me look.
///   -> get_weather({"city": "Paris"})
/// [tool result call_1] sunny
/// [assistant] my own text
/// ```
pub fn render_context(messages: &[Message], n: usize, assistant_text: Option<&str>) -> String {
    if n == 0 {
        return String::new();
    }
    let kept: Vec<&Message> = messages
        .iter()
        .filter(|m| !matches!(m, Message::System(_) | Message::Developer(_)))
        .collect();
    let mut out = String::new();
    for m in &kept[kept.len().saturating_sub(n)..] {
        let line = match m {
            Message::User(u) => format!("[user] {}", u.content.text()),
            Message::Assistant(a) => {
                let mut line = format!("[assistant] {}", a.text().unwrap_or_default());
                for tc in a.tool_calls.iter().flatten() {
                    let _ = write!(line, "\n  -> {}({})", tc.name, tc.arguments);
                }
                line
            }
            Message::Tool(t) => format!("[tool result {}] {}", t.call_id, t.content.text()),
            Message::Function(f) => {
                let text = f
                    .content
                    .clone()
                    .flatten()
                    .map(|c| c.text())
                    .unwrap_or_default();
                format!("[function {}] {text}", f.name)
            }
            Message::System(_) | Message::Developer(_) => continue,
        };
        out.push_str(&cut(&line, CONTEXT_CHARS));
        out.push('\n');
    }
    if let Some(text) = assistant_text {
        let text = strip_thinking(text).unwrap_or_else(|| text.to_owned());
        if !text.trim().is_empty() {
            out.push_str(&cut(&format!("[assistant] {}", text.trim()), CONTEXT_CHARS));
            out.push('\n');
        }
    }
    out
}

/// `s` cut to `max` characters, with `…` when something was cut.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::{CompiledTool, Issue, IssueKind};

    fn history() -> Vec<Message> {
        serde_json::from_value(json!([
            {"role": "system", "content": "SECRET"},
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c0", "content": "sunny"},
            {"role": "developer", "content": "DEV"},
            {"role": "user", "content": "and for 3 days?"},
        ]))
        .unwrap()
    }

    #[test]
    fn context_lines_name_roles_calls_and_results_and_drop_instructions() {
        let text = render_context(&history(), 10, Some("<think>plan</think>Sure."));
        assert_eq!(
            text,
            "[user] weather in Paris?\n\
             [assistant] Looking.\n  -> get_weather({\"city\":\"Paris\"})\n\
             [tool result c0] sunny\n\
             [user] and for 3 days?\n\
             [assistant] Sure.\n"
        );
        // The last n messages only; blank or thinking-only text adds no line.
        assert_eq!(
            render_context(&history(), 1, Some("<think>x</think>")),
            "[user] and for 3 days?\n"
        );
        assert!(render_context(&history(), 0, Some("Sure.")).is_empty());
    }

    #[test]
    fn a_long_line_is_cut_to_context_chars_with_an_ellipsis() {
        let long: Vec<Message> =
            serde_json::from_value(json!([{"role": "user", "content": "é".repeat(3_000)}]))
                .unwrap();
        let text = render_context(&long, 1, None);
        let line = text.lines().next().unwrap();
        assert_eq!(line.chars().count(), CONTEXT_CHARS + 1);
        assert!(line.starts_with("[user] é") && line.ends_with('…'));
    }

    #[test]
    fn the_prompt_holds_tool_schema_arguments_issues_context_and_the_rule() {
        let tool = CompiledTool::compile(
            "get_weather",
            "Weather for a city.",
            &json!({"type": "object", "properties": {"city": {"type": "string"},
                    "days": {"type": "integer"}}, "required": ["city"]}),
        )
        .unwrap();
        let issues = [Issue::new(
            IssueKind::WrongType,
            "/days",
            "expected an integer",
        )];
        let messages = history();
        let request = CorrectionRequest {
            tool: &tool,
            call_id: "c1",
            raw_arguments: r#"{"city": "Paris", "days": "three"}"#,
            arguments: None,
            issues: &issues,
            attempt: 1,
            messages: &messages,
            assistant_text: None,
        };
        let text = prompt(&request, &PromptOptions::default());
        for part in [
            "An AI agent produced an invalid call to the tool 'get_weather'.\n\n",
            "Tool description:\nWeather for a city.\n\n",
            "Tool parameters (JSON Schema):\n{",
            "Invalid arguments:\n{\"city\": \"Paris\", \"days\": \"three\"}\n\n",
            "What is wrong:\nget_weather was not called.",
            "Conversation so far (oldest first):\n[user] weather in Paris?\n",
            "[user] and for 3 days?\n\nRewrite the arguments",
        ] {
            assert!(text.contains(part), "missing {part:?} in:\n{text}");
        }
        assert!(!text.contains("SECRET") && !text.contains("DEV"));
        assert!(text.ends_with("never invent a missing value."));
        let json = prompt(
            &request,
            &PromptOptions {
                context_messages: 0,
                ask_for_json: true,
            },
        );
        assert!(!json.contains("Conversation so far"));
        assert!(json.ends_with("Answer with the arguments as one JSON object and nothing else."));
        // No description, no empty section.
        let bare = CompiledTool::compile("t", "", &json!({"type": "object"})).unwrap();
        let request = CorrectionRequest {
            tool: &bare,
            ..request
        };
        assert!(!prompt(&request, &PromptOptions::default()).contains("Tool description"));
    }
}
