//! Tools behind the network, for toolmend: HTTP tool services answering a verified
//! envelope, MCP servers over streamable HTTP or stdio (through `rmcp`), each result
//! shaped for the model (a template or a generic summary, cut to a budget; the whole
//! payload kept as the artifact), latency SLAs with a backup tool. Declared in TOML
//! (`[[tools]]`, `[[mcp]]`; [`spec`]), loaded into a [`ToolSet`] whose tools are
//! [`toolmend::node::Tool`]s: the node, the Python fronts and the gateway run them with
//! every guarantee the node gives (one answer per call id, never a wrong call run,
//! flood control).
//!
//! # Layout
//!
//! - [`spec`]: the TOML, with lines for errors.
//! - [`transport`]: the seam every transport fits: a [`transport::ServiceRequest`] in,
//!   a [`transport::Reply`] or a [`transport::TransportError`] out.
//! - [`http`]: the envelope over HTTP (headers, verification, retries, size limit, no
//!   redirects to other hosts). [`mcp`]: MCP (`tools/list`, `tools/call`).
//! - [`shape`]: templates (minijinja, sandboxed, fuel-limited), summaries, budgets.
//! - [`sla`]: latency histograms, degrade to the backup tool and recover.
//! - Business rules (`x-business-rules` in a schema) are the core's
//!   ([`toolmend::schema::BusinessRules`]): every front that compiles the schema runs them.
//! - `tool.rs` ([`NetTool`]) and `set.rs` ([`ToolSet`]): what the fronts use.

pub mod http;
pub mod mcp;
mod mcp_client;
pub mod set;
pub mod shape;
pub mod sla;
pub mod spec;
pub mod stderr;
mod tool;
pub mod transport;

// The calling thread's CPU time for the unit tests that check linear time (the core's).
#[cfg(test)]
#[path = "../../toolmend/tests/it/cpu.rs"]
mod test_cpu;

pub use set::ToolSet;
pub use spec::{LoadError, ToolsFile};
pub use tool::{NetTool, TIMEOUT_MARGIN};
