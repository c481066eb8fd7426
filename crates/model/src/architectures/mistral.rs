//! `MistralForCausalLM`: the Llama block with sliding-window attention when `sliding_window`
//! is set (a token sees itself and the `sliding_window - 1` positions before it).

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan};

/// Loads a Mistral checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let attention = AttentionOptions {
        sliding_window: config.sliding_window,
        ..AttentionOptions::plain(config)
    };
    Decoder::load(
        source,
        config,
        &DecoderPlan::llama(config, attention),
        dtype,
    )
}
