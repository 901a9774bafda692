//! `toolmend mcp-proxy`: the MCP proxy (`toolmend-mcp`), wired: the server's command
//! after `--`, the gateway's configuration for how calls are mended (`[calls]`) and
//! guarded (`[guard]`), logs as JSON lines on standard error (standard output is the
//! protocol's).

use std::{ffi::OsString, path::PathBuf, process::ExitCode, sync::Arc, time::Duration};

use anyhow::Context;
use toolmend::guard::{MemoryStore, RuleGuard};
use toolmend_gateway::{Config, events::EventLog};
use toolmend_mcp::{Mender, ProxyGuard, Relay, StdioOptions};

/// Stand between MCP clients and their servers: mend every tools/call first.
///
/// Two ways to run it. In front of one server's command, in the client's
/// configuration (nothing else changes):
///   toolmend mcp-proxy -- npx -y @modelcontextprotocol/server-filesystem /data
/// Or, without a command, as one MCP server for every [[mcp]] server of the
/// configuration (the gateway's table: stdio `command` or streamable HTTP `url`), over
/// stdio, or over streamable HTTP at http://LISTEN/mcp with --listen:
///   toolmend mcp-proxy --config toolmend.toml --listen 127.0.0.1:8792
/// Their tools, prompts and resources are listed together; a name two servers share
/// becomes --names (default "{server}_{tool}"; --names-always for every name).
///
/// The proxy starts the server as a child process (its arguments, environment and
/// stderr as the client gave them) and speaks MCP over stdio to both sides. It knows
/// the server's tools from the client's own tools/list (every page), or lists them
/// itself when a call comes first or the list changed, and mends
/// each tools/call's arguments against that tool's inputSchema, as everywhere in
/// toolmend: string-encoded JSON parsed, "5" -> 5 for an integer, a misnamed key
/// renamed, an enum's case fixed; nothing invented. A mended call goes on with its
/// result's _meta["io.toolmend/mend"] saying what was done; a call that cannot be
/// mended faithfully is answered here as an isError result whose text is the
/// field-level feedback (the server never sees it). Everything else of the protocol
/// passes unchanged, byte for byte: initialize, resources, prompts, completions,
/// ping, progress, cancellation, sampling and elicitation.
///
/// Configuration (optional): the gateway's TOML (docs/gateway.md), of which the proxy
/// reads [calls] strict and coercions, [guard] (floods, duplicates and loops per
/// proxy session; store = "memory" or "redis"), [events] (one JSON line per call, as
/// the gateway's, front "mcp") and [[mcp]]; TOOLMEND_<SECTION>__<KEY> variables
/// override it as for `serve`. One list given for a scalar field is feedback here:
/// one tools/call is one call.
///
/// Limits: one message of at most --max-message-bytes either way (a larger request
/// is answered with -32600, a larger answer replaced by a -32603 error for its
/// request); when the server exits, every request it had is answered with -32000 and
/// the proxy exits with the server's status; when the client closes stdin, the
/// server's stdin is closed and it is killed after --grace-ms.
///
/// Logs: JSON lines on standard error (RUST_LOG, default info): one line per mended or
/// refused call (its id, tool and fix count; never argument values).
///
/// Config lines for Claude Code, Codex, Cursor and Claude Desktop: docs/mcp-proxy.md.
///
/// Examples:
///   toolmend mcp-proxy -- npx -y @modelcontextprotocol/server-everything
///   toolmend mcp-proxy --config toolmend.toml -- python -m my_server
///   toolmend mcp-proxy --config toolmend.toml                    # every [[mcp]], on stdio
///   toolmend mcp-proxy --config toolmend.toml --listen 127.0.0.1:8792
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct McpProxyArgs {
    /// The gateway's TOML configuration ([calls] and [guard] are read).
    #[arg(long, env = "TOOLMEND_CONFIG")]
    config: Option<PathBuf>,
    /// The guard's session name for this process (its counts and loops are per
    /// session).
    #[arg(long, default_value = "mcp-stdio")]
    session: String,
    /// The largest message, in bytes, either way.
    #[arg(long, default_value_t = toolmend_mcp::DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,
    /// How long the server may take to exit once the client closed its side.
    #[arg(long, default_value_t = 5000)]
    grace_ms: u64,
    /// Without a command: serve the [[mcp]] servers over streamable HTTP at
    /// http://LISTEN/mcp (default: over stdio).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Without a command: the name of a tool (or prompt) two servers share, from
    /// {server} (its [[mcp]] name) and {tool}.
    #[arg(long, default_value = "{server}_{tool}")]
    names: String,
    /// Without a command: name every tool and prompt by --names, not only shared ones.
    #[arg(long)]
    names_always: bool,
    /// With --listen: a Host header to accept beside loopback ones (repeatable; e.g. the
    /// name clients reach a proxy served on 0.0.0.0 by). Others are refused, against DNS
    /// rebinding.
    #[arg(long = "allow-host")]
    allow_hosts: Vec<String>,
    /// The MCP server's command and its arguments, after `--` (none: serve the
    /// configuration's [[mcp]] servers). Everything from the command on is its own,
    /// options included; the `--` may be left out where a launcher eats it.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
    command: Vec<OsString>,
}

