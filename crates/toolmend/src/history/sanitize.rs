//! Sanitize: turn any history into one [`check`] accepts, recording every change.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::check;
use super::{
    MAX_ID_LEN, MAX_NAME_LEN, call_id, is_blank, is_blank_id, is_object_text, is_valid,
    is_valid_function_name, longer_than,
};
use crate::conversation::{AssistantMessage, Content, Extra, Message, ToolMessage};
use crate::message::IdAllocator;
use crate::repair::{RepairOptions, repair};

/// The result given to a call whose result the history lost.
pub const UNANSWERED_RESULT: &str = "No result: this call was never answered (the history lost \
     its result). Call the tool again if you still need it.";

/// The result given to a call that had no id, when no result could be paired with it.
pub const NO_ID_RESULT: &str = "No result: this call had no id, so no result could be matched \
     to it. Call the tool again if you still need it.";

/// The result given to a call whose result sat out of place and was dropped
/// ([`OrphanPolicy::Drop`]).
pub const MISPLACED_RESULT: &str = "No result: the result of this call was out of place in the \
     history and was removed. Call the tool again if you still need it.";

/// The content given to a tool result that was empty.
pub const EMPTY_RESULT: &str = "(The tool returned no output.)";

/// The name given to a call whose name had no usable character.
pub const UNNAMED_TOOL: &str = "unnamed_tool";

/// What to do with tool messages that answer no call of the group just before them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrphanPolicy {
    /// Drop them. A call whose result is dropped gets an error result instead.
    #[default]
    Drop,
    /// Move a result whose call exists earlier in the history (but is misplaced, e.g. after a
    /// user message) back into its call's group. Results no earlier call asked for, and
    /// second results for an answered call, are dropped.
    Rehome,
}

/// What to do with calls that have no id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingIdPolicy {
    /// Give the call a deterministic id, `call_tm_<message>_<call>` (input indices). A tool
    /// message with an empty `tool_call_id` among the group's results is paired with the
    /// group's id-less calls in order; a call left without a result gets an error result.
    #[default]
    Mint,
    /// Remove the call. An assistant message left with neither calls nor content is dropped.
    Remove,
}

/// How [`sanitize`] mends what [`check`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SanitizePolicy {
    /// Tool messages that answer no call of the group just before them.
    pub orphans: OrphanPolicy,
    /// Calls with no id.
    pub missing_ids: MissingIdPolicy,
    /// Options of the repair parser for historical arguments that are not JSON objects.
    pub repair: RepairOptions,
}

/// What [`sanitize`] changed. Serialised as its snake_case id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ActionKind {
    /// A call without a result got an error result, placed with its group.
    ResultSynthesized,
    /// A tool message was dropped: an orphan, a second result, a misplaced result
    /// ([`OrphanPolicy::Drop`]), or one with an empty `tool_call_id` nothing pairs with.
    ResultDropped,
    /// A misplaced result was moved into its call's group ([`OrphanPolicy::Rehome`]).
    ResultRehomed,
    /// A tool message's `tool_call_id` now follows its call's new id.
    ResultRepointed,
    /// A call with no id got a minted one ([`MissingIdPolicy::Mint`]).
    CallIdMinted,
    /// A call id that repeats an earlier one, or is longer than 40 characters, was replaced.
    CallIdRenamed,
    /// A call with no id was removed ([`MissingIdPolicy::Remove`]).
    CallRemoved,
    /// An assistant message left with neither calls nor content was dropped.
    MessageDropped,
    /// Arguments that were not JSON object text were repaired.
    ArgumentsRepaired,
    /// Arguments no object could be read from were replaced by `{}`; `raw` keeps them.
    ArgumentsReplaced,
    /// An empty tool result got a placeholder text.
    ToolContentFilled,
    /// A function name outside `^[a-zA-Z0-9_-]{1,64}$` was rewritten.
    FunctionNameSanitized,
}

