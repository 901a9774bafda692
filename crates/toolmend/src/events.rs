//! The event log's schema: one JSON line per mended call, for `toolmend report` and
//! anything else that reads JSON lines (`jq`, a log shipper).
//!
//! Every writer uses this one type, [`CallEvent`]: the gateway (`[events] path = "…"`,
//! its writer thread behind a bounded channel) and `toolmend mend --events FILE`; the
//! report reads it.
//!
//! An event says what happened to a call and where, never what it carried: the tool,
//! the outcome, the fields touched as JSON Pointers *of the tool's schema* (a key the
//! schema does not declare is written `?`, an array index `*`), the fix and issue kinds
//! of each field, the model, the call's source, the front, the request id and a keyed
//! hash of the session id. No argument value, no key the model invented, no detail text
//! (which quotes values), no credential. The format, field by field: `docs/report.md`.

use std::{
    collections::{BTreeMap, BTreeSet},
    hash::BuildHasher,
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Fix, Issue,
    mend::Outcome,
    message::{CallOutcome, CallSource},
};

/// The format's version, the `v` of every line.
pub const VERSION: u32 = 1;

/// Segments of a field path kept; deeper ones are cut to `/…`.
pub const MAX_PATH_DEPTH: usize = 8;

/// One mended call, as one line of the event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallEvent {
    /// The format's version ([`VERSION`]).
    pub v: u32,
    /// When the call was mended: RFC 3339, UTC, milliseconds (`2026-12-02T18:15:38.123Z`).
    pub ts: String,
    /// Who mended it: `chat_completions` (the gateway's front) or `cli` (`toolmend mend`).
    pub front: String,
    /// The gateway's request id (`x-request-id`); None from the CLI.
    #[serde(default)]
    pub request_id: Option<String>,
    /// The input line (`toolmend mend`); None from the gateway.
    #[serde(default)]
    pub line: Option<u64>,
    /// The session, hashed with a key (`s_` and 16 hex digits); None without one.
    #[serde(default)]
    pub session: Option<String>,
    /// The `[access]` client whose key the request presented (its configured name);
    /// None when the gateway has no client keys, and from the CLI.
    #[serde(default)]
    pub client: Option<String>,
    /// The model the request named (`toolmend mend --events-model`); None when unknown.
    #[serde(default)]
    pub model: Option<String>,
    /// The tool the call is for (the name as sent when no tool of the request has it).
    pub tool: String,
    /// False when the request declared no such tool (`unknown_tool`).
    #[serde(default = "yes")]
    pub declared: bool,
    /// The call's place in its message (or input line), from 0.
    #[serde(default)]
    pub call: u32,
    /// Where the call came from: `tool_calls`, `text` or `glued`.
    pub source: String,
    /// What became of it, the core's words: `executed` (may run), `corrected`,
    /// `salvaged`, `feedback` (left with issues), `dropped` (an exact repeat), `flooded`
    /// (refused by the guard).
    pub outcome: String,
    /// What mending alone made of it: `valid` (as sent), `repaired`, `feedback`.
    pub mend: String,
    /// The model never finished the call (a cut-off fix).
    #[serde(default)]
    pub lossy: bool,
    /// What was done or found, by field; `""` is the call as a whole (its text, its
    /// envelope). Sorted by path.
    #[serde(default)]
    pub fields: Vec<FieldEvent>,
}

fn yes() -> bool {
    true
}

/// The fix and issue kinds of one field of a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldEvent {
    /// A JSON Pointer into the tool's schema: declared keys as they are, an array index
    /// as `*`, a key the schema does not declare as `?` (and nothing below it); `""` for
    /// the whole call.
    pub path: String,
    /// Fix kinds applied there (`docs/issue-kinds.md`), each once, sorted.
    #[serde(default)]
    pub fixes: Vec<String>,
    /// Issue kinds left there, each once, sorted.
    #[serde(default)]
    pub issues: Vec<String>,
}

