//! [`Exchange`]: one chat-completions request on its way, what both answer paths need;
//! and how it re-asks the upstream (the pipeline's [`ReAsk`], in this wire). In a round
//! trip its `request` and `history` grow by each round's answer and results, so a
//! re-ask in a later round carries them too.

use std::{sync::Arc, time::Instant};

use axum::http::HeaderMap;
use serde_json::Value;
use toolmend::{
    Toolbox,
    future::BoxFuture,
    protocol::{AssistantMessage, Message, ToolCall},
};

use crate::{
    fronts::chat_completions::wire,
    pipeline::{
        request::RequestNotes,
        resolve::{ReAsk, ReAskFailure},
    },
    server::error::GatewayError,
    state::Gateway,
};

/// One request on its way: what both answer paths need.
pub(crate) struct Exchange {
    pub(crate) gw: Arc<Gateway>,
    /// The client's headers (auth and tracing go upstream).
    pub(crate) headers: HeaderMap,
    /// The body as it goes upstream.
    pub(crate) request: Value,
    /// Its messages, decoded: the history the answer is planned against.
    pub(crate) history: Vec<Message>,
    /// The request's compiled tools, when the answer is mended.
    pub(crate) toolbox: Option<Arc<Toolbox>>,
    pub(crate) notes: RequestNotes,
    pub(crate) started: Instant,
    /// The guard's session (by `guard.session_from`) and where it came from.
    pub(crate) session: Option<(String, crate::config::SessionSource)>,
    /// The request id (`x-request-id`): the trace id of every round of a round trip.
    pub(crate) request_id: String,
}

impl Exchange {
    /// The session as the guard stage takes it.
    pub(crate) fn session(&self) -> Option<(&str, crate::config::SessionSource)> {
        self.session.as_ref().map(|(s, src)| (s.as_str(), *src))
    }
}

impl ReAsk for Exchange {
    fn re_ask<'a>(
        &'a self,
        calls: Vec<ToolCall>,
        feedback: Vec<(String, String)>,
    ) -> BoxFuture<'a, Result<(AssistantMessage, Option<String>), ReAskFailure>> {
        Box::pin(async move {
            let body = wire::re_ask_body(&self.request, &calls, &feedback);
            let req = self.gw.upstream.post(wire::PATH, &self.headers, &body);
            let raw = self
                .gw
                .upstream
                .fetch(req)
                .await
                .map_err(|e| ReAskFailure::from_error(&e))?;
            let answer = serde_json::from_slice::<Value>(&raw).map_err(|e| {
                ReAskFailure::from_error(&GatewayError::UpstreamInvalidJson(e.to_string()))
            })?;
            wire::first_choice(&answer).ok_or_else(ReAskFailure::no_message)
        })
    }
}
