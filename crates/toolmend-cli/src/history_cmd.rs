//! `toolmend history`: check, sanitize or trim a conversation history.

use std::{
    collections::BTreeMap,
    fs::File,
    io::{self, BufWriter, Write},
    process::ExitCode,
};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use toolmend::history::{
    Action, ActionKind, Budget, ByteEstimate, SanitizePolicy, Tiktoken, TokenCounter, Violation,
    ViolationKind, check, sanitize, trim,
};

use crate::{
    CheckArgs, Encoding, Format, HistoryAction, SanitizeArgs, TrimArgs,
    history_io::{self, History},
};

/// Exit status of `history check` when the history breaks a rule.
const VIOLATIONS_FOUND: u8 = 1;

pub fn run(action: &HistoryAction) -> Result<ExitCode> {
    match action {
        HistoryAction::Check(args) => run_check(args),
        HistoryAction::Sanitize(args) => run_sanitize(args).map(|()| ExitCode::SUCCESS),
        HistoryAction::Trim(args) => run_trim(args).map(|()| ExitCode::SUCCESS),
    }
}

fn run_check(args: &CheckArgs) -> Result<ExitCode> {
    let history = history_io::read(args.input.as_deref())?;
    let violations = check(&history.messages);
    let mut out = BufWriter::new(io::stdout().lock());
    let mut kinds: BTreeMap<ViolationKind, usize> = BTreeMap::new();
    for v in &violations {
        *kinds.entry(v.kind).or_default() += 1;
        match args.format {
            Format::Text => write_violation_text(&mut out, v, &history)?,
            Format::Json => {
                let mut obj = serde_json::to_value(v)?;
                if let (Value::Object(o), Some(line)) = (&mut obj, history.line(v.message)) {
                    o.insert("line".to_owned(), line.into());
                }
                writeln!(out, "{obj}")?;
            }
        }
    }
    let n = history.messages.len();
    match args.format {
        Format::Text => {
            if violations.is_empty() {
                writeln!(out, "summary: {n} message(s), valid")?;
            } else {
                writeln!(
                    out,
                    "summary: {n} message(s), {} violation(s)",
                    violations.len()
                )?;
                writeln!(out, "  violations: {}", counts(&kinds))?;
                let input = match args.input.as_deref() {
                    Some(p) if p.as_os_str() != "-" => format!(" {}", p.display()),
                    _ => String::new(),
                };
                writeln!(
                    out,
                    "  to mend them: toolmend history sanitize{input} > mended.json"
                )?;
            }
        }
        Format::Json => {
            let summary = json!({"summary": {
                "messages": n,
                "violations": violations.len(),
                "kinds": kinds,
                "valid": violations.is_empty(),
            }});
            writeln!(out, "{summary}")?;
        }
    }
    out.flush()?;
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(VIOLATIONS_FOUND)
    })
}

/// One block per violation: where, which ids, what, then each provider's error text.
fn write_violation_text(out: &mut impl Write, v: &Violation, history: &History) -> Result<()> {
    let ids = if v.ids.is_empty() {
        String::new()
    } else {
        format!(" {}", v.ids.join(", "))
    };
    writeln!(
        out,
        "{}{ids}: {}",
        location(v.message, v.call, history.line(v.message)),
        v.kind
    )?;
    writeln!(out, "  {:<10} {}", v.provider, v.provider_error)?;
    for other in &v.other_providers {
        writeln!(out, "  {:<10} {}", other.provider, other.message)?;
    }
    Ok(())
}

