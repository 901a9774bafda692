//! The one table of thinking tags and call markers.
//!
//! Three readers of a model's text must agree on what in it is reasoning and where a call
//! written into it begins: the repair parser (the envelope walk unwraps these tags), the
//! extractor (`message::extract`: the prose before the first call, thinking removed from
//! content) and the streaming gate (`stream::gate`: what it holds back rather than let a
//! call reach the client as text). They all read this table, so a marker added here is
//! known to all three, and a test (`stream::gate`'s) fails if the gate would release a
//! marker the parser unwraps.
//!
//! The call markers are not written here: each dialect's file in the envelope walk declares
//! its own, and the tables below are derived from the walk's one list of dialects, so the
//! walk cannot read a marker this table lacks.
//!
//! A call marker shown in Markdown code (a fence, a code span: [`Code`]) begins no call
//! for the extractor and the gate: an answer quoting a call's syntax is prose.
//!
//! Matching: call markers are matched exactly (chat-template tokens are case-sensitive);
//! thinking tags are matched ignoring ASCII case by the extractor and the gate
//! (`<THINKING>` is seen in the wild), exactly by the parser inside argument text.

/// Reasoning blocks a model may leak into its text: (opening tag, closing tag).
pub const THINKING_TAGS: &[(&str, &str)] = &[
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<thought>", "</thought>"),
    ("<reflection>", "</reflection>"),
    ("[THINK]", "[/THINK]"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
    // Seed-OSS (its `<seed:cot_budget_reflect>` notes stand inside the block).
    ("<seed:think>", "</seed:think>"),
    // Cohere Command A reasoning.
    ("<|START_THINKING|>", "<|END_THINKING|>"),
    // Solar Open 2.
    ("<|think:start|>", "<|think:end|>"),
    // Gemma 4's reasoning channel: `<|channel>thought\n…<channel|>` (the only channel it
    // opens so; harmony's `<|channel|>` is another token).
    ("<|channel>", "<channel|>"),
];

use super::envelope::{Table, collect, count};
pub use super::envelope::{
    apertus::APERTUS_PREFIX,
    deepseek::{DEEPSEEK_CALL_BEGIN, DEEPSEEK_SEP},
    dsml::{DSML_BLOCKS, DSML_INVOKE, DSML_TOKEN, DSML_WRAPPERS},
    functools::FUNCTOOLS,
    gemma::{GEMMA_CALL, GEMMA_CALL_START, TOOL_CODE_LANGS},
    gemma4::{
        GEMMA4_CALL_START, GEMMA4_DEGRADED_START, GEMMA4_STRING, at_line_start, bare_call_at,
        bare_call_read,
    },
    gigachat::{GIGACHAT_CALL, GIGACHAT_ROLE},
    harmony::{HARMONY_CHANNEL, HARMONY_MESSAGE},
    hermes::TOOL_CALL_TAGS,
    hunyuan::{HUNYUAN_CALL, HUNYUAN_CALLS},
    kimi::KIMI_ARGUMENT_BEGIN,
    kimi3::{
        KIMI3_CALL, KIMI3_MESSAGE_CLOSE, KIMI3_RESPONSE_CLOSE, KIMI3_RESPONSE_OPEN, KIMI3_TOOLS,
    },
    minicpm::MINICPM_FUNCTION,
    minimax::{MINIMAX3_SEP, NESTED_ELEMENTS, XML_INVOKE},
    mistral::MISTRAL_TOOL_CALLS,
    qwen_coder::XML_FUNCTION,
    step::{STEP_CALL_BEGIN, STEP_INVOKE, STEP_SEP},
};

/// Chat-template tokens that open tool calls (`<|python_tag|>`: Llama 3.1;
/// `<|tool_call_start|>`: LFM2; `<|tool_calls_section_begin|>` and `<|tool_call_begin|>`:
/// Kimi K2; the others: Llama 4, Granite, Phi-4, Functionary-style templates). Any other
/// `<|…|>` token is template noise.
pub const CALL_TOKENS: &[&str] =
    &collect::<{ count(&[], Table::CallTokens) }>(&[], Table::CallTokens);

/// A code fence.
pub const FENCE: &str = "```";

/// A chat-template token that opens the reply (Kimi K3's `<|open|>response<|sep|>`, which
/// its template normally writes in the prompt): at the start of a text (after whitespace
/// or reasoning) it is no prose, and the plan and the streaming gate drop it.
pub const REPLY_OPEN: &str = KIMI3_RESPONSE_OPEN;

/// Chat-template tokens that end the reply (Kimi K3's `<|close|>response<|sep|>` and
/// `<|close|>message<|sep|>`): call markers, so the content is the prose before them;
/// at the end of a text with no call they are dropped.
pub const REPLY_CLOSE: &[&str] = &[KIMI3_RESPONSE_CLOSE, KIMI3_MESSAGE_CLOSE];

/// `text` without the tokens that frame a reply ([`REPLY_OPEN`] at its start, after
/// whitespace; [`REPLY_CLOSE`] tokens at its end, before whitespace), trimmed; `None`
/// when there are none.
pub fn unframe_reply(text: &str) -> Option<&str> {
    let mut t = text.trim();
    let mut changed = false;
    if let Some(rest) = t.strip_prefix(REPLY_OPEN) {
        t = rest.trim_start();
        changed = true;
    }
    while let Some(rest) = REPLY_CLOSE.iter().find_map(|c| t.strip_suffix(c)) {
        t = rest.trim_end();
        changed = true;
    }
    changed.then_some(t)
}

/// Every marker that begins a call wherever it stands in a text (outside Markdown code,
/// [`prose_markers`]): the openers of
/// [`TOOL_CALL_TAGS`], the [`CALL_TOKENS`], [`MISTRAL_TOOL_CALLS`], [`XML_FUNCTION`],
/// [`GEMMA_CALL_START`], [`APERTUS_PREFIX`], [`GIGACHAT_CALL`], [`MINICPM_FUNCTION`],
/// Hunyuan's suffixed tags ([`HUNYUAN_CALLS`]), DeepSeek's `<｜tool▁calls▁begin｜>` family,
/// Step-3's `<｜tool_calls_begin｜>` family and harmony's channel (`<|channel|>`,
/// `<|start|>assistant to=`). A tool-code fence ([`TOOL_CODE_LANGS`]) begins a call too; it is told by
/// [`is_tool_code_fence`] where fences are read.
pub const CALL_MARKERS: &[&str] = &collect::<{ count(&[], Table::Markers) }>(&[], Table::Markers);

/// The markers each of which begins one call of a block (its own segment: a block of
/// several calls is read call by call, so a broken call fails alone). Markers that open a
/// whole list (`[TOOL_CALLS][…]`, `<|tool_call_start|>[…]`, `<function_calls>`) are not
/// among them.
pub const CALL_OPENERS: &[&str] = &collect::<{ count(&[], Table::Openers) }>(&[], Table::Openers);

/// What begins a call only at the start of a text (after whitespace, chat-template
/// envelope or a thinking block): a JSON object or list, a code fence, Gemma's `call:`, a
/// bare [`XML_INVOKE`], Phi-4-mini's [`FUNCTOOLS`], GigaChat 3's role header. A pythonic call
/// `f(a=1)` counts there too ([`leading_call`]). Elsewhere they are everyday prose (code
/// in an answer, `{}` in an explanation), and the streaming gate releases them.
pub const LEADING_MARKERS: &[&str] =
    &collect::<{ count(&["{", "[", FENCE], Table::Leading) }>(&["{", "[", FENCE], Table::Leading);

/// Leading markers that are template tokens, not a syntax prose uses: a text that starts
/// with one is a call however it goes on (Phi-4-mini's `functools[`, GigaChat 3's role
/// header). A bare JSON object, a fence or `call:` must end the text to be one.
pub const LEADING_TOKENS: &[&str] = &[FUNCTOOLS, GIGACHAT_ROLE];

/// True when `text` starts (after whitespace) with a [`LEADING_TOKENS`] entry.
pub fn starts_with_leading_token(text: &str) -> bool {
    let t = text.trim_start();
    LEADING_TOKENS.iter().any(|m| t.starts_with(m))
}

/// The longest tool name a pythonic leading call may have (OpenAI's limit on names).
const MAX_NAME: usize = 64;

/// The call marker that starts at byte `at` of `text`, if any.
pub fn call_marker_at(text: &str, at: usize) -> Option<&'static str> {
    let rest = text.as_bytes().get(at..)?;
    CALL_MARKERS
        .iter()
        .copied()
        .find(|m| rest.starts_with(m.as_bytes()))
}

