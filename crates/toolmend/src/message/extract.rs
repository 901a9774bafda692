//! Extract: calls a model wrote into its text, the prose before them, and thinking
//! leaked into the text.

use serde_json::Value;

use crate::{
    Fix, FixKind, RepairOptions,
    conversation::{AssistantMessage, Content, ToolCall},
    mend::knows_tool,
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

/// The calls written into `text`, each with the fixes its reading took.
///
/// - A block of several calls (each begun by one of [`markers::CALL_OPENERS`]) is read
///   call by call: a call that does not read stays a call (its text as its arguments,
///   for feedback) when it names its tool, and the others go through.
/// - The calls are taken when at least one names a known tool; a call to an unknown tool
///   beside it stays a call (feedback: "no such tool"); a lone call to an unknown tool is
///   text.
/// - The false-positive guard: a call without a call marker (bare JSON, a fence, a
///   pythonic or Gemma call at the start) counts only when it ends the text (template
///   tokens aside) and every document the text holds is a call: an example with prose
///   after it, or JSON quoted in an answer, stays text.
/// - Parameters of XML-style calls (Qwen3 `<parameter=…>`, GLM `<arg_value>`, MiniMax
///   `<parameter name=…>`) are text; each is read by its property's type in the tool's
///   schema ([`typed_xml_value`]).
pub fn read_calls_in_str(text: &str, tools: &Toolbox, opts: &RepairOptions) -> Vec<TextCall> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    // A marker shown in Markdown code (a fence, a code span) is no call: the calls are
    // read from the first marker outside code, and a text whose markers all stand in code
    // is read as bare text only when a JSON call opens it before them (rule 2).
    let found = markers::prose_markers(text);
    let text = match (found.quoted, found.at) {
        (Some(_), Some(at)) => &text[at..],
        (Some(quoted), None) if !has_call_marker(text) && !json_before(text, quoted) => {
            return Vec::new();
        }
        _ => text,
    };
    let openers = markers::call_openers(text);
    let marked = !openers.is_empty() || has_call_marker(text);
    let segments: Vec<&str> = if openers.is_empty() {
        vec![text]
    } else {
        openers
            .iter()
            .zip(openers.iter().skip(1).chain([&text.len()]))
            .map(|(&a, &b)| &text[a..b])
            .collect()
    };
    let mut calls = Vec::new();
    for segment in segments {
        match repair(segment, opts) {
            Ok(repaired) => {
                let total = repaired.calls.len();
                let mut read = Vec::with_capacity(total);
                for c in repaired.calls {
                    if let Some(call) = text_call(c, tools) {
                        read.push(call);
                    }
                }
                if read.len() < total && !marked {
                    // Bare text: a document that is no call makes the whole text prose.
                    return Vec::new();
                }
                calls.extend(read);
            }
            Err(_) if marked => {
                if let Some(name) = named_in(segment) {
                    let mut call = ToolCall::new("", name, segment.trim().to_owned());
                    call.id = None;
                    calls.push(TextCall {
                        call,
                        fixes: Vec::new(),
                    });
                }
            }
            Err(_) => return Vec::new(),
        }
    }
    if !marked && !ends_with_call(text) {
        return Vec::new();
    }
    if calls.iter().any(|c| knows_tool(&c.call.name, tools)) {
        calls
    } else {
        Vec::new()
    }
}

