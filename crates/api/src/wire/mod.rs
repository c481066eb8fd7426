//! OpenAI wire types: what clients send and what they get back, exactly in OpenAI's shapes.
//!
//! Request types accept every field the issue lists and silently ignore unknown ones (serde's
//! default), so clients written for newer OpenAI versions keep working. Range checks live in
//! `validate`, not here: a request type only says what JSON parses.

pub mod chat;
pub mod completion;
pub mod models;
pub mod tokenize;

use serde::{Deserialize, Serialize};

/// `stop`: one string or a list of strings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StopField {
    /// A single stop string.
    One(String),
    /// Several stop strings.
    Many(Vec<String>),
}

impl StopField {
    /// The stop strings as a list.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopField::One(s) => vec![s],
            StopField::Many(v) => v,
        }
    }
}

/// `stream_options`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StreamOptions {
    /// Send one extra chunk with empty `choices` and the request's `usage` before `[DONE]`.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// Token counts of a whole response (all choices, all prompts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageBody {
    /// Prompt tokens, counted once per prompt (not per choice).
    pub prompt_tokens: u32,
    /// Generated tokens over all choices.
    pub completion_tokens: u32,
    /// `prompt_tokens + completion_tokens`.
    pub total_tokens: u32,
    /// Prompt tokens served from the prefix cache.
    pub prompt_tokens_details: PromptTokensDetails,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens whose KV entries came from the prefix cache.
    pub cached_tokens: u32,
}

impl UsageBody {
    /// Usage with `total_tokens` computed from its parts.
    pub fn new(prompt_tokens: u32, completion_tokens: u32, cached_tokens: u32) -> Self {
        UsageBody {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: PromptTokensDetails { cached_tokens },
        }
    }
}

/// One alternative in a chat `top_logprobs` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// The token's text.
    pub token: String,
    /// Its log-probability.
    pub logprob: f32,
    /// UTF-8 bytes of `token`.
    pub bytes: Vec<u8>,
}

/// One sampled token in a chat `logprobs.content` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatTokenLogprob {
    /// The token's text.
    pub token: String,
    /// Its log-probability.
    pub logprob: f32,
    /// UTF-8 bytes of `token`.
    pub bytes: Vec<u8>,
    /// The most likely alternatives at this position, best first.
    pub top_logprobs: Vec<TopLogprob>,
}

/// `choices[i].logprobs` of a chat response or chunk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatLogprobs {
    /// One entry per generated token.
    pub content: Vec<ChatTokenLogprob>,
}

/// `choices[i].logprobs` of a (legacy) completion response or chunk: parallel lists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionLogprobs {
    /// Token texts.
    pub tokens: Vec<String>,
    /// Log-probability of each token.
    pub token_logprobs: Vec<Option<f32>>,
    /// For each token, its most likely alternatives as `text -> logprob`.
    pub top_logprobs: Vec<Option<serde_json::Map<String, serde_json::Value>>>,
    /// Character offset of each token in the choice's text.
    pub text_offset: Vec<u32>,
}

impl CompletionLogprobs {
    /// Appends `other`'s entries after this one's.
    pub fn extend(&mut self, other: CompletionLogprobs) {
        self.tokens.extend(other.tokens);
        self.token_logprobs.extend(other.token_logprobs);
        self.top_logprobs.extend(other.top_logprobs);
        self.text_offset.extend(other.text_offset);
    }
}

/// The `system_fingerprint` every response carries: it changes only with the server build.
pub fn system_fingerprint() -> String {
    format!("fp_sluice_{}", env!("CARGO_PKG_VERSION").replace('.', "_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_accepts_a_string_or_a_list() {
        let one: StopField = serde_json::from_str(r#""\n""#).unwrap();
        assert_eq!(one.into_vec(), vec!["\n".to_string()]);
        let many: StopField = serde_json::from_str(r#"["a","b"]"#).unwrap();
        assert_eq!(many.into_vec(), vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn usage_total_is_the_sum_and_details_are_serialized() {
        let u = UsageBody::new(7, 5, 3);
        let v = serde_json::to_value(u).unwrap();
        assert_eq!(v["total_tokens"], 12);
        assert_eq!(v["prompt_tokens_details"]["cached_tokens"], 3);
    }

    #[test]
    fn completion_logprobs_serialize_as_parallel_lists() {
        let lp = CompletionLogprobs {
            tokens: vec!["a".into()],
            token_logprobs: vec![Some(-0.5)],
            top_logprobs: vec![None],
            text_offset: vec![0],
        };
        let v = serde_json::to_value(lp).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"tokens":["a"],"token_logprobs":[-0.5],"top_logprobs":[null],"text_offset":[0]})
        );
    }
}
