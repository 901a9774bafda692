use std::{borrow::Cow, time::Duration};

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn shaper(template: Option<&str>, budget: usize, markdown: bool) -> Shaper {
    Shaper::new(&ShapeSpec {
        template: template.map(str::to_owned),
        budget_bytes: budget,
        markdown,
    })
    .unwrap()
}

fn render_t(template: &str, data: &Value) -> Shaped {
    shaper(Some(template), 4_000, false).shape(data, None)
}

#[test]
fn template_helpers_sum_len_join_round() {
    let data =
        json!({"orders": [{"id": 1, "amount": 2.5}, {"id": 2, "amount": 4}], "tags": ["a", "b"]});
    let s = render_t(
        "{{ len(orders) }} orders, total {{ sum(orders, \"amount\") }} = {{ orders|sum(attribute=\"amount\") }}; \
         {{ orders|length }}/{{ orders|len }}/{{ length(tags) }}; {{ join(tags, \", \") }}|{{ tags|join(\"-\") }}; \
         {{ round(2.345, 1) }} {{ 7.5|round }} {{ round(sum(orders, \"amount\") / 3, 2) }}",
        &data,
    );
    assert_eq!(s.how, "template", "{s:?}");
    assert_eq!(
        s.content,
        "2 orders, total 6.5 = 6.5; 2/2/2; a, b|a-b; 2.3 8.0 2.17"
    );
    assert_eq!(s.template_error, None);
}

#[test]
fn template_scope_data_message_and_top_level_fields() {
    let sh = shaper(
        Some("{{ message }}|{{ id }}|{{ data.id }}|{{ data.message }}|{{ missing.deeper.still }}|"),
        0,
        false,
    );
    let s = sh.shape(&json!({"id": 7, "message": "own"}), Some("ok"));
    assert_eq!(s.content, "ok|7|7|own||");
    let s = sh.shape(&json!([1, 2]), None);
    assert_eq!(s.content, "|||||");
    let s = render_t(
        "{{ tojson(data) }} {{ data|tojson }}",
        &json!({"a": [1, "<x>"]}),
    );
    assert_eq!(
        s.content,
        r#"{"a": [1, "\u003cx\u003e"]} {"a": [1, "\u003cx\u003e"]}"#
    );
}

#[test]
fn template_date() {
    let data = json!({"d": "2024-03-05", "dt": "2024-03-05T14:07:09.123+02:00", "u": 1_700_000_000, "s": "1700000000"});
    let s = render_t(
        "{{ date(d, \"%a %d %b %Y\") }}|{{ dt|date(\"%A %B %d, %H:%M:%S\") }}|{{ date(u) }}|{{ s|date(\"%Y-%m-%dT%H:%M:%SZ %%\") }}|{{ d|date }}",
        &data,
    );
    assert_eq!(
        s.content,
        "Tue 05 Mar 2024|Tuesday March 05, 14:07:09|2023-11-14 22:13:20|2023-11-14T22:13:20Z %|2024-03-05"
    );
    // Leap day, pre-1970, a space separator.
    let s = render_t(
        "{{ date(\"2000-02-29 23:59\", \"%a %Y-%m-%d %H:%M\") }} {{ date(-86400) }}",
        &json!(null),
    );
    assert_eq!(s.content, "Tue 2000-02-29 23:59 1969-12-31 00:00:00");
    // Unreadable dates and formats fail the template (and fall back).
    for bad in [
        "{{ date(\"2024-02-30\") }}",
        "{{ date(\"yesterday\") }}",
        "{{ date(d, \"%j\") }}",
    ] {
        let s = shaper(Some(bad), 4_000, false).shape(&json!({"d": "2024-01-01"}), None);
        assert_eq!(s.how, "template_failed", "{bad}");
        assert!(
            s.template_error.as_deref().unwrap().contains("date:"),
            "{s:?}"
        );
    }
}

