//! The gateway's configuration: TOML, every key overridable from the environment
//! (`TOOLMEND_<SECTION>__<KEY>`, e.g. `TOOLMEND_UPSTREAM__BASE_URL`), embedded defaults
//! for everything but the upstream.

use std::{net::SocketAddr, time::Duration};

use serde::{Deserialize, Serialize};

mod load;
pub(crate) mod url;

pub use load::Override;

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
    /// Flood control and loop detection (off until a rule is set).
    pub guard: Guard,
    /// The round trip through server-side tools (`[[tools]]` / `[[mcp]]` with
    /// `server_side = true`, loaded by `toolmend-tools` from the same text).
    pub round_trip: RoundTrip,
    /// The event log: one JSON line per mended call (off without `events.path`).
    pub events: EventsConfig,
    /// Traces exported over OTLP (with the `otel` feature).
    pub telemetry: Telemetry,
    /// Who may call: client keys, the admin routes' listener or key, the explicit
    /// opt-in to serve a public address without keys.
    pub access: Access,
    /// What loading changed and says at start (`/v1` appended to a base URL).
    #[serde(skip)]
    pub(crate) notes: Vec<String>,
    /// Where each key came from (the file's line, the variable, the flag), for the
    /// errors found after loading.
    #[serde(skip)]
    pub(crate) origins: load::Origins,
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
            guard: Guard::default(),
            round_trip: RoundTrip::default(),
            events: EventsConfig::default(),
            telemetry: Telemetry::default(),
            access: Access::default(),
            notes: Vec::new(),
            origins: load::Origins::default(),
        }
    }
}

/// `[telemetry]`: OpenTelemetry traces (built with the `otel` feature): a span per
/// request, per upstream call (the GenAI semantic conventions' `chat {model}`), per
/// mending and re-ask, exported over OTLP/HTTP (protobuf) in batches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Telemetry {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`; spans are posted to
    /// its `/v1/traces`). None: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the whole URL), else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base, as here), else no export.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the spans (`OTEL_SERVICE_NAME` wins when set).
    pub service_name: String,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry {
            otlp_endpoint: None,
            service_name: "toolmend-gateway".to_owned(),
        }
    }
}

/// `[access]`: who may call. Client keys are stored as the SHA-256 of the key (64 hex
/// digits: `toolmend key hash` prints it), never the key; a request presents its key as
/// `Authorization: Bearer KEY` (OpenAI SDKs), `x-api-key` (Anthropic SDKs) or `api-key`
/// (Azure OpenAI SDKs). With at least one client, every API route answers 401 without a
/// valid key, and the client's name is its guard session's prefix, a metrics label and
/// a field of the event log. docs/gateway.md, "Who may call".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Access {
    /// The clients: `[[access.clients]]` tables, or
    /// `TOOLMEND_ACCESS__CLIENTS='[{name = "ci", key_sha256 = "…"}]'`.
    pub clients: Vec<ClientKey>,
    /// A TOML file of more `[[clients]]` tables (a mounted secret, say), read at start.
    pub clients_file: Option<std::path::PathBuf>,
    /// A listener of its own for `/metrics` (with `/healthz` and `/readyz`):
    /// `127.0.0.1:9790`. Set, `/metrics` is not served on `listen`.
    pub admin_listen: Option<SocketAddr>,
    /// The SHA-256 (hex) of the key `/metrics` asks for, wherever it is served. Unset:
    /// `/metrics` asks what the API routes ask (a client key, when there are clients).
    pub admin_key_sha256: Option<String>,
    /// Serve an address beyond loopback without client keys although the gateway holds
    /// a provider key or runs tools (anyone who reaches the port spends the key): the
    /// start refuses that unless this is true (behind an authenticating proxy, say).
    pub allow_unauthenticated: bool,
}

/// One client of `[access]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientKey {
    /// Its name: 1 to 64 of `A-Z a-z 0-9 _ - .`; its guard session's prefix, its
    /// `client` label in the metrics and its `client` in the event log.
    pub name: String,
    /// The SHA-256 of its key, 64 hex digits (`toolmend key hash`).
    pub key_sha256: String,
}

/// A client name: 1 to 64 of `A-Z a-z 0-9 _ - .` (it becomes a metrics label and a
/// session prefix).
pub(crate) fn check_client_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the client name {name:?} is not 1 to 64 of A-Z a-z 0-9 _ - . (it becomes a \
             metrics label and a session prefix)"
        ))
    }
}

