//! MiniMax M2 (and Anthropic-style XML):
//! `<invoke name="n"><parameter name="k">v</parameter></invoke>`, always inside
//! `<minimax:tool_call>` (Anthropic's `<function_calls>`, dots' `<dots_function_call>`:
//! [`super::hermes`]). Step-3 writes the same in its own namespace ([`super::step`]).
//!
//! A bare `<invoke name=…>` is a call only at the start of a text or inside such a
//! wrapper: after prose it is an example of the syntax (an answer about Anthropic's or
//! MiniMax's format), and stays prose.

use serde_json::{Map, Value};

use super::{Dialect, ParseError, Walk, tag_end, unquote, xml::XmlParams};
use crate::{Fix, FixKind};

/// MiniMax M2 (and Anthropic-style XML): `<invoke name="n"><parameter name="k">v</parameter></invoke>`.
pub const XML_INVOKE: &str = "<invoke name=";

/// MiniMax M3's separator, written before each tag of its calls:
/// `]<]minimax[>[<tool_call>` + newline + `]<]minimax[>[<invoke name="f">` ….
pub const MINIMAX3_SEP: &str = "]<]minimax[>[";

pub(super) const DIALECT: Dialect = Dialect {
    // The separator is noise inside a call; before the block's `<tool_call>` (the marker)
    // the content ends before it ([`super::super::markers::hold_start`]).
    // One call of a block; a marker only at the start of a text (see above).
    openers: &[XML_INVOKE],
    leading: &[XML_INVOKE],
    noise: &["</invoke>", MINIMAX3_SEP],
    read: Some(read),
    ..Dialect::NONE
};

/// The detail of the fix that says arguments were read as nested elements (the extractor
/// then types them by the schema at every level).
pub const NESTED_ELEMENTS: &str = "arguments as nested elements";

/// How deep arguments written as nested elements are read.
const MAX_NESTING: usize = 32;

/// Arguments written as elements, `<k>v</k>` in a row: an element that holds elements is an
/// object of them, one that holds text is that text (typed by the schema afterwards, as
/// any XML-style parameter); an element given more than once is the list of its values,
/// in order. `None` unless `body` is elements alone (text between them, a tag never
/// closed, nesting past [`MAX_NESTING`]): then the body is not read this way.
fn nested_xml(body: &str, depth: usize) -> Option<Map<String, Value>> {
    if depth > MAX_NESTING {
        return None;
    }
    let mut map = Map::new();
    let mut rest = body.trim_start();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let inner = rest.strip_prefix('<')?;
        let n = inner.bytes().take(128).position(|c| c == b'>')?;
        let name = &inner[..n];
        let ident = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':');
        if name.is_empty() || !name.bytes().all(ident) {
            return None;
        }
        let after = &inner[n + 1..];
        let close = format!("</{name}>");
        let end = after.find(&close)?;
        let content = &after[..end];
        let value = match content.trim_start().starts_with('<') {
            true => Value::Object(nested_xml(content, depth + 1)?),
            false => Value::String(content.to_owned()),
        };
        match map.get_mut(name) {
            Some(Value::Array(items)) => items.push(value),
            Some(first) => {
                let first = first.take();
                map.insert(name.to_owned(), Value::Array(vec![first, value]));
            }
            None => {
                map.insert(name.to_owned(), value);
            }
        }
        rest = after[end + close.len()..].trim_start();
    }
    Some(map)
}

/// The tags of an `<invoke>`-style call (MiniMax M2, Step-3).
pub(super) struct InvokeTags {
    pub open: &'static str,
    pub close: &'static str,
    /// What opens a parameter; with `param_forms`, their common beginning.
    pub param: &'static str,
    /// The ways a parameter's opener may go on after `param` (see `XmlParams::start_forms`).
    pub param_forms: &'static [&'static str],
    pub param_close: &'static str,
    /// How an error names the tag.
    pub what: &'static str,
}

const MINIMAX_INVOKE: InvokeTags = InvokeTags {
    open: XML_INVOKE,
    close: "</invoke>",
    param: "<parameter name=",
    param_forms: &[],
    param_close: "</parameter>",
    what: "<invoke name=…>",
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    (w.rest().starts_with(XML_INVOKE) && (w.at_text_start() || w.out.envelope_call))
        .then(|| w.read_invoke(&MINIMAX_INVOKE))
}

impl Walk<'_> {
    /// An `<invoke>`-style call at the walk's position, in `x`'s tags.
    pub(super) fn read_invoke(&mut self, x: &InvokeTags) -> Result<(), ParseError> {
        let at = self.pos;
        let rest = self.rest();
        let head_end = tag_end(rest, at, x.what)?;
        let name = unquote(&rest[x.open.len()..head_end]).to_owned();
        let body_start = head_end + 1;
        let next = rest[body_start..]
            .find(x.open)
            .map_or(rest.len(), |i| body_start + i);
        let close = rest[body_start..next].find(x.close).map(|i| body_start + i);
        let body = &rest[body_start..close.unwrap_or(next)];
        let truncated_call = close.is_none() && next == rest.len();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at)];
        let params = XmlParams {
            start: x.param,
            start_forms: x.param_forms,
            key_close: ">",
            value_open: None,
            close: x.param_close,
        };
        let mut args = self.read_params(&params, body, at + body_start, truncated_call, &mut fixes);
        // MiniMax M3 writes each argument as its own element, nested for objects, with
        // its separator before every tag: `]<]minimax[>[<city>Rome]<]minimax[>[</city>`.
        if args.is_empty() && !body.contains(x.param) {
            let plain = body.replace(MINIMAX3_SEP, "");
            if let Some(map) = nested_xml(&plain, 0) {
                fixes.push(Fix::at(FixKind::XmlParametersRead, at).with_detail(NESTED_ELEMENTS));
                args = map;
            }
        }
        self.out.envelope_call = true;
        self.pos = at + body_start + body.len() + close.map_or(0, |_| x.close.len());
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }
}
