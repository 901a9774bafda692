//! The guard at the gateway, end to end: a real client (reqwest) -> the gateway -> the
//! strict scripted provider, on 127.0.0.1. Each `on_flood` policy, sessions, loop rules
//! over the history, ids reused across turns, streaming.

use serde_json::{Value, json};
use toolmend::{
    conversation::{AssistantMessage, Content, ToolCall},
    guard::FLOOD_PREFIX,
};
use toolmend_gateway::Config;
use toolmend_scripted::{Script, Step};

use crate::common::{Running, start_with_env as start};

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "search", "description": "Search.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"},
            "n": {"type": "integer"}}, "required": ["q"]}}}])
}

fn call(id: &str, args: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![ToolCall::new(id, "search", args)]),
        ..Default::default()
    })
}

fn said(text: &str) -> Step {
    Step::Reply(AssistantMessage {
        content: Some(Some(Content::Text(text.into()))),
        ..Default::default()
    })
}

fn ask() -> Value {
    json!([{"role": "user", "content": "find rome"}])
}

async fn post(
    r: &Running,
    messages: &Value,
    session: Option<&str>,
    stream: bool,
) -> reqwest::Response {
    let mut req = r
        .http
        .post(format!("{}/chat/completions", r.url))
        .json(&json!({"model": "m", "messages": messages, "tools": tools(), "stream": stream}));
    if let Some(s) = session {
        req = req.header("x-toolmend-session", s);
    }
    req.send().await.unwrap()
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// A history of `n` turns of the same call with the same result.
fn looping(n: usize, results: impl Fn(usize) -> String) -> Value {
    let mut m = vec![json!({"role": "user", "content": "find rome"})];
    for i in 0..n {
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("h{i}"),
            "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"rome\"}"}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("h{i}"), "content": results(i)}));
    }
    Value::Array(m)
}

#[tokio::test]
async fn reject_answers_429_with_retry_after_in_openais_shape_per_session() {
    let script = (0..4).fold(Script::new(), |s, i| {
        s.then(call(&format!("c{i}"), r#"{"q": "rome"}"#))
    });
    let r = start(
        script,
        "[guard]\non_flood = \"reject\"\n[guard.session]\nlimit = 2\nwindow_secs = 60\n",
        Vec::new(),
    )
    .await;
    for _ in 0..2 {
        let resp = post(&r, &ask(), Some("alice"), false).await;
        assert_eq!(resp.status(), 200);
        assert!(header(&resp, "x-toolmend-guard").contains("checked=1 refused=0"));
    }
    let resp = post(&r, &ask(), Some("alice"), false).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(header(&resp, "retry-after"), "60");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "toolmend_tool_flood");
    assert_eq!(body["error"]["type"], "requests");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with(FLOOD_PREFIX), "{msg}");
    assert!(msg.contains("rule session_window"), "{msg}");
    // Another session has its own window.
    let resp = post(&r, &ask(), Some("bob"), false).await;
    assert_eq!(resp.status(), 200);
    // Every decision is a metric: the refusal, by rule and action.
    let metrics = r
        .http
        .get(format!("{}/metrics", r.url.trim_end_matches("/v1")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("toolmend_guard_decisions_total")
                && l.contains("rule=\"session_window\"")
                && l.contains("action=\"deny\"")
        })
        .unwrap_or_else(|| panic!("no guard decision metric:\n{metrics}"));
    assert!(!line.ends_with(" 0"), "{line}");
    assert!(metrics.contains("toolmend_guard_floods_total{policy=\"reject\"}"));
    assert!(metrics.contains("toolmend_guard_seconds"));
}

