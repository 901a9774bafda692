//! Schema: each tool's JSON Schema compiled once; validation to structured
//! [`Issue`]s; safe, switchable coercions recorded as [`Fix`]es; custom validators.
//!
//! STUB: the interface is fixed, the implementation is being written.

use std::sync::Arc;

use serde_json::Value;

use crate::{Error, Fix, Issue};

/// Which safe coercions run (lax mode). All on by default; [`Coercions::none`] is strict.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)]
pub struct Coercions {
    /// `"5"` -> `5`, `"2.5"` -> `2.5` for integer/number fields.
    pub numeric_strings: bool,
    /// `"true"`/`"False"` -> booleans for boolean fields.
    pub boolean_strings: bool,
    /// `5` -> `"5"` for string fields.
    pub scalar_to_string: bool,
    /// `"x"` -> `["x"]` for array fields.
    pub wrap_in_array: bool,
    /// `"a, b"` -> `["a", "b"]` for arrays of strings.
    pub csv_split: bool,
    /// `"Celsius"` -> `"celsius"`, `"no-preference"` -> `"no_preference"`.
    pub enum_case: bool,
    /// Unknown key -> the schema's key when unambiguous (case style, alias, edit distance).
    pub rename_keys: bool,
    /// Keys the schema forbids (`additionalProperties: false`) are dropped.
    pub drop_unknown_keys: bool,
    /// `"[\"a\"]"` -> `["a"]` for object/array fields.
    pub json_strings: bool,
    /// `"01/19/2026"` -> `"2026-01-19"` for `format: date` / `date-time`.
    pub dates: bool,
    /// `null` for an optional field that does not allow null: the field is omitted.
    pub null_omitted: bool,
    /// `{"input"|"arguments"|"parameters"|<tool name>: {...}}` unwrapped.
    pub unwrap_arguments: bool,
}

impl Default for Coercions {
    fn default() -> Self {
        Coercions {
            numeric_strings: true,
            boolean_strings: true,
            scalar_to_string: true,
            wrap_in_array: true,
            csv_split: true,
            enum_case: true,
            rename_keys: true,
            drop_unknown_keys: true,
            json_strings: true,
            dates: true,
            null_omitted: true,
            unwrap_arguments: true,
        }
    }
}

impl Coercions {
    /// Strict mode: no coercion at all.
    pub fn none() -> Self {
        Coercions {
            numeric_strings: false,
            boolean_strings: false,
            scalar_to_string: false,
            wrap_in_array: false,
            csv_split: false,
            enum_case: false,
            rename_keys: false,
            drop_unknown_keys: false,
            json_strings: false,
            dates: false,
            null_omitted: false,
            unwrap_arguments: false,
        }
    }
}

/// Where in the pipeline a custom validator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The model's call, after repair and coercion.
    Initial,
    /// A call re-written by a correction model.
    Correction,
    /// Arguments returned by a user's salvage hook.
    Salvage,
}

/// What a custom validator can see besides the arguments.
#[derive(Debug, Clone, Copy)]
pub struct ValidationContext<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The pipeline phase.
    pub phase: Phase,
    /// The conversation so far, if the caller has one.
    pub messages: &'a [crate::protocol::Message],
    /// Caller state (e.g. a LangGraph state), if any.
    pub state: Option<&'a Value>,
}

impl<'a> ValidationContext<'a> {
    /// A context with no conversation and no state.
    pub fn new(tool: &'a str, phase: Phase) -> Self {
        ValidationContext {
            tool,
            phase,
            messages: &[],
            state: None,
        }
    }
}

/// A business rule beyond JSON Schema (e.g. "a date at most 30 days ahead").
/// Returns the issues it finds; an empty list means the arguments pass.
pub trait CustomValidator: Send + Sync {
    /// Checks already schema-valid arguments.
    fn validate(&self, arguments: &Value, ctx: &ValidationContext<'_>) -> Vec<Issue>;
}

impl<F> CustomValidator for F
where
    F: Fn(&Value, &ValidationContext<'_>) -> Vec<Issue> + Send + Sync,
{
    fn validate(&self, arguments: &Value, ctx: &ValidationContext<'_>) -> Vec<Issue> {
        self(arguments, ctx)
    }
}

/// The result of [`CompiledTool::check`]: the (coerced) value, what was changed, what is still wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The arguments after coercion.
    pub value: Value,
    /// The coercions applied.
    pub fixes: Vec<Fix>,
    /// What is still wrong; empty means valid.
    pub issues: Vec<Issue>,
}

/// A tool with its schema compiled once; cheap to share across threads (`Send + Sync`).
pub struct CompiledTool {
    name: String,
    description: String,
    parameters: Value,
    validators: Vec<Arc<dyn CustomValidator>>,
}

impl std::fmt::Debug for CompiledTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CompiledTool {
    /// Compiles a tool's JSON Schema (drafts 7 and 2020-12; `$schema` picks, 2020-12 by default).
    pub fn compile(name: &str, description: &str, parameters: &Value) -> Result<Self, Error> {
        Ok(CompiledTool {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters: parameters.clone(),
            validators: Vec::new(),
        })
    }

    /// Adds a custom validator, run after the schema passes.
    #[must_use]
    pub fn with_validator(mut self, validator: Arc<dyn CustomValidator>) -> Self {
        self.validators.push(validator);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The tool's JSON Schema as given.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// Fast path: true when the arguments are valid as they are (schema only).
    pub fn is_valid(&self, _arguments: &Value) -> bool {
        true
    }

    /// Validates without coercing: the structural issues, sorted (see [`crate::issue::sort_issues`]).
    pub fn validate(&self, _arguments: &Value) -> Vec<Issue> {
        Vec::new()
    }

    /// Coerces what is safe to coerce (per `coercions`), then validates, then runs
    /// the custom validators if the schema passes.
    pub fn check(
        &self,
        arguments: Value,
        _coercions: &Coercions,
        _ctx: &ValidationContext<'_>,
    ) -> Checked {
        Checked {
            value: arguments,
            fixes: Vec::new(),
            issues: Vec::new(),
        }
    }
}

/// The tools of one request or agent, by name; rejects duplicate names.
#[derive(Debug, Default, Clone)]
pub struct Toolbox {
    tools: Vec<Arc<CompiledTool>>,
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Self {
        Toolbox::default()
    }

    /// Adds a tool; a second tool with the same name is an error.
    pub fn add(&mut self, tool: CompiledTool) -> Result<(), Error> {
        if self.get(tool.name()).is_some() {
            return Err(Error::DuplicateTool(tool.name().to_owned()));
        }
        self.tools.push(Arc::new(tool));
        Ok(())
    }

    /// The tool with this exact name.
    pub fn get(&self, name: &str) -> Option<&Arc<CompiledTool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Every tool name, in the order added.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name())
    }

    /// Every tool, in the order added.
    pub fn tools(&self) -> &[Arc<CompiledTool>] {
        &self.tools
    }
}
