//! # toolmend: mend the tool calls language models emit
//!
//! A model's tool call passes the same stages wherever toolmend meets it:
//!
//! ```text
//! raw argument text
//!   -> repair    tolerant parse: envelopes (think blocks, fences, prose, chat-template tags,
//!                wrappers, double encoding) and syntax (quotes, commas, literals, truncation)
//!                -> JSON value(s) + the fixes applied            [`repair`]
//!   -> validate  against the tool's compiled JSON Schema, with coercions recorded as
//!                fixes with their safety: safe ("Celsius" -> "celsius"), unsafe
//!                ("5" -> 5, town -> city: a reading was chosen), each switchable
//!                -> valid arguments, or field-level issues        [`schema`]
//!   -> feedback  deterministic text (and JSON) the agent can act on [`feedback`]
//! ```
//!
//! [`mend`] ties the stages together for one call: where the text allows several
//! readings, the tool's schema picks the one that fits best.
//!
//! Every part is pure (no I/O), deterministic, and bounded: the repair parser
//! runs in linear time with a configurable depth limit and never panics.
//!
//! ```
//! use serde_json::json;
//! use toolmend::{mend::mend_call, schema::CompiledTool, MendOptions};
//!
//! let tool = CompiledTool::compile(
//!     "get_weather",
//!     "Current weather for a city.",
//!     &json!({"type": "object",
//!             "properties": {"city": {"type": "string"},
//!                            "units": {"enum": ["celsius", "fahrenheit"]}},
//!             "required": ["city"], "additionalProperties": false}),
//! ).unwrap();
//! let mended = mend_call("{'city': 'Paris', 'units': 'Celsius',}", &tool, &MendOptions::default());
//! let call = &mended.calls[0];
//! assert_eq!(call.arguments, Some(json!({"city": "Paris", "units": "celsius"})));
//! assert!(call.fixes.iter().any(|f| f.kind == toolmend::FixKind::EnumCaseFixed));
//! ```

pub mod agent;
pub mod calendar;
pub mod conversation;
pub mod correct;
pub mod drive;
pub mod error;
pub mod events;
pub mod feedback;
pub mod fix;
pub mod future;
pub mod guard;
pub mod history;
pub mod issue;
pub mod mend;
pub mod message;
pub mod node;
pub mod redact;
pub mod repair;
pub mod schema;
pub mod stream;
#[cfg(feature = "testing")]
pub mod testing;
pub mod validate;

pub use error::Error;
pub use fix::{Fix, FixKind, Safety};
pub use issue::{Issue, IssueKind};
pub use mend::{MendOptions, Mended, MendedCall, Outcome};
pub use repair::{RepairOptions, Repaired, repair};
pub use schema::{CompiledTool, Toolbox};

// The unit tests' measure of work (allocations and CPU time, never a wall clock): the same
// file as the integration tests', so both judge linear time one way.
#[cfg(test)]
#[path = "../tests/it/work.rs"]
mod work;
