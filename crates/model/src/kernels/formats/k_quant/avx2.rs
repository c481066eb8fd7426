//! The K-quant tile kernel on AVX2 (`maddubs` pair sums in 16 bits, scaled with `madd`; up to 6
//! rows a tile) and, with `VNNI`, the body of the AVX-512 VNNI one (`avx512.rs`: `vpdpbusd`
//! straight into 32 bits on 256-bit vectors, up to 8 rows): the same integers and f32 operations
//! as `portable.rs`, so the same bits.

use super::super::act_q8k::BlockQ8K;
use super::super::{Prefetch, Tile};
use super::layout::Offset;
use super::KQuant;
use std::arch::x86_64::*;

/// How far ahead (in cells) a tile of four or more rows prefetches its panel (fewer rows leave
/// the stream to the hardware prefetcher, see `tile_rows`).
const PREFETCH_CELLS: usize = 2;

/// The four quads of group `half_unit` (0 or 1) of the unit at `unit`, as `[j][4]` levels.
#[inline(always)]
pub(super) unsafe fn unpack_group<Q: KQuant>(unit: *const u8, half_unit: usize) -> [__m256i; 4] {
    let scheme = Q::SCHEME;
    let load = |offset: usize| _mm256_loadu_si256(unit.add(offset) as *const __m256i);
    let mut w = [_mm256_setzero_si256(); 4];
    let mut plane = 0;
    if scheme.nibble {
        let m4 = _mm256_set1_epi8(0x0F);
        let lo = load(32 * 2 * half_unit);
        let hi = load(32 * (2 * half_unit + 1));
        w[0] = _mm256_and_si256(lo, m4);
        w[1] = _mm256_and_si256(_mm256_srli_epi16::<4>(lo), m4);
        w[2] = _mm256_and_si256(hi, m4);
        w[3] = _mm256_and_si256(_mm256_srli_epi16::<4>(hi), m4);
        plane += 128;
    }
    if scheme.pair {
        let m2 = _mm256_set1_epi8(3);
        let v = load(plane + 32 * half_unit);
        let two = [
            _mm256_and_si256(v, m2),
            _mm256_and_si256(_mm256_srli_epi16::<2>(v), m2),
            _mm256_and_si256(_mm256_srli_epi16::<4>(v), m2),
            _mm256_and_si256(_mm256_srli_epi16::<6>(v), m2),
        ];
        for (w, two) in w.iter_mut().zip(two) {
            *w = if scheme.nibble {
                _mm256_or_si256(*w, _mm256_slli_epi16::<4>(two))
            } else {
                two
            };
        }
        plane += 64;
    }
    if scheme.single {
        let m1 = _mm256_set1_epi8(1);
        let mut v = load(plane);
        if half_unit == 1 {
            v = _mm256_srli_epi16::<4>(v);
        }
        let one = [
            _mm256_and_si256(v, m1),
            _mm256_and_si256(_mm256_srli_epi16::<1>(v), m1),
            _mm256_and_si256(_mm256_srli_epi16::<2>(v), m1),
            _mm256_and_si256(_mm256_srli_epi16::<3>(v), m1),
        ];
        let shift = _mm_cvtsi32_si128(scheme.single_shift() as i32);
        for (w, one) in w.iter_mut().zip(one) {
            *w = _mm256_or_si256(*w, _mm256_sll_epi16(one, shift));
        }
    }
    w
}

/// Eight i8 values `v[j]` at `ptr` as sixteen i16 lanes `v[0], v[0], v[1], v[1], …`: one
/// factor per output for both `maddubs` pairs of its quad.
#[inline(always)]
unsafe fn scale_pairs(ptr: *const u8) -> __m256i {
    let v = _mm_loadl_epi64(ptr as *const __m128i);
    _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, v))
}

/// Two rows of eight i8 values as i16 lanes `a[0], b[0], a[1], b[1], …`.
#[inline(always)]
unsafe fn interleave_pairs(a: *const u8, b: *const u8) -> __m256i {
    let a = _mm_loadl_epi64(a as *const __m128i);
    let b = _mm_loadl_epi64(b as *const __m128i);
    _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b))
}

#[inline(always)]
unsafe fn broadcast4(ptr: *const i8) -> __m256i {
    _mm256_set1_epi32((ptr as *const i32).read_unaligned())
}

/// Eight i8 values at `ptr` as eight i32 lanes: one factor per output.
#[inline(always)]
unsafe fn scale_lanes(ptr: *const u8) -> __m256i {
    _mm256_cvtepi8_epi32(_mm_loadl_epi64(ptr as *const __m128i))
}

