//! The plan of one assistant message: which calls it holds, under which ids, mended how,
//! and what its content becomes. Pure and deterministic; every front calls it.

use std::{
    borrow::Cow,
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use serde_json::Value;

use super::{
    CallOutcome, CallSource,
    extract::{self, TextCall},
    ids::{IdAllocator, IdSet, is_blank_id, is_too_long},
};
use crate::{
    Fix, FixKind, MendOptions,
    conversation::{AssistantMessage, Content, Message, ToolCall},
    mend::{self, MendedCall, Outcome},
    repair::markers,
    schema::{Toolbox, ValidationContext},
};

/// A call as the front received it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SentCall<'a> {
    /// Its id, if it had one (blank counts as none).
    pub id: Option<&'a str>,
    /// The tool name sent.
    pub name: &'a str,
    /// Its arguments: text to repair, or a value a framework already parsed.
    pub arguments: Args<'a>,
}

/// A call's arguments as sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Args<'a> {
    /// The argument text (OpenAI's `function.arguments`, LangChain's `invalid_tool_calls`).
    Text(&'a str),
    /// Arguments already parsed (LangChain's `tool_calls[].args`): coerced and validated,
    /// never text-repaired.
    Value(&'a Value),
}

impl<'a> From<&'a ToolCall> for SentCall<'a> {
    fn from(tc: &'a ToolCall) -> Self {
        SentCall {
            id: tc.id.as_deref(),
            name: &tc.name,
            arguments: Args::Text(&tc.arguments),
        }
    }
}

/// Which tools may run a call whose text was cut off, on what could be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AcceptTruncated {
    /// None: a cut-off call is answered with a `truncated` issue (the default).
    #[default]
    None,
    /// Every tool.
    All,
    /// These tools.
    Only(HashSet<String>),
}

impl AcceptTruncated {
    /// True when `tool` runs cut-off calls.
    pub fn accepts(&self, tool: &str) -> bool {
        match self {
            AcceptTruncated::None => false,
            AcceptTruncated::All => true,
            AcceptTruncated::Only(tools) => tools.contains(tool),
        }
    }
}

/// How a front plans; built once per front.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Repair and coercion options.
    pub mend: MendOptions,
    /// Read calls written into the text when the message sent no calls (default on).
    pub calls_in_text: bool,
    /// Remove reasoning (`<think>…</think>`) leaked into the content (default on).
    pub strip_thinking: bool,
    /// Which tools run cut-off calls.
    pub accept_truncated: AcceptTruncated,
    /// Let a corrector see calls whose only problem is a missing required value (default
    /// off: it would have to invent the value).
    pub correct_missing_fields: bool,
    /// Tools mended with options of their own (other coercions: a tool no other
    /// validator checks may take every coercion), by name; the rest take `mend`.
    pub tool_mend: HashMap<String, MendOptions>,
}

impl PlanOptions {
    /// The mending options for calls to `tool`.
    pub fn mend_for(&self, tool: &str) -> &MendOptions {
        self.tool_mend.get(tool).unwrap_or(&self.mend)
    }
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            mend: MendOptions::default(),
            calls_in_text: true,
            strip_thinking: true,
            accept_truncated: AcceptTruncated::None,
            correct_missing_fields: false,
            tool_mend: HashMap::new(),
        }
    }
}

/// One assistant message, in the core's terms.
#[derive(Debug, Clone, Default)]
pub struct MessageInput<'a> {
    /// Its text content (parts joined), if any.
    pub text: Option<Cow<'a, str>>,
    /// Its calls, in order.
    pub calls: Vec<SentCall<'a>>,
    /// Its index in the conversation (minted ids name it).
    pub position: usize,
    /// The model stopped at its token limit (`finish_reason: "length"`): the last call
    /// may be incomplete even where its text closes.
    pub cut_off: bool,
}

/// The ids around the message.
#[derive(Clone, Copy)]
pub struct Around<'a> {
    /// Ids the conversation used before the message (calls and results): a call reusing
    /// one gets a new id (providers want ids unique in a history).
    pub earlier: &'a dyn IdSet,
    /// Ids answered by the results right after the message: those calls are not planned
    /// again.
    pub answered: &'a dyn IdSet,
}

impl std::fmt::Debug for Around<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Around")
    }
}

