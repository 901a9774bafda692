//! GigaChat 3.5 (GCML, vLLM `gigachat35`): DeepSeek V4's DSML under its own token,
//! `<｜GCML｜tool_calls>` around `<｜GCML｜invoke name="f"><｜GCML｜parameter name="k"
//! string="true">v</｜GCML｜parameter></｜GCML｜invoke>`, each parameter typed by its
//! `string` attribute as in DSML ([`super::dsml`]). Its tokens are fullwidth `<｜…｜…>`, so
//! it comes before [`super::deepseek`], whose reader takes any `<｜…｜>`.

use super::{
    Dialect, ParseError, Walk,
    dsml::{self, TypedTags},
};

/// What opens one GCML call (`name="f"` follows).
pub const GCML_INVOKE: &str = "<｜GCML｜invoke";

/// What opens a block of calls.
pub const GCML_BLOCKS: [&str; 2] = ["<｜GCML｜tool_calls>", "<｜GCML｜function_calls>"];

pub(super) const DIALECT: Dialect = Dialect {
    markers: &[GCML_BLOCKS[0], GCML_BLOCKS[1], GCML_INVOKE],
    openers: &[GCML_INVOKE],
    noise: &[
        "</｜GCML｜tool_calls>",
        "</｜GCML｜function_calls>",
        "</｜GCML｜invoke>",
    ],
    read: Some(read),
    ..Dialect::NONE
};

const TAGS: TypedTags = TypedTags {
    invoke: GCML_INVOKE,
    name_attr: "name",
    head_end: ">",
    invoke_close: "</｜GCML｜invoke>",
    param: "<｜GCML｜parameter",
    key_attr: "name",
    type_attr: "string",
    string_type: "true",
    param_close: "</｜GCML｜parameter>",
    what: "GCML invoke",
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    dsml::read_typed(w, &GCML_BLOCKS, &TAGS)
}
