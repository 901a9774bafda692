//! The re-ask (`calls.invalid = "re_ask"`) at its edges, end to end: a real client
//! (reqwest) -> the gateway -> the strict scripted provider, on 127.0.0.1. A re-ask the
//! upstream refuses is visible (header, account, the stream's closing report) and its
//! call stays flagged; a re-ask's text never lands in a message whose calls it did not
//! produce. JSON and streams alike.

use serde_json::{Value, json};
use toolmend::conversation::{AssistantMessage, Content, ToolCall};
use toolmend_scripted::{Script, Step};

use crate::common::{Running, calls, start, weather_tools as tools};

fn request(stream: bool) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "Weather in Paris and Lyon?"}],
           "tools": tools(), "stream": stream})
}

async fn post(r: &Running, body: &Value) -> reqwest::Response {
    r.http
        .post(format!("{}/chat/completions", r.url))
        .json(body)
        .send()
        .await
        .unwrap()
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The data events of a stream, and the closing `: toolmend {…}` report.
async fn sse(resp: reqwest::Response) -> (Vec<Value>, Value) {
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let chunks = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let report = text
        .lines()
        .find_map(|l| l.strip_prefix(": toolmend "))
        .unwrap_or_else(|| panic!("no closing report in {text}"));
    (chunks, serde_json::from_str(report).unwrap())
}

/// The content a stream's chunks carry for choice 0, joined; `None` when none did (the
/// role chunk's `""` aside).
fn streamed_content(chunks: &[Value]) -> Option<String> {
    let parts: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.concat())
}

/// The ids of the calls a stream's chunks carry.
fn streamed_ids(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect()
}

/// A valid call (`c1`) and one missing its required `city` (`c2`), with `text` as
/// content.
fn one_good_one_bad(text: Option<&str>) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(text.map(|t| Content::Text(t.into()))),
        tool_calls: Some(vec![
            ToolCall::new("c1", "get_weather", r#"{"city": "Paris"}"#),
            ToolCall::new("c2", "get_weather", r#"{"days": 2}"#),
        ]),
        ..Default::default()
    })
}

fn refused(status: u16) -> Step {
    Step::Error {
        status,
        body: json!({"error": {"message": "Rate limit reached for org-secret-123 on requests",
            "type": "requests", "param": null, "code": "rate_limit_exceeded"}}),
    }
}

/// What the account and the stream's report say of a re-ask the upstream answered with
/// `status`.
fn failure(status: u16, reason: &str) -> Value {
    json!({"status": "failed", "for": "invalid", "upstream_status": status,
        "code": "upstream_status", "reason": reason, "calls": ["c2"]})
}