/// How far the backticks that close a code span are looked for, in bytes from its
/// opening backticks: past it the backticks are text.
pub const MAX_SPAN: usize = 1024;

/// Whether a byte of prose stands in Markdown code ([`Code::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InCode {
    /// It is prose.
    No,
    /// It is code: a call marker here is shown, not called.
    Yes,
    /// More text decides (a stream's gate keeps it back).
    Undecided,
}

impl InCode {
    fn of(code: bool) -> Self {
        if code { InCode::Yes } else { InCode::No }
    }
}

/// Where prose stands in Markdown code, read byte by byte, so that a call marker a model
/// only shows is not called.
///
/// - A fenced block: a line that starts (after spaces or tabs) with three or more
///   backticks or tildes opens it; a line that starts with as many or more of the same
///   closes it; both lines are code. Unclosed, it runs to the end.
/// - A code span: a run of backticks elsewhere, closed by the next run of exactly as
///   many within [`MAX_SPAN`] bytes, before a blank line; without one the backticks are
///   text.
/// - A thinking tag inside code is code (`` `<think>` `` quoted in an answer). One in
///   prose opens (or closes) a reasoning block; inside a block, the next thinking tag
///   ends it and any code opened in it (a span in a block is also closed only before
///   that tag): reasoning is not inside an answer's code.
/// - A run of more than [`MAX_SPAN`] backticks or tildes opens and closes nothing.
///
/// The state after a text is all a reader of what follows needs (the streaming gate
/// keeps it for the text it has released); each byte is read once, and a span's closing
/// run is looked for at most [`MAX_SPAN`] bytes on: linear in the text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Code {
    /// Inside a fenced block: its character and how many of it opened the block.
    fence: Option<(u8, usize)>,
    /// Inside a code span: how many backticks opened it.
    span: Option<usize>,
    /// The rest of a fence line (an info string, or after a closing fence): code.
    fence_line: bool,
    /// Something other than spaces or tabs stands on the line so far.
    mid_line: bool,
    /// Bytes left of a run or a thinking tag already read, and whether they are code.
    skip: usize,
    skip_code: bool,
    /// Inside a run of this character longer than [`MAX_SPAN`] (a stream may still be
    /// sending it): it opens and closes nothing.
    long_run: Option<u8>,
    /// Inside a reasoning block opened in prose: its next thinking tag ends it.
    thinking: bool,
}

