//! Entry points for the cargo-fuzz targets in `fuzz/` (`sse_assemble`, `gateway_request`,
//! `messages_front`, `responses_front`):
//! thin public wrappers over crate-private items, so the targets run the gateway's own
//! code. Not a stable API; hidden from the docs.

use std::{sync::Arc, time::Instant};

use axum::{body::Bytes, http::HeaderMap};
use serde_json::Value;
use toolmend::{Toolbox, conversation::Message};

use crate::fronts::chat_completions::{exchange::Exchange, sse, wire};

/// The streaming gate the gateway runs ([`toolmend::stream::ContentGate`], thinking
/// passed through): decides which streamed content may go out now and which is held
/// because it may be a call written into the text.
#[derive(Debug, Default)]
pub struct ContentGate(toolmend::stream::ContentGate);

impl ContentGate {
    /// A gate that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a content delta; returns the text to forward now.
    pub fn push(&mut self, delta: &str) -> String {
        self.0.push(delta)
    }

    /// At the end: the held text (a possible call), and the tail that was kept back.
    pub fn finish(&mut self) -> (Option<String>, String) {
        let end = self.0.finish();
        (end.held, end.tail)
    }
}

/// What `prepare` noted about a request it accepted.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The `x-toolmend-history` header value, if any.
    pub history: Option<String>,
    /// The body's `messages` were rewritten (sanitized or trimmed).
    pub changed: bool,
}

/// The request path (`wire::prepare`): `messages` decoded, the limits applied, the
/// history checked and, by `history.policy`, sanitized, refused or passed; then trimmed.
/// `Err` is the HTTP status of the answer the client would get.
///
/// # Errors
///
/// The status code of the refusal (400 for a bad or over-limit request).
pub fn prepare(gw: &crate::Gateway, body: &mut Value) -> Result<Prepared, u16> {
    wire::prepare(&gw.pipeline, body)
        .map(|(_, n)| Prepared {
            history: n.history,
            changed: n.changed,
        })
        .map_err(|e| e.status().as_u16())
}

/// [`prepare`] as the chat front runs it on the client's bytes: the body read with its
/// `messages` and `tools` left as bytes (`body::Request`), the history read typed from
/// them, then the whole body as it would be written. `Err` is the HTTP status of the
/// answer the client would get (a body that is no JSON object included).
///
/// # Errors
///
/// The status code of the refusal.
pub fn prepare_bytes(gw: &crate::Gateway, body: &[u8]) -> Result<(Value, Prepared), u16> {
    let status = |e: crate::server::error::GatewayError| e.status().as_u16();
    let mut request =
        crate::fronts::chat_completions::body::Request::read(&Bytes::copy_from_slice(body))
            .map_err(status)?;
    let (_, notes) = wire::prepare_request(&gw.pipeline, &mut request).map_err(status)?;
    let whole = request.full().map_err(status)?.into_owned();
    Ok((
        whole,
        Prepared {
            history: notes.history,
            changed: notes.changed,
        },
    ))
}

/// The request's `tools` compiled through the gateway's `ToolCache` (its limits included).
///
/// # Errors
///
/// The tools the cache refuses (bad schema, past `limits.max_tools` …), as the message the
/// client would get.
pub fn tools(gw: &crate::Gateway, tools: &Value) -> Result<Arc<Toolbox>, String> {
    crate::fronts::chat_completions::wire::toolbox(&gw.pipeline.tools, tools)
        .map_err(|e| e.to_string())
}

/// The streaming answer (`sse::respond`) to `request`, read whole: the request is sent
/// to the configured upstream and its SSE answer goes through the gateway's stream
/// transformer (mended against `toolbox` when there is one). Returns the status and body.
pub async fn respond_stream(
    gw: Arc<crate::Gateway>,
    request: Value,
    toolbox: Option<Arc<Toolbox>>,
) -> (u16, Bytes) {
    let history: Vec<Message> =
        serde_json::from_value(request["messages"].clone()).unwrap_or_default();
    let resp = sse::respond(
        Exchange {
            gw,
            headers: HeaderMap::new(),
            request: crate::fronts::chat_completions::body::Request::whole(request),
            history,
            toolbox,
            notes: Default::default(),
            started: Instant::now(),
            session: None,
            request_id: "fuzz".to_owned(),
            original: None,
        },
        None,
    )
    .await;
    let status = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    (status, body)
}

