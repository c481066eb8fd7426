//! Runs score-only engine requests (embeddings, rerank, score): each prompt is one ordinary
//! engine request with `max_tokens: 0` and the [`PromptOutputs`] it needs, so it queues with
//! its priority, counts against the step's token budget and shares the prefix cache like any
//! other; what comes back is its [`PromptScores`].

use sluice_engine::{
    Event, FinishReason, GenerationRequest, Priority, PromptOutputs, PromptScores, SamplingParams,
    StopRules, SubmitError,
};

use crate::error::ApiError;
use crate::generation::tokenize_off_runtime;
use crate::registry::ServedModel;
use crate::validate::PromptInput;
use crate::AppState;

/// Tokenizes scoring inputs the way generation tokenizes prompts: without truncation, a text
/// too long for the context whatever its tokens is refused before anything is tokenized; the
/// rest is encoded in one of the server's tokenizing slots (so a flood of large inputs costs
/// the memory of as many tokenizations as there are slots, not one per input); then each input
/// is fitted to the context ([`fit_input`]).
pub async fn encode_inputs(
    state: &AppState,
    model: &ServedModel,
    inputs: Vec<PromptInput>,
    truncate: Option<usize>,
    caller: Option<u64>,
    param: &'static str,
) -> Result<Vec<Vec<u32>>, ApiError> {
    let tokenizer = model.tokenizer.clone();
    if truncate.is_none() {
        for input in &inputs {
            if let PromptInput::Text(text) = input {
                let min_tokens = tokenizer.min_tokens_for_text_bytes(text.len());
                check_input_text_fits(text.len(), min_tokens, model.max_model_len, param)?;
            }
        }
    }
    let tokenized = tokenize_off_runtime(state, caller, move || {
        (inputs.into_iter())
            .map(|input| match input {
                PromptInput::Text(text) => tokenizer
                    .encode(&text, true)
                    .map_err(|e| ApiError::Internal(e.to_string())),
                PromptInput::Tokens(tokens) => Ok(tokens),
            })
            .collect::<Result<Vec<_>, ApiError>>()
    })
    .await?;
    (tokenized.into_iter())
        .map(|t| fit_input(t, truncate, model.max_model_len, param))
        .collect()
}

/// Refuses an input whose `bytes` cannot encode to fewer than `min_tokens` tokens when that
/// already fills the context, before it is tokenized.
fn check_input_text_fits(
    bytes: usize,
    min_tokens: usize,
    max_model_len: usize,
    param: &str,
) -> Result<(), ApiError> {
    if min_tokens < max_model_len {
        return Ok(());
    }
    Err(ApiError::InvalidRequest {
        message: format!(
            "This model's maximum context length is {max_model_len} tokens. However, an \
             {param} is {bytes} bytes long, which is at least {min_tokens} tokens. Shorten it \
             or set truncate_prompt_tokens."
        ),
        param: Some(param.to_string()),
        code: Some("context_length_exceeded"),
    })
}

/// Checks that a tokenized input fits the context (score-only requests generate nothing, but
/// the engine refuses a sequence that fills it), keeping its last `truncate` tokens first.
pub fn fit_input(
    mut tokens: Vec<u32>,
    truncate: Option<usize>,
    max_model_len: usize,
    param: &str,
) -> Result<Vec<u32>, ApiError> {
    if let Some(keep) = truncate {
        let drop = tokens.len().saturating_sub(keep);
        tokens.drain(..drop);
    }
    if tokens.is_empty() {
        return Err(ApiError::invalid(param, format!("an {param} is empty")));
    }
    if tokens.len() >= max_model_len {
        return Err(ApiError::InvalidRequest {
            message: format!(
                "This model's maximum context length is {max_model_len} tokens. However, an \
                 {param} has {} tokens. Shorten it or set truncate_prompt_tokens.",
                tokens.len()
            ),
            param: Some(param.to_string()),
            code: Some("context_length_exceeded"),
        });
    }
    Ok(tokens)
}

/// How a scoring request is scheduled: its priority, its prefix-cache scope (the caller's) and
/// the `Retry-After` of a full queue.
#[derive(Debug, Clone, Copy)]
pub struct ScoringScope {
    /// Scheduling priority.
    pub priority: Priority,
    /// Prefix-cache scope, from the caller's API key.
    pub cache_salt: Option<u64>,
    /// Who sent it, for fair sharing (see `GenerationRequest::caller`).
    pub caller: Option<u64>,
    /// Seconds sent in `Retry-After` when the queue is full.
    pub retry_after_secs: u64,
}

