//! History: check (every violation, with the provider's text), sanitize, trim, token counting,
//! and the properties that hold for every history.

use proptest::prelude::*;
use serde_json::{Value, json};
use toolmend::conversation::{Message, ToolCall};
use toolmend::history::{
    Action, ActionKind, Budget, ByteEstimate, MESSAGE_OVERHEAD, MissingIdPolicy, OrphanPolicy,
    SanitizePolicy, Sanitized, TokenCounter, Violation, ViolationKind, check, sanitize, trim,
};

const UNANSWERED: &str = "No result: this call was never answered (the history lost its \
                          result). Call the tool again if you still need it.";

fn history(v: Value) -> Vec<Message> {
    serde_json::from_value(v).unwrap()
}

fn call(id: &str, name: &str, args: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
}

fn calls(calls: Vec<Value>) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

fn result(id: &str, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn kinds(v: &[Violation]) -> Vec<(ViolationKind, usize, Option<usize>)> {
    v.iter().map(|v| (v.kind, v.message, v.call)).collect()
}

fn only(v: &[Violation], kind: ViolationKind) -> &Violation {
    let found: Vec<_> = v.iter().filter(|v| v.kind == kind).collect();
    assert_eq!(found.len(), 1, "{v:#?}");
    found[0]
}

fn action_kinds(s: &Sanitized) -> Vec<(ActionKind, usize, Option<usize>)> {
    s.actions
        .iter()
        .map(|a| (a.kind, a.message, a.call))
        .collect()
}

fn tool_content(m: &Message) -> String {
    match m {
        Message::Tool(t) => t.content.text(),
        other => panic!("not a tool message: {other:?}"),
    }
}

fn tool_id(m: &Message) -> &str {
    match m {
        Message::Tool(t) => &t.call_id,
        other => panic!("not a tool message: {other:?}"),
    }
}

fn clean(messages: Vec<Message>) -> Sanitized {
    let s = sanitize(messages, &SanitizePolicy::default());
    assert_eq!(check(&s.messages), vec![], "{:#?}", s.messages);
    s
}

fn weather_history() -> Vec<Message> {
    history(json!([
        {"role": "system", "content": "Be brief."},
        user("Weather in Paris and Rome?"),
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            call("call_p", "get_weather", r#"{"city":"Paris"}"#),
            call("call_r", "get_weather", r#"{"city":"Rome"}"#)]},
        result("call_r", "21°C"),
        result("call_p", "18°C"),
        {"role": "assistant", "content": "Paris 18°C, Rome 21°C."},
        user("Thanks"),
    ]))
}

// ---------------------------------------------------------------- check

#[test]
fn a_valid_history_has_no_violation_and_sanitize_leaves_it_alone() {
    let h = weather_history();
    assert_eq!(check(&h), vec![]);
    let s = sanitize(h.clone(), &SanitizePolicy::default());
    assert!(s.is_unchanged());
    assert_eq!(s.messages, h);
}

/// Providers list every unanswered id of the message in one error; each violation names its
/// own id only (issue 11: listing all N ids in each of N violations took N² memory).
#[test]
fn each_unanswered_call_names_its_own_id_in_openai_words() {
    let h = history(json!([
        user("hi"),
        calls(vec![
            call("call_a", "f", "{}"),
            call("call_b", "f", "{}"),
            call("call_c", "f", "{}")
        ]),
        result("call_b", "ok"),
        user("and?"),
    ]));
    let v = check(&h);
    assert_eq!(
        kinds(&v),
        [
            (ViolationKind::UnansweredCall, 1, Some(0)),
            (ViolationKind::UnansweredCall, 1, Some(2))
        ]
    );
    assert_eq!(v[0].ids, ["call_a"]);
    assert_eq!(v[1].ids, ["call_c"]);
    assert_eq!(v[0].provider, "openai");
    assert_eq!(
        v[0].provider_error,
        "An assistant message with 'tool_calls' must be followed by tool messages responding to \
         each 'tool_call_id'. The following tool_call_ids did not have response messages: \
         call_a"
    );
    assert!(
        v[1].provider_error
            .ends_with("did not have response messages: call_c")
    );
    let anthropic = v[0]
        .other_providers
        .iter()
        .find(|p| p.provider == "anthropic")
        .unwrap();
    assert_eq!(
        anthropic.message,
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: \
         call_a. Each `tool_use` block must have a corresponding `tool_result` block in \
         the next message."
    );
    let bedrock = v[0]
        .other_providers
        .iter()
        .find(|p| p.provider == "bedrock")
        .unwrap();
    assert_eq!(
        bedrock.message,
        "Expected toolResult blocks at messages.2.content for the following Ids: call_a"
    );
}

#[test]
fn a_trailing_call_without_result_is_unanswered() {
    let h = history(json!([user("hi"), calls(vec![call("call_a", "f", "{}")])]));
    assert_eq!(
        kinds(&check(&h)),
        [(ViolationKind::UnansweredCall, 1, Some(0))]
    );
}

#[test]
fn orphan_result_with_and_without_a_group_before_it() {
    let h = history(json!([user("hi"), result("call_x", "ok")]));
    let v = check(&h);
    assert_eq!(kinds(&v), [(ViolationKind::OrphanResult, 1, None)]);
    assert_eq!(v[0].ids, ["call_x"]);
    assert_eq!(
        v[0].provider_error,
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message \
         with 'tool_calls'."
    );
    assert_eq!(
        v[0].other_providers[0].message,
        "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: call_x. \
         Each `tool_result` block must have a corresponding `tool_use` block in the previous \
         message."
    );

    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}")]),
        result("call_a", "ok"),
        result("call_x", "ok"),
    ]));
    let v = check(&h);
    assert_eq!(kinds(&v), [(ViolationKind::OrphanResult, 3, None)]);
    assert_eq!(
        v[0].provider_error,
        "Invalid parameter: 'tool_call_id' of 'call_x' not found in 'tool_calls' of previous \
         message."
    );
}

