//! Writers that never hold a request: what the gateway writes to a file or a pipe it
//! does not own (its log on standard error, the event log) goes through a bounded queue
//! to a thread of its own. When the reader stalls (a supervisor or a container's log
//! driver that stops draining the pipe, a paused terminal) the queue fills, and what
//! does not fit is dropped and counted, never waited for: the request path only ever
//! copies a line and tries to queue it.
//!
//! Drops are counted twice over: a Prometheus counter (each sink its own) and a WARN
//! line from the writer thread once it can write again, at most every
//! [`DROP_REPORT_EVERY`], saying how many were lost since the last one.

use std::{
    io::{self, Write},
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
        mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError},
    },
    time::{Duration, Instant},
};

/// The least time between two WARN lines about drops of one sink.
pub const DROP_REPORT_EVERY: Duration = Duration::from_secs(10);

/// Lines the log queue holds at most (on top of the byte bound).
pub const LOG_QUEUE_LINES: usize = 16_384;

/// Bytes the log queue holds at most: a stalled reader costs at most this much memory.
pub const LOG_QUEUE_BYTES: usize = 8 << 20;

/// Counts what a sink dropped, and tells when a WARN about it is due.
#[derive(Debug)]
pub(crate) struct Drops {
    metric: &'static str,
    dropped: AtomicU64,
    reported: AtomicU64,
}

impl Drops {
    pub(crate) fn new(metric: &'static str) -> Self {
        Drops {
            metric,
            dropped: AtomicU64::new(0),
            reported: AtomicU64::new(0),
        }
    }

    /// One more dropped (called on the request path: an atomic add and a counter).
    pub(crate) fn record(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(self.metric).increment(1);
    }

    pub(crate) fn total(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The drops not yet reported, marked reported (0: nothing new).
    pub(crate) fn take_unreported(&self) -> u64 {
        let total = self.total();
        total - self.reported.swap(total, Ordering::Relaxed).min(total)
    }

    /// Whether drops wait to be reported.
    pub(crate) fn pending(&self) -> bool {
        self.total() > self.reported.load(Ordering::Relaxed)
    }
}

/// When the writer thread may next say what was dropped.
#[derive(Debug)]
pub(crate) struct DropReporter {
    last: Option<Instant>,
}

impl DropReporter {
    pub(crate) fn new() -> Self {
        DropReporter { last: None }
    }

    /// How long the writer may wait for its next item: forever when nothing waits to be
    /// reported, else until the report is due.
    pub(crate) fn wait(&self, drops: &Drops) -> Option<Duration> {
        if !drops.pending() {
            return None;
        }
        Some(match self.last {
            Some(t) => DROP_REPORT_EVERY.saturating_sub(t.elapsed()),
            None => Duration::ZERO,
        })
    }

