//! The models this server answers for, looked up by the id clients put in `model`: either a
//! fixed list of running engines, or a [`ModelPool`] that loads models on demand.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use sluice_engine::pool::{ModelLease, ModelPool, ModelStatus, PoolError};
use sluice_engine::{EngineHandle, ImageInput};
use sluice_text::Tokenizer;

use crate::assemble::TokenTexts;
use crate::error::ApiError;
use crate::model_names::ModelNames;
use crate::validate::ModelLimits;
use crate::wire::models::ModelCard;

/// What a model is served for (`--task`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelTask {
    /// Decided by the model's files: sentence-transformers pooling files make an embedder,
    /// anything else a generative model (which also embeds by its last token and reranks by
    /// its "yes"/"no" logits).
    #[default]
    Auto,
    /// Chat and completions; embeddings, rerank and score are refused.
    Generate,
    /// Embeddings (rerank and score by cosine similarity); generation is refused.
    Embed,
    /// Rerank and score by the "yes"/"no" logits; generation and embeddings are refused.
    Score,
}

impl ModelTask {
    /// The name `--task` and `/v1/models` use.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelTask::Auto => "auto",
            ModelTask::Generate => "generate",
            ModelTask::Embed => "embed",
            ModelTask::Score => "score",
        }
    }
}

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
    /// The pooling named by the model's sentence-transformers files: `Some` marks an embedder
    /// (embeddings pool this way; rerank and score compare embeddings). `None`: a generative
    /// model, which embeds by its last token's state and reranks by its "yes"/"no" logits.
    pub pooling: Option<sluice_engine::Pooling>,
    /// What it is served for, as configured (`--task`; `Auto` by default).
    pub task: ModelTask,
    /// For a pooled model, keeps it loaded (unevictable) while this value lives; `None` for a
    /// model outside a pool.
    pub lease: Option<ModelLease>,
    /// Its image encoder, when it takes images (`None`: a text-only model, whose requests
    /// with images are refused).
    pub images: Option<Arc<ImageInput>>,
}

impl ServedModel {
    /// What validation checks requests for this model against.
    pub fn limits(&self) -> ModelLimits {
        ModelLimits {
            max_model_len: self.max_model_len,
            vocab_size: self.tokenizer.vocab_size(),
            takes_images: self.images.is_some(),
        }
    }

    /// The model's `/v1/models` entry.
    pub fn card(&self) -> ModelCard {
        ModelCard::new(&self.id, self.created, self.max_model_len)
            .with_task(self.task().as_str())
            .with_images(self.images.is_some())
    }

    /// What the model is served for: its `--task`, or for `auto` what its files say.
    pub fn task(&self) -> ModelTask {
        match (self.task, self.pooling) {
            (ModelTask::Auto, Some(_)) => ModelTask::Embed,
            (ModelTask::Auto, None) => ModelTask::Generate,
            (task, _) => task,
        }
    }

    /// True when embeddings (and rerank by cosine similarity) are this model's task.
    pub fn is_embedder(&self) -> bool {
        self.task() == ModelTask::Embed
    }

    /// A 400 unless the model may answer a request of `kind` ("generation", "embeddings",
    /// "rerank"): an embedder generates nothing, a scorer neither generates nor embeds, and a
    /// model served with `--task generate` only generates. `auto` allows all as before.
    pub fn check_serves(&self, kind: &str) -> Result<(), ApiError> {
        let allowed = match (self.task, kind) {
            (ModelTask::Auto, _) => true,
            (ModelTask::Generate, k) => k == "generation",
            (ModelTask::Embed, k) => k != "generation",
            (ModelTask::Score, k) => k == "rerank",
        };
        if allowed {
            return Ok(());
        }
        Err(ApiError::invalid(
            "model",
            format!(
                "model '{}' is served for --task {}: it does not answer {kind} requests",
                self.id,
                self.task.as_str()
            ),
        ))
    }
}

impl TokenTexts for Tokenizer {
    fn token_text(&self, id: u32) -> String {
        self.token_str(id).unwrap_or_default()
    }

    fn token_bytes(&self, id: u32) -> Vec<u8> {
        self.bytes_of(id).unwrap_or_default()
    }
}

