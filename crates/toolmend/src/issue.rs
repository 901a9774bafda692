//! Issues: every reason a call is invalid is recorded as an [`Issue`].
//!
//! Issues are data, not errors (pydantic-core's `ValLineError`, jsonschema's
//! `ValidationErrorKind`): a stable snake_case kind, a JSON Pointer path, and
//! what a caller (or a model) needs to act on them. The ids are documented in
//! `docs/issue-kinds.md`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The stable kind of an issue. Serialised as its snake_case id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum IssueKind {
    /// A required field is absent. Never invented: the agent must supply it.
    MissingRequired,
    /// A value of the wrong JSON type that no coercion could fix.
    WrongType,
    /// A value that is not one of the enum's (or `const`'s) values.
    NotInEnum,
    /// A key the schema does not allow.
    UnknownKey,
    /// A string that does not match its `format` (date, date-time, email …).
    Format,
    /// A number outside `minimum`/`maximum`/`multipleOf`.
    Range,
    /// A string, array or object that is too short or too long.
    Length,
    /// A string that does not match its `pattern`.
    Pattern,
    /// A `oneOf`/`anyOf`/`not`/`if` composition that fails, or another keyword.
    Composition,
    /// A business rule from a custom validator.
    Custom,
    /// The call names a tool that does not exist.
    UnknownTool,
    /// The argument text could not be read as JSON at all.
    Unparseable,
    /// The arguments are not a JSON object.
    NotAnObject,
    /// The text was cut off; running it would run a call the model never finished.
    Truncated,
    /// A corrected or re-asked call carries fewer of the values the model first sent
    /// (three symbols asked for, one left): running it would lose the others silently.
    ValuesLost,
    /// A corrector's answer changed, dropped or added a value no issue named (`Oslo` ->
    /// `Paris`): running it would run what the model never asked for.
    ValueChanged,
}

impl IssueKind {
    /// Every kind, in rank order (for reports and docs).
    pub const ALL: &'static [IssueKind] = &[
        IssueKind::UnknownTool,
        IssueKind::Unparseable,
        IssueKind::Truncated,
        IssueKind::NotAnObject,
        IssueKind::MissingRequired,
        IssueKind::UnknownKey,
        IssueKind::WrongType,
        IssueKind::NotInEnum,
        IssueKind::Format,
        IssueKind::Pattern,
        IssueKind::Range,
        IssueKind::Length,
        IssueKind::Composition,
        IssueKind::Custom,
        IssueKind::ValuesLost,
        IssueKind::ValueChanged,
    ];

    /// The stable snake_case id, as serialised.
    pub fn id(self) -> &'static str {
        match self {
            IssueKind::MissingRequired => "missing_required",
            IssueKind::WrongType => "wrong_type",
            IssueKind::NotInEnum => "not_in_enum",
            IssueKind::UnknownKey => "unknown_key",
            IssueKind::Format => "format",
            IssueKind::Range => "range",
            IssueKind::Length => "length",
            IssueKind::Pattern => "pattern",
            IssueKind::Composition => "composition",
            IssueKind::Custom => "custom",
            IssueKind::ValuesLost => "values_lost",
            IssueKind::ValueChanged => "value_changed",
            IssueKind::UnknownTool => "unknown_tool",
            IssueKind::Unparseable => "unparseable",
            IssueKind::NotAnObject => "not_an_object",
            IssueKind::Truncated => "truncated",
        }
    }
}

impl std::fmt::Display for IssueKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// One reason a call is invalid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    /// What is wrong.
    pub kind: IssueKind,
    /// JSON Pointer to the offending value (`/units`, `/line_items/0/sku`); `""` for the whole.
    pub path: String,
    /// A short human (and model) readable sentence.
    pub message: String,
    /// What was expected (a type name, a format, a bound), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// The value the model sent, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub got: Option<Value>,
    /// The allowed values (enum members, valid keys, valid tool names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<Value>,
    /// A concrete suggestion (`did you mean "city"?`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
}

impl Issue {
    /// An issue with only a kind, path and message.
    pub fn new(kind: IssueKind, path: impl Into<String>, message: impl Into<String>) -> Self {
        Issue {
            kind,
            path: path.into(),
            message: message.into(),
            expected: None,
            got: None,
            allowed: Vec::new(),
            suggestion: None,
        }
    }

    /// Sets what was expected.
    #[must_use]
    pub fn expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }

    /// Sets the value the model sent.
    #[must_use]
    pub fn got(mut self, got: Value) -> Self {
        self.got = Some(got);
        self
    }

    /// Sets the allowed values.
    #[must_use]
    pub fn allowed(mut self, allowed: Vec<Value>) -> Self {
        self.allowed = allowed;
        self
    }

    /// Sets a suggestion.
    #[must_use]
    pub fn suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }

    /// Rank used to sort issues stably: by path, then by this rank.
    pub fn rank(&self) -> u8 {
        match self.kind {
            IssueKind::UnknownTool => 0,
            IssueKind::Unparseable => 1,
            IssueKind::Truncated => 2,
            IssueKind::NotAnObject => 3,
            IssueKind::MissingRequired => 4,
            IssueKind::UnknownKey => 5,
            IssueKind::WrongType => 6,
            IssueKind::NotInEnum => 7,
            IssueKind::Format => 8,
            IssueKind::Pattern => 9,
            IssueKind::Range => 10,
            IssueKind::Length => 11,
            IssueKind::Composition => 12,
            IssueKind::Custom => 13,
            IssueKind::ValuesLost => 14,
            IssueKind::ValueChanged => 15,
        }
    }
}

/// Sorts issues into their stable order (path, then kind rank, then message).
pub fn sort_issues(issues: &mut [Issue]) {
    issues.sort_by(|a, b| {
        a.path
            .cmp(&b.path)
            .then(a.rank().cmp(&b.rank()))
            .then_with(|| a.message.cmp(&b.message))
    });
}