/// Where a call was mended: the same for every call of a message.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// `ts` (see [`now`]).
    pub ts: String,
    /// `front`.
    pub front: String,
    /// `request_id`.
    pub request_id: Option<String>,
    /// `line`.
    pub line: Option<u64>,
    /// `session`, already hashed ([`SessionKey::hash`]).
    pub session: Option<String>,
    /// `client`.
    pub client: Option<String>,
    /// `model`, as given (cut by [`model_name`]).
    pub model: Option<String>,
}

/// One call, as the event needs it: no arguments.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// Its place in the message.
    pub index: usize,
    /// The tool's name.
    pub tool: &'a str,
    /// The tool's JSON Schema; None when no declared tool has the name.
    pub schema: Option<&'a Value>,
    /// `tool_calls`, `text`, `glued`.
    pub source: CallSource,
    /// The core's disposition.
    pub outcome: CallOutcome,
    /// What mending made of it.
    pub mend: Outcome,
    /// Its fixes.
    pub fixes: &'a [Fix],
    /// Its issues.
    pub issues: &'a [Issue],
}

impl CallEvent {
    /// The event of `call` in `ctx`.
    pub fn new(ctx: &Context, call: &Call<'_>) -> Self {
        let mut fields: BTreeMap<String, (BTreeSet<&str>, BTreeSet<&str>)> = BTreeMap::new();
        for f in call.fixes {
            let path = field_path(call.schema, &f.path);
            fields.entry(path).or_default().0.insert(f.kind.id());
        }
        for i in call.issues {
            let path = field_path(call.schema, &i.path);
            fields.entry(path).or_default().1.insert(i.kind.id());
        }
        let fields = fields
            .into_iter()
            .map(|(path, (fixes, issues))| FieldEvent {
                path,
                fixes: fixes.into_iter().map(str::to_owned).collect(),
                issues: issues.into_iter().map(str::to_owned).collect(),
            })
            .collect();
        CallEvent {
            v: VERSION,
            ts: ctx.ts.clone(),
            front: ctx.front.clone(),
            request_id: ctx.request_id.clone(),
            line: ctx.line,
            session: ctx.session.clone(),
            client: ctx.client.clone(),
            model: ctx.model.clone(),
            tool: tool_name(call.tool, call.schema.is_some()),
            declared: call.schema.is_some(),
            call: u32::try_from(call.index).unwrap_or(u32::MAX),
            source: call.source.as_str().to_owned(),
            outcome: call.outcome.as_str().to_owned(),
            mend: mend_id(call.mend).to_owned(),
            lossy: call.fixes.iter().any(Fix::is_cut_off),
            fields,
        }
    }

    /// True for a call valid as sent and run as sent: no fix, no issue.
    pub fn is_clean(&self) -> bool {
        self.outcome == "executed" && self.mend == "valid" && self.fields.is_empty()
    }
}

/// `valid`, `repaired`, `feedback`.
pub fn mend_id(o: Outcome) -> &'static str {
    match o {
        Outcome::Valid => "valid",
        Outcome::Repaired => "repaired",
        Outcome::Feedback => "feedback",
    }
}

/// A tool name fit for the log: a declared one as it is; a name the model made up only
/// when it looks like a tool name (OpenAI's `^[a-zA-Z0-9_-]{1,64}$`, dots and colons
/// allowed), else `(invalid name)`: a name is not a place for text.
pub fn tool_name(name: &str, declared: bool) -> String {
    let plain = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if declared || plain {
        name.to_owned()
    } else {
        "(invalid name)".to_owned()
    }
}

