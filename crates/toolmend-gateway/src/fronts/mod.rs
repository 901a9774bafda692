//! The fronts: one folder per wire API. A front converts its requests and answers to
//! the pipeline's neutral messages and back, and decides nothing about calls on its own.
//! Each uses `server` and `pipeline`. A translating front (`messages/`, `responses/`;
//! toward any upstream: `crate::upstreams` writes the chat request in the upstream's API)
//! converts its wire to a chat request and hands it to the chat
//! front's answer (`chat_completions::answer_whole`, `answer_streamed`): the one import
//! of a front by another, so the whole request and answer path runs once. `tools/` is
//! toolmend's own wire: `POST /v1/tools/execute`.

pub(crate) mod chat_completions;
pub(crate) mod messages;
pub(crate) mod responses;
pub(crate) mod tools;
pub(crate) mod translate;

use axum::http::{HeaderMap, header::AUTHORIZATION};
use serde_json::Value;

use crate::pipeline::guard::SessionHints;

/// The header a client names its session in.
pub(crate) const SESSION_HEADER: &str = "x-toolmend-session";

/// The session hints of an HTTP request with a JSON body (`user`, `metadata`), as the
/// chat and tools fronts read them.
pub(crate) fn session_hints<'a>(headers: &'a HeaderMap, body: &'a Value) -> SessionHints<'a> {
    let blank = |s: &'a str| Some(s.trim()).filter(|s| !s.is_empty());
    SessionHints {
        header: headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(blank),
        user: body.get("user").and_then(Value::as_str).and_then(blank),
        metadata: body.get("metadata").filter(|m| m.is_object()),
        api_key: headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .and_then(blank),
    }
}
