//! Chat requests: the messages become the JSON the chat template renders.

use serde_json::{json, Map, Value};

use super::images::{image_error, image_from_url, ImagePart, MAX_IMAGES_PER_REQUEST};
use super::metadata::validate_metadata;
use super::tools::{openai_tool_choice, openai_tools, ToolRequest};
use super::{validate_shared, ModelLimits, ValidParams, MAX_TOP_LOGPROBS};
use crate::error::ApiError;
use crate::wire::chat::{ChatCompletionRequest, ChatMessage, MessageContent};

/// A chat request whose every field is in range; the prompt is still to be rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidChatRequest {
    /// Served model id.
    pub model: String,
    /// `[{role, content, ...}]` ready for `ChatTemplate::render`.
    pub messages: Value,
    /// The images of the messages, in order (each an `{"type": "image"}` part of its
    /// message's content).
    pub images: Vec<ImagePart>,
    /// The functions the model may call and what it must do with them.
    pub tools: ToolRequest,
    /// Extra chat-template variables (a JSON object), from `chat_template_kwargs` and
    /// `reasoning_effort`.
    pub template_kwargs: Option<Value>,
    /// Sampling, stopping and streaming parameters.
    pub params: ValidParams,
}

/// Validates a chat request against a model's limits.
pub fn validate_chat(
    req: ChatCompletionRequest,
    limits: ModelLimits,
) -> Result<ValidChatRequest, ApiError> {
    validate_metadata(req.metadata.as_ref())?;
    let mut images = Vec::new();
    let messages = template_messages_with_images(&req.messages, Some(&mut images))?;
    check_images(&images, limits)?;
    let logprobs = match (req.logprobs.unwrap_or(false), req.top_logprobs) {
        (_, Some(k)) if !(0..=MAX_TOP_LOGPROBS.into()).contains(&k) => {
            return Err(ApiError::invalid(
                "top_logprobs",
                format!("top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}, got {k}"),
            ))
        }
        (false, Some(_)) => {
            return Err(ApiError::invalid(
                "top_logprobs",
                "top_logprobs requires logprobs to be true",
            ))
        }
        (true, k) => Some(k.unwrap_or(0) as u32),
        (false, None) => None,
    };
    // `max_completion_tokens` is the current name; `max_tokens` the deprecated one.
    let (max_tokens, max_tokens_param) = match (req.max_completion_tokens, req.max_tokens) {
        (Some(m), _) => (Some(m), "max_completion_tokens"),
        (None, m) => (m, "max_tokens"),
    };
    let params = validate_shared(req.options, max_tokens, max_tokens_param, logprobs, limits)?;
    let specs = openai_tools(req.tools.as_ref())?;
    let choice = openai_tool_choice(req.tool_choice.as_ref(), !specs.is_empty())?;
    let tools = ToolRequest {
        tools: specs,
        choice,
        parallel: req.parallel_tool_calls.unwrap_or(true),
    };
    tools.check("tool_choice")?;
    let template_kwargs =
        template_kwargs(req.chat_template_kwargs, req.reasoning_effort.as_deref())?;
    Ok(ValidChatRequest {
        model: req.model,
        messages,
        images,
        tools,
        template_kwargs,
        params,
    })
}

/// Refuses images to a model that takes none, and more than a request may carry.
pub fn check_images(images: &[ImagePart], limits: ModelLimits) -> Result<(), ApiError> {
    if let Some(first) = images.first() {
        if !limits.takes_images {
            return Err(image_error(
                &first.part,
                "this model does not take images (it has no image encoder); send text only",
            ));
        }
    }
    if images.len() > MAX_IMAGES_PER_REQUEST {
        return Err(image_error(
            &images[MAX_IMAGES_PER_REQUEST].part,
            format!(
                "a request may carry at most {MAX_IMAGES_PER_REQUEST} images, got {}",
                images.len()
            ),
        ));
    }
    Ok(())
}

