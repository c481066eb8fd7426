//! `Qwen2ForCausalLM` (Qwen2, Qwen2.5): the Llama block with biases on the q/k/v projections
//! (none on the output projection).

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan};

/// Loads a Qwen2 checkpoint. Per-layer sliding windows (`use_sliding_window`) are not supported.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let attention = AttentionOptions {
        qkv_bias: true,
        ..AttentionOptions::plain(config)
    };
    Decoder::load(
        source,
        config,
        &DecoderPlan::llama(config, attention),
        dtype,
    )
}
