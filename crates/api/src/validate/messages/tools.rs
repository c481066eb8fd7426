//! Anthropic `tools` and `tool_choice` as every dialect's [`ToolRequest`].

use serde_json::{Map, Value};

use super::super::tools::{function_spec, ToolChoice, ToolRequest, ToolSpec};
use crate::error::ApiError;

/// Anthropic `tools`: `{name, description, input_schema}` client tools; server tools (a
/// `type` other than `custom`) are skipped, as hosted tools are in the OpenAI dialects.
pub(super) fn anthropic_tools(tools: Option<&Value>) -> Result<Vec<ToolSpec>, ApiError> {
    let Some(tools) = tools else {
        return Ok(Vec::new());
    };
    let Value::Array(list) = tools else {
        return Err(ApiError::invalid("tools", "tools must be a list"));
    };
    let mut out = Vec::with_capacity(list.len());
    let mut skipped = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("custom");
        if kind != "custom" {
            skipped.push(super::super::tools::skipped_tool(kind, tool));
            continue;
        }
        // Anthropic requires a JSON Schema object for a client tool's input.
        if !matches!(tool.get("input_schema"), Some(Value::Object(_))) {
            return Err(ApiError::invalid(
                &format!("tools[{i}].input_schema"),
                "a client tool needs input_schema, a JSON Schema object",
            ));
        }
        if !matches!(
            tool.get("description"),
            None | Some(Value::Null | Value::String(_))
        ) {
            return Err(ApiError::invalid(
                &format!("tools[{i}].description"),
                "description must be a string",
            ));
        }
        let mut function = Map::new();
        for (from, to) in [
            ("name", "name"),
            ("description", "description"),
            ("input_schema", "parameters"),
        ] {
            if let Some(v) = tool.get(from).filter(|v| !v.is_null()) {
                function.insert(to.into(), v.clone());
            }
        }
        out.push(function_spec(
            &Value::Object(function),
            &format!("tools[{i}]"),
        )?);
    }
    super::super::tools::log_skipped_tools("messages", &skipped);
    Ok(out)
}

/// Anthropic `tool_choice`: `auto`, `any` (some call), `tool` (that one), `none`;
/// `disable_parallel_tool_use` allows one call at most.
pub(super) fn tool_request(
    choice: Option<&Value>,
    tools: Vec<ToolSpec>,
) -> Result<ToolRequest, ApiError> {
    let field = "tool_choice";
    let kind = match choice {
        None | Some(Value::Null) => None,
        Some(c) => Some(c.get("type").and_then(Value::as_str).ok_or_else(|| {
            ApiError::invalid(field, "tool_choice must be an object with a 'type'")
        })?),
    };
    let choice_value = choice.cloned().unwrap_or(Value::Null);
    let choice = match kind {
        None if tools.is_empty() => ToolChoice::None,
        None | Some("auto") => ToolChoice::Auto,
        Some("any") => ToolChoice::Required,
        Some("none") => ToolChoice::None,
        Some("tool") => match choice_value.get("name").and_then(Value::as_str) {
            Some(name) => ToolChoice::Named(name.to_string()),
            None => {
                return Err(ApiError::invalid(
                    field,
                    "a 'tool' tool_choice needs a name",
                ))
            }
        },
        Some(other) => {
            return Err(ApiError::invalid(
                field,
                format!("tool_choice type must be auto, any, tool or none; got '{other}'"),
            ))
        }
    };
    let disable_parallel = match choice_value.get("disable_parallel_tool_use") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(disable)) => *disable,
        Some(other) => {
            return Err(ApiError::invalid(
                field,
                format!("tool_choice.disable_parallel_tool_use must be a boolean, got {other}"),
            ))
        }
    };
    let request = ToolRequest {
        tools,
        choice,
        parallel: !disable_parallel,
    };
    request.check(field)?;
    Ok(request)
}
