//! One redaction for every error text that reaches a model, a client or a log.
//!
//! - [`text`]: the one function every error text goes through. Every URL in it loses its
//!   userinfo, query and fragment (where tokens and keys live: `?key=…`,
//!   `user:secret@host`); the value after a secret-sounding key (`password=…`,
//!   `"token": "…"`, `Authorization: Bearer …`) becomes `***`; a Rust path of a
//!   dependency's type (`reqwest::Error`, `hyper_util::client::…`) is left out.
//! - [`url`]: one URL, as [`text`] writes it (for banners and log fields).
//! - [`error_reason`]: a service's error body, summarized: a short reason only when the
//!   body is a JSON error object (`{"error": {"message": …}}`, `{"error": "…"}`,
//!   `{"message": …}`, `{"detail": …}`), itself cut and redacted; never the raw body.
//! - [`cause`]: an error chain (I/O, connection) as a few words of ours, instead of the
//!   `Display` chain of a dependency's error.
//! - [`brief`]: a text cut to a bound, on a character boundary.
//!
//! Pure and bounded: one pass over the text, no allocation beyond the output.

use serde_json::Value;

/// The longest reason [`error_reason`] keeps from a body, in characters.
pub const MAX_REASON_CHARS: usize = 160;

/// What stands for a hidden value.
pub const MASK: &str = "***";

/// Keys whose value is hidden (matched case-insensitively, as the end of a key:
/// `db_password`, `X-Api-Key`, `accessToken`).
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "authorization",
    "credential",
    "credentials",
    "private_key",
    "cookie",
];

/// `url` without its userinfo, query and fragment: `scheme://host[:port]/path`. Text
/// that is not a URL loses what looks like userinfo (anything before an `@` in its first
/// part) and everything from a `?` or `#`.
///
/// ```
/// use toolmend::redact;
/// assert_eq!(redact::url("https://user:pw@mcp.example:8443/v1?key=abc#f"), "https://mcp.example:8443/v1");
/// assert_eq!(redact::url("redis://:pw@10.0.0.5:6379/0"), "redis://10.0.0.5:6379/0");
/// ```
pub fn url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority
        .rfind('@')
        .map_or(authority, |at| &authority[at + 1..]);
    let path = tail.find(['?', '#']).map_or(tail, |at| &tail[..at]);
    let mut out = String::with_capacity(scheme.len() + host.len() + path.len());
    out.push_str(scheme);
    out.push_str(host);
    out.push_str(path);
    out
}

/// `text` with every secret it may carry taken out (see the module): URLs as [`url`]
/// writes them, secret-sounding values as `***`, dependencies' Rust paths left out.
///
/// ```
/// use toolmend::redact;
/// let t = redact::text("error sending request for url (http://u:pw@h:1/mcp?key=SECRET): refused; password=hunter2");
/// assert_eq!(t, "error sending request for url (http://h:1/mcp): refused; password=***");
/// ```
pub fn text(text: &str) -> String {
    let urls = strip_urls(text);
    let masked = mask_secrets(&urls);
    strip_paths(&masked)
}

/// `text` cut to at most `max` characters (an ellipsis marks the cut).
pub fn brief(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => {
            let mut out = text[..at].trim_end().to_owned();
            out.push('…');
            out
        }
    }
}

/// A short reason from a service's error body, when the body is a JSON error object:
/// `error.message`, `error` (a string), `message`, `detail` (a string, or the first
/// `msg` of a list, as FastAPI answers), `error_description`. Cut to
/// [`MAX_REASON_CHARS`] and redacted ([`text`]). `None` for anything else (HTML, a stack
/// trace, plain text): a raw body never becomes a reason.
pub fn error_reason(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let obj = value.as_object()?;
    let reason = match obj.get("error") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Object(e)) => e.get("message").and_then(Value::as_str),
        _ => None,
    }
    .or_else(|| obj.get("message").and_then(Value::as_str))
    .or_else(|| match obj.get("detail") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Array(items)) => items
            .first()
            .and_then(|i| i.get("msg"))
            .and_then(Value::as_str),
        _ => None,
    })
    .or_else(|| obj.get("error_description").and_then(Value::as_str))?;
    // One line: a reason is no place for a trace.
    let line = reason.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return None;
    }
    Some(text(&brief(line, MAX_REASON_CHARS)))
}

/// The cause of a failed exchange in our words, from the error's chain: an I/O error's
/// kind (`connection refused`, `connection reset`, …), a name that did not resolve, a
/// TLS failure. `None` when nothing in the chain says (the caller words it).
pub fn cause(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut current = Some(e);
    let mut words = None;
    while let Some(err) = current {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(w) = io_words(io.kind())
        {
            return Some(w);
        }
        if words.is_none() {
            // The words of the message, not of a URL in it (a host may be called `tls`).
            let t = err
                .to_string()
                .to_ascii_lowercase()
                .split_whitespace()
                .filter(|w| !w.contains("://"))
                .collect::<Vec<_>>()
                .join(" ");
            words = if t.contains("dns") || t.contains("lookup") || t.contains("resolve") {
                Some("the host name did not resolve")
            } else if t.contains("certificate") || t.contains("tls") || t.contains("ssl") {
                Some("the TLS handshake failed")
            } else if t.contains("refused") {
                Some("connection refused")
            } else if t.contains("reset") {
                Some("connection reset")
            } else if t.contains("timed out") {
                Some("timed out")
            } else {
                None
            };
        }
        current = err.source();
    }
    words
}

