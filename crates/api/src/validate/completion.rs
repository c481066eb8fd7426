//! Text completion requests: the prompt in any of its four forms, `echo` and `suffix`.

use serde_json::Value;

use super::{check_token_id, validate_shared, ModelLimits, ValidParams, MAX_TOP_LOGPROBS};
use crate::error::ApiError;
use crate::wire::completion::CompletionRequest;

/// One prompt of a completion request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptInput {
    /// Text, to be tokenized with special tokens.
    Text(String),
    /// Token ids, each checked against the vocabulary.
    Tokens(Vec<u32>),
}

/// A completion request whose every field is in range; prompts are still to be tokenized.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidCompletionRequest {
    /// Served model id.
    pub model: String,
    /// One or more prompts; choice `i` of prompt `p` gets index `p * n + i`.
    pub prompts: Vec<PromptInput>,
    /// Prepend each prompt's text to its choices' text.
    pub echo: bool,
    /// `Some(k)` with `echo` and `logprobs: k`: the echoed prompt carries its tokens'
    /// logprobs (the first token's is null) and top `k` alternatives, streamed or not (a
    /// stream's first chunk of each choice carries the echo and its logprobs).
    pub prompt_logprobs: Option<u32>,
    /// Sampling, stopping and streaming parameters.
    pub params: ValidParams,
}

/// Validates a completion request against a model's limits.
pub fn validate_completion(
    req: CompletionRequest,
    limits: ModelLimits,
) -> Result<ValidCompletionRequest, ApiError> {
    if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::invalid("suffix", "suffix is not supported"));
    }
    let prompts = parse_prompts(req.prompt, limits.vocab_size)?;
    let logprobs = match req.logprobs {
        None => None,
        Some(k) if (0..=MAX_TOP_LOGPROBS.into()).contains(&k) => Some(k as u32),
        Some(k) => {
            return Err(ApiError::invalid(
                "logprobs",
                format!("logprobs must be between 0 and {MAX_TOP_LOGPROBS}, got {k}"),
            ))
        }
    };
    let echo = req.echo.unwrap_or(false);
    let prompt_logprobs = logprobs.filter(|_| echo);
    // `max_tokens: 0` with `echo` scores the prompt without generating (evaluation harnesses).
    let score_only = echo && req.max_tokens == Some(0);
    let max_tokens = if score_only { None } else { req.max_tokens };
    let mut params = validate_shared(req.options, max_tokens, "max_tokens", logprobs, limits)?;
    if score_only {
        if params.stop.min_tokens > 0 {
            return Err(ApiError::invalid(
                "min_tokens",
                "min_tokens must be 0 when max_tokens is 0",
            ));
        }
        params.max_tokens = Some(0);
    }
    if let Some(best_of) = req.best_of {
        if best_of != params.n.into() {
            return Err(ApiError::invalid(
                "best_of",
                format!(
                    "best_of must equal n ({}) when given, got {best_of}",
                    params.n
                ),
            ));
        }
    }
    Ok(ValidCompletionRequest {
        model: req.model,
        prompts,
        echo,
        prompt_logprobs,
        params,
    })
}

/// Reads `prompt` as a string, a list of strings, a list of token ids or a list of lists.
pub fn parse_prompts(
    prompt: Option<Value>,
    vocab_size: usize,
) -> Result<Vec<PromptInput>, ApiError> {
    let shape_error = || {
        ApiError::invalid(
            "prompt",
            "prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids",
        )
    };
    let token_list = |items: &[Value]| -> Result<Vec<u32>, ApiError> {
        items
            .iter()
            .map(|v| {
                v.as_i64()
                    .ok_or_else(shape_error)
                    .and_then(|id| check_token_id("prompt", id.into(), vocab_size))
            })
            .collect()
    };
    let prompts = match prompt {
        None | Some(Value::Null) => return Err(ApiError::invalid("prompt", "prompt is required")),
        Some(Value::String(s)) => vec![PromptInput::Text(s)],
        Some(Value::Array(items)) => match items.first() {
            None => {
                return Err(ApiError::invalid(
                    "prompt",
                    "prompt must not be an empty list",
                ))
            }
            Some(Value::String(_)) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(PromptInput::Text(s)),
                    _ => Err(shape_error()),
                })
                .collect::<Result<_, _>>()?,
            Some(Value::Number(_)) => vec![PromptInput::Tokens(token_list(&items)?)],
            Some(Value::Array(_)) => items
                .iter()
                .map(|v| match v {
                    Value::Array(ids) if !ids.is_empty() => {
                        Ok(PromptInput::Tokens(token_list(ids)?))
                    }
                    Value::Array(_) => Err(ApiError::invalid(
                        "prompt",
                        "a token-id prompt must not be empty",
                    )),
                    _ => Err(shape_error()),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(shape_error()),
        },
        Some(_) => return Err(shape_error()),
    };
    Ok(prompts)
}