pub(crate) fn run(args: &McpProxyArgs) -> anyhow::Result<ExitCode> {
    let text = match &args.config {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the configuration {}", path.display()))?,
        None => String::new(),
    };
    let file = args.config.as_ref().map(|p| p.display().to_string());
    let env = std::env::vars().filter(|(k, _)| k != "TOOLMEND_CONFIG");
    // The proxy has no upstream: the gateway's required key gets a stand-in, so the file
    // a gateway also reads (or none) is taken as it is.
    let no_upstream =
        toolmend_gateway::Override::flag("mcp-proxy", "upstream.base_url", "http://127.0.0.1/v1");
    let config = Config::load(&text, file.as_deref(), env, vec![no_upstream])?;
    let Some((program, rest)) = args.command.split_first() else {
        return hub(args, &config, &text, file.as_deref().unwrap_or("<config>"));
    };
    if args.listen.is_some() {
        anyhow::bail!(
            "--listen serves the configuration's [[mcp]] servers: give it without a command after `--`"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let flush = init_logs()?;
    let status = runtime.block_on(async {
        let guard = guard(&config)?;
        let guarded = guard.is_some();
        let relay = Relay::new(Arc::new(mender(&config, guard)?), &args.session, guarded);
        let opts = StdioOptions {
            program: program.clone(),
            args: rest.to_vec(),
            max_message_bytes: args.max_message_bytes,
            grace: Duration::from_millis(args.grace_ms),
        };
        let (input, output) = toolmend_mcp::stdio::client_pipes();
        toolmend_mcp::stdio::run(&opts, relay, input, output)
            .await
            .map_err(anyhow::Error::from)
    });
    // Not a drop: the runtime would wait for its thread blocked reading our stdin, and a
    // client that waits for our end before closing its side would wait forever.
    runtime.shutdown_timeout(Duration::from_millis(100));
    drop(flush);
    let status = status?;
    Ok(ExitCode::from(u8::try_from(status).unwrap_or(1)))
}

/// The mender of `[calls]` (the same options as the gateway's), reporting to the event
/// log of `[events]` when it names a file.
fn mender(config: &Config, guard: Option<ProxyGuard>) -> anyhow::Result<Mender> {
    let plan = toolmend::message::PlanOptions {
        mend: config.calls.mend_options(),
        calls_in_text: false,
        ..toolmend::message::PlanOptions::default()
    };
    let mender = Mender::new(plan, guard);
    let log = EventLog::start(&config.events, |name| std::env::var(name).ok())
        .map_err(anyhow::Error::msg)?;
    Ok(match log {
        Some(log) => mender.with_events(Arc::new(Events(log))),
        None => mender,
    })
}

/// The gateway's event log, as the proxy's sink.
#[derive(Debug)]
struct Events(EventLog);

impl toolmend_mcp::Events for Events {
    fn send(&self, event: toolmend::events::CallEvent) {
        self.0.send(event);
    }

    fn session_hash(&self, id: &str) -> String {
        self.0.session_hash(id)
    }
}

/// Serves every `[[mcp]]` server of the configuration as one, over stdio or HTTP.
fn hub(args: &McpProxyArgs, config: &Config, text: &str, origin: &str) -> anyhow::Result<ExitCode> {
    let tools = toolmend_gateway::toolmend_tools::ToolsFile::parse_section(text, origin)?;
    if tools.mcp.is_empty() {
        anyhow::bail!(
            "nothing to serve: give the MCP server's command after `--` \
             (toolmend mcp-proxy -- npx -y @modelcontextprotocol/server-everything), or \
             [[mcp]] servers in --config"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let flush = init_logs()?;
    let served = runtime.block_on(async {
        let env = |name: &str| std::env::var(name).ok();
        let mut servers = Vec::new();
        let mut timeout =
            Duration::from_millis(toolmend_gateway::toolmend_tools::spec::DEFAULT_TIMEOUT_MS);
        for (_, spec) in &tools.mcp {
            if let Some(ms) = spec.timeout_ms {
                timeout = timeout.max(Duration::from_millis(ms));
            }
            let server = toolmend_gateway::toolmend_tools::mcp::McpConnection::connect(spec, &env)
                .await
                .map_err(anyhow::Error::msg)?;
            servers.push(server);
        }
        let naming = toolmend_mcp::hub::Naming {
            template: args.names.clone(),
            always: args.names_always,
        };
        let hub = toolmend_mcp::hub::Hub::new(
            servers,
            naming,
            mender(config, guard(config)?)?,
            timeout,
            args.session.clone(),
        );
        match args.listen {
            None => toolmend_mcp::serve::stdio(hub, args.max_message_bytes).await,
            Some(addr) => {
                // Prometheus metrics beside /mcp: toolmend_mcp_calls_total{outcome, mend},
                // and the MCP client's own (reconnects).
                let mut extra = axum::Router::new();
                if let Ok(handle) = toolmend_gateway::metrics::install() {
                    extra = extra.route(
                        "/metrics",
                        axum::routing::get(move || std::future::ready(handle.render())),
                    );
                }
                toolmend_mcp::serve::http(
                    hub,
                    addr,
                    args.max_message_bytes,
                    &args.allow_hosts,
                    extra,
                    shutdown(),
                )
                .await
            }
        }
        .map_err(anyhow::Error::from)
    });
    runtime.shutdown_timeout(Duration::from_millis(100));
    drop(flush);
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The guard of `[guard]`, when a rule is set (memory, or the Redis store it names).
fn guard(config: &Config) -> anyhow::Result<Option<ProxyGuard>> {
    let g = &config.guard;
    if !g.rules.any_rule() {
        return Ok(None);
    }
    let mut guard = RuleGuard::new(g.rules.clone())
        .map_err(|e| anyhow::anyhow!("[guard]: {e}"))?
        .fail_mode(g.fail)
        .timeout(Duration::from_millis(g.timeout_ms));
    if g.rules.needs_store() {
        guard = match (&g.store, &g.redis_url) {
            (toolmend_gateway::config::StoreKind::Redis, Some(url)) => {
                let opts = toolmend_redis::RedisOptions {
                    timeout: Duration::from_millis(g.timeout_ms),
                    early_refusal_keys: g.max_keys,
                    ..toolmend_redis::RedisOptions::default()
                };
                let store = toolmend_redis::redis_guard_store(url, opts).map_err(|e| {
                    anyhow::anyhow!("guard.redis_url {}: {e}", toolmend_gateway::redact_url(url))
                })?;
                guard.with_store(store)
            }
            _ => guard.with_store(MemoryStore::new(g.max_keys)),
        };
    }
    Ok(Some(ProxyGuard {
        guard: Arc::new(guard),
    }))
}

/// JSON lines on standard error through the gateway's bounded log writer: a client
/// that stops reading our stderr costs dropped lines, never a stalled call.
fn init_logs() -> anyhow::Result<toolmend_gateway::sink::LogFlush> {
    use tracing_subscriber::{layer::SubscriberExt as _, util::SubscriberInitExt as _};
    let (logs, flush) = crate::serve_cmd::json_logs()?;
    let _ = tracing_subscriber::registry().with(logs).try_init();
    Ok(flush)
}
