//! One integration-test binary (faster to link on small machines); one module per area.

// Tests state their expectations with unwrap; a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod chat_wire;
mod coding_agents;
mod drive;
mod feedback;
mod formats;
mod formats_2026;
mod guard;
mod history;
mod mend;
mod node;
mod properties;
mod repair;
mod scaling;
mod schema;
// Work counted, not timed: the measure every linear-time test uses.
mod work;
