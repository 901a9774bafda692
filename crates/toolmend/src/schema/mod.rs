//! Schema: each tool's JSON Schema compiled once; validation to structured
//! [`Issue`]s; safe, switchable coercions recorded as [`Fix`]es; custom validators.
//!
//! ```
//! use serde_json::json;
//! use toolmend::schema::{Coercions, CompiledTool, Phase, ValidationContext};
//! use toolmend::FixKind;
//!
//! let tool = CompiledTool::compile(
//!     "get_weather",
//!     "Current weather for a city.",
//!     &json!({"type": "object",
//!             "properties": {"city": {"type": "string"},
//!                            "days": {"type": "integer"},
//!                            "units": {"enum": ["celsius", "fahrenheit"]}},
//!             "required": ["city"], "additionalProperties": false}),
//! ).unwrap();
//! let ctx = ValidationContext::new("get_weather", Phase::Initial);
//! let checked = tool.check(json!({"town": "Paris", "days": "3", "units": "Celsius"}),
//!                          &Coercions::default(), &ctx);
//! assert_eq!(checked.value, json!({"city": "Paris", "days": 3, "units": "celsius"}));
//! assert!(checked.issues.is_empty());
//! let kinds: Vec<FixKind> = checked.fixes.iter().map(|f| f.kind).collect();
//! assert_eq!(kinds, [FixKind::KeyRenamed, FixKind::StringToInteger, FixKind::EnumCaseFixed]);
//!
//! // Strict mode: nothing is coerced, every problem is an issue.
//! let strict = tool.check(json!({"town": "Paris"}), &Coercions::none(), &ctx);
//! assert_eq!(strict.issues.len(), 2); // city missing, town unknown
//! ```
//!
//! How it works:
//! - [`CompiledTool::compile`] builds a `jsonschema` validator once (draft from `$schema`:
//!   7 or 2020-12 and the others `jsonschema` knows, 2020-12 by default; formats asserted;
//!   no remote `$ref`).
//! - [`CompiledTool::check`] first asks the validator's `is_valid`; valid arguments with no
//!   unknown top-level keys return at once, untouched. Otherwise the value is walked along the
//!   schema (local `$ref`, `allOf`, `anyOf`/`oneOf`, `items`/`prefixItems`, nested objects)
//!   and coerced, then validated, then given to the custom validators.
//! - Validation errors become [`Issue`]s (see `issues.rs` for the mapping), sorted by
//!   [`crate::issue::sort_issues`].

mod business;
mod coerce;
mod compile;
mod dates;
mod declared;
mod issues;
mod names;
mod suggest;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde_json::Value;

use crate::{Error, Fix, Issue, IssueKind};

pub use business::BusinessRules;
pub(crate) use coerce::preview;
pub(crate) use compile::escape as escape_pointer;
pub(crate) use compile::unescape as unescape_pointer;
pub use declared::declared_path;
pub use names::{SwitchError, UnknownSwitch};

