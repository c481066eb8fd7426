//! `POST /v1/rerank` and `/rerank` (Jina/Cohere shape), `POST /v1/score` (vLLM).
//!
//! An embedder (a model with sentence-transformers files) scores a pair by the cosine similarity
//! of the two embeddings. Any other model is treated as a Qwen3-Reranker-style yes/no judge: the
//! pair goes into the prompt format its model card gives, and the relevance is the probability
//! of "yes" against "no" as the next token, `p(yes) / (p(yes) + p(no))`.

use axum::extract::State;
use axum::{Extension, Json};
use sluice_engine::PromptOutputs;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::OpenAiJson;
use crate::generation::{response_id, unix_now};
use crate::registry::ServedModel;
use crate::routes::embeddings::embed;
use crate::scoring::{encode_inputs, score_prompts, ScoringScope};
use crate::validate::{validate_rerank, validate_score, PromptInput, ValidRerankRequest};
use crate::wire::scoring::{
    RerankDocumentText, RerankRequest, RerankResponse, RerankResult, ScoreData, ScoreRequest,
    ScoreResponse, ScoringUsage,
};
use crate::AppState;

/// Qwen3-Reranker's system prompt and turn markers (from its model card).
const RERANK_PREFIX: &str = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
const RERANK_SUFFIX: &str = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
/// Its default instruction.
const DEFAULT_INSTRUCTION: &str =
    "Given a web search query, retrieve relevant passages that answer the query";

/// The prompt a yes/no reranker judges one pair with.
pub fn rerank_prompt(instruction: Option<&str>, query: &str, document: &str) -> String {
    let instruction = instruction.unwrap_or(DEFAULT_INSTRUCTION);
    format!(
        "{RERANK_PREFIX}<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}{RERANK_SUFFIX}"
    )
}

/// Reranks documents against a query, best first.
pub async fn rerank(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(mut req): OpenAiJson<RerankRequest>,
) -> Result<Json<RerankResponse>, ApiError> {
    let model = state.registry.get_or_default(&mut req.model).await?;
    model.check_serves("rerank")?;
    let valid = validate_rerank(req)?;
    let scope = scope_of(&state, &caller, &valid);
    let (scores, tokens) = score_pairs(&state, &model, &valid, scope).await?;
    let mut results: Vec<RerankResult> = (scores.into_iter().enumerate())
        .map(|(index, relevance_score)| RerankResult {
            index: index as u32,
            relevance_score,
            document: valid.return_documents.then(|| RerankDocumentText {
                text: valid.pairs[index].1.clone(),
            }),
        })
        .collect();
    results.sort_by(|a, b| {
        (b.relevance_score.total_cmp(&a.relevance_score)).then(a.index.cmp(&b.index))
    });
    results.truncate(valid.top_n.unwrap_or(usize::MAX));
    Ok(Json(RerankResponse {
        id: response_id("rerank"),
        model: model.id.clone(),
        usage: ScoringUsage::new(tokens),
        results,
    }))
}

/// Scores text pairs, in pair order.
pub async fn score(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    OpenAiJson(mut req): OpenAiJson<ScoreRequest>,
) -> Result<Json<ScoreResponse>, ApiError> {
    let model = state.registry.get_or_default(&mut req.model).await?;
    model.check_serves("rerank")?;
    let valid = validate_score(req)?;
    let scope = scope_of(&state, &caller, &valid);
    let (scores, tokens) = score_pairs(&state, &model, &valid, scope).await?;
    Ok(Json(ScoreResponse {
        id: response_id("score"),
        object: "list".into(),
        created: unix_now(),
        model: model.id.clone(),
        data: (scores.into_iter().enumerate())
            .map(|(index, score)| ScoreData {
                index: index as u32,
                object: "score".into(),
                score,
            })
            .collect(),
        usage: ScoringUsage::new(tokens),
    }))
}

/// The request's priority, the caller's prefix-cache scope and the server's `Retry-After`.
fn scope_of(state: &AppState, caller: &Caller, valid: &ValidRerankRequest) -> ScoringScope {
    ScoringScope {
        priority: valid.priority,
        cache_salt: caller.cache_salt(&state.config.api_keys, None),
        caller: caller.fair_share_id(&state.fair_share_hasher, state.config.api_keys.len(), None),
        retry_after_secs: state.config.retry_after_secs,
    }
}

/// Each pair's relevance and the tokens all of them took.
async fn score_pairs(
    state: &AppState,
    model: &ServedModel,
    valid: &ValidRerankRequest,
    scope: ScoringScope,
) -> Result<(Vec<f32>, u32), ApiError> {
    let embedder = model.is_embedder();
    // An embedder embeds every distinct text once; a judge reads each pair in one prompt.
    let texts: Vec<String> = if embedder {
        let mut texts: Vec<String> = Vec::new();
        for (q, d) in &valid.pairs {
            for t in [q, d] {
                if !texts.contains(t) {
                    texts.push(t.clone());
                }
            }
        }
        texts
    } else {
        let instruction = valid.instruction.as_deref();
        (valid.pairs.iter())
            .map(|(q, d)| rerank_prompt(instruction, q, d))
            .collect()
    };
    let inputs = texts.iter().cloned().map(PromptInput::Text).collect();
    let prompts = encode_inputs(state, model, inputs, None, scope.caller, "documents").await?;
    let tokens = prompts.iter().map(Vec::len).sum::<usize>() as u32;
    if embedder {
        let vectors = embed(model, prompts, scope, "documents").await?;
        let vector = |t: &String| &vectors[texts.iter().position(|x| x == t).expect("embedded")];
        let cosine = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let scores = (valid.pairs.iter())
            .map(|(q, d)| cosine(vector(q), vector(d)))
            .collect();
        return Ok((scores, tokens));
    }
    let token = |word: &str| {
        model.tokenizer.token_to_id(word).ok_or_else(|| {
            ApiError::invalid(
                "model",
                format!(
                    "this model is neither an embedder nor a yes/no reranker (no \"{word}\" token)"
                ),
            )
        })
    };
    let (yes, no) = (token("yes")?, token("no")?);
    let outputs = PromptOutputs {
        next_token_candidates: vec![yes, no],
        ..PromptOutputs::default()
    };
    let scores = score_prompts(model, prompts, &outputs, scope, "documents").await?;
    let relevance = (scores.iter())
        .map(|s| match s.next_token.as_slice() {
            [(_, yes), (_, no)] => Ok(yes_probability(*yes, *no)),
            _ => Err(ApiError::Internal(
                "the engine returned no next-token scores".into(),
            )),
        })
        .collect::<Result<_, _>>()?;
    Ok((relevance, tokens))
}

/// `p(yes) / (p(yes) + p(no))` from the two log-probabilities, computed stably.
pub fn yes_probability(yes: f32, no: f32) -> f32 {
    1.0 / (1.0 + (no - yes).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_probability_is_a_two_way_softmax() {
        assert_eq!(yes_probability(-1.0, -1.0), 0.5);
        let (yes, no) = (-0.2f32, -1.9f32);
        let want = yes.exp() / (yes.exp() + no.exp());
        assert!((yes_probability(yes, no) - want).abs() < 1e-6);
    }

    #[test]
    fn the_rerank_prompt_follows_the_model_card() {
        let p = rerank_prompt(None, "q?", "doc.");
        assert!(p.starts_with("<|im_start|>system\nJudge whether"));
        assert!(p.contains("<Instruct>: Given a web search query"));
        assert!(p.ends_with("<Query>: q?\n<Document>: doc.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    }
}
