//! `tool_choice` as a decoding constraint: the model's tool-call format says which framing a
//! forced or started call is held to and which format its output is then parsed in
//! (`sluice_text::assistant::ToolCallSyntax`). Tool schemas are compiled leniently: keywords
//! the constraint cannot enforce (`pattern`, `minimum`, ...) are left out and logged, never a
//! 400; a schema that cannot be read at all constrains the arguments to any object.

use std::sync::Arc;

use sluice_engine::ResponseFormat;
use sluice_text::assistant::ToolCallFormat;
use sluice_text::constraint::{Tool, ToolCallMode, ToolCallRules};

use super::tools::{ToolChoice, ToolRequest};
use crate::error::ApiError;

/// How a request's calls are constrained and read.
#[derive(Debug, Clone)]
pub struct ToolPlan {
    /// The format the output is parsed in.
    pub parse_as: ToolCallFormat,
    /// The constraint, when calls are constrained at all.
    pub constraint: Option<ResponseFormat>,
}

/// The plan for `tools` on a model whose calls are written in `format`.
pub fn tool_plan(tools: &ToolRequest, format: ToolCallFormat) -> Result<ToolPlan, ApiError> {
    let unconstrained = ToolPlan {
        parse_as: format,
        constraint: None,
    };
    let Some(mode) = call_mode(tools) else {
        return Ok(unconstrained);
    };
    let Some(call) = format.syntax().constrained_call(&mode) else {
        return Ok(unconstrained);
    };
    let mut compiled = Vec::with_capacity(tools.tools.len());
    for spec in &tools.tools {
        let (tool, ignored) = match Tool::compile(&spec.name, &spec.parameters) {
            Ok(compiled) => compiled,
            Err(e) => {
                // A schema the compiler cannot read at all still gets a call whose arguments
                // are an object: agents send what their tools declare, and a 400 would stop them.
                tracing::warn!(tool = %spec.name, error = %e, "tool schema not usable; arguments constrained to any object");
                Tool::compile(&spec.name, &serde_json::json!({"type": "object"}))
                    .map_err(|e| ApiError::Internal(e.to_string()))?
            }
        };
        if !ignored.is_empty() {
            tracing::debug!(tool = %spec.name, ?ignored, "tool schema keywords not enforced");
        }
        compiled.push(tool);
    }
    let rules = ToolCallRules::new(&compiled, &call.framing, &mode)
        .map_err(|e| ApiError::invalid("tools", e.to_string()))?;
    Ok(ToolPlan {
        parse_as: call.parse_as,
        constraint: Some(ResponseFormat::ToolCalls(Arc::new(rules))),
    })
}

/// How `tools` constrain calls; `None`: not at all (no tools, or `tool_choice: "none"`).
fn call_mode(tools: &ToolRequest) -> Option<ToolCallMode> {
    match &tools.choice {
        _ if tools.tools.is_empty() => None,
        ToolChoice::None => None,
        ToolChoice::Auto => Some(ToolCallMode::Auto),
        ToolChoice::Required => Some(ToolCallMode::Forced { tool: None }),
        ToolChoice::Named(name) => Some(ToolCallMode::Forced {
            tool: Some(name.clone()),
        }),
    }
}

/// The text a forced call's output begins with on a model whose calls are written in
/// `format` (`<tool_call>`, the generic envelope's `{"tool_calls": [`), without its trailing
/// whitespace; `None` unless `tools` force a call in a framing with such an opening.
pub fn forced_opening(tools: &ToolRequest, format: ToolCallFormat) -> Option<String> {
    let mode = call_mode(tools).filter(|mode| matches!(mode, ToolCallMode::Forced { .. }))?;
    let call = format.syntax().constrained_call(&mode)?;
    let opening = String::from_utf8_lossy(&call.framing.prefix);
    Some(opening.trim_end().to_string()).filter(|opening| !opening.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::validate::tools::openai_tools;

    fn request(choice: ToolChoice) -> ToolRequest {
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"q": {"type": "string", "pattern": "^a"}}}}}]);
        ToolRequest {
            tools: openai_tools(Some(&tools)).unwrap(),
            choice,
            parallel: true,
        }
    }

    #[test]
    fn forced_calls_get_a_framing_every_format_can_read() {
        for format in ToolCallFormat::ALL {
            let plan = tool_plan(&request(ToolChoice::Required), format).unwrap();
            assert!(plan.constraint.is_some(), "{format:?}");
            let expected = match format {
                ToolCallFormat::MistralArgs | ToolCallFormat::MistralList => {
                    ToolCallFormat::GenericJson
                }
                other => other,
            };
            assert_eq!(plan.parse_as, expected);
        }
    }

    #[test]
    fn an_unreadable_schema_still_gets_an_object_constraint() {
        let mut tools = request(ToolChoice::Required);
        tools.tools[0].parameters = json!({"type": 5, "$ref": "#/nowhere"});
        let plan = tool_plan(&tools, ToolCallFormat::Hermes).unwrap();
        assert!(plan.constraint.is_some());
    }

    #[test]
    fn auto_is_constrained_only_where_a_call_opens_with_text() {
        let hermes = tool_plan(&request(ToolChoice::Auto), ToolCallFormat::Hermes).unwrap();
        assert!(hermes.constraint.is_some());
        for format in [ToolCallFormat::Llama3Json, ToolCallFormat::QwenXml] {
            let plan = tool_plan(&request(ToolChoice::Auto), format).unwrap();
            assert!(plan.constraint.is_none(), "{format:?}");
        }
        let none = tool_plan(&request(ToolChoice::None), ToolCallFormat::Hermes).unwrap();
        assert!(none.constraint.is_none());
    }

    #[test]
    fn a_forced_call_opens_with_its_framing_and_auto_with_nothing() {
        let forced = |choice, format| forced_opening(&request(choice), format);
        let named = || ToolChoice::Named("f".to_string());
        let tool_call = Some("<tool_call>".to_string());
        let envelope = Some("{\"tool_calls\": [".to_string());
        assert_eq!(
            forced(ToolChoice::Required, ToolCallFormat::Hermes),
            tool_call
        );
        assert_eq!(forced(named(), ToolCallFormat::QwenXml), tool_call);
        assert_eq!(forced(named(), ToolCallFormat::GenericJson), envelope);
        assert_eq!(
            forced(ToolChoice::Required, ToolCallFormat::MistralList),
            envelope
        );
        assert_eq!(
            forced(ToolChoice::Required, ToolCallFormat::Llama3Json),
            None
        );
        assert_eq!(forced(ToolChoice::Auto, ToolCallFormat::Hermes), None);
        assert_eq!(forced(ToolChoice::None, ToolCallFormat::Hermes), None);
    }
}
