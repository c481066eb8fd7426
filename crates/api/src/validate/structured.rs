//! The output form from `response_format` and the other servers' constraint fields (vLLM's
//! `structured_outputs` and `guided_*`, llama-server's `grammar`; see `wire/structured.rs`).
//! One constraint per request: two are a 400 naming both. A regex or grammar that does not
//! compile is a 400 naming its field, with the error's byte offset, line and column.

use std::sync::Arc;

use sluice_engine::ResponseFormat;
use sluice_text::constraint::{compiled, Schema};

use super::response_format;
use crate::error::ApiError;
use crate::wire::structured::{Constraint, ConstraintFields};
use crate::wire::ResponseFormatField;

/// Most strings `choice` may list.
pub const MAX_CHOICES: usize = 1024;

/// The one constraint the request gives, or plain text.
pub(super) fn output_form(
    format: Option<ResponseFormatField>,
    fields: ConstraintFields,
) -> Result<ResponseFormat, ApiError> {
    let mut given = fields.given();
    let format_given = format.as_ref().is_some_and(|f| f.kind != "text");
    match (given.len(), format_given) {
        (0, _) => return response_format(format),
        (1, false) => {}
        _ => {
            let mut names: Vec<&str> = given.iter().map(|(name, _)| *name).collect();
            if format_given {
                names.insert(0, "response_format");
            }
            return Err(ApiError::invalid(
                names[1],
                format!(
                    "one output constraint per request: got both {} and {}",
                    names[0], names[1]
                ),
            ));
        }
    }
    let (field, constraint) = given.remove(0);
    compile(field, constraint)
}

fn compile(field: &str, constraint: Constraint) -> Result<ResponseFormat, ApiError> {
    let invalid = |message: String| ApiError::invalid(field, format!("{field}: {message}"));
    match constraint {
        Constraint::Regex(pattern) => compiled::regex(&pattern)
            .map(ResponseFormat::Regex)
            .map_err(|e| invalid(e.to_string())),
        Constraint::Choice(choices) => {
            if choices.is_empty() || choices.len() > MAX_CHOICES {
                return Err(invalid(format!(
                    "give between 1 and {MAX_CHOICES} strings, got {}",
                    choices.len()
                )));
            }
            compiled::choice(&choices)
                .map(ResponseFormat::Regex)
                .map_err(|e| invalid(e.to_string()))
        }
        Constraint::Grammar(text) => compiled::grammar(&text)
            .map(ResponseFormat::Grammar)
            .map_err(|e| invalid(e.to_string())),
        Constraint::Json(schema) => {
            // vLLM takes the schema as an object or as its JSON text.
            let schema = match schema {
                serde_json::Value::String(text) => serde_json::from_str(&text)
                    .map_err(|e| invalid(format!("the schema is not valid JSON: {e}")))?,
                schema => schema,
            };
            Schema::compile(&schema)
                .map(|s| ResponseFormat::JsonSchema(Arc::new(s)))
                .map_err(|e| invalid(e.to_string()))
        }
        Constraint::JsonObject => Ok(ResponseFormat::JsonObject),
    }
}