/// A call read from the text, named by its envelope or by a `{"name", "arguments"}`
/// object; its XML-style parameters typed by the tool's schema.
fn text_call(c: crate::repair::RepairedCall, tools: &Toolbox) -> Option<TextCall> {
    let mut fixes = c.fixes;
    let (name, arguments) = match c.name.as_deref() {
        // A bare counter for a name (Kimi K2's `<|tool_call_begin|>0`) names no tool: the
        // call is given the one tool that can take it, else it keeps the counter (a call
        // to no such tool: feedback when another call names a known tool, else the text
        // stays as written).
        Some(counter)
            if counter.bytes().all(|b| b.is_ascii_digit()) && !knows_tool(counter, tools) =>
        {
            match unnamed_call_tool(&c.arguments, tools) {
                Some(name) => {
                    fixes.push(Fix::on(FixKind::ToolNameInferred, "", name.clone()));
                    (name, c.arguments.to_string())
                }
                None => (counter.to_owned(), c.arguments.to_string()),
            }
        }
        Some(name) => {
            let mut args = c.arguments;
            if fixes.iter().any(|f| f.kind == FixKind::XmlParametersRead)
                && let Some(tool) = find_tool(name, tools)
            {
                // Nested elements only where the reader read them (a JSON value a model
                // sent inside a parameter is typed as sent).
                let nested = fixes.iter().any(|f| {
                    f.kind == FixKind::XmlParametersRead && f.detail == markers::NESTED_ELEMENTS
                });
                type_xml_parameters(&mut args, tool.parameters(), nested);
            }
            (name.to_owned(), args.to_string())
        }
        None => {
            let (name, args) = bare_call(&c.arguments)?;
            (name.to_owned(), args)
        }
    };
    let mut call = ToolCall::new("", name, arguments);
    call.id = None;
    Some(TextCall { call, fixes })
}

/// The tool a call that names none (Kimi K2's bare counter id) is for, when only one can
/// take it: the request's one tool, or the one tool whose schema lists every key of the
/// arguments (an object with at least one key). Anything else is no name: the call gets
/// feedback, never a guess.
fn unnamed_call_tool(arguments: &Value, tools: &Toolbox) -> Option<String> {
    if let [only] = tools.tools() {
        return Some(only.name().to_owned());
    }
    let args = arguments.as_object().filter(|a| !a.is_empty())?;
    let mut fitting = tools.tools().iter().filter(|t| {
        t.parameters()
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| args.keys().all(|k| p.contains_key(k)))
    });
    let one = fitting.next()?;
    fitting.next().is_none().then(|| one.name().to_owned())
}

/// True when a call marker stands outside Markdown code in `text`
/// ([`markers::prose_markers`]), a tool-code fence anywhere, or a template token that
/// opens calls at its start ([`markers::LEADING_TOKENS`]).
fn has_call_marker(text: &str) -> bool {
    let b = text.as_bytes();
    markers::starts_with_leading_token(text)
        || markers::prose_markers(text).at.is_some()
        || (0..b.len()).any(|i| b[i] == b'`' && markers::is_tool_code_fence(&text[i..]))
}

/// True when a call without a marker opens `text` before byte `quoted` (a marker shown in
/// code): JSON, a fence that opens JSON, or another [`markers::LEADING_MARKERS`] entry at
/// the start; a fence that opens anything else is the code the marker is shown in.
fn json_before(text: &str, quoted: usize) -> bool {
    markers::first_call_marker(text).is_some_and(|at| {
        let rest = &text[at..];
        at < quoted && (!rest.starts_with(markers::FENCE) || markers::opening(rest) == Some(true))
    })
}

/// The tool a call that did not read names: its `"name": "…"`, or the word after
/// `[TOOL_CALLS]`.
fn named_in(segment: &str) -> Option<String> {
    let head = &segment[..floor_boundary(segment, 512)];
    if let Some(r) = head.strip_prefix(markers::MISTRAL_TOOL_CALLS) {
        let n = r
            .bytes()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
            .count();
        if n > 0 {
            return Some(r[..n].to_owned());
        }
    }
    let at = head.find("\"name\"")?;
    let r = head[at + 6..].trim_start().strip_prefix(':')?.trim_start();
    let r = r.strip_prefix('"')?;
    let end = r.find('"')?;
    (end > 0).then(|| r[..end].to_owned())
}

