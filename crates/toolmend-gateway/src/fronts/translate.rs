//! What the translating fronts (`messages/`, `responses/`) share: the chat front's mended
//! SSE read frame by frame and handed to a front's [`ChatEvents`], which writes its own
//! API's events; what a translation left out.

use axum::{
    body::{Body, Bytes},
    response::Response,
};
use futures::StreamExt;
use serde_json::Value;

/// A front's writer of its own events from the chat front's chunks.
pub(crate) trait ChatEvents: Send + 'static {
    /// The events for one chat chunk.
    fn chunk(&mut self, chunk: &Value, out: &mut String);
    /// The events for an error chunk (`{"error": …}`); nothing follows it.
    fn error(&mut self, error: &Value, out: &mut String);
    /// The closing events: the chat stream sent `[DONE]`, or ended.
    fn end(&mut self, out: &mut String);
}

/// The chat front's SSE, frame by frame (a frame cut anywhere waits for its end), for a
/// [`ChatEvents`]: `[DONE]` and the stream's end close it once; comments (the
/// `: toolmend {…}` report) and frames that are not JSON are skipped.
#[derive(Debug)]
pub(crate) struct ChatFrames<T> {
    pending: Vec<u8>,
    /// How far `pending` was searched for a frame's end: a frame that comes in many
    /// pieces is searched once, not once per piece.
    searched: usize,
    ended: bool,
    events: T,
    /// Bytes looked at for frame ends (the scaling test counts the work).
    #[cfg(test)]
    examined: usize,
}

impl<T: ChatEvents> ChatFrames<T> {
    pub(crate) fn new(events: T) -> Self {
        ChatFrames {
            pending: Vec::new(),
            searched: 0,
            ended: false,
            events,
            #[cfg(test)]
            examined: 0,
        }
    }

    /// The events for the next bytes of the chat stream.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        // Frames are taken by offset and the buffer compacted once: linear in what came.
        let mut start = 0;
        loop {
            // Back 3 bytes: a blank line cut between two pieces is found whole.
            let from = self.searched.saturating_sub(3).max(start);
            let found = frame_end(&self.pending[from..]);
            #[cfg(test)]
            {
                self.examined += found.map_or(self.pending.len() - from, |at| at + 1);
            }
            let Some(at) = found else {
                self.searched = self.pending.len();
                break;
            };
            let end = from + at;
            let frame = String::from_utf8_lossy(&self.pending[start..end]).into_owned();
            // The blank line that ends the frame.
            let blank = if self.pending[end..].starts_with(b"\r\n\r\n") {
                4
            } else {
                2
            };
            start = (end + blank).min(self.pending.len());
            self.searched = start;
            self.frame(&frame, &mut out);
        }
        self.pending.drain(..start);
        self.searched -= start;
        out
    }

    /// The closing events, when the chat stream ended (nothing when it ended already).
    pub(crate) fn finish(&mut self) -> String {
        let mut out = String::new();
        if !self.ended {
            self.ended = true;
            self.events.end(&mut out);
        }
        out
    }

    fn frame(&mut self, frame: &str, out: &mut String) {
        let data: String = frame
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect::<Vec<_>>()
            .join("\n");
        if data.is_empty() || self.ended {
            return;
        }
        if data.trim() == "[DONE]" {
            out.push_str(&self.finish());
            return;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
            return;
        };
        if let Some(error) = chunk.get("error") {
            self.ended = true;
            self.events.error(error, out);
            return;
        }
        self.events.chunk(&chunk, out);
    }
}

/// Where the first complete frame of `buf` ends (before its blank line: `\n\n` or
/// `\r\n\r\n`). One pass that stops at the first.
fn frame_end(buf: &[u8]) -> Option<usize> {
    (0..buf.len()).find(|&i| buf[i..].starts_with(b"\n\n") || buf[i..].starts_with(b"\r\n\r\n"))
}

