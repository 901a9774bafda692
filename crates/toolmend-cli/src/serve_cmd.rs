//! `toolmend serve`: the gateway, wired. The configuration is read from its sources
//! (the file, `TOOLMEND_<SECTION>__<KEY>`, `--listen` / `--upstream`: each error names
//! the one it came from), the start refuses what would fail later (a key variable that
//! is not set, an upstream URL of the wrong shape), the logs are JSON lines on standard
//! error, and Ctrl-C or SIGTERM drains the requests in flight.

use std::{io::Write, process::ExitCode};

use anyhow::Context;
use toolmend_gateway::{
    Config, Override,
    sink::{LogFlush, LogWriter},
    toolmend_tools::ToolsFile,
};

/// Serve the gateway: an OpenAI-compatible endpoint that mends tool calls.
///
/// Point any OpenAI client's base URL at it (http://LISTEN/v1; /chat/completions and
/// /models without /v1 are served too). Each request's history is checked before it
/// goes upstream (sanitized by default, the actions named in `x-toolmend-history`);
/// each response's tool calls are repaired, coerced and validated against the
/// request's `tools` (the default fixes, the unsafe ones included: `toolmend --help`
/// lists them), calls written into the text become real `tool_calls`, and a call
/// that stays invalid is sent back to the model with its feedback (`calls.invalid =
/// "re_ask"`), invisible to the client. Streaming included. `x-toolmend-calls`,
/// `x-toolmend-fixes`, `x-toolmend-unresolved` and the body's `toolmend` object say what
/// was done; /metrics serves Prometheus metrics, /healthz and /readyz the probes.
///
/// Configuration: a TOML file (--config), every key overridable from the environment as
/// TOOLMEND_<SECTION>__<KEY>, then --listen / --upstream. Each key, its default first,
/// then the other values it takes; "no default" marks a key that is unset unless given,
/// its value an example (docs/gateway.md, "Configuration", says what each does):
///   listen = "127.0.0.1:8790"
///   [upstream]  base_url = "https://api.openai.com/v1" (no default: required, here or by
///                 --upstream; no path: /v1 is appended, and the log says so; an endpoint,
///                 a query or another scheme is refused)
///               api_key_env = "OPENAI_API_KEY" (no default; named, it must be set at
///                 start; unset or "": the client's Authorization / api-key is passed through)
///               api_key_header = "authorization" | "api-key" (Azure OpenAI)
///               api = "chat_completions" | "messages" (Anthropic: /messages, x-api-key)
///                 | "responses" (OpenAI Responses, stateless): the API the upstream speaks;
///                 every front reaches it (docs/gateway.md, "Upstreams that speak …")
///               timeout_secs = 120 (headers, and between stream chunks)
///               connect_timeout_secs = 10   deadline_secs = 600 (one whole answer)
///               redirects = "none" | "same_origin"
///   [history]   policy = "sanitize" | "reject" (400) | "pass"   orphans = "drop" | "rehome"
///               max_tokens = 8000 (no default: no trim)   encoding = "o200k_base" | "cl100k_base" | "bytes"
///   [calls]     mend = true   calls_in_text = true   accept_truncated = false
///               strict = false (true: as `mend --strict`: no repair of the text, no coercion)
///               coercions = { string_to_integer = false, key_renamed = false } (the names of
///                 Python's coerce=: a switch or a fix id; true: the defaults, false: none)
///               invalid = "re_ask" | "correct" | "pass" | ["re_ask", "correct"]   max_re_asks = 1
///               reasoning = "move" (to reasoning_content) | "drop" | "keep" (in the content)
///               template_opens_thinking = false (true: the model's template opens <think>
///                 in the prompt; all before the first </think> is reasoning)
///               strip_thinking = true (false: reasoning = "keep")   account = true (the
///                 body's `toolmend` object)
///   [correction] (for invalid = "correct": any OpenAI-compatible endpoint)
///               base_url = "http://127.0.0.1:8000/v1"   model = "qwen2.5-1.5b-instruct"
///                 (no default, both: required for "correct")
///               api_key_env = "CORRECTION_KEY" (no default: no key sent; named, it must be
///                 set when used)   max_retries = 2   context_messages = 10   timeout_secs = 30
///               max_concurrency = 4 (calls of one answer corrected at once, 1 to 64)
///               scope = "issues" | "unsafe" (an answer that changes a value no issue
///                 named: refused, or kept as the unsafe fix correction_beyond_issues)
///   [limits]    max_body_bytes = 8388608   max_header_bytes = 65536   tool_cache = 256
///               header_timeout_secs = 30   body_timeout_secs = 60   max_connections = 4096
///               max_messages = 100000   max_calls_per_message = 100000   max_tools = 1024
///               max_argument_bytes = 4194304   max_schema_bytes = 262144
///               max_upstream_bytes = 33554432   max_tool_labels = 500
///               shutdown_grace_secs = 30   (docs/gateway.md, "Limits": what each answers)
///   [guard]     (off until a rule is set; docs/guard.md)
///               on_flood = "feedback" | "reject" (429) | "flag"   max_re_asks = 1
///               store = "memory" | "redis"   redis_url = "redis://127.0.0.1:6379/" (no
///                 default; required for "redis")
///               timeout_ms = 20   fail = "open" | "closed"   max_keys = 100000
///               session_from = ["header", "user", "metadata", "client", "api_key"]   (x-toolmend-session)
///               metadata_key = "session_id"   session_ttl_secs = 3600
///     rules (none by default; these are examples):
///               session = {limit = 5, window_secs = 60}   duplicate = {window_secs = 60}
///               tools.send_email.session / .global = {limit, window_secs}
///               repeat = {observe = 2, block = 3, stop = 6}   ping_pong = {cycles = 3}
///               no_progress = {block = 3}   (each rule: shadow = true to only report)
///               limits = {thread_limit, run_limit, exit_behavior = "continue" | "error" | "end"}
///   [round_trip] (server-side tools) max_rounds = 4 (model answers per request)   max_secs = 60
///               inject = true (their definitions go upstream; the client does not know them)
///   [events]    path = "/var/log/toolmend/events.jsonl" (no default: no event log; one
///                 JSON line per mended call, `toolmend report` reads it)   clean = true
///               buffer = 10000   session_salt_env = "EVENTS_SALT" (no default; named, it
///                 must be set)
///   [telemetry] (the default build; not the Python wheel's: docs/gateway.md, "Tracing")
///               otlp_endpoint = "http://127.0.0.1:4318" (no default: the environment's
///                 OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT,
///                 else no export)   service_name = "toolmend-gateway" (OTEL_SERVICE_NAME wins)
///   [access]    who may call (docs/gateway.md, "Who may call"); keys are kept as SHA-256 only
///               clients = [] (no default: anyone may call; each {name = "ci", key_sha256 =
///                 "<64 hex>"}, or [[access.clients]] tables: toolmend key new ci prints
///                 a key and its entry; printf %s "$KEY" | toolmend key hash hashes one)
///               clients_file = "/run/secrets/toolmend-clients.toml" (no default; more
///                 [[clients]] tables, read at start)
///               admin_listen = "127.0.0.1:9790" (no default: /metrics is served on listen)
///               admin_key_sha256 = "<64 hex>" (no default: /metrics asks what the API asks)
///               allow_unauthenticated = false (true: serve a public address without
///                 client keys even when the gateway holds a key or runs tools)
///   [[tools]]   tools behind the network (none by default; these are examples), also in
///               a file of their own (--tools FILE):
///               name = "get_weather"   description = "..."   endpoint = "http://127.0.0.1:9000/weather"
///               parameters = {type = "object", ...} (or parameters_json = '...')
///               server_side = true (the gateway runs it: the round trip)   timeout_ms = 10000
///               retries (idempotent = true | idempotency_key = true)   template   budget_bytes
///               limits = {session = {limit, window_secs}, ...}   backup   sla_ms   adapter
///   [[mcp]]     name = "files"   url = "http://127.0.0.1:8000/mcp" | command = "..." args = [...]
///               server_side = true   tools = ["read"]   timeout_ms = 10000
///   Configured tools are served at POST /v1/tools/execute (an assistant message in, one
///   tool message per call id out); calls to server-side ones are run by the gateway,
///   the model asked again until it answers, x-toolmend-round-trip says how many rounds.
///
/// A configuration error names where the value came from: the file and its line
/// (gateway.toml:12: …), the variable (TOOLMEND_HISTORY__POLICY: …) or the flag.
///
/// Who may call: with [access] clients, each /v1 route answers 401 (OpenAI's
/// invalid_api_key) to a request without a client key, sent as Authorization: Bearer
/// KEY (OpenAI SDKs), x-api-key (Anthropic SDKs) or api-key (Azure OpenAI SDKs); the
/// key is never sent upstream (the gateway's own key is, or none). /healthz and /readyz
/// stay open. serve refuses to start on an address beyond loopback (0.0.0.0, a public
/// IP) while it holds a provider key (upstream.api_key_env, correction.api_key_env) or
/// runs tools and has no client key, unless access.allow_unauthenticated = true says
/// that something in front already checks who calls.
///
/// Logs: JSON lines on standard error, one per request at info (target
/// toolmend::request: method, route, status, upstream status and calls, duration,
/// mended counts, request id; never keys or argument values), upstream failures at warn
/// with their cause. RUST_LOG sets the level (default info); the HTTP stack's own
/// crates (hyper, h2, reqwest, rustls, tower) stay at warn unless RUST_LOG names them.
/// A log reader that stalls never holds a request: past 4 MiB waiting, lines are
/// dropped, counted in toolmend_log_lines_dropped_total and said in a WARN once the
/// reader drains again.
///
/// Examples:
///   toolmend serve --upstream https://api.openai.com/v1
///   OPENAI_API_KEY=sk-... TOOLMEND_UPSTREAM__API_KEY_ENV=OPENAI_API_KEY toolmend serve --upstream https://api.openai.com/v1
///   toolmend serve --upstream http://127.0.0.1:8000          # a local vLLM: /v1 is appended
///   TOOLMEND_HISTORY__POLICY=reject toolmend serve --config gateway.toml
///   TOOLMEND_CALLS__INVALID='["re_ask", "correct"]' toolmend serve --config gateway.toml
///   TOOLMEND_CALLS__REASONING=keep toolmend serve --upstream http://127.0.0.1:8000/v1
///   TOOLMEND_GUARD__SESSION__LIMIT=5 TOOLMEND_GUARD__SESSION__WINDOW_SECS=60 \
///     TOOLMEND_GUARD__STORE=redis TOOLMEND_GUARD__REDIS_URL=redis://127.0.0.1:6379/ toolmend serve ...
///   toolmend serve --upstream https://api.openai.com/v1 --tools tools.toml
///   toolmend key new ci   # a key for the client, and its entry for gateway.toml
///   OPENAI_API_KEY=sk-... TOOLMEND_UPSTREAM__API_KEY_ENV=OPENAI_API_KEY \
///     TOOLMEND_ACCESS__ADMIN_LISTEN=127.0.0.1:9790 toolmend serve --config gateway.toml \
///     --listen 0.0.0.0:8080 --upstream https://api.openai.com/v1
///   RUST_LOG=info,toolmend::request=warn toolmend serve ...   # no line per request
///   toolmend scripted-provider examples/script.jsonl &   # then
///   toolmend serve --listen 127.0.0.1:8790 --upstream http://127.0.0.1:PORT/v1
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct ServeArgs {
    /// A TOML configuration file (optional: embedded defaults otherwise).
    #[arg(long, env = "TOOLMEND_CONFIG")]
    config: Option<std::path::PathBuf>,
    /// Where to listen (overrides `listen`).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// A tools file (`[[tools]]`, `[[mcp]]` only), instead of those tables in --config.
    #[arg(long, env = "TOOLMEND_TOOLS")]
    tools: Option<std::path::PathBuf>,
    /// The upstream base URL, up to its base path, e.g. /v1 (overrides
    /// `upstream.base_url`; without a path, /v1 is appended).
    #[arg(long)]
    upstream: Option<String>,
}

