//! The plan options of the response path, and the plan alone of the choices after the
//! first; the plan itself is the core's ([`toolmend::drive::plan`]): it keeps no rule of
//! its own.

use toolmend::{
    MendOptions, Toolbox,
    conversation::{AssistantMessage, Message},
    drive::{self, Resolved, Turn},
    message::{AcceptTruncated, PlanOptions},
};

/// Options of the response path (the fuzz targets build it; the gateway builds its
/// [`PlanOptions`] from the configuration).
#[derive(Debug, Clone)]
pub struct MendConfig {
    /// Repair and coercion options.
    pub mend: MendOptions,
    /// Read calls written into the content.
    pub calls_in_text: bool,
    /// Run cut-off calls on what could be read.
    pub accept_truncated: bool,
}

impl MendConfig {
    /// The core's plan options for these (thinking stripped, as the core's default).
    pub fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            mend: self.mend.clone(),
            calls_in_text: self.calls_in_text,
            accept_truncated: if self.accept_truncated {
                AcceptTruncated::All
            } else {
                AcceptTruncated::None
            },
            ..PlanOptions::default()
        }
    }
}

/// The plan only (the driver's first stage, [`toolmend::drive::plan`]) of `message`, a
/// fresh answer to a request whose messages are `history`: minted and renamed ids are
/// unique against the history; `cut_off` (the model hit its token limit) marks the last
/// call as cut off, refused like any cut-off call unless truncated calls are accepted.
/// For the choices after the first, which no later stage runs on.
pub fn plan_only(
    message: &AssistantMessage,
    history: &[Message],
    tools: &Toolbox,
    opts: &PlanOptions,
    cut_off: bool,
) -> Resolved {
    drive::plan(Turn::fresh(message, history, cut_off), tools, opts)
}
