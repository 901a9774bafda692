//! Issue 29: the dialects of the 2026 families (Apertus, LongCat, Hunyuan, MiniCPM 5,
//! GigaChat 3, ERNIE 4.5, dots, Poolside, Phi-4-mini, xLAM, Nemotron) read through the one
//! plan, each with the same battery: one call, parallel calls, prose before and after,
//! reasoning before, typed values, long multi-line code. And MiniMax M2's false positive:
//! an `<invoke name=…>` shown in prose is no call. Streaming is tested in `stream::tests`.

use serde_json::{Value, json};
use toolmend::{CompiledTool, RepairOptions, Toolbox, message};

use super::formats::{Planned, ok, plan_with};

fn tools() -> Toolbox {
    let weather = CompiledTool::compile(
        "get_weather",
        "Weather for a city.",
        &json!({"type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"}},
                "required": ["city"], "additionalProperties": false}),
    )
    .unwrap();
    let time = CompiledTool::compile(
        "get_time",
        "Time in a zone.",
        &json!({"type": "object", "properties": {"zone": {"type": "string"}},
                "required": ["zone"], "additionalProperties": false}),
    )
    .unwrap();
    let write = CompiledTool::compile(
        "write_file",
        "Write a file.",
        &json!({"type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "mode": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "overwrite": {"type": "boolean"},
                    "backup": {"type": ["string", "null"]},
                    "version": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "options": {"type": "object"}},
                "required": ["path"], "additionalProperties": false}),
    )
    .unwrap();
    Toolbox::from_tools([weather, time, write]).unwrap()
}

fn plan(text: &str) -> (Vec<Planned>, Option<String>) {
    plan_with(&tools(), text)
}

#[track_caller]
fn check(text: &str, calls: Vec<Planned>, content: Option<&str>) {
    let (got, left) = plan(text);
    assert_eq!(got, calls, "calls of {text:?}");
    assert_eq!(left.as_deref(), content, "content of {text:?}");
}

/// Typed values: numbers, a boolean, null, nested objects and arrays, a string that looks
/// like a number.
fn typed() -> Value {
    json!({
        "path": "out/report.txt",
        "mode": 420,
        "ratio": 0.75,
        "overwrite": true,
        "backup": null,
        "version": "007",
        "tags": ["a", "b c"],
        "options": {"retries": 3, "nested": {"deep": [1, 2.5, false, null]}, "label": "x"}
    })
}

/// Long multi-line code with quotes, braces, backslashes and blank lines.
fn code() -> Value {
    let content = "fn main() {\n    let s = \"{\\\"a\\\": 1}\";\n    if s.len() > 2 && s != \"}\" {\n        println!(\"{}\", s);\n    }\n\n    // 'single' and \"double\" quotes, a tab\there\n}\n";
    json!({"path": "src/main.rs", "content": content})
}

/// A family's way of writing calls.
struct Family {
    name: &'static str,
    /// One call, as its template writes it.
    call: fn(&str, &Value) -> String,
    /// Several calls as one block.
    block: fn(&[String]) -> String,
    /// Several calls in one block are written by its template.
    parallel: bool,
    /// Its calls are read after prose (not only at the start of the text).
    after_prose: bool,
    /// Prose after its calls keeps the text prose (the false-positive guard: no marker).
    prose_after_is_prose: bool,
}

fn json_call(name: &str, args: &Value) -> String {
    json!({"name": name, "arguments": args}).to_string()
}

/// An XML parameter's text: a string as it is, anything else as JSON.
fn xml_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn params(args: &Value, f: impl Fn(&str, String) -> String) -> String {
    args.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| f(k, xml_text(v)))
        .collect()
}

/// The battery every family goes through.
fn battery(f: &Family) {
    let name = f.name;
    let weather = (f.call)("get_weather", &json!({"city": "Bern", "days": 2}));
    let time = (f.call)("get_time", &json!({"zone": "CET"}));
    let one = (f.block)(std::slice::from_ref(&weather));
    // One call.
    check(
        &one,
        vec![ok("get_weather", json!({"city": "Bern", "days": 2}))],
        None,
    );
    // Parallel calls.
    if f.parallel {
        check(
            &(f.block)(&[weather.clone(), time.clone()]),
            vec![
                ok("get_weather", json!({"city": "Bern", "days": 2})),
                ok("get_time", json!({"zone": "CET"})),
            ],
            None,
        );
    }
    // Prose before (and the space before the call trimmed off it).
    if f.after_prose {
        check(
            &format!("Let me check that for you. {one}"),
            vec![ok("get_weather", json!({"city": "Bern", "days": 2}))],
            Some("Let me check that for you."),
        );
    }
    // Prose after.
    let after = format!("{one}\nI will report back once it answers.");
    if f.prose_after_is_prose {
        check(&after, vec![], Some(after.as_str()));
    } else {
        check(
            &after,
            vec![ok("get_weather", json!({"city": "Bern", "days": 2}))],
            None,
        );
    }
    // Reasoning before: not content, and a call it mentions is no call.
    check(
        &format!("<think>The user wants Bern; maybe {{\"city\": \"Basel\"}}?</think>\n{one}"),
        vec![ok("get_weather", json!({"city": "Bern", "days": 2}))],
        None,
    );
    // Typed values come through as they were meant.
    check(
        &(f.block)(&[(f.call)("write_file", &typed())]),
        vec![ok("write_file", typed())],
        None,
    );
    // Long multi-line code.
    check(
        &(f.block)(&[(f.call)("write_file", &code())]),
        vec![ok("write_file", code())],
        None,
    );
    eprintln!("{name}: battery passed");
}

// ---- the families ----