#[test]
fn a_result_before_its_call_is_an_orphan() {
    let h = history(json!([
        user("hi"),
        result("call_a", "early"),
        calls(vec![call("call_a", "f", "{}")]),
        result("call_a", "ok"),
    ]));
    assert_eq!(kinds(&check(&h)), [(ViolationKind::OrphanResult, 1, None)]);
}

#[test]
fn duplicate_call_id_across_messages_and_within_one() {
    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}")]),
        result("call_a", "1"),
        {"role": "assistant", "content": "again", "tool_calls": [call("call_a", "f", "{}")]},
        result("call_a", "2"),
    ]));
    let v = check(&h);
    // The second group is complete by itself; its id repeats the first group's, and so does
    // its result.
    assert_eq!(kinds(&v), [(ViolationKind::DuplicateCallId, 3, Some(0))]);
    assert_eq!(v[0].provider, "anthropic");
    // Anthropic numbers content blocks with the text first.
    assert_eq!(
        v[0].provider_error,
        "messages.3.content.1: `tool_use` ids must be unique"
    );

    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}"), call("call_a", "g", "{}")]),
        result("call_a", "1"),
        result("call_a", "2"),
    ]));
    let v = check(&h);
    assert_eq!(
        kinds(&v),
        [
            (ViolationKind::DuplicateCallId, 1, Some(1)),
            (ViolationKind::DuplicateResult, 3, None)
        ]
    );
    assert_eq!(
        v[0].provider_error,
        "messages.1.content.1: `tool_use` ids must be unique"
    );
    assert_eq!(
        v[0].other_providers[0].message,
        "The toolUse blocks at messages.1.content contain duplicate Ids: call_a"
    );
}

#[test]
fn duplicate_result_quotes_both_indices() {
    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}")]),
        result("call_a", "1"),
        result("call_a", "2"),
        user("x"),
        result("call_a", "3"),
    ]));
    let v = check(&h);
    assert_eq!(
        kinds(&v),
        [
            (ViolationKind::DuplicateResult, 3, None),
            (ViolationKind::DuplicateResult, 5, None)
        ]
    );
    assert_eq!(
        v[0].provider_error,
        "Invalid parameter: Duplicate value for 'tool_call_id' of 'call_a' in messages[2] and \
         messages[3]."
    );
    assert!(v[1].provider_error.contains("messages[2] and messages[5]"));
}

#[test]
fn a_result_after_a_user_message_is_out_of_place_and_its_call_unanswered() {
    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}")]),
        user("still there?"),
        result("call_a", "late"),
    ]));
    let v = check(&h);
    assert_eq!(
        kinds(&v),
        [
            (ViolationKind::UnansweredCall, 1, Some(0)),
            (ViolationKind::ResultOutOfPlace, 3, None)
        ]
    );
    let late = only(&v, ViolationKind::ResultOutOfPlace);
    assert_eq!(late.ids, ["call_a"]);
    assert!(
        late.provider_error
            .contains("must be a response to a preceeding message")
    );

    // In another group's results.
    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}")]),
        user("go on"),
        calls(vec![call("call_b", "f", "{}")]),
        result("call_b", "b"),
        result("call_a", "a"),
    ]));
    let v = check(&h);
    assert_eq!(
        kinds(&v),
        [
            (ViolationKind::UnansweredCall, 1, Some(0)),
            (ViolationKind::ResultOutOfPlace, 5, None)
        ]
    );
    assert_eq!(
        v[1].provider_error,
        "Invalid parameter: 'tool_call_id' of 'call_a' not found in 'tool_calls' of previous \
         message."
    );
}

#[test]
fn missing_ids_on_calls_and_on_tool_messages() {
    let h = history(json!([
        user("hi"),
        calls(vec![
            json!({"type": "function", "function": {"name": "f", "arguments": "{}"}}),
            call("  ", "f", "{}"),
        ]),
        result("", "ok"),
    ]));
    let v = check(&h);
    assert_eq!(
        kinds(&v),
        [
            (ViolationKind::MissingCallId, 1, Some(0)),
            (ViolationKind::MissingCallId, 1, Some(1)),
            (ViolationKind::MissingCallId, 2, None)
        ]
    );
    assert_eq!(v[0].provider, "toolmend");
    assert!(v[0].ids.is_empty());
    assert_eq!(v[2].provider, "openai");
    assert_eq!(
        v[2].provider_error,
        "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."
    );
}

#[test]
fn ids_longer_than_40_characters() {
    let long = format!("call_{}", "x".repeat(40));
    let h = history(json!([
        user("hi"),
        calls(vec![call(&long, "f", "{}")]),
        result(&long, "ok"),
    ]));
    let v = check(&h);
    assert_eq!(
        kinds(&v),
        [
            (ViolationKind::CallIdTooLong, 1, Some(0)),
            (ViolationKind::CallIdTooLong, 2, None)
        ]
    );
    assert_eq!(
        v[0].provider_error,
        "Expected a string with maximum length 40, but got a string with length 45 instead."
    );
    let ok = "c".repeat(40);
    let h = history(json!([
        user("hi"),
        calls(vec![call(&ok, "f", "{}")]),
        result(&ok, "ok")
    ]));
    assert_eq!(check(&h), vec![]);
}

