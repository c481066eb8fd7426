//! The 32-weight block types' kernel on AVX-512 VNNI: 16 outputs a 512-bit vector, each
//! `vpdpbusd` multiplying one group of 4 activation bytes of a row into all 16 outputs, up to 8
//! rows a tile. A panel is read either packed (two 8-output cells a block, unpacked and joined
//! by the kernel as it goes) or expanded: unpacked once into whole bytes by [`expand`] for a
//! call that runs many row tiles against it (prefill), which then only loads. Per output lane
//! the same integers and the same FMA sequence as the AVX2 and portable kernels, so the same
//! bits in either form.

use std::arch::x86_64::*;

use super::super::act_q8_0::BlockQ8;
use super::super::{Prefetch, Tile};
use super::avx2::levels;
use super::layout::{Offset, Scheme, SIGNED_BIAS};

/// How far ahead (in blocks) a streaming tile prefetches its panel.
const PREFETCH_BLOCKS: usize = 2;
/// Bytes of one group of an expanded block: 16 outputs' 4 levels.
const GROUP_BYTES: usize = 64;

/// Bytes of one expanded block: its 8 groups, the 16 scales and, for the `_1` types, the 16
/// minimums.
pub(super) const fn expanded_block_bytes(scheme: &Scheme) -> usize {
    let floats = if matches!(scheme.offset, Offset::Min) {
        2
    } else {
        1
    };
    8 * GROUP_BYTES + floats * 64
}

/// The scheme of `BITS`-bit levels less `2^SHIFT` (none when 0), or plus a minimum.
const fn scheme_of(bits: u32, shift: u32, min: bool) -> Scheme {
    Scheme {
        bits,
        offset: match (min, bits, shift) {
            (true, _, _) => Offset::Min,
            (false, 8, _) => Offset::Signed,
            (false, _, _) => Offset::Centre(1 << shift),
        },
    }
}

/// Calls `$f::<BITS, SHIFT, MIN, ...>` for `scheme`: one kernel per type, so the block loop has
/// no branch on the scheme.
macro_rules! per_scheme {
    ($scheme:expr, $f:ident $(::<$($pre:tt),*>)? ($($arg:expr),*)) => {
        match ($scheme.bits, $scheme.offset) {
            (8, Offset::Signed) => $f::<$($($pre,)*)? 8, 7, false>($($arg),*),
            (4, Offset::Centre(8)) => $f::<$($($pre,)*)? 4, 3, false>($($arg),*),
            (5, Offset::Centre(16)) => $f::<$($($pre,)*)? 5, 4, false>($($arg),*),
            (4, Offset::Min) => $f::<$($($pre,)*)? 4, 0, true>($($arg),*),
            (5, Offset::Min) => $f::<$($($pre,)*)? 5, 0, true>($($arg),*),
            _ => unreachable!("no 32-weight block type has the scheme {:?}", $scheme),
        }
    };
}

/// One tile: `panel` packed (prefetching as `prefetch` says) or, with `expanded`, as [`expand`]
/// wrote it. Safety: needs avx2+fma+avx512f+avx512vnni+avx512vl; the panel holds the blocks of
/// every row of `xs` (1 to 8 rows).
#[target_feature(enable = "avx2,fma,avx512f,avx512vnni,avx512vl")]
pub(super) unsafe fn tile(
    scheme: &Scheme,
    panel: &[u8],
    xs: &[&[BlockQ8]],
    expanded: bool,
    prefetch: Prefetch,
    tile: &mut Tile,
) {
    const { assert!(SIGNED_BIAS as i32 == 1 << 7) };
    match expanded {
        true => per_scheme!(scheme, rows::<true>(panel, xs, prefetch, tile)),
        false => per_scheme!(scheme, rows::<false>(panel, xs, prefetch, tile)),
    }
}

/// Writes the `blocks` blocks of a packed panel into `out` as whole bytes, 16 outputs a vector.
/// Safety: as [`tile`]; `panel` holds `blocks` packed blocks and `out` as many expanded ones.
#[target_feature(enable = "avx2,fma,avx512f,avx512vnni,avx512vl")]
pub(super) unsafe fn expand(scheme: &Scheme, panel: &[u8], blocks: usize, out: &mut [u8]) {
    assert!(panel.len() >= 2 * blocks * scheme.cell_bytes());
    assert!(out.len() >= blocks * expanded_block_bytes(scheme));
    per_scheme!(scheme, expand_with(panel, blocks, out))
}

