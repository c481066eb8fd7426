//! Responses requests: input items become the chat conversation a template renders, and the
//! sampling fields go through the same checks as chat's.
//!
//! Items map onto chat messages one to one, except that function calls join the assistant
//! message before them (chat templates expect one assistant turn holding its calls) and a
//! reasoning item becomes the `reasoning_content` of the assistant message after it.

use serde_json::{json, Value};

mod input_image;

use input_image::{has_images, input_parts, stored_images};

use super::chat::{check_images, template_kwargs, template_messages_with_images, ValidChatRequest};
use super::custom_tools::{custom_arguments, custom_spec};
use super::images::ImagePart;
use super::metadata::validate_metadata;
use super::tools::{function_spec, openai_tool_choice, ToolRequest, ToolSpec};
use super::{validate_shared, ModelLimits};
use crate::error::ApiError;
use crate::responses_store::StoredResponse;
use crate::wire::chat::{ChatMessage, MessageContent};
use crate::wire::responses::{InputItem, ResponseEcho, ResponseInput, ResponsesRequest};
use crate::wire::{GenerationOptions, JsonSchemaField, ResponseFormatField};

/// A Responses request whose every field is in range.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidResponsesRequest {
    /// What generation needs: the messages (instructions in front), tools, template variables
    /// and parameters.
    pub chat: ValidChatRequest,
    /// The conversation without the instructions, template-ready: what
    /// [`StoredResponse::input`] keeps for the next turn.
    pub conversation: Value,
    /// Where in `conversation` the request's own input begins ([`StoredResponse::input_start`]).
    pub input_start: usize,
    /// The fields the response object echoes.
    pub echo: ResponseEcho,
    /// The names of the request's `custom` tools: their calls are `custom_tool_call` items.
    pub custom_tools: Vec<String>,
}

/// Validates a Responses request. `previous` is the stored response its
/// `previous_response_id` names, looked up by the caller (which answers 404 when there is
/// none); its conversation and output come before the new input.
pub fn validate_responses(
    req: ResponsesRequest,
    limits: ModelLimits,
    previous: Option<&StoredResponse>,
) -> Result<ValidResponsesRequest, ApiError> {
    if req.background == Some(true) {
        return Err(ApiError::invalid(
            "background",
            "background mode is not supported: send the request without it and wait",
        ));
    }
    validate_metadata(req.metadata.as_ref())?;
    if let Some(t) = req.truncation.as_deref() {
        if t != "auto" && t != "disabled" {
            return Err(ApiError::invalid(
                "truncation",
                format!("truncation must be auto or disabled, got '{t}'"),
            ));
        }
    }
    let echo = req.echo();
    let mut conversation = match (previous, &req.previous_response_id) {
        (Some(p), _) => previous_conversation(p)?,
        (None, Some(id)) => {
            return Err(ApiError::InvalidRequest {
                message: format!("previous response '{id}' not found"),
                param: Some("previous_response_id".into()),
                code: Some("previous_response_not_found"),
            })
        }
        (None, None) => Vec::new(),
    };
    let new = match req.input {
        Some(ResponseInput::Text(text)) => vec![ChatMessage {
            role: "user".into(),
            content: Some(MessageContent::Text(text)),
            ..ChatMessage::default()
        }],
        Some(ResponseInput::Items(items)) => chat_messages(&items, "input")?,
        None => Vec::new(),
    };
    let input_start = conversation.len();
    let mut images = stored_images(&conversation, "previous_response_id")?;
    conversation.extend(rendered(&new, Some(&mut images))?);
    check_images(&images, limits)?;
    if conversation.is_empty() {
        return Err(ApiError::invalid("input", "input must not be empty"));
    }
    let mut messages = Vec::with_capacity(conversation.len() + 1);
    if let Some(instructions) = &req.instructions {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    messages.extend(conversation.iter().cloned());

    let options = req.extensions.apply(GenerationOptions {
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k,
        stream: req.stream,
        user: req.user,
        response_format: response_format(req.text.and_then(|t| t.format))?,
        ..GenerationOptions::default()
    });
    let params = validate_shared(
        options,
        req.max_output_tokens,
        "max_output_tokens",
        None,
        limits,
    )
    .map_err(rename_response_format)?;
    let (specs, custom_tools) = responses_tools(req.tools.as_ref())?;
    let choice = openai_tool_choice(req.tool_choice.as_ref(), !specs.is_empty())?;
    let tools = ToolRequest {
        tools: specs,
        choice,
        parallel: req.parallel_tool_calls.unwrap_or(true),
    };
    tools.check("tool_choice")?;
    let effort = req.reasoning.and_then(|r| r.effort);
    let template_kwargs =
        template_kwargs(None, effort.as_deref()).map_err(|e| rename(e, "reasoning.effort"))?;
    Ok(ValidResponsesRequest {
        chat: ValidChatRequest {
            model: req.model,
            messages: Value::Array(messages),
            images,
            tools,
            template_kwargs,
            params,
        },
        conversation: Value::Array(conversation),
        input_start,
        echo,
        custom_tools,
    })
}

/// The stored conversation, then the stored output as the assistant's turn.
fn previous_conversation(previous: &StoredResponse) -> Result<Vec<Value>, ApiError> {
    let internal =
        |what: &str| ApiError::Internal(format!("a stored response's {what} is malformed"));
    let mut conversation = previous
        .input
        .as_array()
        .cloned()
        .ok_or_else(|| internal("input"))?;
    let output: Vec<InputItem> =
        serde_json::from_value(previous.output.clone()).map_err(|_| internal("output"))?;
    conversation.extend(rendered(&chat_messages(&output, "previous output")?, None)?);
    Ok(conversation)
}

/// Chat messages in template form (none for none), their images taken into `images`.
fn rendered(
    messages: &[ChatMessage],
    images: Option<&mut Vec<ImagePart>>,
) -> Result<Vec<Value>, ApiError> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    match template_messages_with_images(messages, images)? {
        Value::Array(list) => Ok(list),
        _ => unreachable!("template_messages returns a list"),
    }
}