/// One planned call.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCall {
    /// The sent call it came from: its index in the message's calls (or, for calls read
    /// from the text, in [`Shape::text_calls`]).
    pub index: usize,
    /// The id it is answered under; `None` for a dropped call.
    pub id: Option<String>,
    /// The id the model sent, when a new one replaced it or the call was dropped.
    pub original_id: Option<String>,
    /// Where it came from.
    pub source: CallSource,
    /// One of several calls glued into one argument text.
    pub split: bool,
    /// The mended call: tool, arguments, fixes (the id's among them), issues.
    pub call: MendedCall,
    /// `executed` (may run), `feedback` or `dropped`; later stages may change it.
    pub outcome: CallOutcome,
    /// Worth asking a corrector about (see [`correctable`]).
    pub correctable: bool,
    /// The arguments the sanitized message carries instead of the sent ones (mended, as
    /// valid JSON text); `None` keeps the model's own text, byte for byte.
    pub arguments_text: Option<String>,
    /// Why it was dropped.
    pub note: Option<String>,
    /// Time repair and validation took (the first part of a glued call holds it).
    pub mend_time: Duration,
}

impl PlannedCall {
    /// True when the call may run: mended to valid and with an id.
    pub fn is_runnable(&self) -> bool {
        self.id.is_some() && self.outcome.may_run()
    }
}

/// A call of the message the results right after it answer: not planned again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnsweredCall {
    /// Its index in the message's calls.
    pub index: usize,
    /// Its id.
    pub id: String,
}

/// What becomes of the message besides its calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shape {
    /// The calls were read from the text (the message sent none).
    pub from_text: bool,
    /// The calls read from the text, without ids; their arguments are JSON text.
    pub text_calls: Vec<ToolCall>,
    /// The content's new text when it changes (thinking removed; for calls read from the
    /// text, the prose before them, `None` when there is none).
    pub content: Option<Option<String>>,
    /// Fixes of the message itself (thinking stripped, calls moved from the text).
    pub message_fixes: Vec<Fix>,
}

/// The plan of one message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessagePlan {
    /// One entry per call, glued calls split, in order; dropped calls included.
    pub calls: Vec<PlannedCall>,
    /// Calls the results after the message answer already.
    pub answered: Vec<AnsweredCall>,
    /// The content and the message's own fixes.
    pub shape: Shape,
}

impl MessagePlan {
    /// True when the sanitized message differs from the sent one.
    pub fn changes_message(&self) -> bool {
        self.shape.from_text
            || self.shape.content.is_some()
            || self.calls.iter().any(|c| {
                c.id.is_none()
                    || c.original_id.is_some()
                    || c.arguments_text.is_some()
                    || c.call.fixes.first().is_some_and(|f| {
                        matches!(f.kind, FixKind::CallIdMinted | FixKind::CallIdRenamed)
                    })
                    || c.split
                    || c.source != CallSource::ToolCalls
            })
    }
}

