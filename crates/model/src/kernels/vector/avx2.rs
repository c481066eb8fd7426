//! AVX2 + FMA + F16C implementations of [`VectorOps`].

use std::arch::x86_64::*;

use super::portable::{
    max_finite_lanes, EXP_HI, EXP_LO, EXP_POLY, GELU_2K, GELU_2K_CUBIC, GELU_LO, LN2_HI, LN2_LO,
    LOG2E,
};
use super::{exp, fold, Isa, KvElement, Portable, VectorOps, LANES};
use crate::kernels::balanced_parts;

/// Proof that the CPU has AVX2, FMA and F16C (only [`Avx2::for_isa`] makes one).
#[derive(Debug, Clone, Copy)]
pub struct Avx2(());

impl Avx2 {
    /// These kernels where `isa` has AVX2 and this CPU runs `isa` (whatever `SLUICE_ISA`
    /// says, so tests can compare them with the portable ones).
    pub fn for_isa(isa: Isa) -> Option<Self> {
        (isa.has_avx2() && isa.runs_here()).then_some(Avx2(()))
    }
}

#[inline(always)]
unsafe fn exp8(x: __m256) -> __m256 {
    let x = _mm256_min_ps(
        _mm256_max_ps(x, _mm256_set1_ps(EXP_LO)),
        _mm256_set1_ps(EXP_HI),
    );
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(LOG2E),
    ));
    let r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), x);
    let r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_LO), r);
    let mut p = _mm256_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let p = _mm256_add_ps(
        _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
        _mm256_set1_ps(1.0),
    );
    let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_cvtps_epi32(n),
        _mm256_set1_epi32(127),
    ));
    _mm256_mul_ps(p, _mm256_castsi256_ps(bits))
}

/// [`super::gelu_tanh`] on eight lanes, in its operation order.
#[inline(always)]
unsafe fn gelu_tanh8(x: __m256) -> __m256 {
    // `maxps(lo, x)` is `lo > x ? lo : x`: a NaN `x` passes through, as in the portable code.
    let c = _mm256_max_ps(_mm256_set1_ps(GELU_LO), x);
    let p = _mm256_fmadd_ps(
        _mm256_mul_ps(c, c),
        _mm256_set1_ps(-GELU_2K_CUBIC),
        _mm256_set1_ps(-GELU_2K),
    );
    let e = exp8(_mm256_mul_ps(c, p));
    _mm256_div_ps(c, _mm256_add_ps(_mm256_set1_ps(1.0), e))
}

/// Lane sums of `v` folded as [`fold`] does.
#[inline(always)]
unsafe fn fold8(v: __m256) -> f32 {
    let mut s = [0f32; LANES];
    _mm256_storeu_ps(s.as_mut_ptr(), v);
    fold(s)
}

/// Most heads scored or summed together: enough to share each row's loads, few enough that
/// the accumulators stay in the 16 vector registers. Heads split into balanced groups (7 as
/// 3 + 2 + 2): a lone head has too few accumulator chains to cover the FMA latency.
const HEADS_AT_ONCE: usize = 3;

/// `q_h · row_r` for `H` heads (`q + h * d`) and four rows of `d` (a multiple of 8) values.
#[inline(always)]
unsafe fn scores_4_rows<E: KvElement, const H: usize>(
    q: *const f32,
    rows: [*const E; 4],
    d: usize,
) -> [[f32; 4]; H] {
    let mut acc = [[_mm256_setzero_ps(); 4]; H];
    for c in (0..d).step_by(LANES) {
        // Loops rather than `array::from_fn` closures around intrinsics: a closure does not
        // inherit the caller's target features (`scripts/check-intrinsics`).
        let mut qv = [_mm256_setzero_ps(); H];
        for (h, qv) in qv.iter_mut().enumerate() {
            *qv = _mm256_loadu_ps(q.add(h * d + c));
        }
        for r in 0..4 {
            let k = E::load8(rows[r].add(c));
            for h in 0..H {
                acc[h][r] = _mm256_fmadd_ps(qv[h], k, acc[h][r]);
            }
        }
    }
    // The fold tree through two horizontal adds and a cross-half add: lane pairs (0,1),
    // (2,3) first, then those pairs, then the two 128-bit halves.
    let mut out = [[0f32; 4]; H];
    for (out, a) in out.iter_mut().zip(&acc) {
        let t = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        let total = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps::<1>(t));
        _mm_storeu_ps(out.as_mut_ptr(), total);
    }
    out
}

