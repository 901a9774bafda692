//! `calls.strict` and `calls.coercions`: the gateway's switches for its fixes, the names
//! Python's `coerce=` takes, reaching every place the gateway mends: the JSON and the
//! streamed answer, re-asked answers, corrections, `/v1/tools/execute` and the round
//! trip. End to end on 127.0.0.1 against the strict scripted provider.

use std::sync::{Arc, Mutex};

use axum::{Json, Router, routing::post};
use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, Content, ToolCall};
use toolmend_gateway::{Config, Gateway, toolmend_tools::ToolsFile};
use toolmend_scripted::{Script, ScriptedProvider, Step};

use crate::common::{self, Running, calls, start, start_with_env, weather_tools as tools};

const OFF: &str = "[calls]\ncoercions = { string_to_integer = false }\ninvalid = \"pass\"";

fn request(stream: bool) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "Weather in Paris for 3 days?"}],
           "tools": tools(), "stream": stream})
}

/// `"5"` for the integer `days`.
fn quoted_days() -> Step {
    calls(vec![ToolCall::new(
        "c1",
        "get_weather",
        r#"{"city": "Paris", "days": "5"}"#,
    )])
}

async fn post_json(r: &Running, body: &Value) -> (reqwest::header::HeaderMap, Value) {
    let resp = r
        .http
        .post(format!("{}/chat/completions", r.url))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let headers = resp.headers().clone();
    (headers, resp.json().await.unwrap())
}

/// The streamed calls' arguments (joined per call) and the account of the last chunk.
async fn post_stream(r: &Running) -> (Vec<String>, Value) {
    let (_, args, account) = post_stream_body(r, &request(true)).await;
    (args, account)
}