#[test]
fn apertus_calls_are_read() {
    battery(&Family {
        name: "apertus",
        call: |n, a| {
            let mut one = serde_json::Map::new();
            one.insert(n.to_owned(), a.clone());
            Value::Object(one).to_string()
        },
        block: |calls| format!("<|tools_prefix|>[{}]<|tools_suffix|>", calls.join(", ")),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // A call cut off before the suffix is read as far as it goes: feedback, not invented.
    let (calls, _) = plan("<|tools_prefix|>[{\"get_weather\": {\"city\": \"Ber");
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.0.as_str(), c.2))
            .collect::<Vec<_>>(),
        [("get_weather", "feedback")]
    );
    // A call with no arguments.
    check(
        "<|tools_prefix|>[{\"get_time\": {\"zone\": \"UTC\"}}, {\"get_weather\": {\"city\": \"Oslo\"}}]",
        vec![
            ok("get_time", json!({"zone": "UTC"})),
            ok("get_weather", json!({"city": "Oslo"})),
        ],
        None,
    );
}

#[test]
fn longcat_calls_are_read() {
    battery(&Family {
        name: "longcat",
        call: |n, a| format!("<longcat_tool_call>{}</longcat_tool_call>", json_call(n, a)),
        block: |calls| calls.join("\n"),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
}

#[test]
fn hunyuan_a13b_calls_are_read() {
    battery(&Family {
        name: "hunyuan a13b",
        call: json_call,
        block: |calls| format!("<tool_calls>[{}]</tool_calls>", calls.join(",")),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
}

#[test]
fn hunyuan_v3_calls_are_read_and_typed_by_the_schema() {
    fn call(n: &str, a: &Value) -> String {
        format!(
            "<tool_call>{n}<tool_sep>\n{}</tool_call>\n",
            params(a, |k, v| format!(
                "<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n"
            ))
        )
    }
    battery(&Family {
        name: "hunyuan v3",
        call,
        block: |calls| format!("<tool_calls>\n{}</tool_calls>", calls.concat()),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // A call without parameters.
    check(
        "<tool_calls><tool_call>get_time<tool_sep></tool_call></tool_calls>",
        vec![("get_time".to_owned(), Some(json!({})), "feedback")],
        None,
    );
}

#[test]
fn hunyuan_suffixed_calls_are_read_and_typed_by_the_schema() {
    fn call(n: &str, a: &Value) -> String {
        let s = ":6124c78e";
        format!(
            "<tool_call{s}>{n}<tool_sep{s}>{}</tool_call{s}>",
            params(a, |k, v| format!(
                "<arg_key{s}>{k}</arg_key{s}><arg_value{s}>{v}</arg_value{s}>"
            ))
        )
    }
    battery(&Family {
        name: "hunyuan suffixed",
        call,
        block: |calls| {
            format!(
                "<tool_calls:6124c78e>{}</tool_calls:6124c78e>",
                calls.concat()
            )
        },
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // Another checkpoint's suffix, no separator, no parameters.
    check(
        "<tool_calls:ab12><tool_call:ab12>get_weather<arg_key:ab12>city</arg_key:ab12><arg_value:ab12>Lyon</arg_value:ab12></tool_call:ab12></tool_calls:ab12>",
        vec![ok("get_weather", json!({"city": "Lyon"}))],
        None,
    );
}

#[test]
fn minicpm5_calls_are_read_and_typed_by_the_schema() {
    fn call(n: &str, a: &Value) -> String {
        format!(
            "<function name=\"{n}\">{}</function>\n",
            params(a, |k, v| format!("<param name=\"{k}\">{v}</param>"))
        )
    }
    battery(&Family {
        name: "minicpm5",
        call,
        block: <[String]>::concat,
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // The space before `name` as a tokenizer leaks it: byte-level BPE's `Ġ`, or none.
    for space in ["\u{120}", ""] {
        let text = format!(
            "Checking.\n<function{space}name=\"get_weather\"><param{space}name=\"city\">上海</param><param{space}name=\"days\">2</param></function>\n"
        );
        check(
            &text,
            vec![ok("get_weather", json!({"city": "上海", "days": 2}))],
            Some("Checking."),
        );
    }
    // A call whose tags leak the space in one place and not in another: every parameter
    // is read, whatever its form (vLLM's test_collapsed_param_tags_with_tokenizer_space_function).
    check(
        "<function\u{120}name=\"get_weather\"><paramname=\"city\">上海</param><param name=\"days\">2</param></function>",
        vec![ok("get_weather", json!({"city": "上海", "days": 2}))],
        None,
    );
    // `<param` that no form follows (`<param>`, `<parameter …>`) opens no parameter.
    check(
        "<function name=\"get_weather\"><param name=\"city\"><parameter>Oslo</param></function>",
        vec![ok("get_weather", json!({"city": "<parameter>Oslo"}))],
        None,
    );
    // Every argument in one `properties` parameter, as Python's literal (vLLM's
    // test_properties_wrapper): unwrapped, never moved whole into the one missing key.
    check(
        "<function name=\"get_weather\"><param name=\"properties\">{'city': 'Lyon', 'days': 2}</param></function>",
        vec![ok("get_weather", json!({"city": "Lyon", "days": 2}))],
        None,
    );
    // A value in CDATA keeps its line breaks and markup.
    check(
        "<function name=\"write_file\"><param name=\"path\">a.html</param><param name=\"content\"><![CDATA[<p>\n</param>\n</p>]]></param></function>",
        vec![ok(
            "write_file",
            json!({"path": "a.html", "content": "<p>\n</param>\n</p>"}),
        )],
        None,
    );
}

#[test]
fn gigachat3_calls_are_read() {
    battery(&Family {
        name: "gigachat3",
        call: |n, a| {
            format!(
                "<|message_sep|>\n\nfunction call<|role_sep|>\n{}",
                json_call(n, a)
            )
        },
        block: <[String]>::concat,
        parallel: false,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // At the start of the text the role header alone, and the end of the turn after it.
    check(
        "function call<|role_sep|>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"MSK\"}}</s>",
        vec![ok("get_time", json!({"zone": "MSK"}))],
        None,
    );
    // GigaChat 3.1.
    check(
        "Сейчас посмотрю.<|function_call|>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"MSK\"}}",
        vec![ok("get_time", json!({"zone": "MSK"}))],
        Some("Сейчас посмотрю."),
    );
}

#[test]
fn ernie45_calls_are_read() {
    battery(&Family {
        name: "ernie 4.5",
        call: |n, a| format!("<tool_call>\n{}\n</tool_call>\n", json_call(n, a)),
        block: <[String]>::concat,
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // The thinking model's reasoning ends in `</think>` whose opener was in the prompt:
    // the call is read; the text before the tag is left as the content, as for every
    // family (vLLM's `ernie45` leaves it too).
    check(
        "I need the weather in Bern first.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bern\"}}\n</tool_call>\n",
        vec![ok("get_weather", json!({"city": "Bern"}))],
        Some("I need the weather in Bern first."),
    );
}

#[test]
fn dots_calls_are_read() {
    fn call(n: &str, a: &Value) -> String {
        format!(
            "<invoke name=\"{n}\">{}</invoke>",
            params(a, |k, v| format!("<parameter name=\"{k}\">{v}</parameter>"))
        )
    }
    battery(&Family {
        name: "dots",
        call,
        block: |calls| {
            format!(
                "<dots_function_call>{}</dots_function_call>",
                calls.concat()
            )
        },
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // Its JSON form.
    check(
        "ok<dots_function_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CST\"}}</dots_function_call>",
        vec![ok("get_time", json!({"zone": "CST"}))],
        Some("ok"),
    );
}

#[test]
fn poolside_calls_are_read() {
    fn call(n: &str, a: &Value) -> String {
        format!(
            "<tool_call>{n}\n{}</tool_call>",
            params(a, |k, v| format!(
                "<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n"
            ))
        )
    }
    battery(&Family {
        name: "poolside",
        call,
        block: |calls| calls.join("\n"),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // A file's last line break and leading indent are its content.
    check(
        "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>f.py</arg_value>\n<arg_key>content</arg_key>\n<arg_value>    def f():\n        return 1\n</arg_value>\n</tool_call>",
        vec![ok(
            "write_file",
            json!({"path": "f.py", "content": "    def f():\n        return 1\n"}),
        )],
        None,
    );
}

#[test]
fn phi4_mini_calls_are_read() {
    battery(&Family {
        name: "phi-4-mini",
        call: json_call,
        block: |calls| format!("functools[{}]", calls.join(", ")),
        parallel: true,
        after_prose: false,
        prose_after_is_prose: false,
    });
    // After prose the word is prose: the text stays as it came.
    let text = "In Python, functools[0] is no call: {\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}} neither.";
    check(text, vec![], Some(text));
}

#[test]
fn xlam_calls_are_read() {
    battery(&Family {
        name: "xlam",
        call: json_call,
        block: |calls| format!("[{}]", calls.join(", ")),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: true,
    });
    // In a fence, after reasoning.
    check(
        "<think>Two tools.</think>\n```json\n[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"PST\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Reno\"}}]\n```",
        vec![
            ok("get_time", json!({"zone": "PST"})),
            ok("get_weather", json!({"city": "Reno"})),
        ],
        None,
    );
}

#[test]
fn nemotron_calls_are_read() {
    battery(&Family {
        name: "nemotron json",
        call: json_call,
        block: |calls| format!("<TOOLCALL>[{}]</TOOLCALL>", calls.join(", ")),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // Nemotron 3: Qwen3-Coder's XML inside `<tool_call>`.
    fn call(n: &str, a: &Value) -> String {
        format!(
            "<tool_call>\n<function={n}>\n{}</function>\n</tool_call>\n",
            params(a, |k, v| format!("<parameter={k}>\n{v}\n</parameter>\n"))
        )
    }
    battery(&Family {
        name: "nemotron 3 xml",
        call,
        block: <[String]>::concat,
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
}

#[test]
fn seed_oss_calls_are_read_and_its_reasoning_is_no_call() {
    // Qwen3-Coder's XML inside `<seed:tool_call>`, one tag per call.
    fn call(n: &str, a: &Value) -> String {
        format!(
            "<seed:tool_call>\n<function={n}>\n{}</function>\n</seed:tool_call>",
            params(a, |k, v| format!("<parameter={k}>\n{v}\n</parameter>\n"))
        )
    }
    battery(&Family {
        name: "seed-oss",
        call,
        block: |calls| calls.join("\n"),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // Its reasoning block, with the budget notes inside, holds a call it quotes: that one
    // is reasoning, not a second run of the call.
    let one = call("get_weather", &json!({"city": "Bern", "days": 2}));
    check(
        &format!(
            "<seed:think>\nThe format is {one}. Budget used.</seed:cot_budget_reflect>\n</seed:think>\n{one}"
        ),
        vec![ok("get_weather", json!({"city": "Bern", "days": 2}))],
        None,
    );
}

#[test]
fn gigachat_3_5_gcml_calls_are_read_and_typed_by_their_attribute() {
    // DeepSeek V4's DSML under GigaChat 3.5's own token: `string="true"` is text (typed by
    // the schema), `string="false"` JSON.
    fn call(n: &str, a: &Value) -> String {
        let params: String = a
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!(
                    "<｜GCML｜parameter name=\"{k}\" string=\"true\">{s}</｜GCML｜parameter>\n"
                ),
                other => format!(
                    "<｜GCML｜parameter name=\"{k}\" string=\"false\">{other}</｜GCML｜parameter>\n"
                ),
            })
            .collect();
        format!("<｜GCML｜invoke name=\"{n}\">\n{params}</｜GCML｜invoke>\n")
    }
    battery(&Family {
        name: "gigachat 3.5 gcml",
        call,
        block: |calls| {
            format!(
                "<｜GCML｜tool_calls>\n{}</｜GCML｜tool_calls>",
                calls.concat()
            )
        },
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
}

#[test]
fn cohere_command_calls_are_read_and_its_reasoning_is_no_call() {
    // `<|START_ACTION|>` + a JSON list of `{"tool_call_id", "tool_name", "parameters"}` +
    // `<|END_ACTION|>`, after `<|START_THINKING|>…<|END_THINKING|>`.
    battery(&Family {
        name: "cohere command",
        call: |n, a| json!({"tool_call_id": "0", "tool_name": n, "parameters": a}).to_string(),
        block: |calls| {
            format!(
                "<|START_ACTION|>\n[\n    {}\n]\n<|END_ACTION|>",
                calls.join(",\n    ")
            )
        },
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    check(
        "<|START_THINKING|>I will call get_weather with {\"city\": \"Basel\"}<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Bern\"}}]<|END_ACTION|>",
        vec![ok("get_weather", json!({"city": "Bern"}))],
        None,
    );
}

#[test]
fn k2_horizon_calls_are_read_with_or_without_their_type_tags() {
    // GLM's keys and values in `ifm|` tags; the values typed by the schema.
    fn call(n: &str, a: &Value) -> String {
        format!(
            "<ifm|tool_call>{n}{}</ifm|tool_call>",
            params(a, |k, v| format!(
                "<ifm|arg_key>{k}</ifm|arg_key><ifm|arg_value>{v}</ifm|arg_value>"
            ))
        )
    }
    battery(&Family {
        name: "k2 horizon",
        call,
        block: |calls| format!("<ifm|tool_calls>{}</ifm|tool_calls>", calls.join("\n")),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    // The model's type tags are passed over (the schema types the value); a JSON call
    // inside the tag reads too.
    check(
        "<ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key><ifm|arg_type>string</ifm|arg_type><ifm|arg_value>Bern</ifm|arg_value><ifm|arg_key>days</ifm|arg_key><ifm|arg_type>integer</ifm|arg_type><ifm|arg_value>2</ifm|arg_value></ifm|tool_call></ifm|tool_calls>",
        vec![ok("get_weather", json!({"city": "Bern", "days": 2}))],
        None,
    );
    check(
        "<ifm|tool_calls><ifm|tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Bern\"}}</ifm|tool_call></ifm|tool_calls>",
        vec![ok("get_weather", json!({"city": "Bern"}))],
        None,
    );
}

#[test]
fn solar_open_2_calls_are_read_and_its_reasoning_is_no_call() {
    fn call(n: &str, a: &Value) -> String {
        format!(
            "<|tool_call:start|>{n}\n{}<|tool_call:end|>",
            params(a, |k, v| format!(
                "<|tool_arg:start|>{k}<|tool_arg:value|>{v}<|tool_arg:end|>\n"
            ))
        )
    }
    battery(&Family {
        name: "solar open 2",
        call,
        block: |calls| calls.join("\n"),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
    let one = call("get_weather", &json!({"city": "Bern"}));
    check(
        &format!("<|think:start|>maybe {one}<|think:end|>Sure.{one}"),
        vec![ok("get_weather", json!({"city": "Bern"}))],
        Some("Sure."),
    );
}

#[test]
fn plamo_3_calls_are_read() {
    battery(&Family {
        name: "plamo 3",
        call: |n, a| {
            format!(
                "<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>{n}<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{a}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>"
            )
        },
        block: |calls| {
            format!(
                "<|plamo:begin_tool_requests:plamo|>{}<|plamo:end_tool_requests:plamo|><|plamo:tag|>",
                calls.concat()
            )
        },
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
}

#[test]
fn minimax_m3_nested_elements_are_read_and_typed_by_the_schema() {
    let order = CompiledTool::compile(
        "create_order",
        "Create an order.",
        &json!({"type": "object", "properties": {
            "user_id": {"type": "integer"},
            "urgent": {"type": "boolean"},
            "note": {"type": "string"},
            "shipping": {"type": "object", "properties": {
                "city": {"type": "string"}, "zip": {"type": "string"}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "sku": {"type": "string"}, "qty": {"type": "integer"}}}},
            "tags": {"type": "object", "properties": {
                "tag": {"type": "array", "items": {"type": "string"}}}}},
            "required": ["user_id"], "additionalProperties": false}),
    )
    .unwrap();
    let tools = Toolbox::from_tools([order]).unwrap();
    let s = "]<]minimax[>[";
    let el = |k: &str, v: &str| format!("{s}<{k}>{v}{s}</{k}>");
    let body = [
        el("user_id", "42"),
        el("urgent", "true"),
        el("note", "Leave at the desk, 2nd floor."),
        el(
            "shipping",
            &[el("city", "Singapore"), el("zip", "018956")].concat(),
        ),
        el(
            "items",
            &[
                el("item", &[el("sku", "book-001"), el("qty", "2")].concat()),
                el("item", &[el("sku", "pen-007"), el("qty", "5")].concat()),
            ]
            .concat(),
        ),
        el("tags", &[el("tag", "a"), el("tag", "b")].concat()),
    ]
    .concat();
    let text = format!(
        "I will create it.\n{s}<tool_call>\n{s}<invoke name=\"create_order\">{body}{s}</invoke>\n{s}</tool_call>"
    );
    let (calls, content) = plan_with(&tools, &text);
    assert_eq!(
        calls,
        vec![ok(
            "create_order",
            json!({"user_id": 42, "urgent": true, "note": "Leave at the desk, 2nd floor.",
                   "shipping": {"city": "Singapore", "zip": "018956"},
                   "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-007", "qty": 5}],
                   "tags": {"tag": ["a", "b"]}})
        )]
    );
    // The separator before the block goes with it.
    assert_eq!(content.as_deref(), Some("I will create it."));
    // Two invokes in one block, each its own call.
    let two = format!(
        "{s}<tool_call>\n{s}<invoke name=\"create_order\">{}{s}</invoke>\n{s}<invoke name=\"create_order\">{}{s}</invoke>\n{s}</tool_call>",
        el("user_id", "1"),
        el("user_id", "2")
    );
    let (calls, _) = plan_with(&tools, &two);
    assert_eq!(
        calls,
        vec![
            ok("create_order", json!({"user_id": 1})),
            ok("create_order", json!({"user_id": 2}))
        ]
    );
}

#[test]
fn a_harmony_call_with_an_empty_or_unreadable_message_is_not_dropped() {
    // gpt-oss: `<|message|><|call|>` is a call without arguments; `<|message|>foo<|call|>`
    // a call whose arguments are no JSON (feedback). Neither vanishes beside the others.
    let text = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Bern\"}<|call|>\
                <|start|>assistant<|channel|>commentary to=functions.get_time<|message|>CET please<|call|>\
                <|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|><|call|>";
    let (calls, _) = plan(text);
    let got: Vec<(&str, &str)> = calls.iter().map(|(t, _, d)| (t.as_str(), *d)).collect();
    assert_eq!(
        got,
        [
            ("get_weather", "executed"),
            ("get_time", "feedback"),
            ("get_time", "feedback")
        ],
        "{calls:?}"
    );
    // The empty message is `{}` (feedback here only because `zone` is required).
    assert_eq!(calls[2].1, Some(json!({})));
}

#[test]
fn internlm_calls_are_read_and_their_tokens_leave_no_content() {
    // InternLM2 / Intern-S1: `<|action_start|><|plugin|>` + a JSON call + `<|action_end|>`.
    battery(&Family {
        name: "internlm",
        call: |n, a| {
            format!(
                "<|action_start|><|plugin|>\n{}\n<|action_end|>",
                json!({"name": n, "parameters": a})
            )
        },
        block: |calls| calls.join("\n"),
        parallel: true,
        after_prose: true,
        prose_after_is_prose: false,
    });
}

// ---- MiniMax M2: the false positive ----

#[test]
fn an_invoke_shown_in_prose_is_no_call() {
    let answers = [
        "MiniMax writes its calls as XML, for example <invoke name=\"get_weather\"><parameter name=\"city\">Paris</parameter></invoke>, inside a wrapper tag.",
        "To call the tool, the model emits `<invoke name=\"get_time\"><parameter name=\"zone\">UTC</parameter></invoke>`.",
        "Sure.\n<invoke name=\"get_weather\"><parameter name=\"city\">Paris</parameter></invoke>\nThat is what such a call looks like.",
    ];
    for a in answers {
        check(a, vec![], Some(a));
    }
    // Real calls stay calls: in the wrapper (after prose too), or bare at the start.
    check(
        "Checking.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"zone\">CET</parameter>\n</invoke>\n</minimax:tool_call>",
        vec![
            ok("get_weather", json!({"city": "Paris"})),
            ok("get_time", json!({"zone": "CET"})),
        ],
        Some("Checking."),
    );
    check(
        "<invoke name=\"get_weather\"><parameter name=\"city\">Paris</parameter></invoke>",
        vec![ok("get_weather", json!({"city": "Paris"}))],
        None,
    );
}

// ---- a call shown in Markdown code ----

/// One call to `get_weather` for `city` in each family's markers: DeepSeek's DSML, Hermes,
/// Mistral, MiniMax, Kimi K2, GLM.
fn weather_calls(city: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "DSML",
            format!(
                "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">{city}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
            ),
        ),
        (
            "Hermes",
            format!(
                "<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"{city}\"}}}}\n</tool_call>"
            ),
        ),
        (
            "Mistral",
            format!(
                "[TOOL_CALLS][{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"{city}\"}}}}]"
            ),
        ),
        (
            "MiniMax",
            format!(
                "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">{city}</parameter>\n</invoke>\n</minimax:tool_call>"
            ),
        ),
        (
            "Kimi",
            format!(
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{{\"city\": \"{city}\"}}<|tool_call_end|><|tool_calls_section_end|>"
            ),
        ),
        (
            "GLM",
            format!(
                "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>{city}</arg_value>\n</tool_call>"
            ),
        ),
    ]
}

/// `call` shown in Markdown code after prose: in a ```` ```xml ```` fence, a `~~~` fence,
/// a bare ```` ``` ```` fence, and a code span.
fn quotes(call: &str) -> Vec<String> {
    vec![
        format!("Example:\n```xml\n{call}\n```\n"),
        format!("Example:\n~~~xml\n{call}\n~~~\n"),
        format!("Example:\n```\n{call}\n```\n"),
        format!("Example: `{call}`\n"),
    ]
}

#[test]
fn a_call_shown_in_markdown_code_is_no_call_and_a_call_after_it_is() {
    // SGLang's DeepSeek V4 parser test (`test_quoted_dsml_is_not_executed_or_removed`),
    // for every family: a marker in a code fence or a code span is shown, not called, and
    // the content keeps the quote whole.
    let real = weather_calls("SF");
    for (family, literal) in weather_calls("literal") {
        let call = &real.iter().find(|(f, _)| *f == family).unwrap().1;
        for quote in quotes(&literal) {
            check(&quote, vec![], Some(quote.as_str()));
            let text = format!("{quote}{call}");
            let (got, content) = plan(&text);
            assert_eq!(
                got,
                vec![ok("get_weather", json!({"city": "SF"}))],
                "{family}: {text:?}"
            );
            assert_eq!(content.as_deref(), Some(quote.trim()), "{family}: {text:?}");
        }
        // Shown at the very start of the text too.
        let quote = format!("```xml\n{literal}\n```\n");
        check(&quote, vec![], Some(quote.as_str()));
        check(
            &format!("{quote}{call}"),
            vec![ok("get_weather", json!({"city": "SF"}))],
            Some(quote.trim()),
        );
    }
}

#[test]
fn a_call_at_the_start_or_after_prose_outside_code_is_read_as_before() {
    let (_, dsml) = &weather_calls("SF")[0];
    // At the start, after prose, after a closed code span or fence.
    for (text, content) in [
        (dsml.clone(), None),
        (format!("Let me look.\n\n{dsml}"), Some("Let me look.")),
        (
            format!("The tool is `get_weather`. {dsml}"),
            Some("The tool is `get_weather`."),
        ),
        (
            format!("Code:\n```\nx = 1\n```\n{dsml}"),
            Some("Code:\n```\nx = 1\n```"),
        ),
    ] {
        check(
            &text,
            vec![ok("get_weather", json!({"city": "SF"}))],
            content,
        );
    }
    // Backticks never closed are text: the marker after them is a call.
    check(
        "Don't use ` here. <tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}</tool_call>",
        vec![ok("get_time", json!({"zone": "CET"}))],
        Some("Don't use ` here."),
    );
    // A fenced JSON call keeps rule 2; a tool-code fence (Gemma 3) is a marker.
    check(
        "Sure.\n```json\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n```",
        vec![ok("get_time", json!({"zone": "CET"}))],
        Some("Sure."),
    );
    check(
        "```tool_code\nget_time(zone=\"CET\")\n```",
        vec![ok("get_time", json!({"zone": "CET"}))],
        None,
    );
}

// ---- linear time ----

#[test]
fn the_2026_readers_stay_linear() {
    let units = [
        "<|tools_prefix|>[{\"get_weather\": {\"city\": ",
        "<longcat_tool_call>{\"name\": \"get_weather\", \"arguments\": {",
        "<tool_calls><tool_call>get_weather<tool_sep><arg_key>city</arg_key><arg_value>",
        "<tool_call:ab12>get_weather<tool_sep:ab12><arg_key:ab12>city</arg_key:ab12><arg_value:ab12>",
        "<function name=\"get_weather\"><param name=\"city\"><![CDATA[",
        "<function\u{120}name=\"get_weather\"><paramname=\"city\">x<param><parameter>",
        "<｜DSML｜toolcalls>\n<｜DSML｜tool_calls",
        "<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": ",
        "<dots_function_call><invoke name=\"get_weather\"><parameter name=\"city\">",
        "functools[{\"name\": \"get_time\", ",
        "<TOOLCALL>[{\"name\": ",
        "prose <invoke name=\"get_weather\"><parameter name=\"city\">",
        // Markdown code around markers: fences, tilde fences, code spans, runs never
        // closed (each looks for its closing run at most `MAX_SPAN` bytes on).
        "```xml\n<tool_call>\n```\n",
        "~~~\n[TOOL_CALLS]\n",
        "`<tool_call>` ",
        "a ` b `` c ``` ",
        "`<｜DSML｜invoke ",
        // Thinking tags quoted in code, in prose, bare, unclosed, in a call's argument.
        "`<think>` and `</think>` ",
        "<think>a</think>`</think>` ",
        "```\n<think>\n```\n",
        "` <think>x ",
        "</think>x",
        "<｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"a\" string=\"true\">x</think>",
        // Qwen3-Coder's drifted closers.
        "<function=get_weather><parameter=city>x</parameter1>\n",
        "<function=get_weather><parameter=city>x</parameter\n",
        // Gemma 4 strings whose opening delimiter was left out.
        "<|tool_call>call:get_weather{city:Paris, France<|\"|>,days:2}<tool_call|>",
        "<|tool_call>call:get_weather{city:[a,b<|\"|>, c d,",
        "<|tool_call>call:get_weather{city:a, b, c",
        // Kimi K3's reply channel tokens.
        "<|open|>response<|sep|>x<|close|>response<|sep|>",
        "x<|close|>message<|sep|>",
        // GigaChat 3.5, K2 Horizon (type tags never closed), Seed-OSS, InternLM, Cohere.
        "<｜GCML｜tool_calls><｜GCML｜invoke name=\"get_weather\"><｜GCML｜parameter name=\"city\" string=\"true\">",
        "<ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key><ifm|arg_type>",
        "<ifm|tool_call>get_weather<ifm|arg_type>x</ifm|arg_type><ifm|arg_value>",
        "<ifm|arg_type>x<ifm|arg_key>",
        "<seed:think>x<seed:tool_call>\n<function=get_weather>\n<parameter=city>",
        "<|action_start|><|plugin|>{\"name\": \"get_weather\", ",
        "<|tool_call:start|>get_weather\n<|tool_arg:start|>city<|tool_arg:value|>",
        "<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>get_weather",
        "<minimax:tool_call><invoke name=\"get_weather\">]<]minimax[>[<a><b><c>",
        "<|START_THINKING|>x<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": ",
    ];
    let tools = tools();
    // Hunyuan calls each of another suffix, unclosed, read as one text.
    let suffixed = |n: usize| -> String {
        (0..n)
            .map(|i| {
                format!(
                    "<tool_call:s{i}>get_weather<arg_key:s{i}>city</arg_key:s{i}><arg_value:s{i}>x"
                )
            })
            .collect()
    };
    let (small, large) = (suffixed(200), suffixed(2000));
    // K2 Horizon type tags never closed, all in one call.
    let untyped = |n: usize| format!("<ifm|tool_call>get_weather{}", "<ifm|arg_type>x<".repeat(n));
    let (s, l) = (untyped(200), untyped(2000));
    crate::work::assert_linear("ifm types", s.as_str(), l.as_str(), |text| {
        let _ = toolmend::repair(text, &RepairOptions::default());
    });
    crate::work::assert_linear("suffixes", small.as_str(), large.as_str(), |text| {
        let _ = toolmend::repair(text, &RepairOptions::default());
    });
    for unit in units {
        let (small, large) = (unit.repeat(200), unit.repeat(2000));
        crate::work::assert_linear(unit, small.as_str(), large.as_str(), |text| {
            let _ = toolmend::repair(text, &RepairOptions::default());
            let _ = message::read_calls_in_str(text, &tools, &RepairOptions::default());
            let _ = message::prose_before_calls(text);
            let _ = message::strip_thinking(text);
            let _ = message::strip_thinking_before_calls(text);
        });
    }
}

/// A parameter given twice (MiniCPM 5, DSML, Qwen3-Coder, GLM's `<arg_key>`): the last
/// value wins, as with a JSON key given twice (`repair::duplicate_keys_…`); with two different values a reading was
/// chosen, so the fix is `duplicate_key_conflict` (unsafe), never the safe `duplicate_key`.
#[test]
fn a_parameter_given_twice_with_different_values_is_not_a_safe_fix() {
    use toolmend::{FixKind, Safety};
    let dsml = "<｜DSML｜function_calls><｜DSML｜invoke name=\"get_weather\">\
                <｜DSML｜parameter name=\"city\" string=\"true\">{a}</｜DSML｜parameter>\
                <｜DSML｜parameter name=\"city\" string=\"true\">{b}</｜DSML｜parameter>\
                </｜DSML｜invoke></｜DSML｜function_calls>";
    let forms = [
        "<function name=\"get_weather\"><param name=\"city\">{a}</param><param name=\"city\">{b}</param></function>",
        dsml,
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n{a}\n</parameter>\n<parameter=city>\n{b}\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>{a}</arg_value>\n<arg_key>city</arg_key>\n<arg_value>{b}</arg_value>\n</tool_call>",
    ];
    for form in forms {
        for (a, b, kind) in [
            ("Paris", "Lyon", FixKind::DuplicateKeyConflict),
            ("Paris", "Paris", FixKind::DuplicateKey),
        ] {
            let text = form.replace("{a}", a).replace("{b}", b);
            let r = toolmend::repair(&text, &RepairOptions::default()).unwrap();
            assert_eq!(r.calls.len(), 1, "{text}");
            assert_eq!(r.calls[0].arguments, json!({"city": b}), "{text}");
            let kinds: Vec<FixKind> = r.calls[0].fixes.iter().map(|f| f.kind).collect();
            assert!(kinds.contains(&kind), "{text}: {kinds:?}");
            let other = if kind == FixKind::DuplicateKey {
                FixKind::DuplicateKeyConflict
            } else {
                FixKind::DuplicateKey
            };
            assert!(!kinds.contains(&other), "{text}: {kinds:?}");
        }
    }
    assert_eq!(FixKind::DuplicateKeyConflict.safety(), Safety::Unsafe);
}

/// Kimi K2 with a bare counter for its call id (`<|tool_call_begin|>0 …`): the call names
/// no tool. It is given the one tool that can take it (the request's only tool, or the one
/// tool whose schema lists every key given), recorded as `tool_name_inferred`; where two
/// tools could take it, nothing is guessed (the text stays as written).
#[test]
fn a_kimi_call_with_a_bare_counter_takes_the_one_tool_that_fits() {
    let call = |args: &str| {
        format!(
            "Let me check. <|tool_calls_section_begin|><|tool_call_begin|>0 \
             <|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>"
        )
    };
    // Among get_weather, get_time and write_file only get_weather lists `city` and `days`.
    let text = call(r#"{"city": "Tokyo", "days": 2}"#);
    check(
        &text,
        vec![ok("get_weather", json!({"city": "Tokyo", "days": 2}))],
        Some("Let me check."),
    );
    let read = message::read_calls_in_str(&text, &tools(), &RepairOptions::default());
    assert!(
        read[0]
            .fixes
            .iter()
            .any(|f| f.kind == toolmend::FixKind::ToolNameInferred && f.detail == "get_weather"),
        "{read:?}"
    );
    // One tool in the request: that tool.
    let weather = CompiledTool::compile(
        "get_weather",
        "Weather for a city.",
        &json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    )
    .unwrap();
    let one = Toolbox::from_tools([weather]).unwrap();
    let (got, content) = plan_with(&one, &call(r#"{"city": "Oslo"}"#));
    assert_eq!(got, vec![ok("get_weather", json!({"city": "Oslo"}))]);
    assert_eq!(content.as_deref(), Some("Let me check."));
    // Only get_time lists `zone`.
    check(
        &call(r#"{"zone": "UTC"}"#),
        vec![ok("get_time", json!({"zone": "UTC"}))],
        Some("Let me check."),
    );
    // No tool lists every key: no name is guessed, the text stays as written.
    let text = call(r#"{"city": "Tokyo", "zone": "UTC"}"#);
    check(&text, vec![], Some(&text));
}

/// A thinking tag the model wrote as text is kept (SGLang's DeepSeek V4 tests): in a call's
/// argument (a heredoc that writes `</think>`) and quoted in Markdown code. Reasoning
/// before the call still goes.
#[test]
fn a_thinking_tag_in_an_argument_or_in_code_is_kept() {
    let code = "python3 <<'PY'\ntext = \"\"\"Notes.</think>\"\"\"\nprint(text)\nPY";
    let call = format!(
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter \
         name=\"city\" string=\"true\">{code}</｜DSML｜parameter>\n</｜DSML｜invoke>\n\
         </｜DSML｜tool_calls>"
    );
    for (text, content) in [
        (call.clone(), None),
        (format!("<think>plan</think>{call}"), None),
        // A bare closing tag goes alone (what came before it is prose, as streamed).
        (format!("Plan.</think>\n\n{call}"), Some("Plan.")),
    ] {
        check(
            &text,
            vec![ok("get_weather", json!({"city": code}))],
            content,
        );
    }
    let json_call = r#"<tool_call>{"name": "get_weather", "arguments": {"city": "<think>x</think>"}}</tool_call>"#;
    check(
        &format!("Checking.<think>hmm</think> {json_call}"),
        vec![ok("get_weather", json!({"city": "<think>x</think>"}))],
        Some("Checking."),
    );
    // A pythonic call to a known tool begins the calls too (where the gate holds it).
    for text in [
        r#"get_weather(city="Paris</think>")"#,
        r#"<think>plan</think>get_weather(city="Paris</think>")"#,
        r#"[get_weather(city="Paris</think>")]"#,
    ] {
        let (got, _) = plan(text);
        assert_eq!(
            got,
            vec![ok("get_weather", json!({"city": "Paris</think>"}))],
            "{text}"
        );
    }
    let quoted = "Literal `<think>` and `</think>` in an explanation.";
    check(quoted, vec![], Some(quoted));
    check(
        "<think>x</think>Use `<think>` tags.",
        vec![],
        Some("Use `<think>` tags."),
    );
}

/// Kimi K3's reply channel tokens (vLLM's and SGLang's kimi_k3 tests) are the template's:
/// `<|open|>response<|sep|>` before the prose and `<|close|>response<|sep|>` /
/// `<|close|>message<|sep|>` after it never reach the content, with or without calls.
#[test]
fn kimi_k3_reply_tokens_stay_out_of_the_content() {
    let call = "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>\
                <|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>\
                <|close|>call<|sep|><|close|>tools<|sep|>";
    check(
        &format!("<|open|>response<|sep|>Hello!<|close|>response<|sep|>{call}"),
        vec![ok("get_weather", json!({"city": "Paris"}))],
        Some("Hello!"),
    );
    check("Hello<|close|>message<|sep|>", vec![], Some("Hello"));
    check(
        "<|open|>response<|sep|>hi there<|close|>response<|sep|><|close|>message<|sep|>",
        vec![],
        Some("hi there"),
    );
    check(
        "<think>plan</think>\n<|open|>response<|sep|>\nhi<|close|>message<|sep|>",
        vec![],
        Some("hi"),
    );
    // Elsewhere in prose the token is text.
    let quoted = "K3 writes <|open|>response<|sep|> first.";
    check(quoted, vec![], Some(quoted));
}

/// Qwen3-Coder's drifted closers (SGLang's `test_qwen3_coder_detector.py`): a value whose
/// `</parameter>` never came but that ends in `</parameter1>`, `</parameter_function>` or a
/// bare `</parameter` ends there, recorded as `drifted_close_tag` (unsafe); one in the
/// middle of a value is the value's text.
#[test]
fn a_drifted_qwen3_coder_closer_ends_its_value() {
    for closer in ["</parameter1>", "</parameter_function>", "</parameter"] {
        let text = format!(
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nShanghai\n{closer}\n\
             <parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
        );
        check(
            &text,
            vec![ok("get_weather", json!({"city": "Shanghai", "days": 3}))],
            None,
        );
        let read = message::read_calls_in_str(&text, &tools(), &RepairOptions::default());
        let fix = read[0]
            .fixes
            .iter()
            .find(|f| f.kind == toolmend::FixKind::DriftedCloseTag)
            .unwrap_or_else(|| panic!("{closer}: {read:?}"));
        assert_eq!(fix.detail, closer);
        assert_eq!(fix.safety(), toolmend::Safety::Unsafe);
    }
    // Before `</function>` too.
    check(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter2>\n</function>\n</tool_call>",
        vec![ok("get_weather", json!({"city": "Lima"}))],
        None,
    );
    // Not at the value's end: the value's own text.
    check(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nLima </parameter1> x\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        vec![ok(
            "get_weather",
            json!({"city": "Lima </parameter1> x", "days": 3}),
        )],
        None,
    );
}

/// Gemma 4 with a string's opening `<|"|>` left out (SGLang's
/// `test_gemma4_detector_string_delimiters.py`): where only one reading exists the string
/// runs to its closing delimiter (`unquoted_string`, unsafe); where another member or item
/// may have begun in it, the call does not read (feedback), and no value keeps the
/// delimiter.
#[test]
fn a_gemma4_string_missing_its_opening_delimiter() {
    let call = |args: &str| format!("<|tool_call>call:get_weather{{{args}}}<tool_call|>");
    for (args, want) in [
        (
            r#"city:weather in Tokyo<|"|>"#,
            json!({"city": "weather in Tokyo"}),
        ),
        (
            r#"city:Paris, France<|"|>,days:5"#,
            json!({"city": "Paris, France", "days": 5}),
        ),
        (
            r#"days:2,city:Lima<|"|>"#,
            json!({"city": "Lima", "days": 2}),
        ),
    ] {
        let text = call(args);
        check(&text, vec![ok("get_weather", want)], None);
        let read = message::read_calls_in_str(&text, &tools(), &RepairOptions::default());
        assert!(
            read[0]
                .fixes
                .iter()
                .any(|f| f.kind == toolmend::FixKind::UnquotedString),
            "{read:?}"
        );
    }
    // In a list: an item after a delimited one (the merged-calls rule then makes one call
    // per value, as for any list given for a string field).
    check(
        &call(r#"city:[<|"|>Oslo<|"|>,Rome<|"|>]"#),
        vec![
            ok("get_weather", json!({"city": "Oslo"})),
            ok("get_weather", json!({"city": "Rome"})),
        ],
        None,
    );
    // Where another item or member may have begun before the delimiter: no value.
    for args in [r#"city:[Oslo, Rome<|"|>]"#, r#"city:Note: a<|"|>"#] {
        let (got, _) = plan(&call(args));
        assert!(
            got.iter().all(|(_, a, d)| *d != "executed"
                && !a.as_ref().is_some_and(|a| a.to_string().contains("<|"))),
            "{args}: {got:?}"
        );
    }
}
