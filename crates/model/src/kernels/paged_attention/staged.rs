//! A key/value tile staged once for a run of query tokens, in one of two forms:
//!
//! - **f32** (an f32 or f16 cache, or a bf16 one on a CPU without AVX-512 BF16): keys widened
//!   to f32 and transposed (so the scores of sixteen keys fill one vector,
//!   [`Avx512::transposed_scores`]), values widened to f32 rows (summed a row at a time into
//!   every head's output at once, [`Avx512::weighted_accumulate`]). Staging copies exactly and
//!   these kernels keep the row kernels' operation order, so a token gets the same bits staged
//!   or not: decode (a run of one) and short runs read the cache rows directly.
//! - **bf16** (a bf16 cache on a CPU with AVX-512 BF16): keys transposed as pairs of elements,
//!   values interleaved as pairs of rows, for `vdpbf16ps` ([`Avx512Bf16`], whose docs give the
//!   order). These kernels have no row form, so every run stages, decode included.
//!
//! A run of up to [`super::QUERY_TILE`] tokens and a group of query heads then read the tile
//! from L1 instead of widening each cached row once per token and head.

use super::KV_TILE;
use crate::kernels::vector::KvElement;
use crate::kernels::Isa;

#[cfg(target_arch = "x86_64")]
use crate::kernels::vector::{avx512::Avx512, avx512_bf16::Avx512Bf16};

/// Shortest run of tokens that stages its tiles in f32. Staging a tile costs about what
/// scoring it for one token's heads does, so a run of one (decode) or a prompt chunk's last few
/// tokens read the rows; from four tokens on the staged kernels win (a prompt chunk's runs are
/// 4 to [`super::QUERY_TILE`] long).
const STAGED_MIN_RUN: usize = 4;

/// Columns of a staged key row: a tile, plus room for a sixteen-key vector starting at any of
/// its positions.
const STRIDE: usize = KV_TILE + 16;

/// The kernels that read a staged tile, where the CPU has them.
#[derive(Debug, Clone, Copy)]
pub(super) enum TileKernels {
    /// Widened to f32.
    #[cfg(target_arch = "x86_64")]
    F32(Avx512),
    /// A bf16 cache's own values, multiplied in bf16.
    #[cfg(target_arch = "x86_64")]
    Bf16(Avx512Bf16),
}

impl TileKernels {
    /// The staged-tile kernels of [`Isa::current`] for a cache of `E` and heads of `head_dim`,
    /// if it has them (AVX-512, and a width that is a multiple of 16).
    pub(super) fn best<E: KvElement>(head_dim: usize) -> Option<Self> {
        Self::for_isa::<E>(Isa::current(), head_dim)
    }

    /// The staged-tile kernels of `isa` for a cache of `E` and heads of `head_dim`, if this CPU
    /// runs them: the bf16 ones for a bf16 cache where `isa` has AVX-512 BF16, else the f32 ones.
    pub(super) fn for_isa<E: KvElement>(isa: Isa, head_dim: usize) -> Option<Self> {
        if !head_dim.is_multiple_of(16) {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if E::bf16_bits(&[]).is_some() {
                if let Some(bf16) = Avx512Bf16::for_isa(isa) {
                    return Some(TileKernels::Bf16(bf16));
                }
            }
            Avx512::for_isa(isa).map(TileKernels::F32)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = isa;
            None
        }
    }

    /// Whether a run of `len` tokens stages its tiles with these kernels.
    pub(super) fn stages(self, len: usize) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            TileKernels::F32(_) => len >= STAGED_MIN_RUN,
            #[cfg(target_arch = "x86_64")]
            TileKernels::Bf16(_) => true,
        }
    }
}

/// One task's staging buffers, refilled tile by tile.
pub(super) struct StagedTile {
    head_dim: usize,
    form: Form,
}

/// The kernels of a staged tile with the buffers they read.
enum Form {
    #[cfg(target_arch = "x86_64")]
    F32 {
        kernels: Avx512,
        /// `[head_dim, STRIDE]`: element `c` of the tile's key `j` at `c * STRIDE + j`.
        keys_t: Vec<f32>,
        /// `[KV_TILE, head_dim]`: the tile's value rows.
        values: Vec<f32>,
    },
    #[cfg(target_arch = "x86_64")]
    Bf16 {
        kernels: Avx512Bf16,
        /// `[head_dim / 2, STRIDE]` pairs of key elements.
        keys_p: Vec<u32>,
        /// `[KV_TILE / 2, head_dim]` pairs of value rows.
        values_p: Vec<u32>,
        /// The tile index of the first staged row (tiles are paired from their first absolute
        /// position).
        skip: usize,
        /// The run's queries rounded to pairs, `[run, heads of the group, head_dim / 2]`
        /// ([`StagedTile::load_queries`]).
        queries_p: Vec<u32>,
        /// Weights rounded to pairs (scratch).
        packed: Vec<u32>,
    },
}

impl StagedTile {
    pub(super) fn new(kernels: TileKernels, head_dim: usize) -> Self {
        let form = match kernels {
            #[cfg(target_arch = "x86_64")]
            TileKernels::F32(kernels) => Form::F32 {
                kernels,
                keys_t: vec![0.0; head_dim * STRIDE],
                values: vec![0.0; KV_TILE * head_dim],
            },
            #[cfg(target_arch = "x86_64")]
            TileKernels::Bf16(kernels) => Form::Bf16 {
                kernels,
                keys_p: vec![0; head_dim / 2 * STRIDE],
                values_p: vec![0; KV_TILE / 2 * head_dim],
                skip: 0,
                queries_p: Vec::new(),
                packed: Vec::new(),
            },
        };
        Self { head_dim, form }
    }

