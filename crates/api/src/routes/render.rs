//! `POST /v1/chat/completions/render` and `POST /v1/completions/render`, as vLLM has them: the
//! prompt a chat or completion request would run, rendered and tokenized by the same code the
//! generating routes use (`chat_turn::prepare_turn`, `completions::encode_prompts`), checked
//! the same way, and answered without generating: nothing reaches the engine. Prefix-aware
//! routers (vllm-router's `kv_aware`, llm-d's scheduler) call them for a request's token ids.

use axum::extract::State;
use axum::{Extension, Json};
use serde_json::Value;
use sluice_engine::{GenerationRequest, Priority};

use crate::auth::Caller;
use crate::chat_turn::prepare_turn;
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::generation::response_id;
use crate::routes::completions::encode_prompts;
use crate::validate::{validate_chat, validate_completion, ValidStream};
use crate::wire::chat::ChatCompletionRequest;
use crate::wire::completion::CompletionRequest;
use crate::wire::render::{RenderBody, RenderedRequest, RenderedSampling, RenderedStreamOptions};
use crate::AppState;

/// Renders a chat completion request: one `GenerateRequest`.
pub async fn render_chat_completion(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(body): OpenAiJson<Value>,
) -> Result<Json<RenderedRequest>, ApiError> {
    let RenderBody { model, mut request } = RenderBody::<ChatCompletionRequest>::parse(body)?;
    let model = state.registry.resolve(model.as_deref()).await?;
    model.check_serves("generation")?;
    request.model = model.id.clone();
    (state.media)
        .fetch_chat_images(&mut request.messages, model.limits().takes_images)
        .await?;
    let valid = validate_chat(request, model.limits())?;
    let fair_share_id = state.fair_share_id(&caller, valid.params.user.as_deref());
    let prepared = prepare_turn(&state, &model, &valid, fair_share_id).await?;
    Ok(Json(rendered_request(
        "chatcmpl",
        &model.id,
        prepared.request,
        valid.params.stream,
        valid.params.cache_salt,
    )))
}

/// Renders a completion request: one `GenerateRequest` per prompt, in order.
pub async fn render_completion(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(body): OpenAiJson<Value>,
) -> Result<Json<Vec<RenderedRequest>>, ApiError> {
    let RenderBody { model, mut request } = RenderBody::<CompletionRequest>::parse(body)?;
    let model = state.registry.resolve(model.as_deref()).await?;
    model.check_serves("generation")?;
    request.model = model.id.clone();
    let valid = validate_completion(request, model.limits())?;
    let fair_share_id = state.fair_share_id(&caller, valid.params.user.as_deref());
    let tokenized = encode_prompts(&state, &model, valid.prompts, false, fair_share_id).await?;
    let params = valid.params;
    tokenized
        .into_iter()
        .map(|(tokens, _)| {
            let clamp = state.config.clamp_max_tokens;
            let mut request = params.request_for(tokens, model.max_model_len, "prompt", clamp)?;
            // As `create_completion` sets it: echoed logprobs and `prompt_logprobs` share one
            // scoring pass.
            request.prompt_outputs.logprobs = valid.prompt_logprobs.max(params.prompt_logprobs);
            Ok(rendered_request(
                "cmpl",
                &model.id,
                request,
                params.stream,
                params.cache_salt.clone(),
            ))
        })
        .collect::<Result<Vec<_>, ApiError>>()
        .map(Json)
}

/// The answer for the engine request `request` of `model`, as prepared for generation;
/// `id_prefix` is `chatcmpl` or `cmpl`, `cache_salt` the request's own.
pub(crate) fn rendered_request(
    id_prefix: &str,
    model: &str,
    request: GenerationRequest,
    stream: Option<ValidStream>,
    cache_salt: Option<String>,
) -> RenderedRequest {
    let sampling = &request.sampling;
    let stop = &request.stop;
    let sampling_params = RenderedSampling {
        n: request.n,
        presence_penalty: sampling.presence_penalty,
        frequency_penalty: sampling.frequency_penalty,
        repetition_penalty: sampling.repetition_penalty,
        temperature: sampling.temperature,
        top_p: sampling.top_p,
        top_k: sampling.top_k.unwrap_or(0),
        min_p: sampling.min_p,
        seed: sampling.seed,
        stop: stop.stop_strings.patterns().to_vec(),
        stop_token_ids: stop.stop_token_ids.clone(),
        ignore_eos: stop.ignore_eos,
        max_tokens: stop.max_tokens,
        min_tokens: stop.min_tokens,
        logprobs: sampling.logprobs,
        prompt_logprobs: request.prompt_outputs.logprobs,
        logit_bias: (!sampling.logit_bias.is_empty())
            .then(|| sampling.logit_bias.iter().copied().collect()),
    };
    RenderedRequest {
        request_id: response_id(id_prefix),
        token_ids: request.prompt_tokens,
        features: None,
        sampling_params,
        model: model.to_string(),
        stream: stream.is_some(),
        stream_options: stream.map(|s| RenderedStreamOptions {
            include_usage: s.include_usage,
        }),
        cache_salt,
        priority: match request.priority {
            Priority::High => -1,
            Priority::Normal => 0,
            Priority::Low => 1,
        },
        kv_transfer_params: None,
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
