//! One integration-test binary (one link instead of four); one module per area.

// Tests state their expectations with unwrap; a failure is the test failing. The tests
// spawn their servers (tool services, MCP servers) with tokio::spawn: no tool body runs
// through them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

mod faults;
mod http;
mod mcp;
mod properties;