/// Input items as chat messages; `field` names the list in errors.
pub fn chat_messages(items: &[InputItem], field: &str) -> Result<Vec<ChatMessage>, ApiError> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(items.len());
    // A reasoning item waits for the assistant message or call that follows it.
    let mut reasoning: Option<String> = None;
    for (i, item) in items.iter().enumerate() {
        let at = |name: &str| format!("{field}[{i}].{name}");
        let kind = item
            .kind
            .as_deref()
            .or(item.role.as_ref().map(|_| "message"));
        match kind {
            Some("message") => {
                let role = match item.role.as_deref() {
                    Some("user") => "user",
                    Some("system" | "developer") => "system",
                    Some("assistant") => "assistant",
                    Some(other) => {
                        return Err(ApiError::invalid(
                            &at("role"),
                            format!(
                            "role must be one of user, system, developer, assistant; got '{other}'"
                        ),
                        ))
                    }
                    None => return Err(ApiError::invalid(&at("role"), "a message needs a role")),
                };
                let content = match item.content.as_ref() {
                    Some(Value::Array(parts))
                        if role == "user" && has_images(item.content.as_ref()) =>
                    {
                        MessageContent::Parts(input_parts(parts, &at("content"))?)
                    }
                    content => MessageContent::Text(content_text(content, &at("content"))?),
                };
                out.push(ChatMessage {
                    role: role.into(),
                    content: Some(content),
                    reasoning_content: if role == "assistant" {
                        reasoning.take()
                    } else {
                        None
                    },
                    ..ChatMessage::default()
                });
            }
            Some(kind @ ("function_call" | "custom_tool_call")) => {
                let arguments = match kind {
                    "function_call" => item.arguments.as_deref().unwrap_or("{}").to_string(),
                    _ => custom_arguments(required(&item.input, &at("input"))?),
                };
                let call = json!({
                    "id": required(&item.call_id, &at("call_id"))?,
                    "type": "function",
                    "function": {
                        "name": required(&item.name, &at("name"))?,
                        "arguments": arguments,
                    },
                });
                match out.last_mut() {
                    Some(m) if m.role == "assistant" && reasoning.is_none() => {
                        match m.tool_calls.get_or_insert_with(|| json!([])) {
                            Value::Array(calls) => calls.push(call),
                            _ => unreachable!("tool_calls built here are lists"),
                        }
                    }
                    _ => out.push(ChatMessage {
                        role: "assistant".into(),
                        content: Some(MessageContent::Text(String::new())),
                        tool_calls: Some(json!([call])),
                        reasoning_content: reasoning.take(),
                        ..ChatMessage::default()
                    }),
                }
            }
            Some("function_call_output" | "custom_tool_call_output") => {
                let call_id = required(&item.call_id, &at("call_id"))?;
                let output = content_text(item.output.as_ref(), &at("output"))?;
                out.push(ChatMessage {
                    role: "tool".into(),
                    content: Some(MessageContent::Text(output)),
                    tool_call_id: Some(call_id.to_string()),
                    ..ChatMessage::default()
                });
            }
            Some("reasoning") => {
                let text = match &item.content {
                    Some(Value::Array(parts)) if !parts.is_empty() => {
                        parts_text(parts, &at("content"))?
                    }
                    _ => match &item.summary {
                        Some(Value::Array(parts)) => parts_text(parts, &at("summary"))?,
                        _ => String::new(),
                    },
                };
                reasoning = Some(match reasoning.take() {
                    Some(before) => format!("{before}\n{text}"),
                    None => text,
                });
            }
            Some(other) => {
                return Err(ApiError::invalid(
                    &at("type"),
                    format!(
                        "input items must be message, function_call, function_call_output, \
                         custom_tool_call, custom_tool_call_output or reasoning; got '{other}'"
                    ),
                ))
            }
            None => {
                return Err(ApiError::invalid(
                    &at("type"),
                    "an input item needs a type (or a role, for a message)",
                ))
            }
        }
    }
    Ok(out)
}

