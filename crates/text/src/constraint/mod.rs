//! Constrained decoding: which tokens may come next so that the output keeps a given form.
//!
//! - [`JsonRecognizer`]: a byte-level recognizer of one JSON object (`json_object` mode).
//! - [`Schema`] and [`SchemaRecognizer`]: a JSON Schema compiled into rules, and a recognizer of
//!   the documents that conform to it (`json_schema` mode).
//! - [`Regex`] and [`RegexRecognizer`]: the whole output matches a regular expression (`regex`
//!   and `choice`), a DFA over bytes built up front.
//! - [`Grammar`] and [`GrammarRecognizer`]: the whole output is a sentence of a GBNF grammar,
//!   read by a pushdown recognizer whose configurations are interned per request.
//! - [`ToolCallRules`] and [`ToolCallRecognizer`]: tool calls in a chat template's framing,
//!   each call's arguments held to its tool's schema (compiled relaxed).
//! - [`compiled`]: regexes and grammars kept by their text, so repeated requests compile once.
//! - [`TokenTrie`]: every token's bytes in a trie, once per model; [`TokenMasks`] walks it for
//!   the set of tokens a recognizer state accepts (a bitset over the vocabulary), cached per
//!   state.

pub mod compiled;
mod grammar;
mod json;
mod lex;
mod masks;
mod regex;
mod schema;
mod tool_call;

#[cfg(test)]
mod constraint_props;
#[cfg(test)]
mod grammar_tests;
#[cfg(test)]
mod regex_tests;

pub use grammar::{
    regular_expression, Grammar, GrammarError, GrammarRecognizer, GrammarStates, MAX_GRAMMAR_BYTES,
    MAX_GRAMMAR_STATES,
};
pub use json::{JsonRecognizer, MAX_DEPTH};
pub use lex::MAX_INDENT;
pub use masks::{JsonTokenMasks, Recognizer, TokenMasks, TokenSet, TokenTrie};
pub use regex::{Regex, RegexError, RegexRecognizer, MAX_PATTERN_BYTES};
pub use schema::{Schema, SchemaError, SchemaRecognizer, MAX_PROPERTIES, MAX_SCHEMA_DEPTH};
pub use tool_call::{
    Tool, ToolCallError, ToolCallFraming, ToolCallMode, ToolCallRecognizer, ToolCallRules,
    MAX_FRAMING_BYTES, MAX_GAP,
};
