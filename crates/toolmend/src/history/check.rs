//! Check: every way a history breaks the rules providers enforce, with their error text.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::provider::{self, ProviderError, Texts};
use super::{MAX_ID_LEN, call_id, is_blank, is_blank_id, is_object_text, longer_than};
use crate::conversation::{AssistantMessage, Message, ToolCall, ToolMessage};

/// What is wrong. Serialised as its snake_case id; violations of one message sort in this
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ViolationKind {
    /// A call of a group that no tool message directly after the group answers.
    UnansweredCall,
    /// A tool message whose id no earlier call has (it may answer a *later* call).
    OrphanResult,
    /// A call whose id an earlier call (in this message or any earlier one) already has.
    DuplicateCallId,
    /// A second tool message for an id that is already answered.
    DuplicateResult,
    /// A tool message that answers an earlier call, but not directly after that call's group
    /// (after a user message, in another group's results …).
    ResultOutOfPlace,
    /// A call with no (or an empty) id, or a tool message with an empty `tool_call_id`.
    MissingCallId,
    /// A call id or `tool_call_id` longer than OpenAI's 40 characters.
    CallIdTooLong,
    /// `function.arguments` that is not the text of a JSON object (strict parse; `""`
    /// counts as not an object).
    ArgumentsNotObject,
    /// A tool result with empty (or whitespace-only) content.
    EmptyToolContent,
    /// A function name outside OpenAI's `^[a-zA-Z0-9_-]{1,64}$`.
    InvalidFunctionName,
}

impl ViolationKind {
    /// Every kind, in sort order.
    pub const ALL: &'static [ViolationKind] = &[
        ViolationKind::UnansweredCall,
        ViolationKind::OrphanResult,
        ViolationKind::DuplicateCallId,
        ViolationKind::DuplicateResult,
        ViolationKind::ResultOutOfPlace,
        ViolationKind::MissingCallId,
        ViolationKind::CallIdTooLong,
        ViolationKind::ArgumentsNotObject,
        ViolationKind::EmptyToolContent,
        ViolationKind::InvalidFunctionName,
    ];

    /// The stable snake_case id, as serialised.
    pub fn id(self) -> &'static str {
        match self {
            ViolationKind::UnansweredCall => "unanswered_call",
            ViolationKind::OrphanResult => "orphan_result",
            ViolationKind::DuplicateCallId => "duplicate_call_id",
            ViolationKind::DuplicateResult => "duplicate_result",
            ViolationKind::ResultOutOfPlace => "result_out_of_place",
            ViolationKind::MissingCallId => "missing_call_id",
            ViolationKind::CallIdTooLong => "call_id_too_long",
            ViolationKind::ArgumentsNotObject => "arguments_not_object",
            ViolationKind::EmptyToolContent => "empty_tool_content",
            ViolationKind::InvalidFunctionName => "invalid_function_name",
        }
    }
}

impl std::fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// One rule a history breaks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// What is wrong.
    pub kind: ViolationKind,
    /// The index of the offending message: the assistant message for call-level kinds, the
    /// tool message for result-level ones.
    pub message: usize,
    /// The index of the call in the message's `tool_calls`, for call-level kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<usize>,
    /// The ids involved (the call id or `tool_call_id`; empty when there is none).
    pub ids: Vec<String>,
    /// Whose wording [`Violation::provider_error`] is: `openai` where OpenAI rejects the
    /// history, otherwise the provider that does (`anthropic`), or `toolmend` when no
    /// provider's wording is on record.
    pub provider: &'static str,
    /// The error text that provider answers, ids and indices filled in (indices are this
    /// history's; providers that merge or move messages number them differently).
    pub provider_error: String,
    /// Other providers' wording for the same problem.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_providers: Vec<ProviderError>,
}

