//! Scaling: every history function and every format the repair parser reads stays within a
//! constant factor of linear, in allocations and in CPU time.
//!
//! Each case runs at 1x and 10x its input size and is judged by [`work::assert_linear`]:
//! linear work costs about 10 times as much at 10x, quadratic work about 100 times. The
//! allocation counts are exact (quadratic code fails at once, without building a larger
//! input: the old `check` was killed for want of memory); the CPU time is the thread's own,
//! so a loaded machine does not fail a linear call.
//!
//! ```sh
//! cargo nextest run -p toolmend scaling::                     # as CI runs it (debug)
//! cargo test -p toolmend --test it --release scaling:: -- --nocapture  # the figures, optimized
//! ```

use std::hint::black_box;

use toolmend::conversation::{
    AssistantMessage, Content, Extra, Message, TextMessage, ToolCall, ToolMessage,
};
use toolmend::history::{
    Budget, ByteEstimate, MissingIdPolicy, OrphanPolicy, SanitizePolicy, check, sanitize, trim,
    trim_ref,
};
use toolmend::{RepairOptions, repair};

use crate::work::{self, Work};

/// Asserts that `run` (which borrows its input) scales linearly from `base` to `10 * base`,
/// inputs from `make`; returns what one run cost at each size.
fn assert_linear<I, O>(
    name: &str,
    base: usize,
    make: impl Fn(usize) -> I,
    run: impl Fn(&I) -> O,
) -> [Work; 2] {
    let (small, large) = (make(base), make(base * 10));
    let costs = work::assert_linear(name, &small, &large, |input: &I| run(input));
    eprintln!("{name}:\n  1x  {:?}\n  10x {:?}", costs[0], costs[1]);
    costs
}

/// [`assert_linear`] for a `run` that consumes its input: each run gets a fresh copy, made
/// before it starts.
fn assert_linear_owned<I: Clone, O>(
    name: &str,
    base: usize,
    make: impl Fn(usize) -> I,
    run: impl Fn(I) -> O,
) -> [Work; 2] {
    let costs = work::assert_linear(name, make(base), make(base * 10), run);
    eprintln!("{name}:\n  1x  {:?}\n  10x {:?}", costs[0], costs[1]);
    costs
}

// ---------------------------------------------------------------------------------------
// Histories

fn user(text: &str) -> Message {
    Message::User(TextMessage {
        content: Content::Text(text.to_owned()),
        name: None,
        extra: Extra::new(),
    })
}

/// An assistant message holding only `calls`.
fn with_calls(calls: Vec<ToolCall>) -> AssistantMessage {
    AssistantMessage {
        tool_calls: Some(calls),
        ..Default::default()
    }
}

fn assistant(calls: Vec<ToolCall>) -> Message {
    Message::Assistant(AssistantMessage {
        content: Some(None),
        tool_calls: Some(calls),
        ..AssistantMessage::default()
    })
}

fn result(id: &str, content: &str) -> Message {
    Message::Tool(ToolMessage {
        content: Content::Text(content.to_owned()),
        call_id: id.to_owned(),
        extra: Extra::new(),
    })
}