impl Code {
    /// Reads byte `i` of `text` (call it for every byte, in order, from where the state
    /// was left). `complete`: the text ends here (else more may follow, and a run at its
    /// end, or a span whose closing run may still come, is [`InCode::Undecided`]; the
    /// state is then left as it was).
    pub fn step(&mut self, text: &str, i: usize, complete: bool) -> InCode {
        let b = text.as_bytes();
        if self.skip > 0 {
            self.skip -= 1;
            return InCode::of(self.skip_code);
        }
        let inside = self.fence.is_some() || self.span.is_some() || self.fence_line;
        if let Some(c) = self.long_run {
            if b[i] == c {
                return InCode::of(inside);
            }
            self.long_run = None;
        }
        match b[i] {
            b'\n' => {
                self.mid_line = false;
                self.fence_line = false;
                return InCode::of(inside);
            }
            b' ' | b'\t' | b'\r' => return InCode::of(inside),
            c @ (b'`' | b'~') => {
                let n = b[i..].iter().take_while(|&&x| x == c).count();
                if n > MAX_SPAN {
                    // Longer than a span is looked for: no fence, no span, whatever
                    // more of it a stream sends.
                    self.mid_line = true;
                    self.long_run = Some(c);
                    return InCode::of(inside);
                }
                if i + n == b.len() && !complete {
                    return InCode::Undecided;
                }
                let code = match self.run(text, i, c, n, complete) {
                    Some(code) => code,
                    None => return InCode::Undecided,
                };
                self.mid_line = true;
                self.skip = n - 1;
                self.skip_code = code;
                return InCode::of(code);
            }
            b'<' | b'[' if !inside || self.thinking => {
                if let Some(t) = thinking_tag_at(text, i) {
                    *self = Code {
                        mid_line: true,
                        skip: t.len - 1,
                        thinking: !t.closing,
                        ..Code::default()
                    };
                    return InCode::No;
                }
            }
            _ => {}
        }
        self.mid_line = true;
        InCode::of(inside)
    }

    /// A run of `n` of `c` at `i`: whether it is code (its state changes made), or
    /// `None` when more text decides.
    fn run(&mut self, text: &str, i: usize, c: u8, n: usize, complete: bool) -> Option<bool> {
        let line_start = !self.mid_line;
        if self.fence_line {
            return Some(true);
        }
        if let Some((fc, fn_)) = self.fence {
            if line_start && c == fc && n >= fn_ {
                self.fence = None;
                self.fence_line = true;
            }
            return Some(true);
        }
        if let Some(k) = self.span {
            if c == b'`' && n == k {
                self.span = None;
            }
            return Some(true);
        }
        if line_start && n >= 3 {
            self.fence = Some((c, n));
            self.fence_line = true;
            return Some(true);
        }
        if c != b'`' {
            return Some(false);
        }
        let closed = span_closes(text, i + n, n, complete, self.thinking)?;
        if closed {
            self.span = Some(n);
        }
        Some(closed)
    }
}

impl Code {
    /// True when a thinking tag at the next byte stands in code (quoted, not reasoning):
    /// inside a fence or a span opened outside a reasoning block.
    pub fn quotes_tag(&self) -> bool {
        (self.fence.is_some() || self.span.is_some() || self.fence_line) && !self.thinking
    }
}

/// The reasoning a model leaked into `text`, as byte ranges to remove, in order: each
/// block of a [`THINKING_TAGS`] pair (an unclosed opening one to the end) and each bare
/// closing tag (the tag alone), wherever it stands in prose. A tag in Markdown code
/// ([`Code`]) is the model's text, quoted. With `before_calls`, only the prose before the
/// first call counts: from where a call may begin (a [`CALL_MARKERS`] entry outside code,
/// a fence or object [`opening`] one, a [`LEADING_MARKERS`] entry at the start or right
/// after a block) the text is the calls' own, and a tag there (in an argument, say) is
/// kept. The streaming gate strips the same (it holds from the same place). Linear in
/// the text.
pub fn reasoning_spans(text: &str, before_calls: bool) -> Vec<(usize, usize)> {
    spans(text, before_calls, &[])
}

/// [`reasoning_spans`] before the calls, where a pythonic call `name(` to one of `names`
/// (tool names, compared by [`name_key`]) begins the calls too, where the streaming gate
/// holds it ([`crate::stream::ContentGate::with_call_names`]): at the start of the text
/// or right after a block, at the start of a line, after `[`.
pub fn reasoning_spans_named(text: &str, names: &[&str]) -> Vec<(usize, usize)> {
    let keys: Vec<String> = names.iter().map(|n| name_key(n)).collect();
    spans(text, true, &keys)
}

/// OpenAI's namespace for function names, dropped before names are compared.
const NAME_PREFIX: &str = "functions.";

