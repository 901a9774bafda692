//! XML-style parameters, shared by the dialects that write them (GLM, MiniMax M2, Step-3,
//! Qwen3-Coder, MiniCPM 5, Hunyuan, K2 Horizon, Solar Open): a value is text up to its
//! close tag, typed later by the schema step.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{ParseError, Walk, name_len, prefix, unquote, ws_after};
use crate::{Fix, FixKind};

/// A call whose tool name follows its opener and whose parameters follow the name
/// (Hunyuan v3, K2 Horizon, Solar Open): `<opener>name[sep]params…<close>`.
pub(super) struct NamedCall<'t> {
    /// What begins every call of the dialect: the next one bounds a call never closed.
    pub opener: &'t str,
    /// What ends the call.
    pub close: &'t str,
    /// What the call may write between its name and its parameters.
    pub sep: Option<&'t str>,
    pub params: XmlParams<'t>,
    /// How an error names the call.
    pub what: &'t str,
    /// The body as its parameters are read: what the dialect writes besides keys and
    /// values passed over (K2 Horizon's type tags).
    pub body: fn(&str) -> Cow<'_, str>,
}

/// The tags of one XML-style parameter dialect (borrowed: Hunyuan's carry a suffix read
/// from the text).
pub(super) struct XmlParams<'t> {
    /// What opens a parameter (its key follows); with [`Self::start_forms`], their common
    /// beginning.
    pub start: &'t str,
    /// The ways a parameter's opener may go on after [`Self::start`] (MiniCPM 5's
    /// `<param` + ` name=`, `Ġname=` or `name=`: its tokenizer leaks or drops the space);
    /// empty when `start` is the whole opener.
    pub start_forms: &'t [&'t str],
    /// What ends the key.
    pub key_close: &'t str,
    /// What opens the value after the key (GLM's `<arg_value>`), if anything.
    pub value_open: Option<&'t str>,
    /// What closes the value.
    pub close: &'t str,
}

impl XmlParams<'_> {
    /// Where the next parameter's opener begins in `hay`, and its length. Linear: a
    /// `start` that no form follows is passed over, never looked at again.
    fn next_start(&self, hay: &str) -> Option<(usize, usize)> {
        if self.start_forms.is_empty() {
            return hay.find(self.start).map(|i| (i, self.start.len()));
        }
        let mut from = 0;
        while let Some(i) = hay[from..].find(self.start) {
            let at = from + i;
            let after = &hay[at + self.start.len()..];
            if let Some(form) = self.start_forms.iter().find(|f| after.starts_with(**f)) {
                return Some((at, self.start.len() + form.len()));
            }
            from = at + self.start.len();
        }
        None
    }
}

/// MiniCPM 5 wraps a value holding markup or line breaks in `<![CDATA[…]]>`.
const CDATA: (&str, &str) = ("<![CDATA[", "]]>");

/// A body read as written ([`NamedCall::body`]).
pub(super) fn as_written(body: &str) -> Cow<'_, str> {
    Cow::Borrowed(body)
}

