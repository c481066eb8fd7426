//! The arithmetic both activation quantizers share (Q8_0's 32-value blocks in `act_q8_0.rs`,
//! Q8_K's 256-value super-blocks in `act_q8k.rs`): the block's largest magnitude, rounding to
//! the nearest integer, and their AVX2 forms, which do the scalar operations lane by lane so
//! the vector quantizers give the scalar bytes.

/// `v` rounded to the nearest integer (ties to even) for `|v| < 2^22`: adding 1.5·2^23 leaves
/// the rounded integer in the low mantissa bits. One add and a mask, where `f32::round` is a
/// library call on baseline x86-64.
#[inline(always)]
pub(super) fn nearest_int(v: f32) -> i32 {
    debug_assert!(v.abs() < 4_194_304.0);
    ((v + 12_582_912.0).to_bits() & 0x007F_FFFF) as i32 - 0x0040_0000
}

/// The largest `|v|` of `x` (a multiple of 8 values), 0 for none. Kept in 8 lanes, so it
/// compiles to vector maxima rather than one serial chain; the maximum of a set does not depend
/// on the order it is taken in, so the value is the same as a scalar fold's.
#[inline(always)]
pub(super) fn abs_max(x: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    for chunk in x.chunks_exact(8) {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane = lane.max(v.abs());
        }
    }
    lanes.into_iter().fold(0f32, f32::max)
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use std::arch::x86_64::*;

    /// The 32 values at `p`, 8 to a vector.
    #[inline(always)]
    pub unsafe fn load32(p: *const f32) -> [__m256; 4] {
        // Written out rather than `array::from_fn(|i| ..)`: a closure is a function of its own
        // that does not inherit its caller's target features, so the intrinsics in it can stay
        // out-of-line calls (they did in `quantize32`, 8% of a 16-stream serving profile).
        [
            _mm256_loadu_ps(p),
            _mm256_loadu_ps(p.add(8)),
            _mm256_loadu_ps(p.add(16)),
            _mm256_loadu_ps(p.add(24)),
        ]
    }

    /// The largest `|v|` of `v` (vectors of 8 lanes), as [`super::abs_max`] takes it.
    #[inline(always)]
    pub unsafe fn abs_max(v: &[__m256]) -> f32 {
        let sign = _mm256_set1_ps(-0.0);
        let m = v.iter().fold(_mm256_setzero_ps(), |m, v| {
            _mm256_max_ps(m, _mm256_andnot_ps(sign, *v))
        });
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<1>(m, m)))
    }

    /// The 8 lanes of `v` added up.
    #[inline(always)]
    unsafe fn sum(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<1>(s)))
    }

    /// 32 values quantized with `inverse` (`127 / amax`) as `nearest_int(v * inverse)
    /// .clamp(-127, 127)` does lane by lane (the same mul, add of 1.5·2^23 and mask): the
    /// 32 bytes in order, and the sums of the first and the last 16.
    #[inline(always)]
    pub unsafe fn quantize32(v: &[__m256; 4], inverse: f32) -> (__m256i, i32, i32) {
        let inverse = _mm256_set1_ps(inverse);
        let magic = _mm256_set1_ps(12_582_912.0);
        let (mask, half) = (
            _mm256_set1_epi32(0x007F_FFFF),
            _mm256_set1_epi32(0x0040_0000),
        );
        let (lo, hi) = (_mm256_set1_epi32(-127), _mm256_set1_epi32(127));
        // No closure here (see `load32`).
        let mut q = [_mm256_setzero_si256(); 4];
        for (q, v) in q.iter_mut().zip(v) {
            let t = _mm256_castps_si256(_mm256_add_ps(_mm256_mul_ps(*v, inverse), magic));
            let n = _mm256_sub_epi32(_mm256_and_si256(t, mask), half);
            *q = _mm256_max_epi32(_mm256_min_epi32(n, hi), lo);
        }
        let first = sum(_mm256_add_epi32(q[0], q[1]));
        let last = sum(_mm256_add_epi32(q[2], q[3]));
        // Packing works within 128-bit lanes: dwords come out as values 0-3, 8-11, 16-19,
        // 24-27, 4-7, 12-15, 20-23, 28-31, put back in order by the permutation.
        let bytes = _mm256_packs_epi16(
            _mm256_packs_epi32(q[0], q[1]),
            _mm256_packs_epi32(q[2], q[3]),
        );
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        (_mm256_permutevar8x32_epi32(bytes, order), first, last)
    }
}
