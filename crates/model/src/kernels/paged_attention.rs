//! Paged attention: each new token attends to its own sequence's cached keys and values, found
//! through the sequence's block table, up to and including its own position (causal within a
//! prefill chunk, since the chunk's K/V are written to the cache before this runs).
//!
//! Work is split per (token, key/value head); each task handles the query heads sharing that
//! K/V head, so a key row is read once per group. Every reduction runs in an order fixed by the
//! token's position (see [`super::vector`]), so a token's output does not depend on what else is
//! in the batch.

use rayon::prelude::*;

use super::vector::{best_ops, KvElement, VectorOps};
use crate::batch::Batch;
use crate::kv_cache::{row_offset, LayerKv};
use crate::kv_layout::KvGroupId;

/// Static shape of one attention layer.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (`num_heads` is a multiple).
    pub num_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// The KV group whose pool holds the layer's keys and values (whose block tables to read).
    pub group: KvGroupId,
    /// Only the last `window` positions (including the token's own) are visible, when set.
    pub sliding_window: Option<usize>,
    /// Multiplier applied to `q · k` (usually `1 / sqrt(head_dim)`).
    pub scale: f32,
    /// Scaled scores become `cap · tanh(score / cap)` before the softmax, when set.
    pub logit_softcap: Option<f32>,
}

/// `out[i, h, :] = softmax_j(q[i, h] · k[j] · scale) · v[j]` over the visible cached positions
/// `j` of batch token `t = tokens[i]`'s sequence. `q` and `out` are `[tokens.len(), num_heads,
/// head_dim]`; `token_seq[t]` is the index in `batch.seqs` of token `t`'s sequence.
pub fn paged_attention<E: KvElement>(
    shape: AttentionShape,
    batch: &Batch,
    token_seq: &[usize],
    tokens: &[usize],
    q: &[f32],
    kv: &LayerKv<E>,
    out: &mut [f32],
) {
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
        ..
    } = shape;
    let group = num_heads / num_kv_heads;
    debug_assert_eq!(q.len(), tokens.len() * num_heads * head_dim);
    debug_assert_eq!(out.len(), q.len());
    let ops = best_ops(head_dim);
    out.par_chunks_mut(group * head_dim)
        .enumerate()
        .for_each(|(task, out_group)| {
            let (i, g) = (task / num_kv_heads, task % num_kv_heads);
            let q_group = &q[(i * num_heads + g * group) * head_dim..][..group * head_dim];
            let t = tokens[i];
            let seq = &batch.seqs[token_seq[t]];
            let position = batch.positions[t] as usize;
            attend_group(
                ops,
                shape,
                seq.table(shape.group),
                position,
                g,
                q_group,
                kv,
                out_group,
            );
        });
}

