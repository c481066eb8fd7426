//! `GET /openapi.json`: an OpenAPI 3.1 description of this server's routes, written by hand
//! from the wire types (kept next to them in spirit: change both together).

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::AppState;

/// The OpenAPI document, with the token-id bound of the models in memory now.
pub async fn openapi(State(state): State<AppState>) -> Json<Value> {
    let mut doc = document();
    let smallest_vocab = state
        .registry
        .models()
        .iter()
        .map(|m| m.tokenizer.vocab_size())
        .min();
    if let Some(vocab) = smallest_vocab {
        bound_token_ids(&mut doc, vocab);
    }
    Json(doc)
}

/// States the largest token id `/detokenize` accepts (an id outside the vocabulary is a 400):
/// the smallest vocabulary among the models in memory, so every id the document allows is
/// valid for each of them.
fn bound_token_ids(doc: &mut Value, vocab_size: usize) {
    let ids =
        &mut doc["components"]["schemas"]["DetokenizeRequest"]["properties"]["tokens"]["items"];
    ids["maximum"] = json!(vocab_size.saturating_sub(1));
}

fn error_responses() -> Value {
    let err = json!({"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let with = |description: &str| {
        let mut e = err.clone();
        e["description"] = json!(description);
        e
    };
    json!({
        "400": with("Invalid request (bad field, malformed JSON, wrong content type, context exceeded, a token id outside the vocabulary)"),
        "401": with("Missing or wrong API key"),
        "404": with("Unknown model"),
        "408": with("Body not received within the read deadline"),
        "413": with("Body too large"),
        "429": with("Queue full; see the Retry-After header"),
        "500": with("Engine failure"),
        "503": with("Engine not running")
    })
}

fn json_body(schema: &str) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

fn ok(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

pub(crate) fn post(summary: &str, request: &str, response: &str, streams: bool) -> Value {
    let mut responses = error_responses();
    let mut success = ok(
        summary,
        json!({"$ref": format!("#/components/schemas/{response}")}),
    );
    if streams {
        success["content"]["text/event-stream"] = json!({"schema": {"type": "string", "description": "data: <chunk JSON> events, then data: [DONE]"}});
    }
    responses["200"] = success;
    json!({"post": {"summary": summary, "security": [{"bearer": []}, {"apiKey": []}], "requestBody": json_body(request), "responses": responses}})
}

/// `POST /admin/models/{model}/load|unload`: no body, the model's admin view back.
/// An admin model action: its 409 (where the model's state can refuse it) and, for actions that
/// load, the load's own failures.
fn admin_action(summary: &str, conflict: Option<&str>, loads: bool) -> Value {
    let errors = error_responses();
    let error = |description: &str| {
        json!({"description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let mut responses = json!({
        "200": ok(summary, json!({"$ref": "#/components/schemas/AdminModel"})),
        "401": errors["401"].clone(), "404": errors["404"].clone()});
    if let Some(conflict) = conflict {
        responses["409"] = error(conflict);
    }
    if loads {
        responses["500"] = error("The model's files could not be loaded");
        responses["503"] =
            error("The model does not fit the memory budget, or the server is stopping");
    }
    json!({"post": {"summary": summary, "security": [{"bearer": []}, {"apiKey": []}],
        "parameters": [{"name": "model", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": responses}})
}

fn sampling_properties() -> Value {
    json!({
        "model": {"type": "string"},
        "max_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "n": {"type": "integer", "minimum": 1, "maximum": 128},
        "stream": {"type": "boolean"},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
        "stop": {"oneOf": [{"type": "string", "minLength": 1, "maxLength": 256},
            {"type": "array", "maxItems": 256, "items": {"type": "string", "minLength": 1, "maxLength": 256}}]},
        "seed": {"type": "integer"},
        "presence_penalty": {"type": "number", "minimum": -2, "maximum": 2},
        "frequency_penalty": {"type": "number", "minimum": -2, "maximum": 2},
        "logit_bias": {"type": "object", "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100}},
        "user": {"type": "string", "description": "End-user id: who the request counts as for fair sharing of running sequences when the server has one API key or none."},
        "top_k": {"type": "integer"},
        "min_p": {"type": "number", "minimum": 0, "maximum": 1},
        "repetition_penalty": {"type": "number", "exclusiveMinimum": 0, "maximum": 2},
        "ignore_eos": {"type": "boolean"},
        "min_tokens": {"type": "integer", "minimum": 0},
        "stop_token_ids": {"type": "array", "maxItems": 1024, "items": {"type": "integer", "minimum": 0}},
        "priority": {"type": "string", "enum": ["high", "normal", "low"]},
        "prompt_logprobs": {"type": "integer", "minimum": 0, "maximum": 20,
            "description": "vLLM's: the log-probability, rank and top k alternatives of every prompt token, returned as prompt_logprobs (not with stream)"},
        "cache_salt": {"type": "string", "minLength": 1, "maxLength": 256,
            "description": "prefix-cache hits only between requests of the same API key with the same salt"},
        "response_format": {"type": "object", "required": ["type"],
            "properties": {"type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
                "json_schema": {"type": "object", "properties": {"name": {"type": "string"},
                    "schema": {"type": "object"}, "strict": {"type": "boolean"}}}}}
    })
}

fn with_properties(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    base
}

/// Request fields that are not required may be `null` (serde reads it as absent), so the
/// document says so: every optional property of a request schema, at any depth, also admits
/// null.
fn allow_null_for_optional(schema: &mut Value) {
    for key in ["oneOf", "anyOf"] {
        if let Some(alternatives) = schema.get_mut(key).and_then(Value::as_array_mut) {
            alternatives.iter_mut().for_each(allow_null_for_optional);
        }
    }
    let required: Vec<String> = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        allow_null_for_optional(property);
        if let Some(items) = property.get_mut("items") {
            allow_null_for_optional(items);
        }
        // `content` is refused when null; `/tokenize`'s `prompt` / `messages` (exactly one of
        // which is given, the other absent or null) say so themselves.
        if required.contains(name) || ["content", "prompt", "messages"].contains(&name.as_str()) {
            continue;
        }
        *property = match property.get("type").cloned() {
            Some(Value::String(t)) => {
                let mut p = property.clone();
                p["type"] = json!([t, "null"]);
                p
            }
            Some(Value::Array(mut ts)) if !ts.contains(&json!("null")) => {
                ts.push(json!("null"));
                let mut p = property.clone();
                p["type"] = Value::Array(ts);
                p
            }
            Some(_) => continue,
            None => json!({"anyOf": [property.clone(), {"type": "null"}]}),
        };
    }
}

/// The whole document.
pub fn document() -> Value {
    let mut doc = document_as_written();
    super::openapi_agents::add_agents(&mut doc);
    for name in [
        "ChatMessage",
        "ChatCompletionRequest",
        "CompletionRequest",
        "TokenizeRequest",
        "DetokenizeRequest",
        "ResponsesRequest",
        "MessagesRequest",
        "CountTokensRequest",
    ] {
        allow_null_for_optional(&mut doc["components"]["schemas"][name]);
    }
    add_scoring(&mut doc);
    doc
}

/// The scoring routes (`/v1/embeddings`, `/v1/rerank`, `/rerank`, `/v1/score`) and their schemas.
fn add_scoring(doc: &mut Value) {
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
        "EmbeddingRequest": {"type": "object", "required": ["model", "input"], "properties": {
            "model": {"type": "string"},
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
        "RerankRequest": {"type": "object", "required": ["model", "query", "documents"], "properties": {
            "model": {"type": "string"}, "query": {"type": "string"},
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
        "ScoreRequest": {"type": "object", "required": ["model", "text_1", "text_2"], "properties": {
            "model": {"type": "string"}, "text_1": texts.clone(), "text_2": texts,
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

fn document_as_written() -> Value {
    let usage = json!({"type": "object", "properties": {
        "prompt_tokens": {"type": "integer"}, "completion_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"},
        "prompt_tokens_details": {"type": "object", "properties": {"cached_tokens": {"type": "integer"}}},
        "completion_tokens_details": {"type": "object", "properties": {"reasoning_tokens": {"type": "integer"}}}}});
    // vLLM's shape: null for the first prompt token, then token id -> {logprob, rank, decoded_token}.
    let prompt_logprobs = json!({"type": "array", "items": {"oneOf": [{"type": "null"},
        {"type": "object", "additionalProperties": {"type": "object",
            "required": ["logprob", "rank", "decoded_token"],
            "properties": {"logprob": {"type": ["number", "null"]}, "rank": {"type": "integer", "minimum": 1},
                "decoded_token": {"type": "string"}}}}]}});
    json!({
        "openapi": "3.1.0",
        "info": {"title": "sluice", "version": env!("CARGO_PKG_VERSION"),
                 "description": "OpenAI-compatible LLM inference server"},
        "paths": {
            "/v1/chat/completions": post("Create a chat completion", "ChatCompletionRequest", "ChatCompletion", true),
            "/v1/completions": post("Create a text completion", "CompletionRequest", "Completion", true),
            "/tokenize": post("Tokenize a prompt or a conversation", "TokenizeRequest", "TokenizeResponse", false),
            "/detokenize": post("Turn token ids into text", "DetokenizeRequest", "DetokenizeResponse", false),
            "/v1/models": {"get": {"summary": "List served models", "security": [{"bearer": []}, {"apiKey": []}],
                "responses": {"200": ok("Models", json!({"$ref": "#/components/schemas/ModelList"})),
                              "401": error_responses()["401"].clone()}}},
            "/v1/models/{model}": {"get": {"summary": "Retrieve a served model", "security": [{"bearer": []}, {"apiKey": []}],
                "parameters": [{"name": "model", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": ok("Model", json!({"$ref": "#/components/schemas/Model"})),
                              "401": error_responses()["401"].clone(),
                              "404": error_responses()["404"].clone()}}},
            "/health": {"get": {"summary": "Readiness", "responses": {
                "200": ok("Serving", json!({"type": "object"})), "503": error_responses()["503"].clone()}}},
            "/metrics": {"get": {"summary": "Prometheus metrics (vLLM names)", "responses": {"200": {
                "description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/version": {"get": {"summary": "Server version", "responses": {
                "200": ok("Version", json!({"type": "object", "properties": {"version": {"type": "string"}}}))}}},
            "/openapi.json": {"get": {"summary": "This document", "responses": {"200": ok("OpenAPI document", json!({"type": "object"}))}}},
            "/admin/models": {"get": {"summary": "Every model of the pool: status, memory, requests, last use",
                "security": [{"bearer": []}, {"apiKey": []}],
                "responses": {"200": ok("Models", json!({"$ref": "#/components/schemas/AdminModelList"})),
                              "401": error_responses()["401"].clone()}}},
            "/admin/models/{model}/load": admin_action("Load a model (unloading idle ones to make room); answers once loaded",
                None, true),
            "/admin/models/{model}/unload": admin_action("Unload an idle model; 409 while it has requests, is pinned or loading",
                Some("The model is busy, pinned or loading"), true),
            "/admin/models/{model}/pin": admin_action("Pin a model: never unloaded, neither to make room nor by an admin; loads nothing",
                None, false),
            "/admin/models/{model}/unpin": admin_action("Unpin a model, so it can be unloaded again",
                Some("The server serves a fixed list of models (no pool), which stay loaded"), false)
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
                    "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                                   "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}},
                "ChatMessage": {"type": "object", "required": ["role"],
                    "anyOf": [{"required": ["content"]},
                              {"required": ["tool_calls"], "properties": {"role": {"const": "assistant"},
                                  "tool_calls": {"type": "array"}}}],
                    "properties": {
                    "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
                    "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object",
                        "required": ["type", "text"],
                        "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}}]},
                    "name": {"type": "string"}, "tool_calls": {"type": "array"}, "tool_call_id": {"type": "string"}}},
                "ChatCompletionRequest": {"type": "object", "required": ["model", "messages"],
                    "properties": with_properties(sampling_properties(), json!({
                        "messages": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/ChatMessage"}},
                        "max_completion_tokens": {"type": "integer", "minimum": 1},
                        "logprobs": {"type": "boolean"},
                        "top_logprobs": {"type": "integer", "minimum": 0, "maximum": 20},
                        "tools": {"type": "array"}}))},
                "CompletionRequest": {"type": "object", "required": ["model", "prompt"],
                    "properties": with_properties(sampling_properties(), json!({
                        "prompt": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}},
                            {"type": "array", "items": {"type": "integer"}},
                            {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}]},
                        "echo": {"type": "boolean"},
                        "logprobs": {"type": "integer", "minimum": 0, "maximum": 20},
                        "best_of": {"type": "integer"},
                        "suffix": {"type": "string", "description": "not supported; must be empty"}}))},
                "ChatCompletion": {"type": "object", "properties": {
                    "id": {"type": "string"}, "object": {"const": "chat.completion"}, "created": {"type": "integer"},
                    "model": {"type": "string"}, "system_fingerprint": {"type": "string"},
                    "choices": {"type": "array", "items": {"type": "object", "properties": {
                        "index": {"type": "integer"},
                        "message": {"type": "object", "properties": {"role": {"const": "assistant"}, "content": {"type": "string"}}},
                        "logprobs": {"type": ["object", "null"]},
                        "finish_reason": {"type": "string", "enum": ["stop", "length"]}}}},
                    "usage": usage.clone(),
                    "prompt_logprobs": prompt_logprobs.clone()}},
                "Completion": {"type": "object", "properties": {
                    "id": {"type": "string"}, "object": {"const": "text_completion"}, "created": {"type": "integer"},
                    "model": {"type": "string"}, "system_fingerprint": {"type": "string"},
                    "choices": {"type": "array", "items": {"type": "object", "properties": {
                        "index": {"type": "integer"}, "text": {"type": "string"},
                        "logprobs": {"type": ["object", "null"], "properties": {
                            "tokens": {"type": "array"}, "token_logprobs": {"type": "array"},
                            "top_logprobs": {"type": "array"}, "text_offset": {"type": "array"}}},
                        "finish_reason": {"type": "string", "enum": ["stop", "length"]},
                        "prompt_logprobs": prompt_logprobs}}},
                    "usage": usage}},
                "TokenizeRequest": {"type": "object",
                    // Exactly one of the two, the other absent or null (null reads as absent).
                    "oneOf": [{"required": ["prompt"], "properties": {"prompt": {"type": "string"}, "messages": {"type": "null"}}},
                              {"required": ["messages"], "properties": {"messages": {"type": "array"}, "prompt": {"type": "null"}}}],
                    "properties": {
                    "model": {"type": ["string", "null"]}, "prompt": {"type": ["string", "null"]},
                    "messages": {"type": ["array", "null"], "minItems": 1, "items": {"$ref": "#/components/schemas/ChatMessage"}},
                    "add_special_tokens": {"type": "boolean"}, "add_generation_prompt": {"type": "boolean"},
                    "return_token_strs": {"type": "boolean"}}},
                "TokenizeResponse": {"type": "object", "properties": {
                    "count": {"type": "integer"}, "max_model_len": {"type": "integer"},
                    "tokens": {"type": "array", "items": {"type": "integer"}},
                    "token_strs": {"type": ["array", "null"], "items": {"type": "string"}}}},
                "DetokenizeRequest": {"type": "object", "required": ["tokens"], "properties": {
                    "model": {"type": ["string", "null"]},
                    "tokens": {"type": "array", "items": {"type": "integer", "minimum": 0,
                        "description": "below the model's vocabulary size"}}}},
                "DetokenizeResponse": {"type": "object", "properties": {"prompt": {"type": "string"}}},
                "Model": {"type": "object", "properties": {
                    "id": {"type": "string"}, "object": {"const": "model"}, "created": {"type": "integer"},
                    "owned_by": {"type": "string"}, "root": {"type": "string"}, "max_model_len": {"type": "integer"},
                    "status": {"type": "string", "enum": ["loaded", "loading", "unloading", "unloaded"]},
                    "task": {"type": "string", "enum": ["auto", "generate", "embed", "score"],
                        "description": "what the model is served for (--task); auto until an auto model is loaded"}}},
                "ModelList": {"type": "object", "properties": {"object": {"const": "list"},
                    "data": {"type": "array", "items": {"$ref": "#/components/schemas/Model"}}}},
                "AdminModel": {"type": "object", "properties": {
                    "id": {"type": "string"},
                    "status": {"type": "string", "enum": ["loaded", "loading", "unloading", "unloaded"]},
                    "pinned": {"type": "boolean"}, "memory_bytes": {"type": "integer"},
                    "requests": {"type": "integer"}, "last_used": {"type": ["integer", "null"]},
                    "loaded_at": {"type": ["integer", "null"]}, "max_model_len": {"type": "integer"},
                    "loads": {"type": "integer"}, "unloads": {"type": "integer"},
                    "load_failures": {"type": "integer"}, "last_error": {"type": ["string", "null"]}}},
                "AdminModelList": {"type": "object", "properties": {"object": {"const": "list"},
                    "max_memory_bytes": {"type": ["integer", "null"]}, "max_models": {"type": ["integer", "null"]},
                    "memory_used_bytes": {"type": "integer"},
                    "data": {"type": "array", "items": {"$ref": "#/components/schemas/AdminModel"}}}}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_describes_every_route_and_resolves_every_reference() {
        let doc = document();
        for path in [
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/models",
            "/v1/models/{model}",
            "/tokenize",
            "/detokenize",
            "/health",
            "/metrics",
            "/version",
            "/openapi.json",
            "/admin/models",
            "/admin/models/{model}/load",
            "/admin/models/{model}/unload",
            "/admin/models/{model}/pin",
            "/admin/models/{model}/unpin",
            "/v1/embeddings",
            "/v1/rerank",
            "/rerank",
            "/v1/score",
        ] {
            assert!(doc["paths"].get(path).is_some(), "missing {path}");
        }
        let text = doc.to_string();
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(
                doc["components"]["schemas"].get(name).is_some(),
                "dangling reference {name}"
            );
        }
        assert_eq!(doc["openapi"], "3.1.0");
    }

    #[test]
    fn every_protected_route_lists_its_401_and_tokenize_needs_prompt_or_messages() {
        let doc = document();
        for (path, method) in [
            ("/v1/chat/completions", "post"),
            ("/v1/completions", "post"),
            ("/v1/models", "get"),
            ("/v1/models/{model}", "get"),
            ("/tokenize", "post"),
            ("/detokenize", "post"),
            ("/admin/models", "get"),
            ("/admin/models/{model}/load", "post"),
            ("/admin/models/{model}/pin", "post"),
            ("/admin/models/{model}/unpin", "post"),
        ] {
            let op = &doc["paths"][path][method];
            assert!(op["responses"].get("401").is_some(), "{path}");
            assert_eq!(op["security"].as_array().map(Vec::len), Some(2), "{path}");
        }
        let tokenize = &doc["components"]["schemas"]["TokenizeRequest"];
        assert_eq!(tokenize["oneOf"].as_array().map(Vec::len), Some(2));
    }
}
