//! The gateway's event log (`[events]`), end to end: a real client -> the gateway -> the
//! scripted provider; each mended call of a JSON and of a streamed answer is one line,
//! with the request's id, model and a keyed hash of its session, the fields as the
//! schema's paths; never an argument value, a key the model made up, or the session id.

use std::sync::Arc;

use serde_json::json;
use toolmend::conversation::ToolCall;
use toolmend::events::CallEvent;
use toolmend_gateway::{Config, Gateway};
use toolmend_scripted::{Script, ScriptedProvider};

use crate::common::{self, calls, eventually, weather_tools as tools};

/// The log's lines once `n` are there (the writer thread is asynchronous).
async fn lines(path: &std::path::Path, n: usize) -> Vec<CallEvent> {
    eventually(&format!("{n} lines in {}", path.display()), || {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let got: Vec<CallEvent> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if got.len() >= n { Ok(got) } else { Err(text) }
    })
    .await
}

#[tokio::test]
async fn every_mended_call_is_one_line_without_values_or_raw_sessions() {
    let dir = std::env::temp_dir().join(format!("toolmend-gw-events-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("events.jsonl");
    let _ = std::fs::remove_file(&path);
    let provider = ScriptedProvider::start(
        Script::new()
            .then(calls(vec![
                ToolCall::new("c1", "get_weather", "{'city': 'Osaka', 'days': '3',}"),
                ToolCall::new("c2", "get_weather", r#"{"city": "Lima"}"#),
            ]))
            .then(calls(vec![ToolCall::new(
                "c3",
                "get_weather",
                r#"{"town": "Nairobi", "units": "Kelvin", "mood": "sunny"}"#,
            )])),
    )
    .await
    .unwrap();
    let toml = format!(
        "upstream.base_url = \"{}\"\ncalls.invalid = \"pass\"\n[events]\npath = \"{}\"\n",
        provider.base_url(),
        path.display()
    );
    // A salt's variable is read at start; unset, the start says which key needs it.
    let salted = format!("{toml}session_salt_env = \"EVENTS_TEST_UNSET_SALT_VARIABLE\"\n");
    let config = Config::from_toml_and_env(&salted, Vec::new()).unwrap();
    let err = Gateway::new(config, None).unwrap_err().to_string();
    assert!(
        err.contains("events.session_salt_env") && err.contains("EVENTS_TEST_UNSET_SALT_VARIABLE"),
        "{err}"
    );
    let config = Config::from_toml_and_env(&toml, Vec::new()).unwrap();
    let gateway = Arc::new(Gateway::new(config, None).unwrap());
    let addr = common::serve(gateway).await;
    let http = reqwest::Client::new();
    let url = format!("http://{addr}/v1/chat/completions");
    let ask = json!([{"role": "user", "content": "Weather?"}]);

    let resp = http
        .post(&url)
        .header("x-toolmend-session", "user-secret-42")
        .json(&json!({"model": "model-a", "messages": ask, "tools": tools()}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let first_id = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
    let _ = resp.text().await.unwrap();
    let resp = http
        .post(&url)
        .json(
            &json!({"model": "model-b", "messages": ask, "tools": tools(), "stream": true,
                      "user": "user-secret-42"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let second_id = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
    let _ = resp.text().await.unwrap();

    let log = lines(&path, 3).await;
    assert_eq!(log.len(), 3, "{log:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    for leak in [
        "Osaka",
        "Lima",
        "Nairobi",
        "Kelvin",
        "town",
        "mood",
        "sunny",
        "user-secret-42",
    ] {
        assert!(!text.contains(leak), "{leak} reached the event log: {text}");
    }

    let (a, b, c) = (&log[0], &log[1], &log[2]);
    assert_eq!(
        (a.front.as_str(), a.model.as_deref()),
        ("chat_completions", Some("model-a"))
    );
    assert_eq!(a.request_id.as_deref(), Some(first_id.as_str()));
    assert_eq!(
        (a.outcome.as_str(), a.mend.as_str()),
        ("executed", "repaired")
    );
    let paths: Vec<(&str, &[String])> = a
        .fields
        .iter()
        .map(|f| (f.path.as_str(), f.fixes.as_slice()))
        .collect();
    assert_eq!(
        paths,
        [
            (
                "",
                &["single_quotes".to_owned(), "trailing_comma".to_owned()][..]
            ),
            ("/days", &["string_to_integer".to_owned()][..])
        ]
    );
    // A clean call is logged too (the rates' denominator), with its place in the message.
    assert!(b.is_clean() && b.call == 1, "{b:?}");
    // The streamed answer: another request, another model; the session from the body's
    // `user`, hashed with the process's key (never the id itself).
    assert_eq!(c.request_id.as_deref(), Some(second_id.as_str()));
    assert_eq!(c.model.as_deref(), Some("model-b"));
    assert_eq!(c.outcome, "feedback");
    let session = c.session.as_deref().unwrap();
    assert!(
        session.starts_with("s_") && session.len() == 18,
        "{session}"
    );
    assert_ne!(
        a.session, c.session,
        "header and user are different sources"
    );
    let by_path: Vec<(&str, &[String], &[String])> = c
        .fields
        .iter()
        .map(|f| (f.path.as_str(), f.fixes.as_slice(), f.issues.as_slice()))
        .collect();
    // `town` became `city` (the schema's key); `mood`, the model's own key, is `?`.
    assert!(
        by_path
            .iter()
            .any(|(p, fixes, _)| *p == "/city" && fixes.iter().any(|k| k.starts_with("key_"))),
        "{by_path:?}"
    );
    assert!(
        by_path
            .iter()
            .any(|(p, _, issues)| *p == "/units" && issues == &["not_in_enum".to_owned()]),
        "{by_path:?}"
    );
    assert!(
        by_path
            .iter()
            .all(|(p, _, _)| p.is_empty() || ["/city", "/days", "/units", "/?"].contains(p)),
        "{by_path:?}"
    );
}