/// Attention for the `group` query heads of one token sharing K/V head `g`.
#[allow(clippy::too_many_arguments)]
fn attend_group<E: KvElement>(
    ops: impl VectorOps,
    shape: AttentionShape,
    block_table: &[u32],
    position: usize,
    g: usize,
    q_group: &[f32],
    kv: &LayerKv<E>,
    out_group: &mut [f32],
) {
    let AttentionShape {
        num_kv_heads,
        head_dim,
        block_size,
        sliding_window,
        scale,
        logit_softcap,
        ..
    } = shape;
    let group = q_group.len() / head_dim;
    let first = sliding_window.map_or(0, |w| (position + 1).saturating_sub(w));
    let visible = position + 1 - first;
    // Offsets of the visible positions' K/V rows, walked block by block (no per-position
    // division).
    let mut rows = Vec::with_capacity(visible);
    let mut j = first;
    while j <= position {
        let block = j / block_size;
        let block_start = block * block_size;
        let slot_base = block_table[block] as usize * block_size;
        let end = (block_start + block_size).min(position + 1);
        // Rows of one head within a block are contiguous (see `LayerKv`).
        let base = row_offset(slot_base, g, num_kv_heads, block_size, head_dim);
        rows.extend((j..end).map(|jj| base + (jj - block_start) * head_dim));
        j = end;
    }
    // scores: [group, visible]
    let mut scores = vec![0f32; group * visible];
    ops.group_scores(q_group, head_dim, &kv.keys, &rows, scale, &mut scores);
    if let Some(cap) = logit_softcap {
        scores.iter_mut().for_each(|s| *s = cap * (*s / cap).tanh());
    }
    for row in scores.chunks_exact_mut(visible) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let inv = 1.0 / ops.exp_sum(row, max);
        for s in row.iter_mut() {
            *s *= inv;
        }
    }
    ops.group_weighted_sum(&scores, &kv.values, &rows, head_dim, out_group);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sequences with interleaved blocks; a token's output uses only its own sequence.
    #[test]
    fn attention_reads_only_the_sequence_own_blocks() {
        let (head_dim, block_size) = (2, 2);
        let shape = AttentionShape {
            num_heads: 1,
            num_kv_heads: 1,
            head_dim,
            block_size,
            group: crate::kv_layout::FULL_GROUP,
            sliding_window: None,
            scale: 1.0,
            logit_softcap: None,
        };
        // 4 blocks * 2 slots; seq A owns blocks [0, 2], seq B owns [1, 3].
        let mut kv = LayerKv {
            keys: vec![0.0; 8 * head_dim],
            values: vec![0.0; 8 * head_dim],
        };
        for slot in 0..8 {
            let owner_b = (slot / block_size) % 2 == 1;
            kv.values[slot * head_dim] = if owner_b { 100.0 } else { 1.0 };
        }
        let mut batch = Batch::default();
        batch.push_sequence(&[5], 2, vec![0, 2], block_size, true);
        batch.push_sequence(&[6], 3, vec![1, 3], block_size, true);
        let q = vec![0.0; 2 * head_dim];
        let mut out = vec![0.0; 2 * head_dim];
        paged_attention(shape, &batch, &[0, 1], &[0, 1], &q, &kv, &mut out);
        // Zero queries give uniform weights: the mean of the visible values.
        assert_eq!(out[0], 1.0);
        assert_eq!(out[2], 100.0);
    }

    #[test]
    fn sliding_window_hides_old_positions() {
        let shape = AttentionShape {
            num_heads: 1,
            num_kv_heads: 1,
            head_dim: 1,
            block_size: 4,
            group: crate::kv_layout::FULL_GROUP,
            sliding_window: Some(2),
            scale: 1.0,
            logit_softcap: None,
        };
        let kv = LayerKv {
            keys: vec![0.0; 4],
            values: vec![10.0, 20.0, 30.0, 40.0],
        };
        let mut batch = Batch::default();
        batch.push_sequence(&[1], 3, vec![0], 4, true);
        let mut out = vec![0.0; 1];
        paged_attention(shape, &batch, &[0], &[0], &[0.0], &kv, &mut out);
        assert_eq!(out[0], 35.0);
    }

    #[test]
    fn softcap_bounds_scores_before_the_softmax() {
        // Keys 0 and 10 against query 1: uncapped, position 1 takes almost all the weight;
        // capped at 1, the scores are tanh(0) and tanh(10) ≈ 1, so the weights are e⁰ : e¹.
        let shape = AttentionShape {
            num_heads: 1,
            num_kv_heads: 1,
            head_dim: 1,
            block_size: 4,
            group: crate::kv_layout::FULL_GROUP,
            sliding_window: None,
            scale: 1.0,
            logit_softcap: Some(1.0),
        };
        let kv = LayerKv {
            keys: vec![0.0, 10.0, 0.0, 0.0],
            values: vec![0.0, 1.0, 0.0, 0.0],
        };
        let mut batch = Batch::default();
        batch.push_sequence(&[1], 1, vec![0], 4, true);
        let mut out = vec![0.0; 1];
        paged_attention(shape, &batch, &[0], &[0], &[1.0], &kv, &mut out);
        let e = std::f32::consts::E;
        assert!((out[0] - e / (1.0 + e)).abs() < 1e-5, "{}", out[0]);
        let uncapped = AttentionShape {
            logit_softcap: None,
            ..shape
        };
        paged_attention(uncapped, &batch, &[0], &[0], &[1.0], &kv, &mut out);
        assert!(out[0] > 0.999, "{}", out[0]);
    }
}
