//! Anthropic Messages requests: content blocks become the chat conversation a template
//! renders, and the sampling fields go through the same checks as chat's.
//!
//! A `tool_use` block is an assistant tool call whose arguments are the JSON text of its
//! `input`; a user message holding `tool_result` blocks becomes one `tool` message per
//! result, then a user message for any text beside them; `thinking` is the assistant
//! message's `reasoning_content`. A failed tool result (`is_error`) reaches the template as
//! `Error: ` followed by its content, since templates have no field for it. A `system` message
//! inside `messages` (Anthropic's mid-conversation instructions, right after a user turn) is a
//! system message at its place in the conversation. A user message's `image` blocks (base64
//! sources) are image parts in their place among its text (`messages/image_block.rs`).

use serde_json::{json, Value};

mod image_block;
mod tools;

use image_block::{image_part, text_part};
use tools::{anthropic_tools, tool_request};

use super::chat::{check_images, template_messages_with_images, ValidChatRequest};
use super::images::ImagePart;
use super::tools::ToolRequest;
use super::{validate_shared, ModelLimits};
use crate::error::ApiError;
use crate::wire::chat::{ChatMessage, ContentPart, MessageContent};
use crate::wire::messages::{
    AnthropicContent, AnthropicMessage, CountTokensRequest, MessagesRequest,
};
use crate::wire::{GenerationOptions, JsonSchemaField, ResponseFormatField, StopField};

/// Validates a Messages request against a model's limits.
pub fn validate_messages(
    req: MessagesRequest,
    limits: ModelLimits,
) -> Result<ValidChatRequest, ApiError> {
    if req.max_tokens.is_none() {
        return Err(ApiError::invalid("max_tokens", "max_tokens is required"));
    }
    let prompt = Prompt::new(
        req.system.as_ref(),
        &req.messages,
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        req.thinking.as_ref(),
    )?;
    let (format, format_field) =
        output_format(req.output_config.as_ref(), req.output_format.as_ref())?;
    let options = req.extensions.apply(GenerationOptions {
        response_format: format,
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k,
        stream: req.stream,
        stop: req.stop_sequences.map(StopField::Many),
        user: req.metadata.and_then(|m| m.user_id),
        ..GenerationOptions::default()
    });
    let params = validate_shared(options, req.max_tokens, "max_tokens", None, limits)
        .map_err(rename_stop)
        .map_err(|e| e.with_param_renamed("response_format", format_field))?;
    check_images(&prompt.images, limits)?;
    Ok(prompt.into_request(req.model, params))
}

/// Anthropic's structured outputs in chat's `response_format` form, with the field that gave
/// them: `output_config.format` (GA) or `output_format` (the beta); both at once is a 400.
fn output_format(
    config: Option<&Value>,
    beta: Option<&Value>,
) -> Result<(Option<ResponseFormatField>, &'static str), ApiError> {
    let config_format = match config {
        None | Some(Value::Null) => None,
        Some(Value::Object(config)) => config.get("format").filter(|f| !f.is_null()),
        Some(_) => {
            return Err(ApiError::invalid(
                "output_config",
                "output_config must be an object",
            ))
        }
    };
    let (format, field) = match (config_format, beta.filter(|b| !b.is_null())) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "output_format",
                "give output_config.format or the beta output_format, not both",
            ))
        }
        (Some(format), None) => (format, "output_config.format"),
        (None, Some(format)) => (format, "output_format"),
        (None, None) => return Ok((None, "output_config.format")),
    };
    let kind = format.get("type").and_then(Value::as_str);
    if kind != Some("json_schema") {
        return Err(ApiError::invalid(
            field,
            format!("{field}.type must be \"json_schema\""),
        ));
    }
    let Some(schema) = format.get("schema").filter(|s| s.is_object()) else {
        return Err(ApiError::invalid(
            field,
            format!("{field}.schema must be a JSON Schema object"),
        ));
    };
    let json_schema = JsonSchemaField {
        name: None,
        schema: Some(schema.clone()),
        strict: Some(true),
    };
    Ok((
        Some(ResponseFormatField {
            kind: "json_schema".into(),
            json_schema: Some(json_schema),
        }),
        field,
    ))
}

/// Validates a `count_tokens` request: the prompt it describes, with default parameters.
pub fn validate_count_tokens(
    req: CountTokensRequest,
    limits: ModelLimits,
) -> Result<ValidChatRequest, ApiError> {
    let prompt = Prompt::new(
        req.system.as_ref(),
        &req.messages,
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        req.thinking.as_ref(),
    )?;
    let params = validate_shared(
        GenerationOptions::default(),
        None,
        "max_tokens",
        None,
        limits,
    )?;
    check_images(&prompt.images, limits)?;
    Ok(prompt.into_request(req.model, params))
}

