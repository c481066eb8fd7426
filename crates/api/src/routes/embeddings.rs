//! `POST /v1/embeddings`: each input's final hidden states pooled as the model's
//! sentence-transformers config says (its last token's state without one), L2-normalised.

use axum::extract::State;
use axum::{Extension, Json};
use sluice_engine::{Pooling, PromptOutputs};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::registry::ServedModel;
use crate::scoring::{base64_f32_le, encode_inputs, l2_normalised, score_prompts, ScoringScope};
use crate::validate::validate_embeddings;
use crate::wire::scoring::{
    EmbeddingData, EmbeddingRequest, EmbeddingResponse, EmbeddingVector, ScoringUsage,
};
use crate::AppState;

/// Embeds every input.
pub async fn create_embeddings(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(mut req): OpenAiJson<EmbeddingRequest>,
) -> Result<Json<EmbeddingResponse>, ApiError> {
    let model = state.registry.get_or_default(&mut req.model).await?;
    model.check_serves("embeddings")?;
    let valid = validate_embeddings(req, model.limits())?;
    let scope = ScoringScope {
        priority: valid.priority,
        cache_salt: caller.cache_salt(&state.config.api_keys, None),
        caller: caller.fair_share_id(
            &state.fair_share_hasher,
            state.config.api_keys.len(),
            valid.user.as_deref(),
        ),
        retry_after_secs: state.config.retry_after_secs,
    };
    let prompts = encode_inputs(
        &state,
        &model,
        valid.inputs,
        valid.truncate_prompt_tokens,
        scope.caller,
        "input",
    )
    .await?;
    let prompt_tokens = prompts.iter().map(Vec::len).sum::<usize>() as u32;
    let vectors = embed(&model, prompts, scope, "input").await?;
    let data = (vectors.into_iter().enumerate())
        .map(|(index, v)| {
            let v = truncated(v, valid.dimensions)?;
            Ok(EmbeddingData {
                object: "embedding".into(),
                index: index as u32,
                embedding: match valid.base64 {
                    true => EmbeddingVector::Base64(base64_f32_le(&v)),
                    false => EmbeddingVector::Float(v),
                },
            })
        })
        .collect::<Result<_, ApiError>>()?;
    Ok(Json(EmbeddingResponse {
        object: "list".into(),
        data,
        model: model.id.clone(),
        usage: ScoringUsage::new(prompt_tokens),
    }))
}

/// The pooled, L2-normalised embedding of each prompt, in order.
pub async fn embed(
    model: &ServedModel,
    prompts: Vec<Vec<u32>>,
    scope: ScoringScope,
    param: &str,
) -> Result<Vec<Vec<f32>>, ApiError> {
    let outputs = PromptOutputs {
        pooling: Some(model.pooling.unwrap_or(Pooling::LastToken)),
        ..PromptOutputs::default()
    };
    let scores = score_prompts(model, prompts, &outputs, scope, param).await?;
    (scores.into_iter())
        .map(|s| {
            s.embedding
                .map(l2_normalised)
                .ok_or_else(|| ApiError::Internal("the engine returned no pooled state".into()))
        })
        .collect()
}

/// The first `dimensions` components, renormalised (Matryoshka truncation).
fn truncated(v: Vec<f32>, dimensions: Option<usize>) -> Result<Vec<f32>, ApiError> {
    match dimensions {
        None => Ok(v),
        Some(d) if d <= v.len() => Ok(l2_normalised(v[..d].to_vec())),
        Some(d) => Err(ApiError::invalid(
            "dimensions",
            format!(
                "dimensions must not exceed the model's {} dimensions, got {d}",
                v.len()
            ),
        )),
    }
}
