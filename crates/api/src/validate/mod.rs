//! Validation: wire requests become `Valid*` types, which exist only once every field is in
//! range, and then `sluice_engine::GenerationRequest`s once the prompt is tokenized. Nothing
//! downstream re-checks input.

pub mod chat;
pub mod completion;
mod custom_tools;
pub mod images;
pub mod messages;
pub mod metadata;
pub mod responses;
pub mod scoring;
pub mod structured;
pub mod tool_constraint;
pub mod tools;

use std::sync::Arc;

use sluice_engine::{GenerationRequest, Priority, ResponseFormat, SamplingParams, StopRules};
use sluice_text::constraint::Schema;
use sluice_text::StopSet;

use crate::error::ApiError;
use crate::wire::number::WholeNumber;
use crate::wire::{GenerationOptions, ResponseFormatField, StopField};

pub use chat::{
    check_images, template_messages, template_messages_with_images, validate_chat, ValidChatRequest,
};
pub use completion::{validate_completion, PromptInput, ValidCompletionRequest};
pub use images::ImagePart;
pub use scoring::{
    validate_embeddings, validate_rerank, validate_score, ValidEmbeddingRequest, ValidRerankRequest,
};

/// Largest `n` accepted (OpenAI's limit).
pub const MAX_N: u32 = 128;
/// Largest number of alternatives per position (`top_logprobs`, completions' `logprobs`).
pub const MAX_TOP_LOGPROBS: u32 = 20;
/// Most stop strings per request. Matching costs the same for any number (one automaton
/// step per byte), but compiling and holding them is proportional to their total length.
pub const MAX_STOP_STRINGS: usize = 256;
/// Longest stop string, in UTF-8 bytes.
pub const MAX_STOP_STRING_BYTES: usize = 256;
/// Most `stop_token_ids` per request.
pub const MAX_STOP_TOKEN_IDS: usize = 1024;

/// What validation needs to know about the target model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// Context length in tokens (prompt plus generated).
    pub max_model_len: usize,
    /// Number of token ids; every id a client sends must be below it.
    pub vocab_size: usize,
    /// Whether its prompts may hold images (it has an image encoder).
    pub takes_images: bool,
}

/// How a validated request is streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidStream {
    /// Send a final usage chunk before `[DONE]`.
    pub include_usage: bool,
}

/// Every validated parameter of a chat or completion request except the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidParams {
    /// Choices per prompt, in `1..=MAX_N`.
    pub n: u32,
    /// Requested bound on generated tokens; `None` means "the rest of the context".
    pub max_tokens: Option<u32>,
    /// Sampling parameters, all in range.
    pub sampling: SamplingParams,
    /// Stop rules; `max_tokens` in here is filled in by [`ValidParams::request_for`].
    pub stop: StopRules,
    /// Scheduling priority.
    pub priority: Priority,
    /// `Some` when the response is streamed.
    pub stream: Option<ValidStream>,
    /// The request's own prefix-cache salt (combined with the caller's key by the handler).
    pub cache_salt: Option<String>,
    /// OpenAI's end-user id: who the request counts as for fair sharing when the server has
    /// one API key or none.
    pub user: Option<String>,
    /// vLLM's `prompt_logprobs`: the top this many alternatives at every prompt position
    /// (only without `stream`).
    pub prompt_logprobs: Option<u32>,
}

/// Checks that a float parameter, when given, is finite and within `[lo, hi]`.
fn check_range(
    param: &str,
    value: Option<f32>,
    lo: f32,
    hi: f32,
    default: f32,
) -> Result<f32, ApiError> {
    match value {
        None => Ok(default),
        Some(v) if v.is_finite() && v >= lo && v <= hi => Ok(v),
        Some(v) => Err(ApiError::invalid(
            param,
            format!("{param} must be between {lo} and {hi}, got {v}"),
        )),
    }
}

/// Checks that an integer parameter, when given, is within `[lo, hi]`, naming both bounds.
fn check_int(
    param: &str,
    value: Option<WholeNumber>,
    lo: WholeNumber,
    hi: WholeNumber,
) -> Result<Option<WholeNumber>, ApiError> {
    match value {
        Some(v) if !(lo..=hi).contains(&v) => Err(ApiError::invalid(
            param,
            format!("{param} must be between {lo} and {hi}, got {v}"),
        )),
        v => Ok(v),
    }
}

