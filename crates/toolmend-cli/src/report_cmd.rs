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
use serde_json::Value;
use toolmend::events::{self, CallEvent, format_ts, parse_ts};
use toolmend::{
    MendedCall, Toolbox,
    message::{CallOutcome, CallSource, PlannedCall},
};

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

/// The longest line read as an event; a longer one is skipped and counted as bad.
pub const MAX_LINE: usize = 1 << 20;
/// Distinct tools kept; more are counted as `(other)`.
const MAX_TOOLS: usize = 1000;
/// Distinct (tool, field) pairs kept.
const MAX_FIELDS: usize = 5000;
/// Distinct models kept.
const MAX_MODELS: usize = 200;
/// Distinct fix or issue kinds kept (the vocabulary has fewer than 100).
const MAX_KINDS: usize = 300;
/// Distinct (tool, model) pairs kept.
const MAX_PAIRS: usize = 10_000;
/// Time buckets kept while reading; past it the interval widens.
const MAX_BUCKETS: usize = 2048;
/// Columns of the time chart, at most.
const TIME_COLUMNS: i64 = 60;
/// Bad lines listed on the page (all are counted).
const BAD_SAMPLES: usize = 10;
/// The key anything past a cap is counted under.
const OTHER: &str = "(other)";

/// Bucket widths, in milliseconds: a minute to a year.
const WIDTHS: [i64; 10] = [
    60_000,
    300_000,
    900_000,
    3_600_000,
    21_600_000,
    86_400_000,
    604_800_000,
    2_592_000_000,
    7_776_000_000,
    31_536_000_000,
];

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

/// Reads one log into `agg`, line by line, each line bounded by [`MAX_LINE`].
fn read_log(mut r: impl BufRead, name: &str, agg: &mut Aggregate) -> io::Result<()> {
    let mut buf = Vec::new();
    let mut n: u64 = 0;
    loop {
        buf.clear();
        let (read, too_long) = read_bounded_line(&mut r, &mut buf)?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        if too_long {
            agg.bad_line(name, n, "longer than 1 MiB".to_owned());
            continue;
        }
        let line = match std::str::from_utf8(&buf) {
            Ok(l) => l.trim(),
            Err(e) => {
                agg.bad_line(name, n, format!("not UTF-8 (byte {})", e.valid_up_to()));
                continue;
            }
        };
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<CallEvent>(line) {
            Ok(e) => agg.add(&e),
            Err(e) => agg.bad_line(name, n, format!("not an event: {e}")),
        }
    }
}

/// One line into `buf` (without its newline), at most [`MAX_LINE`] bytes kept; the
/// bytes read, and whether the line was longer (the rest is skipped).
fn read_bounded_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<(usize, bool)> {
    let mut total = 0;
    let mut too_long = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((total, too_long));
        }
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > MAX_LINE {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        let used = take + usize::from(end);
        r.consume(used);
        total += used;
        if end {
            return Ok((total, too_long));
        }
    }
}

/// How a call ended, as the page groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Valid as sent, nothing done.
    Clean,
    /// Runs after fixes (repaired, corrected, salvaged).
    Mended,
    /// Left with issues (feedback), refused by the guard or dropped as a repeat.
    Unresolved,
}

/// Calls of one group (a tool, a model, everything).
#[derive(Debug, Default, Clone)]
struct Counts {
    calls: u64,
    clean: u64,
    repaired: u64,
    corrected: u64,
    feedback: u64,
    dropped: u64,
    flooded: u64,
    lossy: u64,
}

impl Counts {
    fn add(&mut self, e: &CallEvent) -> Status {
        self.calls += 1;
        self.lossy += u64::from(e.lossy);
        match e.outcome.as_str() {
            "feedback" => {
                self.feedback += 1;
                Status::Unresolved
            }
            "dropped" => {
                self.dropped += 1;
                Status::Unresolved
            }
            "flooded" => {
                self.flooded += 1;
                Status::Unresolved
            }
            "corrected" | "salvaged" => {
                self.corrected += 1;
                Status::Mended
            }
            _ if e.is_clean() => {
                self.clean += 1;
                Status::Clean
            }
            _ => {
                self.repaired += 1;
                Status::Mended
            }
        }
    }

    fn mended(&self) -> u64 {
        self.repaired + self.corrected
    }

    fn unresolved(&self) -> u64 {
        self.feedback + self.dropped + self.flooded
    }

    /// Calls that needed anything: mended or left unresolved.
    fn problems(&self) -> u64 {
        self.calls - self.clean
    }
}

/// What one (tool, field) pair saw.
#[derive(Debug, Default)]
struct FieldCounts {
    calls: u64,
    fixes: BTreeMap<String, u64>,
    issues: BTreeMap<String, u64>,
}

/// A map that keeps at most `cap` keys; a new key past it is counted under [`OTHER`].
#[derive(Debug)]
struct Capped<V> {
    map: HashMap<String, V>,
    cap: usize,
    /// Entries counted under [`OTHER`] because the cap was reached.
    folded: u64,
}

impl<V: Default> Capped<V> {
    fn new(cap: usize) -> Self {
        Capped {
            map: HashMap::new(),
            cap,
            folded: 0,
        }
    }

