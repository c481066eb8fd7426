//! The `tokenizer.*` keys of a GGUF file's metadata, read and checked once.
//!
//! Key names, defaults and tolerances follow llama.cpp's vocabulary loader
//! (`llama_vocab::impl::load` in `src/llama-vocab.cpp`), which is what wrote and reads these files.

use std::collections::HashMap;

use sluice_gguf::Metadata;

use crate::TextError;

/// How `tokenizer.ggml.token_type` classifies a token (llama.cpp's `llama_token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenType {
    /// An ordinary vocabulary entry (also: undefined, 0, and codes llama.cpp does not know).
    Normal,
    /// The unknown token (2).
    Unknown,
    /// A control token such as `<s>` or `<|im_end|>` (3): split out of text, hidden on decode.
    Control,
    /// A token added by hand, such as a tool marker (4): split out of text, shown on decode.
    UserDefined,
    /// A reserved, never-trained entry (5): an ordinary piece to the tokenizer.
    Unused,
    /// A SentencePiece byte-fallback piece `<0xNN>` (6).
    Byte,
}

impl TokenType {
    fn from_code(code: i64) -> TokenType {
        match code {
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Normal,
        }
    }
}

/// The tokenizer algorithm `tokenizer.ggml.model` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VocabKind {
    /// `llama`: SentencePiece BPE, pieces merged by score, `▁` for spaces, `<0xNN>` byte fallback.
    SentencePiece,
    /// `gpt2`: byte-level BPE with an explicit merge list and a pre-tokenizer regex.
    BytePairs,
}

/// The tokenizer algorithms sluice reads from GGUF files, for error messages.
pub(crate) const SUPPORTED_MODELS: &str = "llama (SentencePiece), gpt2 (byte-level BPE)";

/// Everything a GGUF file says about its tokenizer.
#[derive(Debug)]
pub(crate) struct GgufVocab {
    pub kind: VocabKind,
    /// `tokenizer.ggml.pre`: the pre-tokenizer of a byte-level BPE vocabulary.
    pub pre: Option<String>,
    /// Token texts by id.
    pub tokens: Vec<String>,
    /// SentencePiece merge priorities by id (higher merges first); all 0 when absent.
    pub scores: Vec<f32>,
    pub types: Vec<TokenType>,
    /// Byte-level BPE merges, highest priority first.
    pub merges: Vec<(String, String)>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    /// Fill-in-the-middle pad, repository and file-separator tokens (llama.cpp stops on them).
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    pub add_space_prefix: Option<bool>,
    pub chat_template: Option<String>,
    /// Token text to id.
    pub ids: HashMap<String, u32>,
}

