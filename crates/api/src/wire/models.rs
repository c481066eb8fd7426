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
    /// sluice's extension: `loaded`, `loading`, `unloading` or `unloaded` (models load on demand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// sluice's extension: `generate`, `embed` or `score` (`--task`); `auto` for a model
    /// whose files decide and that is not loaded yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// sluice's extension, in OpenRouter's words: what a prompt may hold, `["text"]` or
    /// `["text", "image"]`; absent for a pooled model not loaded yet (its files decide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_modalities: Option<Vec<String>>,
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
            status: None,
            task: None,
            input_modalities: None,
        }
    }

    /// The card saying whether the model's prompts may hold images.
    pub fn with_images(mut self, takes_images: bool) -> Self {
        let mut modalities = vec!["text".to_string()];
        if takes_images {
            modalities.push("image".into());
        }
        self.input_modalities = Some(modalities);
        self
    }

    /// The card with what the model is served for (`generate`, `embed`, `score`, `auto`).
    pub fn with_task(mut self, task: &str) -> Self {
        self.task = Some(task.to_string());
        self
    }

    /// The card with the model's load status.
    pub fn with_status(mut self, status: &str) -> Self {
        self.status = Some(status.to_string());
        self
    }
}

/// One model in `GET /admin/models` and the answer of the admin load and unload routes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminModel {
    /// The id clients put in `model`.
    pub id: String,
    /// `loaded`, `loading`, `unloading` or `unloaded`.
    pub status: String,
    /// Never unloaded (`--pin`).
    pub pinned: bool,
    /// Bytes counted against the memory budget now (weights plus KV pool).
    pub memory_bytes: usize,
    /// Requests running or queued in its engine.
    pub requests: usize,
    /// Unix seconds of the last request, if any.
    pub last_used: Option<u64>,
    /// Unix seconds the current load finished, while loaded.
    pub loaded_at: Option<u64>,
    /// Context length in tokens.
    pub max_model_len: usize,
    /// Successful loads since start.
    pub loads: u64,
    /// Unloads since start (evictions and admin unloads).
    pub unloads: u64,
    /// Failed loads since start.
    pub load_failures: u64,
    /// Why the last load failed, until one succeeds.
    pub last_error: Option<String>,
}

/// The `GET /admin/models` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminModelList {
    /// Always "list".
    pub object: String,
    /// The memory budget in bytes (`--max-memory`), when the models are pooled.
    pub max_memory_bytes: Option<usize>,
    /// The model-count limit (`--max-models`), if any.
    pub max_models: Option<usize>,
    /// Bytes counted against the budget now.
    pub memory_used_bytes: usize,
    /// Every model.
    pub data: Vec<AdminModel>,
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
