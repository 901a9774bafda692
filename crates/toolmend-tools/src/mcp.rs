//! MCP tools through the official Rust SDK (`rmcp`): one [`McpConnection`] per
//! `[[mcp]]` server, over streamable HTTP (`url`) or a stdio child process (`command`).
//!
//! # What a `tools/call` answer becomes
//!
//! | the server sent | [`McpConnection::call`] gives |
//! | --- | --- |
//! | `isError: true` | [`Reply::Failed`]: the text blocks joined by a newline, `structuredContent` as the data |
//! | `structuredContent` | [`Reply::Success`] with it as the data (checked against the tool's `outputSchema`) |
//! | no `structuredContent`, one block | that block: a text block is a JSON *string*, never parsed |
//! | no `structuredContent`, several blocks | an array of them; none: `null` |
//! | an image, audio or binary resource | a descriptor (`{"type":"image","mimeType":"image/png","bytes":…}`), never its bytes |
//! | a JSON-RPC error | [`TransportError::Protocol`] (`JSON-RPC error -32602: …`) |
//! | a `structuredContent` the `outputSchema` refuses, or none though it declares one | [`TransportError::Protocol`] |
//! | `_meta["io.toolmend/callId"]` naming another call | [`TransportError::Dirty`] |
//! | more than [`DEFAULT_MAX_RESPONSE_BYTES`] serialized | [`TransportError::TooLarge`] |
//! | nothing within the call's timeout | [`TransportError::Timeout`] (and `notifications/cancelled` to the server) |
//! | the connection is gone | [`TransportError::Connect`] (the next call starts a new session) |
//!
//! A text block stays a string because the tool's author chose to answer unstructured:
//! parsing `"42"` or `"null"` would change its type by guessing, and a tool that means
//! JSON says so with `structuredContent` (which the SDKs fill from a typed return).
//!
//! Every request carries the model's call id and the round's trace id in its `_meta`
//! (`io.toolmend/callId`, `io.toolmend/traceId`); a server may echo the call id in the
//! result's `_meta`, and an answer that names another call is dropped.
//!
//! # Lifetime
//!
//! A connection is an [`Arc`] inside: clone it into as many tasks as call concurrently;
//! answers pair with their requests by JSON-RPC id.
//!
//! A session that ends (a stdio server that exits or crashes, an HTTP session rmcp
//! gave up on) is started again, with a new handshake, by the next call or listing,
//! before anything is sent: a call is never sent twice, so the call that met the
//! failure is answered with it. A failed start waits [`RECONNECT_BACKOFF_MIN`],
//! doubling up to [`RECONNECT_BACKOFF_MAX`], before the next try; calls meanwhile fail
//! at once, saying when. One task starts the session, the others wait for it.
//! (An HTTP session the server forgot, answered `404`, rmcp itself initializes again
//! and resends, as the MCP specification asks.)
//!
//! When the last clone drops, the session ends; a stdio server has its stdin closed, then `SIGTERM`, then is killed
//! (and is killed at once if the runtime itself goes away). A stdio server gets only a
//! few variables of ours ([`INHERITED_ENV`]: `PATH`, `HOME`, …) plus its own `env`, as
//! the official TypeScript and Python SDKs do, so our secrets don't reach it; its stderr
//! is read line by line into our log, as structured lines naming the server
//! ([`crate::stderr`]), never raw into our stderr or stdout.
//!
//! Every error text (for the model, the caller, the log) is in our words and redacted
//! ([`toolmend::redact`]): a URL without its userinfo, query or fragment, never a type
//! of rmcp's or reqwest's; the HTTP client hands rmcp errors without the URL, so rmcp's
//! own log lines cannot carry it either.

use std::{
    collections::{BTreeMap, HashMap},
    process::Stdio,
    sync::{Arc, RwLock},
    time::Duration,
};

use jsonschema::Validator;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::{
    ServiceError, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
        ClientRequest, ContentBlock, Implementation, ProtocolVersion, RequestMetaObject,
        ResourceContents, ServerResult, Tool,
    },
    service::{ClientInitializeError, RoleClient, RunningService},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::{
            HttpStatusError, StreamableHttpClientTransportConfig, StreamableHttpError,
        },
    },
};
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use toolmend::redact;

