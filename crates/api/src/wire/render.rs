//! `POST /v1/chat/completions/render` and `POST /v1/completions/render`, shaped as vLLM shapes
//! them (`vllm/entrypoints/serve/render/`): the body is the endpoint's own request, answered
//! with vLLM's `GenerateRequest` (`vllm/entrypoints/serve/disagg/protocol.py`), the
//! token-in request generation would run. Prefix-aware routers read its `token_ids`.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ApiError;

/// A render request's body: the endpoint's request, except that `model` may be absent or null
/// (then the first served model answers, as on `/tokenize`), as vLLM allows and as llm-d's
/// scheduler sends it.
#[derive(Debug, Clone)]
pub struct RenderBody<T> {
    /// The model the client named, if any.
    pub model: Option<String>,
    /// The rest of the body, parsed as the endpoint's own request; its `model` is empty when
    /// the client named none.
    pub request: T,
}

impl<T: DeserializeOwned> RenderBody<T> {
    /// Parses `body`, an already well-formed JSON value, as the endpoint's request; a body of
    /// the wrong shape is a 400 worded as the endpoint's own parse errors are.
    pub fn parse(body: Value) -> Result<Self, ApiError> {
        let bad =
            |e: &dyn std::fmt::Display| ApiError::malformed(format!("invalid JSON body: {e}"));
        let Value::Object(mut fields) = body else {
            return Err(bad(&"expected a JSON object"));
        };
        let model = match fields.remove("model") {
            None | Some(Value::Null) => None,
            Some(Value::String(model)) => Some(model),
            Some(other) => {
                return Err(bad(&format!(
                    "invalid type: {other}, expected a string for field `model`"
                )))
            }
        };
        fields.insert(
            "model".into(),
            Value::String(model.clone().unwrap_or_default()),
        );
        let request = serde_json::from_value(Value::Object(fields)).map_err(|e| bad(&e))?;
        Ok(RenderBody { model, request })
    }
}

/// vLLM's `GenerateRequest`: one rendered prompt and what would be generated from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenderedRequest {
    /// `chatcmpl-...` or `cmpl-...`, fresh per prompt.
    pub request_id: String,
    /// The prompt's token ids, exactly as generation would submit them.
    pub token_ids: Vec<u32>,
    /// Multimodal hashes and placeholders; always null (text only).
    pub features: Option<Value>,
    /// The sampling and stopping parameters, resolved as generation resolves them.
    pub sampling_params: RenderedSampling,
    /// The served model's id (the one that rendered the prompt).
    pub model: String,
    /// Whether the request asked for a stream.
    pub stream: bool,
    /// The stream's options, with `stream` only.
    pub stream_options: Option<RenderedStreamOptions>,
    /// The request's `cache_salt`, as the client gave it.
    pub cache_salt: Option<String>,
    /// vLLM's integer priority (lower is served earlier): `high` -1, `normal` 0, `low` 1.
    pub priority: i32,
    /// vLLM's disaggregated-serving parameters; always null.
    pub kv_transfer_params: Option<Value>,
}

/// `stream_options` of a [`RenderedRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderedStreamOptions {
    /// Send a final usage chunk before `[DONE]`.
    pub include_usage: bool,
}

/// The fields of vLLM's `SamplingParams` that sluice has, named and defaulted as vLLM does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenderedSampling {
    /// Choices per prompt.
    pub n: u32,
    /// Additive penalty on tokens present in the output.
    pub presence_penalty: f32,
    /// Additive penalty per occurrence in the output.
    pub frequency_penalty: f32,
    /// Multiplicative penalty on tokens seen in prompt or output (1 disables).
    pub repetition_penalty: f32,
    /// 0 is greedy.
    pub temperature: f32,
    /// Nucleus mass (1 disables).
    pub top_p: f32,
    /// Keep the k most likely tokens (0 disables).
    pub top_k: u32,
    /// Minimum probability relative to the most likely token (0 disables).
    pub min_p: f32,
    /// The sampler's seed; null draws one.
    pub seed: Option<u64>,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Token ids that end generation.
    pub stop_token_ids: Vec<u32>,
    /// Keep generating past EOS.
    pub ignore_eos: bool,
    /// At most this many tokens: the request's bound, or the rest of the context.
    pub max_tokens: u32,
    /// EOS and stop tokens are ignored before this many tokens.
    pub min_tokens: u32,
    /// Top alternatives returned with each sampled token; null returns none.
    pub logprobs: Option<u32>,
    /// Top alternatives returned at each prompt position; null returns none.
    pub prompt_logprobs: Option<u32>,
    /// Bias added to the logits of token ids.
    pub logit_bias: Option<BTreeMap<u32, f32>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::chat::ChatCompletionRequest;

    #[test]
    fn model_may_be_absent_or_null_but_not_of_another_type() {
        let body = |v: Value| RenderBody::<ChatCompletionRequest>::parse(v);
        let named = body(serde_json::json!({"model": "m", "messages": []})).unwrap();
        assert_eq!(named.model.as_deref(), Some("m"));
        assert_eq!(named.request.model, "m");
        let absent = body(serde_json::json!({"messages": []})).unwrap();
        assert_eq!(absent.model, None);
        let null = body(serde_json::json!({"model": null, "messages": []})).unwrap();
        assert_eq!(null.model, None);
        for bad in [
            serde_json::json!({"model": 7, "messages": []}),
            serde_json::json!([]),
            serde_json::json!({"messages": "hi"}),
            serde_json::json!({"messages": [], "temperature": "hot"}),
        ] {
            let err = body(bad.clone()).unwrap_err();
            assert_eq!(err.status().as_u16(), 400, "{bad}");
            assert!(err.to_string().starts_with("invalid JSON body"), "{err}");
        }
    }
}
