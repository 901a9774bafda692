//! The gateway's event log: the core's schema ([`toolmend::events`]), one JSON line per
//! mended call, written by a thread of its own behind a bounded channel, so a slow disk
//! never holds a request: past `events.buffer` queued events, new ones are dropped and
//! counted in `toolmend_events_dropped_total`. The format, field by field:
//! `docs/report.md`.

use std::{
    fs::File,
    io::{BufWriter, Write},
    sync::{
        Arc,
        mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError},
    },
    time::Duration,
};

use toolmend::{
    Toolbox,
    drive::Resolved,
    events::{Call, CallEvent, Context, SessionKey, model_name, now},
};

use crate::{
    config::EventsConfig,
    sink::{DropReporter, Drops},
};

/// The gateway's event log: events go through a bounded channel to a thread that
/// appends them to `events.path`, flushing whenever the queue is empty.
#[derive(Debug)]
pub struct EventLog {
    tx: Option<SyncSender<CallEvent>>,
    clean: bool,
    key: SessionKey,
    dropped: Arc<Drops>,
    /// Told when the writer has flushed its last event (in a mutex only to be `Sync`).
    done: std::sync::Mutex<Option<Receiver<()>>>,
}

impl EventLog {
    /// The log `config` asks for (None without `events.path`): the file opened for
    /// appending (created if missing) and the writer thread started. `env` reads
    /// `events.session_salt_env`.
    ///
    /// # Errors
    ///
    /// The file cannot be opened, `events.buffer` is 0, or the salt's variable is unset;
    /// the message names the key.
    pub fn start(
        config: &EventsConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, String> {
        let Some(path) = &config.path else {
            return Ok(None);
        };
        if config.buffer == 0 {
            return Err("events.buffer must be at least 1".to_owned());
        }
        let key = match &config.session_salt_env {
            Some(var) => match env(var) {
                Some(salt) if !salt.is_empty() => SessionKey::from_salt(&salt),
                _ => {
                    return Err(format!(
                        "events.session_salt_env names {var}, which is not set (or empty): \
                         set it, or remove the key to hash sessions with a key per process"
                    ));
                }
            },
            None => SessionKey::random(),
        };
        let file = File::options()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| format!("events.path {}: cannot open it: {e}", path.display()))?;
        let (tx, rx) = mpsc::sync_channel(config.buffer);
        let (done_tx, done) = mpsc::channel();
        let shown = path.display().to_string();
        let dropped = Arc::new(Drops::new("toolmend_events_dropped_total"));
        let drops = Arc::clone(&dropped);
        std::thread::Builder::new()
            .name("toolmend-events".to_owned())
            .spawn(move || write_events(rx, BufWriter::new(file), &shown, &drops, &done_tx))
            .map_err(|e| format!("events: cannot start the writer thread: {e}"))?;
        Ok(Some(EventLog {
            tx: Some(tx),
            clean: config.clean,
            key,
            dropped,
            done: std::sync::Mutex::new(Some(done)),
        }))
    }

    /// Queues `event` without waiting: when the queue is full it is dropped and counted.
    pub fn send(&self, event: CallEvent) {
        if !self.clean && event.is_clean() {
            return;
        }
        let Some(tx) = &self.tx else { return };
        match tx.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.dropped.record(),
        }
    }

    /// Events dropped so far (the queue was full, or the writer gone).
    pub fn dropped(&self) -> u64 {
        self.dropped.total()
    }

    /// The hash of a session id.
    pub fn session_hash(&self, id: &str) -> String {
        self.key.hash(id)
    }

    /// Logs the calls of `mended`, an answer to a request of `front`: `session` (the
    /// guard's, else the one the request names itself; never the API key) is hashed;
    /// `client`: the `[access]` client; `model`: the model the request asked for.
    #[allow(clippy::too_many_arguments)] // the request's parts, each its own
    pub(crate) fn answer_calls(
        &self,
        front: &'static str,
        session: Option<String>,
        client: Option<&str>,
        model: Option<&str>,
        request_id: &str,
        mended: &Resolved,
        tools: &Toolbox,
    ) {
        let ctx = Context {
            ts: now(),
            front: front.to_owned(),
            request_id: Some(request_id.to_owned()),
            line: None,
            session: session.map(|s| self.session_hash(&s)),
            client: client.map(str::to_owned),
            model: model.and_then(model_name),
        };
        for (index, c) in mended.calls.iter().enumerate() {
            let schema = tools.get(&c.tool).map(|t| t.parameters());
            self.send(CallEvent::new(
                &ctx,
                &Call {
                    index,
                    tool: &c.tool,
                    schema,
                    source: c.source,
                    outcome: c.outcome,
                    mend: c.mend,
                    fixes: &c.fixes,
                    issues: &c.issues,
                },
            ));
        }
    }
}