use crate::{
    spec::{DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT_MS, HeaderSpec, McpSpec, resolve_headers},
    transport::{ExchangeNotes, Reply, ServiceRequest, TransportError},
};

/// The largest JSON-RPC message read from an MCP server over HTTP (a JSON body or one
/// SSE event), before it is decoded: nothing is read without a bound. A larger one is an
/// error result, and rmcp's transport may end the session on it (the next call then
/// starts a new one, with a new handshake), so the bound sits well above one
/// result's limit ([`DEFAULT_MAX_RESPONSE_BYTES`], refused after decoding with the
/// session kept) and a `tools/list` page: rmcp's own default, pinned here.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// After a session ended and a new one could not be started: the wait before the next
/// try (doubling per failed try, up to [`RECONNECT_BACKOFF_MAX`]), so a server that is
/// down is not restarted on every call.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(500);
/// The longest wait between two tries to start a new session.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The `_meta` key that carries the model's call id (requests; echoed in results).
pub const META_CALL_ID: &str = "io.toolmend/callId";
/// The `_meta` key that carries the round's trace id.
pub const META_TRACE_ID: &str = "io.toolmend/traceId";

/// Variables of ours a stdio server inherits (beside its own `env`).
#[cfg(not(windows))]
pub const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
    "TZ",
];
/// Variables of ours a stdio server inherits (beside its own `env`).
#[cfg(windows)]
pub const INHERITED_ENV: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
];

/// A tool an MCP server lists.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolDef {
    /// Its name at the server.
    pub name: String,
    /// Its description.
    pub description: String,
    /// `inputSchema`.
    pub input_schema: Value,
    /// `outputSchema`, when it declares one.
    pub output_schema: Option<Value>,
}

/// A connection to one MCP server (streamable HTTP or a stdio child process). Cheap to
/// clone; every clone shares the one session.
#[derive(Clone)]
pub struct McpConnection {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    /// `url`, or the command: for messages.
    endpoint: String,
    timeout: Duration,
    max_bytes: usize,
    /// How to start a session again (secrets resolved once, at load).
    dial: Dial,
    /// The current session; replaced when it ended. Callers clone the `Arc`, so a
    /// replaced session lives until its last call is answered.
    session: RwLock<Arc<Session>>,
    /// Held while a new session starts: one start at a time, the others wait.
    redial: tokio::sync::Mutex<Redial>,
    /// The compiled `outputSchema` of every tool that declares one, from the last
    /// `tools/list` (`None`: not listed yet). A schema that does not compile is kept
    /// as its error: such a tool's results cannot be checked.
    output_schemas: RwLock<Option<HashMap<String, OutputCheck>>>,
}

type OutputCheck = Result<Arc<Validator>, String>;

type Session = RunningService<RoleClient, ClientConfig>;

/// What starting a session needs.
enum Dial {
    Http {
        url: String,
        headers: HashMap<HeaderName, HeaderValue>,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        vars: Vec<(String, String)>,
    },
}

/// Why a session could not be started.
#[derive(Debug)]
enum StartError {
    /// The stdio program could not be started.
    Spawn(std::io::Error),
    /// The handshake failed (its error in our words, redacted).
    Handshake(String),
    /// No handshake within the time given.
    NoHandshake(Duration),
}

impl StartError {
    /// Without the endpoint (a URL may carry a token): for the model.
    fn summary(&self) -> String {
        match self {
            StartError::Spawn(_) => "the program could not be started".to_owned(),
            StartError::Handshake(_) => "the handshake failed".to_owned(),
            StartError::NoHandshake(t) => format!("no handshake within {} ms", t.as_millis()),
        }
    }

    /// With the cause: for the operator (at startup, or in the log), redacted.
    fn detail(&self) -> String {
        match self {
            StartError::Spawn(e) => format!(
                "cannot start the program: {}",
                redact::cause(e).unwrap_or("the system refused")
            ),
            StartError::Handshake(cause) => format!("the handshake failed: {cause}"),
            StartError::NoHandshake(_) => self.summary(),
        }
    }
}

/// The state of restarting a session that ended.
#[derive(Default)]
struct Redial {
    /// The last failed try and the wait after it.
    failed: Option<(Instant, Duration)>,
}

