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
        Arc, Condvar, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc::{self, Receiver},
    },
    time::{Duration, Instant},
};

/// The least time between two WARN lines about drops of one sink.
pub const DROP_REPORT_EVERY: Duration = Duration::from_secs(10);

/// Bytes the log queue holds at most: a stalled reader costs at most this much memory
/// (twice over: the queue, and the batch being written).
pub const LOG_QUEUE_BYTES: usize = 4 << 20;

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

/// The log queue: the bytes waiting, and whether the writer sleeps on them.
#[derive(Default)]
struct Queue {
    buf: Vec<u8>,
    /// The writer waits on the condvar: a line that finds the queue empty wakes it (one
    /// wake-up per batch, not per line).
    waiting: bool,
    /// The flush at exit asked the writer to end once the queue is written.
    closing: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    max_bytes: usize,
    drops: Drops,
}

/// A log writer that never blocks: each write (tracing's fmt layer writes an event, its
/// whole line, with one `write_all`; `write!` would split it into pieces) is appended to
/// a bounded byte queue under a lock held for that copy alone, and a thread writes the
/// queue to the sink in batches (one `write` for all the lines that came meanwhile).
/// Past [`LOG_QUEUE_BYTES`] queued, lines are dropped whole and counted
/// (`toolmend_log_lines_dropped_total`, and a WARN of target `toolmend::log` once the
/// sink takes lines again).
///
/// ```no_run
/// let (writer, _flush) = toolmend_gateway::sink::LogWriter::start(std::io::stderr())
///     .expect("a thread");
/// // tracing_subscriber::fmt::layer().json().with_writer(move || writer.clone())
/// # let _ = writer;
/// ```
#[derive(Clone)]
pub struct LogWriter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

/// Writes what the log queue holds when dropped, waiting at most [`FLUSH_WAIT`] (a sink
/// nobody reads cannot hold the exit).
#[derive(Debug)]
pub struct LogFlush {
    writer: LogWriter,
    done: Option<Receiver<()>>,
}

/// How long the log's writer lets lines gather after writing a batch: under load, one
/// wake-up and one `write` per pause instead of one per line (a line waits at most this
/// long to be written).
pub const BATCH_PAUSE: Duration = Duration::from_millis(10);

/// How long [`LogFlush`] waits for the queue to drain at exit.
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

impl Drop for LogFlush {
    fn drop(&mut self) {
        let shared = &self.writer.shared;
        if let Ok(mut q) = shared.queue.lock() {
            q.closing = true;
        }
        shared.wake.notify_all();
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(FLUSH_WAIT);
        }
    }
}

impl LogWriter {
    /// Starts the writer thread over `sink`, queueing at most [`LOG_QUEUE_BYTES`].
    ///
    /// # Errors
    ///
    /// The thread cannot be started.
    pub fn start(sink: impl Write + Send + 'static) -> io::Result<(Self, LogFlush)> {
        Self::with_bound(sink, LOG_QUEUE_BYTES)
    }

