//! Properties of the parsers of a tool's world: the envelope reader and the tools file.
//! (The fuzz target `tool_answers` runs the same invariants on arbitrary bytes.) And
//! scaling: loading n tools, 1x against 10x.

use proptest::prelude::*;
use serde_json::{Value, json};
use toolmend_tools::{
    ToolSet, ToolsFile,
    http::read_envelope,
    transport::{Reply, TransportError},
};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z_]{0,8}".prop_map(Value::String),
        prop_oneof![
            Just("success"),
            Just("error"),
            Just("call_a"),
            Just("call_b")
        ]
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("status".to_owned()),
                        Just("call_id".to_owned()),
                        Just("data".to_owned()),
                        Just("message".to_owned()),
                        "[a-z]{1,5}"
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Only this call's `success` is data; another call's answer is never data.
    #[test]
    fn an_envelope_is_data_only_for_this_call(v in json_value()) {
        match read_envelope(&v, "call_a", "call_a") {
            Ok(Reply::Success { data, .. }) => {
                prop_assert_eq!(&v["status"], "success");
                prop_assert_eq!(&v["call_id"], "call_a");
                prop_assert_eq!(&data, v.get("data").unwrap_or(&Value::Null));
            }
            Ok(Reply::Failed { .. }) => {
                prop_assert_eq!(&v["status"], "error");
                prop_assert_eq!(&v["call_id"], "call_a");
            }
            Err(TransportError::Dirty { .. }) => prop_assert!(v["call_id"] != "call_a"),
            Err(TransportError::Protocol(_)) => {}
            Err(other) => prop_assert!(false, "unexpected {other:?}"),
        }
    }

    /// The tools file reader never panics, whatever the text.
    #[test]
    fn the_tools_file_reader_never_panics(text in "(\\[\\[tools\\]\\]\n|name = \"a\"\n|endpoint = \"http://x/y\"\n|[a-z_ =\"\\[\\]{}\n0-9.]){0,40}") {
        let _ = ToolsFile::parse(&text, "p");
        let _ = ToolsFile::parse_section(&text, "p");
    }
}

fn many_tools(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "[[tools]]\nname = \"tool_{i}\"\nendpoint = \"http://127.0.0.1:9/t{i}\"\ntemplate = \"{{{{ data }}}}\"\nparameters = {{ type = \"object\", properties = {{ q = {{ type = \"string\" }} }} }}\n\n"
        ));
    }
    s
}

// The core's: the calling thread's CPU time, not a clock.
#[path = "../../../toolmend/tests/it/cpu.rs"]
mod cpu;
use cpu::cpu_ns;

/// Loads `text` (`n` HTTP tools) as the gateway does: parse, schemas, templates, registry.
async fn load(text: &str, n: usize) {
    let file = ToolsFile::parse(text, "s").unwrap();
    let set = ToolSet::load(&file, &|_| None).await.unwrap();
    assert_eq!(set.tools().len(), n);
    let _ = set.registry().unwrap();
}

/// CPU nanoseconds per load over `reps` loads (all on this thread: HTTP tools spawn
/// nothing).
async fn cpu_per_load(text: &str, n: usize, reps: u64) -> f64 {
    let start = cpu_ns();
    for _ in 0..reps {
        load(text, n).await;
    }
    (cpu_ns() - start) as f64 / reps as f64
}

/// Loading n HTTP tools is linear: 10x the tools costs under 35x the CPU time (quadratic:
/// about 100x; the room is for the caches, as in the core's `MAX_CPU_RATIO`). Samples of at
/// least 20 ms, the least of up to four per size.
#[tokio::test]
async fn loading_tools_scales_linearly() {
    let (small, large) = (many_tools(30), many_tools(300));
    // The first load pays for what is made once (the HTTP client): not counted.
    load(&small, 30).await;
    let one = cpu_per_load(&small, 30, 1).await.max(1.0) as u64;
    let reps = 20_000_000u64.div_ceil(one).clamp(1, 1000);
    let (mut s, mut l, mut ratio) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..4 {
        s = s.min(cpu_per_load(&small, 30, reps).await);
        l = l.min(cpu_per_load(&large, 300, reps.div_ceil(10)).await);
        ratio = l / s.max(1.0);
        if ratio < 35.0 {
            break;
        }
    }
    assert!(
        ratio < 35.0,
        "30 tools: {s:.0} ns, 300 tools: {l:.0} ns a load (x{ratio:.1})"
    );
}
