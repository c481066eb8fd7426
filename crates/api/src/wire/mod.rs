//! OpenAI wire types: what clients send and what they get back, exactly in OpenAI's shapes.
//!
//! Request types accept every field the issue lists and silently ignore unknown ones (serde's
//! default), so clients written for newer OpenAI versions keep working. Range checks live in
//! `validate`, not here: a request type only says what JSON parses.

pub mod chat;
pub mod completion;
pub mod messages;
pub mod models;
pub mod number;
pub mod render;
pub mod responses;
pub mod scoring;
pub mod structured;
pub mod tokenize;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use number::WholeNumber;

/// The sampling, stopping, streaming and scheduling fields chat and text completion requests
/// share, flattened into both: they parse the same JSON keys either way.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct GenerationOptions {
    /// Sampling temperature in [0, 2].
    pub temperature: Option<f32>,
    /// Nucleus mass in (0, 1].
    pub top_p: Option<f64>,
    /// Number of choices (per prompt).
    #[serde(default, deserialize_with = "number::optional")]
    pub n: Option<WholeNumber>,
    /// Stream the response as server-sent events.
    pub stream: Option<bool>,
    /// Streaming options; only valid with `stream: true`.
    pub stream_options: Option<StreamOptions>,
    /// Stop strings.
    pub stop: Option<StopField>,
    /// Seed of the sampler's RNG.
    #[serde(default, deserialize_with = "number::optional")]
    pub seed: Option<WholeNumber>,
    /// Additive penalty on tokens already present, in [-2, 2].
    pub presence_penalty: Option<f32>,
    /// Additive penalty per occurrence, in [-2, 2].
    pub frequency_penalty: Option<f32>,
    /// Token id (as a string) to bias in [-100, 100].
    pub logit_bias: Option<HashMap<String, f32>>,
    /// End-user id: who the request counts as for fair sharing of the engine's seats when the
    /// server has one API key or none.
    pub user: Option<String>,
    /// Extension: keep only the k most likely tokens (-1 or 0 disables).
    #[serde(default, deserialize_with = "number::optional")]
    pub top_k: Option<WholeNumber>,
    /// Extension: minimum probability relative to the most likely token, in [0, 1].
    pub min_p: Option<f32>,
    /// Extension: multiplicative repetition penalty (> 0, 1 disables).
    pub repetition_penalty: Option<f64>,
    /// Extension: keep generating past EOS.
    pub ignore_eos: Option<bool>,
    /// Extension: `false` keeps this request out of speculative decoding (when the server
    /// speculates); the output is the same either way, only its speed differs.
    pub speculative: Option<bool>,
    /// Extension: EOS and stop tokens are ignored before this many tokens.
    #[serde(default, deserialize_with = "number::optional")]
    pub min_tokens: Option<WholeNumber>,
    /// Extension: extra token ids that end generation.
    #[serde(default, deserialize_with = "number::optional_list")]
    pub stop_token_ids: Option<Vec<WholeNumber>>,
    /// Extension: "high" | "normal" | "low".
    pub priority: Option<String>,
    /// Extension (vLLM's): prefix-cache hits only between requests of the same caller with
    /// the same salt.
    pub cache_salt: Option<String>,
    /// The form of the output: `{"type": "text" | "json_object" | "json_schema"}`.
    pub response_format: Option<ResponseFormatField>,
    /// Extensions (vLLM's `structured_outputs` and `guided_*`, llama-server's `grammar`): a
    /// regex, choice, grammar or schema the output keeps; one constraint per request.
    #[serde(flatten)]
    pub constraints: structured::ConstraintFields,
    /// Extension (vLLM's): return the log-probability of every prompt token and its top this
    /// many alternatives (0..=20) as `prompt_logprobs`; not with `stream`.
    #[serde(default, deserialize_with = "number::optional")]
    pub prompt_logprobs: Option<WholeNumber>,
}

/// `response_format`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ResponseFormatField {
    /// "text" | "json_object" | "json_schema".
    #[serde(rename = "type")]
    pub kind: String,
    /// With `json_schema`: the schema and its name.
    pub json_schema: Option<JsonSchemaField>,
}

