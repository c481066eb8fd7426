//! The tile kernel of the K-quant types, portable (the bit-exact reference of `avx2.rs` and
//! `avx512.rs`): unsigned weight levels times Q8_K activation bytes in
//! integer arithmetic, scales applied per sub-block in integer, `d`/`dmin` once per super-block.
//!
//! For each super-block `b`, output `j` and activation row `r` the kernel forms two exact
//! integers, `A = Σ_s scale[s] · Σ_{i∈s} level[i] · q[i]` and `B = Σ_s min[s] · bsum[s]` (with
//! minimums) or `B = Σ_s scale[s] · bsum[s]` (centred types, where `A − B·centre` is taken in
//! integer), and then updates one f32 accumulator per `(r, j)`:
//! `acc = fma(dx·d, A, acc)` and, with minimums, `acc = fma(−(dx·dmin), B, acc)`, super-block by
//! super-block. Integer sums are exact whatever their order, so the vector kernel and the
//! portable one give the same bits, and a row's result never depends on the tile it is in.
//!
//! The sums fit: a `maddubs` pair is at most `2 · 63 · 127 < 2^15`, as many pairs are added in
//! 16 bits as `Scheme::chain` allows (4 for levels up to 31, 2 for Q6_K's 63), and `|A| ≤ 256 ·
//! 128 · 63 · 127 < 2^31`.

use super::super::act_q8k::{BlockQ8K, QK_K};
use super::super::{Tile, PANEL, TILE_ROWS};
use super::layout::{read_cell_row, KBlock, Offset, CELL_OUTPUTS};
use super::KQuant;

/// The integers `(A, B)` of one output's super-block against one activation block, with `A`
/// already reduced by `B · centre` for centred types.
fn block_sums(w: &KBlock, sub: usize, offset: Offset, x: &BlockQ8K) -> (i32, i32) {
    let mut a = 0i32;
    let mut b = 0i32;
    for s in 0..QK_K / sub {
        let dot: i32 = w.levels[s * sub..][..sub]
            .iter()
            .zip(&x.qs[s * sub..][..sub])
            .map(|(&l, &q)| i32::from(l) * i32::from(q))
            .sum();
        let scale = i32::from(w.scales[s]);
        a += scale * dot;
        let bsum = i32::from(if sub == 32 {
            x.bsums32[s]
        } else {
            x.bsums16[s]
        });
        b += match offset {
            Offset::Min => i32::from(w.mins[s]) * bsum,
            Offset::Centre(_) => scale * bsum,
        };
    }
    match offset {
        Offset::Min => (a, b),
        Offset::Centre(shift) => (a - (b << shift), b),
    }
}

/// Scalar kernel: the same integers and the same f32 operations in the same order.
pub(super) fn tile<Q: KQuant>(panel: &[u8], blocks: usize, xs: &[&[BlockQ8K]], tile: &mut Tile) {
    let scheme = Q::SCHEME;
    let mut acc = [[0f32; PANEL]; TILE_ROWS];
    for b in 0..blocks {
        for half in 0..2 {
            let cell = &panel[(2 * b + half) * scheme.cell_bytes()..][..scheme.cell_bytes()];
            for jj in 0..CELL_OUTPUTS {
                let w = read_cell_row(&scheme, cell, jj);
                let j = half * CELL_OUTPUTS + jj;
                for (x, acc) in xs.iter().zip(acc.iter_mut()) {
                    let x = &x[b];
                    let (a, bsum) = block_sums(&w, scheme.sub, scheme.offset, x);
                    acc[j] = (x.d * w.d).mul_add(a as f32, acc[j]);
                    if scheme.has_min() {
                        acc[j] = (-(x.d * w.dmin)).mul_add(bsum as f32, acc[j]);
                    }
                }
            }
        }
    }
    tile[..xs.len()].copy_from_slice(&acc[..xs.len()]);
}