#[test]
fn arguments_must_be_json_object_text() {
    let bad = [
        "",
        "  ",
        "[1]",
        "null",
        "\"{}\"",
        "{'a': 1}",
        "{\"a\": 1,}",
        "{\"a\":",
        "{} x",
    ];
    let good = ["{}", " {\"a\": [1, {\"b\": null}]}\n", "{\"a\":1,\"a\":2}"];
    for args in bad {
        let h = history(json!([
            user("hi"),
            calls(vec![call("c", "f", args)]),
            result("c", "ok")
        ]));
        let v = check(&h);
        assert_eq!(
            kinds(&v),
            [(ViolationKind::ArgumentsNotObject, 1, Some(0))],
            "{args:?}"
        );
        assert_eq!(v[0].provider, "anthropic");
        assert_eq!(
            v[0].provider_error,
            "messages.1.content.0.tool_use.input: Input should be a valid dictionary"
        );
    }
    for args in good {
        let h = history(json!([
            user("hi"),
            calls(vec![call("c", "f", args)]),
            result("c", "ok")
        ]));
        assert_eq!(check(&h), vec![], "{args:?}");
    }
}

#[test]
fn empty_tool_content() {
    for content in [
        json!(""),
        json!(" \n"),
        json!([]),
        json!([{"type": "text", "text": ""}]),
    ] {
        let h = history(json!([
            user("hi"),
            calls(vec![call("c", "f", "{}")]),
            {"role": "tool", "tool_call_id": "c", "content": content},
        ]));
        let v = check(&h);
        assert_eq!(
            kinds(&v),
            [(ViolationKind::EmptyToolContent, 2, None)],
            "{content}"
        );
        assert_eq!(
            v[0].provider_error,
            "messages: text content blocks must be non-empty"
        );
        assert_eq!(
            v[0].other_providers[0].message,
            "The content field at messages.2.content.0.toolResult cannot be empty when status \
             value is error."
        );
    }
    let image = json!([{"type": "image_url", "image_url": {"url": "data:,"}}]);
    let h = history(json!([
        user("hi"),
        calls(vec![call("c", "f", "{}")]),
        {"role": "tool", "tool_call_id": "c", "content": image},
    ]));
    assert_eq!(check(&h), vec![]);
}

#[test]
fn invalid_function_names() {
    for name in [
        "multi_tool_use.parallel",
        "",
        "get weather",
        &"a".repeat(65),
        "café",
    ] {
        let h = history(json!([
            user("hi"),
            calls(vec![call("c", name, "{}")]),
            result("c", "ok")
        ]));
        let v = check(&h);
        assert_eq!(
            kinds(&v),
            [(ViolationKind::InvalidFunctionName, 1, Some(0))],
            "{name:?}"
        );
        assert_eq!(
            v[0].provider_error,
            format!(
                "'{name}' does not match '^[a-zA-Z0-9_-]{{1,64}}$' - \
                 'messages.1.tool_calls.0.name'"
            )
        );
    }
    let h = history(json!([
        user("hi"),
        calls(vec![call("c", &"a".repeat(64), "{}")]),
        result("c", "ok")
    ]));
    assert_eq!(check(&h), vec![]);
}

#[test]
fn violations_sort_by_message_then_kind_and_serialise_snake_case() {
    let h = history(json!([
        result("x", ""),
        user("hi"),
        calls(vec![call("a", "bad.name", "nope"), call("a", "f", "{}")]),
    ]));
    let v = check(&h);
    assert_eq!(
        kinds(&v),
        [
            (ViolationKind::OrphanResult, 0, None),
            (ViolationKind::EmptyToolContent, 0, None),
            (ViolationKind::UnansweredCall, 2, Some(0)),
            (ViolationKind::DuplicateCallId, 2, Some(1)),
            (ViolationKind::ArgumentsNotObject, 2, Some(0)),
            (ViolationKind::InvalidFunctionName, 2, Some(0)),
        ]
    );
    let j = serde_json::to_value(&v[2]).unwrap();
    assert_eq!(j["kind"], "unanswered_call");
    assert_eq!(j["message"], 2);
    assert_eq!(j["call"], 0);
    assert_eq!(j["ids"], json!(["a"]));
    assert_eq!(j["provider"], "openai");
    let ids: Vec<&str> = ViolationKind::ALL.iter().map(|k| k.id()).collect();
    for (k, id) in ViolationKind::ALL.iter().zip(&ids) {
        assert_eq!(serde_json::to_value(k).unwrap(), json!(id));
    }
}

// ---------------------------------------------------------------- sanitize

#[test]
fn sanitize_answers_unanswered_calls_directly_after_the_group() {
    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}"), call("call_b", "f", "{}")]),
        result("call_b", "ok"),
        user("and?"),
    ]));
    let s = clean(h);
    let roles: Vec<_> = s.messages.iter().map(Message::role).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
    assert_eq!(tool_id(&s.messages[2]), "call_b");
    assert_eq!(tool_id(&s.messages[3]), "call_a");
    assert_eq!(tool_content(&s.messages[3]), UNANSWERED);
    assert_eq!(
        action_kinds(&s),
        [(ActionKind::ResultSynthesized, 1, Some(0))]
    );
    assert_eq!(s.actions[0].call_id.as_deref(), Some("call_a"));
}

#[test]
fn sanitize_drops_orphans() {
    let h = history(json!([
        user("hi"),
        result("call_x", "stray"),
        user("hello")
    ]));
    let s = clean(h);
    assert_eq!(s.messages.len(), 2);
    assert_eq!(action_kinds(&s), [(ActionKind::ResultDropped, 1, None)]);
    assert!(s.actions[0].detail.contains("orphan"));
    // Rehome drops true orphans too.
    let h = history(json!([
        user("hi"),
        result("call_x", "stray"),
        user("hello")
    ]));
    let s = sanitize(
        h,
        &SanitizePolicy {
            orphans: OrphanPolicy::Rehome,
            ..Default::default()
        },
    );
    assert_eq!(s.messages.len(), 2);
}