/// `TOOLMEND_*` variables that are not configuration overrides (the flags' own, and the
/// test suite's). The loader skips any such variable (no `__`, no top-level key) and
/// names it in a note at start; these are known, so they are left out of that note.
const NOT_OVERRIDES: [&str; 5] = [
    "TOOLMEND_CONFIG",
    "TOOLMEND_TOOLS",
    "TOOLMEND_PROVIDER_PORT",
    "TOOLMEND_MAX_DEPTH",
    "TOOLMEND_PYTHON",
];

/// Our dependencies' logs: kept at warn unless `RUST_LOG` names them (`target=level`: at
/// that level instead). The HTTP stack logs every connection and pool event at debug;
/// the MCP library (`rmcp`) logs at info, one line a 2.4 KB debug dump of the server's
/// capabilities; Redis and OpenTelemetry log reconnects and exports at info. rmcp's
/// transport worker logs only a `{:?}` dump of the error that ended a session (type
/// names, fields): off, as toolmend logs the same failure in its own words, naming the
/// server (`MCP session ended…`, `tool service failed`).
const NOISY: [&str; 13] = [
    "hyper",
    "hyper_util",
    "h2",
    "reqwest",
    "rustls",
    "tower",
    "tower_http",
    "rmcp",
    "rmcp::transport::worker=off",
    "redis",
    "opentelemetry",
    "opentelemetry_sdk",
    "opentelemetry_otlp",
];

