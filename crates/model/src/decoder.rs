//! The decoder-only transformer stack every supported architecture shares: token embedding,
//! `num_hidden_layers` pre-norm blocks (attention, then gated MLP, each added to the residual),
//! a final norm and the output head. Architectures differ only in [`AttentionOptions`].

use crate::batch::{Batch, Logits};
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::kernels::matmul::{PackedMatrix, WeightDtype};
use crate::kv_cache::KvCache;
use crate::layers::attention::{Attention, AttentionOptions};
use crate::layers::gather_rows;
use crate::layers::linear::Linear;
use crate::layers::mlp::Mlp;
use crate::layers::norm::RmsNorm;
use crate::layers::rope::Rope;
use crate::layers::weights::{load_matrix, matrix_dtype};

/// One pre-norm transformer block (`model.layers.{i}`).
#[derive(Debug)]
struct DecoderLayer {
    /// `[hidden]`.
    input_layernorm: RmsNorm,
    self_attn: Attention,
    /// `[hidden]`.
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

/// The full stack of a Llama-family causal language model.
#[derive(Debug)]
pub struct Decoder {
    /// `[vocab, hidden]`; `None` when tied to `lm_head`.
    embed_tokens: Option<PackedMatrix>,
    layers: Vec<DecoderLayer>,
    /// `[hidden]`.
    norm: RmsNorm,
    /// `[vocab, hidden]`.
    lm_head: Linear,
    rope: Rope,
    hidden: usize,
}

impl Decoder {
    /// Loads the `model.*` and `lm_head` tensors named by the Hugging Face Llama layout.
    pub fn load(
        source: &dyn TensorSource,
        config: &ModelConfig,
        attention: AttentionOptions,
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
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let prefix = format!("model.layers.{i}");
                let eps = config.rms_norm_eps;
                Ok(DecoderLayer {
                    input_layernorm: RmsNorm::load(
                        source,
                        &format!("{prefix}.input_layernorm"),
                        hidden,
                        eps,
                    )?,
                    self_attn: Attention::load(
                        source,
                        &format!("{prefix}.self_attn"),
                        config,
                        attention,
                        dtype,
                    )?,
                    post_attention_layernorm: RmsNorm::load(
                        source,
                        &format!("{prefix}.post_attention_layernorm"),
                        hidden,
                        eps,
                    )?,
                    mlp: Mlp::load(source, &format!("{prefix}.mlp"), config, dtype)?,
                })
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        Ok(Self {
            embed_tokens,
            layers,
            norm: RmsNorm::load(source, "model.norm", hidden, config.rms_norm_eps)?,
            lm_head,
            rope: Rope::new(&config.rope, config.head_dim),
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
        }
        let rope = self.rope.tables(&batch.positions);
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
            layer.input_layernorm.forward(&x, &mut h);
            let reduce = i == last_layer && subset;
            let outputs = if reduce { &wanted } else { &every_row };
            if reduce {
                x = gather_rows(&x, hidden, &wanted);
            }
            layer.self_attn.forward(
                &h,
                batch,
                token_seq,
                &rope,
                kv.layer_mut(i),
                block_size,
                outputs,
                &mut x,
            );
            h.truncate(x.len());
            let rows = x.len() / hidden;
            layer.post_attention_layernorm.forward(&x, &mut h);
            layer.mlp.forward_add(&h, rows, &mut x);
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
        Logits {
            data: self.lm_head.forward(&last[..rows * hidden], rows),
            vocab_size: self.lm_head.out_dim(),
            hidden: gather_rows(&last, hidden, &hidden_rows),
            hidden_size: hidden,
        }
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
                    l.input_layernorm.bytes()
                        + l.self_attn.bytes()
                        + l.post_attention_layernorm.bytes()
                        + l.mlp.bytes()
                })
                .sum::<usize>()
    }
}
