//! Tools and `tool_choice`, as every chat-like endpoint (Chat Completions, Responses, Anthropic
//! Messages) hands them to the generation path: a list of functions with their JSON Schema
//! parameters, and what the model must do with them.

use serde_json::{json, Value};

use crate::error::ApiError;

/// One function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The function's name.
    pub name: String,
    /// What it does, for the template.
    pub description: Option<String>,
    /// JSON Schema of its arguments object (`{"type": "object"}` when the client sent none).
    pub parameters: Value,
}

impl ToolSpec {
    /// The OpenAI `{"type": "function", "function": {...}}` form chat templates iterate over.
    pub fn template_value(&self) -> Value {
        let mut function = json!({"name": self.name, "parameters": self.parameters});
        if let Some(d) = &self.description {
            function["description"] = json!(d);
        }
        json!({"type": "function", "function": function})
    }
}

/// What the model must do with the tools.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// Answer in text; no call is parsed out of the output either.
    None,
    /// Text or calls, as the model chooses; a call it starts is constrained to complete validly.
    #[default]
    Auto,
    /// At least one call (the first is forced).
    Required,
    /// A call of this function (forced).
    Named(String),
}

/// The tools of a request, as every dialect validates them into.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolRequest {
    /// Functions the model may call (empty when the request sent none).
    pub tools: Vec<ToolSpec>,
    /// What the model must do with them.
    pub choice: ToolChoice,
    /// Whether more than one call may come back in a turn.
    pub parallel: bool,
}

impl ToolRequest {
    /// Whether tool calls are parsed out of the model's output at all.
    pub fn parses_calls(&self) -> bool {
        !self.tools.is_empty() && self.choice != ToolChoice::None
    }

    /// The tools in the form chat templates expect, `None` when there are none.
    pub fn template_tools(&self) -> Option<Value> {
        (!self.tools.is_empty())
            .then(|| Value::Array(self.tools.iter().map(ToolSpec::template_value).collect()))
    }

    /// Checks that a named choice names a listed tool and that `required` has tools to call.
    pub fn check(&self, field: &str) -> Result<(), ApiError> {
        match &self.choice {
            ToolChoice::Named(name) if !self.tools.iter().any(|t| &t.name == name) => {
                Err(ApiError::invalid(
                    field,
                    format!("tool_choice names the function '{name}', which is not in tools"),
                ))
            }
            ToolChoice::Required | ToolChoice::Named(_) if self.tools.is_empty() => Err(
                ApiError::invalid(field, "tool_choice requires a call but no tools were given"),
            ),
            _ => Ok(()),
        }
    }
}

/// Logs the tools of `api`'s request that are skipped (`(type, name)`): hosted tools a local
/// server cannot run and tool types it does not offer yet, so an operator sees why a client's
/// tool never gets called. Nothing is logged when none are skipped.
pub(crate) fn log_skipped_tools(api: &str, skipped: &[(String, String)]) {
    if skipped.is_empty() {
        return;
    }
    let list: Vec<String> = skipped
        .iter()
        .map(|(kind, name)| match name.is_empty() {
            true => kind.clone(),
            false => format!("{name} ({kind})"),
        })
        .collect();
    tracing::warn!(
        api,
        tools = %list.join(", "),
        "skipping tools this server cannot offer the model (only client function tools are)"
    );
}

/// `(type, name)` of a skipped tool.
pub(crate) fn skipped_tool(kind: &str, tool: &Value) -> (String, String) {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
    (kind.to_string(), name.to_string())
}

/// OpenAI Chat Completions `tools`: `[{"type": "function", "function": {name, description,
/// parameters}}]`. Tools of other types (built-in tools of hosted APIs) are skipped: a local
/// model cannot run them, and refusing the request would break clients that always send them.
pub fn openai_tools(tools: Option<&Value>) -> Result<Vec<ToolSpec>, ApiError> {
    let Some(tools) = tools else {
        return Ok(Vec::new());
    };
    let Value::Array(list) = tools else {
        return Err(ApiError::invalid("tools", "tools must be a list"));
    };
    let mut out = Vec::with_capacity(list.len());
    let mut skipped = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let kind = tool
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("function");
        if kind != "function" {
            skipped.push(skipped_tool(kind, tool));
            continue;
        }
        let Some(function) = tool.get("function") else {
            return Err(ApiError::invalid(
                &format!("tools[{i}].function"),
                "a function tool needs a 'function' object",
            ));
        };
        out.push(function_spec(function, &format!("tools[{i}].function"))?);
    }
    log_skipped_tools("chat", &skipped);
    Ok(out)
}

