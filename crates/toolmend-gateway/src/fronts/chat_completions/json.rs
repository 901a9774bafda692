//! The JSON answer (`stream` off): the completion fetched whole, each choice's message
//! planned by the pipeline (choice 0 also through the resolve chain, the guard and the
//! round trip), written back only where something changed; the upstream's own bytes go
//! out when nothing did. With server-side tools, an answer that calls them is answered
//! by the gateway and the upstream asked again (each round a request of this wire),
//! until the answer calls none: the client gets only that one.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    body::Bytes,
    http::header,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use toolmend::{
    FixKind, Toolbox,
    conversation::AssistantMessage,
    drive::{GuardTally, Resolved, Tally},
};

use crate::{
    config::{ReasoningPolicy, UpstreamApi},
    fronts::chat_completions::{exchange::Exchange, wire},
    metrics as m,
    pipeline::{plan::plan_only, reasoning, report::Summary, round_trip::Round},
    server::{error::GatewayError, headers},
    upstreams,
};

/// The final answer to a request, before it is written (as JSON by [`respond`], as SSE
/// by `sse::replay`).
pub(crate) struct Answer {
    /// The completion as the upstream sent it (what goes out when nothing changed).
    pub(crate) raw: Bytes,
    /// The completion, mended; `None` when it was read without a tree (one choice that
    /// needed nothing written: `raw` is the answer). [`Answer::take_response`] reads it.
    response: Option<Value>,
    /// Read without a tree, the completion had a `toolmend` member of its own.
    raw_has_account: bool,
    /// True when `response` differs from `raw`.
    pub(crate) changed: bool,
    /// The `x-toolmend-*` headers.
    pub(crate) headers: Vec<(&'static str, String)>,
    /// What the closing report of a replayed stream is made of ([`Answer::report`]):
    /// built only where a stream is written, not for every JSON answer.
    pub(crate) summary: Summary,
    /// The request path's note (`x-toolmend-history`).
    pub(crate) history: Option<String>,
    /// The round trip's account, with server-side tools.
    pub(crate) round_trip: Option<Value>,
    /// `calls.account` is on: the `toolmend` object is written from `summary`
    /// ([`Answer::account`], or straight into the answer's bytes).
    pub(crate) with_account: bool,
    /// The client's own body went upstream (`upstreams::Original`).
    pub(crate) passed_through: bool,
}

/// The JSON answer to `ex`. `unchanged`: the client's body when the request path changed
/// nothing in it (sent as it came, no second serialization).
pub(crate) async fn respond(
    ex: Exchange,
    unchanged: Option<Bytes>,
) -> Result<Response, GatewayError> {
    let mut a = answer(ex, unchanged).await?;
    // Only a chat completion (a `choices` list) gets it; other JSON passes as it came.
    let with_account = a.with_account
        && a.response
            .as_ref()
            .is_none_or(|r| r.get("choices").is_some_and(Value::is_array));
    let has_account = a
        .response
        .as_ref()
        .map_or(a.raw_has_account, |r| r.get(ACCOUNT_KEY).is_some());
    let notes = a.notes();
    // Nothing mended: the upstream's own bytes go out (no second serialization), the
    // account written at their end.
    let spliced = match with_account {
        true if !a.changed && !has_account => splice(
            &a.raw,
            &a.summary.account_view(&notes, a.round_trip.as_ref()),
        ),
        false if !a.changed => Some(a.raw.clone()),
        _ => None,
    };
    let mut out = match spliced {
        Some(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        None => {
            let account = with_account.then(|| {
                let view = a.summary.account_view(&notes, a.round_trip.as_ref());
                serde_json::to_value(view).unwrap_or(Value::Null)
            });
            let mut response = a.take_response()?;
            if let Some(account) = account {
                response[ACCOUNT_KEY] = account;
            }
            axum::Json(response).into_response()
        }
    };
    headers::set_headers(out.headers_mut(), a.headers);
    Ok(out)
}

impl Answer {
    /// The completion, mended, as a tree (read from `raw` when it was not built).
    ///
    /// # Errors
    ///
    /// `UpstreamInvalidJson` when `raw` is not JSON (never, once it was read as a view).
    pub(crate) fn take_response(&mut self) -> Result<Value, GatewayError> {
        match self.response.take() {
            Some(r) => Ok(r),
            None => read_completion(&self.raw),
        }
    }

    /// The request path's note, as the report and the account read it.
    fn notes(&self) -> crate::pipeline::request::RequestNotes {
        crate::pipeline::request::RequestNotes {
            history: self.history.clone(),
            changed: false,
        }
    }

    /// The `toolmend` object, when `calls.account` is on: the summary's account, the
    /// round trip's as its last member.
    pub(crate) fn account(&self) -> Option<Value> {
        self.with_account.then(|| {
            let notes = self.notes();
            serde_json::to_value(self.summary.account_view(&notes, self.round_trip.as_ref()))
                .unwrap_or(Value::Null)
        })
    }

    /// The same counts as the headers, as JSON: the report at the end of a stream.
    pub(crate) fn report(&self) -> Value {
        let notes = self.notes();
        let mut report = self.summary.to_json(&notes);
        if let Some(trip) = &self.round_trip {
            report["round_trip"] = trip.clone();
        }
        report
    }
}

/// The key of the account in a completion and in a stream's last chunk.
pub(crate) const ACCOUNT_KEY: &str = "toolmend";

/// `raw` (a JSON object) with `"toolmend": account` added as its last member, its other
/// bytes as they came; `None` when `raw` does not end with the object's `}`.
fn splice(raw: &Bytes, account: &impl serde::Serialize) -> Option<Bytes> {
    let end = raw.iter().rposition(|b| !b.is_ascii_whitespace())?;
    if raw[end] != b'}' {
        return None;
    }
    let start = raw.iter().position(|b| !b.is_ascii_whitespace())?;
    let empty = raw[start + 1..end].iter().all(u8::is_ascii_whitespace);
    let mut out = Vec::with_capacity(raw.len() + 512);
    out.extend_from_slice(&raw[..end]);
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(format!("\"{ACCOUNT_KEY}\":").as_bytes());
    serde_json::to_writer(&mut out, account).ok()?;
    out.extend_from_slice(&raw[end..]);
    Some(Bytes::from(out))
}

/// The final answer to `ex`: the upstream asked, its answer planned, and with
/// server-side tools as many rounds as it takes.
pub(crate) async fn answer(
    mut ex: Exchange,
    mut unchanged: Option<Bytes>,
) -> Result<Answer, GatewayError> {
    let gw = Arc::clone(&ex.gw);
    let pipeline = &gw.pipeline;
    let mut upstream_time = Duration::ZERO;
    let mut trip = pipeline.round_trip(&ex.request_id, ex.started);
    // What the guard did and what the resolve chain cost, over every round.
    let mut guard = GuardTally::default();
    let mut tally = Tally::default();
    let api = gw.upstream.api();
    let passed_through = ex.original.is_some();
    loop {
        let t = Instant::now();
        let outgoing = if api == UpstreamApi::ChatCompletions {
            match unchanged.take() {
                Some(body) => gw.upstream.post_bytes(wire::PATH, &ex.headers, body),
                None => gw
                    .upstream
                    .post(wire::PATH, &ex.headers, &*ex.request.full()?),
            }
        } else {
            // The first round's request goes as the client sent it when it can.
            let body = match ex.original.take() {
                Some(original) => original.body,
                // Written from the request where it stands: no copy of it.
                None => {
                    let request = ex.request.full()?;
                    upstreams::request_for(api, &request).unwrap_or_else(|| request.into_owned())
                }
            };
            gw.upstream.post(upstreams::path(api), &ex.headers, &body)
        };
        // The upstream call and the rounds are boxed: inlined, their futures made this
        // one (and every future around it, up to axum's handler) kilobytes larger, and
        // each of those is moved a few times per request.
        let fetch = Box::pin(gw.upstream.fetch(outgoing));
        let raw = match trip.as_mut() {
            // A later round: within what is left of round_trip.max_secs.
            Some(trip) if trip.rounds > 0 => trip.bounded(fetch).await?,
            _ => fetch.await?,
        };
        upstream_time += t.elapsed();
        // Where the server-side tools' call-initiation latency starts.
        let answered_at = Instant::now();
        let mut summary = Summary {
            guard: std::mem::take(&mut guard),
            resolve: std::mem::take(&mut tally),
            ..Summary::default()
        };
        let mut changed = false;
        // One choice and no round trip: read without a tree first (one is built only
        // when something is written back).
        let viewed = if api == UpstreamApi::ChatCompletions
            && trip.is_none()
            && !gw.config.calls.opens_thinking()
        {
            plan_viewed(&ex, &raw, &mut summary, &mut upstream_time).await?
        } else {
            None
        };
        let (mut raw, mut response, mut first, viewed) = match viewed {
            Some(mut v) => (raw, None, v.first.take(), Some(v)),
            None => {
                let (raw, mut response) = if api == UpstreamApi::ChatCompletions {
                    let response = read_completion(&raw)?;
                    (raw, response)
                } else {
                    // The upstream's answer read as a completion: that is what "as it
                    // came" is for the chat front from here on.
                    let response = upstreams::completion_from(api, &raw)?;
                    (Bytes::from(response.to_string()), response)
                };
                let first = plan_choices(
                    &ex,
                    &mut response,
                    &mut summary,
                    &mut upstream_time,
                    &mut changed,
                )
                .await?;
                (raw, Some(response), first, None)
            }
        };
        if let (Some(trip), Some(toolbox)) = (trip.as_mut(), ex.toolbox.clone())
            && let Some(mended) = first.take()
        {
            match Box::pin(pipeline.round(trip, &ex.history, &toolbox, mended, answered_at)).await?
            {
                Round::Final(mended) => first = Some(*mended),
                Round::Again(history) => {
                    wire::next_round(ex.request.tree_mut()?, &history);
                    ex.history = history;
                    guard = summary.guard;
                    tally = summary.resolve;
                    continue;
                }
            }
        }
        if let (Some(mended), Some(toolbox)) = (&first, &ex.toolbox) {
            summary.choice = 0;
            match (response.as_mut(), &viewed) {
                (Some(tree), _) => {
                    changed |=
                        write_choice(&mut tree["choices"][0], mended, &mut summary, toolbox, &ex);
                }
                (None, Some(v)) if !writes(mended, v.finish_reason.as_deref()) => {
                    count_choice(mended, &mut summary, toolbox, &ex);
                }
                // Read without a tree: only the choice is read as one, written and put
                // back in the upstream's bytes where it stood.
                (None, Some(v)) => {
                    let mut choice = read_completion(&raw[v.choice.clone()])?;
                    if write_choice(&mut choice, mended, &mut summary, toolbox, &ex) {
                        raw = replace_span(&raw, v.choice.clone(), &choice)?;
                    }
                }
                // (Not reached: an answer is read as a tree or as a view.)
                (None, None) => {
                    let tree = response.insert(read_completion(&raw)?);
                    changed |=
                        write_choice(&mut tree["choices"][0], mended, &mut summary, toolbox, &ex);
                }
            }
        }
        let tool_time = trip.as_ref().map_or(Duration::ZERO, |t| t.tool_time);
        m::request(
            "ok",
            ex.started
                .elapsed()
                .saturating_sub(upstream_time + tool_time),
            upstream_time,
        );
        let mut headers = summary.headers(&ex.notes);
        let round_trip = trip.as_ref().map(|trip| {
            headers.push(trip.header());
            trip.to_json()
        });
        return Ok(Answer {
            raw,
            response,
            raw_has_account: viewed.is_some_and(|v| v.has_account),
            changed,
            headers,
            summary,
            history: ex.notes.history.clone(),
            round_trip,
            with_account: gw.config.calls.account,
            passed_through,
        });
    }
}

/// Plans every choice of `response`: choices after the first are written back (and
/// counted) here; choice 0 is planned, resolved and guarded, and returned for the round
/// trip to decide on (`None` when the answer is not mended).
async fn plan_choices(
    ex: &Exchange,
    response: &mut Value,
    summary: &mut Summary,
    upstream_time: &mut Duration,
    changed: &mut bool,
) -> Result<Option<Resolved>, GatewayError> {
    let pipeline = &ex.gw.pipeline;
    // Only a completion's `choices` list is mended; any other JSON passes as it came (an
    // array or a string at the top used to panic on the way back).
    let Some(choices) = response.get_mut("choices").and_then(Value::as_array_mut) else {
        return Ok(None);
    };
    let Some(toolbox) = &ex.toolbox else {
        // Nothing to plan (no tools): only the reasoning policy applies.
        if ex.gw.config.calls.mend {
            let policy = ex.gw.config.calls.reasoning_policy();
            for message in choices.iter_mut().filter_map(|c| c.get_mut("message")) {
                if ex.gw.config.calls.opens_thinking() {
                    wire::open_thinking_in_prompt(message);
                }
                *changed |= reason_alone(message, policy, summary);
            }
        }
        return Ok(None);
    };
    let mut first = None;
    for (i, choice) in choices.iter_mut().enumerate() {
        if ex.gw.config.calls.opens_thinking() {
            wire::open_thinking_in_prompt(&mut choice["message"]);
        }
        let Ok(message) = <AssistantMessage as serde::Deserialize>::deserialize(&choice["message"])
        else {
            continue;
        };
        let cut_off = wire::cut_off(choice["finish_reason"].as_str());
        if i > 0 {
            let planned = plan_only(&message, &ex.history, toolbox, &pipeline.plan, cut_off);
            summary.choice = i;
            *changed |= write_choice(choice, &planned, summary, toolbox, ex);
            continue;
        }
        first = Some(answer_first(ex, &message, cut_off, toolbox, summary, upstream_time).await?);
    }
    Ok(first)
}

/// The reasoning policy on a message no plan runs on (a request without tools): its text
/// content's thinking moved to `reasoning_content` or dropped. True when it changed.
pub(crate) fn reason_alone(
    message: &mut Value,
    policy: ReasoningPolicy,
    summary: &mut Summary,
) -> bool {
    if policy == ReasoningPolicy::Keep {
        return false;
    }
    let Some((moved, content)) = message["content"]
        .as_str()
        .and_then(|t| reasoning::split(t, None))
    else {
        return false;
    };
    message["content"] = json!(content);
    if policy == ReasoningPolicy::Move {
        wire::put_reasoning(message, &moved);
        summary.reasoning = Some("moved");
    } else {
        summary.reasoning = Some("dropped");
    }
    true
}

/// Counts `mended`'s calls into `summary` and logs them: what every choice gets, written
/// back or not.
fn count_choice(mended: &Resolved, summary: &mut Summary, toolbox: &Toolbox, ex: &Exchange) {
    summary.add(mended, toolbox, &ex.gw.pipeline.labels);
    ex.log_calls(mended, toolbox);
}

/// True when [`write_choice`] would change a choice whose `finish_reason` is `finish`:
/// the message was mended, or the client gets another `finish_reason`.
fn writes(mended: &Resolved, finish: Option<&str>) -> bool {
    let has_calls = mended
        .message
        .tool_calls
        .as_ref()
        .is_some_and(|c| !c.is_empty());
    mended.changed
        || wire::finish_reason(finish, has_calls, mended.calls.iter().any(|c| c.from_text))
            .is_some_and(|f| finish != Some(f))
}

/// `raw` with the bytes at `span` replaced by `value`, written compact.
fn replace_span(
    raw: &Bytes,
    span: std::ops::Range<usize>,
    value: &Value,
) -> Result<Bytes, GatewayError> {
    let mut out = Vec::with_capacity(raw.len() + 256);
    out.extend_from_slice(&raw[..span.start]);
    serde_json::to_writer(&mut out, value)
        .map_err(|e| GatewayError::UpstreamInvalidJson(e.to_string()))?;
    out.extend_from_slice(&raw[span.end..]);
    Ok(Bytes::from(out))
}

/// The upstream's completion (or a part of it) as a tree.
fn read_completion(raw: &[u8]) -> Result<Value, GatewayError> {
    serde_json::from_slice(raw).map_err(|e| GatewayError::UpstreamInvalidJson(e.to_string()))
}

/// A completion read without a tree: only what planning reads (each choice's message as
/// its bytes, its `finish_reason`) and whether it has a `toolmend` member; every other
/// member is skipped unread. A duplicated member fails the read: the tree decides then.
#[derive(serde::Deserialize)]
struct CompletionView<'a> {
    #[serde(borrow)]
    choices: Option<Vec<&'a serde_json::value::RawValue>>,
    /// A `toolmend` member, whatever its value (`null` too: the tree would replace it).
    #[serde(default, deserialize_with = "wire::present")]
    toolmend: bool,
}

#[derive(serde::Deserialize)]
struct ChoiceView<'a> {
    #[serde(borrow)]
    message: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

/// A message's text content, when it is a string (the reasoning policy reads it).
#[derive(serde::Deserialize)]
struct ContentView<'a> {
    #[serde(borrow)]
    content: Option<&'a serde_json::value::RawValue>,
}

