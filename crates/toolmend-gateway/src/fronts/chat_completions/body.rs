//! A chat request's body as a tree whose large members (`messages`, `tools`) may be left
//! as the client's bytes: the request path reads the history typed straight from its
//! bytes and keys the compiled tools by theirs, and a request that goes upstream as it
//! came never builds their trees. Whatever writes or reads the whole body asks for it
//! ([`Request::full`], [`Request::tree_mut`]), which reads the members left at their
//! place.

use std::{borrow::Cow, fmt, ops::Range};

use axum::body::Bytes;
use serde::de::{self, MapAccess, Visitor};
use serde_json::{Map, Value, value::RawValue};
use toolmend::conversation::Message;

use crate::server::{error::GatewayError, http};

/// The members left unread: the rest of the body is a tree.
const DEFERRED: [&str; 2] = ["messages", "tools"];

/// A member left as the client's bytes.
#[derive(Debug, Clone)]
struct Member {
    key: &'static str,
    /// Its place among the body's members.
    index: usize,
    /// Where its value starts in the body.
    start: usize,
    /// Where it ends, when the read found it (a history read typed leaves it to
    /// [`value_end`], on the rare path that needs its bytes).
    end: Option<usize>,
}

/// A chat request's body: a tree, and the members not yet read into it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    tree: Value,
    /// The client's body the deferred members are read from.
    body: Bytes,
    /// In the order of their places.
    deferred: Vec<Member>,
    /// `messages` read typed in the body's one pass, until the request path takes it.
    history: Option<Vec<Message>>,
}

impl Request {
    /// A body read whole into a tree (a translating front's request, built as one).
    pub(crate) fn whole(tree: Value) -> Self {
        Request {
            tree,
            body: Bytes::new(),
            deferred: Vec::new(),
            history: None,
        }
    }

    /// The client's body, its `messages` (an array) and `tools` (an array) left as bytes.
    /// A body of any other shape (a member given twice, not an object, not JSON) is read
    /// whole, by [`http::json_object`], with its errors.
    ///
    /// `messages` whose key is written without escapes is read typed in the same pass
    /// ([`take_history`](Self::take_history)); its end in the body is found only when
    /// its bytes are asked for. A history that does not read typed fails this read (the
    /// whole read then, whose tree the request path reads with its errors).
    pub(crate) fn read(body: &Bytes) -> Result<Self, GatewayError> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let read = de::Deserializer::deserialize_map(&mut de, Top { body }).and_then(|r| {
            de.end()?;
            Ok(r)
        });
        let Ok(Read {
            map,
            members,
            history,
        }) = read
        else {
            return http::json_object(body).map(Self::whole);
        };
        let base = body.as_ptr() as usize;
        let mut deferred = Vec::with_capacity(members.len());
        for (key, index, text) in members {
            let Some(text) = text else {
                // The history read typed: its start is known, and it is an array.
                let Some((start, _)) = &history else {
                    return http::json_object(body).map(Self::whole);
                };
                deferred.push(Member {
                    key,
                    index,
                    start: *start,
                    end: None,
                });
                continue;
            };
            let text = text.get();
            let start = (text.as_ptr() as usize).wrapping_sub(base);
            let span = start..start + text.len();
            // Only what was borrowed from the body, and only an array.
            if body.get(span.clone()) != Some(text.as_bytes()) || !text.starts_with('[') {
                return http::json_object(body).map(Self::whole);
            }
            deferred.push(Member {
                key,
                index,
                start,
                end: Some(span.end),
            });
        }
        Ok(Request {
            tree: Value::Object(map),
            body: body.clone(),
            deferred,
            history: history.map(|(_, messages)| messages),
        })
    }

    /// The history read typed with the body, once (`None` when it was not, or was taken).
    pub(crate) fn take_history(&mut self) -> Option<Vec<Message>> {
        self.history.take()
    }

    /// The bytes of the deferred member `key`, when it is deferred.
    pub(crate) fn deferred(&self, key: &str) -> Option<&[u8]> {
        let m = self.deferred.iter().find(|m| m.key == key)?;
        self.span(m).map(|span| &self.body[span])
    }

    /// Where `m`'s value is in the body (`None` only for bytes that are no JSON value,
    /// which a member read typed never is).
    fn span(&self, m: &Member) -> Option<Range<usize>> {
        let end = match m.end {
            Some(end) => end,
            None => value_end(&self.body, m.start)?,
        };
        Some(m.start..end)
    }

    /// The tree without the deferred members: for the members never deferred (`model`,
    /// `user`, `metadata`, `stream` and the like).
    pub(crate) fn partial(&self) -> &Value {
        &self.tree
    }

    /// The whole body as a tree (the deferred members read into a copy when there are any).
    ///
    /// # Errors
    ///
    /// The body's `invalid_json` when a deferred member does not read (the skip that
    /// found its end checks less than a reading: a lone surrogate, nesting past 128).
    pub(crate) fn full(&self) -> Result<Cow<'_, Value>, GatewayError> {
        if self.deferred.is_empty() {
            return Ok(Cow::Borrowed(&self.tree));
        }
        // The tree and the places, never the typed history (the tree reads it anew).
        let mut whole = Request {
            tree: self.tree.clone(),
            body: self.body.clone(),
            deferred: self.deferred.clone(),
            history: None,
        };
        whole.read_deferred()?;
        Ok(Cow::Owned(whole.tree))
    }

    /// The whole body as a tree to change (the deferred members read into it first).
    ///
    /// # Errors
    ///
    /// As [`full`](Self::full).
    pub(crate) fn tree_mut(&mut self) -> Result<&mut Value, GatewayError> {
        self.read_deferred()?;
        Ok(&mut self.tree)
    }

    /// The error the body gets when it does not read as JSON: the whole read's.
    pub(crate) fn invalid_json(&self) -> GatewayError {
        match http::json_object(&self.body) {
            Err(e) => e,
            Ok(_) => GatewayError::invalid("invalid_json", "the body is not JSON"),
        }
    }

    /// Reads the deferred members into the tree, each at its place; the body's error
    /// when one does not read (the tree is then left as it was).
    fn read_deferred(&mut self) -> Result<(), GatewayError> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let mut values = Vec::with_capacity(self.deferred.len());
        for m in &self.deferred {
            let read = self
                .span(m)
                .and_then(|span| serde_json::from_slice::<Value>(&self.body[span]).ok());
            match read {
                Some(v) => values.push(v),
                None => return Err(self.invalid_json()),
            }
        }
        let members = std::mem::take(&mut self.deferred);
        if let Value::Object(map) = &mut self.tree {
            for (m, value) in members.into_iter().zip(values) {
                let at = m.index.min(map.len());
                map.shift_insert(at, m.key.to_owned(), value);
            }
        }
        self.body = Bytes::new();
        Ok(())
    }
}