#[test]
fn misplaced_results_are_dropped_or_rehomed_by_policy() {
    let h = || {
        history(json!([
            user("hi"),
            calls(vec![call("call_a", "f", "{}")]),
            user("still there?"),
            result("call_a", "late"),
            user("ok"),
        ]))
    };
    let dropped = clean(h());
    let roles: Vec<_> = dropped.messages.iter().map(Message::role).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user", "user"]);
    assert!(tool_content(&dropped.messages[2]).contains("out of place"));
    assert_eq!(
        action_kinds(&dropped),
        [
            (ActionKind::ResultSynthesized, 1, Some(0)),
            (ActionKind::ResultDropped, 3, None)
        ]
    );

    let policy = SanitizePolicy {
        orphans: OrphanPolicy::Rehome,
        ..Default::default()
    };
    let rehomed = sanitize(h(), &policy);
    assert_eq!(check(&rehomed.messages), vec![]);
    let roles: Vec<_> = rehomed.messages.iter().map(Message::role).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user", "user"]);
    assert_eq!(tool_content(&rehomed.messages[2]), "late");
    assert_eq!(
        action_kinds(&rehomed),
        [(ActionKind::ResultRehomed, 3, None)]
    );
}

#[test]
fn a_repeated_call_id_gets_a_suffix_and_its_result_follows() {
    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}")]),
        result("call_a", "1"),
        calls(vec![call("call_a", "f", "{}")]),
        result("call_a", "2"),
    ]));
    let s = clean(h);
    assert_eq!(
        s.messages[3].tool_calls()[0].id.as_deref(),
        Some("call_a_2")
    );
    assert_eq!(tool_id(&s.messages[4]), "call_a_2");
    assert_eq!(tool_content(&s.messages[4]), "2");
    assert_eq!(
        action_kinds(&s),
        [
            (ActionKind::CallIdRenamed, 3, Some(0)),
            (ActionKind::ResultRepointed, 4, None)
        ]
    );

    // Twice in one message, two results: the second result answers the second call.
    let h = history(json!([
        user("hi"),
        calls(vec![
            call("c", "f", "{}"),
            call("c", "g", "{}"),
            call("c", "h", "{}")
        ]),
        result("c", "1"),
        result("c", "2"),
    ]));
    let s = clean(h);
    let ids = call_ids(&s.messages[1]);
    assert_eq!(ids, ["c", "c_2", "c_3"]);
    assert_eq!(
        (tool_id(&s.messages[2]), tool_id(&s.messages[3])),
        ("c", "c_2")
    );
    assert_eq!(tool_id(&s.messages[4]), "c_3");
    assert_eq!(tool_content(&s.messages[4]), UNANSWERED);
}

#[test]
fn a_minted_id_never_collides_with_an_existing_one() {
    let h = history(json!([
        user("hi"),
        calls(vec![
            call("c", "f", "{}"),
            call("c_2", "f", "{}"),
            call("c", "f", "{}")
        ]),
        result("c", "1"),
        result("c_2", "2"),
        result("c", "3"),
    ]));
    let s = clean(h);
    let ids = call_ids(&s.messages[1]);
    assert_eq!(ids, ["c", "c_2", "c_3"]);
    assert_eq!(tool_content(&s.messages[4]), "3");
}

#[test]
fn a_result_answers_its_own_groups_call_before_an_older_unclaimed_one() {
    // The first `x` is never answered; the result after the second group is that group's.
    let h = history(json!([
        user("hi"),
        calls(vec![call("x", "f", "{}")]),
        user("no result"),
        calls(vec![call("x", "g", "{}")]),
        result("x", "2"),
        user("and a result after a user message"),
        result("x", "late"),
    ]));
    let s = clean(h);
    assert_eq!(call_ids(&s.messages[1]), ["x"]);
    assert_eq!(
        tool_content(&s.messages[2]),
        toolmend::history::MISPLACED_RESULT
    );
    assert_eq!(call_ids(&s.messages[4]), ["x_2"]);
    assert_eq!(
        (tool_id(&s.messages[5]), tool_content(&s.messages[5])),
        ("x_2", "2".to_owned())
    );
    assert_eq!(s.messages.len(), 7);
}

#[test]
fn renamed_ids_that_share_a_prefix_get_the_smallest_free_suffix() {
    // 40-character ids: the suffix replaces their end, so the cut ids collide and each
    // rename takes the next free number of the shared base.
    let prefix = "q".repeat(38);
    let (a, b) = (format!("{prefix}aa"), format!("{prefix}ab"));
    let h = history(json!([
        user("hi"),
        calls(vec![call(&a, "f", "{}"), call(&b, "f", "{}")]),
        result(&a, "1"),
        result(&b, "2"),
        calls(vec![call(&a, "f", "{}"), call(&b, "f", "{}")]),
        result(&a, "3"),
        result(&b, "4"),
    ]));
    let s = clean(h);
    assert_eq!(
        call_ids(&s.messages[4]),
        [format!("{prefix}_2"), format!("{prefix}_3")]
    );
    assert_eq!(
        (tool_id(&s.messages[5]), tool_id(&s.messages[6])),
        (
            format!("{prefix}_2").as_str(),
            format!("{prefix}_3").as_str()
        )
    );

    // A base whose one-digit suffixes are all taken goes on with two digits (one
    // character shorter).
    let mut messages = vec![user("hi")];
    for k in 0..10 {
        let id = format!("{prefix}{k:02}");
        for _ in 0..2 {
            messages.push(calls(vec![call(&id, "f", "{}")]));
            messages.push(result(&id, "ok"));
        }
    }
    let s = clean(history(Value::Array(messages)));
    let renamed: Vec<String> = s
        .messages
        .iter()
        .filter(|m| !m.tool_calls().is_empty())
        .skip(1)
        .step_by(2)
        .flat_map(call_ids)
        .collect();
    let mut expected: Vec<String> = (2..10).map(|n| format!("{prefix}_{n}")).collect();
    expected.extend((10..12).map(|n| format!("{}_{n}", &prefix[..37])));
    assert_eq!(renamed, expected);
}

