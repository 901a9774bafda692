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
