//! The one correction loop: ask, re-validate the answer, ask again with the new issues,
//! up to the retry limit. The tool node and the gateway both run it; a corrector that
//! panics, fails or does not answer in time ends the loop, never the caller.

use std::{
    collections::HashMap,
    panic::AssertUnwindSafe,
    time::{Duration, Instant},
};

use futures::FutureExt;
use serde_json::Value;

use super::{CorrectError, Correction, CorrectionRequest, Corrector, Usage};
use crate::{
    Fix, FixKind, MendOptions,
    schema::{Coercions, Phase, ValidationContext},
    validate::{Validate, Validation, custom_issues},
};

/// How the loop runs.
#[derive(Debug, Clone, Copy)]
pub struct Attempts<'a> {
    /// At most this many attempts (at least 1 is made).
    pub max: u32,
    /// How long one attempt may take; past it the attempt fails (transient).
    pub timeout: Duration,
    /// The coercions the answer is re-validated with (for a tool without its own).
    pub coercions: &'a Coercions,
    /// Tools with mending options of their own
    /// ([`PlanOptions::tool_mend`](crate::message::PlanOptions::tool_mend)).
    pub tool_mend: Option<&'a HashMap<String, MendOptions>>,
    /// The front's own validators, asked about an answer that passed the schema.
    pub validate: Option<&'a dyn Validate>,
    /// Conversation and caller state for the tool's custom validators (phase `correction`
    /// is set here).
    pub ctx: ValidationContext<'a>,
    /// What becomes of an answer that changed a value no issue named.
    pub scope: super::CorrectionScope,
}

/// What the loop came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Corrected {
    /// Attempts made.
    pub attempts: u32,
    /// The valid arguments and the fixes re-validation applied to them, when an answer
    /// passed.
    pub value: Option<(Value, Vec<Fix>)>,
    /// Tokens each answering model spent.
    pub usage: Vec<Usage>,
    /// Why it ended without a value (gave up, failed, timed out).
    pub note: Option<String>,
    /// Time the attempts took.
    pub elapsed: Duration,
}

/// Asks `corrector` to fix `call`, re-validating every answer against the tool's schema
/// (and its custom validators, phase `correction`) and asking again with the new issues,
/// up to `attempts.max` times. `call.attempt`, `call.issues` and `call.arguments` are the
/// first attempt's; the loop sets them for the next ones.
pub async fn correct_call(
    corrector: &dyn Corrector,
    call: CorrectionRequest<'_>,
    attempts: Attempts<'_>,
) -> Corrected {
    let t0 = Instant::now();
    let mut out = Corrected::default();
    let tool = call.tool;
    let mut issues = call.issues.to_vec();
    let coercions = attempts
        .tool_mend
        .and_then(|t| t.get(tool.name()))
        .map_or(attempts.coercions, |m| &m.coercions);
    let mut arguments = call.arguments.cloned();
    // The model's own reading: an answer that keeps fewer of its values (a list it sent
    // narrowed to one element) is not clean, whatever the schema says.
    let sent: Value =
        crate::repair::repair(call.raw_arguments, &crate::repair::RepairOptions::default())
            .ok()
            .and_then(|r| r.calls.into_iter().next())
            .map_or(Value::Null, |c| c.arguments);
    let first: Value = arguments.clone().unwrap_or_else(|| sent.clone());
    // What the answer may change: what the call's own problems name.
    let scope = call.issues.to_vec();
    while out.attempts < attempts.max.max(1) {
        out.attempts += 1;
        let request = CorrectionRequest {
            tool,
            call_id: call.call_id,
            raw_arguments: call.raw_arguments,
            arguments: arguments.as_ref(),
            issues: &issues,
            attempt: out.attempts,
            ..call
        };
        // Called inside the future, so that a panic before the corrector's first await is
        // caught too.
        let attempt = AssertUnwindSafe(async { corrector.correct(request).await }).catch_unwind();
        let answer = match tokio::time::timeout(attempts.timeout, attempt).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(CorrectError {
                message: "the corrector panicked".to_owned(),
                transient: false,
            }),
            Err(_) => Err(CorrectError {
                message: format!(
                    "the corrector did not answer within {} s",
                    attempts.timeout.as_secs_f64()
                ),
                transient: true,
            }),
        };
        match answer {
            Ok(Correction {
                arguments: Some(value),
                usage,
            }) => {
                out.usage.extend(usage);
                let ctx = ValidationContext {
                    tool: tool.name(),
                    phase: Phase::Correction,
                    ..attempts.ctx
                };
                let mut checked = tool.check(value, coercions, &ctx);
                checked
                    .issues
                    .extend(crate::mend::values_lost_issues(&first, &checked.value));
                let beyond = super::values_changed_issues(&first, &sent, &scope, &checked.value);
                match attempts.scope {
                    super::CorrectionScope::Issues => checked.issues.extend(beyond),
                    // Kept, and each change said: an unsafe fix the report shows.
                    super::CorrectionScope::Unsafe => {
                        checked.fixes.extend(
                            beyond.into_iter().map(|i| {
                                Fix::on(FixKind::CorrectionBeyondIssues, i.path, i.message)
                            }),
                        );
                    }
                }
                if let Some(v) = attempts.validate.filter(|_| checked.is_valid()) {
                    let problems = v
                        .validate(Validation {
                            tool: tool.name(),
                            call_id: call.call_id,
                            arguments: &checked.value,
                            phase: Phase::Correction,
                        })
                        .await;
                    checked.issues.extend(custom_issues(problems));
                }
                if checked.is_valid() {
                    out.value = Some((checked.value, checked.fixes));
                    break;
                }
                issues = checked.issues;
                arguments = Some(checked.value);
            }
            Ok(Correction {
                arguments: None,
                usage,
            }) => {
                out.usage.extend(usage);
                out.note = Some("the corrector gave up".to_owned());
                break;
            }
            Err(e) => {
                tracing::warn!(call_id = call.call_id, tool = tool.name(), error = %e, "correction failed");
                out.note = Some(e.to_string());
                break;
            }
        }
    }
    out.elapsed = t0.elapsed();
    out
}