impl ActionKind {
    /// The stable snake_case id, as serialised.
    pub fn id(self) -> &'static str {
        match self {
            ActionKind::ResultSynthesized => "result_synthesized",
            ActionKind::ResultDropped => "result_dropped",
            ActionKind::ResultRehomed => "result_rehomed",
            ActionKind::ResultRepointed => "result_repointed",
            ActionKind::CallIdMinted => "call_id_minted",
            ActionKind::CallIdRenamed => "call_id_renamed",
            ActionKind::CallRemoved => "call_removed",
            ActionKind::MessageDropped => "message_dropped",
            ActionKind::ArgumentsRepaired => "arguments_repaired",
            ActionKind::ArgumentsReplaced => "arguments_replaced",
            ActionKind::ToolContentFilled => "tool_content_filled",
            ActionKind::FunctionNameSanitized => "function_name_sanitized",
        }
    }
}

impl std::fmt::Display for ActionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// One change [`sanitize`] made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Action {
    /// What changed.
    pub kind: ActionKind,
    /// The index of the message it concerns, in the input.
    pub message: usize,
    /// The index of the call in that message's `tool_calls`, in the input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<usize>,
    /// The call id concerned (the new one, when it changed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// What was done and why, in a few words.
    pub detail: String,
    /// The argument text as it was, for [`ActionKind::ArgumentsRepaired`] and
    /// [`ActionKind::ArgumentsReplaced`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// A history [`check`] accepts, and what was changed to get it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sanitized {
    /// The mended history.
    pub messages: Vec<Message>,
    /// Every change, by input message index, then call index.
    pub actions: Vec<Action>,
}

impl Sanitized {
    /// True when the input needed no change.
    pub fn is_unchanged(&self) -> bool {
        self.actions.is_empty()
    }
}

/// Turns any history into one where [`check`] finds nothing, recording every change.
///
/// - Calls get unique ids of at most 40 characters: a repeated id becomes `{id}_2` (`_3` …),
///   a longer one is cut and suffixed with a hash, a missing one is minted or the call
///   removed ([`MissingIdPolicy`]). The tool message answering a renamed call follows it:
///   a result in the call's own group claims that call first, else the earliest earlier
///   call with that id no result has claimed yet.
/// - Every call gets exactly one result directly after its group: its own, a misplaced
///   one moved back ([`OrphanPolicy::Rehome`]), or an error result saying why there is none.
///   Other tool messages are dropped.
/// - Arguments are repaired to JSON object text (or replaced by `{}`), empty results get a
///   placeholder, function names are rewritten to `^[a-zA-Z0-9_-]{1,64}$`.
///
/// A history `check` accepts comes back unchanged; sanitizing twice changes nothing more.
/// Deterministic; linear in the history (the argument repair is linear in each text).
pub fn sanitize(messages: Vec<Message>, policy: &SanitizePolicy) -> Sanitized {
    if is_valid(&messages) {
        return Sanitized {
            messages,
            actions: Vec::new(),
        };
    }
    let mut s = Sanitizer::new(&messages, policy);
    let mut slots: Vec<Option<Message>> = messages.into_iter().map(Some).collect();
    s.fix_calls_and_ids(&mut slots);
    let plan = s.plan(&slots);
    let messages = s.emit(slots, plan);
    let mut actions = s.actions;
    actions.sort_by_key(|a| (a.message, a.call));
    Sanitized { messages, actions }
}

/// Why a call has no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    Unanswered,
    NoId,
    Misplaced,
}

impl Missing {
    fn text(self) -> &'static str {
        match self {
            Missing::Unanswered => UNANSWERED_RESULT,
            Missing::NoId => NO_ID_RESULT,
            Missing::Misplaced => MISPLACED_RESULT,
        }
    }

    fn detail(self) -> &'static str {
        match self {
            Missing::Unanswered => "no tool message answered this call; an error result was added",
            Missing::NoId => {
                "the call had no id and no result was paired with it; an error result was added"
            }
            Missing::Misplaced => {
                "its result was out of place and dropped; an error result was added"
            }
        }
    }
}