fn io_words(kind: std::io::ErrorKind) -> Option<&'static str> {
    use std::io::ErrorKind as K;
    Some(match kind {
        K::ConnectionRefused => "connection refused",
        K::ConnectionReset => "connection reset",
        K::ConnectionAborted => "connection aborted",
        K::NotConnected => "not connected",
        K::AddrNotAvailable => "address not available",
        K::HostUnreachable => "host unreachable",
        K::NetworkUnreachable => "network unreachable",
        K::NetworkDown => "network down",
        K::TimedOut => "timed out",
        K::BrokenPipe => "the connection closed",
        K::UnexpectedEof => "the connection closed early",
        K::NotFound => "not found",
        K::PermissionDenied => "permission denied",
        _ => return None,
    })
}

/// Where a URL in `text` ends: at a blank, a quote or an angle bracket.
fn url_end(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`')
}

/// Every `scheme://…` in `text` as [`url`] writes it. Closing brackets and punctuation
/// that end the token are kept when the URL had a query or fragment (`(http://h/?k=v)`
/// stays balanced).
fn strip_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The scheme: letters, digits, `+ - .` before `://`, starting with a letter.
        let head = &rest[..at];
        let scheme_start = head
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map_or(at, |(i, _)| i);
        let scheme_start = head[scheme_start..]
            .char_indices()
            .find(|(_, c)| c.is_ascii_alphabetic())
            .map_or(at, |(i, _)| scheme_start + i);
        out.push_str(&rest[..scheme_start]);
        let token_end = rest[at + 3..]
            .find(url_end)
            .map_or(rest.len(), |i| at + 3 + i);
        let token = &rest[scheme_start..token_end];
        out.push_str(&url(token));
        // What closed the text around the URL (`)`, `]`, `,`, `.`) stays when it was cut
        // off with the query or fragment.
        if let Some(q) = token.find(['?', '#']) {
            let cut = &token[q..];
            let closing = cut
                .char_indices()
                .rev()
                .take_while(|(_, c)| matches!(c, ')' | ']' | '}' | ',' | '.' | ';' | ':'))
                .last()
                .map_or(cut.len(), |(i, _)| i);
            out.push_str(&cut[closing..]);
        }
        rest = &rest[token_end..];
    }
    out.push_str(rest);
    out
}