    fn entry(&mut self, key: &str) -> &mut V {
        if !self.map.contains_key(key) {
            if self.map.len() >= self.cap {
                self.folded += 1;
                return self.map.entry(OTHER.to_owned()).or_default();
            }
            self.map.insert(key.to_owned(), V::default());
        }
        self.map.entry(key.to_owned()).or_default()
    }
}

/// Clean, mended, unresolved calls of one interval.
type Bucket = [u64; 3];

/// Everything the page shows, counted while reading.
#[derive(Debug)]
struct Aggregate {
    total: Counts,
    tools: Capped<Counts>,
    fields: Capped<FieldCounts>,
    /// The (tool, field) key's parts, for display.
    field_parts: HashMap<String, (String, String)>,
    fixes: Capped<u64>,
    issues: Capped<u64>,
    models: Capped<Counts>,
    /// (model, tool) -> problems, calls.
    pairs: Capped<Counts>,
    pair_parts: HashMap<String, (String, String)>,
    /// Bucket index (ts / width) -> counts.
    buckets: BTreeMap<i64, Bucket>,
    width: usize,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    no_ts: u64,
    fronts: BTreeMap<String, u64>,
    sessions_seen: bool,
    bad: u64,
    bad_samples: Vec<String>,
}

impl Default for Aggregate {
    fn default() -> Self {
        Aggregate {
            total: Counts::default(),
            tools: Capped::new(MAX_TOOLS),
            fields: Capped::new(MAX_FIELDS),
            field_parts: HashMap::new(),
            fixes: Capped::new(MAX_KINDS),
            issues: Capped::new(MAX_KINDS),
            models: Capped::new(MAX_MODELS),
            pairs: Capped::new(MAX_PAIRS),
            pair_parts: HashMap::new(),
            buckets: BTreeMap::new(),
            width: 0,
            first_ts: None,
            last_ts: None,
            no_ts: 0,
            fronts: BTreeMap::new(),
            sessions_seen: false,
            bad: 0,
            bad_samples: Vec::new(),
        }
    }
}

/// Text from the log fit for a key: control characters out, at most 120 characters.
fn clip(s: &str) -> String {
    let s: String = s.chars().filter(|c| !c.is_control()).take(120).collect();
    if s.is_empty() { "(none)".to_owned() } else { s }
}

impl Aggregate {
    fn bad_line(&mut self, file: &str, line: u64, why: String) {
        self.bad += 1;
        if self.bad_samples.len() < BAD_SAMPLES {
            let why: String = why.chars().take(200).collect();
            self.bad_samples.push(format!("{file}:{line}: {why}"));
        }
    }

    fn add(&mut self, e: &CallEvent) {
        let status = self.total.add(e);
        let tool = clip(&e.tool);
        let model = e.model.as_deref().map_or_else(|| "(none)".to_owned(), clip);
        self.tools.entry(&tool).add(e);
        self.models.entry(&model).add(e);
        let pair = format!("{model}\u{0}{tool}");
        if !self.pair_parts.contains_key(&pair) && self.pairs.map.len() < self.pairs.cap {
            self.pair_parts
                .insert(pair.clone(), (model.clone(), tool.clone()));
        }
        self.pairs.entry(&pair).add(e);
        *self.fronts.entry(clip(&e.front)).or_default() += 1;
        self.sessions_seen |= e.session.is_some();
        for f in &e.fields {
            let path = clip(&f.path);
            let path = if f.path.is_empty() {
                String::new()
            } else {
                path
            };
            let key = format!("{tool}\u{0}{path}");
            if !self.field_parts.contains_key(&key) && self.fields.map.len() < self.fields.cap {
                self.field_parts
                    .insert(key.clone(), (tool.clone(), path.clone()));
            }
            let fc = self.fields.entry(&key);
            fc.calls += 1;
            for k in &f.fixes {
                let k = kind(k);
                *fc.fixes.entry(k.clone()).or_default() += 1;
                *self.fixes.entry(&k) += 1;
            }
            for k in &f.issues {
                let k = kind(k);
                *fc.issues.entry(k.clone()).or_default() += 1;
                *self.issues.entry(&k) += 1;
            }
        }
        match parse_ts(&e.ts) {
            Some(t) => self.add_time(t, status),
            None => self.no_ts += 1,
        }
    }

    fn add_time(&mut self, t: i64, status: Status) {
        self.first_ts = Some(self.first_ts.map_or(t, |f| f.min(t)));
        self.last_ts = Some(self.last_ts.map_or(t, |l| l.max(t)));
        let slot = match status {
            Status::Clean => 0,
            Status::Mended => 1,
            Status::Unresolved => 2,
        };
        self.buckets
            .entry(t.div_euclid(WIDTHS[self.width]))
            .or_default()[slot] += 1;
        while self.buckets.len() > MAX_BUCKETS && self.width + 1 < WIDTHS.len() {
            self.width += 1;
            self.buckets = rebucket(&self.buckets, WIDTHS[self.width - 1], WIDTHS[self.width]);
        }
    }
}

