//! The per-message plan: the one place that decides what an assistant message's calls
//! are. Every front (the tool node, the gateway, the CLI, the Python package) converts its
//! wire format to a [`MessageInput`] (or calls [`plan_assistant`] on a chat message) and
//! uses the plan; none extracts calls, settles ids or shapes content on its own.
//!
//! ```text
//! extract   the message's calls, or (none sent) calls written into its text   [extract]
//! ids       one rule: kept, minted, renamed, dropped, already answered         [ids]
//! mend      repair + validate each call; glued calls split; cut-off marked     [crate::mend]
//! decide    may run (executed) | feedback | dropped; worth correcting?         [plan]
//! shape     thinking stripped, prose kept; the sanitized message               [plan]
//! ```
//!
//! ```
//! use serde_json::json;
//! use toolmend::{CompiledTool, Toolbox, message::{self, PlanOptions}, conversation::{AssistantMessage, Content}};
//! use toolmend::schema::{Phase, ValidationContext};
//!
//! let mut tools = Toolbox::new();
//! tools.add(CompiledTool::compile("get_weather", "",
//!     &json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})).unwrap()).unwrap();
//! let msg = AssistantMessage {
//!     content: Some(Some(Content::Text(
//!         "Let me look.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>".into()))),
//!     ..Default::default()
//! };
//! let plan = message::plan_assistant(&msg, &[], &[], false, &tools, &PlanOptions::default(),
//!     &ValidationContext::new("", Phase::Initial));
//! assert_eq!(plan.calls[0].id.as_deref(), Some("call_tm_0_0"));
//! assert_eq!(plan.shape.content, Some(Some("Let me look.".to_owned())));
//! ```

pub mod extract;
pub mod ids;
mod outcome;
mod plan;

pub use extract::{
    TEMPLATE_THINKING_TAG, TextCall, calls_in_text, open_thinking, prose_before,
    prose_before_calls, read_calls_in_str, read_calls_in_text, strip_thinking,
    strip_thinking_before_calls, strip_thinking_before_calls_named,
};
pub use ids::{IdAllocator, IdSet, MAX_ID_LEN, NoIds, TimeOrderedIds};
pub use outcome::{CallOutcome, CallSource};
pub use plan::{
    AcceptTruncated, AnsweredCall, Args, Around, HistoryIds, MessageInput, MessagePlan,
    PlanOptions, PlannedCall, SentCall, Shape, answered_after, correctable, plan, plan_assistant,
    rename_reused, reused_id_fix, sanitize_assistant, thinking_stripped,
};
