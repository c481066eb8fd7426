//! `POST /v1/completions`.

use axum::extract::State;
use axum::response::Response;
use axum::Extension;

use crate::assemble::ResponseMeta;
use crate::auth::Caller;
use crate::dialect::completion::CompletionDialect;
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::generation::{run, tokenize_off_runtime, ResponsePlan};
use crate::registry::ServedModel;
use crate::validate::{check_prompt_text_fits, validate_completion, PromptInput};
use crate::wire::completion::CompletionRequest;
use crate::AppState;

/// Creates a text completion; several prompts give `prompts * n` choices.
pub async fn create_completion(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(mut req): OpenAiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    let model = state.registry.get_or_default(&mut req.model).await?;
    model.check_serves("generation")?;
    let valid = validate_completion(req, model.limits())?;
    let echo = valid.echo;
    let fair_share_id = caller.fair_share_id(
        &state.fair_share_hasher,
        state.config.api_keys.len(),
        valid.params.user.as_deref(),
    );
    let tokenized = encode_prompts(&state, &model, valid.prompts, echo, fair_share_id).await?;
    let mut requests = Vec::with_capacity(tokenized.len());
    let mut echo_texts = Vec::with_capacity(tokenized.len());
    let cache_salt = caller.cache_salt(&state.config.api_keys, valid.params.cache_salt.as_deref());
    let mut echo_tokens = Vec::with_capacity(tokenized.len());
    for (tokens, text) in tokenized {
        let mut request = valid.params.request_for(
            tokens.clone(),
            model.max_model_len,
            "prompt",
            state.config.clamp_max_tokens,
        )?;
        request.cache_salt = cache_salt;
        request.caller = fair_share_id;
        // Echoed logprobs and vLLM's `prompt_logprobs` share one scoring pass (the larger k).
        request.prompt_outputs.logprobs = valid.prompt_logprobs.max(valid.params.prompt_logprobs);
        requests.push(request);
        echo_texts.extend(text);
        echo_tokens.push(tokens);
    }
    let logprobs = valid.params.sampling.logprobs.is_some();
    let dialect = CompletionDialect::new(
        ResponseMeta::new("cmpl", &model.id),
        requests.len() * valid.params.n as usize,
        valid.params.stream.is_some_and(|s| s.include_usage),
        logprobs,
    );
    let plan = ResponsePlan {
        dialect: Box::new(dialect),
        n: valid.params.n,
        stream: valid.params.stream.is_some(),
        logprobs,
        hide_cached_tokens: state.config.hide_cached_tokens,
        echo: echo.then_some(echo_texts),
        echo_logprobs: valid.prompt_logprobs,
        prompt_logprobs: valid.params.prompt_logprobs,
        prompt_tokens: echo_tokens,
        keep_alive: state.config.stream_keep_alive,
    };
    run(model, requests, plan, state.config.retry_after_secs).await
}

/// Tokenizes a completion request's prompts as generation does: each text prompt too long for
/// the context whatever its tokens is refused before any is tokenized, text is encoded with the
/// tokenizer's special tokens (BOS), token prompts pass as given. Each prompt's tokens, and its
/// text when `echo`. `caller` (the fair-share caller) orders contended tokenizing slots.
pub(crate) async fn encode_prompts(
    state: &AppState,
    model: &ServedModel,
    prompts: Vec<PromptInput>,
    echo: bool,
    caller: Option<u64>,
) -> Result<Vec<(Vec<u32>, Option<String>)>, ApiError> {
    let tokenizer = model.tokenizer.clone();
    for prompt in &prompts {
        if let PromptInput::Text(text) = prompt {
            let min_tokens = tokenizer.min_tokens_for_text_bytes(text.len());
            check_prompt_text_fits(text.len(), min_tokens, model.max_model_len, "prompt")?;
        }
    }
    tokenize_off_runtime(state, caller, move || {
        prompts
            .into_iter()
            .map(|prompt| match prompt {
                PromptInput::Text(text) => {
                    let tokens = tokenizer
                        .encode(&text, true)
                        .map_err(|e| ApiError::Internal(e.to_string()))?;
                    Ok((tokens, echo.then_some(text)))
                }
                PromptInput::Tokens(tokens) => {
                    let text = if echo {
                        let text = tokenizer
                            .decode(&tokens, false)
                            .map_err(|e| ApiError::invalid("prompt", e.to_string()))?;
                        Some(text)
                    } else {
                        None
                    };
                    Ok((tokens, text))
                }
            })
            .collect::<Result<Vec<_>, ApiError>>()
    })
    .await
}
