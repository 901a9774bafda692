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
            h.write(b"#");
            match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => h.write(i.to_string().as_bytes()),
                (None, Some(u), _) => h.write(u.to_string().as_bytes()),
                // An integral float is the integer (5.0 is 5), within i64.
                (None, None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    #[allow(clippy::cast_possible_truncation)]
                    h.write((f as i64).to_string().as_bytes());
                }
                _ => h.write(n.to_string().as_bytes()),
            }
        }
        Value::String(s) => {
            h.write(b"\"");
            h.write(&(s.len() as u64).to_le_bytes());
            h.write(s.as_bytes());
        }
        Value::Array(items) => {
            h.write(b"[");
            h.write(&(items.len() as u64).to_le_bytes());
            for item in items {
                canonical(item, h, depth + 1);
            }
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            h.write(b"{");
            h.write(&(keys.len() as u64).to_le_bytes());
            for k in keys {
                h.write(&(k.len() as u64).to_le_bytes());
                h.write(k.as_bytes());
                canonical(&map[k.as_str()], h, depth + 1);
            }
        }
    }
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
