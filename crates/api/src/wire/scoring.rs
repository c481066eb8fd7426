//! Requests that score rather than generate: `POST /v1/embeddings` (OpenAI), `POST /v1/rerank`
//! and `/rerank` (Jina/Cohere shape) and `POST /v1/score` (vLLM).

use serde::{Deserialize, Serialize};

/// An embeddings request as the client sent it (unvalidated).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EmbeddingRequest {
    /// Served model name (an id, an extra name or an alias); absent or null: the default
    /// model.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub model: String,
    /// A string, a list of strings, a list of token ids or a list of such lists.
    pub input: Option<serde_json::Value>,
    /// "float" (the default) or "base64" (little-endian f32 bytes).
    pub encoding_format: Option<String>,
    /// Keep only the first `dimensions` components (then renormalised).
    #[serde(default, deserialize_with = "super::number::optional")]
    pub dimensions: Option<super::number::WholeNumber>,
    /// Keep only the last this many tokens of each input instead of refusing a long one
    /// (vLLM's field).
    #[serde(default, deserialize_with = "super::number::optional")]
    pub truncate_prompt_tokens: Option<super::number::WholeNumber>,
    /// Scheduling priority: "high", "normal" or "low".
    pub priority: Option<String>,
    /// OpenAI's end-user id: who the request counts as for fair sharing of the engine's
    /// seats when the server has one API key or none.
    pub user: Option<String>,
}

/// One embedding: floats, or their little-endian bytes in base64.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingVector {
    /// `encoding_format: "float"`.
    Float(Vec<f32>),
    /// `encoding_format: "base64"`.
    Base64(String),
}

/// One entry of an embeddings response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingData {
    /// Always "embedding".
    pub object: String,
    /// Index of the input.
    pub index: u32,
    /// The unit-length vector.
    pub embedding: EmbeddingVector,
}

/// Token counts of a scoring request (nothing is generated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScoringUsage {
    /// Tokens of every input.
    pub prompt_tokens: u32,
    /// Equal to `prompt_tokens`.
    pub total_tokens: u32,
}

impl ScoringUsage {
    /// Usage of `prompt_tokens` input tokens.
    pub fn new(prompt_tokens: u32) -> Self {
        ScoringUsage {
            prompt_tokens,
            total_tokens: prompt_tokens,
        }
    }
}

/// An embeddings response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingResponse {
    /// Always "list".
    pub object: String,
    /// One entry per input, in input order.
    pub data: Vec<EmbeddingData>,
    /// Served model id.
    pub model: String,
    /// Token counts.
    pub usage: ScoringUsage,
}

/// A document to rerank: a string, or an object with a `text` field (Cohere's v1 shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RerankDocument {
    /// The text itself.
    Text(String),
    /// `{"text": ...}`.
    Object {
        /// The text.
        text: String,
    },
}

impl RerankDocument {
    /// The document's text.
    pub fn text(&self) -> &str {
        match self {
            RerankDocument::Text(t) | RerankDocument::Object { text: t } => t,
        }
    }
}

/// A rerank request (`/v1/rerank`, `/rerank`) as the client sent it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RerankRequest {
    /// Served model name (an id, an extra name or an alias); absent or null: the default
    /// model.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub model: String,
    /// The query documents are judged against.
    pub query: Option<String>,
    /// The documents.
    pub documents: Option<Vec<RerankDocument>>,
    /// Return only the best `top_n` results.
    #[serde(default, deserialize_with = "super::number::optional")]
    pub top_n: Option<super::number::WholeNumber>,
    /// Include each document in its result (default true).
    pub return_documents: Option<bool>,
    /// A yes/no reranker's task instruction (Qwen3-Reranker's `<Instruct>`).
    pub instruction: Option<String>,
    /// Scheduling priority: "high", "normal" or "low".
    pub priority: Option<String>,
}

/// One reranked document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerankResult {
    /// Index of the document in the request.
    pub index: u32,
    /// Relevance in [0, 1] (yes/no reranker) or [-1, 1] (cosine similarity of embeddings).
    pub relevance_score: f32,
    /// The document, unless `return_documents` was false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<RerankDocumentText>,
}

/// The document echoed in a rerank result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerankDocumentText {
    /// Its text.
    pub text: String,
}

/// A rerank response: results best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerankResponse {
    /// `rerank-...`.
    pub id: String,
    /// Served model id.
    pub model: String,
    /// Token counts.
    pub usage: ScoringUsage,
    /// Best first, at most `top_n`.
    pub results: Vec<RerankResult>,
}

/// A score request (`/v1/score`, vLLM): `text_1` against each of `text_2`, or pairwise when
/// both are lists of the same length.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ScoreRequest {
    /// Served model name (an id, an extra name or an alias); absent or null: the default
    /// model.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub model: String,
    /// A string or a list of strings.
    pub text_1: Option<serde_json::Value>,
    /// A string or a list of strings.
    pub text_2: Option<serde_json::Value>,
    /// A yes/no reranker's task instruction.
    pub instruction: Option<String>,
    /// Scheduling priority: "high", "normal" or "low".
    pub priority: Option<String>,
}

/// One pair's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreData {
    /// Index of the pair.
    pub index: u32,
    /// Always "score".
    pub object: String,
    /// The pair's relevance, as in a rerank result.
    pub score: f32,
}

/// A score response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreResponse {
    /// `score-...`.
    pub id: String,
    /// Always "list".
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Served model id.
    pub model: String,
    /// One entry per pair, in pair order.
    pub data: Vec<ScoreData>,
    /// Token counts.
    pub usage: ScoringUsage,
}
