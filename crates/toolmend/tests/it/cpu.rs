//! The calling thread's CPU time: what the tests that check linear time read instead of a
//! clock (`work.rs` here; shared by `#[path]` with the tools' and the gateway's tests).

/// Nanoseconds the calling thread has spent on a CPU (`/proc/thread-self/schedstat`, first
/// field): unlike the wall clock, it does not grow while the thread waits for a core on a
/// loaded machine.
pub fn cpu_ns() -> u64 {
    // The kernel adds the running slice to the figure at a tick or a switch: without the
    // yield (a switch point) it lags by up to a tick (4 ms here).
    std::thread::yield_now();
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("/proc/thread-self/schedstat (Linux) gives the thread's CPU time");
    stat.split_whitespace()
        .next()
        .and_then(|ns| ns.parse().ok())
        .unwrap_or_else(|| panic!("schedstat: {stat:?}"))
}