/// Plans `input`: extract (its calls, or calls written into its text), settle ids (the
/// rule of [`super::ids`]), mend each against `tools` (glued calls split), mark cut-off
/// calls, decide what may be corrected, and shape the content.
pub fn plan(
    input: &MessageInput<'_>,
    around: Around<'_>,
    tools: &Toolbox,
    opts: &PlanOptions,
    ctx: &ValidationContext<'_>,
) -> MessagePlan {
    let mut shape = Shape::default();
    let text = input.text.as_deref().filter(|t| !t.trim().is_empty());
    let stripped = match text {
        Some(t) if opts.strip_thinking => {
            let names: Vec<&str> = tools.names().collect();
            extract::strip_thinking_before_calls_named(t, &names)
        }
        _ => None,
    };
    // Calls are read outside the reasoning: a call the model only thought about (inside
    // a block, closed or not) is no call, as a stream's gate never holds it. From where
    // calls begin the text is theirs: a tag in an argument stays.
    let read: Vec<TextCall> = match stripped.as_deref().or(text) {
        Some(t) if input.calls.is_empty() && opts.calls_in_text && !tools.is_empty() => {
            extract::read_calls_in_str(t, tools, &opts.mend.repair)
        }
        _ => Vec::new(),
    };
    shape.from_text = !read.is_empty();
    let (text_calls, read_fixes): (Vec<ToolCall>, Vec<Vec<Fix>>) =
        read.into_iter().map(|t| (t.call, t.fixes)).unzip();
    let from_text: Vec<SentCall<'_>>;
    let (calls, source): (&[SentCall<'_>], CallSource) = if shape.from_text {
        from_text = text_calls.iter().map(SentCall::from).collect();
        (&from_text, CallSource::Text)
    } else {
        (&input.calls, CallSource::ToolCalls)
    };

    let own = IdIndex::new(
        calls
            .iter()
            .filter_map(|c| c.id.filter(|id| !is_blank_id(id))),
    );
    // New ids take none of the history's, none answered after the message, none of the
    // message's own (a later call's included).
    let taken = Taken { around, own: &own };
    let mut ids = IdAllocator::new(&taken);
    // The first call of the message with each id (a later one with the same id repeats it).
    let mut first_of = FirstOf::new(calls.len());
    let mut out = MessagePlan {
        calls: Vec::with_capacity(calls.len()),
        ..MessagePlan::default()
    };
    let last = calls.len().saturating_sub(1);
    for (k, sent) in calls.iter().enumerate() {
        let t0 = Instant::now();
        let usable = sent.id.filter(|id| !is_blank_id(id));
        let (id, original_id, id_fix) = match (usable, source) {
            (Some(id), CallSource::ToolCalls) => {
                if let Some(first) = first_of.get(calls, k, id) {
                    if calls[first].name == sent.name && calls[first].arguments == sent.arguments {
                        out.calls.push(dropped(
                            k,
                            sent,
                            source,
                            "an exact repeat of an earlier call with the same id",
                        ));
                        continue;
                    }
                    let new = ids.renamed(id);
                    let fix = renamed_fix(id, &new, "another call of the message has it");
                    (new, Some(id.to_owned()), Some(fix))
                } else if around.answered.contains(id) {
                    first_of.insert(id, k);
                    out.answered.push(AnsweredCall {
                        index: k,
                        id: id.to_owned(),
                    });
                    continue;
                } else if around.earlier.contains(id) {
                    first_of.insert(id, k);
                    let new = ids.renamed(id);
                    let fix = renamed_fix(id, &new, "an earlier turn used it");
                    (new, Some(id.to_owned()), Some(fix))
                } else if is_too_long(id) {
                    first_of.insert(id, k);
                    let new = ids.renamed(id);
                    let fix = renamed_fix(id, &new, "longer than 40 characters");
                    (new, Some(id.to_owned()), Some(fix))
                } else {
                    first_of.insert(id, k);
                    (id.to_owned(), None, None)
                }
            }
            _ => {
                let new = ids.minted(input.position, k);
                let why = if source == CallSource::Text {
                    "read from the text"
                } else {
                    "the call had no id"
                };
                let fix = Fix::on(FixKind::CallIdMinted, "", format!("{new}: {why}"));
                (new, sent.id.map(str::to_owned), Some(fix))
            }
        };
        let mend_opts = opts.mend_for(sent.name);
        let parts = match sent.arguments {
            Args::Text(t) => mend::mend_named_in(sent.name, t, tools, mend_opts, ctx).calls,
            Args::Value(v) => mend::mend_parsed_in(sent.name, v, tools, mend_opts, ctx),
        };
        let mend_time = t0.elapsed();
        let split = parts.len() > 1;
        let n_parts = parts.len();
        for (j, mut call) in parts.into_iter().enumerate() {
            // What reading the call out of the text took (a lossy fix among them: the
            // text was cut off) belongs to its record, before the argument fixes.
            if let Some(fixes) = read_fixes.get(k) {
                mend::with_prior_fixes(&mut call, fixes);
            }
            if input.cut_off && k == last && j + 1 == n_parts {
                mend::cut_off_at_token_limit(&mut call);
            }
            if !opts.accept_truncated.accepts(&call.tool) {
                mend::refuse_lossy(&mut call);
            }
            let (part_id, part_original, part_source) = if j == 0 {
                if let Some(fix) = &id_fix {
                    call.fixes.insert(0, fix.clone());
                }
                (id.clone(), original_id.clone(), source)
            } else {
                let new = ids.renamed(&id);
                call.fixes.insert(
                    0,
                    Fix::on(
                        FixKind::CallIdMinted,
                        "",
                        format!("{new}: glued after call {id}"),
                    ),
                );
                (new, None, CallSource::Glued)
            };
            // Mended arguments go into the sanitized message as valid JSON text; a call
            // valid as sent keeps the model's bytes (prompt caches key on them); a glued
            // part carries its own reading, even as feedback.
            let arguments_text = if call.outcome == Outcome::Repaired || split {
                call.arguments.as_ref().map(Value::to_string)
            } else {
                None
            };
            let outcome = if call.outcome.is_runnable() {
                CallOutcome::Executed
            } else {
                CallOutcome::Feedback
            };
            let correctable =
                outcome == CallOutcome::Feedback && correctable(&call, opts.correct_missing_fields);
            out.calls.push(PlannedCall {
                index: k,
                id: Some(part_id),
                original_id: part_original,
                source: part_source,
                split,
                call,
                outcome,
                correctable,
                arguments_text,
                note: None,
                mend_time: if j == 0 { mend_time } else { Duration::ZERO },
            });
        }
    }

    // With no call read the text is all prose: its reasoning goes wherever it stands.
    let stripped = match text {
        Some(t) if opts.strip_thinking && !shape.from_text => extract::strip_thinking(t),
        _ => stripped,
    };
    if stripped.is_some() {
        shape.message_fixes.push(thinking_stripped());
    }
    // The tokens that frame a reply (Kimi K3's `<|open|>response<|sep|>` …) are the
    // template's, not the prose's.
    let base = stripped.as_deref().or(text).unwrap_or_default();
    let unframed = markers::unframe_reply(base);
    if unframed.is_some() {
        shape.message_fixes.push(Fix::on(
            FixKind::SpecialTokensStripped,
            "",
            "the chat-template tokens that frame the reply removed from the content",
        ));
    }
    if shape.from_text {
        let base = unframed.unwrap_or(base);
        let names: Vec<&str> = text_calls.iter().map(|c| c.name.as_str()).collect();
        shape.content = Some(extract::prose_before(base, &names));
        shape.message_fixes.push(Fix::on(
            FixKind::CallsMovedFromText,
            "",
            "the content keeps the prose before the first call",
        ));
        if markers::first_call_marker(base)
            .is_some_and(|at| markers::dsml_junk_start(base, at) < at)
        {
            shape.message_fixes.push(Fix::on(
                FixKind::SpecialTokensStripped,
                "",
                "a damaged DSML token before the calls removed from the content",
            ));
        }
    } else if let Some(u) = unframed {
        shape.content = Some((!u.is_empty()).then(|| u.to_owned()));
    } else if let Some(s) = stripped {
        shape.content = Some(Some(s));
    }
    shape.text_calls = text_calls;
    out.shape = shape;
    out
}

/// The message fix for reasoning removed from the content (a streaming front that strips
/// it as the text passes records the same fix).
pub fn thinking_stripped() -> Fix {
    Fix::on(
        FixKind::ThinkingStripped,
        "",
        "reasoning removed from the message content",
    )
}

/// Plans the assistant message `message`, which follows `before` and is followed by
/// `after` in a chat-completions conversation (`after` empty for a fresh answer).
pub fn plan_assistant(
    message: &AssistantMessage,
    before: &[Message],
    after: &[Message],
    cut_off: bool,
    tools: &Toolbox,
    opts: &PlanOptions,
    ctx: &ValidationContext<'_>,
) -> MessagePlan {
    let sent = message.tool_calls.as_deref().unwrap_or(&[]);
    let input = MessageInput {
        text: message.text().map(Cow::Owned),
        calls: sent.iter().map(SentCall::from).collect(),
        position: before.len(),
        cut_off,
    };
    let own: Vec<&str> = sent.iter().filter_map(|c| c.id.as_deref()).collect();
    let earlier = HistoryIds::new(before, &own);
    let answered = answered_after(after);
    plan(
        &input,
        Around {
            earlier: &earlier,
            answered: &answered,
        },
        tools,
        opts,
        ctx,
    )
}

/// The ids the results right after a message answer (where they belong: a result further
/// down, after a user message, is out of place and does not count).
pub fn answered_after(after: &[Message]) -> HashSet<&str> {
    after
        .iter()
        .map_while(|m| match m {
            Message::Tool(t) => Some(t.call_id.as_str()),
            _ => None,
        })
        .collect()
}

/// The ids of a chat history (calls and results). The message's own ids are looked up
/// among the history's in one pass (the history is long, the message short); the whole
/// set is built only if a new id has to be minted.
pub struct HistoryIds<'m> {
    before: &'m [Message],
    own: IdIndex<'m>,
    own_earlier: HashSet<&'m str>,
    all: std::sync::OnceLock<HashSet<&'m str>>,
}

