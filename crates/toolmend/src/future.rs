//! Small seams the stages share, so that `guard`, `correct` and `agent` need not import
//! `node` (the arrows run from the node to the stages, never back).

use std::{future::Future, pin::Pin};

/// A boxed, sendable future: what the async traits (tools, correctors, guards, models)
/// return, so they stay object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
