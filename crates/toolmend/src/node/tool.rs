//! Tools: what the node runs. A [`Tool`] is async, declares a name, a description and a
//! JSON Schema, and is called with arguments that already passed that schema. Closures
//! ([`tool_fn`]) and typed functions whose schema is derived from a Rust type
//! ([`typed_tool`], feature `typed`) are tools too. A [`Registry`] holds them, compiles
//! each schema once and rejects a second tool with the same name.

use std::{collections::HashMap, fmt, future::Future, sync::Arc, time::Duration};

use serde_json::Value;

use crate::{
    Error,
    conversation::{self, Content},
    schema::{CompiledTool, CustomValidator, Toolbox},
};

pub use crate::future::BoxFuture;

/// What a tool returns: the content the model reads, and an optional artifact for the
/// caller only (raw data, handles; never sent to the model).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The content of the tool message.
    pub content: Content,
    /// Data for the caller, kept out of the model's context.
    pub artifact: Option<Value>,
    /// What the caller may want to know about how the result was made (when it was
    /// received, the service's latency, which template shaped it), kept beside the
    /// message, never in it.
    pub metadata: Option<Value>,
}

impl ToolOutput {
    /// Text content.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: Content::Text(text.into()),
            artifact: None,
            metadata: None,
        }
    }

    /// A JSON value as content: strings as they are, anything else as compact JSON text.
    pub fn json(value: &Value) -> Self {
        match value {
            Value::String(s) => Self::text(s.clone()),
            other => Self::text(other.to_string()),
        }
    }

    /// Adds an artifact for the caller.
    #[must_use]
    pub fn with_artifact(mut self, artifact: Value) -> Self {
        self.artifact = Some(artifact);
        self
    }

    /// Adds metadata for the caller (see the field).
    #[must_use]
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        ToolOutput::text(s)
    }
}

impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        ToolOutput::text(s)
    }
}

impl From<Value> for ToolOutput {
    fn from(v: Value) -> Self {
        ToolOutput::json(&v)
    }
}

/// Whose fault a tool error is, and so what the model should do about it: change its
/// call, or not. Machine-readable in [`ToolResult::fault`](super::ToolResult::fault) and
/// [`CallStats::fault`](super::CallStats::fault) (`call`, `unavailable`, `timeout`,
/// `failed`); each has its own wording ([`super::ToolErrorPolicy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Fault {
    /// The call itself: the tool refused or failed on these arguments. The model should
    /// change the call (LangGraph's "Please fix your mistakes.").
    Call,
    /// The tool could not be reached or would not take the call (connection refused, not
    /// started, busy): the call did not run. Nothing says the call is wrong.
    Unavailable,
    /// No answer in time: the call may or may not have run.
    Timeout,
    /// The tool or its service failed (an HTTP 5xx, a broken or unreadable answer, a
    /// panic): the call may or may not have run. Nothing says the call is wrong.
    Failed,
}

impl Fault {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Call => "call",
            Fault::Unavailable => "unavailable",
            Fault::Timeout => "timeout",
            Fault::Failed => "failed",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a tool call failed while running. What reaches the model is decided by the
/// node's [`super::ToolErrorPolicy`], worded by [`ToolError::fault`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool reported a failure.
    #[error("{0}")]
    Failed(String),
    /// The arguments passed the schema but not the tool's own type (a typed tool whose
    /// Rust type is stricter than its schema).
    #[error("the arguments do not fit the tool's type: {0}")]
    Arguments(String),
    /// The tool did not finish in time.
    #[error("the tool did not finish within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The tool panicked.
    #[error("the tool panicked: {0}")]
    Panicked(String),
    /// A failure (as [`ToolError::Failed`]: `message` is what the model reads) with, for
    /// the caller only, what the service sent beside it and how the call went: the error
    /// result keeps them as its artifact and metadata, as a success does.
    #[error("{message}")]
    Detailed {
        /// What the model reads.
        message: String,
        /// Data the service sent with its failure (MCP `structuredContent` of an
        /// `isError` result, an envelope's `data` beside `status: error`).
        artifact: Option<Box<Value>>,
        /// How the call went (service latency, attempts, …), see [`ToolOutput::metadata`].
        metadata: Option<Box<Value>>,
    },
    /// The tool's service failed, not the call: it could not be reached, failed (a 5xx),
    /// or answered with something unusable. `message` says what happened, without the
    /// service's own text (redacted, see [`crate::redact`]).
    #[error("{message}")]
    Service {
        /// Whose fault: [`Fault::Unavailable`], [`Fault::Timeout`] or [`Fault::Failed`]
        /// (a tool that set [`Fault::Call`] here is read as [`Fault::Failed`]).
        fault: Fault,
        /// What the model reads (before the wording for its fault).
        message: String,
        /// How the call went, see [`ToolOutput::metadata`].
        metadata: Option<Box<Value>>,
    },
}

