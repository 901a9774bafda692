//! The driver's front step: calls the front's runtime takes as sent, the front's own
//! validators in every phase (initial, correction, salvage), and a front that gives the
//! ids around a message instead of a history.

use std::{collections::HashSet, sync::Mutex};

use serde_json::{Value, json};
use toolmend::{
    CompiledTool, IssueKind, Toolbox,
    conversation::{AssistantMessage, Message},
    correct::Scripted,
    drive::{
        self, Accept, Correcting, GuardTally, Invalid, Place, Resolution, Settle, Stages, Taken,
        Tally, Turn, UnresolvedCall, Validate, Validation,
    },
    future::BoxFuture,
    message::{Around, CallOutcome, PlanOptions},
    schema::Phase,
};

fn tools() -> Toolbox {
    let add = CompiledTool::compile(
        "add",
        "Adds two integers.",
        &json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"], "additionalProperties": false}),
    )
    .unwrap();
    Toolbox::from_tools([add]).unwrap()
}

fn message(calls: &[(&str, &str, &str)]) -> AssistantMessage {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    serde_json::from_value(json!({"role": "assistant", "content": null, "tool_calls": calls}))
        .unwrap()
}

/// Refuses sums above 10; records every request.
#[derive(Default)]
struct SmallSums {
    asked: Mutex<Vec<(String, Phase)>>,
}

impl Validate for SmallSums {
    fn validate<'a>(&'a self, call: Validation<'a>) -> BoxFuture<'a, Vec<String>> {
        self.asked
            .lock()
            .unwrap()
            .push((call.call_id.to_owned(), call.phase));
        let sum =
            call.arguments["a"].as_i64().unwrap_or(0) + call.arguments["b"].as_i64().unwrap_or(0);
        Box::pin(async move {
            tokio::task::yield_now().await; // an asynchronous rule
            if sum > 10 {
                vec![format!("the sum {sum} is above 10")]
            } else {
                Vec::new()
            }
        })
    }
}

/// Takes the call at index 0 as it was sent; the runtime answers calls to unknown tools.
struct Runtime;

impl Accept for Runtime {
    fn accept(&self, index: usize, _tool: &str, issues: &[toolmend::Issue]) -> Option<Taken> {
        if issues.iter().any(|i| i.kind == IssueKind::UnknownTool) {
            return Some(Taken::Answers("answered by the runtime".into()));
        }
        (index == 0).then(|| Taken::Runs {
            arguments: Some(json!({"a": "1", "b": "2"})),
            note: "its own schema accepts it".into(),
        })
    }
}

fn run(stages: &Stages<'_>, turn: Turn<'_>) -> Result<drive::Driven, drive::Stop> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(drive::drive(
        turn,
        stages,
        &mut Tally::default(),
        &mut GuardTally::default(),
    ))
}