#[inline(always)]
unsafe fn expand_with<const BITS: u32, const SHIFT: u32, const MIN: bool>(
    panel: &[u8],
    blocks: usize,
    out: &mut [u8],
) {
    let scheme = &const { scheme_of(BITS, SHIFT, MIN) };
    let block_bytes = expanded_block_bytes(scheme);
    for b in 0..blocks {
        prefetch_block(scheme, panel.as_ptr(), b, Prefetch::Ahead);
        let (w, d, m) = packed_block(scheme, panel.as_ptr(), b);
        let at = out.as_mut_ptr().add(b * block_bytes);
        for (g, w) in w.iter().enumerate() {
            _mm512_storeu_si512(at.add(GROUP_BYTES * g) as *mut __m512i, *w);
        }
        _mm512_storeu_ps(at.add(8 * GROUP_BYTES) as *mut f32, d);
        if MIN {
            _mm512_storeu_ps(at.add(8 * GROUP_BYTES + 64) as *mut f32, m);
        }
    }
}

#[inline(always)]
unsafe fn rows<const EXPANDED: bool, const BITS: u32, const SHIFT: u32, const MIN: bool>(
    panel: &[u8],
    xs: &[&[BlockQ8]],
    prefetch: Prefetch,
    tile: &mut Tile,
) {
    match xs.len() {
        1 => tile_rows::<1, EXPANDED, BITS, SHIFT, MIN>(panel, xs, prefetch, tile),
        2 => tile_rows::<2, EXPANDED, BITS, SHIFT, MIN>(panel, xs, prefetch, tile),
        3 => tile_rows::<3, EXPANDED, BITS, SHIFT, MIN>(panel, xs, prefetch, tile),
        4 => tile_rows::<4, EXPANDED, BITS, SHIFT, MIN>(panel, xs, prefetch, tile),
        5 => tile_rows::<5, EXPANDED, BITS, SHIFT, MIN>(panel, xs, prefetch, tile),
        6 => tile_rows::<6, EXPANDED, BITS, SHIFT, MIN>(panel, xs, prefetch, tile),
        7 => tile_rows::<7, EXPANDED, BITS, SHIFT, MIN>(panel, xs, prefetch, tile),
        _ => tile_rows::<8, EXPANDED, BITS, SHIFT, MIN>(panel, xs, prefetch, tile),
    }
}

/// Two 8-lane halves as one 16-lane vector (`lo` in lanes 0-7).
#[inline(always)]
unsafe fn join_i(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

#[inline(always)]
unsafe fn join_f(lo: *const f32, hi: *const f32) -> __m512 {
    let lo = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(lo)));
    _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        lo,
        _mm256_castps_pd(_mm256_loadu_ps(hi)),
    ))
}

/// Prefetches what `prefetch` says while block `b` of a packed panel is read.
#[inline(always)]
unsafe fn prefetch_block(scheme: &Scheme, panel: *const u8, b: usize, prefetch: Prefetch) {
    let block = 2 * scheme.cell_bytes();
    let at = panel.wrapping_add(b * block);
    // A hint, never a read: past the matrix's end it touches nothing.
    let ahead = match prefetch {
        Prefetch::Nothing => return,
        Prefetch::Ahead => at.wrapping_add(PREFETCH_BLOCKS * block),
        Prefetch::Next(stride) => at.wrapping_add(stride),
    };
    for line in (0..block).step_by(64) {
        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line) as *const i8);
    }
}