/// A model name fit for the log: at most 128 characters, no control characters.
pub fn model_name(name: &str) -> Option<String> {
    let name: String = name
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(128)
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The JSON Pointer `pointer` (into a call's arguments) as a path of `schema`, at most
/// [`MAX_PATH_DEPTH`] segments: the core's [`crate::schema::declared_path`] (declared
/// keys kept, indexes as `*`, the first undeclared key `?` and the path cut there).
pub fn field_path(schema: Option<&Value>, pointer: &str) -> String {
    crate::schema::declared_path(schema, pointer, MAX_PATH_DEPTH)
}

/// The key session ids are hashed with (keyed SipHash-2-4: without the key a hash
/// cannot be tied back to an id by trying ids).
#[derive(Clone, Copy)]
pub struct SessionKey([u64; 2]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(…)")
    }
}

impl SessionKey {
    /// The key derived from `salt` (any text; the same salt, the same hashes).
    pub fn from_salt(salt: &str) -> Self {
        const A: u64 = 0x746f_6f6c_6d65_6e64; // "toolmend"
        const B: u64 = 0x6576_656e_7473_2d31; // "events-1"
        SessionKey([
            siphash24(A, B, salt.as_bytes()),
            siphash24(B, A, salt.as_bytes()),
        ])
    }

    /// A random key (the process's hasher seeds).
    pub fn random() -> Self {
        let a = std::collections::hash_map::RandomState::new();
        let b = std::collections::hash_map::RandomState::new();
        SessionKey([a.hash_one(0x5eed_u64), b.hash_one(0x5eed_u64)])
    }

    /// `s_` and the 16 hex digits of the keyed hash of `id`.
    pub fn hash(&self, id: &str) -> String {
        format!("s_{:016x}", siphash24(self.0[0], self.0[1], id.as_bytes()))
    }
}

/// SipHash-2-4 (Aumasson and Bernstein), 64-bit output, key `(k0, k1)` as the two
/// little-endian halves of the 16-byte key.
fn siphash24(k0: u64, k1: u64, msg: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let chunks = msg.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        let m = u64::from_le_bytes(b);
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    let mut last = [0u8; 8];
    last[..tail.len()].copy_from_slice(tail);
    last[7] = msg.len() as u8;
    let m = u64::from_le_bytes(last);
    v[3] ^= m;
    round(&mut v);
    round(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Now, as `ts` writes it.
pub fn now() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    format_ts(ms)
}

/// Milliseconds since the Unix epoch as RFC 3339, UTC, with milliseconds.
pub fn format_ts(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    let (y, m, d) = crate::calendar::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// An RFC 3339 time (`2026-12-02T18:15:38Z`, fractions and offsets accepted) as
/// milliseconds since the Unix epoch; None when it is not one.
pub fn parse_ts(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        (!t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &s[start..i.min(start + 3)];
        frac_ms = digits.parse::<i64>().ok()? * 10_i64.pow(3 - digits.len() as u32);
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let v = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if *sign == b'+' { v } else { -v }
        }
        _ => return None,
    };
    // In range: checked above (month 1 to 12, day 1 to 31).
    let (mo_u, d_u) = (u32::try_from(mo).ok()?, u32::try_from(d).ok()?);
    let days = crate::calendar::days_from_civil(y, mo_u, d_u);
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60) * 1000) + frac_ms)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn siphash_matches_the_reference_vectors() {
        // The paper's key 00..0f and messages 00, 00 01, … (Appendix A, and the
        // reference implementation's vectors.h): the empty message and 15 bytes.
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(siphash24(k0, k1, b""), 0x726f_db47_dd0e_0e31);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(k0, k1, &msg), 0xa129_ca61_49be_45e5);
        let msg: Vec<u8> = (0..8).collect();
        assert_eq!(siphash24(k0, k1, &msg), 0x93f5_f579_9a93_2462);
    }

    #[test]
    fn session_hashes_are_keyed_and_stable() {
        let a = SessionKey::from_salt("salt one");
        assert_eq!(
            a.hash("user-42"),
            SessionKey::from_salt("salt one").hash("user-42")
        );
        assert_ne!(
            a.hash("user-42"),
            SessionKey::from_salt("salt two").hash("user-42")
        );
        assert_ne!(a.hash("user-42"), a.hash("user-43"));
        let h = a.hash("user-42");
        assert!(h.starts_with("s_") && h.len() == 18, "{h}");
        assert!(!h.contains("user"));
    }

    #[test]
    fn field_paths_keep_only_what_the_schema_declares() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
                "a/b": {"type": "string"},
                "opt": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"x": {}}}]}
            },
            "$defs": {"item": {"type": "object", "properties": {"sku": {"type": "string"}}}}
        });
        let p = |ptr| field_path(Some(&schema), ptr);
        assert_eq!(p(""), "");
        assert_eq!(p("/city"), "/city");
        assert_eq!(p("/items/3/sku"), "/items/*/sku");
        assert_eq!(p("/items/3/secret/deeper"), "/items/*/?");
        assert_eq!(p("/a~1b"), "/a~1b");
        assert_eq!(p("/opt/x"), "/opt/x");
        // The model's own key never reaches the log.
        assert_eq!(p("/Paris is lovely"), "/?");
        assert_eq!(field_path(None, "/city"), "/?");
        let deep = json!({"properties": {"a": {"$ref": "#"}}});
        assert_eq!(
            field_path(Some(&deep), "/a/a/a/a/a/a/a/a/a/a"),
            "/a/a/a/a/a/a/a/a/…"
        );
    }

    #[test]
    fn timestamps_round_trip() {
        for ms in [0, 1_764_699_338_123, 951_782_400_000, -86_400_000] {
            assert_eq!(parse_ts(&format_ts(ms)), Some(ms), "{}", format_ts(ms));
        }
        assert_eq!(format_ts(1_764_699_338_123), "2025-12-02T18:15:38.123Z");
        assert_eq!(
            parse_ts("2025-12-02T20:15:38+02:00"),
            parse_ts("2025-12-02T18:15:38Z")
        );
        assert_eq!(parse_ts("2025-12-02T18:15:38.5Z"), Some(1_764_699_338_500));
        for bad in [
            "",
            "yesterday",
            "2025-13-02T18:15:38Z",
            "2025-12-02T18:15:38",
            "2025-12-02T18:15:38.Z",
        ] {
            assert_eq!(parse_ts(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_event_carries_kinds_and_paths_never_values_or_invented_keys() {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"},
            "days": {"type": "integer"}}, "required": ["city"], "additionalProperties": false});
        let fixes = vec![
            Fix::at(crate::FixKind::SingleQuotes, 1),
            Fix::on(crate::FixKind::StringToInteger, "/days", "\"3\" -> 3"),
            Fix::on(crate::FixKind::KeyRenamed, "/city", "\"town\" -> \"city\""),
        ];
        let issues = vec![crate::Issue::new(
            crate::IssueKind::UnknownKey,
            "/secret_Osaka",
            "unknown key",
        )];
        let ctx = Context {
            ts: format_ts(0),
            front: "cli".to_owned(),
            line: Some(3),
            ..Context::default()
        };
        let e = CallEvent::new(
            &ctx,
            &Call {
                index: 0,
                tool: "get_weather",
                schema: Some(&schema),
                source: CallSource::ToolCalls,
                outcome: CallOutcome::Feedback,
                mend: Outcome::Feedback,
                fixes: &fixes,
                issues: &issues,
            },
        );
        let line = serde_json::to_string(&e).unwrap();
        for leak in ["Osaka", "town", "\"3\"", "secret"] {
            assert!(!line.contains(leak), "{leak} in {line}");
        }
        let paths: Vec<&str> = e.fields.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["", "/?", "/city", "/days"]);
        assert_eq!(e.fields[0].fixes, ["single_quotes"]);
        assert_eq!(e.fields[1].issues, ["unknown_key"]);
        let back: CallEvent = serde_json::from_str(&line).unwrap();
        assert_eq!(back, e);
    }
}
