//! An OpenAI-compatible chat client: `POST {base_url}/chat/completions`, as JSON or as a
//! server-sent-event stream put back together, with tools, `tool_choice`,
//! `response_format`, timeouts, token usage, and errors that keep the provider's status
//! and body. [`OpenAiModel`] is the agent loop's [`ChatModel`] over it;
//! [`ModelCorrector`] is the tool node's correction model.

mod correct;

use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use serde_json::{Map, Value};
use toolmend::{
    agent::{ChatModel, ModelError},
    conversation::{AssistantMessage, Message, Tool},
    future::BoxFuture,
    stream::Assembler,
};

pub use correct::{CONTEXT_CHARS, CorrectionMode, ModelCorrector, render_context};

/// What a chat request carries besides the messages.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChatRequest {
    /// The model name.
    pub model: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tool definitions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// `"auto"`, `"none"`, `"required"`, or `{"type": "function", "function": {"name": …}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// `{"type": "json_object"}` or `{"type": "json_schema", "json_schema": {…}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Completion token limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Any other field of the request, sent as is.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Token usage as the provider reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Their sum.
    #[serde(default)]
    pub total_tokens: u64,
}

/// One completion.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The assistant message (first choice).
    pub message: AssistantMessage,
    /// Why it stopped (`stop`, `tool_calls`, `length` …).
    pub finish_reason: Option<String>,
    /// Token usage, when reported.
    pub usage: Option<Usage>,
    /// The model that answered.
    pub model: String,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The provider answered with an error status; its body is kept.
    #[error("HTTP {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The error message (`error.message` of the body, else the body).
        message: String,
        /// The body as sent.
        body: String,
    },
    /// No answer in time.
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The connection failed.
    #[error("transport: {0}")]
    Transport(String),
    /// The answer was not a chat completion.
    #[error("unreadable answer: {0}")]
    Decode(String),
    /// An `https://` base URL in a build without the `tls` feature: the build's fault,
    /// not the server's (the URL is redacted).
    #[error(
        "{0} is an https:// URL, but this build has no TLS: rebuild with the `tls` feature \
         (on by default), or use an http:// URL"
    )]
    NoTls(String),
}

impl ClientError {
    /// True for failures worth retrying later: 408, 409, 429, 5xx, timeouts, transport.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Status { status, .. } => {
                matches!(status, 408 | 409 | 429) || *status >= 500
            }
            ClientError::Timeout(_) | ClientError::Transport(_) => true,
            ClientError::Decode(_) | ClientError::NoTls(_) => false,
        }
    }
}

/// An OpenAI-compatible client.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    timeout: Duration,
}

impl OpenAiClient {
    /// A client for `base_url` (e.g. `https://api.openai.com/v1`), 60 s timeout.
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be built, or `base_url` is `https://` in a build without
    /// the `tls` feature ([`ClientError::NoTls`]: said now rather than on every request).
    pub fn new(base_url: impl Into<String>) -> Result<Self, ClientError> {
        let base_url: String = base_url.into();
        if !cfg!(feature = "tls") && is_https(&base_url) {
            return Err(ClientError::NoTls(toolmend::redact::url(base_url.trim())));
        }
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(OpenAiClient {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: None,
            timeout: Duration::from_secs(60),
        })
    }

    /// Sends `Authorization: Bearer {key}`.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The whole-request timeout (for a stream: until the last chunk).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .post(format!("{}/chat/completions", self.base_url))
            .json(body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        req
    }

    /// One completion, as JSON.
    pub async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ClientError> {
        let body = serde_json::to_value(request).map_err(|e| ClientError::Decode(e.to_string()))?;
        let work = async {
            let response = self.post(&body).send().await.map_err(transport)?;
            let status = response.status().as_u16();
            let text = response.text().await.map_err(transport)?;
            if !(200..300).contains(&status) {
                return Err(status_error(status, text));
            }
            parse_completion(&text)
        };
        tokio::time::timeout(self.timeout, work)
            .await
            .unwrap_or(Err(ClientError::Timeout(self.timeout)))
    }

    /// One completion, streamed (`stream: true`, usage included) and put back together by
    /// [`toolmend::stream::Assembler`]: content joined, tool-call fragments joined by
    /// `index` (a new `id` on an index starts a call of its own; a fragment without
    /// `index` starts the next call when its `id` is new, else feeds the current one).
    pub async fn chat_streamed(&self, request: &ChatRequest) -> Result<ChatResponse, ClientError> {
        let mut body =
            serde_json::to_value(request).map_err(|e| ClientError::Decode(e.to_string()))?;
        body["stream"] = Value::Bool(true);
        body["stream_options"] = serde_json::json!({"include_usage": true});
        let work = async {
            let response = self.post(&body).send().await.map_err(transport)?;
            let status = response.status().as_u16();
            if !(200..300).contains(&status) {
                let text = response.text().await.map_err(transport)?;
                return Err(status_error(status, text));
            }
            let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
            let mut acc = Accumulator::default();
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| ClientError::Decode(e.to_string()))?;
                let Some(data) = event.data else { continue };
                if data.trim() == "[DONE]" {
                    break;
                }
                let chunk: Value =
                    serde_json::from_str(&data).map_err(|e| ClientError::Decode(e.to_string()))?;
                acc.add(&chunk)?;
            }
            Ok(acc.finish())
        };
        tokio::time::timeout(self.timeout, work)
            .await
            .unwrap_or(Err(ClientError::Timeout(self.timeout)))
    }
}

