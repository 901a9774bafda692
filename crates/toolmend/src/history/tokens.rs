//! Token counting for [`super::trim`]: a trait, a byte estimate, and OpenAI's encodings
//! (feature `tiktoken`).

use crate::protocol::{Content, Message};

/// Tokens added per message for the role and the message framing, as in OpenAI's cookbook
/// ("every message follows `<|start|>{role/name}\n{content}<|end|>\n`").
pub const MESSAGE_OVERHEAD: usize = 4;

/// Counts tokens. Implement [`TokenCounter::count_text`]; the message count is derived.
pub trait TokenCounter: Send + Sync {
    /// Tokens in a text.
    fn count_text(&self, text: &str) -> usize;

    /// Tokens in a message: [`MESSAGE_OVERHEAD`], plus the text of the content (text parts
    /// only; images and audio are not counted), the participant name, and each tool call's
    /// name and arguments.
    fn count_message(&self, message: &Message) -> usize {
        let name = |n: &Option<String>| n.as_deref().map_or(0, |n| self.count_text(n));
        MESSAGE_OVERHEAD
            + match message {
                Message::System(m) | Message::Developer(m) | Message::User(m) => {
                    count_content(self, &m.content) + name(&m.name)
                }
                Message::Assistant(m) => {
                    let content = match &m.content {
                        Some(Some(c)) => count_content(self, c),
                        _ => 0,
                    };
                    let calls: usize = message
                        .tool_calls()
                        .iter()
                        .map(|c| {
                            self.count_text(&c.function.name)
                                + self.count_text(&c.function.arguments)
                        })
                        .sum();
                    content + calls + name(&m.name)
                }
                Message::Tool(m) => count_content(self, &m.content),
                Message::Function(m) => {
                    let content = match &m.content {
                        Some(Some(c)) => count_content(self, c),
                        _ => 0,
                    };
                    content + self.count_text(&m.name)
                }
            }
    }
}

fn count_content<C: TokenCounter + ?Sized>(counter: &C, content: &Content) -> usize {
    match content {
        Content::Text(s) => counter.count_text(s),
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|p| p.text.as_deref())
            .map(|t| counter.count_text(t))
            .sum(),
    }
}

/// The fallback estimate: one token per 4 bytes, rounded up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByteEstimate;

impl TokenCounter for ByteEstimate {
    fn count_text(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }
}

#[cfg(feature = "tiktoken")]
pub use self::tiktoken::Tiktoken;

#[cfg(feature = "tiktoken")]
mod tiktoken {
    use tiktoken_rs::{CoreBPE, tokenizer::Tokenizer};

    use super::TokenCounter;

    /// An OpenAI encoding (`o200k_base`, `cl100k_base`, …) from `tiktoken-rs`.
    ///
    /// Building an encoding's tables takes a while (tens of milliseconds up to a few
    /// hundred); each is built once per process, on the first constructor call, and shared
    /// by every `Tiktoken` after that. The handle is `Copy`.
    ///
    /// ```
    /// use toolmend::history::{Tiktoken, TokenCounter};
    /// let enc = Tiktoken::for_model("gpt-4o").unwrap();
    /// assert_eq!(enc.name(), "o200k_base");
    /// assert_eq!(enc.count_text("hello world"), 2);
    /// ```
    #[derive(Clone, Copy)]
    pub struct Tiktoken {
        bpe: &'static CoreBPE,
        name: &'static str,
    }

    impl std::fmt::Debug for Tiktoken {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Tiktoken")
                .field("name", &self.name)
                .finish()
        }
    }

    impl Tiktoken {
        /// `o200k_base` (GPT-4o, GPT-4.1, GPT-5, o-series).
        pub fn o200k_base() -> Self {
            Tiktoken {
                bpe: tiktoken_rs::o200k_base_singleton(),
                name: "o200k_base",
            }
        }

        /// `cl100k_base` (GPT-4, GPT-3.5-turbo).
        pub fn cl100k_base() -> Self {
            Tiktoken {
                bpe: tiktoken_rs::cl100k_base_singleton(),
                name: "cl100k_base",
            }
        }

        /// The encoding of an OpenAI model name (`gpt-4o`, `gpt-4-0613`, `o3-mini` …), by
        /// `tiktoken-rs`'s model table; `None` for a model it does not know.
        pub fn for_model(model: &str) -> Option<Self> {
            let tokenizer = tiktoken_rs::tokenizer::get_tokenizer(model)?;
            let bpe = tiktoken_rs::bpe_for_tokenizer(tokenizer).ok()?;
            let name = match tokenizer {
                Tokenizer::O200kHarmony => "o200k_harmony",
                Tokenizer::O200kBase => "o200k_base",
                Tokenizer::Cl100kBase => "cl100k_base",
                Tokenizer::P50kBase => "p50k_base",
                Tokenizer::R50kBase | Tokenizer::Gpt2 => "r50k_base",
                Tokenizer::P50kEdit => "p50k_edit",
            };
            Some(Tiktoken { bpe, name })
        }

        /// The encoding's name (`o200k_base` …).
        pub fn name(&self) -> &'static str {
            self.name
        }
    }

    impl TokenCounter for Tiktoken {
        /// Special-token text (`<|endoftext|>`) counts as ordinary text, as the API reads it.
        fn count_text(&self, text: &str) -> usize {
            self.bpe.count_ordinary(text)
        }
    }
}
