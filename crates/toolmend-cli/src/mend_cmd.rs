//! `toolmend mend`: read JSONL, mend each record, write results and a summary.

use std::{
    fs::File,
    io::{self, BufRead, BufReader, Write},
};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use toolmend::{
    MendOptions, Mended, RepairOptions, feedback,
    mend::{mend_call, mend_named},
    protocol::AssistantMessage,
    schema::Coercions,
};

use crate::{
    Format, MendArgs,
    input::{Record, ToolCache, parse_line},
    report::{Summary, outcome_id},
};

pub fn run(args: &MendArgs) -> Result<()> {
    let opts = MendOptions {
        repair: RepairOptions {
            strict: args.strict,
            strip_thinking: !args.keep_thinking,
            max_depth: args.max_depth,
            ..RepairOptions::default()
        },
        coercions: if args.strict {
            Coercions::none()
        } else {
            Coercions::default()
        },
        refuse_lossy: args.refuse_truncated || args.strict,
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
            Record::Message { message, tools } => {
                let (sanitized, all) = mend_message(&message, &tools, &opts);
                for m in &all {
                    for c in &m.calls {
                        summary.add(c);
                    }
                }
                if args.lines {
                    writeln!(out, "{}", serde_json::to_string(&sanitized)?)?;
                    out.flush()?;
                } else {
                    write_message_report(&mut out, args.format, n, &sanitized, &all)?;
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
    Ok(())
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

/// Mends every call of an assistant message; returns the sanitized message
/// (repaired arguments as valid JSON text, calls with feedback left as sent).
fn mend_message(
    message: &AssistantMessage,
    tools: &toolmend::Toolbox,
    opts: &MendOptions,
) -> (AssistantMessage, Vec<Mended>) {
    let mut sanitized = message.clone();
    let mut all = Vec::new();
    let Some(calls) = &message.tool_calls else {
        return (sanitized, all);
    };
    let mut out_calls = Vec::with_capacity(calls.len());
    for tc in calls {
        let mended = mend_named(&tc.function.name, &tc.function.arguments, tools, opts);
        if mended.is_runnable() {
            for (k, c) in mended.calls.iter().enumerate() {
                let mut new = tc.clone();
                new.function.name.clone_from(&c.tool);
                new.function.arguments = c
                    .arguments
                    .as_ref()
                    .map(Value::to_string)
                    .unwrap_or_default();
                if k > 0 {
                    // A glued second call gets its own id, derived deterministically.
                    new.id = tc.id.as_ref().map(|id| format!("{id}_{}", k + 1));
                }
                out_calls.push(new);
            }
        } else {
            out_calls.push(tc.clone());
        }
        all.push(mended);
    }
    sanitized.tool_calls = Some(out_calls);
    (sanitized, all)
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
            writeln!(
                out,
                "{}",
                json!({"line": n, "id": id, "calls": m.calls, "feedback": fb})
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
    all: &[Mended],
) -> Result<()> {
    match format {
        Format::Json => {
            let calls: Vec<&toolmend::MendedCall> = all.iter().flat_map(|m| &m.calls).collect();
            let fb: Vec<Value> = all.iter().filter_map(feedback_for).collect();
            writeln!(
                out,
                "{}",
                json!({"line": n, "message": sanitized, "calls": calls, "feedback": fb})
            )?;
        }
        Format::Text => {
            for (k, m) in all.iter().enumerate() {
                write_calls_text(out, &format!("line {n} call {}", k + 1), m)?;
            }
        }
    }
    Ok(())
}

fn write_calls_text(out: &mut impl Write, label: &str, m: &Mended) -> Result<()> {
    let split = m.calls.len() > 1;
    for (k, c) in m.calls.iter().enumerate() {
        let label = if split {
            format!("{label} [{} of {}]", k + 1, m.calls.len())
        } else {
            label.to_owned()
        };
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
