//! One file per supported architecture; each says how its checkpoint maps onto the shared
//! [`Decoder`] by filling a [`DecoderPlan`](crate::plan::DecoderPlan).
//! [`registry`] lists them all, with their names, MoE facts and GGUF quirks.
//!
//! To add one, write a file here with its `load` (a [`registry::LoadFn`]), declare it below,
//! and add one row to the table in [`registry`]; loading, `config.json` and GGUF parsing all find
//! it there.

pub mod gemma3;
pub mod gemma3_vision;
mod language_model;
pub mod llama;
pub mod mistral;
pub mod mixtral;
pub mod olmoe;
pub mod phi3;
pub mod qwen2;
pub mod qwen2_5_vl;
pub mod qwen2_moe;
pub mod qwen3;
pub mod qwen3_moe;
pub mod registry;

use crate::checkpoint::TensorSource;
use crate::config::{ModelConfig, MoeConfig, WeightCapacity};
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;

impl ModelConfig {
    /// Reads `config.json` and, when present, `generation_config.json` from `dir`; what the
    /// file leaves unsaid comes from its architecture's row in [`registry`].
    pub fn from_dir(dir: &std::path::Path) -> Result<Self, LoadError> {
        Self::from_dir_with(dir, registry::facts)
    }

    /// Parses `config.json` text for weights of `capacity` (see [`ModelConfig::from_dir`]):
    /// for tools that make up weights of a config's shape.
    pub fn from_json_for(text: &str, capacity: WeightCapacity) -> Result<Self, String> {
        Self::from_json_with(text, None, registry::facts, capacity)
    }

    /// Parses `config.json` text (see [`ModelConfig::from_dir`]); `generation` overrides the
    /// special token ids. The test configs describe weights of at most 1 GiB.
    #[cfg(test)]
    pub(crate) fn from_json(
        text: &str,
        generation: Option<&crate::config::RawGenerationConfig>,
    ) -> Result<Self, String> {
        let capacity = WeightCapacity::of_bytes(1 << 30);
        Self::from_json_with(text, generation, registry::facts, capacity)
    }
}

/// Loads `config.architecture`, or `None` when it is not implemented.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Option<Result<Decoder, LoadError>> {
    registry::by_hf_name(&config.architecture).map(|spec| (spec.load)(source, config, dtype))
}

/// The experts of an MoE architecture's config (which `config.json` parsing fills for every
/// MoE architecture name, so its absence is a config that named none).
fn moe_config(config: &ModelConfig) -> Result<&MoeConfig, LoadError> {
    config.moe.as_ref().ok_or_else(|| LoadError::Config {
        path: "config.json".into(),
        message: format!("{} needs num_experts", config.architecture),
    })
}