/// A tool name as pythonic call names are compared: `functions.` dropped, ASCII letters
/// and digits only, lowercase.
pub fn name_key(name: &str) -> String {
    name.strip_prefix(NAME_PREFIX)
        .unwrap_or(name)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// True when `rest` begins a pythonic call `name(` whose name's key is among `keys`.
fn names_call(rest: &str, keys: &[String]) -> bool {
    !keys.is_empty()
        && leading_call(rest) == Leading::Call
        && rest
            .find('(')
            .is_some_and(|e| keys.contains(&name_key(&rest[..e])))
}

fn spans(text: &str, before_calls: bool, keys: &[String]) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut code = Code::default();
    let mut out = Vec::new();
    let mut i = 0;
    let mut at_start = true;
    while i < b.len() {
        if at_start && before_calls && !b[i].is_ascii_whitespace() {
            at_start = false;
            let rest = &text[i..];
            if thinking_tag_at(text, i).is_none()
                && (LEADING_MARKERS.iter().any(|m| rest.starts_with(m))
                    && !fence_shows_marker(rest)
                    || names_call(rest, keys))
            {
                break;
            }
        }
        if matches!(b[i], b'<' | b'[')
            && !code.quotes_tag()
            && let Some(t) = thinking_tag_at(text, i)
        {
            // The block is not stepped through `code`: what follows it is read as if it
            // were not there, as a reader of the stripped text (and the gate) reads it.
            let end = if t.closing {
                i + t.len
            } else {
                find_thinking(text, i + t.len, true).map_or(b.len(), |c| c.at + c.len)
            };
            out.push((i, end));
            i = end;
            at_start = true;
            continue;
        }
        let prose = code.step(text, i, true) != InCode::Yes;
        let after = || text[i + 1..].trim_start_matches([' ', '\t']);
        let call = before_calls
            && match b[i] {
                b'`' => opening(&text[i..]) == Some(true),
                b'{' => prose && opening(&text[i..]) == Some(true),
                b'<' => prose && call_marker_at(text, i).is_some(),
                b'[' => prose && (call_marker_at(text, i).is_some() || names_call(after(), keys)),
                b'\n' => names_call(after(), keys),
                _ => false,
            };
        if call {
            break;
        }
        i += 1;
    }
    out
}

/// Whether a run of exactly `n` backticks follows `from` within [`MAX_SPAN`] bytes, before
/// a blank line (and, in a reasoning block, before a thinking tag: `in_block`); `None`
/// when the text ends first and more may follow.
fn span_closes(text: &str, from: usize, n: usize, complete: bool, in_block: bool) -> Option<bool> {
    let b = text.as_bytes();
    let end = b.len().min(from + MAX_SPAN);
    let mut j = from;
    let mut blank = false;
    while j < end {
        match b[j] {
            b'`' => {
                let mut m = 0;
                while j < end && b[j] == b'`' {
                    j += 1;
                    m += 1;
                }
                if j == b.len() && !complete {
                    return None;
                }
                if m == n && (j == b.len() || b[j] != b'`') {
                    return Some(true);
                }
                blank = false;
                continue;
            }
            b'\n' if blank => return Some(false),
            b'\n' => blank = true,
            b' ' | b'\t' | b'\r' => {}
            b'<' | b'[' if in_block && thinking_tag_at(text, j).is_some() => return Some(false),
            _ => blank = false,
        }
        j += 1;
    }
    if end == b.len() && !complete {
        None
    } else {
        Some(false)
    }
}

/// Where call markers stand in a whole text, Markdown code told apart ([`Code`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProseMarkers {
    /// The first call marker outside code: where calls may begin.
    pub at: Option<usize>,
    /// The first call marker inside code before it: shown, not called.
    pub quoted: Option<usize>,
}

/// The first call marker ([`CALL_MARKERS`]) outside Markdown code in `text`, and the
/// first one inside code before it. Code is read only up to the first marker outside
/// it: what follows is a call's own text. Linear in the text.
pub fn prose_markers(text: &str) -> ProseMarkers {
    let b = text.as_bytes();
    let mut code = Code::default();
    let mut out = ProseMarkers::default();
    for (i, &c) in b.iter().enumerate() {
        let in_code = code.step(text, i, true);
        if matches!(c, b'<' | b'[') && prose_call_marker_at(text, i).is_some() {
            if in_code == InCode::Yes {
                out.quoted.get_or_insert(i);
            } else {
                out.at = Some(i);
                break;
            }
        }
    }
    out
}

/// The byte offsets where each call of a block begins ([`CALL_OPENERS`]), in order.
/// A Gemma 4 call without its opener before the first of them starts a part at the
/// text's start.
/// An opener that is no call marker by itself (a bare `<invoke name=`) counts only at the
/// start of the text or after a call marker: after prose it is prose. A marker shown in
/// Markdown code before the first one outside it ([`prose_markers`]) begins no call.
/// Linear in the text.
pub fn call_openers(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let start = b.len() - text.trim_start().len();
    let first = prose_markers(text).at.unwrap_or(b.len());
    let mut marked = false;
    let mut out = Vec::new();
    for i in (0..b.len()).filter(|&i| matches!(b[i], b'<' | b'[')) {
        let marker = i >= first && call_marker_at(text, i).is_some();
        if CALL_OPENERS
            .iter()
            .any(|m| b[i..].starts_with(m.as_bytes()))
            && (marker || marked || i == start)
        {
            out.push(i);
        }
        marked |= marker;
    }
    // A Gemma 4 call without its opener before the first opener ([`bare_call_at`]) is
    // read with the text before it (its line start tells it: a segment of its own would
    // start with it), not left out of every segment.
    if let Some(&o) = out.first()
        && o > start
        && let Some(p) = first_call_marker(text)
        && p < o
        && bare_call_at(text, p, b[p] != b'<') == Some(true)
    {
        out.insert(0, 0);
    }
    out
}