impl Walk<'_> {
    /// A [`NamedCall`] after its opener (`from`): the name, then the parameters up to the
    /// close or the next call (each byte searched once: linear).
    pub(super) fn read_named_call(
        &mut self,
        from: usize,
        c: &NamedCall<'_>,
    ) -> Result<(), ParseError> {
        self.out.envelope_call = true;
        self.global(FixKind::ToolCallTagUnwrapped, self.pos);
        let start = ws_after(self.b, from);
        let n = name_len(&self.b[start..]);
        if n == 0 {
            return Err(ParseError {
                fatal: false,
                offset: start,
                reason: format!("a {} call without a tool name", c.what),
            });
        }
        let name = self.raw[start..start + n].to_owned();
        let mut body_at = start + n;
        if let Some(sep) = c.sep {
            let head = prefix(&self.raw[body_at..], 256);
            if let Some(r) = head.trim_start().strip_prefix(sep) {
                body_at += head.len() - r.len();
            }
        }
        let rest = &self.raw[body_at..];
        let next = rest.find(c.opener).unwrap_or(rest.len());
        let end = rest[..next].find(c.close);
        let body = &rest[..end.unwrap_or(next)];
        let truncated_call = end.is_none() && next == rest.len();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, self.pos)];
        let read = (c.body)(body);
        let args = self.read_params(&c.params, &read, body_at, truncated_call, &mut fixes);
        self.pos = body_at + body.len() + end.map_or(0, |_| c.close.len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }

    /// The parameters of an XML-style call body (`base`: the body's offset in the text).
    /// Each value is bounded by the next parameter, so the read stays linear.
    pub(super) fn read_params(
        &self,
        p: &XmlParams<'_>,
        body: &str,
        base: usize,
        truncated_call: bool,
        fixes: &mut Vec<Fix>,
    ) -> Map<String, Value> {
        let mut args = Map::new();
        let mut truncated = false;
        let mut i = 0;
        while let Some((pi, opener)) = p.next_start(&body[i..]) {
            let k_start = i + pi + opener;
            let tag = prefix(&body[k_start..], 256);
            let Some(ke) = tag.find(p.key_close) else {
                truncated = true;
                break;
            };
            let key = unquote(&tag[..ke]).to_owned();
            let mut v_start = k_start + ke + p.key_close.len();
            if let Some(open) = p.value_open {
                let ws = body[v_start..].len() - body[v_start..].trim_start().len();
                match body[v_start + ws..].strip_prefix(open) {
                    Some(_) => v_start += ws + open.len(),
                    None => {
                        // A key without its value: nothing to read for it.
                        fixes.push(Fix::at(FixKind::TruncatedMemberDropped, base + k_start));
                        i = v_start;
                        continue;
                    }
                }
            }
            // A CDATA section may hold the tags themselves: the value's end is after it.
            let from = if body[v_start..].trim_start().starts_with(CDATA.0) {
                body[v_start..]
                    .find(CDATA.1)
                    .map_or(body.len(), |e| v_start + e + CDATA.1.len())
            } else {
                v_start
            };
            let next_param = p
                .next_start(&body[from..])
                .map_or(body.len(), |(e, _)| from + e);
            let (v_end, next) = match body[from..next_param].find(p.close) {
                Some(e) => (from + e, from + e + p.close.len()),
                None => {
                    if next_param == body.len() && truncated_call {
                        truncated = true;
                        fixes.push(Fix::at(FixKind::TruncatedString, base + next_param));
                    } else {
                        fixes.push(Fix::at(FixKind::MissingCloseTag, base + next_param));
                    }
                    (next_param, next_param)
                }
            };
            let raw = &body[v_start..v_end];
            // The line breaks a template writes around a value (`>\nv\n<`), both or none:
            // a value that only ends in one (a file's last line) keeps it.
            let raw = raw
                .strip_prefix('\n')
                .and_then(|r| r.strip_suffix('\n'))
                .unwrap_or(raw);
            let value = match raw
                .trim()
                .strip_prefix(CDATA.0)
                .and_then(|r| r.strip_suffix(CDATA.1))
            {
                Some(text) => {
                    fixes.push(
                        Fix::at(FixKind::XmlParametersRead, base + v_start).with_detail("CDATA"),
                    );
                    Value::String(text.to_owned())
                }
                None => Self::xml_value(raw),
            };
            if let Some(first) = args.get(&key) {
                let kind = Fix::duplicate_key(first, &value);
                fixes.push(Fix::at(kind, base + k_start).with_detail(key.clone()));
            }
            args.insert(key, value);
            i = next.max(i + 1);
        }
        if (truncated || truncated_call) && !fixes.iter().any(Fix::is_lossy) {
            fixes.push(Fix::at(FixKind::UnclosedBrackets, base + body.len()));
        }
        args
    }

    /// A parameter's text, as it stands: the extractor, which knows the tool, reads it by
    /// its property's type (`message::extract::typed_xml_value`: `"5"` -> `5` for an
    /// integer, `{…}` -> an object for an object, the text itself for a string).
    pub(super) fn xml_value(text: &str) -> Value {
        Value::String(text.to_owned())
    }
}