/// Which coercions run (lax mode). All on by default; [`Coercions::none`] is strict. Each is recorded as a fix with its
/// [`Safety`](crate::Safety): some are safe (`"Celsius"` -> `"celsius"`), some unsafe (a
/// reading was chosen: `"5"` -> `5`, `town` -> `city`), one lossy (`drop_unknown_keys`);
/// [`Coercions::switch_of`] says which switch makes which fix; [`Coercions::set`] and
/// [`Coercions::from_names`] take a switch by name (or by the id of a fix it makes), as
/// its serde form does (a bool, or a map of names to bools over the defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)]
pub struct Coercions {
    /// `"5"` -> `5`, `" 12 "` -> `12`, `"2.5"` -> `2.5`, `"1e3"` -> `1000` for
    /// integer/number fields (not `"5 apples"`, not `"5.5"` for an integer); also `5.0` -> `5`
    /// for integer fields.
    pub numeric_strings: bool,
    /// `"true"`/`"False"`/`"yes"`/`"no"`/`"1"`/`"0"` (any case) -> booleans for boolean
    /// fields; anything else (`"sometimes"`) stays a `wrong_type` issue.
    pub boolean_strings: bool,
    /// `5` -> `"5"` for string fields.
    pub scalar_to_string: bool,
    /// `"x"` -> `["x"]` for array fields (any scalar, or an object for an array of
    /// objects), when the value fits the array's items.
    pub wrap_in_array: bool,
    /// `"a, b"` -> `["a", "b"]` for arrays of strings.
    pub csv_split: bool,
    /// `"Celsius"` -> `"celsius"`, `"no-preference"` -> `"no_preference"`: a unique match
    /// ignoring case, `-`, `_` and spaces. No match is never guessed.
    pub enum_case: bool,
    /// Unknown key -> the schema's key when unambiguous (case style, alias, edit distance),
    /// only onto a key not already present and only when the value fits it.
    pub rename_keys: bool,
    /// Keys the schema forbids (`additionalProperties: false`) are dropped, except a key
    /// whose value could be a missing required one: that stays an `unknown_key` issue.
    pub drop_unknown_keys: bool,
    /// `"[\"a\"]"` -> `["a"]` for object/array fields; and the other way, an object or
    /// array given for a string field meant to hold JSON text (a file's content, a
    /// request body) -> its JSON text (`json_text_encoded`).
    pub json_strings: bool,
    /// `"01/19/2026"` -> `"2026-01-19"` for `format: date`; near-RFC 3339 forms for
    /// `format: date-time` (a missing time zone is never invented).
    pub dates: bool,
    /// `null` for an optional field that does not allow null: the field is omitted.
    pub null_omitted: bool,
    /// `{"input"|"arguments"|"parameters"|<tool name>: {...}}` unwrapped.
    pub unwrap_arguments: bool,
    /// A list given for a scalar field (`{"symbol": ["AAPL", "MSFT"]}` for `symbol:
    /// string`), each element alone making a valid call: one call per element (a
    /// `merged_call_split` fix, unsafe; `toolmend::mend` splits, [`CompiledTool::check`]
    /// does not). Only when exactly one top-level field holds the list, each element is a
    /// scalar (string, number, boolean) and each alone makes a valid call, at most 32.
    /// On by default; off, the call is feedback that asks for one call per value (see
    /// `docs/issue-kinds.md`, "Merged calls").
    pub split_merged_calls: bool,
}

impl Default for Coercions {
    fn default() -> Self {
        let mut c = Coercions::none();
        for rule in coerce::RULES {
            *(rule.field)(&mut c) = rule.default_on;
        }
        c
    }
}

impl Coercions {
    /// The switches, by field name (as Python's `coerce=` names them).
    pub const SWITCHES: [&'static str; 13] = coerce::switches();

    /// The switch that makes the schema fix `kind`; `None` for a fix no switch controls
    /// (a repair of the text or its envelope, which every lax mode makes; a corrector's
    /// or a salvage hook's).
    pub fn switch_of(kind: crate::FixKind) -> Option<&'static str> {
        coerce::RULES
            .iter()
            .find(|r| r.fixes.contains(&kind))
            .map(|r| r.switch)
    }

