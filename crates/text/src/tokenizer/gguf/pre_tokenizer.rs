//! The pre-tokenizers that `tokenizer.ggml.pre` names for byte-level BPE vocabularies: the
//! regexes that cut text into words before merging, and the flags llama.cpp sets with them.
//!
//! The regexes are the ones the model families' own `tokenizer.json` files carry (llama.cpp
//! rewrites some of them for its regex engine, e.g. `(?i:'s)` as `'[sS]`, with the same
//! meaning). Each split keeps both the matches and the text between them, as llama.cpp's
//! `unicode_regex_split` does and as Hugging Face's `Split` with `Isolated` behaviour does.

use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::SplitDelimiterBehavior;

use crate::TextError;

/// GPT-2's word regex (Hugging Face's `ByteLevel` pre-tokenizer with `use_regex`).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Llama 3's regex: digits in groups of up to three, case-insensitive contractions.
const LLAMA3: &str = concat!(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// Qwen2's regex: Llama 3's with single digits.
const QWEN2: &str = concat!(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// Mistral's tekken regex: words split at lower-to-upper case changes, single digits.
const TEKKEN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// GPT-4o's regex (also Llama 4's): tekken's case rule with contractions, digits by three.
const GPT4O: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// How text is cut into words, and the BPE flags that go with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BpePreTokenizer {
    /// Regex splits applied in order, each to the pieces of the one before.
    splits: &'static [&'static str],
    /// Whether digits are first split one by one (Hugging Face's `Digits` pre-tokenizer).
    single_digits_first: bool,
    /// Whether the GPT-2 regex runs last (inside Hugging Face's `ByteLevel` pre-tokenizer).
    gpt2_regex_last: bool,
    /// A word that is itself a token is not merged (Llama 3, tekken).
    pub ignore_merges: bool,
    /// Whether BOS is added when the file has no `tokenizer.ggml.add_bos_token`.
    pub adds_bos_by_default: bool,
}

/// The `tokenizer.ggml.pre` values sluice reads, for error messages.
pub(crate) const SUPPORTED_PRE_TOKENIZERS: &str = "default, gpt-2 (and phi-2, mpt, olmo, jais, \
     gigachat, mellum), llama-bpe (llama3, llama-v3, falcon3, pixtral, dbrx, smaug-bpe), qwen2 \
     (deepseek-r1-qwen, stablelm2), smollm (starcoder, refact, command-r, codeshell, exaone), \
     tekken, gpt-4o (llama4)";

impl BpePreTokenizer {
    /// The pre-tokenizer llama.cpp uses for `name` (`tokenizer.ggml.pre`; `None` when the file
    /// has no such key, which llama.cpp reads as `default`).
    pub fn named(name: Option<&str>) -> Result<BpePreTokenizer, TextError> {
        let plain = |splits| BpePreTokenizer {
            splits,
            single_digits_first: false,
            gpt2_regex_last: false,
            ignore_merges: false,
            adds_bos_by_default: false,
        };
        let pre = match name.unwrap_or("default") {
            // llama.cpp's own fallback for files converted before `tokenizer.ggml.pre` existed.
            "default" => plain(&[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"]),
            "gpt-2" | "phi-2" | "mpt" | "olmo" | "jais" | "gigachat" | "mellum" => {
                BpePreTokenizer {
                    gpt2_regex_last: true,
                    ..plain(&[])
                }
            }
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" => {
                BpePreTokenizer {
                    ignore_merges: true,
                    adds_bos_by_default: true,
                    ..plain(&[LLAMA3])
                }
            }
            "dbrx" | "smaug-bpe" => plain(&[LLAMA3]),
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" => plain(&[QWEN2]),
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" => {
                BpePreTokenizer {
                    single_digits_first: true,
                    gpt2_regex_last: true,
                    ..plain(&[])
                }
            }
            "tekken" => BpePreTokenizer {
                ignore_merges: true,
                adds_bos_by_default: true,
                ..plain(&[TEKKEN])
            },
            "gpt-4o" | "llama4" => plain(&[GPT4O]),
            other => {
                return Err(TextError::UnsupportedGgufTokenizer {
                    key: "tokenizer.ggml.pre",
                    value: other.to_string(),
                    supported: SUPPORTED_PRE_TOKENIZERS,
                })
            }
        };
        Ok(pre)
    }

    /// The Hugging Face pre-tokenizer: the splits, then bytes mapped to GPT-2's printable
    /// characters.
    pub fn build(&self) -> Result<PreTokenizerWrapper, TextError> {
        let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
        if self.single_digits_first {
            steps.push(Digits::new(true).into());
        }
        for regex in self.splits {
            let split = Split::new(
                SplitPattern::Regex(regex.to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|err| TextError::Tokenizer(format!("pre-tokenizer regex {regex}: {err}")))?;
            steps.push(split.into());
        }
        steps.push(ByteLevel::new(false, true, self.gpt2_regex_last).into());
        Ok(match steps.len() {
            1 => steps.remove(0),
            _ => Sequence::new(steps).into(),
        })
    }
}