/// The log filter for `rust_log` (`RUST_LOG`): it, or `info`, with [`NOISY`] at warn
/// where it does not name them.
pub(crate) fn log_filter(rust_log: Option<&str>) -> String {
    let base = rust_log
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("info");
    let named = |krate: &str| {
        base.split(',').any(|d| {
            let target = d.split(['=', '[']).next().unwrap_or_default().trim();
            target == krate || target.starts_with(&format!("{krate}::"))
        })
    };
    let mut filter = base.to_owned();
    for entry in NOISY {
        let (target, level) = entry.split_once('=').unwrap_or((entry, "warn"));
        // A crate named in `RUST_LOG` logs as asked, in every module.
        if !named(target.split("::").next().unwrap_or(target)) {
            filter.push_str(&format!(",{target}={level}"));
        }
    }
    filter
}

/// The OpenTelemetry exporter, when built with the `otel` feature and configured.
#[cfg(feature = "otel")]
type Tracing = toolmend_gateway::telemetry::Tracing;
#[cfg(not(feature = "otel"))]
type Tracing = ();

/// The layer of JSON lines on standard error, filtered by [`log_filter`] (`RUST_LOG`),
/// through the bounded log writer, and its flush (on drop).
pub(crate) fn json_logs<S>() -> anyhow::Result<(impl tracing_subscriber::Layer<S>, LogFlush)>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = tracing_subscriber::EnvFilter::try_new(log_filter(rust_log.as_deref()))
        .unwrap_or_else(|e| {
            let _ = writeln!(
                std::io::stderr(),
                "toolmend: RUST_LOG is not a filter ({e}); logging at info"
            );
            tracing_subscriber::EnvFilter::new(log_filter(None))
        });
    let (writer, flush) =
        LogWriter::start(std::io::stderr()).context("starting the log writer thread")?;
    // tracing-subscriber's `json()` lines without the spans (the request's span, with
    // `otel`, is the trace's; each line has its own fields), written by hand.
    let logs = crate::log_lines::JsonLines::new(writer).with_filter(filter);
    Ok((logs, flush))
}

