//! DeepSeek V3.2 and V4 (DSML): `<｜DSML｜function_calls>` (V3.2) or `<｜DSML｜tool_calls>`
//! (V4) around `<｜DSML｜invoke name="f"><｜DSML｜parameter name="k" string="true">v
//! </｜DSML｜parameter></｜DSML｜invoke>`. Each parameter says its own type: `string="true"`
//! is text as it stands (typed by the schema afterwards, as for any XML-style parameter:
//! a `string` property keeps it), `string="false"` is JSON. Its tokens are fullwidth `<｜…｜…>` like
//! DeepSeek's own, so it comes before [`super::deepseek`], whose reader takes any `<｜…｜>`.

use serde_json::{Map, Value};

use super::{
    super::parser::{Ctx, Parser},
    Dialect, ParseError, Walk, prefix,
};
use crate::{Fix, FixKind};

/// What opens one DSML call (`name="f"` follows).
pub const DSML_INVOKE: &str = "<｜DSML｜invoke";

/// What opens a block of calls: V3.2's and V4's.
pub const DSML_BLOCKS: [&str; 2] = ["<｜DSML｜function_calls>", "<｜DSML｜tool_calls>"];

/// What every DSML token begins with.
pub const DSML_TOKEN: &str = "<｜DSML｜";

/// The beginnings of a DSML wrapper, whole or damaged. A damaged wrapper the model wrote
/// before its real block (`<｜DSML｜toolcalls>`, `<｜DSML｜tool_calls` cut before its `>`)
/// is no prose: the content ends where it begins. A text with one and no call read stays
/// as it was written. A bare `<｜DSML｜` (prose naming the token) is no marker.
pub const DSML_WRAPPERS: [&str; 2] = ["<｜DSML｜tool", "<｜DSML｜function"];

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[
        DSML_BLOCKS[0],
        DSML_BLOCKS[1],
        DSML_INVOKE,
        DSML_WRAPPERS[0],
        DSML_WRAPPERS[1],
    ],
    openers: &[DSML_INVOKE],
    noise: &[
        "</｜DSML｜function_calls>",
        "</｜DSML｜tool_calls>",
        "</｜DSML｜invoke>",
    ],
    read: Some(read),
    ..Dialect::NONE
};

const TAGS: TypedTags = TypedTags {
    invoke: DSML_INVOKE,
    name_attr: "name",
    head_end: ">",
    invoke_close: "</｜DSML｜invoke>",
    param: "<｜DSML｜parameter",
    key_attr: "name",
    type_attr: "string",
    string_type: "true",
    param_close: "</｜DSML｜parameter>",
    what: "DSML invoke",
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    read_typed(w, &DSML_BLOCKS, &TAGS)
}

/// A block opener of `blocks` (unwrapped) or a call in `tags` at the walk's position
/// (DSML and its kin, GCML).
pub(super) fn read_typed(
    w: &mut Walk<'_>,
    blocks: &[&str],
    tags: &TypedTags,
) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    if let Some(block) = blocks.iter().find(|b| rest.starts_with(*b)) {
        w.out.envelope_call = true;
        w.global(FixKind::ToolCallTagUnwrapped, at);
        w.pos = at + block.len();
        return Some(Ok(()));
    }
    rest.starts_with(tags.invoke)
        .then(|| w.read_typed_invoke(tags))
}

/// The tags of a call whose parameters carry their own type in an attribute (DSML, Kimi
/// K3): text when the attribute says string, JSON otherwise.
pub(super) struct TypedTags {
    /// What opens a call; its attributes follow up to [`Self::head_end`].
    pub invoke: &'static str,
    /// The attribute that names the tool.
    pub name_attr: &'static str,
    /// What ends a tag's head.
    pub head_end: &'static str,
    pub invoke_close: &'static str,
    /// What opens a parameter; its attributes follow up to [`Self::head_end`].
    pub param: &'static str,
    /// The attribute that names the parameter.
    pub key_attr: &'static str,
    /// The attribute that says the value's type.
    pub type_attr: &'static str,
    /// Its value for text (a missing attribute means text too).
    pub string_type: &'static str,
    pub param_close: &'static str,
    /// How a fix or an error names the call.
    pub what: &'static str,
}

