//! The request path, front-neutral: a request's history (neutral messages) against the
//! `[limits]`, checked by the pairing rules and, by `history.policy`, sanitized, refused
//! or passed; then trimmed to `history.max_tokens`.

use toolmend::{
    conversation::Message,
    history::{
        self, Budget, ByteEstimate, MissingIdPolicy, OrphanPolicy, SanitizePolicy, Tiktoken,
    },
};

use crate::{config::HistoryPolicy, metrics as m, pipeline::Pipeline, server::error::GatewayError};

/// What the request path did, for the response headers.
#[derive(Debug, Default, Clone)]
pub(crate) struct RequestNotes {
    /// The `x-toolmend-history` value.
    pub history: Option<String>,
    /// The messages changed (sanitized or trimmed): the body must be serialized again.
    pub changed: bool,
}

impl Pipeline {
    /// Refuses a history longer than `limits.max_messages` (checked before the messages
    /// are decoded, so a huge list is not).
    pub(crate) fn check_message_count(&self, n: usize) -> Result<(), GatewayError> {
        if n > self.limits.max_messages {
            return Err(GatewayError::LimitExceeded(format!(
                "'messages' has {n} messages, more than limits.max_messages ({})",
                self.limits.max_messages
            )));
        }
        Ok(())
    }

    /// The request path on decoded messages: the per-message limits, the history policy,
    /// the trim. Returns the messages to send on and what was done.
    pub(crate) fn prepare(
        &self,
        mut messages: Vec<Message>,
    ) -> Result<(Vec<Message>, RequestNotes), GatewayError> {
        let mut notes = RequestNotes::default();
        let limits = &self.limits;
        for (i, message) in messages.iter().enumerate() {
            let calls = message.tool_calls();
            if calls.len() > limits.max_calls_per_message {
                return Err(GatewayError::LimitExceeded(format!(
                    "messages[{i}] has {} tool calls, more than limits.max_calls_per_message ({})",
                    calls.len(),
                    limits.max_calls_per_message
                )));
            }
            if let Some((c, call)) = calls
                .iter()
                .enumerate()
                .find(|(_, c)| c.arguments.len() > limits.max_argument_bytes)
            {
                // Never replaced by `{}` in silence: the client learns which call is too big.
                return Err(GatewayError::LimitExceeded(format!(
                    "messages[{i}].tool_calls[{c}].arguments is {} bytes, more than \
                     limits.max_argument_bytes ({})",
                    call.arguments.len(),
                    limits.max_argument_bytes
                )));
            }
        }
        // Counted without their texts: only a refusal lists them.
        let found = history::count(&messages);
        if found > 0 {
            match self.history.policy {
                HistoryPolicy::Pass => {
                    m::history("passed");
                    notes.history = Some(format!("passed; violations={found}"));
                }
                HistoryPolicy::Reject => {
                    m::history("rejected");
                    return Err(refusal(&messages));
                }
                HistoryPolicy::Sanitize => {
                    let policy = SanitizePolicy {
                        orphans: if self.history.orphans == "rehome" {
                            OrphanPolicy::Rehome
                        } else {
                            OrphanPolicy::Drop
                        },
                        missing_ids: MissingIdPolicy::Mint,
                        ..SanitizePolicy::default()
                    };
                    let out = history::sanitize(messages, &policy);
                    let mut kinds: Vec<&str> = out.actions.iter().map(|a| a.kind.id()).collect();
                    kinds.sort_unstable();
                    kinds.dedup();
                    m::history("sanitized");
                    notes.history = Some(format!(
                        "sanitized; actions={}; kinds={}",
                        out.actions.len(),
                        kinds.join(",")
                    ));
                    messages = out.messages;
                    notes.changed = true;
                }
            }
        }
        if let Some(budget) = self.history.max_tokens {
            let counter: Box<dyn history::TokenCounter> = match self.history.encoding.as_str() {
                "cl100k_base" => Box::new(Tiktoken::cl100k_base()),
                "bytes" => Box::new(ByteEstimate),
                _ => Box::new(Tiktoken::o200k_base()),
            };
            let trimmed = history::trim(messages, Budget::Tokens(budget), counter.as_ref());
            if trimmed.dropped > 0 {
                notes.changed = true;
                let note = format!("trimmed; dropped={}", trimmed.dropped);
                notes.history = Some(match notes.history.take() {
                    Some(h) => format!("{h}; {note}"),
                    None => note,
                });
            }
            messages = trimmed.messages;
        }
        Ok((messages, notes))
    }
}

/// The 400 for a history refused under `history.policy = "reject"`: the first violations
/// in full, the rest as a count (the answer stays small).
fn refusal(messages: &[Message]) -> GatewayError {
    const LISTED: usize = 50;
    let violations = history::check(messages);
    let mut lines: Vec<String> = violations
        .iter()
        .take(LISTED)
        .map(|v| {
            format!(
                "- {} (message {}): {}",
                v.kind.id(),
                v.message,
                v.provider_error
            )
        })
        .collect();
    if violations.len() > LISTED {
        lines.push(format!("- … and {} more", violations.len() - LISTED));
    }
    GatewayError::invalid(
        "toolmend_invalid_history",
        format!(
            "the history breaks the tool-call pairing rules ({} violation(s)); it was not \
             sent upstream:\n{}",
            violations.len(),
            lines.join("\n")
        ),
    )
}
