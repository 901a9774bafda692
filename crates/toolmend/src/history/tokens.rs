//! Token counting for [`super::trim`]: a trait, a byte estimate, and OpenAI's encodings
//! (feature `tiktoken`).

use crate::conversation::{Content, Message};

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
                        .map(|c| self.count_text(&c.name) + self.count_text(&c.arguments))
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
    use std::sync::OnceLock;

    use tiktoken_rs::CoreBPE;
    use tiktoken_rs::tokenizer::Tokenizer;

    use super::TokenCounter;

    /// The vocabularies, compact (scripts/tiktoken-data.py): for each rank from 0, one byte
    /// of length, then the token. 2.3 MB for both, against 5.3 MB as tiktoken's text files,
    /// which tiktoken-rs would otherwise put in every binary with its two older ones (7 MB).
    const O200K_BASE: &[u8] = include_bytes!("../../data/o200k_base.bpe");
    const CL100K_BASE: &[u8] = include_bytes!("../../data/cl100k_base.bpe");

    /// cl100k_base's split pattern (tiktoken-rs has it inline in its constructor).
    const CL100K_BASE_PAT_STR: &str = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";

    /// The tables of one compact vocabulary. Special tokens are left out: counting reads
    /// them as ordinary text (`count_ordinary`), as the API does.
    fn build(data: &'static [u8], pattern: &str) -> CoreBPE {
        let mut ranks = Vec::new();
        let mut at = 0;
        while let Some(&len) = data.get(at) {
            let end = at + 1 + usize::from(len);
            ranks.push(data[at + 1..end].to_vec());
            at = end;
        }
        let encoder = ranks.into_iter().zip(0..).collect();
        // The data and the patterns are this crate's own, checked by its tests.
        #[allow(clippy::expect_used)]
        CoreBPE::new(encoder, Default::default(), pattern).expect("the embedded vocabulary loads")
    }

    fn o200k() -> &'static CoreBPE {
        static BPE: OnceLock<CoreBPE> = OnceLock::new();
        BPE.get_or_init(|| build(O200K_BASE, tiktoken_rs::O200K_BASE_PAT_STR))
    }

    fn cl100k() -> &'static CoreBPE {
        static BPE: OnceLock<CoreBPE> = OnceLock::new();
        BPE.get_or_init(|| build(CL100K_BASE, CL100K_BASE_PAT_STR))
    }

    /// An OpenAI encoding, `o200k_base` or `cl100k_base` (the tables embedded in this
    /// crate; the model table and the tokenizer from `tiktoken-rs`).
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
                bpe: o200k(),
                name: "o200k_base",
            }
        }

        /// `cl100k_base` (GPT-4, GPT-3.5-turbo).
        pub fn cl100k_base() -> Self {
            Tiktoken {
                bpe: cl100k(),
                name: "cl100k_base",
            }
        }

        /// The encoding of an OpenAI model name (`gpt-4o`, `gpt-4-0613`, `o3-mini`,
        /// `gpt-oss-20b` …), by `tiktoken-rs`'s model table; `None` for a model it does not
        /// know, and for the retired GPT-3 models (`p50k_base`, `r50k_base`: their tables are
        /// not embedded).
        pub fn for_model(model: &str) -> Option<Self> {
            match tiktoken_rs::tokenizer::get_tokenizer(model)? {
                // o200k_harmony is o200k_base with more special tokens, which counting
                // reads as text either way.
                Tokenizer::O200kHarmony => Some(Tiktoken {
                    bpe: o200k(),
                    name: "o200k_harmony",
                }),
                Tokenizer::O200kBase => Some(Self::o200k_base()),
                Tokenizer::Cl100kBase => Some(Self::cl100k_base()),
                Tokenizer::P50kBase
                | Tokenizer::R50kBase
                | Tokenizer::Gpt2
                | Tokenizer::P50kEdit => None,
            }
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

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Texts of every kind the split patterns tell apart: words and contractions in
        /// several scripts, digits, punctuation runs, whitespace at ends and in runs,
        /// line breaks, code, JSON, emoji, special-token text.
        fn texts() -> Vec<String> {
            let mut v: Vec<String> = [
                "hello world",
                "",
                " ",
                "I'm sure they'll've DONE it, haven't they? It's 12345678 o'clock.",
                "  leading and trailing spaces   \n\n\t\r\n",
                "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
                "{\"city\": \"Osaka\", \"days\": 3, \"unit\": null}",
                "日本語のテキストと한국어 그리고 русский текст, العربية",
                "emoji 🎉🎉 and combining e\u{301} marks",
                "<|endoftext|> <|endofprompt|> <|fim_prefix|>",
                "!!!??? ...--- /// \\\\ ||| ~~~",
                "CamelCaseWords and snake_case_words and SHOUTING",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            // Every printable ASCII character, and a long mixed text.
            v.push((32u8..127).map(char::from).collect());
            v.push(v.join(" ").repeat(20));
            v
        }

        /// One test, so each table is built once (a few seconds each in a debug build).
        #[test]
        fn the_embedded_tables_are_tiktoken_rs_tables_and_count_as_it_does() {
            let pairs = [
                (o200k(), tiktoken_rs::o200k_base().unwrap(), 199_998u32),
                (cl100k(), tiktoken_rs::cl100k_base().unwrap(), 100_256),
            ];
            for (ours, reference, len) in &pairs {
                // Every 97th token decodes to the same bytes under both (the rank order kept).
                for rank in (0..*len).step_by(97).chain([len - 1]) {
                    assert_eq!(
                        ours.decode_bytes(&[rank]).unwrap(),
                        reference.decode_bytes(&[rank]).unwrap(),
                        "rank {rank}"
                    );
                }
                assert!(
                    ours.decode_bytes(&[*len]).is_err(),
                    "no rank past the table"
                );
                for text in texts() {
                    assert_eq!(
                        ours.count_ordinary(&text),
                        reference.encode_ordinary(&text).len(),
                        "{text:?}"
                    );
                    assert_eq!(
                        ours.encode_ordinary(&text),
                        reference.encode_ordinary(&text)
                    );
                }
            }
        }

        #[test]
        fn models_map_to_the_embedded_encodings() {
            assert_eq!(Tiktoken::for_model("gpt-4o").unwrap().name(), "o200k_base");
            assert_eq!(
                Tiktoken::for_model("gpt-4-0613").unwrap().name(),
                "cl100k_base"
            );
            assert_eq!(
                Tiktoken::for_model("gpt-oss-20b").unwrap().name(),
                "o200k_harmony"
            );
            assert!(Tiktoken::for_model("text-davinci-003").is_none());
            assert!(Tiktoken::for_model("no-such-model").is_none());
        }
    }
}
