//! The gateway's guard: the core's [`RuleGuard`] built from `[guard]` (one check per
//! message: the history rules, then one store round trip), the session a request belongs
//! to, and `guard.on_flood` as the driver's [`OnRefused`]: `feedback` (the refused calls
//! are answered with the guard's message and the model is asked again without them),
//! `reject` (429 / 400) or `flag` (passed, flagged). The stage is the driver's.

use std::{sync::Arc, time::Duration};

use serde_json::Value;
use toolmend::{
    drive::{Guarding, OnRefused},
    guard::{GuardStore, MemoryStore, RuleGuard, fingerprint::result_hash},
    message::TimeOrderedIds,
};

use crate::config::{self, FloodPolicy, SessionSource};

/// The configured guard and how the gateway applies it.
#[derive(Debug)]
pub(crate) struct GatewayGuard {
    /// Shared with the tool node of `/v1/tools/execute`: one set of counts.
    guard: Arc<RuleGuard>,
    policy: FloodPolicy,
    session_from: Vec<SessionSource>,
    metadata_key: String,
    max_re_asks: u32,
    fresh_ids: TimeOrderedIds,
    store: &'static str,
}

impl GatewayGuard {
    /// The guard of `[guard]`, or `None` when no rule is set. `store`: the shared store
    /// the caller built (`guard.store = "redis"`); `None` keeps the counts in memory.
    /// `cfg.rules` already holds the limits the server-side tools declare
    /// ([`merged_rules`]).
    pub(crate) fn new(
        cfg: &config::Guard,
        store: Option<Arc<dyn GuardStore>>,
    ) -> Result<Option<Self>, String> {
        if !cfg.rules.any_rule() {
            return Ok(None);
        }
        let mut guard = RuleGuard::new(cfg.rules.clone())?
            .fail_mode(cfg.fail)
            .timeout(Duration::from_millis(cfg.timeout_ms));
        if cfg.rules.needs_store() {
            guard = match store {
                Some(s) => guard.with_store(s),
                None => guard.with_store(MemoryStore::new(cfg.max_keys)),
            };
        }
        let store = guard.store_name().unwrap_or("none");
        tracing::info!(
            store,
            on_flood = cfg.on_flood.as_str(),
            fail = ?cfg.fail,
            timeout_ms = cfg.timeout_ms,
            tools_with_rules = cfg.rules.tools.len(),
            "guard on"
        );
        Ok(Some(GatewayGuard {
            guard: Arc::new(guard),
            policy: cfg.on_flood,
            session_from: cfg.session_from.clone(),
            metadata_key: cfg.metadata_key.clone(),
            max_re_asks: cfg.max_re_asks,
            fresh_ids: TimeOrderedIds::new(),
            store,
        }))
    }

    /// The guard as the driver's capability, for calls of `session`.
    pub(crate) fn guarding<'a>(&'a self, session: Option<&'a str>) -> Guarding<'a> {
        Guarding {
            guard: &*self.guard,
            session,
            // A store past its own timeout is judged by the fail mode, not by this.
            timeout: self.guard.stage_limit(),
            fresh_ids: &self.fresh_ids,
            rename_reused: true,
            on_refused: match self.policy {
                FloodPolicy::Feedback => OnRefused::ReAsk,
                FloodPolicy::Reject => OnRefused::Reject,
                FloodPolicy::Flag => OnRefused::Flag,
            },
            max_re_asks: self.max_re_asks,
        }
    }

    /// `guard.on_flood`'s name.
    pub(crate) fn policy_name(&self) -> &'static str {
        self.policy.as_str()
    }

    /// The store's name in metrics (`memory`, `redis`, `none`).
    pub(crate) fn store_name(&self) -> &'static str {
        self.store
    }

    /// The rule guard itself (its store included), for a tool node.
    pub(crate) fn rule_guard(&self) -> Arc<RuleGuard> {
        Arc::clone(&self.guard)
    }

    /// The request's session and where it came from, by `guard.session_from`. With an
    /// `[access]` client, the client's name is the prefix of whatever source found it
    /// (`c:ci/h:alice`), so two clients never share a session; `client` is the name alone.
    pub(crate) fn session(&self, hints: &SessionHints<'_>) -> Option<(String, SessionSource)> {
        self.session_of(hints).map(|(s, src)| match src {
            SessionSource::Client => (s, src),
            _ => (client_scoped(s), src),
        })
    }

    fn session_of(&self, hints: &SessionHints<'_>) -> Option<(String, SessionSource)> {
        self.session_from.iter().find_map(|&src| {
            let found = match src {
                SessionSource::Header => hints.header.map(|s| format!("h:{s}")),
                SessionSource::User => hints.user.map(|s| format!("u:{s}")),
                SessionSource::Metadata => {
                    hints.metadata(&self.metadata_key).map(|s| format!("m:{s}"))
                }
                SessionSource::Client => {
                    crate::server::access::current_client().map(|c| format!("c:{c}"))
                }
                // Only a hash of the key is ever kept.
                SessionSource::ApiKey => {
                    hints.api_key.map(|k| format!("k:{:016x}", result_hash(k)))
                }
            };
            found.map(|s| (s, src))
        })
    }
}

/// What a request says about its session, read by its front from its own wire: the
/// pipeline never reads headers or bodies. Blank values are `None`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SessionHints<'a> {
    /// The session the client names (`x-toolmend-session`).
    pub header: Option<&'a str>,
    /// The end user the body names (chat's `user`).
    pub user: Option<&'a str>,
    /// The body's metadata object, read by `guard.metadata_key`.
    pub metadata: Option<&'a Value>,
    /// The client's API key (only ever kept hashed).
    pub api_key: Option<&'a str>,
}

impl SessionHints<'_> {
    /// The metadata's `key`, when it is non-blank text.
    pub(crate) fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata?
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// The session a request names itself, as the guard's default order reads it
    /// (prefixed by where it came from, as the guard's are); never the API key.
    pub(crate) fn named(&self) -> Option<String> {
        self.header
            .map(|h| format!("h:{h}"))
            .or_else(|| self.user.map(|u| format!("u:{u}")))
            .or_else(|| self.metadata("session_id").map(|m| format!("m:{m}")))
    }
}

/// `session` within the request's `[access]` client, if any: `c:NAME/` in front, so two
/// clients never share a session whatever they name it.
pub(crate) fn client_scoped(session: String) -> String {
    match crate::server::access::current_client() {
        Some(client) => format!("c:{client}/{session}"),
        None => session,
    }
}

/// `rules` with the flood limits tools declare on themselves (`[tools.limits]` of the
/// server-side tools) merged in, the configuration's own entry for a tool winning key by
/// key (as `ToolNodeBuilder::rule_guard` merges them).
///
/// # Errors
///
/// A limit that cannot work, naming the tool.
pub(crate) fn merged_rules(
    rules: &toolmend::guard::GuardConfig,
    tools: &[(String, toolmend::guard::ToolRules)],
) -> Result<toolmend::guard::GuardConfig, String> {
    if tools.is_empty() {
        return Ok(rules.clone());
    }
    let mut guard = RuleGuard::new(rules.clone())?;
    for (name, limits) in tools {
        guard
            .declare_tool(name, limits.clone())
            .map_err(|e| format!("tool {name:?}: [tools.limits]: {e}"))?;
    }
    Ok(guard.config().clone())
}