/// A fix or issue kind from the log: a snake_case id, else `(invalid)`.
fn kind(k: &str) -> String {
    let ok = !k.is_empty()
        && k.len() <= 64
        && k.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        k.to_owned()
    } else {
        "(invalid)".to_owned()
    }
}

/// `buckets` of `from` ms as buckets of `to` ms (`to` a multiple of `from` or not: each
/// old bucket goes where its start falls).
fn rebucket(buckets: &BTreeMap<i64, Bucket>, from: i64, to: i64) -> BTreeMap<i64, Bucket> {
    let mut out: BTreeMap<i64, Bucket> = BTreeMap::new();
    for (&i, b) in buckets {
        let slot = out.entry((i * from).div_euclid(to)).or_default();
        for k in 0..3 {
            slot[k] += b[k];
        }
    }
    out
}

/// Sorted most first, ties by key: the page's one order.
fn ranked<V>(map: &HashMap<String, V>, count: impl Fn(&V) -> u64) -> Vec<(&String, &V)> {
    let mut v: Vec<(&String, &V)> = map.iter().filter(|(_, v)| count(v) > 0).collect();
    v.sort_by(|a, b| count(b.1).cmp(&count(a.1)).then_with(|| a.0.cmp(b.0)));
    v
}

/// One bar per name (the first `top`): its mended and unresolved calls, "N of M (p%)".
fn problem_rows(ranked: &[(&String, &Counts)], top: usize) -> Vec<Row> {
    ranked
        .iter()
        .take(top)
        .map(|(name, c)| Row {
            label: (*name).clone(),
            note: String::new(),
            segments: vec![("mended", c.mended()), ("unresolved", c.unresolved())],
            value: format!(
                "{} of {} ({})",
                c.problems(),
                c.calls,
                pct(c.problems(), c.calls)
            ),
        })
        .collect()
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".to_owned();
    }
    let p = part as f64 * 100.0 / whole as f64;
    if p > 0.0 && p < 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// HTML text: `&`, `<`, `>`, `"`, `'` escaped.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// At most `n` characters, with `…` when cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(n - 1).collect();
    t.push('…');
    t
}

