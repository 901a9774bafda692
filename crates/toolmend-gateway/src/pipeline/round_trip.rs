//! The round trip, front-neutral: when the model's answer (planned, resolved, guarded)
//! calls tools the gateway serves itself (`server_side = true`), the gateway runs them
//! through the tool node (one result per call id; the request id as the trace id, sent to
//! each tool service as `X-Trace-ID`), appends the answer and the results to the
//! request's messages, and the front asks the model again, until an answer calls none.
//! Bounded by `round_trip.max_rounds` (model answers per client request) and
//! `round_trip.max_secs`; at a bound the client gets a 504 `toolmend_round_trip_limit`
//! naming it and the rounds: a call is never dropped in silence.
//!
//! An answer that calls server-side tools *and* the client's own: the server-side calls
//! run (their effects happen, their results are counted and logged), and the client gets
//! the answer with only its own calls; the model does not see those results, since the
//! client's next request carries only its own calls and results (`unseen=` in
//! `x-toolmend-round-trip`; docs/gateway.md).

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use toolmend::{
    Toolbox,
    conversation::{AssistantMessage, Message, ToolCall},
    drive::{CallReport, Resolved},
    node::ResultStatus,
};

use crate::{
    metrics as m,
    pipeline::{Pipeline, report::Summary},
    server::error::GatewayError,
};

/// One client request's round trip.
#[derive(Debug)]
pub(crate) struct RoundTrip {
    trace_id: Arc<str>,
    started: Instant,
    deadline: Instant,
    max_rounds: u32,
    max_secs: f64,
    /// Model answers received so far.
    pub(crate) rounds: u32,
    /// Server-side calls answered (run, or answered with feedback or a refusal).
    pub(crate) server_calls: usize,
    /// Of those, answered with an error result.
    pub(crate) errors: usize,
    /// Server-side calls of the final answer (a mixed one) whose results the model will
    /// not see.
    pub(crate) unseen: usize,
    /// Time spent running tools.
    pub(crate) tool_time: Duration,
    recorded: bool,
}

/// What to do after one answer.
#[derive(Debug)]
pub(crate) enum Round {
    /// Give the client this answer (it calls no server-side tool, or only alongside the
    /// client's own calls, which are all it keeps).
    Final(Box<Resolved>),
    /// Ask the model again with these messages: the request's, the answer, its results.
    Again(Vec<Message>),
}

impl Pipeline {
    /// The round trip of a request that arrived at `started`, whose id is `trace_id`;
    /// `None` when no server-side tool is configured.
    pub(crate) fn round_trip(&self, trace_id: &str, started: Instant) -> Option<RoundTrip> {
        self.server_tools.as_ref().filter(|s| s.any_server_side())?;
        let rt = &self.round_trip;
        Some(RoundTrip {
            trace_id: Arc::from(trace_id),
            started,
            deadline: started + rt.max_time(),
            max_rounds: rt.max_rounds,
            max_secs: rt.max_secs,
            rounds: 0,
            server_calls: 0,
            errors: 0,
            unseen: 0,
            tool_time: Duration::ZERO,
            recorded: false,
        })
    }

