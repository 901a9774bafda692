//! Issue 15: every open-model family's tool-call dialect written into the text, read
//! through the one plan (calls and the content left), a block of calls read call by call,
//! XML-style parameters typed by the schema, and the false-positive guard. Streaming (the
//! gate holds every marker, split anywhere) is tested in `stream::tests`.

use proptest::prelude::*;
use serde_json::{Value, json};
use toolmend::{
    CompiledTool, RepairOptions, Toolbox,
    conversation::{AssistantMessage, Content},
    message::{self, CallOutcome, PlanOptions},
    repair,
    schema::{Phase, ValidationContext},
};

fn tools() -> Toolbox {
    let weather = CompiledTool::compile(
        "get_weather",
        "Weather for a city.",
        &json!({"type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "note": {"type": ["string", "null"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "detailed": {"type": "boolean"},
                    "zip": {"type": "string"}},
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
                    "meta": {"type": "object"},
                    "lines": {"type": "array", "items": {"type": "integer"}}},
                "required": ["path", "content"], "additionalProperties": false}),
    )
    .unwrap();
    Toolbox::from_tools([weather, time, write]).unwrap()
}

/// A call as planned: the tool, its arguments, its disposition.
pub(super) type Planned = (String, Option<Value>, &'static str);

fn plan(text: &str) -> (Vec<Planned>, Option<String>) {
    plan_with(&tools(), text)
}

/// The plan of an assistant message with `text` as its content, among `tools`: the
/// calls, and the content the sanitized message carries.
pub(super) fn plan_with(tools: &Toolbox, text: &str) -> (Vec<Planned>, Option<String>) {
    let message = AssistantMessage {
        content: Some(Some(Content::Text(text.to_owned()))),
        ..AssistantMessage::default()
    };
    let ctx = ValidationContext::new("", Phase::Initial);
    let p = message::plan_assistant(
        &message,
        &[],
        &[],
        false,
        tools,
        &PlanOptions::default(),
        &ctx,
    );
    let calls = p
        .calls
        .iter()
        .map(|c| {
            let d = match c.outcome {
                CallOutcome::Executed => "executed",
                CallOutcome::Feedback => "feedback",
                _ => "other",
            };
            (c.call.tool.clone(), c.call.arguments.clone(), d)
        })
        .collect();
    let content = match &p.shape.content {
        Some(c) => c.clone(),
        None => Some(text.to_owned()),
    };
    (calls, content)
}

pub(super) fn ok(tool: &str, args: Value) -> Planned {
    (tool.to_owned(), Some(args), "executed")
}

/// Asserts the calls and the content `text` plans to.
#[track_caller]
fn check(text: &str, calls: Vec<Planned>, content: Option<&str>) {
    let (got, left) = plan(text);
    assert_eq!(got, calls, "calls of {text:?}");
    assert_eq!(left.as_deref(), content, "content of {text:?}");
}

// ---- the families ----

#[test]
fn deepseek_v3_calls_are_read() {
    let text = "Let me check both.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", \"days\": 2}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"zone\": \"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>";
    check(
        text,
        vec![
            ok("get_weather", json!({"city": "Paris", "days": 2})),
            ok("get_time", json!({"zone": "CET"})),
        ],
        Some("Let me check both."),
    );
}

#[test]
fn deepseek_v31_calls_are_read() {
    let text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Lima\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    check(text, vec![ok("get_weather", json!({"city": "Lima"}))], None);
    // Some servers write ASCII bars.
    let ascii = "<|tool▁calls▁begin|><|tool▁call▁begin|>get_time<|tool▁sep|>{\"zone\": \"UTC\"}<|tool▁call▁end|><|tool▁calls▁end|>";
    check(ascii, vec![ok("get_time", json!({"zone": "UTC"}))], None);
}

#[test]
fn kimi_k2_calls_are_read() {
    let text = "I'll look it up.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{\"zone\": \"CET\"}<|tool_call_end|><|tool_calls_section_end|>";
    check(
        text,
        vec![
            ok("get_weather", json!({"city": "Oslo"})),
            ok("get_time", json!({"zone": "CET"})),
        ],
        Some("I'll look it up."),
    );
}

#[test]
fn glm_calls_are_read_and_typed_by_the_schema() {
    let text = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>tags</arg_key>\n<arg_value>[\"a\", \"b\"]</arg_value>\n<arg_key>detailed</arg_key>\n<arg_value>true</arg_value>\n<arg_key>zip</arg_key>\n<arg_value>00184</arg_value>\n</tool_call>";
    check(
        text,
        vec![ok(
            "get_weather",
            json!({"city": "Rome", "days": 3, "tags": ["a", "b"], "detailed": true, "zip": "00184"}),
        )],
        None,
    );
    // GLM-4.6 without line breaks, two calls, prose before.
    let text = "Checking.\n<tool_call>get_time<arg_key>zone</arg_key><arg_value>CET</arg_value></tool_call><tool_call>get_weather<arg_key>city</arg_key><arg_value>Bern</arg_value></tool_call>";
    check(
        text,
        vec![
            ok("get_time", json!({"zone": "CET"})),
            ok("get_weather", json!({"city": "Bern"})),
        ],
        Some("Checking."),
    );
}

#[test]
fn minimax_m2_calls_are_read_and_typed_by_the_schema() {
    let text = "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Kyiv</parameter>\n<parameter name=\"days\">5</parameter>\n<parameter name=\"note\">null</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"zone\">EET</parameter>\n</invoke>\n</minimax:tool_call>";
    check(
        text,
        vec![
            ok(
                "get_weather",
                json!({"city": "Kyiv", "days": 5, "note": null}),
            ),
            ok("get_time", json!({"zone": "EET"})),
        ],
        None,
    );
}

#[test]
fn qwen3_xml_parameters_are_typed_by_the_schema() {
    let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nnull\n</parameter>\n<parameter=note>\nnull\n</parameter>\n<parameter=days>\n4\n</parameter>\n</function>\n</tool_call>";
    // `city` is a string: "null" stays the text; `note` may be null: it is null.
    check(
        text,
        vec![ok(
            "get_weather",
            json!({"city": "null", "note": null, "days": 4}),
        )],
        None,
    );
}

#[test]
fn an_xml_value_written_as_json_is_text_for_a_string_property() {
    // Every key/value-tag dialect: `content` is a string (the JSON text as written, not an
    // object refused by the schema), `meta` an object (the JSON read), `lines` an array.
    let (content, meta, lines) = ("{\"key\": \"value\"}", "{\"mode\": \"0644\"}", "[1, 2]");
    let texts = [
        format!(
            "<tool_calls><tool_call>write_file<tool_sep><arg_key>path</arg_key><arg_value>a.json</arg_value><arg_key>content</arg_key><arg_value>{content}</arg_value><arg_key>meta</arg_key><arg_value>{meta}</arg_value><arg_key>lines</arg_key><arg_value>{lines}</arg_value></tool_call></tool_calls>"
        ),
        format!(
            "<tool_calls:6124c78e><tool_call:6124c78e>write_file<tool_sep:6124c78e><arg_key:6124c78e>path</arg_key:6124c78e><arg_value:6124c78e>a.json</arg_value:6124c78e><arg_key:6124c78e>content</arg_key:6124c78e><arg_value:6124c78e>{content}</arg_value:6124c78e><arg_key:6124c78e>meta</arg_key:6124c78e><arg_value:6124c78e>{meta}</arg_value:6124c78e><arg_key:6124c78e>lines</arg_key:6124c78e><arg_value:6124c78e>{lines}</arg_value:6124c78e></tool_call:6124c78e></tool_calls:6124c78e>"
        ),
        format!(
            "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>a.json</arg_value>\n<arg_key>content</arg_key>\n<arg_value>{content}</arg_value>\n<arg_key>meta</arg_key>\n<arg_value>{meta}</arg_value>\n<arg_key>lines</arg_key>\n<arg_value>{lines}</arg_value>\n</tool_call>"
        ),
        format!(
            "<tool_call>\n<function=write_file>\n<parameter=path>\na.json\n</parameter>\n<parameter=content>\n{content}\n</parameter>\n<parameter=meta>\n{meta}\n</parameter>\n<parameter=lines>\n{lines}\n</parameter>\n</function>\n</tool_call>"
        ),
        format!(
            "<minimax:tool_call>\n<invoke name=\"write_file\">\n<parameter name=\"path\">a.json</parameter>\n<parameter name=\"content\">{content}</parameter>\n<parameter name=\"meta\">{meta}</parameter>\n<parameter name=\"lines\">{lines}</parameter>\n</invoke>\n</minimax:tool_call>"
        ),
        format!(
            "<function name=\"write_file\"><param name=\"path\">a.json</param><param name=\"content\">{content}</param><param name=\"meta\">{meta}</param><param name=\"lines\">{lines}</param></function>"
        ),
        format!(
            "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"write_file\"><steptml:parameter name=\"path\">a.json</steptml:parameter><steptml:parameter name=\"content\">{content}</steptml:parameter><steptml:parameter name=\"meta\">{meta}</steptml:parameter><steptml:parameter name=\"lines\">{lines}</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"
        ),
    ];
    for text in &texts {
        check(
            text,
            vec![ok(
                "write_file",
                json!({"path": "a.json", "content": content, "meta": {"mode": "0644"}, "lines": [1, 2]}),
            )],
            None,
        );
    }
    // A key the schema does not type: JSON is read as such, other text kept.
    let open = CompiledTool::compile("open", "", &json!({"type": "object"})).unwrap();
    let tools = Toolbox::from_tools([open]).unwrap();
    let (calls, _) = plan_with(
        &tools,
        "<tool_call>open\n<arg_key>opts</arg_key>\n<arg_value>{\"a\": [1]}</arg_value>\n<arg_key>name</arg_key>\n<arg_value>{not json</arg_value>\n</tool_call>",
    );
    assert_eq!(
        calls,
        vec![ok("open", json!({"opts": {"a": [1]}, "name": "{not json"}))]
    );
}

#[test]
fn harmony_calls_are_read_and_analysis_is_reasoning() {
    let text = "<|channel|>analysis<|message|>User wants weather. Maybe {\"city\": \"Nice\"}.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";
    check(
        text,
        vec![ok("get_weather", json!({"city": "Paris"}))],
        None,
    );
    // `to=` in the role.
    let text = "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{\"zone\": \"UTC\"}<|call|>";
    check(text, vec![ok("get_time", json!({"zone": "UTC"}))], None);
    // A final answer only: no call, the text as it came.
    let text = "<|channel|>final<|message|>It is sunny.";
    check(text, vec![], Some(text));
}

#[test]
fn lfm2_calls_are_read() {
    let text = "<|tool_call_start|>[get_weather(city=\"Quito\", days=2), get_time(zone=\"ECT\")]<|tool_call_end|>Checking now.";
    check(
        text,
        vec![
            ok("get_weather", json!({"city": "Quito", "days": 2})),
            ok("get_time", json!({"zone": "ECT"})),
        ],
        None,
    );
}

#[test]
fn olmo_calls_are_read() {
    let text = "Sure.\n<function_calls>\nget_weather(city=\"Accra\")\nget_time(zone=\"GMT\")\n</function_calls>";
    check(
        text,
        vec![
            ok("get_weather", json!({"city": "Accra"})),
            ok("get_time", json!({"zone": "GMT"})),
        ],
        Some("Sure."),
    );
}

#[test]
fn gemma_calls_are_read() {
    let text = "<start_function_call>call:get_weather{city:<escape>São Paulo, BR<escape>,days:3,detailed:false,tags:[<escape>x<escape>,<escape>y<escape>]}<end_function_call>";
    check(
        text,
        vec![ok(
            "get_weather",
            json!({"city": "São Paulo, BR", "days": 3, "detailed": false, "tags": ["x", "y"]}),
        )],
        None,
    );
    check(
        "call:get_time{zone:<escape>JST<escape>}",
        vec![ok("get_time", json!({"zone": "JST"}))],
        None,
    );
}

#[test]
fn mistral_variants_are_read() {
    // v11: the name, then the arguments, no `[ARGS]`.
    check(
        "[TOOL_CALLS]get_weather{\"city\": \"Dakar\"}",
        vec![ok("get_weather", json!({"city": "Dakar"}))],
        None,
    );
    check(
        "[TOOL_CALLS]get_weather{\"city\": \"Dakar\"}[TOOL_CALLS]get_time{\"zone\": \"GMT\"}",
        vec![
            ok("get_weather", json!({"city": "Dakar"})),
            ok("get_time", json!({"zone": "GMT"})),
        ],
        None,
    );
    // Objects not in a list.
    check(
        "[TOOL_CALLS]{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Cairo\"}}{\"name\": \"get_time\", \"arguments\": {\"zone\": \"EET\"}}",
        vec![
            ok("get_weather", json!({"city": "Cairo"})),
            ok("get_time", json!({"zone": "EET"})),
        ],
        None,
    );
}

// ---- what the content keeps ----

#[test]
fn no_lone_bracket_or_marker_is_left_in_the_content() {
    check(
        "Sure! [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
        vec![ok("get_weather", json!({"city": "Paris"}))],
        Some("Sure!"),
    );
    check(
        "One moment.\n[\n  {\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n]",
        vec![ok("get_time", json!({"zone": "CET"}))],
        Some("One moment."),
    );
    check(
        "Checking.<|function_call|>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}",
        vec![ok("get_time", json!({"zone": "CET"}))],
        Some("Checking."),
    );
}

// ---- partial extraction ----

#[test]
fn in_a_block_each_call_stands_alone() {
    // The second call is cut off: it gets feedback; the first runs.
    let text = "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}</tool_call>\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    let (calls, content) = plan(text);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], ok("get_time", json!({"zone": "CET"})));
    assert_eq!(calls[1].0, "get_weather");
    assert_eq!(calls[1].2, "feedback");
    assert_eq!(content, None);
    // Arguments that are no object: feedback for that call alone.
    let text = "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}</tool_call><tool_call>{\"name\": \"get_weather\", \"arguments\": @@@}</tool_call>";
    let (calls, _) = plan(text);
    assert_eq!(calls[0], ok("get_time", json!({"zone": "CET"})));
    assert_eq!(
        (calls[1].0.as_str(), calls[1].2),
        ("get_weather", "feedback")
    );
    // A call missing its required value gets feedback; the other runs.
    let text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"days\": 2}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"zone\": \"CET\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    let (calls, _) = plan(text);
    assert_eq!(calls[0].2, "feedback");
    assert_eq!(calls[1], ok("get_time", json!({"zone": "CET"})));
}

#[test]
fn a_known_call_beside_an_unknown_one_goes_through() {
    let text = "<tool_call>{\"name\": \"book_flight\", \"arguments\": {\"to\": \"Paris\"}}</tool_call><tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
    let (calls, content) = plan(text);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].0, "book_flight");
    assert_eq!(calls[0].2, "feedback", "no such tool: feedback");
    assert_eq!(calls[1], ok("get_weather", json!({"city": "Paris"})));
    assert_eq!(content, None);
    // A lone call to an unknown tool stays text.
    let lone =
        "<tool_call>{\"name\": \"book_flight\", \"arguments\": {\"to\": \"Paris\"}}</tool_call>";
    check(lone, vec![], Some(lone));
}