/// A SHA-256 given in hex (64 digits, either case).
pub(crate) fn check_sha256(key: &str, value: &str) -> Result<(), String> {
    if value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(());
    }
    let hint = if value.len() != 64 && !value.is_empty() {
        " (is it the key itself? Store its hash, never the key: \
         printf %s \"$KEY\" | toolmend key hash)"
    } else {
        " (printf %s \"$KEY\" | toolmend key hash prints one)"
    };
    Err(format!(
        "{key} must be the SHA-256 of a key, 64 hex digits; got {} characters{hint}",
        value.len()
    ))
}

impl Access {
    /// Checks what serde cannot: the names, the hashes, no name or key twice.
    ///
    /// # Errors
    ///
    /// The first that does not fit, named.
    pub(crate) fn check(&self) -> Result<(), String> {
        check_clients("access.clients", &self.clients)?;
        if let Some(h) = &self.admin_key_sha256 {
            check_sha256("access.admin_key_sha256", h)?;
            if self
                .clients
                .iter()
                .any(|c| c.key_sha256.eq_ignore_ascii_case(h))
            {
                return Err(
                    "access.admin_key_sha256 is also a client's key: give /metrics a key of its \
                     own"
                    .to_owned(),
                );
            }
        }
        Ok(())
    }
}

/// Checks `clients` (from `at`: a key or a file): names and hashes well formed, none twice.
pub(crate) fn check_clients(at: &str, clients: &[ClientKey]) -> Result<(), String> {
    for (i, c) in clients.iter().enumerate() {
        check_client_name(&c.name).map_err(|e| format!("{at}: {e}"))?;
        check_sha256(
            &format!("{at}: client {:?}: key_sha256", c.name),
            &c.key_sha256,
        )?;
        if let Some(other) = clients[..i].iter().find(|o| o.name == c.name) {
            return Err(format!(
                "{at}: the client name {:?} is given twice: names tell clients apart",
                other.name
            ));
        }
        if let Some(other) = clients[..i]
            .iter()
            .find(|o| o.key_sha256.eq_ignore_ascii_case(&c.key_sha256))
        {
            return Err(format!(
                "{at}: clients {:?} and {:?} have the same key: give each client its own",
                other.name, c.name
            ));
        }
    }
    Ok(())
}

/// `[round_trip]`: how the gateway runs the tools it serves itself. When the model's
/// answer calls a server-side tool, the gateway runs it, appends the call and its result
/// to the request's messages and asks the model again, until the answer calls none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoundTrip {
    /// Model answers one client request may take (the first included): past it, a call
    /// to a server-side tool still in the answer is a 504 `toolmend_round_trip_limit`.
    /// Re-asks for invalid or refused calls are not rounds (`calls.max_re_asks`,
    /// `guard.max_re_asks` bound them).
    pub max_rounds: u32,
    /// Seconds from the request's arrival by which the round trip must be done: tool
    /// runs and later upstream calls are cut to what is left; past it, 504
    /// `toolmend_round_trip_limit`.
    pub max_secs: f64,
    /// Add the server-side tools' definitions to every upstream request's `tools` (the
    /// client does not know them). Off: only calls to tools the client declares itself
    /// are run by the gateway.
    pub inject: bool,
}

impl Default for RoundTrip {
    fn default() -> Self {
        RoundTrip {
            max_rounds: 4,
            max_secs: 60.0,
            inject: true,
        }
    }
}

impl RoundTrip {
    /// The time bound.
    pub fn max_time(&self) -> Duration {
        secs(self.max_secs)
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
    /// Seconds one upstream answer may take in all, headers to last byte (streams
    /// included), however steadily it drips. Each re-ask is an answer of its own.
    pub deadline_secs: f64,
    /// Redirects from the upstream: `none` (default: a 3xx is answered with 502, naming
    /// where it pointed) or `same_origin` (followed only to the same scheme, host and port).
    pub redirects: Redirects,
    /// The header our own key (`api_key_env`) is sent in: `authorization` (default,
    /// `Bearer KEY`) or `api-key` (Azure OpenAI and servers like it, the key as it is).
    /// A `messages` upstream takes it in `x-api-key`, as Anthropic's API does.
    pub api_key_header: ApiKeyHeader,
    /// The API the upstream speaks: `chat_completions` (default; every front's request
    /// translated to it), `messages` (Anthropic Messages, `POST {base_url}/messages`) or
    /// `responses` (OpenAI Responses, `POST {base_url}/responses`, asked with
    /// `store: false`). A front of the same API passes the client's body through
    /// untouched when its history needed no change; any other request is translated.
    pub api: UpstreamApi,
}

/// The wire API an upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamApi {
    /// OpenAI Chat Completions (`/chat/completions`): vLLM, llama.cpp, SGLang, Ollama …
    #[default]
    ChatCompletions,
    /// Anthropic Messages (`/messages`).
    Messages,
    /// OpenAI Responses (`/responses`).
    Responses,
}

