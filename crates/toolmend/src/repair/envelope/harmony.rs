//! gpt-oss harmony: a call is a message on a channel addressed `to=functions.name`.

use super::{Dialect, ParseError, Walk, name_len, prefix, strip_namespace};
use crate::FixKind;

/// gpt-oss harmony: `<|channel|>commentary to=functions.name <|constrain|>json<|message|>{…}<|call|>`
/// (or `to=` in the role: `<|start|>assistant to=functions.name<|channel|>commentary json<|message|>`).
/// The `analysis` channel is reasoning.
pub const HARMONY_CHANNEL: &str = "<|channel|>";
/// Where a harmony header ends and its message begins.
pub const HARMONY_MESSAGE: &str = "<|message|>";

/// The recipient in the role, after `<|start|>assistant` (read by [`super::tokens`]).
const ROLE_TO: &str = " to=";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[HARMONY_CHANNEL, "<|start|>assistant to="],
    openers: &["<|start|>assistant"],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    w.rest()
        .starts_with(HARMONY_CHANNEL)
        .then(|| w.read_harmony_header(w.pos + HARMONY_CHANNEL.len()))
}

/// After a role token and its role name: `to=functions.name` makes what follows a call.
pub(super) fn read_role_recipient(w: &mut Walk<'_>) {
    if let Some(name) = w.raw[w.pos..].strip_prefix(ROLE_TO) {
        let n = name_len(name.as_bytes());
        if n > 0 {
            w.out.envelope_call = true;
            w.pending_name = Some(strip_namespace(&name[..n]).to_owned());
            w.pos += ROLE_TO.len() + n;
        }
    }
}

/// Where a harmony message ends: the next of these tokens.
const MESSAGE_ENDS: [&str; 5] = [
    "<|call|>",
    "<|end|>",
    "<|start|>",
    HARMONY_CHANNEL,
    "<|return|>",
];

impl Walk<'_> {
    /// A call's message at `body` that is no JSON document: empty (`<|message|><|call|>`),
    /// the arguments `{}`; text (`<|message|>foo<|call|>`), the call with that text for
    /// arguments, which the schema step answers with feedback. Neither is dropped. A
    /// message that starts like JSON is left for the walk to read.
    fn read_harmony_arguments(&mut self, body: usize) {
        let b = self.b;
        let end = (body..b.len())
            .filter(|&i| b[i] == b'<' && b.get(i + 1) == Some(&b'|'))
            .find(|&i| MESSAGE_ENDS.iter().any(|t| self.raw[i..].starts_with(t)))
            .unwrap_or(b.len());
        let text = self.raw[body..end].trim();
        if text.starts_with(['{', '[', '"']) {
            return;
        }
        let value = if text.is_empty() {
            self.global(FixKind::EmptyArgumentsAsObject, body);
            serde_json::Value::Object(serde_json::Map::new())
        } else {
            serde_json::Value::String(text.to_owned())
        };
        self.push(value, Vec::new(), None);
        self.pos = end;
    }

    /// gpt-oss harmony, after `<|channel|>`: the header up to `<|message|>`. `to=name`
    /// makes the message a call's arguments; the `analysis` channel is reasoning (skipped
    /// to its `<|end|>`); any other channel's message is text.
    fn read_harmony_header(&mut self, from: usize) -> Result<(), ParseError> {
        let at = self.pos;
        let head = prefix(&self.raw[from..], 256);
        let Some(m) = head.find(HARMONY_MESSAGE) else {
            self.global(FixKind::SpecialTokensStripped, at);
            self.pos = from;
            return Ok(());
        };
        let header = &head[..m];
        let body = from + m + HARMONY_MESSAGE.len();
        self.pos = body;
        if let Some(t) = header.find("to=") {
            let name = &header[t + 3..];
            let n = name_len(name.as_bytes());
            self.out.envelope_call = true;
            self.global(FixKind::ToolCallTagUnwrapped, at);
            if n > 0 {
                self.pending_name = Some(strip_namespace(&name[..n]).to_owned());
                self.read_harmony_arguments(body);
            }
        } else if header.trim_start().starts_with("analysis") {
            self.global(FixKind::ThinkingStripped, at);
            let b = self.b;
            let end = (body..b.len())
                .filter(|&i| b[i] == b'<' && b.get(i + 1) == Some(&b'|'))
                .find_map(|i| {
                    let r = &self.raw[i..];
                    if r.starts_with("<|end|>") {
                        Some(i + "<|end|>".len())
                    } else if ["<|start|>", HARMONY_CHANNEL, "<|call|>", "<|return|>"]
                        .iter()
                        .any(|t| r.starts_with(t))
                    {
                        Some(i)
                    } else {
                        None
                    }
                });
            self.pos = end.unwrap_or(b.len());
        } else {
            self.global(FixKind::SpecialTokensStripped, at);
        }
        Ok(())
    }
}