impl ToolError {
    /// A failure with a message.
    pub fn failed(message: impl fmt::Display) -> Self {
        ToolError::Failed(message.to_string())
    }

    /// A failure of the tool's service (see [`ToolError::Service`]).
    pub fn service(fault: Fault, message: impl fmt::Display) -> Self {
        ToolError::Service {
            fault,
            message: message.to_string(),
            metadata: None,
        }
    }

    /// Whose fault it is: the call's for what the tool itself reported
    /// ([`Failed`](ToolError::Failed), [`Detailed`](ToolError::Detailed),
    /// [`Arguments`](ToolError::Arguments)); [`Fault::Timeout`] for a timeout;
    /// [`Fault::Failed`] for a panic (a bug in the tool); a service failure's own.
    pub fn fault(&self) -> Fault {
        match self {
            ToolError::Failed(_) | ToolError::Arguments(_) | ToolError::Detailed { .. } => {
                Fault::Call
            }
            ToolError::Timeout(_) => Fault::Timeout,
            ToolError::Panicked(_) => Fault::Failed,
            ToolError::Service { fault, .. } => match fault {
                Fault::Call => Fault::Failed,
                other => *other,
            },
        }
    }

    /// The caller's data beside the failure ([`ToolError::Detailed`],
    /// [`ToolError::Service`]), moved out: the artifact and the metadata.
    pub fn into_details(self) -> (Option<Value>, Option<Value>) {
        match self {
            ToolError::Detailed {
                artifact, metadata, ..
            } => (artifact.map(|a| *a), metadata.map(|m| *m)),
            ToolError::Service { metadata, .. } => (None, metadata.map(|m| *m)),
            _ => (None, None),
        }
    }
}

impl From<String> for ToolError {
    fn from(s: String) -> Self {
        ToolError::Failed(s)
    }
}

impl From<&str> for ToolError {
    fn from(s: &str) -> Self {
        ToolError::Failed(s.to_owned())
    }
}

/// What a tool knows about the call it serves.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The call id the result will answer.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// Caller state passed to [`super::ToolNode::invoke_with`] (e.g. a LangGraph state).
    pub state: Option<Arc<Value>>,
    /// The trace the call belongs to ([`super::InvokeOptions::trace_id`]), for the tool
    /// services it reaches (`X-Trace-ID`).
    pub trace_id: Option<Arc<str>>,
    /// When the node received the message the call came in (the start of the SLA's
    /// "call initiation": answer received -> tool request sent).
    pub received_at: Option<std::time::Instant>,
}

/// A tool the node can run.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does (the model reads this).
    fn description(&self) -> &str;
    /// The JSON Schema of its arguments.
    fn parameters(&self) -> &Value;
    /// Runs the tool on arguments that passed the schema.
    fn call<'a>(
        &'a self,
        arguments: Value,
        ctx: CallContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

impl fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool").field("name", &self.name()).finish()
    }
}

/// A tool made from a closure over the JSON arguments. See [`tool_fn`].
pub struct FnTool<F> {
    name: String,
    description: String,
    parameters: Value,
    f: F,
}

impl<F> fmt::Debug for FnTool<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool").field("name", &self.name).finish()
    }
}

/// A tool from a closure `(arguments, ctx) -> future of Result<output, error>`.
///
/// ```
/// use serde_json::json;
/// use toolmend::node::{tool_fn, ToolOutput, ToolError};
/// let add = tool_fn("add", "Adds two integers.",
///     json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
///            "required": ["a", "b"]}),
///     |args, _ctx| async move {
///         Ok::<_, ToolError>(ToolOutput::json(&json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0))))
///     });
/// ```
pub fn tool_fn<F, Fut, O, E>(
    name: impl Into<String>,
    description: impl Into<String>,
    parameters: Value,
    f: F,
) -> FnTool<F>
where
    F: Fn(Value, CallContext) -> Fut + Send + Sync,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Into<ToolOutput>,
    E: Into<ToolError>,
{
    FnTool {
        name: name.into(),
        description: description.into(),
        parameters,
        f,
    }
}

