//! The toolmend gateway: an OpenAI-compatible endpoint (`POST /v1/chat/completions`,
//! JSON and SSE) between any client and its provider. On the way up it keeps the history
//! valid (sanitize, reject or pass; optional trim); on the way down it mends every tool
//! call against the request's `tools`, turns calls written into the text into real
//! `tool_calls`, and re-asks the model about calls that stay invalid.
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

pub mod config;
#[doc(hidden)]
pub mod fuzzing;
mod listen;
pub mod mend;
pub mod metrics;
mod server;
mod stream;

pub use config::{Config, ConfigError, redact_url};
pub use listen::serve;
pub use server::{Gateway, StartError};
