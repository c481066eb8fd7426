//! AVX-512 attention scores against a staged key tile: the keys of a tile widened to f32 and
//! transposed (`keys_t[c * stride + j]` is element `c` of key `j`), so sixteen keys' scores fill
//! one 512-bit vector and no score needs a horizontal sum.
//!
//! The operation order is [`super::VectorOps::group_scores`]'s: per score, partial `l` (one of
//! eight) accumulates `q[8c + l] · k[8c + l]` over chunks `c` with fused multiply-adds from
//! zero, the partials fold as `((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7))`, and the sum is
//! multiplied by the scale. The AVX2 kernel keeps partial `l` in lane `l` of one vector and
//! folds the lanes; this one keeps it in vector `l` (sixteen keys, one a lane) and folds
//! vectors. Same values, same roundings, same bits (tested against the portable reference), so
//! a query may take either kernel: the staged tile pays off for a run of prompt tokens that
//! share it, decode keeps the row kernel.

use std::arch::x86_64::*;

use super::portable::{EXP_HI, EXP_LO, EXP_POLY, LN2_HI, LN2_LO, LOG2E};
use super::{exp, fold, Isa, KvElement, LANES};
use crate::kernels::balanced_parts;

/// Proof that the CPU has AVX-512 F (only [`Avx512::for_isa`] makes one).
#[derive(Debug, Clone, Copy)]
pub struct Avx512(());

impl Avx512 {
    /// These kernels where `isa` has AVX-512 and this CPU runs `isa` (whatever `SLUICE_ISA`
    /// says, so tests can compare them with the portable ones).
    pub fn for_isa(isa: Isa) -> Option<Self> {
        (isa.has_avx512_vnni() && isa.runs_here()).then_some(Avx512(()))
    }

    /// `out[h * n + j] = scale · (q_h · key(first + j))` for every head `h` of `q: [heads, d]`
    /// and `j < n`, where key `i`'s element `c` is `keys_t[c * stride + i]`. `d` is a multiple
    /// of 8; `keys_t` holds `d` rows of `stride` values, and `first + n` rounded up to 16 must
    /// not pass `stride` (a staged tile is padded for that).
    #[allow(clippy::too_many_arguments)]
    pub fn transposed_scores(
        self,
        q: &[f32],
        d: usize,
        keys_t: &[f32],
        stride: usize,
        first: usize,
        n: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let heads = q.len() / d;
        assert!(d.is_multiple_of(LANES) && q.len() == heads * d);
        assert!(first + n.next_multiple_of(KEYS) <= stride && keys_t.len() >= d * stride);
        assert!(out.len() >= heads * n);
        // SAFETY: an `Avx512` exists only where the CPU runs AVX-512 F; the asserts keep every
        // load within `q` and `keys_t` and every (masked) store within `out`.
        unsafe { transposed_scores(q, d, keys_t, stride, first, n, scale, out) }
    }
}

impl Avx512 {
    /// Stages one tile for [`Avx512::transposed_scores`] and row kernels on f32: the key rows at
    /// `rows` (offsets into `keys`, `d` values each) widened and transposed into `keys_t`
    /// (`keys_t[c * stride + j]`, for `j` up to `rows.len()` rounded up to 8; the extra columns
    /// repeat the last key), and the value rows at the same offsets widened into `values_out`
    /// (row `j` at `j * d`). Widening is exact, so the staged tile gives the bits of the cache.
    #[allow(clippy::too_many_arguments)]
    pub fn stage_tile<E: KvElement>(
        self,
        keys: &[E],
        values: &[E],
        rows: &[usize],
        d: usize,
        keys_t: &mut [f32],
        stride: usize,
        values_out: &mut [f32],
    ) {
        assert!(d.is_multiple_of(LANES) && !rows.is_empty());
        assert!(rows.len().next_multiple_of(LANES) <= stride && keys_t.len() >= d * stride);
        assert!(values_out.len() >= rows.len() * d);
        for &o in rows {
            assert!(
                o + d <= keys.len() && o + d <= values.len(),
                "row out of range"
            );
        }
        // SAFETY: AVX-512 F implies AVX2, FMA and F16C on every CPU that has it (and `Isa`
        // levels with AVX-512 require them); the asserts bound every load and store.
        unsafe { stage_tile(keys, values, rows, d, keys_t, stride, values_out) }
    }
}

