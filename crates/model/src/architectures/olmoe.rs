//! `OlmoeForCausalLM`: the Llama block with RMS norms over the whole query and key projections
//! (`q_norm: [heads * head_dim]`, `k_norm: [kv_heads * head_dim]`, before RoPE, not per head)
//! and a mixture of experts in every layer at `mlp.gate` / `mlp.experts.{e}.*`. Routing:
//! softmax over all experts, top-k, renormalised when `norm_topk_prob` (OLMoE-1B-7B: not).

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan, QkNormSpan, SparseMlp};

/// Loads an OLMoE checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let moe = super::moe_config(config)?;
    let attention = AttentionOptions {
        o_bias: config.o_bias,
        qkv_bias: config.qkv_bias,
        qk_norm: true,
        qk_norm_span: QkNormSpan::Projection,
        ..AttentionOptions::plain(config)
    };
    let plan = DecoderPlan::llama_moe(config, moe, attention, SparseMlp::from_config(moe));
    Decoder::load(source, config, &plan, dtype)
}
