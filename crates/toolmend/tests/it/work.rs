//! Work counted, not timed: the one place the tests measure what a call costs.
//!
//! A test that reads a wall clock fails when the machine is loaded, so none does. A call's
//! cost is read two ways instead, both for the calling thread alone:
//! - its allocations (how many, the bytes allocated in all, the most bytes live at once),
//!   from the counting global allocator of the test binary (`allocation-counter`):
//!   deterministic, the same on a loaded machine as on an idle one;
//! - its CPU time, from `/proc/thread-self/schedstat` (first field: nanoseconds spent on a
//!   CPU): the time spent waiting for a core, however long, is not in it.
//!
//! [`assert_linear`] runs a call on an input and on one ten times larger. Linear work costs
//! about ten times as much there, quadratic work about a hundred times: the allocation
//! counts must grow less than [`MAX_COUNT_RATIO`] times (a vector's capacity, doubled, can
//! take 16 where 10 would do), the CPU time less than [`MAX_CPU_RATIO`] times (room for the
//! larger input missing the caches more often, and for other processes on the same cores
//! evicting them, up to a load of 8 on two cores).
//!
//! The allocations do not see a quadratic scan that allocates nothing; the CPU time does.
//! The CPU time is read over samples of at least [`MIN_SAMPLE_NS`] (many runs of a quick
//! call), the least of up to [`SAMPLES`] samples per size.

// A failure here is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::hint::black_box;

/// Largest accepted growth of allocations, bytes allocated and peak bytes from 1x to 10x.
pub const MAX_COUNT_RATIO: f64 = 25.0;
/// Largest accepted growth of the CPU time per run from 1x to 10x; quadratic gives ~100.
pub const MAX_CPU_RATIO: f64 = 35.0;
/// CPU time of one sample: far above the microseconds a read of the counter costs.
pub const MIN_SAMPLE_NS: u64 = 20_000_000;
/// Samples per size, at most; the least counts (a sample that ran beside a burst of other
/// work on the same core is slower, never faster).
pub const SAMPLES: usize = 4;
/// Counts below these compare as these (a few small buffers are not a trend).
const COUNT_FLOOR: u64 = 64;
const BYTES_FLOOR: u64 = 16 << 10;

/// What one run of a call cost its thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Allocations made.
    pub allocations: u64,
    /// Bytes allocated, all of them (a reallocation counts its new size).
    pub bytes: u64,
    /// The most bytes allocated by the call and live at one time.
    pub peak: u64,
    /// Nanoseconds on a CPU.
    pub cpu_ns: u64,
}

#[path = "cpu.rs"]
mod cpu;
pub use cpu::cpu_ns;

/// Runs `f` once: its output and what it cost (the output's drop is not counted).
pub fn measure<O>(f: impl FnOnce() -> O) -> (O, Work) {
    let mut out = None;
    let start = cpu_ns();
    let info = allocation_counter::measure(|| out = Some(black_box(f())));
    let cpu_ns = cpu_ns().saturating_sub(start);
    let work = Work {
        allocations: info.count_total,
        bytes: info.bytes_total,
        peak: info.bytes_max,
        cpu_ns,
    };
    (out.expect("measure: the call returned"), work)
}

/// CPU nanoseconds per run of `run`, over `reps` runs in one sample, each on its own copy
/// of `input` (copied before the sample starts).
fn cpu_per_run<I: Clone, O>(input: &I, reps: u64, run: &impl Fn(I) -> O) -> f64 {
    let copies: Vec<I> = (0..reps).map(|_| input.clone()).collect();
    let start = cpu_ns();
    for copy in copies {
        black_box(run(copy));
    }
    cpu_ns().saturating_sub(start) as f64 / reps as f64
}

fn ratio(large: u64, small: u64, floor: u64) -> f64 {
    large.max(floor) as f64 / small.max(floor) as f64
}

