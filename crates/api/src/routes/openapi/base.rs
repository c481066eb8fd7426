//! The document as written: the OpenAI routes, `/tokenize`, the model admin routes, health,
//! metrics and version, with their schemas.

use serde_json::{json, Value};

use super::operation::{admin_action, error_responses, ok, post, probe};

/// The sampling fields chat and completions share.
fn sampling_properties() -> Value {
    let properties = json!({
        "model": {"type": ["string", "null"], "description": "a served model name; absent or null: the default model"},
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
        "speculative": {"type": "boolean", "description": "false keeps the request out of speculative decoding (same output, only speed differs)"},
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
    });
    with_properties(properties, constraint_properties())
}

/// The output constraints other servers take (vLLM's `structured_outputs` and `guided_*`,
/// llama-server's `grammar`), on every generating route.
pub(super) fn constraint_properties() -> Value {
    json!({
        "structured_outputs": {"type": "object",
            "description": "vLLM's: one of regex (the whole output matches), choice (exactly one of the strings), grammar (GBNF), json (a JSON Schema) or json_object; one output constraint per request",
            "properties": {"regex": {"type": "string"}, "choice": {"type": "array", "items": {"type": "string"}},
                "grammar": {"type": "string"}, "json": {}, "json_object": {"type": "boolean"}}},
        "guided_regex": {"type": "string", "description": "vLLM's older name for structured_outputs.regex"},
        "guided_choice": {"type": "array", "items": {"type": "string"}, "description": "vLLM's older name for structured_outputs.choice"},
        "guided_grammar": {"type": "string", "description": "vLLM's older name for structured_outputs.grammar"},
        "guided_json": {"description": "vLLM's older name for structured_outputs.json"},
        "grammar": {"type": "string", "description": "llama-server's: a GBNF grammar the output is a sentence of"}
    })
}

/// `base` with the properties of `extra` added.
fn with_properties(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    base
}

/// The OpenAI routes, `/tokenize`, the model admin routes and the public ones, as written.
pub(super) fn base_document() -> Value {
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
    let input_modalities = json!({"type": "array", "items": {"type": "string", "enum": ["text", "image"]},
        "description": "what a prompt may hold; absent for a pooled model not loaded yet"});
    // A chat message's content: a string, or text and (for a model that takes images)
    // image parts.
    let chat_content = json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {"oneOf": [
        {"type": "object", "required": ["type", "text"],
            "properties": {"type": {"const": "text"}, "text": {"type": "string"}}},
        {"type": "object", "required": ["type", "image_url"],
            "description": "an image, for a model whose input_modalities include image: a data URL (data:image/png;base64,...), or an http(s) URL of a host in --allowed-media-domains (fetched before the request is queued)",
            "properties": {"type": {"const": "image_url"}, "image_url": {"oneOf": [
                {"type": "string"},
                {"type": "object", "required": ["url"], "properties": {
                    "url": {"type": "string"}, "detail": {"type": "string"}}}]}}}]}}]});
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
            "/health": {"get": {"summary": "Every engine in memory runs (the older check; the probes are /health/startup, /health/ready, /health/live)", "responses": {
                "200": ok("Serving", json!({"type": "object"})), "503": error_responses()["503"].clone()}}},
            "/health/startup": probe("Startup probe: every --preload model is loaded",
                "Started: {\"status\": \"started\"}",
                "Still loading: {\"status\": \"starting\", \"loading\": [model ids]}"),
            "/health/ready": probe("Readiness probe: started, not draining, every engine in memory running",
                "Ready: {\"status\": \"ready\"}",
                "Not ready; reason: starting, draining, or engine for model X stopped"),
            "/health/live": probe("Liveness probe: no engine dead or wedged (work waiting, no step finished within --liveness-timeout)",
                "Live: {\"status\": \"live\"}",
                "Not live; model names the engine that is dead or wedged"),
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
                "Probe": {"type": "object", "required": ["status"], "properties": {
                    "status": {"type": "string", "enum": ["started", "starting", "ready", "not ready", "live", "not live"]},
                    "reason": {"type": "string"}, "model": {"type": "string"},
                    "loading": {"type": "array", "items": {"type": "string"}}}},
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object",
                    "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                                   "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}},
                "ChatMessage": {"type": "object", "required": ["role"],
                    "anyOf": [{"required": ["content"]},
                              {"required": ["tool_calls"], "properties": {"role": {"const": "assistant"},
                                  "tool_calls": {"type": "array"}}}],
                    "properties": {
                    "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
                    "content": chat_content,
                    "name": {"type": "string"}, "tool_calls": {"type": "array"}, "tool_call_id": {"type": "string"}}},
                "ChatCompletionRequest": {"type": "object", "required": ["messages"],
                    "properties": with_properties(sampling_properties(), json!({
                        "messages": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/ChatMessage"}},
                        "max_completion_tokens": {"type": "integer", "minimum": 1},
                        "logprobs": {"type": "boolean"},
                        "top_logprobs": {"type": "integer", "minimum": 0, "maximum": 20},
                        "tools": {"type": "array"}}))},
                "CompletionRequest": {"type": "object", "required": ["prompt"],
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
                        "description": "what the model is served for (--task); auto until an auto model is loaded"},
                    "input_modalities": input_modalities}},
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
