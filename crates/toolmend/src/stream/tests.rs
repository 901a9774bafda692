//! The stream module: the assembler's call rules and bounds, the gate's holding rules, the
//! gate against the marker table the parser reads (the drift issue 12 names), properties,
//! and a scaling test (1x against 10x deltas).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::{
    RepairOptions,
    repair::{
        markers::{
            CALL_MARKERS, CALL_TOKENS, FENCE, LEADING_MARKERS, MISTRAL_TOOL_CALLS, THINKING_TAGS,
            TOOL_CALL_TAGS, XML_FUNCTION,
        },
        repair,
    },
};

fn gated(thinking: Thinking) -> Assembler {
    Assembler::new(AssembleOptions {
        content: ContentMode::Gate(thinking),
        ..AssembleOptions::default()
    })
}

/// The client's text and the held text for `deltas` through a gate.
fn run_gate(thinking: Thinking, deltas: &[&str]) -> (String, Option<String>, bool) {
    let mut g = ContentGate::new(thinking);
    let mut out = String::new();
    for d in deltas {
        out.push_str(&g.push(d));
    }
    let end = g.finish();
    out.push_str(&end.tail);
    (out, end.held, end.thinking_stripped)
}

fn run(deltas: &[&str]) -> (String, Option<String>) {
    let (out, held, _) = run_gate(Thinking::Pass, deltas);
    (out, held)
}

fn calls_of(a: &Assembled) -> Vec<(Option<&str>, &str, &str)> {
    a.message
        .tool_calls
        .iter()
        .flatten()
        .map(|c| (c.id.as_deref(), c.name.as_str(), c.arguments.as_str()))
        .collect()
}

fn part(index: Option<u64>, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut p = serde_json::Map::new();
    if let Some(i) = index {
        p.insert("index".into(), json!(i));
    }
    if let Some(id) = id {
        p.insert("id".into(), json!(id));
    }
    p.insert("type".into(), json!("function"));
    let mut f = serde_json::Map::new();
    if let Some(n) = name {
        f.insert("name".into(), json!(n));
    }
    f.insert("arguments".into(), json!(args));
    p.insert("function".into(), Value::Object(f));
    json!({"tool_calls": [Value::Object(p)]})
}

// --- the assembler ---------------------------------------------------------------------

#[test]
fn fragments_join_by_index() {
    let mut a = Assembler::default();
    for d in [
        json!({"role": "assistant", "content": "Checking"}),
        part(Some(0), Some("a"), Some("get_"), "{\"ci"),
        part(Some(1), Some("b"), Some("f"), "{}"),
        part(Some(0), None, Some("weather"), "ty\": \"Paris\"}"),
        json!({"content": " both."}),
    ] {
        a.push_delta(&d).unwrap();
    }
    a.set_finish_reason("tool_calls");
    let done = a.finish();
    assert_eq!(
        calls_of(&done),
        [
            (Some("a"), "get_weather", "{\"city\": \"Paris\"}"),
            (Some("b"), "f", "{}")
        ]
    );
    assert_eq!(done.message.text().as_deref(), Some("Checking both."));
    assert_eq!(done.finish_reason.as_deref(), Some("tool_calls"));
    assert!(done.message.tool_calls.unwrap()[0].extra.is_empty());
}

#[test]
fn a_new_id_on_the_same_index_starts_its_own_call() {
    // Issue 11: ids A then B on index 0 reached the client as one call B.
    let mut a = Assembler::default();
    for d in [
        part(Some(0), Some("A"), Some("f"), "{\"a\""),
        part(Some(0), Some(""), None, ": 1}"),
        part(Some(0), Some("B"), Some("f"), "{\"b\": 2}"),
    ] {
        a.push_delta(&d).unwrap();
    }
    let done = a.finish();
    assert_eq!(
        calls_of(&done),
        [
            (Some("A"), "f", "{\"a\": 1}"),
            (Some("B"), "f", "{\"b\": 2}")
        ]
    );
}

#[test]
fn without_an_index_a_new_id_starts_the_next_call_and_no_id_feeds_the_current() {
    let mut a = Assembler::default();
    for d in [
        part(None, Some("A"), Some("f"), "{\"a\""),
        part(None, None, None, ": 1}"),
        part(None, Some("A"), None, ""),
        part(None, Some("B"), Some("g"), "{"),
        part(None, None, None, "}"),
    ] {
        a.push_delta(&d).unwrap();
    }
    let done = a.finish();
    assert_eq!(
        calls_of(&done),
        [(Some("A"), "f", "{\"a\": 1}"), (Some("B"), "g", "{}")]
    );

    // No call yet, no id: a call of its own; then a fragment with an index.
    let mut a = Assembler::default();
    a.push_delta(&part(None, None, Some("f"), "{}")).unwrap();
    a.push_delta(&part(Some(0), Some("x"), Some("g"), "{}"))
        .unwrap();
    // Without an index again: the current call is the one the last fragment fed.
    a.push_delta(&part(None, None, None, " ")).unwrap();
    let done = a.finish();
    assert_eq!(
        calls_of(&done),
        [(None, "f", "{}"), (Some("x"), "g", "{} ")]
    );
}

#[test]
fn an_id_arriving_late_names_the_call() {
    let mut a = Assembler::default();
    a.push_delta(&part(Some(3), None, Some("f"), "{")).unwrap();
    a.push_delta(&part(Some(3), Some("late"), None, "}"))
        .unwrap();
    assert_eq!(calls_of(&a.finish()), [(Some("late"), "f", "{}")]);
}

#[test]
fn bounds_are_errors() {
    let mut a = Assembler::new(AssembleOptions {
        max_bytes: 10,
        ..AssembleOptions::default()
    });
    assert!(
        a.push_delta(&part(Some(0), None, Some("f"), "{\"a\":"))
            .is_ok()
    );
    assert_eq!(
        a.push_delta(&part(Some(0), None, None, " 123}")),
        Err(StreamError::TooLarge { limit: 10 })
    );
    // Exactly at the limit passes.
    let mut a = Assembler::new(AssembleOptions {
        max_bytes: 4,
        ..AssembleOptions::default()
    });
    assert!(a.push_content("abcd").is_ok());
    assert!(a.push_content("e").is_err());
    // Calls with nothing in them still count.
    let mut a = Assembler::new(AssembleOptions {
        max_calls: 2,
        ..AssembleOptions::default()
    });
    a.push_delta(&part(Some(0), None, None, "")).unwrap();
    a.push_delta(&part(Some(1), None, None, "")).unwrap();
    assert_eq!(
        a.push_delta(&part(Some(2), None, None, "")),
        Err(StreamError::TooManyCalls { limit: 2 })
    );
}

