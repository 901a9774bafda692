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

use crate::server::{error::GatewayError, http};

/// The members left unread: the rest of the body is a tree.
const DEFERRED: [&str; 2] = ["messages", "tools"];

/// A member left as the client's bytes.
#[derive(Debug, Clone)]
struct Member {
    key: &'static str,
    /// Its place among the body's members.
    index: usize,
    /// Where its value is in the body.
    span: Range<usize>,
}

/// A chat request's body: a tree, and the members not yet read into it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    tree: Value,
    /// The client's body the deferred members are read from.
    body: Bytes,
    /// In the order of their places.
    deferred: Vec<Member>,
}

impl Request {
    /// A body read whole into a tree (a translating front's request, built as one).
    pub(crate) fn whole(tree: Value) -> Self {
        Request {
            tree,
            body: Bytes::new(),
            deferred: Vec::new(),
        }
    }

    /// The client's body, its `messages` (an array) and `tools` (an array) left as bytes.
    /// A body of any other shape (a member given twice, not an object, not JSON) is read
    /// whole, by [`http::json_object`], with its errors.
    pub(crate) fn read(body: &Bytes) -> Result<Self, GatewayError> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let read = de::Deserializer::deserialize_map(&mut de, Top).and_then(|r| {
            de.end()?;
            Ok(r)
        });
        let Ok((map, members)) = read else {
            return http::json_object(body).map(Self::whole);
        };
        let base = body.as_ptr() as usize;
        let mut deferred = Vec::with_capacity(members.len());
        for (key, index, raw) in members {
            let text = raw.get();
            let start = (text.as_ptr() as usize).wrapping_sub(base);
            let span = start..start + text.len();
            // Only what was borrowed from the body, and only an array.
            if body.get(span.clone()) != Some(text.as_bytes()) || !text.starts_with('[') {
                return http::json_object(body).map(Self::whole);
            }
            deferred.push(Member { key, index, span });
        }
        Ok(Request {
            tree: Value::Object(map),
            body: body.clone(),
            deferred,
        })
    }

    /// The bytes of the deferred member `key`, when it is deferred.
    pub(crate) fn deferred(&self, key: &str) -> Option<&[u8]> {
        self.deferred
            .iter()
            .find(|m| m.key == key)
            .map(|m| &self.body[m.span.clone()])
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
        let mut whole = self.clone();
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
            match serde_json::from_slice::<Value>(&self.body[m.span.clone()]) {
                Ok(v) => values.push(v),
                Err(_) => return Err(self.invalid_json()),
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

/// The top-level object: each member a tree but the deferred ones, kept as their text
/// with their place. A deferred member given twice fails the read (the tree's way then).
struct Top;

type Read<'de> = (
    Map<String, Value>,
    Vec<(&'static str, usize, &'de RawValue)>,
);

impl<'de> Visitor<'de> for Top {
    type Value = Read<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut map = Map::new();
        let mut deferred: Vec<(&'static str, usize, &'de RawValue)> = Vec::new();
        while let Some(key) = access.next_key::<Cow<'de, str>>()? {
            if let Some(name) = DEFERRED.iter().find(|d| **d == key) {
                if deferred.iter().any(|(k, ..)| k == name) {
                    return Err(de::Error::custom("a deferred member given twice"));
                }
                let raw: &'de RawValue = access.next_value()?;
                deferred.push((name, map.len() + deferred.len(), raw));
            } else {
                let value: Value = access.next_value()?;
                map.insert(key.into_owned(), value);
            }
        }
        Ok((map, deferred))
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

    #[test]
    fn only_arrays_given_once_are_deferred() {
        let r =
            Request::read(&Bytes::from(r#"{"messages":[{"role":"user"}],"tools":[]}"#)).unwrap();
        assert_eq!(r.deferred("messages"), Some(&br#"[{"role":"user"}]"#[..]));
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
