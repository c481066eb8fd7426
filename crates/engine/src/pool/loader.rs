//! Turning a model directory into a running engine: the [`ModelLoader`] trait the pool loads
//! through, and [`DirectoryLoader`], which reads Hugging Face directories from disk.
//!
//! Every engine started here runs its forward passes on rayon's global thread pool (the model
//! crate's matmul and attention kernels call `par_iter` without building a pool of their own), so
//! several loaded models share one set of compute threads instead of oversubscribing the CPU.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use sluice_model::architectures::registry::{mmproj_encoder, vision_encoder};
use sluice_model::{
    KvCache, KvDemand, KvDtype, KvLayout, KvPools, LoadError, LoadOptions, Model, ModelConfig,
    ModelFiles, WeightDtype,
};
use sluice_text::Tokenizer;
use thiserror::Error;

use super::budget::gib;
use super::kv_sizing::{KvCacheMemory, KvShape};
use super::projector::projector_beside;
use crate::engine::{Engine, EngineConfig};
use crate::executor::ModelExecutor;
use crate::handle::EngineHandle;
use crate::image_input::ImageInput;
use crate::kv_disk::{DiskCache, DiskCacheError};
use crate::kv_events::{KvEventPublisher, KvEventSink};

/// A model whose engine is running.
#[derive(Debug)]
pub struct LoadedModel {
    /// The engine's handle.
    pub engine: EngineHandle,
    /// The model's tokenizer and chat template.
    pub tokenizer: Arc<Tokenizer>,
    /// Effective context length.
    pub max_model_len: usize,
    /// Bytes the model holds: weights as loaded plus its KV pool.
    pub memory_bytes: usize,
    /// The pooling its sentence-transformers files name, when it has them (an embedder).
    pub pooling: Option<sluice_model::Pooling>,
    /// Its image encoder, when its architecture takes images (see
    /// `registry::ArchitectureSpec::vision`); `None` for a text-only model.
    pub images: Option<Arc<ImageInput>>,
}