impl std::fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConnection")
            .field("name", &self.inner.name)
            .field("endpoint", &redact::text(&self.inner.endpoint))
            .field("timeout", &self.inner.timeout)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl McpConnection {
    /// Connects (and initializes) `spec`; `env` resolves secrets in its headers and env.
    /// Gives up after `timeout_ms` (default [`DEFAULT_TIMEOUT_MS`]); a child started for
    /// a handshake that failed is killed.
    ///
    /// # Errors
    ///
    /// The server cannot be started or reached, or the handshake fails: the reason.
    pub async fn connect(
        spec: &McpSpec,
        env: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> Result<McpConnection, String> {
        let name = &spec.name;
        let timeout = Duration::from_millis(spec.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
        let (endpoint, dial) = match (&spec.url, &spec.command) {
            (Some(url), None) => {
                // Said now, not as a failed handshake on every redial.
                if !cfg!(feature = "tls") && is_https(url) {
                    let shown = redact::url(url.trim());
                    return Err(format!(
                        "MCP server {name:?}: {}",
                        crate::http::no_tls(&shown)
                    ));
                }
                let headers = http_headers(&spec.headers, env)
                    .map_err(|e| format!("MCP server {name:?}: {e}"))?;
                (
                    url.clone(),
                    Dial::Http {
                        url: url.clone(),
                        headers,
                    },
                )
            }
            (None, Some(command)) => {
                let vars = resolve_headers(&spec.env, env)
                    .map_err(|e| format!("MCP server {name:?}: {e}"))?;
                (
                    command.clone(),
                    Dial::Stdio {
                        command: command.clone(),
                        args: spec.args.clone(),
                        vars,
                    },
                )
            }
            (Some(_), Some(_)) => {
                return Err(format!(
                    "MCP server {name:?}: give either `url` (streamable HTTP) or `command` (stdio), not both"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "MCP server {name:?}: give `url` (streamable HTTP) or `command` (stdio)"
                ));
            }
        };
        let session = start(name, &dial, timeout).await.map_err(|e| {
            format!(
                "MCP server {name:?} ({}): {}",
                redact::text(&endpoint),
                e.detail()
            )
        })?;
        Ok(McpConnection {
            inner: Arc::new(Inner {
                name: name.clone(),
                endpoint,
                timeout,
                max_bytes: DEFAULT_MAX_RESPONSE_BYTES,
                dial,
                session: RwLock::new(Arc::new(session)),
                redial: tokio::sync::Mutex::new(Redial::default()),
                output_schemas: RwLock::new(None),
            }),
        })
    }

    /// The session in use now (it may have ended).
    fn current(&self) -> Arc<Session> {
        Arc::clone(
            &self
                .inner
                .session
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// A live session: the current one, or a new one started in its place (within
    /// `deadline`, and not before the wait after a failed start is over).
    async fn session(&self, deadline: Instant) -> Result<Arc<Session>, TransportError> {
        let current = self.current();
        if !current.is_transport_closed() {
            return Ok(current);
        }
        drop(current);
        let inner = &self.inner;
        let Ok(mut redial) = tokio::time::timeout_at(deadline, inner.redial.lock()).await else {
            // (A call reports its own timeout instead.)
            return Err(TransportError::Timeout(inner.timeout));
        };
        // Another task may have started one while this one waited.
        let current = self.current();
        if !current.is_transport_closed() {
            return Ok(current);
        }
        if let Some((at, wait)) = redial.failed {
            let left = (at + wait).saturating_duration_since(Instant::now());
            if !left.is_zero() {
                return Err(TransportError::Connect(format!(
                    "the session with the MCP server ended and could not be started again; next try in {} ms",
                    left.as_millis().max(1)
                )));
            }
        }
        let budget = inner
            .timeout
            .min(deadline.saturating_duration_since(Instant::now()));
        match start(&inner.name, &inner.dial, budget).await {
            Ok(session) => {
                let session = Arc::new(session);
                *inner
                    .session
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&session);
                // The server may have changed: its output schemas are listed again.
                *inner
                    .output_schemas
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                redial.failed = None;
                metrics::counter!("toolmend_mcp_reconnects_total", "server" => inner.name.clone(), "result" => "ok").increment(1);
                tracing::info!(server = %inner.name, "MCP session ended; a new one started");
                Ok(session)
            }
            Err(e) => {
                let wait = redial.failed.map_or(RECONNECT_BACKOFF_MIN, |(_, w)| {
                    (w * 2).min(RECONNECT_BACKOFF_MAX)
                });
                redial.failed = Some((Instant::now(), wait));
                metrics::counter!("toolmend_mcp_reconnects_total", "server" => inner.name.clone(), "result" => "failed").increment(1);
                let detail = e.detail();
                tracing::warn!(server = %inner.name, error = %detail, next_try_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX), "MCP session ended and could not be started again");
                Err(TransportError::Connect(format!(
                    "the session with the MCP server ended and could not be started again ({}); next try in {} ms",
                    e.summary(),
                    wait.as_millis()
                )))
            }
        }
    }

    /// Whether the session has ended (the next call or listing starts a new one).
    pub fn is_closed(&self) -> bool {
        self.current().is_transport_closed()
    }

    /// The server's name (its `[[mcp]]` entry's).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// `tools/list` (every page), within the server's timeout. Keeps the tools' output
    /// schemas for [`McpConnection::call`] to check results against.
    ///
    /// # Errors
    ///
    /// The request fails.
    pub async fn list_tools(&self) -> Result<Vec<McpToolDef>, String> {
        let inner = &self.inner;
        let deadline = Instant::now() + inner.timeout;
        let session = self
            .session(deadline)
            .await
            .map_err(|e| format!("MCP server {:?}: tools/list failed: {e}", inner.name))?;
        let tools = match tokio::time::timeout_at(deadline, session.peer().list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                return Err(format!(
                    "MCP server {:?}: tools/list failed: {}",
                    inner.name,
                    service_error(&e, inner.timeout, inner.max_bytes)
                ));
            }
            Err(_) => {
                return Err(format!(
                    "MCP server {:?}: tools/list did not answer within {} ms",
                    inner.name,
                    inner.timeout.as_millis()
                ));
            }
        };
        let defs: Vec<McpToolDef> = tools.into_iter().map(tool_def).collect();
        let checks = defs
            .iter()
            .filter_map(|d| {
                let schema = d.output_schema.as_ref()?;
                let check = jsonschema::validator_for(schema)
                    .map(Arc::new)
                    .map_err(|e| e.to_string());
                Some((d.name.clone(), check))
            })
            .collect();
        *inner
            .output_schemas
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(checks);
        Ok(defs)
    }

    /// `tools/call`, within `req.timeout` (a first call before any
    /// [`McpConnection::list_tools`] lists first, within the same time).
    ///
    /// # Errors
    ///
    /// No usable answer (see the module's table).
    pub async fn call(
        &self,
        req: &ServiceRequest<'_>,
    ) -> Result<(Reply, ExchangeNotes), TransportError> {
        let inner = &self.inner;
        let Some(arguments) = req.arguments.as_object() else {
            return Err(TransportError::Protocol(format!(
                "the arguments of tools/call must be a JSON object, not {}",
                kind(req.arguments)
            )));
        };
        let deadline = Instant::now() + req.timeout;
        let check = match self.output_check(req.function) {
            Some(check) => check,
            None => match tokio::time::timeout_at(deadline, self.list_tools()).await {
                Ok(Ok(_)) => self.output_check(req.function).flatten(),
                Ok(Err(e)) => return Err(TransportError::Connect(e)),
                Err(_) => return Err(TransportError::Timeout(req.timeout)),
            },
        };
        let mut meta = RequestMetaObject::new();
        meta.insert(META_CALL_ID.to_owned(), Value::from(req.call_id));
        meta.insert(META_TRACE_ID.to_owned(), Value::from(req.trace_id));
        let mut params =
            CallToolRequestParams::new(req.function.to_owned()).with_arguments(arguments.clone());
        params.meta = Some(meta);
        let session = self.session(deadline).await.map_err(|e| match e {
            TransportError::Timeout(_) => TransportError::Timeout(req.timeout),
            e => e,
        })?;
        // On the deadline the request's future is dropped, and rmcp tells the server
        // (`notifications/cancelled`).
        let response =
            match tokio::time::timeout_at(deadline, session.peer().call_tool_once(params)).await {
                Ok(Ok(response)) => response,
                Ok(Err(e)) => return Err(service_error(&e, req.timeout, inner.max_bytes)),
                Err(_) => return Err(TransportError::Timeout(req.timeout)),
            };
        let result = match response {
            CallToolResponse::Complete(result) => result,
            CallToolResponse::InputRequired(_) => {
                return Err(TransportError::Protocol(
                    "the server asked for client input (input_required), which toolmend does not give"
                        .into(),
                ));
            }
            _ => {
                return Err(TransportError::Protocol(
                    "the server answered with a task instead of a result, which toolmend does not poll"
                        .into(),
                ));
            }
        };
        let bytes = serialized_len(&result);
        if bytes > inner.max_bytes {
            return Err(TransportError::TooLarge {
                limit: inner.max_bytes,
            });
        }
        if let Some(got) = result.meta.as_ref().and_then(|m| m.0.get(META_CALL_ID))
            && got.as_str() != Some(req.call_id)
        {
            return Err(TransportError::Dirty {
                got: got.as_str().map_or_else(|| got.to_string(), str::to_owned),
            });
        }
        let reply = reply_of(result, check.as_ref())?;
        Ok((
            reply,
            ExchangeNotes {
                attempts: 1,
                bytes,
                ..ExchangeNotes::default()
            },
        ))
    }

    /// Any request, as it is, within `timeout` (a session that ended is started again
    /// first): what an MCP proxy forwards for its clients. When `timeout` passes, or
    /// `cancelled` resolves (the client gave up), the server is told
    /// (`notifications/cancelled`) and the answer no longer awaited.
    ///
    /// # Errors
    ///
    /// The server's own JSON-RPC error as it sent it ([`Forwarded::Rpc`], its message
    /// redacted), no answer ([`Forwarded::Transport`]), or [`Forwarded::Cancelled`].
    pub async fn forward(
        &self,
        request: ClientRequest,
        timeout: Duration,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> Result<ServerResult, Forwarded> {
        let deadline = Instant::now() + timeout;
        let session = self.session(deadline).await.map_err(Forwarded::Transport)?;
        let mut handle = session
            .peer()
            .send_request_with_option(request, rmcp::service::PeerRequestOptions::no_options())
            .await
            .map_err(|e| Forwarded::Transport(service_error(&e, timeout, self.inner.max_bytes)))?;
        let (reason, error) = tokio::select! {
            answer = &mut handle.rx => return match answer {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(ServiceError::McpError(mut data))) => {
                    data.message = redact::text(&data.message).into();
                    Err(Forwarded::Rpc(data))
                }
                Ok(Err(e)) => Err(Forwarded::Transport(service_error(&e, timeout, self.inner.max_bytes))),
                Err(_) => Err(Forwarded::Transport(TransportError::Broken(
                    "the connection to the MCP server closed".into(),
                ))),
            },
            () = tokio::time::sleep_until(deadline) => {
                ("request timeout", Forwarded::Transport(TransportError::Timeout(timeout)))
            }
            () = cancelled => ("the client cancelled the request", Forwarded::Cancelled),
        };
        let _ = handle.cancel(Some(reason.to_owned())).await;
        Err(error)
    }

    /// `None`: not listed yet; `Some(None)`: the tool declares no output schema (or the
    /// server does not list it).
    fn output_check(&self, tool: &str) -> Option<Option<OutputCheck>> {
        let schemas = self
            .inner
            .output_schemas
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        schemas.as_ref().map(|s| s.get(tool).cloned())
    }
}

/// Why a forwarded request has no result.
#[derive(Debug)]
pub enum Forwarded {
    /// The server answered with a JSON-RPC error (passed on as it came).
    Rpc(rmcp::model::ErrorData),
    /// No answer (see the module's table).
    Transport(TransportError),
    /// The caller gave up (the server was told).
    Cancelled,
}

/// Whether `url` asks for TLS (its scheme, in any case).
fn is_https(url: &str) -> bool {
    url.trim()
        .split_once("://")
        .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("https"))
}

