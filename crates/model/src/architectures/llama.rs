//! `LlamaForCausalLM`: Llama 2/3/3.1/3.2, TinyLlama, SmolLM/SmolLM2. Optional biases follow
//! `attention_bias`; `rope_scaling` type `llama3` is handled by the shared rotary layer.

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan};

/// Loads a Llama checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let attention = AttentionOptions {
        qkv_bias: config.qkv_bias,
        o_bias: config.o_bias,
        ..AttentionOptions::plain(config)
    };
    Decoder::load(
        source,
        config,
        &DecoderPlan::llama(config, attention),
        dtype,
    )
}
