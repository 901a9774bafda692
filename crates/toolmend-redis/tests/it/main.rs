//! One integration-test binary (one link instead of three); one module per area, each
//! against a real `redis-server` started here.

// Tests state their expectations with unwrap; a failure is the test failing. Plain tasks
// stand for concurrent gateway requests (no tool bodies run here).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

mod cluster;
mod store;
mod tls;
