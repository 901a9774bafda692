//! [`Gateway`]: the state every request shares, the plumbing's (the upstream client,
//! the metrics handle) and the pipeline's (tool cache, mend options, corrector, the
//! server-side tools).

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use toolmend_tools::{ToolSet, ToolsFile};

use crate::{
    config::{ClientKey, Config},
    pipeline::{Pipeline, guard::GatewayGuard, server_tools::ServerTools},
    server::{Plumbing, auth::Gate, upstream::Upstream},
};

/// The gateway's state, shared by every request.
#[derive(Debug)]
pub struct Gateway {
    pub(crate) config: Config,
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) pipeline: Pipeline,
    metrics: Option<PrometheusHandle>,
    /// The guard's Redis store, whose state `/readyz` reports (`ready`, `degraded` when
    /// the guard fails open, 503 when it fails closed).
    readiness: Option<crate::server::ready::StoreHealth>,
    /// The keys the main listener asks for (`[access]`).
    pub(crate) gate: Arc<Gate>,
    /// The clients of `[access]`, `access.clients_file`'s included.
    clients: Vec<ClientKey>,
    /// The guard's Redis store when `guard.store = "redis"` names one, whether or not the
    /// guard's rules use it: what the instances share (the Responses front's kept
    /// responses).
    pub(crate) shared_store: Option<toolmend_redis::RedisStore>,
}

/// A gateway that could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The upstream client could not be built (its key, its TLS stack).
    #[error("upstream: {0}")]
    Client(String),
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
    /// Who may call (`[access]`): a clients file that cannot be read, or a start that
    /// would let anyone spend the provider key ([`Gateway::check_exposure`]).
    #[error("{0}")]
    Access(String),
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
        let clients = clients(&config.access)?;
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
            None if !clients.is_empty() => tracing::info!(
                target: "toolmend::start",
                "upstream auth: none (upstream.api_key_env is not set; the clients' keys \
                 are the gateway's own, [access] clients, and never passed on)"
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
        let (store, redis, shared_store) = match store {
            Some(s) => (s, None, None),
            None => redis_store(&guard_config)?,
        };
        let readiness = redis.map(|store| crate::server::ready::StoreHealth {
            store,
            fail: guard_config.fail,
        });
        let upstream = Arc::new(
            Upstream::new(&config.upstream, config.limits.max_upstream_bytes)
                .map_err(StartError::Client)?,
        );
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
            pipeline.server_tools = Some(
                ServerTools::new(set, guard, pipeline.plan.mend.clone())
                    .map_err(StartError::Tools)?,
            );
        }
        let gate = Arc::new(Gate::new(
            &clients,
            config.access.admin_key_sha256.as_deref(),
            config.access.admin_listen.is_some(),
        ));
        log_access(&config, &clients);
        if let Some(health) = &readiness {
            crate::server::ready::warn_at_start(health);
        }
        Ok(Gateway {
            upstream,
            pipeline,
            metrics,
            readiness,
            gate,
            clients,
            shared_store,
            config,
        })
    }

    /// The `[access]` clients (`access.clients` and those of `access.clients_file`).
    pub fn clients(&self) -> &[ClientKey] {
        &self.clients
    }

    /// Refuses to serve `addr` when anyone who reaches it could spend the gateway's key:
    /// an address beyond loopback, a provider key held (`upstream.api_key_env`, or the
    /// correction model's) or tools run by the gateway, no client key, and no
    /// `access.allow_unauthenticated = true`. `toolmend serve` and [`crate::serve`] call it.
    ///
    /// # Errors
    ///
    /// `StartError::Access`, saying the three ways out.
    pub fn check_exposure(&self, addr: std::net::SocketAddr) -> Result<(), StartError> {
        let a = &self.config.access;
        if addr.ip().is_loopback() || !self.clients.is_empty() || a.allow_unauthenticated {
            return Ok(());
        }
        let corrects = self
            .config
            .calls
            .invalid
            .list()
            .contains(&crate::config::InvalidPolicy::Correct);
        let mut holds = Vec::new();
        if let Some(n) = self
            .config
            .upstream
            .api_key_env
            .as_deref()
            .filter(|n| !n.is_empty())
        {
            holds.push(format!("the provider key of {n} (upstream.api_key_env)"));
        }
        if let Some(n) = self
            .config
            .correction
            .api_key_env
            .as_deref()
            .filter(|n| !n.is_empty() && corrects)
        {
            holds.push(format!(
                "the correction model's key of {n} (correction.api_key_env)"
            ));
        }
        if self.pipeline.server_tools.is_some() {
            holds.push("tools it runs itself ([[tools]], [[mcp]])".to_owned());
        }
        if holds.is_empty() {
            return Ok(());
        }
        Err(StartError::Access(format!(
            "refusing to serve {addr} to anyone who reaches it: the gateway holds {}, and no \
             client key is configured, so every caller would spend them. Either give each \
             client a key: printf %s \"$KEY\" | toolmend key hash, then [[access.clients]] \
             name = \"ci\" key_sha256 = \"<the hash>\" (or TOOLMEND_ACCESS__CLIENTS='[{{name \
             = \"ci\", key_sha256 = \"<the hash>\"}}]'); or listen on loopback only \
             (--listen 127.0.0.1:{}); or, if something in front already checks who calls (an \
             authenticating proxy), say so: access.allow_unauthenticated = true \
             (TOOLMEND_ACCESS__ALLOW_UNAUTHENTICATED=true)",
            holds.join(" and "),
            addr.port(),
        )))
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
            admin_elsewhere: self.config.access.admin_listen.is_some(),
        }
    }
}

