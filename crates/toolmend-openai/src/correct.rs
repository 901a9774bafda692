//! A [`Corrector`] on the client: a small model rewrites a call the rules could not mend.
//!
//! One prompt per attempt: the tool's name, description and schema, the invalid
//! arguments, the issues, and the context (the last N messages before the assistant
//! message, system messages left out, each cut to 2,000 characters, then the assistant's
//! own text). Tool-calling mode binds the one tool and forces it; JSON mode asks for a
//! JSON object, for models without tool calling. The node re-validates every answer and
//! asks again with the new issues; this traffic never enters the agent's history.

use serde_json::json;
use toolmend::{
    RepairOptions,
    correct::{CorrectError, Correction, CorrectionRequest, Corrector, Usage},
    feedback,
    future::BoxFuture,
    protocol::{Message, Tool},
    repair::repair,
};

use crate::{ChatRequest, OpenAiClient};

/// How the correction model is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CorrectionMode {
    /// The tool bound and forced (`tool_choice`): the answer is the call's arguments.
    #[default]
    ToolCalling,
    /// `response_format: json_object`: the answer is the arguments as JSON text, for
    /// models without tool calling.
    Json,
    /// `response_format: json_schema` with the tool's schema (not `strict`: OpenAI's
    /// strict mode refuses most real schemas): for servers that constrain decoding to a
    /// schema (vLLM, llama.cpp, OpenAI).
    JsonSchema,
}

/// Each context message is cut to this many characters.
pub const CONTEXT_CHARS: usize = 2_000;

/// A correction model at an OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct ModelCorrector {
    client: OpenAiClient,
    model: String,
    mode: CorrectionMode,
    context_messages: usize,
}

impl ModelCorrector {
    /// `model` at the client's endpoint; tool-calling mode; 10 context messages.
    pub fn new(client: OpenAiClient, model: impl Into<String>) -> Self {
        ModelCorrector {
            client,
            model: model.into(),
            mode: CorrectionMode::ToolCalling,
            context_messages: 10,
        }
    }

    /// Tool-calling or JSON mode.
    #[must_use]
    pub fn mode(mut self, mode: CorrectionMode) -> Self {
        self.mode = mode;
        self
    }

    /// How many messages before the assistant message the model sees (0: none).
    #[must_use]
    pub fn context_messages(mut self, n: usize) -> Self {
        self.context_messages = n;
        self
    }

    /// The prompt for one attempt.
    pub fn prompt(&self, req: &CorrectionRequest<'_>) -> String {
        let tool = req.tool;
        let mut out = format!(
            "An AI agent produced an invalid call to the tool '{}'.\n\n",
            tool.name()
        );
        if !tool.description().is_empty() {
            out.push_str(&format!("Tool description:\n{}\n\n", tool.description()));
        }
        out.push_str(&format!(
            "Tool parameters (JSON Schema):\n{}\n\n",
            tool.parameters()
        ));
        out.push_str(&format!("Invalid arguments:\n{}\n\n", req.raw_arguments));
        out.push_str(&format!(
            "What is wrong:\n{}\n\n",
            feedback::render(tool.name(), req.issues).text
        ));
        let context = render_context(req.messages, self.context_messages, req.assistant_text);
        if !context.is_empty() {
            out.push_str("Conversation so far (oldest first):\n");
            out.push_str(&context);
            out.push('\n');
        }
        out.push_str(
            "Rewrite the arguments so that they match the schema. Keep the agent's intent; change \
             only what the schema requires. Use only values found in the invalid arguments or in \
             the conversation: never invent a missing value.",
        );
        if self.mode == CorrectionMode::Json {
            out.push_str(" Answer with the arguments as one JSON object and nothing else.");
        }
        out
    }
}

/// The last `n` messages (system and developer left out), one line each, cut to
/// [`CONTEXT_CHARS`], then the assistant's own text.
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
                    line.push_str(&format!(
                        "\n  -> {}({})",
                        tc.function.name, tc.function.arguments
                    ));
                }
                line
            }
            Message::Tool(t) => format!("[tool result {}] {}", t.tool_call_id, t.content.text()),
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
    if let Some(text) = assistant_text.filter(|t| !t.trim().is_empty()) {
        out.push_str(&cut(&format!("[assistant] {text}"), CONTEXT_CHARS));
        out.push('\n');
    }
    out
}

fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

impl Corrector for ModelCorrector {
    fn correct<'a>(
        &'a self,
        req: CorrectionRequest<'a>,
    ) -> BoxFuture<'a, Result<Correction, CorrectError>> {
        Box::pin(async move {
            let prompt = self.prompt(&req);
            let user: Message = serde_json::from_value(json!({"role": "user", "content": prompt}))
                .map_err(|e| CorrectError {
                    message: e.to_string(),
                    transient: false,
                })?;
            let tool = req.tool;
            let mut request = ChatRequest {
                model: self.model.clone(),
                messages: vec![user],
                ..ChatRequest::default()
            };
            match self.mode {
                CorrectionMode::ToolCalling => {
                    request.tools = vec![Tool::function(
                        tool.name(),
                        tool.description(),
                        tool.parameters().clone(),
                    )];
                    request.tool_choice =
                        Some(json!({"type": "function", "function": {"name": tool.name()}}));
                }
                CorrectionMode::Json => {
                    request.response_format = Some(json!({"type": "json_object"}));
                }
                CorrectionMode::JsonSchema => {
                    request.response_format = Some(json!({
                        "type": "json_schema",
                        "json_schema": {
                            "name": tool.name(),
                            "description": tool.description(),
                            "schema": tool.parameters(),
                            "strict": false,
                        },
                    }));
                }
            }
            let response = self.client.chat(&request).await.map_err(|e| CorrectError {
                transient: e.is_transient(),
                message: e.to_string(),
            })?;
            let usage = response.usage.map(|u| Usage {
                model: if response.model.is_empty() {
                    self.model.clone()
                } else {
                    response.model.clone()
                },
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
            });
            let text = match self.mode {
                CorrectionMode::ToolCalling => response
                    .message
                    .tool_calls
                    .as_ref()
                    .and_then(|c| c.first())
                    .map(|c| c.function.arguments.clone()),
                CorrectionMode::Json | CorrectionMode::JsonSchema => response.message.text(),
            };
            // The model's own JSON may need mending too; what it means is kept, and the
            // node re-validates it against the schema.
            let arguments = text.and_then(|t| {
                repair(&t, &RepairOptions::default())
                    .ok()
                    .filter(|r| r.alternatives.is_empty() && r.calls.len() == 1)
                    .map(|r| r.value().clone())
            });
            Ok(Correction { arguments, usage })
        })
    }
}