// ---- the false-positive guard ----

#[test]
fn prose_that_shows_a_call_is_no_call() {
    let answers = [
        "You can ask for the weather with a call like this:\n```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```\nThe tool then answers with the forecast.",
        "The JSON `{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}` is what my last reply sent.",
        "get_weather(city=\"Paris\") is the call I would make, but I need your city first.",
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}} is an example of a tool call; yours looks the same.",
        "I used get_weather for Paris earlier: it said 21 degrees.",
        "Here are the fields: {\"city\": \"Paris\", \"days\": 2}.",
    ];
    for a in answers {
        check(a, vec![], Some(a));
    }
    // A call that ends the message is one, even after a lead-in.
    check(
        "Sure.\n```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```",
        vec![ok("get_weather", json!({"city": "Paris"}))],
        Some("Sure."),
    );
}

// ---- no panic, linear time ----

const FAMILY_SNIPPETS: &[&str] = &[
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "function<｜tool▁sep｜>get_weather\n```json\n",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>functions.get_time:0",
    "<|tool_call_argument_begin|>",
    "<tool_call>get_weather\n",
    "<arg_key>city</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<minimax:tool_call>",
    "<invoke name=\"get_weather\">",
    "<parameter name=\"city\">",
    "</parameter>",
    "</invoke>",
    "<|channel|>analysis<|message|>",
    "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
    "<|start|>assistant",
    " to=functions.x",
    "<|end|>",
    "<|call|>",
    "<|tool_call_start|>[",
    "<function_calls>",
    "get_weather(city=",
    "<start_function_call>call:get_weather{",
    "<｜tool_calls_begin｜>",
    "<｜tool_call_begin｜>function<｜tool_sep｜>",
    "<steptml:invoke name=\"get_weather\">",
    "<steptml:parameter name=\"city\">",
    "</steptml:parameter>",
    "```tool_code\n",
    "get_time(zone=\"CET\")",
    "<escape>",
    "city:",
    "[TOOL_CALLS]get_time",
    "[CALL_ID]a1B2c3D4e[ARGS]",
    "<|tool_call>call:get_weather{city:<|\"|>",
    "<|\"|>",
    "<tool_call|>",
    "<|channel>thought\n",
    "<channel|>",
    "<｜DSML｜function_calls>",
    "<｜DSML｜tool_calls>",
    "<｜DSML｜invoke name=\"get_weather\">",
    "<｜DSML｜parameter name=\"city\" string=\"true\">",
    "<｜DSML｜parameter name=\"days\" string=\"false\">",
    "</｜DSML｜parameter>",
    "</｜DSML｜invoke>",
    "<|open|>tools<|sep|>",
    "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>",
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>",
    "<|close|>argument<|sep|>",
    "<|close|>call<|sep|>",
    "{\"zone\": \"CET\"}",
    // Issue 29.
    "<|tools_prefix|>[{\"get_time\": ",
    "<|tools_suffix|>",
    "<longcat_tool_call>",
    "</longcat_tool_call>",
    "<tool_calls>",
    "<tool_sep>",
    "<tool_calls:ab12>",
    "<tool_call:ab12>get_weather",
    "<arg_key:ab12>city</arg_key:ab12>",
    "<arg_value:ab12>",
    "</tool_call:ab12>",
    "<function name=\"get_weather\">",
    "<param name=\"city\">",
    "<![CDATA[",
    "]]>",
    "</param>",
    "<|message_sep|>\n\nfunction call<|role_sep|>\n",
    "function call<|role_sep|>",
    "functools[",
    "<dots_function_call>",
    "<TOOLCALL>[",
    "</TOOLCALL>",
    "}",
    "]",
    ",",
    "\n",
    "Paris",
];

