//! [`Exchange`]: one chat-completions request on its way, what both answer paths need;
//! and how it re-asks the upstream (the driver's [`ReAsk`], in this wire). In a round
//! trip its `request` and `history` grow by each round's answer and results, so a
//! re-ask in a later round carries them too.

use std::{sync::Arc, time::Instant};

use axum::http::HeaderMap;
use serde_json::Value;
use toolmend::{
    Toolbox,
    conversation::Message,
    drive::{ReAnswer, ReAsk, ReAskFailure, ReAskRequest},
    future::BoxFuture,
};

use crate::{
    fronts::chat_completions::wire,
    pipeline::{answer::re_ask_failure, request::RequestNotes},
    state::Gateway,
    upstreams::{self, Original},
};

/// One request on its way: what both answer paths need.
pub(crate) struct Exchange {
    pub(crate) gw: Arc<Gateway>,
    /// The client's headers (auth and tracing go upstream).
    pub(crate) headers: HeaderMap,
    /// The body as it goes upstream (its history and tools may still be the client's
    /// bytes: [`Request`](super::body::Request) says how to read it).
    pub(crate) request: super::body::Request,
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
    /// The client's own body for an upstream of its API, to go up as it came in the
    /// first round (`upstreams::Original`).
    pub(crate) original: Option<Original>,
}

impl Exchange {
    /// Logs the calls of `resolved`, an answer of this request, when `[events]` is on:
    /// under the guard's session, else the one the request names itself, within its
    /// `[access]` client as the guard's are.
    pub(crate) fn log_calls(&self, resolved: &toolmend::drive::Resolved, toolbox: &Toolbox) {
        let Some(log) = &self.gw.pipeline.events else {
            return;
        };
        let session = self.session().map(|(s, _)| s.to_owned()).or_else(|| {
            crate::fronts::session_hints(&self.headers, self.request.partial())
                .named()
                .map(crate::pipeline::guard::client_scoped)
        });
        let client = crate::server::access::current_client();
        log.answer_calls(
            super::FRONT,
            session,
            client.as_deref(),
            self.request.partial().get("model").and_then(Value::as_str),
            &self.request_id,
            resolved,
            toolbox,
        );
    }

    /// The session as the guard stage takes it.
    pub(crate) fn session(&self) -> Option<(&str, crate::config::SessionSource)> {
        self.session.as_ref().map(|(s, src)| (s.as_str(), *src))
    }
}

impl ReAsk for Exchange {
    fn re_ask(&self, request: ReAskRequest) -> BoxFuture<'_, Result<ReAnswer, ReAskFailure>> {
        // The re-ask's span (the `otel` feature): docs/gateway.md, "Tracing".
        #[cfg(feature = "otel")]
        let span = crate::telemetry::re_ask_span(request.round, request.calls.len());
        let asking = async move {
            let full = self.request.full().map_err(|e| re_ask_failure(&e))?;
            let body = wire::re_ask_body(&full, &request.calls, &request.results);
            let api = self.gw.upstream.api();
            let body = upstreams::request_for(api, &body).unwrap_or(body);
            let req = self
                .gw
                .upstream
                .post(upstreams::path(api), &self.headers, &body);
            let raw = self
                .gw
                .upstream
                .fetch(req)
                .await
                .map_err(|e| re_ask_failure(&e))?;
            let answer = upstreams::completion_from(api, &raw).map_err(|e| re_ask_failure(&e))?;
            let (message, finish) =
                wire::first_choice(&answer).ok_or_else(ReAskFailure::no_message)?;
            Ok(ReAnswer {
                message,
                cut_off: wire::cut_off(finish.as_deref()),
            })
        };
        #[cfg(feature = "otel")]
        let asking = tracing::Instrument::instrument(asking, span);
        Box::pin(asking)
    }
}
