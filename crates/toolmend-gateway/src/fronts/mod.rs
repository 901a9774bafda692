//! The fronts: one folder per wire API. A front converts its requests and answers to
//! the pipeline's neutral messages and back, and decides nothing about calls on its own.
//! Each uses `server` and `pipeline`, never another front (a later `responses/` and
//! `anthropic/` sit next to `chat_completions/` the same way). `tools/` is toolmend's own
//! wire: `POST /v1/tools/execute`.

pub(crate) mod chat_completions;
pub(crate) mod tools;
