//! Paged attention: each query token attends to its own sequence's cached keys and values, found
//! through the sequence's block table, over the positions it sees (up to and including its own:
//! causal within a prefill chunk, since the chunk's K/V are written to the cache before this
//! runs; or further, to the end of an image whose tokens attend to each other, whose K/V the
//! same chunk wrote).
//!
//! The kernel knows nothing of batches: the caller hands it, per query token, a [`QueryView`]
//! (block table, position, first and last visible positions), and the cache as two slices with
//! their strides ([`PagedKv`]).
//!
//! Work is split per (run of a sequence's consecutive query tokens, key/value head); each task
//! handles the query heads sharing that K/V head, so a key row is read once per group and, for a
//! prefill chunk, once per run of up to [`QUERY_TILE`] tokens rather than once a token. Keys are
//! visited in tiles of [`KV_TILE`] absolute positions under an online softmax. Every reduction
//! runs in an order fixed by the token's position and the tile grid (see [`super::vector`]), so
//! a token's output does not depend on what else is in the batch or how its prompt is chunked.

use std::ops::Range;

use rayon::prelude::*;

use super::vector::{best_ops, exp, KvElement, VectorOps};

mod staged;
use staged::{StagedTile, TileKernels};

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
    /// (covering at least `last + 1` positions).
    pub block_table: &'a [u32],
    /// The token's own position.
    pub position: usize,
    /// The first position it sees (`0`, or later under a sliding window).
    pub first: usize,
    /// The last position it sees: `position` (causal), or later for a token that attends
    /// bidirectionally within a run (Gemma 3's image tokens). It attends to `first..=last`,
    /// whose K/V must be in the cache.
    pub last: usize,
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

/// Key/value positions one step of the online softmax takes: tiles start at multiples of this
/// absolute position, so a query meets the same tiles however the batch around it is cut.
pub const KV_TILE: usize = 64;
/// Most query tokens of one sequence that share a pass over its keys and values.
pub const QUERY_TILE: usize = 32;

/// `out[i, h, :] = softmax_j(q[i, h] · k[j] · scale) · v[j]` over the positions `j` query
/// `queries[i]` sees. `q` and `out` are `[queries.len(), num_heads, head_dim]`.
///
/// Consecutive query tokens of one sequence (a prefill chunk) run together, up to
/// [`QUERY_TILE`] of them, so each tile of keys and values is read from memory once for all of
/// them rather than once a token; each task is such a run and one K/V head. Within a task the
/// visible positions go in tiles of [`KV_TILE`] with an online softmax (a running maximum and
/// sum per query head, the accumulated output rescaled when the maximum grows), so no score row
/// longer than a tile exists. Every query's operations depend only on its own first and last
/// visible positions and the tile grid, never on the run it was in: decode (a run of one), a
/// prefill chunk and any chunking of a prompt give each token the same bits, and a causal token
/// (`last` its position) the same bits whatever the other tokens' `last` are.
pub fn paged_attention<E: KvElement>(
    shape: AttentionShape,
    kv: PagedKv<'_, E>,
    queries: &[QueryView<'_>],
    q: &[f32],
    out: &mut [f32],
) {
    attention_with(
        shape,
        kv,
        queries,
        q,
        out,
        TileKernels::best::<E>(shape.head_dim),
    );
}

/// [`paged_attention`] with the given staged-tile kernels (`None`: every run reads the cache
/// rows), so tests can run both ways on one host.
fn attention_with<E: KvElement>(
    shape: AttentionShape,
    kv: PagedKv<'_, E>,
    queries: &[QueryView<'_>],
    q: &[f32],
    out: &mut [f32],
    tiles: Option<TileKernels>,
) {
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
        ..
    } = shape;
    debug_assert_eq!(q.len(), queries.len() * num_heads * head_dim);
    debug_assert_eq!(out.len(), q.len());
    let ops = best_ops(head_dim);
    // Runs short enough that the tasks (whose cost grows with their position) balance over the
    // threads, long enough to share each K/V tile among several tokens.
    let longest = (queries.len() / (4 * rayon::current_num_threads())).clamp(4, QUERY_TILE);
    let runs = query_runs(queries, longest);
    let out_ptr = OutPtr(out.as_mut_ptr());
    (0..runs.len() * num_kv_heads)
        .into_par_iter()
        .for_each(|task| {
            let (run, g) = (runs[task / num_kv_heads].clone(), task % num_kv_heads);
            let out = |i: usize| {
                let group = num_heads / num_kv_heads;
                let at = (i * num_heads + g * group) * head_dim;
                // SAFETY: tasks own disjoint (query, K/V head) slices of `out`: each query is
                // in one run and each run meets each head once; `at + group * head_dim` is
                // within `out` since `i < queries.len()`.
                unsafe { out_ptr.slice(at, group * head_dim) }
            };
            let tiles = tiles.filter(|tiles| tiles.stages(run.len()));
            attend_run(
                ops,
                tiles,
                shape,
                kv,
                &queries[run.clone()],
                run.start,
                g,
                q,
                out,
            );
        });
}

/// Splits `queries` into runs of consecutive tokens of one sequence (the same block table,
/// positions one apart), at most `longest` long.
fn query_runs(queries: &[QueryView<'_>], longest: usize) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for (i, query) in queries.iter().enumerate() {
        if let Some(run) = runs.last_mut() {
            let last = &queries[run.end - 1];
            let same_sequence = std::ptr::eq(last.block_table, query.block_table);
            if same_sequence && query.position == last.position + 1 && run.len() < longest {
                run.end = i + 1;
                continue;
            }
        }
        runs.push(i..i + 1);
    }
    runs
}

/// A pointer to the output that tasks writing disjoint parts may share.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: only used for disjoint writes within one `paged_attention` call, which outlives its
// tasks.
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// `len` values from `at`. Safety: within the output, and no other live slice overlaps.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice<'o>(&self, at: usize, len: usize) -> &'o mut [f32] {
        std::slice::from_raw_parts_mut(self.0.add(at), len)
    }
}