fn run_sanitize(args: &SanitizeArgs) -> Result<()> {
    if args.report.as_ref().is_some_and(|p| p.as_os_str() == "-") {
        bail!(
            "--report -: the history goes to standard output; the report goes to standard \
             error unless --report names a file"
        );
    }
    let history = history_io::read(args.input.as_deref())?;
    let policy = SanitizePolicy {
        orphans: args.orphans.into(),
        missing_ids: args.missing_ids.into(),
        ..SanitizePolicy::default()
    };
    let n_in = history.messages.len();
    let History {
        shape,
        messages,
        lines,
    } = history;
    let sanitized = sanitize(messages, &policy);
    let n_out = sanitized.messages.len();
    // The report first: if it cannot be written, nothing half-done reaches standard output.
    let mut report: Box<dyn Write> = match &args.report {
        Some(p) => Box::new(BufWriter::new(
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(io::stderr().lock()),
    };
    write_report(
        &mut report,
        args.report_format,
        &sanitized.actions,
        &lines,
        n_in,
        n_out,
    )
    .context("cannot write the report")?;
    let mut out = io::stdout().lock();
    history_io::write(&mut out, shape, sanitized.messages, args.compact)
}

fn write_report(
    out: &mut dyn Write,
    format: Format,
    actions: &[Action],
    lines: &[usize],
    n_in: usize,
    n_out: usize,
) -> Result<()> {
    let mut kinds: BTreeMap<ActionKind, usize> = BTreeMap::new();
    for a in actions {
        *kinds.entry(a.kind).or_default() += 1;
        let line = lines.get(a.message).copied();
        match format {
            Format::Text => {
                let id = a
                    .call_id
                    .as_deref()
                    .map(|id| format!(" {id}"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{}{id}: {}: {}",
                    location(a.message, a.call, line),
                    a.kind,
                    a.detail
                )?;
            }
            Format::Json => {
                let mut obj = serde_json::to_value(a)?;
                if let (Value::Object(o), Some(line)) = (&mut obj, line) {
                    o.insert("line".to_owned(), line.into());
                }
                writeln!(out, "{obj}")?;
            }
        }
    }
    match format {
        Format::Text if actions.is_empty() => {
            writeln!(
                out,
                "summary: {n_in} message(s), valid already, nothing changed"
            )?;
        }
        Format::Text => writeln!(
            out,
            "summary: {n_in} message(s) in, {n_out} out, {} action(s): {}",
            actions.len(),
            counts(&kinds)
        )?,
        Format::Json => writeln!(
            out,
            "{}",
            json!({"summary": {
                "messages_in": n_in,
                "messages_out": n_out,
                "actions": actions.len(),
                "kinds": kinds,
            }})
        )?,
    }
    out.flush()?;
    Ok(())
}

fn run_trim(args: &TrimArgs) -> Result<()> {
    let (budget, unit) = match (args.budget.messages, args.budget.tokens) {
        (Some(_), _) if args.encoding.is_some() || args.model.is_some() => {
            bail!("--encoding and --model choose how tokens are counted; use them with --tokens")
        }
        (Some(n), _) => (Budget::Messages(n), "message(s)".to_owned()),
        (None, Some(n)) => (Budget::Tokens(n), String::new()),
        (None, None) => bail!("give a budget: --messages N or --tokens N"),
    };
    // Read first: a bad input fails fast, before an encoding is built (~0.3 s).
    let history = history_io::read(args.input.as_deref())?;
    let n_in = history.messages.len();
    let (counter, unit): (Box<dyn TokenCounter>, String) = match budget {
        Budget::Messages(_) => (Box::new(ByteEstimate), unit),
        Budget::Tokens(_) => {
            let (counter, name) = counter(args)?;
            (counter, format!("token(s) ({name})"))
        }
    };
    let trimmed = trim(history.messages, budget, counter.as_ref());
    let mut out = io::stdout().lock();
    history_io::write(&mut out, history.shape, trimmed.messages, args.compact)?;
    let mut summary = format!(
        "trim: kept {} of {n_in} message(s), dropped {}; size {} {unit}, budget {}",
        n_in - trimmed.dropped,
        trimmed.dropped,
        trimmed.size,
        budget.limit()
    );
    if trimmed.over_budget {
        summary.push_str(
            "; over budget: the pinned messages (system, developer, first user) and the last \
             turn are always kept",
        );
    }
    writeln!(io::stderr(), "{summary}")?;
    Ok(())
}

/// The token counter asked for, and its name; an encoding is built only here.
fn counter(args: &TrimArgs) -> Result<(Box<dyn TokenCounter>, &'static str)> {
    if let Some(model) = &args.model {
        let Some(enc) = Tiktoken::for_model(model) else {
            bail!(
                "unknown model `{model}`: no OpenAI encoding is known for it; \
                 use --encoding o200k_base, cl100k_base or bytes instead"
            );
        };
        return Ok((Box::new(enc), enc.name()));
    }
    Ok(match args.encoding.unwrap_or(Encoding::O200kBase) {
        Encoding::O200kBase => (Box::new(Tiktoken::o200k_base()), "o200k_base"),
        Encoding::Cl100kBase => (Box::new(Tiktoken::cl100k_base()), "cl100k_base"),
        Encoding::Bytes => (Box::new(ByteEstimate), "bytes/4 estimate"),
    })
}

/// `messages[3].tool_calls[1] (line 12)`.
fn location(message: usize, call: Option<usize>, line: Option<usize>) -> String {
    let mut s = format!("messages[{message}]");
    if let Some(c) = call {
        s.push_str(&format!(".tool_calls[{c}]"));
    }
    if let Some(l) = line {
        s.push_str(&format!(" (line {l})"));
    }
    s
}

/// `unanswered_call 2, orphan_result 1`.
fn counts<K: std::fmt::Display>(kinds: &BTreeMap<K, usize>) -> String {
    kinds
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