#[test]
fn duplicate_results_are_dropped() {
    let h = history(json!([
        user("hi"),
        calls(vec![call("call_a", "f", "{}")]),
        result("call_a", "1"),
        result("call_a", "2"),
    ]));
    let s = clean(h);
    assert_eq!(s.messages.len(), 3);
    assert_eq!(tool_content(&s.messages[2]), "1");
    assert_eq!(action_kinds(&s), [(ActionKind::ResultDropped, 3, None)]);
}

#[test]
fn calls_without_id_get_a_minted_id_and_a_result() {
    let h = history(json!([
        user("hi"),
        calls(vec![
            json!({"type": "function", "function": {"name": "f", "arguments": "{}"}}),
            call("", "g", "{}"),
        ]),
        result("", "first result"),
    ]));
    let s = clean(h);
    let ids = call_ids(&s.messages[1]);
    assert_eq!(ids, ["call_tm_1_0", "call_tm_1_1"]);
    // The result with an empty id is paired by position with the first id-less call.
    assert_eq!(tool_id(&s.messages[2]), "call_tm_1_0");
    assert_eq!(tool_content(&s.messages[2]), "first result");
    assert_eq!(tool_id(&s.messages[3]), "call_tm_1_1");
    assert!(tool_content(&s.messages[3]).contains("had no id"));
    assert_eq!(
        action_kinds(&s),
        [
            (ActionKind::CallIdMinted, 1, Some(0)),
            (ActionKind::CallIdMinted, 1, Some(1)),
            (ActionKind::ResultSynthesized, 1, Some(1)),
            (ActionKind::ResultRepointed, 2, None),
        ]
    );
}

#[test]
fn calls_without_id_can_be_removed() {
    let policy = SanitizePolicy {
        missing_ids: MissingIdPolicy::Remove,
        ..Default::default()
    };
    let h = history(json!([
        user("hi"),
        calls(vec![json!({"type": "function", "function": {"name": "f", "arguments": "{}"}})]),
        result("", "x"),
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            json!({"type": "function", "function": {"name": "f", "arguments": "{}"}}),
            call("call_b", "g", "{}")]},
        result("call_b", "b"),
        {"role": "assistant", "content": "Done.", "tool_calls": [
            json!({"type": "function", "function": {"name": "f", "arguments": "{}"}})]},
    ]));
    let s = sanitize(h, &policy);
    assert_eq!(check(&s.messages), vec![]);
    let out = serde_json::to_value(&s.messages).unwrap();
    assert_eq!(
        out,
        json!([
            user("hi"),
            {"role": "assistant", "content": "Let me look.", "tool_calls": [call("call_b", "g", "{}")]},
            result("call_b", "b"),
            {"role": "assistant", "content": "Done."},
        ])
    );
    assert_eq!(
        action_kinds(&s),
        [
            (ActionKind::MessageDropped, 1, None),
            (ActionKind::CallRemoved, 1, Some(0)),
            (ActionKind::ResultDropped, 2, None),
            (ActionKind::CallRemoved, 3, Some(0)),
            (ActionKind::CallRemoved, 5, Some(0)),
        ]
    );
}

#[test]
fn removed_calls_keep_input_call_indices_in_actions() {
    let policy = SanitizePolicy {
        missing_ids: MissingIdPolicy::Remove,
        ..Default::default()
    };
    let h = history(json!([
        user("hi"),
        calls(vec![
            json!({"type": "function", "function": {"name": "f", "arguments": "{}"}}),
            call("call_b", "g", "{}"),
        ]),
        user("?"),
    ]));
    let s = sanitize(h, &policy);
    assert_eq!(check(&s.messages), vec![]);
    let synthesized: Vec<&Action> = s
        .actions
        .iter()
        .filter(|a| a.kind == ActionKind::ResultSynthesized)
        .collect();
    assert_eq!(synthesized.len(), 1);
    assert_eq!(synthesized[0].call, Some(1));
    assert_eq!(synthesized[0].call_id.as_deref(), Some("call_b"));
}

#[test]
fn long_ids_are_shortened_and_results_follow() {
    let long = format!("toolu_{}", "abcdefghij".repeat(5));
    let h = history(json!([
        user("hi"),
        calls(vec![call(&long, "f", "{}")]),
        result(&long, "ok"),
    ]));
    let s = clean(h);
    let id = s.messages[1].tool_calls()[0].id.clone().unwrap();
    assert_eq!(id.len(), 40);
    assert!(id.starts_with("toolu_abcdefghij"));
    assert_eq!(tool_id(&s.messages[2]), id);
    assert_eq!(tool_content(&s.messages[2]), "ok");
}

