//! [`Gateway`]: the state every request shares, the plumbing's (the upstream client,
//! the metrics handle) and the pipeline's (tool cache, mend options, corrector).

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::{
    config::Config,
    pipeline::Pipeline,
    server::{Plumbing, upstream::Upstream},
};

/// The gateway's state, shared by every request.
#[derive(Debug)]
pub struct Gateway {
    pub(crate) config: Config,
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) pipeline: Pipeline,
    metrics: Option<PrometheusHandle>,
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
        let store: Option<std::sync::Arc<dyn toolmend::guard::GuardStore>> =
            match (&config.guard.store, &config.guard.redis_url) {
                (crate::config::StoreKind::Redis, Some(url))
                    if config.guard.rules.needs_store() =>
                {
                    let opts = toolmend_redis::RedisOptions {
                        timeout: std::time::Duration::from_millis(config.guard.timeout_ms),
                        early_refusal_keys: config.guard.max_keys,
                        ..toolmend_redis::RedisOptions::default()
                    };
                    let store = toolmend_redis::redis_guard_store(url, opts).map_err(|e| {
                        StartError::Guard(format!(
                            "guard.redis_url {}: {e}",
                            crate::config::redact_url(url)
                        ))
                    })?;
                    Some(std::sync::Arc::new(store))
                }
                _ => None,
            };
        Gateway::with_guard_store(config, metrics, store)
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
        let upstream = Arc::new(Upstream::new(
            &config.upstream,
            config.limits.max_upstream_bytes,
        )?);
        let mut pipeline = Pipeline::new(&config)?;
        pipeline.guard = crate::pipeline::guard::GatewayGuard::new(&config.guard, store)
            .map_err(StartError::Guard)?;
        Ok(Gateway {
            upstream,
            pipeline,
            metrics,
            config,
        })
    }

    /// What the front-less routes need.
    pub(crate) fn plumbing(&self) -> Plumbing {
        Plumbing {
            upstream: Arc::clone(&self.upstream),
            metrics: self.metrics.clone(),
        }
    }
}
