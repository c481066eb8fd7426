//! `POST /v1/messages` and `POST /v1/messages/count_tokens` (Anthropic Messages API): the
//! requests as clients send them, the token-count answer, and Anthropic's error envelope.
//!
//! Content blocks are one flat struct with every field optional, so validation can name the
//! missing field of a block (`messages[2].content[0].tool_use_id`) and refuse unsupported
//! block types (images, documents) in words rather than as a serde variant error.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::number::{self, WholeNumber};
use crate::error::ApiError;

/// A Messages request as the client sent it (unvalidated).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MessagesRequest {
    /// Served model name (an id, an extra name or an alias); absent or null: the default
    /// model.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub model: String,
    /// The conversation: alternating `user` and `assistant` messages.
    pub messages: Vec<AnthropicMessage>,
    /// The system prompt: a string or text blocks.
    pub system: Option<AnthropicContent>,
    /// Upper bound on generated tokens; required by the API.
    #[serde(default, deserialize_with = "number::optional")]
    pub max_tokens: Option<WholeNumber>,
    /// Strings that end generation.
    pub stop_sequences: Option<Vec<String>>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus mass in (0, 1].
    pub top_p: Option<f64>,
    /// Keep only the k most likely tokens.
    #[serde(default, deserialize_with = "number::optional")]
    pub top_k: Option<WholeNumber>,
    /// Stream the response as server-sent events.
    pub stream: Option<bool>,
    /// `{"user_id": ...}`: who the request counts as for fair sharing.
    pub metadata: Option<MessagesMetadata>,
    /// `[{name, description, input_schema}]`; server tools (`bash_20250124`, ...) skipped.
    pub tools: Option<Value>,
    /// `{"type": "auto" | "any" | "tool" | "none", "name", "disable_parallel_tool_use"}`.
    pub tool_choice: Option<Value>,
    /// `{"type": "enabled", "budget_tokens"}` or `{"type": "disabled"}`.
    pub thinking: Option<Value>,
    /// Structured outputs: `{"format": {"type": "json_schema", "schema": {...}}}`.
    pub output_config: Option<Value>,
    /// The beta form of structured outputs: `{"type": "json_schema", "schema": {...}}`.
    pub output_format: Option<Value>,
    /// sluice's sampling extensions (`seed`, `logit_bias`, `min_p`, ...).
    #[serde(flatten)]
    pub extensions: super::SamplingExtensions,
}

/// A `count_tokens` request: a Messages request without the generation fields.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CountTokensRequest {
    /// Served model name (an id, an extra name or an alias); absent or null: the default
    /// model.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub model: String,
    /// The conversation.
    pub messages: Vec<AnthropicMessage>,
    /// The system prompt.
    pub system: Option<AnthropicContent>,
    /// Tools, counted as the template renders them.
    pub tools: Option<Value>,
    /// What the model may do with the tools; validated as in a Messages request.
    pub tool_choice: Option<Value>,
    /// Thinking on or off, which some templates render differently.
    pub thinking: Option<Value>,
}

/// The answer of `count_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountTokensResponse {
    /// Tokens of the rendered prompt.
    pub input_tokens: u32,
}

/// `metadata`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct MessagesMetadata {
    /// An opaque end-user id.
    pub user_id: Option<String>,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AnthropicMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// A string or content blocks.
    pub content: AnthropicContent,
}

/// `content` (and `system`): a string or a list of blocks.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum AnthropicContent {
    /// Plain text.
    Text(String),
    /// Typed blocks.
    Blocks(Vec<ContentBlock>),
}

/// One content block; which fields matter depends on `kind`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ContentBlock {
    /// `text` | `tool_use` | `tool_result` | `thinking` | `redacted_thinking` | ...
    #[serde(rename = "type")]
    pub kind: String,
    /// A text block's text.
    pub text: Option<String>,
    /// A tool_use block's id.
    pub id: Option<String>,
    /// A tool_use block's tool.
    pub name: Option<String>,
    /// A tool_use block's arguments object.
    pub input: Option<Value>,
    /// The tool_use a tool_result answers.
    pub tool_use_id: Option<String>,
    /// A tool_result's content: a string or text blocks.
    pub content: Option<Value>,
    /// Whether a tool_result reports a failure.
    pub is_error: Option<bool>,
    /// A thinking block's text.
    pub thinking: Option<String>,
    /// A thinking block's signature (not checked here).
    pub signature: Option<String>,
    /// An image block's source: `{"type": "base64", "media_type", "data"}` or
    /// `{"type": "url", "url"}`.
    pub source: Option<Value>,
}

/// Anthropic's error envelope: `{"type": "error", "error": {"type", "message"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnthropicErrorBody {
    /// Always `error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The error.
    pub error: AnthropicErrorDetail,
}