/// The value after every secret-sounding key (`key=v`, `key: v`, `"key": "v"`) as
/// `***`; `Bearer`/`Basic` before it stays.
fn mask_secrets(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let word_char = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        if !word_char(c) || (i > 0 && word_char(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && word_char(bytes[i]) {
            i += 1;
        }
        let word = text[start..i].to_ascii_lowercase();
        if !SECRET_KEYS.iter().any(|k| word.ends_with(k)) {
            continue;
        }
        // A quoted key's closing quote, blanks, then `=` or `:`.
        let mut j = i;
        if j < bytes.len() && matches!(bytes[j], b'"' | b'\'') {
            j += 1;
        }
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        if j >= bytes.len() || !matches!(bytes[j], b'=' | b':') {
            continue;
        }
        j += 1;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        // An auth scheme stays; its credentials go.
        for scheme in ["bearer ", "basic ", "token "] {
            if text.len() >= j + scheme.len()
                && text.is_char_boundary(j + scheme.len())
                && text[j..j + scheme.len()].eq_ignore_ascii_case(scheme)
            {
                j += scheme.len();
                break;
            }
        }
        let (from, to) = match bytes.get(j) {
            Some(&q @ (b'"' | b'\'')) => {
                let mut k = j + 1;
                while k < bytes.len() && bytes[k] != q {
                    k += if bytes[k] == b'\\' { 2 } else { 1 };
                }
                (j + 1, k.min(bytes.len()))
            }
            Some(_) => {
                let mut k = j;
                while k < bytes.len()
                    && !bytes[k].is_ascii_whitespace()
                    && !matches!(bytes[k], b',' | b';' | b'&' | b'}' | b']' | b')' | b'"')
                {
                    k += 1;
                }
                (j, k)
            }
            None => (j, j),
        };
        if from < to {
            out.push_str(&text[copied..from]);
            out.push_str(MASK);
            copied = to;
        }
        i = to.max(i);
    }
    out.push_str(&text[copied..]);
    out
}

/// Rust paths (`reqwest::Error`, `hyper_util::client::legacy::Error`) left out: they
/// name our dependencies' types, which say nothing to a model or a client.
fn strip_paths(text: &str) -> String {
    if !text.contains("::") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("::") {
        let head = &rest[..at];
        let start = head
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .last()
            .map_or(at, |(i, _)| i);
        let tail = &rest[at + 2..];
        let end = tail
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_' || *c == ':'))
            .map_or(tail.len(), |(i, _)| i);
        let is_path = start < at && end > 0;
        if is_path {
            out.push_str(head[..start].trim_end_matches(' '));
            if !out.is_empty() && !out.ends_with([' ', '(', '[', '{']) {
                out.push(' ');
            }
            rest = tail[end..].trim_start_matches(' ');
        } else {
            out.push_str(&rest[..at + 2]);
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_userinfo_query_and_fragment() {
        assert_eq!(
            url("http://user:secret@host:8000/v1"),
            "http://host:8000/v1"
        );
        assert_eq!(url("https://u@h/v1?key=abc&x=1#f"), "https://h/v1");
        assert_eq!(url("http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1");
        assert_eq!(url("secret@host"), "host");
        assert!(!url("http://a:b@c@d/v1").contains('b'));
        assert_eq!(url("http://h?key=S"), "http://h");
        assert_eq!(url("redis://:pw@r:6379"), "redis://r:6379");
    }

    #[test]
    fn every_url_in_a_text_is_redacted() {
        let t = text(
            "error sending request for url (http://admin:PW@127.0.0.1:1/mcp?key=SECRET); retry https://x.example/a#frag, or ws://u@y/",
        );
        assert_eq!(
            t,
            "error sending request for url (http://127.0.0.1:1/mcp); retry https://x.example/a, or ws://y/"
        );
        assert_eq!(text("no url here"), "no url here");
        assert_eq!(
            text("at postgres://app:PW@db/x: down"),
            "at postgres://db/x: down"
        );
        assert_eq!(text("\"http://h/?k=SECRET\""), "\"http://h/\"");
        assert_eq!(text("://odd"), "://odd");
    }

    #[test]
    fn secret_values_are_masked() {
        assert_eq!(text("password=hunter2 ok"), "password=*** ok");
        assert_eq!(
            text(r#"{"db_password": "hunter2", "user": "bob"}"#),
            r#"{"db_password": "***", "user": "bob"}"#
        );
        assert_eq!(
            text("Authorization: Bearer abc.def"),
            "Authorization: Bearer ***"
        );
        assert_eq!(text("X-Api-Key: k1, next"), "X-Api-Key: ***, next");
        assert_eq!(text("accessToken='t0'"), "accessToken='***'");
        // A key without a value, and words that only look alike, stay.
        assert_eq!(text("the token expired"), "the token expired");
        assert_eq!(text("token:"), "token:");
        assert_eq!(text("tokens=3"), "tokens=3");
    }

    #[test]
    fn dependency_paths_are_left_out() {
        assert_eq!(
            text("reqwest::Error { kind: Request }"),
            "{ kind: Request }"
        );
        assert_eq!(
            text("failed: hyper_util::client::legacy::Error(Connect)"),
            "failed: (Connect)"
        );
        assert_eq!(text("a :: b"), "a :: b");
    }

    #[test]
    fn an_error_body_gives_a_short_reason_only_when_it_is_a_json_error() {
        assert_eq!(
            error_reason(br#"{"error": {"message": "quota exceeded", "code": 7}}"#).as_deref(),
            Some("quota exceeded")
        );
        assert_eq!(
            error_reason(br#"{"error": "bad city"}"#).as_deref(),
            Some("bad city")
        );
        assert_eq!(
            error_reason(br#"{"detail": [{"msg": "field required"}]}"#).as_deref(),
            Some("field required")
        );
        assert_eq!(
            error_reason(br#"{"message": "db at postgres://u:PW@db/x down\n  at Foo.bar()"}"#)
                .as_deref(),
            Some("db at postgres://db/x down")
        );
        assert_eq!(
            error_reason(b"Traceback (most recent call last): password=PW"),
            None
        );
        assert_eq!(error_reason(br#"{"trace": "x", "password": "PW"}"#), None);
        assert_eq!(error_reason(br#"[1]"#), None);
        let long = format!(r#"{{"error": "{}"}}"#, "x".repeat(500));
        assert!(error_reason(long.as_bytes()).unwrap().chars().count() <= MAX_REASON_CHARS + 1);
    }

    #[test]
    fn causes_are_our_words() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "os error 111");
        assert_eq!(cause(&io), Some("connection refused"));
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("client error (Connect)")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::new(std::io::ErrorKind::TimedOut, "x"));
        assert_eq!(cause(&e), Some("timed out"));
        let other = std::io::Error::other("dns error: failed to lookup address");
        assert_eq!(cause(&other), Some("the host name did not resolve"));
        assert_eq!(cause(&std::io::Error::other("weird")), None);
    }

    #[test]
    fn brief_cuts_on_a_character_boundary() {
        assert_eq!(brief("héllo", 10), "héllo");
        assert_eq!(brief("héllo wörld", 5), "héllo…");
    }
}