/// What becomes of the tool messages and groups.
#[derive(Debug, Default)]
struct Plan {
    /// Per group (assistant message index): the tool messages to place after it, in order.
    attached: HashMap<usize, Vec<usize>>,
    /// Per group: the calls (index in the mended message) left without a result, and why.
    unanswered: HashMap<usize, Vec<(usize, Missing)>>,
}

/// What is left of an assistant message once its calls are mended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Group,
    Plain,
    Empty,
}

#[derive(Debug)]
struct Sanitizer<'p> {
    policy: &'p SanitizePolicy,
    /// Every id in the input and every id handed out: a new id is none of them (the one
    /// id rule of [`crate::message::ids`]).
    ids: IdAllocator<'static>,
    /// Final ids of the calls seen so far.
    used: HashSet<String>,
    /// Per original call id: the final ids of the calls of closed groups that no tool
    /// message has claimed yet, oldest first.
    unclaimed: HashMap<String, VecDeque<String>>,
    /// The same for the calls of the open group (the last assistant message, while its tool
    /// messages follow); moved to `unclaimed` when the group ends.
    open_group: HashMap<String, VecDeque<String>>,
    /// Minted ids of calls that had none.
    no_id: HashSet<String>,
    /// For messages that lost calls: the input index of each remaining call.
    origin: HashMap<usize, Vec<usize>>,
    actions: Vec<Action>,
}

impl<'p> Sanitizer<'p> {
    fn new(messages: &[Message], policy: &'p SanitizePolicy) -> Self {
        let mut ids = IdAllocator::default();
        for m in messages {
            match m {
                Message::Assistant(_) => {
                    for id in m.tool_calls().iter().filter_map(call_id) {
                        ids.reserve(id);
                    }
                }
                Message::Tool(t) if !is_blank_id(&t.call_id) => {
                    ids.reserve(&t.call_id);
                }
                _ => {}
            }
        }
        Sanitizer {
            policy,
            ids,
            used: HashSet::new(),
            unclaimed: HashMap::new(),
            open_group: HashMap::new(),
            no_id: HashSet::new(),
            origin: HashMap::new(),
            actions: Vec::new(),
        }
    }

    fn act(
        &mut self,
        kind: ActionKind,
        message: usize,
        call: Option<usize>,
        call_id: Option<&str>,
        detail: impl Into<String>,
    ) {
        self.actions.push(Action {
            kind,
            message,
            call,
            call_id: call_id.map(str::to_owned),
            detail: detail.into(),
            raw: None,
        });
    }

    /// The open group ends: its unclaimed calls join the older ones.
    fn close_group(&mut self) {
        for (id, calls) in self.open_group.drain() {
            self.unclaimed.entry(id).or_default().extend(calls);
        }
    }

    /// Pass 1, in order: names, arguments and ids of every call; `tool_call_id`s follow.
    fn fix_calls_and_ids(&mut self, slots: &mut [Option<Message>]) {
        let mut group = None;
        // Minted ids of the open group's id-less calls, for results with an empty id.
        let mut id_less: VecDeque<String> = VecDeque::new();
        for (i, slot) in slots.iter_mut().enumerate() {
            match slot {
                Some(Message::Assistant(a)) => {
                    group = None;
                    id_less.clear();
                    self.close_group();
                    if a.tool_calls.as_ref().is_some_and(|c| !c.is_empty()) {
                        match self.fix_calls(i, a, &mut id_less) {
                            Shape::Group => group = Some(i),
                            Shape::Plain => self.close_group(),
                            Shape::Empty => {
                                self.close_group();
                                self.act(
                                    ActionKind::MessageDropped,
                                    i,
                                    None,
                                    None,
                                    "assistant message left with neither calls nor content",
                                );
                                *slot = None;
                            }
                        }
                    }
                }
                Some(Message::Tool(t)) => self.repoint(i, t, group, &mut id_less),
                _ => {
                    group = None;
                    id_less.clear();
                    self.close_group();
                }
            }
        }
    }

