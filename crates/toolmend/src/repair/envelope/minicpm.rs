//! MiniCPM 5 / 4.1 XML (vLLM `minicpm5`): `<function name="f"><param name="k">v</param></function>`,
//! one element per call, no wrapper; a value may be `<![CDATA[…]]>`. MiniCPM4 writes a
//! pythonic call in a fence inside `<|tool_call_start|>` ([`super::tokens`]).

use super::{Dialect, ParseError, Walk, minimax::InvokeTags};

/// MiniCPM 5's call: `<function name="f">`.
pub const MINICPM_FUNCTION: &str = "<function name=";

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[MINICPM_FUNCTION],
    openers: &[MINICPM_FUNCTION],
    read: Some(read),
    ..Dialect::NONE
};

const MINICPM_TAGS: InvokeTags = InvokeTags {
    open: MINICPM_FUNCTION,
    close: "</function>",
    param: "<param name=",
    param_close: "</param>",
    what: "<function name=…>",
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    w.rest()
        .starts_with(MINICPM_FUNCTION)
        .then(|| w.read_invoke(&MINICPM_TAGS))
}