fn call(id: &str, k: usize) -> ToolCall {
    ToolCall::new(
        id,
        "get_weather",
        format!(r#"{{"city": "Paris", "day": {k}}}"#),
    )
}

/// The reported case: one assistant message with `n` calls, none answered.
fn unanswered_in_one_message(n: usize) -> Vec<Message> {
    let calls = (0..n).map(|k| call(&format!("call_{k}"), k)).collect();
    vec![user("weather?"), assistant(calls), user("and?")]
}

/// A valid history: `n` calls in groups of two, each answered, a user turn between groups.
fn valid(n: usize) -> Vec<Message> {
    let mut h = vec![
        Message::System(TextMessage {
            content: Content::Text("You are a weather bot.".to_owned()),
            name: None,
            extra: Extra::new(),
        }),
        user("weather?"),
    ];
    for g in 0..n / 2 {
        let (a, b) = (format!("call_{g}_a"), format!("call_{g}_b"));
        h.push(assistant(vec![call(&a, g), call(&b, g)]));
        h.push(result(&a, "sunny, 21 C"));
        h.push(result(&b, "cloudy, 17 C"));
        h.push(user("and the next day?"));
    }
    h
}

/// Every kind of violation, `n` calls in groups of five: a good call, a call reusing the
/// previous group's id, one without id, one with a 45-character id, one with broken arguments
/// and a bad name whose result comes after a user message; plus an orphan and an empty result.
fn mixed(n: usize) -> Vec<Message> {
    let mut h = vec![user("weather?")];
    for g in 0..n / 5 {
        let good = format!("call_{g}");
        let reused = format!("call_{}", g.saturating_sub(1));
        let long = format!("call_{g:0>40}");
        let late = format!("late_{g}");
        let mut no_id = call("", g);
        no_id.id = None;
        let broken = ToolCall::new(
            &late,
            "get.weather",
            format!("{{'city': 'Oslo', 'day': {g},}}"),
        );
        h.push(assistant(vec![
            call(&good, g),
            call(&reused, g),
            no_id,
            call(&long, g),
            broken,
        ]));
        h.push(result(&good, "sunny"));
        h.push(result(&reused, "rainy"));
        h.push(result("", "for the call without id"));
        h.push(result(&long, ""));
        h.push(result(&format!("orphan_{g}"), "answers nothing"));
        h.push(user("and?"));
        h.push(result(&late, "out of place"));
    }
    h
}

/// `n` calls that all have the id `x`: the first half unanswered, the second half answered in
/// their own group (a result must find its own group's call among all the unclaimed ones).
fn same_id(n: usize) -> Vec<Message> {
    let mut h = vec![user("weather?")];
    for k in 0..n {
        h.push(assistant(vec![call("x", k)]));
        if k < n / 2 {
            h.push(user("no result"));
        } else {
            h.push(result("x", "sunny"));
        }
    }
    h
}

/// `n` calls, two per 40-character id, ids sharing their first 34 characters: renaming the
/// second call of each cuts the id to make room for a suffix, and the cut ids collide.
fn shared_prefix_duplicates(n: usize) -> Vec<Message> {
    let mut h = vec![user("weather?")];
    for k in 0..n / 2 {
        let id = format!("{}{k:06}", "q".repeat(34));
        for round in 0..2 {
            h.push(assistant(vec![call(&id, k + round)]));
            h.push(result(&id, "sunny"));
        }
    }
    h
}

const HISTORY_BASE: usize = 1_000;

fn rehome() -> SanitizePolicy {
    SanitizePolicy {
        orphans: OrphanPolicy::Rehome,
        missing_ids: MissingIdPolicy::Remove,
        ..SanitizePolicy::default()
    }
}

/// The reported case (issue 11): one message with 10,000 / 100,000 unanswered calls. The
/// old code gave every violation the joined list of all the message's ids (a peak of
/// 94 MiB at 1,000 calls, 5.3 GiB at 8,000).
#[test]
fn check_of_one_message_with_many_unanswered_calls() {
    let costs = assert_linear(
        "check, one message with n unanswered calls",
        10_000,
        unanswered_in_one_message,
        |h: &Vec<Message>| check(h),
    );
    let peak = costs[1].peak;
    assert!(
        peak < 256 << 20,
        "check of 100,000 unanswered calls peaked at {} MiB",
        peak >> 20
    );
}

#[test]
fn sanitize_of_one_message_with_many_unanswered_calls() {
    let costs = assert_linear_owned(
        "sanitize, one message with n unanswered calls",
        10_000,
        unanswered_in_one_message,
        |h: Vec<Message>| sanitize(h, &SanitizePolicy::default()),
    );
    assert!(costs[1].peak < 256 << 20, "{:?}", costs[1]);
}

#[test]
fn check_scales_linearly() {
    for (name, make) in [
        ("valid", valid as fn(usize) -> Vec<Message>),
        ("mixed", mixed),
        ("same id", same_id),
        ("shared prefix duplicates", shared_prefix_duplicates),
    ] {
        assert_linear(
            &format!("check, {name}"),
            HISTORY_BASE,
            make,
            |h: &Vec<Message>| check(h),
        );
    }
}

#[test]
fn sanitize_scales_linearly() {
    for (name, make) in [
        ("valid", valid as fn(usize) -> Vec<Message>),
        ("mixed", mixed),
        ("same id", same_id),
        ("shared prefix duplicates", shared_prefix_duplicates),
    ] {
        assert_linear_owned(&format!("sanitize, {name}"), HISTORY_BASE, make, |h| {
            sanitize(h, &SanitizePolicy::default())
        });
    }
    assert_linear_owned(
        "sanitize (rehome, remove), mixed",
        HISTORY_BASE,
        mixed,
        |h| sanitize(h, &rehome()),
    );
}

#[test]
fn trim_scales_linearly() {
    for (name, make) in [
        ("valid", valid as fn(usize) -> Vec<Message>),
        ("mixed", mixed),
    ] {
        // Half the messages, and about half the bytes (a group of two calls is ~60 tokens).
        assert_linear_owned(
            &format!("trim by messages, {name}"),
            HISTORY_BASE,
            |n| (make(n), n),
            |(h, n): (Vec<Message>, usize)| trim(h, Budget::Messages(n), &ByteEstimate),
        );
        assert_linear_owned(
            &format!("trim by tokens (byte estimate), {name}"),
            HISTORY_BASE,
            |n| (make(n), n * 15),
            |(h, t): (Vec<Message>, usize)| trim(h, Budget::Tokens(t), &ByteEstimate),
        );
        assert_linear(
            &format!("trim_ref by tokens (byte estimate), {name}"),
            HISTORY_BASE,
            |n| (make(n), n * 15),
            |(h, t): &(Vec<Message>, usize)| trim_ref(h, Budget::Tokens(*t), &ByteEstimate),
        );
    }
}

// ---------------------------------------------------------------------------------------
// The repair parser

/// Room for the 10x inputs (the default limit is 4 MiB).
fn options() -> RepairOptions {
    RepairOptions {
        max_len: 256 << 20,
        ..RepairOptions::default()
    }
}

const REPAIR_BASE: usize = 200;

fn assert_repair_linear(name: &str, make: impl Fn(usize) -> String) {
    let opts = options();
    let sample = make(3);
    assert!(
        repair(&sample, &opts).is_ok(),
        "{name}: the sample does not repair: {sample}"
    );
    assert_linear(
        &format!("repair, {name}"),
        REPAIR_BASE,
        make,
        |s: &String| repair(s, &opts),
    );
}

/// `{"k0": {"city": "Paris", "day": 0, "tags": ["a", "b"]}, …}`, `n` members.
fn members(n: usize, quote: char, trailing_comma: bool) -> String {
    let q = quote;
    let comma = if trailing_comma { "," } else { "" };
    let mut s = String::from("{");
    for k in 0..n {
        if k > 0 {
            s.push_str(", ");
        }
        s.push_str(&format!(
            "{q}k{k}{q}: {{{q}city{q}: {q}Paris {k}{q}, {q}day{q}: {k}, \
             {q}tags{q}: [{q}a{q}, {q}b{q}{comma}]{comma}}}"
        ));
    }
    s.push_str(comma);
    s.push('}');
    s
}

#[test]
fn repair_of_long_valid_json_scales_linearly() {
    assert_repair_linear("valid JSON", |n| members(n, '"', false));
    assert_repair_linear("valid JSON, a long array", |n| {
        let items: Vec<String> = (0..n * 4)
            .map(|k| format!(r#"{{"i": {k}, "s": "x{k}"}}"#))
            .collect();
        format!(r#"{{"items": [{}]}}"#, items.join(", "))
    });
    assert_repair_linear("valid JSON, a long string", |n| {
        format!(
            r#"{{"text": "{}"}}"#,
            "lorem ipsum \\n dolor \\\"sit\\\" ".repeat(n * 4)
        )
    });
}

#[test]
fn repair_of_long_broken_json_scales_linearly() {
    assert_repair_linear("single quotes", |n| members(n, '\'', false));
    assert_repair_linear("trailing commas", |n| members(n, '"', true));
    assert_repair_linear("single quotes, trailing commas, python literals", |n| {
        members(n, '\'', true).replace("'day'", "'hourly': True, 'none': None, 'day'")
    });
    assert_repair_linear("truncated in a string", |n| {
        let full = members(n, '"', false);
        let cut = full.rfind("Paris").unwrap() + 3;
        full[..cut].to_owned()
    });
    assert_repair_linear("truncated in nested arrays", |n| {
        let full = members(n, '"', false);
        "[".repeat(50) + &full[..full.len() - 1]
    });
    assert_repair_linear("unquoted keys and comments", |n| {
        members(n, '"', false)
            .replace("\"city\"", "city /* where */")
            .replace("\"day\"", "// the day\nday")
    });
}

#[test]
fn repair_of_many_hermes_tool_calls_scales_linearly() {
    assert_repair_linear("Hermes <tool_call> blocks", |n| {
        (0..n)
            .map(|k| {
                format!(
                    "<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": \
                     {{\"city\": \"Seoul\", \"days\": {k}}}}}\n</tool_call>\n"
                )
            })
            .collect::<String>()
            + "<|im_end|>"
    });
    assert_repair_linear("Hermes <tool_call> blocks, broken, with thinking", |n| {
        "<think>I will call the tool many times.</think>\n".to_owned()
            + &(0..n)
                .map(|k| {
                    format!(
                        "<tool_call>\n{{'name': 'get_weather', 'arguments': \
                         {{'city': 'Seoul', 'days': {k},}}}}\n</tool_call>\n"
                    )
                })
                .collect::<String>()
    });
}

#[test]
fn repair_of_many_mistral_tool_calls_scales_linearly() {
    assert_repair_linear("Mistral [TOOL_CALLS], one list", |n| {
        let calls: Vec<String> = (0..n)
            .map(|k| {
                format!(
                    r#"{{"name": "get_weather", "arguments": {{"city": "Accra", "day": {k}}}}}"#
                )
            })
            .collect();
        format!("[TOOL_CALLS][{}]", calls.join(", "))
    });
    assert_repair_linear("Mistral [TOOL_CALLS], one per call", |n| {
        (0..n)
            .map(|k| format!(r#"[TOOL_CALLS]get_weather[ARGS]{{"city": "Accra", "day": {k}}}"#))
            .collect::<String>()
    });
}

#[test]
fn repair_of_many_pythonic_calls_scales_linearly() {
    assert_repair_linear("pythonic calls in a list", |n| {
        let calls: Vec<String> = (0..n)
            .map(|k| format!("get_weather(city='Quito', days={k}, hourly=True, tags=['a', 'b'])"))
            .collect();
        format!("[{}]", calls.join(", "))
    });
    assert_repair_linear("pythonic call, many arguments", |n| {
        let args: Vec<String> = (0..n * 4).map(|k| format!("a{k}='v{k}'")).collect();
        format!(
            "<|python_start|>get_weather({})<|python_end|>",
            args.join(", ")
        )
    });
}

#[test]
fn repair_of_many_qwen_xml_calls_scales_linearly() {
    assert_repair_linear("Qwen XML, many calls", |n| {
        (0..n)
            .map(|k| {
                format!(
                    "<tool_call>\n<function=get_weather>\n<parameter=city>\nNairobi\n\
                     </parameter>\n<parameter=days>\n{k}\n</parameter>\n</function>\n</tool_call>\n"
                )
            })
            .collect::<String>()
    });
    assert_repair_linear("Qwen XML, many parameters", |n| {
        let params: String = (0..n * 4)
            .map(|k| format!("<parameter=p{k}>\nvalue {k}\n</parameter>\n"))
            .collect();
        format!("<tool_call>\n<function=get_weather>\n{params}</function>\n</tool_call>")
    });
}

// ---------------------------------------------------------------- the per-message plan

#[allow(clippy::unwrap_used)] // a schema that does not compile fails the test
fn plan_tools() -> toolmend::Toolbox {
    let mut tools = toolmend::Toolbox::new();
    let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}});
    tools
        .add(toolmend::CompiledTool::compile("f", "", &schema).unwrap())
        .unwrap();
    tools
}

/// One message of `n` calls: ids missing, repeated (every one the same), reused from the
/// history, and unique, in turn; the history holds `n` answered calls.
fn plan_input(n: usize) -> (Vec<Message>, AssistantMessage) {
    let history: Vec<Message> = (0..n)
        .flat_map(|k| {
            [
                assistant(vec![ToolCall::new(format!("h{k}"), "f", "{}")]),
                result(&format!("h{k}"), "ok"),
            ]
        })
        .collect();
    let calls = (0..n)
        .map(|k| {
            let args = format!("{{\"q\": \"{k}\"}}");
            match k % 4 {
                0 => {
                    let mut c = ToolCall::new("", "f", args);
                    c.id = None;
                    c
                }
                1 => ToolCall::new("same", "f", args),
                2 => ToolCall::new(format!("h{k}"), "f", args),
                _ => ToolCall::new(format!("u{k}"), "f", args),
            }
        })
        .collect();
    (history, with_calls(calls))
}

#[test]
fn the_plan_of_one_message_scales_linearly() {
    let tools = plan_tools();
    let opts = toolmend::message::PlanOptions::default();
    let ctx = toolmend::schema::ValidationContext::new("", toolmend::schema::Phase::Initial);
    assert_linear(
        "message::plan_assistant (minted, renamed, reused ids)",
        100,
        plan_input,
        |(history, message)| {
            let plan = toolmend::message::plan_assistant(
                message,
                history,
                &[],
                false,
                &tools,
                &opts,
                &ctx,
            );
            black_box(toolmend::message::sanitize_assistant(
                message,
                &plan.shape,
                &plan.calls,
            ))
        },
    );
}

// ---------------------------------------------------------------- the guard

/// A run of `n` turns (the same few calls again and again, answered) and a new message of
/// `n` calls: the guard's history rules index the run once, its store rules take every
/// call in one admission.
fn guard_input(n: usize) -> (Vec<Message>, Vec<serde_json::Value>) {
    let mut history = vec![user("go")];
    for t in 0..n {
        let id = format!("h{t}");
        history.push(assistant(vec![call(&id, t % 3)]));
        history.push(result(&id, "same"));
    }
    let args = (0..n)
        .map(|k| serde_json::json!({"city": "Paris", "day": k % 7}))
        .collect();
    (history, args)
}

#[test]
fn the_guard_scales_linearly_in_history_and_calls() {
    use toolmend::guard::{
        Duplicate, Guard, GuardConfig, GuardContext, GuardRequest, Ladder, NoProgress, PingPong,
        RuleGuard, Window,
    };
    let config = GuardConfig {
        session: Some(Window::new(100_000, 60.0)),
        duplicate: Some(Duplicate {
            window_secs: 60.0,
            shadow: false,
        }),
        repeat: Some(Ladder::default()),
        ping_pong: Some(PingPong::default()),
        no_progress: Some(NoProgress::default()),
        ..GuardConfig::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    assert_linear(
        "RuleGuard::check (history rules + one memory admission)",
        100,
        guard_input,
        |(history, args)| {
            let guard = RuleGuard::new(config.clone()).unwrap();
            let ids: Vec<String> = (0..args.len()).map(|k| format!("n{k}")).collect();
            let calls: Vec<GuardRequest<'_>> = args
                .iter()
                .zip(&ids)
                .map(|(a, id)| GuardRequest {
                    call_id: id,
                    tool: "get_weather",
                    arguments: a,
                })
                .collect();
            let ctx = GuardContext {
                session: Some("s"),
                history,
            };
            black_box(rt.block_on(guard.check(ctx, &calls)))
        },
    );
}

#[test]
fn a_session_with_many_runs_stays_linear_in_the_memory_store() {
    use toolmend::guard::{
        Rule,
        store::{Admission, AdmitCall, Check, MemoryStore, Scope},
    };
    assert_linear(
        "MemoryStore: one session, one run budget per message, n runs",
        200,
        |n| n,
        |&n| {
            let store = MemoryStore::new(1_000_000);
            for run in 0..n as u64 {
                let calls = [AdmitCall {
                    call_id: format!("c{run}"),
                    checks: vec![Check {
                        rule: Rule::RunLimit,
                        scope: Scope::RunTool(run, "search".into()),
                        limit: 5,
                        window_ms: None,
                        shadow: false,
                    }],
                }];
                black_box(store.admit_now(Admission {
                    session: Some("s"),
                    ttl_ms: 3_600_000,
                    calls: &calls,
                }));
            }
        },
    );
}

// ---------------------------------------------------------------- the driver

/// Asks again: answers every invalid call with a valid one of its own (a fresh id each).
struct ValidAgain;

impl toolmend::drive::ReAsk for ValidAgain {
    fn re_ask(
        &self,
        request: toolmend::drive::ReAskRequest,
    ) -> toolmend::future::BoxFuture<
        '_,
        Result<toolmend::drive::ReAnswer, toolmend::drive::ReAskFailure>,
    > {
        Box::pin(async move {
            let calls = request
                .calls
                .iter()
                .enumerate()
                .map(|(k, _)| ToolCall::new(format!("r{k}"), "f", format!("{{\"q\": \"{k}\"}}")))
                .collect();
            Ok(toolmend::drive::ReAnswer {
                message: with_calls(calls),
                cut_off: false,
            })
        })
    }
}

/// One message of `n` calls, every other one invalid (`q` a list no coercion reaches), after
/// a history of `n` answered calls.
fn drive_input(n: usize) -> (Vec<Message>, AssistantMessage) {
    let (history, _) = plan_input(n);
    let calls = (0..n)
        .map(|k| {
            let args = if k % 2 == 0 {
                format!("{{\"q\": \"{k}\"}}")
            } else {
                format!("{{\"q\": [{k}, {k}]}}")
            };
            ToolCall::new(format!("u{k}"), "f", args)
        })
        .collect();
    (history, with_calls(calls))
}

#[test]
fn the_driver_scales_linearly_in_the_calls_it_resolves() {
    use toolmend::drive::{
        self, GuardTally, Guarding, Invalid, NoObserver, OnRefused, Stages, Tally, Turn,
    };
    use toolmend::guard::{Duplicate, GuardConfig, RuleGuard};
    let tools = plan_tools();
    let plan = toolmend::message::PlanOptions::default();
    let guard = RuleGuard::new(GuardConfig {
        duplicate: Some(Duplicate {
            window_secs: 60.0,
            shadow: false,
        }),
        ..GuardConfig::default()
    })
    .unwrap();
    let ids = toolmend::message::TimeOrderedIds::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_linear(
        "drive::drive (plan, re-ask and merge, guard)",
        100,
        drive_input,
        |(history, message)| {
            let stages = Stages {
                invalid: &[Invalid::ReAsk],
                re_ask: Some(&ValidAgain),
                max_re_asks: 1,
                guard: Some(Guarding {
                    guard: &guard,
                    session: None,
                    timeout: std::time::Duration::from_secs(60),
                    fresh_ids: &ids,
                    rename_reused: true,
                    on_refused: OnRefused::Answer,
                    max_re_asks: 0,
                }),
                observer: &NoObserver,
                ..Stages::plan_only(&tools, &plan)
            };
            let turn = Turn::fresh(message, history, false);
            let mut tally = Tally::default();
            let driven = rt
                .block_on(drive::drive(
                    turn,
                    &stages,
                    &mut tally,
                    &mut GuardTally::default(),
                ))
                .unwrap();
            // Half the calls were asked again and replaced; none is left invalid.
            assert_eq!(tally.re_asks, 1);
            assert_eq!(
                tally.re_asked.len(),
                message.tool_calls.as_ref().unwrap().len() / 2
            );
            assert!(driven.resolved.unresolved().next().is_none());
            black_box(driven)
        },
    );
}

#[test]
fn the_correction_scope_check_scales_linearly_in_the_keys_and_issues_of_a_call() {
    use serde_json::{Map, Value, json};
    use toolmend::{Issue, IssueKind, correct::values_changed_issues};
    // Half the keys have a problem; the answer fixes them, moves a stray key's value, and
    // changes nothing else.
    assert_linear(
        "correct::values_changed_issues",
        500,
        |n| {
            let mut first = Map::new();
            let mut answer = Map::new();
            let mut issues = Vec::new();
            for k in 0..n {
                first.insert(format!("k{k}"), json!(format!("v{k}")));
                let fixed = if k % 2 == 0 {
                    issues.push(Issue::new(IssueKind::WrongType, format!("/k{k}"), "x"));
                    json!(k)
                } else {
                    json!(format!("v{k}"))
                };
                answer.insert(format!("k{k}"), fixed);
            }
            answer.insert("moved".into(), json!("v1"));
            issues.push(Issue::new(IssueKind::UnknownKey, "/k1", "stray"));
            (Value::Object(first), issues, Value::Object(answer))
        },
        |(first, issues, answer)| values_changed_issues(first, first, issues, answer).len(),
    );
}

#[test]
fn repair_of_readings_in_doubt_scales_linearly() {
    // Each doubt costs one bounded lookahead: bare values ending at closers in doubt,
    // triple-quoted strings with long closing runs and text after their closers.
    assert_repair_linear("bare values ending at closers in doubt", |n| {
        let items: Vec<String> = (0..n * 4)
            .map(|k| format!("{{\"v{k}\": a{k} }} b, \"w\": {{\"x\": c}}]"))
            .collect();
        format!("{{\"items\": [{}]}}", items.join(", "))
    });
    assert_repair_linear("triple-quoted strings whose end is in doubt", |n| {
        let members: Vec<String> = (0..n * 4)
            .map(|k| {
                format!(
                    "\"t{k}\": \"\"\"a{k}\"\"\"\"\"\"\", \"u{k}\": \"\"\"b(\"\"\"c\"\"\")\"\"\""
                )
            })
            .collect();
        format!("{{{}}}", members.join(", "))
    });
}
