//! [`NetTool`]: one tool behind the network as a [`toolmend::node::Tool`]. Above the
//! transport: the SLA route (primary, probe, backup), the four latency histograms,
//! shaping, and the metadata kept beside the result. Every way a service can fail ends
//! in an error result for this call (the node answers every id exactly once); a dirty
//! answer is dropped here, counted and logged, and never reaches the model.

use std::{
    sync::{Arc, OnceLock},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};
use toolmend::{
    node::{BoxFuture, CallContext, Fault, Tool, ToolError, ToolOutput},
    redact,
};

use crate::{
    http::HttpTransport,
    mcp::McpConnection,
    shape::Shaper,
    sla::{self, Route, Sla, Transition},
    transport::{ExchangeNotes, Reply, ServiceRequest, TransportError},
};

/// How a tool is reached.
#[derive(Debug)]
pub(crate) enum Target {
    Http(Box<HttpTransport>),
    Mcp {
        conn: Arc<McpConnection>,
        remote: String,
    },
}

/// A tool behind the network.
#[derive(Debug)]
pub struct NetTool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
    pub(crate) target: Target,
    pub(crate) shaper: Shaper,
    /// Per attempt.
    pub(crate) timeout: Duration,
    pub(crate) retries: u32,
    pub(crate) sla: Option<Sla>,
    pub(crate) backup: OnceLock<Arc<NetTool>>,
    pub(crate) server_side: bool,
    pub(crate) accept_truncated: bool,
    pub(crate) limits: Option<toolmend::guard::ToolRules>,
    /// `http` or `mcp`, for metadata and docs.
    pub(crate) kind: &'static str,
}

