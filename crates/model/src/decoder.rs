//! The decoder-only transformer stack every supported architecture shares: token embedding,
//! `num_hidden_layers` blocks (attention, then gated MLP, each added to the residual), a final
//! norm and the output head. What differs between architectures, and between the layers of one
//! model, is described by a [`DecoderPlan`].

use crate::batch::{Batch, Logits};
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::kernels::matmul::{PackedMatrix, WeightDtype};
use crate::kv_cache::KvCache;
use crate::layers::attention::Attention;
use crate::layers::feed_forward::FeedForward;
use crate::layers::gather_rows;
use crate::layers::linear::Linear;
use crate::layers::norm::RmsNorm;
use crate::layers::rope::Rope;
use crate::layers::weights::{load_matrix, matrix_dtype};
use crate::plan::{DecoderPlan, NormPlacement};

/// The norms around one sub-block (attention or MLP).
#[derive(Debug)]
struct Norms {
    /// `[hidden]`: applied to the residual stream before the sub-block.
    before: RmsNorm,
    /// `[hidden]`: applied to the sub-block's output before it joins the residual (Gemma).
    after: Option<RmsNorm>,
}

impl Norms {
    fn bytes(&self) -> usize {
        self.before.bytes() + self.after.as_ref().map_or(0, RmsNorm::bytes)
    }
}

/// One transformer block (`model.layers.{i}`).
#[derive(Debug)]
struct DecoderLayer {
    attn_norms: Norms,
    self_attn: Attention,
    mlp_norms: Norms,
    mlp: FeedForward,
    /// Index into [`Decoder::ropes`].
    rope: usize,
}

/// The full stack of a decoder-only causal language model.
#[derive(Debug)]
pub struct Decoder {
    /// `[vocab, hidden]`; `None` when tied to `lm_head`.
    embed_tokens: Option<PackedMatrix>,
    layers: Vec<DecoderLayer>,
    /// `[hidden]`.
    norm: RmsNorm,
    /// `[vocab, hidden]`.
    lm_head: Linear,
    /// The distinct rotary embeddings the layers use (one, or Gemma 3's local and global).
    ropes: Vec<Rope>,
    embedding_scale: Option<f32>,
    final_logit_softcap: Option<f32>,
    hidden: usize,
}