/// Choice 0 through the pipeline: planned, resolved and guarded. Re-asks are time
/// upstream, corrections time at the correction model (added to `upstream_time`; the
/// checks themselves are ours).
async fn answer_first(
    ex: &Exchange,
    message: &AssistantMessage,
    cut_off: bool,
    toolbox: &Toolbox,
    summary: &mut Summary,
    upstream_time: &mut Duration,
) -> Result<Resolved, GatewayError> {
    // Boxed for the same reason as the upstream call in [`answer`].
    let (answered, took) = Box::pin(ex.gw.pipeline.answer(
        message,
        cut_off,
        &ex.history,
        toolbox,
        ex.session(),
        ex,
        summary,
    ))
    .await?;
    *upstream_time += took;
    Ok(answered)
}

/// What [`plan_viewed`] read and planned.
struct Viewed {
    /// Choice 0, planned, resolved and guarded (`None` without tools).
    first: Option<Resolved>,
    /// Where the choice's bytes are in the completion's.
    choice: std::ops::Range<usize>,
    finish_reason: Option<String>,
    has_account: bool,
}

/// The answer planned without a tree, where that reads the same as [`plan_choices`]: a
/// completion with exactly one choice whose message reads as an assistant message. `None`
/// sends the answer the tree's way (more choices, no message, anything unusual, and
/// without tools a reasoning policy that has something to move).
async fn plan_viewed(
    ex: &Exchange,
    raw: &[u8],
    summary: &mut Summary,
    upstream_time: &mut Duration,
) -> Result<Option<Viewed>, GatewayError> {
    if !wire::is_object(raw) {
        return Ok(None);
    }
    let Ok(view) = serde_json::from_slice::<CompletionView<'_>>(raw) else {
        return Ok(None);
    };
    let has_account = view.toolmend;
    let Some([choice]) = view.choices.as_deref() else {
        return Ok(None);
    };
    // Its place in `raw` (the view borrows from it; anything else goes the tree's way).
    let start = (choice.get().as_ptr() as usize).wrapping_sub(raw.as_ptr() as usize);
    let span = start..start + choice.get().len();
    if !wire::is_object(choice.get().as_bytes())
        || raw
            .get(span.clone())
            .is_none_or(|b| b != choice.get().as_bytes())
    {
        return Ok(None);
    }
    let Ok(choice) = serde_json::from_str::<ChoiceView<'_>>(choice.get()) else {
        return Ok(None);
    };
    let Some(message) = choice.message else {
        return Ok(None);
    };
    let finish_reason = choice.finish_reason.as_deref().map(str::to_owned);
    let Some(toolbox) = &ex.toolbox else {
        // Without tools only the reasoning policy applies: a text it would split goes the
        // tree's way.
        let calls = &ex.gw.config.calls;
        if calls.mend && calls.reasoning_policy() != ReasoningPolicy::Keep {
            let Ok(m) = serde_json::from_str::<ContentView<'_>>(message.get()) else {
                return Ok(None);
            };
            if let Some(text) = m.content.filter(|c| c.get().starts_with('"')) {
                let Ok(text) = serde_json::from_str::<std::borrow::Cow<'_, str>>(text.get()) else {
                    return Ok(None);
                };
                if reasoning::split(&text, None).is_some() {
                    return Ok(None);
                }
            }
        }
        return Ok(Some(Viewed {
            first: None,
            choice: span,
            finish_reason,
            has_account,
        }));
    };
    let Ok(message) = serde_json::from_str::<AssistantMessage>(message.get()) else {
        return Ok(None);
    };
    let cut_off = wire::cut_off(finish_reason.as_deref());
    let answered = answer_first(ex, &message, cut_off, toolbox, summary, upstream_time).await?;
    Ok(Some(Viewed {
        first: Some(answered),
        choice: span,
        finish_reason,
        has_account,
    }))
}

