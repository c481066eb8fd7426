//! The Responses API's `custom` tools (Codex's freeform tools, such as `apply_patch`): the
//! model calls them with free text, not JSON arguments. Templates only know JSON-argument
//! functions, so a custom tool is offered as a function of one string argument, `input`, and
//! its calls come back as `custom_tool_call` items holding that string
//! (`dialect/responses.rs`).
//!
//! The tool's `format` constrains `input` while it is generated: `{"type": "text"}` (or none)
//! leaves it free, `{"type": "grammar", "syntax": "regex"}` makes it match the expression, and
//! `"syntax": "lark"` (what Codex sends) makes it a sentence of the grammar: a grammar whose
//! rules never refer back to themselves (`apply_patch`'s) is one regular expression, which the
//! string's characters are held to exactly as a schema `pattern` is. A recursive grammar has no
//! such expression: its input is then left free, with a warning in the log.

use serde_json::{json, Value};
use sluice_text::constraint::regular_expression;

use super::tools::ToolSpec;
use crate::error::ApiError;

/// The function standing for the `custom` tool `tool` (at `field` of the request).
pub(super) fn custom_spec(tool: &Value, field: &str) -> Result<ToolSpec, ApiError> {
    let name = match tool.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => {
            return Err(ApiError::invalid(
                &format!("{field}.name"),
                "a custom tool needs a name",
            ))
        }
    };
    let mut description = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut input = json!({"type": "string", "description": "the tool's input, as free text"});
    match tool.get("format") {
        None | Some(Value::Null) => {}
        Some(format) => {
            let at = format!("{field}.format");
            match format.get("type").and_then(Value::as_str) {
                Some("text") => {}
                Some("grammar") => {
                    let syntax = format.get("syntax").and_then(Value::as_str);
                    let Some(definition) = format.get("definition").and_then(Value::as_str) else {
                        return Err(ApiError::invalid(
                            &format!("{at}.definition"),
                            "a grammar format needs its definition",
                        ));
                    };
                    let pattern = match syntax {
                        Some("regex") => Some(definition.to_string()),
                        Some("lark") => regular_expression(definition).map_err(|e| {
                            ApiError::invalid(&format!("{at}.definition"), e.to_string())
                        })?,
                        other => {
                            return Err(ApiError::invalid(
                                &format!("{at}.syntax"),
                                format!("grammar syntax must be lark or regex, got {other:?}"),
                            ))
                        }
                    };
                    match pattern {
                        Some(p) => input["pattern"] = json!(format!("^(?:{p})$")),
                        None => tracing::warn!(
                            tool = %name,
                            "custom tool's grammar refers back to itself (not regular): its \
                             input is not constrained"
                        ),
                    }
                    let syntax = syntax.unwrap_or("regex");
                    description = format!(
                        "{description}\n\nThe input follows this {syntax} grammar:\n{definition}"
                    )
                    .trim_start()
                    .to_string();
                }
                other => {
                    return Err(ApiError::invalid(
                        &format!("{at}.type"),
                        format!("a custom tool's format is text or grammar, got {other:?}"),
                    ))
                }
            }
        }
    }
    Ok(ToolSpec {
        name,
        description: (!description.is_empty()).then_some(description),
        parameters: json!({
            "type": "object",
            "properties": {"input": input},
            "required": ["input"],
            "additionalProperties": false,
        }),
    })
}

/// A custom tool call's arguments for the template: `{"input": text}`.
pub(super) fn custom_arguments(input: &str) -> String {
    json!({ "input": input }).to_string()
}
