//! A call's fingerprint: the tool and its arguments in canonical form (keys sorted, no
//! whitespace, `5.0` as `5`), hashed with 64-bit FNV-1a. Taken after mending, so key
//! order, whitespace, enum case and coerced numbers collapse into one key. Stable across
//! processes, platforms and Rust versions: instances sharing a store agree on it.

use serde_json::Value;

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// Nesting beyond this is hashed as its compact text (arguments are depth-bounded
/// already; this keeps the walk's stack bounded whatever the caller passes).
const MAX_DEPTH: usize = 128;

/// The fingerprint of `tool` called with `arguments`.
pub fn fingerprint(tool: &str, arguments: &Value) -> u64 {
    let mut h = Fnv(OFFSET);
    h.write(tool.as_bytes());
    h.write(&[0]);
    canonical(arguments, &mut h, 0);
    h.0
}

/// The fingerprint of arguments known only as text (a call in the history): parsed as
/// JSON when it is JSON, else the trimmed text itself.
pub fn fingerprint_text(tool: &str, arguments: &str) -> u64 {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v) => fingerprint(tool, &v),
        Err(_) => {
            let mut h = Fnv(OFFSET);
            h.write(tool.as_bytes());
            h.write(&[1]);
            h.write(arguments.trim().as_bytes());
            h.0
        }
    }
}

/// The hash of a tool result's text, to tell progress (a changed result) from none.
pub fn result_hash(text: &str) -> u64 {
    let mut h = Fnv(OFFSET);
    h.write(text.trim().as_bytes());
    h.0
}

struct Fnv(u64);

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }

    /// A whole word in one step (lengths, numbers): FNV's round over 64 bits at once.
    fn word(&mut self, v: u64) {
        self.0 ^= v;
        self.0 = self.0.wrapping_mul(PRIME);
        self.0 ^= self.0 >> 29;
    }
}

fn canonical(v: &Value, h: &mut Fnv, depth: usize) {
    if depth >= MAX_DEPTH {
        h.write(v.to_string().as_bytes());
        return;
    }
    match v {
        Value::Null => h.write(b"n"),
        Value::Bool(true) => h.write(b"t"),
        Value::Bool(false) => h.write(b"f"),
        Value::Number(n) => {
            // Numbers as fixed-width bytes, no text: an integral float is the integer
            // (5.0 is 5) within i64; any other float by its bits.
            if let Some(i) = n.as_i64() {
                h.write(b"i");
                h.word(i as u64);
            } else if let Some(u) = n.as_u64() {
                h.write(b"u");
                h.word(u);
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.fract() == 0.0 && f.abs() < 9.0e15 {
                    h.write(b"i");
                    #[allow(clippy::cast_possible_truncation)]
                    h.word(f as i64 as u64);
                } else {
                    h.write(b"d");
                    h.word(f.to_bits());
                }
            }
        }
        Value::String(s) => {
            h.write(b"\"");
            h.word(s.len() as u64);
            h.write(s.as_bytes());
        }
        Value::Array(items) => {
            h.write(b"[");
            h.word(items.len() as u64);
            for item in items {
                canonical(item, h, depth + 1);
            }
        }
        Value::Object(map) => {
            h.write(b"{");
            h.word(map.len() as u64);
            // Members sorted by key (keys are unique); small objects (most arguments)
            // without a heap list, and no lookup per key.
            const SMALL: usize = 16;
            if map.len() <= SMALL {
                let mut members: [(&str, &Value); SMALL] = [("", &Value::Null); SMALL];
                for (slot, (k, v)) in members.iter_mut().zip(map.iter()) {
                    *slot = (k.as_str(), v);
                }
                let members = &mut members[..map.len()];
                members.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in members.iter() {
                    member(k, v, h, depth);
                }
            } else {
                let mut members: Vec<(&str, &Value)> =
                    map.iter().map(|(k, v)| (k.as_str(), v)).collect();
                members.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in members {
                    member(k, v, h, depth);
                }
            }
        }
    }
}

fn member(k: &str, v: &Value, h: &mut Fnv, depth: usize) {
    h.word(k.len() as u64);
    h.write(k.as_bytes());
    canonical(v, h, depth + 1);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn key_order_whitespace_and_integral_floats_collapse() {
        let a = fingerprint(
            "s",
            &json!({"q": "rome", "n": 5, "o": {"b": 1, "a": [1, 2]}}),
        );
        let b = fingerprint(
            "s",
            &json!({"o": {"a": [1, 2], "b": 1}, "n": 5.0, "q": "rome"}),
        );
        assert_eq!(a, b);
        let text = fingerprint_text("s", r#"{ "o":{"a":[1,2],"b":1},"n":5, "q":"rome" }"#);
        assert_eq!(a, text);
    }

    #[test]
    fn different_calls_differ() {
        let base = fingerprint("s", &json!({"q": "rome"}));
        assert_ne!(base, fingerprint("t", &json!({"q": "rome"})));
        assert_ne!(base, fingerprint("s", &json!({"q": "Rome"})));
        assert_ne!(base, fingerprint("s", &json!({"q": ["rome"]})));
        // A string that looks like the number is not the number.
        assert_ne!(
            fingerprint("s", &json!({"n": 5})),
            fingerprint("s", &json!({"n": "5"}))
        );
        // Lengths are framed: moving a character between key and value changes the hash.
        assert_ne!(
            fingerprint("s", &json!({"ab": "c"})),
            fingerprint("s", &json!({"a": "bc"}))
        );
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let mut v = json!(1);
        for _ in 0..1000 {
            v = json!([v]);
        }
        let _ = fingerprint("s", &v);
    }
}