/// Writes `mended` into `choice` (its message where it changed, the `finish_reason` the
/// client gets) and counts it. True when the choice changed.
pub(crate) fn write_choice(
    choice: &mut Value,
    mended: &Resolved,
    summary: &mut Summary,
    toolbox: &Toolbox,
    ex: &Exchange,
) -> bool {
    count_choice(mended, summary, toolbox, ex);
    let mut changed = false;
    if mended.changed {
        // The plan took reasoning out of the content: moved, it is what the core strips.
        let stripped = mended
            .message_fixes
            .iter()
            .any(|f| f.kind == FixKind::ThinkingStripped);
        let moved = match ex.gw.config.calls.reasoning_policy() {
            ReasoningPolicy::Move if stripped => {
                let text =
                    <AssistantMessage as serde::Deserialize>::deserialize(&choice["message"])
                        .ok()
                        .and_then(|m| m.text());
                // As the streaming gate strips it: before where calls begin.
                let names: Vec<&str> = toolbox.names().collect();
                text.and_then(|t| reasoning::split(&t, Some(&names)))
                    .map(|(r, _)| r)
            }
            _ => None,
        };
        choice["message"] = serde_json::to_value(&mended.message).unwrap_or(Value::Null);
        if stripped {
            summary.reasoning = Some(if moved.is_some() { "moved" } else { "dropped" });
        }
        if let Some(r) = moved {
            wire::put_reasoning(&mut choice["message"], &r);
        }
        changed = true;
    }
    let finish_before = choice["finish_reason"].clone();
    let has_calls = mended
        .message
        .tool_calls
        .as_ref()
        .is_some_and(|c| !c.is_empty());
    if let Some(f) = wire::finish_reason(
        choice["finish_reason"].as_str(),
        has_calls,
        mended.calls.iter().any(|c| c.from_text),
    ) {
        choice["finish_reason"] = json!(f);
    }
    changed | (choice["finish_reason"] != finish_before)
}
