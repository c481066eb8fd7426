//! The self-attention block: fused q/k/v projection, optional per-head q/k RMS norm (Qwen3, Gemma 3),
//! rotary embeddings, the write of new K/V into the paged cache, paged attention, and the
//! output projection.

use super::linear::Linear;
use super::norm::RmsNorm;
use super::step::{Rows, StepContext};
use super::{gather_rows_into, resized, zeroed};
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::kernels::paged_attention::{paged_attention, AttentionShape, QueryView};
use crate::kernels::vector::KvElement;
use crate::kv_cache::{with_layer_kv, LayerCache, LayerKv};
use crate::plan::{AttentionOptions, NormWeight, QkNormSpan};

/// One layer's attention weights.
#[derive(Debug)]
pub struct Attention {
    /// `[(heads + 2 * kv_heads) * head_dim, hidden]`: q, k, v stacked.
    qkv_proj: Linear,
    /// `[hidden, heads * head_dim]`.
    o_proj: Linear,
    /// `[head_dim]` each (Qwen3, Gemma 3), or the whole q and k widths (OLMoE).
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    num_heads: usize,
    num_kv_heads: usize,
    head_dim: usize,
    sliding_window: Option<usize>,
    scale: f32,
    logit_softcap: Option<f32>,
    /// Which of the decoder's rotary embeddings rotates q and k ([`StepContext::rope`]).
    rope: usize,
}

/// The buffers of one attention block's step, kept by the caller and reused by every layer.
#[derive(Debug, Default)]
pub struct AttentionScratch<'a> {
    /// `[T, q_dim + 2 * kv_dim]`: the fused q/k/v projection.
    qkv: Vec<f32>,
    /// `[T, heads, head_dim]`: queries, normed and rotated.
    q: Vec<f32>,
    /// `[T, kv_heads, head_dim]`: keys, normed and rotated.
    k: Vec<f32>,
    /// `[rows, heads, head_dim]`: the queries of the output rows, when not every row.
    q_rows: Vec<f32>,
    /// `[rows]`: where each output row's query reads its keys and values.
    queries: Vec<QueryView<'a>>,
    /// `[rows, heads, head_dim]`: the attention output before `o_proj`.
    attended: Vec<f32>,
}