/// Where held text before a marker at `at` begins: the whitespace before it, and a `[`
/// that opens a list of calls (`Sure! [{"name": …}]`) with its whitespace, and damaged
/// DSML tokens right before a DSML marker ([`dsml_junk_start`]). The gate holds from here
/// and the extractor cuts the prose here, so no lone `[` is left.
pub fn hold_start(text: &str, at: usize) -> usize {
    let b = text.as_bytes();
    let mut i = dsml_junk_start(text, at);
    // MiniMax M3's separator before its block's tag goes with the block.
    if text[..i].ends_with(MINIMAX3_SEP) {
        i -= MINIMAX3_SEP.len();
    }
    while i > 0 && b[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    if i > 0 && b[i - 1] == b'[' && b.get(at) == Some(&b'{') {
        // `[\n  {` as well as `[{`.
        i -= 1;
        while i > 0 && b[i - 1].is_ascii_whitespace() {
            i -= 1;
        }
    }
    i
}

/// The call marker at byte `at` of `text` ([`call_marker_at`]) unless it is a damaged DSML
/// wrapper that stands as prose ([`dsml_wrapper_is_prose`]).
pub fn prose_call_marker_at(text: &str, at: usize) -> Option<&'static str> {
    call_marker_at(text, at).filter(|_| !dsml_wrapper_is_prose(text, at))
}

/// How far a damaged DSML token is read (its `>` looked for), in bytes.
const MAX_DSML_TOKEN: usize = 256;

/// Quotes that open a quotation in prose (the backtick is Markdown code, [`Code`]).
const OPENING_QUOTES: [char; 6] = ['\'', '"', '“', '‘', '«', '「'];

/// True when the character before byte `at` opens a quotation.
fn quoted_at(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_some_and(|c| OPENING_QUOTES.contains(&c))
}

/// True when a damaged DSML wrapper at `at` (`<｜DSML｜toolcalls>`, a [`DSML_WRAPPERS`]
/// beginning that is no whole [`DSML_BLOCKS`] tag) is prose, not a model's broken opener:
/// it stands in quotes (`Example: '<｜DSML｜toolcalls>'`), or its tag closes on its line
/// and more text follows it there. A broken opener is the line's last thing (a tag
/// closed, or text that never closes it: `<｜DSML｜tool_calls-ok Let's scan.`).
pub fn dsml_wrapper_is_prose(text: &str, at: usize) -> bool {
    let rest = &text[at..];
    if !DSML_WRAPPERS.iter().any(|w| rest.starts_with(w))
        || DSML_BLOCKS.iter().any(|b| rest.starts_with(b))
    {
        return false;
    }
    if quoted_at(text, at) {
        return true;
    }
    let line = rest.split('\n').next().unwrap_or("");
    line.find('>')
        .is_some_and(|k| !line[k + 1..].trim().is_empty())
}

/// Where the damaged DSML tokens written right before a DSML marker at `at` begin (`at`
/// when there are none): each a `<｜DSML｜…>` on one line (`<｜DSML｜ SugarPanel>`), not
/// after an opening quote, with only whitespace between it and what follows. Such a token
/// is the model's broken opener, no prose: the content ends before it. `text[at..]` may
/// be a DSML token's beginning only (a stream's gate, which holds from the same place).
pub fn dsml_junk_start(text: &str, at: usize) -> usize {
    let rest = &text[at..];
    if rest.is_empty() || !(rest.starts_with(DSML_TOKEN) || DSML_TOKEN.starts_with(rest)) {
        return at;
    }
    let mut i = at;
    loop {
        let before = text[..i].trim_end_matches(|c: char| c.is_ascii_whitespace());
        if !before.ends_with('>') {
            return i;
        }
        let mut from = before.len().saturating_sub(MAX_DSML_TOKEN);
        while !before.is_char_boundary(from) {
            from += 1;
        }
        let Some(t) = before[from..].rfind(DSML_TOKEN).map(|t| from + t) else {
            return i;
        };
        if before[t..].contains('\n') || quoted_at(text, t) {
            return i;
        }
        i = t;
    }
}

/// True while a DSML token at `at` that is no call marker (`<｜DSML｜ SugarPanel>`) may
/// still be a broken opener ([`dsml_junk_start`]): its `>` has not come yet (within
/// `MAX_DSML_TOKEN` (256) bytes, on its line), or only whitespace has come after it. A stream's
/// gate keeps it back until what follows decides.
pub fn dsml_token_pending(text: &str, at: usize) -> bool {
    let rest = &text[at..];
    if !rest.starts_with(DSML_TOKEN) || quoted_at(text, at) {
        return false;
    }
    match rest.find(['>', '\n']) {
        None => rest.len() < MAX_DSML_TOKEN,
        Some(k) if rest.as_bytes()[k] == b'>' => {
            let after = &rest[k + 1..];
            after.len() < MAX_DSML_TOKEN && after.bytes().all(|c| c.is_ascii_whitespace())
        }
        Some(_) => false,
    }
}

/// The language named right after a code fence at the start of `rest` (```` ```json ````
/// gives `json`), if `rest` starts with a fence.
pub fn fence_lang(rest: &str) -> Option<&str> {
    let after = rest.strip_prefix(FENCE)?;
    let n = after
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'+'))
        .count();
    Some(&after[..n])
}