impl Decoder {
    /// Loads the `model.*` and `lm_head` tensors named by the Hugging Face layout, each layer
    /// as `plan` describes it.
    pub fn load(
        source: &dyn TensorSource,
        config: &ModelConfig,
        plan: &DecoderPlan,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let (vocab, hidden) = (config.vocab_size, config.hidden_size);
        // A tied embedding is also the output head, which keeps more precision when converted.
        let tied = config.tie_word_embeddings;
        let embed_name = "model.embed_tokens.weight";
        let embed_dtype = matrix_dtype(embed_name, tied, dtype);
        let embed = load_matrix(source, embed_name, vocab, hidden, embed_dtype)?;
        let head_dtype = matrix_dtype("lm_head.weight", tied, dtype);
        // Some tied checkpoints still ship lm_head.weight; the config decides.
        let (embed_tokens, lm_head) = if config.tie_word_embeddings {
            (None, Linear::from_packed(embed))
        } else {
            let head = Linear::load(source, &[("lm_head", vocab)], hidden, false, head_dtype)?;
            (Some(embed), head)
        };
        let (eps, style) = (config.rms_norm_eps, plan.norm_weight);
        let norm = |name: String| RmsNorm::load(source, &name, hidden, eps, style);
        let mut rope_configs = Vec::new();
        let layers = (plan.layers.iter().enumerate())
            .map(|(i, layer)| {
                let prefix = format!("model.layers.{i}");
                let (attn_norms, mlp_norms) = match layer.norms {
                    NormPlacement::Pre => (
                        Norms {
                            before: norm(format!("{prefix}.input_layernorm"))?,
                            after: None,
                        },
                        Norms {
                            before: norm(format!("{prefix}.post_attention_layernorm"))?,
                            after: None,
                        },
                    ),
                    NormPlacement::Sandwich => (
                        Norms {
                            before: norm(format!("{prefix}.input_layernorm"))?,
                            after: Some(norm(format!("{prefix}.post_attention_layernorm"))?),
                        },
                        Norms {
                            before: norm(format!("{prefix}.pre_feedforward_layernorm"))?,
                            after: Some(norm(format!("{prefix}.post_feedforward_layernorm"))?),
                        },
                    ),
                };
                let rope = match rope_configs.iter().position(|r| *r == layer.rope) {
                    Some(index) => index,
                    None => {
                        rope_configs.push(layer.rope.clone());
                        rope_configs.len() - 1
                    }
                };
                Ok(DecoderLayer {
                    attn_norms,
                    self_attn: Attention::load(
                        source,
                        &format!("{prefix}.self_attn"),
                        config,
                        layer.attention,
                        style,
                        dtype,
                    )?,
                    mlp_norms,
                    mlp: FeedForward::load(
                        source,
                        &prefix,
                        config,
                        &layer.mlp,
                        layer.activation,
                        dtype,
                    )?,
                    rope,
                })
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        Ok(Self {
            embed_tokens,
            layers,
            norm: norm("model.norm".into())?,
            lm_head,
            ropes: (rope_configs.iter())
                .map(|r| Rope::new(r, config.head_dim))
                .collect(),
            embedding_scale: plan.embedding_scale,
            final_logit_softcap: plan.final_logit_softcap,
            hidden,
        })
    }

    /// Runs the batch (already validated against `kv`) and returns the requested rows' logits.
    pub fn forward(&self, batch: &Batch, token_seq: &[usize], kv: &mut KvCache) -> Logits {
        let (t, hidden) = (batch.num_tokens(), self.hidden);
        let embed = self.embed_tokens.as_ref().unwrap_or_else(|| {
            self.lm_head
                .weight()
                .expect("a tied head is the one embedding matrix")
        });
        // x: [T, hidden], the residual stream.
        let mut x = vec![0f32; t * hidden];
        for (row, &token) in x.chunks_exact_mut(hidden).zip(&batch.token_ids) {
            embed.row_into(token as usize, row);
            if let Some(scale) = self.embedding_scale {
                row.iter_mut().for_each(|v| *v *= scale);
            }
        }
        let ropes: Vec<_> = (self.ropes.iter()).map(|r| r.tables(batch)).collect();
        let block_size = kv.block_size();
        let mut h = vec![0f32; t * hidden]; // [T, hidden], normed input of each block
        let last_layer = self.layers.len().saturating_sub(1);
        // Rows that need an output (logits, then hidden states not already among them), when
        // that is not every row (a prefill chunk): past the last layer's K/V write nothing else
        // reads the other rows, so the last layer's attention output and MLP run for these rows
        // only (as llama.cpp does).
        let mut wanted = batch.logits_indices.clone();
        let hidden_rows: Vec<usize> = (batch.hidden_indices.iter())
            .map(|&r| {
                wanted.iter().position(|&w| w == r).unwrap_or_else(|| {
                    wanted.push(r);
                    wanted.len() - 1
                })
            })
            .collect();
        let subset = wanted.len() < t;
        let every_row: Vec<usize> = (0..t).collect();
        for (i, layer) in self.layers.iter().enumerate() {
            layer.attn_norms.before.forward(&x, &mut h);
            let reduce = i == last_layer && subset;
            let outputs = if reduce { &wanted } else { &every_row };
            if reduce {
                x = gather_rows(&x, hidden, &wanted);
            }
            let group = kv.group(i);
            add_normed(&layer.attn_norms, &mut x, |out| {
                layer.self_attn.forward(
                    &h,
                    batch,
                    token_seq,
                    &ropes[layer.rope],
                    (kv.layer_mut(i), group),
                    block_size,
                    outputs,
                    out,
                )
            });
            h.truncate(x.len());
            let rows = x.len() / hidden;
            layer.mlp_norms.before.forward(&x, &mut h);
            add_normed(&layer.mlp_norms, &mut x, |out| {
                layer.mlp.forward_add(&h, rows, out)
            });
        }
        // Only the requested rows go through the final norm; only the logits rows through the
        // (large) output head.
        let mut last = if subset && !self.layers.is_empty() {
            x
        } else {
            gather_rows(&x, hidden, &wanted) // [logits rows + hidden rows, hidden]
        };
        self.norm.forward_in_place(&mut last);
        let rows = batch.logits_indices.len();
        let mut data = self.lm_head.forward(&last[..rows * hidden], rows);
        if let Some(cap) = self.final_logit_softcap {
            data.iter_mut().for_each(|l| *l = cap * (*l / cap).tanh());
        }
        Logits {
            data,
            vocab_size: self.lm_head.out_dim(),
            hidden: gather_rows(&last, hidden, &hidden_rows),
            hidden_size: hidden,
        }
    }

    /// Distinct experts the last forward pass ran, summed over the mixture-of-experts layers
    /// (so an expert used in two layers counts twice); `None` for a dense model. A step whose
    /// rows share experts touches fewer than `rows × experts_per_token` per layer.
    pub fn experts_touched_last_step(&self) -> Option<usize> {
        (self.layers.iter())
            .filter_map(|l| l.mlp.experts_touched())
            .reduce(|a, b| a + b)
    }

    /// Bytes of all weights as stored.
    pub fn weight_bytes(&self) -> usize {
        self.embed_tokens.as_ref().map_or(0, PackedMatrix::bytes)
            + self.lm_head.bytes()
            + self.norm.bytes()
            + self
                .layers
                .iter()
                .map(|l| {
                    l.attn_norms.bytes() + l.self_attn.bytes() + l.mlp_norms.bytes() + l.mlp.bytes()
                })
                .sum::<usize>()
    }
}

/// Adds a sub-block's output into the residual `x`: directly (`add` accumulates into what it is
/// given), or, with a norm after the sub-block, through a zeroed buffer normed before the add.
fn add_normed(norms: &Norms, x: &mut [f32], add: impl FnOnce(&mut [f32])) {
    match &norms.after {
        None => add(x),
        Some(after) => {
            let mut out = vec![0f32; x.len()]; // [rows, hidden]
            add(&mut out);
            after.forward_in_place(&mut out);
            x.iter_mut().zip(&out).for_each(|(x, o)| *x += o);
        }
    }
}
