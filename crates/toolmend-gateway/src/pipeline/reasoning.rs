//! Reasoning a model wrote into its content (`<think>…</think>` and the other tags of
//! `toolmend::repair::markers::THINKING_TAGS`), by `calls.reasoning`: moved to
//! `reasoning_content` (the field vLLM, SGLang and DeepSeek use), dropped, or kept.
//!
//! Nothing here recognises a tag: the core does (`markers::find_thinking`, the table the
//! parser, the extractor and the streaming gate share), and the content a whole answer
//! keeps is the core's `toolmend::message::strip_thinking`, exactly as the plan strips
//! it. This module only collects what the core takes out, so that it can be moved:
//! [`split`] for a whole text, [`Tap`] delta by delta for a stream. Where the reasoning
//! goes in an answer is the front's (chat's `reasoning_content`: `wire::put_reasoning`).

use toolmend::{message::strip_thinking, repair::markers};

/// The reasoning blocks of `text` (joined by a newline, each trimmed) and the content
/// without them; `None` when there is no thinking. The blocks are the ones the core
/// strips (`markers::reasoning_spans`: every tagged block in prose and an unclosed opening
/// block to the end; a bare closing tag goes alone; a tag quoted in Markdown code is
/// text; with `calls.template_opens_thinking` the front puts the opening tag back first,
/// `toolmend::message::open_thinking`). `calls`, the request's tool names: only those
/// before where a call may begin (a pythonic call to one of them included), as the
/// streaming gate strips them (a tag from there on is the call's text, or, with no call
/// read, dropped with the rest of the content's reasoning but not moved); `None` (no
/// tools): all of them, the content being the core's [`strip_thinking`].
pub(crate) fn split(text: &str, calls: Option<&[&str]>) -> Option<(String, String)> {
    let before_calls = calls.is_some();
    let spans = match calls {
        Some(names) => markers::reasoning_spans_named(text, names),
        None => markers::reasoning_spans(text, false),
    };
    if spans.is_empty() {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for &(from, to) in &spans {
        let block = &text[from..to];
        let Some(open) = markers::thinking_tag_at(block, 0).filter(|t| !t.closing) else {
            continue; // a bare closing tag: no reasoning
        };
        let inner = match markers::find_thinking(block, open.len, true) {
            Some(close) => &block[open.len..close.at],
            None => &block[open.len..],
        };
        parts.push(inner);
    }
    let content = if before_calls {
        String::new()
    } else {
        strip_thinking(text).unwrap_or_default()
    };
    let reasoning: Vec<&str> = parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect();
    Some((reasoning.join("\n"), content))
}

/// What one content delta splits into.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Parts {
    /// Text outside thinking blocks (used when no gate runs: an answer without tools).
    pub content: String,
    /// Text inside thinking blocks.
    pub reasoning: String,
}

/// Follows a stream's content delta by delta and says which of it was reasoning, as it
/// arrives (a tag split across deltas is kept back until it is whole: at most a tag's
/// length). Where the core's gate runs (an answer with tools), the client's content is
/// the gate's, the tap is given only the reasoning the gate stripped
/// (`Assembler::take_reasoning`: no tag quoted in code or inside a held call) and only
/// [`Parts::reasoning`] is used; without it, [`Parts::content`] is
/// the text outside the blocks (whitespace right after a block that opens the answer
/// trimmed, as `strip_thinking` trims it). A bare closing tag (the block opened in the
/// prompt) drops the tag alone, as the gate does: what came before it already went out
/// as content. Memory: the kept-back tail only.
#[derive(Debug, Default)]
pub(crate) struct Tap {
    buf: String,
    inside: bool,
    /// Some reasoning went out (a later block is separated by a newline).
    reasoned: bool,
    /// Right after an opening tag: leading whitespace of the block is dropped.
    block_start: bool,
    /// Some content other than whitespace went out.
    content_started: bool,
    /// A block was seen before any content: whitespace until the content begins is
    /// dropped.
    after_block: bool,
    /// A thinking tag was seen.
    saw: bool,
    /// Trailing whitespace of the reasoning, kept back until more reasoning follows (a
    /// block's end drops it, as the whole answer's blocks are trimmed); at most
    /// [`MAX_KEPT_WS`] bytes.
    ws: String,
}

/// Trailing whitespace of reasoning kept back at most.
const MAX_KEPT_WS: usize = 1024;