#[test]
fn released_content_is_not_retained() {
    let mut a = gated(Thinking::Pass);
    for _ in 0..1000 {
        a.push_content(" plain words").unwrap();
    }
    assert_eq!(a.retained(), 0);
    let mut a = Assembler::new(AssembleOptions {
        content: ContentMode::Pass,
        ..AssembleOptions::default()
    });
    assert_eq!(a.push_content("x").unwrap(), "x");
    assert_eq!(a.retained(), 0);
    assert_eq!(a.finish().message.content, Some(None));
}

#[test]
fn the_gate_holds_a_call_and_the_message_carries_it() {
    let mut a = gated(Thinking::Pass);
    let mut out = String::new();
    for d in ["Let me check. <tool", "_call>{\"name\": \"f\"}</tool_call>"] {
        out.push_str(&a.push_content(d).unwrap());
    }
    assert!(a.holds_anything());
    let done = a.finish();
    assert_eq!(out, "Let me check.");
    // The message is the whole text (the plan reads it in context); `released` is what
    // already went out.
    assert_eq!(
        done.message.text().as_deref(),
        Some("Let me check. <tool_call>{\"name\": \"f\"}</tool_call>")
    );
    assert_eq!(done.released, "Let me check.");
    assert!(!a.holds_anything(), "finish starts over");
}

// --- the gate --------------------------------------------------------------------------

#[test]
fn plain_text_streams_through_whole() {
    assert_eq!(
        run(&["Hel", "lo ", "world", "."]),
        ("Hello world.".into(), None)
    );
    // A '<' that does not become a marker is released.
    assert_eq!(run(&["a <", "b"]), ("a <b".into(), None));
}

#[test]
fn a_call_marker_holds_the_rest() {
    let (out, held) = run(&[
        "Let me check.",
        "<tool",
        "_call>{\"name\"",
        ": \"f\"}</tool_call>",
    ]);
    assert_eq!(out, "Let me check.");
    assert_eq!(
        held.as_deref(),
        Some("<tool_call>{\"name\": \"f\"}</tool_call>")
    );
    let (out, held) = run(&["  {\"name\": ", "\"f\"}"]);
    assert_eq!(out, "");
    assert_eq!(held.as_deref(), Some("  {\"name\": \"f\"}"));
}

#[test]
fn a_leading_fence_split_before_its_third_backtick_is_held_whole() {
    // fuzz/regressions/sse_assemble/leading_fence_split_leaks_backticks.jsonl
    assert_eq!(
        run(&["``", "`json\n{\"a\": 1}\n```"]),
        (String::new(), Some("```json\n{\"a\": 1}\n```".into()))
    );
    // Backticks that do not become a fence are released at the end, none lost.
    assert_eq!(run(&["``", " code"]), ("`` code".into(), None));
}

fn run_named(deltas: &[&str]) -> (String, Option<String>) {
    let mut g = ContentGate::new(Thinking::Pass).with_call_names(["get_weather"]);
    let mut out = String::new();
    for d in deltas {
        out.push_str(&g.push(d));
    }
    let end = g.finish();
    out.push_str(&end.tail);
    (out, end.held)
}

#[test]
fn a_leading_pythonic_call_or_list_is_held() {
    assert_eq!(
        run_named(&["get_wea", "ther(city=", "'Paris')"]),
        (String::new(), Some("get_weather(city='Paris')".into()))
    );
    assert_eq!(
        run_named(&["functions.Get", "Weather(city='Paris')"]),
        (
            String::new(),
            Some("functions.GetWeather(city='Paris')".into())
        )
    );
    // A first word that begins no tool's name goes out at once.
    let mut g = ContentGate::new(Thinking::Pass).with_call_names(["get_weather"]);
    assert_eq!(g.push("Hel"), "Hel");
    // An unknown name is no call; without names no pythonic call is held.
    assert_eq!(run_named(&["print(1)"]), ("print(1)".into(), None));
    assert_eq!(run(&["get_weather(city='Paris')"]).1, None);
    assert_eq!(
        run(&["[get_weather(city='Paris')]"]),
        (String::new(), Some("[get_weather(city='Paris')]".into()))
    );
    let mut g = ContentGate::new(Thinking::Pass);
    assert_eq!(g.push("Hello"), "Hello");
    // Not at the start: prose.
    assert_eq!(
        run(&["Use f(x) or [1]."]),
        ("Use f(x) or [1].".into(), None)
    );
}

#[test]
fn a_leading_marker_counts_right_after_thinking() {
    let (out, held) = run(&["<think>plan</think>\n", "{\"name\": \"f\"}"]);
    assert_eq!(out, "<think>plan</think>");
    assert_eq!(held.as_deref(), Some("\n{\"name\": \"f\"}"));
}

#[test]
fn thinking_is_stripped_when_asked() {
    let (out, held, stripped) = run_gate(
        Thinking::Strip,
        &[
            "<THINK>I should call <tool_call> now",
            "</think>Here",
            " it is.",
        ],
    );
    assert_eq!((out.as_str(), held, stripped), ("Here it is.", None, true));
    // Unclosed: dropped to the end.
    let (out, _, stripped) = run_gate(Thinking::Strip, &["Answer.<thinking>never closed"]);
    assert_eq!((out.as_str(), stripped), ("Answer.", true));
    // A closing tag split across deltas is still found.
    let (out, _, _) = run_gate(Thinking::Strip, &["[THINK]x[/TH", "INK]ok"]);
    assert_eq!(out, "ok");
    // After the block, a leading marker counts.
    let (out, held, _) = run_gate(Thinking::Strip, &["<think>a</think> {\"x\": 1}"]);
    assert_eq!((out.as_str(), held.as_deref()), ("", Some("{\"x\": 1}")));
}

#[test]
fn nothing_is_lost_or_repeated() {
    // Whatever the split, forwarded text + held text is the whole content.
    let text = "Sure. <tool_call>{\"a\": 1}</tool_call> done";
    for cut in (1..text.len()).filter(|&c| text.is_char_boundary(c)) {
        let (out, held) = run(&[&text[..cut], &text[cut..]]);
        assert_eq!(
            format!("{out}{}", held.unwrap_or_default()),
            text,
            "cut {cut}"
        );
    }
}

#[test]
fn trailing_whitespace_waits_for_text() {
    let mut g = ContentGate::new(Thinking::Pass);
    assert_eq!(g.push("Hello "), "Hello");
    assert_eq!(g.push(" \n"), "");
    assert_eq!(g.push("world"), "  \nworld");
    assert_eq!(g.finish().tail, "");
    assert_eq!(run(&["end.  "]), ("end.  ".into(), None));
}