/// Submits one score-only request per prompt and waits for every one's scores, in prompt order.
/// The prompts are one group, as a completion's prompts are: queue room is reserved for all of
/// them at once (an idle server takes a group of any size up to its queue), and a group larger
/// than the queue can ever hold is a 400 naming `--max-queue`, not a 429 that retrying never
/// cures.
pub async fn score_prompts(
    model: &ServedModel,
    prompts: Vec<Vec<u32>>,
    outputs: &PromptOutputs,
    scope: ScoringScope,
    param: &str,
) -> Result<Vec<PromptScores>, ApiError> {
    let ScoringScope {
        priority,
        cache_salt,
        caller,
        retry_after_secs,
    } = scope;
    let requests = (prompts.into_iter())
        .map(|prompt_tokens| GenerationRequest {
            prompt_tokens,
            n: 1,
            sampling: SamplingParams::default(),
            stop: StopRules {
                max_tokens: 0,
                ..StopRules::default()
            },
            priority,
            cache_salt,
            caller,
            images: Default::default(),
            prompt_outputs: outputs.clone(),
        })
        .collect();
    let streams = model.engine.submit_all(requests).map_err(|e| match e {
        SubmitError::QueueFull => ApiError::Overloaded { retry_after_secs },
        SubmitError::ShutDown => ApiError::Unavailable("the engine has shut down".into()),
        SubmitError::GroupTooLarge { requests, limit } => ApiError::invalid(
            param,
            format!(
                "this request needs {requests} engine requests (one per {what}) but the \
                 server's queue holds at most {limit} (--max-queue); send at most {limit} at \
                 a time",
                what = group_unit(param),
            ),
        ),
    })?;
    let mut all = Vec::with_capacity(streams.len());
    for mut stream in streams {
        let mut scores = None;
        loop {
            match stream.recv().await {
                Some(Event::Prompt { scores: s, .. }) => scores = Some(*s),
                Some(Event::Delta { .. } | Event::Scheduled { .. }) => {}
                Some(Event::Finished { reason, error, .. }) => {
                    match reason {
                        FinishReason::Stop | FinishReason::Length => {}
                        FinishReason::Cancelled => {
                            return Err(ApiError::Unavailable(
                                "the request was cancelled: the server is shutting down".into(),
                            ))
                        }
                        FinishReason::Error => {
                            return Err(ApiError::Internal(
                                error.unwrap_or_else(|| "the engine failed on this request".into()),
                            ))
                        }
                    }
                    break;
                }
                None => {
                    return Err(ApiError::Internal(
                        "the engine stopped before the request finished".into(),
                    ))
                }
            }
        }
        all.push(scores.ok_or_else(|| {
            ApiError::Internal("the engine finished a scoring request without its scores".into())
        })?);
    }
    Ok(all)
}

/// What one engine request of a scoring group stands for, for messages.
fn group_unit(param: &str) -> &'static str {
    match param {
        "input" => "input",
        _ => "pair, or per distinct text for an embedder",
    }
}

/// `v` scaled to unit length (left as is when it is all zeros).
pub fn l2_normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
    v
}

/// Standard base64 (RFC 4648, padded) of `floats` as little-endian bytes: OpenAI's
/// `encoding_format: "base64"`.
pub fn base64_f32_le(floats: &[f32]) -> String {
    let bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
    base64(&bytes)
}

/// Standard base64 (RFC 4648) with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_padding() {
        // 1.0f32 is 00 00 80 3f.
        assert_eq!(base64_f32_le(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32_le(&[1.0, -2.0, 0.5]), "AACAPwAAAMAAAAA/");
    }

    #[test]
    fn normalised_vectors_have_unit_length() {
        assert_eq!(l2_normalised(vec![3.0, 4.0]), vec![0.6, 0.8]);
        assert_eq!(l2_normalised(vec![0.0, 0.0]), vec![0.0, 0.0]);
    }

    #[test]
    fn truncation_keeps_the_last_tokens_and_long_inputs_are_refused() {
        assert_eq!(
            fit_input(vec![1, 2, 3, 4], Some(2), 8, "input").unwrap(),
            vec![3, 4]
        );
        assert!(fit_input(vec![1; 8], None, 8, "input").is_err());
        assert_eq!(fit_input(vec![1; 8], Some(7), 8, "input").unwrap().len(), 7);
    }
}