impl Walk<'_> {
    /// A call in `t`'s tags at the walk's position. Every search is bounded by the next
    /// tag it must not pass (the next call, the next parameter), so the read is linear.
    pub(super) fn read_typed_invoke(&mut self, t: &TypedTags) -> Result<(), ParseError> {
        let at = self.pos;
        let rest = self.rest();
        let head = prefix(rest, 256);
        // The head's end is looked for after the opener (which may hold a `>` itself).
        let head_len = after(head, t.invoke.len(), t.head_end).ok_or_else(|| ParseError {
            fatal: false,
            offset: at + head.len(),
            reason: format!("unterminated {} tag", t.what),
        })?;
        let name = attr(&head[t.invoke.len()..head_len], t.name_attr);
        let body_start = head_len + t.head_end.len();
        let next = rest[body_start..]
            .find(t.invoke)
            .map_or(rest.len(), |i| body_start + i);
        let close = rest[body_start..next]
            .find(t.invoke_close)
            .map(|i| body_start + i);
        let body = &rest[body_start..close.unwrap_or(next)];
        let truncated_call = close.is_none() && next == rest.len();
        self.out.envelope_call = true;
        let end = at + body_start + body.len() + close.map_or(0, |_| t.invoke_close.len());
        if let Some((args, fixes)) = self.json_body(t, body, at, at + body_start) {
            self.pos = end;
            self.push(args, fixes, name);
            return Ok(());
        }
        // Text values are typed by the tool's schema afterwards, as the servers' parsers
        // type them (a `string` property keeps the text as it is).
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at).with_detail(t.what)];
        let args = self.read_typed_params(t, body, at + body_start, truncated_call, &mut fixes);
        self.pos = end;
        self.push(Value::Object(args), fixes, name);
        Ok(())
    }

    /// An invoke whose body is one JSON object and no parameter tag
    /// (`<｜DSML｜invoke name="f">{"k": "v"}</｜DSML｜invoke>`): the object is the arguments,
    /// read (and repaired, every fix kept) as any call's JSON arguments. `None` when the
    /// body holds a parameter tag or is not one object alone.
    fn json_body(
        &self,
        t: &TypedTags,
        body: &str,
        at: usize,
        base: usize,
    ) -> Option<(Value, Vec<Fix>)> {
        let trimmed = body.trim_start();
        if !trimmed.starts_with('{') || body.contains(t.param) {
            return None;
        }
        let mut p = Parser::new(
            trimmed,
            base + body.len() - trimmed.len(),
            self.opts.max_depth,
        );
        let v = p.parse_value(Ctx::Top, 0).ok()?;
        p.skip_ws();
        if !p.at_end() || !v.value.is_object() {
            return None;
        }
        let mut fixes = vec![
            Fix::at(FixKind::ToolCallTagUnwrapped, at)
                .with_detail(format!("{}: a JSON body", t.what)),
        ];
        fixes.append(&mut p.fixes);
        Some((v.value, fixes))
    }

    fn read_typed_params(
        &self,
        t: &TypedTags,
        body: &str,
        base: usize,
        truncated_call: bool,
        fixes: &mut Vec<Fix>,
    ) -> Map<String, Value> {
        let mut args = Map::new();
        let mut truncated = false;
        let mut i = 0;
        while let Some(pi) = body[i..].find(t.param) {
            let p_at = i + pi;
            let head = prefix(&body[p_at..], 256);
            let Some(he) = after(head, t.param.len(), t.head_end) else {
                truncated = true;
                break;
            };
            let attrs = &head[t.param.len()..he];
            let Some(key) = attr(attrs, t.key_attr) else {
                // A parameter without a name: nothing to put its value under.
                fixes.push(Fix::at(FixKind::TruncatedMemberDropped, base + p_at));
                i = p_at + he + t.head_end.len();
                continue;
            };
            let text = attr(attrs, t.type_attr).is_none_or(|v| v == t.string_type);
            let v_start = p_at + he + t.head_end.len();
            let next_param = body[v_start..]
                .find(t.param)
                .map_or(body.len(), |e| v_start + e);
            let (v_end, next) = match body[v_start..next_param].find(t.param_close) {
                Some(e) => (v_start + e, v_start + e + t.param_close.len()),
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
            let value = if text {
                Value::String(raw.to_owned())
            } else {
                self.json_param(raw, base + v_start, fixes)
            };
            if let Some(first) = args.get(&key) {
                let kind = Fix::duplicate_key(first, &value);
                fixes.push(Fix::at(kind, base + p_at).with_detail(key.clone()));
            }
            args.insert(key, value);
            i = next.max(p_at + 1);
        }
        if (truncated || truncated_call) && !fixes.iter().any(Fix::is_lossy) {
            fixes.push(Fix::at(FixKind::UnclosedBrackets, base + body.len()));
        }
        args
    }

    /// A parameter declared JSON: read (and repaired, the fixes kept) when it reads whole;
    /// else its text, which the schema step then reports.
    fn json_param(&self, raw: &str, base: usize, fixes: &mut Vec<Fix>) -> Value {
        let t = raw.trim();
        let mut p = Parser::new(t, base, self.opts.max_depth);
        if let Ok(v) = p.parse_value(Ctx::Top, 1) {
            p.skip_ws();
            if p.at_end() && !v.truncated && !p.fixes.iter().any(Fix::is_lossy) {
                fixes.append(&mut p.fixes);
                return v.value;
            }
        }
        Value::String(raw.to_owned())
    }
}

/// Where `needle` is in `s` from byte `from` on (`None` when `from` is past `s`).
fn after(s: &str, from: usize, needle: &str) -> Option<usize> {
    s.get(from..)?.find(needle).map(|i| from + i)
}

/// The value of attribute `name` (`name="v"`) in a tag's head, `&quot;` and `&amp;`
/// unescaped.
pub(super) fn attr(head: &str, name: &str) -> Option<String> {
    let mut from = 0;
    while let Some(i) = head[from..].find(name) {
        let at = from + i;
        let before_ok = at == 0 || head.as_bytes()[at - 1].is_ascii_whitespace();
        let after = head[at + name.len()..].trim_start();
        if before_ok && let Some(v) = after.strip_prefix('=') {
            let v = v.trim_start();
            let quoted = v
                .strip_prefix('"')
                .and_then(|v| v.find('"').map(|e| &v[..e]))
                .or_else(|| {
                    v.strip_prefix('\'')
                        .and_then(|v| v.find('\'').map(|e| &v[..e]))
                });
            let value = quoted.unwrap_or_else(|| v.split_whitespace().next().unwrap_or(""));
            return Some(value.replace("&quot;", "\"").replace("&amp;", "&"));
        }
        from = at + name.len();
    }
    None
}
