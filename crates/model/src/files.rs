//! A model on disk, whatever its format: a Hugging Face directory (`config.json` and
//! safetensors) or a GGUF file (or split set). Everything above the model crate opens models
//! through [`ModelFiles`], so a new format is a new variant here and a new [`TensorSource`].

use std::path::{Path, PathBuf};

use sluice_gguf::Metadata;

use crate::checkpoint::{Checkpoint, TensorSource};
use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::gguf::GgufSource;
use crate::kernels::matmul::WeightDtype;
use crate::layers::weights::{loaded_matrix_bytes, matrix_dtype};

/// An opened model: its config and its weights, not yet loaded.
#[derive(Debug)]
pub enum ModelFiles {
    /// A Hugging Face model directory.
    HuggingFace {
        /// The directory.
        dir: PathBuf,
        /// `config.json` + `generation_config.json`.
        config: ModelConfig,
        /// The safetensors files.
        checkpoint: Checkpoint,
    },
    /// A GGUF file with everything in its metadata.
    Gguf(GgufSource),
}

impl ModelFiles {
    /// Whether `path` names a GGUF file (by its extension), rather than a directory.
    pub fn is_gguf(path: &Path) -> bool {
        path.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
            && !path.is_dir()
    }

    /// Whether `path` names llama.cpp's projector file of a multimodal model (a `.gguf` file
    /// whose name starts with `mmproj`, as llama.cpp's converter and router name them): the
    /// image half of a GGUF language model, not a model.
    pub fn is_mmproj(path: &Path) -> bool {
        Self::is_gguf(path)
            && path.file_name().is_some_and(|n| {
                let name = n.to_string_lossy();
                (name.get(..6)).is_some_and(|head| head.eq_ignore_ascii_case("mmproj"))
            })
    }

    /// Whether `path` holds a model sluice can open: a directory with a `config.json`, or a
    /// `.gguf` file (of a split set, only the first part counts, so a set is one model) that
    /// is not a projector file ([`Self::is_mmproj`]).
    pub fn is_model(path: &Path) -> bool {
        if Self::is_gguf(path) {
            return path.is_file()
                && !Self::is_mmproj(path)
                && sluice_gguf::split_parts(path).is_none_or(|parts| parts[0] == path);
        }
        path.join("config.json").is_file()
    }

    /// The name a model is served under by default: a directory's name, a GGUF file's stem
    /// (without a split suffix).
    pub fn default_name(path: &Path) -> String {
        if Self::is_gguf(path) {
            return sluice_gguf::model_name(path);
        }
        path.canonicalize()
            .ok()
            .as_deref()
            .unwrap_or(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_string())
    }