/// What grew too fast from `small` to `large` (ten times the input), if anything.
pub fn counts_wrong(small: &Work, large: &Work) -> Option<String> {
    let wrong: Vec<String> = [
        (
            "allocations",
            large.allocations,
            small.allocations,
            COUNT_FLOOR,
        ),
        ("bytes allocated", large.bytes, small.bytes, BYTES_FLOOR),
        ("peak bytes", large.peak, small.peak, BYTES_FLOOR),
    ]
    .into_iter()
    .filter_map(|(what, l, s, floor)| {
        let r = ratio(l, s, floor);
        (r >= MAX_COUNT_RATIO).then(|| format!("{what} x{r:.1} ({s} -> {l})"))
    })
    .collect();
    (!wrong.is_empty()).then(|| wrong.join(", "))
}

/// Asserts that `run` does about ten times the work on `large` as on `small`, where `large`
/// is ten times `small`, not a hundred: counted allocations, then CPU time. `run` gets a
/// copy of the input for each run (a reference, for a call that borrows it). Returns what
/// one run cost at each size (the CPU time: the least per run).
#[track_caller]
pub fn assert_linear<I: Clone, O>(
    name: &str,
    small: I,
    large: I,
    run: impl Fn(I) -> O,
) -> [Work; 2] {
    // The first run pays for what is made once (caches, lazy tables): not counted.
    let (_, first) = measure(|| run(small.clone()));
    let (_, mut s) = measure(|| run(small.clone()));
    let (_, mut l) = measure(|| run(large.clone()));
    if let Some(wrong) = counts_wrong(&s, &l) {
        panic!("{name}: not linear: {wrong}\n  1x  {s:?}\n  10x {l:?}");
    }
    // Runs per sample: enough for the 1x sample to last MIN_SAMPLE_NS; the 10x sample runs a
    // tenth as often (its runs ten times longer when linear).
    let one = first.cpu_ns.min(s.cpu_ns).max(1);
    let reps = MIN_SAMPLE_NS.div_ceil(one).clamp(1, 10_000);
    let reps_large = reps.div_ceil(10);
    let (mut best_s, mut best_l) = (f64::MAX, f64::MAX);
    let mut cpu = f64::MAX;
    for _ in 0..SAMPLES {
        best_s = best_s.min(cpu_per_run(&small, reps, &run));
        best_l = best_l.min(cpu_per_run(&large, reps_large, &run));
        cpu = best_l / best_s.max(1.0);
        if cpu < MAX_CPU_RATIO {
            break;
        }
    }
    s.cpu_ns = best_s as u64;
    l.cpu_ns = best_l as u64;
    assert!(
        cpu < MAX_CPU_RATIO,
        "{name}: not linear: CPU time per run x{cpu:.1} ({reps} and {reps_large} runs per \
         sample)\n  1x  {s:?}\n  10x {l:?}"
    );
    [s, l]
}

/// The checks themselves: each fails on the growth it is there to catch.
#[cfg(test)]
mod checks {
    use super::*;

    /// Every pair of bytes, read: quadratic, and no allocation to show it.
    fn all_pairs(bytes: Vec<u8>) -> u64 {
        let mut sum = 0u64;
        for i in 0..bytes.len() {
            for j in i..bytes.len() {
                sum = sum.wrapping_add(u64::from(black_box(bytes[j]) ^ bytes[i]));
            }
        }
        sum
    }

    #[test]
    #[should_panic(expected = "not linear: CPU time")]
    fn a_quadratic_scan_that_allocates_nothing_fails_on_cpu_time() {
        assert_linear("all_pairs", vec![1u8; 300], vec![1u8; 3_000], all_pairs);
    }

    #[test]
    #[should_panic(expected = "not linear: bytes allocated")]
    fn quadratic_allocation_fails_on_the_counts() {
        // A buffer per item, each as long as the items before it: n²/2 bytes.
        assert_linear("prefixes", 200usize, 2_000, |n| {
            (0..n).map(|i| vec![0u8; i]).collect::<Vec<_>>()
        });
    }

    #[test]
    fn a_linear_scan_passes() {
        assert_linear("sum", vec![1u8; 20_000], vec![1u8; 200_000], |bytes| {
            bytes.iter().map(|&b| u64::from(black_box(b))).sum::<u64>()
        });
    }
}