    /// One round: `mended` is the model's answer (choice 0, after resolve and guard) to
    /// a request whose messages are `history`, planned against `toolbox`; the upstream's
    /// answer arrived at `answered_at`.
    ///
    /// # Errors
    ///
    /// A bound reached with server-side calls still to run (504
    /// `toolmend_round_trip_limit`).
    pub(crate) async fn round(
        &self,
        trip: &mut RoundTrip,
        history: &[Message],
        toolbox: &Toolbox,
        mut mended: Resolved,
        answered_at: Instant,
    ) -> Result<Round, GatewayError> {
        trip.rounds += 1;
        let Some(st) = &self.server_tools else {
            return Ok(Round::Final(Box::new(mended)));
        };
        // The resolved tool of each call (the plan's), else the name as sent.
        let tool_of: HashMap<&str, &str> = mended
            .calls
            .iter()
            .map(|c| (c.id.as_str(), c.tool.as_str()))
            .collect();
        let (server, client): (Vec<ToolCall>, Vec<ToolCall>) = mended
            .message
            .tool_calls
            .clone()
            .unwrap_or_default()
            .into_iter()
            .partition(|c| {
                let name =
                    c.id.as_deref()
                        .and_then(|id| tool_of.get(id).copied())
                        .unwrap_or(&c.name);
                st.is_server_side(name)
            });
        if server.is_empty() {
            trip.record();
            return Ok(Round::Final(Box::new(mended)));
        }
        let names = {
            let mut n: Vec<&str> = server.iter().map(|c| c.name.as_str()).collect();
            n.dedup();
            n.join(", ")
        };
        let mixed = !client.is_empty();
        if !mixed && trip.rounds >= trip.max_rounds {
            trip.record();
            return Err(GatewayError::RoundTripLimit(format!(
                "the round trip reached round_trip.max_rounds ({}): the model's answer in \
                 round {} still calls server-side tools ({names}), which were not run; {}",
                trip.max_rounds,
                trip.rounds,
                trip.counts()
            )));
        }
        if Instant::now() >= trip.deadline {
            trip.record();
            return Err(trip.out_of_time(&format!("with server-side calls ({names}) still to run")));
        }
        let server_ids: HashSet<String> = server.iter().filter_map(|c| c.id.clone()).collect();
        let mut asked = mended.message.clone();
        if mixed {
            // The client's calls are not the node's to answer; the text goes to the client.
            asked = AssistantMessage {
                content: Some(None),
                ..asked
            };
        }
        asked.tool_calls = Some(server);
        let mut messages = history.to_vec();
        messages.push(Message::Assistant(asked));
        let t = Instant::now();
        let running = st.run_round(&messages, &trip.trace_id, trip.deadline, answered_at);
        // The round's span (the `otel` feature): docs/gateway.md, "Tracing".
        #[cfg(feature = "otel")]
        let running = tracing::Instrument::instrument(
            running,
            crate::telemetry::tools_round_span(trip.rounds, server_ids.len()),
        );
        let out = running.await?;
        trip.tool_time += t.elapsed();
        let errors = out
            .results
            .iter()
            .filter(|r| r.status == ResultStatus::Error)
            .count();
        trip.server_calls += out.results.len();
        trip.errors += errors;
        tracing::info!(
            trace_id = %trip.trace_id,
            round = trip.rounds,
            server_calls = out.results.len(),
            errors,
            client_calls = client.len(),
            tools = %names,
            took_ms = t.elapsed().as_secs_f64() * 1e3,
            "round trip: server-side calls answered"
        );
        if mixed {
            trip.unseen += out.results.len();
            let (server_reports, client_reports): (Vec<CallReport>, Vec<CallReport>) =
                std::mem::take(&mut mended.calls)
                    .into_iter()
                    .partition(|c| server_ids.contains(&c.id));
            self.count_calls(server_reports, toolbox);
            mended.calls = client_reports;
            mended.message.tool_calls = Some(client);
            mended.changed = true;
            trip.record();
            return Ok(Round::Final(Box::new(mended)));
        }
        self.count_calls(mended.calls, toolbox);
        out.apply_to(&mut messages);
        Ok(Round::Again(messages))
    }

    /// The call metrics of an answer the client does not get (an earlier round's).
    fn count_calls(&self, calls: Vec<CallReport>, toolbox: &Toolbox) {
        let gone = Resolved {
            calls,
            ..Resolved::default()
        };
        Summary::default().add(&gone, toolbox, &self.labels);
    }
}

impl RoundTrip {
    /// `fut` (the next round's upstream answer) within what is left of
    /// `round_trip.max_secs`.
    pub(crate) async fn bounded<T>(
        &mut self,
        fut: impl Future<Output = Result<T, GatewayError>>,
    ) -> Result<T, GatewayError> {
        match tokio::time::timeout_at(self.deadline.into(), fut).await {
            Ok(r) => r,
            Err(_) => {
                self.record();
                Err(self.out_of_time(&format!(
                    "waiting for the model's answer in round {}",
                    self.rounds + 1
                )))
            }
        }
    }

    fn out_of_time(&self, what: &str) -> GatewayError {
        GatewayError::RoundTripLimit(format!(
            "the round trip took longer than round_trip.max_secs ({} s), {what}; {}",
            self.max_secs,
            self.counts()
        ))
    }

    fn counts(&self) -> String {
        format!(
            "rounds={}; server_calls={}; errors={}",
            self.rounds, self.server_calls, self.errors
        )
    }

    /// The metrics of a round trip that ran server-side calls (once).
    fn record(&mut self) {
        if self.recorded || self.server_calls == 0 {
            return;
        }
        self.recorded = true;
        m::round_trip(self.rounds, self.started.elapsed());
    }

    /// `x-toolmend-round-trip: rounds=3; server_calls=2; errors=0` (`; unseen=1` after a
    /// mixed answer).
    pub(crate) fn header(&self) -> (&'static str, String) {
        let mut v = self.counts();
        if self.unseen > 0 {
            v.push_str(&format!("; unseen={}", self.unseen));
        }
        ("x-toolmend-round-trip", v)
    }

    /// The same as JSON (the report at the end of a stream).
    pub(crate) fn to_json(&self) -> Value {
        json!({"rounds": self.rounds, "server_calls": self.server_calls, "errors": self.errors,
            "unseen": self.unseen})
    }
}
