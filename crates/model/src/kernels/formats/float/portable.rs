//! The float tile kernel in plain Rust, the bit-exact reference of `avx2.rs`: every output is
//! `fma(x[k-1], w[k-1], … fma(x[0], w[0], 0))`.

use super::super::{Tile, PANEL};
use super::PanelValue;

/// Scalar reference kernel with the same per-element order (`mul_add` is a fused multiply-add).
pub(super) fn tile<T: PanelValue>(x: &[f32], k: usize, rows: usize, panel: &[T], tile: &mut Tile) {
    for (r, tile_row) in tile.iter_mut().enumerate().take(rows) {
        let x_row = &x[r * k..][..k];
        let mut acc = [0f32; PANEL];
        for (kk, &xv) in x_row.iter().enumerate() {
            for (j, a) in acc.iter_mut().enumerate() {
                *a = xv.mul_add(panel[kk * PANEL + j].widen(), *a);
            }
        }
        *tile_row = acc;
    }
}
