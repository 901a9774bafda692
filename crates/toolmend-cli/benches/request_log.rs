//! What the gateway's per-request log line costs: one `toolmend::request` event with the
//! fields `server::access` writes, through the subscriber `toolmend serve` installs (JSON,
//! an `EnvFilter`): written to a file directly as `2> file` would (the old writer), and
//! queued for the writer thread (`toolmend_gateway::sink::LogWriter`, what `serve` uses:
//! the request pays the formatting, a copy and a queue send; the thread pays the write);
//! against the same event filtered out (`RUST_LOG=warn`). The difference is the CPU a
//! request pays for its line.
//!
//! `cargo bench -p toolmend-cli --bench request_log`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{hint::black_box, sync::Arc};

use criterion::{Criterion, criterion_group, criterion_main};
use tracing_subscriber::{Layer as _, layer::SubscriberExt as _};

/// The line `server::access` writes for a mended JSON request (values of the usual size).
fn line(i: u64) {
    tracing::info!(
        target: "toolmend::request",
        method = %"POST",
        route = "/v1/chat/completions",
        path = None::<&str>,
        status = 200u16,
        upstream_status = Some(200u16),
        upstream_calls = 1u32,
        duration_ms = 0.713,
        valid = 0usize,
        repaired = 1usize,
        unresolved = 0usize,
        error = None::<&str>,
        stream = None::<bool>,
        completed = None::<bool>,
        request_id = %format_args!("tm-22c403eb{i:06x}"),
        "request"
    );
}

fn bench(c: &mut Criterion) {
    let path = std::env::temp_dir().join("toolmend-request-log-bench.jsonl");
    let file = Arc::new(std::fs::File::create(&path).unwrap());
    let mut group = c.benchmark_group("request_log");
    let (queued, flush) =
        toolmend_gateway::sink::LogWriter::start(std::fs::File::create(&path).unwrap()).unwrap();
    let cases: [(&str, &str, bool); 3] = [
        ("info: written", "info", false),
        ("info: queued", "info", true),
        ("warn: filtered out", "warn", false),
    ];
    for (name, filter, queue) in cases {
        let direct = Arc::clone(&file);
        let queued = queued.clone();
        let writer = move || -> Box<dyn std::io::Write> {
            if queue {
                Box::new(queued.clone())
            } else {
                Box::new(Arc::clone(&direct))
            }
        };
        let logs = tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(writer)
            .with_filter(tracing_subscriber::EnvFilter::new(filter));
        let subscriber = tracing_subscriber::registry().with(logs);
        tracing::subscriber::with_default(subscriber, || {
            let mut i = 0u64;
            group.bench_function(name, |b| {
                b.iter(|| {
                    i += 1;
                    line(black_box(i));
                });
            });
        });
    }
    group.finish();
    eprintln!("queued lines dropped: {}", queued.dropped());
    drop(flush);
    let _ = std::fs::remove_file(&path);
}

criterion_group!(benches, bench);
criterion_main!(benches);