#[test]
fn historical_arguments_are_repaired_or_replaced_with_the_raw_text_kept() {
    let h = history(json!([
        user("hi"),
        calls(vec![
            call("a", "f", "{'city': 'Paris',}"),
            call("b", "f", "[1, 2]"),
            call("c", "f", ""),
            call("d", "f", r#"{"x": 1}"#),
        ]),
        result("a", "1"),
        result("b", "2"),
        result("c", "3"),
        result("d", "4"),
    ]));
    let s = clean(h);
    let args: Vec<_> = s.messages[1]
        .tool_calls()
        .iter()
        .map(|c| c.arguments.as_str())
        .collect();
    assert_eq!(args, [r#"{"city":"Paris"}"#, "{}", "{}", r#"{"x": 1}"#]);
    assert_eq!(
        action_kinds(&s),
        [
            (ActionKind::ArgumentsRepaired, 1, Some(0)),
            (ActionKind::ArgumentsReplaced, 1, Some(1)),
            (ActionKind::ArgumentsRepaired, 1, Some(2)),
        ]
    );
    assert_eq!(s.actions[0].raw.as_deref(), Some("{'city': 'Paris',}"));
    assert!(
        s.actions[0].detail.contains("single_quotes"),
        "{}",
        s.actions[0].detail
    );
    assert_eq!(s.actions[1].raw.as_deref(), Some("[1, 2]"));
}

#[test]
fn empty_results_and_bad_names_are_fixed() {
    let long = "n".repeat(70);
    let h = history(json!([
        user("hi"),
        calls(vec![
            call("a", "multi_tool_use.parallel", "{}"),
            call("b", "", "{}"),
            call("c", &long, "{}"),
        ]),
        result("a", ""),
        result("b", "ok"),
        result("c", "ok"),
    ]));
    let s = clean(h);
    let names: Vec<_> = s.messages[1]
        .tool_calls()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "multi_tool_use_parallel".to_owned(),
            "unnamed_tool".to_owned(),
            "n".repeat(64)
        ]
    );
    assert_eq!(
        tool_content(&s.messages[2]),
        "(The tool returned no output.)"
    );
    assert_eq!(
        action_kinds(&s),
        [
            (ActionKind::FunctionNameSanitized, 1, Some(0)),
            (ActionKind::FunctionNameSanitized, 1, Some(1)),
            (ActionKind::FunctionNameSanitized, 1, Some(2)),
            (ActionKind::ToolContentFilled, 2, None),
        ]
    );
    assert_eq!(
        s.actions[0].detail,
        "'multi_tool_use.parallel' -> 'multi_tool_use_parallel'"
    );
}

#[test]
fn actions_serialise_with_snake_case_kinds() {
    let h = history(json!([user("hi"), calls(vec![call("a", "f", "nope")])]));
    let s = clean(h);
    let j = serde_json::to_value(&s.actions).unwrap();
    assert_eq!(j[0]["kind"], "arguments_replaced");
    assert_eq!(j[0]["raw"], "nope");
    assert_eq!(j[1]["kind"], "result_synthesized");
    assert_eq!(j[1]["call_id"], "a");
}

// ---------------------------------------------------------------- trim

fn long_history() -> Vec<Message> {
    history(json!([
        {"role": "system", "content": "sys"},
        user("first"),
        {"role": "assistant", "content": "a1"},
        user("u2"),
        calls(vec![call("c1", "f", "{}"), call("c2", "f", "{}")]),
        result("c1", "r1"),
        result("c2", "r2"),
        {"role": "assistant", "content": "a2"},
        user("u3"),
        calls(vec![call("c3", "f", "{}")]),
        result("c3", "r3"),
    ]))
}

fn roles_and_text(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            Message::System(t) | Message::User(t) | Message::Developer(t) => t.content.text(),
            Message::Assistant(a) => a.text().unwrap_or_else(|| "calls".to_owned()),
            Message::Tool(t) => t.content.text(),
            Message::Function(_) => "function".to_owned(),
        })
        .collect()
}

#[test]
fn trim_keeps_pinned_messages_and_whole_groups() {
    // 2 pinned + [calls c3, r3] + u3 + a2 = 6; the group before (3 messages) does not fit.
    let t = trim(long_history(), Budget::Messages(6), &ByteEstimate);
    assert_eq!(
        roles_and_text(&t.messages),
        ["sys", "first", "a2", "u3", "calls", "r3"]
    );
    assert_eq!((t.dropped, t.size, t.over_budget), (5, 6, false));
    assert_eq!(check(&t.messages), vec![]);

    let t = trim(long_history(), Budget::Messages(9), &ByteEstimate);
    assert_eq!(
        roles_and_text(&t.messages),
        [
            "sys", "first", "calls", "r1", "r2", "a2", "u3", "calls", "r3"
        ]
    );
    let t = trim(long_history(), Budget::Messages(100), &ByteEstimate);
    assert_eq!((t.messages.len(), t.dropped), (11, 0));
}

#[test]
fn trim_never_splits_a_group_and_keeps_the_last_unit_over_budget() {
    // The last group (3 messages) does not fit beside the 2 pinned ones in 4: kept anyway.
    let h = history(json!([
        {"role": "system", "content": "sys"},
        user("first"),
        {"role": "assistant", "content": "a1"},
        calls(vec![call("c1", "f", "{}"), call("c2", "f", "{}")]),
        result("c1", "r1"),
        result("c2", "r2"),
    ]));
    let t = trim(h.clone(), Budget::Messages(4), &ByteEstimate);
    assert_eq!(
        roles_and_text(&t.messages),
        ["sys", "first", "calls", "r1", "r2"]
    );
    assert!(t.over_budget);
    assert_eq!(t.size, 5);
    let t = trim(h, Budget::Messages(0), &ByteEstimate);
    assert_eq!(t.messages.len(), 5);
    assert_eq!(check(&t.messages), vec![]);
}

#[test]
fn trim_keeps_system_messages_anywhere_and_counts_tokens() {
    let h = history(json!([
        user("first question, long enough to matter"),
        {"role": "assistant", "content": "x".repeat(400)},
        {"role": "developer", "content": "mid rules"},
        user("second"),
        {"role": "assistant", "content": "short"},
    ]));
    let counter = ByteEstimate;
    let sizes: Vec<usize> = h.iter().map(|m| counter.count_message(m)).collect();
    assert_eq!(sizes, [4 + 10, 4 + 100, 4 + 3, 4 + 2, 4 + 2]);
    let t = trim(h.clone(), Budget::Tokens(40), &counter);
    assert_eq!(
        roles_and_text(&t.messages),
        [
            "first question, long enough to matter",
            "mid rules",
            "second",
            "short"
        ]
    );
    assert_eq!(t.size, 14 + 7 + 6 + 6);
    assert!(!t.over_budget);
    let t = trim(h, Budget::Tokens(500), &counter);
    assert_eq!(t.dropped, 0);
}

