//! `POST /v1/tools/execute`: the tools the gateway serves (`[[tools]]`, `[[mcp]]`), run
//! for a client that keeps its own loop. In: an assistant message (or its calls) and a
//! session; out: exactly one tool message per call id, the sanitized assistant message,
//! each call's result with its artifact and metadata, and the node's stats. The work is
//! the pipeline's (`pipeline::server_tools`: the core's tool node: mend, validate, guard,
//! execute); this front only converts.
//!
//! ```text
//! POST /v1/tools/execute
//! {"messages": [... chat messages ending with the assistant message ...]}
//!   or {"message": {"role": "assistant", "tool_calls": [...]}}
//!   or {"tool_calls": [...]}
//! optional: "session": "alice" (else the guard's session_from: x-toolmend-session, …),
//!           "tools": ["get_weather"] (only these may run; a call to another is refused)
//!
//! 200 {"assistant": {...}, "messages": [{"role": "tool", "tool_call_id", "content"}, ...],
//!      "results": [{"call_id", "tool", "status", "outcome", "fault", "content",
//!                   "artifact", "metadata"}, ...],
//!      (`fault`: for a tool that ran and failed, whose fault: "call", "unavailable",
//!       "timeout" or "failed"; null otherwise)
//!      "stats": {...}}
//! ```

use std::{sync::Arc, time::Instant};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::HeaderMap,
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};
use toolmend::{
    conversation::{AssistantMessage, Message, ToolCall},
    node::NodeOutput,
};

use crate::{
    server::{error::GatewayError, headers, http},
    state::Gateway,
};

/// `POST /v1/tools/execute`.
pub(crate) fn routes(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/v1/tools/execute", post(execute))
        .with_state(gw)
}

async fn execute(State(gw): State<Arc<Gateway>>, headers: HeaderMap, body: Body) -> Response {
    let gw2 = Arc::clone(&gw);
    let (out, id) = http::handle(
        &gw.config.limits,
        headers,
        body,
        |headers, body, id| async move { execute_inner(&gw2, &headers, &body, &id).await },
    )
    .await;
    tracing::debug!(
        request_id = %id,
        status = out.status().as_u16(),
        outcomes = out.headers().get("x-toolmend-outcomes").and_then(|v| v.to_str().ok()).unwrap_or(""),
        "tools executed"
    );
    out
}

async fn execute_inner(
    gw: &Gateway,
    headers: &HeaderMap,
    body: &Bytes,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let Some(tools) = &gw.pipeline.server_tools else {
        return Err(GatewayError::NotFound {
            code: "toolmend_no_tools",
            message: "this gateway serves no tools: declare [[tools]] or [[mcp]] in its \
                      configuration, or start it with `toolmend serve --tools FILE`"
                .to_owned(),
        });
    };
    let request: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return Err(GatewayError::invalid(
                "invalid_body",
                "the body must be a JSON object",
            ));
        }
        Err(e) => {
            return Err(GatewayError::invalid(
                "invalid_json",
                format!("the body is not JSON: {e}"),
            ));
        }
    };
    let messages = messages_of(gw, &request)?;
    let only = only_of(&request)?;
    let session = match request.get("session") {
        // Keyed as the `x-toolmend-session` header is: a client that names its session
        // there for chat completions and here shares one set of counts.
        // Within the `[access]` client, as the guard's own sessions are.
        Some(Value::String(s)) if !s.trim().is_empty() => Some(
            crate::pipeline::guard::client_scoped(format!("h:{}", s.trim())),
        ),
        None | Some(Value::Null) => gw
            .pipeline
            .guard
            .as_ref()
            .and_then(|g| g.session(&crate::fronts::session_hints(headers, &request)))
            .map(|(s, _)| s),
        Some(_) => {
            return Err(GatewayError::invalid(
                "invalid_session",
                "'session' must be a non-empty string",
            ));
        }
    };
    let deadline = Instant::now() + gw.config.round_trip.max_time();
    let out = tools
        .execute(
            &messages,
            only.as_deref(),
            session,
            &Arc::from(request_id),
            deadline,
        )
        .await?;
    let headers = vec![("x-toolmend-outcomes", outcomes(&out))];
    let mut resp = axum::Json(body_of(out)).into_response();
    headers::set_headers(resp.headers_mut(), headers);
    Ok(resp)
}