/// Block `b` of a packed panel: its 16 outputs' levels by group (the two cells unpacked and
/// joined), scales, and minimums (the scales again for types without).
#[inline(always)]
unsafe fn packed_block(
    scheme: &Scheme,
    panel: *const u8,
    b: usize,
) -> ([__m512i; 8], __m512, __m512) {
    let (cell_bytes, level_bytes) = (scheme.cell_bytes(), scheme.level_bytes());
    let c0 = panel.add(2 * b * cell_bytes);
    let c1 = c0.add(cell_bytes);
    let (w0, w1) = (levels(scheme, c0), levels(scheme, c1));
    // Loops rather than `array::from_fn` closures around intrinsics throughout: a closure does
    // not inherit the caller's target features (`scripts/check-intrinsics`).
    let mut w = [_mm512_setzero_si512(); 8];
    for (g, w) in w.iter_mut().enumerate() {
        *w = join_i(w0[g], w1[g]);
    }
    let d = join_f(
        c0.add(level_bytes) as *const f32,
        c1.add(level_bytes) as *const f32,
    );
    let m = match scheme.offset {
        Offset::Min => join_f(
            c0.add(level_bytes + 32) as *const f32,
            c1.add(level_bytes + 32) as *const f32,
        ),
        _ => d,
    };
    (w, d, m)
}

/// Block `b` of an expanded panel, as [`packed_block`].
#[inline(always)]
unsafe fn expanded_block(
    scheme: &Scheme,
    panel: *const u8,
    b: usize,
) -> ([__m512i; 8], __m512, __m512) {
    let at = panel.add(b * expanded_block_bytes(scheme));
    let mut w = [_mm512_setzero_si512(); 8];
    for (g, w) in w.iter_mut().enumerate() {
        *w = _mm512_loadu_si512(at.add(GROUP_BYTES * g) as *const __m512i);
    }
    let d = _mm512_loadu_ps(at.add(8 * GROUP_BYTES) as *const f32);
    let m = match scheme.offset {
        Offset::Min => _mm512_loadu_ps(at.add(8 * GROUP_BYTES + 64) as *const f32),
        _ => d,
    };
    (w, d, m)
}

/// The `vpdpbusd`s run group by group across the rows, so the `R` rows' sums are `R`
/// independent chains (two a row under 4 rows, to hide the latency).
#[inline(always)]
unsafe fn tile_rows<
    const R: usize,
    const EXPANDED: bool,
    const BITS: u32,
    const SHIFT: u32,
    const MIN: bool,
>(
    panel: &[u8],
    xs: &[&[BlockQ8]],
    prefetch: Prefetch,
    tile: &mut Tile,
) {
    let scheme = &const { scheme_of(BITS, SHIFT, MIN) };
    let blocks = xs[0].len();
    let xp: [*const BlockQ8; R] = std::array::from_fn(|r| xs[r].as_ptr());
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..blocks {
        let (w, d, m) = if EXPANDED {
            expanded_block(scheme, panel.as_ptr(), b)
        } else {
            prefetch_block(scheme, panel.as_ptr(), b, prefetch);
            packed_block(scheme, panel.as_ptr(), b)
        };
        let x: [&BlockQ8; R] = std::array::from_fn(|r| &*xp[r].add(b));
        // The chains start from `-c·Σq` with `c = 2^SHIFT` (128 for Q8_0's offset levels), so
        // they end at `Σ level·q - c·Σq` with no vector shift and subtract a row: the same
        // integers (no sum comes near overflowing 32 bits), so the same bits.
        let mut dots = [[_mm512_setzero_si512(); 2]; R];
        for (dots, x) in dots.iter_mut().zip(&x) {
            let bias = match SHIFT {
                0 => 0,
                _ => x.sum.wrapping_shl(SHIFT).wrapping_neg(),
            };
            dots[0] = _mm512_set1_epi32(bias);
        }
        for (g, w) in w.iter().enumerate() {
            for (r, dots) in dots.iter_mut().enumerate() {
                let group = std::ptr::read_unaligned(x[r].qs.as_ptr().add(4 * g) as *const i32);
                let chain = &mut dots[if R < 4 { g % 2 } else { 0 }];
                *chain = _mm512_dpbusd_epi32(*chain, *w, _mm512_set1_epi32(group));
            }
        }
        for r in 0..R {
            let dot = match R < 4 {
                true => _mm512_add_epi32(dots[r][0], dots[r][1]),
                false => dots[r][0],
            };
            let dx = _mm512_set1_ps(x[r].d);
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(dot), acc[r]);
            if MIN {
                let sum = _mm512_set1_ps(x[r].sum as f32);
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(m, dx), sum, acc[r]);
            }
        }
    }
    for r in 0..R {
        _mm512_storeu_ps(tile[r].as_mut_ptr(), acc[r]);
    }
}