/// The clients of `[access]`: `clients`, then those of `clients_file`, checked together.
fn clients(access: &crate::config::Access) -> Result<Vec<ClientKey>, StartError> {
    let mut out = access.clients.clone();
    let Some(path) = &access.clients_file else {
        return Ok(out);
    };
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        clients: Vec<ClientKey>,
    }
    let at = format!("access.clients_file {}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| {
        StartError::Access(format!("{at}: {e} (a TOML file of [[clients]] tables)"))
    })?;
    let file: File = toml::from_str(&text).map_err(|e| {
        StartError::Access(format!(
            "{at}: {} (it holds [[clients]] tables: name = \"ci\", key_sha256 = \"…\")",
            e.to_string().trim_end()
        ))
    })?;
    if file.clients.is_empty() {
        return Err(StartError::Access(format!(
            "{at} has no [[clients]] table: a file named for clients that holds none is likely \
             a mistake (name = \"ci\", key_sha256 = \"…\" in each)"
        )));
    }
    out.extend(file.clients);
    crate::config::check_clients(&at, &out).map_err(StartError::Access)?;
    if let Some(h) = &access.admin_key_sha256
        && out.iter().any(|c| c.key_sha256.eq_ignore_ascii_case(h))
    {
        return Err(StartError::Access(format!(
            "{at}: access.admin_key_sha256 is also a client's key: give /metrics a key of its own"
        )));
    }
    Ok(out)
}

/// Says at start who may call (names only, never a key or a hash).
fn log_access(config: &Config, clients: &[ClientKey]) {
    let names: Vec<&str> = clients.iter().map(|c| c.name.as_str()).collect();
    let metrics = match (&config.access.admin_listen, &config.access.admin_key_sha256) {
        (Some(at), Some(_)) => format!("/metrics on the admin listener {at}, behind the admin key"),
        (Some(at), None) => format!("/metrics on the admin listener {at}"),
        (None, Some(_)) => "/metrics behind the admin key".to_owned(),
        (None, None) if clients.is_empty() => "/metrics open".to_owned(),
        (None, None) => "/metrics behind the client keys".to_owned(),
    };
    if clients.is_empty() && config.access.allow_unauthenticated {
        tracing::warn!(
            target: "toolmend::start",
            "access: no client keys, and access.allow_unauthenticated = true: anyone who \
             reaches {} may call, on the gateway's keys if it holds any; {metrics}",
            config.listen
        );
    } else if clients.is_empty() {
        tracing::info!(
            target: "toolmend::start",
            "access: no client keys ([access] clients): anyone who reaches the listener may \
             call; {metrics}"
        );
    } else {
        let upstream = if config
            .upstream
            .api_key_env
            .as_deref()
            .is_some_and(|n| !n.is_empty())
        {
            "the gateway's own key goes upstream"
        } else {
            "no key goes upstream (a client's key is the gateway's, never passed on; set \
             upstream.api_key_env for an upstream that needs one)"
        };
        tracing::info!(
            target: "toolmend::start",
            "access: the keys of {} client(s): {}; a request without one is answered 401; \
             {upstream}; {metrics}",
            names.len(),
            names.join(", ")
        );
    }
}

/// The guard's store, the Redis store behind it for `/readyz`, and the Redis store the
/// instances share.
type Stores = (
    Option<Arc<dyn toolmend::guard::GuardStore>>,
    Option<toolmend_redis::RedisStore>,
    Option<toolmend_redis::RedisStore>,
);

/// The Redis store `[guard]` names: the guard's when its rules need a store, and shared
/// by the instances in any case.
fn redis_store(guard: &crate::config::Guard) -> Result<Stores, StartError> {
    match (&guard.store, &guard.redis_url) {
        (crate::config::StoreKind::Redis, Some(url)) => {
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
            if !guard.rules.needs_store() {
                return Ok((None, None, Some(redis)));
            }
            Ok((Some(Arc::new(store)), Some(redis.clone()), Some(redis)))
        }
        _ => Ok((None, None, None)),
    }
}