/// Starts a session: the child process or the HTTP transport, and the handshake, within
/// `timeout`. A child started for a handshake that failed is killed.
async fn start(name: &str, dial: &Dial, timeout: Duration) -> Result<Session, StartError> {
    let client_config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("toolmend", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
    let started = match dial {
        Dial::Http { url, headers } => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(headers.clone())
                .max_json_response_size(MAX_MESSAGE_BYTES)
                .max_sse_event_size(MAX_MESSAGE_BYTES);
            // No proxies from the environment, redirects only within one host (rmcp's
            // own client would follow the environment's proxy).
            let transport = StreamableHttpClientTransport::with_client(
                crate::mcp_client::UrlFreeClient(crate::http::mcp_client().clone()),
                config,
            );
            tokio::time::timeout(timeout, client_config.serve(transport)).await
        }
        Dial::Stdio {
            command,
            args,
            vars,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).env_clear().kill_on_drop(true);
            for var in INHERITED_ENV {
                if let Some(value) = std::env::var_os(var) {
                    cmd.env(var, value);
                }
            }
            cmd.envs(vars.iter().map(|(k, v)| (k, v)));
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(StartError::Spawn)?;
            if let Some(stderr) = stderr {
                crate::stderr::forward(name, stderr);
            }
            tokio::time::timeout(timeout, client_config.serve(transport)).await
        }
    };
    match started {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(e)) => Err(StartError::Handshake(handshake_error(&e))),
        Err(_) => Err(StartError::NoHandshake(timeout)),
    }
}

