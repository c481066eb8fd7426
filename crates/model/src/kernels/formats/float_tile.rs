//! The tile kernel shared by the float formats: panels `[k, 16]` of f32 or f16 values, one FMA
//! per step from zero, so every output is `fma(x[k-1], w[k-1], … fma(x[0], w[0], 0))` whatever
//! the batch. f16 values are widened with F16C inside the loop.

use super::{Isa, PanelView, RowSpan, Tile, PANEL};
use half::f16;

/// A float panel value: f32 or f16.
pub(super) trait PanelValue: Copy + bytemuck::Pod {
    fn widen(self) -> f32;
    #[cfg(target_arch = "x86_64")]
    /// Loads 16 panel values as two f32 vectors. Safety: `ptr` is valid for 16 reads and the
    /// CPU has AVX2 and F16C.
    unsafe fn load16(ptr: *const Self) -> (std::arch::x86_64::__m256, std::arch::x86_64::__m256);
}

impl PanelValue for f32 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(ptr: *const f32) -> (std::arch::x86_64::__m256, std::arch::x86_64::__m256) {
        use std::arch::x86_64::_mm256_loadu_ps;
        (_mm256_loadu_ps(ptr), _mm256_loadu_ps(ptr.add(8)))
    }
}

impl PanelValue for f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(ptr: *const f16) -> (std::arch::x86_64::__m256, std::arch::x86_64::__m256) {
        use std::arch::x86_64::*;
        let lo = _mm_loadu_si128(ptr as *const __m128i);
        let hi = _mm_loadu_si128(ptr.add(8) as *const __m128i);
        (_mm256_cvtph_ps(lo), _mm256_cvtph_ps(hi))
    }
}

/// Packs up to 16 stored rows (little-endian `T`s) into a `[k, 16]` panel of `T`.
pub(super) fn pack_panel<T: PanelValue>(rows: &[&[u8]], k: usize, panel: &mut [u8]) {
    let panel: &mut [T] = bytemuck::cast_slice_mut(panel);
    let size = std::mem::size_of::<T>();
    for (j, row) in rows.iter().enumerate() {
        // Rows come straight from a mapped file and may be unaligned.
        for (kk, value) in row[..k * size].chunks_exact(size).enumerate() {
            panel[kk * PANEL + j] = bytemuck::pod_read_unaligned(value);
        }
    }
}

/// Row `j` of a `[k, 16]` panel, widened.
pub(super) fn unpack_row<T: PanelValue>(panel: &[u8], j: usize, out: &mut [f32]) {
    let panel: &[T] = bytemuck::cast_slice(panel);
    for (kk, o) in out.iter_mut().enumerate() {
        *o = panel[kk * PANEL + j].widen();
    }
}

/// One tile over a `[k, 16]` panel of `T`, rows `rows` of `x: [m, k]` f32.
pub(super) fn tile<T: PanelValue>(
    isa: Isa,
    panel: PanelView<'_>,
    x: &[f32],
    rows: RowSpan,
    streams: bool,
    tile: &mut Tile,
) {
    let k = panel.k;
    let panel: &[T] = bytemuck::cast_slice(&panel.bytes[..k * PANEL * std::mem::size_of::<T>()]);
    let (r0, rows) = (rows.first, rows.len);
    let x = &x[r0 * k..][..rows * k];
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::Avx2` is only detected on CPUs with avx2+fma+f16c; slices are sized.
        Isa::Avx2 | Isa::Avx512Vnni => unsafe { avx2::tile::<T>(x, k, rows, panel, streams, tile) },
        _ => portable_tile(x, k, rows, panel, tile),
    }
}

/// Scalar reference kernel with the same per-element order (`mul_add` is a fused multiply-add).
fn portable_tile<T: PanelValue>(x: &[f32], k: usize, rows: usize, panel: &[T], tile: &mut Tile) {
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

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{PanelValue, Tile, PANEL};
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
                _mm_prefetch::<_MM_HINT_T0>(
                    bp.wrapping_add((kk + PREFETCH_AHEAD) * PANEL) as *const i8
                );
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
}
