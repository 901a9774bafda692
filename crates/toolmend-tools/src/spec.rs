//! The TOML that declares tools: `[[tools]]` (HTTP tool services, or one tool of an MCP
//! server with its own shaping) and `[[mcp]]` (MCP servers, over streamable HTTP or
//! stdio). Parsed with every entry's place in the file, so that an error names the tool
//! and the line. The same text feeds the node, the Python fronts and the gateway (whose
//! own config may carry these tables beside its other sections).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

/// An error in a tools file: where (file and line), which tool, what, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}{}: {}{message}", line.map(|l| format!(":{l}")).unwrap_or_default(), tool.as_ref().map(|t| format!("tool {t:?}: ")).unwrap_or_default())]
pub struct LoadError {
    /// The file (or `"<inline>"`).
    pub origin: String,
    /// The 1-based line of the entry, when known.
    pub line: Option<usize>,
    /// The tool or server the error is about.
    pub tool: Option<String>,
    /// What is wrong and what to do.
    pub message: String,
}

/// How a tool is served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// A tool service speaking the envelope (`{function, arguments}` in,
    /// `{status, data, message, call_id, timestamp}` out), or mapped by an `adapter`.
    #[default]
    Http,
    /// A tool of an `[[mcp]]` server.
    Mcp,
}

/// A header value: a plain string, or a secret read from the environment at start
/// (`{ env = "WEATHER_TOKEN", prefix = "Bearer " }`), never logged.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum HeaderSpec {
    /// A literal value.
    Plain(String),
    /// A secret from the environment.
    Env {
        /// The variable.
        env: String,
        /// Put before the value (`"Bearer "`).
        #[serde(default)]
        prefix: String,
    },
}

/// Field mapping for a service that does not answer with the envelope. Each field is a
/// JSON Pointer into the answer (`""` is the whole answer).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterSpec {
    /// Where the payload is (default: the whole answer).
    #[serde(default)]
    pub data: String,
    /// Where a human-readable message is, if any.
    pub message: Option<String>,
    /// A field whose presence (not null, not false) means the call failed.
    pub error: Option<String>,
    /// Where the service echoes the call id, if it does (checked like the envelope's).
    pub call_id: Option<String>,
}

/// One `[[tools]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    /// The name the model calls it by (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// What it does (the model reads this). For an MCP tool: the server's, unless given.
    #[serde(default)]
    pub description: Option<String>,
    /// The JSON Schema of its arguments, as a TOML table (or `parameters_json`, the same
    /// as JSON text). Business rules go in as schema extensions
    /// (`x-business-rules = { max_days_from_now = 30, min_date = "2020-01-01" }`).
    #[serde(default)]
    pub parameters: Option<Value>,
    /// The schema as JSON text (easier to paste than a TOML table).
    #[serde(default)]
    pub parameters_json: Option<String>,
    /// `http` (default) or `mcp`.
    #[serde(default)]
    pub kind: ToolKind,
    /// HTTP: the URL the call is POSTed to.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// MCP: the `[[mcp]]` server that serves it.
    #[serde(default)]
    pub server: Option<String>,
    /// MCP: the server's name for it, when it differs from `name`.
    #[serde(default)]
    pub remote_name: Option<String>,
    /// Give up on one attempt after this long (default 10 000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Attempts after the first, on a timeout, a refused connection, 5xx or 429. Only
    /// allowed where a second run is harmless: `idempotent = true`, or
    /// `idempotency_key = true` (the service gets `Idempotency-Key: <call id>`).
    #[serde(default)]
    pub retries: u32,
    /// The tool may run twice with the same arguments without harm (a lookup).
    #[serde(default)]
    pub idempotent: bool,
    /// Send `Idempotency-Key: <call id>` so the service can run a retried call once.
    #[serde(default)]
    pub idempotency_key: bool,
    /// Extra headers (secrets from the environment).
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderSpec>,
    /// Flood limits of this tool (`[tools.limits]`, the guard's per-tool rules:
    /// `session`, `global`, `limits`, `duplicate`, `repeat`).
    #[serde(default)]
    pub limits: Option<toolmend::guard::ToolRules>,
    /// For services that do not answer with the envelope.
    #[serde(default)]
    pub adapter: Option<AdapterSpec>,
    /// A minijinja template that turns the payload into what the model reads
    /// (`data`, `message` and the payload's top-level fields are in scope).
    #[serde(default)]
    pub template: Option<String>,
    /// At most this many bytes reach the model (default 4 000); the rest is cut with a
    /// marker saying how much was left out. The whole payload stays in the artifact.
    #[serde(default)]
    pub budget_bytes: Option<usize>,
    /// The content is rendered as Markdown by the client: escape it.
    #[serde(default)]
    pub markdown: bool,
    /// The tool calls go to when this one breaches its SLA.
    #[serde(default)]
    pub backup: Option<String>,
    /// The p95 service latency this tool must keep (ms); above it, calls go to `backup`.
    #[serde(default)]
    pub sla_ms: Option<u64>,
    /// The gateway runs this tool itself (its calls never reach the client).
    #[serde(default)]
    pub server_side: bool,
    /// Run a call whose text was cut off (only for tools where a partial argument is harmless).
    #[serde(default)]
    pub accept_truncated: bool,
    /// The largest answer accepted from the service (default 1 MiB).
    #[serde(default)]
    pub max_response_bytes: Option<usize>,
    /// How far the service's `timestamp` may be from ours before it is recorded as skew (default 500 ms).
    #[serde(default)]
    pub skew_tolerance_ms: Option<u64>,
}