impl Drop for EventLog {
    /// Closes the queue and gives the writer a moment to write what is queued.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(done) = self.done.get_mut().ok().and_then(Option::take) {
            let _ = done.recv_timeout(Duration::from_secs(5));
        }
    }
}

/// The writer thread: appends each event as a line, flushes when the queue is empty,
/// ends (flushed) when the log is dropped. A failed write is counted and logged (the
/// first, then every 1000th), never fatal; events dropped because the queue was full
/// are said in a WARN once the queue has drained (at most every
/// [`DROP_REPORT_EVERY`](crate::sink::DROP_REPORT_EVERY)).
fn write_events(
    rx: Receiver<CallEvent>,
    mut out: BufWriter<File>,
    path: &str,
    drops: &Drops,
    done: &mpsc::Sender<()>,
) {
    let mut reporter = DropReporter::new();
    let mut failures: u64 = 0;
    let mut fail = |e: &dyn std::fmt::Display| {
        failures += 1;
        metrics::counter!("toolmend_events_write_errors_total").increment(1);
        if failures % 1000 == 1 {
            tracing::warn!(path, error = %e, failures, "event log: a write failed");
        }
    };
    let mut pending = false;
    loop {
        let flush_wait = pending.then_some(Duration::from_millis(200));
        let event = match flush_wait.into_iter().chain(reporter.wait(drops)).min() {
            Some(wait) => match rx.recv_timeout(wait) {
                Ok(e) => Some(e),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(e) => Some(e),
                Err(_) => break,
            },
        };
        match event {
            Some(e) => {
                let written = serde_json::to_writer(&mut out, &e)
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n"));
                match written {
                    Ok(()) => {
                        metrics::counter!("toolmend_events_written_total").increment(1);
                        pending = true;
                    }
                    Err(e) => fail(&e),
                }
            }
            None => {
                if let Err(e) = out.flush() {
                    fail(&e);
                }
                pending = false;
                if let Some(dropped) = reporter.due(drops) {
                    tracing::warn!(
                        path,
                        dropped,
                        total = drops.total(),
                        "event log: events dropped, the writer did not keep up (queue \
                         full at events.buffer); counted in toolmend_events_dropped_total"
                    );
                }
            }
        }
    }
    if let Err(e) = out.flush() {
        fail(&e);
    }
    let _ = done.send(());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use toolmend::{
        mend::Outcome,
        message::{CallOutcome, CallSource},
    };

    use super::*;
    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let dir = std::env::temp_dir().join(format!("toolmend-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("queue.jsonl");
        let _ = std::fs::remove_file(&path);
        let config = EventsConfig {
            path: Some(path.clone()),
            buffer: 1,
            ..EventsConfig::default()
        };
        let log = EventLog::start(&config, |_| None).unwrap().unwrap();
        let event = CallEvent::new(
            &Context::default(),
            &Call {
                index: 0,
                tool: "t",
                schema: None,
                source: CallSource::ToolCalls,
                outcome: CallOutcome::Executed,
                mend: Outcome::Valid,
                fixes: &[],
                issues: &[],
            },
        );
        for _ in 0..10_000 {
            log.send(event.clone());
        }
        // A send that waited for room would never drop: drops show it did not wait.
        let dropped = log.dropped();
        assert!(
            dropped > 0,
            "a queue of 1 took 10,000 events without a drop"
        );
        drop(log);
        let written = std::fs::read_to_string(&path).unwrap().lines().count() as u64;
        assert_eq!(written + dropped, 10_000);
        let missing = EventsConfig {
            path: Some(dir.join("no/such/dir/e.jsonl")),
            ..EventsConfig::default()
        };
        let err = EventLog::start(&missing, |_| None).unwrap_err();
        assert!(
            err.starts_with("events.path ") && err.contains("no/such/dir"),
            "{err}"
        );
        let salted = EventsConfig {
            session_salt_env: Some("EVENTS_SALT".to_owned()),
            ..config
        };
        let err = EventLog::start(&salted, |_| None).unwrap_err();
        assert!(err.contains("EVENTS_SALT"), "{err}");
    }
}