impl UpstreamApi {
    /// Its name in the configuration and the account.
    pub fn name(self) -> &'static str {
        match self {
            UpstreamApi::ChatCompletions => "chat_completions",
            UpstreamApi::Messages => "messages",
            UpstreamApi::Responses => "responses",
        }
    }
}

/// Which upstream redirects are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Redirects {
    /// None: a 3xx answer becomes a 502 that says where it pointed.
    None,
    /// Only to the same scheme, host and port (at most 5 hops).
    SameOrigin,
}

/// How our own upstream key is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApiKeyHeader {
    /// `Authorization: Bearer KEY`.
    #[serde(rename = "authorization")]
    Authorization,
    /// `api-key: KEY`.
    #[serde(rename = "api-key")]
    ApiKey,
}

impl Default for Upstream {
    fn default() -> Self {
        Upstream {
            base_url: String::new(),
            api_key_env: None,
            timeout_secs: 120.0,
            connect_timeout_secs: 10.0,
            deadline_secs: 600.0,
            redirects: Redirects::None,
            api_key_header: ApiKeyHeader::Authorization,
            api: UpstreamApi::ChatCompletions,
        }
    }
}

impl Upstream {
    /// The response timeout.
    pub fn timeout(&self) -> Duration {
        secs(self.timeout_secs)
    }

    /// The total deadline of one answer.
    pub fn deadline(&self) -> Duration {
        secs(self.deadline_secs)
    }
}

/// Seconds as a duration: at least a millisecond, at most a year (so a huge or odd value
/// in the TOML never overflows a timer).
pub(crate) fn secs(s: f64) -> Duration {
    if s.is_nan() {
        return Duration::from_millis(1);
    }
    Duration::from_secs_f64(s.clamp(0.001, 31_536_000.0))
}

/// `[guard]`: the rules (`toolmend::guard::GuardConfig`, flattened: `[guard.session]`,
/// `[guard.tools.NAME]`, `[guard.repeat]` …) and how the gateway applies them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Guard {
    /// What a refused call does to the response: `feedback` (default: the refused calls
    /// are answered with the guard's message and the model is asked again without them,
    /// invisible to the client), `reject` (HTTP 429 with `Retry-After`; 400 when the rule
    /// ends the run) or `flag` (passed through, flagged in `x-toolmend-guard`).
    pub on_flood: FloodPolicy,
    /// Where the session comes from, first found wins: `header` (`x-toolmend-session`),
    /// `user` (the body's `user`), `metadata` (`metadata.<metadata_key>`), `client` (the
    /// name of the `[access]` client whose key the request presented), `api_key` (a
    /// hash of the bearer key). No session: only the rules that need none apply. With
    /// `[access]` clients, every session is the client's: its name is the prefix of
    /// whatever source found it, so two clients never share one.
    pub session_from: Vec<SessionSource>,
    /// The `metadata` key naming the session.
    pub metadata_key: String,
    /// `memory` (default, per instance) or `redis` (shared between instances).
    pub store: StoreKind,
    /// The Redis URL for `store = "redis"` (`redis://host:port/db`).
    pub redis_url: Option<String>,
    /// Milliseconds the store may take per decision; past it `fail` applies.
    pub timeout_ms: u64,
    /// When the store does not answer in time: `open` (default: the calls run; the
    /// history rules still apply) or `closed` (the counted calls are refused).
    pub fail: toolmend::guard::FailMode,
    /// Keys the in-memory store keeps (and the blocked keys Redis' local front keeps).
    pub max_keys: usize,
    /// Re-asks per response under `on_flood = "feedback"` before the gateway rejects.
    pub max_re_asks: u32,
    /// The rules.
    #[serde(flatten)]
    pub rules: toolmend::guard::GuardConfig,
}