    /// Whether the switch `name` (one of [`SWITCHES`](Self::SWITCHES)) is on; `None` for
    /// a name that is not a switch.
    pub fn get(&self, name: &str) -> Option<bool> {
        let rule = coerce::RULES.iter().find(|r| r.switch == name)?;
        Some(*(rule.field)(&mut self.clone()))
    }

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
            split_merged_calls: false,
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
    pub messages: &'a [crate::conversation::Message],
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

impl Checked {
    /// True when nothing is wrong.
    pub fn is_valid(&self) -> bool {
        self.issues.is_empty()
    }
}

/// A tool with its schema compiled once; cheap to share across threads (`Send + Sync`).
pub struct CompiledTool {
    name: String,
    description: String,
    parameters: Value,
    /// `parameters`, or an accept-any-object schema when it is missing or empty.
    schema: Value,
    draft: jsonschema::Draft,
    validator: jsonschema::Validator,
    /// True when some `anyOf`/`oneOf` has two or more non-null branches.
    needs_branches: bool,
    /// The top-level property names when valid arguments may still carry unknown keys
    /// worth renaming (the root lists `properties` but does not forbid other keys); empty
    /// otherwise.
    open_root: Vec<String>,
    /// The root lists `properties` and says nothing about other keys (no
    /// `additionalProperties`, `unevaluatedProperties` or `patternProperties`): a key it
    /// does not list reaches no argument, and is reported.
    silent_root: bool,
    /// Some object below the root is open the same way (see
    /// [`compile::has_silent_nested_object`]): a valid call with nested values is walked.
    silent_nested: bool,
    /// Validators for every sub-schema and the pointer of every `anyOf`/`oneOf` branch,
    /// built on first need (to try `anyOf` branches).
    branch_validators: OnceLock<Option<Branches>>,
    /// The did-you-mean data of an object schema's properties (in `property_names` order),
    /// by the schema's address and whether descriptions count; filled on first need.
    candidates: Mutex<CandidateCache>,
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
    ///
    /// A missing (`null`) or empty (`{}`) `parameters` accepts any object. Formats
    /// (`date`, `date-time`, `email` …) are asserted in every draft. Remote `$ref`s are not
    /// fetched: a schema that needs one is an [`Error::InvalidSchema`].
    pub fn compile(name: &str, description: &str, parameters: &Value) -> Result<Self, Error> {
        match Self::compile_as_given(name, description, parameters) {
            // Tools written from Python or C often name their types so (`"int"`, `"list"`,
            // `"uint32"`), and model servers take them: where that is all that makes the
            // schema invalid, it is read with JSON Schema's names (docs/node.md).
            Err(e) => match compile::with_json_type_names(parameters) {
                Some(named) => Self::compile_as_given(name, description, &named).map_err(|_| e),
                None => Err(e),
            },
            ok => ok,
        }
    }

