//! The answer of a request, through the core's driver ([`toolmend::drive`]): the
//! gateway hands in its capabilities (the correction model, the front's way to ask the
//! upstream again, the guard with `guard.on_flood`) and its metrics as an observer; the
//! stages and their order are the core's.

use std::time::Duration;

use toolmend::{
    Toolbox,
    conversation::{AssistantMessage, Message},
    drive::{
        self, CallReport, Correcting, Invalid, Observer, ReAsk, ReAskFailure, Resolved, Stages,
        Stop, Turn,
    },
    guard::{Decision, Rule},
};

use crate::{
    config::{InvalidPolicy, SessionSource},
    metrics as m,
    pipeline::{Pipeline, report::Summary},
    server::error::GatewayError,
};

/// The failure of a re-ask the upstream answered with `e`.
pub(crate) fn re_ask_failure(e: &GatewayError) -> ReAskFailure {
    let upstream_status = match e {
        GatewayError::UpstreamStatus(f) => Some(f.status.as_u16()),
        _ => None,
    };
    ReAskFailure::new(e.code(), upstream_status, e.to_string())
}

/// The `calls.invalid` list as the driver's chain.
pub(crate) fn invalid_chain(list: &[InvalidPolicy]) -> Vec<Invalid> {
    list.iter()
        .map(|p| match p {
            InvalidPolicy::ReAsk => Invalid::ReAsk,
            InvalidPolicy::Correct => Invalid::Correct,
            InvalidPolicy::Pass => Invalid::Pass,
        })
        .collect()
}

/// The gateway's metrics, told by the driver.
struct Observe<'a> {
    toolbox: &'a Toolbox,
    labels: &'a m::ToolLabels,
    store: &'static str,
    policy: &'static str,
}

impl Observer for Observe<'_> {
    fn re_asking(&self, replaced: &[&CallReport]) {
        m::re_ask();
        // What the model got wrong is counted even though the client never sees it.
        Summary::count_replaced(replaced.iter().copied(), self.toolbox, self.labels);
    }

    fn corrected(&self, attempts: u32) {
        m::corrections(attempts);
    }

    fn guard_checked(&self, _calls: usize, took: Duration) {
        m::guard_check(self.store, took);
    }

    fn guard_decision(&self, d: &Decision) {
        m::guard_decision(d.rule.as_str(), d.action.as_str(), d.shadow);
        if d.rule == Rule::StoreUnavailable {
            let mode = if d.refuses() { "closed" } else { "open" };
            m::guard_fail_mode(self.store, mode);
        }
    }

    fn refused(&self, _calls: usize) {
        m::guard_flood(self.policy);
    }

    // The mending's span, one per answer planned (the `otel` feature): docs/gateway.md,
    // "Tracing".
    #[cfg(feature = "otel")]
    fn plan_span(&self) -> tracing::Span {
        crate::telemetry::mend_span()
    }

    #[cfg(feature = "otel")]
    fn planned(&self, span: &tracing::Span, calls: &[CallReport]) {
        crate::telemetry::record_mend(span, calls.iter().map(|c| c.outcome.as_str()));
    }
}

impl Pipeline {
    /// The answer `message` (its model stopped at its token limit: `cut_off`) to a
    /// request whose messages are `history`, in `session`, resolved by the driver; what
    /// the chain and the guard did go into `summary`. The time spent upstream (re-asks)
    /// and correcting is returned beside it. A refusal that cannot be answered is the
    /// rejection, carrying `summary`'s `x-toolmend-guard` and `x-toolmend-re-ask`: every
    /// response the guard checked says what it did.
    #[allow(clippy::too_many_arguments)] // the request's parts, each its own
    pub(crate) async fn answer(
        &self,
        message: &AssistantMessage,
        cut_off: bool,
        history: &[Message],
        toolbox: &Toolbox,
        session: Option<(&str, SessionSource)>,
        reask: &dyn ReAsk,
        summary: &mut Summary,
    ) -> Result<(Resolved, Duration), GatewayError> {
        let guard = self.guard.as_ref();
        if let Some(g) = guard {
            summary.guard.policy = g.policy_name();
            summary.guard.session = session.map_or("none", |(_, s)| s.as_str());
        }
        let observe = Observe {
            toolbox,
            labels: &self.labels,
            store: guard.map_or("none", |g| g.store_name()),
            policy: guard.map_or("", |g| g.policy_name()),
        };
        let stages = Stages {
            toolbox,
            accept: None,
            validate: None,
            plan: &self.plan,
            invalid: &self.invalid,
            correction: self.corrector.as_ref().map(|c| Correcting {
                corrector: c,
                max_retries: self.correction_retries,
                timeout: self.correction_timeout,
                concurrency: self.correction_concurrency,
                scope: self.correction_scope,
            }),
            re_ask: Some(reask),
            max_re_asks: self.calls.max_re_asks,
            raise_unresolved: false,
            settle: None,
            budget: None,
            guard: guard.map(|g| g.guarding(session.map(|(s, _)| s))),
            stage_timeout: self.correction_timeout,
            observer: &observe,
        };
        let turn = Turn::fresh(message, history, cut_off);
        let before = summary.resolve.took + summary.guard.re_ask_took;
        let driven = drive::drive(turn, &stages, &mut summary.resolve, &mut summary.guard).await;
        let took = (summary.resolve.took + summary.guard.re_ask_took).saturating_sub(before);
        match driven {
            Ok(d) => Ok((d.resolved, took)),
            Err(Stop::Rejected(r)) => Err(GatewayError::Flooded {
                message: r.message(),
                retry_after: r.retry_after(),
                ends_run: r.ends_run(),
                outage: r.is_outage(),
                headers: summary.refusal_headers(),
            }),
            // Never raised here (`raise_unresolved` is off): unresolved calls go out flagged.
            Err(Stop::Unresolved(_)) => Err(GatewayError::Internal {
                code: "toolmend_internal_error",
                message: "the driver raised unresolved calls the gateway flags".to_owned(),
            }),
        }
    }
}