/// `{name, description, parameters}` as both Chat Completions and Responses send a function.
pub fn function_spec(function: &Value, field: &str) -> Result<ToolSpec, ApiError> {
    let name = function.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        return Err(ApiError::invalid(
            &format!("{field}.name"),
            "a function needs a non-empty name",
        ));
    }
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            return Err(ApiError::invalid(
                &format!("{field}.parameters"),
                "parameters must be a JSON Schema object",
            ))
        }
    };
    Ok(ToolSpec {
        name: name.to_string(),
        description: function
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string),
        parameters,
    })
}

/// OpenAI `tool_choice`: `"none" | "auto" | "required"` or `{"type": "function", "function":
/// {"name": ...}}` (Chat Completions) or `{"type": "function", "name": ...}` (Responses).
/// Absent: `auto` with tools, `none` without.
pub fn openai_tool_choice(choice: Option<&Value>, has_tools: bool) -> Result<ToolChoice, ApiError> {
    let field = "tool_choice";
    Ok(match choice {
        None | Some(Value::Null) if has_tools => ToolChoice::Auto,
        None | Some(Value::Null) => ToolChoice::None,
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => {
                return Err(ApiError::invalid(
                    field,
                    format!(
                        "tool_choice must be none, auto, required or a function; got '{other}'"
                    ),
                ))
            }
        },
        Some(obj @ Value::Object(_)) => {
            let name = obj
                .pointer("/function/name")
                .or_else(|| obj.get("name"))
                .and_then(Value::as_str);
            match name {
                Some(name) => ToolChoice::Named(name.to_string()),
                None => {
                    return Err(ApiError::invalid(
                        field,
                        "a tool_choice object must name a function",
                    ))
                }
            }
        }
        Some(_) => {
            return Err(ApiError::invalid(
                field,
                "tool_choice must be a string or an object",
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_tools_are_read_and_others_skipped() {
        let tools = json!([
            {"type": "function", "function": {"name": "f", "description": "d",
                "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}},
            {"type": "web_search_preview"},
            {"type": "function", "function": {"name": "g"}}
        ]);
        let specs = openai_tools(Some(&tools)).unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].description.as_deref(), Some("d"));
        assert_eq!(
            specs[1].parameters,
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            specs[0].template_value()["function"]["parameters"]["properties"]["a"]["type"],
            "string"
        );
        assert!(openai_tools(Some(&json!([{"type": "function", "function": {}}]))).is_err());
        assert!(openai_tools(Some(&json!({"a": 1}))).is_err());
    }

    #[test]
    fn tool_choice_forms() {
        assert_eq!(openai_tool_choice(None, true).unwrap(), ToolChoice::Auto);
        assert_eq!(openai_tool_choice(None, false).unwrap(), ToolChoice::None);
        assert_eq!(
            openai_tool_choice(Some(&json!("required")), true).unwrap(),
            ToolChoice::Required
        );
        let chat = json!({"type": "function", "function": {"name": "f"}});
        let responses = json!({"type": "function", "name": "f"});
        for v in [chat, responses] {
            assert_eq!(
                openai_tool_choice(Some(&v), true).unwrap(),
                ToolChoice::Named("f".into())
            );
        }
        assert!(openai_tool_choice(Some(&json!("sometimes")), true).is_err());
        assert!(openai_tool_choice(Some(&json!({"type": "function"})), true).is_err());
    }

    #[test]
    fn a_forced_call_needs_its_tool() {
        let request = ToolRequest {
            tools: vec![],
            choice: ToolChoice::Required,
            parallel: true,
        };
        assert!(request.check("tool_choice").is_err());
        let request = ToolRequest {
            tools: openai_tools(Some(
                &json!([{"type": "function", "function": {"name": "f"}}]),
            ))
            .unwrap(),
            choice: ToolChoice::Named("g".into()),
            parallel: true,
        };
        let err = request.check("tool_choice").unwrap_err();
        assert!(err.to_string().contains("'g'"), "{err}");
    }
}
