//! `toolmend mend`: read JSONL, mend each record, write results and a summary.

use std::{
    fs::File,
    io::{self, BufRead, BufReader, Write},
    process::ExitCode,
};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use toolmend::{
    MendOptions, Mended, RepairOptions,
    conversation::AssistantMessage,
    feedback,
    mend::mend_call,
    message::{self, AcceptTruncated, MessagePlan, PlanOptions, PlannedCall},
    schema::{Coercions, Phase, ValidationContext},
};

use crate::{
    Format, MendArgs,
    events_file::EventsFile,
    input::{Record, ToolCache, parse_line},
    report::{Summary, outcome_id},
};

/// Exit status when some input line could not be read as a record (the others were
/// mended and reported): a script can tell a clean batch from one with bad lines.
const EXIT_MALFORMED: u8 = 1;

pub fn run(args: &MendArgs) -> Result<ExitCode> {
    if args.refuse_truncated {
        // Not eprintln!: it panics when standard error is closed.
        let _ = writeln!(
            io::stderr(),
            "toolmend: --refuse-truncated is deprecated: refusing cut-off calls is the \
             default now (--accept-truncated runs their salvage)"
        );
    }
    // A call cut off mid-text is refused (feedback asking for the whole call) unless
    // --accept-truncated: the default of the tool node, the Python fronts and the gateway.
    let refuse_truncated = !args.accept_truncated || args.strict;
    // --strict is the core's strict options (as the gateway's `calls.strict`).
    // --coerce switches single coercions from their defaults (Python's `coerce={...}`).
    let base = if args.strict {
        MendOptions::strict()
    } else {
        MendOptions {
            coercions: Coercions::from_names(args.coerce.iter().map(|(n, on)| (n, *on)))?,
            ..MendOptions::default()
        }
    };
    let opts = MendOptions {
        repair: RepairOptions {
            strip_thinking: !args.keep_thinking,
            max_depth: args.max_depth,
            ..base.repair
        },
        refuse_lossy: refuse_truncated,
        ..base
    };
    let mut reader: Box<dyn BufRead> = match &args.input {
        Some(p) if p.as_os_str() != "-" => Box::new(BufReader::new(
            File::open(p).with_context(|| format!("cannot open {}", p.display()))?,
        )),
        _ => Box::new(BufReader::new(io::stdin().lock())),
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut summary = Summary::default();
    let mut cache = ToolCache::default();
    let mut events = EventsFile::create(args.events.as_ref(), args.events_model.as_deref())?;
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        if reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("cannot read line {}", n + 1))?
            == 0
        {
            break;
        }
        n += 1;
        // Bytes, then UTF-8 per line: one bad line is a malformed line, not the end of the batch.
        let parsed = std::str::from_utf8(&buf)
            .map(|l| l.trim_end_matches(['\n', '\r']).to_owned())
            .map_err(|e| anyhow::anyhow!("the line is not valid UTF-8 (byte {})", e.valid_up_to()));
        let line = match parsed {
            Ok(l) => l,
            Err(e) => {
                summary.lines += 1;
                summary.malformed_lines += 1;
                write_malformed(&mut out, args, n, &e)?;
                continue;
            }
        };
        if line.trim().is_empty() {
            if args.lines {
                writeln!(out, "ERROR line {n}: empty line")?;
                out.flush()?;
            }
            continue;
        }
        summary.lines += 1;
        let record = match parse_line(&line, &mut cache) {
            Ok(r) => r,
            Err(e) => {
                summary.malformed_lines += 1;
                write_malformed(&mut out, args, n, &e)?;
                continue;
            }
        };
        match record {
            Record::Call {
                id,
                tool,
                raw_arguments,
            } => {
                let mended = mend_call(&raw_arguments, &tool, &opts);
                events.calls(n, &mended.calls, tool.parameters())?;
                for c in &mended.calls {
                    summary.add(c);
                }
                if args.lines {
                    writeln!(out, "{}", line_result(&mended))?;
                    out.flush()?;
                } else {
                    write_call_report(&mut out, args.format, n, id.as_deref(), &mended)?;
                }
            }
            Record::Message {
                message,
                tools,
                history,
                cut_off,
            } => {
                let plan_opts = PlanOptions {
                    mend: opts.clone(),
                    strip_thinking: !args.keep_thinking,
                    accept_truncated: if refuse_truncated {
                        AcceptTruncated::None
                    } else {
                        AcceptTruncated::All
                    },
                    ..PlanOptions::default()
                };
                let ctx = ValidationContext {
                    messages: &history,
                    ..ValidationContext::new("", Phase::Initial)
                };
                let plan = message::plan_assistant(
                    &message,
                    &history,
                    &[],
                    cut_off,
                    &tools,
                    &plan_opts,
                    &ctx,
                );
                let sanitized = message::sanitize_assistant(&message, &plan.shape, &plan.calls);
                events.planned(n, &plan.calls, &tools)?;
                for c in &plan.calls {
                    if c.id.is_some() {
                        summary.add(&c.call);
                    }
                }
                if args.lines {
                    writeln!(out, "{}", serde_json::to_string(&sanitized)?)?;
                    out.flush()?;
                } else {
                    write_message_report(&mut out, args.format, n, &sanitized, &plan)?;
                }
            }
        }
    }
    if !args.lines {
        match args.format {
            Format::Text => write!(out, "{}", summary.to_text())?,
            Format::Json => writeln!(out, "{}", json!({ "summary": summary }))?,
        }
    }
    out.flush()?;
    events.finish()?;
    Ok(if summary.malformed_lines > 0 {
        ExitCode::from(EXIT_MALFORMED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Says that input line `n` could not be read, in the output's format; the batch goes on.
fn write_malformed(
    out: &mut impl Write,
    args: &MendArgs,
    n: usize,
    e: &anyhow::Error,
) -> Result<()> {
    let msg = format!("line {n}: {e:#}");
    if args.lines {
        writeln!(out, "ERROR {msg}")?;
        out.flush()?;
    } else {
        match args.format {
            Format::Text => writeln!(out, "error {msg}")?,
            Format::Json => writeln!(out, "{}", json!({"line": n, "error": msg}))?,
        }
    }
    Ok(())
}

/// The `--lines` answer for one call record.
fn line_result(m: &Mended) -> String {
    if m.is_runnable() {
        let args: Vec<&Value> = m
            .calls
            .iter()
            .filter_map(|c| c.arguments.as_ref())
            .collect();
        return match args.as_slice() {
            [one] => one.to_string(),
            many => Value::Array(many.iter().map(|v| (*v).clone()).collect()).to_string(),
        };
    }
    let reasons: Vec<String> = m
        .calls
        .iter()
        .flat_map(|c| c.issues.iter())
        .map(|i| {
            if i.path.is_empty() {
                i.message.clone()
            } else {
                format!("{}: {}", i.path, i.message)
            }
        })
        .collect();
    format!("ERROR {}", reasons.join("; ").replace('\n', " "))
}

fn write_call_report(
    out: &mut impl Write,
    format: Format,
    n: usize,
    id: Option<&str>,
    m: &Mended,
) -> Result<()> {
    match format {
        Format::Json => {
            let fb = feedback_for(m);
            let calls: Vec<Value> = m.calls.iter().map(call_json).collect();
            writeln!(
                out,
                "{}",
                json!({"line": n, "id": id, "calls": calls, "feedback": fb})
            )?;
        }
        Format::Text => {
            let label = id.map_or_else(|| format!("line {n}"), |id| format!("line {n} ({id})"));
            write_calls_text(out, &label, m)?;
        }
    }
    Ok(())
}

fn write_message_report(
    out: &mut impl Write,
    format: Format,
    n: usize,
    sanitized: &AssistantMessage,
    plan: &MessagePlan,
) -> Result<()> {
    match format {
        Format::Json => {
            let calls: Vec<Value> = plan.calls.iter().map(planned_json).collect();
            let fb: Vec<Value> = plan
                .calls
                .iter()
                .filter(|c| c.id.is_some() && !c.call.outcome.is_runnable())
                .map(|c| {
                    let fb = feedback::render(&c.call.tool, &c.call.issues);
                    json!({"id": c.id, "text": fb.text, "json": fb.json})
                })
                .collect();
            let answered: Vec<&str> = plan.answered.iter().map(|a| a.id.as_str()).collect();
            let mut report =
                json!({"line": n, "message": sanitized, "calls": calls, "feedback": fb});
            if !answered.is_empty() {
                report["already_answered"] = json!(answered);
            }
            if !plan.shape.message_fixes.is_empty() {
                report["message_fixes"] = json!(plan.shape.message_fixes);
            }
            writeln!(out, "{report}")?;
        }
        Format::Text => {
            for f in &plan.shape.message_fixes {
                writeln!(out, "line {n} message fix {f}")?;
            }
            for c in &plan.calls {
                let label = match &c.id {
                    Some(id) => format!("line {n} call {} ({id})", c.index + 1),
                    None => format!("line {n} call {}", c.index + 1),
                };
                if c.id.is_none() {
                    writeln!(
                        out,
                        "{label} {}: dropped ({})",
                        c.call.tool,
                        c.note.as_deref().unwrap_or_default()
                    )?;
                    continue;
                }
                write_one_text(out, &label, &c.call)?;
            }
            for a in &plan.answered {
                writeln!(
                    out,
                    "line {n} call {} ({}): already answered",
                    a.index + 1,
                    a.id
                )?;
            }
        }
    }
    Ok(())
}

/// One mended call as the JSON report shows it: the call, and `lossy` (its text was cut
/// off: refused, or with --accept-truncated its salvaged prefix ran).
fn call_json(c: &toolmend::MendedCall) -> Value {
    let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        map.insert("lossy".to_owned(), json!(c.is_lossy()));
    }
    v
}

/// One planned call as the JSON report shows it: the mended call (with `lossy`), its id
/// and source, and what becomes of it (`executed`: it may run; `feedback`; `dropped`).
fn planned_json(c: &PlannedCall) -> Value {
    let mut v = call_json(&c.call);
    if let Value::Object(map) = &mut v {
        map.insert("id".to_owned(), json!(c.id));
        if let Some(orig) = &c.original_id {
            map.insert("original_id".to_owned(), json!(orig));
        }
        map.insert("source".to_owned(), json!(c.source));
        map.insert("disposition".to_owned(), json!(c.outcome));
        if let Some(note) = &c.note {
            map.insert("note".to_owned(), json!(note));
        }
    }
    v
}

fn write_calls_text(out: &mut impl Write, label: &str, m: &Mended) -> Result<()> {
    let split = m.calls.len() > 1;
    for (k, c) in m.calls.iter().enumerate() {
        let label = if split {
            format!("{label} [{} of {}]", k + 1, m.calls.len())
        } else {
            label.to_owned()
        };
        write_one_text(out, &label, c)?;
    }
    Ok(())
}

fn write_one_text(out: &mut impl Write, label: &str, c: &toolmend::MendedCall) -> Result<()> {
    {
        let fixes: Vec<String> = c.fixes.iter().map(ToString::to_string).collect();
        write!(out, "{label} {}: {}", c.tool, outcome_id(c.outcome))?;
        if c.is_lossy() {
            let what = if c.outcome.is_runnable() {
                " (cut off: salvaged prefix)"
            } else {
                " (cut off)"
            };
            write!(out, "{what}")?;
        }
        writeln!(out)?;
        for f in &fixes {
            writeln!(out, "  fix   {f}")?;
        }
        if c.outcome.is_runnable() {
            if let Some(a) = &c.arguments {
                writeln!(out, "  args  {a}")?;
            }
        } else {
            let fb = feedback::render(&c.tool, &c.issues);
            for l in fb.text.lines() {
                writeln!(out, "  | {l}")?;
            }
        }
    }
    Ok(())
}

fn feedback_for(m: &Mended) -> Option<Value> {
    let bad: Vec<Value> = m
        .calls
        .iter()
        .filter(|c| !c.outcome.is_runnable())
        .map(|c| {
            let fb = feedback::render(&c.tool, &c.issues);
            json!({"text": fb.text, "json": fb.json})
        })
        .collect();
    match bad.len() {
        0 => None,
        1 => bad.into_iter().next(),
        _ => Some(Value::Array(bad)),
    }
}
