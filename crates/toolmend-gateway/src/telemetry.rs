//! OpenTelemetry traces of the gateway (the `otel` feature), exported over OTLP/HTTP
//! (protobuf) in batches, by the async reqwest client on the gateway's Tokio runtime.
//!
//! The spans (target `toolmend::trace`, so only they reach the exporter):
//!
//! | span | kind | from | attributes |
//! | --- | --- | --- | --- |
//! | `POST /v1/chat/completions` (the route) | server | `server::access` | `http.request.method`, `http.route`, `http.response.status_code`, `error.type`, `toolmend.request_id`, `toolmend.upstream_calls`, `toolmend.calls.{valid,repaired,unresolved}` |
//! | `toolmend mend` | internal | the driver's plan (`toolmend::drive`, through the gateway's observer: each answer planned, the first, each re-asked one) | `toolmend.calls`, `toolmend.calls.feedback` (still invalid), `toolmend.calls.dropped` |
//! | `toolmend re_ask` | internal | `pipeline::resolve` (the `chat` span of its upstream call inside) | `toolmend.re_ask.attempt`, `toolmend.re_ask.calls` |
//! | `toolmend tools_round` | internal | `pipeline::round_trip` (each round of server-side calls) | `toolmend.round`, `toolmend.round.calls` |
//! | `execute_tool {tool}` | internal | `toolmend-tools` (each server-side call, inside its round) | the GenAI conventions': `gen_ai.operation.name` (`execute_tool`), `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`; `toolmend.tool.kind` (`http`, `mcp`), `toolmend.tool.served_by` (the backup, when it served), `error.type` |
//! | `chat {model}` | client | `server::upstream` (each upstream call: the first, each re-ask, each round) | the GenAI semantic conventions': `gen_ai.operation.name` (`chat`), `gen_ai.request.model`, `gen_ai.response.id`, `gen_ai.response.model`, `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`; `server.address`, `server.port`, `http.response.status_code`, `error.type`, `toolmend.upstream.attempt` |
//!
//! A client's `traceparent` makes the request span a child of the client's trace; the
//! upstream gets the `traceparent` of its `chat` span (W3C Trace Context). No key, header
//! value, message or argument value is ever an attribute.
//!
//! The feature is in `toolmend serve`'s default build. Without an exporter installed
//! (no endpoint configured) every span here is [`Span::none`](tracing::Span::none): a
//! request pays one relaxed atomic load per span site, nothing is allocated, formatted
//! or parsed for a trace nobody exports.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use opentelemetry::{
    propagation::{Extractor, Injector, TextMapPropagator as _},
    trace::TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::{
    Resource,
    propagation::TraceContextPropagator,
    runtime,
    trace::{SdkTracerProvider, span_processor_with_async_runtime::BatchSpanProcessor},
};
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::{Layer, filter::Targets, registry::LookupSpan};

use crate::config::Telemetry;

/// The target of every span the exporter sees.
pub const TARGET: &str = "toolmend::trace";

/// Set once an exporting layer is installed: the upstream then gets our `traceparent`
/// instead of the client's.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// What the tests decode a collector's request with (the protobuf types of OTLP).
#[doc(hidden)]
pub mod proto {
    pub use opentelemetry_proto::tonic::{
        collector::trace::v1::ExportTraceServiceRequest, common::v1::any_value::Value,
    };
    pub use prost::Message;
}

/// The traces URL: `telemetry.otlp_endpoint` + `/v1/traces`, else
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else `OTEL_EXPORTER_OTLP_ENDPOINT` +
/// `/v1/traces`; none: no export.
pub fn traces_endpoint(config: &Telemetry, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let base = |b: &str| format!("{}/v1/traces", b.trim_end_matches('/'));
    if let Some(b) = config.otlp_endpoint.as_deref().filter(|s| !s.is_empty()) {
        return Some(base(b));
    }
    if let Some(full) = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").filter(|s| !s.is_empty()) {
        return Some(full);
    }
    env("OTEL_EXPORTER_OTLP_ENDPOINT")
        .filter(|s| !s.is_empty())
        .map(|b| base(&b))
}

/// The exporter and its provider: flush on [`shutdown`](Self::shutdown).
#[derive(Debug)]
pub struct Tracing {
    provider: SdkTracerProvider,
    endpoint: String,
}

impl Tracing {
    /// The exporter for `config` (call inside the Tokio runtime: batches are sent from
    /// a task of it), or `None` when no endpoint is configured.
    ///
    /// # Errors
    ///
    /// The endpoint is not an http(s) URL, or the exporter cannot be built.
    pub fn start(
        config: &Telemetry,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Tracing>, String> {
        let Some(endpoint) = traces_endpoint(config, env) else {
            return Ok(None);
        };
        if reqwest::Url::parse(&endpoint)
            .ok()
            .is_none_or(|u| !matches!(u.scheme(), "http" | "https"))
        {
            return Err(format!(
                "the OTLP traces endpoint {} is not an http(s) URL (telemetry.otlp_endpoint \
                 or OTEL_EXPORTER_OTLP_ENDPOINT: e.g. http://127.0.0.1:4318)",
                crate::config::redact_url(&endpoint)
            ));
        }
        crate::config::url::no_tls("the OTLP traces endpoint", &endpoint)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.clone())
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("the OTLP exporter: {e}"))?;
        let processor = BatchSpanProcessor::builder(exporter, runtime::Tokio).build();
        let service = env("OTEL_SERVICE_NAME")
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| config.service_name.clone());
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build();
        Ok(Some(Tracing { provider, endpoint }))
    }

    /// Where spans go (credentials hidden), for the start's log line.
    pub fn endpoint(&self) -> String {
        crate::config::redact_url(&self.endpoint)
    }

    /// The layer that hands the gateway's spans ([`TARGET`]) to the exporter; installing
    /// it also makes the upstream get our `traceparent`.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        ACTIVE.store(true, Ordering::Relaxed);
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("toolmend-gateway"))
            .with_filter(Targets::new().with_target(TARGET, tracing::Level::INFO))
    }

    /// Sends what is buffered (at most a few seconds), then stops.
    pub fn shutdown(&self) {
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
    }

    /// Sends what is buffered now.
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
    }
}

