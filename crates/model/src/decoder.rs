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
use crate::layers::decoder_layer::{DecoderLayer, Workspace};
use crate::layers::linear::Linear;
use crate::layers::norm::RmsNorm;
use crate::layers::rope::Rope;
use crate::layers::step::{Rows, StepContext};
use crate::layers::weights::{load_matrix, matrix_dtype};
use crate::layers::{gather_rows, gather_rows_into, resized};
use crate::plan::DecoderPlan;

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
        let mut rope_configs = Vec::new();
        let layers = (plan.layers.iter().enumerate())
            .map(|(i, layer)| {
                let rope = match rope_configs.iter().position(|r| *r == layer.rope) {
                    Some(index) => index,
                    None => {
                        rope_configs.push(layer.rope.clone());
                        rope_configs.len() - 1
                    }
                };
                DecoderLayer::load(source, config, i, layer, style, rope, dtype)
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        Ok(Self {
            embed_tokens,
            layers,
            norm: RmsNorm::load(source, "model.norm", hidden, eps, style)?,
            lm_head,
            ropes: (rope_configs.iter())
                .map(|r| Rope::new(r, config.head_dim))
                .collect(),
            embedding_scale: plan.embedding_scale,
            final_logit_softcap: plan.final_logit_softcap,
            hidden,
        })
    }

    /// Runs the batch (already validated against `kv`; token `t` belongs to sequence
    /// `token_seq[t]`) and returns the requested rows' logits and hidden states.
    pub fn forward(&self, batch: &Batch, token_seq: &[usize], kv: &mut KvCache) -> Logits {
        let ctx = StepContext::new(batch, token_seq, &self.ropes);
        let mut ws = Workspace::default();
        self.embed(batch, &mut ws.x);
        let last = self.layers.len().saturating_sub(1);
        for (i, layer) in self.layers.iter().enumerate() {
            let rows = if i == last {
                ctx.last_layer_rows()
            } else {
                ctx.every_row()
            };
            layer.forward(&ctx, kv.layer(i), rows, &mut ws);
        }
        self.head(&ctx, &mut ws)
    }

    /// `x: [T, hidden]`, the residual stream: each token's embedding row (scaled where the
    /// plan says), or the row the batch gives in its place (`batch.input_embeddings`, as is).
    fn embed(&self, batch: &Batch, x: &mut Vec<f32>) {
        let hidden = self.hidden;
        let embed = self.embed_tokens.as_ref().unwrap_or_else(|| {
            self.lm_head
                .weight()
                .expect("a tied head is the one embedding matrix")
        });
        let x = resized(x, batch.num_tokens() * hidden);
        for (row, &token) in x.chunks_exact_mut(hidden).zip(&batch.token_ids) {
            embed.row_into(token as usize, row);
            if let Some(scale) = self.embedding_scale {
                row.iter_mut().for_each(|v| *v *= scale);
            }
        }
        let given = &batch.input_embeddings;
        for (&row, values) in given.rows.iter().zip(given.values.chunks_exact(hidden)) {
            x[row * hidden..][..hidden].copy_from_slice(values);
        }
    }

    /// The final norm and the output head. Only the wanted rows go through the final norm, and
    /// only the logits rows through the (large) output head.
    fn head(&self, ctx: &StepContext, ws: &mut Workspace) -> Logits {
        let hidden = self.hidden;
        // After a last layer that kept only the wanted rows, `x` is already those rows.
        let kept = !self.layers.is_empty() && matches!(ctx.last_layer_rows(), Rows::Only(_));
        let last = if kept {
            &mut ws.x
        } else {
            gather_rows_into(&ws.x, hidden, ctx.wanted(), &mut ws.scratch);
            &mut ws.scratch
        }; // [logits rows + hidden rows, hidden]
        self.norm.forward_in_place(last);
        let rows = ctx.batch().logits_indices.len();
        let mut data = self.lm_head.forward(&last[..rows * hidden], rows);
        if let Some(cap) = self.final_logit_softcap {
            data.iter_mut().for_each(|l| *l = cap * (*l / cap).tanh());
        }
        Logits {
            data,
            vocab_size: self.lm_head.out_dim(),
            hidden: gather_rows(last, hidden, ctx.hidden_rows()),
            hidden_size: hidden,
        }
    }

    /// Distinct experts the last forward pass ran, summed over the mixture-of-experts layers
    /// (so an expert used in two layers counts twice); `None` for a dense model. A step whose
    /// rows share experts touches fewer than `rows × experts_per_token` per layer.
    pub fn experts_touched_last_step(&self) -> Option<usize> {
        (self.layers.iter())
            .filter_map(DecoderLayer::experts_touched)
            .reduce(|a, b| a + b)
    }

    /// Bytes of all weights as stored.
    pub fn weight_bytes(&self) -> usize {
        self.embed_tokens.as_ref().map_or(0, PackedMatrix::bytes)
            + self.lm_head.bytes()
            + self.norm.bytes()
            + self.layers.iter().map(DecoderLayer::bytes).sum::<usize>()
    }
}