#[tokio::test]
async fn a_re_ask_the_upstream_refuses_is_reported_and_its_call_stays_flagged() {
    for (status, reason) in [
        (429, "the upstream answered 429 Too Many Requests"),
        (503, "the upstream answered 503 Service Unavailable"),
    ] {
        let r = start(
            Script::new()
                .then(one_good_one_bad(None))
                .then(refused(status)),
            "",
        )
        .await;
        let resp = post(&r, &request(false)).await;
        assert_eq!(
            resp.status(),
            200,
            "the first answer still reaches the client"
        );
        assert_eq!(
            header(&resp, "x-toolmend-re-ask"),
            format!("failed for=invalid status={status} code=upstream_status")
        );
        assert_eq!(header(&resp, "x-toolmend-unresolved"), "c2");
        let body: Value = resp.json().await.unwrap();
        let ids: Vec<&str> = body["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["c1", "c2"], "the invalid call goes out as it was");
        let account = &body["toolmend"];
        assert_eq!(
            account["re_asks"],
            json!({"made": 1, "calls": ["c2"], "failed": failure(status, reason)})
        );
        assert_eq!(account["calls"][1]["status"], "unresolved");
        assert_eq!(account["counts"]["unresolved"], 1);
        // Never the upstream's body: it may name an account or quote the request.
        assert!(!body.to_string().contains("org-secret-123"), "{body}");
        let asked = r.provider.requests();
        assert_eq!(asked.len(), 2, "one re-ask, refused");
        // The re-ask carries the client's tools and history (read from the client's
        // bytes on the way in: never left out of the body the upstream gets).
        assert_eq!(asked[1]["tools"], tools(), "the re-ask's tools");
        assert_eq!(asked[1]["messages"][0], request(false)["messages"][0]);
    }
}

#[tokio::test]
async fn a_stream_reports_a_refused_re_ask_in_its_last_chunk_and_closing_report() {
    let r = start(
        Script::new()
            .then(one_good_one_bad(None))
            .then(refused(429)),
        "",
    )
    .await;
    let (chunks, report) = sse(post(&r, &request(true)).await).await;
    assert_eq!(streamed_ids(&chunks), ["c1", "c2"]);
    let reason = "the upstream answered 429 Too Many Requests";
    assert_eq!(report["re_ask_failed"], failure(429, reason));
    assert_eq!(report["unresolved"], json!(["c2"]));
    let account = &chunks.last().unwrap()["toolmend"];
    assert_eq!(account["re_asks"]["failed"], failure(429, reason));
}

#[tokio::test]
async fn a_re_ask_that_succeeds_reports_no_failure() {
    let r = start(
        Script::new()
            .then(one_good_one_bad(None))
            .then(calls(vec![ToolCall::new(
                "c9",
                "get_weather",
                r#"{"city": "Lyon", "days": 2}"#,
            )])),
        "",
    )
    .await;
    let resp = post(&r, &request(false)).await;
    assert_eq!(header(&resp, "x-toolmend-re-ask"), "");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["toolmend"]["re_asks"],
        json!({"made": 1, "calls": ["c2"], "failed": null})
    );
}

/// The re-ask fixes one call of two and says "Done.": that text would speak for the
/// call the first answer kept, which it never made. The content stays the first
/// answer's, JSON and stream alike.
#[tokio::test]
async fn a_re_asks_text_never_lands_in_a_message_whose_calls_it_did_not_produce() {
    let again = Step::Reply(AssistantMessage {
        content: Some(Some(Content::Text("Done.".into()))),
        tool_calls: Some(vec![ToolCall::new(
            "c9",
            "get_weather",
            r#"{"city": "Lyon", "days": 2}"#,
        )]),
        ..Default::default()
    });
    for first_text in [None, Some("Checking both cities.")] {
        let r = start(
            Script::new()
                .then(one_good_one_bad(first_text))
                .then(again.clone())
                .then(one_good_one_bad(first_text))
                .then(again.clone()),
            "",
        )
        .await;
        let body: Value = post(&r, &request(false)).await.json().await.unwrap();
        let message = &body["choices"][0]["message"];
        assert_eq!(message["content"], json!(first_text), "{message}");
        let ids: Vec<&str> = message["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["c1", "c9"]);
        let (chunks, _) = sse(post(&r, &request(true)).await).await;
        assert_eq!(
            streamed_content(&chunks).as_deref(),
            first_text,
            "{chunks:?}"
        );
        assert_eq!(streamed_ids(&chunks), ["c1", "c9"]);
    }
}

/// Every call re-asked: the new answer's calls are all the message carries, so its text
/// speaks for them and follows the first answer's.
#[tokio::test]
async fn a_re_asks_text_stays_when_it_made_every_call_of_the_message() {
    let r = start(
        Script::new()
            .then(Step::Reply(AssistantMessage {
                content: Some(Some(Content::Text("Checking.".into()))),
                tool_calls: Some(vec![ToolCall::new("c2", "get_weather", r#"{"days": 2}"#)]),
                ..Default::default()
            }))
            .then(Step::Reply(AssistantMessage {
                content: Some(Some(Content::Text("Lyon, then.".into()))),
                tool_calls: Some(vec![ToolCall::new(
                    "c9",
                    "get_weather",
                    r#"{"city": "Lyon", "days": 2}"#,
                )]),
                ..Default::default()
            })),
        "",
    )
    .await;
    let body: Value = post(&r, &request(false)).await.json().await.unwrap();
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], "Checking.\nLyon, then.", "{message}");
    assert_eq!(message["tool_calls"][0]["id"], "c9");
}