fn snippets(idx: &[usize]) -> String {
    idx.iter()
        .map(|&i| FAMILY_SNIPPETS[i % FAMILY_SNIPPETS.len()])
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn family_readers_never_panic(idx in prop::collection::vec(0usize..96, 0..40)) {
        let text = snippets(&idx);
        let _ = repair(&text, &RepairOptions::default());
        let _ = plan(&text);
        let _ = message::prose_before_calls(&text);
    }
}

#[test]
fn family_readers_stay_linear() {
    // Each family's opener repeated, unclosed: 10x the text may take ~10x, not ~100x.
    let units = [
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
        "<|tool_call_begin|>functions.f:0",
        "<tool_call>get_weather\n<arg_key>city</arg_key><arg_value>",
        "<invoke name=\"get_weather\"><parameter name=\"city\">",
        "<|channel|>analysis<|message|>",
        "<start_function_call>call:get_weather{city:<escape>",
        "[TOOL_CALLS]get_weather",
        "[TOOL_CALLS]get_weather[CALL_ID]",
        "<|tool_call>call:get_weather{city:<|\"|>",
        "<|channel>thought",
        "<｜DSML｜function_calls><｜DSML｜invoke name=\"get_weather\"><｜DSML｜parameter name=\"city\" string=\"true\">",
        "<｜DSML｜parameter name=\"days\" string=\"false\">[",
        "<|open|>tools<|sep|><|open|>call tool=\"get_weather\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>",
        "<function_calls>get_weather(city=",
        "<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\">",
        "```tool_code\nget_weather(city=",
        "draft {\"city\": 1} then ```json\n{\"city\": \"x\"}\n``` ",
        // Issue 29.
        "<|tools_prefix|>[{\"get_weather\": {\"city\": ",
        "<tool_calls><tool_call>get_weather<tool_sep><arg_key>city</arg_key><arg_value>",
        "<tool_call:ab12>get_weather<arg_key:ab12>city</arg_key:ab12><arg_value:ab12>",
        "<function name=\"get_weather\"><param name=\"city\"><![CDATA[",
        "<|message_sep|>\n\nfunction call<|role_sep|>\n{\"name\": ",
        "functools[{\"name\": \"get_time\", ",
        "text <invoke name=\"get_weather\"><parameter name=\"city\">",
        "<call>get_weather{city:<|\"|>",
        "prose\ncall:get_weather{city:<|\"|>x",
        "prose\ncall:get_weather{days:{",
        "<｜DSML｜ SugarPanel>\n",
        "'<｜DSML｜toolcalls>'\n",
    ];
    let tools = tools();
    for unit in units {
        let (small, large) = (unit.repeat(200), unit.repeat(2000));
        crate::work::assert_linear(unit, small.as_str(), large.as_str(), |text| {
            let _ = repair(text, &RepairOptions::default());
            let _ = message::read_calls_in_str(text, &tools, &RepairOptions::default());
            let _ = message::prose_before_calls(text);
        });
    }
}