impl Violation {
    fn new(
        kind: ViolationKind,
        message: usize,
        call: Option<usize>,
        id: Option<&str>,
        (provider, provider_error, other_providers): Texts,
    ) -> Self {
        Violation {
            kind,
            message,
            call,
            ids: id.map(|id| vec![id.to_owned()]).unwrap_or_default(),
            provider,
            provider_error,
            other_providers,
        }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at messages[{}]", self.kind, self.message)?;
        if let Some(call) = self.call {
            write!(f, ".tool_calls[{call}]")?;
        }
        write!(f, ": {}", self.provider_error)
    }
}

/// Every violation in `messages`, sorted by message index, then kind, then call index.
///
/// The rules: a *group* is an assistant message with `tool_calls` followed immediately by
/// tool messages; it is complete when those contiguous tool messages answer every call id
/// exactly once. Every call id is unique in the whole history, every tool message answers a
/// call of the group directly before it, ids are non-empty and at most 40 characters,
/// arguments are JSON object text, tool results are not empty, and function names match
/// `^[a-zA-Z0-9_-]{1,64}$`.
///
/// Linear in the history; a valid history costs two hash maps keyed by the ids it holds.
pub fn check(messages: &[Message]) -> Vec<Violation> {
    let mut out = run(messages, true).out;
    out.sort_by_key(|v| (v.message, v.kind, v.call));
    out
}

/// True when [`check`] finds nothing, without writing any violation's texts.
pub(crate) fn is_valid(messages: &[Message]) -> bool {
    count(messages) == 0
}

/// How many violations [`check`] would return, without writing their texts (a gateway
/// that sanitizes anyway needs only this).
pub fn count(messages: &[Message]) -> usize {
    run(messages, false).found
}

fn run(messages: &[Message], keep: bool) -> Checker<'_> {
    let mut checker = Checker {
        keep,
        ..Checker::default()
    };
    for (i, message) in messages.iter().enumerate() {
        match message {
            Message::Tool(t) => checker.tool(i, t),
            Message::Assistant(a) => {
                checker.close_group();
                if let Some(calls) = a.tool_calls.as_deref().filter(|c| !c.is_empty()) {
                    checker.open_group(i, a, calls);
                }
            }
            _ => checker.close_group(),
        }
    }
    checker.close_group();
    checker
}

/// Per call id, over the whole history.
#[derive(Debug, Default)]
struct IdState {
    /// The message holding the first call with this id.
    first_call: Option<usize>,
    /// Calls with this id not answered yet (in their group or out of place).
    pending: usize,
    /// The first tool message that answered this id.
    answer: Option<usize>,
}

/// One distinct id of the open group.
#[derive(Debug)]
struct Slot<'a> {
    id: &'a str,
    call: usize,
    answered_at: Option<usize>,
}

#[derive(Debug, Default)]
struct Checker<'a> {
    ids: HashMap<&'a str, IdState>,
    /// The open group's assistant message; open while its tool messages follow.
    group: Option<usize>,
    slots: Vec<Slot<'a>>,
    slot_of: HashMap<&'a str, usize>,
    /// Keep the violations found (false: only count them).
    keep: bool,
    found: usize,
    out: Vec<Violation>,
}

impl<'a> Checker<'a> {
    fn open_group(&mut self, i: usize, message: &AssistantMessage, calls: &'a [ToolCall]) {
        self.group = Some(i);
        // Anthropic numbers content blocks: the text first (when there is any), then tool_use.
        let text_blocks = usize::from(matches!(&message.content, Some(Some(c)) if !is_blank(c)));
        for (c, call) in calls.iter().enumerate() {
            let block = c + text_blocks;
            if !super::is_valid_function_name(&call.name) {
                let texts = || provider::invalid_function_name(i, c, &call.name);
                self.push(
                    ViolationKind::InvalidFunctionName,
                    i,
                    Some(c),
                    call_id(call),
                    texts,
                );
            }
            if !is_object_text(&call.arguments) {
                let texts = || provider::arguments_not_object(i, block);
                self.push(
                    ViolationKind::ArgumentsNotObject,
                    i,
                    Some(c),
                    call_id(call),
                    texts,
                );
            }
            let Some(id) = call_id(call) else {
                let texts = || provider::missing_call_id(i, c);
                self.push(ViolationKind::MissingCallId, i, Some(c), None, texts);
                continue;
            };
            if longer_than(id, MAX_ID_LEN) {
                let texts = || provider::id_too_long(id.chars().count());
                self.push(ViolationKind::CallIdTooLong, i, Some(c), Some(id), texts);
            }
            let state = self.ids.entry(id).or_default();
            state.pending += 1;
            match state.first_call {
                Some(first) => {
                    let texts = || provider::duplicate_call(i, block, id, first == i);
                    self.push(ViolationKind::DuplicateCallId, i, Some(c), Some(id), texts);
                }
                None => state.first_call = Some(i),
            }
            if !self.slot_of.contains_key(id) {
                self.slot_of.insert(id, self.slots.len());
                self.slots.push(Slot {
                    id,
                    call: c,
                    answered_at: None,
                });
            }
        }
    }

