//! Paged attention: each query token attends to its own sequence's cached keys and values, found
//! through the sequence's block table, over the positions it sees (up to and including its own:
//! causal within a prefill chunk, since the chunk's K/V are written to the cache before this
//! runs).
//!
//! The kernel knows nothing of batches: the caller hands it, per query token, a [`QueryView`]
//! (block table, position, first visible position), and the cache as two slices with their
//! strides ([`PagedKv`]).
//!
//! Work is split per (token, key/value head); each task handles the query heads sharing that
//! K/V head, so a key row is read once per group. Every reduction runs in an order fixed by the
//! token's position (see [`super::vector`]), so a token's output does not depend on what else is
//! in the batch.

use rayon::prelude::*;

use super::vector::{best_ops, KvElement, VectorOps};

/// Static shape of one attention layer.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (`num_heads` is a multiple).
    pub num_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Positions per KV block.
    pub block_size: usize,
    /// Multiplier applied to `q · k` (usually `1 / sqrt(head_dim)`).
    pub scale: f32,
    /// Scaled scores become `cap · tanh(score / cap)` before the softmax, when set.
    pub logit_softcap: Option<f32>,
}

/// Where one query token finds its keys and values.
#[derive(Debug, Clone, Copy)]
pub struct QueryView<'a> {
    /// The physical blocks of the token's sequence in the layer's pool, in logical order
    /// (covering at least `position + 1` positions).
    pub block_table: &'a [u32],
    /// The token's own position: the last one it sees.
    pub position: usize,
    /// The first position it sees (`0`, or later under a sliding window): it attends to
    /// `first..=position`.
    pub first: usize,
}

/// One layer's cached keys and values as the kernel reads them: two slices laid out alike. The
/// row of a position `p` for KV head `g` (`head_dim` contiguous elements) starts at
/// `block_table[p / block_size] * block_stride + g * head_stride + (p % block_size) *
/// row_stride`.
#[derive(Debug)]
pub struct PagedKv<'a, E> {
    /// Cached keys.
    pub keys: &'a [E],
    /// Cached values, laid out as `keys`.
    pub values: &'a [E],
    /// Elements from one block to the next.
    pub block_stride: usize,
    /// Elements from one KV head's rows in a block to the next head's.
    pub head_stride: usize,
    /// Elements from one position's row to the next within a block and head.
    pub row_stride: usize,
}

impl<E> Clone for PagedKv<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for PagedKv<'_, E> {}

/// `out[i, h, :] = softmax_j(q[i, h] · k[j] · scale) · v[j]` over the positions `j` query
/// `queries[i]` sees. `q` and `out` are `[queries.len(), num_heads, head_dim]`.
pub fn paged_attention<E: KvElement>(
    shape: AttentionShape,
    kv: PagedKv<'_, E>,
    queries: &[QueryView<'_>],
    q: &[f32],
    out: &mut [f32],
) {
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
        ..
    } = shape;
    let group = num_heads / num_kv_heads;
    debug_assert_eq!(q.len(), queries.len() * num_heads * head_dim);
    debug_assert_eq!(out.len(), q.len());
    let ops = best_ops(head_dim);
    out.par_chunks_mut(group * head_dim)
        .enumerate()
        .for_each(|(task, out_group)| {
            let (i, g) = (task / num_kv_heads, task % num_kv_heads);
            let q_group = &q[(i * num_heads + g * group) * head_dim..][..group * head_dim];
            attend_group(ops, shape, kv, queries[i], g, q_group, out_group);
        });
}

