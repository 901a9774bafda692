//! Properties of the parsers of a tool's world: the envelope reader and the tools file.
//! (The fuzz target `tool_answers` runs the same invariants on arbitrary bytes.) And
//! scaling: loading n tools, 1x against 10x.

#![allow(clippy::unwrap_used, clippy::expect_used)]

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

/// Loading n HTTP tools (parse, schemas, templates) is linear: 10x the tools takes well
/// under 30x the time.
#[tokio::test]
async fn loading_tools_scales_linearly() {
    async fn time(n: usize) -> std::time::Duration {
        let text = many_tools(n);
        let mut best = std::time::Duration::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let file = ToolsFile::parse(&text, "s").unwrap();
            let set = ToolSet::load(&file, &|_| None).await.unwrap();
            assert_eq!(set.tools().len(), n);
            let _ = set.registry().unwrap();
            best = best.min(t.elapsed());
        }
        best
    }
    let small = time(30).await;
    let large = time(300).await;
    assert!(
        large < small * 30,
        "30 tools: {small:?}, 300 tools: {large:?}"
    );
}
