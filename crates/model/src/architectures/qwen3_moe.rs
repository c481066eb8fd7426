//! `Qwen3MoeForCausalLM`: Qwen3's attention (per-head q/k norm before RoPE) with a mixture of
//! experts at `mlp.gate` / `mlp.experts.{e}.{gate,up,down}_proj` in the sparse layers
//! (`decoder_sparse_step`, less `mlp_only_layers`, which keep a dense `mlp`). Routing: softmax
//! over all experts, top-k, renormalised when `norm_topk_prob`.

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan, SparseMlp};

/// Loads a Qwen3-MoE checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let moe = super::moe_config(config)?;
    let attention = AttentionOptions {
        qkv_bias: config.qkv_bias,
        o_bias: config.o_bias,
        qk_norm: true,
        ..AttentionOptions::plain(config)
    };
    let plan = DecoderPlan::llama_moe(config, moe, attention, SparseMlp::from_config(moe));
    Decoder::load(source, config, &plan, dtype)
}