impl GgufVocab {
    /// Reads and checks the tokenizer keys of `metadata`.
    pub fn read(metadata: &Metadata) -> Result<GgufVocab, TextError> {
        let model = metadata.require_str("tokenizer.ggml.model")?;
        let kind = match model {
            "llama" => VocabKind::SentencePiece,
            "gpt2" => VocabKind::BytePairs,
            other => {
                return Err(TextError::UnsupportedGgufTokenizer {
                    key: "tokenizer.ggml.model",
                    value: other.to_string(),
                    supported: SUPPORTED_MODELS,
                })
            }
        };
        let tokens = read_tokens(metadata)?;
        let n = tokens.len();
        let scores = match metadata.f32_array("tokenizer.ggml.scores")? {
            Some(scores) => at_least(scores, n, "tokenizer.ggml.scores")?,
            None => vec![0.0; n],
        };
        let types = match metadata.i64_array("tokenizer.ggml.token_type")? {
            Some(codes) => at_least(codes, n, "tokenizer.ggml.token_type")?
                .into_iter()
                .map(TokenType::from_code)
                .collect(),
            None => vec![TokenType::Normal; n],
        };
        let merges = match kind {
            VocabKind::SentencePiece => Vec::new(),
            VocabKind::BytePairs => read_merges(metadata)?,
        };
        let mut ids = HashMap::with_capacity(n);
        for (id, text) in tokens.iter().enumerate() {
            if let Some(first) = ids.insert(text.clone(), id as u32) {
                return Err(TextError::InvalidGgufVocab(format!(
                    "tokens {first} and {id} are both `{text}`"
                )));
            }
        }
        // llama.cpp's SentencePiece defaults; its byte-level BPE default (id 11 for both BOS
        // and EOS) is a GPT-2 leftover that sluice does not copy.
        let (default_bos, default_eos, default_unk) = match kind {
            VocabKind::SentencePiece => (Some(1), Some(2), Some(0)),
            VocabKind::BytePairs => (None, None, None),
        };
        let id = |key: &str, default: Option<u32>| -> Result<Option<u32>, TextError> {
            // An id outside the vocabulary is ignored, as llama.cpp does (with a warning).
            let id = metadata.u64(key)?.map(|v| v as u32).or(default);
            Ok(id.filter(|&id| (id as usize) < n))
        };
        Ok(GgufVocab {
            kind,
            pre: metadata.str("tokenizer.ggml.pre")?.map(str::to_string),
            scores,
            types,
            merges,
            bos: id("tokenizer.ggml.bos_token_id", default_bos)?,
            eos: id("tokenizer.ggml.eos_token_id", default_eos)?,
            eot: id("tokenizer.ggml.eot_token_id", None)?,
            eom: id("tokenizer.ggml.eom_token_id", None)?,
            unk: id("tokenizer.ggml.unknown_token_id", default_unk)?,
            pad: id("tokenizer.ggml.padding_token_id", None)?,
            fim_pad: id("tokenizer.ggml.fim_pad_token_id", None)?,
            fim_rep: id("tokenizer.ggml.fim_rep_token_id", None)?,
            fim_sep: id("tokenizer.ggml.fim_sep_token_id", None)?,
            add_bos: metadata.bool("tokenizer.ggml.add_bos_token")?,
            add_eos: metadata.bool("tokenizer.ggml.add_eos_token")?,
            add_space_prefix: metadata.bool("tokenizer.ggml.add_space_prefix")?,
            chat_template: metadata.str("tokenizer.chat_template")?.map(str::to_string),
            tokens,
            ids,
        })
    }

    /// The text of token `id`, if there is such a token.
    pub fn text(&self, id: Option<u32>) -> Option<String> {
        self.tokens.get(id? as usize).cloned()
    }
}

fn read_tokens(metadata: &Metadata) -> Result<Vec<String>, TextError> {
    let tokens = metadata
        .str_array("tokenizer.ggml.tokens")?
        .ok_or_else(|| sluice_gguf::MetadataError::Missing("tokenizer.ggml.tokens".into()))?;
    if tokens.is_empty() {
        return Err(TextError::InvalidGgufVocab(
            "tokenizer.ggml.tokens is empty".into(),
        ));
    }
    // llama.cpp names empty entries this way so that every token text stays unique.
    Ok(tokens
        .iter()
        .enumerate()
        .map(|(id, text)| match text {
            &"" => format!("[EMPTY_{id}]"),
            text => text.to_string(),
        })
        .collect())
}

/// `tokenizer.ggml.merges`: each entry is the two halves joined by one space (the first half
/// is never empty, so a leading space belongs to it).
fn read_merges(metadata: &Metadata) -> Result<Vec<(String, String)>, TextError> {
    let merges = metadata
        .str_array("tokenizer.ggml.merges")?
        .ok_or_else(|| sluice_gguf::MetadataError::Missing("tokenizer.ggml.merges".into()))?;
    merges
        .iter()
        .map(|merge| {
            let split_at = merge
                .char_indices()
                .skip(1)
                .find(|&(_, c)| c == ' ')
                .map(|(at, _)| at);
            match split_at {
                Some(at) => Ok((merge[..at].to_string(), merge[at + 1..].to_string())),
                None => Err(TextError::InvalidGgufVocab(format!(
                    "tokenizer.ggml.merges entry `{merge}` is not two tokens joined by a space"
                ))),
            }
        })
        .collect()
}

/// `values` cut to `n`, or an error if there are fewer than `n` (one per token).
fn at_least<T>(mut values: Vec<T>, n: usize, key: &str) -> Result<Vec<T>, TextError> {
    if values.len() < n {
        return Err(TextError::InvalidGgufVocab(format!(
            "{key} has {} entries for {n} tokens",
            values.len()
        )));
    }
    values.truncate(n);
    Ok(values)
}