    /// Opens the model at `path`: a `.gguf` file, else a Hugging Face directory.
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        if Self::is_gguf(path) {
            return Ok(Self::Gguf(GgufSource::open(path)?));
        }
        let config = ModelConfig::from_dir(path)?;
        let checkpoint = Checkpoint::open(path)?;
        // Each layer has tensors of its own; per-layer tables are built before any is read.
        let tensors = checkpoint.tensors().count();
        if config.num_hidden_layers > tensors {
            return Err(LoadError::Config {
                path: path.join("config.json"),
                message: format!(
                    "num_hidden_layers is {}, but the checkpoint holds only {tensors} tensors",
                    config.num_hidden_layers
                ),
            });
        }
        Ok(Self::HuggingFace {
            dir: path.to_path_buf(),
            config,
            checkpoint,
        })
    }

    /// The config alone: cheap for a directory (no weights opened).
    pub fn config_at(path: &Path) -> Result<ModelConfig, LoadError> {
        if Self::is_gguf(path) {
            return GgufSource::config_at(path);
        }
        ModelConfig::from_dir(path)
    }

    /// The model's configuration.
    pub fn config(&self) -> &ModelConfig {
        match self {
            Self::HuggingFace { config, .. } => config,
            Self::Gguf(source) => source.config(),
        }
    }

    /// The weights.
    pub fn source(&self) -> &dyn TensorSource {
        match self {
            Self::HuggingFace { checkpoint, .. } => checkpoint,
            Self::Gguf(source) => source,
        }
    }

    /// The GGUF metadata, for a GGUF model (its tokenizer and chat template live there).
    pub fn gguf_metadata(&self) -> Option<&Metadata> {
        match self {
            Self::Gguf(source) => Some(source.gguf().metadata()),
            Self::HuggingFace { .. } => None,
        }
    }

    /// The path the model was opened from.
    pub fn path(&self) -> &Path {
        match self {
            Self::HuggingFace { dir, .. } => dir,
            Self::Gguf(source) => source.gguf().path(),
        }
    }

    /// The files the weights are read from (safetensors shards, or a GGUF file and its split
    /// parts): what identifies the model's numbers.
    pub fn weight_files(&self) -> Vec<PathBuf> {
        match self {
            Self::HuggingFace { checkpoint, .. } => checkpoint.paths(),
            Self::Gguf(source) => {
                let path = source.gguf().path();
                sluice_gguf::split_parts(path).unwrap_or_else(|| vec![path.to_path_buf()])
            }
        }
    }

    /// Bytes the weights hold once loaded with `dtype` (see `LoadOptions::dtype`), without
    /// loading them: matrices packed in the format they will be kept in, vectors as f32,
    /// nothing for an output head a tied config ignores.
    pub fn loaded_bytes(&self, dtype: Option<WeightDtype>) -> usize {
        match self {
            Self::HuggingFace {
                config, checkpoint, ..
            } => safetensors_loaded_bytes(checkpoint, config, dtype),
            Self::Gguf(source) => {
                let tied = source.config().tie_word_embeddings;
                source
                    .tensors()
                    .filter_map(|(hf, info)| hf.map(|h| (h, info)))
                    .filter(|(hf, _)| !(tied && hf == "lm_head.weight"))
                    .map(|(hf, info)| match info.shape().as_slice() {
                        [rows, cols] => {
                            let dtype = matrix_dtype(&hf, tied, dtype);
                            loaded_matrix_bytes(info.ggml_type, *rows, *cols, dtype)
                        }
                        // Stacked experts: each one is a matrix of its own once loaded.
                        [experts, rows, cols] => {
                            let dtype = matrix_dtype(&hf, tied, dtype);
                            experts * loaded_matrix_bytes(info.ggml_type, *rows, *cols, dtype)
                        }
                        shape => shape.iter().product::<usize>() * 4,
                    })
                    .sum()
            }
        }
    }

    /// Whether the weights will be kept at full precision with `dtype`, so the KV cache should
    /// be too (when it follows the weights).
    pub fn full_precision(&self, dtype: Option<WeightDtype>) -> bool {
        match (dtype, self) {
            (Some(d), _) => d == WeightDtype::F32,
            (None, Self::HuggingFace { config, .. }) => {
                config.checkpoint_dtype.as_deref() != Some("float16")
            }
            (None, Self::Gguf(source)) => source
                .tensors()
                .filter(|(_, info)| info.dims.len() >= 2)
                .all(|(_, info)| info.ggml_type == sluice_gguf::GgmlType::F32),
        }
    }
}

/// Bytes the weights of `checkpoint` hold once loaded as `dtype`, without loading them:
/// matrices packed into whole panels of the format they will be kept in, vectors (norms, biases)
/// as f32, nothing for an `lm_head.weight` that a tied `config` ignores. Projections stacked at
/// load share their padding, so this is exact or a little over.
fn safetensors_loaded_bytes(
    checkpoint: &Checkpoint,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> usize {
    let tied = config.tie_word_embeddings;
    (checkpoint.tensors())
        .filter(|(name, _, _)| !(tied && *name == "lm_head.weight"))
        .map(|(name, stored, shape)| match (shape, stored) {
            ([rows, cols], Some(stored)) => {
                loaded_matrix_bytes(stored, *rows, *cols, matrix_dtype(name, tied, dtype))
            }
            (shape, _) => shape.iter().product::<usize>() * 4,
        })
        .sum()
}