/// Why a model could not be loaded.
#[derive(Debug, Error)]
pub enum ModelLoadError {
    /// The config or the weights are unreadable or malformed.
    #[error(transparent)]
    Weights(#[from] sluice_model::LoadError),
    /// The tokenizer files are unreadable or malformed.
    #[error(transparent)]
    Tokenizer(#[from] sluice_text::TextError),
    /// The KV budget holds fewer blocks than one sequence needs to make progress.
    #[error("the KV cache budget of {budget_bytes} bytes holds only {blocks} blocks of {block_size} tokens for this model; {remedy}")]
    KvCacheTooSmall {
        /// The budget.
        budget_bytes: usize,
        /// Blocks it holds.
        blocks: usize,
        /// Tokens per block.
        block_size: usize,
        /// The flag to change.
        remedy: &'static str,
    },
    /// The disk tier could not take the model (its weights files could not be fingerprinted).
    #[error(transparent)]
    KvDisk(#[from] DiskCacheError),
    /// Another loader's failure (a test double, a future backend).
    #[error("{0}")]
    Other(String),
}

/// Loads models for the pool. `estimate_bytes` and `load` block (disk reads, weight conversion)
/// and are only called from the pool's own loader threads, never from an async runtime's core
/// threads.
pub trait ModelLoader: Send + Sync + 'static {
    /// The effective context length, from the config alone (cheap: read when the pool is built,
    /// so a model with broken weights is still listed and fails only when loaded).
    fn context_length(&self, dir: &Path) -> Result<usize, ModelLoadError>;
    /// Bytes the model is expected to hold once loaded (weights plus KV pool), without loading.
    fn estimate_bytes(&self, dir: &Path) -> Result<usize, ModelLoadError>;
    /// Loads the weights and tokenizer and starts the model's engine thread.
    fn load(&self, dir: &Path) -> Result<LoadedModel, ModelLoadError>;
    /// [`ModelLoader::load`] for the model served as `id`, the name its KV events are published
    /// under; a loader that publishes nothing loads as `load` does.
    fn load_as(&self, id: &str, dir: &Path) -> Result<LoadedModel, ModelLoadError> {
        let _ = id;
        self.load(dir)
    }
}

/// How every model is loaded and run.
#[derive(Debug, Clone)]
pub struct LoadSettings {
    /// How weight matrices are kept in memory; `None` keeps each one's stored type where sluice
    /// has a format for it (f16 stays f16, a GGUF file's quantized types stay as they are),
    /// else f32 (bf16's range does not fit f16).
    pub dtype: Option<WeightDtype>,
    /// How an image encoder keeps its matrices (and so what it multiplies in: bf16 runs its
    /// attention in bf16 too); `None` as `dtype` says.
    pub vision_dtype: Option<WeightDtype>,
    /// How the KV cache stores keys and values; `None` follows the weights (f16 KV for f16
    /// weights, f32 for f32).
    pub kv_dtype: Option<KvDtype>,
    /// Tokens per KV block.
    pub block_size: usize,
    /// How much memory each model's KV pool gets.
    pub kv_cache_memory: KvCacheMemory,
    /// Context limit; the model's own when `None` (and never above it).
    pub max_model_len: Option<usize>,
    /// Engine limits; `max_model_len` and `eos_token_ids` are filled in from the model.
    pub engine: EngineConfig,
    /// The prefix cache's disk tier, shared by every model (`--kv-disk-cache`).
    pub kv_disk: Option<Arc<DiskCache>>,
    /// Where every model's KV events are published (`--kv-events`), if anywhere.
    pub kv_events: Option<Arc<dyn KvEventPublisher>>,
}

impl LoadSettings {
    /// The server's defaults (each matrix kept in its stored type, the model's own context and
    /// KV dtype, the engine's default limits, no disk tier, no KV events) with a KV pool of
    /// `kv_bytes` for every model, in blocks of `block_size` tokens. Set any other field with
    /// struct update syntax.
    pub fn with_fixed_kv(block_size: usize, kv_bytes: usize) -> Self {
        LoadSettings {
            dtype: None,
            vision_dtype: None,
            kv_dtype: None,
            block_size,
            kv_cache_memory: KvCacheMemory::Fixed(kv_bytes),
            max_model_len: None,
            engine: EngineConfig::default(),
            kv_disk: None,
            kv_events: None,
        }
    }
}

/// Loads Hugging Face model directories (config, safetensors, tokenizer) and GGUF files (with
/// their projector files, for images) with one set of [`LoadSettings`].
#[derive(Debug, Clone)]
pub struct DirectoryLoader {
    settings: LoadSettings,
    /// The projector file named for a GGUF model (`--mmproj`), by the model's path.
    projectors: HashMap<PathBuf, PathBuf>,
    /// What the `--speculative draft:PATH` model adds to every model's memory, read once.
    draft: std::sync::OnceLock<Option<super::draft::DraftFootprint>>,
}

impl DirectoryLoader {
    /// A loader applying `settings` to every model.
    pub fn new(settings: LoadSettings) -> Self {
        DirectoryLoader {
            settings,
            projectors: HashMap::new(),
            draft: std::sync::OnceLock::new(),
        }
    }

    /// The loader with `mmproj` as the projector file of the GGUF model at `model` (rather than
    /// one found beside it).
    pub fn with_projector(mut self, model: PathBuf, mmproj: PathBuf) -> Self {
        self.projectors.insert(model, mmproj);
        self
    }

    /// The projector file of the GGUF model at `path`, whose config names `architecture`: the
    /// one named for it, else, for an architecture that takes images, one found beside it
    /// (`projector.rs`).
    pub fn projector(&self, path: &Path, architecture: &str) -> Option<PathBuf> {
        if let Some(named) = self.projectors.get(path) {
            return Some(named.clone());
        }
        mmproj_encoder(architecture)?;
        projector_beside(path)
    }

    /// The image input of a loaded model: a directory's own encoder where its architecture
    /// takes images; a GGUF file's from its projector file, if it has one.
    fn image_input(
        &self,
        path: &Path,
        files: &ModelFiles,
        config: &ModelConfig,
        tokenizer: &Tokenizer,
    ) -> Result<Option<ImageInput>, LoadError> {
        let dtype = self.settings.vision_dtype.or(self.settings.dtype);
        if files.gguf_metadata().is_none() {
            return vision_encoder(&config.architecture)
                .map(|kind| ImageInput::load(kind, path, dtype, tokenizer))
                .transpose();
        }
        let Some(mmproj) = self.projector(path, &config.architecture) else {
            return Ok(None);
        };
        let kind = mmproj_encoder(&config.architecture).ok_or_else(|| LoadError::Config {
            path: mmproj.clone(),
            message: format!(
                "the language model {} ({}) takes no images: a projector file cannot serve it",
                path.display(),
                config.architecture
            ),
        })?;
        tracing::info!(model = %path.display(), projector = %mmproj.display(), "image encoder from its projector file");
        let input = ImageInput::load_mmproj(&mmproj, kind, config.hidden_size, dtype, tokenizer)?;
        Ok(Some(input))
    }

    /// Bytes the projector file of a GGUF model adds (its size on disk: its tensors are kept
    /// in their stored types unless `--dtype` says otherwise).
    fn projector_bytes(&self, path: &Path, files: &ModelFiles) -> usize {
        if files.gguf_metadata().is_none() {
            return 0;
        }
        (self.projector(path, &files.config().architecture))
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len() as usize)
    }

    /// The footprint of the draft model the settings name, read from its files once.
    pub(super) fn draft(&self) -> Option<&super::draft::DraftFootprint> {
        self.draft
            .get_or_init(|| self.read_draft_footprint())
            .as_ref()
    }

    /// The settings every model is loaded with.
    pub fn settings(&self) -> &LoadSettings {
        &self.settings
    }

    /// The context length served: the model's own, lowered by `--max-model-len` and then by
    /// the KV pool, which must hold one full-length sequence (a longer context would accept
    /// requests that fail after generating once the pool runs out).
    fn max_model_len(&self, config: &ModelConfig, kv_dtype: KvDtype, weights: usize) -> usize {
        self.context_limits(config, kv_dtype, weights).0
    }

    /// (served context length, what it would be without the KV pool's bound) for a model whose
    /// weights take `weights` bytes.
    fn context_limits(
        &self,
        config: &ModelConfig,
        kv_dtype: KvDtype,
        weights: usize,
    ) -> (usize, usize) {
        let shape = self.kv_shape(config, kv_dtype);
        let blocks = self.kv_pools(&shape, weights).num_blocks();
        (
            shape.context.min(blocks * self.settings.block_size),
            shape.context,
        )
    }

    /// The model's KV cache as the pool sizing sees it; its context is the model's own,
    /// lowered by `--max-model-len`.
    fn kv_shape<'a>(&self, config: &'a ModelConfig, kv_dtype: KvDtype) -> KvShape<'a> {
        let s = &self.settings;
        let own = config.max_position_embeddings;
        KvShape {
            config,
            dtype: kv_dtype,
            block_size: s.block_size,
            demand: KvDemand {
                max_num_seqs: s.engine.max_num_seqs,
                max_num_batched_tokens: s.engine.max_num_batched_tokens,
            },
            context: s.max_model_len.map_or(own, |n| n.min(own)),
        }
    }

    /// The model's KV pools: the bytes `--kv-cache-memory` gives it, shared between the full
    /// and the window pool (see `sluice_model::kv_layout`).
    /// With a draft model, its weights count beside the model's and its KV cache (as many
    /// tokens as the model's) takes its share of the bytes.
    fn kv_pools(&self, shape: &KvShape, weights: usize) -> KvPools {
        let (draft_weights, share) = self.draft().map_or((0, 1.0), |d| d.split(shape));
        let bytes = self
            .settings
            .kv_cache_memory
            .pool_bytes(shape, weights + draft_weights);
        shape.pools((bytes as f64 * share) as usize)
    }

    /// The KV cache storage type for a model: as set, else following the weights (f32 when
    /// they are kept at full precision, f16 otherwise).
    pub fn kv_dtype(&self, files: &ModelFiles) -> KvDtype {
        self.settings
            .kv_dtype
            .unwrap_or(if files.full_precision(self.settings.dtype) {
                KvDtype::F32
            } else {
                KvDtype::F16
            })
    }

    /// The pools a model's files get; what `estimate_bytes` counts and `load` allocates, so
    /// both size them from the same figures (the weights as the files say they will load).
    fn kv_pools_of(&self, files: &ModelFiles) -> KvPools {
        let shape = self.kv_shape(files.config(), self.kv_dtype(files));
        self.kv_pools(&shape, files.loaded_bytes(self.settings.dtype))
    }

    fn kv_bytes(&self, files: &ModelFiles) -> usize {
        let (config, dtype) = (files.config(), self.kv_dtype(files));
        self.kv_pools_of(files)
            .bytes(config, dtype, self.settings.block_size)
    }
}

