//! The front's own validators (a LangGraph node's `validators=`): business rules beyond
//! the schema that may be slow or asynchronous (a database lookup), unlike a tool's
//! [`CustomValidator`](crate::schema::CustomValidator). The driver asks them about every
//! call that may run (phase `initial`); the correction loop and the settle stage ask
//! them about the arguments they produce (phases `correction`, `salvage`).

use serde_json::Value;

use crate::{Issue, IssueKind, future::BoxFuture, schema::Phase};

/// One request to the front's validators.
#[derive(Debug, Clone, Copy)]
pub struct Validation<'a> {
    /// The tool.
    pub tool: &'a str,
    /// The call's id.
    pub call_id: &'a str,
    /// Arguments that passed the schema (or that the front's runtime takes).
    pub arguments: &'a Value,
    /// Which stage produced them.
    pub phase: Phase,
}

/// The front's own validators (a LangGraph node's `validators=`): business rules beyond
/// the schema, which may be slow or asynchronous.
pub trait Validate: Sync {
    /// The problems found, one sentence each; none when the arguments pass.
    fn validate<'a>(&'a self, call: Validation<'a>) -> BoxFuture<'a, Vec<String>>;
}

/// The problems as custom issues.
pub fn custom_issues(problems: Vec<String>) -> Vec<Issue> {
    problems
        .into_iter()
        .map(|p| Issue::new(IssueKind::Custom, "", p))
        .collect()
}

impl std::fmt::Debug for dyn Validate + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Validate")
    }
}
