//! The float formats (`f32.rs`, `f16.rs`) and the tile kernel they share: panels `[k, 16]` of
//! f32 or f16 values, one FMA per step from zero, so every output is
//! `fma(x[k-1], w[k-1], … fma(x[0], w[0], 0))` whatever the batch. f16 values are widened with
//! F16C inside the loop. This file packs panels and picks the kernel: `portable.rs` (the
//! bit-exact reference) or `avx2.rs`.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod f16;
mod f32;
mod portable;

use super::{Isa, PanelView, RowSpan, Tile, PANEL};

pub use self::f16::F16;
pub use self::f32::F32;

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

impl PanelValue for half::f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(
        ptr: *const half::f16,
    ) -> (std::arch::x86_64::__m256, std::arch::x86_64::__m256) {
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
        Isa::Avx2 | Isa::Avx512Vnni | Isa::Amx => unsafe {
            avx2::tile::<T>(x, k, rows, panel, streams, tile)
        },
        _ => portable::tile(x, k, rows, panel, tile),
    }
}