#[test]
fn a_fence_or_object_after_prose_is_held_when_it_opens_a_call() {
    let call = "{\"name\": \"f\", \"arguments\": {}}";
    let fenced = format!("Sure.\n```json\n{call}\n```");
    for cut in (1..fenced.len()).filter(|&c| fenced.is_char_boundary(c)) {
        let (out, held) = run(&[&fenced[..cut], &fenced[cut..]]);
        assert_eq!(out, "Sure.", "cut {cut}");
        assert_eq!(held.as_deref(), Some(&fenced[5..]), "cut {cut}");
    }
    let bare = format!("Let me check: {call}");
    assert_eq!(run(&[&bare]).0, "Let me check:");
    // Other fences and objects are prose.
    let code = "Run:\n```python\nprint({'a': 1})\n```\ndone";
    assert_eq!(run(&[code]), (code.into(), None));
    let json = "The answer is {\"city\": \"Paris\"} as JSON.";
    for cut in (1..json.len()).filter(|&c| json.is_char_boundary(c)) {
        assert_eq!(run(&[&json[..cut], &json[cut..]]), (json.into(), None));
    }
    assert_eq!(run(&["use `x` or ``` "]), ("use `x` or ``` ".into(), None));
}

#[test]
fn a_pythonic_call_after_prose_is_held_at_a_line_start_or_after_a_bracket() {
    let named = |deltas: &[&str]| {
        let mut g = ContentGate::new(Thinking::Pass).with_call_names(["get_weather"]);
        let mut out = String::new();
        for d in deltas {
            out.push_str(&g.push(d));
        }
        let end = g.finish();
        out.push_str(&end.tail);
        (out, end.held)
    };
    assert_eq!(
        named(&["Checking.\nget_wea", "ther(city='Oslo')"]),
        (
            "Checking.".into(),
            Some("\nget_weather(city='Oslo')".into())
        )
    );
    assert_eq!(
        named(&["Checking. [ get_weather(city='Oslo')]"]),
        (
            "Checking.".into(),
            Some(" [ get_weather(city='Oslo')]".into())
        )
    );
    assert_eq!(
        named(&["call get_weather(x) later\nok"]),
        ("call get_weather(x) later\nok".into(), None)
    );
}

/// What the gate strips is what it gives as reasoning (tags included), whatever the cut:
/// not a tag quoted in code, not one inside a held call; an unclosed block at the end.
#[test]
fn the_gate_gives_the_reasoning_it_strips() {
    for (text, want) in [
        ("<think>a</think>Use `<think>` x", "<think>a</think>"),
        (
            "plan</think>Hi [THINK]b[/THINK]",
            "</think>[THINK]b[/THINK]",
        ),
        ("Hi <tool_call>{\"a\": \"<think>c</think>\"}", ""),
        ("Hi <thinking>never closed", "<thinking>never closed"),
    ] {
        for cut in (0..=text.len()).filter(|&c| text.is_char_boundary(c)) {
            let mut g = ContentGate::new(Thinking::Strip).collecting_reasoning();
            let mut got = String::new();
            for d in [&text[..cut], &text[cut..]] {
                g.push(d);
                got.push_str(&g.take_reasoning());
            }
            got.push_str(&g.flush_reasoning());
            g.finish();
            assert_eq!(got, want, "{text:?} cut {cut}");
        }
    }
    // Not asked for: nothing is kept for it.
    let mut g = ContentGate::new(Thinking::Strip);
    assert_eq!(g.push("<think>a long plan</think>Answer"), "Answer");
    assert_eq!((g.pending(), g.take_reasoning().as_str()), (0, ""));
}

/// Kimi K3's reply tokens: the opener at the start is dropped, the closers hold (the plan
/// leaves the prose before them), whatever the cut.
#[test]
fn kimi_k3_reply_tokens_never_go_out() {
    for (text, released) in [
        (
            "<|open|>response<|sep|>hi there<|close|>response<|sep|><|close|>message<|sep|>",
            "hi there",
        ),
        ("Hello<|close|>message<|sep|>", "Hello"),
        (" <|open|>response<|sep|>\nHello! ", "Hello!"),
    ] {
        for cut in (1..text.len()).filter(|&c| text.is_char_boundary(c)) {
            for thinking in [Thinking::Pass, Thinking::Strip] {
                let (out, held, _) = run_gate(thinking, &[&text[..cut], &text[cut..]]);
                assert_eq!(out, released, "{text:?} cut {cut}");
                assert!(
                    held.is_none_or(|h| h.starts_with("<|close|>")),
                    "{text:?} cut {cut}"
                );
            }
        }
    }
    let (out, _, _) = run_gate(
        Thinking::Strip,
        &["<think>x</think><|open|>resp", "onse<|sep|>Hi"],
    );
    assert_eq!(out, "Hi");
}

/// A thinking tag inside a held call (an argument's text) is the call's: the gate strips
/// the reasoning before the call and holds the call whole, tag included, as the plan
/// reads it (`markers::reasoning_spans`), whatever the cut.
#[test]
fn a_thinking_tag_in_a_held_call_is_kept() {
    let call = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter \
                name=\"code\" string=\"true\">x = \"\"\"Notes.</think>\"\"\"</｜DSML｜parameter>\n\
                </｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    let text = format!("<think>plan</think>Checking.\n{call}");
    assert_eq!(
        crate::message::strip_thinking_before_calls(&text).as_deref(),
        Some(format!("Checking.\n{call}").as_str())
    );
    for cut in (1..text.len()).filter(|&c| text.is_char_boundary(c)) {
        let (out, held, stripped) = run_gate(Thinking::Strip, &[&text[..cut], &text[cut..]]);
        assert_eq!(
            (out.as_str(), held.as_deref(), stripped),
            ("Checking.", Some(format!("\n{call}").as_str()), true),
            "cut {cut}"
        );
    }
}

/// (Not whitespace at the very start when the thinking comes later: "  Answer<think>…"
/// goes out as "  Answer", where `strip_thinking` trims it; the gate cannot know.)
#[test]
fn stripping_leaves_what_strip_thinking_leaves() {
    for text in [
        "<think>x</think>Answer.",
        "<think>x</think>\n\nAnswer.\n",
        "Answer.\n<think>x</think>\n",
        "A <think>x</think> B",
        "Answer<THINKING>never closed",
        "[THINK]a[/THINK] b [THINK]c[/THINK] d",
        // Quoted in code, a tag is text (it goes out); one in prose still goes.
        "Literal `<think>` and `</think>`.<think>x</think>",
        "`</think>` ends it.\n```\n<think>\n```\n<think>x</think> Done",
        "Unclosed `<think>x</think> y",
    ] {
        let want = crate::message::strip_thinking(text).unwrap();
        for cut in (1..text.len()).filter(|&c| text.is_char_boundary(c)) {
            let (out, held, stripped) = run_gate(Thinking::Strip, &[&text[..cut], &text[cut..]]);
            assert_eq!(
                (out.as_str(), held, stripped),
                (want.as_str(), None, true),
                "{text:?} cut {cut}"
            );
        }
    }
}

