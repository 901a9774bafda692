//! The fast path: valid JSON, read by serde_json with a visitor that also notices
//! duplicate keys (which plain `Value` parsing would merge silently).

use std::{cell::RefCell, fmt};

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::parser::ParseError;
use crate::{Fix, FixKind};

/// Parses valid JSON; a duplicate key is kept (the last wins) and recorded as a fix.
/// On failure the serde error is returned as is: formatting it costs, and only
/// strict mode shows it ([`error`]).
pub(crate) fn parse(raw: &str, max_depth: usize) -> Result<(Value, Vec<Fix>), serde_json::Error> {
    let dups = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_str(raw);
    let seed = Seed {
        dups: &dups,
        depth: 0,
        max_depth,
    };
    let value = seed
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))?;
    let fixes = dups
        .into_inner()
        .into_iter()
        .map(|(kind, k): (FixKind, String)| Fix::on(kind, "", k))
        .collect();
    Ok((value, fixes))
}

/// The parse error of `raw`, with a byte offset (serde_json reports line and column).
pub(crate) fn error(raw: &str, e: &serde_json::Error) -> ParseError {
    ParseError {
        fatal: false,
        offset: byte_offset(raw, e.line(), e.column()),
        reason: e.to_string(),
    }
}

/// serde_json reports line and column (1-based); fixes and errors speak in bytes.
fn byte_offset(raw: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in raw.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return (offset + column.saturating_sub(1)).min(raw.len());
        }
        offset += l.len();
    }
    raw.len()
}

#[derive(Clone, Copy)]
struct Seed<'a> {
    dups: &'a RefCell<Vec<(FixKind, String)>>,
    depth: usize,
    max_depth: usize,
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Seed<'_> {
    fn nested<E: serde::de::Error>(self) -> Result<Self, E> {
        if self.depth >= self.max_depth {
            return Err(E::custom(format!("nesting deeper than {}", self.max_depth)));
        }
        Ok(Seed {
            depth: self.depth + 1,
            ..self
        })
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(inner)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let v = map.next_value_seed(inner)?;
            // One hash per key: the entry tells whether it was there already.
            match out.entry(key) {
                serde_json::map::Entry::Vacant(e) => {
                    e.insert(v);
                }
                serde_json::map::Entry::Occupied(mut e) => {
                    let kind = Fix::duplicate_key(e.get(), &v);
                    self.dups.borrow_mut().push((kind, e.key().clone()));
                    e.insert(v);
                }
            }
        }
        Ok(Value::Object(out))
    }
}