    /// The drops to report now (the queue is drained, so the line has room), if a report
    /// is due.
    pub(crate) fn due(&mut self, drops: &Drops) -> Option<u64> {
        if !drops.pending() || self.last.is_some_and(|t| t.elapsed() < DROP_REPORT_EVERY) {
            return None;
        }
        self.last = Some(Instant::now());
        Some(drops.take_unreported()).filter(|n| *n > 0)
    }
}

struct Shared {
    queued_bytes: AtomicUsize,
    max_bytes: usize,
    drops: Drops,
}

/// A log writer that never blocks: each write (tracing's fmt layer writes an event, its
/// whole line, with one `write_all`: `write!` would split it into pieces) is copied into a bounded queue, and a thread writes the
/// queue to the sink. Past [`LOG_QUEUE_LINES`] lines or [`LOG_QUEUE_BYTES`] bytes queued,
/// lines are dropped and counted (`toolmend_log_lines_dropped_total`, and a WARN of
/// target `toolmend::log` once the sink takes lines again).
///
/// ```no_run
/// let (writer, _flush) = toolmend_gateway::sink::LogWriter::start(std::io::stderr())
///     .expect("a thread");
/// // tracing_subscriber::fmt::layer().json().with_writer(move || writer.clone())
/// # let _ = writer;
/// ```
#[derive(Clone)]
pub struct LogWriter {
    tx: SyncSender<Vec<u8>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

/// Flushes what the log queue holds when dropped, waiting at most [`FLUSH_WAIT`] (a
/// sink nobody reads cannot hold the exit).
#[derive(Debug)]
pub struct LogFlush {
    done: Option<Receiver<()>>,
    tx: Option<SyncSender<Vec<u8>>>,
}

/// How long [`LogFlush`] waits for the queue to drain at exit.
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

impl Drop for LogFlush {
    fn drop(&mut self) {
        // An empty line asks the writer to end once it has written what came before; it
        // waits for room in the queue, as the writer's end does, at most FLUSH_WAIT.
        let deadline = Instant::now() + FLUSH_WAIT;
        if let Some(tx) = self.tx.take() {
            while let Err(TrySendError::Full(_)) = tx.try_send(Vec::new()) {
                if Instant::now() >= deadline {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        }
    }
}

impl LogWriter {
    /// Starts the writer thread over `sink`, with the default bounds.
    ///
    /// # Errors
    ///
    /// The thread cannot be started.
    pub fn start(sink: impl Write + Send + 'static) -> io::Result<(Self, LogFlush)> {
        Self::with_bounds(sink, LOG_QUEUE_LINES, LOG_QUEUE_BYTES)
    }

    /// Starts the writer thread over `sink`, queueing at most `lines` lines and `bytes`
    /// bytes.
    ///
    /// # Errors
    ///
    /// The thread cannot be started.
    pub fn with_bounds(
        sink: impl Write + Send + 'static,
        lines: usize,
        bytes: usize,
    ) -> io::Result<(Self, LogFlush)> {
        let (tx, rx) = mpsc::sync_channel(lines.max(1));
        let (done_tx, done) = mpsc::channel();
        let shared = Arc::new(Shared {
            queued_bytes: AtomicUsize::new(0),
            max_bytes: bytes,
            drops: Drops::new("toolmend_log_lines_dropped_total"),
        });
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("toolmend-log".to_owned())
            .spawn(move || {
                write_lines(&rx, sink, &thread_shared);
                let _ = done_tx.send(());
            })?;
        let flush = LogFlush {
            done: Some(done),
            tx: Some(tx.clone()),
        };
        Ok((LogWriter { tx, shared }, flush))
    }

    /// Lines dropped so far.
    pub fn dropped(&self) -> u64 {
        self.shared.drops.total()
    }

    fn queue(&self, line: &[u8]) {
        if line.is_empty() {
            return;
        }
        let shared = &self.shared;
        let before = shared.queued_bytes.fetch_add(line.len(), Ordering::Relaxed);
        if before + line.len() > shared.max_bytes {
            shared.queued_bytes.fetch_sub(line.len(), Ordering::Relaxed);
            shared.drops.record();
            return;
        }
        match self.tx.try_send(line.to_vec()) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                shared.queued_bytes.fetch_sub(line.len(), Ordering::Relaxed);
                shared.drops.record();
            }
        }
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.queue(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The writer thread: writes each queued line, flushes when the queue is empty, says
/// what was dropped when a report is due, and ends on an empty line (the flush at exit)
/// or when every sender is gone.
fn write_lines(rx: &Receiver<Vec<u8>>, mut sink: impl Write, shared: &Shared) {
    let mut reporter = DropReporter::new();
    loop {
        let next = match reporter.wait(&shared.drops) {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(wait) => rx.recv_timeout(wait),
        };
        match next {
            Ok(line) if line.is_empty() => break,
            Ok(line) => {
                shared.queued_bytes.fetch_sub(line.len(), Ordering::Relaxed);
                // A sink that fails (a closed pipe) loses the line; nobody is there to tell.
                let _ = sink.write_all(&line);
                // Drain what else is queued before flushing.
                while let Ok(line) = rx.try_recv() {
                    if line.is_empty() {
                        let _ = sink.flush();
                        return;
                    }
                    shared.queued_bytes.fetch_sub(line.len(), Ordering::Relaxed);
                    let _ = sink.write_all(&line);
                }
                let _ = sink.flush();
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if let Some(dropped) = reporter.due(&shared.drops) {
            // Through the subscriber, like any line: it lands in this very queue.
            tracing::warn!(
                target: "toolmend::log",
                dropped,
                total = shared.drops.total(),
                "log lines dropped: the reader of the log did not keep up (queue full at \
                 {LOG_QUEUE_LINES} lines or {LOG_QUEUE_BYTES} bytes); counted in \
                 toolmend_log_lines_dropped_total"
            );
        }
    }
    let _ = sink.flush();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::{Condvar, Mutex};

    use super::*;

    /// A sink that blocks every write until opened, recording what it was given.
    #[derive(Clone, Default)]
    struct Gate {
        state: Arc<(Mutex<(bool, Vec<u8>)>, Condvar)>,
    }

    impl Gate {
        fn open(&self) {
            let (m, c) = &*self.state;
            m.lock().unwrap().0 = true;
            c.notify_all();
        }
        fn written(&self) -> Vec<u8> {
            self.state.0.lock().unwrap().1.clone()
        }
    }

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let (m, c) = &*self.state;
            let mut g = c.wait_while(m.lock().unwrap(), |s| !s.0).unwrap();
            g.1.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_sink_drops_and_counts_instead_of_blocking() {
        let gate = Gate::default();
        let (mut w, flush) = LogWriter::with_bounds(gate.clone(), 4, 1 << 20).unwrap();
        // The sink never returns: the thread holds one line, the queue four more; every
        // write returns at once.
        for i in 0..1000 {
            w.write_all(format!("line {i}\n").as_bytes()).unwrap();
        }
        let dropped = w.dropped();
        assert!((995..=996).contains(&dropped), "dropped {dropped}");
        gate.open();
        drop(flush);
        let written = String::from_utf8(gate.written()).unwrap();
        let lines = written.lines().filter(|l| l.starts_with("line ")).count();
        assert_eq!(lines as u64 + dropped, 1000, "{written}");
        assert!(written.starts_with("line 0\n"), "{written}");
    }

    #[test]
    fn the_byte_bound_holds_whatever_the_line_count() {
        let gate = Gate::default();
        let (mut w, flush) = LogWriter::with_bounds(gate.clone(), 10_000, 1000).unwrap();
        let line = vec![b'x'; 399];
        for _ in 0..10 {
            w.write_all(&line).unwrap();
        }
        // At most 1000 bytes queued (the thread may have taken one line out already):
        // two or three of the ten fit.
        let dropped = w.dropped();
        assert!((7..=8).contains(&dropped), "dropped {dropped}");
        gate.open();
        drop(flush);
        assert_eq!(gate.written().len() as u64, (10 - dropped) * 399);
    }

    #[test]
    fn lines_keep_their_order_and_reach_the_sink() {
        let gate = Gate::default();
        gate.open();
        let (mut w, flush) = LogWriter::start(gate.clone()).unwrap();
        for i in 0..500 {
            w.write_all(format!("{i}\n").as_bytes()).unwrap();
        }
        drop(flush);
        let written = String::from_utf8(gate.written()).unwrap();
        let got: Vec<usize> = written.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(got, (0..500).collect::<Vec<_>>());
        assert_eq!(w.dropped(), 0);
    }

    #[test]
    fn drops_are_reported_once_then_not_before_the_interval() {
        let drops = Drops::new("test_dropped_total");
        let mut r = DropReporter::new();
        assert_eq!(r.wait(&drops), None);
        assert_eq!(r.due(&drops), None);
        drops.record();
        drops.record();
        assert_eq!(r.wait(&drops), Some(Duration::ZERO));
        assert_eq!(r.due(&drops), Some(2));
        assert_eq!(r.wait(&drops), None, "nothing new");
        drops.record();
        // Within the interval: not yet, and the wait says how long.
        assert_eq!(r.due(&drops), None);
        assert!(r.wait(&drops).is_some_and(|w| w > Duration::ZERO));
        assert_eq!(drops.take_unreported(), 1);
    }
}
