//! `GET /openapi.json`: an OpenAPI 3.1 description of this server's routes, written by hand
//! from the wire types (kept next to them in spirit: change both together).

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::AppState;

mod agents;
mod base;
mod operation;
mod render;
mod scoring;

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
    let mut doc = base::base_document();
    agents::add_agents(&mut doc);
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
    scoring::add_scoring(&mut doc);
    render::add_render(&mut doc);
    doc
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
            "/health/startup",
            "/health/ready",
            "/health/live",
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
            "/v1/chat/completions/render",
            "/v1/completions/render",
            "/v1/responses/{id}/input_items",
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
            ("/v1/chat/completions/render", "post"),
            ("/v1/completions/render", "post"),
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

    #[test]
    fn the_health_probes_are_listed_open_with_their_200_and_503() {
        let doc = document();
        for path in [
            "/health/startup",
            "/health/ready",
            "/health/live",
            "/health",
        ] {
            let op = &doc["paths"][path]["get"];
            assert!(op.is_object(), "missing {path}");
            assert!(op.get("security").is_none(), "{path} needs no key");
            for status in ["200", "503"] {
                assert!(op["responses"].get(status).is_some(), "{path} {status}");
            }
        }
    }
}
