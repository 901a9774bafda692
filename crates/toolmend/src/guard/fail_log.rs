//! What the guard says when its store gives no answer: one WARN when the store stops
//! answering, one reminder at most every [`FAIL_LOG_EVERY`] while it does not, each with
//! how many decisions took the fail mode since the line before, and one INFO when it
//! answers again. Never one line per decision: a gateway on a dead Redis decides many
//! times a second.

use std::{
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::config::FailMode;

/// Default pause between two reminders while the store gives no answer.
pub const FAIL_LOG_EVERY: Duration = Duration::from_secs(30);

/// The lines about a store that gives no answer, rate-limited.
#[derive(Debug)]
pub(crate) struct FailLog {
    every: Duration,
    /// True while failing: an answer takes the lock only then.
    failing: AtomicBool,
    state: Mutex<Option<Failing>>,
}

#[derive(Debug)]
struct Failing {
    since: Instant,
    last_line: Instant,
    /// Decisions that took the fail mode since the last line.
    since_line: u64,
    /// Since the store stopped answering.
    total: u64,
}

/// What to log, decided under the lock and logged after it.
enum Line {
    Down,
    Reminder {
        since_line: u64,
        total: u64,
        for_s: u64,
    },
}

fn mode(fail: FailMode) -> (&'static str, &'static str) {
    match fail {
        FailMode::Open => (
            "open",
            "admitted without the store's limits (the history rules still apply)",
        ),
        FailMode::Closed => ("closed", "refused (rule store_unavailable)"),
    }
}

impl FailLog {
    pub(crate) fn new(every: Duration) -> Self {
        FailLog {
            every,
            failing: AtomicBool::new(false),
            state: Mutex::new(None),
        }
    }

    /// `decisions` calls took `fail` because `store` gave no answer (`kind`, `message`).
    pub(crate) fn failed(
        &self,
        store: &'static str,
        kind: &'static str,
        message: &str,
        fail: FailMode,
        decisions: u64,
    ) {
        let (name, what) = mode(fail);
        match self.note(decisions, Instant::now()) {
            None => {}
            Some(Line::Down) => tracing::warn!(
                store,
                kind,
                fail = name,
                decisions,
                "guard store gave no answer: {message}; until it answers, its decisions take \
                 guard.fail = \"{name}\": {what}; a reminder every {} s at most meanwhile",
                self.every.as_secs()
            ),
            Some(Line::Reminder {
                since_line,
                total,
                for_s,
            }) => tracing::warn!(
                store,
                kind,
                fail = name,
                decisions = since_line,
                total,
                "guard store still gives no answer ({for_s} s): {message}; {since_line} \
                 decision(s) took guard.fail = \"{name}\" since the last line ({total} since \
                 it stopped answering): {what}"
            ),
        }
    }

    /// Counts `decisions` at `now`; the line to log, if one is due.
    fn note(&self, decisions: u64, now: Instant) -> Option<Line> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(f) = state.as_mut() else {
            *state = Some(Failing {
                since: now,
                last_line: now,
                since_line: 0,
                total: decisions,
            });
            self.failing.store(true, Ordering::Release);
            return Some(Line::Down);
        };
        f.since_line += decisions;
        f.total += decisions;
        if now.saturating_duration_since(f.last_line) < self.every {
            return None;
        }
        let line = Line::Reminder {
            since_line: f.since_line,
            total: f.total,
            for_s: now.saturating_duration_since(f.since).as_secs(),
        };
        f.last_line = now;
        f.since_line = 0;
        Some(line)
    }

    /// The store answered: the failure it ended, if one.
    fn recover(&self) -> Option<Failing> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.failing.store(false, Ordering::Release);
        state.take()
    }

    /// The store answered.
    pub(crate) fn answered(&self, store: &'static str, fail: FailMode) {
        if let Some(f) = self.recover() {
            let (name, _) = mode(fail);
            tracing::info!(
                store,
                fail = name,
                decisions = f.since_line,
                total = f.total,
                "guard store answers again after {} s; {} decision(s) took guard.fail = \
                 \"{name}\" since the last line ({} in all while it gave no answer)",
                f.since.elapsed().as_secs(),
                f.since_line,
                f.total
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_change_and_one_reminder_per_pause() {
        let log = FailLog::new(Duration::from_secs(30));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(matches!(log.note(1, at(0)), Some(Line::Down)));
        // 99 more within the pause: nothing to say.
        for i in 0..99 {
            assert!(log.note(1, at(i % 29)).is_none());
        }
        match log.note(2, at(31)) {
            Some(Line::Reminder {
                since_line,
                total,
                for_s,
            }) => assert_eq!((since_line, total, for_s), (101, 102, 31)),
            _ => panic!("a reminder"),
        }
        assert!(log.note(1, at(40)).is_none());
        let f = log.recover().expect("was failing");
        assert_eq!((f.since_line, f.total), (1, 103));
        assert!(log.recover().is_none(), "one line per change");
        // Failing again: a new first line at once.
        assert!(matches!(log.note(1, at(41)), Some(Line::Down)));
    }
}