impl ModelLoader for DirectoryLoader {
    fn context_length(&self, path: &Path) -> Result<usize, ModelLoadError> {
        // The KV dtype may follow the weights, and an `auto` pool's size depends on them,
        // which needs the files; a model whose files do not open (yet) is listed with the f32
        // pool's bound, sized as if its weights took nothing.
        Ok(match ModelFiles::open(path) {
            Ok(files) => {
                let weights = files.loaded_bytes(self.settings.dtype);
                self.max_model_len(files.config(), self.kv_dtype(&files), weights)
            }
            Err(_) => {
                let kv_dtype = self.settings.kv_dtype.unwrap_or(KvDtype::F32);
                self.max_model_len(&ModelFiles::config_at(path)?, kv_dtype, 0)
            }
        })
    }

    fn estimate_bytes(&self, path: &Path) -> Result<usize, ModelLoadError> {
        let files = ModelFiles::open(path)?;
        let tokens = self.kv_pools_of(&files).num_blocks() * self.settings.block_size;
        let draft_bytes = self.draft().map_or(0, |d| d.bytes(tokens));
        let weights = files.loaded_bytes(self.settings.dtype) + self.projector_bytes(path, &files);
        Ok(weights + self.kv_bytes(&files) + draft_bytes)
    }

    fn load(&self, dir: &Path) -> Result<LoadedModel, ModelLoadError> {
        self.load_as(&ModelFiles::default_name(dir), dir)
    }

