//! `toolmend report`: an event log (`toolmend::events`, JSON lines) read as a
//! stream and aggregated into one self-contained HTML page: the worst offenders first
//! (tools, fields, fix and issue kinds), by model and over time, with a legend of every
//! kind it shows. Memory is bounded whatever the log's size: each line is read, counted
//! and dropped; each table keeps at most a fixed number of keys (the rest are counted as
//! `(other)`); a line longer than [`MAX_LINE`] is skipped as bad.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    fs::File,
    io::{self, BufRead, BufReader, Read, Write},
    path::PathBuf,
    process::ExitCode,
};

use anyhow::{Context, Result};
use toolmend::events::{CallEvent, format_ts, parse_ts};

mod aggregate;
mod charts;
mod page;
mod read;
#[cfg(test)]
mod tests;

use aggregate::*;
use charts::*;
use page::*;

use read::*;

/// Build an HTML report from event logs: which tools, fields and fix kinds the models get
/// wrong, the worst first.
///
/// The input is the event log, one JSON line per mended call, written by
///   the gateway:      [events] path = "/var/log/toolmend/events.jsonl"   (toolmend serve)
///   the command line: toolmend mend calls.jsonl --events events.jsonl
/// Several logs may be given (they are read one after the other); `-` reads standard
/// input.
///
/// The page is one file with no outside reference (inline CSS and SVG, no script, no
/// font, no network): open it in any browser, attach it to a ticket, archive it. It shows,
/// most calls first and ties by name:
///   - the totals: calls, clean, repaired, corrected, left with issues, cut off;
///   - tools: calls that needed mending or stayed invalid, with their rate;
///   - fields: the JSON Pointer of each tool's argument that was fixed most (the
///     schema's own keys; `?` a key the model made up, `*` an array index);
///   - fix kinds and issue kinds, with a legend of what each one means;
///   - models: each model's rate, and the tools it gets wrong most;
///   - over time: calls per interval, clean / mended / left with issues.
///
/// Rates are over every call in the log: the gateway logs clean calls too unless
/// `events.clean = false` (then the rates are over mended calls only; the page says so).
///
/// Large logs: lines are aggregated as they are read, each table keeps at most a bounded
/// number of keys (the rest count as `(other)`, said on the page). A line that is not an
/// event (not JSON, a field missing, over 1 MiB) is counted and listed as bad, never
/// fatal. The same input gives the same page, byte for byte.
///
/// Exit status: 0 when the page was written (bad lines included), 2 when an input cannot
/// be read or the page cannot be written.
///
/// Examples:
///   toolmend report events.jsonl -o report.html
///   toolmend mend examples/broken_calls.jsonl --events ev.jsonl; toolmend report ev.jsonl -o r.html
///     (`;`, not `&&`: mend exits 1 on this example, which holds a malformed line on purpose)
///   zcat events-*.jsonl.gz | toolmend report - -o week.html --title "Last week"
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct ReportArgs {
    /// Event logs (JSON lines); `-` reads standard input.
    #[arg(value_name = "EVENTS.jsonl", required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the page (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The page's title.
    #[arg(long, default_value = "toolmend report")]
    pub title: String,
    /// Rows per ranking (tools, fields, kinds, models).
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u16).range(1..=200))]
    pub top: u16,
}

pub fn run(args: &ReportArgs) -> Result<ExitCode> {
    let mut agg = Aggregate::default();
    let mut names = Vec::new();
    for path in &args.inputs {
        let name = if path.as_os_str() == "-" {
            "standard input".to_owned()
        } else {
            path.display().to_string()
        };
        let reader: Box<dyn Read> = if path.as_os_str() == "-" {
            Box::new(io::stdin().lock())
        } else {
            Box::new(File::open(path).with_context(|| format!("cannot open {name}"))?)
        };
        read_log(BufReader::new(reader), &name, &mut agg)
            .with_context(|| format!("cannot read {name}"))?;
        names.push(name);
    }
    let page = render(&agg, &names, &args.title, usize::from(args.top));
    match &args.output {
        Some(p) => std::fs::write(p, page.as_bytes())
            .with_context(|| format!("cannot write {}", p.display()))?,
        None => {
            let mut out = io::stdout().lock();
            out.write_all(page.as_bytes())?;
            out.flush()?;
        }
    }
    let to = args
        .output
        .as_ref()
        .map_or_else(|| "standard output".to_owned(), |p| p.display().to_string());
    // Not eprintln!: it panics when standard error is closed.
    let _ = writeln!(
        io::stderr(),
        "toolmend report: {} event(s), {} bad line(s) -> {to}",
        agg.total.calls,
        agg.bad
    );
    Ok(ExitCode::SUCCESS)
}
