//! Chat-template tokens `<|…|>`. A call token opens calls (Llama 3.1's `<|python_tag|>`,
//! Llama 4's `<|python_start|>`, LFM2's `<|tool_call_start|>`, Granite, Phi-4,
//! Functionary-style templates, Kimi K2's, InternLM's `<|action_start|>` and Cohere's
//! `<|START_ACTION|>`); any other is template noise.

use super::{
    super::{markers, parser::is_ident},
    Dialect, ParseError, Walk, harmony, kimi,
};
use crate::FixKind;

pub(super) const DIALECT: Dialect = Dialect {
    call_tokens: &[
        "<|python_tag|>",
        "<|python_start|>",
        "<|tool_call|>",
        "<|function_call|>",
        "<|tool_calls_begin|>",
        "<|tool_call_start|>",
        // InternLM2 / Intern-S1: `<|action_start|><|plugin|>{"name", "parameters"}<|action_end|>`
        // (`<|plugin|>` and `<|action_end|>` are noise inside it).
        "<|action_start|>",
        // Cohere Command: `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f",
        // "parameters": {…}}, …]<|END_ACTION|>`.
        "<|START_ACTION|>",
    ],
    read: Some(read),
    ..Dialect::NONE
};

fn read(w: &mut Walk<'_>) -> Option<Result<(), ParseError>> {
    let at = w.pos;
    let rest = w.rest();
    if !rest.starts_with("<|") {
        return None;
    }
    let end = rest.as_bytes().iter().take(64).position(|&c| c == b'>')?;
    if end < 3 || rest.as_bytes()[end - 1] != b'|' {
        return None;
    }
    let token = &rest[2..end - 1];
    w.pos = at + end + 1;
    if markers::is_call_token(&rest[..=end]) {
        w.out.envelope_call = true;
        w.global(FixKind::PythonTagUnwrapped, at);
        kimi::read_call_id(w, &rest[..=end]);
    } else {
        w.global(FixKind::SpecialTokensStripped, at);
    }
    if matches!(token, "im_start" | "start_header_id" | "start") {
        // The role name that follows (`assistant`) is part of the token.
        let r = w.pos;
        let mut i = r;
        while i < w.b.len() && is_ident(w.b[i]) && w.b[i] < 0x80 {
            i += 1;
        }
        if i - r <= 12 {
            w.pos = i;
        }
        // harmony: `<|start|>assistant to=functions.name<|channel|>…`.
        harmony::read_role_recipient(w);
    }
    Some(Ok(()))
}