#[target_feature(enable = "avx2,fma,f16c,avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn stage_tile<E: KvElement>(
    keys: &[E],
    values: &[E],
    rows: &[usize],
    d: usize,
    keys_t: &mut [f32],
    stride: usize,
    values_out: &mut [f32],
) {
    let (kp, vp, out) = (keys.as_ptr(), values.as_ptr(), keys_t.as_mut_ptr());
    for (j, &o) in rows.iter().enumerate() {
        for c in (0..d).step_by(LANES) {
            _mm256_storeu_ps(
                values_out.as_mut_ptr().add(j * d + c),
                E::load8(vp.add(o + c)),
            );
        }
    }
    for j0 in (0..rows.len()).step_by(LANES) {
        let row = |r: usize| kp.add(rows[(j0 + r).min(rows.len() - 1)]);
        for c in (0..d).step_by(LANES) {
            // A loop, not an `array::from_fn` closure: see `scripts/check-intrinsics`.
            let mut r = [_mm256_setzero_ps(); LANES];
            for (i, r) in r.iter_mut().enumerate() {
                *r = E::load8(row(i).add(c));
            }
            let cols = transpose8(r);
            for (l, col) in cols.iter().enumerate() {
                _mm256_storeu_ps(out.add((c + l) * stride + j0), *col);
            }
        }
    }
}

/// The 8×8 transpose: lane `i` of result `k` is lane `k` of input `i`.
#[inline(always)]
pub(super) unsafe fn transpose8(r: [__m256; LANES]) -> [__m256; LANES] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

impl Avx512 {
    /// Accumulates one tile's weighted values into each head's running output: for every head
    /// `h` of `acc: [heads, d]`, `p = Σ_j weights[h * n + j] · values[(first + j) * d..][..d]`
    /// over `j < n` (one fused multiply-add per row and element, in row order, from zero: the
    /// order of [`super::VectorOps::group_weighted_sum`]), then `acc_h = p` where `rescale[h]`
    /// is 0, `acc_h + p` where it is 1, and `acc_h · rescale[h] + p` (fused) otherwise. `d` is a
    /// multiple of 16; `values` holds staged rows of `d` values.
    #[allow(clippy::too_many_arguments)]
    pub fn weighted_accumulate(
        self,
        weights: &[f32],
        values: &[f32],
        first: usize,
        n: usize,
        d: usize,
        rescale: &[f32],
        acc: &mut [f32],
    ) {
        let heads = acc.len() / d;
        assert!(d.is_multiple_of(KEYS) && acc.len() == heads * d && rescale.len() >= heads);
        assert!(weights.len() >= heads * n && values.len() >= (first + n) * d);
        // SAFETY: as for `transposed_scores`; the asserts bound every load and store.
        unsafe { weighted_accumulate(weights, values, first, n, d, rescale, acc) }
    }
}

/// Most heads summed together: with four vectors of columns, `4 H` accumulators and the value
/// vector fit the 32 registers, so a row is loaded once for a group of 7 heads (Qwen2.5's).
const SUM_HEADS_AT_ONCE: usize = 7;
/// Vectors of columns a pass keeps (64 columns).
const SUM_STRIP: usize = 4;

#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn weighted_accumulate(
    weights: &[f32],
    values: &[f32],
    first: usize,
    n: usize,
    d: usize,
    rescale: &[f32],
    acc: &mut [f32],
) {
    let heads = acc.len() / d;
    let v = values.as_ptr().add(first * d);
    let mut h0 = 0;
    for part in balanced_parts(heads, SUM_HEADS_AT_ONCE) {
        let (w, r) = (weights.as_ptr().add(h0 * n), rescale.as_ptr().add(h0));
        let mut col = 0;
        while col < d {
            let vectors = ((d - col) / KEYS).min(SUM_STRIP);
            let a = acc.as_mut_ptr().add(h0 * d + col);
            macro_rules! strip {
                ($($h:literal)*) => {
                    match (part, vectors) {
                        $(
                            ($h, 1) => sum_strip::<$h, 1>(w, n, v.add(col), d, r, a),
                            ($h, 2) => sum_strip::<$h, 2>(w, n, v.add(col), d, r, a),
                            ($h, 3) => sum_strip::<$h, 3>(w, n, v.add(col), d, r, a),
                            ($h, _) => sum_strip::<$h, 4>(w, n, v.add(col), d, r, a),
                        )*
                        _ => unreachable!("parts are at most {SUM_HEADS_AT_ONCE} heads"),
                    }
                };
            }
            strip!(1 2 3 4 5 6 7);
            col += vectors * KEYS;
        }
        h0 += part;
    }
}