/// True when `rest` starts with a fence whose language marks a call ([`TOOL_CODE_LANGS`]).
pub fn is_tool_code_fence(rest: &str) -> bool {
    fence_lang(rest).is_some_and(|l| TOOL_CODE_LANGS.contains(&l))
}

/// True when `token` (a whole `<|…|>` chat-template token) opens tool calls.
pub fn is_call_token(token: &str) -> bool {
    CALL_TOKENS.contains(&token)
}

/// Where the first call written into `text` may begin: the first [`CALL_MARKERS`] entry
/// outside Markdown code ([`prose_markers`]), the first fence, or object outside code,
/// that [`opening`] says opens a call (a JSON call after prose is read by the parser too;
/// `hi{hi` is prose), or a [`LEADING_MARKERS`] entry at the start. Linear in the text:
/// [`opening`] looks at most [`MAX_UNDECIDED`] bytes on.
pub fn first_call_marker(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let start = b.len() - text.trim_start().len();
    if LEADING_MARKERS
        .iter()
        .any(|m| b[start..].starts_with(m.as_bytes()))
        && !fence_shows_marker(&text[start..])
    {
        return Some(start);
    }
    let mut code = Code::default();
    // A Gemma 4 call without its opener is read once at most (the walk reads no other
    // after one that does not read): only the first with the evidence counts.
    let mut bare_seen = false;
    (0..b.len()).find(|&i| {
        let prose = code.step(text, i, true) != InCode::Yes;
        match b[i] {
            b'`' => opening(&text[i..]) == Some(true),
            b'{' => prose && opening(&text[i..]) == Some(true),
            b'<' if prose && prose_call_marker_at(text, i).is_some() => true,
            b'<' | b'c' if prose && !bare_seen => {
                let line = b[i] == b'c' && i > start && at_line_start(b, i);
                (line || b[i] == b'<') && bare_call_at(text, i, line) == Some(true) && {
                    bare_seen = true;
                    gemma4_bare_call_reads(text, i)
                }
            }
            b'[' => prose && prose_call_marker_at(text, i).is_some(),
            _ => false,
        }
    })
}

/// True when the Gemma 4 call without its opener at `at` ([`bare_call_at`]) reads whole
/// (its braces close): the walk reads it as a call.
fn gemma4_bare_call_reads(text: &str, at: usize) -> bool {
    bare_call_read(text, at, super::RepairOptions::default().max_depth).is_some()
}

/// True when `rest` starts with a fence whose first line after its info string opens
/// with a call marker: the marker is shown in code ([`Code`]).
fn fence_shows_marker(rest: &str) -> bool {
    let Some(lang) = fence_lang(rest) else {
        return false;
    };
    let body = &rest[FENCE.len() + lang.len()..];
    let at = rest.len() - body.trim_start().len();
    call_marker_at(rest, at).is_some()
}

/// How far a fence's info string and whitespace, or an object's opening, is followed
/// before it counts as prose.
pub const MAX_UNDECIDED: usize = 64;

/// The first keys of an object that is a call written into the text.
const CALL_KEYS: [&str; 3] = ["name", "arguments", "parameters"];

/// Whether a fence or an object that opens `rest` (mid-text) begins a call: a fence
/// whose info string and whitespace are followed by `{` or `[`; an object whose first
/// key is one of `CALL_KEYS` (`name`, `arguments`, `parameters`). `None` while the text so far cannot tell (a streaming
/// gate waits; a whole text has no call there). The gate and the prose cut share it, so
/// the prose a stream releases is the prose a plan keeps.
pub fn opening(rest: &str) -> Option<bool> {
    let b = rest.as_bytes();
    let undecided = |j: usize| if j > MAX_UNDECIDED { Some(false) } else { None };
    if b[0] == b'`' {
        if b.len() < FENCE.len() {
            return if FENCE.starts_with(rest) {
                None
            } else {
                Some(false)
            };
        }
        if !rest.starts_with(FENCE) {
            return Some(false);
        }
        let mut j = FENCE.len();
        while j < b.len() && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'_' | b'-' | b'+')) {
            j += 1;
        }
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if j >= b.len() {
            return undecided(j);
        }
        // A tool-code fence (Gemma 3) holds a call whatever follows; another fence only
        // when JSON opens in it (a `[` that opens a call marker, `[TOOL_CALLS]`, shows
        // that marker: it is code).
        if b[j] == b'[' && call_marker_at(rest, j).is_some() {
            return Some(false);
        }
        if b[j] == b'[' && may_start_marker(&rest[j..]) {
            return None;
        }
        return Some(is_tool_code_fence(rest) || matches!(b[j], b'{' | b'['));
    }
    let mut j = 1;
    while j < b.len() && b[j].is_ascii_whitespace() {
        j += 1;
    }
    if j >= b.len() {
        return undecided(j);
    }
    let quote = b[j];
    if quote != b'"' && quote != b'\'' {
        return Some(false);
    }
    let key = &b[j + 1..];
    // A call's first key is short: the search for its end is bounded.
    match key.iter().take(MAX_UNDECIDED + 1).position(|&c| c == quote) {
        Some(end) => Some(CALL_KEYS.iter().any(|k| k.as_bytes() == &key[..end])),
        None if key.len() <= MAX_UNDECIDED
            && CALL_KEYS.iter().any(|k| k.as_bytes().starts_with(key)) =>
        {
            None
        }
        None => Some(false),
    }
}