/// The template variables a request sets: its `chat_template_kwargs`, and for
/// `reasoning_effort` that name (gpt-oss templates read it) plus `enable_thinking: false` for
/// `none` (Qwen3, SmolLM3, Granite and others switch thinking with it) unless the kwargs set it.
pub fn template_kwargs(
    kwargs: Option<Value>,
    reasoning_effort: Option<&str>,
) -> Result<Option<Value>, ApiError> {
    let mut vars = match kwargs {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(ApiError::invalid(
                "chat_template_kwargs",
                "chat_template_kwargs must be an object",
            ))
        }
    };
    if let Some(effort) = reasoning_effort {
        const EFFORTS: [&str; 5] = ["none", "minimal", "low", "medium", "high"];
        if !EFFORTS.contains(&effort) {
            return Err(ApiError::invalid(
                "reasoning_effort",
                format!(
                    "reasoning_effort must be one of {}; got '{effort}'",
                    EFFORTS.join(", ")
                ),
            ));
        }
        vars.entry("reasoning_effort").or_insert(json!(effort));
        if effort == "none" {
            vars.entry("enable_thinking").or_insert(json!(false));
        }
    }
    Ok((!vars.is_empty()).then_some(Value::Object(vars)))
}

/// Turns the wire messages into the list a chat template iterates over: every `content` a
/// string (text parts joined by newlines), roles checked, `developer` treated as `system`.
/// Image parts are refused; see [`template_messages_with_images`].
pub fn template_messages(messages: &[ChatMessage]) -> Result<Value, ApiError> {
    template_messages_with_images(messages, None)
}

/// [`template_messages`], with `image_url` parts taken into `images` (in order) when it is
/// given: a message with images keeps its content as a list of parts, `{"type": "text",
/// "text": ...}` and `{"type": "image"}`, which the prompt renderer turns into one string
/// with the model's image placeholder in place (`chat_turn/prompt.rs`).
pub fn template_messages_with_images(
    messages: &[ChatMessage],
    mut images: Option<&mut Vec<ImagePart>>,
) -> Result<Value, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::invalid("messages", "messages must not be empty"));
    }
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            "tool" => "tool",
            other => {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].role"),
                    format!("role must be one of system, user, assistant, tool; got '{other}'"),
                ))
            }
        };
        let content = match &m.content {
            Some(MessageContent::Text(t)) => json!(t),
            Some(MessageContent::Parts(parts)) => {
                let mut texts = Vec::with_capacity(parts.len());
                let mut listed = Vec::new();
                for (j, part) in parts.iter().enumerate() {
                    match (part.kind.as_str(), &part.text) {
                        ("image_url", _) if images.is_some() && part.decoded.is_some() => {
                            let taken = images.as_deref_mut().expect("checked");
                            taken.push(part.decoded.clone().expect("checked"));
                            // A Responses input keeps its URL: the stored turn is read again.
                            listed.push(match part.image_url.as_ref().and_then(Value::as_str) {
                                Some(url) => json!({"type": "image", "url": url}),
                                None => json!({"type": "image"}),
                            });
                        }
                        ("image_url", _) if images.is_some() => {
                            let at = format!("messages[{i}].content[{j}]");
                            let url = part.image_url.as_ref().and_then(|u| {
                                u.as_str().or_else(|| u.get("url").and_then(Value::as_str))
                            });
                            let Some(url) = url else {
                                return Err(image_error(
                                    &format!("{at}.image_url"),
                                    "an image_url part needs 'image_url': {\"url\": ...}",
                                ));
                            };
                            let taken = images.as_deref_mut().expect("checked");
                            taken.push(image_from_url(url, &format!("{at}.image_url"))?);
                            listed.push(json!({"type": "image"}));
                        }
                        ("text", Some(t)) => {
                            texts.push(t.as_str());
                            listed.push(json!({"type": "text", "text": t}));
                        }
                        ("text", None) => {
                            return Err(ApiError::invalid(
                                &format!("messages[{i}].content[{j}].text"),
                                "a text content part needs a 'text' field",
                            ))
                        }
                        (kind, _) => {
                            return Err(ApiError::invalid(
                                &format!("messages[{i}].content[{j}].type"),
                                format!("only text content parts are supported, got '{kind}'"),
                            ))
                        }
                    }
                }
                if listed.len() > texts.len() {
                    Value::Array(listed)
                } else {
                    json!(texts.join("\n"))
                }
            }
            None if role == "assistant" && m.tool_calls.is_some() => json!(""),
            None => {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].content"),
                    format!("a {role} message needs content"),
                ))
            }
        };
        let mut msg = Map::new();
        msg.insert("role".into(), json!(role));
        msg.insert("content".into(), content);
        if let Some(name) = &m.name {
            msg.insert("name".into(), json!(name));
        }
        if let Some(calls) = &m.tool_calls {
            if !calls.is_array() {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].tool_calls"),
                    "tool_calls must be a list",
                ));
            }
            msg.insert("tool_calls".into(), template_tool_calls(calls));
        }
        if let Some(reasoning) = m.reasoning_content.as_ref().or(m.reasoning.as_ref()) {
            if role == "assistant" {
                msg.insert("reasoning_content".into(), json!(reasoning));
            }
        }
        if let Some(id) = &m.tool_call_id {
            msg.insert("tool_call_id".into(), json!(id));
        }
        out.push(Value::Object(msg));
    }
    Ok(Value::Array(out))
}

