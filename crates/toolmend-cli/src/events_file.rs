//! `toolmend mend --events FILE`: the batch's event log, in the core's format.

use std::{
    fs::File,
    io::{self, Write},
    path::PathBuf,
};

use anyhow::{Context, Result};
use serde_json::Value;
use toolmend::{
    MendedCall, Toolbox,
    events::{self, CallEvent},
    message::{CallOutcome, CallSource, PlannedCall},
};

/// `toolmend mend --events FILE`: the batch's event log, one line per call, in the
/// gateway's format (`front` `cli`, `line` the input line, no request id or session).
#[derive(Debug)]
pub struct EventsFile {
    out: Option<io::BufWriter<File>>,
    model: Option<String>,
}

impl EventsFile {
    /// The file `path` (created or replaced), or nothing without one.
    pub fn create(path: Option<&PathBuf>, model: Option<&str>) -> Result<Self> {
        let out = match path {
            Some(p) => Some(io::BufWriter::new(File::create(p).with_context(|| {
                format!("cannot create the event log {}", p.display())
            })?)),
            None => None,
        };
        Ok(EventsFile {
            out,
            model: model.and_then(events::model_name),
        })
    }

    fn context(&self, line: usize) -> events::Context {
        events::Context {
            ts: events::now(),
            front: "cli".to_owned(),
            line: u64::try_from(line).ok(),
            model: self.model.clone(),
            ..events::Context::default()
        }
    }

    fn write(&mut self, ctx: &events::Context, call: &events::Call<'_>) -> Result<()> {
        if let Some(out) = &mut self.out {
            serde_json::to_writer(&mut *out, &CallEvent::new(ctx, call))?;
            out.write_all(b"\n").context("cannot write the event log")?;
        }
        Ok(())
    }

    /// The calls read from one call record's text (the second and later were glued to
    /// the first).
    pub fn calls(&mut self, line: usize, calls: &[MendedCall], schema: &Value) -> Result<()> {
        if self.out.is_none() {
            return Ok(());
        }
        let ctx = self.context(line);
        for (index, c) in calls.iter().enumerate() {
            let call = events::Call {
                index,
                tool: &c.tool,
                schema: Some(schema),
                source: if index == 0 {
                    CallSource::ToolCalls
                } else {
                    CallSource::Glued
                },
                outcome: if c.outcome.is_runnable() {
                    CallOutcome::Executed
                } else {
                    CallOutcome::Feedback
                },
                mend: c.outcome,
                fixes: &c.fixes,
                issues: &c.issues,
            };
            self.write(&ctx, &call)?;
        }
        Ok(())
    }

    /// The planned calls of one message record.
    pub fn planned(&mut self, line: usize, calls: &[PlannedCall], tools: &Toolbox) -> Result<()> {
        if self.out.is_none() {
            return Ok(());
        }
        let ctx = self.context(line);
        for c in calls {
            let call = events::Call {
                index: c.index,
                tool: &c.call.tool,
                schema: tools.get(&c.call.tool).map(|t| t.parameters()),
                source: c.source,
                outcome: c.outcome,
                mend: c.call.outcome,
                fixes: &c.call.fixes,
                issues: &c.call.issues,
            };
            self.write(&ctx, &call)?;
        }
        Ok(())
    }

    /// Flushes the file.
    pub fn finish(&mut self) -> Result<()> {
        if let Some(out) = &mut self.out {
            out.flush().context("cannot write the event log")?;
        }
        Ok(())
    }
}