/// `response_format.json_schema`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JsonSchemaField {
    /// The schema's name (required by OpenAI; not used).
    pub name: Option<String>,
    /// The JSON Schema the output must conform to.
    pub schema: Option<serde_json::Value>,
    /// OpenAI's strict flag; the output always follows the schema here.
    pub strict: Option<bool>,
}

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
    /// Prompt tokens served from the prefix cache; left out when the server hides them
    /// (`--hide-cached-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Of the completion tokens, those generated as reasoning; chat sets it when a choice
    /// reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    /// Completion tokens the model reasoned in (before its answer began).
    pub reasoning_tokens: u32,
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
            prompt_tokens_details: Some(PromptTokensDetails { cached_tokens }),
            completion_tokens_details: None,
        }
    }

    /// The same usage without the cached-token count.
    pub fn without_cached_tokens(self) -> Self {
        UsageBody {
            prompt_tokens_details: None,
            ..self
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

/// One entry of vLLM's `prompt_logprobs`: a token's log-probability at a prompt position, its
/// rank there (1 is the most likely) and its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptLogprob {
    /// Log-probability given the prompt tokens before the position.
    pub logprob: f32,
    /// 1 + the number of other tokens at least as likely.
    pub rank: u32,
    /// The token's text.
    pub decoded_token: String,
}

/// vLLM's `prompt_logprobs`: one entry per prompt token, `null` for the first (nothing precedes
/// it), else the prompt token and the top `k` alternatives keyed by token id.
pub type PromptLogprobs = Vec<Option<std::collections::BTreeMap<String, PromptLogprob>>>;

/// The `system_fingerprint` every response carries: it changes only with the server build.
pub fn system_fingerprint() -> String {
    format!("fp_sluice_{}", env!("CARGO_PKG_VERSION").replace('.', "_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_options_parse_the_same_in_chat_and_completion_requests() {
        let options = serde_json::json!({"temperature":0.5,"top_p":0.9,"n":2,"stream":true,
            "stream_options":{"include_usage":true},"stop":"x","seed":-3,"presence_penalty":0.1,
            "frequency_penalty":0.2,"logit_bias":{"17":-100},"user":"u","top_k":40,"min_p":0.05,
            "repetition_penalty":1.1,"ignore_eos":true,"min_tokens":1,"stop_token_ids":[2],
            "priority":"low"});
        let with = |extra: serde_json::Value| {
            let mut body = options.clone();
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            body
        };
        let chat: chat::ChatCompletionRequest =
            serde_json::from_value(with(serde_json::json!({"model":"m","messages":[]}))).unwrap();
        let completion: completion::CompletionRequest =
            serde_json::from_value(with(serde_json::json!({"model":"m","prompt":"p"}))).unwrap();
        let parsed: GenerationOptions = serde_json::from_value(options).unwrap();
        assert_eq!(chat.options, parsed);
        assert_eq!(completion.options, parsed);
        assert_eq!(parsed.stop, Some(StopField::One("x".into())));
        assert_eq!(parsed.seed, Some(-3));
    }

    #[test]
    fn shared_option_of_the_wrong_type_is_a_parse_error_naming_the_expected_type() {
        let chat = serde_json::from_str::<chat::ChatCompletionRequest>(
            r#"{"model":"m","messages":[],"temperature":"hot"}"#,
        )
        .unwrap_err();
        assert!(chat.to_string().contains("expected f32"), "{chat}");
        let completion = serde_json::from_str::<completion::CompletionRequest>(
            r#"{"model":"m","prompt":"p","stop_token_ids":["eos"]}"#,
        )
        .unwrap_err();
        assert!(
            completion.to_string().contains("expected an integer"),
            "{completion}"
        );
    }

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
        let hidden = serde_json::to_value(u.without_cached_tokens()).unwrap();
        assert!(hidden.get("prompt_tokens_details").is_none(), "{hidden}");
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

/// sluice's sampling extensions on the protocols that lack them (Responses, Anthropic
/// Messages), as the `extra_body` of their clients sends them; same meaning and ranges as on
/// chat.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SamplingExtensions {
    /// Seed of the sampler's RNG.
    #[serde(default, deserialize_with = "number::optional")]
    pub seed: Option<WholeNumber>,
    /// Token id -> bias in [-100, 100].
    pub logit_bias: Option<HashMap<String, f32>>,
    /// Minimum probability relative to the most likely token.
    pub min_p: Option<f32>,
    /// Penalty on tokens already in prompt or output.
    pub repetition_penalty: Option<f64>,
    /// OpenAI's presence penalty.
    pub presence_penalty: Option<f32>,
    /// OpenAI's frequency penalty.
    pub frequency_penalty: Option<f32>,
    /// `high` | `normal` | `low`.
    pub priority: Option<String>,
    /// Keep generating past end-of-sequence.
    pub ignore_eos: Option<bool>,
    /// `false`: no speculative decoding for this request.
    pub speculative: Option<bool>,
    /// vLLM's `structured_outputs` and `guided_*`, llama-server's `grammar`, as chat takes them.
    #[serde(flatten)]
    pub constraints: structured::ConstraintFields,
}

impl SamplingExtensions {
    /// These fields set on `options`.
    pub fn apply(self, options: GenerationOptions) -> GenerationOptions {
        GenerationOptions {
            seed: self.seed.or(options.seed),
            logit_bias: self.logit_bias,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            priority: self.priority,
            ignore_eos: self.ignore_eos,
            speculative: self.speculative,
            constraints: self.constraints,
            ..options
        }
    }
}

/// Deserializes `null` as the type's default: a `"model": null` names no model.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
