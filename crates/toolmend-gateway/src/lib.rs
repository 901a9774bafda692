//! The toolmend gateway: an OpenAI-compatible endpoint (`POST /v1/chat/completions`,
//! JSON and SSE) between any client and its provider. On the way up it keeps the history
//! valid (sanitize, reject or pass; optional trim); on the way down it mends every tool
//! call against the request's `tools`, turns calls written into the text into real
//! `tool_calls`, and re-asks the model about calls that stay invalid. With tools of its
//! own (`[[tools]]`, `[[mcp]]`, loaded by `toolmend-tools`; [`Gateway::with_tools`]) it
//! runs them for clients at `POST /v1/tools/execute`, and runs those marked
//! `server_side` itself when the model calls them: the round trip (`[round_trip]`),
//! model -> tools -> model until the answer calls none, the client seeing only that.
//!
//! # Routes
//!
//! | route | |
//! | --- | --- |
//! | `POST /v1/chat/completions` | JSON and `stream: true` (SSE); the round trip through server-side tools |
//! | `POST /v1/tools/execute` | the configured tools run for an assistant message: one tool message per call id |
//! | `GET /v1/models` | passed through |
//! | `GET /healthz`, `GET /readyz` | probes |
//! | `GET /metrics` | Prometheus (on `access.admin_listen` when set: [`serve_admin`]) |
//!
//! With `[access]` clients, the `/v1` routes answer 401 without a client key
//! (`Authorization: Bearer`, `x-api-key` or `api-key`); see [`config::Access`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolmend_gateway::{Config, Gateway};
//! let config = Config::from_toml_and_env(
//!     r#"upstream.base_url = "http://127.0.0.1:8000/v1""#,
//!     std::env::vars(),
//! )?;
//! let gateway = Arc::new(Gateway::new(config, Some(toolmend_gateway::metrics::install()?))?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8790").await?;
//! // TCP_NODELAY, head and body timeouts, the connection cap, graceful shutdown:
//! toolmend_gateway::serve(listener, gateway, std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! The arrows run one way: `fronts` -> `pipeline` -> `server`; `server` and `pipeline`
//! import no front, `server` imports nothing of the pipeline. This file wires them.
//!
//! - [`config`]: the TOML configuration. [`metrics`]: the Prometheus series.
//! - [`events`]: the event log (`[events]`): one JSON line per mended call, the input of
//!   `toolmend report`. [`sink`]: the writers that never hold a request (the log's and
//!   the event log's bounded queues, drops counted).
//! - `server/`: HTTP plumbing: the accept loop, the upstream client, request bodies and
//!   ids, the one error type (`GatewayError`: status and OpenAI's error body), the routes
//!   of no front (health, metrics, the model list).
//! - `pipeline/`: front-neutral: the request path (limits, history policy, trim), the
//!   per-message plan, the resolve chain (re-ask, correct, pass), the guard, the tool
//!   cache, the reports, the server's own tools (the tool node over a `ToolSet`) and the
//!   round trip.
//! - `fronts/chat_completions/`: the OpenAI chat-completions wire: request decoding, the
//!   JSON answer, the SSE stream (and the replayed stream of a round trip).
//! - `fronts/tools/`: `POST /v1/tools/execute`.
//! - `fronts/messages/`, `fronts/responses/`: the Anthropic Messages and OpenAI
//!   Responses fronts, translating to the chat front's path.
//! - `upstreams/`: an upstream of another API (`upstream.api`): the chat request
//!   written in its API and its answer read back as a completion.

pub mod config;
pub mod events;
mod fronts;
#[doc(hidden)]
pub mod fuzzing;
pub mod metrics;
mod pipeline;
mod server;
pub mod sink;
mod state;
#[cfg(feature = "otel")]
pub mod telemetry;
mod upstreams;

// The calling thread's CPU time for the unit tests that check linear time (the core's).
#[cfg(test)]
#[path = "../../toolmend/tests/it/cpu.rs"]
mod test_cpu;

use std::{future::Future, io, sync::Arc};

use axum::{Router, extract::DefaultBodyLimit};
use tokio::net::TcpListener;

pub use config::{Config, ConfigError, Override, redact_url};
/// The SHA-256 of a key in hex, as `[access]` stores client and admin keys.
pub use server::auth::sha256_hex;
pub use state::{Gateway, StartError};
/// The tools crate the gateway loads its own tools with (`ToolsFile::parse_section` on
/// the configuration's text, or `ToolsFile::parse` on a tools file of their own).
pub use toolmend_tools;

/// The response path's plan options and tool cache (the fuzz targets use them; the plan
/// itself is the core's, `toolmend::drive::plan`).
pub mod plan {
    pub use crate::pipeline::{
        plan::MendConfig,
        tools::{ToolCache, ToolsError},
    };
}

impl Gateway {
    /// The routes: `POST /v1/chat/completions`, `POST /v1/responses`, `POST /v1/messages` (and
    /// `/v1/messages/count_tokens`), `POST /v1/tools/execute`,
    /// `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`.
    ///
    /// Around them (`server::access`): the `/v1`-less aliases (`/chat/completions`,
    /// `/tools/execute`, `/models`), a JSON 404 (405) in OpenAI's error shape listing
    /// the routes, the request id, and one log line per request.
    pub fn router(self: Arc<Self>) -> Router {
        let gate = Arc::clone(&self.gate);
        let routes = Router::new()
            .merge(server::routes(self.plumbing()))
            .merge(fronts::tools::routes(Arc::clone(&self)))
            .merge(fronts::messages::routes(Arc::clone(&self)))
            .merge(fronts::responses::routes(Arc::clone(&self)))
            .merge(fronts::chat_completions::routes(self))
            // The body limit and its timeout are applied where the body is read
            // (server::http::read_body), so both answer in OpenAI's error shape.
            .layer(DefaultBodyLimit::disable())
            .layer(server::http::catch_panics());
        server::access::wrap(routes, gate)
    }

    /// The admin listener's routes (`access.admin_listen`): `/metrics` (behind
    /// `access.admin_key_sha256` when set), `/healthz`, `/readyz`.
    pub fn admin_router(self: Arc<Self>) -> Router {
        let gate = Arc::new(server::auth::Gate::admin_listener(
            self.config.access.admin_key_sha256.as_deref(),
        ));
        server::access::wrap(server::admin_routes(self.plumbing()), gate)
    }
}

/// Serves `gateway` on `listener` until `shutdown` resolves, then drains: new
/// connections are refused, requests in flight get `limits.shutdown_grace_secs` to
/// finish. Each connection gets `TCP_NODELAY`, a bounded time and size for its request
/// head, and a place under `limits.max_connections` (past it: 503 and closed).
///
/// # Errors
///
/// `InvalidInput` (the message of [`Gateway::check_exposure`]) for an address beyond
/// loopback where anyone could spend the gateway's key; never for a bad client or a
/// failed accept (those are logged and the loop goes on).
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    gateway
        .check_exposure(listener.local_addr()?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let limits = gateway.config.limits.clone();
    server::listen::serve(listener, gateway.router(), limits, shutdown).await
}

/// Serves the admin routes ([`Gateway::admin_router`]) on `listener` (the address of
/// `access.admin_listen`) until `shutdown` resolves, with the main listener's limits.
///
/// # Errors
///
/// As [`serve`] (never for a bad client).
pub async fn serve_admin(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let limits = gateway.config.limits.clone();
    server::listen::serve(listener, gateway.admin_router(), limits, shutdown).await
}