impl Default for Guard {
    fn default() -> Self {
        Guard {
            on_flood: FloodPolicy::Feedback,
            session_from: vec![
                SessionSource::Header,
                SessionSource::User,
                SessionSource::Metadata,
                SessionSource::Client,
                SessionSource::ApiKey,
            ],
            metadata_key: "session_id".to_owned(),
            store: StoreKind::Memory,
            redis_url: None,
            timeout_ms: 20,
            fail: toolmend::guard::FailMode::Open,
            max_keys: toolmend::guard::store::DEFAULT_MAX_KEYS,
            max_re_asks: 1,
            rules: toolmend::guard::GuardConfig::default(),
        }
    }
}

/// What a refused call does to the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FloodPolicy {
    /// Answer the refused calls to the model and ask it again.
    Feedback,
    /// HTTP 429 (400 when the run is ended) in OpenAI's error shape.
    Reject,
    /// Pass through, flagged.
    Flag,
}

impl FloodPolicy {
    /// Its name in headers.
    pub fn as_str(self) -> &'static str {
        match self {
            FloodPolicy::Feedback => "feedback",
            FloodPolicy::Reject => "reject",
            FloodPolicy::Flag => "flag",
        }
    }
}

/// Where a session id may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionSource {
    /// The `x-toolmend-session` header.
    Header,
    /// The body's `user`.
    User,
    /// The body's `metadata.<metadata_key>`.
    Metadata,
    /// The `[access]` client's name (the key it presented, checked).
    Client,
    /// A hash of the `Authorization: Bearer` key.
    ApiKey,
}

impl SessionSource {
    /// Its name in headers.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionSource::Header => "header",
            SessionSource::User => "user",
            SessionSource::Metadata => "metadata",
            SessionSource::Client => "client",
            SessionSource::ApiKey => "api_key",
        }
    }
}

/// Where the guard keeps its counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// In this process.
    Memory,
    /// In Redis, shared.
    Redis,
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
    /// Calls of one answer corrected at once (1 to 64); the others wait their turn.
    pub max_concurrency: usize,
    /// What becomes of an answer that changed a value no issue named: `issues` (refused;
    /// the original reading stays, with its feedback) or `unsafe` (kept, recorded as the
    /// unsafe fix `correction_beyond_issues`).
    pub scope: toolmend::correct::CorrectionScope,
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
            max_concurrency: 4,
            scope: toolmend::correct::CorrectionScope::Issues,
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
    /// Calls open models write into the text become real `tool_calls` (the core's
    /// `PlanOptions::calls_in_text`; `calls_in_content`, its earlier name, is read too).
    #[serde(alias = "calls_in_content")]
    pub calls_in_text: bool,
    /// Run a cut-off call on what could be read (off: it stays invalid).
    pub accept_truncated: bool,
    /// As `toolmend mend --strict`: no repair of the arguments' text, no coercion, cut-off
    /// calls refused; a call that is not valid as sent is invalid (`invalid` says what
    /// follows). Wins over `coercions`.
    pub strict: bool,
    /// The coercions that run, as Python's `coerce=` takes them: `true` (the defaults),
    /// `false` (none), or a table of switch names or fix ids to booleans over the
    /// defaults (`{ string_to_integer = false, key_renamed = false }`); a fix id sets its
    /// whole switch. An unknown name stops the start, listing the valid ones.
    pub coercions: toolmend::schema::Coercions,
    /// The older switch for reasoning in the content: `false` is `reasoning = "keep"`
    /// (and wins over `reasoning`); `true` leaves the choice to `reasoning`.
    pub strip_thinking: bool,
    /// Reasoning written into the content (`<think>…</think>` and the other tags of
    /// `toolmend::repair::markers::THINKING_TAGS`): `move` (default) to the message's
    /// `reasoning_content` (a stream's `delta.reasoning_content`), `drop`, or `keep` in
    /// the content.
    pub reasoning: ReasoningPolicy,
    /// The model's chat template opens a thinking block in the prompt (DeepSeek-R1's,
    /// Qwen3's thinking templates served without a reasoning parser): its answer begins
    /// inside the block, everything up to the first `</think>` (all of it, with none) is
    /// reasoning, in the JSON answer and the stream alike. Off (default): a bare
    /// `</think>` is removed alone, the text before it stays content (what a stream,
    /// which sent that text already, can only do).
    pub template_opens_thinking: bool,
    /// The `toolmend` object in every chat completion (and a stream's last chunk): what
    /// the gateway did, where SDKs keep it. Off: only the headers and the SSE comment.
    pub account: bool,
    /// `re_ask` (default), `correct`, `pass`, or a chain (`["re_ask", "correct"]`).
    pub invalid: Policies,
    /// Most re-asks per request.
    pub max_re_asks: u32,
}

