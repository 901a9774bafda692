//! Qwen3-Coder's XML call: `<function=name><parameter=key>value</parameter></function>`.

use serde_json::{Map, Value};

use super::{Dialect, ParseError, Walk, prefix, tag_end};
use crate::{Fix, FixKind};

/// Qwen3-Coder's XML call (`<function=name><parameter=key>value</parameter></function>`).
pub const XML_FUNCTION: &str = "<function=";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[XML_FUNCTION],
    noise: &["</function>"],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    w.rest()
        .starts_with(XML_FUNCTION)
        .then(|| w.read_xml_function())
}

impl Walk<'_> {
    /// Qwen3-Coder: `<function=name>\n<parameter=key>\nvalue\n</parameter>\n</function>`.
    ///
    /// Every search is bounded by the next tag it must not pass (the next `<function=`,
    /// the next `<parameter=`), so the whole read stays linear.
    fn read_xml_function(&mut self) -> Result<(), ParseError> {
        let at = self.pos;
        let rest = self.rest();
        let head_end = tag_end(rest, at, "<function=…>")?;
        let name = rest["<function=".len()..head_end].trim().to_owned();
        let body_start = head_end + 1;
        // The body ends at `</function>`, or at the next `<function=` when the close is missing.
        let next_fn = rest[body_start..]
            .find("<function=")
            .map_or(rest.len(), |i| body_start + i);
        let close = rest[body_start..next_fn]
            .find("</function>")
            .map(|i| body_start + i);
        let body_end = close.unwrap_or(next_fn);
        let truncated_fn = close.is_none() && next_fn == rest.len();
        let body = &rest[body_start..body_end];
        let mut args = Map::new();
        let mut fixes = vec![Fix::at(FixKind::XmlParametersRead, at)];
        if close.is_none() && !truncated_fn {
            // Another call follows without this one's `</function>`: recorded, not merged.
            fixes.push(Fix::at(FixKind::MissingCloseTag, at + body_end));
        }
        let mut truncated = truncated_fn;
        let mut i = 0;
        while let Some(pi) = body[i..].find("<parameter=") {
            let p_at = i + pi;
            let tag = prefix(&body[p_at..], 256);
            let Some(ke) = tag.find('>') else {
                truncated = true;
                break;
            };
            let key = body[p_at + "<parameter=".len()..p_at + ke]
                .trim()
                .to_owned();
            let v_start = p_at + ke + 1;
            let next_param = body[v_start..]
                .find("<parameter=")
                .map_or(body.len(), |e| v_start + e);
            let (v_end, next) = match body[v_start..next_param].find("</parameter>") {
                Some(e) => (v_start + e, v_start + e + "</parameter>".len()),
                None if let Some(d) = drifted_close(&body[v_start..next_param]) => {
                    // `</parameter1>`, `</parameter_function>`, a bare `</parameter`: the
                    // closer the model meant, at the value's end (only whitespace before
                    // the next tag), read as the value's end as the servers read it.
                    let d_at = v_start + d;
                    let closer = body[d_at..next_param].trim_end();
                    fixes.push(
                        Fix::at(FixKind::DriftedCloseTag, at + body_start + d_at)
                            .with_detail(closer.to_owned()),
                    );
                    if next_param == body.len() && truncated_fn {
                        truncated = true;
                    }
                    (d_at, next_param)
                }
                None => {
                    // Missing close tag: the value runs to the next parameter or the end.
                    if next_param == body.len() && truncated_fn {
                        truncated = true;
                        fixes.push(Fix::at(
                            FixKind::TruncatedString,
                            at + body_start + next_param,
                        ));
                    } else {
                        fixes.push(Fix::at(
                            FixKind::MissingCloseTag,
                            at + body_start + next_param,
                        ));
                    }
                    (next_param, next_param)
                }
            };
            let raw_value = body[v_start..v_end]
                .strip_prefix('\n')
                .unwrap_or(&body[v_start..v_end]);
            let raw_value = raw_value.strip_suffix('\n').unwrap_or(raw_value);
            let value = Self::xml_value(raw_value);
            if let Some(first) = args.get(&key) {
                let kind = Fix::duplicate_key(first, &value);
                fixes.push(Fix::at(kind, at + body_start + p_at).with_detail(key.clone()));
            }
            args.insert(key, value);
            i = next;
        }
        self.pos = at
            + body_end
            + if close.is_some() {
                "</function>".len()
            } else {
                0
            };
        if truncated && !fixes.iter().any(Fix::is_lossy) {
            fixes.push(Fix::at(FixKind::UnclosedBrackets, self.pos));
        }
        self.out.envelope_call = true;
        self.push(Value::Object(args), fixes, Some(name));
        Ok(())
    }
}

/// Where a drifted `</parameter` closer stands at the end of `value` (a value whose
/// `</parameter>` never came): `</parameter`, then only ASCII letters, digits or `_`,
/// an optional `>`, and whitespace to the end. `None` when the value does not end so.
fn drifted_close(value: &str) -> Option<usize> {
    const CLOSER: &str = "</parameter";
    let t = value.trim_end();
    let at = t.rfind(CLOSER)?;
    let tail = &t[at + CLOSER.len()..];
    let tail = tail.strip_suffix('>').unwrap_or(tail);
    tail.bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_')
        .then_some(at)
}

#[cfg(test)]
mod tests {
    use super::drifted_close;

    #[test]
    fn a_drifted_closer_is_found_only_at_the_value_end() {
        assert_eq!(drifted_close("\nShanghai\n</parameter1>\n"), Some(10));
        assert_eq!(
            drifted_close("\nShanghai\n</parameter_function>\n"),
            Some(10)
        );
        assert_eq!(drifted_close("\nShanghai\n</parameter\n"), Some(10));
        assert_eq!(drifted_close("a </parameter1> b"), None);
        assert_eq!(drifted_close("a </parameter-x>"), None);
        assert_eq!(drifted_close("Shanghai"), None);
    }
}
