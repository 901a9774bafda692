//! The MCP proxy's integration tests: the relay on its own, and the stdio wrapper
//! around real servers.

mod hub;
mod relay;
mod stdio;
