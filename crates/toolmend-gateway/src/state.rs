//! [`Gateway`]: the state every request shares, the plumbing's (the upstream client,
//! the metrics handle) and the pipeline's (tool cache, mend options, corrector, the
//! server-side tools).

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use toolmend_tools::{ToolSet, ToolsFile};

use crate::{
    config::Config,
    pipeline::{Pipeline, guard::GatewayGuard, server_tools::ServerTools},
    server::{Plumbing, upstream::Upstream},
};

/// The gateway's state, shared by every request.
#[derive(Debug)]
pub struct Gateway {
    pub(crate) config: Config,
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) pipeline: Pipeline,
    metrics: Option<PrometheusHandle>,
    /// The Redis store whose connection `/readyz` reports: set when the guard fails
    /// closed, where a gateway without Redis would refuse every call.
    readiness: Option<toolmend_redis::RedisStore>,
}

/// A gateway that could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// The correction model's client could not be built.
    #[error("correction model: {0}")]
    Correction(#[from] toolmend_openai::ClientError),
    /// The guard's rules or store could not be set up.
    #[error("guard: {0}")]
    Guard(String),
    /// The tools (`[[tools]]`, `[[mcp]]`) could not be loaded: the file, the line, the
    /// tool and what to do.
    #[error("tools: {0}")]
    Tools(String),
    /// The event log (`[events]`) could not be opened: the key and the reason.
    #[error("events: {0}")]
    Events(String),
    /// The configuration names what is not there (an environment variable).
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
}

impl Gateway {
    /// A gateway for `config`. The API key is read now from `upstream.api_key_env`.
    /// `metrics`: the Prometheus handle `/metrics` renders (see [`crate::metrics::install`]).
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be built.
    ///
    /// With `guard.store = "redis"` the store connects in the background (call this inside
    /// a Tokio runtime): a Redis that is down at start does not stop the gateway, its
    /// decisions follow `guard.fail` until Redis answers.
    pub fn new(config: Config, metrics: Option<PrometheusHandle>) -> Result<Self, StartError> {
        Gateway::build(config, metrics, None, None)
    }

    /// [`new`](Self::new) with the tools of `tools` (`[[tools]]` and `[[mcp]]`, from the
    /// configuration's text by `ToolsFile::parse_section`, or a tools file of their own):
    /// loaded (schemas and templates compiled, MCP servers connected and listed), served
    /// at `POST /v1/tools/execute`, and those marked `server_side` run by the gateway in
    /// the round trip (`[round_trip]`). Their `[tools.limits]` join the guard's rules.
    ///
    /// # Errors
    ///
    /// What [`new`](Self::new) refuses, and the first problem of the tools, with the file,
    /// the line and the tool (`StartError::Tools`).
    pub async fn with_tools(
        config: Config,
        metrics: Option<PrometheusHandle>,
        tools: &ToolsFile,
    ) -> Result<Self, StartError> {
        if tools.is_empty() {
            return Gateway::new(config, metrics);
        }
        // Before any tool is loaded (an MCP server started or connected).
        config.check_env(&|n| std::env::var(n).ok())?;
        let set = ToolSet::load(tools, &toolmend_tools::set::std_env)
            .await
            .map_err(|e| StartError::Tools(e.to_string()))?;
        for problem in set.problems() {
            tracing::warn!(%problem, "a tool was left out");
        }
        let limits: Vec<(String, toolmend::guard::ToolRules)> = tools
            .tools
            .iter()
            .filter_map(|(_, t)| Some((t.name.clone(), t.limits.clone()?)))
            .collect();
        Gateway::build(config, metrics, None, Some((set, limits)))
    }

    /// [`new`](Self::new) with the guard's counts kept in `store` (shared between
    /// instances: Redis) instead of this process's memory.
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be built, or the guard's rules do not fit.
    pub fn with_guard_store(
        config: Config,
        metrics: Option<PrometheusHandle>,
        store: Option<std::sync::Arc<dyn toolmend::guard::GuardStore>>,
    ) -> Result<Self, StartError> {
        Gateway::build(config, metrics, Some(store), None)
    }

