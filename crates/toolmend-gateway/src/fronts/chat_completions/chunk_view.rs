//! A stream chunk read in one pass, without a tree, for
//! [`Transformer::on_text_chunk`](super::sse): only what decides whether the chunk is
//! choice 0's text or choice 0's tool-call fragments alone; every other member is skipped
//! (its grammar checked, its value not kept).
//!
//! Each level is read by a visitor that takes a JSON object and nothing else (serde_json
//! reads a derived struct from an array too, by position), and a member it reads given
//! twice fails the read: the chunk then goes the tree's way. Before, each level was kept
//! as raw JSON and read again from its bytes, after a check that they were an object: the
//! chunk's bytes were read about three and a half times.

use std::{borrow::Cow, fmt};

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

/// A string borrowed from the chunk where it has no escape.
#[derive(serde::Deserialize)]
pub(crate) struct Str<'a>(#[serde(borrow)] pub(crate) Cow<'a, str>);

/// The chunk: its choices, and what sends it the tree's way.
pub(crate) struct Chunk<'a> {
    pub(crate) choices: Vec<Choice<'a>>,
    /// An `error` member, whatever its value.
    pub(crate) error: bool,
    /// `usage` and not `null`.
    pub(crate) usage: bool,
}

/// One choice of the chunk.
pub(crate) struct Choice<'a> {
    pub(crate) index: Option<u64>,
    pub(crate) delta: Delta<'a>,
    /// `finish_reason` and not `null`.
    pub(crate) finish_reason: bool,
    /// `logprobs` and not `null`.
    pub(crate) logprobs: bool,
}

/// A choice's delta.
pub(crate) struct Delta<'a> {
    /// `content`: `None` when absent, `Some(None)` when `null`.
    pub(crate) content: Option<Option<Str<'a>>>,
    /// `tool_calls`: `None` when absent, `Some(None)` when `null`.
    pub(crate) tool_calls: Option<Option<Vec<Part<'a>>>>,
    /// Any other member (`role`, `refusal` …).
    pub(crate) other: bool,
}

/// One `tool_calls` fragment, typed as `CallDelta::from_value` reads it from a tree; a
/// member of another type fails the read (the tree decides then, where it counts as
/// absent).
pub(crate) struct Part<'a> {
    pub(crate) index: Option<u64>,
    pub(crate) id: Option<Str<'a>>,
    pub(crate) function: Option<Function<'a>>,
}

/// A fragment's `function`.
pub(crate) struct Function<'a> {
    pub(crate) name: Option<Str<'a>>,
    pub(crate) arguments: Option<Str<'a>>,
}

/// The value of a member, read once: a second one fails the read.
fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// `Deserialize` for a view that reads a JSON object and nothing else.
macro_rules! map_only {
    ($ty:ident, $what:literal, |$map:ident| $body:block) => {
        impl<'de> Deserialize<'de> for $ty<'de> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty<'de>;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_map<A: MapAccess<'de>>(
                        self,
                        mut $map: A,
                    ) -> Result<$ty<'de>, A::Error> {
                        $body
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

map_only!(Chunk, "a chunk object", |map| {
    let (mut choices, mut error, mut usage) = (None, None, None);
    while let Some(Str(key)) = map.next_key()? {
        match &*key {
            "choices" => once(&mut map, &mut choices, "choices")?,
            "error" => once::<_, IgnoredAny>(&mut map, &mut error, "error")?,
            "usage" => once::<_, Option<IgnoredAny>>(&mut map, &mut usage, "usage")?,
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(Chunk {
        choices: choices.unwrap_or_default(),
        error: error.is_some(),
        usage: usage.flatten().is_some(),
    })
});

map_only!(Choice, "a choice object", |map| {
    let (mut index, mut delta, mut finish_reason, mut logprobs) = (None, None, None, None);
    while let Some(Str(key)) = map.next_key()? {
        match &*key {
            "index" => once::<_, Option<u64>>(&mut map, &mut index, "index")?,
            "delta" => once(&mut map, &mut delta, "delta")?,
            "finish_reason" => {
                once::<_, Option<IgnoredAny>>(&mut map, &mut finish_reason, "finish_reason")?;
            }
            "logprobs" => once::<_, Option<IgnoredAny>>(&mut map, &mut logprobs, "logprobs")?,
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(Choice {
        index: index.flatten(),
        delta: delta.ok_or_else(|| de::Error::missing_field("delta"))?,
        finish_reason: finish_reason.flatten().is_some(),
        logprobs: logprobs.flatten().is_some(),
    })
});

map_only!(Delta, "a delta object", |map| {
    let (mut content, mut tool_calls, mut other) = (None, None, false);
    while let Some(Str(key)) = map.next_key()? {
        match &*key {
            "content" => once(&mut map, &mut content, "content")?,
            "tool_calls" => once(&mut map, &mut tool_calls, "tool_calls")?,
            _ => {
                other = true;
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(Delta {
        content,
        tool_calls,
        other,
    })
});

map_only!(Part, "a tool-call fragment object", |map| {
    let (mut index, mut id, mut function) = (None, None, None);
    while let Some(Str(key)) = map.next_key()? {
        match &*key {
            "index" => once::<_, Option<u64>>(&mut map, &mut index, "index")?,
            "id" => once::<_, Option<Str<'de>>>(&mut map, &mut id, "id")?,
            "function" => once::<_, Option<Function<'de>>>(&mut map, &mut function, "function")?,
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(Part {
        index: index.flatten(),
        id: id.flatten(),
        function: function.flatten(),
    })
});

map_only!(Function, "a function object", |map| {
    let (mut name, mut arguments) = (None, None);
    while let Some(Str(key)) = map.next_key()? {
        match &*key {
            "name" => once::<_, Option<Str<'de>>>(&mut map, &mut name, "name")?,
            "arguments" => once::<_, Option<Str<'de>>>(&mut map, &mut arguments, "arguments")?,
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(Function {
        name: name.flatten(),
        arguments: arguments.flatten(),
    })
});