/// One row of a bar chart: a label, segments (class, count) and the text after the bar.
struct Row {
    label: String,
    /// A second line under the label (the kinds of a field).
    note: String,
    segments: Vec<(&'static str, u64)>,
    value: String,
}

const LABEL_W: usize = 290;
const BAR_W: usize = 340;
/// A row's height; with a note under its label, [`NOTE_ROW_H`].
const ROW_H: usize = 24;
const NOTE_ROW_H: usize = 34;

/// A horizontal bar chart (inline SVG): bars scaled to the largest row, each row a `<g
/// class="row">` with `data-label` and `data-value`, each segment a `<rect class="bar
/// KIND">` with `data-count`.
fn bar_chart(out: &mut String, chart: &str, caption: &str, rows: &[Row]) {
    let max = rows
        .iter()
        .map(|r| r.segments.iter().map(|s| s.1).sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1);
    let row_h = if rows.iter().any(|r| !r.note.is_empty()) {
        NOTE_ROW_H
    } else {
        ROW_H
    };
    let h = rows.len() * row_h + 4;
    let w = LABEL_W + BAR_W + 170;
    let _ = write!(
        out,
        "<svg class=\"chart bars\" data-chart=\"{chart}\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(caption)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = i * row_h + 2;
        // The bar's middle, where the label (or the label and its note) sits.
        let mid = y + row_h / 2;
        let total: u64 = r.segments.iter().map(|s| s.1).sum();
        let _ = write!(
            out,
            "<g class=\"row\" data-label=\"{}\" data-value=\"{total}\"><title>{}{}{}: {}</title>",
            esc(&r.label),
            esc(&r.label),
            if r.note.is_empty() { "" } else { " — " },
            esc(&r.note),
            esc(&r.value)
        );
        let ty = if r.note.is_empty() { mid + 4 } else { mid - 2 };
        let _ = write!(
            out,
            "<text class=\"label\" x=\"{}\" y=\"{ty}\" text-anchor=\"end\">{}</text>",
            LABEL_W - 8,
            esc(&cut(&r.label, 34))
        );
        if !r.note.is_empty() {
            let _ = write!(
                out,
                "<text class=\"note\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                LABEL_W - 8,
                mid + 11,
                esc(&cut(&r.note, 46))
            );
        }
        let mut x = LABEL_W as f64;
        for (class, n) in &r.segments {
            if *n == 0 {
                continue;
            }
            let bw = (*n as f64 * BAR_W as f64 / max as f64).max(2.0);
            let _ = write!(
                out,
                "<rect class=\"bar {class}\" x=\"{x:.1}\" y=\"{}\" width=\"{bw:.1}\" height=\"{}\" \
                 data-count=\"{n}\"></rect>",
                mid - 8,
                16
            );
            x += bw;
        }
        let _ = write!(
            out,
            "<text class=\"value\" x=\"{:.1}\" y=\"{}\">{}</text></g>",
            x + 6.0,
            mid + 4,
            esc(&r.value)
        );
    }
    out.push_str("</svg>");
}

/// The time chart: one stacked column per interval (clean, mended, unresolved).
fn time_chart(out: &mut String, agg: &Aggregate) {
    let (Some(first), Some(last)) = (agg.first_ts, agg.last_ts) else {
        out.push_str("<p class=\"empty\">No event has a readable time.</p>");
        return;
    };
    let mut width_i = agg.width;
    while width_i + 1 < WIDTHS.len()
        && (last.div_euclid(WIDTHS[width_i]) - first.div_euclid(WIDTHS[width_i])) >= TIME_COLUMNS
    {
        width_i += 1;
    }
    let width = WIDTHS[width_i];
    let buckets = rebucket(&agg.buckets, WIDTHS[agg.width], width);
    let (lo, hi) = (first.div_euclid(width), last.div_euclid(width));
    let n = usize::try_from(hi - lo + 1).unwrap_or(1).max(1);
    let max = buckets
        .values()
        .map(|b| b.iter().sum::<u64>())
        .max()
        .unwrap_or(1)
        .max(1);
    let (w, h, left, bottom, plot_h) = (760usize, 230usize, 50usize, 40usize, 170usize);
    let col = ((w - left - 10) as f64 / n as f64).min(40.0);
    let _ = write!(
        out,
        "<svg class=\"chart series\" data-chart=\"time\" data-interval=\"{}\" width=\"{w}\" \
         height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"Calls over time\">",
        interval_name(width)
    );
    for frac in [0.0, 0.5, 1.0] {
        let y = (h - bottom) as f64 - frac * plot_h as f64;
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\"></line>\
             <text class=\"axis\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            w - 10,
            left - 6,
            y + 4.0,
            (frac * max as f64).round()
        );
    }
    for (k, i) in (lo..=hi).enumerate() {
        let b = buckets.get(&i).copied().unwrap_or_default();
        let x = left as f64 + k as f64 * col;
        let start = format_ts(i * width);
        let _ = write!(
            out,
            "<g class=\"col\" data-bucket=\"{start}\" data-value=\"{}\"><title>{start}: {} clean, \
             {} mended, {} left with issues</title>",
            b.iter().sum::<u64>(),
            b[0],
            b[1],
            b[2]
        );
        let mut y = (h - bottom) as f64;
        for (slot, class) in [(0, "clean"), (1, "mended"), (2, "unresolved")] {
            if b[slot] == 0 {
                continue;
            }
            let bh = b[slot] as f64 * plot_h as f64 / max as f64;
            y -= bh;
            let _ = write!(
                out,
                "<rect class=\"bar {class}\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" \
                 height=\"{bh:.1}\" data-count=\"{}\"></rect>",
                x + 1.0,
                (col - 2.0).max(1.0),
                b[slot]
            );
        }
        out.push_str("</g>");
    }
    let label_at = |k: usize| {
        let t = (lo + k as i64) * width;
        let s = format_ts(t);
        let s = if width >= 86_400_000 {
            s[..10].to_owned()
        } else {
            format!("{} {}", &s[5..10], &s[11..16])
        };
        (left as f64 + k as f64 * col + col / 2.0, s)
    };
    let mut ticks = vec![0];
    if n > 2 {
        ticks.push(n / 2);
    }
    if n > 1 {
        ticks.push(n - 1);
    }
    for k in ticks {
        let (x, s) = label_at(k);
        // The first label starts at its column and the last ends at its column, so that
        // neither runs off the chart.
        let (x, anchor) = match k {
            0 => (x - col / 2.0, "start"),
            k if k == n - 1 => (x + col / 2.0, "end"),
            _ => (x, "middle"),
        };
        let _ = write!(
            out,
            "<text class=\"axis\" x=\"{x:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{s}</text>",
            h - bottom + 18
        );
    }
    let _ = write!(
        out,
        "<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"end\">one column: {} (UTC)</text>",
        w - 10,
        12,
        interval_name(width)
    );
    out.push_str("</svg>");
}

fn interval_name(ms: i64) -> &'static str {
    match ms {
        60_000 => "1 minute",
        300_000 => "5 minutes",
        900_000 => "15 minutes",
        3_600_000 => "1 hour",
        21_600_000 => "6 hours",
        86_400_000 => "1 day",
        604_800_000 => "1 week",
        2_592_000_000 => "30 days",
        7_776_000_000 => "90 days",
        _ => "1 year",
    }
}

/// The vocabulary, from `docs/issue-kinds.md` (the one list of kinds and their meaning).
const KINDS_DOC: &str = include_str!("../../../docs/issue-kinds.md");

/// A kind's meaning and, for a fix, its safety.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Meaning {
    safety: Option<String>,
    text: String,
}

