//! Pythonic calls: `f(a=1, b='x')` or `[f(a=1), g(b=2)]` (Llama 3.2 / 4, OLMo inside
//! `<function_calls>`, Gemma 3 inside ```` ```tool_code ````).

use serde_json::{Map, Value};

use super::{
    super::parser::{Ctx, ParseError, Parser},
    Dialect, Walk, ident_end, ws_after,
};
use crate::{Fix, FixKind};

/// No marker of its own: the walk reads a call where a document starts with `name(`.
pub(super) const DIALECT: Dialect = Dialect { ..Dialect::NONE };

impl Walk<'_> {
    /// `f(a=1, b='x')` or `[f(a=1), g(b=2)]` (Llama 3.2/4 and others).
    pub(super) fn read_pythonic(&mut self, at: usize) -> Result<(), ParseError> {
        let mut p = Parser::new(&self.raw[at..], at, self.opts.max_depth);
        let list = p.peek() == Some(b'[');
        if list {
            p.pos += 1;
        }
        loop {
            p.skip_ws();
            match p.peek() {
                None => break,
                Some(b']') if list => {
                    p.pos += 1;
                    break;
                }
                Some(b',') if list => {
                    p.pos += 1;
                    continue;
                }
                _ => {}
            }
            let name_start = p.pos;
            let name_end = ident_end(p.bytes(), name_start);
            if name_end == name_start || p.bytes().get(name_end) != Some(&b'(') {
                return Err(ParseError {
                    fatal: false,
                    offset: at + name_start,
                    reason: "expected a function call `name(arg=value, …)`".to_owned(),
                });
            }
            let name = p.slice(name_start, name_end).to_owned();
            p.pos = name_end + 1;
            let mut args = Map::new();
            let mut fixes = vec![Fix::at(FixKind::PythonicCallRead, at + name_start)];
            let mut truncated = false;
            loop {
                p.skip_ws();
                match p.peek() {
                    None => {
                        truncated = true;
                        fixes.push(Fix::at(FixKind::UnclosedBrackets, at + p.pos));
                        break;
                    }
                    Some(b')') => {
                        p.pos += 1;
                        break;
                    }
                    Some(b',') => {
                        p.pos += 1;
                        continue;
                    }
                    _ => {}
                }
                let Some((k_end, value_at)) = p.kwarg_at(p.pos) else {
                    return Err(ParseError {
                        fatal: false,
                        offset: at + p.pos,
                        reason: format!(
                            "positional argument in the call to `{name}`: \
                             name every argument (`{name}(city=\"Paris\")`)"
                        ),
                    });
                };
                let k_start = p.pos;
                let key = p.slice(k_start, k_end).to_owned();
                p.pos = value_at;
                p.skip_ws();
                if p.at_end() {
                    truncated = true;
                    fixes.push(Fix::at(FixKind::TruncatedMemberDropped, at + k_start));
                    break;
                }
                let v = p.parse_value(Ctx::Call, 1)?;
                args.insert(key, v.value);
                if v.truncated {
                    truncated = true;
                    break;
                }
            }
            fixes.append(&mut p.fixes);
            self.push(Value::Object(args), fixes, Some(name));
            if !list || truncated {
                break;
            }
        }
        self.pos = at + p.pos;
        Ok(())
    }
}

/// After `name(` (at `i` in `p`'s text): keyword arguments or `)` follow.
pub(super) fn looks_like_call_args(p: &Parser<'_>, i: usize) -> bool {
    let j = ws_after(p.bytes(), i);
    p.bytes().get(j) == Some(&b')') || p.kwarg_at(j).is_some()
}