#[test]
fn step3_calls_are_read_and_typed_by_the_schema() {
    let text = "Let me look.<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"city\">Hanoi</steptml:parameter><steptml:parameter name=\"days\">3</steptml:parameter><steptml:parameter name=\"note\">null</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_time\"><steptml:parameter name=\"zone\">ICT</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>";
    check(
        text,
        vec![
            ok(
                "get_weather",
                json!({"city": "Hanoi", "days": 3, "note": null}),
            ),
            ok("get_time", json!({"zone": "ICT"})),
        ],
        Some("Let me look."),
    );
    // A broken call of the block gets feedback alone.
    let text = "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_weather\"><steptml:parameter name=\"days\">2</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"get_time\"><steptml:parameter name=\"zone\">UTC</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>";
    let (calls, _) = plan(text);
    let got: Vec<_> = calls.iter().map(|(t, _, d)| (t.as_str(), *d)).collect();
    assert_eq!(got, [("get_weather", "feedback"), ("get_time", "executed")]);
}

#[test]
fn gemma3_tool_code_fences_are_calls_and_other_fences_are_code() {
    check(
        "```tool_code\nget_weather(city=\"Lagos\", days=2)\n```",
        vec![ok("get_weather", json!({"city": "Lagos", "days": 2}))],
        None,
    );
    // After prose too: the fence's language marks the call.
    check(
        "I'll check the time there.\n```tool_code\nget_time(zone=\"WAT\")\n```",
        vec![ok("get_time", json!({"zone": "WAT"}))],
        Some("I'll check the time there."),
    );
    // A python fence in an answer is code, not a call.
    let text = "You can call it like this:\n```python\nget_time(zone=\"WAT\")\n```";
    check(text, vec![], Some(text));
}

#[test]
fn minicpm_calls_are_read() {
    // MiniCPM4: a python fence inside the call tokens.
    check(
        "<|tool_call_start|>\n```python\nget_weather(city=\"Chengdu\", units=\"celsius\")\n```\n<|tool_call_end|>",
        vec![ok(
            "get_weather",
            json!({"city": "Chengdu", "units": "celsius"}),
        )],
        None,
    );
}