/// The openers the repair parser unwraps, each with a call it reads through it.
fn parser_openers() -> Vec<(&'static str, String)> {
    let call = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;
    let mut out: Vec<(&'static str, String)> = TOOL_CALL_TAGS
        .iter()
        .filter(|t| !t.starts_with("</"))
        .map(|t| (*t, format!("{t}{call}")))
        .collect();
    out.extend(CALL_TOKENS.iter().map(|t| (*t, format!("{t}{call}"))));
    out.push((MISTRAL_TOOL_CALLS, format!("{MISTRAL_TOOL_CALLS}[{call}]")));
    out.push((
        XML_FUNCTION,
        format!("{XML_FUNCTION}get_weather><parameter=city>Paris</parameter></function>"),
    ));
    // Issue 15: every family's own dialect, as its template writes it.
    out.extend(family_calls());
    out
}

/// One call of each family issue 15 reads, by the marker that opens it.
fn family_calls() -> Vec<(&'static str, String)> {
    [
        (
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        ),
        (
            "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>",
        ),
        (
            "<|tool▁call▁begin|>",
            "<|tool▁call▁begin|>get_weather<|tool▁sep|>{\"city\": \"Paris\"}<|tool▁call▁end|>",
        ),
        (
            "<|tool_calls_section_begin|>",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
        ),
        (
            "<tool_call>",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
        ),
        (
            "<minimax:tool_call>",
            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>",
        ),
        (
            "<|channel|>",
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
        ),
        (
            "<|start|>assistant to=",
            "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>",
        ),
        (
            "<|tool_call_start|>",
            "<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>",
        ),
        (
            "<function_calls>",
            "<function_calls>\nget_weather(city=\"Paris\")\n</function_calls>",
        ),
        (
            "<start_function_call>",
            "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>",
        ),
        ("[TOOL_CALLS]", "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}"),
        (
            "<｜tool_calls_begin｜>",
            "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\">Paris</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>",
        ),
        (
            "<|function_call|>",
            "<|function_call|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
        ),
        // Issue 29.
        (
            "<|tools_prefix|>",
            "<|tools_prefix|>[{\"get_weather\": {\"city\": \"Paris\"}}]<|tools_suffix|>",
        ),
        (
            "<longcat_tool_call>",
            "<longcat_tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</longcat_tool_call>",
        ),
        (
            "<tool_calls>",
            "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n</tool_calls>",
        ),
        (
            "<tool_calls>",
            "<tool_calls>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</tool_calls>",
        ),
        (
            "<tool_calls:",
            "<tool_calls:6124c78e><tool_call:6124c78e>get_weather<tool_sep:6124c78e><arg_key:6124c78e>city</arg_key:6124c78e><arg_value:6124c78e>Paris</arg_value:6124c78e></tool_call:6124c78e></tool_calls:6124c78e>",
        ),
        (
            "<tool_call:",
            "<tool_call:ab12>get_weather<arg_key:ab12>city</arg_key:ab12><arg_value:ab12>Paris</arg_value:ab12></tool_call:ab12>",
        ),
        (
            "<function name=",
            "<function name=\"get_weather\"><param name=\"city\">Paris</param></function>",
        ),
        (
            "<|message_sep|>\n\nfunction call<|role_sep|>",
            "<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
        ),
        (
            "<tool_call>",
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n",
        ),
        (
            "<dots_function_call>",
            "<dots_function_call><invoke name=\"get_weather\"><parameter name=\"city\">Paris</parameter></invoke></dots_function_call>",
        ),
        (
            "<TOOLCALL>",
            "<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</TOOLCALL>",
        ),
        (
            "<|tool_call>",
            "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
        ),
        (
            "<｜DSML｜function_calls>",
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        ),
        (
            "<｜DSML｜tool_calls>",
            "<｜DSML｜tool_calls><｜DSML｜invoke name=\"get_weather\"><｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜tool_calls>",
        ),
        (
            "<|open|>tools<|sep|>",
            "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
        ),
        (
            "[TOOL_CALLS]",
            "[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"Paris\"}",
        ),
        (
            "<｜GCML｜tool_calls>",
            "<｜GCML｜tool_calls><｜GCML｜invoke name=\"get_weather\"><｜GCML｜parameter name=\"city\" string=\"true\">Paris</｜GCML｜parameter></｜GCML｜invoke></｜GCML｜tool_calls>",
        ),
        (
            "<|START_ACTION|>",
            "<|START_ACTION|>\n[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}]\n<|END_ACTION|>",
        ),
        (
            "<ifm|tool_calls>",
            "<ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key><ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls>",
        ),
        (
            "<|tool_call:start|>",
            "<|tool_call:start|>get_weather\n<|tool_arg:start|>city<|tool_arg:value|>Paris<|tool_arg:end|>\n<|tool_call:end|>",
        ),
        (
            "<|plamo:begin_tool_requests:plamo|>",
            "<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{\"city\": \"Paris\"}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>",
        ),
        (
            "<seed:tool_call>",
            "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>",
        ),
        (
            "<|action_start|>",
            "<|action_start|><|plugin|>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n<|action_end|>",
        ),
    ]
    .into_iter()
    .map(|(m, t)| (m, t.to_owned()))
    .collect()
}

#[test]
fn every_family_call_is_held_whole_split_at_every_byte() {
    // Issue 15: split into three deltas at every position (char boundaries) and at every
    // seventh position after it: nothing of the call reaches the client.
    for (marker, text) in family_calls() {
        assert!(
            CALL_MARKERS.contains(&marker),
            "{marker} is not in the table"
        );
        let whole = format!("Checking. {text}");
        let cuts: Vec<usize> = (1..whole.len())
            .filter(|&c| whole.is_char_boundary(c))
            .collect();
        for (k, &a) in cuts.iter().enumerate() {
            for &b in cuts[k..].iter().step_by(7) {
                let (out, held) = run(&[&whole[..a], &whole[a..b], &whole[b..]]);
                assert_eq!(out, "Checking.", "{marker} cut at {a}, {b}");
                assert_eq!(held.as_deref(), Some(format!(" {text}").as_str()));
            }
        }
        // At the start of the text too.
        for a in (1..text.len()).filter(|&a| text.is_char_boundary(a)) {
            let (out, held) = run(&[&text[..a], &text[a..]]);
            assert_eq!(out, "", "{marker} at the start cut at {a}");
            assert_eq!(held.as_deref(), Some(text.as_str()));
        }
    }
    // With the tool names known too: a marker still growing is held whole, whatever
    // follows its prefix (the `func` of GigaChat 3's `\n\nfunction call` may begin a
    // pythonic `functions.` call, but the `<|message_sep|>` before it decides first).
    for (marker, text) in family_calls() {
        let whole = format!("Checking.{text}");
        let cuts: Vec<usize> = (1..whole.len())
            .filter(|&c| whole.is_char_boundary(c))
            .collect();
        for (k, &a) in cuts.iter().enumerate() {
            for &b in cuts[k..].iter().step_by(7) {
                let (out, held) = run_named(&[&whole[..a], &whole[a..b], &whole[b..]]);
                assert_eq!(out, "Checking.", "{marker} named, cut at {a}, {b}");
                assert_eq!(held.as_deref(), Some(text.as_str()));
            }
        }
    }
    // A `[` that opens a list of calls is held with it (the plan leaves no lone `[`).
    let text = "Sure! [\n  {\"name\": \"get_weather\", \"arguments\": {}}]";
    for cut in 1..text.len() {
        let (out, held) = run(&[&text[..cut], &text[cut..]]);
        assert_eq!(out, "Sure!", "cut at {cut}: {:?}", &text[..cut]);
        assert!(held.unwrap().trim_start().starts_with('['));
    }
}

#[test]
fn a_call_shown_in_markdown_code_goes_out_as_prose_and_the_call_after_it_is_held() {
    // SGLang's `test_quoted_dsml_is_not_executed_or_removed`: split at every byte, a call
    // shown in a fence or a code span goes out whole as prose (what the plan keeps as
    // content), and a real call after it is held from its marker, as the JSON path cuts.
    let calls = [
        (
            "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">literal</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
            "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">SF</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        ),
        (
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"literal\"}}</tool_call>",
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"SF\"}}</tool_call>",
        ),
        (
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"literal\"}}]",
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"SF\"}}]",
        ),
        (
            "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">literal</parameter></invoke></minimax:tool_call>",
            "<minimax:tool_call><invoke name=\"get_weather\"><parameter name=\"city\">SF</parameter></invoke></minimax:tool_call>",
        ),
    ];
    for (literal, real) in calls {
        for quote in [
            format!("Example:\n```xml\n{literal}\n```\n"),
            format!("Example:\n~~~xml\n{literal}\n~~~\n"),
            format!("Example: `{literal}`\n"),
        ] {
            let whole = format!("{quote}{real}");
            assert_eq!(
                crate::message::prose_before_calls(&whole).as_deref(),
                Some(quote.trim())
            );
            let cuts: Vec<usize> = (1..whole.len())
                .filter(|&c| whole.is_char_boundary(c))
                .collect();
            for (k, &a) in cuts.iter().enumerate() {
                for &b in cuts[k..].iter().step_by(13) {
                    let (out, held) = run(&[&whole[..a], &whole[a..b], &whole[b..]]);
                    assert_eq!(out, quote.trim_end(), "cut at {a}, {b}: {whole:?}");
                    assert_eq!(held, Some(format!("\n{real}")), "cut at {a}, {b}");
                }
                if a < quote.len() {
                    let (out, held) = run(&[&quote[..a], &quote[a..]]);
                    assert_eq!((out.as_str(), held), (quote.as_str(), None), "cut at {a}");
                }
            }
        }
    }
    // Backticks never closed are text: what follows them is kept back until the end
    // says so, and a marker after them holds all that is kept.
    let text = "Don't use ` here. <tool_call>{\"name\": \"f\"}</tool_call>";
    for a in 1..text.len() {
        let (out, held) = run(&[&text[..a], &text[a..]]);
        assert_eq!(out, "Don't use", "cut at {a}");
        assert_eq!(held.as_deref(), Some(&text[9..]), "cut at {a}");
    }
}

#[test]
fn a_damaged_dsml_token_before_the_block_is_held_and_a_quoted_one_goes_out() {
    // The gate keeps a damaged DSML token back until what follows it decides: the block
    // (held with it, as the plan cuts the content before it) or anything else (prose).
    let call = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">SF</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    for junk in ["<｜DSML｜ SugarPanel>\n", "<｜DSML｜toolcalls>\n\n"] {
        let whole = format!("Checking files.\n\n{junk}{call}");
        assert_eq!(
            crate::message::prose_before_calls(&whole).as_deref(),
            Some("Checking files.")
        );
        let cuts: Vec<usize> = (1..whole.len())
            .filter(|&c| whole.is_char_boundary(c))
            .collect();
        for (k, &a) in cuts.iter().enumerate() {
            for &b in cuts[k..].iter().step_by(11) {
                let (out, held) = run(&[&whole[..a], &whole[a..b], &whole[b..]]);
                assert_eq!(out, "Checking files.", "cut at {a}, {b}: {whole:?}");
                assert!(held.is_some(), "cut at {a}, {b}");
            }
        }
        // Followed by prose, a token that is no marker is prose: all of it goes out (a
        // damaged wrapper, a marker, is held: the plan gives the content back).
        let prose = format!("Checking files.\n\n{junk}done");
        let (out, held) = run(&[&prose]);
        if junk.starts_with("<｜DSML｜ ") {
            assert_eq!((out.as_str(), held), (prose.as_str(), None));
        } else {
            assert_eq!(out, "Checking files.");
        }
    }
    // A quoted token: what goes out is never more than the plan's content, which keeps it.
    for quote in ["Example: '<｜DSML｜toolcalls>'", "Example: “<｜DSML｜ x>”"] {
        let whole = format!("{quote}\n{call}");
        let content = crate::message::prose_before_calls(&whole).unwrap();
        assert_eq!(content, quote);
        for a in (1..whole.len()).filter(|&a| whole.is_char_boundary(a)) {
            let (out, held) = run(&[&whole[..a], &whole[a..]]);
            assert!(content.starts_with(&out), "cut at {a}: {out:?}");
            assert!(held.is_some(), "cut at {a}");
        }
    }
}

