//! One file per supported architecture; each says how its checkpoint maps onto the shared
//! [`Decoder`](crate::decoder::Decoder) by filling a [`DecoderPlan`](crate::plan::DecoderPlan).
//! To add one, write a file here and a match arm in [`load`].

pub mod gemma3;
pub mod llama;
pub mod mistral;
pub mod mixtral;
pub mod olmoe;
pub mod phi3;
pub mod qwen2;
pub mod qwen2_moe;
pub mod qwen3;
pub mod qwen3_moe;

use crate::checkpoint::TensorSource;
use crate::config::{ModelConfig, MoeConfig};
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;

/// Loads `config.architecture`, or `None` when it is not implemented.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Option<Result<Decoder, LoadError>> {
    Some(match config.architecture.as_str() {
        "Gemma3ForCausalLM" => gemma3::load(source, config, dtype),
        "LlamaForCausalLM" => llama::load(source, config, dtype),
        "MistralForCausalLM" => mistral::load(source, config, dtype),
        "MixtralForCausalLM" => mixtral::load(source, config, dtype),
        "OlmoeForCausalLM" => olmoe::load(source, config, dtype),
        "Phi3ForCausalLM" => phi3::load(source, config, dtype),
        "Qwen2ForCausalLM" => qwen2::load(source, config, dtype),
        "Qwen2MoeForCausalLM" => qwen2_moe::load(source, config, dtype),
        "Qwen3ForCausalLM" => qwen3::load(source, config, dtype),
        "Qwen3MoeForCausalLM" => qwen3_moe::load(source, config, dtype),
        _ => return None,
    })
}

/// The experts of an MoE architecture's config (which `config.json` parsing fills for every
/// MoE architecture name, so its absence is a config that named none).
fn moe_config(config: &ModelConfig) -> Result<&MoeConfig, LoadError> {
    config.moe.as_ref().ok_or_else(|| LoadError::Config {
        path: "config.json".into(),
        message: format!("{} needs num_experts", config.architecture),
    })
}
