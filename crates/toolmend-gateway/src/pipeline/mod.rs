//! The front-neutral pipeline: everything a front does not decide for itself.
//!
//! - [`request`]: the request path. A history (neutral messages) against the
//!   `[limits]`, checked, and by `history.policy` sanitized, refused or passed; trimmed.
//! - [`plan`]: the plan of one assistant message, by the core (`toolmend::message`): its
//!   calls (sent, or written into the text) mended against the request's tools, ids
//!   settled by the core's one rule against the request's history; the gateway's reports.
//! - [`answer`]: the answer through the core's driver ([`toolmend::drive`]): the
//!   gateway's capabilities handed in (the correction model, the front's
//!   [`toolmend::drive::ReAsk`], the guard), its metrics as the driver's observer.
//! - [`guard`]: the gateway's guard: the rule guard of `[guard]`, the request's session,
//!   `guard.on_flood` as what a refusal does.
//! - [`tools`]: the compiled tools of a request, cached.
//! - [`server_tools`]: the tools the gateway runs itself (`[[tools]]`, `[[mcp]]`), through
//!   the core's tool node: `POST /v1/tools/execute` and the round trip.
//! - [`round_trip`]: an answer that calls server-side tools: they run, their results are
//!   appended, the model is asked again, bounded by `[round_trip]`.
//! - [`reasoning`]: reasoning written into the content, moved to `reasoning_content`,
//!   dropped or kept (`calls.reasoning`).
//! - [`report`]: the counts behind the `x-toolmend-*` headers, the response's `toolmend`
//!   account and the metrics.
//!
//! Works on `toolmend::conversation` messages only: no wire format, no HTTP. It never imports
//! a front; a front converts its wire format to these messages and back.

pub(crate) mod answer;
pub(crate) mod guard;
pub(crate) mod plan;
pub(crate) mod reasoning;
pub(crate) mod report;
pub(crate) mod request;
pub(crate) mod round_trip;
pub(crate) mod server_tools;
pub(crate) mod tools;

use std::time::Duration;

use toolmend::message::PlanOptions;

use crate::{
    config::{self, Config, InvalidPolicy},
    metrics as m,
};

use self::{plan::MendConfig, tools::ToolCache};

/// The pipeline's state, shared by every request of every front.
#[derive(Debug)]
pub(crate) struct Pipeline {
    pub(crate) tools: ToolCache,
    /// How the core plans each answer; its `mend` ([`config::Calls::mend_options`]) is
    /// how every call the gateway sees is mended: corrections and the server tools' nodes
    /// take it from here.
    pub(crate) plan: PlanOptions,
    pub(crate) corrector: Option<toolmend_openai::ModelCorrector>,
    /// The `tool` label values handed out so far (bounded).
    pub(crate) labels: m::ToolLabels,
    pub(crate) history: config::History,
    pub(crate) calls: config::Calls,
    pub(crate) limits: config::Limits,
    /// The guard (`[guard]`), when a rule is set; installed by the gateway's start.
    pub(crate) guard: Option<guard::GatewayGuard>,
    /// The tools the gateway runs itself, when any are configured; installed by the
    /// gateway's start.
    pub(crate) server_tools: Option<server_tools::ServerTools>,
    /// `[round_trip]`.
    pub(crate) round_trip: config::RoundTrip,
    /// The event log (`[events]`), when a path is set; installed by the gateway's start.
    pub(crate) events: Option<crate::events::EventLog>,
    /// `correction.max_retries`.
    correction_retries: u32,
    /// `correction.timeout_secs`: how long one correction attempt may take.
    correction_timeout: Duration,
    /// `correction.max_concurrency`: calls of one answer corrected at once.
    correction_concurrency: usize,
    /// `correction.scope`.
    correction_scope: toolmend::correct::CorrectionScope,
    /// `calls.invalid`, as the driver's chain.
    invalid: Vec<toolmend::drive::Invalid>,
}

impl Pipeline {
    /// The pipeline of `config`; the correction model's client is built when
    /// `calls.invalid` lists `correct`.
    pub(crate) fn new(config: &Config) -> Result<Self, toolmend_openai::ClientError> {
        let plan = PlanOptions {
            // `move` and `drop` both take it out of the content; the front moves it.
            strip_thinking: config.calls.reasoning_policy() != config::ReasoningPolicy::Keep,
            ..MendConfig {
                mend: config.calls.mend_options(),
                calls_in_text: config.calls.calls_in_text,
                accept_truncated: config.calls.accept_truncated,
            }
            .plan_options()
        };
        let corrector = if config
            .calls
            .invalid
            .list()
            .contains(&InvalidPolicy::Correct)
        {
            let c = &config.correction;
            let mut client = toolmend_openai::OpenAiClient::new(&c.base_url)?
                .timeout(Duration::from_secs_f64(c.timeout_secs.max(0.001)));
            if let Some(key) = c.api_key_env.as_deref().and_then(|n| std::env::var(n).ok()) {
                client = client.api_key(key);
            }
            Some(
                toolmend_openai::ModelCorrector::new(client, &c.model)
                    .context_messages(c.context_messages),
            )
        } else {
            None
        };
        Ok(Pipeline {
            tools: ToolCache::new(config.limits.tool_cache)
                .limits(config.limits.max_tools, config.limits.max_schema_bytes),
            plan,
            corrector,
            labels: m::ToolLabels::new(config.limits.max_tool_labels),
            history: config.history.clone(),
            calls: config.calls.clone(),
            limits: config.limits.clone(),
            guard: None,
            server_tools: None,
            round_trip: config.round_trip.clone(),
            events: None,
            correction_retries: config.correction.max_retries,
            correction_timeout: Duration::from_secs_f64(config.correction.timeout_secs.max(0.001)),
            correction_concurrency: config.correction.max_concurrency,
            correction_scope: config.correction.scope,
            invalid: answer::invalid_chain(config.calls.invalid.list()),
        })
    }
}
