//! `Qwen3ForCausalLM`: the Llama block with a per-head RMS norm on queries and keys (applied
//! before RoPE) and no q/k/v biases unless `attention_bias` says so.

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan};

/// Loads a Qwen3 checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let attention = AttentionOptions {
        qkv_bias: config.qkv_bias,
        o_bias: config.o_bias,
        qk_norm: true,
        ..AttentionOptions::plain(config)
    };
    Decoder::load(
        source,
        config,
        &DecoderPlan::llama(config, attention),
        dtype,
    )
}
