//! MCP's stdio framing: one JSON-RPC message per line, read with a bound.
//!
//! A line longer than the bound is never held whole: its bytes are skipped up to the
//! next line break, keeping only its first and last [`KEPT`] bytes, from which
//! [`sniff_id`] may still tell whose request it answered, so that request gets an
//! error instead of waiting forever.

use std::io;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Bytes kept of each end of a line over the bound.
pub const KEPT: usize = 512;

/// One line of the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line within the bound, without its line break (and a `\r` before it).
    Line(Vec<u8>),
    /// A line over the bound: its length, and its first and last [`KEPT`] bytes.
    TooLong {
        /// The line's length in bytes.
        len: usize,
        /// Its first bytes.
        head: Vec<u8>,
        /// Its last bytes.
        tail: Vec<u8>,
    },
}

/// Lines of `inner`, each at most `max` bytes (blank lines skipped).
#[derive(Debug)]
pub struct Lines<R> {
    inner: R,
    max: usize,
}

impl<R: AsyncBufRead + Unpin> Lines<R> {
    /// Reads `inner` line by line, refusing lines over `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        Lines { inner, max }
    }

    /// The next non-blank line; `None` at the end of the stream (a last line without a
    /// line break is still a line).
    ///
    /// # Errors
    ///
    /// The stream's own read error.
    pub async fn next(&mut self) -> io::Result<Option<Frame>> {
        loop {
            match self.next_any().await? {
                None => return Ok(None),
                Some(Frame::Line(l)) if l.iter().all(u8::is_ascii_whitespace) => continue,
                Some(f) => return Ok(Some(f)),
            }
        }
    }

    async fn next_any(&mut self) -> io::Result<Option<Frame>> {
        let mut line = Vec::new();
        let mut len = 0usize;
        let mut over: Option<(Vec<u8>, Vec<u8>)> = None;
        loop {
            let avail = self.inner.fill_buf().await?;
            if avail.is_empty() {
                if len == 0 {
                    return Ok(None);
                }
                break;
            }
            let (chunk, used, done) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (&avail[..i], i + 1, true),
                None => (avail, avail.len(), false),
            };
            len += chunk.len();
            match &mut over {
                None if line.len() + chunk.len() <= self.max => line.extend_from_slice(chunk),
                None => {
                    // Past the bound: keep the ends only, from here on.
                    line.extend_from_slice(chunk);
                    let head = line[..KEPT.min(line.len())].to_vec();
                    let tail = line[line.len().saturating_sub(KEPT)..].to_vec();
                    line = Vec::new();
                    over = Some((head, tail));
                }
                Some((_, tail)) => {
                    tail.extend_from_slice(chunk);
                    if tail.len() > KEPT {
                        tail.drain(..tail.len() - KEPT);
                    }
                }
            }
            self.inner.consume(used);
            if done {
                break;
            }
        }
        Ok(Some(match over {
            None => {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Frame::Line(line)
            }
            Some((head, tail)) => Frame::TooLong { len, head, tail },
        }))
    }
}

/// The top-level `id` of a message known only by its ends (a line over the bound):
/// the first `"id"` member at depth one of `head`, else an `"id"` member that ends
/// `tail` (`…,"id":7}` or `…,"id":7,"jsonrpc":"2.0"}`). `None` when neither shows one.
pub fn sniff_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    member_in_head(head, "id").or_else(|| id_at_end(tail))
}

/// Whether a message known only by its first bytes is a request or a notification (it
/// has a top-level `"method"`), not a response.
pub fn sniff_is_request(head: &[u8]) -> bool {
    member_in_head(head, "method").is_some()
}