    fn fix_calls(
        &mut self,
        i: usize,
        a: &mut AssistantMessage,
        id_less: &mut VecDeque<String>,
    ) -> Shape {
        let Some(calls) = a.tool_calls.as_mut() else {
            return Shape::Plain;
        };
        let mut removed = Vec::new();
        for (c, call) in calls.iter_mut().enumerate() {
            if !is_valid_function_name(&call.name) {
                let name = sanitize_name(&call.name);
                let detail = format!("'{}' -> '{name}'", call.name);
                self.act(
                    ActionKind::FunctionNameSanitized,
                    i,
                    Some(c),
                    call_id(call),
                    detail,
                );
                call.name = name;
            }
            if let Some((text, kind, detail)) = mend_arguments(&call.arguments, &self.policy.repair)
            {
                let raw = std::mem::replace(&mut call.arguments, text);
                self.act(kind, i, Some(c), call_id(call), detail);
                if let Some(last) = self.actions.last_mut() {
                    last.raw = Some(raw);
                }
            }
            let Some(id) = call_id(call).map(str::to_owned) else {
                match self.policy.missing_ids {
                    MissingIdPolicy::Mint => {
                        let minted = self.ids.minted(i, c);
                        self.act(
                            ActionKind::CallIdMinted,
                            i,
                            Some(c),
                            Some(&minted),
                            "the call had no id",
                        );
                        call.id = Some(minted.clone());
                        self.used.insert(minted.clone());
                        self.no_id.insert(minted.clone());
                        id_less.push_back(minted);
                    }
                    MissingIdPolicy::Remove => {
                        self.act(
                            ActionKind::CallRemoved,
                            i,
                            Some(c),
                            None,
                            format!("call to '{}' had no id", call.name),
                        );
                        removed.push(c);
                    }
                }
                continue;
            };
            let final_id = if self.used.contains(&id) {
                let new = self.ids.renamed(&id);
                let detail = format!("'{id}' -> '{new}': an earlier call has the same id");
                self.act(ActionKind::CallIdRenamed, i, Some(c), Some(&new), detail);
                new
            } else if longer_than(&id, MAX_ID_LEN) {
                let new = self.ids.renamed(&id);
                let detail = format!("'{id}' -> '{new}': longer than {MAX_ID_LEN} characters");
                self.act(ActionKind::CallIdRenamed, i, Some(c), Some(&new), detail);
                new
            } else {
                id.clone()
            };
            if final_id != id {
                call.id = Some(final_id.clone());
            }
            self.used.insert(final_id.clone());
            self.open_group.entry(id).or_default().push_back(final_id);
        }
        if removed.is_empty() {
            return Shape::Group;
        }
        // `removed` is ascending: one pass keeps the others.
        let mut removed = removed.into_iter().peekable();
        let kept: Vec<usize> = (0..calls.len())
            .filter(|&c| removed.next_if_eq(&c).is_none())
            .collect();
        let mut kept_iter = kept.iter().peekable();
        let mut index = 0;
        calls.retain(|_| {
            let keep = kept_iter.next_if_eq(&&index).is_some();
            index += 1;
            keep
        });
        if !calls.is_empty() {
            self.origin.insert(i, kept);
            return Shape::Group;
        }
        a.tool_calls = None;
        if matches!(&a.content, Some(Some(c)) if !is_blank(c)) {
            Shape::Plain
        } else {
            Shape::Empty
        }
    }