    fn tool(&mut self, i: usize, t: &'a ToolMessage) {
        if is_blank(&t.content) {
            let texts = || provider::empty_tool_content(i);
            let id = Some(t.call_id.as_str()).filter(|id| !is_blank_id(id));
            self.push(ViolationKind::EmptyToolContent, i, None, id, texts);
        }
        let id = t.call_id.as_str();
        if is_blank_id(id) {
            let texts = || provider::missing_result_id();
            self.push(ViolationKind::MissingCallId, i, None, None, texts);
            return;
        }
        if longer_than(id, MAX_ID_LEN) {
            let texts = || provider::id_too_long(id.chars().count());
            self.push(ViolationKind::CallIdTooLong, i, None, Some(id), texts);
        }
        if self.group.is_some()
            && let Some(&slot) = self.slot_of.get(id)
        {
            let slot = &mut self.slots[slot];
            let state = self.ids.entry(id).or_default();
            match slot.answered_at {
                None => {
                    slot.answered_at = Some(i);
                    state.pending = state.pending.saturating_sub(1);
                    state.answer.get_or_insert(i);
                }
                Some(first) => {
                    // A second result in the group: it may be meant for a second call with
                    // this id (the duplicate call is reported on its own).
                    state.pending = state.pending.saturating_sub(1);
                    let texts = || provider::duplicate_result(first, i, id);
                    self.push(ViolationKind::DuplicateResult, i, None, Some(id), texts);
                }
            }
            return;
        }
        let after_group = self.group.is_some();
        // `first`: the tool message that already answered `id`, for a duplicate result.
        let (kind, first) = match self.ids.get_mut(id) {
            Some(state) if state.pending > 0 => {
                state.pending -= 1;
                state.answer.get_or_insert(i);
                (ViolationKind::ResultOutOfPlace, None)
            }
            Some(IdState {
                answer: Some(first),
                ..
            }) => (ViolationKind::DuplicateResult, Some(*first)),
            _ => (ViolationKind::OrphanResult, None),
        };
        let texts = || match first {
            Some(first) => provider::duplicate_result(first, i, id),
            None => provider::unexpected_result(i, id, after_group),
        };
        self.push(kind, i, None, Some(id), texts);
    }

    /// Ends the open group: every call its tool messages did not answer is unanswered.
    /// Each violation names its own id only: the cost is linear in the group's calls.
    fn close_group(&mut self) {
        let Some(g) = self.group.take() else {
            return;
        };
        let mut slots = std::mem::take(&mut self.slots);
        for slot in slots.iter().filter(|s| s.answered_at.is_none()) {
            let texts = || provider::unanswered(g, slot.id);
            self.push(
                ViolationKind::UnansweredCall,
                g,
                Some(slot.call),
                Some(slot.id),
                texts,
            );
        }
        slots.clear();
        self.slots = slots;
        self.slot_of.clear();
    }

    /// Records a violation; its texts are only written when the checker keeps violations.
    fn push(
        &mut self,
        kind: ViolationKind,
        message: usize,
        call: Option<usize>,
        id: Option<&str>,
        texts: impl FnOnce() -> Texts,
    ) {
        self.found += 1;
        if self.keep {
            self.out
                .push(Violation::new(kind, message, call, id, texts()));
        }
    }
}
