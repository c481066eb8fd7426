//! The render routes of the document: `/v1/chat/completions/render` and
//! `/v1/completions/render`, vLLM's, answered with its `GenerateRequest`.

use serde_json::{json, Value};

use super::operation::post;

/// The render routes and their schemas. Their bodies are the generating routes' own, `model`
/// optional, so this runs after those schemas are complete.
pub(super) fn add_render(doc: &mut Value) {
    let routes = [
        (
            "/v1/chat/completions/render",
            "Render a chat completion request's prompt to token ids, without generating",
            "ChatCompletionRequest",
            "ChatRenderRequest",
            "RenderedRequest",
        ),
        (
            "/v1/completions/render",
            "Render a completion request's prompts to token ids (one entry per prompt), without generating",
            "CompletionRequest",
            "CompletionRenderRequest",
            "RenderedRequestList",
        ),
    ];
    for (path, summary, generating, request, response) in routes {
        let mut schema = doc["components"]["schemas"][generating].clone();
        if let Some(required) = schema["required"].as_array_mut() {
            required.retain(|name| name != "model");
        }
        schema["properties"]["model"] = json!({"type": ["string", "null"],
            "description": "Served model id; the first served model when absent"});
        doc["components"]["schemas"][request] = schema;
        let mut operation = post(summary, request, response, false);
        // Nothing is queued: no 429.
        if let Some(responses) = operation["post"]["responses"].as_object_mut() {
            responses.remove("429");
        }
        doc["paths"][path] = operation;
    }
    let ints = json!({"type": "array", "items": {"type": "integer"}});
    let sampling = json!({"type": "object", "properties": {
        "n": {"type": "integer"}, "presence_penalty": {"type": "number"},
        "frequency_penalty": {"type": "number"}, "repetition_penalty": {"type": "number"},
        "temperature": {"type": "number"}, "top_p": {"type": "number"},
        "top_k": {"type": "integer", "description": "0 disables"}, "min_p": {"type": "number"},
        "seed": {"type": ["integer", "null"]}, "stop": {"type": "array", "items": {"type": "string"}},
        "stop_token_ids": ints.clone(), "ignore_eos": {"type": "boolean"},
        "max_tokens": {"type": "integer", "description": "the request's, or the rest of the context"},
        "min_tokens": {"type": "integer"}, "logprobs": {"type": ["integer", "null"]},
        "prompt_logprobs": {"type": ["integer", "null"]},
        "logit_bias": {"type": ["object", "null"], "additionalProperties": {"type": "number"}}}});
    doc["components"]["schemas"]["RenderedRequest"] = json!({"type": "object",
        "description": "vLLM's GenerateRequest: the prompt exactly as generation would submit it",
        "required": ["request_id", "token_ids", "sampling_params", "model"],
        "properties": {
            "request_id": {"type": "string"}, "token_ids": ints,
            "features": {"type": "null", "description": "multimodal features; text only here"},
            "sampling_params": sampling, "model": {"type": "string"},
            "stream": {"type": "boolean"},
            "stream_options": {"type": ["object", "null"], "properties": {"include_usage": {"type": "boolean"}}},
            "cache_salt": {"type": ["string", "null"]},
            "priority": {"type": "integer", "description": "lower is earlier: high -1, normal 0, low 1"},
            "kv_transfer_params": {"type": "null"}}});
    doc["components"]["schemas"]["RenderedRequestList"] = json!({"type": "array",
        "items": {"$ref": "#/components/schemas/RenderedRequest"}});
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;
    use sluice_engine::{GenerationRequest, Priority};

    use crate::routes::render::rendered_request;

    fn keys(v: &Value) -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn render_bodies_are_the_generating_bodies() {
        let doc = super::super::document();
        let schemas = &doc["components"]["schemas"];
        for (render, generating) in [
            ("ChatRenderRequest", "ChatCompletionRequest"),
            ("CompletionRenderRequest", "CompletionRequest"),
        ] {
            // `model` is optional on both (absent: the default model).
            for schema in [render, generating] {
                let required = schemas[schema]["required"].as_array().unwrap();
                assert!(!required.contains(&"model".into()), "{schema}");
            }
            assert_eq!(
                keys(&schemas[render]["properties"]),
                keys(&schemas[generating]["properties"])
            );
        }
        let list = &doc["paths"]["/v1/completions/render"]["post"]["responses"]["200"];
        assert_eq!(
            list["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/RenderedRequestList"
        );
    }

    #[test]
    fn the_rendered_request_schema_names_exactly_the_fields_it_has() {
        let rendered = rendered_request(
            "cmpl",
            "m",
            GenerationRequest {
                prompt_tokens: vec![1],
                n: 1,
                sampling: Default::default(),
                stop: Default::default(),
                priority: Priority::Normal,
                cache_salt: None,
                caller: None,
                images: Default::default(),
                prompt_outputs: Default::default(),
            },
            None,
            None,
        );
        let v = serde_json::to_value(rendered).unwrap();
        let doc = super::super::document();
        let schema = &doc["components"]["schemas"]["RenderedRequest"];
        assert_eq!(keys(&schema["properties"]), keys(&v));
        assert_eq!(
            keys(&schema["properties"]["sampling_params"]["properties"]),
            keys(&v["sampling_params"])
        );
    }
}