// ---- issue 29: Gemma 4, DSML, Kimi K3, and every generation's cases ----

/// Source code with quotes, braces, commas and line breaks: a long argument.
const CODE: &str = "fn main() {\n    let s = \"a, b}\";\n    println!(\"{s} {{}}\");\n}\n";

#[test]
fn gemma4_calls_are_read() {
    // One call.
    check(
        "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>",
        vec![ok("get_weather", json!({"city": "Paris", "days": 3}))],
        None,
    );
    // Several in a row, prose before and after.
    check(
        "Let me check both.<|tool_call>call:get_weather{city:<|\"|>Lyon, FR<|\"|>}<tool_call|><|tool_call>call:get_time{zone:<|\"|>CET<|\"|>}<tool_call|>I will report back.",
        vec![
            ok("get_weather", json!({"city": "Lyon, FR"})),
            ok("get_time", json!({"zone": "CET"})),
        ],
        Some("Let me check both."),
    );
    // After its reasoning channel (which holds a call-like draft).
    check(
        "<|channel>thought\nThe user wants Oslo: call:get_weather{city:<|\"|>Oslo<|\"|>}?<channel|><|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>",
        vec![ok("get_weather", json!({"city": "Oslo"}))],
        None,
    );
    // Typed values: numbers, booleans, null, a list, a string that looks like a number,
    // a key quoted as a string is.
    check(
        "<|tool_call>call:get_weather{<|\"|>city<|\"|>:<|\"|>Rome<|\"|>,days:4,detailed:true,note:null,zip:<|\"|>00184<|\"|>,tags:[<|\"|>a<|\"|>,<|\"|>b<|\"|>]}<tool_call|>",
        vec![ok(
            "get_weather",
            json!({"city": "Rome", "days": 4, "detailed": true, "note": null, "zip": "00184", "tags": ["a", "b"]}),
        )],
        None,
    );
    // Nested objects and lists; a long multi-line string with quotes and braces.
    let text = format!(
        "<|tool_call>call:write_file{{path:<|\"|>src/main.rs<|\"|>,content:<|\"|>{CODE}<|\"|>,meta:{{mode:<|\"|>0644<|\"|>,opts:{{force:false,depth:2.5}}}},lines:[1,2,3]}}<tool_call|>"
    );
    check(
        &text,
        vec![ok(
            "write_file",
            json!({"path": "src/main.rs", "content": CODE, "meta": {"mode": "0644", "opts": {"force": false, "depth": 2.5}}, "lines": [1, 2, 3]}),
        )],
        None,
    );
    // A `]` inside a string, an empty call; a call cut off inside a string stays text.
    check(
        "<|tool_call>call:get_weather{city:<|\"|>Bern<|\"|>,tags:[<|\"|>a]b<|\"|>,<|\"|>c<|\"|>]}<tool_call|>",
        vec![ok(
            "get_weather",
            json!({"city": "Bern", "tags": ["a]b", "c"]}),
        )],
        None,
    );
    let cut = "<|tool_call>call:get_weather{city:<|\"|>Lond";
    check(cut, vec![], Some(cut));
    // Prose about a call, without its token, is prose.
    let prose = "Gemma 4 writes call:get_weather{city:<|\"|>Paris<|\"|>} between its tokens.";
    check(prose, vec![], Some(prose));
}

#[test]
fn a_gemma4_call_without_its_opener_is_read_by_its_string_delimiter() {
    // `<|tool_call>` degraded into `<call>` (with or without `call:`), or missing before a
    // `call:` at a line's start after prose: Gemma's `<|"|>`, a token only its calls emit,
    // tells the call from prose about one.
    let cases = [
        ("<call>get_weather{city:<|\"|>Paris<|\"|>}", None),
        (
            "<call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2}",
            None,
        ),
        (
            "Checking.\n<call>get_weather{city:<|\"|>Paris<|\"|>}",
            Some("Checking."),
        ),
        (
            "some prose\ncall:get_weather{city:<|\"|>Paris<|\"|>}",
            Some("some prose"),
        ),
        (
            "Let me look.\n\n  call:get_weather{days:2,city:<|\"|>Paris<|\"|>}",
            Some("Let me look."),
        ),
    ];
    for (text, content) in cases {
        let args = if text.contains("days") {
            json!({"city": "Paris", "days": 2})
        } else {
            json!({"city": "Paris"})
        };
        check(text, vec![ok("get_weather", args)], content);
        let r = repair(text, &RepairOptions::default()).unwrap();
        let f = r.calls[0]
            .fixes
            .iter()
            .find(|f| f.kind == toolmend::FixKind::MissingCallOpener)
            .unwrap_or_else(|| panic!("{text}: {:?}", r.calls[0].fixes));
        assert_eq!(f.safety(), toolmend::Safety::Unsafe);
    }
    // Before a call with its opener: both are read (the prose before them kept).
    check(
        "prose\ncall:get_weather{city:<|\"|>Paris<|\"|>}\n<|tool_call>call:get_time{zone:<|\"|>CET<|\"|>}<tool_call|>",
        vec![
            ok("get_weather", json!({"city": "Paris"})),
            ok("get_time", json!({"zone": "CET"})),
        ],
        Some("prose"),
    );
    // Without the delimiter, mid-line, braces never closed, or an unknown tool: prose.
    for text in [
        "<call>get_weather{days:3}",
        "some prose\ncall:get_weather{city:Paris}",
        "Gemma writes call:get_weather{city:<|\"|>Paris<|\"|>}",
        "some prose\ncall:get_weather{city:<|\"|>Paris<|\"|>",
        "some prose\ncall:get_weather{city:<|\"|>Paris",
        "some prose\ncall:no_such_tool{q:<|\"|>x<|\"|>}",
        "<call>no_such_tool{q:<|\"|>x<|\"|>}",
        "The <call> tag: <call>get_weather{city:<|\"|>Paris<|\"|>} and more prose.",
    ] {
        check(text, vec![], Some(text));
    }
}

