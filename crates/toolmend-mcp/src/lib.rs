//! # toolmend-mcp: toolmend between an MCP client and its server
//!
//! A front like the others: it converts MCP's wire (JSON-RPC over stdio) to the core's
//! terms and calls the core's driver; it decides nothing about calls on its own.
//!
//! ```text
//! MCP client ──tools/call──► relay ──► driver (plan: repair, validate, coerce; guard)
//!     ▲                        │            │
//!     │   isError + feedback ◄─┘            ▼ mended arguments
//!     └──── result + _meta ◄──────────── MCP server
//! ```
//!
//! - [`frame`]: MCP's stdio framing, one message a line, read with a size bound;
//! - [`mend`]: one `tools/call` through the driver: forward (mended or as sent) or answer;
//! - [`recent`]: a session's recent calls and results, for the guard's loop rules;
//! - [`relay`]: one session's JSON-RPC state: what passes unchanged, what is mended,
//!   what is answered here, the tool list read from the server;
//! - [`stdio`]: the wrapper around a server started as a child process;
//! - [`hub`]: the aggregating server: many servers (`[[mcp]]`) behind one endpoint.
//!
//! `toolmend mcp-proxy -- npx -y @modelcontextprotocol/server-filesystem /data` runs it
//! (docs/mcp-proxy.md).

pub mod frame;
pub mod hub;
pub mod mend;
pub mod recent;
pub mod relay;
pub mod serve;
pub mod stdio;

pub use mend::{Events, META_MEND, Mender, ProxyGuard, Verdict};
pub use relay::{Out, Relay};
pub use stdio::{DEFAULT_GRACE, DEFAULT_MAX_MESSAGE_BYTES, StdioOptions};