impl Tap {
    pub(crate) fn push(&mut self, delta: &str) -> Parts {
        self.buf.push_str(delta);
        let mut out = Parts::default();
        loop {
            let closing = self.inside;
            let open = (!closing).then(|| markers::find_thinking(&self.buf, 0, false));
            let close = markers::find_thinking(&self.buf, 0, true);
            // Outside a block: the first tag of either kind (a bare closing one is dropped).
            let next = match (open.flatten(), close) {
                (Some(o), Some(c)) => Some(if o.at <= c.at { o } else { c }),
                (o, c) => o.or(c),
            };
            let Some(tag) = next else {
                let keep = markers::marker_prefix_len(&self.buf);
                let upto = self.buf.len() - keep;
                let text: String = self.buf.drain(..upto).collect();
                self.emit(&text, &mut out);
                return out;
            };
            let text: String = self.buf.drain(..tag.at).collect();
            self.emit(&text, &mut out);
            self.buf.drain(..tag.len);
            self.saw = true;
            if tag.closing {
                self.inside = false;
                self.ws.clear();
                if !self.content_started {
                    self.after_block = true;
                }
            } else {
                self.inside = true;
                self.block_start = true;
                if !self.content_started {
                    self.after_block = true;
                }
            }
        }
    }

    /// True once a thinking tag went by.
    pub(crate) fn saw_thinking(&self) -> bool {
        self.saw
    }

    /// The end of the stream: what was kept back (an unclosed block's rest is reasoning).
    pub(crate) fn finish(&mut self) -> Parts {
        let text = std::mem::take(&mut self.buf);
        let mut out = Parts::default();
        self.emit(&text, &mut out);
        self.ws.clear();
        out
    }

    fn emit(&mut self, text: &str, out: &mut Parts) {
        if text.is_empty() {
            return;
        }
        if self.inside {
            let text = if self.block_start {
                text.trim_start()
            } else {
                text
            };
            if text.is_empty() {
                return;
            }
            if self.block_start && self.reasoned {
                out.reasoning.push('\n');
            }
            self.block_start = false;
            self.reasoned = true;
            let body = text.trim_end();
            if body.is_empty() {
                self.ws.push_str(text);
                if self.ws.len() > MAX_KEPT_WS {
                    out.reasoning.push_str(&std::mem::take(&mut self.ws));
                }
                return;
            }
            out.reasoning.push_str(&std::mem::take(&mut self.ws));
            out.reasoning.push_str(body);
            self.ws.push_str(&text[body.len()..]);
        } else {
            let text = if self.after_block && !self.content_started {
                text.trim_start()
            } else {
                text
            };
            if text.is_empty() {
                return;
            }
            self.content_started = true;
            out.content.push_str(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_text_splits_as_the_core_strips() {
        for (text, reasoning, content) in [
            ("<think>plan</think>Hello", "plan", "Hello"),
            ("A <THINKING> x </Thinking> B", "x", "A  B"),
            ("plan…</think>Answer", "", "plan…Answer"),
            ("Answer<think>never closed", "never closed", "Answer"),
            ("<think>a</think>mid[THINK]b[/THINK]end", "a\nb", "midend"),
        ] {
            let (r, c) = split(text, None).unwrap();
            assert_eq!((r.as_str(), c.as_str()), (reasoning, content), "{text}");
            assert_eq!(Some(c), strip_thinking(text));
        }
        assert_eq!(split("I think so", None), None);
        // Quoted in code: text, no reasoning.
        assert_eq!(split("Literal `<think>` and `</think>`.", None), None);
        // From where a call begins the text is the call's.
        let (r, _) = split(
            "<think>a</think><tool_call>{\"x\": \"<think>b</think>\"}",
            Some(&[]),
        )
        .unwrap();
        assert_eq!(r, "a");
    }

    fn run(deltas: &[&str]) -> (String, String) {
        let mut t = Tap::default();
        let (mut c, mut r) = (String::new(), String::new());
        for d in deltas {
            let p = t.push(d);
            c += &p.content;
            r += &p.reasoning;
        }
        let p = t.finish();
        (c + &p.content, r + &p.reasoning)
    }

    #[test]
    fn a_stream_splits_as_it_arrives_whatever_the_cuts() {
        let text =
            "<think>\nthe user wants Paris</think>\n\nChecking. <reasoning>b</reasoning>done";
        for cut in 0..=text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let (c, r) = run(&[&text[..cut], &text[cut..]]);
            assert_eq!(r, "the user wants Paris\nb", "cut at {cut}");
            assert_eq!(c, "Checking. done", "cut at {cut}");
        }
        // Reasoning goes out before its block closes; a tag's prefix waits.
        let mut t = Tap::default();
        // Trailing whitespace waits for what follows it (a block's end drops it).
        assert_eq!(t.push("<think>step one, ").reasoning, "step one,");
        assert_eq!(t.push("step two </thi").reasoning, " step two");
        let p = t.push("nk>Answer");
        assert_eq!((p.reasoning.as_str(), p.content.as_str()), ("", "Answer"));
        // Unclosed: the rest is reasoning; a bare closing tag drops the tag alone.
        assert_eq!(
            run(&["Hi<think>never", " closed"]),
            ("Hi".into(), "never closed".into())
        );
        assert_eq!(
            run(&["plan</think>Answer"]),
            ("planAnswer".into(), String::new())
        );
        assert_eq!(run(&["I think so"]), ("I think so".into(), String::new()));
    }
}