#[test]
fn a_gemma4_call_without_its_opener_is_held_and_prose_about_one_goes_out() {
    // Held from `<call>` or the line's `call:` once the body shows `<|"|>`, split
    // anywhere; the prose before it goes out, as the plan keeps it.
    for (prose, call) in [
        ("Checking.", "\n<call>get_weather{city:<|\"|>Paris<|\"|>}"),
        ("some prose", "\ncall:bash{command:<|\"|>make -j8<|\"|>}"),
    ] {
        let whole = format!("{prose}{call}");
        assert_eq!(
            crate::message::prose_before_calls(&whole).as_deref(),
            Some(prose)
        );
        let cuts: Vec<usize> = (1..whole.len())
            .filter(|&c| whole.is_char_boundary(c))
            .collect();
        for (k, &a) in cuts.iter().enumerate() {
            for &b in cuts[k..].iter().step_by(5) {
                let (out, held) = run(&[&whole[..a], &whole[a..b], &whole[b..]]);
                assert_eq!(out, prose, "cut at {a}, {b}: {whole:?}");
                assert_eq!(held.as_deref(), Some(call), "cut at {a}, {b}");
            }
        }
    }
    // Without the delimiter (its braces close first), or mid-line: prose, all of it.
    for text in [
        "some prose\ncall:get_weather{city:Paris} and more",
        "The tag <call>get_weather{days:3} is shown here.",
        "Gemma writes call:f{q:<|\"|>x<|\"|>} inline.",
    ] {
        for a in (1..text.len()).filter(|&a| text.is_char_boundary(a)) {
            let (out, held) = run(&[&text[..a], &text[a..]]);
            assert_eq!((out.as_str(), held), (text, None), "cut at {a}");
        }
    }
}

