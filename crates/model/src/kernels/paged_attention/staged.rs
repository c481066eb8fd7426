//! A key/value tile staged once for a run of prompt tokens: keys widened to f32 and transposed
//! (so the scores of sixteen keys fill one vector, [`Avx512::transposed_scores`]), values
//! widened to f32 rows (summed a row at a time into every head's output at once,
//! [`Avx512::weighted_accumulate`]). A run of up to [`super::QUERY_TILE`] tokens and a group of query heads
//! then read the tile from L1 instead of widening each cached row once per token and head.
//!
//! Staging copies exactly (widening is exact) and the staged kernels keep the row kernels'
//! operation order, so a token gets the same bits staged or not: decode (a run of one) and
//! short runs read the cache rows directly.

use super::KV_TILE;
use crate::kernels::vector::KvElement;
use crate::kernels::Isa;

#[cfg(target_arch = "x86_64")]
use crate::kernels::vector::avx512::Avx512;

/// Shortest run of tokens that stages its tiles. Staging a tile costs about what scoring it
/// for one token's heads does, so a run of one (decode) or a prompt chunk's last few tokens
/// read the rows; from four tokens on the staged kernels win (a prompt chunk's runs are 4 to
/// [`super::QUERY_TILE`] long).
pub(super) const STAGED_MIN_RUN: usize = 4;

/// Columns of a staged key row: a tile, plus room for a sixteen-key vector starting at any of
/// its positions.
const STRIDE: usize = KV_TILE + 16;

/// The kernels that read a staged tile, where the CPU has them.
#[derive(Debug, Clone, Copy)]
pub(super) struct TileKernels {
    #[cfg(target_arch = "x86_64")]
    avx512: Avx512,
}

impl TileKernels {
    /// The staged-tile kernels of [`Isa::current`] for heads of `head_dim`, if it has them
    /// (AVX-512, and a width that is a multiple of 16).
    pub(super) fn best(head_dim: usize) -> Option<Self> {
        Self::for_isa(Isa::current(), head_dim)
    }

    /// The staged-tile kernels of `isa` for heads of `head_dim`, if this CPU runs them.
    pub(super) fn for_isa(isa: Isa, head_dim: usize) -> Option<Self> {
        if !head_dim.is_multiple_of(16) {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        {
            Avx512::for_isa(isa).map(|avx512| TileKernels { avx512 })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = isa;
            None
        }
    }
}

/// One task's staging buffers, refilled tile by tile.
pub(super) struct StagedTile {
    kernels: TileKernels,
    head_dim: usize,
    /// `[head_dim, STRIDE]`: element `c` of the tile's key `j` at `c * STRIDE + j`.
    keys_t: Vec<f32>,
    /// `[KV_TILE, head_dim]`: the tile's value rows.
    values: Vec<f32>,
}

impl StagedTile {
    pub(super) fn new(kernels: TileKernels, head_dim: usize) -> Self {
        Self {
            kernels,
            head_dim,
            keys_t: vec![0.0; head_dim * STRIDE],
            values: vec![0.0; KV_TILE * head_dim],
        }
    }

    /// Stages the rows at `rows` (offsets into the cache's keys and values, at most a tile).
    pub(super) fn fill<E: KvElement>(&mut self, kv: super::PagedKv<'_, E>, rows: &[usize]) {
        #[cfg(target_arch = "x86_64")]
        self.kernels.avx512.stage_tile(
            kv.keys,
            kv.values,
            rows,
            self.head_dim,
            &mut self.keys_t,
            STRIDE,
            &mut self.values,
        );
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (kv, rows);
    }

    /// `out[h * n + j] = scale · (q_h · key(first + j))` for the staged keys `first..first + n`
    /// and the heads of `q`.
    pub(super) fn scores(&self, q: &[f32], first: usize, n: usize, scale: f32, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        self.kernels.avx512.transposed_scores(
            q,
            self.head_dim,
            &self.keys_t,
            STRIDE,
            first,
            n,
            scale,
            out,
        );
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (q, first, n, scale, out);
    }

    /// Adds the staged values `first..first + n` weighted by `weights: [heads, n]` into each
    /// head's running output `acc: [heads, head_dim]`, which is first rescaled by `rescale[h]`
    /// (the online softmax's step; see [`Avx512::weighted_accumulate`] for the order, which is
    /// the row kernels').
    pub(super) fn accumulate(
        &self,
        weights: &[f32],
        first: usize,
        n: usize,
        rescale: &[f32],
        acc: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        self.kernels.avx512.weighted_accumulate(
            weights,
            &self.values,
            first,
            n,
            self.head_dim,
            rescale,
            acc,
        );
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (weights, first, n, rescale, acc);
    }

    /// `x[i] = e^(x[i] - shift)`, returning their sum: [`super::VectorOps::exp_sum`]'s bits.
    pub(super) fn exp_sum(&self, x: &mut [f32], shift: f32) -> f32 {
        #[cfg(target_arch = "x86_64")]
        return self.kernels.avx512.exp_sum(x, shift);
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no staged kernels off x86-64: {x:?} {shift}")
    }

    /// The largest of `x` (non-empty scores, no NaN).
    pub(super) fn max(&self, x: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        return self.kernels.avx512.max(x);
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no staged kernels off x86-64: {x:?}")
    }
}
