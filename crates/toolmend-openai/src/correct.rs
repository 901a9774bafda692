//! A [`Corrector`] on the client: a small model rewrites a call the rules could not mend.
//!
//! One prompt per attempt, the core's ([`toolmend::correct::prompt`]): the tool's name,
//! description and schema, the invalid arguments, the issues, and the context (the last N
//! messages before the assistant message, system messages left out, each cut to 2,000
//! characters, then the assistant's own text). Tool-calling mode binds the one tool and
//! forces it; JSON mode asks for a JSON object, for models without tool calling. The
//! answer is read with [`toolmend::correct::read_answer`]; the node re-validates it and
//! asks again with the new issues; this traffic never enters the agent's history.

use serde_json::json;
pub use toolmend::correct::{CONTEXT_CHARS, render_context};
use toolmend::{
    conversation::{Message, Tool},
    correct::{self, CorrectError, Correction, CorrectionRequest, Corrector, PromptOptions, Usage},
    future::BoxFuture,
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

    /// The prompt for one attempt: the core's one prompt ([`toolmend::correct::prompt`]),
    /// asking for JSON text in JSON mode.
    pub fn prompt(&self, req: &CorrectionRequest<'_>) -> String {
        correct::prompt(
            req,
            &PromptOptions {
                context_messages: self.context_messages,
                ask_for_json: self.mode == CorrectionMode::Json,
            },
        )
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
                    .map(|c| c.arguments.clone()),
                CorrectionMode::Json | CorrectionMode::JsonSchema => response.message.text(),
            };
            // The model's own JSON may need mending too; what it means is kept, and the
            // node re-validates it against the schema.
            let arguments = text.as_deref().and_then(correct::read_answer);
            Ok(Correction { arguments, usage })
        })
    }
}