#[test]
fn calls_that_open_only_a_text_are_held_there_and_prose_elsewhere() {
    // Issue 29: a bare `<invoke name=` (MiniMax writes it inside `<minimax:tool_call>`),
    // Phi-4-mini's `functools[` and GigaChat 3's role header begin a call only at the
    // start of a text; after prose they are prose (an answer showing the syntax).
    for text in [
        "<invoke name=\"get_weather\"><parameter name=\"city\">Paris</parameter></invoke>",
        "functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
        "function call<|role_sep|>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
    ] {
        assert!(
            LEADING_MARKERS.iter().any(|m| text.starts_with(m)),
            "{text}"
        );
        let repaired = repair(text, &RepairOptions::default()).unwrap();
        assert_eq!(repaired.calls[0].name.as_deref(), Some("get_weather"));
        for a in (1..text.len()).filter(|&a| text.is_char_boundary(a)) {
            let (out, held) = run(&[&text[..a], &text[a..]]);
            assert_eq!(out, "", "{text} at the start cut at {a}");
            assert_eq!(held.as_deref(), Some(text));
        }
    }
    let prose = "Such a call reads <invoke name=\"get_weather\"><parameter name=\"city\">Paris</parameter></invoke> in MiniMax's XML.";
    for a in (1..prose.len()).filter(|&a| prose.is_char_boundary(a)) {
        let (out, held) = run(&[&prose[..a], &prose[a..]]);
        assert_eq!(out, prose, "cut at {a}");
        assert_eq!(held, None);
    }
}

#[test]
fn a_tool_code_fence_is_held_split_anywhere_and_a_code_fence_is_not() {
    // Gemma 3 writes its call in a ```` ```tool_code ```` fence, after prose too.
    let text = "```tool_code\nget_weather(city=\"Paris\")\n```";
    let whole = format!("Checking. {text}");
    for a in 1..whole.len() {
        for b in (a..whole.len()).step_by(5) {
            let (out, held) = run(&[&whole[..a], &whole[a..b], &whole[b..]]);
            assert_eq!(out, "Checking.", "cut at {a}, {b}");
            assert_eq!(held.as_deref(), Some(format!(" {text}").as_str()));
        }
    }
    // A python fence in an answer reaches the client as it is, however it is split.
    let code = "Call it so:\n```python\nget_weather(city=\"Paris\")\n```\nDone.";
    for a in 1..code.len() {
        let (out, held) = run(&[&code[..a], &code[a..]]);
        assert_eq!(out, code, "cut at {a}");
        assert_eq!(held, None);
    }
}

#[test]
fn every_marker_the_parser_unwraps_is_held_back_by_the_gate() {
    // Issue 12: "a marker the parser knows can stream to the client as text".
    for (marker, text) in parser_openers() {
        // The parser does read a call through it ...
        let repaired = repair(&text, &RepairOptions::default()).unwrap();
        assert!(
            repaired
                .calls
                .iter()
                .any(|c| c.name.as_deref() == Some("get_weather")),
            "the parser reads no call through {marker}: {repaired:?}"
        );
        // ... and the gate releases none of it, after prose, however it is split.
        let prose = "Let me look that up. ";
        let whole = format!("{prose}{text}");
        let cuts: Vec<usize> = (1..whole.len())
            .filter(|&c| whole.is_char_boundary(c))
            .collect();
        // (The space before the marker is held with it: a plan trims it off the prose.)
        let held_text = format!(" {text}");
        for cut in cuts {
            let (out, held) = run(&[&whole[..cut], &whole[cut..]]);
            assert_eq!(out, prose.trim_end(), "{marker} cut at {cut}");
            assert_eq!(
                held.as_deref(),
                Some(held_text.as_str()),
                "{marker} cut at {cut}"
            );
        }
        let chars: Vec<String> = whole.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(
            run(&refs).0,
            prose.trim_end(),
            "{marker} a character at a time"
        );
    }
    // Every call marker (DeepSeek's, which the parser does not read, included).
    for marker in CALL_MARKERS {
        let (out, held) = run(&["ok ", marker, "{}"]);
        assert_eq!(out, "ok", "{marker}");
        assert_eq!(held, Some(format!(" {marker}{{}}")));
    }
    // Leading markers at the start, split anywhere.
    for marker in LEADING_MARKERS {
        let text = format!("{marker}{{\"name\": \"f\", \"arguments\": {{}}}}");
        for cut in 1..text.len() {
            let (out, _) = run(&[&text[..cut], &text[cut..]]);
            assert_eq!(out, "", "{marker} cut at {cut}");
        }
    }
    assert!(LEADING_MARKERS.contains(&FENCE));
}

#[test]
fn every_thinking_tag_is_stripped_by_the_gate_when_asked() {
    for (open, close) in THINKING_TAGS {
        let text = format!("{open}reasoning{close}The answer.");
        for cut in (1..text.len()).filter(|&c| text.is_char_boundary(c)) {
            let (out, held, stripped) = run_gate(Thinking::Strip, &[&text[..cut], &text[cut..]]);
            assert_eq!(
                (out.as_str(), held, stripped),
                ("The answer.", None, true),
                "{open} cut at {cut}"
            );
        }
    }
}

// --- properties ------------------------------------------------------------------------

const PIECES: [&str; 25] = [
    "Sure, ",
    "plain words ",
    "<tool_call>",
    "</tool_call>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<function=",
    "{\"a\": 1}",
    "```",
    "`",
    "``",
    "~~~",
    "```xml\n",
    "<",
    "[",
    "<think>",
    "</THINK>",
    "[THINK]",
    " ",
    "\n",
    "é",
    "日本語",
    "🦀",
    "f(x=1)",
    "<tool",
];