/// How much longer than the transport's own limit the node waits for a call (see
/// [`NetTool::total_timeout`]).
pub const TIMEOUT_MARGIN: Duration = Duration::from_millis(250);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl NetTool {
    /// The name the model calls it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True when the gateway runs it itself.
    pub fn server_side(&self) -> bool {
        self.server_side
    }

    /// The flood limits the tools file declares on it (`[tools.limits]`).
    pub fn limits(&self) -> Option<&toolmend::guard::ToolRules> {
        self.limits.as_ref()
    }

    /// `http` or `mcp`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The backup tool, if one is set.
    pub fn backup(&self) -> Option<&Arc<NetTool>> {
        self.backup.get()
    }

    /// True while its calls go to the backup.
    pub fn degraded(&self) -> bool {
        self.sla.as_ref().is_some_and(Sla::degraded)
    }

    /// The time the transport may take for a call, retries included: each attempt, plus
    /// the pauses between them (at most 1 s each).
    fn transport_timeout(&self) -> Duration {
        let attempts = self.retries + 1;
        self.timeout * attempts + Duration::from_secs(u64::from(self.retries))
    }

    /// The time a call may take in all (the node's timeout for it): the transport's own
    /// limit (or the backup's, when that is longer: a degraded call goes there), plus a
    /// margin. The margin lets the transport's timer fire first, so a timeout is counted,
    /// logged and fed to the SLA here, and a hanging primary degrades to its backup
    /// instead of being cut off by the node where nothing is recorded.
    pub fn total_timeout(&self) -> Duration {
        let own = self.transport_timeout();
        let longest = self
            .backup
            .get()
            .map_or(own, |b| own.max(b.transport_timeout()));
        longest + TIMEOUT_MARGIN
    }

    /// Runs one call at the service (no SLA routing, no shaping).
    async fn serve(
        &self,
        args: &Value,
        call_id: &str,
        trace_id: &str,
    ) -> Result<(Reply, ExchangeNotes), TransportError> {
        match &self.target {
            Target::Http(t) => {
                let req = ServiceRequest {
                    function: &self.name,
                    call_id,
                    trace_id,
                    arguments: args,
                    timeout: self.timeout,
                };
                t.call(&req).await
            }
            Target::Mcp { conn, remote } => {
                let req = ServiceRequest {
                    function: remote,
                    call_id,
                    trace_id,
                    arguments: args,
                    timeout: self.timeout,
                };
                conn.call(&req).await
            }
        }
    }

    /// A call in its span: `execute_tool {name}` (the OpenTelemetry GenAI conventions'
    /// tool span), target `toolmend::trace`, so a gateway exporting traces sends it as a
    /// child of the round that ran it. Never an argument or a result in it.
    async fn run_traced(&self, args: Value, ctx: CallContext) -> Result<ToolOutput, ToolError> {
        use tracing::{Instrument as _, field::Empty};
        let span = tracing::info_span!(
            target: "toolmend::trace",
            "execute_tool",
            otel.name = format!("execute_tool {}", self.name),
            otel.kind = "internal",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %self.name,
            gen_ai.tool.call.id = %ctx.call_id,
            gen_ai.tool.type = "function",
            toolmend.tool.kind = self.kind,
            toolmend.tool.served_by = Empty,
            error.type = Empty,
        );
        self.run(args, ctx).instrument(span).await
    }

    /// A call, end to end: routed by the SLA, served, verified, shaped.
    async fn run(&self, args: Value, ctx: CallContext) -> Result<ToolOutput, ToolError> {
        let started = Instant::now();
        if let Some(received) = ctx.received_at {
            sla::observe(
                "toolmend_tool_call_initiation_seconds",
                &self.name,
                started.saturating_duration_since(received),
            );
        }
        let trace_id = ctx.trace_id.as_deref().unwrap_or(&ctx.call_id).to_owned();
        let route = self.sla.as_ref().map_or(Route::Primary, Sla::route);
        let backup = self.backup.get().filter(|_| route == Route::Backup);
        let served_by: &NetTool = backup.map_or(self, |b| b.as_ref());
        let span = tracing::Span::current();
        span.record("toolmend.tool.served_by", served_by.name.as_str());
        let sent = Instant::now();
        let result = served_by.serve(&args, &ctx.call_id, &trace_id).await;
        match &result {
            Ok((Reply::Failed { .. }, _)) => {
                span.record("error.type", "tool_error");
            }
            Err(e) => {
                span.record("error.type", e.kind());
            }
            Ok(_) => {}
        }
        let service = sent.elapsed();
        sla::observe("toolmend_tool_service_seconds", &served_by.name, service);
        if let Some(s) = &self.sla
            && let Some(t) = s.record(route, service)
        {
            self.transition(t);
        }
        let received_at = now_ms();
        // Beside every result, success or error: how the call went.
        let meta = |notes: Option<&ExchangeNotes>| {
            let mut m = json!({
                "tool": self.name,
                "served_by": served_by.name,
                "kind": served_by.kind,
                "received_at_ms": received_at,
                "service_latency_ms": millis(service),
                "trace_id": trace_id,
            });
            if let Some(n) = notes {
                m["attempts"] = json!(n.attempts);
                m["response_bytes"] = json!(n.bytes);
            }
            m
        };
        let out = match result {
            Ok((Reply::Success { data, message }, notes)) => {
                let shaped = served_by.shaper.shape(&data, message.as_deref());
                if let Some(e) = shaped.template_error {
                    // The template chose what the model may see: without it, nothing of
                    // the payload is shown (nor kept as the artifact), only its error.
                    tracing::warn!(tool = %served_by.name, error = %e, "tool result template failed; an error result was sent");
                    metrics::counter!("toolmend_tool_template_failures_total", "tool" => served_by.name.clone()).increment(1);
                    metrics::counter!("toolmend_tool_calls_total", "tool" => self.name.clone(), "result" => "template_error").increment(1);
                    let mut meta = meta(Some(&notes));
                    meta["shaped_by"] = json!(shaped.how);
                    meta["template_error"] = json!(e);
                    return self.finish(
                        Err(ToolError::Service {
                            fault: Fault::Failed,
                            message: format!(
                                "{}: the tool ran, but its result template failed ({e}), so its result cannot be shown",
                                served_by.name
                            ),
                            metadata: Some(Box::new(meta)),
                        }),
                        &ctx,
                        sent + service,
                    );
                }
                if shaped.omitted_bytes > 0 {
                    metrics::counter!("toolmend_tool_result_truncated_total", "tool" => served_by.name.clone()).increment(1);
                    metrics::counter!("toolmend_tool_result_omitted_bytes_total", "tool" => served_by.name.clone())
                        .increment(shaped.omitted_bytes as u64);
                }
                let mut meta = meta(Some(&notes));
                meta["shaped_by"] = json!(shaped.how);
                if shaped.omitted_bytes > 0 {
                    meta["omitted_bytes"] = json!(shaped.omitted_bytes);
                }
                if notes.invalid_utf8 {
                    meta["invalid_utf8_replaced"] = json!(true);
                }
                if let Some(skew) = notes.clock_skew_ms {
                    meta["clock_skew_ms"] = json!(skew);
                    metrics::counter!("toolmend_tool_clock_skew_total", "tool" => served_by.name.clone()).increment(1);
                }
                metrics::counter!("toolmend_tool_calls_total", "tool" => self.name.clone(), "result" => "success").increment(1);
                Ok(ToolOutput::text(shaped.content)
                    .with_artifact(data)
                    .with_metadata(meta))
            }
            Ok((Reply::Failed { message, data }, notes)) => {
                metrics::counter!("toolmend_tool_calls_total", "tool" => self.name.clone(), "result" => "tool_error").increment(1);
                let (clean, _) = crate::shape::clean_utf8(message.as_bytes());
                let clean = redact::text(&redact::brief(&clean, 2_000));
                // What the tool sent beside its failure is the caller's artifact.
                Err(ToolError::Detailed {
                    message: format!("{} failed: {clean}", served_by.name),
                    artifact: data.map(Box::new),
                    metadata: Some(Box::new(meta(Some(&notes)))),
                })
            }
            Err(e) => {
                metrics::counter!("toolmend_tool_calls_total", "tool" => self.name.clone(), "result" => e.kind()).increment(1);
                if let TransportError::Dirty { got } = &e {
                    // Never the model's to read: another call's data.
                    tracing::warn!(tool = %served_by.name, call_id = %ctx.call_id, answered_for = %got, "dirty tool answer dropped");
                    metrics::counter!("toolmend_tool_dirty_answers_total", "tool" => served_by.name.clone()).increment(1);
                } else {
                    tracing::warn!(tool = %served_by.name, call_id = %ctx.call_id, error = %e, "tool service failed");
                }
                // Never the answer's data (a dirty answer's least of all); the texts are
                // our own words (redacted where a service's reason is quoted).
                let message = format!("{}: {e}", served_by.name);
                Err(match (e.fault(), e) {
                    (_, TransportError::Timeout(d)) => ToolError::Timeout(d),
                    // The service refused the arguments: the call's to fix.
                    (Fault::Call, _) => ToolError::Detailed {
                        message,
                        artifact: None,
                        metadata: Some(Box::new(meta(None))),
                    },
                    (fault, _) => ToolError::Service {
                        fault,
                        message,
                        metadata: Some(Box::new(meta(None))),
                    },
                })
            }
        };
        self.finish(out, &ctx, sent + service)
    }

    /// The last latencies of a call, and its result.
    fn finish(
        &self,
        out: Result<ToolOutput, ToolError>,
        ctx: &CallContext,
        answered: Instant,
    ) -> Result<ToolOutput, ToolError> {
        let done = Instant::now();
        sla::observe(
            "toolmend_tool_result_injection_seconds",
            &self.name,
            done.saturating_duration_since(answered),
        );
        if let Some(received) = ctx.received_at {
            sla::observe(
                "toolmend_tool_round_trip_seconds",
                &self.name,
                done.saturating_duration_since(received),
            );
        }
        out
    }

    fn transition(&self, t: Transition) {
        let backup = self.backup.get().map_or("", |b| b.name.as_str());
        match t {
            Transition::Degraded { p95 } => {
                tracing::warn!(tool = %self.name, p95_ms = millis(p95), sla_ms = self.sla.as_ref().map_or(0.0, |s| millis(s.policy().p95)), backup, "tool breached its latency SLA: calls go to the backup");
                metrics::gauge!("toolmend_tool_degraded", "tool" => self.name.clone()).set(1.0);
                metrics::counter!("toolmend_tool_sla_transitions_total", "tool" => self.name.clone(), "to" => "backup").increment(1);
            }
            Transition::Recovered => {
                tracing::warn!(tool = %self.name, backup, "tool is within its latency SLA again: calls go to it");
                metrics::gauge!("toolmend_tool_degraded", "tool" => self.name.clone()).set(0.0);
                metrics::counter!("toolmend_tool_sla_transitions_total", "tool" => self.name.clone(), "to" => "primary").increment(1);
            }
        }
    }
}

impl Tool for NetTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &Value {
        &self.parameters
    }
    fn call<'a>(
        &'a self,
        arguments: Value,
        ctx: CallContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.run_traced(arguments, ctx))
    }
}
