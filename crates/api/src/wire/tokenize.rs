//! `POST /tokenize` and `POST /detokenize`, shaped as vLLM shapes them.

use serde::{Deserialize, Serialize};

use super::chat::ChatMessage;
use super::number::{self, WholeNumber};

/// `POST /tokenize`: either `prompt` or `messages`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TokenizeRequest {
    /// Served model id; the first served model when absent.
    pub model: Option<String>,
    /// Plain text to tokenize.
    pub prompt: Option<String>,
    /// A conversation to render with the chat template, then tokenize.
    pub messages: Option<Vec<ChatMessage>>,
    /// Add BOS/EOS as the tokenizer's post-processor says. Default: true for `prompt`, false
    /// for `messages` (the template already wrote them).
    pub add_special_tokens: Option<bool>,
    /// With `messages`: end with the assistant turn's opening (default true).
    pub add_generation_prompt: Option<bool>,
    /// With `messages`: tool definitions for the template.
    pub tools: Option<serde_json::Value>,
    /// Extra chat-template variables, as on chat requests.
    pub chat_template_kwargs: Option<serde_json::Value>,
    /// Also return each token's text.
    pub return_token_strs: Option<bool>,
}

/// The `POST /tokenize` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenizeResponse {
    /// `tokens.len()`.
    pub count: usize,
    /// The model's context length.
    pub max_model_len: usize,
    /// Token ids.
    pub tokens: Vec<u32>,
    /// Each token's text when `return_token_strs`, else null.
    pub token_strs: Option<Vec<String>>,
}

/// `POST /detokenize`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DetokenizeRequest {
    /// Served model id; the first served model when absent.
    pub model: Option<String>,
    /// Token ids to turn back into text (integers, possibly written as `5.0`).
    #[serde(deserialize_with = "number::list")]
    pub tokens: Vec<WholeNumber>,
}

/// The `POST /detokenize` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetokenizeResponse {
    /// The decoded text (special tokens included).
    pub prompt: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenize_response_has_vllm_fields() {
        let v = serde_json::to_value(TokenizeResponse {
            count: 2,
            max_model_len: 64,
            tokens: vec![1, 2],
            token_strs: None,
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"count":2,"max_model_len":64,"tokens":[1,2],"token_strs":null})
        );
    }

    #[test]
    fn tokenize_accepts_prompt_or_messages() {
        let p: TokenizeRequest = serde_json::from_str(r#"{"model":"m","prompt":"hi"}"#).unwrap();
        assert_eq!(p.prompt.as_deref(), Some("hi"));
        let m: TokenizeRequest =
            serde_json::from_str(r#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
        assert_eq!(m.messages.unwrap().len(), 1);
    }
}
