//! The gateway's JSON log lines, written straight into a buffer each thread keeps: the
//! shape of tracing-subscriber's `json()` format (`timestamp`, `level`, `fields`,
//! `target`; the fields in the order they were recorded), without its per-event
//! serializer, its UTF-8 adaptor between `io::Write` and `fmt::Write`, and its
//! timestamp formatted from the epoch every time. One line per request is on by
//! default (`toolmend::request` at info), so its cost is every request's.

use std::{cell::RefCell, fmt::Write as _, time::SystemTime};

use toolmend_gateway::sink::LogWriter;
use tracing::{
    Event, Subscriber,
    field::{Field, Visit},
};
use tracing_subscriber::layer::{Context, Layer};

/// The layer: each event one JSON line, queued whole on the [`LogWriter`].
pub(crate) struct JsonLines {
    writer: LogWriter,
}

impl JsonLines {
    pub(crate) fn new(writer: LogWriter) -> Self {
        JsonLines { writer }
    }
}

thread_local! {
    /// The line being written, and the second whose text `timestamp` caches.
    static LINE: RefCell<(String, Clock)> = RefCell::new((String::with_capacity(512), Clock::default()));
}

impl<S: Subscriber> Layer<S> for JsonLines {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let now = SystemTime::now();
        let queued = LINE.try_with(|cell| {
            // A field's `Debug` that logs would find the buffer taken: it gets its own.
            let Ok(mut kept) = cell.try_borrow_mut() else {
                return false;
            };
            let (line, clock) = &mut *kept;
            line.clear();
            write_line(line, clock, now, event);
            self.writer.queue_line(line.as_bytes());
            true
        });
        if queued != Ok(true) {
            let mut line = String::new();
            write_line(&mut line, &mut Clock::default(), now, event);
            self.writer.queue_line(line.as_bytes());
        }
    }
}

fn write_line(line: &mut String, clock: &mut Clock, now: SystemTime, event: &Event<'_>) {
    let meta = event.metadata();
    line.push_str("{\"timestamp\":\"");
    clock.write(line, now);
    line.push_str("\",\"level\":\"");
    line.push_str(meta.level().as_str());
    line.push_str("\",\"fields\":{");
    let mut fields = Fields { line, first: true };
    event.record(&mut fields);
    line.push_str("},\"target\":");
    push_json_str(line, meta.target());
    line.push_str("}\n");
}

/// The RFC 3339 time of a line, to the microsecond and in UTC, as tracing-subscriber
/// writes it (`2026-12-07T10:42:01.123456Z`); the text up to the second is computed once
/// a second.
#[derive(Default)]
struct Clock {
    second: Option<u64>,
    text: String,
}

impl Clock {
    fn write(&mut self, line: &mut String, now: SystemTime) {
        let Ok(since) = now.duration_since(SystemTime::UNIX_EPOCH) else {
            line.push_str("1970-01-01T00:00:00.000000Z");
            return;
        };
        let secs = since.as_secs();
        if self.second != Some(secs) {
            self.second = Some(secs);
            self.text.clear();
            let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
            let s = secs % 86_400;
            let _ = write!(
                self.text,
                "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}",
                s / 3600,
                s % 3600 / 60,
                s % 60
            );
        }
        line.push_str(&self.text);
        let _ = write!(line, ".{:06}Z", since.subsec_micros());
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// An event's fields as JSON members, in the order they were recorded.
struct Fields<'a> {
    line: &'a mut String,
    first: bool,
}

impl Fields<'_> {
    fn key(&mut self, field: &Field) {
        if !std::mem::take(&mut self.first) {
            self.line.push(',');
        }
        let name = field.name();
        push_json_str(self.line, name.strip_prefix("r#").unwrap_or(name));
        self.line.push(':');
    }
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.key(field);
        self.line.push('"');
        let _ = write!(Escaped(self.line), "{value:?}");
        self.line.push('"');
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        push_json_str(self.line, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        let _ = write!(self.line, "{value}");
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        let _ = write!(self.line, "{value}");
    }

    // 128-bit integers: as text, by `record_debug` (tracing-serde's choice: JSON
    // readers lose precision past 2^53).

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.line.push_str(if value { "true" } else { "false" });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        // As serde_json writes a float: the shortest text that reads back; not finite: null.
        match serde_json::Number::from_f64(value) {
            Some(n) => {
                let _ = write!(self.line, "{n}");
            }
            None => self.line.push_str("null"),
        }
    }
}

/// `s` as a JSON string.
fn push_json_str(line: &mut String, s: &str) {
    line.push('"');
    let _ = Escaped(line).write_str(s);
    line.push('"');
}

