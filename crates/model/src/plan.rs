//! What a [`Decoder`](crate::decoder::Decoder) is built from: a [`DecoderPlan`] with one
//! [`LayerPlan`] per layer. An architecture file (`architectures/*.rs`) says what its blocks look
//! like by filling a plan from the config; the decoder runs any plan with the same code, so a new
//! block shape is a new plan (and, where it needs one, a new piece in `layers/`), not a second
//! decoder.

use crate::config::{Activation, ModelConfig, MoeConfig, RopeConfig};

/// How an RMS norm applies its stored weight `w`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormWeight {
    /// `x̂ · w` (Llama).
    Plain,
    /// `x̂ · (1 + w)` (Gemma's checkpoints store the offset from one).
    OffsetFromOne,
}

/// Where a block's RMS norms sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormPlacement {
    /// One norm before each sub-block: `input_layernorm` before attention,
    /// `post_attention_layernorm` before the MLP (Llama).
    Pre,
    /// Norms before and after each sub-block, the output normed before it joins the residual:
    /// `input_layernorm` / `post_attention_layernorm` around attention,
    /// `pre_feedforward_layernorm` / `post_feedforward_layernorm` around the MLP (Gemma 2 and 3).
    Sandwich,
}

/// Which optional parts a layer's attention has, and how it scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionOptions {
    /// q/k/v projections carry biases.
    pub qkv_bias: bool,
    /// The output projection carries a bias.
    pub o_bias: bool,
    /// Queries and keys are RMS-normed before RoPE (per head, or as [`Self::qk_norm_span`]
    /// says).
    pub qk_norm: bool,
    /// What one q/k norm spans.
    pub qk_norm_span: QkNormSpan,
    /// Attention sees only the last `n` positions.
    pub sliding_window: Option<usize>,
    /// Multiplier of `q · k`: `1 / √head_dim`, or Gemma's `query_pre_attn_scalar^-½`.
    pub scale: f32,
    /// Scores become `cap · tanh(score / cap)` before the softmax (Gemma 2's
    /// `attn_logit_softcapping`).
    pub logit_softcap: Option<f32>,
}

/// The rows a q/k RMS norm normalises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QkNormSpan {
    /// Each head's `head_dim` values (Qwen3, Gemma 3): `q_norm`/`k_norm` are `[head_dim]`.
    Head,
    /// A token's whole projection (OLMoE): `q_norm` is `[heads * head_dim]`, `k_norm`
    /// `[kv_heads * head_dim]`.
    Projection,
}

impl AttentionOptions {
    /// No biases, no q/k norm, every position visible, `1 / √head_dim`, no softcap.
    pub fn plain(config: &ModelConfig) -> Self {
        Self {
            qkv_bias: false,
            o_bias: false,
            qk_norm: false,
            qk_norm_span: QkNormSpan::Head,
            sliding_window: None,
            scale: 1.0 / (config.head_dim as f32).sqrt(),
            logit_softcap: None,
        }
    }
}

/// One decoder layer (`model.layers.{i}`).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerPlan {
    /// Biases, q/k norm, sliding window, score scale and softcap of this layer's attention.
    pub attention: AttentionOptions,
    /// Rotary embedding of this layer (Gemma 3's local and global layers differ).
    pub rope: RopeConfig,
    /// Where the norms sit.
    pub norms: NormPlacement,
    /// The gate's activation in the MLP, `down(act(gate(x)) · up(x))`.
    pub activation: Activation,
    /// Whether the feed-forward block is one dense MLP or a mixture of experts.
    pub mlp: MlpKind,
}

/// A layer's feed-forward block.
#[derive(Debug, Clone, PartialEq)]
pub enum MlpKind {
    /// One gated MLP of `intermediate_size` at `mlp.{gate,up,down}_proj`.
    Dense,
    /// Experts chosen per token by a router (`layers/moe.rs`).
    Sparse(SparseMlp),
}

/// Where a mixture-of-experts block's tensors are and how it routes.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseMlp {
    /// The block's module under `model.layers.{i}`: `mlp`, Mixtral's `block_sparse_moe`.
    pub module: &'static str,
    /// The gate, up and down projections' names inside `experts.{e}`: `gate_proj`, `up_proj`,
    /// `down_proj`, or Mixtral's `w1`, `w3`, `w2`.
    pub expert_projections: [&'static str; 3],
    /// Experts (rows of the router `{module}.gate`).
    pub num_experts: usize,
    /// Experts each token runs.
    pub experts_per_token: usize,
    /// Width of one expert's gated hidden layer.
    pub intermediate_size: usize,
    /// The top-k routing weights are divided by their sum.
    pub renormalize: bool,
    /// Width of an always-on `shared_expert` scaled by `sigmoid(shared_expert_gate(x))`
    /// (Qwen2-MoE).
    pub shared_expert: Option<usize>,
}

impl SparseMlp {
    /// The `mlp.experts.{e}.{gate,up,down}_proj` layout (Qwen-MoE, OLMoE) of `moe`.
    pub fn from_config(moe: &MoeConfig) -> Self {
        Self {
            module: "mlp",
            expert_projections: ["gate_proj", "up_proj", "down_proj"],
            num_experts: moe.num_experts,
            experts_per_token: moe.experts_per_token,
            intermediate_size: moe.expert_intermediate_size,
            renormalize: moe.renormalize,
            shared_expert: moe.shared_expert_intermediate_size,
        }
    }
}

/// The whole stack: the layers and what happens before the first and after the last.
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderPlan {
    /// One entry per layer, in order.
    pub layers: Vec<LayerPlan>,
    /// How every RMS norm of the model (layers, q/k norms, final norm) applies its weight.
    pub norm_weight: NormWeight,
    /// Embedding rows are multiplied by this before the first layer (Gemma: `√hidden`).
    pub embedding_scale: Option<f32>,
    /// Logits become `cap · tanh(logits / cap)` (Gemma 2's `final_logit_softcapping`).
    pub final_logit_softcap: Option<f32>,
}

impl LayerPlan {
    /// The Llama block: pre-norms, the config's gate activation (SiLU) and RoPE.
    pub fn llama(config: &ModelConfig, attention: AttentionOptions) -> Self {
        Self {
            attention,
            rope: config.rope.clone(),
            norms: NormPlacement::Pre,
            activation: config.hidden_activation,
            mlp: MlpKind::Dense,
        }
    }
}

impl DecoderPlan {
    /// `config.num_hidden_layers` copies of `layer`, plain norms, no embedding scale or softcap.
    pub fn uniform(config: &ModelConfig, layer: LayerPlan) -> Self {
        Self {
            layers: vec![layer; config.num_hidden_layers],
            norm_weight: NormWeight::Plain,
            embedding_scale: None,
            final_logit_softcap: None,
        }
    }

    /// Every layer the Llama block with the same `attention` options.
    pub fn llama(config: &ModelConfig, attention: AttentionOptions) -> Self {
        Self::uniform(config, LayerPlan::llama(config, attention))
    }

    /// The Llama block with `sparse` experts in the layers `config.moe` makes sparse and a
    /// dense MLP in the others.
    pub fn llama_moe(
        config: &ModelConfig,
        moe: &MoeConfig,
        attention: AttentionOptions,
        sparse: SparseMlp,
    ) -> Self {
        let mut plan = Self::llama(config, attention);
        for (i, layer) in plan.layers.iter_mut().enumerate() {
            if moe.is_sparse(i) {
                layer.mlp = MlpKind::Sparse(sparse.clone());
            }
        }
        plan
    }
}