/// The scalar value of the first member `key` at depth one of `b`.
fn member_in_head(b: &[u8], key: &str) -> Option<Value> {
    let quoted = format!("\"{key}\"");
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let end = string_end(b, i)?;
                if depth == 1 && &b[i..=end] == quoted.as_bytes() {
                    let rest = skip_ws(b, end + 1);
                    if b.get(rest) == Some(&b':') {
                        return scalar_at(b, skip_ws(b, rest + 1));
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn id_at_end(b: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(b).ok()?.trim_end();
    let text = text.strip_suffix('}')?.trim_end();
    let text = text
        .strip_suffix("\"2.0\"")
        .and_then(|t| t.trim_end().strip_suffix(':'))
        .and_then(|t| t.trim_end().strip_suffix("\"jsonrpc\""))
        .and_then(|t| t.trim_end().strip_suffix(','))
        .map_or(text, str::trim_end);
    let at = text.rfind("\"id\"")?;
    let b = text.as_bytes();
    let colon = skip_ws(b, at + 4);
    (b.get(colon) == Some(&b':'))
        .then(|| scalar_at(b, skip_ws(b, colon + 1)))
        .flatten()
        .filter(|v| {
            serde_json::from_str::<Value>(text[colon + 1..].trim())
                .ok()
                .as_ref()
                == Some(v)
        })
}

/// The string or number starting at `i`.
fn scalar_at(b: &[u8], i: usize) -> Option<Value> {
    let end = match b.get(i)? {
        b'"' => string_end(b, i)? + 1,
        c if c.is_ascii_digit() || *c == b'-' => {
            i + b[i..]
                .iter()
                .take_while(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
                .count()
        }
        _ => return None,
    };
    serde_json::from_slice(&b[i..end]).ok()
}

/// The index of the quote closing the string whose opening quote is at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut k = i + 1;
    while k < b.len() {
        match b[k] {
            b'\\' => k += 2,
            b'"' => return Some(k),
            _ => k += 1,
        }
    }
    None
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut lines = Lines::new(tokio::io::BufReader::with_capacity(7, input), max);
        let mut out = Vec::new();
        while let Some(f) = lines.next().await.unwrap_or(None) {
            out.push(f);
        }
        out
    }

    #[tokio::test]
    async fn lines_within_the_bound_come_whole_and_blank_ones_are_skipped() {
        let got = frames(b"{\"a\":1}\r\n\n  \n{\"b\":2}", 64).await;
        assert_eq!(
            got,
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Line(b"{\"b\":2}".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn a_line_over_the_bound_keeps_its_ends_and_the_next_line_survives() {
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":9,\"x\":\"{}\"}}",
            "y".repeat(5000)
        );
        let input = format!("{long}\n{{\"ok\":true}}\n");
        let got = frames(input.as_bytes(), 1000).await;
        assert_eq!(got.len(), 2);
        match &got[0] {
            Frame::TooLong { len, head, tail } => {
                assert_eq!(*len, long.len());
                assert_eq!(head.as_slice(), &long.as_bytes()[..KEPT]);
                assert_eq!(tail.as_slice(), &long.as_bytes()[long.len() - KEPT..]);
                assert_eq!(sniff_id(head, tail), Some(json!(9)));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(got[1], Frame::Line(b"{\"ok\":true}".to_vec()));
    }

    #[test]
    fn the_id_is_read_at_depth_one_or_at_the_end() {
        let nested = br#"{"params":{"id":"inner"},"id":"outer","method":"x""#;
        assert_eq!(sniff_id(nested, b""), Some(json!("outer")));
        assert_eq!(
            sniff_id(b"{\"result\":{\"content\":[", b"xx\"}]},\"id\":42}"),
            Some(json!(42))
        );
        assert_eq!(
            sniff_id(b"{\"result\":", b"]},\"id\":\"a\",\"jsonrpc\":\"2.0\"}\n"),
            Some(json!("a"))
        );
        // An "id" inside the content, near the end, is no top-level id.
        assert_eq!(sniff_id(b"{\"result\":", b"\"id\":3,\"z\":1}]}}"), None);
        assert_eq!(sniff_id(b"garbage", b"garbage"), None);
    }
}