/// What a template renders: messages, tools, variables.
struct Prompt {
    messages: Value,
    images: Vec<ImagePart>,
    tools: ToolRequest,
    template_kwargs: Option<Value>,
}

impl Prompt {
    fn new(
        system: Option<&AnthropicContent>,
        messages: &[AnthropicMessage],
        tools: Option<&Value>,
        tool_choice: Option<&Value>,
        thinking: Option<&Value>,
    ) -> Result<Self, ApiError> {
        if messages.is_empty() {
            return Err(ApiError::invalid("messages", "messages must not be empty"));
        }
        let mut chat = Vec::with_capacity(messages.len() + 1);
        if let Some(system) = system {
            chat.push(text_message("system", content_text(system, "system")?));
        }
        for (i, message) in messages.iter().enumerate() {
            let field = format!("messages[{i}]");
            if message.role == "system" {
                // Mid-conversation instructions (Claude Code sends its environment so): allowed
                // right after a user turn, and rendered in place as a system message.
                if i == 0 || messages[i - 1].role != "user" {
                    return Err(ApiError::invalid(
                        &format!("{field}.role"),
                        "a system message in messages must follow a user message",
                    ));
                }
                let text = content_text(&message.content, &format!("{field}.content"))?;
                chat.push(text_message("system", text));
                continue;
            }
            chat_messages(message, &field, &mut chat)?;
        }
        let specs = anthropic_tools(tools)?;
        let tools = tool_request(tool_choice, specs)?;
        let mut images = Vec::new();
        Ok(Prompt {
            messages: template_messages_with_images(&chat, Some(&mut images))?,
            images,
            tools,
            template_kwargs: thinking_kwargs(thinking)?,
        })
    }

    fn into_request(self, model: String, params: super::ValidParams) -> ValidChatRequest {
        ValidChatRequest {
            model,
            messages: self.messages,
            images: self.images,
            tools: self.tools,
            template_kwargs: self.template_kwargs,
            params,
        }
    }
}

fn text_message(role: &str, text: String) -> ChatMessage {
    ChatMessage {
        role: role.into(),
        content: Some(MessageContent::Text(text)),
        ..ChatMessage::default()
    }
}

/// One Anthropic message as chat messages, appended to `out`; `field` names it in errors.
fn chat_messages(
    message: &AnthropicMessage,
    field: &str,
    out: &mut Vec<ChatMessage>,
) -> Result<(), ApiError> {
    let role = message.role.as_str();
    if role != "user" && role != "assistant" {
        return Err(ApiError::invalid(
            &format!("{field}.role"),
            format!("role must be user, assistant or system; got '{role}'"),
        ));
    }
    let blocks = match &message.content {
        AnthropicContent::Text(text) => {
            out.push(text_message(role, text.clone()));
            return Ok(());
        }
        AnthropicContent::Blocks(blocks) => blocks,
    };
    // A user turn with images keeps its blocks' order as chat parts.
    let mut parts: Vec<ContentPart> = Vec::new();
    let mut texts = Vec::new();
    let mut thinking = Vec::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let at = format!("{field}.content[{j}]");
        let wrong_role = || {
            ApiError::invalid(
                &format!("{at}.type"),
                format!("a {role} message cannot hold a {} block", block.kind),
            )
        };
        match block.kind.as_str() {
            "text" => {
                let text = required(&block.text, &at, "text")?;
                texts.push(text.to_string());
                parts.push(text_part(text));
            }
            "image" if role == "user" => parts.push(image_part(block, &at)?),
            "tool_use" if role == "assistant" => {
                let arguments = match &block.input {
                    Some(input @ Value::Object(_)) => input.to_string(),
                    None => "{}".into(),
                    Some(_) => {
                        return Err(ApiError::invalid(
                            &format!("{at}.input"),
                            "a tool_use input must be an object",
                        ))
                    }
                };
                calls.push(json!({
                    "id": required(&block.id, &at, "id")?,
                    "type": "function",
                    "function": {"name": required(&block.name, &at, "name")?, "arguments": arguments},
                }));
            }
            "tool_result" if role == "user" => {
                let id = required(&block.tool_use_id, &at, "tool_use_id")?;
                let mut result = match &block.content {
                    None => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => result_text(parts, &format!("{at}.content"))?,
                    Some(_) => {
                        return Err(ApiError::invalid(
                            &format!("{at}.content"),
                            "tool_result content must be a string or text blocks",
                        ))
                    }
                };
                if block.is_error == Some(true) {
                    result = format!("Error: {result}");
                }
                out.push(ChatMessage {
                    tool_call_id: Some(id.to_string()),
                    ..text_message("tool", result)
                });
            }
            "thinking" if role == "assistant" => {
                thinking.push(required(&block.thinking, &at, "thinking")?.to_string())
            }
            "redacted_thinking" => {}
            "tool_use" | "tool_result" | "thinking" => return Err(wrong_role()),
            "image" | "document" => {
                return Err(ApiError::invalid(
                    &format!("{at}.type"),
                    format!("a {role} message cannot hold a {} block", block.kind),
                ))
            }
            other => {
                return Err(ApiError::invalid(
                    &format!("{at}.type"),
                    format!("unsupported content block type '{other}'"),
                ))
            }
        }
    }
    if role == "assistant" {
        out.push(ChatMessage {
            tool_calls: (!calls.is_empty()).then_some(Value::Array(calls)),
            reasoning_content: (!thinking.is_empty()).then(|| thinking.join("\n")),
            ..text_message(role, texts.join("\n"))
        });
    } else if parts.len() > texts.len() {
        out.push(ChatMessage {
            content: Some(MessageContent::Parts(parts)),
            ..text_message(role, String::new())
        });
    } else if !texts.is_empty() || blocks.is_empty() {
        out.push(text_message(role, texts.join("\n")));
    }
    Ok(())
}