    fn compile_as_given(name: &str, description: &str, parameters: &Value) -> Result<Self, Error> {
        let schema = compile::effective_schema(parameters);
        let draft = compile::draft_of(&schema);
        let validator = compile::build(name, &schema, draft)?;
        let rules =
            BusinessRules::from_schema(parameters).map_err(|reason| Error::InvalidSchema {
                tool: name.to_owned(),
                reason,
            })?;
        let needs_branches = compile::needs_branch_validators(&schema);
        let root = compile::flatten(&schema, compile::Node::root(&schema));
        let open_root = if matches!(root.additional(), compile::Additional::Forbidden) {
            Vec::new()
        } else {
            root.property_names()
                .into_iter()
                .map(str::to_owned)
                .collect()
        };
        let silent_root = !open_root.is_empty()
            && matches!(root.additional(), compile::Additional::Allowed)
            && !root.declares_other_keys()
            && !root.has_pattern_properties();
        drop(root);
        let silent_nested = compile::has_silent_nested_object(&schema);
        Ok(CompiledTool {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters: parameters.clone(),
            schema,
            draft,
            validator,
            needs_branches,
            open_root,
            silent_root,
            silent_nested,
            branch_validators: OnceLock::new(),
            candidates: Mutex::new(HashMap::new()),
            validators: if rules.is_empty() {
                Vec::new()
            } else {
                vec![Arc::new(rules) as Arc<dyn CustomValidator>]
            },
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

    /// The JSON Schema draft the tool is validated with.
    pub fn draft(&self) -> jsonschema::Draft {
        self.draft
    }

    /// Does the top-level string property `key` hold text or a document (a file's
    /// content, a body, code), by its name or description? A list of strings given for it
    /// is that text in pieces (its lines), not one value per call.
    pub(crate) fn holds_document(&self, key: &str) -> bool {
        let description = self
            .parameters()
            .get("properties")
            .and_then(|p| p.get(key))
            .and_then(|s| s.get("description"))
            .and_then(Value::as_str);
        coerce::json_text::holds_document(key, description)
    }

    /// The top-level property names the schema lists, in schema order.
    pub fn property_names(&self) -> Vec<&str> {
        compile::flatten(&self.schema, compile::Node::root(&self.schema)).property_names()
    }

    /// Fast path: true when the arguments are valid as they are (schema only).
    pub fn is_valid(&self, arguments: &Value) -> bool {
        arguments.is_object() && self.validator.is_valid(arguments)
    }

    /// Validates without coercing: the structural issues, sorted (see [`crate::issue::sort_issues`]).
    ///
    /// Arguments that are not a JSON object give one [`IssueKind::NotAnObject`] issue.
    pub fn validate(&self, arguments: &Value) -> Vec<Issue> {
        if !arguments.is_object() {
            return vec![issues::not_an_object(arguments)];
        }
        if self.validator.is_valid(arguments) {
            return Vec::new();
        }
        issues::collect(self, arguments)
    }

    /// True when [`check`](Self::check) would return these arguments unchanged with no
    /// issue: valid, no key worth renaming, no custom validator to run. A cheap test for
    /// callers holding arguments in another form (e.g. Python objects) that only need to
    /// know whether to pass them through as they are.
    pub fn passes_as_sent(&self, arguments: &Value, coercions: &Coercions) -> bool {
        self.validators.is_empty()
            && self.is_valid(arguments)
            && !self.has_keys_to_rename(arguments, coercions)
    }

    /// Coerces what is safe to coerce (per `coercions`), then validates, then runs
    /// the custom validators if the schema passes.
    ///
    /// Valid arguments with no key worth a look return at once: the same value, no fixes
    /// (a key no field takes, even nested, is worth one). A missing required value is
    /// never invented and no default is added.
    pub fn check(
        &self,
        arguments: Value,
        coercions: &Coercions,
        ctx: &ValidationContext<'_>,
    ) -> Checked {
        if self.is_valid(&arguments) && !self.has_keys_to_rename(&arguments, coercions) {
            let issues = self.run_validators(&arguments, ctx);
            return Checked {
                value: arguments,
                fixes: Vec::new(),
                issues,
            };
        }
        let mut value = arguments;
        let mut fixes = Vec::new();
        let mut walk_issues = Vec::new();
        // The walk also reports keys that would reach nothing, with coercion off too.
        if *coercions != Coercions::none() || self.silent_root || self.silent_nested {
            let mut walker = coerce::Walker::new(self, coercions);
            walker.run(&mut value);
            fixes = walker.fixes;
            walk_issues = walker.issues;
        }
        let mut issues = self.validate(&value);
        if issues.is_empty() && walk_issues.is_empty() {
            issues = self.run_validators(&value, ctx);
        }
        if !walk_issues.is_empty() {
            issues.extend(walk_issues);
            crate::issue::sort_issues(&mut issues);
        }
        Checked {
            value,
            fixes,
            issues,
        }
    }

    /// True when a valid object may still hold keys worth a look: top-level keys the
    /// schema does not list where renaming or unwrapping could apply, or where the root is
    /// open only by saying nothing (such a key is an issue: it would reach no argument);
    /// or nested values under a schema with such a silent object below the root.
    fn has_keys_to_rename(&self, arguments: &Value, coercions: &Coercions) -> bool {
        let Some(args) = arguments.as_object() else {
            return false;
        };
        if self.silent_nested && args.values().any(|v| v.is_object() || v.is_array()) {
            return true;
        }
        // A valid object under a root that forbids other keys has none.
        if self.open_root.is_empty()
            || (!coercions.rename_keys && !coercions.unwrap_arguments && !self.silent_root)
        {
            return false;
        }
        args.keys().any(|k| !self.open_root.contains(k))
    }

    fn run_validators(&self, arguments: &Value, ctx: &ValidationContext<'_>) -> Vec<Issue> {
        let mut out = Vec::new();
        for v in &self.validators {
            // A panicking rule is a bug in the rule, not a reason to lose the call: it
            // rejects the call with an issue saying so (never runs it unchecked).
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                v.validate(arguments, ctx)
            })) {
                Ok(issues) => out.extend(issues),
                Err(_) => out.push(Issue::new(
                    crate::IssueKind::Custom,
                    "",
                    "a custom validator of this tool failed (it panicked); the call was not run",
                )),
            }
        }
        crate::issue::sort_issues(&mut out);
        out
    }

