//! The gateway's configuration: TOML, every key overridable from the environment
//! (`TOOLMEND_<SECTION>__<KEY>`, e.g. `TOOLMEND_UPSTREAM__BASE_URL`), embedded defaults
//! for everything but the upstream.

use std::{net::SocketAddr, time::Duration};

use serde::{Deserialize, Serialize};

/// Everything the gateway needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The provider requests go to.
    pub upstream: Upstream,
    /// The request path: the history sent upstream.
    pub history: History,
    /// The response path: the tool calls in what comes back.
    pub calls: Calls,
    /// Bounds.
    pub limits: Limits,
    /// The correction model (for `calls.invalid = "correct"`).
    pub correction: Correction,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8790)),
            upstream: Upstream::default(),
            history: History::default(),
            calls: Calls::default(),
            limits: Limits::default(),
            correction: Correction::default(),
        }
    }
}

/// The OpenAI-compatible provider behind the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Upstream {
    /// Its base URL, up to and including `/v1` (e.g. `https://api.openai.com/v1`).
    pub base_url: String,
    /// The environment variable holding the API key sent upstream. Unset or empty: the
    /// client's own `Authorization` header is passed through.
    pub api_key_env: Option<String>,
    /// Seconds to wait for the upstream's response headers (and between stream chunks).
    pub timeout_secs: f64,
    /// Seconds to wait for a connection.
    pub connect_timeout_secs: f64,
}

impl Default for Upstream {
    fn default() -> Self {
        Upstream {
            base_url: String::new(),
            api_key_env: None,
            timeout_secs: 120.0,
            connect_timeout_secs: 10.0,
        }
    }
}

impl Upstream {
    /// The response timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_secs.max(0.001))
    }
}

/// What to do with a history that breaks the call/result pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryPolicy {
    /// Fix it (`history::sanitize`) and say so in `x-toolmend-history`.
    Sanitize,
    /// Answer 400 before any upstream call, naming each violation.
    Reject,
    /// Send it as it is.
    Pass,
}

/// The request path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct History {
    /// `sanitize` (default), `reject` or `pass`.
    pub policy: HistoryPolicy,
    /// Results whose call is elsewhere: `drop` (default) or `rehome` (move them back).
    pub orphans: String,
    /// Trim the history sent upstream to this many tokens (whole groups; system and the
    /// first user message stay). None: no trim.
    pub max_tokens: Option<usize>,
    /// Token counting for the budget: `o200k_base`, `cl100k_base` or `bytes`.
    pub encoding: String,
}

impl Default for History {
    fn default() -> Self {
        History {
            policy: HistoryPolicy::Sanitize,
            orphans: "drop".to_owned(),
            max_tokens: None,
            encoding: "o200k_base".to_owned(),
        }
    }
}

/// What to do with a call that stays invalid after mending. Policies run in the order
/// given (`invalid = ["re_ask", "correct"]`); what is still invalid at the end is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidPolicy {
    /// Send the feedback back to the upstream model (the client never sees it), at most
    /// `max_re_asks` times.
    ReAsk,
    /// Ask the correction model (`[correction]`) to fix each call, re-validated.
    Correct,
    /// Forward the call as it is, flagged in `x-toolmend-unresolved`.
    Pass,
}

/// One policy or a chain of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Policies {
    /// `invalid = "re_ask"`.
    One(InvalidPolicy),
    /// `invalid = ["re_ask", "correct"]`.
    Chain(Vec<InvalidPolicy>),
}

impl Policies {
    /// The policies in order.
    pub fn list(&self) -> &[InvalidPolicy] {
        match self {
            Policies::One(p) => std::slice::from_ref(p),
            Policies::Chain(v) => v,
        }
    }
}

/// The correction model for the `correct` policy: an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Correction {
    /// Its base URL, up to `/v1`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The environment variable holding its API key (none: no key sent).
    pub api_key_env: Option<String>,
    /// Attempts per call.
    pub max_retries: u32,
    /// Conversation messages shown to it (0: none).
    pub context_messages: usize,
    /// Seconds per attempt.
    pub timeout_secs: f64,
}

