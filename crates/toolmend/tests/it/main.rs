//! One integration-test binary (faster to link on small machines); one module per area.

mod properties;
mod protocol;
mod repair;
mod feedback;
mod schema;
