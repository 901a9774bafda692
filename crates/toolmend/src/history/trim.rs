//! Trim: drop the oldest whole units until a history fits a budget, never splitting a group.

use serde::{Deserialize, Serialize};

use super::TokenCounter;
use crate::conversation::Message;

/// The size a trimmed history must fit in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// At most this many messages.
    Messages(usize),
    /// At most this many tokens, by the [`TokenCounter`] given to [`trim`].
    Tokens(usize),
}

impl Budget {
    /// The limit, in messages or tokens.
    pub fn limit(self) -> usize {
        match self {
            Budget::Messages(n) | Budget::Tokens(n) => n,
        }
    }
}

/// A trimmed history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trimmed {
    /// The messages kept, in their order.
    pub messages: Vec<Message>,
    /// How many messages were dropped.
    pub dropped: usize,
    /// The size of the kept messages, in the budget's unit.
    pub size: usize,
    /// True when the kept messages exceed the budget: the pinned messages and the last unit
    /// alone do not fit (they are kept anyway).
    pub over_budget: bool,
}

/// One stretch of non-pinned messages that is kept or dropped as a whole.
#[derive(Debug)]
struct Unit {
    start: usize,
    end: usize,
    /// A tool message that follows no group (only in a history `check` rejects).
    bare_tool: bool,
}

/// Drops the oldest messages until the history fits `budget`, keeping groups whole.
///
/// - *Pinned*, always kept: every system and developer message, and the first user message.
/// - The rest is cut into *units*: a group (an assistant message with `tool_calls` and the
///   tool messages directly after it), or any other single message. Units are kept newest
///   first while they fit; the first that does not fit ends the search (the history stays a
///   contiguous tail, no gaps), and every older unit is dropped with it.
/// - The last unit is always kept, even when it and the pinned messages exceed the budget
///   (then [`Trimmed::over_budget`] is set): a request without its last turn has nothing
///   to answer.
/// - The kept tail never starts with tool results. A tool message can only start a unit in
///   a history [`super::check`] rejects; such leading units are dropped too.
///
/// A history `check` accepts stays accepted. Run [`super::sanitize`] first on a history of
/// unknown quality; trimming a rejected history does not add violations. Linear; with
/// [`Budget::Tokens`] only the pinned messages and the units examined (the kept tail and the
/// first unit that did not fit) are counted, each once.
pub fn trim(messages: Vec<Message>, budget: Budget, counter: &dyn TokenCounter) -> Trimmed {
    let n = messages.len();
    let (tail, first_user, total) = cut(&messages, budget, counter);
    let kept: Vec<Message> = messages
        .into_iter()
        .enumerate()
        .filter(|(i, m)| *i >= tail || is_pinned(*i, m, first_user))
        .map(|(_, m)| m)
        .collect();
    Trimmed {
        dropped: n - kept.len(),
        messages: kept,
        size: total,
        over_budget: total > budget.limit(),
    }
}

/// [`trim`] on a borrowed history: only the kept messages are cloned (an agent loop
/// keeps its full history and sends a trimmed copy).
pub fn trim_ref(messages: &[Message], budget: Budget, counter: &dyn TokenCounter) -> Trimmed {
    let (tail, first_user, total) = cut(messages, budget, counter);
    let kept: Vec<Message> = messages
        .iter()
        .enumerate()
        .filter(|(i, m)| *i >= tail || is_pinned(*i, m, first_user))
        .map(|(_, m)| m.clone())
        .collect();
    Trimmed {
        dropped: messages.len() - kept.len(),
        messages: kept,
        size: total,
        over_budget: total > budget.limit(),
    }
}

/// System and developer messages, and the first user message, are always kept.
fn is_pinned(i: usize, m: &Message, first_user: Option<usize>) -> bool {
    matches!(m, Message::System(_) | Message::Developer(_)) || Some(i) == first_user
}

/// Where the kept tail starts, the first user message, and the kept size.
fn cut(
    messages: &[Message],
    budget: Budget,
    counter: &dyn TokenCounter,
) -> (usize, Option<usize>, usize) {
    let n = messages.len();
    let first_user = messages.iter().position(|m| matches!(m, Message::User(_)));
    let pinned = |i: usize, m: &Message| is_pinned(i, m, first_user);
    let size = |m: &Message| match budget {
        Budget::Messages(_) => 1,
        Budget::Tokens(_) => counter.count_message(m),
    };

    let mut pinned_size = 0;
    let mut units = Vec::new();
    let mut i = 0;
    while i < n {
        let m = &messages[i];
        if pinned(i, m) {
            pinned_size += size(m);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if !m.tool_calls().is_empty() {
            while matches!(messages.get(i), Some(Message::Tool(_))) {
                i += 1;
            }
        }
        units.push(Unit {
            start,
            end: i,
            bare_tool: matches!(m, Message::Tool(_)),
        });
    }

    // Newest first; only the units looked at are counted (tokenizing is the costly part).
    let limit = budget.limit();
    let mut total = pinned_size;
    let mut kept_sizes = Vec::new();
    for (k, unit) in units.iter().enumerate().rev() {
        let unit_size: usize = messages[unit.start..unit.end].iter().map(size).sum();
        if total + unit_size > limit && k + 1 < units.len() {
            break;
        }
        total += unit_size;
        kept_sizes.push(unit_size);
    }
    let mut from = units.len() - kept_sizes.len();
    while units.get(from).is_some_and(|u| u.bare_tool) {
        total -= kept_sizes.pop().unwrap_or(0);
        from += 1;
    }

    let tail = units.get(from).map_or(n, |u| u.start);
    (tail, first_user, total)
}