/// The Messages front's request translation (`convert::request_to_chat`): the chat
/// request for a Messages body, or the status of the refusal.
///
/// # Errors
///
/// The status code of the refusal (400).
pub fn messages_to_chat(body: &Value) -> Result<Value, u16> {
    crate::fronts::messages::convert::request_to_chat(body)
        .map(|t| t.request)
        .map_err(|e| e.status().as_u16())
}

/// A `messages` upstream's answer (raw bytes) read as a chat completion, and that
/// completion's message written back as the next Messages request would carry it: the
/// chat completion, and the Messages request of a conversation of that one message.
///
/// # Errors
///
/// The status of the refusal (502: not JSON, or not a Messages message).
pub fn messages_answer_round_trip(raw: &[u8]) -> Result<(Value, Value), u16> {
    let api = crate::config::UpstreamApi::Messages;
    let completion =
        crate::upstreams::completion_from(api, raw).map_err(|e| e.status().as_u16())?;
    let chat = serde_json::json!({"model": "m",
        "messages": [completion["choices"][0]["message"].clone()]});
    Ok((
        completion,
        crate::upstreams::request_for(api, &chat).unwrap_or(chat),
    ))
}

/// A `responses` upstream's answer read as a chat completion, and its message written
/// back as the next Responses request would carry it.
///
/// # Errors
///
/// The status of the refusal (502: not JSON, or not a Responses object).
pub fn responses_answer_round_trip(raw: &[u8]) -> Result<(Value, Value), u16> {
    let api = crate::config::UpstreamApi::Responses;
    let completion =
        crate::upstreams::completion_from(api, raw).map_err(|e| e.status().as_u16())?;
    let chat = serde_json::json!({"model": "m",
        "messages": [completion["choices"][0]["message"].clone()]});
    Ok((
        completion,
        crate::upstreams::request_for(api, &chat).unwrap_or(chat),
    ))
}

/// The Messages front's stream translation: the chat front's SSE bytes in, Anthropic's
/// events out.
#[derive(Debug)]
pub struct MessagesStream(
    crate::fronts::translate::ChatFrames<crate::fronts::messages::stream::Translator>,
);

impl Default for MessagesStream {
    fn default() -> Self {
        Self::new()
    }
}

impl MessagesStream {
    /// A translation that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self(crate::fronts::translate::ChatFrames::new(
            crate::fronts::messages::stream::Translator::new(Vec::new()),
        ))
    }

    /// The events for the next bytes of the chat stream.
    pub fn feed(&mut self, bytes: &[u8]) -> String {
        self.0.feed(bytes)
    }

    /// The closing events.
    pub fn finish(&mut self) -> String {
        self.0.finish()
    }
}

/// The Responses front's request translation: the chat request for a Responses body, or
/// the status of the refusal.
///
/// # Errors
///
/// The status code of the refusal (400).
pub fn responses_to_chat(body: &Value) -> Result<Value, u16> {
    crate::fronts::responses::convert::request_to_chat(body)
        .map(|t| t.request)
        .map_err(|e| e.status().as_u16())
}

/// The Responses front's stream translation: the chat front's SSE bytes in, the
/// Responses events out.
#[derive(Debug)]
pub struct ResponsesStream(
    crate::fronts::translate::ChatFrames<crate::fronts::responses::stream::Translator>,
);

impl Default for ResponsesStream {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponsesStream {
    /// A translation that has seen nothing (the request echoed is empty).
    #[must_use]
    pub fn new() -> Self {
        Self(crate::fronts::translate::ChatFrames::new(
            crate::fronts::responses::stream::Translator::new(serde_json::json!({}), Vec::new()),
        ))
    }

    /// The events for the next bytes of the chat stream.
    pub fn feed(&mut self, bytes: &[u8]) -> String {
        self.0.feed(bytes)
    }

    /// The closing events.
    pub fn finish(&mut self) -> String {
        self.0.finish()
    }
}