/// The conversation whose last assistant message is answered, from `messages`,
/// `message` or `tool_calls` (exactly one of them), within the `[limits]`.
fn messages_of(gw: &Gateway, request: &Value) -> Result<Vec<Message>, GatewayError> {
    let given: Vec<&str> = ["messages", "message", "tool_calls"]
        .into_iter()
        .filter(|k| request.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    let messages = match given.as_slice() {
        ["messages"] => {
            let raw = &request["messages"];
            if let Some(n) = raw.as_array().map(Vec::len) {
                gw.pipeline.check_message_count(n)?;
            }
            <Vec<Message> as serde::Deserialize>::deserialize(raw).map_err(|e| {
                GatewayError::invalid(
                    "invalid_messages",
                    format!("'messages' is not a list of chat messages: {e}"),
                )
            })?
        }
        ["message"] => {
            let mut raw = request["message"].clone();
            match raw.get("role").and_then(Value::as_str) {
                None | Some("assistant") => {}
                Some(other) => {
                    return Err(GatewayError::invalid(
                        "invalid_messages",
                        format!("'message' must be the assistant message, not a {other:?} one"),
                    ));
                }
            }
            if let Some(o) = raw.as_object_mut() {
                o.remove("role");
            }
            let m: AssistantMessage = serde_json::from_value(raw).map_err(|e| {
                GatewayError::invalid(
                    "invalid_messages",
                    format!("'message' is not an assistant message: {e}"),
                )
            })?;
            vec![Message::Assistant(m)]
        }
        ["tool_calls"] => {
            let calls: Vec<ToolCall> = serde_json::from_value(request["tool_calls"].clone())
                .map_err(|e| {
                    GatewayError::invalid(
                        "invalid_messages",
                        format!("'tool_calls' is not a list of tool calls: {e}"),
                    )
                })?;
            vec![Message::Assistant(AssistantMessage {
                content: Some(None),
                tool_calls: Some(calls),
                ..AssistantMessage::default()
            })]
        }
        [] => {
            return Err(GatewayError::invalid(
                "missing_messages",
                "the body needs 'messages' (ending with the assistant message), 'message' \
                 (the assistant message) or 'tool_calls'",
            ));
        }
        many => {
            return Err(GatewayError::invalid(
                "invalid_body",
                format!(
                    "give one of 'messages', 'message', 'tool_calls', not {}",
                    many.join(" and ")
                ),
            ));
        }
    };
    let max = gw.config.limits.max_calls_per_message;
    if let Some((i, m)) = messages
        .iter()
        .enumerate()
        .find(|(_, m)| m.tool_calls().len() > max)
    {
        return Err(GatewayError::LimitExceeded(format!(
            "messages[{i}] has {} tool calls, more than limits.max_calls_per_message ({max})",
            m.tool_calls().len()
        )));
    }
    Ok(messages)
}

/// `"tools"`: the names that may run (strings, or definitions whose `function.name` is
/// taken).
fn only_of(request: &Value) -> Result<Option<Vec<String>>, GatewayError> {
    let Some(list) = request.get("tools").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let bad = || {
        GatewayError::invalid(
            "invalid_tools",
            "'tools' must be a list of tool names (or of tool definitions)",
        )
    };
    let names = list
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|t| {
            t.as_str()
                .or_else(|| t.pointer("/function/name").and_then(Value::as_str))
                .map(str::to_owned)
                .ok_or_else(bad)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(names))
}

/// `x-toolmend-outcomes`, as the chat path writes it: `executed=2 feedback=1;
/// tool_calls=3` (nonzero counts only; `none` without calls).
fn outcomes(out: &NodeOutput) -> String {
    use std::collections::BTreeMap;
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut sources: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &out.stats.calls {
        *outcomes.entry(c.outcome.as_str()).or_default() += 1;
        *sources.entry(c.source.as_str()).or_default() += 1;
    }
    if outcomes.is_empty() {
        return "none".to_owned();
    }
    let list = |m: &BTreeMap<&str, usize>| {
        m.iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!("{}; {}", list(&outcomes), list(&sources))
}

/// The answer: artifacts and metadata only in `results`, never in `messages` (what goes
/// back to the model).
fn body_of(out: NodeOutput) -> Value {
    let messages = out.messages();
    let results: Vec<Value> = out
        .results
        .iter()
        .map(|r| {
            json!({"call_id": r.call_id, "tool": r.tool, "status": r.status,
                "outcome": r.outcome, "fault": r.fault, "content": r.content,
                "artifact": r.artifact, "metadata": r.metadata})
        })
        .collect();
    json!({
        "assistant": Message::Assistant(out.assistant),
        "messages": messages,
        "results": results,
        "stats": out.stats,
    })
}