/// Whether an exporting layer is installed (every span constructor asks: without it, no
/// span is made).
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

struct HeaderExtractor<'a>(&'a axum::http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(axum::http::HeaderName::as_str).collect()
    }
}

/// Makes `span` a child of the client's trace, when its request carries a `traceparent`.
pub(crate) fn adopt_parent(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    if active() && headers.contains_key("traceparent") {
        let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        let _ = span.set_parent(cx);
    }
}

struct Pairs(Vec<(String, String)>);

impl Injector for Pairs {
    fn set(&mut self, key: &str, value: String) {
        self.0.push((key.to_owned(), value));
    }
}

/// The `traceparent` (and `tracestate`) of `span`, for the upstream.
pub(crate) fn trace_headers(span: &tracing::Span) -> Vec<(String, String)> {
    if !active() {
        return Vec::new();
    }
    let mut out = Pairs(Vec::new());
    TraceContextPropagator::new().inject_context(&span.context(), &mut out);
    out.0
}

/// Records what an upstream chat answer says about itself on its span (the GenAI
/// conventions' response attributes; never its content).
pub(crate) fn record_answer(span: &tracing::Span, body: &[u8]) {
    if span.is_none() {
        return;
    }
    #[derive(serde::Deserialize)]
    struct Usage {
        prompt_tokens: Option<u64>,
        completion_tokens: Option<u64>,
    }
    #[derive(serde::Deserialize)]
    struct Choice {
        finish_reason: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        id: Option<String>,
        model: Option<String>,
        usage: Option<Usage>,
        #[serde(default)]
        choices: Vec<Choice>,
    }
    let Ok(a) = serde_json::from_slice::<Answer>(body) else {
        return;
    };
    if let Some(id) = &a.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if let Some(model) = &a.model {
        span.record("gen_ai.response.model", model.as_str());
    }
    if let Some(u) = &a.usage {
        // OpenTelemetry's integers are i64 (a u64 would be recorded as text).
        if let Some(n) = u.prompt_tokens.and_then(|n| i64::try_from(n).ok()) {
            span.record("gen_ai.usage.input_tokens", n);
        }
        if let Some(n) = u.completion_tokens.and_then(|n| i64::try_from(n).ok()) {
            span.record("gen_ai.usage.output_tokens", n);
        }
    }
    let reasons: Vec<&str> = a
        .choices
        .iter()
        .filter_map(|c| c.finish_reason.as_deref())
        .collect();
    if !reasons.is_empty() {
        span.set_attribute(
            "gen_ai.response.finish_reasons",
            opentelemetry::Value::Array(
                reasons
                    .iter()
                    .map(|r| opentelemetry::StringValue::from((*r).to_owned()))
                    .collect::<Vec<_>>()
                    .into(),
            ),
        );
    }
}

/// The model a chat request names (`None` when the body is not one).
pub(crate) fn requested_model(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Request {
        model: Option<String>,
    }
    serde_json::from_slice::<Request>(body).ok()?.model
}

/// The span of one answer's mending: the driver's stages (re-asks inside it).
pub(crate) fn mend_span() -> tracing::Span {
    use tracing::field::Empty;
    if !active() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        target: "toolmend::trace",
        "mend",
        otel.name = "toolmend mend",
        otel.kind = "internal",
        toolmend.calls = Empty,
        toolmend.calls.feedback = Empty,
        toolmend.calls.dropped = Empty,
    )
}

/// The planned calls' outcomes, on the current (mend) span.
pub(crate) fn record_mend<'a>(span: &tracing::Span, outcomes: impl Iterator<Item = &'a str>) {
    if !active() {
        return;
    }
    let (mut n, mut feedback, mut dropped) = (0i64, 0i64, 0i64);
    for o in outcomes {
        n += 1;
        feedback += i64::from(o == "feedback");
        dropped += i64::from(o == "dropped");
    }
    span.record("toolmend.calls", n);
    span.record("toolmend.calls.feedback", feedback);
    span.record("toolmend.calls.dropped", dropped);
}

/// The span of one round of the round trip: the server-side calls of one answer, run by
/// the gateway (each call's `execute_tool {tool}` span, from `toolmend-tools`, inside).
pub(crate) fn tools_round_span(round: u32, calls: usize) -> tracing::Span {
    if !active() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        target: "toolmend::trace",
        "tools_round",
        otel.name = "toolmend tools_round",
        otel.kind = "internal",
        toolmend.round = i64::from(round),
        toolmend.round.calls = i64::try_from(calls).unwrap_or(i64::MAX),
    )
}

/// The span of one re-ask: the invalid calls and their feedback sent back upstream.
pub(crate) fn re_ask_span(attempt: u32, calls: usize) -> tracing::Span {
    if !active() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        target: "toolmend::trace",
        "re_ask",
        otel.name = "toolmend re_ask",
        otel.kind = "internal",
        toolmend.re_ask.attempt = i64::from(attempt),
        toolmend.re_ask.calls = i64::try_from(calls).unwrap_or(i64::MAX),
    )
}