/// JSON lines on standard error, filtered by [`log_filter`], through a bounded queue and
/// a thread of their own (`toolmend_gateway::sink::LogWriter`): a reader that stalls
/// costs dropped lines (counted, and said once it reads again), never a request. With
/// the `otel` feature and an OTLP endpoint, the gateway's spans exported too (call
/// inside the runtime: the exporter sends its batches from a task of it).
fn init_logs(config: &Config) -> anyhow::Result<(Option<Tracing>, LogFlush)> {
    use tracing_subscriber::{layer::SubscriberExt as _, util::SubscriberInitExt as _};
    let (logs, flush) = json_logs()?;
    #[cfg(feature = "otel")]
    {
        let tracing = toolmend_gateway::telemetry::Tracing::start(&config.telemetry, &|n| {
            std::env::var(n).ok()
        })
        .map_err(|e| anyhow::anyhow!("telemetry: {e}"))?;
        let _ = tracing_subscriber::registry()
            .with(logs)
            .with(
                tracing
                    .as_ref()
                    .map(toolmend_gateway::telemetry::Tracing::layer),
            )
            .try_init();
        if let Some(t) = &tracing {
            tracing::info!(target: "toolmend::start", "traces: exported over OTLP/HTTP to {}", t.endpoint());
        }
        Ok((tracing, flush))
    }
    #[cfg(not(feature = "otel"))]
    {
        if config.telemetry.otlp_endpoint.is_some() {
            anyhow::bail!(
                "telemetry.otlp_endpoint is set, but this toolmend was built without the \
                 `otel` feature (the Python wheel's command, or a build with \
                 --no-default-features); remove the key, or use the default build \
                 (cargo install --locked --path crates/toolmend-cli)"
            );
        }
        let _ = tracing_subscriber::registry().with(logs).try_init();
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() {
            tracing::warn!(
                target: "toolmend::start",
                "OTEL_EXPORTER_OTLP_ENDPOINT is set, but this toolmend was built without \
                 the `otel` feature: no traces are exported"
            );
        }
        Ok((None, flush))
    }
}

