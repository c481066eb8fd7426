//! A model's tokenizer as found in its Hugging Face directory: `tokenizer.json` (the `tokenizers`
//! library's format), `tokenizer_config.json` (special tokens and the chat template) and an
//! optional `chat_template.jinja` beside them.

use crate::template::ChatTemplate;
use crate::TextError;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod gguf;
mod incremental;
mod prompt_bound;
mod special_literals;
mod token_bytes;

pub use incremental::IncrementalDecoder;
pub use special_literals::MaskedSpecials;

/// A loaded tokenizer with the model's special tokens and chat template.
///
/// `Send + Sync`: share one behind an `Arc` between the engine and the HTTP handlers.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// `inner.get_vocab_size(true)`, counted once: the `tokenizers` crate answers it by cloning
    /// the whole vocabulary map (151k strings for Qwen2.5), and validation asks per request.
    vocab_size: usize,
    /// The vocabulary writes bytes as characters (GPT-2-style byte-level BPE), read once from
    /// the decoder; otherwise it is SentencePiece-style (see `token_bytes.rs`).
    byte_level: bool,
    bos_token: Option<String>,
    eos_token: Option<String>,
    pad_token: Option<String>,
    chat_template: Option<ChatTemplate>,
    chat_template_error: Option<String>,
    /// Token ids that end generation; see [`Tokenizer::end_of_generation_ids`].
    pub(crate) end_of_generation: Vec<u32>,
    /// Bytes of the longest token, found on first use (a pass over the vocabulary).
    pub(crate) max_token_bytes: OnceLock<usize>,
    /// The special tokens' texts, longest first (`special_literals.rs`).
    pub(crate) special_texts: OnceLock<Vec<String>>,
    /// A copy of `inner` reading special-token text as text, made on first use.
    pub(crate) literal_encoder: OnceLock<tokenizers::Tokenizer>,
}

/// The parts of `tokenizer_config.json` sluice reads; everything else in it is ignored.
#[derive(Debug, Default, Deserialize)]
struct TokenizerConfigFile {
    #[serde(default)]
    bos_token: Option<SpecialTokenField>,
    #[serde(default)]
    eos_token: Option<SpecialTokenField>,
    #[serde(default)]
    pad_token: Option<SpecialTokenField>,
    #[serde(default)]
    chat_template: Option<ChatTemplateField>,
}

/// A special token is written either as its text or as an `AddedToken` object.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum SpecialTokenField {
    Text(String),
    Object { content: String },
}

impl SpecialTokenField {
    fn into_content(self) -> String {
        match self {
            SpecialTokenField::Text(text) | SpecialTokenField::Object { content: text } => text,
        }
    }
}

/// `chat_template` is a string, or a list of `{name, template}` for models with several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ChatTemplateField {
    Single(String),
    Named(Vec<NamedChatTemplate>),
}

#[derive(Debug, Deserialize)]
struct NamedChatTemplate {
    name: String,
    template: String,
}

impl ChatTemplateField {
    /// The template named "default", else the first one listed.
    fn into_default(self) -> Option<String> {
        match self {
            ChatTemplateField::Single(source) => Some(source),
            ChatTemplateField::Named(list) => {
                let default_at = list.iter().position(|t| t.name == "default").unwrap_or(0);
                list.into_iter().nth(default_at).map(|t| t.template)
            }
        }
    }
}

impl std::fmt::Debug for Tokenizer {
    // The inner tokenizer's own Debug prints the whole vocabulary; keep logs readable.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .field("pad_token", &self.pad_token)
            .field("has_chat_template", &self.chat_template.is_some())
            .field("chat_template_error", &self.chat_template_error)
            .finish()
    }
}

impl Tokenizer {
    /// Loads `dir/tokenizer.json` (required), `dir/tokenizer_config.json` (optional: without it
    /// there are no named special tokens and no template) and `dir/chat_template.jinja`
    /// (optional; it wins over a `chat_template` in the config, as in transformers).
    ///
    /// A chat template that fails to compile does not fail the load (the model can still serve
    /// plain completions): [`Tokenizer::chat_template`] is then `None` and
    /// [`Tokenizer::chat_template_error`] says why.
    pub fn from_dir(dir: &Path) -> Result<Tokenizer, TextError> {
        let tokenizer_path = dir.join("tokenizer.json");
        let bytes = read_file(&tokenizer_path)?;
        let inner =
            tokenizers::Tokenizer::from_bytes(&bytes).map_err(|err| TextError::InvalidFile {
                path: tokenizer_path.clone(),
                message: err.to_string(),
            })?;

        let config_path = dir.join("tokenizer_config.json");
        let config: TokenizerConfigFile = if config_path.exists() {
            let bytes = read_file(&config_path)?;
            serde_json::from_slice(&bytes).map_err(|err| TextError::InvalidFile {
                path: config_path.clone(),
                message: err.to_string(),
            })?
        } else {
            TokenizerConfigFile::default()
        };

        let jinja_path = dir.join("chat_template.jinja");
        let template_source = if jinja_path.exists() {
            let bytes = read_file(&jinja_path)?;
            Some(
                String::from_utf8(bytes).map_err(|err| TextError::InvalidFile {
                    path: jinja_path.clone(),
                    message: err.to_string(),
                })?,
            )
        } else {
            config
                .chat_template
                .and_then(ChatTemplateField::into_default)
        };

        Ok(Tokenizer::new(
            inner,
            config.bos_token.map(SpecialTokenField::into_content),
            config.eos_token.map(SpecialTokenField::into_content),
            config.pad_token.map(SpecialTokenField::into_content),
            template_source.as_deref(),
        ))
    }