/// Text escaped for the inside of a JSON string as it is written (what serde_json
/// escapes: `"`, `\`, and the control characters).
struct Escaped<'a>(&'a mut String);

impl std::fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let mut start = 0;
        for (i, b) in s.bytes().enumerate() {
            let escape = match b {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0x08 => "\\b",
                0x0c => "\\f",
                0..=0x1f => "",
                _ => continue,
            };
            self.0.push_str(&s[start..i]);
            if escape.is_empty() {
                let _ = write!(self.0, "\\u{b:04x}");
            } else {
                self.0.push_str(escape);
            }
            start = i + 1;
        }
        self.0.push_str(&s[start..]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::Value;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// What a sink received, shared with the test.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The events of every kind of field the gateway logs, and a few it might.
    fn log_all() {
        let method = "POST";
        tracing::info!(
            target: "toolmend::request",
            method = %method,
            route = "/v1/chat/completions",
            path = None::<&str>,
            status = 200u16,
            upstream_status = Some(200u16),
            duration_ms = 1.234_f64,
            valid = Some(2u64),
            negative = -5i64,
            big = u128::MAX,
            stream = Some(true),
            completed = None::<bool>,
            request_id = %"req-1",
            "request"
        );
        tracing::warn!(
            target: "toolmend::upstream",
            code = "upstream_unreachable",
            r#type = "raw name",
            quoted = "a \"quote\", a \\ backslash,\n a line, \t a tab, \u{1} a control, é ü 漢",
            ratio = f64::NAN,
            "the upstream {} could not be reached: {:?}",
            "http://127.0.0.1:9",
            "connection refused\n"
        );
        tracing::error!(target: "toolmend::start", "plain");
    }

    /// Our lines against tracing-subscriber's `json()` format for the same events: the
    /// same JSON, member for member, in the same order; the timestamp of the same form.
    #[test]
    fn the_lines_are_tracing_subscribers_json_lines() {
        let theirs = Sink::default();
        let sink = theirs.clone();
        let reference = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(false)
                .with_span_list(false)
                .with_writer(move || sink.clone()),
        );
        tracing::subscriber::with_default(reference, log_all);

        let ours = Sink::default();
        let (writer, flush) = LogWriter::start(ours.clone()).unwrap();
        let layered = tracing_subscriber::registry().with(JsonLines::new(writer));
        let stamp = |at: SystemTime| {
            let mut text = String::new();
            Clock::default().write(&mut text, at);
            text
        };
        let before = stamp(SystemTime::now());
        tracing::subscriber::with_default(layered, log_all);
        let after = stamp(SystemTime::now());
        drop(flush);

        let lines = |s: &Sink| {
            String::from_utf8(s.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        };
        let (theirs, ours) = (lines(&theirs), lines(&ours));
        assert_eq!(ours.len(), 3);
        assert_eq!(theirs.len(), ours.len());
        for (t, o) in theirs.iter().zip(&ours) {
            let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(t), keys(o));
            assert_eq!(keys(&t["fields"]), keys(&o["fields"]), "{o}");
            for key in ["level", "fields", "target"] {
                assert_eq!(t[key], o[key], "{key}");
            }
            let (ts, os) = (
                t["timestamp"].as_str().unwrap(),
                o["timestamp"].as_str().unwrap(),
            );
            // The same form (RFC 3339, UTC, microseconds), so text order is time order:
            // ours is the time of its event.
            let shape = |t: &str| {
                t.bytes()
                    .map(|b| if b.is_ascii_digit() { b'0' } else { b })
                    .collect::<Vec<_>>()
            };
            assert_eq!(shape(ts), shape(os), "{ts} {os}");
            assert!(
                before.as_str() <= os && os <= after.as_str(),
                "{before} {os} {after}"
            );
        }
    }

    #[test]
    fn the_date_is_the_calendars_across_leap_days_and_centuries() {
        for (days, date) in [
            (0, (1970, 1, 1)),
            (59, (1970, 3, 1)),
            (11_016, (2000, 2, 29)),
            (11_017, (2000, 3, 1)),
            (20_794, (2026, 12, 7)),
            (47_541, (2100, 3, 1)),
            (-1, (1969, 12, 31)),
        ] {
            assert_eq!(civil_from_days(days), date, "{days}");
        }
        let mut clock = Clock::default();
        let mut line = String::new();
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_796_640_121_000_042);
        clock.write(&mut line, at);
        assert_eq!(line, "2026-12-07T10:42:01.000042Z");
    }
}
