//! Turning a model directory into a running engine: load weights and tokenizer, size the KV
//! cache from its memory budget, start the engine thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use sluice_api::ServedModel;
use sluice_engine::{Engine, EngineConfig, EngineHandle};
use sluice_model::{KvCache, LoadOptions, Model, WeightDtype};
use sluice_text::Tokenizer;

/// The model `sluice serve` uses when no `--model` is given.
pub const BUNDLED_MODEL: &str = "models/sluice-kjv-mini";

/// Where the bundled model is: beside the working directory, else in the source tree this
/// binary was built from.
pub fn bundled_model_dir() -> PathBuf {
    let here = PathBuf::from(BUNDLED_MODEL);
    if here.join("config.json").is_file() {
        return here;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED_MODEL)
}

/// How one model is started.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// How weights are kept in memory.
    pub dtype: WeightDtype,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Bytes of KV cache.
    pub kv_cache_bytes: usize,
    /// Context limit; the model's own when `None` (and never above it).
    pub max_model_len: Option<usize>,
    /// Engine limits; `max_model_len` and `eos_token_ids` are filled in from the model.
    pub engine: EngineConfig,
}

/// A model loaded and its engine running.
pub struct LaunchedModel {
    /// The engine's handle.
    pub engine: EngineHandle,
    /// The model's tokenizer.
    pub tokenizer: Arc<Tokenizer>,
    /// Effective context length.
    pub max_model_len: usize,
    /// Bytes of weights plus KV cache.
    pub memory_bytes: usize,
}

impl LaunchedModel {
    /// The API's view of this model under `id`.
    pub fn served_as(&self, id: String) -> ServedModel {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        ServedModel {
            id,
            engine: self.engine.clone(),
            tokenizer: Arc::clone(&self.tokenizer),
            max_model_len: self.max_model_len,
            created,
        }
    }
}

/// Loads `dir` and starts its engine.
pub fn launch(dir: &Path, opts: &LaunchOptions) -> anyhow::Result<LaunchedModel> {
    let started = Instant::now();
    tracing::info!(model = %dir.display(), dtype = ?opts.dtype, "loading model");
    let model = Model::load(dir, &LoadOptions { dtype: opts.dtype })
        .with_context(|| format!("loading model from {}", dir.display()))?;
    let tokenizer = Arc::new(
        Tokenizer::from_dir(dir)
            .with_context(|| format!("loading tokenizer from {}", dir.display()))?,
    );
    let config = model.config().clone();
    let model_len = config.max_position_embeddings;
    let max_model_len = opts.max_model_len.map_or(model_len, |n| n.min(model_len));
    let kv = KvCache::with_budget(&config, opts.block_size, opts.kv_cache_bytes);
    anyhow::ensure!(
        kv.num_blocks() * opts.block_size >= opts.block_size * 2,
        "--kv-cache-memory is too small for this model: {} bytes hold {} blocks",
        opts.kv_cache_bytes,
        kv.num_blocks()
    );
    let memory_bytes =
        model.weight_bytes() + kv.num_blocks() * KvCache::bytes_per_block(&config, opts.block_size);
    tracing::info!(
        model = %dir.display(),
        architecture = %config.architecture,
        weights_mib = model.weight_bytes() / (1 << 20),
        kv_blocks = kv.num_blocks(),
        block_size = opts.block_size,
        max_model_len,
        seconds = format_args!("{:.2}", started.elapsed().as_secs_f64()),
        "model loaded"
    );
    let mut eos = config.eos_token_ids.clone();
    if let Some(id) = tokenizer.eos_token_id() {
        if !eos.contains(&id) {
            eos.push(id);
        }
    }
    let engine_config = EngineConfig {
        max_model_len,
        eos_token_ids: eos,
        ..opts.engine.clone()
    };
    let executor = sluice_engine::ModelExecutor::new(model, kv);
    let engine = Engine::start(Box::new(executor), Arc::clone(&tokenizer), engine_config);
    Ok(LaunchedModel {
        engine,
        tokenizer,
        max_model_len,
        memory_bytes,
    })
}

/// The id a model directory is served under: its folder name.
pub fn default_model_id(dir: &Path) -> String {
    dir.canonicalize()
        .ok()
        .as_deref()
        .unwrap_or(dir)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_string())
}