    /// Takes the queries of a run once, before its tiles: `rows` yields each token's heads of
    /// the group (`[heads, head_dim]`), in run order. The bf16 kernels round them to pairs here
    /// rather than once per tile.
    pub(super) fn load_queries<'q>(&mut self, rows: impl ExactSizeIterator<Item = &'q [f32]>) {
        match &mut self.form {
            #[cfg(target_arch = "x86_64")]
            Form::F32 { .. } => {}
            #[cfg(target_arch = "x86_64")]
            Form::Bf16 {
                kernels, queries_p, ..
            } => {
                queries_p.clear();
                for q in rows {
                    let at = queries_p.len();
                    queries_p.resize(at + q.len() / 2, 0);
                    kernels.round_pairs(q, &mut queries_p[at..]);
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = rows;
    }

    /// Stages the rows at `rows` (offsets into the cache's keys and values, at most a tile),
    /// the first of which is `skip` positions into its tile.
    pub(super) fn fill<E: KvElement>(
        &mut self,
        kv: super::PagedKv<'_, E>,
        rows: &[usize],
        skip: usize,
    ) {
        let d = self.head_dim;
        match &mut self.form {
            #[cfg(target_arch = "x86_64")]
            Form::F32 {
                kernels,
                keys_t,
                values,
            } => kernels.stage_tile(kv.keys, kv.values, rows, d, keys_t, STRIDE, values),
            #[cfg(target_arch = "x86_64")]
            Form::Bf16 {
                kernels,
                keys_p,
                values_p,
                skip: staged_skip,
                ..
            } => {
                let (Some(keys), Some(values)) = (E::bf16_bits(kv.keys), E::bf16_bits(kv.values))
                else {
                    unreachable!("bf16 kernels are chosen for bf16 caches only")
                };
                *staged_skip = skip;
                kernels.stage_tile(
                    keys, values, rows, skip, KV_TILE, d, keys_p, STRIDE, values_p,
                );
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (kv, rows, skip);
    }

    /// `out[h * n + j] = scale · (q_h · key(first + j))` for the staged keys `first..first + n`
    /// (counted from the first staged row) and the heads of `q`, the queries of token `r` of the
    /// run (which the bf16 kernels read as [`StagedTile::load_queries`] rounded them).
    pub(super) fn scores(
        &mut self,
        q: &[f32],
        r: usize,
        first: usize,
        n: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let d = self.head_dim;
        match &self.form {
            #[cfg(target_arch = "x86_64")]
            Form::F32 {
                kernels, keys_t, ..
            } => kernels.transposed_scores(q, d, keys_t, STRIDE, first, n, scale, out),
            #[cfg(target_arch = "x86_64")]
            Form::Bf16 {
                kernels,
                keys_p,
                skip,
                queries_p,
                ..
            } => kernels.scores(
                &queries_p[r * q.len() / 2..][..q.len() / 2],
                d,
                keys_p,
                STRIDE,
                skip + first,
                n,
                scale,
                out,
            ),
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (q, r, first, n, scale, out);
    }

    /// Adds the staged values `first..first + n` weighted by `weights: [heads, n]` into each
    /// head's running output `acc: [heads, head_dim]`, which is first rescaled by `rescale[h]`
    /// (the online softmax's step; see [`Avx512::weighted_accumulate`] for the order, which is
    /// the row kernels', and [`Avx512Bf16`] for bf16's).
    pub(super) fn accumulate(
        &mut self,
        weights: &[f32],
        first: usize,
        n: usize,
        rescale: &[f32],
        acc: &mut [f32],
    ) {
        let d = self.head_dim;
        match &mut self.form {
            #[cfg(target_arch = "x86_64")]
            Form::F32 {
                kernels, values, ..
            } => kernels.weighted_accumulate(weights, values, first, n, d, rescale, acc),
            #[cfg(target_arch = "x86_64")]
            Form::Bf16 {
                kernels,
                values_p,
                skip,
                packed,
                ..
            } => kernels.accumulate(weights, values_p, *skip + first, n, d, rescale, acc, packed),
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (weights, first, n, rescale, acc);
    }

    /// The f32 kernels of either form.
    #[cfg(target_arch = "x86_64")]
    fn f32(&self) -> Avx512 {
        match &self.form {
            Form::F32 { kernels, .. } => *kernels,
            Form::Bf16 { kernels, .. } => kernels.f32(),
        }
    }

    /// `x[i] = e^(x[i] - shift)`, returning their sum: [`super::VectorOps::exp_sum`]'s bits.
    pub(super) fn exp_sum(&self, x: &mut [f32], shift: f32) -> f32 {
        #[cfg(target_arch = "x86_64")]
        return self.f32().exp_sum(x, shift);
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no staged kernels off x86-64: {x:?} {shift}")
    }

    /// The largest of `x` (non-empty scores, no NaN).
    pub(super) fn max(&self, x: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        return self.f32().max(x);
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no staged kernels off x86-64: {x:?}")
    }
}