/// `H` heads' sums over `C` vectors of columns (`values` and `acc` already offset to the
/// strip's first column; rows `d` apart, heads' outputs `d` apart).
#[inline(always)]
unsafe fn sum_strip<const H: usize, const C: usize>(
    weights: *const f32,
    n: usize,
    values: *const f32,
    d: usize,
    rescale: *const f32,
    acc: *mut f32,
) {
    let mut sums = [[_mm512_setzero_ps(); C]; H];
    for j in 0..n {
        let row = values.add(j * d);
        for c in 0..C {
            let x = _mm512_loadu_ps(row.add(c * KEYS));
            for (h, sums) in sums.iter_mut().enumerate() {
                let w = _mm512_set1_ps(*weights.add(h * n + j));
                sums[c] = _mm512_fmadd_ps(w, x, sums[c]);
            }
        }
    }
    for (h, sums) in sums.iter().enumerate() {
        for (c, &p) in sums.iter().enumerate() {
            store_rescaled(acc.add(h * d + c * KEYS), *rescale.add(h), p);
        }
    }
}

/// Joins a tile's partial sums `p` with the running output at `dst` (sixteen values) as the
/// online softmax does: `p` where `alpha` is 0, `acc + p` where it is 1, `acc · alpha + p`
/// (fused) otherwise.
#[inline(always)]
pub(super) unsafe fn store_rescaled(dst: *mut f32, alpha: f32, p: __m512) {
    let value = match alpha {
        0.0 => p,
        1.0 => _mm512_add_ps(_mm512_loadu_ps(dst), p),
        _ => _mm512_fmadd_ps(_mm512_loadu_ps(dst), _mm512_set1_ps(alpha), p),
    };
    _mm512_storeu_ps(dst, value);
}

impl Avx512 {
    /// [`super::VectorOps::exp_sum`] sixteen values at a time: `x[i] = e^(x[i] - shift)` with
    /// the same polynomial and roundings as [`exp`], summed in eight lanes by position modulo 8
    /// (each vector's low half, then its high half), folded, then the tail in order: the
    /// portable bits.
    pub fn exp_sum(self, x: &mut [f32], shift: f32) -> f32 {
        // SAFETY: as for `transposed_scores`; every access is within `x`.
        unsafe { exp_sum(x, shift) }
    }

    /// The largest of `x` (non-empty, no NaN): the value `f32::max` folded over it gives.
    pub fn max(self, x: &[f32]) -> f32 {
        assert!(!x.is_empty());
        // SAFETY: as above.
        unsafe { max(x) }
    }
}

#[inline(always)]
unsafe fn exp16(x: __m512) -> __m512 {
    let x = _mm512_min_ps(
        _mm512_max_ps(x, _mm512_set1_ps(EXP_LO)),
        _mm512_set1_ps(EXP_HI),
    );
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
    );
    let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_HI), x);
    let r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_LO), r);
    let mut p = _mm512_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    let p = _mm512_add_ps(
        _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r),
        _mm512_set1_ps(1.0),
    );
    let bits = _mm512_slli_epi32::<23>(_mm512_add_epi32(
        _mm512_cvtps_epi32(n),
        _mm512_set1_epi32(127),
    ));
    _mm512_mul_ps(p, _mm512_castsi512_ps(bits))
}

#[target_feature(enable = "avx512f,avx2")]
unsafe fn exp_sum(x: &mut [f32], shift: f32) -> f32 {
    let full = x.len() / LANES * LANES;
    let p = x.as_mut_ptr();
    let s = _mm512_set1_ps(shift);
    let mut acc = _mm256_setzero_ps();
    for i in (0..full).step_by(2 * LANES) {
        // The last group of eight of `full` alone, through the low half of a masked vector.
        let mask: __mmask16 = if full - i >= 2 * LANES { !0 } else { 0xff };
        let e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, p.add(i)), s));
        _mm512_mask_storeu_ps(p.add(i), mask, e);
        acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
        if mask == !0 {
            let high = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(e));
            acc = _mm256_add_ps(acc, _mm256_castpd_ps(high));
        }
    }
    let mut lanes = [0f32; LANES];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    let mut sum = fold(lanes);
    for v in &mut x[full..] {
        *v = exp(*v - shift);
        sum += *v;
    }
    sum
}

