//! One integration-test binary (one link instead of fourteen); one module per area.
//!
//! Run by nextest, each test in its own process: what some tests set for the whole
//! process (ops' and otel's global tracing subscriber, the metrics recorder) is theirs
//! alone. Under `cargo test` (threads of one process) those tests would see each other.

// Tests state their expectations with unwrap; a failure is the test failing. The tests
// spawn their servers (gateways, fake upstreams) with tokio::spawn: no tool body runs here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

mod access;
mod account;
mod coercions;
mod dashboard;
mod events;
mod faults;
mod gateway;
mod guard;
mod guard_faults;
mod guard_store;
mod json_vs_stream;
mod messages;
mod ops;
#[cfg(feature = "otel")]
mod otel;
mod randomized;
mod re_ask;
mod responses;
mod tools;
mod upstreams;