impl Attention {
    /// Loads `{prefix}.q_proj`, `k_proj`, `v_proj`, `o_proj` (and `q_norm`, `k_norm`, applied
    /// as `norm_weight` says); q and k rotate with the decoder's rotary embedding number `rope`.
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        config: &ModelConfig,
        options: AttentionOptions,
        norm_weight: NormWeight,
        rope: usize,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let (heads, kv_heads, head_dim) = (
            config.num_attention_heads,
            config.num_key_value_heads,
            config.head_dim,
        );
        let (q, k, v) = (
            format!("{prefix}.q_proj"),
            format!("{prefix}.k_proj"),
            format!("{prefix}.v_proj"),
        );
        let qkv_proj = Linear::load(
            source,
            &[
                (&q, heads * head_dim),
                (&k, kv_heads * head_dim),
                (&v, kv_heads * head_dim),
            ],
            config.hidden_size,
            options.qkv_bias,
            dtype,
        )?;
        let o_proj = Linear::load(
            source,
            &[(&format!("{prefix}.o_proj"), config.hidden_size)],
            heads * head_dim,
            options.o_bias,
            dtype,
        )?;
        let (q_width, k_width) = match options.qk_norm_span {
            QkNormSpan::Head => (head_dim, head_dim),
            QkNormSpan::Projection => (heads * head_dim, kv_heads * head_dim),
        };
        let qk_norm = if options.qk_norm {
            Some((
                RmsNorm::load(
                    source,
                    &format!("{prefix}.q_norm"),
                    q_width,
                    config.rms_norm_eps,
                    norm_weight,
                )?,
                RmsNorm::load(
                    source,
                    &format!("{prefix}.k_norm"),
                    k_width,
                    config.rms_norm_eps,
                    norm_weight,
                )?,
            ))
        } else {
            None
        };
        Ok(Self {
            qkv_proj,
            o_proj,
            qk_norm,
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_dim,
            sliding_window: options.sliding_window,
            scale: options.scale,
            logit_softcap: options.logit_softcap,
            rope,
        })
    }

    /// `h: [T, hidden]` (already normed): adds the attention output of `rows` into
    /// `residual: [rows, hidden]`, in that order. Writes every token's new K/V into `kv` at its
    /// slot before attending, so a prefill chunk sees itself causally.
    pub(crate) fn forward<'a>(
        &self,
        ctx: &StepContext<'a>,
        kv: LayerCache<'_>,
        rows: Rows<'_>,
        h: &[f32],
        scratch: &mut AttentionScratch<'a>,
        residual: &mut [f32],
    ) {
        let AttentionScratch {
            qkv,
            q,
            k,
            q_rows,
            queries,
            attended,
        } = scratch;
        let t = ctx.num_tokens();
        let (q_dim, kv_dim) = (
            self.num_heads * self.head_dim,
            self.num_kv_heads * self.head_dim,
        );
        let width = q_dim + 2 * kv_dim;
        let qkv = resized(qkv, t * width); // [T, q_dim + 2 * kv_dim]
        self.qkv_proj.forward_into(h, t, qkv);
        q.clear(); // [T, heads, head_dim]
        k.clear(); // [T, kv_heads, head_dim]
        for row in qkv.chunks_exact(width) {
            q.extend_from_slice(&row[..q_dim]);
            k.extend_from_slice(&row[q_dim..q_dim + kv_dim]);
        }
        if let Some((q_norm, k_norm)) = &self.qk_norm {
            q_norm.forward_in_place(q);
            k_norm.forward_in_place(k);
        }
        let rope = ctx.rope(self.rope);
        rope.apply(q, self.num_heads);
        rope.apply(k, self.num_kv_heads);
        // Queries only for the rows whose output is wanted; every row's K/V is still cached.
        let q: &[f32] = match rows {
            Rows::All(_) => q,
            Rows::Only(wanted) => {
                gather_rows_into(q, q_dim, wanted, q_rows);
                q_rows
            }
        };
        // Where each query reads: its sequence's table in this layer's KV group, its position,
        // under a sliding window the first position the window shows, and the last it sees (its
        // own, or in an image attended bidirectionally the image's last: the window bounds only
        // what lies behind a query).
        queries.clear();
        queries.extend((0..rows.len()).map(|i| {
            let t = rows.token(i);
            let position = ctx.position(t);
            QueryView {
                block_table: ctx.block_table(t, kv.group),
                position,
                first: first_visible(position, self.sliding_window),
                last: ctx.last_visible(t),
            }
        }));
        let shape = AttentionShape {
            num_heads: self.num_heads,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
            block_size: kv.block_size,
            scale: self.scale,
            logit_softcap: self.logit_softcap,
        };
        let attended = zeroed(attended, rows.len() * q_dim); // [rows, heads, head_dim]
        let new_kv = NewKv {
            slots: ctx.slots(kv.group),
            keys: k,
            // (`get`: an empty step has no rows to offset into.)
            values: qkv.get(q_dim + kv_dim..).unwrap_or(&[]),
            value_stride: width,
        };
        with_layer_kv!(kv.storage, kv => write_and_attend(shape, kv, new_kv, queries, q, attended));
        self.o_proj.forward_add(attended, rows.len(), residual);
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.qkv_proj.bytes()
            + self.o_proj.bytes()
            + self
                .qk_norm
                .as_ref()
                .map_or(0, |(q, k)| q.bytes() + k.bytes())
    }
}

/// The first position a token at `position` sees: `0`, or under a sliding window of `window`
/// positions (its own included) the oldest one the window still covers.
fn first_visible(position: usize, window: Option<usize>) -> usize {
    window.map_or(0, |w| (position + 1).saturating_sub(w))
}

/// The step's new keys and values and where they go.
struct NewKv<'a> {
    /// `[T]`: each token's slot in the layer's pool.
    slots: &'a [u32],
    /// `[T, kv_heads, head_dim]`, normed and rotated.
    keys: &'a [f32],
    /// Token `i`'s values (`[kv_heads * head_dim]`) start at `values[i * value_stride]`: they
    /// are read in place from the q/k/v projection.
    values: &'a [f32],
    /// Elements from one token's values to the next's.
    value_stride: usize,
}

/// Stores the step's new keys and values at their slots in the layer's pool, then attends for
/// `queries` (`q: [queries.len(), q_dim]`; a prefill chunk sees itself causally because its
/// K/V are written first).
fn write_and_attend<E: KvElement>(
    shape: AttentionShape,
    kv: &mut LayerKv<E>,
    new: NewKv,
    queries: &[QueryView],
    q: &[f32],
    out: &mut [f32],
) {
    let AttentionShape {
        num_kv_heads,
        head_dim,
        block_size,
        ..
    } = shape;
    let kv_dim = num_kv_heads * head_dim;
    for (i, &slot) in new.slots.iter().enumerate() {
        let keys = &new.keys[i * kv_dim..][..kv_dim];
        let values = &new.values[i * new.value_stride..][..kv_dim];
        kv.write(slot as usize, keys, values, block_size, head_dim);
    }
    let paged = kv.paged(num_kv_heads, block_size, head_dim);
    paged_attention(shape, paged, queries, q, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_shows_its_last_positions_including_the_own() {
        assert_eq!(first_visible(3, None), 0);
        assert_eq!(first_visible(3, Some(2)), 2);
        assert_eq!(first_visible(1, Some(4)), 0);
        assert_eq!(first_visible(4, Some(4)), 1);
    }
}