fn transport(e: reqwest::Error) -> ClientError {
    ClientError::Transport(e.to_string())
}

fn status_error(status: u16, body: String) -> ClientError {
    let message = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.clone());
    ClientError::Status {
        status,
        message,
        body,
    }
}

fn parse_completion(text: &str) -> Result<ChatResponse, ClientError> {
    let v: Value = serde_json::from_str(text).map_err(|e| ClientError::Decode(e.to_string()))?;
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| ClientError::Decode("no choices in the answer".to_owned()))?;
    let mut message = choice
        .get("message")
        .cloned()
        .ok_or_else(|| ClientError::Decode("no message in the first choice".to_owned()))?;
    if let Some(obj) = message.as_object_mut() {
        obj.remove("role");
    }
    let message: AssistantMessage =
        serde_json::from_value(message).map_err(|e| ClientError::Decode(e.to_string()))?;
    Ok(ChatResponse {
        message,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        usage: v
            .get("usage")
            .and_then(|u| serde_json::from_value(u.clone()).ok()),
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

/// Joins stream chunks into one message: the first choice's deltas through the core's
/// assembler ([`toolmend::stream`]: calls joined by `index` and `id`, content kept),
/// the model and usage from the chunks around them.
#[derive(Debug, Default)]
struct Accumulator {
    assembler: Assembler,
    usage: Option<Usage>,
    model: String,
}

impl Accumulator {
    fn add(&mut self, chunk: &Value) -> Result<(), ClientError> {
        if let Some(m) = chunk.get("model").and_then(Value::as_str) {
            m.clone_into(&mut self.model);
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = serde_json::from_value(u.clone()).ok();
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Ok(());
        };
        if let Some(delta) = choice.get("delta") {
            self.assembler
                .push_delta(delta)
                .map_err(|e| ClientError::Decode(e.to_string()))?;
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.assembler.set_finish_reason(reason);
        }
        Ok(())
    }

    fn finish(mut self) -> ChatResponse {
        let done = self.assembler.finish();
        ChatResponse {
            message: done.message,
            finish_reason: done.finish_reason,
            usage: self.usage,
            model: self.model,
        }
    }
}

/// The agent loop's model over an OpenAI-compatible endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    client: OpenAiClient,
    model: String,
    stream: bool,
}

impl OpenAiModel {
    /// `model` at the client's endpoint; non-streaming.
    pub fn new(client: OpenAiClient, model: impl Into<String>) -> Self {
        OpenAiModel {
            client,
            model: model.into(),
            stream: false,
        }
    }

    /// Ask for streamed answers (and join them).
    #[must_use]
    pub fn streaming(mut self, on: bool) -> Self {
        self.stream = on;
        self
    }
}

impl ChatModel for OpenAiModel {
    fn complete<'a>(
        &'a self,
        messages: &'a [Message],
        tools: &'a [Tool],
    ) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        Box::pin(async move {
            let request = ChatRequest {
                model: self.model.clone(),
                messages: messages.to_vec(),
                tools: tools.to_vec(),
                ..ChatRequest::default()
            };
            let answer = if self.stream {
                self.client.chat_streamed(&request).await
            } else {
                self.client.chat(&request).await
            };
            answer.map(|r| r.message).map_err(|e| ModelError {
                status: match &e {
                    ClientError::Status { status, .. } => Some(*status),
                    _ => None,
                },
                message: match &e {
                    ClientError::Status { message, .. } => message.clone(),
                    other => other.to_string(),
                },
            })
        })
    }
}

/// Whether `url` asks for TLS (its scheme, in any case).
fn is_https(url: &str) -> bool {
    url.trim()
        .split_once("://")
        .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("https"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Accumulator;

    #[test]
    fn streamed_calls_are_joined_by_the_core_assembler() {
        // Fragments without `index` (some compatible servers): a new id starts the next
        // call, a fragment without id feeds the current one; the gateway reads them alike.
        let mut acc = Accumulator::default();
        for chunk in [
            json!({"model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"x\""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": ": 1}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                   "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}),
        ] {
            acc.add(&chunk).unwrap();
        }
        let r = acc.finish();
        let calls: Vec<(Option<&str>, &str, &str)> = r
            .message
            .tool_calls
            .iter()
            .flatten()
            .map(|c| (c.id.as_deref(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [(Some("a"), "f", "{\"x\": 1}"), (Some("b"), "g", "{}")]
        );
        assert_eq!(r.message.text().as_deref(), Some("Hi"));
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            (r.model.as_str(), r.usage.map(|u| u.total_tokens)),
            ("m", Some(3))
        );
    }
}

/// Built without `tls` (`cargo test -p toolmend-openai --no-default-features`).
#[cfg(all(test, not(feature = "tls")))]
mod no_tls {
    use super::{ClientError, OpenAiClient};

    #[test]
    fn an_https_base_url_is_refused_when_the_client_is_made() {
        let err = OpenAiClient::new(" https://user:secret@api.example/v1 ").unwrap_err();
        assert_eq!(err, ClientError::NoTls("https://api.example/v1".to_owned()));
        let text = err.to_string();
        assert!(text.contains("this build has no TLS"), "{text}");
        assert!(text.contains("`tls` feature"), "{text}");
        assert!(!text.contains("secret"), "{text}");
        assert!(!err.is_transient());
        assert!(matches!(
            OpenAiClient::new("HTTPS://api.example/v1"),
            Err(ClientError::NoTls(_))
        ));
        // Plain HTTP needs no TLS.
        assert!(OpenAiClient::new("http://127.0.0.1:8000/v1").is_ok());
    }
}
