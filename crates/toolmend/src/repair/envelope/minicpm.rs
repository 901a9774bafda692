//! MiniCPM 5 / 4.1 XML (vLLM `minicpm5`): `<function name="f"><param name="k">v</param></function>`,
//! one element per call, no wrapper; a value may be `<![CDATA[…]]>`. MiniCPM4 writes a
//! pythonic call in a fence inside `<|tool_call_start|>` ([`super::tokens`]).

use super::{Dialect, ParseError, Walk, minimax::InvokeTags};

/// MiniCPM 5's call: `<function name="f">`.
pub const MINICPM_FUNCTION: &str = "<function name=";
/// The same call as some tokenizers leak it: the space before `name` as byte-level BPE's
/// `Ġ` (U+0120), or gone (`<functionname=`). vLLM's `minicpm5` reads both; so do we, each
/// call in the form its opener has.
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

const MINICPM_TAGS: [InvokeTags; 3] = [
    InvokeTags {
        open: MINICPM_FUNCTION,
        close: "</function>",
        param: "<param name=",
        param_close: "</param>",
        what: "<function name=…>",
    },
    InvokeTags {
        open: MINICPM_FUNCTION_G,
        close: "</function>",
        param: "<param\u{120}name=",
        param_close: "</param>",
        what: "<function\u{120}name=…>",
    },
    InvokeTags {
        open: MINICPM_FUNCTION_COLLAPSED,
        close: "</function>",
        param: "<paramname=",
        param_close: "</param>",
        what: "<functionname=…>",
    },
];

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let rest = w.rest();
    let tags = MINICPM_TAGS.iter().find(|t| rest.starts_with(t.open))?;
    Some(w.read_invoke(tags))
}
