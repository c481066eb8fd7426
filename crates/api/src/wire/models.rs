//! `GET /v1/models` and `GET /v1/models/{id}`.

use serde::{Deserialize, Serialize};

/// One served model, as OpenAI (and vLLM, which adds `max_model_len`) describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    /// The id clients put in `model`.
    pub id: String,
    /// Always "model".
    pub object: String,
    /// Unix seconds when the model was loaded.
    pub created: u64,
    /// Always "sluice".
    pub owned_by: String,
    /// The model the id refers to (the id itself: sluice serves no fine-tune aliases).
    pub root: String,
    /// Context length in tokens.
    pub max_model_len: usize,
}

/// The `GET /v1/models` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelList {
    /// Always "list".
    pub object: String,
    /// Every served model.
    pub data: Vec<ModelCard>,
}

impl ModelCard {
    /// The card of a served model.
    pub fn new(id: &str, created: u64, max_model_len: usize) -> Self {
        ModelCard {
            id: id.to_string(),
            object: "model".into(),
            created,
            owned_by: "sluice".into(),
            root: id.to_string(),
            max_model_len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_card_has_openai_fields() {
        let v = serde_json::to_value(ModelCard::new("llama", 5, 128)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"id":"llama","object":"model","created":5,"owned_by":"sluice",
                "root":"llama","max_model_len":128})
        );
    }
}