#[test]
fn trim_does_not_start_the_tail_with_tool_results() {
    // A history check rejects: results after a user message. Trim drops them at the cut.
    let h = history(json!([
        user("first"),
        calls(vec![call("c1", "f", "{}")]),
        user("u2"),
        result("c1", "late"),
        {"role": "assistant", "content": "a"},
    ]));
    let before = check(&h).len();
    let t = trim(h, Budget::Messages(3), &ByteEstimate);
    assert_eq!(roles_and_text(&t.messages), ["first", "a"]);
    assert!(check(&t.messages).len() <= before);
}

// ---------------------------------------------------------------- token counting

#[test]
fn byte_estimate_and_message_overhead() {
    assert_eq!(ByteEstimate.count_text(""), 0);
    assert_eq!(ByteEstimate.count_text("abcde"), 2);
    assert_eq!(MESSAGE_OVERHEAD, 4);
    let m: Message = serde_json::from_value(calls(vec![call("c", "abcd", "{\"a\":1}")])).unwrap();
    assert_eq!(ByteEstimate.count_message(&m), 4 + 1 + 2);
    let m: Message = serde_json::from_value(json!({"role": "user", "content": [
        {"type": "text", "text": "abcd"},
        {"type": "image_url", "image_url": {"url": "data:,xxxxxxxxxxxxxxxx"}}
    ], "name": "ana"}))
    .unwrap();
    assert_eq!(ByteEstimate.count_message(&m), 4 + 1 + 1);
}

#[cfg(feature = "tiktoken")]
#[test]
fn tiktoken_encodings() {
    use toolmend::history::Tiktoken;
    let o200k = Tiktoken::o200k_base();
    assert_eq!(o200k.name(), "o200k_base");
    assert_eq!(o200k.count_text("hello world"), 2);
    assert!(o200k.count_text("<|endoftext|>") > 1);
    assert_eq!(Tiktoken::for_model("gpt-4o").unwrap().name(), "o200k_base");
    assert_eq!(
        Tiktoken::for_model("gpt-4-0613").unwrap().name(),
        "cl100k_base"
    );
    assert!(Tiktoken::for_model("no-such-model").is_none());
    let cl = Tiktoken::cl100k_base();
    assert_eq!(cl.count_text("hello world"), 2);
    let m: Message = serde_json::from_value(user("hello world")).unwrap();
    assert_eq!(cl.count_message(&m), MESSAGE_OVERHEAD + 2);
    let t = trim(long_history(), Budget::Tokens(40), &o200k);
    assert!(!t.over_budget && t.size <= 40);
    assert!(t.dropped > 0);
    assert_eq!(check(&t.messages), vec![]);
}

// ---------------------------------------------------------------- properties

fn arb_id() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        6 => prop::sample::select(vec!["a", "b", "c", "d", "a_2"]).prop_map(|s| Some(s.to_owned())),
        1 => Just(None),
        1 => Just(Some(String::new())),
        1 => Just(Some(" ".to_owned())),
        1 => Just(Some(format!("long_{}", "x".repeat(40)))),
    ]
}

fn arb_arguments() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "{}",
        "{\"a\":1}",
        "{'a': 1,}",
        "",
        "[1]",
        "{\"a\":",
        "nonsense",
        "null",
        "\"{\\\"a\\\":1}\"",
        "{\"a\":1}{\"b\":2}",
    ])
    .prop_map(str::to_owned)
}

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("get_weather".to_owned()),
        1 => Just("bad.name".to_owned()),
        1 => Just(String::new()),
        1 => Just("n".repeat(70)),
    ]
}

fn arb_content() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["ok", "", " ", "result text"]).prop_map(str::to_owned)
}

fn arb_message() -> impl Strategy<Value = Message> {
    let tool_call = (arb_id(), arb_name(), arb_arguments()).prop_map(|(id, name, args)| {
        let mut c = ToolCall::new("", name, args);
        c.id = id;
        c
    });
    prop_oneof![
        1 => Just(json!({"role": "system", "content": "sys"})),
        1 => Just(json!({"role": "developer", "content": [{"type": "text", "text": "dev"}]})),
        1 => Just(json!({"role": "function", "name": "legacy", "content": "{}"})),
        3 => arb_content().prop_map(|c| json!({"role": "user", "content": c})),
        2 => arb_content().prop_map(|c| json!({"role": "assistant", "content": c})),
        4 => (prop::collection::vec(tool_call, 0..4), prop::option::of(arb_content())).prop_map(
            |(calls, content)| json!({"role": "assistant", "content": content,
                                      "tool_calls": serde_json::to_value(calls).unwrap()})
        ),
        6 => (arb_id(), arb_content()).prop_map(|(id, c)| {
            json!({"role": "tool", "tool_call_id": id.unwrap_or_default(), "content": c})
        }),
    ]
    .prop_map(|v| serde_json::from_value(v).unwrap())
}

fn arb_history() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(arb_message(), 0..24)
}

fn arb_policy() -> impl Strategy<Value = SanitizePolicy> {
    (any::<bool>(), any::<bool>()).prop_map(|(rehome, remove)| SanitizePolicy {
        orphans: if rehome {
            OrphanPolicy::Rehome
        } else {
            OrphanPolicy::Drop
        },
        missing_ids: if remove {
            MissingIdPolicy::Remove
        } else {
            MissingIdPolicy::Mint
        },
        ..Default::default()
    })
}

