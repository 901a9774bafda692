//! The page's charts: ranked bars and the time chart, inline SVG.

use super::*;

/// One bar per name (the first `top`): its mended and unresolved calls, "N of M (p%)".
pub(super) fn problem_rows(ranked: &[(&String, &Counts)], top: usize) -> Vec<Row> {
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

pub(super) fn pct(part: u64, whole: u64) -> String {
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
pub(super) fn esc(s: &str) -> String {
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
pub(super) fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(n - 1).collect();
    t.push('…');
    t
}

/// One row of a bar chart: a label, segments (class, count) and the text after the bar.
pub(super) struct Row {
    pub(super) label: String,
    /// A second line under the label (the kinds of a field).
    pub(super) note: String,
    pub(super) segments: Vec<(&'static str, u64)>,
    pub(super) value: String,
}

pub(super) const LABEL_W: usize = 290;
pub(super) const BAR_W: usize = 340;
/// A row's height; with a note under its label, [`NOTE_ROW_H`].
pub(super) const ROW_H: usize = 24;
pub(super) const NOTE_ROW_H: usize = 34;

/// A horizontal bar chart (inline SVG): bars scaled to the largest row, each row a `<g
/// class="row">` with `data-label` and `data-value`, each segment a `<rect class="bar
/// KIND">` with `data-count`.
pub(super) fn bar_chart(out: &mut String, chart: &str, caption: &str, rows: &[Row]) {
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
pub(super) fn time_chart(out: &mut String, agg: &Aggregate) {
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

pub(super) fn interval_name(ms: i64) -> &'static str {
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
