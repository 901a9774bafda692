//! Extract: calls a model wrote into its text, the prose before them, and thinking
//! leaked into the text.

use crate::{
    Fix, RepairOptions,
    mend::knows_tool,
    protocol::{AssistantMessage, Content, ToolCall},
    repair::{markers, repair},
    schema::Toolbox,
};

/// Calls a model wrote into its text, as tool calls without ids (the node mints them).
/// Only calls naming a known tool count, so an answer that merely contains JSON is left alone.
/// The fixes that reading them took are dropped: [`read_calls_in_text`] keeps them.
pub fn calls_in_text(
    message: &AssistantMessage,
    tools: &Toolbox,
    opts: &RepairOptions,
) -> Vec<ToolCall> {
    read_calls_in_text(message, tools, opts)
        .into_iter()
        .map(|t| t.call)
        .collect()
}

/// One call read from an assistant message's text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    /// The call, without an id; its arguments are JSON object text.
    pub call: ToolCall,
    /// Every fix reading it took (the envelope unwrapped, prose stripped, a cut-off text
    /// closed …): they belong to the call's record, and a lossy one means the call was
    /// cut off.
    pub fixes: Vec<Fix>,
}

/// [`calls_in_text`], each call with the fixes its reading took.
pub fn read_calls_in_text(
    message: &AssistantMessage,
    tools: &Toolbox,
    opts: &RepairOptions,
) -> Vec<TextCall> {
    match message.text() {
        Some(text) => read_calls_in_str(&text, tools, opts),
        None => Vec::new(),
    }
}

/// The calls written into `text`, each with the fixes its reading took; all or nothing
/// (every call the text holds names a known tool, or none is read).
pub fn read_calls_in_str(text: &str, tools: &Toolbox, opts: &RepairOptions) -> Vec<TextCall> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    let Ok(repaired) = repair(text, opts) else {
        return Vec::new();
    };
    let total = repaired.calls.len();
    let calls: Vec<TextCall> = repaired
        .calls
        .into_iter()
        .filter_map(|c| {
            // A call announced by its envelope (`<tool_call>`, `[TOOL_CALLS]`, `f(a=1)`), or
            // a bare `{"name": …, "arguments"|"parameters": …}` object (Llama-style JSON
            // calls in the text).
            let (name, arguments) = match c.name.as_deref() {
                Some(name) => (name.to_owned(), c.arguments.to_string()),
                None => {
                    let (name, args) = bare_call(&c.arguments)?;
                    (name.to_owned(), args)
                }
            };
            knows_tool(&name, tools).then(|| {
                let mut call = ToolCall::new("", name, arguments);
                call.id = None;
                TextCall {
                    call,
                    fixes: c.fixes,
                }
            })
        })
        .collect();
    // All or nothing: half a reading is not a plan.
    if calls.len() == total {
        calls
    } else {
        Vec::new()
    }
}

/// `{"name": "f", "arguments": {…}}` (or `"parameters"`, or the arguments as JSON text)
/// with nothing else in it: the name and the argument text.
fn bare_call(object: &serde_json::Value) -> Option<(&str, String)> {
    let map = object.as_object()?;
    if map.len() != 2 {
        return None;
    }
    let name = map.get("name")?.as_str()?;
    let args = map.get("arguments").or_else(|| map.get("parameters"))?;
    let text = match args {
        serde_json::Value::Object(_) => args.to_string(),
        serde_json::Value::String(s) => s.clone(),
        _ => return None,
    };
    Some((name, text))
}

/// The prose before the first call written into a text, if any.
pub fn prose_before_calls(text: &str) -> Option<String> {
    prose_before(text, &[])
}

/// [`prose_before_calls`], where a pythonic call of one of `names` (`[get_weather(…`, or a
/// line that starts with `get_weather(`) starts the calls too.
pub fn prose_before(text: &str, names: &[&str]) -> Option<String> {
    // The markers are the one table's (`repair::markers`), which the streaming gate holds.
    let marked = markers::first_call_marker(text);
    let pythonic = names.iter().filter_map(|n| pythonic_start(text, n));
    let cut = marked
        .into_iter()
        .chain(pythonic)
        .min()
        .unwrap_or(text.len());
    let prose = text[..cut].trim();
    (!prose.is_empty()).then(|| prose.to_owned())
}

