//! The bf16 tile kernel in plain Rust: one lane of `vdpbf16ps` at a time (the module docs'
//! order), the bit-exact reference of `avx512.rs`.

use super::super::act_bf16::Bf16Rows;
use super::super::{RowSpan, Tile, PANEL};

/// `x` with a denormal read as a zero of its sign.
fn daz(x: f32) -> f32 {
    if x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

/// The low (`shift` 0) or high (`shift` 16) bf16 of a pair, widened, a denormal read as zero.
fn half(pair: u32, shift: u32) -> f32 {
    daz(f32::from_bits((pair >> shift) << 16))
}

/// `acc` plus the two products of a pair: the odd elements' first, each fused and flushed.
pub(super) fn pair(acc: f32, x: u32, w: u32) -> f32 {
    let acc = daz(half(x, 16).mul_add(half(w, 16), daz(acc)));
    daz(half(x, 0).mul_add(half(w, 0), acc))
}

pub(super) fn tile(x: &Bf16Rows, rows: RowSpan, panel: &[u32], tile: &mut Tile) {
    for (r, tile_row) in tile.iter_mut().enumerate().take(rows.len) {
        let mut acc = [0f32; PANEL];
        for c in 0..x.pairs_per_row() {
            let xv = x.pair(rows.first + r, c);
            for (j, a) in acc.iter_mut().enumerate() {
                *a = pair(*a, xv, panel[c * PANEL + j]);
            }
        }
        *tile_row = acc;
    }
}
