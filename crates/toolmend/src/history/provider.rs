//! The error texts providers answer for each violation, quoted from the research notes
//! (`research/providers.md` §1 a–e and "Other history rules") with ids and indices filled in.
//!
//! Indices are toolmend's message indices (OpenAI's numbering). Providers that move system
//! messages out of the list or merge tool results into one message number differently.

use serde::Serialize;

/// Another provider's answer to the same violation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderError {
    /// `anthropic`, `gemini`, `bedrock`, `minimax`.
    pub provider: &'static str,
    /// Its error text, ids and indices filled in.
    pub message: String,
}

pub(crate) const OPENAI: &str = "openai";
pub(crate) const ANTHROPIC: &str = "anthropic";
pub(crate) const GEMINI: &str = "gemini";
pub(crate) const BEDROCK: &str = "bedrock";
pub(crate) const MINIMAX: &str = "minimax";
/// No provider wording is on record: the text is toolmend's own description.
pub(crate) const TOOLMEND: &str = "toolmend";

fn other(provider: &'static str, message: String) -> ProviderError {
    ProviderError { provider, message }
}

/// The primary text, whose provider it is, and other providers' texts.
pub(crate) type Texts = (&'static str, String, Vec<ProviderError>);

/// (a) A call `id` of the assistant message at `message` that has no result right after it.
///
/// Providers list every unanswered id of the message in one error; each violation here
/// names its own id only (listing them all in each of N violations costs N² bytes).
pub(crate) fn unanswered(message: usize, id: &str) -> Texts {
    (
        OPENAI,
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages \
             responding to each 'tool_call_id'. The following tool_call_ids did not have \
             response messages: {id}"
        ),
        vec![
            other(
                ANTHROPIC,
                format!(
                    "messages.{message}: `tool_use` ids were found without `tool_result` blocks \
                     immediately after: {id}. Each `tool_use` block must have a corresponding \
                     `tool_result` block in the next message."
                ),
            ),
            other(
                GEMINI,
                "Please ensure that the number of function response parts is equal to the \
                 number of function call parts of the function call turn."
                    .to_owned(),
            ),
            other(
                BEDROCK,
                format!(
                    "Expected toolResult blocks at messages.{}.content for the following Ids: {id}",
                    message + 1
                ),
            ),
        ],
    )
}

/// (b)/(d) A tool message at `message` that answers no call of the group just before it.
/// `after_group`: it follows a group (whose calls do not include `id`).
pub(crate) fn unexpected_result(message: usize, id: &str, after_group: bool) -> Texts {
    let openai = if after_group {
        format!(
            "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
        )
    } else {
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding \
         message with 'tool_calls'."
            .to_owned()
    };
    (
        OPENAI,
        openai,
        vec![
            other(
                ANTHROPIC,
                format!(
                    "messages.{message}.content.0: unexpected `tool_use_id` found in \
                     `tool_result` blocks: {id}. Each `tool_result` block must have a \
                     corresponding `tool_use` block in the previous message."
                ),
            ),
            other(
                BEDROCK,
                format!(
                    "The number of toolResult blocks at messages.{message}.content exceeds the \
                     number of toolUse blocks of previous turn."
                ),
            ),
        ],
    )
}

/// (c) A call at `message`, content block `block` (Anthropic's numbering: text first), whose
/// id an earlier call already has. `same_message`: the earlier call is in the same message.
pub(crate) fn duplicate_call(message: usize, block: usize, id: &str, same_message: bool) -> Texts {
    let mut others = Vec::with_capacity(2);
    if same_message {
        others.push(other(
            BEDROCK,
            format!("The toolUse blocks at messages.{message}.content contain duplicate Ids: {id}"),
        ));
    }
    others.push(other(
        MINIMAX,
        format!("invalid params, duplicate tool_call id: {id} (2013)"),
    ));
    (
        ANTHROPIC,
        format!("messages.{message}.content.{block}: `tool_use` ids must be unique"),
        others,
    )
}

/// (c) A second tool message (at `message`) for an id answered at `first`.
pub(crate) fn duplicate_result(first: usize, message: usize, id: &str) -> Texts {
    (
        OPENAI,
        format!(
            "Invalid parameter: Duplicate value for 'tool_call_id' of '{id}' in \
             messages[{first}] and messages[{message}]."
        ),
        Vec::new(),
    )
}

/// A tool message with an empty `tool_call_id`.
pub(crate) fn missing_result_id() -> Texts {
    (
        OPENAI,
        "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."
            .to_owned(),
        Vec::new(),
    )
}

/// A tool call with no id. No provider's wording is on record.
pub(crate) fn missing_call_id(message: usize, call: usize) -> Texts {
    (
        TOOLMEND,
        format!(
            "messages[{message}].tool_calls[{call}] has no id, so no tool message can answer it \
             (no provider error text on record)"
        ),
        Vec::new(),
    )
}

/// An id longer than OpenAI's 40 characters.
pub(crate) fn id_too_long(len: usize) -> Texts {
    (
        OPENAI,
        format!(
            "Expected a string with maximum length 40, but got a string with length {len} instead."
        ),
        Vec::new(),
    )
}

/// (e) Arguments that are not a JSON object. OpenAI accepts any string; Anthropic (after
/// the OpenAI-to-Anthropic mapping) rejects a non-object input.
pub(crate) fn arguments_not_object(message: usize, block: usize) -> Texts {
    (
        ANTHROPIC,
        format!(
            "messages.{message}.content.{block}.tool_use.input: Input should be a valid dictionary"
        ),
        Vec::new(),
    )
}

/// An empty tool result.
pub(crate) fn empty_tool_content(message: usize) -> Texts {
    (
        ANTHROPIC,
        "messages: text content blocks must be non-empty".to_owned(),
        vec![other(
            BEDROCK,
            format!(
                "The content field at messages.{message}.content.0.toolResult cannot be empty \
                 when status value is error."
            ),
        )],
    )
}

/// (e) A function name outside `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn invalid_function_name(message: usize, call: usize, name: &str) -> Texts {
    (
        OPENAI,
        format!(
            "'{name}' does not match '^[a-zA-Z0-9_-]{{1,64}}$' - \
             'messages.{message}.tool_calls.{call}.name'"
        ),
        Vec::new(),
    )
}
