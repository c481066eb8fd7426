//! The tile kernel of the 32-weight block types: for each block, output `j` and activation row
//! `r`, the exact integer `A = Σ level·q` (less `c·Σq` for a centred type), then
//! `acc = fma(d_w·d_x, A, acc)` and, for the `_1` types, `acc = fma(m_w·d_x, Σq, acc)`, block by
//! block. Integer sums are exact in any order, so the AVX2 kernel and the portable one give the
//! same bits and a row's result never depends on the tile it is in.
//!
//! The 16-bit sums fit: a `maddubs` pair is at most `2·15·127` for 4-bit levels (8 added in 16
//! bits: 30,480), `2·31·127` for 5-bit ones (4 added: 31,496) and `2·128·127` for Q8_0's signed
//! ones (none added: 32,512).

use super::act_q8_0::{BlockQ8, Q8Rows, QK};
use super::legacy::{Offset, Scheme, CELL_OUTPUTS};
use super::{Isa, Tile, PANEL};

/// One tile against a legacy panel of `blocks` blocks, activation rows `r0..r0 + rows`.
#[allow(clippy::too_many_arguments)]
pub(super) fn tile(
    scheme: &Scheme,
    isa: Isa,
    panel: &[u8],
    blocks: usize,
    x: &Q8Rows,
    r0: usize,
    rows: usize,
    tile: &mut Tile,
) {
    let cell = scheme.cell_bytes();
    let panel = &panel[..2 * blocks * cell];
    const { assert!(PANEL == 2 * CELL_OUTPUTS) };
    for (r, tile_row) in tile.iter_mut().enumerate().take(rows) {
        let xs = &x.row(r0 + r)[..blocks];
        for (half, out) in tile_row.chunks_exact_mut(CELL_OUTPUTS).enumerate() {
            let out: &mut [f32; CELL_OUTPUTS] = out.try_into().expect("8 outputs");
            match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::Avx2` is only detected on CPUs with avx2+fma; the panel holds
                // `2 * blocks` cells and the row `blocks` blocks.
                Isa::Avx2 => unsafe { avx2::half_row(scheme, panel, half, xs, out) },
                _ => portable_half_row(scheme, panel, half, xs, out),
            }
        }
    }
}

/// Level `e` of output `i` in a cell's levels.
fn level(scheme: &Scheme, levels: &[u8], i: usize, e: usize) -> i32 {
    let (g, t) = (e / 4, e % 4);
    if scheme.bits == 4 {
        i32::from((levels[32 * (g % 4) + 4 * i + t] >> (4 * (g / 4))) & 0xF)
    } else if matches!(scheme.offset, Offset::Signed) {
        i32::from(levels[32 * g + 4 * i + t] as i8)
    } else {
        i32::from(levels[32 * g + 4 * i + t])
    }
}

fn float_at(bytes: &[u8], at: usize) -> f32 {
    f32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Scalar kernel: the same integers and the same f32 operations in the same order.
fn portable_half_row(
    scheme: &Scheme,
    panel: &[u8],
    half: usize,
    xs: &[BlockQ8],
    out: &mut [f32; CELL_OUTPUTS],
) {
    let cell_bytes = scheme.cell_bytes();
    let mut acc = [0f32; CELL_OUTPUTS];
    for (b, x) in xs.iter().enumerate() {
        let cell = &panel[(2 * b + half) * cell_bytes..][..cell_bytes];
        let (levels, floats) = cell.split_at(scheme.level_bytes());
        for (i, a) in acc.iter_mut().enumerate() {
            let mut dot: i32 = (0..QK)
                .map(|e| level(scheme, levels, i, e) * i32::from(x.qs[e]))
                .sum();
            if let Offset::Centre(c) = scheme.offset {
                dot -= c * x.sum;
            }
            let scale = float_at(floats, 4 * i) * x.d;
            *a = scale.mul_add(dot as f32, *a);
            if scheme.offset == Offset::Min {
                let min = float_at(floats, 32 + 4 * i) * x.d;
                *a = min.mul_add(x.sum as f32, *a);
            }
        }
    }
    *out = acc;
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BlockQ8, Offset, Scheme, CELL_OUTPUTS};
    use std::arch::x86_64::*;

    /// Group `g`'s 4 activation bytes in every 32-bit lane.
    #[inline(always)]
    unsafe fn group(x: &BlockQ8, g: usize) -> __m256i {
        _mm256_set1_epi32(std::ptr::read_unaligned(
            x.qs.as_ptr().add(4 * g) as *const i32
        ))
    }

    /// The 8 outputs' integer dots `Σ level·q` with one block, one per 32-bit lane.
    #[inline(always)]
    unsafe fn dots(scheme: &Scheme, levels: *const u8, x: &BlockQ8) -> __m256i {
        let ones = _mm256_set1_epi16(1);
        match (scheme.bits, scheme.offset) {
            (4, _) => {
                let mask = _mm256_set1_epi8(0x0F);
                let mut sum = _mm256_setzero_si256();
                for u in 0..4 {
                    let packed = _mm256_loadu_si256(levels.add(32 * u) as *const __m256i);
                    let lo = _mm256_and_si256(packed, mask);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(packed), mask);
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(lo, group(x, u)));
                    sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(hi, group(x, u + 4)));
                }
                _mm256_madd_epi16(sum, ones)
            }
            (_, Offset::Signed) => {
                let mut total = _mm256_setzero_si256();
                for g in 0..8 {
                    let w = _mm256_loadu_si256(levels.add(32 * g) as *const __m256i);
                    let q = _mm256_sign_epi8(group(x, g), w);
                    let pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), q);
                    total = _mm256_add_epi32(total, _mm256_madd_epi16(pairs, ones));
                }
                total
            }
            _ => {
                let mut total = _mm256_setzero_si256();
                for four in 0..2 {
                    let mut sum = _mm256_setzero_si256();
                    for g in 4 * four..4 * four + 4 {
                        let w = _mm256_loadu_si256(levels.add(32 * g) as *const __m256i);
                        sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(w, group(x, g)));
                    }
                    total = _mm256_add_epi32(total, _mm256_madd_epi16(sum, ones));
                }
                total
            }
        }
    }

    /// Safety: needs avx2+fma; `panel` holds `2 * xs.len()` cells.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn half_row(
        scheme: &Scheme,
        panel: &[u8],
        half: usize,
        xs: &[BlockQ8],
        out: &mut [f32; CELL_OUTPUTS],
    ) {
        let cell_bytes = scheme.cell_bytes();
        let level_bytes = scheme.level_bytes();
        let mut acc = _mm256_setzero_ps();
        for (b, x) in xs.iter().enumerate() {
            let cell = panel.as_ptr().add((2 * b + half) * cell_bytes);
            let mut dot = dots(scheme, cell, x);
            if let Offset::Centre(c) = scheme.offset {
                dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(c * x.sum));
            }
            let dx = _mm256_set1_ps(x.d);
            let d = _mm256_loadu_ps(cell.add(level_bytes) as *const f32);
            acc = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(dot), acc);
            if scheme.offset == Offset::Min {
                let m = _mm256_loadu_ps(cell.add(level_bytes + 32) as *const f32);
                let sum = _mm256_set1_ps(x.sum as f32);
                acc = _mm256_fmadd_ps(_mm256_mul_ps(m, dx), sum, acc);
            }
        }
        _mm256_storeu_ps(out.as_mut_ptr(), acc);
    }
}
