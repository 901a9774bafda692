//! Input and output of `toolmend history`: a JSON array of messages, or a chat-completions
//! request whose `messages` are read and written back with every other key untouched.

use std::{
    fs::File,
    io::{self, Read, Write},
    path::Path,
};

use anyhow::{Context, Result, anyhow, bail};
use indexmap::IndexMap;
use serde_json::{Map, Value, value::RawValue};
use toolmend::conversation::Message;

const EXPECTED: &str =
    "expected a JSON array of messages, or a chat-completions request object with a `messages` key";

/// How the history was given, so the output keeps the same shape.
#[derive(Debug)]
pub enum Shape {
    /// A bare JSON array of messages.
    Array,
    /// A request object; its `messages` value is replaced on output, other keys are kept.
    Request(Map<String, Value>),
}

/// A history as read.
#[derive(Debug)]
pub struct History {
    pub shape: Shape,
    pub messages: Vec<Message>,
    /// The line on which each message starts, for reports (1-based).
    pub lines: Vec<usize>,
}

impl History {
    /// The input line of message `i`, when it is one of the input's messages.
    pub fn line(&self, i: usize) -> Option<usize> {
        self.lines.get(i).copied()
    }
}

/// A name for the input in messages: the path, or `standard input`.
pub fn input_name(input: Option<&Path>) -> String {
    match input {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "standard input".to_owned(),
    }
}

/// Reads the history from a file, or standard input for `-` or nothing.
pub fn read(input: Option<&Path>) -> Result<History> {
    let mut bytes = Vec::new();
    match input {
        Some(p) if p.as_os_str() != "-" => File::open(p)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .with_context(|| format!("cannot read {}", p.display()))?,
        _ => io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("cannot read standard input")?,
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "the input is not valid UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        )
    });
    text.and_then(|t| parse(&t))
        .with_context(|| format!("cannot read the history in {}", input_name(input)))
}

/// Parses a history, or says precisely where and why it cannot.
pub fn parse(text: &str) -> Result<History> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (shape, raws): (Shape, Vec<&RawValue>) = match text.trim_start().as_bytes().first() {
        None => bail!("the input is empty: {EXPECTED}"),
        Some(b'[') => (Shape::Array, from_json(text)?),
        Some(b'{') => {
            let mut request: IndexMap<String, &RawValue> = from_json(text)?;
            let Some(messages) = request.get("messages").copied() else {
                bail!("the request object has no `messages` key: {EXPECTED}");
            };
            if !messages.get().starts_with('[') {
                bail!(
                    "`messages` (line {}) is {}, not a JSON array of messages",
                    Lines::new(text).position(messages.get()).0,
                    kind_of(messages.get())
                );
            }
            let raws = from_json(messages.get())?;
            let mut rest = Map::new();
            for (key, raw) in request.drain(..) {
                let value = if key == "messages" {
                    Value::Null // replaced by the messages on output; keeps the key's place
                } else {
                    from_json(raw.get())?
                };
                rest.insert(key, value);
            }
            (Shape::Request(rest), raws)
        }
        Some(_) => {
            from_json::<Value>(text)?; // a syntax error, if any, says where
            bail!("the input is {}: {EXPECTED}", kind_of(text.trim_start()))
        }
    };
    let mut messages = Vec::with_capacity(raws.len());
    let mut lines = Vec::with_capacity(raws.len());
    let mut at = Lines::new(text);
    for (i, raw) in raws.iter().enumerate() {
        let (line, column) = at.position(raw.get());
        lines.push(line);
        if !raw.get().starts_with('{') {
            bail!(
                "messages[{i}] (line {line}) is {}, not a message object",
                kind_of(raw.get())
            );
        }
        let message = serde_json::from_str::<Message>(raw.get()).map_err(|e| {
            let mut why = relocate(&e, line, column);
            if why.contains("untagged enum Content") {
                why.push_str(" (`content` must be a string or a list of content parts)");
            }
            anyhow!("messages[{i}] (line {line}) is not an OpenAI chat message: {why}")
        })?;
        messages.push(message);
    }
    Ok(History {
        shape,
        messages,
        lines,
    })
}

/// Writes `messages` in the input's shape, pretty-printed unless `compact`, then a newline.
pub fn write(
    out: &mut impl Write,
    shape: Shape,
    messages: Vec<Message>,
    compact: bool,
) -> Result<()> {
    let value = match shape {
        Shape::Array => serde_json::to_value(messages)?,
        Shape::Request(mut request) => {
            request.insert("messages".to_owned(), serde_json::to_value(messages)?);
            Value::Object(request)
        }
    };
    // Serialized first, written once: a closed pipe surfaces as an io::Error.
    let mut bytes = if compact {
        serde_json::to_vec(&value)?
    } else {
        serde_json::to_vec_pretty(&value)?
    };
    bytes.push(b'\n');
    out.write_all(&bytes)?;
    out.flush()?;
    Ok(())
}

/// Parses JSON text; a syntax error says what and where ("… at line 4 column 3").
fn from_json<'a, T: serde::Deserialize<'a>>(text: &'a str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| anyhow!("the input is not valid JSON: {e}"))
}

/// Line and column (1-based, in bytes) of slices of one text, asked in increasing order:
/// each byte is scanned once, so a history of any size costs one pass.
struct Lines<'a> {
    text: &'a str,
    offset: usize,
    line: usize,
    line_start: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        Lines {
            text,
            offset: 0,
            line: 1,
            line_start: 0,
        }
    }

    /// Where `part`, a slice of the text at or after the previous one, starts.
    fn position(&mut self, part: &str) -> (usize, usize) {
        let offset = (part.as_ptr() as usize)
            .saturating_sub(self.text.as_ptr() as usize)
            .clamp(self.offset, self.text.len());
        let segment = &self.text.as_bytes()[self.offset..offset];
        for (k, _) in segment.iter().enumerate().filter(|(_, b)| **b == b'\n') {
            self.line += 1;
            self.line_start = self.offset + k + 1;
        }
        self.offset = offset;
        (self.line, offset - self.line_start + 1)
    }
}

/// A serde error inside one message, with its position made absolute in the input.
fn relocate(e: &serde_json::Error, line: usize, column: usize) -> String {
    let text = e.to_string();
    if e.line() == 0 {
        return text;
    }
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let what = text.strip_suffix(&suffix).unwrap_or(&text);
    let (l, c) = if e.line() == 1 {
        (line, column + e.column() - 1)
    } else {
        (line + e.line() - 1, e.column())
    };
    format!("{what} at line {l} column {c}")
}

/// What kind of JSON value a (valid) JSON text is, for error messages.
fn kind_of(json: &str) -> &'static str {
    match json.as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(b'-' | b'0'..=b'9') => "a number",
        _ => "not JSON",
    }
}