/// A failed handshake in our words (never rmcp's `Display`, which dumps messages and
/// names its types): the cause of a connection that failed, a server's JSON-RPC error
/// (redacted, bounded), or what went wrong.
fn handshake_error(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::TransportError { error, .. } => {
            let inner: &(dyn std::error::Error + 'static) = error.error.as_ref();
            reqwest_cause(inner).unwrap_or_else(|| {
                let status = std::iter::successors(Some(inner), |e| e.source()).find_map(|e| {
                    e.downcast_ref::<HttpStatusError>().map(|s| s.status).or(
                        match e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                            Some(StreamableHttpError::HttpStatus(s)) => Some(s.status),
                            _ => None,
                        },
                    )
                });
                match status {
                    Some(status) => format!("the server answered HTTP {status}"),
                    None => format!(
                        "the transport failed: {}",
                        redact::cause(inner).unwrap_or("the connection closed")
                    ),
                }
            })
        }
        ClientInitializeError::ConnectionClosed(_) => {
            "the connection closed before the handshake ended".to_owned()
        }
        ClientInitializeError::JsonRpcError(data) => format!(
            "the server answered JSON-RPC error {}: {}",
            data.code.0,
            redact::text(&redact::brief(&data.message, 300))
        ),
        ClientInitializeError::NoCompatibleProtocolVersion { .. } => {
            "no protocol version both sides speak".to_owned()
        }
        ClientInitializeError::Cancelled => "cancelled".to_owned(),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => handshake_error(fallback),
        _ => "the server's answer to initialize was not an initialize result".to_owned(),
    }
}

