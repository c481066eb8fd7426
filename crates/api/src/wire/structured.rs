//! The output constraints other servers take besides `response_format`: vLLM's
//! `structured_outputs` object and its older top-level `guided_*` fields, and llama-server's
//! `grammar`. Validation (`validate/structured.rs`) allows one constraint per request.

use serde::Deserialize;

/// The constraint fields chat and text completions share (flattened into
/// [`GenerationOptions`](super::GenerationOptions)).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ConstraintFields {
    /// vLLM's: `{"regex": ...}`, `{"choice": [...]}`, `{"grammar": ...}`, `{"json": ...}` or
    /// `{"json_object": true}`.
    pub structured_outputs: Option<StructuredOutputsField>,
    /// vLLM's older name for `structured_outputs.regex`.
    pub guided_regex: Option<String>,
    /// vLLM's older name for `structured_outputs.choice`.
    pub guided_choice: Option<Vec<String>>,
    /// vLLM's older name for `structured_outputs.grammar`.
    pub guided_grammar: Option<String>,
    /// vLLM's older name for `structured_outputs.json` (a schema, or its JSON text).
    pub guided_json: Option<serde_json::Value>,
    /// llama-server's GBNF grammar.
    pub grammar: Option<String>,
}

/// vLLM's `structured_outputs` (`StructuredOutputsParams`). Its tuning fields
/// (`disable_fallback`, `whitespace_pattern`, ...) are accepted and ignored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StructuredOutputsField {
    /// The whole output matches this regular expression.
    pub regex: Option<String>,
    /// The output is exactly one of these strings.
    pub choice: Option<Vec<String>>,
    /// The output is a sentence of this grammar (GBNF).
    pub grammar: Option<String>,
    /// The output is a JSON document conforming to this schema (an object, or its JSON text).
    pub json: Option<serde_json::Value>,
    /// The output is one JSON object.
    pub json_object: Option<bool>,
}

impl ConstraintFields {
    /// Every constraint given, with the field that gave it, in a fixed order.
    pub fn given(self) -> Vec<(&'static str, Constraint)> {
        let mut given = Vec::new();
        if let Some(s) = self.structured_outputs {
            given.extend(
                s.regex
                    .map(|r| ("structured_outputs.regex", Constraint::Regex(r))),
            );
            given.extend(
                s.choice
                    .map(|c| ("structured_outputs.choice", Constraint::Choice(c))),
            );
            given.extend(
                s.grammar
                    .map(|g| ("structured_outputs.grammar", Constraint::Grammar(g))),
            );
            given.extend(
                s.json
                    .map(|j| ("structured_outputs.json", Constraint::Json(j))),
            );
            if s.json_object == Some(true) {
                given.push(("structured_outputs.json_object", Constraint::JsonObject));
            }
        }
        given.extend(
            self.guided_regex
                .map(|r| ("guided_regex", Constraint::Regex(r))),
        );
        given.extend(
            self.guided_choice
                .map(|c| ("guided_choice", Constraint::Choice(c))),
        );
        given.extend(
            self.guided_grammar
                .map(|g| ("guided_grammar", Constraint::Grammar(g))),
        );
        given.extend(
            self.guided_json
                .map(|j| ("guided_json", Constraint::Json(j))),
        );
        given.extend(self.grammar.map(|g| ("grammar", Constraint::Grammar(g))));
        given
    }
}

/// One constraint, whichever field gave it.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A regular expression.
    Regex(String),
    /// A list of literal strings.
    Choice(Vec<String>),
    /// A GBNF grammar.
    Grammar(String),
    /// A JSON Schema (or its text).
    Json(serde_json::Value),
    /// Any JSON object.
    JsonObject,
}