/// One query head's online softmax state: the largest score so far, the sum of `e^(s − max)`
/// and the output accumulated with those weights.
struct Running {
    max: f32,
    sum: f32,
}

/// Attention for a run of query tokens of one sequence (`run`, the first at index `first_query`
/// of the batch) and the query heads sharing K/V head `g`; `out(i)` is query `i`'s output for
/// those heads.
#[allow(clippy::too_many_arguments)]
fn attend_run<'o, E: KvElement>(
    ops: impl VectorOps,
    tiles: Option<TileKernels>,
    shape: AttentionShape,
    kv: PagedKv<'_, E>,
    run: &[QueryView<'_>],
    first_query: usize,
    g: usize,
    q: &[f32],
    out: impl Fn(usize) -> &'o mut [f32],
) {
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
        block_size,
        scale,
        logit_softcap,
    } = shape;
    let group = num_heads / num_kv_heads;
    assert!(group <= MAX_GROUP, "{group} query heads share a K/V head");
    let lowest = run.iter().map(|query| query.first).min().unwrap_or(0);
    let highest = run.iter().map(|query| query.last).max().unwrap_or(0);
    let block_table = run[0].block_table;
    let mut states: Vec<Running> = (0..run.len() * group)
        .map(|_| Running {
            max: f32::NEG_INFINITY,
            sum: 0.0,
        })
        .collect();
    // acc: [run, group, head_dim]; scores: [group, tile]; partial: [group, head_dim]
    let mut acc = vec![0f32; run.len() * group * head_dim];
    let mut scores = vec![0f32; group * KV_TILE];
    let mut partial = vec![0f32; group * head_dim];
    let mut rows = Vec::with_capacity(KV_TILE);
    // The group's heads of the run's token `r`.
    let q_group =
        |r: usize| &q[((first_query + r) * num_heads + g * group) * head_dim..][..group * head_dim];
    let mut staged = tiles.map(|kernels| StagedTile::new(kernels, head_dim));
    if let Some(staged) = staged.as_mut() {
        staged.load_queries((0..run.len()).map(q_group));
    }
    for tile in lowest / KV_TILE..=highest / KV_TILE {
        let tile_start = (tile * KV_TILE).max(lowest);
        let tile_end = ((tile + 1) * KV_TILE).min(highest + 1);
        // Offsets of the tile's K/V rows, walked block by block.
        rows.clear();
        let mut j = tile_start;
        while j < tile_end {
            let block = j / block_size;
            let block_start = block * block_size;
            let end = (block_start + block_size).min(tile_end);
            let base = block_table[block] as usize * kv.block_stride + g * kv.head_stride;
            rows.extend((j..end).map(|jj| base + (jj - block_start) * kv.row_stride));
            j = end;
        }
        if let Some(staged) = staged.as_mut() {
            staged.fill(kv, &rows, tile_start - tile * KV_TILE);
        }
        for (r, query) in run.iter().enumerate() {
            let lo = query.first.max(tile_start);
            let hi = (query.last + 1).min(tile_end);
            if lo >= hi {
                continue;
            }
            let rows = &rows[lo - tile_start..hi - tile_start];
            let n = rows.len();
            let q_group = q_group(r);
            let scores = &mut scores[..group * n];
            match staged.as_mut() {
                Some(staged) => staged.scores(q_group, r, lo - tile_start, n, scale, scores),
                None => ops.group_scores(q_group, head_dim, kv.keys, rows, scale, scores),
            }
            if let Some(cap) = logit_softcap {
                scores.iter_mut().for_each(|s| *s = cap * (*s / cap).tanh());
            }
            let mut rescale = [0f32; MAX_GROUP];
            for (h, row) in scores.chunks_exact_mut(n).enumerate() {
                let state = &mut states[r * group + h];
                let tile_max = match staged.as_ref() {
                    Some(staged) => staged.max(row),
                    None => row.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                };
                let max = state.max.max(tile_max);
                // The first tile a head sees starts from nothing (no e^(−∞) to evaluate); a
                // maximum that did not grow rescales by exactly 1.
                rescale[h] = if state.max == f32::NEG_INFINITY {
                    0.0
                } else if max == state.max {
                    1.0
                } else {
                    exp(state.max - max)
                };
                let sum = match staged.as_ref() {
                    Some(staged) => staged.exp_sum(row, max),
                    None => ops.exp_sum(row, max),
                };
                state.sum = rescaled(state.sum, rescale[h], sum);
                state.max = max;
            }
            let acc = &mut acc[r * group * head_dim..][..group * head_dim];
            if let Some(staged) = staged.as_mut() {
                staged.accumulate(scores, lo - tile_start, n, &rescale[..group], acc);
                continue;
            }
            ops.group_weighted_sum(scores, kv.values, rows, head_dim, &mut partial);
            for (h, (acc, partial)) in acc
                .chunks_exact_mut(head_dim)
                .zip(partial.chunks_exact(head_dim))
                .enumerate()
            {
                match rescale[h] {
                    // `fma(a, 1, p)` is `a + p`, and `fma(0, 0, p)` is `p`: the same bits
                    // without a fused multiply-add per element (a library call where the
                    // build's target lacks FMA).
                    1.0 => acc.iter_mut().zip(partial).for_each(|(a, p)| *a += p),
                    0.0 => acc.copy_from_slice(partial),
                    alpha => acc
                        .iter_mut()
                        .zip(partial)
                        .for_each(|(a, p)| *a = a.mul_add(alpha, *p)),
                }
            }
        }
    }
    for r in 0..run.len() {
        let out = out(first_query + r);
        let acc = &acc[r * group * head_dim..][..group * head_dim];
        for (h, (out, acc)) in out
            .chunks_exact_mut(head_dim)
            .zip(acc.chunks_exact(head_dim))
            .enumerate()
        {
            let inv = 1.0 / states[r * group + h].sum;
            for (o, a) in out.iter_mut().zip(acc) {
                *o = a * inv;
            }
        }
    }
}

/// `old · rescale + new` as one fused multiply-add, short-cut where `rescale` is 1 or 0.
#[inline]
fn rescaled(old: f32, rescale: f32, new: f32) -> f32 {
    match rescale {
        1.0 => old + new,
        0.0 => new,
        _ => old.mul_add(rescale, new),
    }
}

/// Most query heads sharing one K/V head.
const MAX_GROUP: usize = 64;

#[cfg(test)]
mod tests;