/// The streamed calls' ids and arguments (joined per call) and the account of the last
/// chunk, for `body`.
async fn post_stream_body(r: &Running, body: &Value) -> (Vec<String>, Vec<String>, Value) {
    let text = r
        .http
        .post(format!("{}/chat/completions", r.url))
        .json(body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|b| b.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let mut args: Vec<String> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    for c in &chunks {
        for call in c["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = usize::try_from(call["index"].as_u64().unwrap()).unwrap();
            if args.len() <= i {
                args.resize(i + 1, String::new());
                ids.resize(i + 1, String::new());
            }
            args[i].push_str(call["function"]["arguments"].as_str().unwrap_or_default());
            ids[i].push_str(call["id"].as_str().unwrap_or_default());
        }
    }
    (ids, args, chunks.last().unwrap()["toolmend"].clone())
}

fn header(h: &reqwest::header::HeaderMap, name: &str) -> String {
    h.get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn first_args(body: &Value) -> Value {
    serde_json::from_str(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn the_default_coerces_a_quoted_integer() {
    let r = start(Script::new().then(quoted_days()), "").await;
    let (h, body) = post_json(&r, &request(false)).await;
    assert_eq!(
        header(&h, "x-toolmend-calls"),
        "valid=0 repaired=1 unresolved=0 from_text=0"
    );
    assert!(header(&h, "x-toolmend-fixes").contains("string_to_integer"));
    assert_eq!(first_args(&body), json!({"city": "Paris", "days": 5}));
}

#[tokio::test]
async fn a_switched_off_coercion_leaves_the_call_unresolved_in_json_and_stream() {
    let r = start(Script::new().then(quoted_days()).then(quoted_days()), OFF).await;
    let (h, body) = post_json(&r, &request(false)).await;
    assert_eq!(header(&h, "x-toolmend-unresolved"), "c1");
    assert!(!header(&h, "x-toolmend-fixes").contains("string_to_integer"));
    // Passed as the model sent it (`calls.invalid = "pass"`), flagged.
    assert_eq!(first_args(&body), json!({"city": "Paris", "days": "5"}));
    let call = &body["toolmend"]["calls"][0];
    assert_eq!(call["status"], "unresolved", "{call}");
    assert!(
        call["issues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["path"] == "/days"),
        "{call}"
    );

    let (args, account) = post_stream(&r).await;
    assert_eq!(args.len(), 1, "{args:?}");
    let streamed: Value = serde_json::from_str(&args[0]).unwrap();
    assert_eq!(streamed, json!({"city": "Paris", "days": "5"}));
    assert_eq!(account["counts"]["unresolved"], 1, "{account}");
    assert_eq!(account["calls"][0]["status"], "unresolved", "{account}");
}

/// With the default `calls.invalid = "re_ask"`, the call's feedback goes back to the
/// model, and its answer is mended with the same switches: a second `"5"` is not taken.
#[tokio::test]
async fn a_switched_off_coercion_is_re_asked_and_the_re_asked_answer_is_held_to_it() {
    let r = start(
        Script::new()
            .then(quoted_days())
            .then(calls(vec![ToolCall::new(
                "c2",
                "get_weather",
                r#"{"city": "Paris", "days": "5"}"#,
            )]))
            .then(quoted_days())
            .then(calls(vec![ToolCall::new(
                "c4",
                "get_weather",
                r#"{"city": "Paris", "days": 5}"#,
            )])),
        "calls.coercions = { key_renamed = false, string_to_integer = false }",
    )
    .await;
    let (h, _) = post_json(&r, &request(false)).await;
    assert_eq!(r.provider.requests().len(), 2, "one re-ask");
    let re_ask = &r.provider.requests()[1]["messages"];
    let feedback = re_ask.as_array().unwrap().last().unwrap();
    assert_eq!(feedback["role"], "tool");
    assert!(
        feedback["content"].as_str().unwrap().contains("days"),
        "{feedback}"
    );
    // The re-ask's answer sent "5" again: still not coerced, flagged.
    assert_eq!(header(&h, "x-toolmend-unresolved"), "c2");

    // Streamed, the re-ask's valid answer is what the client gets.
    let (args, account) = post_stream(&r).await;
    let streamed: Value = serde_json::from_str(&args[0]).unwrap();
    assert_eq!(streamed, json!({"city": "Paris", "days": 5}));
    assert_eq!(account["counts"]["unresolved"], 0, "{account}");
    assert_eq!(r.provider.requests().len(), 4);
}

/// Three cities for one: a merged call.
fn merged() -> Step {
    calls(vec![ToolCall::new(
        "c1",
        "get_weather",
        r#"{"city": ["Lima", "Quito", "Bogota"], "days": 2}"#,
    )])
}

/// The JSON answer's calls: ids and parsed arguments.
fn tool_calls(body: &Value) -> Vec<(String, Value)> {
    body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap(),
            )
        })
        .collect()
}

/// By default a merged call is one call per value, in the JSON and the streamed answer
/// alike: ids as for glued calls, `merged_call_split` among the fixes.
#[tokio::test]
async fn a_merged_call_is_split_by_default_in_json_and_stream() {
    let r = start(Script::new().then(merged()).then(merged()), "").await;
    let (h, body) = post_json(&r, &request(false)).await;
    assert_eq!(r.provider.requests().len(), 1, "no re-ask");
    assert_eq!(
        header(&h, "x-toolmend-calls"),
        "valid=0 repaired=3 unresolved=0 from_text=0"
    );
    assert!(header(&h, "x-toolmend-fixes").contains("merged_call_split"));
    let want = [
        ("c1".to_owned(), json!({"city": "Lima", "days": 2})),
        ("c1_2".to_owned(), json!({"city": "Quito", "days": 2})),
        ("c1_3".to_owned(), json!({"city": "Bogota", "days": 2})),
    ];
    assert_eq!(tool_calls(&body), want);

    let (ids, args, account) = post_stream_body(&r, &request(true)).await;
    let streamed: Vec<(String, Value)> = ids
        .into_iter()
        .zip(args.iter().map(|a| serde_json::from_str(a).unwrap()))
        .collect();
    assert_eq!(streamed, want);
    assert_eq!(account["counts"]["unresolved"], 0, "{account}");
    assert_eq!(r.provider.requests().len(), 2);
}

/// `split_merged_calls = false` (the file or the environment): the merged call is
/// invalid, its feedback asking for one call per value, in the JSON and the stream.
#[tokio::test]
async fn split_merged_calls_off_makes_a_merged_call_feedback_in_json_and_stream() {
    let off = "[calls]\ninvalid = \"pass\"\ncoercions = { split_merged_calls = false }";
    let r = start(Script::new().then(merged()).then(merged()), off).await;
    let (h, body) = post_json(&r, &request(false)).await;
    assert_eq!(header(&h, "x-toolmend-unresolved"), "c1");
    assert!(!header(&h, "x-toolmend-fixes").contains("merged_call_split"));
    assert_eq!(tool_calls(&body).len(), 1);
    let call = &body["toolmend"]["calls"][0];
    assert_eq!(call["status"], "unresolved", "{call}");
    assert_eq!(call["issues"][0]["path"], "/city", "{call}");
    let (ids, _, account) = post_stream_body(&r, &request(true)).await;
    assert_eq!(ids, ["c1"]);
    assert_eq!(account["counts"]["unresolved"], 1, "{account}");

    // From the environment, with the default re-ask: the feedback goes to the model.
    let r = start_with_env(
        Script::new().then(merged()).then(calls(vec![
            ToolCall::new("c2", "get_weather", r#"{"city": "Lima", "days": 2}"#),
            ToolCall::new("c3", "get_weather", r#"{"city": "Quito", "days": 2}"#),
            ToolCall::new("c4", "get_weather", r#"{"city": "Bogota", "days": 2}"#),
        ])),
        "",
        vec![(
            "TOOLMEND_CALLS__COERCIONS".to_owned(),
            "{split_merged_calls = false}".to_owned(),
        )],
    )
    .await;
    let (h, body) = post_json(&r, &request(false)).await;
    assert_eq!(r.provider.requests().len(), 2, "one re-ask");
    let re_ask = &r.provider.requests()[1]["messages"];
    let feedback = re_ask.as_array().unwrap().last().unwrap();
    assert!(
        feedback["content"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("one call per value"),
        "{feedback}"
    );
    assert_eq!(header(&h, "x-toolmend-unresolved"), "");
    assert_eq!(tool_calls(&body).len(), 3);
}

#[tokio::test]
async fn strict_repairs_no_text_and_coerces_nothing() {
    let broken = || {
        calls(vec![
            ToolCall::new("c1", "get_weather", "{'city': 'Paris',}"),
            ToolCall::new("c2", "get_weather", r#"{"city": "Paris", "days": "5"}"#),
            ToolCall::new("c3", "get_weather", r#"{"city": "Paris", "days": 5}"#),
        ])
    };
    let r = start(
        Script::new().then(broken()),
        "[calls]\nstrict = true\ninvalid = \"pass\"",
    )
    .await;
    let (h, body) = post_json(&r, &request(false)).await;
    assert_eq!(header(&h, "x-toolmend-unresolved"), "c1,c2");
    assert_eq!(
        header(&h, "x-toolmend-calls"),
        "valid=1 repaired=0 unresolved=2 from_text=0"
    );
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{'city': 'Paris',}",
        "passed as sent"
    );
    // Lax (the default), both are repaired.
    let r = start(Script::new().then(broken()), "calls.invalid = \"pass\"").await;
    let (h, _) = post_json(&r, &request(false)).await;
    assert_eq!(
        header(&h, "x-toolmend-calls"),
        "valid=1 repaired=2 unresolved=0 from_text=0"
    );
}

/// The correction model's answer is validated with the configured coercions, not the
/// defaults: with `string_to_integer` off, a corrected `"3"` is no fix.
#[tokio::test]
async fn a_correction_is_held_to_the_configured_coercions() {
    async fn run(coercions: &str) -> (reqwest::header::HeaderMap, usize) {
        let answer = || {
            calls(vec![ToolCall::new(
                "fix",
                "get_weather",
                r#"{"city": "Paris", "days": "3"}"#,
            )])
        };
        let corrector = ScriptedProvider::start(Script::new().then(answer()).then(answer()))
            .await
            .unwrap();
        let extra = format!(
            "[calls]\ninvalid = [\"correct\", \"pass\"]\n{coercions}\n[correction]\nbase_url = \
             \"{}\"\nmodel = \"small\"\nmax_retries = 2",
            corrector.base_url()
        );
        let r = start(
            Script::new().then(calls(vec![ToolCall::new(
                "c1",
                "get_weather",
                r#"{"city": "Paris", "days": "three"}"#,
            )])),
            &extra,
        )
        .await;
        let (h, _) = post_json(&r, &request(false)).await;
        (h, corrector.requests().len())
    }
    // The defaults: the corrected "3" is coerced and taken.
    let (h, asked) = run("").await;
    assert!(header(&h, "x-toolmend-fixes").contains("arguments_corrected"));
    assert_eq!(header(&h, "x-toolmend-unresolved"), "");
    assert_eq!(asked, 1);
    // Switched off: "3" is still wrong, asked again, then passed flagged.
    let (h, asked) = run("coercions = { string_to_integer = false }").await;
    assert_eq!(header(&h, "x-toolmend-unresolved"), "c1");
    assert!(!header(&h, "x-toolmend-fixes").contains("arguments_corrected"));
    assert_eq!(asked, 2, "re-validated, then asked again");
}

#[test]
fn an_unknown_switch_stops_the_start_naming_it_and_the_valid_ones() {
    let base = "upstream.base_url = \"http://x/v1\"\n";
    let e = Config::load(
        &format!("{base}[calls]\ncoercions = {{ strng_to_integer = false }}\n"),
        Some("gateway.toml"),
        Vec::new(),
        Vec::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("gateway.toml:3: "), "{e}");
    assert!(e.contains("\"strng_to_integer\""), "{e}");
    assert!(
        e.contains("numeric_strings") && e.contains("string_to_integer"),
        "{e}"
    );
    // From the environment: the variable is named.
    let e = Config::from_toml_and_env(
        base,
        vec![(
            "TOOLMEND_CALLS__COERCIONS".to_owned(),
            "{renamed_keys = false}".to_owned(),
        )],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("TOOLMEND_CALLS__COERCIONS: "), "{e}");
    assert!(
        e.contains("\"renamed_keys\"") && e.contains("rename_keys"),
        "{e}"
    );
    // Two names of one switch that disagree.
    let e = Config::from_toml_and_env(
        &format!(
            "{base}calls.coercions = {{ string_to_integer = false, string_to_number = true }}"
        ),
        Vec::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("contradict"), "{e}");
    // strict and accept_truncated cannot both hold.
    let e = Config::from_toml_and_env(
        &format!("{base}[calls]\nstrict = true\naccept_truncated = true"),
        Vec::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("calls.strict") && e.contains("calls.accept_truncated"),
        "{e}"
    );
}

#[test]
fn the_switches_take_the_names_of_pythons_coerce() {
    let load = |text: &str, env: &[(&str, &str)]| {
        Config::from_toml_and_env(
            &format!("upstream.base_url = \"http://x/v1\"\n{text}"),
            env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
        .unwrap()
        .calls
    };
    let c = load("", &[]);
    assert!(!c.strict);
    assert_eq!(c.coercions, toolmend::schema::Coercions::default());
    assert!(
        c.coercions.split_merged_calls,
        "merged calls are split by default"
    );
    assert!(c.mend_options().coercions.split_merged_calls);
    let c = load("calls.coercions = false", &[]);
    assert_eq!(c.coercions, toolmend::schema::Coercions::none());
    let c = load(
        "[calls.coercions]\nnumeric_strings = false\nkey_renamed = false\nsplit_merged_calls = false",
        &[],
    );
    assert!(!c.coercions.numeric_strings && !c.coercions.rename_keys);
    assert!(!c.coercions.split_merged_calls && c.coercions.enum_case);
    assert!(!c.mend_options().coercions.split_merged_calls);
    // The fix id names the switch too, from the environment.
    let c = load(
        "",
        &[("TOOLMEND_CALLS__COERCIONS", "{merged_call_split = false}")],
    );
    assert!(!c.coercions.split_merged_calls && c.coercions.numeric_strings);
    let c = load(
        "",
        &[("TOOLMEND_CALLS__COERCIONS__SPLIT_MERGED_CALLS", "false")],
    );
    assert!(!c.coercions.split_merged_calls);
    // The environment: a whole table, one switch, strict.
    let c = load(
        "",
        &[("TOOLMEND_CALLS__COERCIONS", "{string_to_integer = false}")],
    );
    assert!(!c.coercions.numeric_strings && c.coercions.rename_keys);
    let c = load(
        "calls.coercions = { dates = false }",
        &[("TOOLMEND_CALLS__COERCIONS__KEY_RENAMED", "false")],
    );
    assert!(!c.coercions.rename_keys && !c.coercions.dates);
    // Strict wins over the switches.
    let c = load(
        "calls.coercions = { split_merged_calls = true }",
        &[("TOOLMEND_CALLS__STRICT", "true")],
    );
    assert!(c.strict);
    assert!(c.mend_options().repair.strict);
    assert_eq!(
        c.mend_options().coercions,
        toolmend::schema::Coercions::none()
    );
}

#[tokio::test]
async fn the_environment_switches_a_running_gateway() {
    let r = start_with_env(
        Script::new().then(quoted_days()),
        "calls.invalid = \"pass\"",
        vec![(
            "TOOLMEND_CALLS__COERCIONS".to_owned(),
            "{string_to_integer = false}".to_owned(),
        )],
    )
    .await;
    let (h, _) = post_json(&r, &request(false)).await;
    assert_eq!(header(&h, "x-toolmend-unresolved"), "c1");
    let r = start_with_env(
        Script::new().then(calls(vec![ToolCall::new(
            "c1",
            "get_weather",
            "{'city': 'Paris'}",
        )])),
        "calls.invalid = \"pass\"",
        vec![("TOOLMEND_CALLS__STRICT".to_owned(), "true".to_owned())],
    )
    .await;
    let (h, _) = post_json(&r, &request(false)).await;
    assert_eq!(header(&h, "x-toolmend-unresolved"), "c1");
}

// ---------------------------------------------------------------------------------------
// The tools the gateway runs itself.

type Hits = Arc<Mutex<Vec<Value>>>;

/// A tool service that records the arguments it receives and answers success.
async fn weather_service() -> (String, Hits) {
    let hits: Hits = Arc::default();
    let seen = Arc::clone(&hits);
    let app = Router::new().route(
        "/weather",
        post(move |Json(body): Json<Value>| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(body["arguments"].clone());
                Json(json!({"status": "success", "data": {"temp_c": 21}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), hits)
}

struct WithTools {
    url: String,
    provider: ScriptedProvider,
    hits: Hits,
    http: reqwest::Client,
}

async fn start_with_tools(script: Script, extra: &str) -> WithTools {
    let (base, hits) = weather_service().await;
    let provider = ScriptedProvider::start(script).await.unwrap();
    let toml = format!(
        r#"upstream.base_url = "{}"
{extra}

[[tools]]
name = "get_weather"
description = "Weather."
endpoint = "{base}/weather"
server_side = true
parameters_json = '{{"type": "object", "properties": {{"city": {{"type": "string"}}, "days": {{"type": "integer"}}}}, "required": ["city"], "additionalProperties": false}}'
"#,
        provider.base_url()
    );
    let config = Config::from_toml_and_env(&toml, Vec::new()).unwrap();
    let file = ToolsFile::parse_section(&toml, "gateway.toml").unwrap();
    let gateway = Arc::new(Gateway::with_tools(config, None, &file).await.unwrap());
    let addr = common::serve(gateway).await;
    WithTools {
        url: format!("http://{addr}/v1"),
        provider,
        hits,
        http: reqwest::Client::new(),
    }
}

async fn execute(r: &WithTools, arguments: &str) -> Value {
    let resp = r
        .http
        .post(format!("{}/tools/execute", r.url))
        .json(&json!({"tool_calls": [{"id": "e1", "type": "function",
            "function": {"name": "get_weather", "arguments": arguments}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

#[tokio::test]
async fn tools_execute_is_held_to_the_switches() {
    let quoted = r#"{"city": "Rome", "days": "3"}"#;
    // The defaults: coerced, run with 3.
    let r = start_with_tools(Script::new(), "").await;
    let out = execute(&r, quoted).await;
    assert_eq!(out["results"][0]["outcome"], "executed", "{out}");
    assert_eq!(
        r.hits.lock().unwrap().clone(),
        [json!({"city": "Rome", "days": 3})]
    );
    // Switched off: feedback naming `days`, never run.
    let r = start_with_tools(
        Script::new(),
        "calls.coercions = { string_to_integer = false }",
    )
    .await;
    let out = execute(&r, quoted).await;
    assert_eq!(out["results"][0]["outcome"], "feedback", "{out}");
    assert!(
        out["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("days"),
        "{out}"
    );
    // Strict: a text repair is not made either.
    let r = start_with_tools(Script::new(), "calls.strict = true").await;
    let out = execute(&r, "{'city': 'Rome'}").await;
    assert_eq!(out["results"][0]["outcome"], "feedback", "{out}");
    assert!(r.hits.lock().unwrap().is_empty(), "nothing ran");
}

#[tokio::test]
async fn the_round_trip_is_held_to_the_switches() {
    let said = Step::Reply(AssistantMessage {
        content: Some(Some(Content::Text("21 °C in Rome.".into()))),
        ..Default::default()
    });
    let script = Script::new()
        .then(calls(vec![ToolCall::new(
            "c1",
            "get_weather",
            r#"{"city": "Rome", "days": "3"}"#,
        )]))
        .then(said);
    let r = start_with_tools(
        script,
        "[calls]\ninvalid = \"pass\"\ncoercions = { string_to_integer = false }",
    )
    .await;
    let resp = r
        .http
        .post(format!("{}/chat/completions", r.url))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "Rome?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    // The call never ran with a coerced "3"; the model read the feedback instead.
    assert!(r.hits.lock().unwrap().is_empty(), "{:?}", r.hits);
    let sent = r.provider.requests();
    assert_eq!(sent.len(), 2, "{sent:#?}");
    let result = sent[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(result["role"], "tool");
    assert!(
        result["content"].as_str().unwrap().contains("days"),
        "{result}"
    );
    assert_eq!(body["choices"][0]["message"]["content"], "21 °C in Rome.");
}