/// Checks that a positive-only float parameter (top_p, repetition_penalty) is in `(0, hi]`.
/// Read as f64, so a value too small for f32 (`5e-324`) is not rounded to 0 and refused: it
/// becomes the smallest positive f32.
fn check_positive(param: &str, value: Option<f64>, hi: f64) -> Result<Option<f32>, ApiError> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v > 0.0 && v <= hi => {
            Ok(Some((v as f32).max(f32::from_bits(1))))
        }
        Some(v) => Err(ApiError::invalid(
            param,
            format!("{param} must be in (0, {hi}], got {v}"),
        )),
    }
}

/// Reads sluice's `priority` field: "high", "normal" (the default) or "low".
pub(crate) fn parse_priority(priority: Option<&str>) -> Result<Priority, ApiError> {
    match priority {
        None | Some("normal") => Ok(Priority::Normal),
        Some("high") => Ok(Priority::High),
        Some("low") => Ok(Priority::Low),
        Some(other) => Err(ApiError::invalid(
            "priority",
            format!("priority must be \"high\", \"normal\" or \"low\", got \"{other}\""),
        )),
    }
}

/// Checks a token id a client sent against the vocabulary.
pub(crate) fn check_token_id(
    param: &str,
    id: WholeNumber,
    vocab_size: usize,
) -> Result<u32, ApiError> {
    if id < 0 || id >= vocab_size as WholeNumber {
        return Err(ApiError::invalid(
            param,
            format!("token id {id} is out of range: the vocabulary has {vocab_size} tokens"),
        ));
    }
    Ok(id as u32)
}

/// Validates the fields chat and completions share, plus the two both have under different
/// names: `max_tokens` (named `max_tokens_param` in errors) and `logprobs`, which the caller has
/// already checked because chat and completions spell it differently.
pub(crate) fn validate_shared(
    f: GenerationOptions,
    max_tokens: Option<WholeNumber>,
    max_tokens_param: &'static str,
    logprobs: Option<u32>,
    limits: ModelLimits,
) -> Result<ValidParams, ApiError> {
    let temperature = check_range("temperature", f.temperature, 0.0, 2.0, 1.0)?;
    let top_p = check_positive("top_p", f.top_p, 1.0)?.unwrap_or(1.0);
    let min_p = check_range("min_p", f.min_p, 0.0, 1.0, 0.0)?;
    let presence_penalty = check_range("presence_penalty", f.presence_penalty, -2.0, 2.0, 0.0)?;
    let frequency_penalty = check_range("frequency_penalty", f.frequency_penalty, -2.0, 2.0, 0.0)?;
    let repetition_penalty =
        check_positive("repetition_penalty", f.repetition_penalty, 2.0)?.unwrap_or(1.0);
    let top_k = match f.top_k {
        None | Some(-1) | Some(0) => None,
        Some(k) if (1..=u32::MAX as WholeNumber).contains(&k) => Some(k as u32),
        Some(k) => {
            return Err(ApiError::invalid(
                "top_k",
                format!(
                    "top_k must be -1 or 0 (disabled) or between 1 and {}, got {k}",
                    u32::MAX
                ),
            ))
        }
    };
    let n = check_int("n", f.n, 1, MAX_N.into())?.map_or(1, |n| n as u32);
    let max_tokens = check_int(max_tokens_param, max_tokens, 1, u32::MAX.into())?.map(|m| m as u32);
    let min_tokens =
        check_int("min_tokens", f.min_tokens, 0, u32::MAX.into())?.map_or(0, |m| m as u32);
    if let Some(max) = max_tokens {
        if min_tokens > max {
            return Err(ApiError::invalid(
                "min_tokens",
                format!("min_tokens ({min_tokens}) must not exceed {max_tokens_param} ({max})"),
            ));
        }
    }
    let stop_strings = stop_strings(f.stop)?;
    let stop_token_ids = f.stop_token_ids.unwrap_or_default();
    if stop_token_ids.len() > MAX_STOP_TOKEN_IDS {
        return Err(ApiError::invalid(
            "stop_token_ids",
            format!(
                "at most {MAX_STOP_TOKEN_IDS} stop_token_ids are allowed, got {}",
                stop_token_ids.len()
            ),
        ));
    }
    let mut stop_token_ids = stop_token_ids
        .into_iter()
        .map(|id| check_token_id("stop_token_ids", id, limits.vocab_size))
        .collect::<Result<Vec<_>, _>>()?;
    stop_token_ids.sort_unstable();
    stop_token_ids.dedup();
    let mut logit_bias = Vec::new();
    for (key, bias) in f.logit_bias.unwrap_or_default() {
        let id: i64 = key.parse().map_err(|_| {
            ApiError::invalid(
                "logit_bias",
                format!("logit_bias keys must be token ids, got '{key}'"),
            )
        })?;
        let id = check_token_id("logit_bias", id.into(), limits.vocab_size)?;
        if !(bias.is_finite() && (-100.0..=100.0).contains(&bias)) {
            return Err(ApiError::invalid(
                "logit_bias",
                format!(
                    "logit_bias values must be between -100 and 100, got {bias} for token {id}"
                ),
            ));
        }
        logit_bias.push((id, bias));
    }
    logit_bias.sort_by_key(|&(id, _)| id);
    let stream = match (f.stream.unwrap_or(false), f.stream_options) {
        (true, options) => Some(ValidStream {
            include_usage: options.and_then(|o| o.include_usage).unwrap_or(false),
        }),
        (false, Some(_)) => {
            return Err(ApiError::invalid(
                "stream_options",
                "stream_options is only allowed when stream is true",
            ))
        }
        (false, None) => None,
    };
    let priority = parse_priority(f.priority.as_deref())?;
    let response_format = structured::output_form(f.response_format, f.constraints)?;
    let prompt_logprobs = check_int(
        "prompt_logprobs",
        f.prompt_logprobs,
        0,
        MAX_TOP_LOGPROBS.into(),
    )?
    .map(|k| k as u32);
    if prompt_logprobs.is_some() && stream.is_some() {
        return Err(ApiError::invalid(
            "prompt_logprobs",
            "prompt_logprobs is answered in one body only (stream must be false), as in vLLM",
        ));
    }
    Ok(ValidParams {
        n,
        max_tokens,
        sampling: SamplingParams {
            temperature,
            top_p,
            top_k,
            min_p,
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            logit_bias,
            seed: seed(f.seed)?,
            logprobs,
            response_format,
            speculative: f.speculative.unwrap_or(true),
        },
        stop: StopRules {
            max_tokens: max_tokens.unwrap_or(1),
            min_tokens,
            ignore_eos: f.ignore_eos.unwrap_or(false),
            stop_token_ids,
            stop_strings,
            kept_special_tokens: Vec::new(),
        },
        priority,
        stream,
        cache_salt: cache_salt(f.cache_salt)?,
        user: f.user,
        prompt_logprobs,
    })
}

