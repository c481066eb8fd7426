//! The float tile kernel on AVX2+FMA+F16C: up to 6 rows × 16 outputs in 12 accumulators, one
//! FMA per row and `k` step, f16 panels widened with F16C as they load; the first tile of a
//! panel prefetches ahead. The same FMA chain per output as `portable.rs`, so the same bits.

use super::super::{Tile, PANEL};
use super::PanelValue;
use std::arch::x86_64::*;

/// How many k-steps ahead a streaming tile prefetches its panel (64 steps of 16 values).
const PREFETCH_AHEAD: usize = 64;

#[inline(always)]
unsafe fn tile_rows<T: PanelValue, const R: usize>(
    x: &[f32],
    k: usize,
    panel: &[T],
    streams: bool,
    tile: &mut Tile,
) {
    let mut lo = [_mm256_setzero_ps(); R];
    let mut hi = [_mm256_setzero_ps(); R];
    let xp = x.as_ptr();
    let bp = panel.as_ptr();
    for kk in 0..k {
        if streams && kk % 2 == 0 {
            // A hint, never a read: past the panel's end it only warms the next panel.
            _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add((kk + PREFETCH_AHEAD) * PANEL) as *const i8);
        }
        let (b0, b1) = T::load16(bp.add(kk * PANEL));
        for r in 0..R {
            let a = _mm256_set1_ps(*xp.add(r * k + kk));
            lo[r] = _mm256_fmadd_ps(a, b0, lo[r]);
            hi[r] = _mm256_fmadd_ps(a, b1, hi[r]);
        }
    }
    for r in 0..R {
        _mm256_storeu_ps(tile[r].as_mut_ptr(), lo[r]);
        _mm256_storeu_ps(tile[r].as_mut_ptr().add(8), hi[r]);
    }
}

/// Safety: needs avx2+fma+f16c; `x` holds `rows * k`, `panel` `k * 16` values.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile<T: PanelValue>(
    x: &[f32],
    k: usize,
    rows: usize,
    panel: &[T],
    streams: bool,
    tile: &mut Tile,
) {
    match rows {
        1 => tile_rows::<T, 1>(x, k, panel, streams, tile),
        2 => tile_rows::<T, 2>(x, k, panel, streams, tile),
        3 => tile_rows::<T, 3>(x, k, panel, streams, tile),
        4 => tile_rows::<T, 4>(x, k, panel, streams, tile),
        5 => tile_rows::<T, 5>(x, k, panel, streams, tile),
        _ => tile_rows::<T, 6>(x, k, panel, streams, tile),
    }
}