/// With `VNNI`, a group's four quads go through `vpdpbusd` straight into 32 bits and are
/// scaled there (no 16-bit chain), and the bias sums use `vpdpwssd`: the same integers.
#[inline(always)]
unsafe fn tile_rows<Q: KQuant, const R: usize, const VNNI: bool>(
    panel: &[u8],
    blocks: usize,
    xs: &[&[BlockQ8K]],
    prefetch: Prefetch,
    tile: &mut Tile,
) {
    let cell_bytes = Q::SCHEME.cell_bytes();
    let xp: [*const BlockQ8K; R] = std::array::from_fn(|r| xs[r].as_ptr());
    // A hint, never a read: past the matrix's end it touches nothing.
    let warm = |b: usize| {
        let block = panel.as_ptr().wrapping_add(2 * b * cell_bytes);
        let ahead = match prefetch {
            Prefetch::Nothing => return,
            Prefetch::Ahead => block.wrapping_add(PREFETCH_CELLS * cell_bytes),
            Prefetch::Next(stride) => block.wrapping_add(stride),
        };
        for line in (0..2 * cell_bytes).step_by(64) {
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line) as *const i8);
        }
    };
    let cell = |b: usize, half: usize| panel.as_ptr().add((2 * b + half) * cell_bytes);
    if R >= 4 {
        // Half by half (outputs 0-7, then 8-15), so only one half's accumulators are live
        // (8 rows fit the registers): the first pass brings the panel in (warming both
        // halves), the second finds it cached.
        for half in 0..2 {
            let mut acc = [_mm256_setzero_ps(); R];
            for b in 0..blocks {
                if half == 0 {
                    warm(b);
                }
                cell_product::<Q, R, VNNI>(cell(b, half), b, &xp, &mut acc);
            }
            for r in 0..R {
                _mm256_storeu_ps(tile[r].as_mut_ptr().add(8 * half), acc[r]);
            }
        }
    } else {
        // Few rows: decode, bound by the panel's stream, which is read once in order. The
        // hardware prefetcher follows it: prefetch instructions here (a line each, two cells
        // ahead) cost a fifth of a decode step (Llama-8B layers, Q4_K: 24-29 ms with them,
        // 19-22 ms without, at the machine's read bandwidth).
        let mut acc = [[_mm256_setzero_ps(); R]; 2];
        for b in 0..blocks {
            for (half, acc) in acc.iter_mut().enumerate() {
                cell_product::<Q, R, VNNI>(cell(b, half), b, &xp, acc);
            }
        }
        for r in 0..R {
            for (half, acc) in acc.iter().enumerate() {
                _mm256_storeu_ps(tile[r].as_mut_ptr().add(8 * half), acc[r]);
            }
        }
    }
}

