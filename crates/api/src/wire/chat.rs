//! `POST /v1/chat/completions`: request, response and stream chunk.

use serde::{Deserialize, Serialize};

use super::number::{self, WholeNumber};

use super::{ChatLogprobs, GenerationOptions, UsageBody};

/// A chat completion request as the client sent it (unvalidated).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatCompletionRequest {
    /// Served model name (an id, an extra name or an alias); absent or null: the default
    /// model.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Deprecated name of `max_completion_tokens`.
    #[serde(default, deserialize_with = "number::optional")]
    pub max_tokens: Option<WholeNumber>,
    /// Upper bound on generated tokens per choice.
    #[serde(default, deserialize_with = "number::optional")]
    pub max_completion_tokens: Option<WholeNumber>,
    /// Return log-probabilities of the sampled tokens.
    pub logprobs: Option<bool>,
    /// Number of alternatives per position (0..=20); needs `logprobs: true`.
    #[serde(default, deserialize_with = "number::optional")]
    pub top_logprobs: Option<WholeNumber>,
    /// Tool definitions: `[{"type": "function", "function": {...}}]`.
    pub tools: Option<serde_json::Value>,
    /// `none` | `auto` | `required` | `{"type": "function", "function": {"name": ...}}`.
    pub tool_choice: Option<serde_json::Value>,
    /// Whether several calls may come back in one turn (default true).
    pub parallel_tool_calls: Option<bool>,
    /// Extra chat-template variables (vLLM), e.g. `{"enable_thinking": false}`.
    pub chat_template_kwargs: Option<serde_json::Value>,
    /// `none` | `minimal` | `low` | `medium` | `high`: `none` turns thinking off where the
    /// template supports it; the value reaches the template as `reasoning_effort`.
    pub reasoning_effort: Option<String>,
    /// OpenAI's up to 16 string pairs for stored completions: checked against OpenAI's
    /// limits, not kept (chat completions are not stored here).
    pub metadata: Option<serde_json::Value>,
    /// Sampling, stopping, streaming and scheduling fields shared with `/v1/completions`.
    #[serde(flatten)]
    pub options: GenerationOptions,
}

/// One message of the conversation.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatMessage {
    /// system | developer | user | assistant | tool.
    pub role: String,
    /// A string or a list of content parts; may be absent on assistant messages with tool calls.
    pub content: Option<MessageContent>,
    /// Optional participant name.
    pub name: Option<String>,
    /// Tool calls made by an assistant message, handed to the template as is.
    pub tool_calls: Option<serde_json::Value>,
    /// The call a tool message answers.
    pub tool_call_id: Option<String>,
    /// An assistant message's reasoning (vLLM's and DeepSeek's name).
    pub reasoning_content: Option<String>,
    /// An assistant message's reasoning (OpenRouter's and newer vLLM's name).
    pub reasoning: Option<String>,
}

/// `content`: a plain string or a list of typed parts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Typed parts: `{"type": "text", "text": ...}` and, for a model that takes images,
    /// `{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`.
    Parts(Vec<ContentPart>),
}

/// One element of an array `content`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ContentPart {
    /// Part type, e.g. "text" or "image_url".
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a "text" part.
    pub text: Option<String>,
    /// The image of an "image_url" part: `{"url": ..., "detail": ...}`, or the URL alone.
    pub image_url: Option<serde_json::Value>,
    /// An image part's bytes, read already by the protocol that made the part (an Anthropic
    /// image block), with where the client sent them; never from the wire.
    #[serde(skip)]
    pub decoded: Option<crate::validate::ImagePart>,
}

/// A non-streaming chat completion response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// `chatcmpl-...`.
    pub id: String,
    /// Always "chat.completion".
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Served model id.
    pub model: String,
    /// Identifies the server build.
    pub system_fingerprint: String,
    /// One per requested choice, by index.
    pub choices: Vec<ChatChoice>,
    /// Token counts over all choices.
    pub usage: UsageBody,
    /// vLLM's `prompt_logprobs` of the rendered conversation, when the request asked for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<super::PromptLogprobs>,
}

/// One choice of a chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChoice {
    /// Choice index.
    pub index: u32,
    /// The generated assistant message.
    pub message: AssistantMessage,
    /// Log-probabilities when requested, else null.
    pub logprobs: Option<ChatLogprobs>,
    /// "stop", "length" or "tool_calls".
    pub finish_reason: String,
}

/// The assistant message of a choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Always "assistant".
    pub role: String,
    /// Generated text; null when the turn is only tool calls.
    pub content: Option<String>,
    /// The model's reasoning (`<think>` contents), when its template has that syntax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Calls the model made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallBody>>,
}