fn arb_budget() -> impl Strategy<Value = Budget> {
    prop_oneof![
        (0usize..30).prop_map(Budget::Messages),
        (0usize..300).prop_map(Budget::Tokens)
    ]
}

/// How many messages the last unit (of the messages not pinned) of `h` holds.
fn last_unit_len(h: &[Message]) -> usize {
    let Some(j) = (0..h.len()).rev().find(|&i| !is_pinned(h, i)) else {
        return 0;
    };
    let tools = h[..=j]
        .iter()
        .rev()
        .take_while(|m| matches!(m, Message::Tool(_)))
        .count();
    match (j + 1).checked_sub(tools + 1).map(|i| &h[i]) {
        Some(m) if tools > 0 && !m.tool_calls().is_empty() => tools + 1,
        _ => 1,
    }
}

fn is_pinned(h: &[Message], i: usize) -> bool {
    let first_user = h.iter().position(|m| matches!(m, Message::User(_)));
    matches!(h[i], Message::System(_) | Message::Developer(_)) || Some(i) == first_user
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn sanitized_histories_pass_check(h in arb_history(), policy in arb_policy()) {
        let s = sanitize(h.clone(), &policy);
        prop_assert_eq!(check(&s.messages), vec![], "{:#?}\n->\n{:#?}", h, s.messages);
        prop_assert_eq!(s.is_unchanged(), check(&h).is_empty());
    }

    #[test]
    fn sanitize_is_idempotent_and_deterministic(h in arb_history(), policy in arb_policy()) {
        let once = sanitize(h.clone(), &policy);
        prop_assert_eq!(&sanitize(h, &policy), &once);
        let twice = sanitize(once.messages.clone(), &policy);
        prop_assert!(twice.is_unchanged(), "{:#?}", twice.actions);
        prop_assert_eq!(twice.messages, once.messages);
    }

    #[test]
    fn every_action_points_at_an_input_message(h in arb_history(), policy in arb_policy()) {
        let s = sanitize(h.clone(), &policy);
        for a in &s.actions {
            prop_assert!(a.message < h.len());
            if let Some(c) = a.call {
                prop_assert!(c < h[a.message].tool_calls().len(), "{:?}", a);
            }
        }
        let minted = s.messages.iter().flat_map(|m| m.tool_calls()).filter_map(|c| c.id.as_deref());
        for id in minted {
            prop_assert!(id.chars().count() <= 40);
        }
    }

    #[test]
    fn trimmed_sanitized_histories_pass_check_and_fit(h in arb_history(), budget in arb_budget()) {
        let s = sanitize(h, &SanitizePolicy::default()).messages;
        let t = trim(s.clone(), budget, &ByteEstimate);
        prop_assert_eq!(check(&t.messages), vec![]);
        prop_assert_eq!(t.dropped + t.messages.len(), s.len());
        let size: usize = t.messages.iter().map(|m| match budget {
            Budget::Messages(_) => 1,
            Budget::Tokens(_) => ByteEstimate.count_message(m),
        }).sum();
        prop_assert_eq!(size, t.size);
        prop_assert_eq!(t.over_budget, size > budget.limit());
        if t.over_budget {
            // Only the pinned messages and the last unit remain.
            let unpinned = (0..t.messages.len()).filter(|&i| !is_pinned(&t.messages, i)).count();
            prop_assert!(unpinned <= last_unit_len(&s), "{:#?}", t.messages);
        }
        // Pinned messages are all kept; the tail after them never starts with a result.
        let pinned_in = (0..s.len()).filter(|&i| is_pinned(&s, i)).count();
        let pinned_out = (0..t.messages.len()).filter(|&i| is_pinned(&t.messages, i)).count();
        prop_assert_eq!(pinned_in, pinned_out);
        let first_unpinned = (0..t.messages.len()).find(|&i| !is_pinned(&t.messages, i));
        if let Some(i) = first_unpinned {
            prop_assert!(!matches!(t.messages[i], Message::Tool(_)));
        }
    }

    #[test]
    fn trim_never_adds_violations(h in arb_history(), budget in arb_budget()) {
        let before = check(&h).len();
        let t = trim(h, budget, &ByteEstimate);
        prop_assert!(check(&t.messages).len() <= before);
    }

    #[test]
    fn histories_round_trip_through_json(h in arb_history()) {
        let text = serde_json::to_string(&h).unwrap();
        let back: Vec<Message> = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&back, &h);
        let s = sanitize(h, &SanitizePolicy::default()).messages;
        let back: Vec<Message> = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        prop_assert_eq!(check(&back), vec![]);
        prop_assert_eq!(back, s);
    }
}

#[test]
fn check_and_sanitize_are_linear_on_long_histories() {
    // 2 000 and 20 000 groups, each with a call reusing the id "dup": a quadratic scan does
    // about 100x the work at 10x the groups.
    let long = |n: usize| {
        let mut h = vec![user("start")];
        for i in 0..n {
            h.push(calls(vec![
                call(&format!("call_{i}"), "f", "{}"),
                call("dup", "f", "{}"),
            ]));
            h.push(result(&format!("call_{i}"), "ok"));
        }
        history(Value::Array(h))
    };
    let (small, large) = (long(2_000), long(20_000));
    assert_eq!(check(&large).len(), 20_000 * 2 - 1);
    let s = sanitize(large.clone(), &SanitizePolicy::default());
    assert_eq!(check(&s.messages), vec![]);
    crate::work::assert_linear("check", &small, &large, |h: &Vec<Message>| check(h));
    crate::work::assert_linear("sanitize", small, large, |h| {
        sanitize(h, &SanitizePolicy::default())
    });
}

/// The ids of an assistant message's calls, in order.
fn call_ids(m: &Message) -> Vec<String> {
    m.tool_calls()
        .iter()
        .map(|c| c.id.clone().unwrap())
        .collect()
}