/// The largest char boundary at or below `n`.
fn floor_boundary(s: &str, n: usize) -> usize {
    let mut end = s.len().min(n);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// The guard for calls without a marker: the text ends where a call ends (`}`, `]`, a
/// closing fence, or `)` of a leading pythonic call), chat-template tokens aside.
fn ends_with_call(text: &str) -> bool {
    let mut t = text.trim_end();
    loop {
        let before = t;
        for tok in ["</s>", "<eos>", "<end_of_turn>", "<|eot_id|>", "<|eom_id|>"] {
            t = t.strip_suffix(tok).unwrap_or(t).trim_end();
        }
        if t.ends_with("|>")
            && let Some(i) = t.rfind("<|")
        {
            t = t[..i].trim_end();
        }
        if t.len() == before.len() {
            break;
        }
    }
    let leading_word = t
        .trim_start()
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b'[');
    t.ends_with('}')
        || t.ends_with(']')
        || t.ends_with(markers::FENCE)
        || (leading_word && t.ends_with(')'))
}

/// The tool `name` resolves to: exactly, or up to case and separators (`functions.`
/// dropped), as [`knows_tool`] resolves it.
fn find_tool<'t>(name: &str, tools: &'t Toolbox) -> Option<&'t crate::schema::CompiledTool> {
    if let Some(t) = tools.get(name) {
        return Some(t);
    }
    let norm = |n: &str| -> String {
        n.strip_prefix("functions.")
            .unwrap_or(n)
            .chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let want = norm(name);
    let mut found = tools.tools().iter().filter(|t| norm(t.name()) == want);
    match (found.next(), found.next()) {
        (Some(t), None) => Some(t),
        _ => None,
    }
}

/// Types every string parameter of `args` by its property's schema (`parameters`). A
/// parameter the schema does not type (no property, or no type) is an object or array
/// when its text is one in JSON, else its text. Arguments written as nested elements
/// (MiniMax M3) are typed the same way at every level; an element that wraps a list's
/// items (`<items><item>…</item><item>…</item></items>`) is that list where the schema
/// wants an array.
fn type_xml_parameters(args: &mut Value, parameters: &Value, nested: bool) {
    type_xml_at(args, parameters, if nested { 0 } else { MAX_XML_TYPING });
}

/// How deep nested elements are typed (as deep as the reader reads them).
const MAX_XML_TYPING: usize = 32;

fn type_xml_at(args: &mut Value, parameters: &Value, depth: usize) {
    let Some(map) = args.as_object_mut() else {
        return;
    };
    let props = parameters.get("properties").and_then(Value::as_object);
    for (key, value) in map.iter_mut() {
        let prop = props.and_then(|p| p.get(key));
        match (&*value, prop) {
            (Value::String(text), Some(prop)) => *value = typed_xml_value(text, prop),
            (Value::String(text), None) => *value = untyped_xml_value(text),
            (Value::Object(_), Some(prop)) if depth < MAX_XML_TYPING => {
                type_xml_nested(value, prop, depth + 1);
            }
            (Value::Array(_), Some(prop)) if depth < MAX_XML_TYPING => {
                type_xml_nested(value, prop, depth + 1);
            }
            _ => {}
        }
    }
}