impl std::fmt::Debug for HistoryIds<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryIds")
            .field("messages", &self.before.len())
            .finish_non_exhaustive()
    }
}

impl<'m> HistoryIds<'m> {
    /// The ids of `before`, queried for `own` (the message's ids) first.
    pub fn new(before: &'m [Message], own: &[&'m str]) -> Self {
        let own = IdIndex::new(own.iter().copied());
        let own_earlier = if own.is_empty() {
            HashSet::new()
        } else {
            history_ids(before).filter(|id| own.contains(id)).collect()
        };
        HistoryIds {
            before,
            own,
            own_earlier,
            all: std::sync::OnceLock::new(),
        }
    }
}

impl IdSet for HistoryIds<'_> {
    fn contains(&self, id: &str) -> bool {
        if let Some(all) = self.all.get() {
            return all.contains(id);
        }
        if self.own.contains(id) {
            return self.own_earlier.contains(id);
        }
        self.all
            .get_or_init(|| history_ids(self.before).collect())
            .contains(id)
    }
}

fn history_ids(messages: &[Message]) -> impl Iterator<Item = &str> {
    messages.iter().flat_map(|m| {
        let result = match m {
            Message::Tool(t) => Some(t.call_id.as_str()),
            _ => None,
        };
        m.tool_calls()
            .iter()
            .filter_map(|tc| tc.id.as_deref())
            .chain(result)
    })
}