/// Attention for the `group` query heads of one token sharing K/V head `g`.
fn attend_group<E: KvElement>(
    ops: impl VectorOps,
    shape: AttentionShape,
    kv: PagedKv<'_, E>,
    query: QueryView<'_>,
    g: usize,
    q_group: &[f32],
    out_group: &mut [f32],
) {
    let AttentionShape {
        head_dim,
        block_size,
        scale,
        logit_softcap,
        ..
    } = shape;
    let QueryView {
        block_table,
        position,
        first,
    } = query;
    let group = q_group.len() / head_dim;
    let visible = position + 1 - first;
    // Offsets of the visible positions' K/V rows, walked block by block (no per-position
    // division).
    let mut rows = Vec::with_capacity(visible);
    let mut j = first;
    while j <= position {
        let block = j / block_size;
        let block_start = block * block_size;
        let end = (block_start + block_size).min(position + 1);
        let base = block_table[block] as usize * kv.block_stride + g * kv.head_stride;
        rows.extend((j..end).map(|jj| base + (jj - block_start) * kv.row_stride));
        j = end;
    }
    // scores: [group, visible]
    let mut scores = vec![0f32; group * visible];
    ops.group_scores(q_group, head_dim, kv.keys, &rows, scale, &mut scores);
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
    ops.group_weighted_sum(&scores, kv.values, &rows, head_dim, out_group);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One KV head, one position per row: `head_dim` elements a row, `block_size` rows a block.
    fn paged<'a>(
        keys: &'a [f32],
        values: &'a [f32],
        block_size: usize,
        head_dim: usize,
    ) -> PagedKv<'a, f32> {
        PagedKv {
            keys,
            values,
            block_stride: block_size * head_dim,
            head_stride: block_size * head_dim,
            row_stride: head_dim,
        }
    }

    fn shape(head_dim: usize, block_size: usize, logit_softcap: Option<f32>) -> AttentionShape {
        AttentionShape {
            num_heads: 1,
            num_kv_heads: 1,
            head_dim,
            block_size,
            scale: 1.0,
            logit_softcap,
        }
    }

    /// Two sequences with interleaved blocks; a token's output uses only its own table's blocks.
    #[test]
    fn attention_reads_only_the_sequence_own_blocks() {
        let (head_dim, block_size) = (2, 2);
        // 4 blocks * 2 slots; seq A owns blocks [0, 2], seq B owns [1, 3].
        let keys = vec![0.0; 8 * head_dim];
        let mut values = vec![0.0; 8 * head_dim];
        for slot in 0..8 {
            let owner_b = (slot / block_size) % 2 == 1;
            values[slot * head_dim] = if owner_b { 100.0 } else { 1.0 };
        }
        let queries = [
            QueryView {
                block_table: &[0, 2],
                position: 2,
                first: 0,
            },
            QueryView {
                block_table: &[1, 3],
                position: 3,
                first: 0,
            },
        ];
        let q = vec![0.0; 2 * head_dim];
        let mut out = vec![0.0; 2 * head_dim];
        let kv = paged(&keys, &values, block_size, head_dim);
        paged_attention(
            shape(head_dim, block_size, None),
            kv,
            &queries,
            &q,
            &mut out,
        );
        // Zero queries give uniform weights: the mean of the visible values.
        assert_eq!(out[0], 1.0);
        assert_eq!(out[2], 100.0);
    }

    #[test]
    fn positions_before_the_first_visible_one_are_hidden() {
        let values = [10.0, 20.0, 30.0, 40.0];
        let kv = paged(&[0.0; 4], &values, 4, 1);
        let query = QueryView {
            block_table: &[0],
            position: 3,
            first: 2,
        };
        let mut out = vec![0.0; 1];
        paged_attention(shape(1, 4, None), kv, &[query], &[0.0], &mut out);
        assert_eq!(out[0], 35.0);
    }

    #[test]
    fn softcap_bounds_scores_before_the_softmax() {
        // Keys 0 and 10 against query 1: uncapped, position 1 takes almost all the weight;
        // capped at 1, the scores are tanh(0) and tanh(10) ≈ 1, so the weights are e⁰ : e¹.
        let (keys, values) = ([0.0, 10.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]);
        let kv = paged(&keys, &values, 4, 1);
        let query = [QueryView {
            block_table: &[0],
            position: 1,
            first: 0,
        }];
        let mut out = vec![0.0; 1];
        paged_attention(shape(1, 4, Some(1.0)), kv, &query, &[1.0], &mut out);
        let e = std::f32::consts::E;
        assert!((out[0] - e / (1.0 + e)).abs() < 1e-5, "{}", out[0]);
        paged_attention(shape(1, 4, None), kv, &query, &[1.0], &mut out);
        assert!(out[0] > 0.999, "{}", out[0]);
    }
}