    /// A tool message follows the new id of the call it answers.
    fn repoint(
        &mut self,
        i: usize,
        t: &mut ToolMessage,
        group: Option<usize>,
        id_less: &mut VecDeque<String>,
    ) {
        if is_blank_id(&t.call_id) {
            if group.is_some()
                && let Some(minted) = id_less.pop_front()
            {
                let detail = format!(
                    "empty tool_call_id -> '{minted}': paired by position with a call that had no id"
                );
                self.act(ActionKind::ResultRepointed, i, None, Some(&minted), detail);
                t.call_id = minted;
            }
            return;
        }
        // A result among its group's results answers that group's call first, else the
        // earliest call with its id that no result has claimed.
        let id = t.call_id.as_str();
        let own = match group {
            Some(_) => self.open_group.get_mut(id).and_then(VecDeque::pop_front),
            None => None,
        };
        let final_id = match own {
            Some(final_id) => final_id,
            None => {
                let Some(queue) = self.unclaimed.get_mut(id) else {
                    return;
                };
                let Some(final_id) = queue.pop_front() else {
                    return;
                };
                if queue.is_empty() {
                    self.unclaimed.remove(id);
                }
                final_id
            }
        };
        if final_id != t.call_id {
            let detail = format!(
                "tool_call_id '{}' -> '{final_id}': follows its call's new id",
                t.call_id
            );
            self.act(
                ActionKind::ResultRepointed,
                i,
                None,
                Some(&final_id),
                detail,
            );
            t.call_id = final_id;
        }
    }

    /// Pass 2: which group each tool message goes to, and which calls stay unanswered.
    fn plan(&mut self, slots: &[Option<Message>]) -> Plan {
        #[derive(Debug)]
        struct CallSlot {
            group: usize,
            answered: bool,
            missing: Missing,
        }
        let mut plan = Plan::default();
        let mut calls: HashMap<&str, CallSlot> = HashMap::new();
        let mut group = None;
        for (i, slot) in slots.iter().enumerate() {
            match slot {
                Some(Message::Assistant(a))
                    if !a.tool_calls.as_deref().unwrap_or(&[]).is_empty() =>
                {
                    group = Some(i);
                    for id in a.tool_calls.iter().flatten().filter_map(call_id) {
                        let missing = if self.no_id.contains(id) {
                            Missing::NoId
                        } else {
                            Missing::Unanswered
                        };
                        calls.insert(
                            id,
                            CallSlot {
                                group: i,
                                answered: false,
                                missing,
                            },
                        );
                    }
                }
                Some(Message::Tool(t)) => {
                    let id = t.call_id.as_str();
                    if is_blank_id(id) {
                        self.act(
                            ActionKind::ResultDropped,
                            i,
                            None,
                            None,
                            "the tool message has no tool_call_id",
                        );
                        continue;
                    }
                    match calls.get_mut(id) {
                        Some(call) if !call.answered && group == Some(call.group) => {
                            call.answered = true;
                            plan.attached.entry(call.group).or_default().push(i);
                        }
                        Some(call) if !call.answered => match self.policy.orphans {
                            OrphanPolicy::Rehome => {
                                call.answered = true;
                                plan.attached.entry(call.group).or_default().push(i);
                                let detail = format!(
                                    "moved into the group of messages[{}], where its call is",
                                    call.group
                                );
                                self.act(ActionKind::ResultRehomed, i, None, Some(id), detail);
                            }
                            OrphanPolicy::Drop => {
                                call.missing = Missing::Misplaced;
                                let detail = format!(
                                    "out of place: its call is in messages[{}] but the result \
                                     does not directly follow that group",
                                    call.group
                                );
                                self.act(ActionKind::ResultDropped, i, None, Some(id), detail);
                            }
                        },
                        Some(_) => self.act(
                            ActionKind::ResultDropped,
                            i,
                            None,
                            Some(id),
                            "a second result for a call that already has one",
                        ),
                        None => self.act(
                            ActionKind::ResultDropped,
                            i,
                            None,
                            Some(id),
                            "orphan: no earlier call has this id",
                        ),
                    }
                }
                _ => group = None,
            }
        }
        for (g, slot) in slots.iter().enumerate() {
            let Some(Message::Assistant(a)) = slot else {
                continue;
            };
            for (c, call) in a.tool_calls.iter().flatten().enumerate() {
                if let Some(state) = call_id(call).and_then(|id| calls.get(id))
                    && !state.answered
                {
                    plan.unanswered
                        .entry(g)
                        .or_default()
                        .push((c, state.missing));
                }
            }
        }
        plan
    }

