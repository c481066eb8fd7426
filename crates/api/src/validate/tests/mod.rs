//! Every validation rule, one specification each, grouped by what the fields are for; the
//! request builders they share.

mod logprobs;
mod messages;
mod prompt;
mod sampling;
mod stop;
mod structured;

use serde_json::json;

use super::*;
use crate::wire::chat::ChatCompletionRequest;
use crate::wire::completion::CompletionRequest;

pub(super) const LIMITS: ModelLimits = ModelLimits {
    max_model_len: 64,
    vocab_size: 100,
    takes_images: false,
};

pub(super) fn chat(extra: serde_json::Value) -> Result<ValidChatRequest, ApiError> {
    let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let req: ChatCompletionRequest = serde_json::from_value(body).unwrap();
    validate_chat(req, LIMITS)
}

pub(super) fn completion(extra: serde_json::Value) -> Result<ValidCompletionRequest, ApiError> {
    let mut body = json!({"model": "m", "prompt": "hi"});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let req: CompletionRequest = serde_json::from_value(body).unwrap();
    validate_completion(req, LIMITS)
}

pub(super) fn rejected_param(result: Result<impl std::fmt::Debug, ApiError>) -> String {
    match result {
        Err(ApiError::InvalidRequest { param, .. }) => param.unwrap_or_default(),
        other => panic!("expected a 400, got {other:?}"),
    }
}

pub(super) fn message_of(result: Result<impl std::fmt::Debug, ApiError>) -> String {
    match result {
        Err(e) => e.to_string(),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}