    /// `store`: `None` builds the one `[guard]` names (Redis), `Some` is the caller's.
    fn build(
        config: Config,
        metrics: Option<PrometheusHandle>,
        store: Option<Option<Arc<dyn toolmend::guard::GuardStore>>>,
        tools: Option<(ToolSet, Vec<(String, toolmend::guard::ToolRules)>)>,
    ) -> Result<Self, StartError> {
        config.check_env(&|n| std::env::var(n).ok())?;
        for note in config.notes() {
            tracing::info!(target: "toolmend::start", "{note}");
        }
        for warning in config.warnings() {
            tracing::warn!(target: "toolmend::start", "{warning}");
        }
        match config
            .upstream
            .api_key_env
            .as_deref()
            .filter(|n| !n.is_empty())
        {
            Some(name) => tracing::info!(
                target: "toolmend::start",
                "upstream auth: the gateway's own key, from {name} (upstream.api_key_env), \
                 in the {} header",
                match config.upstream.api_key_header {
                    crate::config::ApiKeyHeader::Authorization => "authorization",
                    crate::config::ApiKeyHeader::ApiKey => "api-key",
                }
            ),
            None => tracing::info!(
                target: "toolmend::start",
                "upstream auth: the client's own Authorization / api-key header, passed \
                 through (upstream.api_key_env is not set)"
            ),
        }
        let (set, limits) = tools.unwrap_or_default();
        let mut guard_config = config.guard.clone();
        guard_config.rules = crate::pipeline::guard::merged_rules(&guard_config.rules, &limits)
            .map_err(StartError::Guard)?;
        let (store, redis) = match store {
            Some(s) => (s, None),
            None => redis_store(&guard_config)?,
        };
        let readiness = redis.filter(|_| guard_config.fail == toolmend::guard::FailMode::Closed);
        let upstream = Arc::new(Upstream::new(
            &config.upstream,
            config.limits.max_upstream_bytes,
        )?);
        let mut pipeline = Pipeline::new(&config)?;
        pipeline.guard = crate::pipeline::guard::GatewayGuard::new(&guard_config, store)
            .map_err(StartError::Guard)?;
        pipeline.events = crate::events::EventLog::start(&config.events, |v| std::env::var(v).ok())
            .map_err(StartError::Events)?;
        if !set.is_empty() {
            if !config.calls.mend && set.tools().iter().any(|t| t.server_side()) {
                return Err(StartError::Tools(
                    "calls.mend = false, but server-side tools are declared: the round trip \
                     runs on the planned answer; set calls.mend = true, or server_side = false"
                        .to_owned(),
                ));
            }
            let guard = pipeline.guard.as_ref().map(GatewayGuard::rule_guard);
            pipeline.server_tools = Some(ServerTools::new(set, guard).map_err(StartError::Tools)?);
        }
        Ok(Gateway {
            upstream,
            pipeline,
            metrics,
            readiness,
            config,
        })
    }

    /// The upstream base URL requests go to, as normalised at load (`/v1` appended to
    /// one without a path), its credentials hidden: for banners and logs.
    pub fn upstream_url(&self) -> String {
        crate::config::redact_url(&self.config.upstream.base_url)
    }

    /// What the front-less routes need.
    pub(crate) fn plumbing(&self) -> Plumbing {
        Plumbing {
            upstream: Arc::clone(&self.upstream),
            metrics: self.metrics.clone(),
            readiness: self.readiness.clone(),
        }
    }
}

/// The guard's store, and the Redis store behind it for `/readyz`.
type Stores = (
    Option<Arc<dyn toolmend::guard::GuardStore>>,
    Option<toolmend_redis::RedisStore>,
);

/// The Redis store `[guard]` names, when its rules need a store.
fn redis_store(guard: &crate::config::Guard) -> Result<Stores, StartError> {
    match (&guard.store, &guard.redis_url) {
        (crate::config::StoreKind::Redis, Some(url)) if guard.rules.needs_store() => {
            let opts = toolmend_redis::RedisOptions {
                timeout: std::time::Duration::from_millis(guard.timeout_ms),
                early_refusal_keys: guard.max_keys,
                ..toolmend_redis::RedisOptions::default()
            };
            let store = toolmend_redis::redis_guard_store(url, opts).map_err(|e| {
                StartError::Guard(format!(
                    "guard.redis_url {}: {e}",
                    crate::config::redact_url(url)
                ))
            })?;
            let redis = store.inner().clone();
            Ok((Some(Arc::new(store)), Some(redis)))
        }
        _ => Ok((None, None)),
    }
}
