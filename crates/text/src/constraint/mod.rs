//! Constrained decoding: which tokens may come next so that the output keeps a given form.
//!
//! - [`JsonRecognizer`]: a byte-level recognizer of one JSON object (`json_object` mode).
//! - [`JsonTokenMasks`]: every token's bytes in a trie; gives the set of tokens a recognizer
//!   state accepts as a bitset over the vocabulary, cached per state.

mod json;
mod lex;
mod masks;

pub use json::{JsonRecognizer, MAX_DEPTH};
pub use lex::MAX_INDENT;
pub use masks::{JsonTokenMasks, TokenSet};