#[test]
fn template_that_does_not_compile_names_its_line() {
    let e = Shaper::new(&ShapeSpec {
        template: Some("line one\n{{ ok }}\n{% for x in items %}\n{{ x }".into()),
        budget_bytes: 100,
        markdown: false,
    })
    .unwrap_err();
    assert!(e.starts_with("line 4: syntax error"), "{e}");
    let e = Shaper::new(&ShapeSpec {
        template: Some("a\n{{ data|nosuchfilter }}".into()),
        budget_bytes: 100,
        markdown: false,
    })
    .unwrap_err();
    assert!(e.starts_with("line 2: unknown filter"), "{e}");
    let e = Shaper::new(&ShapeSpec {
        template: Some("{% include \"other\" %}".into()),
        budget_bytes: 100,
        markdown: false,
    })
    .unwrap_err();
    assert!(e.contains("cannot include"), "{e}");
}

#[test]
fn runaway_templates_fall_back_without_hanging() {
    let data = json!({"id": 3, "items": [1, 2, 3]});
    let runaway = [
        "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{{ \"x\" * 2000000 }}",
        "{% for a in range(100000) %}{{ \"y\" * 1000 }}{% endfor %}",
    ];
    for t in runaway {
        let s = shaper(Some(t), 500, false).shape(&data, None);
        assert_eq!(s.how, "template_failed", "{t}: {s:?}");
        // Stopped by a bound (the fuel, the output cap, the recursion limit), not run
        // to its end: that is what keeps it from hanging.
        let why = s.template_error.as_deref().unwrap_or_default();
        assert!(
            ["fuel", "cap", "recursion limit"]
                .iter()
                .any(|bound| why.contains(bound)),
            "{t}: {why}"
        );
        // Nothing of the payload: the template was written to choose what shows.
        assert_eq!(s.content, "");
    }
    let s = shaper(Some("{{ \"x\" * 2000000 }}"), 500, false).shape(&data, None);
    let why = s.template_error.unwrap();
    assert!(why.contains("fuel") || why.contains("cap"), "{why}");
    let s = shaper(
        Some("{% for a in range(100000) %}{{ a }}{% endfor %}"),
        500,
        false,
    )
    .shape(&data, None);
    assert!(s.template_error.unwrap().contains("fuel"));
    // A runtime error (the payload's shape is not what the template expected).
    let s = shaper(Some("{{ id + \"x\" }}"), 500, false).shape(&data, Some("done"));
    assert_eq!(s.how, "template_failed");
    assert!(s.template_error.unwrap().starts_with("line 1: "));
    assert_eq!(s.content, "");
}

#[test]
fn a_failed_template_shows_no_value_of_the_payload_even_in_its_error() {
    // `date` quotes the value it cannot read; the error keeps its words, not the value.
    let data = json!({"card": "4111-SECRET-1111", "when": "not a date SECRET2"});
    for t in ["{{ date(when) }}", "{{ date(card) }}"] {
        let s = shaper(Some(t), 4_000, false).shape(&data, Some("msg"));
        assert_eq!((s.how, s.content.as_str()), ("template_failed", ""));
        let why = s.template_error.unwrap();
        assert!(why.contains("date: cannot read"), "{why}");
        assert!(!why.contains("SECRET"), "{why}");
    }
}

#[test]
fn template_output_over_budget_is_cut_with_a_marker() {
    let sh = shaper(
        Some("{% for i in range(2000) %}{{ i }},{% endfor %}END"),
        300,
        false,
    );
    let s = sh.shape(&json!(null), None);
    assert_eq!(s.how, "template");
    assert!(s.content.len() <= 300, "{}", s.content.len());
    assert!(s.content.starts_with("0,1,2,"), "{}", s.content);
    assert!(s.content.ends_with("1998,1999,END"), "{}", s.content);
    let full: String = (0..2000).map(|i| format!("{i},")).collect::<String>() + "END";
    assert_eq!(
        s.content.len() - marker(s.omitted_bytes, false).len() + s.omitted_bytes,
        full.len()
    );
    assert!(s.content.contains(&format!(
        " … [{} bytes omitted; full result kept as artifact] … ",
        group(s.omitted_bytes)
    )));
}