/// When the chain holds an HTTP client's error: what happened in our words.
fn reqwest_cause(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let r = reqwest_error(e)?;
    let cause = redact::cause(r);
    Some(if r.is_connect() {
        format!("could not connect: {}", cause.unwrap_or("no connection"))
    } else if r.is_timeout() {
        "timed out".to_owned()
    } else {
        format!(
            "the request broke off: {}",
            cause.unwrap_or("no answer was read")
        )
    })
}

/// The HTTP client's error in the chain, if any (rmcp's `Client` variant holds it without
/// naming it as its source).
fn reqwest_error<'e>(e: &'e (dyn std::error::Error + 'static)) -> Option<&'e reqwest::Error> {
    let mut source = Some(e);
    while let Some(current) = source {
        if let Some(r) = current.downcast_ref::<reqwest::Error>() {
            return Some(r);
        }
        if let Some(StreamableHttpError::Client(r)) =
            current.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return Some(r);
        }
        source = current.source();
    }
    None
}

fn tool_def(tool: Tool) -> McpToolDef {
    McpToolDef {
        name: tool.name.into_owned(),
        description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
        input_schema: Value::Object(Arc::unwrap_or_clone(tool.input_schema)),
        output_schema: tool
            .output_schema
            .map(|s| Value::Object(Arc::unwrap_or_clone(s))),
    }
}