fn required<'a>(value: &'a Option<String>, at: &str, name: &str) -> Result<&'a str, ApiError> {
    value.as_deref().ok_or_else(|| {
        ApiError::invalid(
            &format!("{at}.{name}"),
            format!("a block of this type needs '{name}'"),
        )
    })
}

/// A string or text blocks, joined by newlines (`system`).
fn content_text(content: &AnthropicContent, field: &str) -> Result<String, ApiError> {
    match content {
        AnthropicContent::Text(text) => Ok(text.clone()),
        AnthropicContent::Blocks(blocks) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (j, block) in blocks.iter().enumerate() {
                let at = format!("{field}[{j}]");
                if block.kind != "text" {
                    return Err(ApiError::invalid(
                        &format!("{at}.type"),
                        format!("only text blocks are allowed here, got '{}'", block.kind),
                    ));
                }
                texts.push(required(&block.text, &at, "text")?);
            }
            Ok(texts.join("\n"))
        }
    }
}

/// A tool_result's text blocks, joined by newlines.
fn result_text(parts: &[Value], field: &str) -> Result<String, ApiError> {
    let mut texts = Vec::with_capacity(parts.len());
    for (k, part) in parts.iter().enumerate() {
        match (part.get("type").and_then(Value::as_str), part.get("text")) {
            (Some("text"), Some(Value::String(t))) => texts.push(t.as_str()),
            (kind, _) => {
                return Err(ApiError::invalid(
                    &format!("{field}[{k}]"),
                    format!(
                        "tool results may hold text blocks only, got '{}'",
                        kind.unwrap_or("a block without a type")
                    ),
                ))
            }
        }
    }
    Ok(texts.join("\n"))
}

/// `thinking`: `enabled` (or `adaptive`) turns the template's thinking on; `disabled`, or no
/// `thinking` at all (Anthropic's default: no extended thinking), off.
fn thinking_kwargs(thinking: Option<&Value>) -> Result<Option<Value>, ApiError> {
    let Some(thinking) = thinking else {
        return Ok(Some(json!({"enable_thinking": false})));
    };
    match thinking.get("type").and_then(Value::as_str) {
        Some("enabled" | "adaptive") => Ok(Some(json!({"enable_thinking": true}))),
        Some("disabled") => Ok(Some(json!({"enable_thinking": false}))),
        _ => Err(ApiError::invalid(
            "thinking.type",
            "thinking.type must be enabled or disabled",
        )),
    }
}

/// Whether the request turns thinking on (what its answer may show as thinking blocks).
pub fn thinking_enabled(thinking: Option<&Value>) -> bool {
    matches!(
        thinking.and_then(|t| t.get("type")).and_then(Value::as_str),
        Some("enabled" | "adaptive")
    )
}

/// Chat's checks name `stop`; here the field is `stop_sequences`.
fn rename_stop(err: ApiError) -> ApiError {
    match err {
        ApiError::InvalidRequest {
            message,
            param: Some(p),
            code,
        } if p == "stop" => ApiError::InvalidRequest {
            message: message.replace("stop strings", "stop_sequences"),
            param: Some("stop_sequences".into()),
            code,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests;
