//! The one error type of the text crate.

use std::path::PathBuf;

/// Everything that can go wrong loading a tokenizer, tokenizing, or rendering a chat template.
///
/// Errors about files carry the path of the file, so a bad model directory is easy to fix.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A file was read but its contents are not what a tokenizer file must be.
    #[error("invalid {path}: {message}")]
    InvalidFile {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A GGUF file's tokenizer metadata is missing a key or holds the wrong type.
    #[error("GGUF tokenizer metadata: {0}")]
    GgufMetadata(#[from] sluice_gguf::MetadataError),
    /// A GGUF file's vocabulary is inconsistent (duplicate tokens, lengths that disagree,
    /// malformed merges).
    #[error("invalid GGUF vocabulary: {0}")]
    InvalidGgufVocab(String),
    /// Building a GGUF file's tokenizer would pass one of the bounds that keep its time and
    /// memory linear in the vocabulary's bytes (a hostile vocabulary of prefix chains asks for
    /// a merge list cubic in its length).
    #[error(
        "GGUF vocabulary over a limit: {what} would be {value}, the limit is {limit} ({rule})"
    )]
    GgufVocabOverLimit {
        /// What was measured.
        what: &'static str,
        /// How much the vocabulary asks for (at least; counting stops at the limit).
        value: usize,
        /// The limit for this vocabulary.
        limit: usize,
        /// How the limit follows from the vocabulary.
        rule: &'static str,
    },
    /// A GGUF file names a tokenizer algorithm or pre-tokenizer sluice does not implement.
    #[error("unsupported GGUF tokenizer: {key} = `{value}` (supported: {supported})")]
    UnsupportedGgufTokenizer {
        /// The metadata key (`tokenizer.ggml.model` or `tokenizer.ggml.pre`).
        key: &'static str,
        /// Its value.
        value: String,
        /// What sluice supports instead.
        supported: &'static str,
    },
    /// The `tokenizers` library failed to encode or decode.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// A chat template failed to compile or render; for `raise_exception` in a template the
    /// message is exactly the template's own message.
    #[error("chat template error: {0}")]
    Template(String),
    /// The messages handed to a chat template are not an array of `{role, content}` objects, or a
    /// content part is not text.
    #[error("invalid messages: {0}")]
    InvalidMessages(String),
}
