//! `POST /v1/completions` (the legacy text completion API): request, response and stream chunk.

use serde::{Deserialize, Serialize};

use super::number::{self, WholeNumber};

use super::{CompletionLogprobs, GenerationOptions, PromptLogprobs, UsageBody};

/// A text completion request as the client sent it (unvalidated).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CompletionRequest {
    /// Served model name (an id, an extra name or an alias); absent or null: the default
    /// model.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub model: String,
    /// A string, a list of strings, a list of token ids or a list of such lists. Kept as JSON
    /// so validation can say precisely what is wrong with it.
    pub prompt: Option<serde_json::Value>,
    /// Not supported; rejected when non-empty.
    pub suffix: Option<String>,
    /// Upper bound on generated tokens per choice.
    #[serde(default, deserialize_with = "number::optional")]
    pub max_tokens: Option<WholeNumber>,
    /// Accepted only when equal to `n`.
    #[serde(default, deserialize_with = "number::optional")]
    pub best_of: Option<WholeNumber>,
    /// Number of alternatives per position (0..=20) to return with each token's logprob.
    #[serde(default, deserialize_with = "number::optional")]
    pub logprobs: Option<WholeNumber>,
    /// Prepend the prompt to the generated text.
    pub echo: Option<bool>,
    /// Sampling, stopping, streaming and scheduling fields shared with `/v1/chat/completions`.
    #[serde(flatten)]
    pub options: GenerationOptions,
}

/// A non-streaming text completion response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// `cmpl-...`.
    pub id: String,
    /// Always "text_completion".
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Served model id.
    pub model: String,
    /// Identifies the server build.
    pub system_fingerprint: String,
    /// `prompt_index * n + i`, in index order.
    pub choices: Vec<CompletionChoice>,
    /// Token counts over all prompts and choices.
    pub usage: UsageBody,
}

/// One choice of a text completion, or its update in a stream chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    /// Generated text (with the prompt in front when `echo`).
    pub text: String,
    /// Choice index.
    pub index: u32,
    /// Log-probabilities when requested, else null.
    pub logprobs: Option<CompletionLogprobs>,
    /// "stop" or "length"; null on stream chunks before the choice's last.
    pub finish_reason: Option<String>,
    /// vLLM's `prompt_logprobs` of the choice's prompt, when the request asked for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<PromptLogprobs>,
}

/// One server-sent event of a streaming text completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionChunk {
    /// The same id on every chunk of a response.
    pub id: String,
    /// Always "text_completion".
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Served model id.
    pub model: String,
    /// Identifies the server build.
    pub system_fingerprint: String,
    /// Zero or more choice updates (empty on the usage chunk).
    pub choices: Vec<CompletionChoice>,
    /// Present only on the final usage chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_is_kept_as_json_in_any_of_its_forms() {
        for body in [
            r#"{"model":"m","prompt":"hi"}"#,
            r#"{"model":"m","prompt":["a","b"]}"#,
            r#"{"model":"m","prompt":[1,2,3]}"#,
            r#"{"model":"m","prompt":[[1,2],[3]]}"#,
        ] {
            let r: CompletionRequest = serde_json::from_str(body).unwrap();
            assert!(r.prompt.is_some(), "{body}");
        }
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let r: CompletionRequest =
            serde_json::from_str(r#"{"model":"m","prompt":"x","frobnicate":1}"#).unwrap();
        assert_eq!(r.model, "m");
    }

    #[test]
    fn unfinished_stream_choice_has_null_finish_reason() {
        let c = CompletionChoice {
            text: "a".into(),
            index: 3,
            logprobs: None,
            finish_reason: None,
            prompt_logprobs: None,
        };
        let v = serde_json::to_value(c).unwrap();
        assert!(v.get("prompt_logprobs").is_none(), "only when asked for");
        assert!(v["finish_reason"].is_null());
        assert!(v["logprobs"].is_null());
        assert_eq!(v["index"], 3);
    }
}