/// Anthropic's error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnthropicErrorDetail {
    /// `invalid_request_error`, `authentication_error`, `not_found_error`,
    /// `request_too_large`, `rate_limit_error`, `overloaded_error` or `api_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Human-readable description.
    pub message: String,
}

impl AnthropicErrorBody {
    /// The Anthropic form of `err`. A full queue is `overloaded_error` (what Anthropic's
    /// clients retry on), its status staying 429.
    pub fn from_error(err: &ApiError) -> Self {
        let kind = match err {
            ApiError::InvalidRequest { .. }
            | ApiError::ContextLengthExceeded { .. }
            | ApiError::MethodNotAllowed { .. }
            | ApiError::RequestTimeout(_) => "invalid_request_error",
            ApiError::Unauthorized | ApiError::AdminUnauthorized => "authentication_error",
            ApiError::Forbidden { .. } => "permission_error",
            ApiError::UnsupportedMediaType(_) => "invalid_request_error",
            ApiError::ModelNotFound(..)
            | ApiError::ResponseNotFound(_)
            | ApiError::RouteNotFound { .. } => "not_found_error",
            ApiError::PayloadTooLarge { .. } => "request_too_large",
            ApiError::Overloaded { .. } => "overloaded_error",
            ApiError::Unavailable(_) | ApiError::Draining { .. } | ApiError::Internal(_) => {
                "api_error"
            }
        };
        AnthropicErrorBody {
            kind: "error".into(),
            error: AnthropicErrorDetail {
                kind: kind.into(),
                message: anthropic_message(err),
            },
        }
    }
}

/// `err` in Anthropic's words where its clients parse them: Claude Code reads the two context
/// errors to retry with a smaller `max_tokens` or to compact the conversation.
fn anthropic_message(err: &ApiError) -> String {
    match err {
        ApiError::ContextLengthExceeded {
            prompt_tokens,
            max_tokens: Some(max_tokens),
            context,
            ..
        } => format!(
            "input length and `max_tokens` exceed context limit: {prompt_tokens} + {max_tokens} > \
             {context}, decrease input length or `max_tokens` and try again"
        ),
        ApiError::ContextLengthExceeded {
            prompt_tokens,
            max_tokens: None,
            context,
            ..
        } => format!("prompt is too long: {prompt_tokens} tokens > {context} maximum"),
        other => other.to_string(),
    }
}

/// An HTTP response carrying `err` in Anthropic's shape, with the status (and `Retry-After`)
/// the OpenAI form has.
pub fn anthropic_error_response(err: &ApiError) -> Response {
    let mut response = (
        err.status(),
        axum::Json(AnthropicErrorBody::from_error(err)),
    )
        .into_response();
    if let Some(retry_after_secs) = err.retry_after_secs() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    }
    response
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::json;

    use super::*;

    #[test]
    fn content_is_a_string_or_blocks() {
        let r: MessagesRequest = serde_json::from_value(json!({"model": "m", "max_tokens": 5,
            "system": [{"type": "text", "text": "s"}],
            "messages": [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t",
                    "name": "f", "input": {"a": 1}}]}]}))
        .unwrap();
        assert_eq!(r.messages[0].content, AnthropicContent::Text("hi".into()));
        let AnthropicContent::Blocks(blocks) = &r.messages[1].content else {
            panic!("blocks parsed as text")
        };
        assert_eq!(blocks[0].input, Some(json!({"a": 1})));
        assert!(matches!(r.system, Some(AnthropicContent::Blocks(_))));
    }

    #[test]
    fn errors_take_anthropic_types_and_keep_their_status() {
        let cases = [
            (ApiError::invalid("x", "bad"), "invalid_request_error", 400),
            (ApiError::Unauthorized, "authentication_error", 401),
            (
                ApiError::ModelNotFound("m".into(), Vec::new()),
                "not_found_error",
                404,
            ),
            (
                ApiError::Overloaded {
                    retry_after_secs: 2,
                },
                "overloaded_error",
                429,
            ),
            (ApiError::Internal("boom".into()), "api_error", 500),
        ];
        for (err, kind, status) in cases {
            let body = serde_json::to_value(AnthropicErrorBody::from_error(&err)).unwrap();
            assert_eq!(body["type"], "error");
            assert_eq!(body["error"]["type"], kind);
            assert_eq!(body["error"]["message"], err.to_string());
            assert_eq!(anthropic_error_response(&err).status().as_u16(), status);
        }
        let overloaded = anthropic_error_response(&ApiError::Overloaded {
            retry_after_secs: 2,
        });
        assert_eq!(overloaded.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(overloaded.headers()[header::RETRY_AFTER], "2");
    }
}