impl<F, Fut, O, E> Tool for FnTool<F>
where
    F: Fn(Value, CallContext) -> Fut + Send + Sync,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Into<ToolOutput>,
    E: Into<ToolError>,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &Value {
        &self.parameters
    }
    fn call<'a>(
        &'a self,
        arguments: Value,
        ctx: CallContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let fut = (self.f)(arguments, ctx);
        Box::pin(async move { fut.await.map(Into::into).map_err(Into::into) })
    }
}

#[cfg(feature = "typed")]
pub use typed::{TypedTool, typed_tool, typed_tool_with_context};

#[cfg(feature = "typed")]
mod typed {
    use std::{fmt, future::Future, marker::PhantomData};

    use serde::de::DeserializeOwned;
    use serde_json::Value;

    use super::{BoxFuture, CallContext, Tool, ToolError, ToolOutput};

    /// A tool whose arguments are a Rust type: the schema is derived from it (schemars),
    /// and validated arguments deserialize into it. See [`typed_tool`].
    pub struct TypedTool<A, F> {
        name: String,
        description: String,
        parameters: Value,
        f: F,
        _args: PhantomData<fn(A)>,
    }

    impl<A, F> fmt::Debug for TypedTool<A, F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("TypedTool")
                .field("name", &self.name)
                .finish()
        }
    }

    /// A tool from an async function of a typed argument struct.
    ///
    /// ```
    /// use serde::Deserialize;
    /// use toolmend::node::{typed_tool, Tool, ToolError};
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Weather { /// The city.
    ///     city: String, days: Option<u8> }
    ///
    /// let t = typed_tool("get_weather", "Forecast for a city.", |w: Weather| async move {
    ///     Ok::<_, ToolError>(format!("{}: sunny for {} days", w.city, w.days.unwrap_or(1)))
    /// });
    /// assert_eq!(t.parameters()["required"], serde_json::json!(["city"]));
    /// ```
    pub fn typed_tool<A, F, Fut, O, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> TypedTool<A, impl Fn(A, CallContext) -> Fut + Send + Sync>
    where
        A: DeserializeOwned + schemars::JsonSchema + Send,
        F: Fn(A) -> Fut + Send + Sync,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Into<ToolOutput>,
        E: Into<ToolError>,
    {
        typed_tool_with_context(name, description, move |args: A, _: CallContext| f(args))
    }

    /// [`typed_tool`] whose function also gets the [`CallContext`] (call id, caller state).
    pub fn typed_tool_with_context<A, F, Fut, O, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> TypedTool<A, F>
    where
        A: DeserializeOwned + schemars::JsonSchema + Send,
        F: Fn(A, CallContext) -> Fut + Send + Sync,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Into<ToolOutput>,
        E: Into<ToolError>,
    {
        let mut parameters = schemars::schema_for!(A).to_value();
        if let Some(obj) = parameters.as_object_mut() {
            // The model does not need the meta-schema or the Rust type's name
            // (`CompiledTool` reads a schema without `$schema` as 2020-12, schemars' draft).
            obj.remove("title");
            obj.remove("$schema");
        }
        TypedTool {
            name: name.into(),
            description: description.into(),
            parameters,
            f,
            _args: PhantomData,
        }
    }

    impl<A, F, Fut, O, E> Tool for TypedTool<A, F>
    where
        A: DeserializeOwned + Send,
        F: Fn(A, CallContext) -> Fut + Send + Sync,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Into<ToolOutput>,
        E: Into<ToolError>,
    {
        fn name(&self) -> &str {
            &self.name
        }
        fn description(&self) -> &str {
            &self.description
        }
        fn parameters(&self) -> &Value {
            &self.parameters
        }
        fn call<'a>(
            &'a self,
            arguments: Value,
            ctx: CallContext,
        ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
            match serde_json::from_value::<A>(arguments) {
                Ok(args) => {
                    let fut = (self.f)(args, ctx);
                    Box::pin(async move { fut.await.map(Into::into).map_err(Into::into) })
                }
                Err(e) => Box::pin(std::future::ready(Err(ToolError::Arguments(e.to_string())))),
            }
        }
    }
}