    /// Starts the writer thread over `sink`, queueing at most `bytes` bytes.
    ///
    /// # Errors
    ///
    /// The thread cannot be started.
    pub fn with_bound(
        sink: impl Write + Send + 'static,
        bytes: usize,
    ) -> io::Result<(Self, LogFlush)> {
        let (done_tx, done) = mpsc::channel();
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            max_bytes: bytes,
            drops: Drops::new("toolmend_log_lines_dropped_total"),
        });
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("toolmend-log".to_owned())
            .spawn(move || {
                write_batches(&thread_shared, sink);
                let _ = done_tx.send(());
            })?;
        let writer = LogWriter { shared };
        let flush = LogFlush {
            writer: writer.clone(),
            done: Some(done),
        };
        Ok((writer, flush))
    }

    /// Lines dropped so far.
    pub fn dropped(&self) -> u64 {
        self.shared.drops.total()
    }

    /// Queues `line` (one whole line, its newline included), or drops and counts it when
    /// the queue is full: never waits for the sink.
    pub fn queue_line(&self, line: &[u8]) {
        self.queue(line);
    }

    fn queue(&self, line: &[u8]) {
        if line.is_empty() {
            return;
        }
        let shared = &self.shared;
        let wake = {
            let Ok(mut q) = shared.queue.lock() else {
                shared.drops.record();
                return;
            };
            if q.buf.len() + line.len() > shared.max_bytes {
                drop(q);
                shared.drops.record();
                return;
            }
            q.buf.extend_from_slice(line);
            std::mem::take(&mut q.waiting)
        };
        if wake {
            shared.wake.notify_one();
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

/// The writer thread: takes the whole queue, writes it with one call and flushes, says
/// what was dropped when a report is due, and ends once the flush at exit asked and the
/// queue is written.
fn write_batches(shared: &Shared, mut sink: impl Write) {
    let mut reporter = DropReporter::new();
    let mut batch = Vec::new();
    loop {
        let closing = {
            let Ok(mut q) = shared.queue.lock() else {
                return;
            };
            while q.buf.is_empty() && !q.closing {
                q.waiting = true;
                q = match reporter.wait(&shared.drops) {
                    None => match shared.wake.wait(q) {
                        Ok(q) => q,
                        Err(_) => return,
                    },
                    Some(wait) => match shared.wake.wait_timeout(q, wait) {
                        Ok((q, _)) => q,
                        Err(_) => return,
                    },
                };
                q.waiting = false;
                if reporter.wait(&shared.drops) == Some(Duration::ZERO) {
                    break;
                }
            }
            std::mem::swap(&mut q.buf, &mut batch);
            q.closing
        };
        // The batch just taken leaves the queue empty: a report now has room (said after the
        // lines that waited, in the next batch). Reported after the write instead, it would
        // meet a queue refilled during the stall and be dropped itself.
        if !closing && let Some(dropped) = reporter.due(&shared.drops) {
            // Through the subscriber, like any line: it lands in this very queue.
            tracing::warn!(
                target: "toolmend::log",
                dropped,
                total = shared.drops.total(),
                "log lines dropped: the reader of the log did not keep up (queue full at \
                 {LOG_QUEUE_BYTES} bytes); counted in toolmend_log_lines_dropped_total"
            );
        }
        if !batch.is_empty() {
            // A sink that fails (a closed pipe) loses the batch; nobody is there to tell.
            let _ = sink.write_all(&batch);
            let _ = sink.flush();
            batch.clear();
            // A batch that grew large once does not keep its memory.
            batch.shrink_to(64 << 10);
            if !closing {
                // Let the next lines gather (nobody wakes the writer meanwhile: it is not
                // waiting), so a busy gateway pays one wake-up per batch.
                std::thread::sleep(BATCH_PAUSE);
            }
        }
        if closing {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Whether the gate is open, and what went through it.
    type GateState = (Mutex<(bool, Vec<u8>)>, Condvar);

    /// A sink that blocks every write until opened, recording what it was given.
    #[derive(Clone, Default)]
    struct Gate {
        state: Arc<GateState>,
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

    fn line(i: usize) -> Vec<u8> {
        format!("line {i:05}\n").into_bytes() // 11 bytes
    }

    #[test]
    fn a_stalled_sink_drops_and_counts_instead_of_blocking() {
        let gate = Gate::default();
        // Room for 10 lines of 11 bytes.
        let (mut w, flush) = LogWriter::with_bound(gate.clone(), 110).unwrap();
        // The sink never returns: the thread holds one batch, the queue ten more lines;
        // every write returns at once.
        for i in 0..1000 {
            w.write_all(&line(i)).unwrap();
        }
        let dropped = w.dropped();
        // The thread took a batch (of the first line or more) before blocking, or not yet.
        assert!((980..=990).contains(&dropped), "dropped {dropped}");
        gate.open();
        drop(flush);
        let written = String::from_utf8(gate.written()).unwrap();
        let lines = written.lines().filter(|l| l.starts_with("line ")).count();
        assert_eq!(lines as u64 + dropped, 1000, "{written}");
        assert!(written.starts_with("line 00000\n"), "{written}");
        // Dropped whole: every line written is a whole line.
        assert!(written.lines().all(|l| l.len() == 10), "{written}");
    }

    #[test]
    fn lines_keep_their_order_and_reach_the_sink() {
        let gate = Gate::default();
        gate.open();
        let (mut w, flush) = LogWriter::start(gate.clone()).unwrap();
        for i in 0..5000 {
            w.write_all(&line(i)).unwrap();
        }
        drop(flush);
        let written = String::from_utf8(gate.written()).unwrap();
        let got: Vec<String> = written.lines().map(str::to_owned).collect();
        let want: Vec<String> = (0..5000).map(|i| format!("line {i:05}")).collect();
        assert_eq!(got, want);
        assert_eq!(w.dropped(), 0);
    }

    #[test]
    fn the_flush_at_exit_is_bounded_when_nobody_reads() {
        let gate = Gate::default();
        let (mut w, flush) = LogWriter::with_bound(gate.clone(), 1 << 10).unwrap();
        w.write_all(&line(0)).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            drop(flush);
            let _ = tx.send(());
        });
        // The sink never opens: the flush gives up after FLUSH_WAIT (waited for with a
        // generous bound, never timed).
        assert!(rx.recv_timeout(FLUSH_WAIT * 10).is_ok());
    }

    /// The WARN about drops goes through the subscriber, as any line, once the sink takes
    /// lines again. The writer thread logs it, so the subscriber must be the global one:
    /// the only test of this binary that sets it.
    #[test]
    fn the_drops_are_said_in_a_warn_once_the_sink_drains() {
        let gate = Gate::default();
        let (writer, flush) = LogWriter::with_bound(gate.clone(), 2000).unwrap();
        let logs = tracing_subscriber::fmt()
            .json()
            .with_ansi(false)
            .with_writer({
                let writer = writer.clone();
                move || writer.clone()
            })
            .finish();
        tracing::subscriber::set_global_default(logs).unwrap();
        for i in 0..1000 {
            tracing::info!(target: "toolmend::request", i, "request");
        }
        assert!(writer.dropped() > 900, "dropped {}", writer.dropped());
        gate.open();
        // Waited for as a condition (bounded), never timed: the WARN lines (at most one per
        // DROP_REPORT_EVERY), until one accounts for every line dropped (its own included).
        let warns = |written: &str| -> Vec<serde_json::Value> {
            written
                .lines()
                .filter(|l| l.contains("log lines dropped"))
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let until = std::time::Instant::now() + DROP_REPORT_EVERY * 4;
        let said = loop {
            let written = String::from_utf8_lossy(&gate.written()).into_owned();
            let said = warns(&written);
            if said
                .last()
                .is_some_and(|w| w["fields"]["total"] == writer.dropped())
            {
                break said;
            }
            assert!(
                std::time::Instant::now() < until,
                "drops not all said: {written}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        for w in &said {
            assert_eq!(w["level"], "WARN");
            assert_eq!(w["target"], "toolmend::log");
        }
        // Each line says the drops since the one before and the total so far. A WARN
        // line is a line too: under load one can be dropped itself (the sink full again
        // when it is written), and the next one's total still counts it. So between two
        // lines said, the totals grow by at least the later one's drops (by exactly that
        // when none was lost), and the last total is every drop.
        let mut before = 0;
        for w in &said {
            let (dropped, total) = (
                w["fields"]["dropped"].as_u64().unwrap(),
                w["fields"]["total"].as_u64().unwrap(),
            );
            assert!(dropped > 0 && total >= before + dropped, "{said:?}");
            before = total;
        }
        assert_eq!(before, writer.dropped());
        drop(flush);
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