/// What a text's start says about a pythonic call `name(…)` there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leading {
    /// It begins one (`name(`).
    Call,
    /// It may still become one (only name characters so far).
    Maybe,
    /// It does not.
    No,
}

/// Whether `rest` (a text's start, whitespace skipped) begins a pythonic call: a name
/// (ASCII letter or `_`, then letters, digits, `_`, `.`, `-`; at most 64) and `(`.
pub fn leading_call(rest: &str) -> Leading {
    let b = rest.as_bytes();
    match b.first() {
        None => return Leading::Maybe,
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        Some(_) => return Leading::No,
    }
    let end = b
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')))
        .unwrap_or(b.len());
    if end > MAX_NAME {
        Leading::No
    } else if end == b.len() {
        Leading::Maybe
    } else if b[end] == b'(' {
        Leading::Call
    } else {
        Leading::No
    }
}

/// True when `tail` is a proper, non-empty prefix of a call marker or of a thinking tag
/// (ignoring ASCII case for those): more text may turn it into one.
pub fn may_start_marker(tail: &str) -> bool {
    let t = tail.as_bytes();
    !t.is_empty()
        && (CALL_MARKERS
            .iter()
            .chain([&REPLY_OPEN])
            .any(|m| m.len() > t.len() && m.as_bytes().starts_with(t))
            || thinking_tags().any(|tag| {
                tag.len() > t.len() && tag.as_bytes()[..t.len()].eq_ignore_ascii_case(t)
            }))
}

/// The length of the longest suffix of `text` that [`may_start_marker`]: what a stream
/// must keep back until the next piece says whether a marker begins there.
pub fn marker_prefix_len(text: &str) -> usize {
    let b = text.as_bytes();
    let longest = CALL_MARKERS
        .iter()
        .copied()
        .chain([REPLY_OPEN])
        .chain(thinking_tags())
        .map(str::len)
        .max()
        .unwrap_or(0);
    let from = b.len().saturating_sub(longest.saturating_sub(1));
    (from..b.len())
        .find(|&i| matches!(b[i], b'<' | b'[') && may_start_marker(&text[i..]))
        .map_or(0, |i| b.len() - i)
}

/// Every thinking tag, openers and closers.
fn thinking_tags() -> impl Iterator<Item = &'static str> {
    THINKING_TAGS.iter().flat_map(|(o, c)| [*o, *c])
}

/// A thinking tag found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThinkingTag {
    /// Its byte offset.
    pub at: usize,
    /// Its length in bytes.
    pub len: usize,
    /// A closing tag.
    pub closing: bool,
}

/// The thinking tag (either kind, ignoring ASCII case) that starts at byte `at`.
pub fn thinking_tag_at(text: &str, at: usize) -> Option<ThinkingTag> {
    let rest = text.as_bytes().get(at..)?;
    THINKING_TAGS.iter().find_map(|(open, close)| {
        [(open, false), (close, true)]
            .into_iter()
            .find(|(tag, _)| {
                rest.len() >= tag.len() && rest[..tag.len()].eq_ignore_ascii_case(tag.as_bytes())
            })
            .map(|(tag, closing)| ThinkingTag {
                at,
                len: tag.len(),
                closing,
            })
    })
}

/// The next thinking tag of the kind asked (`closing`) at or after byte `from` (ignoring
/// ASCII case). Linear in what it skips.
pub fn find_thinking(text: &str, from: usize, closing: bool) -> Option<ThinkingTag> {
    let b = text.as_bytes();
    (from..b.len())
        .filter(|&i| matches!(b[i], b'<' | b'['))
        .find_map(|i| thinking_tag_at(text, i).filter(|t| t.closing == closing))
}