/// Tool calls as chat templates expect them: `function.arguments` an object (templates iterate
/// it or `tojson` it), parsed from the JSON string the OpenAI wire carries. Arguments that do
/// not parse as an object (a model's botched call, sent back in the history) stay the string.
pub fn template_tool_calls(calls: &Value) -> Value {
    let mut calls = calls.clone();
    for call in calls.as_array_mut().into_iter().flatten() {
        if let Some(args) = call.pointer_mut("/function/arguments") {
            if let Some(Ok(parsed @ Value::Object(_))) =
                args.as_str().map(serde_json::from_str::<Value>)
            {
                *args = parsed;
            }
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(value: Value) -> Vec<ChatMessage> {
        serde_json::from_value::<ChatCompletionRequest>(json!({"model": "m", "messages": value}))
            .unwrap()
            .messages
    }

    #[test]
    fn reasoning_and_tool_calls_of_earlier_turns_reach_the_template() {
        let out = template_messages(&messages(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "reasoning": "think",
             "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{broken"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "user", "content": "and?", "reasoning_content": "not mine"}
        ])))
        .unwrap();
        assert_eq!(out[1]["reasoning_content"], "think");
        assert_eq!(out[1]["content"], "");
        assert_eq!(
            out[1]["tool_calls"][0]["function"]["arguments"],
            json!({"x": 1})
        );
        assert_eq!(out[1]["tool_calls"][1]["function"]["arguments"], "{broken");
        assert_eq!(out[2]["tool_call_id"], "a");
        assert!(
            out[3].get("reasoning_content").is_none(),
            "only assistant turns reason"
        );
    }

    #[test]
    fn reasoning_effort_none_turns_thinking_off_unless_kwargs_say_otherwise() {
        let vars = template_kwargs(None, Some("none")).unwrap().unwrap();
        assert_eq!(vars["enable_thinking"], false);
        assert_eq!(vars["reasoning_effort"], "none");
        let vars = template_kwargs(Some(json!({"enable_thinking": true})), Some("none"))
            .unwrap()
            .unwrap();
        assert_eq!(vars["enable_thinking"], true);
        assert_eq!(template_kwargs(None, None).unwrap(), None);
        assert!(template_kwargs(None, Some("max")).is_err());
        assert!(template_kwargs(Some(json!([1])), None).is_err());
    }
}
