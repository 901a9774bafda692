//! Parts that break on purpose, for the fronts' tests of the core's fault handling
//! (feature `testing`; not part of the supported API).

use crate::{
    future::BoxFuture,
    guard::{
        GuardStore, StoreError,
        store::{Admission, CallAnswer},
    },
};

/// A guard store that does one wrong thing: every front's guard must refuse the calls
/// it leaves unjudged ([`crate::guard::stage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokenStore {
    /// Panics inside its future.
    Panics,
    /// Says it answers at once (no timer around it), then never answers.
    Hangs,
    /// Answers for the first call only.
    Short,
}

impl BrokenStore {
    /// By name: `panics`, `hangs` or `short`.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "panics" => Some(BrokenStore::Panics),
            "hangs" => Some(BrokenStore::Hangs),
            "short" => Some(BrokenStore::Short),
            _ => None,
        }
    }
}

impl GuardStore for BrokenStore {
    fn name(&self) -> &'static str {
        "broken"
    }
    fn is_local(&self) -> bool {
        *self == BrokenStore::Hangs
    }
    fn admit<'a>(
        &'a self,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Vec<CallAnswer>, StoreError>> {
        match self {
            BrokenStore::Panics => Box::pin(async { panic!("a guard store bug (on purpose)") }),
            BrokenStore::Hangs => Box::pin(std::future::pending()),
            BrokenStore::Short => {
                let first = admission.calls.first().map(|c| CallAnswer {
                    admitted: true,
                    checks: vec![Default::default(); c.checks.len()],
                    id_seen: false,
                });
                Box::pin(std::future::ready(Ok(first.into_iter().collect())))
            }
        }
    }
}