/// The kinds of `docs/issue-kinds.md`: fixes from its tables with a safety column,
/// issues from its ranked table.
fn vocabulary() -> HashMap<String, Meaning> {
    let mut out = HashMap::new();
    for line in KINDS_DOC.lines() {
        if !line.starts_with("| ") {
            continue;
        }
        let cells = table_cells(line);
        let id = |c: &str| {
            let c = c.trim();
            (c.starts_with('`')
                && c.ends_with('`')
                && c.len() > 2
                && !c[1..c.len() - 1].contains('`'))
            .then(|| c[1..c.len() - 1].to_owned())
        };
        match cells.as_slice() {
            [rank, name, meaning, _] if rank.trim().parse::<u32>().is_ok() => {
                if let Some(id) = id(name) {
                    out.insert(
                        id,
                        Meaning {
                            safety: None,
                            text: meaning.trim().to_owned(),
                        },
                    );
                }
            }
            [name, safety, meaning] if matches!(safety.trim(), "safe" | "unsafe" | "lossy") => {
                if let Some(id) = id(name) {
                    out.insert(
                        id,
                        Meaning {
                            safety: Some(safety.trim().to_owned()),
                            text: meaning.trim().to_owned(),
                        },
                    );
                }
            }
            _ => {}
        }
    }
    out
}

/// The cells of a markdown table row (`\|` is a `|` inside a cell).
fn table_cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                if let Some(last) = cells.last_mut() {
                    last.push('|');
                }
            }
            '|' => cells.push(String::new()),
            c => {
                if let Some(last) = cells.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    cells
}

/// Markdown's inline code as `<code>`, everything else escaped.
fn inline_md(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", esc(part));
        } else {
            out.push_str(&esc(part));
        }
    }
    out
}

const CSS: &str = "\
:root{--clean:#9aa5b1;--mended:#e0a526;--unresolved:#d64545;--ink:#1f2933;--muted:#616e7c;--line:#e4e7eb}\
*{box-sizing:border-box}\
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--ink);margin:0;background:#f5f7fa}\
main{max-width:1100px;margin:0 auto;padding:24px 28px 60px}\
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:12px 0 4px}\
p.sub,p.hint{color:var(--muted);margin:2px 0 10px}\
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:6px 18px 14px;margin-top:16px}\
.kpis{display:flex;flex-wrap:wrap;gap:12px;margin-top:16px}\
.kpi{background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 16px;min-width:140px}\
.kpi b{display:block;font-size:22px}.kpi span{color:var(--muted)}\
.kpi.mended b{color:#b7791f}.kpi.unresolved b{color:var(--unresolved)}\
.key{display:inline-block;width:11px;height:11px;border-radius:2px;margin:0 4px 0 12px;vertical-align:-1px}\
.key.clean,rect.clean{background:var(--clean);fill:var(--clean)}\
.key.mended,rect.mended{background:var(--mended);fill:var(--mended)}\
.key.unresolved,rect.unresolved{background:var(--unresolved);fill:var(--unresolved)}\
rect.fix{fill:#3e7cb1}rect.issue{fill:var(--unresolved)}rect.lossy{fill:#8e44ad}\
svg.chart{max-width:100%;height:auto;display:block;margin:6px 0}\
svg text{font:12px system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:var(--ink)}\
svg text.note{fill:var(--muted);font-size:10.5px}svg text.value,svg text.axis{fill:var(--muted)}\
svg line.grid{stroke:var(--line)}\
table{border-collapse:collapse;width:100%;margin:6px 0}\
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}\
th{font-weight:600;color:var(--muted)}td.n{text-align:right;font-variant-numeric:tabular-nums}\
td.heat{text-align:center;font-variant-numeric:tabular-nums}\
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f0f2f5;padding:0 3px;border-radius:3px}\
.safe{color:#2f855a}.unsafe{color:#b7791f}.lossy{color:#8e44ad}\
.empty{color:var(--muted);font-style:italic}\
ul.bad{font:12px ui-monospace,monospace;color:var(--muted)}\
.cols{display:grid;grid-template-columns:1fr;gap:0}\
";