/// Where the models come from.
enum Models {
    /// Engines started by the caller, all loaded for the server's lifetime.
    Fixed(Vec<Arc<ServedModel>>),
    /// Models loaded on demand within a memory budget.
    Pooled {
        pool: ModelPool,
        /// Unix seconds the registry was made: the `created` of models not loaded yet.
        registered: u64,
    },
}

/// Finds served models by id.
pub struct ModelRegistry {
    models: Models,
    /// `--task` of pooled models, by id (absent: `auto`).
    tasks: std::collections::HashMap<String, ModelTask>,
    /// Extra names, aliases and the default model.
    names: ModelNames,
}

impl ModelRegistry {
    /// A registry over a fixed list of loaded models.
    pub fn new(models: Vec<ServedModel>) -> Self {
        ModelRegistry {
            models: Models::Fixed(models.into_iter().map(Arc::new).collect()),
            tasks: Default::default(),
            names: ModelNames::default(),
        }
    }

    /// A registry over a model pool: every model in it is listed; a request loads its model.
    pub fn pooled(pool: ModelPool) -> Self {
        ModelRegistry {
            models: Models::Pooled {
                pool,
                registered: unix_seconds(SystemTime::now()),
            },
            tasks: Default::default(),
            names: ModelNames::default(),
        }
    }

    /// Serves the pooled models named in `tasks` for those tasks (the others: `auto`).
    pub fn with_tasks(mut self, tasks: std::collections::HashMap<String, ModelTask>) -> Self {
        self.tasks = tasks;
        self
    }

    /// Resolves `model` through `names` (extra names, alias rules, the default model).
    pub fn with_names(mut self, names: ModelNames) -> Self {
        self.names = names;
        self
    }

    /// The id of every served model, loaded or not.
    pub fn ids(&self) -> Vec<String> {
        match &self.models {
            Models::Fixed(models) => models.iter().map(|m| m.id.clone()).collect(),
            Models::Pooled { pool, .. } => pool.ids(),
        }
    }

    /// The served id `requested` names (an empty name: the default model), or the error a
    /// client sees: a 404 that lists what is served, or a 400 when no model was named and
    /// there is no default.
    pub fn id_for(&self, requested: &str) -> Result<String, ApiError> {
        let ids = self.ids();
        if requested.is_empty() {
            return self.names.default_id(&ids).ok_or_else(|| {
                ApiError::invalid(
                    "model",
                    format!(
                        "no `model` given, and this server has no default model: it serves {} \
                         (start it with --default-model to pick one)",
                        ids.join(", ")
                    ),
                )
            });
        }
        self.names
            .resolve(requested, &ids)
            .ok_or_else(|| ApiError::ModelNotFound(requested.to_string(), ids))
    }

    /// [`ModelRegistry::get`] for a request's `model` field, which becomes the served id (an
    /// empty one the default model's), so every response names the model that answered.
    pub async fn get_or_default(&self, model: &mut String) -> Result<Arc<ServedModel>, ApiError> {
        let served = self.get(model).await?;
        model.clone_from(&served.id);
        Ok(served)
    }

    fn task_of(&self, id: &str) -> ModelTask {
        self.tasks.get(id).copied().unwrap_or_default()
    }

    /// The pool behind this registry, if any.
    pub fn pool(&self) -> Option<&ModelPool> {
        match &self.models {
            Models::Fixed(_) => None,
            Models::Pooled { pool, .. } => Some(pool),
        }
    }

    /// The model with this id, loaded first if it is pooled and not in memory; a 404 names an
    /// unknown id. Hold the result until the request is submitted.
    pub async fn get(&self, requested: &str) -> Result<Arc<ServedModel>, ApiError> {
        let id = self.id_for(requested)?;
        let id = id.as_str();
        match &self.models {
            Models::Fixed(models) => models
                .iter()
                .find(|m| m.id == id)
                .cloned()
                .ok_or_else(|| ApiError::ModelNotFound(id.to_string(), self.ids())),
            Models::Pooled { pool, .. } => {
                let lease = pool.acquire(id).await?;
                let model = lease.model();
                Ok(Arc::new(ServedModel {
                    id: id.to_string(),
                    engine: model.engine.clone(),
                    tokenizer: Arc::clone(&model.tokenizer),
                    max_model_len: model.max_model_len,
                    pooling: model.pooling,
                    task: self.task_of(id),
                    created: unix_seconds(lease.loaded_at()),
                    images: model.images.clone(),
                    lease: Some(lease),
                }))
            }
        }
    }