fn required<'a>(value: &'a Option<String>, field: &str) -> Result<&'a str, ApiError> {
    value
        .as_deref()
        .ok_or_else(|| ApiError::invalid(field, format!("{field} is required")))
}

/// A message's content or a call's output: a string, or text parts joined by newlines.
fn content_text(content: Option<&Value>, field: &str) -> Result<String, ApiError> {
    match content {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => parts_text(parts, field),
        Some(_) => Err(ApiError::invalid(
            field,
            "content must be a string or a list of text parts",
        )),
        None => Err(ApiError::invalid(field, format!("{field} is required"))),
    }
}

/// Text parts (`input_text`, `output_text`, `text`, `summary_text`, `reasoning_text`) joined
/// by newlines; a refusal part adds nothing; any other part is refused.
fn parts_text(parts: &[Value], field: &str) -> Result<String, ApiError> {
    let mut texts = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "input_text" | "output_text" | "text" | "summary_text" | "reasoning_text" => {
                match part.get("text").and_then(Value::as_str) {
                    Some(t) => texts.push(t),
                    None => {
                        return Err(ApiError::invalid(
                            &format!("{field}[{j}].text"),
                            "a text part needs a 'text' string",
                        ))
                    }
                }
            }
            "refusal" => {}
            other => {
                return Err(ApiError::invalid(
                    &format!("{field}[{j}].type"),
                    format!("only text content is supported, got a part of type '{other}'"),
                ))
            }
        }
    }
    Ok(texts.join("\n"))
}

/// Responses `tools`: functions with their fields at the top level, and `custom` tools as
/// functions of one string (`custom_tools.rs`; their names are the second list); other types
/// (hosted tools, `namespace` tools) are skipped and logged, as in chat.
fn responses_tools(tools: Option<&Value>) -> Result<(Vec<ToolSpec>, Vec<String>), ApiError> {
    let Some(tools) = tools else {
        return Ok((Vec::new(), Vec::new()));
    };
    let Value::Array(list) = tools else {
        return Err(ApiError::invalid("tools", "tools must be a list"));
    };
    let mut out = Vec::with_capacity(list.len());
    let mut custom = Vec::new();
    let mut skipped = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let kind = tool
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("function");
        match kind {
            "function" => out.push(function_spec(tool, &format!("tools[{i}]"))?),
            "custom" => {
                let spec = custom_spec(tool, &format!("tools[{i}]"))?;
                custom.push(spec.name.clone());
                out.push(spec);
            }
            _ => skipped.push(super::tools::skipped_tool(kind, tool)),
        }
    }
    super::tools::log_skipped_tools("responses", &skipped);
    Ok((out, custom))
}

/// `text.format` in chat's `response_format` form.
fn response_format(
    format: Option<crate::wire::responses::TextFormat>,
) -> Result<Option<ResponseFormatField>, ApiError> {
    let Some(format) = format else {
        return Ok(None);
    };
    if format.kind == "json_schema" && format.schema.is_none() {
        return Err(ApiError::invalid(
            "text.format.schema",
            "a json_schema format needs a schema",
        ));
    }
    let json_schema = (format.kind == "json_schema").then(|| JsonSchemaField {
        name: format.name,
        schema: format.schema,
        strict: format.strict,
    });
    Ok(Some(ResponseFormatField {
        kind: format.kind,
        json_schema,
    }))
}

/// Chat's checks name `response_format`; here the field is `text.format`.
fn rename_response_format(err: ApiError) -> ApiError {
    match &err {
        ApiError::InvalidRequest { param: Some(p), .. } if p == "response_format" => {
            rename(err, "text.format")
        }
        _ => err,
    }
}

fn rename(err: ApiError, param: &str) -> ApiError {
    match err {
        ApiError::InvalidRequest { message, code, .. } => ApiError::InvalidRequest {
            message: message
                .replace("response_format.json_schema.schema", "text.format.schema")
                .replace("response_format", "text.format")
                .replace("reasoning_effort", "reasoning.effort"),
            param: Some(param.to_string()),
            code,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests;
