//! `Qwen2MoeForCausalLM`: Qwen2's attention (q/k/v biases) with a mixture of experts at
//! `mlp.gate` / `mlp.experts.{e}.*` plus an always-on `mlp.shared_expert` scaled per token by
//! `sigmoid(mlp.shared_expert_gate · x)`, in the layers `decoder_sparse_step` and
//! `mlp_only_layers` make sparse.

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan, SparseMlp};

/// Loads a Qwen2-MoE checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let moe = super::moe_config(config)?;
    let attention = AttentionOptions {
        qkv_bias: true,
        ..AttentionOptions::plain(config)
    };
    let plan = DecoderPlan::llama_moe(config, moe, attention, SparseMlp::from_config(moe));
    Decoder::load(source, config, &plan, dtype)
}
