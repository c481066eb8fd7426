//! The scoring routes of the document: embeddings, rerank and score.

use serde_json::{json, Value};

use super::operation::post;

/// The scoring routes (`/v1/embeddings`, `/v1/rerank`, `/rerank`, `/v1/score`) and their schemas.
pub(super) fn add_scoring(doc: &mut Value) {
    let paths = [
        (
            "/v1/embeddings",
            "Embed inputs (pooled, L2-normalised)",
            "EmbeddingRequest",
            "EmbeddingResponse",
        ),
        (
            "/v1/rerank",
            "Rerank documents against a query",
            "RerankRequest",
            "RerankResponse",
        ),
        (
            "/rerank",
            "Rerank documents against a query",
            "RerankRequest",
            "RerankResponse",
        ),
        (
            "/v1/score",
            "Score text pairs",
            "ScoreRequest",
            "ScoreResponse",
        ),
    ];
    for (path, summary, request, response) in paths {
        doc["paths"][path] = post(summary, request, response, false);
    }
    let texts =
        json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]});
    let usage = json!({"type": "object", "properties": {
        "prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}}});
    let schemas = json!({
        "EmbeddingRequest": {"type": "object", "required": ["input"], "properties": {
            "model": {"type": ["string", "null"], "description": "a served model name; absent or null: the default model"},
            "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}},
                {"type": "array", "items": {"type": "integer"}},
                {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}]},
            "encoding_format": {"type": "string", "enum": ["float", "base64"]},
            "dimensions": {"type": "integer", "minimum": 1},
            "truncate_prompt_tokens": {"type": "integer", "minimum": 1},
            "priority": {"type": "string", "enum": ["high", "normal", "low"]},
            "user": {"type": "string"}}},
        "EmbeddingResponse": {"type": "object", "properties": {
            "object": {"const": "list"}, "model": {"type": "string"}, "usage": usage.clone(),
            "data": {"type": "array", "items": {"type": "object", "properties": {
                "object": {"const": "embedding"}, "index": {"type": "integer"},
                "embedding": {"oneOf": [{"type": "array", "items": {"type": "number"}}, {"type": "string"}]}}}}}},
        "RerankRequest": {"type": "object", "required": ["query", "documents"], "properties": {
            "model": {"type": ["string", "null"], "description": "a served model name; absent or null: the default model"}, "query": {"type": "string"},
            "documents": {"type": "array", "items": {"oneOf": [{"type": "string"},
                {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}]}},
            "top_n": {"type": "integer", "minimum": 1}, "return_documents": {"type": "boolean"},
            "instruction": {"type": "string"},
            "priority": {"type": "string", "enum": ["high", "normal", "low"]}}},
        "RerankResponse": {"type": "object", "properties": {
            "id": {"type": "string"}, "model": {"type": "string"}, "usage": usage.clone(),
            "results": {"type": "array", "items": {"type": "object", "properties": {
                "index": {"type": "integer"}, "relevance_score": {"type": "number"},
                "document": {"type": "object", "properties": {"text": {"type": "string"}}}}}}}},
        "ScoreRequest": {"type": "object", "required": ["text_1", "text_2"], "properties": {
            "model": {"type": ["string", "null"], "description": "a served model name; absent or null: the default model"}, "text_1": texts.clone(), "text_2": texts,
            "instruction": {"type": "string"},
            "priority": {"type": "string", "enum": ["high", "normal", "low"]}}},
        "ScoreResponse": {"type": "object", "properties": {
            "id": {"type": "string"}, "object": {"const": "list"}, "created": {"type": "integer"},
            "model": {"type": "string"}, "usage": usage,
            "data": {"type": "array", "items": {"type": "object", "properties": {
                "index": {"type": "integer"}, "object": {"const": "score"}, "score": {"type": "number"}}}}}}
    });
    if let (Some(all), Value::Object(scoring)) =
        (doc["components"]["schemas"].as_object_mut(), schemas)
    {
        all.extend(scoring);
    }
}