/// Content made of `pieces`, cut into deltas at `cuts` (char boundaries).
fn deltas(pieces: &[usize], cuts: &[usize]) -> (String, Vec<String>) {
    let text: String = pieces.iter().map(|&i| PIECES[i % PIECES.len()]).collect();
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| c % (text.len() + 1))
        .filter(|&c| text.is_char_boundary(c))
        .collect();
    at.sort_unstable();
    at.dedup();
    let mut out = Vec::new();
    let mut prev = 0;
    for c in at.into_iter().chain([text.len()]) {
        out.push(text[prev..c].to_owned());
        prev = c;
    }
    (text, out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_gate_loses_nothing_and_releases_no_call_marker(
        pieces in prop::collection::vec(0usize..64, 0..24),
        cuts in prop::collection::vec(0usize..4096, 0..12),
    ) {
        let (text, ds) = deltas(&pieces, &cuts);
        let refs: Vec<&str> = ds.iter().map(String::as_str).collect();
        let (out, held) = run(&refs);
        prop_assert_eq!(format!("{out}{}", held.clone().unwrap_or_default()), text.clone());
        // A marker shown in Markdown code may go out as prose; none outside code does.
        let first = crate::repair::markers::prose_markers(&text).at;
        prop_assert!(first.is_none_or(|at| at >= out.len()), "a marker released in {:?}", out);
        if first.is_some() {
            prop_assert!(held.is_some());
        }
        if let Some(h) = &held {
            let h = h.trim_start();
            // Or backticks never closed, a marker after them.
            let starts = CALL_MARKERS.iter().chain(LEADING_MARKERS).any(|m| h.starts_with(m))
                || h.starts_with('`')
                || crate::repair::markers::leading_call(h) == crate::repair::markers::Leading::Call;
            prop_assert!(starts, "held text starts with no marker: {:?}", h);
        }
    }

    #[test]
    fn the_gate_holds_from_where_the_plan_cuts_the_prose(
        pieces in prop::collection::vec(0usize..64, 0..24),
        cuts in prop::collection::vec(0usize..4096, 0..12),
    ) {
        // What the gate released is prose the plan keeps: it holds from the first place
        // a call may begin (`first_call_marker`, code told apart) or earlier.
        let (text, ds) = deltas(&pieces, &cuts);
        let refs: Vec<&str> = ds.iter().map(String::as_str).collect();
        let (out, held) = run(&refs);
        // (With a call marker outside code; thinking is the gate's to strip before the
        // plan reads the text.)
        let marked = crate::repair::markers::prose_markers(&text).at.is_some();
        if let Some(at) = crate::repair::markers::first_call_marker(&text)
            .filter(|_| marked && !crate::repair::markers::has_thinking(&text))
        {
            let cut = crate::repair::markers::hold_start(&text, at);
            prop_assert!(held.is_some(), "nothing held of {:?}", text);
            prop_assert!(out.len() <= cut, "{:?} released of {:?}", out, text);
        }
    }

    #[test]
    fn stripping_releases_no_thinking_tag(
        pieces in prop::collection::vec(0usize..64, 0..24),
        cuts in prop::collection::vec(0usize..4096, 0..12),
    ) {
        // (Without Markdown code: a tag shown in code is the model's text and goes out;
        // `stripping_leaves_what_strip_thinking_leaves` has such texts.)
        let (_, ds) = deltas(&pieces, &cuts);
        let ds: Vec<String> = ds.iter().map(|d| d.replace(['`', '~'], "'")).collect();
        let refs: Vec<&str> = ds.iter().map(String::as_str).collect();
        let (out, _, _) = run_gate(Thinking::Strip, &refs);
        prop_assert!(!crate::repair::markers::has_thinking(&out), "{:?}", out);
    }

    #[test]
    fn calls_split_anywhere_come_back_whole(
        calls in prop::collection::vec(("[a-z]{1,6}", "[a-z_]{1,12}", "[ -~]{0,40}"), 1..5),
        cuts in prop::collection::vec(1usize..8, 1..6),
        with_index in any::<bool>(),
    ) {
        // Each call: its first fragment carries the id (and, maybe, the index); then the
        // name and the arguments in pieces of the sizes in `cuts`.
        let mut a = Assembler::default();
        for (k, (id, name, args)) in calls.iter().enumerate() {
            let id = format!("{id}{k}");
            let index = with_index.then_some(k as u64);
            a.push_delta(&part(index, Some(&id), None, "")).unwrap();
            let mut sizes = cuts.iter().cycle();
            for (text, is_name) in [(name.as_str(), true), (args.as_str(), false)] {
                let mut rest = text;
                while !rest.is_empty() {
                    let n = (*sizes.next().unwrap()).min(rest.len());
                    let (piece, more) = rest.split_at(n);
                    rest = more;
                    let p = if is_name {
                        part(index, None, Some(piece), "")
                    } else {
                        part(index, None, None, piece)
                    };
                    a.push_delta(&p).unwrap();
                }
            }
        }
        let done = a.finish();
        let got: Vec<(String, String, String)> = done.message.tool_calls.unwrap_or_default()
            .into_iter()
            .map(|c| (c.id.unwrap_or_default(), c.name, c.arguments))
            .collect();
        let want: Vec<(String, String, String)> = calls.iter().enumerate()
            .map(|(k, (id, n, a))| (format!("{id}{k}"), n.clone(), a.clone()))
            .collect();
        prop_assert_eq!(got, want);
    }
}

// --- scaling ---------------------------------------------------------------------------

/// `n` content deltas and `n` call fragments.
fn assemble_input(n: usize) -> Vec<Value> {
    (0..n)
        .flat_map(|i| {
            [
                json!({"content": "some words of prose, then <b>more</b> "}),
                part(
                    Some((i % 4) as u64),
                    (i < 4).then(|| format!("c{i}")).as_deref(),
                    None,
                    "\"k\": 1, ",
                ),
            ]
        })
        .collect()
}

/// Feeds the deltas, then finishes.
fn assemble(deltas: &[Value]) {
    let mut a = gated(Thinking::Strip);
    for d in deltas {
        std::hint::black_box(a.push_delta(d).unwrap());
    }
    std::hint::black_box(a.finish());
}

/// Held content (a call marker early, then `n` deltas) and a long thinking block.
fn held_and_thinking(n: usize) {
    let mut g = ContentGate::new(Thinking::Strip);
    g.push("<think>");
    for _ in 0..n {
        std::hint::black_box(g.push("still thinking about it, <b>then</b> [more] "));
    }
    g.push("</think><tool_call>");
    for _ in 0..n {
        std::hint::black_box(g.push("{\"k\": [1, 2, 3]}, "));
    }
    std::hint::black_box(g.finish());
    let mut ws = ContentGate::new(Thinking::Pass);
    for _ in 0..n {
        std::hint::black_box(ws.push("  \n"));
    }
    std::hint::black_box(ws.finish());
    // Markdown code around markers: fences, code spans, backticks never closed.
    let mut code = ContentGate::new(Thinking::Pass);
    for _ in 0..n {
        for piece in [
            "see `<tool",
            "_call>` and ",
            "```xml\n<tool_call>\n",
            "```\n",
            "a `` b\n",
        ] {
            std::hint::black_box(code.push(piece));
        }
    }
    std::hint::black_box(code.finish());
    // Thinking tags quoted in code (text), blocks stripped and given out as reasoning.
    let mut quoted = ContentGate::new(Thinking::Strip).collecting_reasoning();
    quoted.push("<|open|>response<|sep|>");
    for _ in 0..n {
        for piece in [
            "say `<think>` or `</th",
            "ink>` ",
            "<think>a b c ",
            "d</think> x ",
        ] {
            quoted.push(piece);
            std::hint::black_box(quoted.take_reasoning());
        }
    }
    std::hint::black_box(quoted.flush_reasoning());
    std::hint::black_box(quoted.finish());
    // One backtick a delta: a run longer than a span is looked for is decided.
    let mut ticks = ContentGate::new(Thinking::Pass);
    ticks.push("Look: ");
    for _ in 0..n {
        std::hint::black_box(ticks.push("`"));
    }
    std::hint::black_box(ticks.finish());
}

