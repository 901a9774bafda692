//! The guard's rules as configured: `[guard]` in TOML, the Rust builder, Python's
//! `guard=`. Plain data with serde; [`GuardConfig::validate`] names the first key that
//! cannot work.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the guard does when its store gives no answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    /// Let the calls run (the history rules still apply); reported as a decision.
    #[default]
    Open,
    /// Refuse the calls the store would have counted (rule `store_unavailable`).
    Closed,
}

/// Largest `limit` a window or budget may have: a sliding window keeps one timestamp per
/// admitted call, so this bounds a key's memory (in process and in Redis).
pub const MAX_LIMIT: u64 = 100_000;
/// Longest window, in seconds (a day).
pub const MAX_WINDOW_SECS: f64 = 86_400.0;

/// Every rule of the guard. All are off unless configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardConfig {
    /// Calls per session, all tools together (e.g. 5 per 60 s).
    pub session: Option<Window>,
    /// Per-tool rules, by tool name.
    pub tools: BTreeMap<String, ToolRules>,
    /// Identical calls (same tool, same canonical arguments after mending) within a
    /// window: the second is refused.
    pub duplicate: Option<Duplicate>,
    /// The same call in consecutive turns of a run (history): observe, block, stop.
    pub repeat: Option<Ladder>,
    /// Two calls alternating, A B A B, with unchanged results (history).
    pub ping_pong: Option<PingPong>,
    /// The same call returning the same result again and again in a run (history).
    pub no_progress: Option<NoProgress>,
    /// Calls that ran, per thread (session) and per run, all tools together
    /// (LangChain's `ToolCallLimitMiddleware` with `tool_name=None`).
    pub limits: Option<Budget>,
    /// Seconds the store keeps a session's keys (budgets, seen ids) after its last call.
    pub session_ttl_secs: f64,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            session: None,
            tools: BTreeMap::new(),
            duplicate: None,
            repeat: None,
            ping_pong: None,
            no_progress: None,
            limits: None,
            session_ttl_secs: 3600.0,
        }
    }
}

/// At most `limit` calls in any `window_secs` (a sliding window, exact).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Calls admitted per window; the next one is refused.
    pub limit: u64,
    /// The window, in seconds.
    pub window_secs: f64,
    /// Decide and report, refuse nothing.
    #[serde(default)]
    pub shadow: bool,
}

/// The rules of one tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolRules {
    /// Calls of this tool per session.
    pub session: Option<Window>,
    /// Calls of this tool across all sessions.
    pub global: Option<Window>,
    /// Calls of this tool that ran, per thread and per run.
    pub limits: Option<Budget>,
    /// False: the `duplicate` rule does not apply to this tool (a status poll).
    pub duplicate: Option<bool>,
    /// Its own ladder for `repeat`, in place of the general one.
    pub repeat: Option<Ladder>,
}

/// The identical-call rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Duplicate {
    /// How long a call's fingerprint is remembered, in seconds.
    pub window_secs: f64,
    /// Decide and report, refuse nothing.
    #[serde(default)]
    pub shadow: bool,
}

/// The repeat ladder: at `observe` identical calls in a row the decision is reported, at
/// `block` the call is refused, at `stop` the run is ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Ladder {
    /// Report from this many (0: never).
    pub observe: u32,
    /// Refuse from this many (0: never).
    pub block: u32,
    /// End the run from this many (0: never).
    pub stop: u32,
    /// Decide and report, refuse nothing.
    pub shadow: bool,
}

impl Default for Ladder {
    /// OpenRouter's doom-loop defaults: observe 2, block 3, stop 6.
    fn default() -> Self {
        Ladder {
            observe: 2,
            block: 3,
            stop: 6,
            shadow: false,
        }
    }
}

/// A B A B: refused once the pair has alternated `cycles` times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PingPong {
    /// Full A B cycles before the next call is refused (the call itself completes one more).
    pub cycles: u32,
    /// Decide and report, refuse nothing.
    pub shadow: bool,
}

impl Default for PingPong {
    fn default() -> Self {
        PingPong {
            cycles: 3,
            shadow: false,
        }
    }
}

