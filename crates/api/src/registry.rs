//! The models this server answers for, looked up by the id clients put in `model`.
//!
//! A fixed list today; the model pool with on-demand loading replaces the inside of
//! [`ModelRegistry`] without changing its callers.

use std::sync::Arc;

use sluice_engine::EngineHandle;
use sluice_text::Tokenizer;

use crate::assemble::TokenTexts;
use crate::error::ApiError;
use crate::validate::ModelLimits;
use crate::wire::models::ModelCard;

/// One model being served: its engine and its tokenizer.
pub struct ServedModel {
    /// The id clients put in `model` (the directory name unless `--served-model-name`).
    pub id: String,
    /// The running engine.
    pub engine: EngineHandle,
    /// The model's tokenizer and chat template.
    pub tokenizer: Arc<Tokenizer>,
    /// Context length in tokens.
    pub max_model_len: usize,
    /// Unix seconds when the model was loaded.
    pub created: u64,
}

impl ServedModel {
    /// What validation checks requests for this model against.
    pub fn limits(&self) -> ModelLimits {
        ModelLimits {
            max_model_len: self.max_model_len,
            vocab_size: self.tokenizer.vocab_size(),
        }
    }

    /// The model's `/v1/models` entry.
    pub fn card(&self) -> ModelCard {
        ModelCard::new(&self.id, self.created, self.max_model_len)
    }
}

impl TokenTexts for Tokenizer {
    fn token_text(&self, id: u32) -> String {
        self.token_str(id).unwrap_or_default()
    }
}

/// Finds served models by id.
pub struct ModelRegistry {
    models: Vec<Arc<ServedModel>>,
}

impl ModelRegistry {
    /// A registry over a fixed list of loaded models.
    pub fn new(models: Vec<ServedModel>) -> Self {
        ModelRegistry {
            models: models.into_iter().map(Arc::new).collect(),
        }
    }

    /// The model with this id, or a 404 naming it.
    pub fn get(&self, id: &str) -> Result<Arc<ServedModel>, ApiError> {
        self.models
            .iter()
            .find(|m| m.id == id)
            .cloned()
            .ok_or_else(|| ApiError::ModelNotFound(id.to_string()))
    }

    /// The model with this id, or the first served model when no id is given (vLLM's
    /// `/tokenize` makes `model` optional).
    pub fn resolve(&self, id: Option<&str>) -> Result<Arc<ServedModel>, ApiError> {
        match id {
            Some(id) => self.get(id),
            None => self
                .models
                .first()
                .cloned()
                .ok_or_else(|| ApiError::Unavailable("no model is loaded".into())),
        }
    }

    /// Every served model.
    pub fn models(&self) -> &[Arc<ServedModel>] {
        &self.models
    }
}