#[target_feature(enable = "avx512f")]
unsafe fn max(x: &[f32]) -> f32 {
    let full = x.len() / KEYS * KEYS;
    let mut m = _mm512_set1_ps(f32::NEG_INFINITY);
    for i in (0..full).step_by(KEYS) {
        m = _mm512_max_ps(m, _mm512_loadu_ps(x.as_ptr().add(i)));
    }
    let mut best = _mm512_reduce_max_ps(m);
    for &v in &x[full..] {
        best = best.max(v);
    }
    best
}

/// Keys a vector holds.
const KEYS: usize = 16;
/// Most heads scored together: `8 H` accumulators plus the key vector fit the 32 registers.
const HEADS_AT_ONCE: usize = 3;

#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn transposed_scores(
    q: &[f32],
    d: usize,
    keys_t: &[f32],
    stride: usize,
    first: usize,
    n: usize,
    scale: f32,
    out: &mut [f32],
) {
    let heads = q.len() / d;
    let mut h0 = 0;
    for part in balanced_parts(heads, HEADS_AT_ONCE) {
        let (qp, kp) = (q.as_ptr().add(h0 * d), keys_t.as_ptr().add(first));
        let op = out.as_mut_ptr().add(h0 * n);
        match part {
            1 => scores_heads::<1>(qp, d, kp, stride, n, scale, op),
            2 => scores_heads::<2>(qp, d, kp, stride, n, scale, op),
            _ => scores_heads::<3>(qp, d, kp, stride, n, scale, op),
        }
        h0 += part;
    }
}