    /// The did-you-mean data for the properties of the object schema at `node` (the schema
    /// document never changes, so it is computed once per schema position); `build` makes it.
    fn candidate_data(
        &self,
        node: &Value,
        with_descriptions: bool,
        build: impl FnOnce() -> Vec<suggest::CandidateData>,
    ) -> Arc<Vec<suggest::CandidateData>> {
        let key = (std::ptr::from_ref(node) as usize, with_descriptions);
        if let Some(d) = self
            .candidates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Arc::clone(d);
        }
        let data = Arc::new(build());
        Arc::clone(
            self.candidates
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key)
                .or_insert(data),
        )
    }

    /// Whether `value` is valid for the `anyOf`/`oneOf` branch `branch`; `None` when no
    /// validator for it could be built.
    fn branch_valid(&self, branch: compile::Node<'_>, value: &Value) -> Option<bool> {
        let branches = self
            .branch_validators
            .get_or_init(|| {
                self.needs_branches
                    .then(|| {
                        compile::build_map(&self.schema, self.draft).map(|validators| Branches {
                            validators,
                            locations: compile::branch_locations(&self.schema),
                        })
                    })
                    .flatten()
            })
            .as_ref()?;
        let loc = branches
            .locations
            .get(&(std::ptr::from_ref(branch.schema) as usize))?;
        branches.validators.get(loc).map(|v| v.is_valid(value))
    }
}

/// Did-you-mean data by (schema address, descriptions counted).
type CandidateCache = HashMap<(usize, bool), Arc<Vec<suggest::CandidateData>>>;

/// Validators for the sub-schemas, and where each `anyOf`/`oneOf` branch sits.
struct Branches {
    validators: jsonschema::ValidatorMap,
    locations: std::collections::HashMap<usize, String>,
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

    /// A toolbox of these tools; a repeated name is an error.
    pub fn from_tools(tools: impl IntoIterator<Item = CompiledTool>) -> Result<Self, Error> {
        let mut b = Toolbox::new();
        for t in tools {
            b.add(t)?;
        }
        Ok(b)
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The [`IssueKind::UnknownTool`] issue for a call to `name`: `allowed` lists every tool
    /// name, `suggestion` a close one (`did you mean "get_weather"?` for `get_wether`).
    pub fn unknown_tool_issue(&self, name: &str) -> Issue {
        let names: Vec<&str> = self.names().collect();
        let cands: Vec<suggest::Candidate<'_>> = names
            .iter()
            .map(|n| suggest::Candidate::new(n, None))
            .collect();
        let mut issue = Issue::new(
            IssueKind::UnknownTool,
            "",
            format!("there is no tool named \"{name}\""),
        )
        .got(Value::String(name.to_owned()))
        .allowed(
            names
                .iter()
                .map(|n| Value::String((*n).to_owned()))
                .collect(),
        );
        if let Some(s) = suggest::did_you_mean(name, &cands) {
            issue = issue.suggestion(format!("did you mean \"{s}\"?"));
        }
        issue
    }
}