/// Ids a new id must avoid: the conversation's and the message's own.
struct Taken<'a> {
    around: Around<'a>,
    own: &'a IdIndex<'a>,
}

/// A message's ids: scanned while they are few (most messages hold one to a few calls:
/// no hashing), hashed once they are many (a message may hold thousands).
enum IdIndex<'a> {
    Few(Vec<&'a str>),
    Many(HashSet<&'a str>),
}

/// Up to this many ids are scanned rather than hashed.
const FEW: usize = 8;

impl<'a> IdIndex<'a> {
    fn new(ids: impl Iterator<Item = &'a str>) -> Self {
        let ids: Vec<&str> = ids.collect();
        if ids.len() <= FEW {
            IdIndex::Few(ids)
        } else {
            IdIndex::Many(ids.into_iter().collect())
        }
    }

    fn contains(&self, id: &str) -> bool {
        match self {
            IdIndex::Few(ids) => ids.contains(&id),
            IdIndex::Many(ids) => ids.contains(id),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            IdIndex::Few(ids) => ids.is_empty(),
            IdIndex::Many(ids) => ids.is_empty(),
        }
    }
}

/// The first call of the message with each id: found by scanning the calls before while
/// they are few, by a map once they are many.
struct FirstOf<'a> {
    map: Option<HashMap<&'a str, usize>>,
}

impl<'a> FirstOf<'a> {
    fn new(calls: usize) -> Self {
        FirstOf {
            map: (calls > FEW).then(|| HashMap::with_capacity(calls)),
        }
    }

    /// The first call before `k` that kept or claimed `id`.
    fn get(&self, calls: &[SentCall<'_>], k: usize, id: &str) -> Option<usize> {
        match &self.map {
            Some(map) => map.get(id).copied(),
            None => calls[..k].iter().position(|c| c.id == Some(id)),
        }
    }

    fn insert(&mut self, id: &'a str, k: usize) {
        if let Some(map) = &mut self.map {
            map.insert(id, k);
        }
    }
}

impl IdSet for Taken<'_> {
    fn contains(&self, id: &str) -> bool {
        self.own.contains(id)
            || self.around.answered.contains(id)
            || self.around.earlier.contains(id)
    }
}

/// Gives `call` the id `new` in place of one its session already used (the guard's store
/// saw it in an earlier turn), recording the rename.
pub fn rename_reused(call: &mut PlannedCall, new: String) {
    let Some(old) = call.id.take() else { return };
    call.call.fixes.push(reused_id_fix(&old, &new));
    if call.original_id.is_none() {
        call.original_id = Some(old);
    }
    call.id = Some(new);
}

/// The fix recorded when an id its session used before is replaced (every front).
pub fn reused_id_fix(old: &str, new: &str) -> Fix {
    renamed_fix(old, new, "already used in an earlier turn of this session")
}

fn renamed_fix(old: &str, new: &str, why: &str) -> Fix {
    Fix::on(
        FixKind::CallIdRenamed,
        "",
        format!("{old:?} -> {new:?}: {why}"),
    )
}

