//! The page: the legend read from docs/issue-kinds.md, the CSS, the HTML around the
//! charts.

use super::*;

/// The vocabulary, from `docs/issue-kinds.md` (the one list of kinds and their meaning).
pub(super) const KINDS_DOC: &str = include_str!("../../../../docs/issue-kinds.md");

/// A kind's meaning and, for a fix, its safety.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Meaning {
    pub(super) safety: Option<String>,
    pub(super) text: String,
}

/// The kinds of `docs/issue-kinds.md`: fixes from its tables with a safety column,
/// issues from its ranked table.
pub(super) fn vocabulary() -> HashMap<String, Meaning> {
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
pub(super) fn table_cells(line: &str) -> Vec<String> {
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
pub(super) fn inline_md(s: &str) -> String {
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

pub(super) const CSS: &str = "\
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
pub(super) fn render(agg: &Aggregate, names: &[String], title: &str, top: usize) -> String {
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
