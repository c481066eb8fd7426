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
pub mod constraint;
mod error;
mod stop;
mod template;
mod tokenizer;

pub use error::TextError;
pub use stop::StopSet;
pub use stop::{StopMatcher, StopStatus};
pub use template::{ChatTemplate, RenderLimits, RenderUsage};
pub use tokenizer::IncrementalDecoder;
pub use tokenizer::MaskedSpecials;
pub use tokenizer::Tokenizer;