/// Adds one cell's products with super-block `b` of each row `xp[r]` to `acc[r]`.
#[inline(always)]
unsafe fn cell_product<Q: KQuant, const R: usize, const VNNI: bool>(
    cell: *const u8,
    b: usize,
    xp: &[*const BlockQ8K; R],
    acc: &mut [__m256; R],
) {
    let scheme = Q::SCHEME;
    let subs_per_group = scheme.sub / 16;
    let chain = scheme.chain();
    let mut a = [_mm256_setzero_si256(); R];
    // VNNI: a sub-block's groups sum in `t` (exact in 32 bits), then one scale.
    // Under 4 rows, two chains a row (even and odd quads) hide the latency.
    let mut t = [[_mm256_setzero_si256(); 2]; R];
    for unit in 0..8 {
        let unit_ptr = cell.add(scheme.units_offset() + unit * scheme.unit_bytes());
        for half_unit in 0..2 {
            let group = 2 * unit + half_unit;
            let w = unpack_group::<Q>(unit_ptr, half_unit);
            let sub = group / subs_per_group;
            let scales = cell.add(scheme.scales_offset() + 8 * sub);
            if VNNI {
                for (r, t) in t.iter_mut().enumerate() {
                    let q = (*xp[r].add(b)).qs.as_ptr().add(16 * group);
                    for (i, w) in w.iter().enumerate() {
                        let t = &mut t[if R < 4 { i % 2 } else { 0 }];
                        *t = _mm256_dpbusd_epi32(*t, *w, broadcast4(q.add(4 * i)));
                    }
                }
                if (group + 1) % subs_per_group == 0 {
                    let sc = scale_lanes(scales);
                    for (a, t) in a.iter_mut().zip(&mut t) {
                        let sum = match R < 4 {
                            true => _mm256_add_epi32(t[0], t[1]),
                            false => t[0],
                        };
                        *a = _mm256_add_epi32(*a, _mm256_mullo_epi32(sum, sc));
                        *t = [_mm256_setzero_si256(); 2];
                    }
                }
                continue;
            }
            let sc = scale_pairs(scales);
            for r in 0..R {
                let q = (*xp[r].add(b)).qs.as_ptr().add(16 * group);
                // Pair sums of `chain` quads add up in 16 bits (exact, see
                // `Scheme::chain`), then widen once with the scale.
                for (c, quads) in w.chunks_exact(chain).enumerate() {
                    let q = q.add(4 * chain * c);
                    let mut sum = _mm256_maddubs_epi16(quads[0], broadcast4(q));
                    for (i, w) in quads.iter().enumerate().skip(1) {
                        let products = _mm256_maddubs_epi16(*w, broadcast4(q.add(4 * i)));
                        sum = _mm256_add_epi16(sum, products);
                    }
                    a[r] = _mm256_add_epi32(a[r], _mm256_madd_epi16(sum, sc));
                }
            }
        }
    }
    let factors = if scheme.has_min() {
        scheme.mins_offset()
    } else {
        scheme.scales_offset()
    };
    let mut bs = [_mm256_setzero_si256(); R];
    for pair in 0..scheme.subs() / 2 {
        let f = cell.add(factors + 16 * pair);
        let v = interleave_pairs(f, f.add(8));
        for r in 0..R {
            let x = &*xp[r].add(b);
            let sums = if scheme.sub == 32 {
                x.bsums32.as_ptr()
            } else {
                x.bsums16.as_ptr()
            };
            let s = _mm256_set1_epi32((sums.add(2 * pair) as *const i32).read_unaligned());
            bs[r] = if VNNI {
                _mm256_dpwssd_epi32(bs[r], v, s)
            } else {
                _mm256_add_epi32(bs[r], _mm256_madd_epi16(v, s))
            };
        }
    }
    let d = _mm256_loadu_ps(cell as *const f32);
    let dmin = _mm256_loadu_ps(cell.add(scheme.dmin_offset()) as *const f32);
    for r in 0..R {
        let dx = _mm256_set1_ps((*xp[r].add(b)).d);
        let acc = &mut acc[r];
        match scheme.offset {
            Offset::Min => {
                *acc = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(a[r]), *acc);
                *acc = _mm256_fnmadd_ps(_mm256_mul_ps(dx, dmin), _mm256_cvtepi32_ps(bs[r]), *acc);
            }
            Offset::Centre(shift) => {
                let shift = _mm_cvtsi32_si128(shift as i32);
                let centred = _mm256_sub_epi32(a[r], _mm256_sll_epi32(bs[r], shift));
                *acc = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(centred), *acc);
            }
        }
    }
}

/// Safety: needs avx2+fma; `panel` holds `2 * blocks` cells of `Q`, each of `xs` (1 to 6
/// rows) `blocks` super-blocks.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile<Q: KQuant>(
    panel: &[u8],
    blocks: usize,
    xs: &[&[BlockQ8K]],
    prefetch: Prefetch,
    tile: &mut Tile,
) {
    tile_with::<Q, false>(panel, blocks, xs, prefetch, tile)
}

#[inline(always)]
pub(super) unsafe fn tile_with<Q: KQuant, const VNNI: bool>(
    panel: &[u8],
    blocks: usize,
    xs: &[&[BlockQ8K]],
    prefetch: Prefetch,
    tile: &mut Tile,
) {
    match xs.len() {
        1 => tile_rows::<Q, 1, VNNI>(panel, blocks, xs, prefetch, tile),
        2 => tile_rows::<Q, 2, VNNI>(panel, blocks, xs, prefetch, tile),
        3 => tile_rows::<Q, 3, VNNI>(panel, blocks, xs, prefetch, tile),
        4 => tile_rows::<Q, 4, VNNI>(panel, blocks, xs, prefetch, tile),
        5 => tile_rows::<Q, 5, VNNI>(panel, blocks, xs, prefetch, tile),
        6 => tile_rows::<Q, 6, VNNI>(panel, blocks, xs, prefetch, tile),
        // Eight rows only with VNNI (32 vector registers): see `tile_rows` above.
        7 if VNNI => tile_rows::<Q, 7, VNNI>(panel, blocks, xs, prefetch, tile),
        _ if VNNI => tile_rows::<Q, 8, VNNI>(panel, blocks, xs, prefetch, tile),
        _ => unreachable!("{} rows in an AVX2 tile", xs.len()),
    }
}