/// Serves the gateway until Ctrl-C or SIGTERM, then drains requests in flight.
pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let text = match &args.config {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the configuration {}", path.display()))?,
        None => String::new(),
    };
    let file = args.config.as_ref().map(|p| p.display().to_string());
    let env = std::env::vars().filter(|(k, _)| !NOT_OVERRIDES.contains(&k.as_str()));
    let mut flags = Vec::new();
    if let Some(listen) = args.listen {
        flags.push(Override::flag("--listen", "listen", listen.to_string()));
    }
    if let Some(upstream) = &args.upstream {
        flags.push(Override::flag(
            "--upstream",
            "upstream.base_url",
            upstream.as_str(),
        ));
    }
    let config = Config::load(&text, file.as_deref(), env, flags)?;
    let tools = serve_tools(args, &text)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (tracing, log_flush) = runtime.block_on(async { init_logs(&config) })?;
    let served = runtime.block_on(async {
        let metrics = toolmend_gateway::metrics::install().ok();
        let listen = config.listen;
        let admin_listen = config.access.admin_listen;
        // Tools are loaded here: MCP servers are connected and listed before the first
        // request; any problem stops the start, naming the file, the line and the tool.
        let gateway = std::sync::Arc::new(
            toolmend_gateway::Gateway::with_tools(config, metrics, &tools).await?,
        );
        // Before anything listens: no key of the gateway's for whoever reaches the port.
        gateway.check_exposure(listen)?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding {listen}"))?;
        let admin = match admin_listen {
            Some(at) => Some(
                tokio::net::TcpListener::bind(at)
                    .await
                    .with_context(|| format!("binding access.admin_listen {at}"))?,
            ),
            None => None,
        };
        let shown = match &admin {
            Some(a) => format!("; metrics: http://{}/metrics", a.local_addr()?),
            None => String::new(),
        };
        let mut out = std::io::stdout();
        // Never the credentials a URL may carry (`http://user:key@host/v1`).
        writeln!(
            out,
            "toolmend gateway: http://{}/v1 -> {}{shown}; Ctrl-C stops it",
            listener.local_addr()?,
            gateway.upstream_url()
        )?;
        out.flush()?;
        // The admin listener serves until the main one has drained (it ends with it).
        let admin_served = async {
            match admin {
                Some(l) => {
                    let gw = std::sync::Arc::clone(&gateway);
                    toolmend_gateway::serve_admin(l, gw, std::future::pending()).await
                }
                None => std::future::pending().await,
            }
        };
        let main_served =
            toolmend_gateway::serve(listener, std::sync::Arc::clone(&gateway), shutdown());
        tokio::select! {
            served = main_served => served.context("serving")?,
            served = admin_served => served.context("serving access.admin_listen")?,
        }
        Ok(ExitCode::SUCCESS)
    });
    // The spans still buffered go out (the runtime's workers run the exporter's task).
    #[cfg(feature = "otel")]
    if let Some(t) = &tracing {
        t.shutdown();
    }
    let _ = tracing;
    // What the log queue still holds is written (waiting a bounded time: a reader that
    // never drains cannot hold the exit).
    drop(log_flush);
    served
}