    fn load_as(&self, id: &str, dir: &Path) -> Result<LoadedModel, ModelLoadError> {
        let s = &self.settings;
        let started = Instant::now();
        let files = ModelFiles::open(dir)?;
        let (dtype, kv_dtype) = (s.dtype, self.kv_dtype(&files));
        tracing::info!(model = %dir.display(), ?dtype, ?kv_dtype, "loading model");
        let model = Model::from_files(&files, &LoadOptions { dtype })?;
        // A GGUF file carries its tokenizer and chat template in its metadata.
        let tokenizer = Arc::new(match files.gguf_metadata() {
            Some(metadata) => Tokenizer::from_gguf(metadata)?,
            None => Tokenizer::from_dir(dir)?,
        });
        // A sentence-transformers directory names its pooling (a GGUF file has no such files).
        let pooling = sluice_model::pooling_of(dir)?;
        let config = model.config().clone();
        let weights = files.loaded_bytes(dtype);
        let (max_model_len, unclamped) = self.context_limits(files.config(), kv_dtype, weights);
        let remedy = s.kv_cache_memory.remedy();
        if max_model_len < unclamped {
            tracing::warn!(
                model = %dir.display(),
                max_model_len,
                asked = unclamped,
                "the KV cache holds only {max_model_len} tokens: the context length is lowered to \
                 that; for more, {remedy}"
            );
        }
        let kv = KvCache::with_pools(&config, kv_dtype, s.block_size, self.kv_pools_of(&files));
        if kv.num_blocks() < 2 {
            let shape = self.kv_shape(files.config(), kv_dtype);
            return Err(ModelLoadError::KvCacheTooSmall {
                budget_bytes: s.kv_cache_memory.pool_bytes(&shape, weights),
                blocks: kv.num_blocks(),
                block_size: s.block_size,
                remedy,
            });
        }
        let images = self.image_input(dir, &files, &config, &tokenizer)?;
        let kv_bytes = self.kv_bytes(&files);
        let draft = self.load_draft(&tokenizer, kv.num_blocks() * s.block_size)?;
        let draft_bytes = draft.as_ref().map_or(0, |d| d.memory_bytes);
        let image_bytes = images.as_ref().map_or(0, |i| i.weight_bytes());
        let memory_bytes = model.weight_bytes() + kv_bytes + draft_bytes + image_bytes;
        let window_blocks = kv.pools().window().map_or(0, |w| w.num_blocks);
        tracing::info!(
            model = %dir.display(),
            kv_cache_memory = %s.kv_cache_memory,
            kv_bytes,
            kv_blocks = kv.num_blocks(),
            window_kv_blocks = window_blocks,
            max_model_len,
            "kv cache: {}, {} blocks{}, holds {} tokens, context {max_model_len}",
            gib(kv_bytes),
            kv.num_blocks(),
            match window_blocks {
                0 => String::new(),
                n => format!(" and {n} for the window layers"),
            },
            kv.num_blocks() * s.block_size,
        );
        tracing::info!(
            model = %dir.display(),
            architecture = %config.architecture,
            weights_mib = model.weight_bytes() / (1 << 20),
            kernels = sluice_model::kernels::Isa::current().name(),
            block_size = s.block_size,
            max_model_len,
            seconds = format_args!("{:.2}", started.elapsed().as_secs_f64()),
            "model loaded"
        );
        let mut eos = config.eos_token_ids.clone();
        let tokenizer_eos = tokenizer.eos_token_id().into_iter();
        for id in tokenizer_eos.chain(tokenizer.end_of_generation_ids().iter().copied()) {
            if !eos.contains(&id) {
                eos.push(id);
            }
        }
        let kv_events = (s.kv_events.as_ref())
            .map(|p| KvEventSink(p.stream(id, &KvLayout::of(&config).groups)));
        let kv_disk = match &s.kv_disk {
            Some(cache) => {
                let block_bytes = (0..kv.pools().groups.len())
                    .map(|g| kv.group_block_bytes(g))
                    .collect();
                let facts = kv_facts(&config, kv_dtype, s);
                let events = kv_events.clone();
                Some(cache.model(&files.weight_files(), &facts, block_bytes, events)?)
            }
            None => None,
        };
        let engine_config = EngineConfig {
            max_model_len,
            eos_token_ids: eos,
            kv_disk,
            kv_events,
            ..s.engine.clone()
        };
        let executor = Box::new(ModelExecutor::new(model, kv));
        let draft = draft.map(|d| d.executor);
        let engine =
            Engine::start_with_draft(executor, draft, Arc::clone(&tokenizer), engine_config);
        // Its image encodings share the CPU with its steps (one at a time beside them).
        let gate = Arc::clone(engine.encode_gate());
        let images = images.map(|input| Arc::new(input.with_gate(gate)));
        Ok(LoadedModel {
            engine,
            tokenizer,
            max_model_len,
            memory_bytes,
            pooling,
            images,
        })
    }
}

/// Everything besides the weights files that the bytes of a KV block depend on, for the disk
/// tier's model fingerprint: the release (kernels change), the instruction set the kernels use
/// (and whether it multiplies bf16, which a bf16 cache's attention does where it can), the
/// weight type as loaded, the KV type, block size and groups, and the whole config
/// (architecture, RoPE, windows, ...). Over-inclusive on purpose: a change only costs misses.
fn kv_facts(config: &ModelConfig, kv_dtype: KvDtype, s: &LoadSettings) -> String {
    let spans: Vec<_> = KvLayout::of(config).groups;
    format!(
        "sluice {} | isa {} bf16 {} | weights {:?} | kv {:?} | block {} | groups {:?} | {:?}",
        env!("CARGO_PKG_VERSION"),
        sluice_model::kernels::Isa::current().name(),
        sluice_model::kernels::Isa::current().has_avx512_bf16(),
        s.dtype,
        kv_dtype,
        s.block_size,
        spans,
        config
    )
}

#[cfg(test)]
#[path = "loader_tests.rs"]
mod tests;