/// `cache_salt`: a non-empty string of at most 256 bytes.
fn cache_salt(salt: Option<String>) -> Result<Option<String>, ApiError> {
    match salt {
        Some(s) if s.is_empty() || s.len() > 256 => Err(ApiError::invalid(
            "cache_salt",
            "cache_salt must be a non-empty string of at most 256 bytes",
        )),
        salt => Ok(salt),
    }
}

/// `seed`: any integer in [-2^63, 2^64); negative seeds are taken as their two's-complement
/// bit pattern.
fn seed(value: Option<WholeNumber>) -> Result<Option<u64>, ApiError> {
    let lo = WholeNumber::from(i64::MIN);
    let hi = WholeNumber::from(u64::MAX);
    Ok(check_int("seed", value, lo, hi)?.map(|s| if s < 0 { s as i64 as u64 } else { s as u64 }))
}

/// `stop`: at most [`MAX_STOP_STRINGS`] non-empty strings of at most [`MAX_STOP_STRING_BYTES`]
/// bytes, compiled into one automaton the request's choices share.
fn stop_strings(field: Option<StopField>) -> Result<StopSet, ApiError> {
    let strings = field.map(StopField::into_vec).unwrap_or_default();
    if strings.len() > MAX_STOP_STRINGS {
        return Err(ApiError::invalid(
            "stop",
            format!(
                "at most {MAX_STOP_STRINGS} stop strings are allowed, got {}",
                strings.len()
            ),
        ));
    }
    if strings.iter().any(String::is_empty) {
        return Err(ApiError::invalid("stop", "stop strings must not be empty"));
    }
    if let Some(long) = strings.iter().find(|s| s.len() > MAX_STOP_STRING_BYTES) {
        return Err(ApiError::invalid(
            "stop",
            format!(
                "stop strings must be at most {MAX_STOP_STRING_BYTES} bytes long, got one of {}",
                long.len()
            ),
        ));
    }
    Ok(StopSet::new(strings))
}