    /// Pass 3: the history, each group followed by its results.
    fn emit(&mut self, mut slots: Vec<Option<Message>>, plan: Plan) -> Vec<Message> {
        let synthesized: usize = plan.unanswered.values().map(Vec::len).sum();
        let mut out = Vec::with_capacity(slots.len() + synthesized);
        for i in 0..slots.len() {
            if matches!(slots[i], None | Some(Message::Tool(_))) {
                continue; // dropped, or placed with its group
            }
            let Some(message) = slots[i].take() else {
                continue;
            };
            let missing: Vec<(usize, String, Missing)> = plan
                .unanswered
                .get(&i)
                .map(|calls| {
                    let tool_calls = message.tool_calls();
                    calls
                        .iter()
                        .filter_map(|&(c, why)| {
                            let id = tool_calls.get(c).and_then(call_id)?;
                            Some((c, id.to_owned(), why))
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(message);
            for &t in plan.attached.get(&i).into_iter().flatten() {
                if let Some(Message::Tool(mut result)) = slots[t].take() {
                    if is_blank(&result.content) {
                        let id = result.call_id.clone();
                        self.act(
                            ActionKind::ToolContentFilled,
                            t,
                            None,
                            Some(&id),
                            "empty tool result; a placeholder text was added",
                        );
                        result.content = Content::Text(EMPTY_RESULT.to_owned());
                    }
                    out.push(Message::Tool(result));
                }
            }
            for (c, id, why) in missing {
                let input_call = self
                    .origin
                    .get(&i)
                    .and_then(|kept| kept.get(c).copied())
                    .unwrap_or(c);
                self.act(
                    ActionKind::ResultSynthesized,
                    i,
                    Some(input_call),
                    Some(&id),
                    why.detail(),
                );
                out.push(Message::Tool(ToolMessage {
                    content: Content::Text(why.text().to_owned()),
                    call_id: id,
                    extra: Extra::new(),
                }));
            }
        }
        out
    }
}

/// Historical arguments as JSON object text: `None` when they already are.
fn mend_arguments(raw: &str, opts: &RepairOptions) -> Option<(String, ActionKind, String)> {
    if is_object_text(raw) {
        return None;
    }
    if raw.trim().is_empty() {
        return Some((
            "{}".to_owned(),
            ActionKind::ArgumentsRepaired,
            "empty arguments read as {}".to_owned(),
        ));
    }
    let replaced = |why: String| Some(("{}".to_owned(), ActionKind::ArgumentsReplaced, why));
    let repaired = match repair(raw, opts) {
        Ok(r) => r,
        Err(e) => {
            return replaced(format!(
                "no JSON object could be read ({e}); replaced by {{}}"
            ));
        }
    };
    let Some(first) = repaired.calls.first().filter(|c| c.arguments.is_object()) else {
        return replaced("the repaired value is not an object; replaced by {}".to_owned());
    };
    let text = first.arguments.to_string();
    if !is_object_text(&text) {
        return replaced("the repaired object nests too deep; replaced by {}".to_owned());
    }
    let mut detail = String::from("repaired");
    for (n, fix) in first.fixes.iter().enumerate() {
        detail.push_str(if n == 0 { ": " } else { ", " });
        detail.push_str(fix.kind.id());
    }
    if repaired.calls.len() > 1 {
        detail.push_str(&format!(
            "; {} glued calls, only the first kept",
            repaired.calls.len()
        ));
    }
    Some((text, ActionKind::ArgumentsRepaired, detail))
}

/// Disallowed characters become `_`; at most 64; never empty.
pub(crate) fn sanitize_name(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
                ch
            } else {
                '_'
            }
        })
        .take(MAX_NAME_LEN)
        .collect();
    if name.is_empty() {
        UNNAMED_TOOL.to_owned()
    } else {
        name
    }
}
