//! `MistralForCausalLM`: the Llama block with sliding-window attention when `sliding_window`
//! is set (a token sees itself and the `sliding_window - 1` positions before it).

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::layers::attention::AttentionOptions;

/// Loads a Mistral checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let attention = AttentionOptions {
        qkv_bias: false,
        o_bias: false,
        qk_norm: false,
        sliding_window: config.sliding_window,
    };
    Decoder::load(source, config, attention, dtype)
}