/// A nested element's value typed by its property's schema `prop`.
fn type_xml_nested(value: &mut Value, prop: &Value, depth: usize) {
    let wants_array = prop.get("type").and_then(Value::as_str) == Some("array");
    if wants_array
        && let Value::Object(map) = &*value
        && map.len() == 1
    {
        // `<items><item>…</item>…</items>`: the wrapper's one element is the list.
        let inner = map.values().next().cloned().unwrap_or(Value::Null);
        *value = match inner {
            Value::Array(items) => Value::Array(items),
            one => Value::Array(vec![one]),
        };
    }
    match value {
        Value::Object(_) => type_xml_at(value, prop, depth),
        Value::Array(items) => {
            let item = prop.get("items").unwrap_or(&Value::Null);
            for v in items {
                match v {
                    Value::String(text) if item.is_object() => *v = typed_xml_value(text, item),
                    Value::Object(_) => type_xml_at(v, item, depth),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// A parameter's text where no type is known: an object or array when it is one in JSON
/// (read strictly), else the text.
fn untyped_xml_value(text: &str) -> Value {
    let t = text.trim();
    if (t.starts_with('{') || t.starts_with('['))
        && let Ok(v) = serde_json::from_str::<Value>(t)
    {
        return v;
    }
    Value::String(text.to_owned())
}

/// An XML-style parameter's text read by its property's schema: `null` for a type that
/// allows null (or any type but string); numbers, booleans, arrays and objects as JSON for
/// those types; strings as they are. A text that does not read as its type stays text
/// (the schema step then reports it). With `string` among the types the text stays a
/// string, JSON or not; without a type an object or array in JSON is read as such.
pub fn typed_xml_value(text: &str, property: &Value) -> Value {
    let types = schema_types(property);
    let allows = |t: &str| types.iter().any(|x| x == t);
    let t = text.trim();
    if types.is_empty() {
        return untyped_xml_value(text);
    }
    if allows("string") && !(allows("null") && t == "null") {
        return Value::String(text.to_owned());
    }
    if t.eq_ignore_ascii_case("null") || t.eq_ignore_ascii_case("none") {
        return Value::Null;
    }
    if allows("boolean") {
        if t.eq_ignore_ascii_case("true") {
            return Value::Bool(true);
        }
        if t.eq_ignore_ascii_case("false") {
            return Value::Bool(false);
        }
    }
    let json_kind = |v: &Value| match v {
        Value::Number(n) => allows("number") || (allows("integer") && (n.is_i64() || n.is_u64())),
        Value::Array(_) => allows("array"),
        Value::Object(_) => allows("object"),
        Value::Bool(_) => allows("boolean"),
        _ => false,
    };
    match serde_json::from_str::<Value>(t) {
        Ok(v) if json_kind(&v) => v,
        _ => Value::String(text.to_owned()),
    }
}

/// The JSON types a property schema allows: its `type` (one or a list), or the types of
/// its `anyOf` / `oneOf` branches.
fn schema_types(property: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match property.get("type") {
        Some(Value::String(t)) => out.push(t.clone()),
        Some(Value::Array(ts)) => {
            out.extend(ts.iter().filter_map(Value::as_str).map(str::to_owned))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = property.get(key) {
            for b in branches {
                out.extend(schema_types(b));
            }
        }
    }
    if out.is_empty() && property.get("enum").is_some() {
        out.push("string".to_owned());
    }
    out
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
    // The gate holds from the same place: a `[` that opens the calls goes with them.
    let cut = if cut < text.len() {
        markers::hold_start(text, cut)
    } else {
        cut
    };
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
/// `[THINK]` …; any ASCII case), an unclosed opening block to the end, and a bare
/// closing tag (the tag alone: what came before it stays, as a stream that sent it can
/// only leave it; a template that opens the block in the prompt is said with
/// [`open_thinking`]). A tag in Markdown code (`` `<think>` `` in an explanation) is the
/// model's text and stays ([`markers::reasoning_spans`]). Returns `None` when there was
/// nothing to remove.
pub fn strip_thinking(text: &str) -> Option<String> {
    remove(text, &markers::reasoning_spans(text, false))
}

/// [`strip_thinking`] in the prose before the first call only: from where a call may
/// begin the text is the calls' own, so a reasoning tag in an argument (a heredoc that
/// writes `</think>`) is kept (`markers::reasoning_spans` with `before_calls`). The
/// calls of a text are read from this.
pub fn strip_thinking_before_calls(text: &str) -> Option<String> {
    remove(text, &markers::reasoning_spans(text, true))
}

/// [`strip_thinking_before_calls`] where a pythonic call to one of `names` begins the
/// calls too (`markers::reasoning_spans_named`: where the streaming gate given those
/// names holds it), so a tag in its arguments is kept.
pub fn strip_thinking_before_calls_named(text: &str, names: &[&str]) -> Option<String> {
    remove(text, &markers::reasoning_spans_named(text, names))
}

/// `text` without `spans` (in order), trimmed; `None` when there are none.
fn remove(text: &str, spans: &[(usize, usize)]) -> Option<String> {
    if spans.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for &(from, to) in spans {
        out.push_str(&text[pos..from]);
        pos = to;
    }
    out.push_str(&text[pos..]);
    Some(out.trim().to_owned())
}

/// The text as a model whose chat template opened a thinking block in the prompt wrote
/// it (DeepSeek-R1's, Qwen3's thinking templates …): the answer begins inside the
/// block, so it is read with its `<think>` put back. Text with no closing tag is then
/// all reasoning, as vLLM's DeepSeek-R1 reasoning parser reads it. Empty text stays empty.
pub fn open_thinking(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    format!("{TEMPLATE_THINKING_TAG}{text}")
}

/// The opening tag a template puts in the prompt ([`open_thinking`]); a stream's gate is
/// given it before the first content.
pub const TEMPLATE_THINKING_TAG: &str = "<think>";

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
        // A bare closing tag: the tag alone goes (what came before stays, as in a stream).
        assert_eq!(
            strip_thinking("plan…</think>Answer").as_deref(),
            Some("plan…Answer")
        );
        assert_eq!(
            strip_thinking("a</think>b</think>c<think>x</think>d").as_deref(),
            Some("abcd")
        );
        // A template that opened the block: all before the closing tag was reasoning.
        assert_eq!(
            strip_thinking(&open_thinking("plan…</think>Answer")).as_deref(),
            Some("Answer")
        );
        assert_eq!(
            strip_thinking(&open_thinking("plan, never closed")).as_deref(),
            Some("")
        );
        assert_eq!(open_thinking(""), "");
        assert_eq!(
            strip_thinking("Answer<think>never closed").as_deref(),
            Some("Answer")
        );
        assert_eq!(strip_thinking("I think so"), None);
        assert_eq!(strip_thinking("<thinker>x"), None);
        // A later bare closing tag goes too, as the streaming gate drops it.
        assert_eq!(
            strip_thinking("<think>x</think>a</think>b").as_deref(),
            Some("ab")
        );
    }

    #[test]
    fn a_thinking_tag_in_code_or_in_a_call_is_the_models_text() {
        // Quoted in Markdown code (SGLang's DeepSeek V4 test): kept, and no block opens.
        let quoted = "Literal `<think>` and `</think>` in an explanation.";
        assert_eq!(strip_thinking(quoted), None);
        assert_eq!(strip_thinking_before_calls(quoted), None);
        assert_eq!(
            strip_thinking("```\n</think>\n```\n<think>x</think>Answer").as_deref(),
            Some("```\n</think>\n```\nAnswer")
        );
        // In a call's argument: kept for the readers; reasoning before the call goes.
        let call = "<think>plan</think><tool_call>{\"name\": \"f\", \"arguments\": \
                    {\"code\": \"x = '</think>'\"}}</tool_call>";
        assert_eq!(
            strip_thinking_before_calls(call).as_deref(),
            Some(&call["<think>plan</think>".len()..])
        );
        let dsml = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter \
                    name=\"a\" string=\"true\">Notes.</think></｜DSML｜parameter>";
        assert_eq!(strip_thinking_before_calls(dsml), None);
        // A leading JSON call is the calls' from its start.
        assert_eq!(strip_thinking_before_calls("{\"a\": \"<think>\"}"), None);
        // A call the model only thought about is reasoning.
        assert_eq!(
            strip_thinking_before_calls("<think><tool_call>{}</tool_call></think>Hi").as_deref(),
            Some("Hi")
        );
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