#[test]
fn budget_cut_head_tail_and_marker() {
    let text: String = "é".repeat(1_000); // 2,000 bytes, 2-byte chars
    let s = shaper(None, 500, false).shape(&json!(text), None);
    assert_eq!(s.how, "text");
    assert!(s.content.len() <= 500);
    // The room is 500 less the widest marker (61): 175 head (174 at a char), 264 tail.
    let mark = " … [1,562 bytes omitted; full result kept as artifact] … ";
    let (head, tail) = s.content.split_once(mark).expect(&s.content);
    assert_eq!((head.len(), tail.len(), s.content.len()), (174, 264, 499));
    assert_eq!(s.omitted_bytes, 1_562);
    assert_eq!(head.len() + tail.len() + s.omitted_bytes, 2_000);
    // 40 / 60 of the room left by the widest marker.
    assert!(
        head.len() * 3 <= tail.len() * 2 + 2,
        "{} {}",
        head.len(),
        tail.len()
    );
    // Within the budget: untouched; 0: no budget.
    assert_eq!(
        shaper(None, 2_000, false)
            .shape(&json!(text), None)
            .omitted_bytes,
        0
    );
    assert_eq!(
        shaper(None, 0, false).shape(&json!(text), None).content,
        text
    );
    // A budget below the marker: the marker alone.
    let s = shaper(None, 10, false).shape(&json!(text), None);
    assert_eq!(
        s.content,
        "… [2,000 bytes omitted; full result kept as artifact] …"
    );
    assert_eq!(s.omitted_bytes, 2_000);
    assert_eq!(marker(usize::MAX, true).len(), MARKER_MAX_BYTES);
}