/// The correction stage, once for every front: each request through [`correct_call`],
/// at most `limit` at a time (at least one); the results in the requests' order.
// Boxed: a future built by a closure over borrowed requests is not provably `Send` for
// every lifetime at the caller's spawn; the box states it once here.
pub fn correct_calls<'a>(
    corrector: &'a dyn Corrector,
    requests: Vec<CorrectionRequest<'a>>,
    attempts: Attempts<'a>,
    limit: usize,
) -> crate::future::BoxFuture<'a, Vec<Corrected>> {
    use futures::StreamExt as _;
    let each = requests
        .into_iter()
        .map(move |request: CorrectionRequest<'a>| correct_call(corrector, request, attempts));
    Box::pin(futures::stream::iter(each).buffered(limit.max(1)).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;
    use crate::{CompiledTool, future::BoxFuture};

    /// Counts the corrections in flight at once, and the most seen; gives up on each.
    #[derive(Default)]
    struct Counting {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl Corrector for Counting {
        fn correct<'a>(
            &'a self,
            _request: CorrectionRequest<'a>,
        ) -> BoxFuture<'a, Result<Correction, CorrectError>> {
            Box::pin(async move {
                let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(n, Ordering::SeqCst);
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
                self.now.fetch_sub(1, Ordering::SeqCst);
                Ok(Correction {
                    arguments: None,
                    usage: None,
                })
            })
        }
    }

    #[test]
    fn the_stage_corrects_at_most_its_limit_at_once() {
        let tool = CompiledTool::compile("t", "", &json!({"type": "object"})).unwrap();
        let coercions = Coercions::default();
        let ids: Vec<String> = (0..12).map(|i| format!("c{i}")).collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for limit in [1, 3, 12] {
            let corrector = Counting::default();
            let requests = ids
                .iter()
                .map(|id| CorrectionRequest {
                    tool: &tool,
                    call_id: id,
                    raw_arguments: "{}",
                    arguments: None,
                    issues: &[],
                    attempt: 1,
                    messages: &[],
                    assistant_text: None,
                })
                .collect();
            let attempts = Attempts {
                max: 1,
                timeout: Duration::from_secs(60),
                coercions: &coercions,
                tool_mend: None,
                validate: None,
                ctx: ValidationContext::new("t", Phase::Correction),
                scope: Default::default(),
            };
            let done = rt.block_on(correct_calls(&corrector, requests, attempts, limit));
            assert_eq!(done.len(), ids.len());
            assert!(done.iter().all(|c| c.attempts == 1 && c.value.is_none()));
            // Overlapping (the limit is reached) but never past it.
            assert_eq!(
                corrector.most.load(Ordering::SeqCst),
                limit,
                "limit {limit}"
            );
        }
    }
}
