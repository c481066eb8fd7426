//! sluice's text side: tokenizer, chat templates, incremental UTF-8-safe detokenizer and the
//! stop-string matcher. Knows nothing of tensors.
//!
//! - [`Tokenizer`]: loads a Hugging Face model directory's tokenizer files, or builds the
//!   tokenizer from a GGUF file's metadata ([`Tokenizer::from_gguf`]); encode, decode, special
//!   tokens, end-of-generation ids, the chat template.
//! - [`ChatTemplate`]: renders messages into a prompt as transformers' Jinja environment would.
//! - [`IncrementalDecoder`]: streams generated token ids as text, never half a character.
//! - [`StopMatcher`]: cuts streamed text at the first stop string, across token boundaries.
//! - [`constraint`]: constrained decoding (JSON mode): which tokens keep the output valid.
//! - [`assistant`]: a generated assistant turn split into reasoning, content and tool calls, at
//!   once or as a stream ([`assistant::parse_turn`], [`assistant::TurnStream`]).

#![warn(missing_docs)]

pub mod assistant;
mod chat_template;
pub mod constraint;
mod error;
mod gguf_tokenizer;
mod incremental;
mod prompt_bound;
mod python_json;
mod python_list;
mod python_repr;
mod special_literals;
mod stop;
mod stop_set;
mod token_bytes;
mod tokenizer;

pub use chat_template::ChatTemplate;
pub use error::TextError;
pub use incremental::IncrementalDecoder;
pub use special_literals::MaskedSpecials;
pub use stop::{StopMatcher, StopStatus};
pub use stop_set::StopSet;
pub use tokenizer::Tokenizer;