/// The HTTP headers of a streamable HTTP server, secrets resolved. A value is never
/// shown in an error (it may be a secret).
fn http_headers(
    specs: &BTreeMap<String, HeaderSpec>,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    let mut headers = HashMap::new();
    for (name, value) in resolve_headers(specs, env)? {
        let header = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("{name:?} is not a valid HTTP header name"))?;
        if [
            "accept",
            "mcp-session-id",
            "last-event-id",
            "mcp-protocol-version",
        ]
        .contains(&header.as_str())
        {
            return Err(format!(
                "the header {name:?} is set by the MCP transport itself; remove it"
            ));
        }
        let mut value = HeaderValue::try_from(value)
            .map_err(|_| format!("the value of the header {name:?} is not a valid header value"))?;
        value.set_sensitive(true);
        headers.insert(header, value);
    }
    Ok(headers)
}

fn reply_of(result: CallToolResult, check: Option<&OutputCheck>) -> Result<Reply, TransportError> {
    if result.is_error == Some(true) {
        let text = result
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let message = if text.is_empty() {
            "the tool reported an error and gave no text".to_owned()
        } else {
            text
        };
        return Ok(Reply::Failed {
            message,
            data: result.structured_content,
        });
    }
    if let Some(check) = check {
        let Some(structured) = result.structured_content.as_ref() else {
            return Err(TransportError::Protocol(
                "the tool declares an outputSchema but its result has no structuredContent".into(),
            ));
        };
        let validator = check.as_ref().map_err(|e| {
            TransportError::Protocol(format!(
                "the tool's outputSchema is not a valid JSON Schema ({e}); its results cannot be checked"
            ))
        })?;
        if !validator.is_valid(structured) {
            let problems: Vec<String> = validator
                .iter_errors(structured)
                .take(3)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    let at = if at.is_empty() { "/".to_owned() } else { at };
                    format!("at {at}: {}", e.masked())
                })
                .collect();
            return Err(TransportError::Protocol(format!(
                "structuredContent does not match the tool's outputSchema: {}",
                problems.join("; ")
            )));
        }
    }
    let data = match result.structured_content {
        Some(data) => data,
        None => content_value(result.content),
    };
    Ok(Reply::Success {
        data,
        message: None,
    })
}

/// Content blocks as data: one block is itself, several an array, none `null`.
fn content_value(content: Vec<ContentBlock>) -> Value {
    let mut values: Vec<Value> = content.into_iter().map(block_value).collect();
    match values.len() {
        0 => Value::Null,
        1 => values.pop().unwrap_or(Value::Null),
        _ => Value::Array(values),
    }
}

/// A text block is its text; anything binary a descriptor without its bytes.
fn block_value(block: ContentBlock) -> Value {
    match block {
        ContentBlock::Text(t) => Value::String(t.text),
        ContentBlock::Image(i) => json!({
            "type": "image", "mimeType": i.mime_type, "bytes": base64_len(&i.data),
        }),
        ContentBlock::Audio(a) => json!({
            "type": "audio", "mimeType": a.mime_type, "bytes": base64_len(&a.data),
        }),
        ContentBlock::Resource(r) => match r.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => {
                let mut d = descriptor("resource", &uri, mime_type);
                d.insert("text".into(), Value::String(text));
                Value::Object(d)
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => {
                let mut d = descriptor("resource", &uri, mime_type);
                d.insert("bytes".into(), base64_len(&blob).into());
                Value::Object(d)
            }
            _ => json!({ "type": "resource" }),
        },
        ContentBlock::ResourceLink(l) => {
            let mut d = descriptor("resource_link", &l.uri, l.mime_type);
            d.insert("name".into(), Value::String(l.name));
            if let Some(description) = l.description {
                d.insert("description".into(), Value::String(description));
            }
            Value::Object(d)
        }
        other => {
            let kind = serde_json::to_value(&other)
                .ok()
                .and_then(|v| v.get("type").cloned())
                .unwrap_or(Value::Null);
            json!({ "type": kind })
        }
    }
}

fn descriptor(kind: &str, uri: &str, mime_type: Option<String>) -> Map<String, Value> {
    let mut d = Map::new();
    d.insert("type".into(), kind.into());
    d.insert("uri".into(), uri.into());
    if let Some(mime_type) = mime_type {
        d.insert("mimeType".into(), mime_type.into());
    }
    d
}

/// The decoded size of base64 text.
fn base64_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(padding.min(2))
}

