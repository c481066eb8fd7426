//! `MixtralForCausalLM`: Mistral's attention (sliding window when set) with a mixture of
//! experts in every layer at `block_sparse_moe.gate` / `block_sparse_moe.experts.{e}.{w1,w3,w2}`
//! (gate, up, down). Routing: softmax over all experts, top-k, always renormalised (the same as
//! a softmax over the top-k logits).

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan, SparseMlp};

/// Loads a Mixtral checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let moe = super::moe_config(config)?;
    let attention = AttentionOptions {
        sliding_window: config.sliding_window,
        ..AttentionOptions::plain(config)
    };
    let sparse = SparseMlp {
        module: "block_sparse_moe",
        expert_projections: ["w1", "w3", "w2"],
        ..SparseMlp::from_config(moe)
    };
    let plan = DecoderPlan::llama_moe(config, moe, attention, sparse);
    Decoder::load(source, config, &plan, dtype)
}
