//! The stderr of stdio MCP servers, as log lines of ours: each line the child writes
//! becomes one structured event (target [`TARGET`], field `server` = its `[[mcp]]` name,
//! field `stderr` = the line, redacted and cut to [`MAX_LINE_BYTES`]), at `warn` when the
//! line looks like an error (`error`, `warn`, `traceback`, `exception`, `panic`, `fatal`)
//! and `info` otherwise. So the log stays one format (a JSON log stays JSON), never raw
//! lines of a child interleaved with ours.
//!
//! Reading never blocks the child or the gateway: one task reads the pipe as fast as the
//! child writes (a line longer than the bound is cut, the rest of it skipped), and hands
//! lines to a second task through a queue of [`QUEUE_LINES`]; when the log cannot keep up
//! and the queue is full, lines are dropped and counted
//! (`toolmend_mcp_stderr_dropped_lines_total{server}`, and a warn line saying how many
//! when the log catches up).

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    sync::mpsc,
};
use toolmend::redact;

/// The target of the events.
pub const TARGET: &str = "toolmend::mcp::stderr";
/// The longest line kept, in bytes; the rest of a longer line is skipped.
pub const MAX_LINE_BYTES: usize = 2_048;
/// Lines read and not logged yet, at most; more are dropped and counted.
pub const QUEUE_LINES: usize = 256;

/// Starts forwarding `stderr` of the server `server` into the log (see the module).
/// Must be called within a Tokio runtime; the tasks end when the child closes its stderr.
pub(crate) fn forward(server: &str, stderr: impl AsyncRead + Unpin + Send + 'static) {
    let (tx, rx) = mpsc::channel(QUEUE_LINES);
    let dropped = Arc::new(AtomicU64::new(0));
    // Not tool bodies: two tasks of the connection's own, ended by the child's EOF.
    #[allow(clippy::disallowed_methods)]
    {
        tokio::spawn(read(stderr, tx, Arc::clone(&dropped)));
        tokio::spawn(emit(server.to_owned(), rx, dropped));
    }
}

/// Reads lines as they come, each cut to [`MAX_LINE_BYTES`]; a full queue drops them.
async fn read(stderr: impl AsyncRead + Unpin, tx: mpsc::Sender<Vec<u8>>, dropped: Arc<AtomicU64>) {
    let mut reader = BufReader::with_capacity(8 * 1024, stderr);
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let send = |line: &mut Vec<u8>| {
        let taken = std::mem::replace(line, Vec::with_capacity(256));
        if tx.try_send(taken).is_err() {
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    };
    loop {
        let buf = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buf) => buf,
        };
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = newline.map_or(buf, |at| &buf[..at]);
        let room = MAX_LINE_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = newline.map_or(buf.len(), |at| at + 1);
        reader.consume(used);
        if newline.is_some() {
            send(&mut line);
        }
    }
    if !line.is_empty() {
        send(&mut line);
    }
}

/// Logs the lines the reader queued, and how many it dropped.
async fn emit(server: String, mut rx: mpsc::Receiver<Vec<u8>>, dropped: Arc<AtomicU64>) {
    let report = |server: &str| {
        let n = dropped.swap(0, Ordering::Relaxed);
        if n > 0 {
            metrics::counter!("toolmend_mcp_stderr_dropped_lines_total", "server" => server.to_owned())
                .increment(n);
            tracing::warn!(target: TARGET, server, dropped = n, "lines of the MCP server's stderr were dropped: the log could not keep up");
        }
    };
    while let Some(raw) = rx.recv().await {
        report(&server);
        let text = clean(&raw);
        if text.is_empty() {
            continue;
        }
        let line = redact::text(&text);
        if looks_bad(&line) {
            tracing::warn!(target: TARGET, server = %server, stderr = %line, "MCP server stderr");
        } else {
            tracing::info!(target: TARGET, server = %server, stderr = %line, "MCP server stderr");
        }
    }
    report(&server);
}

/// The line as text: invalid UTF-8 replaced, terminal escapes (`ESC [ … letter`) and
/// other control characters removed, blanks at the ends trimmed.
fn clean(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
        } else if c == '\t' {
            out.push(' ');
        } else if !c.is_control() {
            out.push(c);
        }
    }
    out.trim().to_owned()
}

fn looks_bad(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    ["error", "warn", "traceback", "exception", "panic", "fatal"]
        .iter()
        .any(|w| lower.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cleaned() {
        assert_eq!(clean(b"\x1b[31mERROR\x1b[0m\tboom \r"), "ERROR boom");
        assert_eq!(clean(b"caf\xe9"), "caf\u{fffd}");
        assert!(looks_bad("Traceback (most recent call last):"));
        assert!(!looks_bad("listening on stdio"));
    }

    #[tokio::test]
    async fn long_lines_are_cut_and_a_full_queue_drops_and_counts() {
        let mut input = Vec::new();
        input.extend_from_slice(&vec![b'x'; MAX_LINE_BYTES * 3]);
        input.extend_from_slice(b"\nshort\nlast without newline");
        let (tx, mut rx) = mpsc::channel(QUEUE_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        read(&input[..], tx, Arc::clone(&dropped)).await;
        let mut got = Vec::new();
        while let Some(l) = rx.recv().await {
            got.push(l);
        }
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].len(), MAX_LINE_BYTES);
        assert_eq!(got[1], b"short");
        assert_eq!(got[2], b"last without newline");
        assert_eq!(dropped.load(Ordering::Relaxed), 0);

        // Nobody drains the queue: the reader still reads to the end, dropping what
        // does not fit.
        let many: Vec<u8> = (0..QUEUE_LINES + 10)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let (tx, rx) = mpsc::channel(QUEUE_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        read(&many[..], tx, Arc::clone(&dropped)).await;
        assert_eq!(dropped.load(Ordering::Relaxed), 10);
        drop(rx);
    }
}