#[test]
fn generic_shapes() {
    let sh = shaper(None, 4_000, false);
    // Small: whole compact JSON.
    assert_eq!(
        sh.shape(&json!(42), None),
        Shaped {
            content: "42".into(),
            how: "json",
            omitted_bytes: 0,
            template_error: None
        }
    );
    assert_eq!(sh.shape(&json!(true), None).content, "true");
    assert_eq!(sh.shape(&json!(null), None).content, "null");
    assert_eq!(sh.shape(&json!(null), Some("deleted")).content, "deleted");
    assert_eq!(
        sh.shape(&json!({"id": 7, "ok": true}), Some("found"))
            .content,
        "found\n{\"id\":7,\"ok\":true}"
    );
    assert_eq!(sh.shape(&json!("plain text\nhere"), None).how, "text");
    assert_eq!(
        sh.shape(&json!("plain text\nhere"), None).content,
        "plain text\nhere"
    );
    let long = "x".repeat(300);

    // An array of objects.
    let items: Vec<Value> = (1..=1000)
        .map(|i| json!({"id": i, "name": format!("item {i}"), "price": i * 3, "owner": {"id": 1}, "notes": long}))
        .collect();
    let s = sh.shape(&Value::Array(items.clone()), None);
    assert_eq!(s.how, "summary");
    assert_eq!(
        s.content,
        r#"1,000 items; first 3: {"id": 1, "name": "item 1", …}, {"id": 2, "name": "item 2", …}, {"id": 3, "name": "item 3", …}; item fields: id, name, price, owner, notes"#
    );
    let s = sh.shape(&Value::Array(items[..3].to_vec()), None);
    assert!(
        s.content
            .starts_with(r#"3 items: {"id": 1, "name": "item 1", …}, "#),
        "{}",
        s.content
    );
    let s = sh.shape(&json!((0..500).collect::<Vec<_>>()), None);
    assert_eq!(s.content, "500 items; first 3: 0, 1, 2");

    // An object.
    let obj = json!({
        "id": 7, "status": "open", "created_at": "2024-01-01", "items": items[..12].to_vec(),
        "owner": {"id": 1, "name": "n", "email": "e"}, "tags": ["a", "b"], "note": long,
    });
    let s = sh.shape(&obj, None);
    assert_eq!(s.how, "summary");
    assert_eq!(
        s.content,
        r#"{"id": 7, "status": "open"} +5 more fields: created_at, items [12 items], owner {3 fields}, tags [2 items], note; first of items: {"id": 1, "name": "item 1", …}, {"id": 2, "name": "item 2", …}, {"id": 3, "name": "item 3", …}"#
    );
    // No identifying fields: the first scalars; none at all: the field list.
    let s = sh.shape(
        &json!({"alpha": long.repeat(4), "beta": 2, "gamma": [1], "delta": {}}),
        None,
    );
    assert_eq!(
        s.content,
        format!(
            "{{\"alpha\": \"{}…\", \"beta\": 2}} +2 more fields: gamma [1 item], delta {{0 fields}}; first of gamma: 1",
            "x".repeat(80)
        )
    );
    let many: serde_json::Map<String, Value> = (0..20)
        .map(|i| (format!("k{i:02}"), json!({"v": long})))
        .collect();
    let s = sh.shape(&Value::Object(many), None);
    assert!(
        s.content
            .starts_with("20 fields: k00 {1 field}, k01 {1 field}, ")
            && s.content.ends_with("k07 {1 field}, … (+12 more)"),
        "{}",
        s.content
    );
}

#[test]
fn markdown_escaping() {
    let sh = shaper(None, 0, true);
    let s = sh.shape(&json!("<script>alert(1)</script> [click](http://x) ![i](y) *b* _e_ a_b `c` {x} |t|\n# title\n- item\n12. twelve\n  + plus\nC:\\dir 3.14 (ok) a-b"), None);
    assert_eq!(
        s.content,
        "\\<script\\>alert(1)\\</script\\> \\[click\\]\\(http://x) \\!\\[i\\]\\(y) \\*b\\* \\_e\\_ a_b \\`c\\` \\{x\\} \\|t\\|\n\\# title\n\\- item\n12\\. twelve\n  \\+ plus\nC:\\\\dir 3.14 (ok) a-b"
    );
    // A template: its own Markdown is kept, the values are escaped.
    let sh = shaper(
        Some("## {{ title }}\n- **{{ data.items|length }}** items: {{ tojson(data.items) }}"),
        0,
        true,
    );
    let s = sh.shape(&json!({"title": "<b>[x](y)</b>", "items": ["*"]}), None);
    assert_eq!(
        s.content,
        "## \\<b\\>\\[x\\]\\(y)\\</b\\>\n- **1** items: \\[\"\\*\"\\]"
    );
    // A cut never splits an escape, and the marker's brackets are escaped.
    for budget in 90..140 {
        let s = shaper(None, budget, true).shape(&json!("[".repeat(200)), None);
        assert!(s.content.len() <= budget);
        let (head, tail) = s.content.split_once(" … \\[").unwrap();
        assert!(
            head.len() % 2 == 0
                && head
                    .chars()
                    .collect::<Vec<_>>()
                    .chunks(2)
                    .all(|p| p == ['\\', '[']),
            "{head}"
        );
        let tail = tail.split_once("\\] … ").unwrap().1;
        assert!(
            tail.len() % 2 == 0 && tail.starts_with("\\["),
            "{budget}: {tail}"
        );
    }
}

#[test]
fn control_characters_and_invalid_utf8() {
    let (text, lossy) = clean_utf8(b"ok \xff\xfe end\x00\x1b[31m\tx\r\n");
    assert!(lossy);
    let s = shaper(None, 100, false).shape(&json!(text), None);
    assert_eq!(s.content, "ok \u{fffd}\u{fffd} end[31m\tx\r\n");
    assert_eq!(clean_utf8(b"fine"), (Cow::Borrowed("fine"), false));
    let s = render_t("a\u{0}b{{ data }}", &json!("c\u{7}d"));
    assert_eq!(s.content, "abcd");
}

#[test]
fn deterministic_and_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Shaper>();
    let data = json!({"z": [1, 2, {"a": "b"}], "id": "x", "big": "y".repeat(5_000)});
    let sh = shaper(None, 300, true);
    assert_eq!(sh.shape(&data, Some("m")), sh.shape(&data, Some("m")));
    let sh = shaper(
        Some("{% for k, v in data|items %}{{ k }}={{ v }};{% endfor %}"),
        300,
        false,
    );
    assert_eq!(sh.shape(&data, None), sh.shape(&data, None));
}

