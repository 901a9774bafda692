//! MiniCPM 5 / 4.1 XML (vLLM `minicpm5`): `<function name="f"><param name="k">v</param></function>`,
//! one element per call, no wrapper; a value may be `<![CDATA[…]]>`. MiniCPM4 writes a
//! pythonic call in a fence inside `<|tool_call_start|>` ([`super::tokens`]).

use super::{Dialect, ParseError, Walk, minimax::InvokeTags};

/// MiniCPM 5's call: `<function name="f">`.
pub const MINICPM_FUNCTION: &str = "<function name=";
/// The same call as some tokenizers leak it: the space before `name` as byte-level BPE's
/// `Ġ` (U+0120), or gone (`<functionname=`). vLLM's `minicpm5` reads both; so do we, each
/// parameter in any of the three forms. vLLM also turns a `Ġ` inside a value into a space;
/// a value here stays as the model wrote it (`Ġ` is a letter too).
const MINICPM_FUNCTION_G: &str = "<function\u{120}name=";
const MINICPM_FUNCTION_COLLAPSED: &str = "<functionname=";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[
        MINICPM_FUNCTION,
        MINICPM_FUNCTION_G,
        MINICPM_FUNCTION_COLLAPSED,
    ],
    openers: &[
        MINICPM_FUNCTION,
        MINICPM_FUNCTION_G,
        MINICPM_FUNCTION_COLLAPSED,
    ],
    read: Some(read),
    ..Dialect::NONE
};

/// A parameter's opener after `<param`: in any call, each of the three forms (a model
/// that leaks the space in one tag may not in the next).
const PARAM_FORMS: &[&str] = &[" name=", "\u{120}name=", "name="];

const MINICPM_TAGS: [InvokeTags; 3] = [
    InvokeTags {
        open: MINICPM_FUNCTION,
        close: "</function>",
        param: "<param",
        param_forms: PARAM_FORMS,
        param_close: "</param>",
        what: "<function name=…>",
    },
    InvokeTags {
        open: MINICPM_FUNCTION_G,
        close: "</function>",
        param: "<param",
        param_forms: PARAM_FORMS,
        param_close: "</param>",
        what: "<function\u{120}name=…>",
    },
    InvokeTags {
        open: MINICPM_FUNCTION_COLLAPSED,
        close: "</function>",
        param: "<param",
        param_forms: PARAM_FORMS,
        param_close: "</param>",
        what: "<functionname=…>",
    },
];

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let rest = w.rest();
    let tags = MINICPM_TAGS.iter().find(|t| rest.starts_with(t.open))?;
    Some(w.read_invoke(tags))
}
