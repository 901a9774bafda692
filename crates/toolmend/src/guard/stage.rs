//! The guard stage, once for every front (the node, the gateway, Python): a [`Guard`] is
//! asked about the calls that may run, and whatever it does, each call gets exactly one
//! verdict. A guard that panics (even before its first await), does not answer within
//! the stage's limit, or answers fewer verdicts than calls refuses the calls it left
//! unjudged: a call is never run unchecked. Extra verdicts are ignored.

use std::{panic::AssertUnwindSafe, time::Duration};

use futures::FutureExt;

use super::{Guard, GuardContext, GuardRequest, Verdict};

/// The reason a call gets when the guard panicked.
pub const GUARD_FAILED: &str = "the call was not run: the flood guard failed";
/// The reason a call gets when the guard did not answer within the stage's limit.
pub const GUARD_LATE: &str = "the call was not run: the flood guard did not answer in time";
/// The reason a call gets when the guard answered no verdict for it.
pub const NO_VERDICT: &str = "the call was not run: the flood guard gave no verdict for this call";

/// What a rule guard's stage limit adds to its store's timeout.
pub const MARGIN: Duration = Duration::from_millis(250);

/// One verdict per request, in order. `limit`: how long the guard may take in all (a
/// store's own timeout, with its fail mode, should be shorter, so that a slow store is
/// judged by the fail mode and not by this limit).
pub async fn verdicts(
    guard: &dyn Guard,
    ctx: GuardContext<'_>,
    calls: &[GuardRequest<'_>],
    limit: Duration,
) -> Vec<Verdict> {
    if calls.is_empty() {
        return Vec::new();
    }
    // Called inside the caught future: a panic while building the guard's future counts.
    let checked = AssertUnwindSafe(async { guard.check(ctx, calls).await }).catch_unwind();
    let mut verdicts = match tokio::time::timeout(limit, checked).await {
        Ok(Ok(verdicts)) => verdicts,
        Ok(Err(_)) => {
            tracing::warn!(
                calls = calls.len(),
                "the guard panicked; its calls are refused"
            );
            return vec![Verdict::deny(GUARD_FAILED); calls.len()];
        }
        Err(_) => {
            tracing::warn!(
                calls = calls.len(),
                limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                "the guard did not answer in time; its calls are refused"
            );
            return vec![Verdict::deny(GUARD_LATE); calls.len()];
        }
    };
    if verdicts.len() < calls.len() {
        tracing::warn!(
            calls = calls.len(),
            verdicts = verdicts.len(),
            "the guard answered too few verdicts; the calls without one are refused"
        );
    }
    verdicts.truncate(calls.len());
    verdicts.resize_with(calls.len(), || Verdict::deny(NO_VERDICT));
    verdicts
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::{
        future::BoxFuture,
        guard::{Action, NoGuard},
    };

    /// A guard that does one wrong thing.
    enum Faulty {
        Panics,
        PanicsBeforeItsFuture,
        Hangs,
        AnswersOne,
        AnswersThree,
    }

    impl Guard for Faulty {
        fn check<'a>(
            &'a self,
            _ctx: GuardContext<'a>,
            _calls: &'a [GuardRequest<'a>],
        ) -> BoxFuture<'a, Vec<Verdict>> {
            match self {
                Faulty::PanicsBeforeItsFuture => panic!("a guard bug"),
                Faulty::Panics => Box::pin(async { panic!("a guard bug") }),
                Faulty::Hangs => Box::pin(std::future::pending()),
                Faulty::AnswersOne => Box::pin(std::future::ready(vec![Verdict::allow()])),
                Faulty::AnswersThree => Box::pin(std::future::ready(vec![Verdict::allow(); 3])),
            }
        }
    }

    fn run(guard: &dyn Guard) -> Vec<Verdict> {
        let args = Value::Null;
        let calls = [
            GuardRequest {
                call_id: "a",
                tool: "t",
                arguments: &args,
            },
            GuardRequest {
                call_id: "b",
                tool: "t",
                arguments: &args,
            },
        ];
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(verdicts(
                guard,
                GuardContext::default(),
                &calls,
                Duration::from_millis(50),
            ))
    }

    fn reasons(v: &[Verdict]) -> Vec<(Action, Option<&str>)> {
        v.iter().map(|v| (v.action, v.reason.as_deref())).collect()
    }

    #[test]
    fn every_fault_refuses_the_calls_it_left_unjudged() {
        let denied = |why| vec![(Action::Deny, Some(why)); 2];
        assert_eq!(reasons(&run(&Faulty::Panics)), denied(GUARD_FAILED));
        assert_eq!(
            reasons(&run(&Faulty::PanicsBeforeItsFuture)),
            denied(GUARD_FAILED)
        );
        assert_eq!(reasons(&run(&Faulty::Hangs)), denied(GUARD_LATE));
        assert_eq!(
            reasons(&run(&Faulty::AnswersOne)),
            vec![(Action::Allow, None), (Action::Deny, Some(NO_VERDICT))]
        );
        assert_eq!(
            reasons(&run(&Faulty::AnswersThree)),
            vec![(Action::Allow, None); 2]
        );
        assert_eq!(reasons(&run(&NoGuard)), vec![(Action::Allow, None); 2]);
    }
}
