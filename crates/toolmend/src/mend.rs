//! Mend one call. STUB: being written.
use serde_json::Value;

use crate::{Fix, Issue, RepairOptions, schema::{CompiledTool, Coercions}};

/// Options for [`mend_call`].
#[derive(Debug, Clone, Default)]
pub struct MendOptions {
    /// Repair parser options.
    pub repair: RepairOptions,
    /// Which coercions run.
    pub coercions: Coercions,
}

/// What became of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Valid as sent.
    Valid,
    /// Valid after fixes.
    Repaired,
    /// Still invalid: feedback for the agent.
    Feedback,
}

/// One mended call.
#[derive(Debug, Clone, PartialEq)]
pub struct MendedCall {
    /// Arguments, when valid.
    pub arguments: Option<Value>,
    /// Fixes applied.
    pub fixes: Vec<Fix>,
    /// Issues left.
    pub issues: Vec<Issue>,
    /// Outcome.
    pub outcome: Outcome,
}

/// All calls read from one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Mended {
    /// The calls.
    pub calls: Vec<MendedCall>,
}

/// Mends one call's raw argument text against its tool.
pub fn mend_call(_raw: &str, _tool: &CompiledTool, _opts: &MendOptions) -> Mended {
    Mended { calls: Vec::new() }
}