/// The end of the JSON array or object that starts at `start` in `bytes` (valid JSON):
/// its brackets counted outside strings, each string skipped to its closing quote.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                // To the first quote that no backslash escapes.
                let mut j = i + 1;
                loop {
                    j += memchr::memchr2(b'"', b'\\', bytes.get(j..)?)?;
                    if bytes[j] == b'"' {
                        break;
                    }
                    j += 2;
                }
                i = j;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The top-level object: each member a tree but the deferred ones, kept as their text
/// with their place (`messages` read typed instead, when its key is the body's own
/// bytes). A deferred member given twice fails the read (the tree's way then).
struct Top<'b> {
    body: &'b [u8],
}

/// What [`Top`] read: the tree, the deferred members (their text, `None` for the history
/// read typed) with their places, and the history with where it starts.
struct Read<'de> {
    map: Map<String, Value>,
    members: Vec<(&'static str, usize, Option<&'de RawValue>)>,
    history: Option<(usize, Vec<Message>)>,
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Read<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut map = Map::new();
        let mut members: Vec<(&'static str, usize, Option<&'de RawValue>)> = Vec::new();
        let mut history = None;
        while let Some(Key(key)) = access.next_key::<Key<'de>>()? {
            let Some(name) = DEFERRED.iter().find(|d| **d == key) else {
                let value: Value = access.next_value()?;
                map.insert(key.into_owned(), value);
                continue;
            };
            if members.iter().any(|(k, ..)| k == name) {
                return Err(de::Error::custom("a deferred member given twice"));
            }
            let place = map.len() + members.len();
            let start = match &key {
                Cow::Borrowed(k) if *name == "messages" => self.value_after(k),
                _ => None,
            };
            if let Some(start) = start {
                let messages: Vec<Message> = access.next_value()?;
                history = Some((start, messages));
                members.push((name, place, None));
            } else {
                members.push((name, place, Some(access.next_value()?)));
            }
        }
        Ok(Read {
            map,
            members,
            history,
        })
    }
}

