//! `grammar` constraints (vLLM's `structured_outputs.grammar` / `guided_grammar`, llama-server's
//! `grammar`): the whole output is a sentence of a context-free grammar in GBNF (see
//! `parse.rs` for the syntax accepted).
//!
//! The grammar is parsed and compiled once (`compile.rs`: rules of byte ranges and rule
//! references, repetitions and character classes rewritten into rules, left recursion
//! refused) and read by a pushdown recognizer over bytes (`recognizer.rs`): a state is a set
//! of stacks of grammar positions, as in llama.cpp, interned so that the recognizer's state is
//! one id and each (state, byte) step is computed once per request.

mod compile;
mod lark;
mod left_recursion;
mod parse;
mod recognizer;
mod regular;

pub use compile::Grammar;
pub use recognizer::{GrammarRecognizer, GrammarStates, MAX_GRAMMAR_STATES};
pub use regular::regular_expression;

use thiserror::Error;

/// Longest grammar text accepted, in bytes.
pub const MAX_GRAMMAR_BYTES: usize = 64 * 1024;

/// A grammar that cannot be compiled, with where in its text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid grammar at byte {offset} (line {line}, column {column}): {message}")]
pub struct GrammarError {
    /// Byte offset of the error in the grammar text.
    pub offset: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl GrammarError {
    fn at(text: &str, offset: usize, message: impl Into<String>) -> Self {
        let offset = offset.min(text.len());
        let before = text.get(..offset).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        GrammarError {
            offset,
            line,
            column: before[line_start..].chars().count() + 1,
            message: message.into(),
        }
    }
}