/// One tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallBody {
    /// `call_...`.
    pub id: String,
    /// Always "function".
    #[serde(rename = "type")]
    pub kind: String,
    /// What is called.
    pub function: FunctionCall,
}

/// A called function and its arguments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Function name (absent on argument-only deltas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Arguments as JSON text (or the next piece of it, in a delta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// A piece of a tool call in a chat chunk: the first carries id, type and name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// The call's position in the message's `tool_calls`.
    pub index: usize,
    /// `call_...`, on the call's first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// "function", on the call's first piece.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name (first piece) and argument text.
    pub function: FunctionCall,
}

/// One server-sent event of a streaming chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    /// The same id on every chunk of a response.
    pub id: String,
    /// Always "chat.completion.chunk".
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Served model id.
    pub model: String,
    /// Identifies the server build.
    pub system_fingerprint: String,
    /// Zero or more choice updates (empty on the usage chunk).
    pub choices: Vec<ChatChunkChoice>,
    /// Present only on the final usage chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
}

/// One choice's update in a chat chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChunkChoice {
    /// Choice index.
    pub index: u32,
    /// New role and/or text.
    pub delta: ChatDelta,
    /// Log-probabilities of the tokens in this chunk when requested, else null.
    pub logprobs: Option<ChatLogprobs>,
    /// Null until the choice's last chunk.
    pub finish_reason: Option<String>,
}

/// `delta` of a chat chunk: the role on a choice's first chunk, text afterwards.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatDelta {
    /// "assistant" on the first chunk of a choice only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Newly generated text; absent on the finishing chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Newly generated reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Pieces of tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_ignored() {
        let r: ChatCompletionRequest = serde_json::from_str(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"text"},"parallel_tool_calls":true}"#,
        )
        .unwrap();
        assert_eq!(r.model, "m");
        assert_eq!(r.messages.len(), 1);
    }

    #[test]
    fn content_may_be_a_string_or_a_list_of_parts() {
        let s: MessageContent = serde_json::from_str(r#""hello""#).unwrap();
        assert_eq!(s, MessageContent::Text("hello".into()));
        let p: MessageContent =
            serde_json::from_str(r#"[{"type":"text","text":"a"},{"type":"text","text":"b"}]"#)
                .unwrap();
        match p {
            MessageContent::Parts(parts) => assert_eq!(parts.len(), 2),
            MessageContent::Text(_) => panic!("parts parsed as text"),
        }
    }

    #[test]
    fn every_issue_field_parses() {
        let r: ChatCompletionRequest = serde_json::from_str(
            r#"{"model":"m","messages":[],"max_tokens":5,"max_completion_tokens":6,"temperature":0.5,
            "top_p":0.9,"n":2,"stream":true,"stream_options":{"include_usage":true},"stop":["x"],
            "seed":3,"presence_penalty":0.1,"frequency_penalty":0.2,"logit_bias":{"17":-100},
            "logprobs":true,"top_logprobs":2,"user":"u","top_k":40,"min_p":0.05,
            "repetition_penalty":1.1,"ignore_eos":true,"min_tokens":1,"stop_token_ids":[2],
            "priority":"high"}"#,
        )
        .unwrap();
        assert_eq!(r.max_completion_tokens, Some(6));
        assert_eq!(r.options.stream_options.unwrap().include_usage, Some(true));
        assert_eq!(r.options.logit_bias.unwrap()["17"], -100.0);
        assert_eq!(r.options.priority.as_deref(), Some("high"));
    }

    #[test]
    fn first_chunk_delta_has_role_and_finish_chunk_delta_is_empty() {
        let first = ChatDelta {
            role: Some("assistant".into()),
            content: Some(String::new()),
            ..ChatDelta::default()
        };
        assert_eq!(
            serde_json::to_value(first).unwrap(),
            serde_json::json!({"role":"assistant","content":""})
        );
        assert_eq!(
            serde_json::to_value(ChatDelta::default()).unwrap(),
            serde_json::json!({})
        );
    }

    #[test]
    fn chunk_without_usage_omits_the_field_and_logprobs_are_null() {
        let chunk = ChatCompletionChunk {
            id: "chatcmpl-1".into(),
            object: "chat.completion.chunk".into(),
            created: 1,
            model: "m".into(),
            system_fingerprint: "fp".into(),
            choices: vec![ChatChunkChoice {
                index: 0,
                delta: ChatDelta::default(),
                logprobs: None,
                finish_reason: Some("stop".into()),
            }],
            usage: None,
        };
        let v = serde_json::to_value(chunk).unwrap();
        assert!(v.get("usage").is_none());
        assert!(v["choices"][0]["logprobs"].is_null());
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
    }
}