/// A member's name, borrowed from the body when it holds no escape (serde's own `Cow`
/// reading always copies).
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl Top<'_> {
    /// Where the array after the key `key` (borrowed from the body) starts: past its
    /// closing quote, the colon and whitespace. `None` when `key` is not the body's own
    /// bytes or no `[` follows.
    fn value_after(&self, key: &str) -> Option<usize> {
        let base = self.body.as_ptr() as usize;
        let at = (key.as_ptr() as usize).checked_sub(base)?;
        if self.body.get(at..at + key.len())? != key.as_bytes() {
            return None;
        }
        let mut i = at + key.len();
        if self.body.get(i) != Some(&b'"') {
            return None;
        }
        i += 1;
        let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        while self.body.get(i).is_some_and(ws) {
            i += 1;
        }
        if self.body.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        while self.body.get(i).is_some_and(ws) {
            i += 1;
        }
        (self.body.get(i) == Some(&b'[')).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;
    use serde_json::Value;

    use super::Request;

    /// Read deferred, then whole: the same tree, member for member and in order.
    #[test]
    fn a_body_read_with_its_members_deferred_is_the_body_read_whole() {
        for body in [
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"stream":false}"#,
            r#"{"tools": [ ], "model": "m", "messages" : [ {"role": "user", "content": "caf\u00e9 \"q\""} ] }"#,
            r#"{"messages":[],"a":1,"tools":[1,[2,{"x":"]"}]],"b":{"tools":[3]},"a":2}"#,
            r#"{"model":"m"}"#,
            r#"{}"#,
        ] {
            let bytes = Bytes::from(body);
            let whole: Value = serde_json::from_str(body).unwrap();
            let r = Request::read(&bytes).unwrap();
            assert_eq!(
                serde_json::to_string(&*r.full().unwrap()).unwrap(),
                serde_json::to_string(&whole).unwrap(),
                "{body}"
            );
            let mut r = Request::read(&bytes).unwrap();
            assert_eq!(
                serde_json::to_string(r.tree_mut().unwrap()).unwrap(),
                serde_json::to_string(&whole).unwrap(),
                "{body}"
            );
        }
    }

    /// The history is read typed with the body when its key is the body's own bytes, and
    /// its bytes are still found where they are; a key written with an escape leaves it
    /// to be read from its bytes.
    #[test]
    fn the_history_is_read_typed_in_the_bodys_one_pass() {
        let history = r#"[ {"role": "user", "content": "a \"]\" \\"}, {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"x\": [1]}"}}]} ]"#;
        for (body, typed) in [
            (
                format!(
                    r#"{{"model":"m","messages" :
  {history},"tools":[]}}"#
                ),
                true,
            ),
            (format!(r#"{{"m\u0065ssages":{history}}}"#), false),
        ] {
            let bytes = Bytes::from(body.clone());
            let mut r = Request::read(&bytes).unwrap();
            assert_eq!(r.deferred("messages"), Some(history.as_bytes()), "{body}");
            let expected: Vec<toolmend::conversation::Message> =
                serde_json::from_str(history).unwrap();
            match r.take_history() {
                Some(read) => {
                    assert!(typed, "{body}");
                    assert_eq!(
                        serde_json::to_value(&read).unwrap(),
                        serde_json::to_value(&expected).unwrap()
                    );
                }
                None => assert!(!typed, "{body}"),
            }
            assert!(r.take_history().is_none(), "taken once");
            let whole: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(*r.full().unwrap(), whole, "{body}");
        }
    }

    /// A history that does not read typed sends the body the whole read's way: the
    /// request path then refuses it as it refuses a history read from a tree, and a body
    /// the whole read refuses (nesting past serde_json's 128 levels, counted from the
    /// body's top) is refused with the whole read's error, wherever its depth is.
    #[test]
    fn a_history_that_does_not_read_typed_gets_the_whole_reads_answer() {
        let gw = crate::Gateway::new(
            crate::Config::from_toml_and_env(
                "upstream.base_url = \"http://127.0.0.1:9/v1\"\n",
                std::iter::empty(),
            )
            .unwrap(),
            None,
        )
        .unwrap();
        let code = |body: &str| {
            let mut r = match Request::read(&Bytes::from(body.to_owned())) {
                Ok(r) => r,
                Err(e) => return e.body()["error"]["code"].clone(),
            };
            match super::super::wire::prepare_request(&gw.pipeline, &mut r) {
                Ok(_) => serde_json::json!("ok"),
                Err(e) => e.body()["error"]["code"].clone(),
            }
        };
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let deep_history = |n: usize| {
            format!(
                r#"{{"model":"m","messages":[{{"role":"user","content":"hi","x":{}}}]}}"#,
                nested(n)
            )
        };
        for (body, expected) in [
            (
                r#"{"messages":[{"role":"bogus"}]}"#.to_owned(),
                "invalid_messages",
            ),
            (
                r#"{"messages":[{"role":"user","content":"\ud800"}]}"#.to_owned(),
                "invalid_json",
            ),
            (deep_history(124), "ok"),
            (deep_history(125), "invalid_json"),
        ] {
            let whole = crate::server::http::json_object(&Bytes::from(body.clone()))
                .err()
                .map(|e| e.body()["error"]["code"].clone());
            assert_eq!(code(&body), expected, "{body:.80}");
            if expected == "invalid_json" {
                assert_eq!(
                    whole,
                    Some(serde_json::json!("invalid_json")),
                    "the whole read's"
                );
            }
        }
    }

    /// Strings that end in escapes, `\u` escapes of quotes and backslashes: the end is
    /// still the value's.
    #[test]
    fn a_values_end_passes_every_escape() {
        for value in [
            r#"["a\\", "\"", "\\\"]", "\u0022]", "\u005c", "\\\\"]"#,
            r#"[{"k\"}": "]\\\\"}, [], {}]"#,
            r#"["é\u00e9\\\\"]"#,
        ] {
            let _: Value = serde_json::from_str(value).unwrap();
            let bytes = format!(r#"{value}, "x": [1]}}"#);
            assert_eq!(
                super::value_end(bytes.as_bytes(), 0),
                Some(value.len()),
                "{value}"
            );
        }
        assert_eq!(
            super::value_end(br#"["a\"#, 0),
            None,
            "cut off: no end, no panic"
        );
        assert_eq!(super::value_end(b"[[]", 0), None);
    }

    proptest::proptest! {
        /// The end found by counting brackets outside strings is the value's, whatever
        /// its strings hold and whatever follows it.
        #[test]
        fn a_values_end_is_found_from_its_bytes(
            items in proptest::collection::vec(super::super::wire::count_tests::json(), 0..6),
            pretty in proptest::prelude::any::<bool>(),
            lead in "[ a-z\\[\"]{0,4}",
            tail in "[ ,}\\]\"]{0,4}",
        ) {
            let array = Value::from(items);
            let text = if pretty {
                serde_json::to_string_pretty(&array).unwrap()
            } else {
                serde_json::to_string(&array).unwrap()
            };
            let bytes = format!("{lead}{text}{tail}");
            proptest::prop_assert_eq!(
                super::value_end(bytes.as_bytes(), lead.len()),
                Some(lead.len() + text.len())
            );
        }
    }

    #[test]
    fn only_arrays_given_once_are_deferred() {
        let r = Request::read(&Bytes::from(
            r#"{"messages":[{"role":"user","content":"hi"}],"tools":[]}"#,
        ))
        .unwrap();
        assert_eq!(
            r.deferred("messages"),
            Some(&br#"[{"role":"user","content":"hi"}]"#[..])
        );
        assert_eq!(r.deferred("tools"), Some(&b"[]"[..]));
        assert!(r.partial().get("tools").is_none());
        for body in [
            r#"{"messages":[],"tools":null}"#,
            r#"{"messages":"x","tools":[]}"#,
            r#"{"tools":[1],"messages":[],"tools":[2]}"#,
        ] {
            let r = Request::read(&Bytes::from(body)).unwrap();
            let whole: Value = serde_json::from_str(body).unwrap();
            assert!(
                r.deferred("messages").is_none() && r.deferred("tools").is_none(),
                "{body}"
            );
            assert_eq!(r.partial(), &whole, "{body}");
        }
    }

    /// The skip that finds a member's end checks less than a reading: a member that does
    /// not read gets the body's own error when it is read, never a `null` in its place.
    #[test]
    fn a_deferred_member_that_does_not_read_gets_the_bodys_error() {
        let deep = format!("[{}{}]", "[".repeat(200), "]".repeat(200));
        for body in [
            r#"{"messages":[],"tools":[{"description":"\ud800"}]}"#.to_owned(),
            format!(r#"{{"messages":[],"tools":{deep}}}"#),
        ] {
            let bytes = Bytes::from(body.clone());
            let whole = crate::server::http::json_object(&bytes)
                .unwrap_err()
                .to_string();
            let mut r = Request::read(&bytes).unwrap();
            assert!(r.deferred("tools").is_some(), "{body}");
            assert_eq!(r.full().unwrap_err().to_string(), whole);
            assert_eq!(r.tree_mut().unwrap_err().to_string(), whole);
            assert_eq!(r.invalid_json().to_string(), whole);
        }
    }

    #[test]
    fn a_body_that_is_no_object_gets_the_whole_reads_error() {
        for body in ["[1]", "{\"messages\": [", "nul", "{\"a\":1} x"] {
            let a = Request::read(&Bytes::from(body)).unwrap_err();
            let b = crate::server::http::json_object(&Bytes::from(body)).unwrap_err();
            assert_eq!(a.to_string(), b.to_string(), "{body}");
        }
    }
}