/// What the response path does with reasoning a model wrote into its content.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningPolicy {
    /// Out of the content, into `reasoning_content` (the field vLLM, SGLang and DeepSeek
    /// use).
    #[default]
    Move,
    /// Out of the content, gone.
    Drop,
    /// Left in the content as the model wrote it.
    Keep,
}

impl Calls {
    /// How every call of the gateway is mended (the chat path, streamed or not, re-asked
    /// answers, corrections, `/v1/tools/execute`, the round trip): the one place the
    /// options are built from `strict` and `coercions`.
    pub fn mend_options(&self) -> toolmend::MendOptions {
        if self.strict {
            toolmend::MendOptions::strict()
        } else {
            toolmend::MendOptions {
                coercions: self.coercions.clone(),
                ..toolmend::MendOptions::default()
            }
        }
    }

    /// True when answers are read as begun inside a thinking block the template opened:
    /// `template_opens_thinking`, and reasoning not kept (kept, nothing is read).
    pub fn opens_thinking(&self) -> bool {
        self.template_opens_thinking
            && self.mend
            && self.reasoning_policy() != ReasoningPolicy::Keep
    }

    /// The reasoning policy in force (`strip_thinking = false` is `keep`).
    pub fn reasoning_policy(&self) -> ReasoningPolicy {
        if self.strip_thinking {
            self.reasoning
        } else {
            ReasoningPolicy::Keep
        }
    }
}

impl Default for Calls {
    fn default() -> Self {
        Calls {
            mend: true,
            calls_in_text: true,
            accept_truncated: false,
            strict: false,
            coercions: toolmend::schema::Coercions::default(),
            strip_thinking: true,
            reasoning: ReasoningPolicy::Move,
            template_opens_thinking: false,
            account: true,
            invalid: Policies::One(InvalidPolicy::ReAsk),
            max_re_asks: 1,
        }
    }
}

/// Bounds: every one is enforced with an error in OpenAI's shape (docs/gateway.md, "Limits").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request body, bytes (413 beyond).
    pub max_body_bytes: usize,
    /// Largest request head (request line and headers), bytes (431 beyond).
    pub max_header_bytes: usize,
    /// Seconds a client has to send a request head; also how long a kept-alive
    /// connection may sit idle before its next request.
    pub header_timeout_secs: f64,
    /// Seconds a client has to send the whole body (408 beyond).
    pub body_timeout_secs: f64,
    /// Open client connections; one more is answered 503 and closed.
    pub max_connections: usize,
    /// Messages in a request's history (400 beyond).
    pub max_messages: usize,
    /// Tool calls in one message of the history (400 beyond). An upstream answer's calls
    /// are bounded by `max_upstream_bytes`.
    pub max_calls_per_message: usize,
    /// Tools in a request (400 beyond).
    pub max_tools: usize,
    /// One tool's definition, serialized, bytes (400 beyond).
    pub max_schema_bytes: usize,
    /// One call's `arguments` text in the history, bytes (400 beyond). An upstream
    /// answer's call longer than the repair's input limit (4 MiB) is invalid, never run.
    pub max_argument_bytes: usize,
    /// Largest upstream answer (a JSON body, or what a stream buffers), bytes (502 beyond).
    pub max_upstream_bytes: usize,
    /// Distinct `tool` label values in the metrics; further tools count as `other`.
    pub max_tool_labels: usize,
    /// Seconds requests in flight get to finish after SIGTERM or Ctrl-C.
    pub shutdown_grace_secs: f64,
    /// Compiled tool sets kept (requests usually repeat the same `tools`).
    pub tool_cache: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 8 * 1024 * 1024,
            max_header_bytes: 64 * 1024,
            header_timeout_secs: 30.0,
            body_timeout_secs: 60.0,
            max_connections: 4096,
            max_messages: 100_000,
            max_calls_per_message: 100_000,
            max_tools: 1024,
            max_schema_bytes: 256 * 1024,
            max_argument_bytes: 4 * 1024 * 1024,
            max_upstream_bytes: 32 * 1024 * 1024,
            max_tool_labels: 500,
            shutdown_grace_secs: 30.0,
            tool_cache: 256,
        }
    }
}