impl Default for Correction {
    fn default() -> Self {
        Correction {
            base_url: String::new(),
            model: String::new(),
            api_key_env: None,
            max_retries: 2,
            context_messages: 10,
            timeout_secs: 30.0,
        }
    }
}

/// The response path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Calls {
    /// Mend the tool calls of responses (repair, coerce, validate against the request's
    /// `tools`). Off: responses pass untouched.
    pub mend: bool,
    /// Calls open models write into the content become real `tool_calls`.
    pub calls_in_content: bool,
    /// Run a cut-off call on what could be read (off: it stays invalid).
    pub accept_truncated: bool,
    /// `re_ask` (default), `correct`, `pass`, or a chain (`["re_ask", "correct"]`).
    pub invalid: Policies,
    /// Most re-asks per request.
    pub max_re_asks: u32,
}

impl Default for Calls {
    fn default() -> Self {
        Calls {
            mend: true,
            calls_in_content: true,
            accept_truncated: false,
            invalid: Policies::One(InvalidPolicy::ReAsk),
            max_re_asks: 1,
        }
    }
}

/// Bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request body, bytes (413 beyond).
    pub max_body_bytes: usize,
    /// Compiled tool sets kept (requests usually repeat the same `tools`).
    pub tool_cache: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 8 * 1024 * 1024,
            tool_cache: 256,
        }
    }
}

/// A configuration that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The TOML (file or environment) does not fit.
    #[error("configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Reads TOML text, then applies `TOOLMEND_<SECTION>__<KEY>` variables from `env`
    /// (values are read as TOML: `true`, `3`, `"text"`, or bare text as a string).
    ///
    /// # Errors
    ///
    /// An unknown key, a wrong type, or a bad environment value, with its name.
    pub fn from_toml_and_env(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut doc: toml::Table =
            toml::from_str(text).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        for (name, raw) in env {
            let Some(path) = name.strip_prefix("TOOLMEND_") else {
                continue;
            };
            let keys: Vec<String> = path.split("__").map(str::to_ascii_lowercase).collect();
            if keys.iter().any(String::is_empty) {
                continue;
            }
            let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or(toml::Value::String(raw.clone()));
            let mut table = &mut doc;
            for key in &keys[..keys.len() - 1] {
                let entry = table
                    .entry(key.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                table = entry.as_table_mut().ok_or_else(|| {
                    ConfigError::Invalid(format!("{name}: {key} is not a section"))
                })?;
            }
            table.insert(keys[keys.len() - 1].clone(), value);
        }
        let config: Config = toml::Value::Table(doc)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    /// Checks what serde cannot.
    ///
    /// # Errors
    ///
    /// A missing upstream, an unknown orphan policy or encoding.
    pub fn check(&self) -> Result<(), ConfigError> {
        let base = &self.upstream.base_url;
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ConfigError::Invalid(format!(
                "upstream.base_url must be an http(s) URL ending in /v1, got {base:?} \
                 (set it in the TOML, with TOOLMEND_UPSTREAM__BASE_URL, or --upstream)"
            )));
        }
        if self.calls.invalid.list().contains(&InvalidPolicy::Correct)
            && (self.correction.base_url.is_empty() || self.correction.model.is_empty())
        {
            return Err(ConfigError::Invalid(
                "calls.invalid includes \"correct\" but [correction] has no base_url and model"
                    .to_owned(),
            ));
        }
        if self.calls.invalid.list().contains(&InvalidPolicy::Correct)
            && self.correction.max_retries == 0
        {
            return Err(ConfigError::Invalid(
                "correction.max_retries is 0: the correction model would never be asked".to_owned(),
            ));
        }
        if !matches!(self.history.orphans.as_str(), "drop" | "rehome") {
            return Err(ConfigError::Invalid(format!(
                "history.orphans must be \"drop\" or \"rehome\", got {:?}",
                self.history.orphans
            )));
        }
        if !matches!(
            self.history.encoding.as_str(),
            "o200k_base" | "cl100k_base" | "bytes"
        ) {
            return Err(ConfigError::Invalid(format!(
                "history.encoding must be \"o200k_base\", \"cl100k_base\" or \"bytes\", got {:?}",
                self.history.encoding
            )));
        }
        Ok(())
    }
}