#[test]
fn dsml_calls_are_read_each_value_by_its_string_flag() {
    // V3.2: prose before, a string and a JSON value.
    check(
        "Let me look.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        vec![ok("get_weather", json!({"city": "Paris", "days": 3}))],
        Some("Let me look."),
    );
    // V4: `tool_calls`, two calls, the end-of-sentence token after.
    check(
        "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Kyiv</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n<｜DSML｜parameter name=\"zone\" string=\"true\">EET</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>",
        vec![
            ok("get_weather", json!({"city": "Kyiv"})),
            ok("get_time", json!({"zone": "EET"})),
        ],
        None,
    );
    // Typed: booleans, null, lists as JSON; a number-like string stays a string.
    check(
        "<｜DSML｜tool_calls><｜DSML｜invoke name=\"get_weather\"><｜DSML｜parameter name=\"city\" string=\"true\">Rome</｜DSML｜parameter><｜DSML｜parameter name=\"zip\" string=\"true\">00184</｜DSML｜parameter><｜DSML｜parameter name=\"detailed\" string=\"false\">true</｜DSML｜parameter><｜DSML｜parameter name=\"note\" string=\"false\">null</｜DSML｜parameter><｜DSML｜parameter name=\"tags\" string=\"false\">[\"x\", \"y\"]</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜tool_calls>",
        vec![ok(
            "get_weather",
            json!({"city": "Rome", "zip": "00184", "detailed": true, "note": null, "tags": ["x", "y"]}),
        )],
        None,
    );
    // Reasoning before; nested JSON; a long multi-line string verbatim (with `<`, quotes
    // and braces).
    let code = format!("{CODE}// a < b && \"c\" > d\n");
    let text = format!(
        "<think>The user wants a file written. Maybe {{\"path\": \"x\"}}.</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"write_file\">\n<｜DSML｜parameter name=\"path\" string=\"true\">src/main.rs</｜DSML｜parameter>\n<｜DSML｜parameter name=\"content\" string=\"true\">{code}</｜DSML｜parameter>\n<｜DSML｜parameter name=\"meta\" string=\"false\">{{\"mode\": \"0644\", \"opts\": {{\"force\": false, \"tags\": [1, [2]]}}}}</｜DSML｜parameter>\n<｜DSML｜parameter name=\"lines\" string=\"false\">[1, 2]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
    );
    check(
        &text,
        vec![ok(
            "write_file",
            json!({"path": "src/main.rs", "content": code, "meta": {"mode": "0644", "opts": {"force": false, "tags": [1, [2]]}}, "lines": [1, 2]}),
        )],
        None,
    );
    // A text value is typed by the schema afterwards, as the servers type it (a string
    // property keeps it); a lone `arguments` wrapper is unwrapped.
    check(
        "<｜DSML｜function_calls><｜DSML｜invoke name=\"get_weather\"><｜DSML｜parameter name=\"city\" string=\"true\">12</｜DSML｜parameter><｜DSML｜parameter name=\"days\" string=\"true\">42</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>",
        vec![ok("get_weather", json!({"city": "12", "days": 42}))],
        None,
    );
    check(
        "<｜DSML｜function_calls><｜DSML｜invoke name=\"get_time\"><｜DSML｜parameter name=\"arguments\" string=\"false\">{\"zone\": \"CST\"}</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>",
        vec![ok("get_time", json!({"zone": "CST"}))],
        None,
    );
    // Prose that only names the format is prose.
    let prose = "DeepSeek V3.2 wraps its calls in a function_calls block of DSML.";
    check(prose, vec![], Some(prose));
}

#[test]
fn a_dsml_invoke_whose_body_is_a_json_object_takes_it_for_its_arguments() {
    // No parameter tags, one JSON object between the invoke's tags: the arguments.
    for block in ["tool_calls", "function_calls"] {
        check(
            &format!(
                "Looking it up.\n<｜DSML｜{block}>\n<｜DSML｜invoke name=\"get_weather\">\n{{\"city\": \"Oslo\", \"days\": 2}}\n</｜DSML｜invoke>\n</｜DSML｜{block}>"
            ),
            vec![ok("get_weather", json!({"city": "Oslo", "days": 2}))],
            Some("Looking it up."),
        );
    }
    // Repaired as any JSON arguments (a trailing comma, single quotes).
    check(
        "<｜DSML｜tool_calls><｜DSML｜invoke name=\"get_time\">{'zone': 'CET',}</｜DSML｜invoke></｜DSML｜tool_calls>",
        vec![ok("get_time", json!({"zone": "CET"}))],
        None,
    );
    // Not one object alone: nothing is taken from the body (the call gets feedback).
    let (calls, _) = plan(
        "<｜DSML｜tool_calls><｜DSML｜invoke name=\"get_time\">{\"zone\": \"CET\"} or UTC</｜DSML｜invoke></｜DSML｜tool_calls>",
    );
    assert_eq!(
        calls,
        vec![("get_time".to_owned(), Some(json!({})), "feedback")]
    );
    // Parameter tags beside an object: the tags are the arguments.
    check(
        "<｜DSML｜tool_calls><｜DSML｜invoke name=\"get_time\">{\"zone\": \"UTC\"}<｜DSML｜parameter name=\"zone\" string=\"true\">CET</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜tool_calls>",
        vec![ok("get_time", json!({"zone": "CET"}))],
        None,
    );
}

