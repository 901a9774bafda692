//! One integration-test binary (faster to link on small machines); one module per area.

// Tests state their expectations with unwrap; a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli;
mod equivalence;
// `burst` sends a phase's requests at once with tokio::spawn: test traffic, not tool
// bodies, which the lint is about.
#[allow(clippy::disallowed_methods)]
mod guard_redis;
mod report;
mod serve;