/// Where a pythonic call of `name` starts: `[name(` (its list), or `name(` at the start of
/// a line.
fn pythonic_start(text: &str, name: &str) -> Option<usize> {
    let needle = format!("{name}(");
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let at = from + i;
        let before = text[..at].trim_end_matches([' ', '\t']);
        if before.ends_with('[') {
            return Some(before.len() - 1);
        }
        if before.is_empty() || before.ends_with('\n') {
            return Some(at);
        }
        from = at + needle.len();
    }
    None
}

/// Removes reasoning a model leaked into its answer: blocks of any tag of
/// [`markers::THINKING_TAGS`] (`<think>…</think>`, `<thinking>`, `<reasoning>`,
/// `[THINK]` …; any ASCII case), an unclosed opening block to the end, and everything
/// before a bare closing tag (templates that open the block in the prompt).
/// Returns `None` when there was nothing to remove.
pub fn strip_thinking(text: &str) -> Option<String> {
    let find_tag = |from: usize, closing: bool| {
        markers::find_thinking(text, from, closing).map(|t| (t.at, t.len))
    };
    let first_open = find_tag(0, false);
    let first_close = find_tag(0, true);
    if first_open.is_none() && first_close.is_none() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut changed = false;
    // A bare closing tag before any opening one: everything before it was thinking.
    if let Some((close_at, close_len)) = first_close
        && first_open.is_none_or(|(open_at, _)| open_at > close_at)
    {
        pos = close_at + close_len;
        changed = true;
    }
    while let Some((open_at, open_len)) = find_tag(pos, false) {
        out.push_str(&text[pos..open_at]);
        changed = true;
        match find_tag(open_at + open_len, true) {
            Some((close_at, close_len)) => pos = close_at + close_len,
            None => {
                pos = text.len();
                break;
            }
        }
    }
    out.push_str(&text[pos..]);
    changed.then(|| out.trim().to_owned())
}

/// The text of `content` with thinking removed, or `None` when nothing changed.
pub(crate) fn strip_content(content: &Content) -> Option<Content> {
    match content {
        Content::Text(t) => strip_thinking(t).map(Content::Text),
        Content::Parts(parts) => {
            let mut changed = false;
            let parts = parts
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    if let Some(t) = p.text.as_deref()
                        && let Some(s) = strip_thinking(t)
                    {
                        p.text = Some(s);
                        changed = true;
                    }
                    p
                })
                .collect();
            changed.then_some(Content::Parts(parts))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_is_removed_in_every_form() {
        assert_eq!(
            strip_thinking("<think>plan</think>Hello").as_deref(),
            Some("Hello")
        );
        assert_eq!(
            strip_thinking("A <THINKING>x</Thinking> B").as_deref(),
            Some("A  B")
        );
        assert_eq!(
            strip_thinking("plan…</think>Answer").as_deref(),
            Some("Answer")
        );
        assert_eq!(
            strip_thinking("Answer<think>never closed").as_deref(),
            Some("Answer")
        );
        assert_eq!(strip_thinking("I think so"), None);
        assert_eq!(strip_thinking("<thinker>x"), None);
    }

    #[test]
    fn prose_before_calls_is_kept() {
        assert_eq!(
            prose_before_calls("Let me check.\n<tool_call>{}</tool_call>").as_deref(),
            Some("Let me check.")
        );
        assert_eq!(prose_before_calls("<tool_call>{}</tool_call>"), None);
        assert_eq!(prose_before("[f(a=1), g(b=2)]", &["f", "g"]), None);
        assert_eq!(
            prose_before("Checking.\n[ f(a=1)]", &["f"]).as_deref(),
            Some("Checking.")
        );
        assert_eq!(
            prose_before("Checking.\nf(a=1)", &["f"]).as_deref(),
            Some("Checking.")
        );
        assert_eq!(
            prose_before("call f(a=1) later", &["f"]).as_deref(),
            Some("call f(a=1) later")
        );
    }
}