/// The same call, the same result: refused from the `block`-th time in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NoProgress {
    /// Times the same call may return the same result before the next is refused.
    pub block: u32,
    /// Decide and report, refuse nothing.
    pub shadow: bool,
}

impl Default for NoProgress {
    fn default() -> Self {
        NoProgress {
            block: 3,
            shadow: false,
        }
    }
}

/// Calls that ran, LangChain's `ToolCallLimitMiddleware` knobs with their meanings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Calls per thread (the session), across runs; kept for `session_ttl_secs`.
    pub thread_limit: Option<u64>,
    /// Calls per run (the turns since the last user message).
    pub run_limit: Option<u64>,
    /// What a call over the limit does.
    pub exit_behavior: ExitBehavior,
    /// Decide and report, refuse nothing.
    pub shadow: bool,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            thread_limit: None,
            run_limit: None,
            exit_behavior: ExitBehavior::Continue,
            shadow: false,
        }
    }
}

/// LangChain's `exit_behavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ExitBehavior {
    /// The call over the limit is answered with an error; the others run.
    #[default]
    Continue,
    /// The invocation fails (`ToolCallLimitExceededError`; at the gateway an error
    /// response).
    Error,
    /// The run ends: no call of the message runs, every one is answered.
    End,
}

impl GuardConfig {
    /// True when at least one rule is configured.
    pub fn any_rule(&self) -> bool {
        self.session.is_some()
            || self.duplicate.is_some()
            || self.repeat.is_some()
            || self.ping_pong.is_some()
            || self.no_progress.is_some()
            || self.limits.is_some()
            || self.tools.values().any(|t| {
                t.session.is_some()
                    || t.global.is_some()
                    || t.limits.is_some()
                    || t.repeat.is_some()
            })
    }

    /// True when a rule needs the store (windows, duplicates, budgets); the history
    /// rules (`repeat`, `ping_pong`, `no_progress`) need none.
    pub fn needs_store(&self) -> bool {
        self.session.is_some()
            || self.duplicate.is_some()
            || self.limits.is_some()
            || self
                .tools
                .values()
                .any(|t| t.session.is_some() || t.global.is_some() || t.limits.is_some())
    }

    /// The first setting that cannot work, as `key: why`.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(w) = &self.session {
            w.validate("guard.session")?;
        }
        for (name, t) in &self.tools {
            if name.is_empty() {
                return Err("guard.tools: a tool name is empty".to_owned());
            }
            if let Some(w) = &t.session {
                w.validate(&format!("guard.tools.{name}.session"))?;
            }
            if let Some(w) = &t.global {
                w.validate(&format!("guard.tools.{name}.global"))?;
            }
            if let Some(b) = &t.limits {
                b.validate(&format!("guard.tools.{name}.limits"))?;
            }
            if let Some(l) = &t.repeat {
                l.validate(&format!("guard.tools.{name}.repeat"))?;
            }
        }
        if let Some(d) = &self.duplicate {
            secs("guard.duplicate.window_secs", d.window_secs)?;
        }
        if let Some(l) = &self.repeat {
            l.validate("guard.repeat")?;
        }
        if let Some(p) = &self.ping_pong
            && p.cycles < 2
        {
            return Err("guard.ping_pong.cycles: must be at least 2 (one A B is no loop)".into());
        }
        if let Some(n) = &self.no_progress
            && n.block < 2
        {
            return Err("guard.no_progress.block: must be at least 2".into());
        }
        if let Some(b) = &self.limits {
            b.validate("guard.limits")?;
        }
        secs("guard.session_ttl_secs", self.session_ttl_secs)
    }

    /// The ladder that applies to `tool`.
    pub fn ladder(&self, tool: &str) -> Option<&Ladder> {
        self.tools
            .get(tool)
            .and_then(|t| t.repeat.as_ref())
            .or(self.repeat.as_ref())
    }

    /// The duplicate window that applies to `tool`, if any.
    pub fn duplicate_for(&self, tool: &str) -> Option<&Duplicate> {
        let off = self.tools.get(tool).and_then(|t| t.duplicate) == Some(false);
        if off { None } else { self.duplicate.as_ref() }
    }

    /// The session TTL in milliseconds.
    pub fn session_ttl_ms(&self) -> u64 {
        ms(self.session_ttl_secs)
    }
}

