//! Errors of loading a model and of running a forward pass.

use std::path::PathBuf;

/// Why a model directory could not be loaded. Every variant names the file involved, and the
/// tensor where one is.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `config.json` or `generation_config.json` is malformed or inconsistent.
    #[error("invalid config {path}: {message}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The config names an architecture this crate does not implement.
    #[error("unsupported architecture `{architecture}` in {path} (supported: {supported})")]
    UnsupportedArchitecture {
        /// The config file.
        path: PathBuf,
        /// `architectures[0]`.
        architecture: String,
        /// Comma-separated list of supported architectures.
        supported: String,
    },
    /// A GGUF file is malformed.
    #[error("{message}")]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong (names the file).
        message: String,
    },
    /// A safetensors file or the shard index is malformed.
    #[error("invalid safetensors file {path}: {message}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A tensor's bytes extend past the end of its file.
    #[error("{path} is truncated: tensor `{tensor}` needs bytes up to {needed}, file has {len}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The first tensor whose data is cut off.
        tensor: String,
        /// Byte offset its data ends at.
        needed: usize,
        /// The file's length.
        len: usize,
    },
    /// The architecture needs a tensor no checkpoint file holds.
    #[error("tensor `{tensor}` is missing from the checkpoint in {path}")]
    MissingTensor {
        /// The model directory (or the shard index that maps tensors to files).
        path: PathBuf,
        /// The tensor name.
        tensor: String,
    },
    /// A tensor has a different shape than the config implies.
    #[error("tensor `{tensor}` in {path} has shape {found:?}, expected {expected:?}")]
    WrongShape {
        /// The file holding the tensor.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// Shape implied by the config.
        expected: Vec<usize>,
        /// Shape in the file.
        found: Vec<usize>,
    },
    /// A tensor is stored in a dtype we cannot convert (only F32, F16, BF16).
    #[error("tensor `{tensor}` in {path} has unsupported dtype {dtype}")]
    UnsupportedDtype {
        /// The file holding the tensor.
        path: PathBuf,
        /// The tensor name.
        tensor: String,
        /// The safetensors dtype string.
        dtype: String,
    },
}

/// Why a forward pass was refused. The batch is checked before any work is done, so an error
/// leaves the KV cache untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardError {
    /// `token_ids`, `positions` and `slot_mapping` differ in length, or the sequences do not
    /// tile the batch.
    #[error("inconsistent batch: {0}")]
    InconsistentBatch(String),
    /// A token id is not below the vocabulary size.
    #[error("token id {token} at batch index {index} is outside the vocabulary of {vocab_size}")]
    TokenOutOfRange {
        /// Flat index in the batch.
        index: usize,
        /// The offending id.
        token: u32,
        /// The model's vocabulary size.
        vocab_size: usize,
    },
    /// A slot or block id lies outside the KV cache.
    #[error("cache slot {slot} is outside the KV cache of {num_slots} slots")]
    SlotOutOfRange {
        /// The offending slot (block id * block size + offset).
        slot: usize,
        /// Slots in the cache.
        num_slots: usize,
    },
    /// A position is at or beyond the model's context length.
    #[error("position {position} is beyond the context length {max}")]
    PositionOutOfRange {
        /// The offending position.
        position: usize,
        /// `max_position_embeddings`.
        max: usize,
    },
    /// The KV cache was built for a different model shape.
    #[error("KV cache shape does not match the model: {0}")]
    CacheMismatch(String),
    /// A requested logits row is not a token of the batch.
    #[error("logits index {index} is outside the batch of {num_tokens} tokens")]
    LogitsIndexOutOfRange {
        /// The offending index.
        index: usize,
        /// Tokens in the batch.
        num_tokens: usize,
    },
    /// A requested hidden-state row is not a token of the batch.
    #[error("hidden-state index {index} is outside the batch of {num_tokens} tokens")]
    HiddenIndexOutOfRange {
        /// The offending index.
        index: usize,
        /// Tokens in the batch.
        num_tokens: usize,
    },
}