fn dropped(index: usize, sent: &SentCall<'_>, source: CallSource, why: &str) -> PlannedCall {
    PlannedCall {
        index,
        id: None,
        original_id: sent.id.map(str::to_owned),
        source,
        split: false,
        call: MendedCall {
            tool: sent.name.to_owned(),
            arguments: None,
            fixes: Vec::new(),
            issues: Vec::new(),
            outcome: Outcome::Feedback,
        },
        outcome: CallOutcome::Dropped,
        correctable: false,
        arguments_text: None,
        note: Some(why.to_owned()),
        mend_time: Duration::ZERO,
    }
}

/// Worth asking a corrector about: an invalid call, by the one rule of
/// [`crate::correct::correctable`].
pub fn correctable(call: &MendedCall, correct_missing_fields: bool) -> bool {
    call.outcome == Outcome::Feedback
        && crate::correct::correctable(&call.issues, &call.fixes, correct_missing_fields)
}

/// The assistant message as it should stay in the history: calls under their settled
/// ids, mended arguments as valid JSON text, dropped calls removed, calls read from the
/// text moved into `tool_calls`, leaked thinking removed. Calls already answered keep
/// their place. `calls` are the plan's calls, as later stages left them (a corrected call
/// carries its new `arguments_text`).
pub fn sanitize_assistant<'p>(
    original: &AssistantMessage,
    shape: &Shape,
    calls: impl IntoIterator<Item = &'p PlannedCall>,
) -> AssistantMessage {
    let mut msg = AssistantMessage {
        content: original.content.clone(),
        name: original.name.clone(),
        tool_calls: None,
        reasoning: original.reasoning.clone(),
        extra: original.extra.clone(),
    };
    match (&original.content, &shape.content) {
        (Some(Some(Content::Parts(parts))), Some(_)) if !shape.from_text => {
            if let Some(stripped) = extract::strip_content(&Content::Parts(parts.clone())) {
                msg.content = Some(Some(stripped));
            }
        }
        (_, Some(text)) => msg.content = Some(text.clone().map(Content::Text)),
        _ => {}
    }
    let sent = original.tool_calls.as_deref().unwrap_or(&[]);
    let source: &[ToolCall] = if shape.from_text {
        &shape.text_calls
    } else {
        sent
    };
    let mut out = Vec::with_capacity(source.len());
    let mut calls = calls.into_iter().peekable();
    for (i, tc) in source.iter().enumerate() {
        let mut planned = false;
        while let Some(p) = calls.next_if(|p| p.index == i) {
            planned = true;
            let Some(id) = &p.id else { continue };
            let mut tc = tc.clone();
            tc.id = Some(id.clone());
            if let Some(text) = &p.arguments_text {
                tc.arguments.clone_from(text);
                tc.name.clone_from(&p.call.tool);
            }
            // A planned call is a function call, whatever type the wire gave it.
            tc.extra.shift_remove("type");
            out.push(tc);
        }
        if !planned {
            // Already answered in the history: it stays as it is.
            out.push(tc.clone());
        }
    }
    if out.is_empty() {
        if !matches!(&msg.content, Some(Some(_))) {
            // An assistant message needs content or tool calls (`tool_calls: []` is refused).
            msg.content = Some(Some(Content::Text(String::new())));
        }
    } else {
        msg.tool_calls = Some(out);
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompiledTool, schema::Phase};

    fn tools() -> Toolbox {
        let mut t = Toolbox::new();
        let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}});
        if let Ok(tool) = CompiledTool::compile("f", "", &schema) {
            let _ = t.add(tool);
        }
        t
    }

    fn planned(calls: Vec<ToolCall>) -> MessagePlan {
        let msg = AssistantMessage {
            tool_calls: Some(calls),
            ..Default::default()
        };
        let ctx = ValidationContext::new("", Phase::Initial);
        plan_assistant(
            &msg,
            &[],
            &[],
            false,
            &tools(),
            &PlanOptions::default(),
            &ctx,
        )
    }

    #[test]
    fn a_minted_id_changes_the_message_and_a_valid_one_does_not() {
        let mut no_id = ToolCall::new("", "f", r#"{"q": "a"}"#);
        no_id.id = None;
        let plan = planned(vec![no_id]);
        assert_eq!(plan.calls[0].id.as_deref(), Some("call_tm_0_0"));
        assert!(plan.changes_message());
        let plan = planned(vec![ToolCall::new("c1", "f", r#"{"q": "a"}"#)]);
        assert!(!plan.changes_message());
    }
}