impl Window {
    /// `limit` calls per `window_secs`.
    pub fn new(limit: u64, window_secs: f64) -> Self {
        Window {
            limit,
            window_secs,
            shadow: false,
        }
    }

    /// The window in milliseconds (at least 1).
    pub fn window_ms(&self) -> u64 {
        ms(self.window_secs)
    }

    fn validate(&self, key: &str) -> Result<(), String> {
        limit(&format!("{key}.limit"), self.limit)?;
        secs(&format!("{key}.window_secs"), self.window_secs)
    }
}

impl Ladder {
    fn validate(&self, key: &str) -> Result<(), String> {
        let steps = [self.observe, self.block, self.stop];
        if steps.iter().all(|&s| s == 0) {
            return Err(format!(
                "{key}: observe, block and stop are all 0: the rule does nothing"
            ));
        }
        if steps.contains(&1) {
            return Err(format!(
                "{key}: a step of 1 would act on every first call; use 2 or more"
            ));
        }
        let set: Vec<u32> = steps.into_iter().filter(|&s| s > 0).collect();
        if set.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!(
                "{key}: the steps must grow: observe < block < stop (0 = off)"
            ));
        }
        Ok(())
    }
}

impl Budget {
    fn validate(&self, key: &str) -> Result<(), String> {
        if self.thread_limit.is_none() && self.run_limit.is_none() {
            return Err(format!("{key}: set thread_limit, run_limit or both"));
        }
        if let Some(l) = self.thread_limit {
            limit(&format!("{key}.thread_limit"), l)?;
        }
        if let Some(l) = self.run_limit {
            limit(&format!("{key}.run_limit"), l)?;
        }
        if let (Some(t), Some(r)) = (self.thread_limit, self.run_limit)
            && r > t
        {
            return Err(format!(
                "{key}: run_limit ({r}) is above thread_limit ({t}): a run is part of a thread"
            ));
        }
        Ok(())
    }
}

fn limit(key: &str, l: u64) -> Result<(), String> {
    if l == 0 || l > MAX_LIMIT {
        return Err(format!("{key}: must be between 1 and {MAX_LIMIT}, not {l}"));
    }
    Ok(())
}

fn secs(key: &str, s: f64) -> Result<(), String> {
    if !(s.is_finite() && (0.001..=MAX_WINDOW_SECS).contains(&s)) {
        return Err(format!(
            "{key}: must be between 0.001 and {MAX_WINDOW_SECS} seconds, not {s}"
        ));
    }
    Ok(())
}

fn ms(s: f64) -> u64 {
    // Validated: finite and within a day, so the cast neither wraps nor saturates.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let v = (s * 1000.0).round() as u64;
    v.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_key() {
        let mut c = GuardConfig {
            session: Some(Window::new(0, 60.0)),
            ..GuardConfig::default()
        };
        assert!(c.validate().unwrap_err().starts_with("guard.session.limit"));
        c.session = Some(Window::new(5, 60.0));
        assert!(c.validate().is_ok());
        c.repeat = Some(Ladder {
            observe: 3,
            block: 2,
            stop: 6,
            shadow: false,
        });
        assert!(c.validate().unwrap_err().contains("must grow"));
        c.repeat = Some(Ladder::default());
        c.tools.insert(
            "pay".into(),
            ToolRules {
                limits: Some(Budget {
                    thread_limit: Some(1),
                    run_limit: Some(2),
                    ..Budget::default()
                }),
                ..ToolRules::default()
            },
        );
        assert!(
            c.validate()
                .unwrap_err()
                .starts_with("guard.tools.pay.limits")
        );
    }

    #[test]
    fn a_tool_can_leave_the_duplicate_rule() {
        let mut c = GuardConfig {
            duplicate: Some(Duplicate {
                window_secs: 60.0,
                shadow: false,
            }),
            ..GuardConfig::default()
        };
        c.tools.insert(
            "poll".into(),
            ToolRules {
                duplicate: Some(false),
                ..ToolRules::default()
            },
        );
        assert!(c.duplicate_for("poll").is_none());
        assert!(c.duplicate_for("search").is_some());
        assert!(!c.needs_store() || c.duplicate.is_some());
    }
}