/// `response_format`: text, any JSON object, or a document conforming to a compiled schema.
fn response_format(field: Option<ResponseFormatField>) -> Result<ResponseFormat, ApiError> {
    let invalid = |message: String| ApiError::invalid("response_format", message);
    let Some(field) = field else {
        return Ok(ResponseFormat::Text);
    };
    match field.kind.as_str() {
        "text" => Ok(ResponseFormat::Text),
        "json_object" => Ok(ResponseFormat::JsonObject),
        "json_schema" => {
            let schema = field
                .json_schema
                .and_then(|j| j.schema)
                .ok_or_else(|| invalid("response_format.json_schema.schema is required".into()))?;
            let compiled = Schema::compile(&schema)
                .map_err(|e| invalid(format!("response_format.json_schema.schema: {e}")))?;
            Ok(ResponseFormat::JsonSchema(Arc::new(compiled)))
        }
        other => Err(invalid(format!(
            "response_format type must be \"text\", \"json_object\" or \"json_schema\", got \"{other}\""
        ))),
    }
}

/// Refuses a prompt whose text cannot fit the context whatever its tokenization, before it
/// is tokenized: `min_tokens` is [`sluice_text::Tokenizer::min_tokens_for_text_bytes`] of it.
pub fn check_prompt_text_fits(
    bytes: usize,
    min_tokens: usize,
    max_model_len: usize,
    prompt_param: &str,
) -> Result<(), ApiError> {
    if min_tokens < max_model_len {
        return Ok(());
    }
    Err(ApiError::InvalidRequest {
        message: format!(
            "This model's maximum context length is {max_model_len} tokens. However, your \
             {prompt_param} is {bytes} bytes long, which is at least {min_tokens} tokens, leaving \
             no room for a completion. Please reduce the length of the {prompt_param}."
        ),
        param: Some(prompt_param.to_string()),
        code: Some("context_length_exceeded"),
    })
}

impl ValidParams {
    /// The engine request for one tokenized prompt: checks the prompt against the context
    /// (naming both numbers when it does not fit) and resolves `max_tokens`, which defaults
    /// to the rest of the context.
    /// With `clamp` (`--clamp-max-tokens`), a `max_tokens` beyond the rest of the context is
    /// cut to it, as llama-server does, instead of refused.
    pub fn request_for(
        &self,
        prompt_tokens: Vec<u32>,
        max_model_len: usize,
        prompt_param: &str,
        clamp: bool,
    ) -> Result<GenerationRequest, ApiError> {
        let prompt_len = prompt_tokens.len();
        if prompt_len == 0 {
            return Err(ApiError::invalid(prompt_param, "the prompt is empty"));
        }
        let context_error = |max_tokens: Option<u64>| ApiError::ContextLengthExceeded {
            prompt_tokens: prompt_len,
            max_tokens,
            context: max_model_len,
            param: prompt_param.to_string(),
        };
        if prompt_len >= max_model_len {
            return Err(context_error(None));
        }
        let remaining = (max_model_len - prompt_len) as u32;
        let max_tokens = match self.max_tokens {
            None => remaining,
            Some(m) if m <= remaining || clamp => m.min(remaining),
            Some(m) => return Err(context_error(Some(u64::from(m)))),
        };
        if self.stop.min_tokens > max_tokens {
            return Err(ApiError::invalid(
                "min_tokens",
                format!(
                    "min_tokens ({}) exceeds the {max_tokens} tokens left in the context",
                    self.stop.min_tokens
                ),
            ));
        }
        Ok(GenerationRequest {
            prompt_tokens,
            n: self.n,
            sampling: self.sampling.clone(),
            stop: StopRules {
                max_tokens,
                ..self.stop.clone()
            },
            priority: self.priority,
            // Set by the handler, which knows the caller.
            cache_salt: None,
            caller: None,
            images: Default::default(),
            prompt_outputs: sluice_engine::PromptOutputs {
                logprobs: self.prompt_logprobs,
                ..Default::default()
            },
        })
    }
}

#[cfg(test)]
mod tests;