/// One `[[mcp]]` entry: an MCP server whose tools are exposed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSpec {
    /// The server's name (what `[[tools]] server = …` refers to).
    pub name: String,
    /// Streamable HTTP: the endpoint (`http://127.0.0.1:8000/mcp`).
    #[serde(default)]
    pub url: Option<String>,
    /// stdio: the program to start.
    #[serde(default)]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: its environment (secrets from ours).
    #[serde(default)]
    pub env: BTreeMap<String, HeaderSpec>,
    /// Streamable HTTP: extra headers (secrets from the environment).
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderSpec>,
    /// Which of its tools to expose (default: all it lists).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Give up on connecting, listing or one call after this long (default 10 000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// The gateway runs this server's tools itself.
    #[serde(default)]
    pub server_side: bool,
    /// Budget for results of its tools without their own `[[tools]]` entry.
    #[serde(default)]
    pub budget_bytes: Option<usize>,
    /// Escape results as Markdown.
    #[serde(default)]
    pub markdown: bool,
}

/// The default attempt timeout.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The default result budget.
pub const DEFAULT_BUDGET_BYTES: usize = 4_000;
/// The default answer size limit.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1 << 20;
/// The default clock-skew tolerance.
pub const DEFAULT_SKEW_TOLERANCE_MS: u64 = 500;

/// A parsed tools file, each entry with its line.
#[derive(Debug, Clone, Default)]
pub struct ToolsFile {
    /// Where it came from (for errors).
    pub origin: String,
    /// `[[tools]]`, with their lines.
    pub tools: Vec<(usize, ToolSpec)>,
    /// `[[mcp]]`, with their lines.
    pub mcp: Vec<(usize, McpSpec)>,
}

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    tools: Vec<Spanned<ToolSpec>>,
    #[serde(default)]
    mcp: Vec<Spanned<McpSpec>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictDoc {
    #[serde(default)]
    tools: Vec<Spanned<ToolSpec>>,
    #[serde(default)]
    mcp: Vec<Spanned<McpSpec>>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

impl ToolsFile {
    /// A file that holds only `[[tools]]` and `[[mcp]]` (any other key is an error).
    ///
    /// # Errors
    ///
    /// TOML syntax, an unknown key, a wrong type: with the line.
    pub fn parse(text: &str, origin: &str) -> Result<ToolsFile, LoadError> {
        Self::parse_inner(text, origin, true)
    }

    /// The `[[tools]]` and `[[mcp]]` tables of a larger configuration (the gateway's):
    /// other top-level keys are left to their owner.
    ///
    /// # Errors
    ///
    /// As [`parse`](Self::parse), for these two tables.
    pub fn parse_section(text: &str, origin: &str) -> Result<ToolsFile, LoadError> {
        Self::parse_inner(text, origin, false)
    }

    fn parse_inner(text: &str, origin: &str, strict: bool) -> Result<ToolsFile, LoadError> {
        let fail = |e: toml::de::Error| LoadError {
            origin: origin.to_owned(),
            line: e.span().map(|s| line_of(text, s.start)),
            tool: None,
            message: e.message().to_owned(),
        };
        let (tools, mcp) = if strict {
            let d: StrictDoc = toml::from_str(text).map_err(fail)?;
            (d.tools, d.mcp)
        } else {
            let d: Doc = toml::from_str(text).map_err(fail)?;
            (d.tools, d.mcp)
        };
        Ok(ToolsFile {
            origin: origin.to_owned(),
            tools: tools
                .into_iter()
                .map(|s| (line_of(text, s.span().start), s.into_inner()))
                .collect(),
            mcp: mcp
                .into_iter()
                .map(|s| (line_of(text, s.span().start), s.into_inner()))
                .collect(),
        })
    }

    /// True when nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.mcp.is_empty()
    }

    /// An error about the entry at `line`.
    pub(crate) fn error(&self, line: usize, tool: &str, message: impl Into<String>) -> LoadError {
        LoadError {
            origin: self.origin.clone(),
            line: Some(line),
            tool: Some(tool.to_owned()),
            message: message.into(),
        }
    }
}

/// Resolves header specs against the environment. A missing variable is an error naming
/// it (the caller adds the tool and line).
pub(crate) fn resolve_headers(
    headers: &BTreeMap<String, HeaderSpec>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    headers
        .iter()
        .map(|(k, v)| match v {
            HeaderSpec::Plain(s) => Ok((k.clone(), s.clone())),
            HeaderSpec::Env { env: var, prefix } => env(var)
                .map(|val| (k.clone(), format!("{prefix}{val}")))
                .ok_or_else(|| {
                    format!("the environment variable {var} (for {k:?}) is not set; set it, or remove the entry")
                }),
        })
        .collect()
}