#[test]
fn the_fronts_runtime_takes_its_calls_before_any_stage_and_they_are_never_settled() {
    let tools = tools();
    let plan = PlanOptions::default();
    let msg = message(&[
        ("c0", "add", r#"{"a": "one", "b": 2}"#),
        ("c1", "nope", "{}"),
        ("c2", "add", r#"{"a": "one", "b": 2}"#),
    ]);
    let stages = Stages {
        accept: Some(&Runtime),
        raise_unresolved: true,
        ..Stages::plan_only(&tools, &plan)
    };
    // Raised: only the call neither toolmend nor the runtime resolved.
    let Err(drive::Stop::Unresolved(calls)) = run(&stages, Turn::fresh(&msg, &[], false)) else {
        panic!("the third call stays unresolved")
    };
    assert_eq!(
        calls.iter().map(|c| c.call_id.as_str()).collect::<Vec<_>>(),
        ["c2"]
    );
    let stages = Stages {
        raise_unresolved: false,
        ..stages
    };
    let driven = run(&stages, Turn::fresh(&msg, &[], false)).unwrap();
    let r = &driven.resolved.calls;
    assert_eq!(r[0].outcome, CallOutcome::Executed);
    assert_eq!(r[0].arguments, Some(json!({"a": "1", "b": "2"})));
    assert_eq!(r[0].note.as_deref(), Some("its own schema accepts it"));
    assert!(r[1].front_answers && !r[1].is_unresolved());
    assert_eq!(r[1].outcome, CallOutcome::Feedback);
    assert!(r[2].is_unresolved());
}

#[test]
fn the_fronts_validators_refuse_at_plan_and_judge_every_correction_and_salvage() {
    let tools = tools();
    let plan = PlanOptions::default();
    let msg = message(&[
        ("c0", "add", r#"{"a": 9, "b": 9}"#),
        ("c1", "add", r#"{"a": 1, "b": 2}"#),
    ]);
    let rules = SmallSums::default();
    // Initial: the first call passes the schema but not the rule: feedback, custom issue.
    let stages = Stages {
        validate: Some(&rules),
        ..Stages::plan_only(&tools, &plan)
    };
    let driven = run(&stages, Turn::fresh(&msg, &[], false)).unwrap();
    let r = &driven.resolved.calls;
    assert_eq!(r[0].outcome, CallOutcome::Feedback);
    assert_eq!(r[0].issues[0].kind, IssueKind::Custom);
    assert!(
        r[0].feedback
            .as_deref()
            .unwrap()
            .contains("the sum 18 is above 10"),
        "{:?}",
        r[0].feedback
    );
    assert!(r[0].correctable);
    assert_eq!(r[1].outcome, CallOutcome::Executed);

    // Correction: an answer the rule refuses is asked about again; the next one passes.
    let corrector = Scripted::new()
        .answer("add", Ok(Some(json!({"a": 8, "b": 8}))))
        .answer("add", Ok(Some(json!({"a": 4, "b": 5}))));
    let rules = SmallSums::default();
    let stages = Stages {
        validate: Some(&rules),
        invalid: &[Invalid::Correct],
        correction: Some(Correcting {
            corrector: &corrector,
            max_retries: 3,
            timeout: std::time::Duration::from_secs(5),
            concurrency: 2,
            scope: Default::default(),
        }),
        ..Stages::plan_only(&tools, &plan)
    };
    let driven = run(&stages, Turn::fresh(&msg, &[], false)).unwrap();
    let r = &driven.resolved.calls[0];
    assert_eq!(
        (r.outcome, r.correction_attempts),
        (CallOutcome::Corrected, 2)
    );
    assert_eq!(r.arguments, Some(json!({"a": 4, "b": 5})));
    let phases: Vec<Phase> = rules
        .asked
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _)| id == "c0")
        .map(|(_, p)| *p)
        .collect();
    assert_eq!(
        phases,
        [Phase::Initial, Phase::Correction, Phase::Correction]
    );

    // Salvage: a hook's arguments the rule refuses are not run.
    struct Hook(Value);
    impl Settle for Hook {
        fn settle<'a>(&'a self, _: UnresolvedCall, _: &'a [Message]) -> BoxFuture<'a, Resolution> {
            Box::pin(async move { Resolution::Salvage(self.0.clone()) })
        }
    }
    for (salvage, outcome) in [
        (json!({"a": 6, "b": 6}), CallOutcome::Feedback),
        (json!({"a": 1, "b": 1}), CallOutcome::Salvaged),
    ] {
        let rules = SmallSums::default();
        let hook = Hook(salvage);
        let stages = Stages {
            validate: Some(&rules),
            settle: Some(&hook),
            ..Stages::plan_only(&tools, &plan)
        };
        let driven = run(&stages, Turn::fresh(&msg, &[], false)).unwrap();
        assert_eq!(driven.resolved.calls[0].outcome, outcome);
        assert!(
            rules
                .asked
                .lock()
                .unwrap()
                .iter()
                .any(|(_, p)| *p == Phase::Salvage)
        );
    }
}

#[test]
fn a_front_without_a_history_in_these_terms_gives_the_ids_around_the_message() {
    let tools = tools();
    let plan = PlanOptions::default();
    let msg = message(&[
        ("used", "add", r#"{"a": 1, "b": 2}"#),
        ("done", "add", r#"{"a": 1, "b": 2}"#),
        ("", "add", r#"{"a": 1, "b": 2}"#),
    ]);
    let earlier: HashSet<String> = ["used".to_owned()].into();
    let answered: HashSet<String> = ["done".to_owned()].into();
    let turn = Turn {
        place: Some(Place {
            around: Around {
                earlier: &earlier,
                answered: &answered,
            },
            position: 7,
            parsed: &[],
        }),
        ..Turn::fresh(&msg, &[], false)
    };
    let driven = run(&Stages::plan_only(&tools, &plan), turn).unwrap();
    let r = &driven.resolved;
    // "used" renamed (an earlier turn has it), "done" answered already, the blank one
    // minted under the message's index.
    assert_eq!(
        r.answered.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        ["done"]
    );
    assert_eq!(r.calls[0].original_id.as_deref(), Some("used"));
    assert_ne!(r.calls[0].id, "used");
    assert!(r.calls[1].id.contains('7'), "{}", r.calls[1].id);
}

#[test]
fn a_corrector_that_rewrites_a_value_with_no_problem_never_changes_what_runs() {
    let tools = tools();
    let plan = PlanOptions::default();
    // `b` is wrong; `a` is fine and must stay 7.
    let msg = message(&[("c0", "add", r#"{"a": 7, "b": "two"}"#)]);
    let run_with = |answers: Vec<Value>| {
        let corrector = answers
            .into_iter()
            .fold(Scripted::new(), |s, a| s.answer("add", Ok(Some(a))));
        let stages = Stages {
            invalid: &[Invalid::Correct],
            correction: Some(Correcting {
                corrector: &corrector,
                max_retries: 2,
                timeout: std::time::Duration::from_secs(5),
                concurrency: 1,
                scope: Default::default(),
            }),
            ..Stages::plan_only(&tools, &plan)
        };
        let driven = run(&stages, Turn::fresh(&msg, &[], false)).unwrap();
        (driven.resolved.calls[0].clone(), corrector.asked())
    };
    // Rewrites `a` twice: refused, the call keeps its own feedback, nothing runs.
    let (r, asked) = run_with(vec![json!({"a": 9, "b": 2}), json!({"a": 9, "b": 2})]);
    assert_eq!(r.outcome, CallOutcome::Feedback);
    assert_eq!(asked.len(), 2);
    assert!(
        asked[1].issues.contains(&IssueKind::ValueChanged),
        "{:?}",
        asked[1].issues
    );
    assert!(
        r.issues.iter().all(|i| i.kind != IssueKind::ValueChanged),
        "own issues kept"
    );
    // Told what it changed, it keeps `a`: corrected.
    let (r, _) = run_with(vec![json!({"a": 9, "b": 2}), json!({"a": 7, "b": 2})]);
    assert_eq!(r.outcome, CallOutcome::Corrected);
    assert_eq!(r.arguments, Some(json!({"a": 7, "b": 2})));
}

#[test]
fn a_correction_beyond_the_issues_is_refused_unless_the_scope_is_unsafe() {
    use toolmend::{FixKind, correct::CorrectionScope};
    let tools = tools();
    let plan = PlanOptions::default();
    // `b` is wrong; `a` is fine. The corrector fixes `b` and rewrites `a` too.
    let msg = message(&[("c0", "add", r#"{"a": 1, "b": "two"}"#)]);
    for (scope, outcome) in [
        (CorrectionScope::Issues, CallOutcome::Feedback),
        (CorrectionScope::Unsafe, CallOutcome::Corrected),
    ] {
        let corrector = Scripted::new()
            .answer("add", Ok(Some(json!({"a": 5, "b": 2}))))
            .answer("add", Ok(Some(json!({"a": 5, "b": 2}))));
        let stages = Stages {
            invalid: &[Invalid::Correct],
            correction: Some(Correcting {
                corrector: &corrector,
                max_retries: 2,
                timeout: std::time::Duration::from_secs(5),
                concurrency: 1,
                scope,
            }),
            ..Stages::plan_only(&tools, &plan)
        };
        let driven = run(&stages, Turn::fresh(&msg, &[], false)).unwrap();
        let r = &driven.resolved.calls[0];
        assert_eq!(r.outcome, outcome, "{scope:?}");
        let beyond: Vec<&str> = r
            .fixes
            .iter()
            .filter(|f| f.kind == FixKind::CorrectionBeyondIssues)
            .map(|f| f.path.as_str())
            .collect();
        match scope {
            // Refused: the call keeps its own reading, nothing changed runs.
            CorrectionScope::Issues => {
                assert!(beyond.is_empty());
                assert_ne!(r.arguments, Some(json!({"a": 5, "b": 2})));
            }
            // Kept, and said: one unsafe fix at the value no issue named.
            CorrectionScope::Unsafe => {
                assert_eq!(beyond, ["/a"]);
                assert_eq!(r.arguments, Some(json!({"a": 5, "b": 2})));
            }
        }
    }
}
