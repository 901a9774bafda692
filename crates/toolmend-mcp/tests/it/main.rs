//! The MCP proxy's integration tests.