/// What rmcp's error means to the node.
fn service_error(e: &ServiceError, timeout: Duration, max_bytes: usize) -> TransportError {
    match e {
        ServiceError::McpError(data) => TransportError::Protocol(format!(
            "JSON-RPC error {}: {}",
            data.code.0,
            redact::text(&redact::brief(&data.message, 300))
        )),
        ServiceError::Timeout { .. } => TransportError::Timeout(timeout),
        // The session ended while the call was on its way: it may have been sent.
        ServiceError::TransportClosed => {
            TransportError::Broken("the connection to the MCP server closed".into())
        }
        ServiceError::TransportSend(send) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(send.error.as_ref());
            while let Some(current) = source {
                if let Some(status) = current.downcast_ref::<HttpStatusError>() {
                    return TransportError::Status {
                        status: status.status,
                        reason: None,
                    };
                }
                match current.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                    Some(StreamableHttpError::HttpStatus(status)) => {
                        return TransportError::Status {
                            status: status.status,
                            reason: None,
                        };
                    }
                    Some(StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                        return TransportError::TooLarge { limit: max_bytes };
                    }
                    _ => {}
                }
                source = current.source();
            }
            // A request that could not connect was not sent; any other failure came
            // after it may have been.
            match reqwest_error(send.error.as_ref()) {
                Some(r) if r.is_connect() => TransportError::Connect(
                    redact::cause(r).unwrap_or("could not connect").to_owned(),
                ),
                Some(r) if r.is_timeout() => TransportError::Timeout(timeout),
                Some(r) => TransportError::Broken(
                    redact::cause(r).unwrap_or("the request failed").to_owned(),
                ),
                None => TransportError::Broken(
                    redact::cause(send.error.as_ref())
                        .unwrap_or("the request failed")
                        .to_owned(),
                ),
            }
        }
        ServiceError::Cancelled { reason } => TransportError::Broken(format!(
            "the request was cancelled: {}",
            redact::text(&redact::brief(
                reason.as_deref().unwrap_or("no reason given"),
                200
            ))
        )),
        other => TransportError::Protocol(redact::text(&redact::brief(&error_chain(other), 300))),
    }
}

/// An error and its sources, `: `-joined (rmcp's messages often hide the cause in the
/// source).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The size of `value` as JSON, without building the text.
fn serialized_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_redacted_as_written_and_as_a_url_prints_it() {
        // As written; and as `Url` prints it (a trailing `/` added to a bare host).
        let endpoint = "http://admin:pw@127.0.0.1:9?token=tok";
        let printed = reqwest::Url::parse(endpoint).unwrap().to_string();
        assert_ne!(printed, endpoint);
        let text = format!("error sending request for url ({printed}): refused; {endpoint}");
        let out = redact::text(&text);
        assert_eq!(
            out,
            "error sending request for url (http://127.0.0.1:9/): refused; http://127.0.0.1:9"
        );
    }

    #[test]
    fn base64_len_counts_decoded_bytes() {
        assert_eq!(base64_len(""), 0);
        assert_eq!(base64_len("QQ=="), 1);
        assert_eq!(base64_len("QUI="), 2);
        assert_eq!(base64_len("QUJD"), 3);
    }

    #[test]
    fn several_blocks_are_an_array_and_binary_never_carries_bytes() {
        let v = content_value(vec![
            ContentBlock::text("hi"),
            ContentBlock::image("QUJD", "image/png"),
        ]);
        assert_eq!(
            v,
            json!(["hi", {"type": "image", "mimeType": "image/png", "bytes": 3}])
        );
        assert_eq!(content_value(vec![]), Value::Null);
        assert_eq!(content_value(vec![ContentBlock::text("42")]), json!("42"));
    }
}

/// Built without `tls` (`cargo test -p toolmend-tools --no-default-features --lib`).
#[cfg(all(test, not(feature = "tls")))]
mod no_tls {
    use super::{McpConnection, McpSpec};

    #[tokio::test]
    async fn an_https_mcp_url_is_refused_before_any_connect() {
        // Port 9 (discard): were it dialled, the error would be a connect or handshake one.
        let spec: McpSpec =
            toml::from_str("name = \"docs\"\nurl = \"HTTPS://:tok@127.0.0.1:9/mcp\"\n").unwrap();
        let err = McpConnection::connect(&spec, &|_: &str| None)
            .await
            .unwrap_err();
        assert!(err.starts_with("MCP server \"docs\": endpoint"), "{err}");
        assert!(err.contains("this build has no TLS"), "{err}");
        assert!(!err.contains("tok"), "{err}");
    }
}
