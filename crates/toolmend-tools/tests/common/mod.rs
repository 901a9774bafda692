//! Helpers shared by the integration tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::time::{Duration, Instant};

/// The process's Prometheus recorder (installed once; each test reads its own tools'
/// or servers' series).
pub fn metrics() -> &'static metrics_exporter_prometheus::PrometheusHandle {
    static HANDLE: std::sync::OnceLock<metrics_exporter_prometheus::PrometheusHandle> =
        std::sync::OnceLock::new();
    HANDLE.get_or_init(|| {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .unwrap()
    })
}

/// Waits until `done` holds, polling every 10 ms; fails the test with `what` after 5 s.
pub async fn eventually(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(5), "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
