//! History: the pairing rules providers enforce on a request's messages; check, sanitize,
//! group-preserving trim, pluggable token counting.
//!
//! A *group* is an assistant message with `tool_calls` followed immediately by the tool
//! messages answering them. Providers reject a history where a group is incomplete (a call
//! with no result), where a tool message answers no call of the group just before it, where
//! ids repeat, and a few more things (see [`ViolationKind`]). One bad message poisons every
//! later request of the conversation, so a gateway mends the history before sending it.
//!
//! ```text
//! messages -> check     every violation, with the provider's error text   [`check`]
//!          -> sanitize  a history check accepts, every change recorded      [`sanitize`]
//!          -> trim      oldest whole units dropped until within a budget    [`trim`]
//! ```
//!
//! ```
//! use toolmend::history::{check, sanitize, SanitizePolicy, ViolationKind};
//! use toolmend::conversation::Message;
//!
//! let messages: Vec<Message> = serde_json::from_str(r#"[
//!   {"role": "user", "content": "Weather in Paris?"},
//!   {"role": "assistant", "content": null, "tool_calls": [
//!     {"id": "call_1", "type": "function",
//!      "function": {"name": "get_weather", "arguments": "{'city': 'Paris'"}}]},
//!   {"role": "user", "content": "Hello?"}
//! ]"#).unwrap();
//! let kinds: Vec<_> = check(&messages).iter().map(|v| v.kind).collect();
//! assert_eq!(kinds, [ViolationKind::UnansweredCall, ViolationKind::ArgumentsNotObject]);
//!
//! let mended = sanitize(messages, &SanitizePolicy::default());
//! assert!(check(&mended.messages).is_empty());
//! assert_eq!(mended.messages[1].tool_calls()[0].arguments, r#"{"city":"Paris"}"#);
//! assert_eq!(mended.messages[2].role(), "tool"); // an error result, placed in the group
//! ```
//!
//! Everything here is deterministic and linear in the size of the history (hash maps keyed
//! by the ids; no scan per message). [`check`] on a valid history allocates only its maps.

mod check;
mod provider;
mod sanitize;
pub(crate) use sanitize::sanitize_name;
mod tokens;
mod trim;

use check::is_valid;
pub use check::{Violation, ViolationKind, check, count};
pub use provider::ProviderError;
pub use sanitize::{
    Action, ActionKind, EMPTY_RESULT, MISPLACED_RESULT, MissingIdPolicy, NO_ID_RESULT,
    OrphanPolicy, SanitizePolicy, Sanitized, UNANSWERED_RESULT, UNNAMED_TOOL, sanitize,
};
#[cfg(feature = "tiktoken")]
pub use tokens::Tiktoken;
pub use tokens::{ByteEstimate, MESSAGE_OVERHEAD, TokenCounter};
pub use trim::{Budget, Trimmed, trim, trim_ref};

use crate::conversation::{Content, ToolCall};

/// The longest call id OpenAI accepts, in characters ("Expected a string with maximum
/// length 40, …").
pub const MAX_ID_LEN: usize = 40;

/// The longest function name OpenAI accepts (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_NAME_LEN: usize = 64;

/// True when `name` matches OpenAI's `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_valid_function_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The call's id, unless it is absent, empty or only whitespace (then it cannot join a result).
pub(crate) fn call_id(call: &ToolCall) -> Option<&str> {
    call.id.as_deref().filter(|id| !is_blank_id(id))
}

/// An empty or whitespace-only id is no id.
pub(crate) fn is_blank_id(id: &str) -> bool {
    id.trim().is_empty()
}

/// True when content holds nothing a provider would accept as a block: `""`, only
/// whitespace, no parts, or only text parts that are blank.
pub(crate) fn is_blank(content: &Content) -> bool {
    match content {
        Content::Text(s) => s.trim().is_empty(),
        Content::Parts(parts) => parts
            .iter()
            .all(|p| p.kind == "text" && p.text.as_deref().is_none_or(|t| t.trim().is_empty())),
    }
}

/// True when `s` is the text of a JSON object (strict: serde_json, nothing repaired).
/// Validates without building the value.
pub(crate) fn is_object_text(s: &str) -> bool {
    s.trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok()
}

/// Length in characters, counting only as far as needed to compare with `max`.
pub(crate) fn longer_than(s: &str, max: usize) -> bool {
    s.len() > max && s.chars().nth(max).is_some()
}