#[test]
fn a_damaged_dsml_wrapper_before_the_real_block_is_no_content() {
    // DeepSeek V4 sometimes writes a broken wrapper before its real one (SGLang's
    // detector tests these): the call is read, and the content ends where the first DSML
    // token begins, as for any marker.
    let call = "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">SF</｜DSML｜parameter>\n</｜DSML｜invoke>";
    let damaged = [
        "<｜DSML｜toolcalls>\n\n",
        "<｜DSML｜tool_calls\n",
        "<｜DSML｜tool_calls<tool_calls>\n\n",
        "<｜DSML｜tool_calls...\n\n",
        "<｜DSML｜tool_calls-ok Let's scan the outputs.\n",
    ];
    for junk in damaged {
        for prose in ["", "Checking files.\n\n"] {
            let wrapped =
                format!("{prose}{junk}<｜DSML｜tool_calls>\n{call}\n</｜DSML｜tool_calls>");
            let bare = format!("{prose}{junk}{call}");
            for text in [wrapped, bare] {
                check(
                    &text,
                    vec![ok("get_weather", json!({"city": "SF"}))],
                    (!prose.is_empty()).then_some("Checking files."),
                );
            }
        }
        // A damaged token and no call: the text as it was written.
        let alone = format!("Checking files.\n\n{junk}done");
        check(&alone, vec![], Some(alone.as_str()));
    }
    // Any other damaged DSML token right before the block (only whitespace between) is
    // the model's broken opener too.
    for junk in [
        "<｜DSML｜ SugarPanel>\n",
        "<｜DSML｜>\n\n",
        "<｜DSML｜toolcalls> <｜DSML｜ x>\n",
    ] {
        for prose in ["", "Checking files.\n\n"] {
            for text in [
                format!("{prose}{junk}<｜DSML｜tool_calls>\n{call}\n</｜DSML｜tool_calls>"),
                format!("{prose}{junk}{call}"),
            ] {
                check(
                    &text,
                    vec![ok("get_weather", json!({"city": "SF"}))],
                    (!prose.is_empty()).then_some("Checking files."),
                );
            }
        }
    }
    // The token's removal is recorded on the message.
    let message = AssistantMessage {
        content: Some(Some(Content::Text(format!(
            "Checking files.\n\n<｜DSML｜ SugarPanel>\n{call}"
        )))),
        ..AssistantMessage::default()
    };
    let ctx = ValidationContext::new("", Phase::Initial);
    let p = message::plan_assistant(
        &message,
        &[],
        &[],
        false,
        &tools(),
        &PlanOptions::default(),
        &ctx,
    );
    assert!(
        p.shape
            .message_fixes
            .iter()
            .any(|f| f.kind == toolmend::FixKind::SpecialTokensStripped
                && f.detail.contains("damaged DSML token")),
        "{:?}",
        p.shape.message_fixes
    );
    // A damaged token quoted, or with more prose after it on its line, is prose: the
    // content keeps it whole, and the call after it is read.
    for prose in [
        "Example: '<｜DSML｜toolcalls>'",
        "Example: \"<｜DSML｜tool_calls\"",
        "Example: “<｜DSML｜toolcalls>”",
        "Example: ‘<｜DSML｜function_calls’",
        "The <｜DSML｜toolcalls> tag is a typo.",
        "Example: '<｜DSML｜ SugarPanel>'",
    ] {
        let text = format!("{prose}\n<｜DSML｜tool_calls>\n{call}\n</｜DSML｜tool_calls>");
        check(
            &text,
            vec![ok("get_weather", json!({"city": "SF"}))],
            Some(prose),
        );
        let alone = format!("{prose}\n");
        check(&alone, vec![], Some(alone.as_str()));
    }
    // Prose that names the bare token keeps it, and the call in another format is read.
    let prose = "The template writes <｜DSML｜ before each tag. Let me search.";
    check(
        &format!(
            "{prose}\n<tool_call>{{\"name\": \"get_time\", \"arguments\": {{\"zone\": \"CET\"}}}}</tool_call>"
        ),
        vec![ok("get_time", json!({"zone": "CET"}))],
        Some(prose),
    );
}

#[test]
fn kimi_k3_calls_are_read_each_value_by_its_type() {
    // The reply channel's opener is in the prompt; its close ends the prose.
    let text = "Checking both.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Oslo<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"integer\"<|sep|>2<|close|>argument<|sep|><|close|>call<|sep|><|open|>call tool=\"get_time\" index=\"2\"<|sep|><|open|>argument key=\"zone\" type=\"string\"<|sep|>CET<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>";
    check(
        text,
        vec![
            ok("get_weather", json!({"city": "Oslo", "days": 2})),
            ok("get_time", json!({"zone": "CET"})),
        ],
        Some("Checking both."),
    );
    // Typed: a number-like string, a boolean, null, an object; a multi-line string raw.
    let text = format!(
        "<|open|>tools<|sep|><|open|>call tool=\"write_file\" index=\"1\"<|sep|><|open|>argument key=\"path\" type=\"string\"<|sep|>0644<|close|>argument<|sep|><|open|>argument key=\"content\" type=\"string\"<|sep|>{CODE}<|close|>argument<|sep|><|open|>argument key=\"meta\" type=\"object\"<|sep|>{{\"force\": true, \"note\": null}}<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"
    );
    check(
        &text,
        vec![ok(
            "write_file",
            json!({"path": "0644", "content": CODE, "meta": {"force": true, "note": null}}),
        )],
        None,
    );
}