impl Limits {
    /// The request-head timeout.
    pub fn header_timeout(&self) -> Duration {
        secs(self.header_timeout_secs)
    }

    /// The body timeout.
    pub fn body_timeout(&self) -> Duration {
        secs(self.body_timeout_secs)
    }

    /// The shutdown grace period.
    pub fn shutdown_grace(&self) -> Duration {
        secs(self.shutdown_grace_secs)
    }
}

/// The top-level tables of the configuration that declare tools: read by
/// `toolmend_tools::ToolsFile::parse_section`, not by [`Config`].
pub const TOOL_TABLES: [&str; 2] = ["tools", "mcp"];

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
        Config::load(text, None, env, Vec::new())
    }

    /// Reads the TOML `text` of the file `file` (`None`: no file, `<config>` in errors),
    /// then applies the `TOOLMEND_<SECTION>__<KEY>` variables of `env`, then `flags`
    /// (e.g. `Override::flag("--upstream", "upstream.base_url", url)`), and checks the
    /// result. Base URLs are normalised (`/v1` appended to one without a path: see
    /// `notes`). A `TOOLMEND_*` variable without `__` that names no top-level key
    /// (`TOOLMEND_SHARED`) is no override: it is skipped, and named in `notes`.
    ///
    /// # Errors
    ///
    /// The first value that does not fit, named by where it came from: `FILE:LINE: …`,
    /// `TOOLMEND_X__Y: …`, `--upstream: …`.
    pub fn load(
        text: &str,
        file: Option<&str>,
        env: impl IntoIterator<Item = (String, String)>,
        flags: Vec<Override>,
    ) -> Result<Self, ConfigError> {
        let (mut overrides, skipped) = load::split_env(env);
        overrides.extend(flags);
        let mut config = load::load(text, file.unwrap_or("<config>"), overrides)?;
        if !skipped.is_empty() {
            config.notes.push(format!(
                "{}: not configuration overrides (those are TOOLMEND_<SECTION>__<KEY>, or \
                 TOOLMEND_LISTEN), ignored",
                skipped.join(", ")
            ));
        }
        Ok(config)
    }

    /// What loading changed or skipped that is worth a line at start (a base URL without
    /// a path got `/v1`; `TOOLMEND_*` variables that are no override were ignored).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// What the configuration allows but is likely a mistake, for a warning at start
    /// (logged by the gateway once logging runs: loading comes before it).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.guard.session_from.is_empty() && self.guard.rules.needs_store() {
            out.push("guard.session_from is empty: the per-session rules never apply".to_owned());
        }
        out
    }

    /// Every environment variable the configuration names and will read, present and
    /// not empty: `upstream.api_key_env`, and `correction.api_key_env` when the
    /// correction model is used (`calls.invalid` holds `"correct"`). An empty name
    /// (`api_key_env = ""`) is the explicit "no key of ours" (the client's credentials
    /// are passed through to the upstream; the correction model gets none). The tools'
    /// secrets are checked by their loader (`toolmend_tools`).
    ///
    /// # Errors
    ///
    /// The first variable missing, with the key that names it and where that was set.
    pub fn check_env(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let corrects = self.calls.invalid.list().contains(&InvalidPolicy::Correct);
        for (key, name, used) in [
            ("upstream.api_key_env", &self.upstream.api_key_env, true),
            (
                "correction.api_key_env",
                &self.correction.api_key_env,
                corrects,
            ),
        ] {
            let Some(name) = name.as_deref().filter(|n| !n.is_empty() && used) else {
                continue;
            };
            let state = match env(name) {
                Some(v) if !v.is_empty() => continue,
                Some(_) => "is set but empty",
                None => "is not set",
            };
            let at = self
                .origins
                .of(key)
                .map(|o| format!(" (at {o})"))
                .unwrap_or_default();
            return Err(ConfigError::Invalid(format!(
                "{key}{at} names the environment variable {name}, which {state}: set it \
                 (export {name}=...), or set {key} = \"\" for an endpoint that needs no \
                 key of the gateway's{}",
                if key.starts_with("upstream") {
                    " (the client's Authorization is then passed through)"
                } else {
                    ""
                }
            )));
        }
        Ok(())
    }

    /// Checks what serde cannot.
    ///
    /// # Errors
    ///
    /// A missing upstream, an unknown orphan policy or encoding.
    pub fn check(&self) -> Result<(), ConfigError> {
        url::normalize("upstream.base_url", &self.upstream.base_url)
            .map_err(ConfigError::Invalid)?;
        if !self.correction.base_url.is_empty() {
            url::normalize("correction.base_url", &self.correction.base_url)
                .map_err(ConfigError::Invalid)?;
        }
        self.guard.rules.validate().map_err(ConfigError::Invalid)?;
        self.access.check().map_err(ConfigError::Invalid)?;
        let g = &self.guard;
        if g.store == StoreKind::Redis && g.redis_url.as_deref().is_none_or(str::is_empty) {
            return Err(ConfigError::Invalid(
                "guard.store is \"redis\" but guard.redis_url is not set (e.g. \
                 redis://127.0.0.1:6379, or TOOLMEND_GUARD__REDIS_URL)"
                    .to_owned(),
            ));
        }
        if g.store == StoreKind::Redis
            && let Some(redis_url) = &g.redis_url
        {
            url::no_tls("guard.redis_url", redis_url).map_err(ConfigError::Invalid)?;
        }
        if g.timeout_ms == 0 || g.timeout_ms > 10_000 {
            return Err(ConfigError::Invalid(format!(
                "guard.timeout_ms is {}: use 1 to 10000 (milliseconds per decision)",
                g.timeout_ms
            )));
        }
        let l = &self.limits;
        for (name, value) in [
            ("limits.max_body_bytes", l.max_body_bytes),
            ("limits.max_header_bytes", l.max_header_bytes),
            ("limits.max_connections", l.max_connections),
            ("limits.max_messages", l.max_messages),
            ("limits.max_calls_per_message", l.max_calls_per_message),
            ("limits.max_tools", l.max_tools),
            ("limits.max_schema_bytes", l.max_schema_bytes),
            ("limits.max_argument_bytes", l.max_argument_bytes),
            ("limits.max_upstream_bytes", l.max_upstream_bytes),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid(format!(
                    "{name} is 0: nothing could pass; raise it"
                )));
            }
        }
        // hyper's read buffer cannot be smaller.
        if l.max_header_bytes < 8192 {
            return Err(ConfigError::Invalid(format!(
                "limits.max_header_bytes is {}; the smallest supported is 8192",
                l.max_header_bytes
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
        if !(1..=64).contains(&self.correction.max_concurrency) {
            return Err(ConfigError::Invalid(format!(
                "correction.max_concurrency is {}: use 1 to 64 (calls of one answer corrected \
                 at once)",
                self.correction.max_concurrency
            )));
        }
        if self.calls.strict && self.calls.accept_truncated {
            return Err(ConfigError::Invalid(
                "calls.strict = true refuses cut-off calls, and calls.accept_truncated = true \
                 runs them: set one of them to false"
                    .to_owned(),
            ));
        }
        let rt = &self.round_trip;
        if rt.max_rounds < 2 {
            return Err(ConfigError::Invalid(format!(
                "round_trip.max_rounds is {}: a server-side tool's result could never reach \
                 the model; use 2 or more (rounds are model answers per client request)",
                rt.max_rounds
            )));
        }
        if rt.max_secs.is_nan() || rt.max_secs <= 0.0 {
            return Err(ConfigError::Invalid(format!(
                "round_trip.max_secs is {}: use a positive number of seconds",
                rt.max_secs
            )));
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

/// `url` with its credentials left out, for banners, logs and errors: the one redaction,
/// [`toolmend::redact::url`] (no userinfo, query or fragment:
/// `http://user:secret@host/v1?key=abc` -> `http://host/v1`).
pub fn redact_url(url: &str) -> String {
    toolmend::redact::url(url)
}

/// `[events]`: the gateway's event log (off without `path`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsConfig {
    /// The file events are appended to, one JSON line per call. None: no event log.
    pub path: Option<std::path::PathBuf>,
    /// Log calls that were valid as sent, too (`outcome` `executed`, `mend` `valid`):
    /// the report's rates need them as their denominator. Off: only calls that were
    /// repaired, corrected or left with issues (or dropped, or refused by the guard).
    pub clean: bool,
    /// Events queued for the writer thread; past it new events are dropped (counted in
    /// `toolmend_events_dropped_total`) rather than wait.
    pub buffer: usize,
    /// The environment variable holding the key session ids are hashed with (keyed
    /// SipHash-2-4), so the same session gets the same hash across restarts and
    /// instances. None: a random key per process (hashes match within one run only).
    /// Not a `TOOLMEND_…` name: those are configuration overrides.
    pub session_salt_env: Option<String>,
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            path: None,
            clean: true,
            buffer: 10_000,
            session_salt_env: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn credentials_in_urls_are_hidden() {
        assert_eq!(
            redact_url("http://user:secret@host:8000/v1"),
            "http://host:8000/v1"
        );
        assert_eq!(redact_url("https://u@h/v1?key=abc&x=1#f"), "https://h/v1");
        assert_eq!(redact_url("http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1");
        // Not a URL at all: nothing before an '@' in the authority-like part leaks either.
        assert_eq!(redact_url("secret@host"), "host");
        assert!(!redact_url("http://a:b@c@d/v1").contains('b'));
    }

    #[test]
    fn correction_concurrency_is_bounded_and_named() {
        let base = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n";
        for bad in [0, 65] {
            let err = super::Config::from_toml_and_env(
                &format!("{base}correction.max_concurrency = {bad}\n"),
                Vec::new(),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("correction.max_concurrency is"), "{err}");
        }
        let ok = super::Config::from_toml_and_env(
            &format!("{base}correction.max_concurrency = 64\n"),
            Vec::new(),
        )
        .unwrap();
        assert_eq!(ok.correction.max_concurrency, 64);
        let default = super::Config::from_toml_and_env(base, Vec::new()).unwrap();
        assert_eq!(default.correction.max_concurrency, 4);
    }

    #[test]
    fn correction_scope_reads_from_toml_and_env() {
        use toolmend::correct::CorrectionScope;
        let base = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n";
        let default = super::Config::from_toml_and_env(base, Vec::new()).unwrap();
        assert_eq!(default.correction.scope, CorrectionScope::Issues);
        let toml = super::Config::from_toml_and_env(
            &format!("{base}correction.scope = \"unsafe\"\n"),
            Vec::new(),
        )
        .unwrap();
        assert_eq!(toml.correction.scope, CorrectionScope::Unsafe);
        let env = super::Config::from_toml_and_env(
            base,
            vec![("TOOLMEND_CORRECTION__SCOPE".to_owned(), "unsafe".to_owned())],
        )
        .unwrap();
        assert_eq!(env.correction.scope, CorrectionScope::Unsafe);
        let err = super::Config::from_toml_and_env(
            &format!("{base}correction.scope = \"loose\"\n"),
            Vec::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("loose"), "{err}");
    }

    #[test]
    fn a_config_error_about_the_upstream_url_hides_its_credentials() {
        let err = super::Config::from_toml_and_env(
            r#"upstream.base_url = "ftp://user:secret@host/v1""#,
            Vec::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ftp://host/v1"), "{err}");
        assert!(!err.contains("secret") && !err.contains("user"), "{err}");
    }

    #[test]
    fn calls_in_text_has_one_name_and_reads_its_earlier_one() {
        let base = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n";
        for key in ["calls_in_text", "calls_in_content"] {
            let config = super::Config::from_toml_and_env(
                &format!("{base}[calls]\n{key} = false\n"),
                Vec::new(),
            )
            .unwrap();
            assert!(!config.calls.calls_in_text, "{key}");
        }
        let default = super::Config::from_toml_and_env(base, Vec::new()).unwrap();
        assert!(default.calls.calls_in_text);
    }

    #[test]
    fn a_likely_mistake_is_kept_for_the_start_to_warn_of() {
        // Loading runs before logging: the warning is returned, not logged and lost.
        let base = "upstream.base_url = \"http://127.0.0.1:9/v1\"\n";
        let config = super::Config::from_toml_and_env(
            &format!(
                "{base}[guard]\nsession_from = []\n[guard.session]\nlimit = 5\nwindow_secs = 60\n"
            ),
            Vec::new(),
        )
        .unwrap();
        assert_eq!(
            config.warnings(),
            ["guard.session_from is empty: the per-session rules never apply"]
        );
        let config = super::Config::from_toml_and_env(base, Vec::new()).unwrap();
        assert!(config.warnings().is_empty());
    }
}