use crate::test_cpu::cpu_ns;

/// The CPU time of one shape, the least of five.
fn time_shape(sh: &Shaper, data: &Value) -> Duration {
    (0..5)
        .map(|_| {
            let start = cpu_ns();
            std::hint::black_box(sh.shape(data, None));
            Duration::from_nanos(cpu_ns() - start)
        })
        .min()
        .unwrap()
}

/// Linear: 10x the input costs under 35x the CPU time (quadratic: about 100x; the room
/// is for the larger input missing the caches more, with other processes evicting them
/// up to a load of 8 on two cores, as in the core's `MAX_CPU_RATIO`).
#[test]
fn shape_scales_with_input() {
    let floor = Duration::from_micros(200);
    let sh = shaper(None, 4_000, false);
    let array = |n: usize| {
        Value::Array(
            (0..n)
                .map(|i| json!({"id": i, "name": "n", "v": [i]}))
                .collect(),
        )
    };
    let (small, big) = (array(100_000), array(1_000_000));
    let (t1, t10) = (time_shape(&sh, &small), time_shape(&sh, &big));
    assert!(t10 < 35 * t1.max(floor), "summary: {t1:?} vs {t10:?}");
    // Text: linear (cleaning, escaping), the cut itself constant.
    let sh = shaper(None, 4_000, true);
    let (small, big) = (
        json!("ab_c*\n".repeat(100_000)),
        json!("ab_c*\n".repeat(1_000_000)),
    );
    let (t1, t10) = (time_shape(&sh, &small), time_shape(&sh, &big));
    assert!(t10 < 35 * t1.max(floor), "text: {t1:?} vs {t10:?}");
    // A template over the payload: bounded by fuel.
    let sh = shaper(
        Some("{{ len(data) }} {% for x in data %}{{ x.id }}{% endfor %}"),
        4_000,
        false,
    );
    let (small, big) = (array(10_000), array(100_000));
    let (t1, t10) = (time_shape(&sh, &small), time_shape(&sh, &big));
    assert!(t10 < 35 * t1.max(floor), "template: {t1:?} vs {t10:?}");
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        "[\\[\\]()<>*_#`\\\\\n -]{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn shape_never_panics_and_keeps_the_budget(
        data in json_value(),
        budget in prop_oneof![Just(0usize), 0usize..400, 400usize..3000],
        markdown in any::<bool>(),
        message in proptest::option::of(any::<String>()),
        template in prop_oneof![
            Just(None),
            Just(Some("{{ data }}")),
            Just(Some("{% for k in data %}{{ k }}: {{ tojson(k) }}\n{% endfor %}{{ message }}")),
        ],
    ) {
        let sh = shaper(template, budget, markdown);
        let s = sh.shape(&data, message.as_deref());
        if budget > 0 {
            prop_assert!(s.content.len() <= budget.max(MARKER_MAX_BYTES), "{} > {budget}", s.content.len());
        }
        prop_assert_eq!(s.omitted_bytes > 0, s.content.contains("bytes omitted; full result kept as artifact"));
        prop_assert!(!s.content.chars().any(|c| c < ' ' && !matches!(c, '\n' | '\t' | '\r')));
        prop_assert_eq!(&s, &sh.shape(&data, message.as_deref()));
    }
}

/// Found by the fuzz target `tool_answers`: DEL (and C1 controls) inside a string
/// payload reached the content.
#[test]
fn del_and_c1_controls_are_removed() {
    let shaper = Shaper::new(&ShapeSpec {
        template: None,
        budget_bytes: 64,
        markdown: false,
    })
    .unwrap();
    let shaped = shaper.shape(&Value::String("fusion energ\u{7f}y \u{85}now".into()), None);
    assert_eq!(shaped.content, "fusion energy now");
}
