//! Embeddings, rerank and score requests: inputs, `dimensions`, `encoding_format`, `top_n`.

use serde_json::Value;
use sluice_engine::Priority;

use super::completion::{parse_prompts, PromptInput};
use super::{parse_priority, ModelLimits};
use crate::error::ApiError;
use crate::wire::scoring::{EmbeddingRequest, RerankRequest, ScoreRequest};

/// An embeddings request whose every field is in range; inputs are still to be tokenized.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidEmbeddingRequest {
    /// Served model id.
    pub model: String,
    /// One or more inputs, embedded independently.
    pub inputs: Vec<PromptInput>,
    /// Answer with base64 of little-endian f32 bytes instead of floats.
    pub base64: bool,
    /// Keep the first this many components (checked against the model's width later).
    pub dimensions: Option<usize>,
    /// Keep the last this many tokens of a longer input instead of refusing it.
    pub truncate_prompt_tokens: Option<usize>,
    /// Scheduling priority.
    pub priority: Priority,
    /// OpenAI's end-user id (fair sharing, when the server has one key or none).
    pub user: Option<String>,
}

/// Validates an embeddings request.
pub fn validate_embeddings(
    req: EmbeddingRequest,
    limits: ModelLimits,
) -> Result<ValidEmbeddingRequest, ApiError> {
    let inputs = parse_prompts(req.input, limits.vocab_size)
        .map_err(|e| e.with_param_renamed("prompt", "input"))?;
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "encoding_format",
                format!("encoding_format must be \"float\" or \"base64\", got \"{other}\""),
            ))
        }
    };
    let positive = |param: &str, v: Option<i128>| match v {
        None => Ok(None),
        Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        Some(n) => Err(ApiError::invalid(
            param,
            format!("{param} must be at least 1, got {n}"),
        )),
    };
    Ok(ValidEmbeddingRequest {
        model: req.model,
        inputs,
        base64,
        dimensions: positive("dimensions", req.dimensions)?,
        truncate_prompt_tokens: positive("truncate_prompt_tokens", req.truncate_prompt_tokens)?,
        priority: parse_priority(req.priority.as_deref())?,
        user: req.user,
    })
}

/// A rerank or score request: text pairs to judge.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidRerankRequest {
    /// Served model id.
    pub model: String,
    /// `(query, document)` pairs, in request order.
    pub pairs: Vec<(String, String)>,
    /// Return only the best this many (rerank).
    pub top_n: Option<usize>,
    /// Echo each document in its result (rerank).
    pub return_documents: bool,
    /// A yes/no reranker's task instruction; its model card's default when `None`.
    pub instruction: Option<String>,
    /// Scheduling priority.
    pub priority: Priority,
}

/// Validates a rerank request: a query and at least one document.
pub fn validate_rerank(req: RerankRequest) -> Result<ValidRerankRequest, ApiError> {
    let query = req
        .query
        .ok_or_else(|| ApiError::invalid("query", "query is required"))?;
    let documents = req.documents.unwrap_or_default();
    if documents.is_empty() {
        return Err(ApiError::invalid(
            "documents",
            "documents must be a non-empty list",
        ));
    }
    let top_n = match req.top_n {
        None => None,
        Some(n) if n >= 1 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        Some(n) => {
            return Err(ApiError::invalid(
                "top_n",
                format!("top_n must be at least 1, got {n}"),
            ))
        }
    };
    Ok(ValidRerankRequest {
        model: req.model,
        pairs: (documents.iter())
            .map(|d| (query.clone(), d.text().to_string()))
            .collect(),
        top_n,
        return_documents: req.return_documents.unwrap_or(true),
        instruction: req.instruction,
        priority: parse_priority(req.priority.as_deref())?,
    })
}

/// Validates a score request: one text against many, or two lists pairwise.
pub fn validate_score(req: ScoreRequest) -> Result<ValidRerankRequest, ApiError> {
    let texts = |param: &str, v: Option<Value>| -> Result<Vec<String>, ApiError> {
        let error = || {
            ApiError::invalid(
                param,
                format!("{param} must be a string or a non-empty list of strings"),
            )
        };
        match v {
            Some(Value::String(s)) => Ok(vec![s]),
            Some(Value::Array(items)) if !items.is_empty() => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(error()),
                })
                .collect(),
            _ => Err(error()),
        }
    };
    let (left, right) = (texts("text_1", req.text_1)?, texts("text_2", req.text_2)?);
    let pairs = match (left.len(), right.len()) {
        (1, _) => right.into_iter().map(|r| (left[0].clone(), r)).collect(),
        (l, r) if l == r => left.into_iter().zip(right).collect(),
        (l, r) => {
            return Err(ApiError::invalid(
                "text_2",
                format!("text_1 has {l} texts and text_2 {r}: give one text_1 or equal lengths"),
            ))
        }
    };
    Ok(ValidRerankRequest {
        model: req.model,
        pairs,
        top_n: None,
        return_documents: false,
        instruction: req.instruction,
        priority: parse_priority(req.priority.as_deref())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ModelLimits = ModelLimits {
        max_model_len: 64,
        vocab_size: 100,
        takes_images: false,
    };

    fn embeddings(body: Value) -> Result<ValidEmbeddingRequest, ApiError> {
        validate_embeddings(serde_json::from_value(body).unwrap(), LIMITS)
    }

    #[test]
    fn embedding_inputs_take_every_openai_shape() {
        let one = embeddings(serde_json::json!({"model":"m","input":"hi"})).unwrap();
        assert_eq!(one.inputs, vec![PromptInput::Text("hi".into())]);
        let ids = embeddings(serde_json::json!({"model":"m","input":[[1,2],[3]]})).unwrap();
        assert_eq!(ids.inputs.len(), 2);
        assert!(!ids.base64);
    }

    #[test]
    fn bad_embedding_fields_name_their_parameter() {
        let param = |body: Value| match embeddings(body).unwrap_err() {
            ApiError::InvalidRequest { param, .. } => param.unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(param(serde_json::json!({"model":"m"})), "input");
        assert_eq!(
            param(serde_json::json!({"model":"m","input":[500]})),
            "input"
        );
        assert_eq!(
            param(serde_json::json!({"model":"m","input":"x","encoding_format":"hex"})),
            "encoding_format"
        );
        assert_eq!(
            param(serde_json::json!({"model":"m","input":"x","dimensions":0})),
            "dimensions"
        );
    }

    #[test]
    fn score_pairs_one_text_with_many_or_lists_pairwise() {
        let score = |a: Value, b: Value| {
            validate_score(ScoreRequest {
                model: "m".into(),
                text_1: Some(a),
                text_2: Some(b),
                ..ScoreRequest::default()
            })
        };
        let one_many = score("q".into(), serde_json::json!(["a", "b"])).unwrap();
        assert_eq!(
            one_many.pairs,
            vec![("q".into(), "a".into()), ("q".into(), "b".into())]
        );
        let pairwise = score(serde_json::json!(["x", "y"]), serde_json::json!(["a", "b"])).unwrap();
        assert_eq!(pairwise.pairs[1], ("y".into(), "b".into()));
        assert!(score(
            serde_json::json!(["x", "y"]),
            serde_json::json!(["a", "b", "c"])
        )
        .is_err());
    }
}
