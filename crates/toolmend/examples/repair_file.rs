//! Repairs every `raw_arguments` of a JSONL file (one record per line) and prints
//! how many calls were read, how many failed, and the time per record.
//!
//! ```sh
//! cargo run --release -p toolmend --example repair_file -- ../shared/corpus/tool_calls_dev.jsonl 20
//! ```

use std::time::Instant;

use toolmend::{RepairOptions, repair};

// The allocator the shipped binaries use (see toolmend-cli).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: repair_file FILE.jsonl [PASSES]");
        std::process::exit(2);
    };
    let passes: usize = args.next().and_then(|p| p.parse().ok()).unwrap_or(1);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(1);
        }
    };
    let raws: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("raw_arguments")?.as_str().map(str::to_owned))
        .collect();
    let opts = RepairOptions::default();
    let (mut calls, mut errors) = (0usize, 0usize);
    let start = Instant::now();
    for _ in 0..passes {
        for raw in &raws {
            match repair(raw, &opts) {
                Ok(r) => calls += r.calls.len(),
                Err(_) => errors += 1,
            }
        }
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / (raws.len() * passes).max(1) as f64;
    eprintln!(
        "{} records x {passes}: {calls} calls, {errors} errors, {per:.2} us/record",
        raws.len()
    );
}
