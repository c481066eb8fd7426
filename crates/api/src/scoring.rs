//! Runs score-only engine requests (embeddings, rerank, score): each prompt is one ordinary
//! engine request with `max_tokens: 0` and the [`PromptOutputs`] it needs, so it queues with
//! its priority, counts against the step's token budget and shares the prefix cache like any
//! other; what comes back is its [`PromptScores`].

use sluice_engine::{
    Event, FinishReason, GenerationRequest, Priority, PromptOutputs, PromptScores, SamplingParams,
    StopRules, SubmitError,
};

use crate::error::ApiError;
use crate::registry::ServedModel;

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

/// Submits one score-only request per prompt (all or none) and waits for every one's scores,
/// in prompt order.
pub async fn score_prompts(
    model: &ServedModel,
    prompts: Vec<Vec<u32>>,
    outputs: &PromptOutputs,
    scope: ScoringScope,
) -> Result<Vec<PromptScores>, ApiError> {
    let ScoringScope {
        priority,
        cache_salt,
        caller,
        retry_after_secs,
    } = scope;
    let mut streams = Vec::with_capacity(prompts.len());
    for prompt_tokens in prompts {
        let request = GenerationRequest {
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
            prompt_outputs: outputs.clone(),
        };
        let stream = model.engine.submit(request).map_err(|e| match e {
            SubmitError::QueueFull => ApiError::Overloaded { retry_after_secs },
            SubmitError::ShutDown => ApiError::Unavailable("the engine has shut down".into()),
            SubmitError::GroupTooLarge { requests, limit } => ApiError::invalid(
                "input",
                format!("a request may have at most {limit} inputs (the server's --max-queue), got {requests}"),
            ),
        })?;
        streams.push(stream);
    }
    let mut all = Vec::with_capacity(streams.len());
    for mut stream in streams {
        let mut scores = None;
        loop {
            match stream.recv().await {
                Some(Event::Prompt { scores: s, .. }) => scores = Some(*s),
                Some(Event::Delta { .. }) => {}
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
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
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