/// Asks for the first four of `offsets`' rows to be brought into L1 (rows of one head
/// are contiguous within a block, but the next block is anywhere in the pool).
#[inline(always)]
unsafe fn prefetch_rows<E>(data: *const E, offsets: &[usize], d: usize) {
    let bytes = d * std::mem::size_of::<E>();
    for &o in offsets.iter().take(4) {
        let p = data.add(o) as *const i8;
        for line in (0..bytes).step_by(64) {
            _mm_prefetch::<_MM_HINT_T0>(p.add(line));
        }
    }
}

fn check_rows<E>(data: &[E], offsets: &[usize], d: usize) {
    for &o in offsets {
        assert!(o + d <= data.len(), "row out of range");
    }
}

#[inline(always)]
unsafe fn scores_heads<E: KvElement, const H: usize>(
    q: *const f32,
    d: usize,
    data: *const E,
    offsets: &[usize],
    scale: f32,
    out: &mut [f32],
) {
    let n = offsets.len();
    for (c, chunk) in offsets.chunks(4).enumerate() {
        prefetch_rows(data, offsets.get((c + 2) * 4..).unwrap_or(&[]), d);
        let row = |i: usize| data.add(chunk[i.min(chunk.len() - 1)]);
        let dots = scores_4_rows::<E, H>(q, [row(0), row(1), row(2), row(3)], d);
        for (h, dots) in dots.iter().enumerate() {
            for (i, v) in dots.iter().take(chunk.len()).enumerate() {
                out[h * n + c * 4 + i] = v * scale;
            }
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_scores<E: KvElement>(
    q: &[f32],
    d: usize,
    data: &[E],
    offsets: &[usize],
    scale: f32,
    out: &mut [f32],
) {
    check_rows(data, offsets, d);
    let (n, heads) = (offsets.len(), q.len() / d);
    assert!(out.len() >= heads * n);
    let mut h0 = 0;
    for part in balanced_parts(heads, HEADS_AT_ONCE) {
        let (qp, o) = (q.as_ptr().add(h0 * d), &mut out[h0 * n..]);
        let dp = data.as_ptr();
        match part {
            1 => scores_heads::<E, 1>(qp, d, dp, offsets, scale, o),
            2 => scores_heads::<E, 2>(qp, d, dp, offsets, scale, o),
            _ => scores_heads::<E, 3>(qp, d, dp, offsets, scale, o),
        }
        h0 += part;
    }
}

/// `H` heads' sums over one strip of `V` vectors (`8 V` columns) starting at column `col`:
/// each row's strip is loaded (and widened) once for all `H` heads; every element's chain of
/// FMAs runs over the rows in order.
#[inline(always)]
unsafe fn weighted_strip<E: KvElement, const H: usize, const V: usize>(
    weights: *const f32,
    n: usize,
    data: *const E,
    offsets: &[usize],
    d: usize,
    col: usize,
    out: *mut f32,
) {
    let mut acc = [[_mm256_setzero_ps(); V]; H];
    for (i, &off) in offsets.iter().enumerate() {
        let row = data.add(off + col);
        let mut v = [_mm256_setzero_ps(); V];
        for (j, v) in v.iter_mut().enumerate() {
            *v = E::load8(row.add(j * LANES));
        }
        for (h, acc) in acc.iter_mut().enumerate() {
            let w = _mm256_set1_ps(*weights.add(h * n + i));
            for j in 0..V {
                acc[j] = _mm256_fmadd_ps(w, v[j], acc[j]);
            }
        }
    }
    for (h, acc) in acc.iter().enumerate() {
        for (j, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(h * d + col + j * LANES), *acc);
        }
    }
}

/// `H` heads' sums over all `d` columns: 32-column strips (4 vectors, so `4 H` accumulator
/// chains, enough to cover the FMA latency from two heads up), then the narrower rest.
#[inline(always)]
unsafe fn weighted_heads<E: KvElement, const H: usize>(
    weights: *const f32,
    n: usize,
    data: *const E,
    offsets: &[usize],
    d: usize,
    out: *mut f32,
) {
    const STRIP: usize = 4 * LANES;
    let mut col = 0;
    while col + STRIP <= d {
        weighted_strip::<E, H, 4>(weights, n, data, offsets, d, col, out);
        col += STRIP;
    }
    match (d - col) / LANES {
        0 => {}
        1 => weighted_strip::<E, H, 1>(weights, n, data, offsets, d, col, out),
        2 => weighted_strip::<E, H, 2>(weights, n, data, offsets, d, col, out),
        _ => weighted_strip::<E, H, 3>(weights, n, data, offsets, d, col, out),
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn group_weighted_sum<E: KvElement>(
    weights: &[f32],
    data: &[E],
    offsets: &[usize],
    d: usize,
    out: &mut [f32],
) {
    check_rows(data, offsets, d);
    let (n, heads) = (offsets.len(), out.len() / d);
    assert!(weights.len() >= heads * n && d.is_multiple_of(LANES));
    let mut h0 = 0;
    for part in balanced_parts(heads, HEADS_AT_ONCE) {
        let (w, o) = (weights.as_ptr().add(h0 * n), out.as_mut_ptr().add(h0 * d));
        let dp = data.as_ptr();
        match part {
            1 => weighted_heads::<E, 1>(w, n, dp, offsets, d, o),
            2 => weighted_heads::<E, 2>(w, n, dp, offsets, d, o),
            _ => weighted_heads::<E, 3>(w, n, dp, offsets, d, o),
        }
        h0 += part;
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn exp_sum(x: &mut [f32], shift: f32) -> f32 {
    let full = x.len() / LANES * LANES;
    let p = x.as_mut_ptr();
    let s = _mm256_set1_ps(shift);
    let mut acc = _mm256_setzero_ps();
    for i in (0..full).step_by(LANES) {
        let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p.add(i)), s));
        _mm256_storeu_ps(p.add(i), e);
        acc = _mm256_add_ps(acc, e);
    }
    let mut sum = fold8(acc);
    for v in &mut x[full..] {
        *v = exp(*v - shift);
        sum += *v;
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let n = gate.len().min(up.len()).min(out.len());
    let full = n / LANES * LANES;
    let one = _mm256_set1_ps(1.0);
    let zero = _mm256_setzero_ps();
    for i in (0..full).step_by(LANES) {
        let g = _mm256_loadu_ps(gate.as_ptr().add(i));
        let e = exp8(_mm256_sub_ps(zero, g));
        let s = _mm256_div_ps(g, _mm256_add_ps(one, e));
        let o = _mm256_mul_ps(s, _mm256_loadu_ps(up.as_ptr().add(i)));
        _mm256_storeu_ps(out.as_mut_ptr().add(i), o);
    }
    Portable.silu_mul(&gate[full..n], &up[full..n], &mut out[full..n]);
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gelu_tanh_mul(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let n = gate.len().min(up.len()).min(out.len());
    let full = n / LANES * LANES;
    for i in (0..full).step_by(LANES) {
        let g = gelu_tanh8(_mm256_loadu_ps(gate.as_ptr().add(i)));
        let o = _mm256_mul_ps(g, _mm256_loadu_ps(up.as_ptr().add(i)));
        _mm256_storeu_ps(out.as_mut_ptr().add(i), o);
    }
    Portable.gelu_tanh_mul(&gate[full..n], &up[full..n], &mut out[full..n]);
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gelu_tanh(x: &mut [f32]) {
    let full = x.len() / LANES * LANES;
    let p = x.as_mut_ptr();
    for i in (0..full).step_by(LANES) {
        _mm256_storeu_ps(p.add(i), gelu_tanh8(_mm256_loadu_ps(p.add(i))));
    }
    Portable.gelu_tanh(&mut x[full..]);
}

/// [`max_finite_lanes`] compiled for AVX2: the build targets baseline x86-64 (SSE2), so
/// without this the scan runs four lanes wide.
#[target_feature(enable = "avx2")]
unsafe fn max_finite(x: &[f32]) -> Option<f32> {
    max_finite_lanes(x)
}

impl VectorOps for Avx2 {
    #[inline(always)]
    fn group_scores<E: KvElement>(
        self,
        q: &[f32],
        d: usize,
        data: &[E],
        offsets: &[usize],
        scale: f32,
        out: &mut [f32],
    ) {
        if !d.is_multiple_of(LANES) {
            return Portable.group_scores(q, d, data, offsets, scale, out);
        }
        // SAFETY: an `Avx2` value exists only on CPUs with avx2+fma+f16c; every row is
        // bounds-checked before the pointer loop.
        unsafe { group_scores(q, d, data, offsets, scale, out) }
    }

    #[inline(always)]
    fn group_weighted_sum<E: KvElement>(
        self,
        weights: &[f32],
        data: &[E],
        offsets: &[usize],
        d: usize,
        out: &mut [f32],
    ) {
        if !d.is_multiple_of(LANES) {
            return Portable.group_weighted_sum(weights, data, offsets, d, out);
        }
        // SAFETY: as above.
        unsafe { group_weighted_sum(weights, data, offsets, d, out) }
    }

    #[inline(always)]
    fn exp_sum(self, x: &mut [f32], shift: f32) -> f32 {
        // SAFETY: as above.
        unsafe { exp_sum(x, shift) }
    }

    #[inline(always)]
    fn silu_mul(self, gate: &[f32], up: &[f32], out: &mut [f32]) {
        // SAFETY: as above.
        unsafe { silu_mul(gate, up, out) }
    }

    #[inline(always)]
    fn gelu_tanh_mul(self, gate: &[f32], up: &[f32], out: &mut [f32]) {
        // SAFETY: as above.
        unsafe { gelu_tanh_mul(gate, up, out) }
    }

    #[inline(always)]
    fn gelu_tanh(self, x: &mut [f32]) {
        // SAFETY: as above.
        unsafe { gelu_tanh(x) }
    }

    #[inline(always)]
    fn max_finite(self, x: &[f32]) -> Option<f32> {
        // SAFETY: as above.
        unsafe { max_finite(x) }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{max_rows, values};
    use super::*;
    use half::f16;

    fn attention_ops_agree<E: KvElement>(fast: Avx2, convert: impl Fn(f32) -> E) {
        for (d, heads) in [
            (8usize, 1usize),
            (24, 3),
            (64, 7),
            (128, 2),
            (64, 3),
            (48, 5),
        ] {
            for n in [1usize, 3, 4, 5, 33, 70] {
                let data: Vec<E> = values(80 * d, 9).into_iter().map(&convert).collect();
                let offsets: Vec<usize> = (0..n).map(|i| (i * 7 % 79) * d).collect();
                let q = values(heads * d, 10);
                let (mut a, mut b) = (vec![0.0; heads * n], vec![0.0; heads * n]);
                fast.group_scores(&q, d, &data, &offsets, 0.125, &mut a);
                Portable.group_scores(&q, d, &data, &offsets, 0.125, &mut b);
                assert_eq!(a, b, "group_scores d={d} n={n}");
                let (mut x, mut y) = (vec![1.0; heads * d], vec![2.0; heads * d]);
                fast.group_weighted_sum(&a, &data, &offsets, d, &mut x);
                Portable.group_weighted_sum(&a, &data, &offsets, d, &mut y);
                assert_eq!(x, y, "group_weighted_sum d={d} n={n}");
            }
        }
    }

    #[test]
    fn avx2_agrees_bit_for_bit_with_the_portable_reference() {
        let Some(fast) = Avx2::for_isa(Isa::Avx2) else {
            eprintln!("skipping the AVX2 vector kernels: host lacks avx2+fma+f16c");
            return;
        };
        attention_ops_agree::<f32>(fast, |v| v);
        attention_ops_agree::<f16>(fast, f16::from_f32);
        for n in [0usize, 1, 7, 8, 9, 31, 64, 100] {
            let x = values(n, 7);
            let (mut a, mut b) = (x.clone(), x.clone());
            assert_eq!(fast.exp_sum(&mut a, 0.25), Portable.exp_sum(&mut b, 0.25));
            assert_eq!(a, b);
            let v = values(n, 8);
            let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
            fast.silu_mul(&x, &v, &mut a);
            Portable.silu_mul(&x, &v, &mut b);
            assert_eq!(a, b);
        }
        let wide: Vec<f32> = (-2000..2000).map(|i| i as f32 * 0.05).collect();
        let (mut a, mut b) = (wide.clone(), wide.clone());
        fast.exp_sum(&mut a, 0.0);
        Portable.exp_sum(&mut b, 0.0);
        assert_eq!(a, b);
        for row in max_rows() {
            let (a, b) = (fast.max_finite(&row), Portable.max_finite(&row));
            assert_eq!(a.map(f32::to_bits), b.map(f32::to_bits), "{row:?}");
        }
    }

    #[test]
    fn avx2_gelu_tanh_agrees_bit_for_bit_with_the_portable_reference() {
        let Some(fast) = Avx2::for_isa(Isa::Avx2) else {
            eprintln!("skipping kernels::vector::avx2 gelu_tanh: host lacks avx2+fma+f16c");
            return;
        };
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // Random values over the whole interesting range, the special values spread over
        // lanes and tails, and every length up to two vectors and a tail.
        let mut rows: Vec<Vec<f32>> = (0..=19).map(|n| values(n, 21 + n as u32)).collect();
        rows.push(values(100_003, 22).iter().map(|v| v * 6.0).collect());
        rows.push((-40_000..40_000).map(|i| i as f32 * 3e-4).collect());
        let special = super::super::tests::gelu_special_values();
        for r in 0..LANES {
            let mut row = special.clone();
            row.rotate_left(r);
            rows.push(row);
        }
        for x in &rows {
            let up = values(x.len(), 23);
            let (mut a, mut b) = (vec![0.0; x.len()], vec![0.0; x.len()]);
            fast.gelu_tanh_mul(x, &up, &mut a);
            Portable.gelu_tanh_mul(x, &up, &mut b);
            assert_eq!(bits(&a), bits(&b), "gelu_tanh_mul n={}", x.len());
            let (mut a, mut b) = (x.clone(), x.clone());
            fast.gelu_tanh(&mut a);
            Portable.gelu_tanh(&mut b);
            assert_eq!(bits(&a), bits(&b), "gelu_tanh n={}", x.len());
        }
    }
}
