//! One integration-test binary (faster to link on small machines); one module per area.

// Tests state their expectations with unwrap; a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
// The corpus test prints its measurements (docs/correction.md quotes them).
#[allow(clippy::print_stdout)]
mod corpus;
mod correct;