#[test]
fn the_assembler_and_the_gate_are_linear_in_the_deltas() {
    // Quadratic work (a rescan of everything held per delta) costs ~100x per 10x.
    let (small, large) = (assemble_input(2_000), assemble_input(20_000));
    crate::work::assert_linear("assemble", &small, &large, |d: &Vec<Value>| {
        assemble(d);
    });
    crate::work::assert_linear("held_and_thinking", 2_000, 20_000, held_and_thinking);
}

#[test]
fn the_gated_message_is_the_whole_text_and_unreleased_gives_what_is_left() {
    // Prose released, then a held call: the plan reads all of it, as the JSON path does.
    let mut a = gated(Thinking::Pass);
    let mut out = String::new();
    for d in [
        "Call it so:\n```py",
        "thon\n",
        "get_weather(city=\"Lagos\")\n```",
    ] {
        out.push_str(&a.push_content(d).unwrap());
    }
    let done = a.finish();
    let whole = "Call it so:\n```python\nget_weather(city=\"Lagos\")\n```";
    if let Some(text) = done.message.text() {
        assert_eq!(text, whole);
        assert_eq!(
            format!("{}{}", done.released, &text[done.released.len()..]),
            whole
        );
        assert_eq!(done.released, out);
    } else {
        assert_eq!(out + &done.tail, whole);
    }
    // What a plan's content leaves to send.
    use crate::stream::unreleased;
    assert_eq!(unreleased("Sure. Checking", "Sure. "), "Checking");
    assert_eq!(unreleased("Sure.", "Sure. "), "");
    assert_eq!(unreleased("Sure.", "  \n"), "Sure.");
    assert_eq!(unreleased("  Sure. more", "  Sure."), " more");
    assert_eq!(
        unreleased("A re-ask's answer", "Sure. "),
        "A re-ask's answer"
    );
    // Past max_bytes the released text is not kept: the plan reads the held text alone.
    let mut a = Assembler::new(AssembleOptions {
        max_bytes: 64,
        content: ContentMode::Gate(Thinking::Pass),
        ..AssembleOptions::default()
    });
    for _ in 0..100 {
        a.push_content("plain words ").unwrap();
    }
    a.push_content("<tool_call>{\"name\": \"f\"}</tool_call>")
        .unwrap();
    let done = a.finish();
    assert_eq!(done.released, "");
    assert_eq!(
        done.message.text().as_deref(),
        Some(" <tool_call>{\"name\": \"f\"}</tool_call>")
    );
}

/// An API that streams a call's start (id and name), its argument fragments by index and
/// its end (Anthropic's content blocks, Responses' items) assembles the same message as
/// OpenAI's chat fragments carrying the same pieces.
#[test]
fn neutral_deltas_assemble_as_chat_deltas_do() {
    let calls = [
        ("c1", "get_weather", "{\"city\": \"Pa", "ris\"}"),
        ("c2", "get_time", "{\"zone\"", ": \"CET\"}"),
    ];
    let mut chat = Assembler::new(AssembleOptions::default());
    chat.push_delta(&json!({"content": "Let me "})).unwrap();
    chat.push_delta(&json!({"content": "check."})).unwrap();
    for (k, (id, name, a, b)) in calls.iter().enumerate() {
        chat.push_delta(&json!({"tool_calls": [{"index": k, "id": id, "type": "function", "function": {"name": name, "arguments": a}}]}))
            .unwrap();
        chat.push_delta(&json!({"tool_calls": [{"index": k, "function": {"arguments": b}}]}))
            .unwrap();
    }
    chat.set_finish_reason("length");
    let mut neutral = Assembler::new(AssembleOptions::default());
    neutral.push(Delta::Text("Let me ")).unwrap();
    neutral.push(Delta::Reasoning("the user wants ")).unwrap();
    neutral.push(Delta::Text("check.")).unwrap();
    neutral.push(Delta::Reasoning("two calls")).unwrap();
    for (id, name, a, b) in calls {
        // No index at all: each call's end says the next fragment starts another.
        let start = CallDelta {
            index: None,
            id: Some(id),
            name: Some(name),
            arguments: None,
        };
        neutral.push(Delta::Call(start)).unwrap();
        for piece in [a, b] {
            let args = CallDelta {
                index: None,
                id: None,
                name: None,
                arguments: Some(piece),
            };
            neutral.push(Delta::Call(args)).unwrap();
        }
        neutral.push(Delta::CallEnd { index: None }).unwrap();
    }
    neutral.push(Delta::Finish { cut_off: true }).unwrap();
    let (c, n) = (chat.finish(), neutral.finish());
    assert_eq!(c.message, n.message);
    assert_eq!(n.message.tool_calls.as_ref().map(Vec::len), Some(2));
    assert!(c.cut_off && n.cut_off);
    assert_eq!(n.reasoning, "the user wants two calls");
    assert!(c.reasoning.is_empty());
}

/// Without an end, a fragment without index or id feeds the current call; after it, a
/// new one.
#[test]
fn a_call_end_starts_the_next_call() {
    let frag = |name: Option<&'static str>, args: &'static str| {
        Delta::Call(CallDelta {
            index: None,
            id: None,
            name,
            arguments: Some(args),
        })
    };
    let mut a = Assembler::new(AssembleOptions::default());
    a.push(frag(Some("f"), "{}")).unwrap();
    a.push(frag(Some("g"), "{}")).unwrap();
    assert_eq!(a.calls_begun(), 1, "no end: the same call");
    a.push(Delta::CallEnd { index: None }).unwrap();
    a.push(frag(Some("h"), "{}")).unwrap();
    assert_eq!(a.calls_begun(), 2);
}

/// Reasoning counts against the bound like everything retained.
#[test]
fn reasoning_is_bounded() {
    let mut a = Assembler::new(AssembleOptions {
        max_bytes: 8,
        ..AssembleOptions::default()
    });
    assert!(a.push(Delta::Reasoning("1234")).is_ok());
    assert!(a.push(Delta::Reasoning("56789")).is_err());
}