#[tokio::test]
async fn feedback_keeps_the_allowed_calls_of_a_message_and_reports_the_refused_one() {
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome"}"#))
        .then(Step::Reply(AssistantMessage {
            content: Some(None),
            tool_calls: Some(vec![
                ToolCall::new("c2", "search", r#"{ "q":"rome" }"#),
                ToolCall::new("c3", "search", r#"{"q": "paris"}"#),
            ]),
            ..Default::default()
        }));
    let r = start(script, "[guard.duplicate]\nwindow_secs = 60\n", Vec::new()).await;
    assert_eq!(post(&r, &ask(), Some("s"), false).await.status(), 200);
    let resp = post(&r, &ask(), Some("s"), false).await;
    let guard = header(&resp, "x-toolmend-guard");
    assert!(
        guard.contains("checked=2 refused=1") && guard.contains("re_asks=0"),
        "{guard}"
    );
    let body: Value = resp.json().await.unwrap();
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["id"], "c3");
    assert_eq!(r.provider.requests().len(), 2, "no re-ask: a call remained");
}

#[tokio::test]
async fn feedback_re_asks_when_every_call_is_refused() {
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome", "n": 5}"#))
        .then(call("c2", r#"{"n": "5", "q": "rome"}"#))
        .then(said("You already have the results for rome."));
    let r = start(script, "[guard.duplicate]\nwindow_secs = 60\n", Vec::new()).await;
    assert_eq!(post(&r, &ask(), Some("s"), false).await.status(), 200);
    let resp = post(&r, &ask(), Some("s"), false).await;
    assert_eq!(resp.status(), 200);
    let guard = header(&resp, "x-toolmend-guard");
    assert!(
        guard.contains("refused=1") && guard.contains("re_asks=1"),
        "{guard}"
    );
    assert!(guard.contains("rules=duplicate"), "{guard}");
    assert!(header(&resp, "x-toolmend-outcomes").contains("flooded=1"));
    let body: Value = resp.json().await.unwrap();
    let message = &body["choices"][0]["message"];
    assert!(
        message.get("tool_calls").is_none_or(Value::is_null),
        "{message}"
    );
    assert_eq!(message["content"], "You already have the results for rome.");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    // The re-ask carried the refused call and the guard's answer to it.
    let reqs = r.provider.requests();
    let last = reqs.last().unwrap()["messages"].as_array().unwrap().clone();
    let tool = last.last().unwrap();
    assert_eq!(tool["role"], "tool");
    assert!(tool["content"].as_str().unwrap().starts_with(FLOOD_PREFIX));
    assert_eq!(tool["tool_call_id"], "c2");
}

#[tokio::test]
async fn flag_passes_the_call_and_says_so() {
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome"}"#))
        .then(call("c2", r#"{"q": "rome"}"#));
    let r = start(
        script,
        "[guard]\non_flood = \"flag\"\n[guard.session]\nlimit = 1\nwindow_secs = 60\n",
        Vec::new(),
    )
    .await;
    post(&r, &ask(), Some("s"), false).await;
    let resp = post(&r, &ask(), Some("s"), false).await;
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "x-toolmend-guard").contains("flagged=1"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["tool_calls"][0]["id"], "c2");
}

#[tokio::test]
async fn the_repeat_ladder_reads_the_history_and_polling_with_progress_passes() {
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome"}"#))
        .then(call("c2", r#"{"q": "rome"}"#))
        .then(call("c3", r#"{"q": "rome"}"#));
    let r = start(
        script,
        "[guard]\non_flood = \"reject\"\n[guard.repeat]\nobserve = 2\nblock = 3\nstop = 6\n",
        Vec::new(),
    )
    .await;
    // Two earlier identical calls with the same result: the third is blocked.
    let resp = post(&r, &looping(2, |_| "no news".into()), None, false).await;
    assert_eq!(resp.status(), 429);
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rule repeat")
    );
    // The same call whose result changed every time is progress.
    let resp = post(
        &r,
        &looping(4, |i| format!("{}% done", i * 20)),
        None,
        false,
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "x-toolmend-guard").contains("observed=1"));
    // Five identical turns: the sixth call ends the run (400, not a rate limit).
    let resp = post(&r, &looping(5, |_| "no news".into()), None, false).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "toolmend_tool_loop");
}

#[tokio::test]
async fn an_id_the_session_used_before_is_renamed_with_a_time_ordered_one() {
    let script = Script::new()
        .then(call("call_1", r#"{"q": "rome"}"#))
        .then(call("call_1", r#"{"q": "paris"}"#));
    let r = start(
        script,
        "[guard.session]\nlimit = 10\nwindow_secs = 60\n",
        Vec::new(),
    )
    .await;
    post(&r, &ask(), Some("s"), false).await;
    // The client dropped the earlier turn from its history; the model reuses the id.
    let resp = post(&r, &ask(), Some("s"), false).await;
    assert!(header(&resp, "x-toolmend-guard").contains("renamed=1"));
    assert!(header(&resp, "x-toolmend-fixes").contains("call_id_renamed"));
    let body: Value = resp.json().await.unwrap();
    let id = body["choices"][0]["message"]["tool_calls"][0]["id"]
        .as_str()
        .unwrap();
    assert!(id.starts_with("call_tm_") && id.len() <= 40, "{id}");
}

#[tokio::test]
async fn sessions_come_from_the_header_then_user_then_metadata_then_the_key() {
    let script = (0..6).fold(Script::new(), |s, i| {
        s.then(call(&format!("c{i}"), r#"{"q": "x"}"#))
    });
    let r = start(
        script,
        "[guard]\non_flood = \"reject\"\n[guard.session]\nlimit = 1\nwindow_secs = 60\n",
        Vec::new(),
    )
    .await;
    let send = |body: Value, key: Option<&str>| {
        let mut req = r
            .http
            .post(format!("{}/chat/completions", r.url))
            .json(&body);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.send()
    };
    let base = |extra: Value| {
        let mut b = json!({"model": "m", "messages": ask(), "tools": tools()});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let by_user = send(base(json!({"user": "u1"})), None).await.unwrap();
    assert!(header(&by_user, "x-toolmend-guard").contains("session=user"));
    assert_eq!(
        send(base(json!({"user": "u1"})), None)
            .await
            .unwrap()
            .status(),
        429
    );
    let by_meta = send(base(json!({"metadata": {"session_id": "m1"}})), None)
        .await
        .unwrap();
    assert!(header(&by_meta, "x-toolmend-guard").contains("session=metadata"));
    let by_key = send(base(json!({})), Some("sk-1")).await.unwrap();
    assert!(header(&by_key, "x-toolmend-guard").contains("session=api_key"));
    assert_eq!(
        send(base(json!({})), Some("sk-1")).await.unwrap().status(),
        429
    );
    // No session anywhere: the per-session window does not apply.
    let none = send(base(json!({})), None).await.unwrap();
    assert_eq!(none.status(), 200);
    assert!(header(&none, "x-toolmend-guard").contains("session=none"));
}

#[tokio::test]
async fn a_stream_ends_with_the_refusal_as_an_error_event() {
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome"}"#))
        .then(call("c2", r#"{"q": "rome"}"#));
    let r = start(
        script,
        "",
        vec![
            ("TOOLMEND_GUARD__ON_FLOOD".into(), "reject".into()),
            ("TOOLMEND_GUARD__SESSION__LIMIT".into(), "1".into()),
            ("TOOLMEND_GUARD__SESSION__WINDOW_SECS".into(), "60".into()),
        ],
    )
    .await;
    let first = post(&r, &ask(), Some("s"), true)
        .await
        .text()
        .await
        .unwrap();
    assert!(first.contains("\"tool_calls\":["), "{first}");
    let second = post(&r, &ask(), Some("s"), true)
        .await
        .text()
        .await
        .unwrap();
    assert!(second.contains("toolmend_tool_flood"), "{second}");
    assert!(
        !second.contains("\"tool_calls\""),
        "the refused call never went out: {second}"
    );
    assert!(second.trim_end().ends_with("data: [DONE]"), "{second}");
}

#[test]
fn a_bad_guard_setting_is_named_at_start() {
    let err = Config::from_toml_and_env(
        "upstream.base_url = \"http://127.0.0.1:1/v1\"\n[guard.session]\nlimit = 0\nwindow_secs = 60\n",
        Vec::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("guard.session.limit"), "{err}");
    let err = Config::from_toml_and_env(
        "upstream.base_url = \"http://127.0.0.1:1/v1\"\n[guard]\nstore = \"redis\"\n",
        Vec::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("guard.redis_url"), "{err}");
    let err = Config::from_toml_and_env(
        "upstream.base_url = \"http://127.0.0.1:1/v1\"\n[guard]\nsesion = {limit = 1, window_secs = 1}\n",
        Vec::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("sesion"), "{err}");
}

#[tokio::test]
async fn a_stream_under_feedback_carries_the_re_asked_answer_and_no_refused_call() {
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome"}"#))
        .then(call("c2", r#"{"q": "rome"}"#))
        .then(said("The results for rome are above."));
    let r = start(script, "[guard.duplicate]\nwindow_secs = 60\n", Vec::new()).await;
    post(&r, &ask(), Some("s"), true)
        .await
        .text()
        .await
        .unwrap();
    let text = post(&r, &ask(), Some("s"), true)
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains("The results for rome are above."), "{text}");
    assert!(!text.contains("\"tool_calls\":["), "{text}");
    assert!(text.contains("\"re_asks\":1"), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}

/// One pipeline: the gateway and the Rust tool node, given the same rules and the same
/// conversation, refuse the same call with the same words.
#[tokio::test]
async fn the_gateway_and_the_node_refuse_the_same_call_with_the_same_reason() {
    use toolmend::{
        conversation::Message,
        guard::{GuardConfig, Ladder, RuleGuard},
        node::{CallOutcome, Registry, ToolError, ToolNode, tool_fn},
    };
    let history = looping(2, |_| "no news".into());
    // The gateway: reject, so the refusal's reason is the error message.
    let r = start(
        Script::new().then(call("c9", r#"{"q": "rome"}"#)),
        "[guard]\non_flood = \"reject\"\n[guard.repeat]\nobserve = 2\nblock = 3\nstop = 6\n",
        Vec::new(),
    )
    .await;
    let resp = post(&r, &history, None, false).await;
    assert_eq!(resp.status(), 429);
    let gateway_reason = resp.json::<Value>().await.unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    // The node: the same history, then the model's same answer.
    let mut reg = Registry::new();
    reg.add(tool_fn(
        "search",
        "Search.",
        tools()[0]["function"]["parameters"].clone(),
        |_: Value, _| async { Ok::<_, ToolError>("no news") },
    ))
    .unwrap();
    let guard = RuleGuard::new(GuardConfig {
        repeat: Some(Ladder::default()),
        ..GuardConfig::default()
    })
    .unwrap();
    let node = ToolNode::builder(reg).guard(guard).build();
    let mut messages: Vec<Message> = serde_json::from_value(history).unwrap();
    messages.push(
        serde_json::from_value(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"rome\"}"}}]}))
        .unwrap(),
    );
    let out = node.invoke(&messages).await.unwrap();
    assert_eq!(out.results[0].outcome, CallOutcome::Flooded);
    assert_eq!(out.results[0].content.text(), gateway_reason);
}

/// The closing `: toolmend {…}` report of a stream.
fn closing_report(text: &str) -> Value {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(": toolmend "))
        .unwrap_or_else(|| panic!("no closing report in {text}"));
    serde_json::from_str(line).unwrap()
}

/// A gateway whose guard admits one call per session and rejects (429) the next, in
/// front of two answers of one call each.
async fn one_call_then_rejected() -> Running {
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome"}"#))
        .then(call("c2", r#"{"q": "paris"}"#));
    start(
        script,
        "[guard]\non_flood = \"reject\"\n[guard.session]\nlimit = 1\nwindow_secs = 60\n",
        Vec::new(),
    )
    .await
}

/// A refusal says what the guard did (`x-toolmend-guard`, as every response it checked)
/// and that it is not to be retried by the SDK (`x-should-retry: false`: each retry would
/// be a paid model call), with `Retry-After` kept for whoever decides.
#[tokio::test]
async fn a_refusal_carries_the_guards_header_and_asks_sdks_not_to_retry() {
    let r = one_call_then_rejected().await;
    let ok = post(&r, &ask(), Some("s"), false).await;
    assert_eq!(header(&ok, "x-should-retry"), "", "only a refusal says it");
    let resp = post(&r, &ask(), Some("s"), false).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(header(&resp, "x-should-retry"), "false");
    assert_eq!(header(&resp, "retry-after"), "60");
    assert_eq!(
        header(&resp, "x-toolmend-guard"),
        "checked=1 refused=1 flagged=0 observed=0 re_asks=0 renamed=0 policy=reject \
         session=header rules=session_window"
    );
    // The count is of the calls admitted, the refused one apart.
    let body: Value = resp.json().await.unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("1 calls admitted in this session within 60 s, limit 1; this one is refused."),
        "{msg}"
    );
}

/// An answer of several calls refused whole (`reject`) says how many were admitted: they
/// were counted by the guard, yet never sent.
#[tokio::test]
async fn a_rejected_answer_says_how_many_of_its_calls_were_admitted() {
    let script = Script::new().then(Step::Reply(AssistantMessage {
        content: Some(None),
        tool_calls: Some(vec![
            ToolCall::new("c1", "search", r#"{"q": "rome"}"#),
            ToolCall::new("c2", "search", r#"{"q": "paris"}"#),
            ToolCall::new("c3", "search", r#"{"q": "oslo"}"#),
        ]),
        ..Default::default()
    }));
    let r = start(
        script,
        "[guard]\non_flood = \"reject\"\n[guard.session]\nlimit = 2\nwindow_secs = 60\n",
        Vec::new(),
    )
    .await;
    let resp = post(&r, &ask(), Some("s"), false).await;
    assert_eq!(resp.status(), 429);
    assert!(header(&resp, "x-toolmend-guard").starts_with("checked=3 refused=1 "));
    let body: Value = resp.json().await.unwrap();
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("2 calls admitted in this session within 60 s, limit 2")
            && msg.ends_with("(1 of the answer's 3 calls refused, 2 admitted; none was sent)"),
        "{msg}"
    );
}

/// `feedback`, the model asked again and calling the refused tool again: the refusal
/// reaches the client (nothing is left to answer with), says so, and is not retried.
#[tokio::test]
async fn feedback_refused_again_answers_the_refusal_not_to_be_retried() {
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome"}"#))
        .then(call("c2", r#"{"q": "rome"}"#))
        .then(call("c3", r#"{"q": "rome"}"#));
    let r = start(script, "[guard.duplicate]\nwindow_secs = 60\n", Vec::new()).await;
    assert_eq!(post(&r, &ask(), Some("s"), false).await.status(), 200);
    let resp = post(&r, &ask(), Some("s"), false).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(header(&resp, "x-should-retry"), "false");
    let guard = header(&resp, "x-toolmend-guard");
    assert!(
        guard.starts_with("checked=2 refused=2 flagged=0 observed=0 re_asks=1 ")
            && guard.contains("policy=feedback"),
        "{guard}"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "toolmend_tool_flood");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with(FLOOD_PREFIX), "{msg}");
    assert!(
        msg.contains(
            "the model was asked again 1 time(s) (guard.max_re_asks = 1) with the refusal as \
             the calls' result and called refused tools again"
        ),
        "{msg}"
    );
    assert_eq!(r.provider.requests().len(), 3, "one re-ask, no more");
}

/// `feedback` whose re-ask the upstream refuses (429): the refusal reaches the client,
/// saying why the model could not be asked, with the failed re-ask in its headers; in a
/// stream, in the closing report.
#[tokio::test]
async fn a_guard_re_ask_the_upstream_refuses_is_reported() {
    let limited = || Step::Error {
        status: 429,
        body: json!({"error": {"message": "slow down", "type": "requests", "param": null,
            "code": "rate_limit_exceeded"}}),
    };
    let script = Script::new()
        .then(call("c1", r#"{"q": "rome"}"#))
        .then(call("c2", r#"{"q": "rome"}"#))
        .then(limited())
        .then(call("c3", r#"{"q": "rome"}"#))
        .then(limited());
    let r = start(script, "[guard.duplicate]\nwindow_secs = 60\n", Vec::new()).await;
    assert_eq!(post(&r, &ask(), Some("s"), false).await.status(), 200);
    let resp = post(&r, &ask(), Some("s"), false).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(header(&resp, "x-should-retry"), "false");
    assert_eq!(
        header(&resp, "x-toolmend-re-ask"),
        "failed for=refused status=429 code=upstream_status"
    );
    assert!(header(&resp, "x-toolmend-guard").contains("refused=1"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "toolmend_tool_flood");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.ends_with(
            "(the model could not be asked again: the upstream answered 429 Too Many Requests)"
        ),
        "{msg}"
    );
    let text = post(&r, &ask(), Some("s"), true)
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains("toolmend_tool_flood"), "{text}");
    let report = closing_report(&text);
    assert_eq!(report["guard"]["refused"], 1, "{report}");
    assert_eq!(report["guard"]["re_ask_failed"]["upstream_status"], 429);
    assert_eq!(report["guard"]["re_ask_failed"]["for"], "refused");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}

/// A stream the guard refuses says what the guard did in its closing report, as the
/// JSON path's refusal says it in `x-toolmend-guard`.
#[tokio::test]
async fn a_refused_stream_closes_with_the_guards_report() {
    let r = one_call_then_rejected().await;
    post(&r, &ask(), Some("s"), true)
        .await
        .text()
        .await
        .unwrap();
    let text = post(&r, &ask(), Some("s"), true)
        .await
        .text()
        .await
        .unwrap();
    let error = text
        .find("toolmend_tool_flood")
        .unwrap_or_else(|| panic!("{text}"));
    let report_at = text.find(": toolmend ").unwrap_or_else(|| panic!("{text}"));
    assert!(
        error < report_at,
        "the report follows the error event: {text}"
    );
    let report = closing_report(&text);
    assert_eq!(
        report["guard"],
        json!({"checked": 1, "refused": 1, "flagged": 0, "observed": 0, "re_asks": 0,
            "renamed": 0, "rules": ["session_window"], "policy": "reject", "session": "header",
            "re_ask_failed": null})
    );
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}

#[tokio::test]
async fn under_feedback_a_rule_that_ends_the_run_is_refused_at_once_not_re_asked() {
    // The model would loop on, and a re-ask would find a call to send: it is not asked.
    let script = (0..4).fold(Script::new(), |s, i| {
        s.then(call(&format!("c{i}"), r#"{"q": "rome"}"#))
    });
    let r = start(
        script,
        "[guard]\non_flood = \"feedback\"\n[guard.repeat]\nobserve = 2\nblock = 3\nstop = 6\n",
        Vec::new(),
    )
    .await;
    for stream in [false, true] {
        let before = r.provider.requests().len();
        let resp = post(&r, &looping(5, |_| "no news".into()), None, stream).await;
        assert_eq!(
            r.provider.requests().len(),
            before + 1,
            "no re-ask (stream={stream})"
        );
        if stream {
            assert_eq!(resp.status(), 200);
            let text = resp.text().await.unwrap();
            assert!(text.contains("toolmend_tool_loop"), "{text}");
        } else {
            assert_eq!(resp.status(), 400);
            let body: Value = resp.json().await.unwrap();
            assert_eq!(body["error"]["code"], "toolmend_tool_loop");
        }
    }
}