/// The tools `serve` runs: the `[[tools]]` and `[[mcp]]` tables of the configuration,
/// or the `--tools` file (not both: one place declares them).
fn serve_tools(args: &ServeArgs, config_text: &str) -> anyhow::Result<ToolsFile> {
    let origin = args
        .config
        .as_ref()
        .map_or_else(|| "<config>".to_owned(), |p| p.display().to_string());
    let inline = ToolsFile::parse_section(config_text, &origin)?;
    let Some(path) = &args.tools else {
        return Ok(inline);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the tools file {}", path.display()))?;
    let file = ToolsFile::parse(&text, &path.display().to_string())?;
    if !inline.is_empty() {
        anyhow::bail!(
            "tools are declared in both {origin} ([[tools]] / [[mcp]]) and --tools {}: \
             declare them in one place",
            path.display()
        );
    }
    Ok(file)
}

/// Ctrl-C or SIGTERM.
async fn shutdown() {
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn the_http_stack_stays_at_warn_unless_named() {
        assert_eq!(
            log_filter(None),
            "info,hyper=warn,hyper_util=warn,h2=warn,reqwest=warn,rustls=warn,tower=warn,\
             tower_http=warn,rmcp=warn,rmcp::transport::worker=off,redis=warn,\
             opentelemetry=warn,opentelemetry_sdk=warn,opentelemetry_otlp=warn"
        );
        // Named, a dependency logs as asked (rmcp's worker too).
        let f = log_filter(Some("info,rmcp=debug"));
        assert!(!f.contains("rmcp=warn") && !f.contains("worker=off"), "{f}");
        // The filter parses, and keeps rmcp's info lines (its debug dumps) out.
        let filter = tracing_subscriber::EnvFilter::try_new(log_filter(None)).unwrap();
        assert!(filter.to_string().contains("rmcp=warn"));
        let f = log_filter(Some("debug,hyper_util=trace"));
        assert!(
            f.starts_with("debug,hyper_util=trace,hyper=warn,h2=warn"),
            "{f}"
        );
        assert!(!f.contains("hyper_util=warn"), "{f}");
        assert!(log_filter(Some("  ")).starts_with("info,"));
        assert!(!log_filter(Some("reqwest::connect=debug")).contains("reqwest=warn"));
    }
}
