//! The 32-weight block types' kernel on AVX2: 8 outputs a 256-bit vector, `maddubs` pair sums
//! added in 16 bits where they fit and widened with `madd`; up to 6 rows a tile, each cell's
//! levels loaded and unpacked once for all of them (the VNNI kernel, `avx512.rs`, unpacks cells
//! with [`levels`] too). Bit for bit the portable kernel's integers and f32 operations.
//!
//! The 16-bit sums fit: a `maddubs` pair is at most `2·15·127` for 4-bit levels (8 added in 16
//! bits: 30,480), `2·31·127` for 5-bit ones (4 added: 31,496) and `2·128·127` for Q8_0's signed
//! ones (none added: 32,512).

use super::super::act_q8_0::BlockQ8;
use super::super::Tile;
use super::layout::{Offset, Scheme, CELL_OUTPUTS};
use std::arch::x86_64::*;

/// Group `g`'s 4 activation bytes in every 32-bit lane.
#[inline(always)]
unsafe fn group(x: &BlockQ8, g: usize) -> __m256i {
    _mm256_set1_epi32(std::ptr::read_unaligned(
        x.qs.as_ptr().add(4 * g) as *const i32
    ))
}

/// A cell's levels as eight vectors, one per group of four activations: `w[g]` holds
/// output `i`'s levels `4g..4g + 4` in 32-bit lane `i` (unsigned; Q8_0's offset by 128).
/// Loaded once per cell and used by every row of the tile.
#[inline(always)]
pub(super) unsafe fn levels(scheme: &Scheme, cell: *const u8) -> [__m256i; 8] {
    let load = |g: usize| _mm256_loadu_si256(cell.add(32 * g) as *const __m256i);
    let mut w = [_mm256_setzero_si256(); 8];
    if scheme.bits != 8 {
        let mask = _mm256_set1_epi8(0x0F);
        for u in 0..4 {
            let packed = load(u);
            w[u] = _mm256_and_si256(packed, mask);
            w[u + 4] = _mm256_and_si256(_mm256_srli_epi16::<4>(packed), mask);
        }
        if scheme.bits == 5 {
            // Bit `g` of each byte of the plane is the fifth bit of group `g`'s level.
            let plane = load(4);
            let one = _mm256_set1_epi8(1);
            for (g, w) in w.iter_mut().enumerate() {
                let bit = _mm256_srl_epi16(plane, _mm_cvtsi32_si128(g as i32));
                let fifth = _mm256_slli_epi16::<4>(_mm256_and_si256(bit, one));
                *w = _mm256_or_si256(*w, fifth);
            }
        }
    } else {
        for (g, w) in w.iter_mut().enumerate() {
            *w = load(g);
        }
    }
    w
}

/// The 8 outputs' integer dots `Σ level·q` with one block, one per 32-bit lane:
/// `maddubs` pairs add up in 16 bits where they fit (see the module's bounds) and widen
/// with `madd`; Q8_0's `w` holds the signed levels. Every loop has constant bounds, so `w`
/// stays in registers.
#[inline(always)]
unsafe fn dots(scheme: &Scheme, w: &[__m256i; 8], x: &BlockQ8) -> __m256i {
    let signed = matches!(scheme.offset, Offset::Signed);
    let mut total = _mm256_setzero_si256();
    let ones = _mm256_set1_epi16(1);
    if signed {
        for (g, w) in w.iter().enumerate() {
            let q = _mm256_sign_epi8(group(x, g), *w);
            let pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(*w), q);
            total = _mm256_add_epi32(total, _mm256_madd_epi16(pairs, ones));
        }
    } else if scheme.bits == 4 {
        // 4-bit levels: all eight groups add up in 16 bits.
        let mut sum = _mm256_setzero_si256();
        for (g, w) in w.iter().enumerate() {
            sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(*w, group(x, g)));
        }
        total = _mm256_madd_epi16(sum, ones);
    } else {
        // 5-bit levels: two chains of four groups.
        for (c, four) in w.chunks_exact(4).enumerate() {
            let mut sum = _mm256_setzero_si256();
            for (i, w) in four.iter().enumerate() {
                sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(*w, group(x, 4 * c + i)));
            }
            total = _mm256_add_epi32(total, _mm256_madd_epi16(sum, ones));
        }
    }
    total
}

/// Safety: needs avx2+fma; `panel` holds `2 * blocks` cells, each of `xs` (1 to 6 rows)
/// `blocks` blocks.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile(scheme: &Scheme, panel: &[u8], xs: &[&[BlockQ8]], tile: &mut Tile) {
    match xs.len() {
        1 => tile_rows::<1>(scheme, panel, xs, tile),
        2 => tile_rows::<2>(scheme, panel, xs, tile),
        3 => tile_rows::<3>(scheme, panel, xs, tile),
        4 => tile_rows::<4>(scheme, panel, xs, tile),
        5 => tile_rows::<5>(scheme, panel, xs, tile),
        _ => tile_rows::<6>(scheme, panel, xs, tile),
    }
}

/// Half by half (8 outputs), block by block: a cell's levels are loaded and unpacked once
/// for all `R` rows. Each output's accumulator sees its blocks in order with the portable
/// kernel's operations, so the rows sharing a tile change no bit.
#[inline(always)]
unsafe fn tile_rows<const R: usize>(
    scheme: &Scheme,
    panel: &[u8],
    xs: &[&[BlockQ8]],
    tile: &mut Tile,
) {
    let cell_bytes = scheme.cell_bytes();
    let level_bytes = scheme.level_bytes();
    let blocks = xs[0].len();
    let xp: [*const BlockQ8; R] = std::array::from_fn(|r| xs[r].as_ptr());
    let signed = matches!(scheme.offset, Offset::Signed);
    for half in 0..2 {
        let mut acc = [_mm256_setzero_ps(); R];
        for b in 0..blocks {
            let cell = panel.as_ptr().add((2 * b + half) * cell_bytes);
            let mut w = levels(scheme, cell);
            if signed {
                // Back to signed levels for the `maddubs` sign transfer.
                for w in &mut w {
                    *w = _mm256_xor_si256(*w, _mm256_set1_epi8(0x80u8 as i8));
                }
            }
            let d = _mm256_loadu_ps(cell.add(level_bytes) as *const f32);
            // The minimums follow the scales in `_1` cells; other cells have none (and
            // never use `m`), so they read their scales again rather than past the cell.
            let min_at = level_bytes + 32 * usize::from(scheme.offset == Offset::Min);
            let m = _mm256_loadu_ps(cell.add(min_at) as *const f32);
            for r in 0..R {
                let x = &*xp[r].add(b);
                let mut dot = dots(scheme, &w, x);
                if let Offset::Centre(c) = scheme.offset {
                    dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(c * x.sum));
                }
                let dx = _mm256_set1_ps(x.d);
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(dot), acc[r]);
                if scheme.offset == Offset::Min {
                    let sum = _mm256_set1_ps(x.sum as f32);
                    acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(m, dx), sum, acc[r]);
                }
            }
        }
        for r in 0..R {
            _mm256_storeu_ps(tile[r].as_mut_ptr().add(half * CELL_OUTPUTS), acc[r]);
        }
    }
}
