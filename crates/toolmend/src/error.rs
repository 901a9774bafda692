//! Errors for misuse only. A broken call is not an error: it is [`crate::Issue`] data.

/// What can go wrong when toolmend is used wrongly (an invalid schema, a duplicate tool).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tool's `parameters` is not a valid JSON Schema.
    #[error("tool `{tool}`: invalid JSON Schema: {reason}")]
    InvalidSchema {
        /// The tool's name.
        tool: String,
        /// What the schema compiler said.
        reason: String,
    },
    /// A tool name providers refuse (OpenAI: `^[a-zA-Z0-9_-]{1,64}$`).
    #[error(
        "tool name `{0}` is not accepted by providers: use 1 to 64 letters, digits, `_` or `-`"
    )]
    InvalidToolName(String),
    /// A configuration that cannot work (the message says what to change).
    #[error("configuration error: {0}")]
    Config(String),
    /// Two tools with the same name were registered.
    #[error("tool `{0}` is defined twice; tool names must be unique")]
    DuplicateTool(String),
}
