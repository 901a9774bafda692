//! Helpers shared by the integration tests.

use std::time::{Duration, Instant};

/// How long a wait for something that must happen may last (a process gone, a log line
/// written, a server up), and the timeout of calls that must succeed: far longer than they
/// take on a loaded machine, so reaching it means it will not happen.
pub const PATIENCE: Duration = Duration::from_secs(30);

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

/// Waits until `done` holds, polling every 10 ms; fails the test with `what` after
/// [`PATIENCE`].
pub async fn eventually(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < until, "{what} (waited {PATIENCE:?})");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every log line of this test process from `filter` on, as text: installed once per
/// process (nextest runs each test in its own). No colours: another crate of the
/// workspace turns on tracing-subscriber's `ansi` feature, and a workspace build would
/// wrap every field in escapes.
pub fn capture_logs(filter: &str) -> &'static std::sync::Mutex<Vec<u8>> {
    static LOG: std::sync::OnceLock<&'static std::sync::Mutex<Vec<u8>>> =
        std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let buf: &'static std::sync::Mutex<Vec<u8>> =
            Box::leak(Box::new(std::sync::Mutex::new(Vec::new())));
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(move || LogCapture(buf))
            .try_init();
        buf
    })
}

/// What [`capture_logs`] captured so far.
pub fn captured_logs() -> String {
    String::from_utf8_lossy(&capture_logs("info").lock().unwrap()).into_owned()
}

struct LogCapture(&'static std::sync::Mutex<Vec<u8>>);

impl std::io::Write for LogCapture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The filter the redaction tests capture with: everything of ours down to `trace`
/// (error bodies are logged at debug), our dependencies at `debug` (stricter than the
/// gateway's default, which keeps them at warn), but for rmcp's transport worker, which
/// the gateway's filter turns off (`toolmend serve`'s `NOISY`: its only lines are a
/// `{:?}` dump of the error that ended a session, logged by us in our own words).
pub const EVERY_LOG_LINE: &str =
    "debug,toolmend=trace,toolmend_tools=trace,rmcp::transport::worker=off";
