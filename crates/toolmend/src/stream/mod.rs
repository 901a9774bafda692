//! Streaming, pure: OpenAI chat-completion stream deltas in, the assembled message and
//! "what may reach the client now" out. No I/O, no async: the caller reads the stream
//! and feeds the deltas, in the gateway as in the OpenAI client.
//!
//! - [`assemble`]: deltas -> [`conversation::AssistantMessage`](crate::conversation::AssistantMessage)
//!   (calls joined by `index` and `id`, the one rule for a fragment without `index`),
//!   bounded in bytes and calls.
//! - [`gate`]: which content may be released now, and which is held because it may be a
//!   call written into the text (the markers of [`crate::repair::markers`]), or thinking.
//!
//! ```
//! use serde_json::json;
//! use toolmend::stream::{AssembleOptions, Assembler, ContentMode, Thinking};
//!
//! let mut a = Assembler::new(AssembleOptions {
//!     content: ContentMode::Gate(Thinking::Pass),
//!     ..AssembleOptions::default()
//! });
//! let mut released = String::new();
//! for d in [json!({"content": "Let me check. <tool"}),
//!           json!({"content": "_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"})] {
//!     released.push_str(&a.push_delta(&d).unwrap().unwrap_or_default());
//! }
//! let done = a.finish();
//! // The call is not released; the message is the whole text, for the plan to read in
//! // context, and `unreleased` gives what of the plan's content is left to send.
//! assert_eq!(released, "Let me check.");
//! assert_eq!(done.released, released);
//! let text = done.message.text().unwrap();
//! assert!(text.starts_with("Let me check. <tool_call>"));
//! assert_eq!(toolmend::stream::unreleased("Let me check.", &done.released), "");
//! ```

pub mod assemble;
pub mod gate;

pub use assemble::{
    AssembleOptions, Assembled, Assembler, CallDelta, ContentMode, Delta, StreamError, chat_deltas,
    unreleased,
};
pub use gate::{ContentGate, GateEnd, Thinking};

#[cfg(test)]
mod tests;