/// `H` heads' scores against `n` keys from `keys_t` (already offset to the first key), sixteen
/// keys a pass.
#[inline(always)]
unsafe fn scores_heads<const H: usize>(
    q: *const f32,
    d: usize,
    keys_t: *const f32,
    stride: usize,
    n: usize,
    scale: f32,
    out: *mut f32,
) {
    let scale = _mm512_set1_ps(scale);
    for j in (0..n).step_by(KEYS) {
        let mut acc = [[_mm512_setzero_ps(); LANES]; H];
        for c in (0..d).step_by(LANES) {
            for l in 0..LANES {
                let k = _mm512_loadu_ps(keys_t.add((c + l) * stride + j));
                for (h, acc) in acc.iter_mut().enumerate() {
                    let qv = _mm512_set1_ps(*q.add(h * d + c + l));
                    acc[l] = _mm512_fmadd_ps(qv, k, acc[l]);
                }
            }
        }
        let left = n - j;
        let mask: __mmask16 = if left >= KEYS { !0 } else { (1u16 << left) - 1 };
        for (h, a) in acc.iter().enumerate() {
            let s = _mm512_add_ps(
                _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])),
                _mm512_add_ps(_mm512_add_ps(a[4], a[5]), _mm512_add_ps(a[6], a[7])),
            );
            _mm512_mask_storeu_ps(out.add(h * n + j), mask, _mm512_mul_ps(s, scale));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::values;
    use super::super::{Portable, VectorOps};
    use super::*;

    #[test]
    fn a_staged_tile_holds_the_cache_rows_exactly() {
        let Some(fast) = Avx512::for_isa(Isa::Avx512Vnni) else {
            eprintln!("skipping the AVX-512 tile staging: host lacks avx512f/vl/vnni");
            return;
        };
        const STRIDE: usize = 80;
        for d in [8usize, 64, 128] {
            let keys: Vec<half::f16> = values(90 * d, 23)
                .into_iter()
                .map(half::f16::from_f32)
                .collect();
            let vals: Vec<half::f16> = values(90 * d, 24)
                .into_iter()
                .map(half::f16::from_f32)
                .collect();
            for n in [1usize, 7, 8, 13, 64] {
                let rows: Vec<usize> = (0..n).map(|i| (i * 37 % 90) * d).collect();
                let (mut keys_t, mut staged) = (vec![f32::NAN; d * STRIDE], vec![f32::NAN; n * d]);
                fast.stage_tile(&keys, &vals, &rows, d, &mut keys_t, STRIDE, &mut staged);
                for (j, &o) in rows.iter().enumerate() {
                    for c in 0..d {
                        assert_eq!(keys_t[c * STRIDE + j], keys[o + c].to_f32(), "d={d} n={n}");
                        assert_eq!(staged[j * d + c], vals[o + c].to_f32(), "d={d} n={n}");
                    }
                }
            }
        }
    }

    #[test]
    fn weighted_accumulation_gives_the_portable_bits() {
        let Some(fast) = Avx512::for_isa(Isa::Avx512Vnni) else {
            eprintln!("skipping the AVX-512 weighted sums: host lacks avx512f/vl/vnni");
            return;
        };
        for (d, heads) in [
            (16usize, 1usize),
            (64, 7),
            (128, 4),
            (80, 3),
            (256, 8),
            (48, 2),
        ] {
            let rows = values(64 * d, 25);
            for (first, n) in [(0usize, 1usize), (3, 17), (0, 64), (10, 54)] {
                let w = values(heads * n, 26);
                let offsets: Vec<usize> = (first..first + n).map(|i| i * d).collect();
                let mut partial = vec![0.0; heads * d];
                Portable.group_weighted_sum(&w, &rows, &offsets, d, &mut partial);
                let start = values(heads * d, 27);
                let rescale: Vec<f32> = (0..heads).map(|h| [0.0, 1.0, 0.375][h % 3]).collect();
                let alpha = &rescale;
                let want: Vec<u32> = start
                    .chunks_exact(d)
                    .zip(partial.chunks_exact(d))
                    .enumerate()
                    .flat_map(|(h, (a, p))| {
                        a.iter().zip(p).map(move |(a, p)| match alpha[h] {
                            0.0 => p.to_bits(),
                            1.0 => (a + p).to_bits(),
                            r => a.mul_add(r, *p).to_bits(),
                        })
                    })
                    .collect();
                let mut got = start.clone();
                fast.weighted_accumulate(&w, &rows, first, n, d, &rescale, &mut got);
                let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "d={d} heads={heads} first={first} n={n}");
            }
        }
    }

    #[test]
    fn exp_sums_and_maxima_give_the_portable_bits() {
        let Some(fast) = Avx512::for_isa(Isa::Avx512Vnni) else {
            eprintln!("skipping the AVX-512 exp sums: host lacks avx512f/vl/vnni");
            return;
        };
        let wide: Vec<f32> = (-2000..2000).map(|i| i as f32 * 0.05).collect();
        let mut rows: Vec<Vec<f32>> = [0usize, 1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 64, 100]
            .iter()
            .map(|&n| values(n, 28))
            .collect();
        rows.push(wide);
        for row in rows {
            let (mut a, mut b) = (row.clone(), row.clone());
            let (sa, sb) = (fast.exp_sum(&mut a, 0.25), Portable.exp_sum(&mut b, 0.25));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                (sa.to_bits(), bits(&a)),
                (sb.to_bits(), bits(&b)),
                "n={}",
                row.len()
            );
            if !row.is_empty() {
                let want = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                assert_eq!(fast.max(&row), want, "n={}", row.len());
            }
        }
    }

    #[test]
    fn transposed_scores_give_the_portable_bits() {
        let Some(fast) = Avx512::for_isa(Isa::Avx512Vnni) else {
            eprintln!("skipping the AVX-512 attention scores: host lacks avx512f/vl/vnni");
            return;
        };
        const STRIDE: usize = 80;
        for (d, heads) in [
            (8usize, 1usize),
            (16, 3),
            (64, 7),
            (128, 2),
            (256, 4),
            (48, 5),
        ] {
            let rows = values(64 * d, 21);
            let mut keys_t = vec![0f32; d * STRIDE];
            for (i, row) in rows.chunks_exact(d).enumerate() {
                for (c, &v) in row.iter().enumerate() {
                    keys_t[c * STRIDE + i] = v;
                }
            }
            let q = values(heads * d, 22);
            for (first, n) in [
                (0usize, 1usize),
                (0, 16),
                (3, 17),
                (5, 59),
                (0, 64),
                (63, 1),
            ] {
                let offsets: Vec<usize> = (first..first + n).map(|i| i * d).collect();
                let (mut a, mut b) = (vec![0.0; heads * n], vec![0.0; heads * n]);
                fast.transposed_scores(&q, d, &keys_t, STRIDE, first, n, 0.125, &mut a);
                Portable.group_scores(&q, d, &rows, &offsets, 0.125, &mut b);
                let (a, b): (Vec<u32>, Vec<u32>) = (
                    a.iter().map(|v| v.to_bits()).collect(),
                    b.iter().map(|v| v.to_bits()).collect(),
                );
                assert_eq!(a, b, "d={d} heads={heads} first={first} n={n}");
            }
        }
    }
}
