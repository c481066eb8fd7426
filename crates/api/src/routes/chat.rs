//! `POST /v1/chat/completions`.

use std::sync::Arc;

use axum::extract::State;
use axum::Extension;
use axum::response::Response;
use serde_json::Value;
use sluice_text::{TextError, Tokenizer};

use crate::assemble::Flavor;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::generation::{run, tokenize_off_runtime, ResponsePlan};
use crate::validate::{check_prompt_text_fits, validate_chat};
use crate::wire::chat::ChatCompletionRequest;
use crate::AppState;

/// Creates a chat completion.
pub async fn create_chat_completion(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(req): OpenAiJson<ChatCompletionRequest>,
) -> Result<Response, ApiError> {
    let model = state.registry.get(&req.model).await?;
    let valid = validate_chat(req, model.limits())?;
    let tokenizer = model.tokenizer.clone();
    let (messages, tools) = (valid.messages, valid.tools);
    let max_model_len = model.max_model_len;
    let prompt = tokenize_off_runtime(&state, move || {
        let text = render_chat_text(&tokenizer, &messages, tools.as_ref(), true)?;
        let min_tokens = tokenizer.min_tokens_for_text_bytes(text.len());
        check_prompt_text_fits(text.len(), min_tokens, max_model_len, "messages")?;
        // The template writes BOS and the other special tokens itself.
        tokenizer
            .encode(&text, false)
            .map_err(|e| ApiError::Internal(e.to_string()))
    })
    .await?;
    let mut request = valid
        .params
        .request_for(prompt, model.max_model_len, "messages")?;
    request.cache_salt =
        caller.cache_salt(&state.cache_salt_hasher, valid.params.cache_salt.as_deref());
    let plan = ResponsePlan {
        flavor: Flavor::Chat,
        n: valid.params.n,
        stream: valid.params.stream,
        logprobs: valid.params.sampling.logprobs.is_some(),
        hide_cached_tokens: state.config.hide_cached_tokens,
        echo: None,
    };
    run(
        model,
        vec![request],
        plan,
        state.config.retry_after_secs,
        "chatcmpl",
    )
    .await
}

/// Renders `messages` with the model's chat template; a model without one is a 400.
/// Blocking: call through `off_runtime`.
pub fn render_chat_text(
    tokenizer: &Arc<Tokenizer>,
    messages: &Value,
    tools: Option<&Value>,
    add_generation_prompt: bool,
) -> Result<String, ApiError> {
    let template = tokenizer.chat_template().ok_or_else(|| {
        ApiError::invalid(
            "messages",
            match tokenizer.chat_template_error() {
                Some(e) => format!(
                    "this model's chat template does not compile ({e}); use /v1/completions"
                ),
                None => "this model has no chat template; use /v1/completions with a plain prompt"
                    .to_string(),
            },
        )
    })?;
    template
        .render(messages, add_generation_prompt, tools)
        .map_err(|e| match e {
            TextError::Template(m) | TextError::InvalidMessages(m) => {
                ApiError::invalid("messages", m)
            }
            other => ApiError::Internal(other.to_string()),
        })
}