/// True when `text` holds a thinking tag of either kind.
pub fn has_thinking(text: &str) -> bool {
    find_thinking(text, 0, false).is_some() || find_thinking(text, 0, true).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_markers_hold_every_opener_the_parser_knows() {
        for tag in TOOL_CALL_TAGS.iter().filter(|t| !t.starts_with("</")) {
            assert!(CALL_MARKERS.contains(tag), "{tag}");
        }
        for token in CALL_TOKENS {
            assert!(CALL_MARKERS.contains(token), "{token}");
        }
        assert!(CALL_MARKERS.contains(&MISTRAL_TOOL_CALLS));
        assert!(CALL_MARKERS.contains(&XML_FUNCTION));
        // A bare `<invoke name=` and Phi-4-mini's `functools[` begin a call only at the start.
        assert!(LEADING_MARKERS.contains(&XML_INVOKE));
        assert!(LEADING_MARKERS.contains(&FUNCTOOLS));
        for m in [
            APERTUS_PREFIX,
            GIGACHAT_CALL,
            HUNYUAN_CALL,
            HUNYUAN_CALLS,
            MINICPM_FUNCTION,
            GEMMA_CALL_START,
            HARMONY_CHANNEL,
            STEP_CALL_BEGIN,
            STEP_INVOKE,
            DSML_INVOKE,
            GEMMA4_CALL_START,
            KIMI3_TOOLS,
            KIMI3_CALL,
            KIMI3_RESPONSE_CLOSE,
            KIMI3_MESSAGE_CLOSE,
        ]
        .into_iter()
        .chain(DEEPSEEK_CALL_BEGIN)
        {
            assert!(CALL_MARKERS.contains(&m), "{m}");
        }
        for m in CALL_OPENERS {
            assert!(
                CALL_MARKERS
                    .iter()
                    .chain(LEADING_MARKERS)
                    .any(|c| m.starts_with(c) || c.starts_with(m)),
                "{m}"
            );
        }
        assert!(LEADING_MARKERS.contains(&FENCE));
    }

    #[test]
    fn the_first_call_marker_is_found() {
        assert_eq!(first_call_marker("Let me check.\n<tool_call>{}"), Some(14));
        assert_eq!(first_call_marker("  {\"a\": 1}"), Some(2));
        assert_eq!(first_call_marker("[f(a=1)]"), Some(0));
        assert_eq!(first_call_marker("see [1] and [TOOL_CALLS][]"), Some(12));
        assert_eq!(first_call_marker("text ```json\n{}```"), Some(5));
        assert_eq!(first_call_marker("a <b> c"), None);
        assert_eq!(first_call_marker("日本<|python_tag|>"), Some(6));
        // Shown in code: neither a marker nor a call object is where calls begin.
        assert_eq!(
            first_call_marker("`<tool_call>` and `{\"name\": 1}` <tool_call>"),
            Some(32)
        );
        assert_eq!(first_call_marker("x\n```\n[TOOL_CALLS][]\n```"), None);
    }

    #[test]
    fn a_marker_in_markdown_code_is_told_from_one_in_prose() {
        let at = |t: &str| prose_markers(t).at;
        let quoted = |t: &str| prose_markers(t).quoted;
        // Fences of backticks or tildes, any language, indented or not; code spans.
        for t in [
            "x\n```xml\n<tool_call>\n```\n",
            "x\n~~~\n<tool_call>\n~~~",
            "x\n  ````\n```\n<tool_call>\n````\n",
            "x `<tool_call>` y",
            "x ``a ` <tool_call>`` y",
            "x `multi\nline <tool_call>`",
        ] {
            assert_eq!((at(t), quoted(t).is_some()), (None, true), "{t:?}");
        }
        // Prose: after a closed fence or span, backticks never closed (or closed only
        // past a blank line, a thinking tag or `MAX_SPAN` bytes), a fence mid-line, an
        // unclosed fence ended by a thinking tag.
        for t in [
            "```\nx\n```\n<tool_call>",
            "`x` <tool_call>",
            "it`s <tool_call>",
            "a ` b\n\n<tool_call> `",
            "a ` <think>` </think><tool_call>",
            "x ``` <tool_call>",
            "<think>```\n</think><tool_call>",
        ] {
            assert!(at(t).is_some(), "{t:?}");
        }
        let far = format!("` {} <tool_call> `", "x".repeat(MAX_SPAN));
        assert!(at(&far).is_some());
        let long = format!("x\n{}\n<tool_call>", "`".repeat(MAX_SPAN + 1));
        assert!(at(&long).is_some());
        // A stream: backticks whose closing run may still come are undecided.
        let mut code = Code::default();
        assert_eq!(code.step("a `b <tool_call>", 2, false), InCode::Undecided);
        assert_eq!(code.step("a ``", 2, false), InCode::Undecided);
        assert_eq!(code.step("a `b` c", 2, false), InCode::Yes);
    }

    #[test]
    fn a_reply_is_unframed() {
        assert_eq!(
            unframe_reply(
                " <|open|>response<|sep|>hi<|close|>response<|sep|><|close|>message<|sep|>\n"
            ),
            Some("hi")
        );
        assert_eq!(unframe_reply("Hello<|close|>message<|sep|>"), Some("Hello"));
        assert_eq!(unframe_reply("Hello"), None);
        // Only where it frames the reply.
        assert_eq!(unframe_reply("a <|open|>response<|sep|> b"), None);
        assert!(may_start_marker("<|open|>resp"));
    }

    #[test]
    fn prefixes_of_markers_and_tags_are_kept_back() {
        assert!(may_start_marker("<tool"));
        assert!(may_start_marker("[TOOL_"));
        assert!(may_start_marker("<THI"));
        assert!(may_start_marker("<｜tool"));
        assert!(
            !may_start_marker("<tool_call>"),
            "a whole marker is no prefix"
        );
        assert!(!may_start_marker("<b"));
        assert!(!may_start_marker(""));
        assert_eq!(marker_prefix_len("Sure <tool_ca"), 8);
        assert_eq!(marker_prefix_len("Sure <b"), 0);
        assert_eq!(marker_prefix_len("a [TH"), 3);
        assert_eq!(marker_prefix_len("x <"), 1);
    }

    #[test]
    fn thinking_tags_are_found_in_any_case() {
        assert_eq!(
            find_thinking("a <THINKING>x</Thinking>", 0, false),
            Some(ThinkingTag {
                at: 2,
                len: 10,
                closing: false
            })
        );
        assert_eq!(
            find_thinking("a <THINKING>x</Thinking>", 0, true).map(|t| t.at),
            Some(13)
        );
        assert!(has_thinking("plan [/THINK] answer"));
        assert!(!has_thinking("I think so <thinker>"));
    }

    #[test]
    fn a_leading_pythonic_call_is_told_from_prose() {
        assert_eq!(leading_call("get_weather(city='Paris')"), Leading::Call);
        assert_eq!(leading_call("get_wea"), Leading::Maybe);
        assert_eq!(leading_call(""), Leading::Maybe);
        assert_eq!(leading_call("Sure, here"), Leading::No);
        assert_eq!(leading_call("42 is"), Leading::No);
        assert_eq!(leading_call(&"a".repeat(65)), Leading::No);
    }
}