/// One SSE event: `event: NAME`, `data: JSON`.
pub(crate) fn event(out: &mut String, name: &str, data: &Value) {
    out.push_str("event: ");
    out.push_str(name);
    out.push_str("\ndata: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// `chat`, the chat front's streamed answer, written by `events` as the front's own
/// stream (status and headers kept). An answer that is not a stream (an error before the
/// first byte) is returned as it is.
pub(crate) fn stream<T: ChatEvents>(chat: Response, events: T) -> Response {
    let is_stream = chat
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !chat.status().is_success() || !is_stream {
        return chat;
    }
    let (parts, body) = chat.into_parts();
    let state = (ChatFrames::new(events), body.into_data_stream(), false);
    let out = futures::stream::unfold(state, |(mut frames, mut chat, done)| async move {
        if done {
            return None;
        }
        loop {
            match chat.next().await {
                Some(Ok(bytes)) => {
                    let out = frames.feed(&bytes);
                    if !out.is_empty() {
                        return Some((
                            Ok::<_, std::convert::Infallible>(Bytes::from(out)),
                            (frames, chat, false),
                        ));
                    }
                }
                Some(Err(_)) | None => {
                    let out = frames.finish();
                    return Some((Ok(Bytes::from(out)), (frames, chat, true)));
                }
            }
        }
    });
    Response::from_parts(parts, Body::from_stream(out))
}

/// What a translation left out, each once, in the order met.
#[derive(Debug, Default, Clone)]
pub(crate) struct LeftOut(pub(crate) Vec<String>);

impl LeftOut {
    pub(crate) fn add(&mut self, what: impl Into<String>) {
        let what = what.into();
        if !self.0.contains(&what) {
            self.0.push(what);
        }
    }
}

/// The header naming what a translation left out.
const LEFT_OUT_HEADER: &str = "x-toolmend-left-out";

/// `x-toolmend-left-out` with `left_out`, when something was.
/// A JSON object of `pairs`, each value moved in: what `json!` builds, without its copy
/// of every interpolated value through `serde_json::to_value` (slower than a clone, and
/// a second copy after one). For the translating fronts' answers, built per request.
pub(crate) fn object<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    let mut map = serde_json::Map::with_capacity(N);
    for (key, value) in pairs {
        map.insert(key.to_owned(), value);
    }
    Value::Object(map)
}

pub(crate) fn left_out_header(left_out: &[String]) -> Option<(&'static str, String)> {
    (!left_out.is_empty()).then(|| (LEFT_OUT_HEADER, left_out.join(", ")))
}

/// What a chat chunk carries beside choice 0's delta, kept for the closing events: the
/// usage (its own chunk, or the finishing one) and the account (on the last chunk).
#[derive(Debug, Default)]
pub(crate) struct Tail {
    pub(crate) usage: Value,
    pub(crate) account: Option<Value>,
}

impl Tail {
    /// Keeps `chunk`'s usage and account; returns its choice 0 (a translated answer has
    /// one choice).
    pub(crate) fn read<'c>(&mut self, chunk: &'c Value, account_key: &str) -> Option<&'c Value> {
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = u.clone();
        }
        // Only an object: the front adds its `translation` to it.
        if let Some(a) = chunk.get(account_key).filter(|a| a.is_object()) {
            self.account = Some(a.clone());
        }
        chunk["choices"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["index"].as_u64().unwrap_or(0) == 0))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::{ChatEvents, ChatFrames};

    /// Counts the chunks it is handed.
    #[derive(Debug, Default)]
    struct Count(usize);

    impl ChatEvents for Count {
        fn chunk(&mut self, _: &Value, _: &mut String) {
            self.0 += 1;
        }
        fn error(&mut self, _: &Value, _: &mut String) {}
        fn end(&mut self, _: &mut String) {}
    }

    /// The bytes looked at to read one frame of `n` bytes fed a byte at a time, and a
    /// burst of `n / 16` small frames fed at once; the chunks read.
    fn work(n: usize) -> (usize, usize) {
        let mut f = ChatFrames::new(Count::default());
        let big = format!("data: {{\"x\": \"{}\"}}\r\n\r\n", "a".repeat(n));
        for b in big.as_bytes().chunks(1) {
            f.feed(b);
        }
        f.feed("data: {}\n\n".repeat(n / 16).as_bytes());
        (f.examined, f.events.0)
    }

    #[test]
    fn frames_are_read_in_time_linear_in_their_bytes() {
        let (small, read_small) = work(2_000);
        let (large, read_large) = work(20_000);
        assert_eq!((read_small, read_large), (1 + 2_000 / 16, 1 + 20_000 / 16));
        // Linear: ten times the bytes, about ten times the work (quadratic: a hundred).
        assert!(large < small * 20, "{small} -> {large}");
    }

    #[test]
    fn a_blank_line_cut_between_pieces_ends_its_frame() {
        let mut f = ChatFrames::new(Count::default());
        for piece in ["data: {}\r", "\n", "\r", "\ndata: {}\n", "\n"] {
            f.feed(piece.as_bytes());
        }
        assert_eq!(f.events.0, 2);
        assert!(f.pending.is_empty() && f.searched == 0);
    }
}
