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
    /// Markdown code after the text emitted outside blocks: a tag quoted in code is text.
    code: markers::Code,
}

/// Trailing whitespace of reasoning kept back at most.
const MAX_KEPT_WS: usize = 1024;

/// What the tap finds next in what it keeps.
enum Next {
    /// A thinking tag that counts (outside Markdown code, or the closing one of a block).
    Tag(markers::ThinkingTag),
    /// Backticks whose closing run may still come, at this byte: keep back from here.
    Undecided(usize),
    /// Nothing.
    None,
}

impl Tap {
    pub(crate) fn push(&mut self, delta: &str) -> Parts {
        self.buf.push_str(delta);
        self.run(false)
    }

    /// Splits what the tap keeps; `complete`: the stream has ended.
    fn run(&mut self, complete: bool) -> Parts {
        let mut out = Parts::default();
        loop {
            let tag = match self.next(complete) {
                Next::Tag(tag) => tag,
                Next::Undecided(at) => {
                    self.take(at, complete, &mut out);
                    return out;
                }
                Next::None => {
                    let keep = if complete {
                        0
                    } else {
                        markers::marker_prefix_len(&self.buf)
                    };
                    self.take(self.buf.len() - keep, complete, &mut out);
                    return out;
                }
            };
            self.take(tag.at, complete, &mut out);
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

    /// The next tag that counts: inside a block its closing tag; outside, the first tag
    /// not quoted in Markdown code (`markers::Code`, as the core reads it), unless
    /// backticks whose closing run may still come stand before it.
    fn next(&self, complete: bool) -> Next {
        if self.inside {
            return markers::find_thinking(&self.buf, 0, true).map_or(Next::None, Next::Tag);
        }
        let mut code = self.code;
        for (i, &c) in self.buf.as_bytes().iter().enumerate() {
            if matches!(c, b'<' | b'[')
                && !code.quotes_tag()
                && let Some(t) = markers::thinking_tag_at(&self.buf, i)
            {
                return Next::Tag(t);
            }
            if code.step(&self.buf, i, complete) == markers::InCode::Undecided {
                return Next::Undecided(i);
            }
        }
        Next::None
    }

    /// Emits `buf[..upto]` (the text outside a block read through the code state).
    fn take(&mut self, upto: usize, complete: bool, out: &mut Parts) {
        if !self.inside {
            for i in 0..upto {
                self.code.step(&self.buf, i, complete);
            }
        }
        let text: String = self.buf.drain(..upto).collect();
        self.emit(&text, out);
    }

    /// True once a thinking tag went by.
    pub(crate) fn saw_thinking(&self) -> bool {
        self.saw
    }

    /// The end of the stream: what was kept back (an unclosed block's rest is reasoning).
    pub(crate) fn finish(&mut self) -> Parts {
        let mut out = self.run(true);
        let text = std::mem::take(&mut self.buf);
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

    /// Without a gate (a request without tools) the tap splits as the whole answer splits
    /// (`split(text, None)`), tags quoted in Markdown code kept as text, whatever the cut.
    #[test]
    fn a_stream_without_tools_splits_as_the_whole_answer() {
        for text in [
            "Literal `<think>` and `</think>`.<think>x</think> Done",
            "<think>a</think>\n```\n</think>\n```\nok",
            "Unclosed `<think>b</think> c",
            "x ``<think>`` y",
        ] {
            let (r, c) = split(text, None).unwrap_or_else(|| (String::new(), text.to_owned()));
            for cut in (0..=text.len()).filter(|&c| text.is_char_boundary(c)) {
                assert_eq!(
                    run(&[&text[..cut], &text[cut..]]),
                    (c.clone(), r.clone()),
                    "{text:?} cut {cut}"
                );
            }
        }
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