#[test]
fn mistral_generations_are_read() {
    // v13: each call with its id.
    check(
        "Sure.[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"Paris\", \"days\": 2}[TOOL_CALLS]get_time[CALL_ID]Z9y8X7w6v[ARGS]{\"zone\": \"CET\"}",
        vec![
            ok("get_weather", json!({"city": "Paris", "days": 2})),
            ok("get_time", json!({"zone": "CET"})),
        ],
        Some("Sure."),
    );
    // An id another template wrote, without `[ARGS]`.
    check(
        "[TOOL_CALLS]get_time[CALL_ID]call_7-x{\"zone\": \"UTC\"}",
        vec![ok("get_time", json!({"zone": "UTC"}))],
        None,
    );
    // v11: `[ARGS]`, after Magistral's reasoning.
    check(
        "[THINK]The user wants the time. {\"zone\": \"X\"}?[/THINK][TOOL_CALLS]get_time[ARGS]{\"zone\": \"UTC\"}",
        vec![ok("get_time", json!({"zone": "UTC"}))],
        None,
    );
    // Before v11: a list, each call with its id; a space after the token.
    check(
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\", \"detailed\": false, \"note\": null}, \"id\": \"a1B2c3D4e\"}, {\"name\": \"get_time\", \"arguments\": {\"zone\": \"PET\"}, \"id\": \"Z9y8X7w6v\"}]",
        vec![
            ok(
                "get_weather",
                json!({"city": "Lima", "detailed": false, "note": null}),
            ),
            ok("get_time", json!({"zone": "PET"})),
        ],
        None,
    );
    // Nested values and a long multi-line string.
    let args = json!({"path": "a.rs", "content": CODE, "meta": {"opts": {"force": true}, "list": [1, [2, 3]]}, "lines": [1]});
    check(
        &format!("[TOOL_CALLS]write_file[ARGS]{args}"),
        vec![ok("write_file", args.clone())],
        None,
    );
    // A brace in the prose before the call stays in the prose (as a stream releases it);
    // a call cut short before its last `}` is read (nothing is missing but the brace).
    check(
        "hi{hi[TOOL_CALLS]get_time{\"zone\": \"print(\\\"hi!\\\")\\nre.compile(r'{}')\"}",
        vec![ok(
            "get_time",
            json!({"zone": "print(\"hi!\")\nre.compile(r'{}')"}),
        )],
        Some("hi{hi"),
    );
    // A string holding a fence and `[brackets]`, prose before the token.
    let content = "```\nANSWER: [City Name] - [Weather] - {temp}\n```";
    check(
        &format!(
            "Here it is: [TOOL_CALLS] [{{\"name\":\"write_file\", \"arguments\":{{\"path\":\"\",\"content\":{}}}}}]",
            json!(content)
        ),
        vec![ok("write_file", json!({"path": "", "content": content}))],
        Some("Here it is:"),
    );
    // Junk before the list and data after it; a name alone is a call without arguments.
    check(
        "[TOOL_CALLS]  junk [{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}] trail",
        vec![ok("get_time", json!({"zone": "UTC"}))],
        None,
    );
    let (calls, _) = plan("[TOOL_CALLS]get_time");
    assert_eq!(calls, vec![("get_time".to_owned(), None, "feedback")]);
    // Prose about the format stays prose.
    let prose = "Mistral answers with [TOOL_CALLS] followed by the calls when it wants a tool.";
    let (calls, _) = plan(prose);
    assert!(calls.is_empty(), "{calls:?}");
}

#[test]
fn deepseek_v3_and_r1_cases_are_read() {
    // R1: reasoning before; typed and nested values; a long multi-line string.
    let args = json!({"path": "src/main.rs", "content": CODE, "meta": {"mode": "0644", "n": null, "ok": true}, "lines": [3, 4]});
    let text = format!(
        "<think>I should write it. {{\"path\": \"draft\"}}</think>\n\nWriting it now.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>write_file\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        serde_json::to_string_pretty(&args).unwrap()
    );
    check(
        &text,
        vec![ok("write_file", args.clone())],
        Some("Writing it now."),
    );
    // Number-like strings stay strings; numbers and booleans as written.
    check(
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Rome\", \"zip\": \"00184\", \"days\": 7, \"detailed\": true}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        vec![ok(
            "get_weather",
            json!({"city": "Rome", "zip": "00184", "days": 7, "detailed": true}),
        )],
        None,
    );
}

#[test]
fn kimi_k2_cases_are_read() {
    let args = json!({"path": "a.rs", "content": CODE, "meta": {"x": [1, {"y": null}]}});
    let text = format!(
        "<think>Write it.</think>Done soon.<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{{\"zone\": \"JST\"}}<|tool_call_end|><|tool_calls_section_end|>"
    );
    check(
        &text,
        vec![
            ok("write_file", args.clone()),
            ok("get_time", json!({"zone": "JST"})),
        ],
        Some("Done soon."),
    );
}

#[test]
fn llama3_json_calls_are_read() {
    // Bare, `parameters` for `arguments`.
    check(
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}",
        vec![ok("get_weather", json!({"city": "Paris", "days": 2}))],
        None,
    );
    // After `<|python_tag|>`, the end-of-message token after.
    check(
        "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}}<|eom_id|>",
        vec![ok("get_time", json!({"zone": "CET"}))],
        None,
    );
    // Several, separated by `;`, with and without the tag.
    let calls = vec![
        ok("get_weather", json!({"city": "Oslo", "zip": "0150"})),
        ok("get_time", json!({"zone": "CET"})),
    ];
    let both = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"zip\": \"0150\"}}; {\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}}";
    check(both, calls.clone(), None);
    check(&format!("<|python_tag|>{both}"), calls, None);
    // Nested values, a long multi-line string.
    let args = json!({"path": "a.rs", "content": CODE, "meta": {"a": {"b": [true, null]}}});
    check(
        &format!("<|python_tag|>{{\"name\": \"write_file\", \"parameters\": {args}}}"),
        vec![ok("write_file", args.clone())],
        None,
    );
    // An example inside an answer is prose.
    let prose = "A call looks like {\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}}; the server runs it.";
    check(prose, vec![], Some(prose));
}

#[test]
fn qwen3_hermes_calls_are_read() {
    // Reasoning before, two calls, prose between the reasoning and the calls.
    check(
        "<think>\nBoth are needed.\n</think>\n\nOn it.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3, \"zip\": \"75001\", \"detailed\": false, \"note\": null}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>",
        vec![
            ok(
                "get_weather",
                json!({"city": "Paris", "days": 3, "zip": "75001", "detailed": false, "note": null}),
            ),
            ok("get_time", json!({"zone": "CET"})),
        ],
        Some("On it."),
    );
    // A number written as a string for an integer property is read by the schema; a
    // number-like string for a string property stays a string.
    check(
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"2046\", \"days\": \"3\"}}\n</tool_call>",
        vec![ok("get_weather", json!({"city": "2046", "days": 3}))],
        None,
    );
    // Nested values, a long multi-line string.
    let args =
        json!({"path": "a.rs", "content": CODE, "meta": {"a": [1, {"b": "}"}]}, "lines": [1, 2]});
    check(
        &format!("<tool_call>\n{{\"name\": \"write_file\", \"arguments\": {args}}}\n</tool_call>"),
        vec![ok("write_file", args.clone())],
        None,
    );
}