    /// Builds a tokenizer from parts already in memory (tests, or tokenizers not on disk).
    /// `chat_template` is compiled here; a compile failure is kept in
    /// [`Tokenizer::chat_template_error`].
    pub fn new(
        inner: tokenizers::Tokenizer,
        bos_token: Option<String>,
        eos_token: Option<String>,
        pad_token: Option<String>,
        chat_template: Option<&str>,
    ) -> Tokenizer {
        let compiled = chat_template
            .map(|source| ChatTemplate::new(source, bos_token.clone(), eos_token.clone()));
        let (chat_template, chat_template_error) = match compiled {
            None => (None, None),
            Some(Ok(template)) => (Some(template), None),
            Some(Err(err)) => (None, Some(err.to_string())),
        };
        let byte_level = inner.get_decoder().is_some_and(|d| {
            serde_json::to_string(d).is_ok_and(|json| json.contains(r#""type":"ByteLevel""#))
        });
        let end_of_generation = eos_token
            .as_deref()
            .and_then(|eos| inner.token_to_id(eos))
            .into_iter()
            .collect();
        Tokenizer {
            end_of_generation,
            vocab_size: inner.get_vocab_size(true),
            byte_level,
            inner,
            bos_token,
            eos_token,
            pad_token,
            chat_template,
            chat_template_error,
            max_token_bytes: OnceLock::new(),
            special_texts: OnceLock::new(),
            literal_encoder: OnceLock::new(),
        }
    }

    /// Token ids for `text`; `add_special_tokens` applies the tokenizer's post-processor (for
    /// most models: a BOS token in front). Text rendered from a chat template already contains
    /// its special tokens, so encode it with `add_special_tokens = false`.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TextError> {
        let encoding = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|err| TextError::Tokenizer(err.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The text of `ids`; ids outside the vocabulary are an error.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, TextError> {
        if let Some(bad) = ids.iter().find(|&&id| self.inner.id_to_token(id).is_none()) {
            return Err(TextError::Tokenizer(format!(
                "token id {bad} is outside the vocabulary of {} tokens",
                self.vocab_size()
            )));
        }
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|err| TextError::Tokenizer(err.to_string()))
    }

    /// Number of token ids, added (special) tokens included.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The text of one token decoded on its own, special tokens included (for logprobs).
    /// A token holding part of a multi-byte character decodes to U+FFFD; with SentencePiece
    /// tokenizers a leading "▁" is dropped as it is at the start of any text. `None` for an id
    /// outside the vocabulary.
    pub fn token_str(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)?;
        self.inner.decode(&[id], false).ok()
    }

    /// The id of a token given by its text (special tokens included).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The compiled chat template, if the model has one that compiled.
    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.chat_template.as_ref()
    }

    /// Why the model's chat template failed to compile, if it did.
    pub fn chat_template_error(&self) -> Option<&str> {
        self.chat_template_error.as_deref()
    }

    /// The BOS token's text from `tokenizer_config.json`.
    pub fn bos_token(&self) -> Option<&str> {
        self.bos_token.as_deref()
    }

    /// The EOS token's text from `tokenizer_config.json`.
    pub fn eos_token(&self) -> Option<&str> {
        self.eos_token.as_deref()
    }

    /// The padding token's text from `tokenizer_config.json`.
    pub fn pad_token(&self) -> Option<&str> {
        self.pad_token.as_deref()
    }

    /// The BOS token's id, if the token is named and in the vocabulary.
    pub fn bos_token_id(&self) -> Option<u32> {
        self.inner.token_to_id(self.bos_token.as_deref()?)
    }

    /// The EOS token's id, if the token is named and in the vocabulary. (The model's
    /// `generation_config.json` may list more EOS ids; that file is read with the model.)
    pub fn eos_token_id(&self) -> Option<u32> {
        self.inner.token_to_id(self.eos_token.as_deref()?)
    }

    /// Token ids that end generation, ascending. From a GGUF file: EOS, EOT, EOM and every
    /// token llama.cpp treats as end-of-generation (`<|im_end|>`, `<|eot_id|>`,
    /// `<end_of_turn>`, ...; see [`Tokenizer::from_gguf`]). From a Hugging Face directory: the
    /// EOS token only (`generation_config.json`, read with the model, may list more).
    pub fn end_of_generation_ids(&self) -> &[u32] {
        &self.end_of_generation
    }

    /// Whether the vocabulary is GPT-2-style byte-level BPE.
    pub(crate) fn is_byte_level(&self) -> bool {
        self.byte_level
    }

    /// The underlying `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// Reads a tokenizer file. Unlike the config and weights, a FIFO is read here (the startup
/// tests hold a load open with one); a load that blocks on it is bounded by the pool's load
/// timeout, not refused.
fn read_file(path: &Path) -> Result<Vec<u8>, TextError> {
    std::fs::read(path).map_err(|source| TextError::Io {
        path: PathBuf::from(path),
        source,
    })
}

#[cfg(test)]
pub(crate) mod tests;