/// The page.
fn render(agg: &Aggregate, names: &[String], title: &str, top: usize) -> String {
    let t = &agg.total;
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body><main>",
        esc(title)
    );
    let _ = write!(o, "<h1>{}</h1>", esc(title));
    let span = match (agg.first_ts, agg.last_ts) {
        (Some(a), Some(b)) => {
            let minute = |t: i64| format_ts(t)[..16].replace('T', " ");
            format!("{} to {} (UTC)", minute(a), minute(b))
        }
        _ => "no times".to_owned(),
    };
    let _ = write!(
        o,
        "<p class=\"sub\">{} call(s) from {} · {span} · fronts: {}</p>",
        t.calls,
        esc(&names.join(", ")),
        esc(&agg
            .fronts
            .iter()
            .map(|(f, n)| format!("{f} {n}"))
            .collect::<Vec<_>>()
            .join(", ")),
    );
    // The totals.
    o.push_str("<div class=\"kpis\" id=\"totals\">");
    let kpi = |o: &mut String, class: &str, n: u64, what: &str| {
        let _ = write!(
            o,
            "<div class=\"kpi {class}\" data-kpi=\"{class}\"><b>{n}</b><span>{what} · {}</span></div>",
            pct(n, t.calls)
        );
    };
    let _ = write!(
        o,
        "<div class=\"kpi\" data-kpi=\"calls\"><b>{}</b><span>calls</span></div>",
        t.calls
    );
    kpi(&mut o, "clean", t.clean, "clean");
    kpi(&mut o, "mended", t.mended(), "mended");
    kpi(&mut o, "unresolved", t.unresolved(), "left with issues");
    kpi(&mut o, "lossy", t.lossy, "cut off");
    o.push_str("</div>");
    if t.calls > 0 && t.clean == 0 {
        o.push_str(
            "<p class=\"hint\">No clean call in the log: every call needed mending, or the log \
             was written with <code>events.clean = false</code>; rates are over the calls \
             logged.</p>",
        );
    }
    let legend = "<p class=\"hint\"><span class=\"key mended\"></span>mended (repaired, \
                  corrected)<span class=\"key unresolved\"></span>left with issues (feedback, \
                  dropped, refused by the guard)</p>";

    // Tools.
    o.push_str("<section id=\"tools\"><h2>Tools: the worst offenders</h2>");
    let _ = write!(
        o,
        "<p class=\"hint\">Calls that needed mending or stayed invalid, per tool; the rate \
         is of that tool's calls.</p>{legend}"
    );
    let tools = ranked(&agg.tools.map, Counts::problems);
    if tools.is_empty() {
        o.push_str("<p class=\"empty\">No call needed anything.</p>");
    } else {
        let rows = problem_rows(&tools, top);
        bar_chart(&mut o, "tools", "Tools by calls that needed mending", &rows);
    }
    o.push_str("</section>");

    // Fields.
    o.push_str(
        "<section id=\"fields\"><h2>Fields</h2><p class=\"hint\">Where in the \
                arguments, per tool: <code>(the call's text)</code> is the argument text \
                as a whole (quotes, commas, fences, a cut-off), <code>?</code> a key the \
                schema does not declare, <code>*</code> an array element. Counted once per \
                call.</p>",
    );
    let fields = ranked(&agg.fields.map, |f| f.calls);
    if fields.is_empty() {
        o.push_str("<p class=\"empty\">No field was touched.</p>");
    } else {
        let rows: Vec<Row> = fields
            .iter()
            .take(top)
            .map(|(key, f)| {
                let (tool, path) = agg
                    .field_parts
                    .get(*key)
                    .cloned()
                    .unwrap_or_else(|| (OTHER.to_owned(), String::new()));
                let path = if path.is_empty() {
                    "(the call's text)".to_owned()
                } else {
                    path
                };
                let fix_n: u64 = f.fixes.values().sum();
                let issue_n: u64 = f.issues.values().sum();
                let mut kinds: Vec<(&String, &u64)> =
                    f.fixes.iter().chain(f.issues.iter()).collect();
                kinds.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
                let note = kinds
                    .iter()
                    .take(3)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                Row {
                    label: format!("{tool} {path}"),
                    note,
                    segments: vec![("fix", fix_n), ("issue", issue_n)],
                    value: format!("{} call(s)", f.calls),
                }
            })
            .collect();
        o.push_str(
            "<p class=\"hint\"><span class=\"key\" style=\"background:#3e7cb1\"></span>fixes \
                    <span class=\"key unresolved\"></span>issues left</p>",
        );
        bar_chart(
            &mut o,
            "fields",
            "Fields most often fixed or invalid",
            &rows,
        );
    }
    o.push_str("</section>");

    // Kinds.
    let vocab = vocabulary();
    for (id, title, map, class) in [
        ("fixes", "Fix kinds: what was mended", &agg.fixes, "fix"),
        (
            "issues",
            "Issue kinds: what stayed wrong",
            &agg.issues,
            "issue",
        ),
    ] {
        let _ = write!(o, "<section id=\"{id}\"><h2>{title}</h2>");
        let kinds = ranked(&map.map, |n| *n);
        if kinds.is_empty() {
            let _ = write!(o, "<p class=\"empty\">None in this log.</p>");
        } else {
            let total: u64 = kinds.iter().map(|k| *k.1).sum();
            let rows: Vec<Row> = kinds
                .iter()
                .take(top)
                .map(|(k, n)| {
                    let safety = vocab.get(*k).and_then(|m| m.safety.clone());
                    let class = if safety.as_deref() == Some("lossy") {
                        "lossy"
                    } else {
                        class
                    };
                    Row {
                        label: (*k).clone(),
                        note: safety.unwrap_or_default(),
                        segments: vec![(class, **n)],
                        value: format!("{n} ({} of all)", pct(**n, total)),
                    }
                })
                .collect();
            bar_chart(&mut o, id, title, &rows);
        }
        o.push_str("</section>");
    }

    // Models.
    o.push_str(
        "<section id=\"models\"><h2>By model</h2><p class=\"hint\">Each model's \
                calls and how many needed mending; the tools it gets wrong most.</p>",
    );
    o.push_str(legend);
    let models = ranked(&agg.models.map, Counts::problems);
    if models.is_empty() {
        o.push_str("<p class=\"empty\">No model needed anything.</p>");
    } else {
        let rows = problem_rows(&models, top);
        bar_chart(
            &mut o,
            "models",
            "Models by calls that needed mending",
            &rows,
        );
        // Tool x model: the share of each model's calls to a tool that needed anything.
        let top_tools: Vec<&String> = tools.iter().take(8).map(|t| t.0).collect();
        let top_models: Vec<&String> = models.iter().take(8).map(|m| m.0).collect();
        o.push_str("<table class=\"heat\" id=\"tool-model\"><tr><th>tool \\ model</th>");
        for m in &top_models {
            let _ = write!(o, "<th>{}</th>", esc(&cut(m, 24)));
        }
        o.push_str("</tr>");
        for tool in &top_tools {
            let _ = write!(o, "<tr><td>{}</td>", esc(&cut(tool, 32)));
            for m in &top_models {
                let key = format!("{m}\u{0}{tool}");
                match agg.pairs.map.get(&key) {
                    Some(c) if c.calls > 0 => {
                        let share = c.problems() as f64 / c.calls as f64;
                        let _ = write!(
                            o,
                            "<td class=\"heat\" style=\"background:rgba(214,69,69,{:.2})\" \
                             title=\"{} of {} call(s)\">{}</td>",
                            0.08 + share * 0.6,
                            c.problems(),
                            c.calls,
                            pct(c.problems(), c.calls)
                        );
                    }
                    _ => o.push_str("<td class=\"heat\">·</td>"),
                }
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>");
    }
    o.push_str("</section>");

    // Over time.
    o.push_str(
        "<section id=\"time\"><h2>Over time</h2><p class=\"hint\"><span class=\"key \
                clean\"></span>clean<span class=\"key mended\"></span>mended<span class=\"key \
                unresolved\"></span>left with issues</p>",
    );
    time_chart(&mut o, agg);
    o.push_str("</section>");

    // Legend.
    o.push_str(
        "<section id=\"legend\"><h2>What the kinds mean</h2><p class=\"hint\">Every \
                kind on this page (from <code>docs/issue-kinds.md</code>). A fix is \
                <span class=\"safe\">safe</span> (the meaning is certainly kept), \
                <span class=\"unsafe\">unsafe</span> (a reading was chosen) or \
                <span class=\"lossy\">lossy</span> (something was lost: the model never \
                finished, or a key was dropped).</p><table><tr><th>kind</th><th></th>\
                <th>meaning</th></tr>",
    );
    let mut shown: Vec<(&String, &str)> = agg
        .fixes
        .map
        .keys()
        .map(|k| (k, "fix"))
        .chain(agg.issues.map.keys().map(|k| (k, "issue")))
        .collect();
    shown.sort_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)));
    for (k, what) in shown {
        let m = vocab.get(k.as_str());
        let kind_cell = match m.and_then(|m| m.safety.as_deref()) {
            Some(s) => format!("{what}, <span class=\"{s}\">{s}</span>"),
            None => what.to_owned(),
        };
        let meaning = m.map_or_else(
            || "Not in this version's vocabulary.".to_owned(),
            |m| inline_md(&m.text),
        );
        let _ = write!(
            o,
            "<tr data-kind=\"{}\"><td><code>{}</code></td><td>{kind_cell}</td><td>{meaning}</td></tr>",
            esc(k),
            esc(k)
        );
    }
    o.push_str("</table></section>");

    // About the log.
    o.push_str("<section id=\"about\"><h2>About this log</h2><ul>");
    let _ = write!(
        o,
        "<li>{} event(s) read; <span data-bad=\"{}\">{} bad line(s)</span>.</li>",
        t.calls, agg.bad, agg.bad
    );
    if agg.no_ts > 0 {
        let _ = write!(
            o,
            "<li>{} event(s) without a readable time (not in the time chart).</li>",
            agg.no_ts
        );
    }
    for (what, folded, cap) in [
        ("tools", agg.tools.folded, MAX_TOOLS),
        ("(tool, field) pairs", agg.fields.folded, MAX_FIELDS),
        ("models", agg.models.folded, MAX_MODELS),
        ("fix kinds", agg.fixes.folded, MAX_KINDS),
        ("issue kinds", agg.issues.folded, MAX_KINDS),
        ("(model, tool) pairs", agg.pairs.folded, MAX_PAIRS),
    ] {
        if folded > 0 {
            let _ = write!(
                o,
                "<li>More than {cap} distinct {what}: {folded} count(s) are under <code>{OTHER}</code>.</li>"
            );
        }
    }
    let _ = write!(
        o,
        "<li>Sessions: {}.</li><li>The log holds no argument value and no key the model \
         wrote: fields are the schema's paths; sessions are keyed hashes.</li>",
        if agg.sessions_seen {
            "present (hashed)"
        } else {
            "none in the log"
        }
    );
    o.push_str("</ul>");
    if !agg.bad_samples.is_empty() {
        o.push_str("<p class=\"hint\">The first bad lines:</p><ul class=\"bad\">");
        for s in &agg.bad_samples {
            let _ = write!(o, "<li>{}</li>", esc(s));
        }
        o.push_str("</ul>");
    }
    o.push_str("</section></main></body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn event(tool: &str, outcome: &str, mend: &str, ts: &str, fields: &str) -> String {
        format!(
            r#"{{"v":1,"ts":"{ts}","front":"cli","request_id":null,"line":1,"session":null,"model":"m1","tool":"{tool}","declared":true,"call":0,"source":"tool_calls","outcome":"{outcome}","mend":"{mend}","lossy":false,"fields":{fields}}}"#
        )
    }

    fn aggregate(text: &str) -> Aggregate {
        let mut agg = Aggregate::default();
        read_log(text.as_bytes(), "t", &mut agg).unwrap();
        agg
    }

    #[test]
    fn every_kind_of_the_core_has_a_meaning_in_the_legend() {
        let vocab = vocabulary();
        for k in toolmend::FixKind::ALL {
            let m = vocab
                .get(k.id())
                .unwrap_or_else(|| panic!("fix {} has no meaning", k.id()));
            let safety = match k.safety() {
                toolmend::Safety::Safe => "safe",
                toolmend::Safety::Unsafe => "unsafe",
                toolmend::Safety::Lossy => "lossy",
            };
            assert_eq!(m.safety.as_deref(), Some(safety), "{}", k.id());
        }
        for k in toolmend::IssueKind::ALL {
            assert!(
                vocab.contains_key(k.id()),
                "issue {} has no meaning",
                k.id()
            );
        }
        // An escaped pipe stays inside its cell.
        assert!(vocab["special_tokens_stripped"].text.contains("<|im_end|>"));
    }

    #[test]
    fn bad_lines_are_counted_not_fatal_and_long_lines_are_bounded() {
        let good = event("a", "executed", "repaired", "2026-01-01T00:00:00Z", "[]");
        let long = format!("{{\"x\":\"{}\"}}", "y".repeat(MAX_LINE + 10));
        let text = format!("{good}\nnot json\n{long}\n\n{{\"v\":1}}\n\u{0}\n{good}");
        let agg = aggregate(&text);
        assert_eq!(agg.total.calls, 2);
        assert_eq!(agg.bad, 4, "{:?}", agg.bad_samples);
        assert!(
            agg.bad_samples[1].starts_with("t:3: longer than 1 MiB"),
            "{:?}",
            agg.bad_samples
        );
    }

    #[test]
    fn caps_fold_new_keys_into_other() {
        let mut text = String::new();
        for i in 0..(MAX_TOOLS + 5) {
            text.push_str(&event(
                &format!("tool{i}"),
                "feedback",
                "feedback",
                "x",
                "[]",
            ));
            text.push('\n');
        }
        let agg = aggregate(&text);
        assert_eq!(agg.tools.map.len(), MAX_TOOLS + 1);
        assert_eq!(agg.tools.folded, 5);
        assert_eq!(agg.tools.map[OTHER].calls, 5);
        assert_eq!(agg.no_ts, (MAX_TOOLS + 5) as u64);
    }

    #[test]
    fn time_buckets_widen_and_stay_bounded() {
        let mut agg = Aggregate::default();
        // Ten days, one call a minute: 14,400 minutes.
        for m in 0..14_400_i64 {
            agg.add_time(1_700_000_000_000 + m * 60_000, Status::Mended);
        }
        assert!(agg.buckets.len() <= MAX_BUCKETS, "{}", agg.buckets.len());
        assert_eq!(agg.buckets.values().map(|b| b[1]).sum::<u64>(), 14_400);
        let mut page = String::new();
        time_chart(&mut page, &agg);
        let cols = page.matches("<g class=\"col\"").count();
        assert!(
            (2..=TIME_COLUMNS as usize + 1).contains(&cols),
            "{cols} columns"
        );
    }

    #[test]
    fn the_page_ranks_worst_first_escapes_everything_and_is_deterministic() {
        let f = r#"[{"path":"/days","fixes":["string_to_integer"],"issues":[]}]"#;
        let mut text = String::new();
        for _ in 0..3 {
            text.push_str(&event(
                "b_tool",
                "executed",
                "repaired",
                "2026-01-01T00:00:00Z",
                f,
            ));
            text.push('\n');
        }
        text.push_str(&event(
            "a<script>",
            "feedback",
            "feedback",
            "2026-01-01T00:05:00Z",
            "[]",
        ));
        text.push('\n');
        text.push_str(&event(
            "c_clean",
            "executed",
            "valid",
            "2026-01-01T00:09:00Z",
            "[]",
        ));
        let a = render(&aggregate(&text), &["t".to_owned()], "T", 10);
        let b = render(&aggregate(&text), &["t".to_owned()], "T", 10);
        assert_eq!(a, b);
        assert!(!a.contains("<script"), "unescaped tool name");
        assert!(a.contains("a&lt;script&gt;"));
        let tools = &a[a.find("data-chart=\"tools\"").unwrap()..];
        let tools = &tools[..tools.find("</svg>").unwrap()];
        let labels: Vec<&str> = tools
            .split("data-label=\"")
            .skip(1)
            .map(|s| &s[..s.find('"').unwrap()])
            .collect();
        assert_eq!(
            labels,
            ["b_tool", "a&lt;script&gt;"],
            "the clean tool has no bar"
        );
        assert!(a.contains("data-kind=\"string_to_integer\""));
        assert!(
            !a.contains("http://") && !a.contains("https://"),
            "the page refers outside"
        );
    }
}