    /// The model `id` names, or when none is given the default model, else the first served
    /// one (vLLM's `/tokenize` makes `model` optional).
    pub async fn resolve(&self, id: Option<&str>) -> Result<Arc<ServedModel>, ApiError> {
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            return self.get(id).await;
        }
        let ids = self.ids();
        match self.names.default_id(&ids).or(ids.into_iter().next()) {
            Some(id) => self.get(&id).await,
            None => Err(ApiError::Unavailable("no model is served".into())),
        }
    }

    /// Every model in memory now (for metrics and health); pooled ones carry no lease.
    pub fn models(&self) -> Vec<Arc<ServedModel>> {
        match &self.models {
            Models::Fixed(models) => models.clone(),
            Models::Pooled { pool, .. } => pool
                .loaded()
                .into_iter()
                .map(|(id, model, loaded_at)| {
                    Arc::new(ServedModel {
                        task: self.task_of(&id),
                        id,
                        engine: model.engine.clone(),
                        tokenizer: Arc::clone(&model.tokenizer),
                        max_model_len: model.max_model_len,
                        pooling: model.pooling,
                        created: unix_seconds(loaded_at),
                        images: model.images.clone(),
                        lease: None,
                    })
                })
                .collect(),
        }
    }

    /// The `/v1/models` entry of every model, loaded or not, with its `status`.
    pub fn cards(&self) -> Vec<ModelCard> {
        match &self.models {
            Models::Fixed(models) => models
                .iter()
                .map(|m| m.card().with_status(ModelStatus::Loaded.as_str()))
                .collect(),
            Models::Pooled { pool, registered } => {
                // An `auto` model's task is known once it is loaded (its files decide).
                let loaded = self.models();
                pool.snapshot()
                    .models
                    .into_iter()
                    .map(|m| {
                        let created = m.loaded_at.map_or(*registered, unix_seconds);
                        let served = loaded.iter().find(|l| l.id == m.id);
                        let task = served.map_or(self.task_of(&m.id), |l| l.task());
                        let card = ModelCard::new(&m.id, created, m.max_model_len)
                            .with_status(m.status.as_str())
                            .with_task(task.as_str());
                        match served {
                            Some(served) => card.with_images(served.images.is_some()),
                            None => card,
                        }
                    })
                    .collect()
            }
        }
    }

    /// The `/v1/models/{id}` entry; never loads the model.
    pub fn card(&self, id: &str) -> Result<ModelCard, ApiError> {
        self.cards()
            .into_iter()
            .find(|c| c.id == id)
            .ok_or_else(|| ApiError::ModelNotFound(id.to_string(), self.ids()))
    }

    /// Healthy while every engine in memory runs. A fixed registry also needs at least one
    /// model; a pool with nothing loaded yet is healthy (models load on demand).
    pub fn health(&self) -> Result<(), ApiError> {
        let models = self.models();
        if models.is_empty() && matches!(self.models, Models::Fixed(_)) {
            return Err(ApiError::Unavailable("no model is loaded yet".into()));
        }
        match models.iter().find(|m| !m.engine.is_alive()) {
            Some(dead) => Err(ApiError::Unavailable(format!(
                "the engine of model '{}' is not running",
                dead.id
            ))),
            None => Ok(()),
        }
    }
}

impl From<PoolError> for ApiError {
    fn from(e: PoolError) -> Self {
        match e {
            PoolError::UnknownModel(id) => ApiError::ModelNotFound(id, Vec::new()),
            PoolError::LoadFailed { .. } | PoolError::Thread { .. } => {
                ApiError::Internal(e.to_string())
            }
            PoolError::NoRoom { .. }
            | PoolError::ShuttingDown
            | PoolError::Busy { .. }
            | PoolError::Pinned(_)
            | PoolError::Loading(_)
            | PoolError::LoadTimedOut { .. }
            | PoolError::LoadStillRunning { .. } => ApiError::Unavailable(e.to_string()),
        }
    }
}

/// Seconds since the Unix epoch.
pub fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