/// Per-tool settings.
#[derive(Clone, Default)]
pub struct ToolOptions {
    /// Give up on a call after this long (overrides the node's default).
    pub timeout: Option<Duration>,
    /// Run a call whose text was cut off, on what could be read of it (off: such a call
    /// is answered with feedback asking for the whole call again). Only for tools where a
    /// partial argument is harmless (a search query, not a payment).
    pub accept_truncated: bool,
    /// Business rules beyond the schema, run after it passes.
    pub validators: Vec<Arc<dyn CustomValidator>>,
    /// Flood limits the tool declares on itself (`send_email`: 2 per 60 s), merged into a
    /// [`RuleGuard`](crate::guard::RuleGuard) given with
    /// [`ToolNodeBuilder::rule_guard`](crate::node::ToolNodeBuilder::rule_guard); the
    /// guard's own configuration for the tool wins key by key.
    pub guard: Option<crate::guard::ToolRules>,
}

impl fmt::Debug for ToolOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolOptions")
            .field("timeout", &self.timeout)
            .field("accept_truncated", &self.accept_truncated)
            .field("validators", &self.validators.len())
            .field("guard", &self.guard)
            .finish()
    }
}

impl ToolOptions {
    /// Flood limits of this tool (see the field).
    #[must_use]
    pub fn guard(mut self, rules: crate::guard::ToolRules) -> Self {
        self.guard = Some(rules);
        self
    }

    /// A timeout for this tool.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Run calls whose text was cut off (see the field).
    #[must_use]
    pub fn accept_truncated(mut self) -> Self {
        self.accept_truncated = true;
        self
    }

    /// Adds a custom validator.
    #[must_use]
    pub fn validator(mut self, v: impl CustomValidator + 'static) -> Self {
        self.validators.push(Arc::new(v));
        self
    }
}

/// A registered tool: the tool, its compiled schema and its settings.
#[derive(Debug)]
pub(crate) struct Entry {
    pub tool: Arc<dyn Tool>,
    pub options: ToolOptions,
}

/// The tools a node can run; names are unique, schemas compiled once.
#[derive(Debug, Default)]
pub struct Registry {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    toolbox: Toolbox,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool with default settings. Errors on a name outside `^[a-zA-Z0-9_-]{1,64}$`,
    /// a duplicate name, or an invalid schema.
    pub fn add(&mut self, tool: impl Tool + 'static) -> Result<&mut Self, Error> {
        self.add_shared(Arc::new(tool), ToolOptions::default())
    }

    /// Adds a tool with settings (errors as [`add`](Self::add)).
    pub fn add_with(
        &mut self,
        tool: impl Tool + 'static,
        options: ToolOptions,
    ) -> Result<&mut Self, Error> {
        self.add_shared(Arc::new(tool), options)
    }

    /// Adds a shared tool with settings (errors as [`add`](Self::add)).
    pub fn add_shared(
        &mut self,
        tool: Arc<dyn Tool>,
        options: ToolOptions,
    ) -> Result<&mut Self, Error> {
        let name = tool.name().to_owned();
        if !crate::history::is_valid_function_name(&name) {
            return Err(Error::InvalidToolName(name));
        }
        if self.by_name.contains_key(&name) {
            return Err(Error::DuplicateTool(name));
        }
        let mut compiled = CompiledTool::compile(&name, tool.description(), tool.parameters())?;
        for v in &options.validators {
            compiled = compiled.with_validator(Arc::clone(v));
        }
        self.toolbox.add(compiled)?;
        self.by_name.insert(name, self.entries.len());
        self.entries.push(Entry { tool, options });
        Ok(self)
    }

    /// The compiled schemas, for mending.
    pub fn toolbox(&self) -> &Toolbox {
        &self.toolbox
    }

    /// The tool names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.tool.name())
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A tool by exact name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.entry(name).map(|e| &e.tool)
    }

    pub(crate) fn entry(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// The tool definitions to send to a model (`tools` of a chat request).
    pub fn definitions(&self) -> Vec<conversation::Tool> {
        self.entries
            .iter()
            .map(|e| {
                conversation::Tool::function(
                    e.tool.name(),
                    e.tool.description(),
                    e.tool.parameters().clone(),
                )
            })
            .collect()
    }
}
