//! Attention over a staged tile of a bf16 KV cache with AVX-512 BF16's `vdpbf16ps`, which
//! multiplies sixteen pairs of bf16 values by sixteen others and adds both products of a pair
//! to an f32 lane: twice the multiply-adds of an f32 `vfmadd` per instruction, and the cache's
//! own values with no widening.
//!
//! The order, which fixes the bits ([`reference`] in the tests follows it value by value):
//! - Bf16 rounding is round to nearest even, a denormal becoming a zero of its sign
//!   (`vcvtneps2bf16`). A query's heads are rounded to bf16 before scoring.
//! - Every multiply-add is a fused f32 one (the product of two bf16 values is exact) with
//!   denormal inputs read as zero and a denormal result flushed to zero.
//! - The score of a key is summed from +0 over its pairs of elements `(2c, 2c+1)` in order:
//!   `s += q[2c+1]·k[2c+1]`, then `s += q[2c]·k[2c]`; then it is multiplied by the scale.
//! - A tile's weighted values: the softmax weights are rounded to bf16, and each output element
//!   is summed from +0 over pairs of positions `(2m, 2m+1)`, counted from the tile's first
//!   absolute position (so the pairing never depends on the run a query is in), for the pairs
//!   that meet the query's visible range, weights outside it zero: `p += w[2m+1]·v[2m+1]`, then
//!   `p += w[2m]·v[2m]`. `p` then joins the running output as the f32 kernels do: `p`,
//!   `acc + p`, or `acc·rescale + p` fused.
//!
//! Nothing here is batch- or chunk-dependent, so a token gets the same bits decoded or in any
//! prompt chunk. Every token of a bf16 cache takes these kernels on a CPU with AVX-512 BF16 (a
//! decode step stages its tiles too); other CPUs widen the bf16 values and run the f32 kernels,
//! so a bf16 cache's results depend on whether the CPU has the instruction.

use std::arch::x86_64::*;

use super::avx512::{store_rescaled, transpose8, Avx512};
use super::{Isa, LANES};
use crate::kernels::balanced_parts;

/// Proof that the CPU has AVX-512 F and BF16 (only [`Avx512Bf16::for_isa`] makes one).
#[derive(Debug, Clone, Copy)]
pub struct Avx512Bf16 {
    f32: Avx512,
}

/// Lanes of a 512-bit f32 vector.
const KEYS: usize = 16;

impl Avx512Bf16 {
    /// These kernels where `isa` has AVX-512 BF16 and this CPU runs `isa`.
    pub fn for_isa(isa: Isa) -> Option<Self> {
        let f32 = Avx512::for_isa(isa)?;
        isa.has_avx512_bf16().then_some(Self { f32 })
    }

    /// The f32 AVX-512 kernels (the softmax's exponentials and maxima).
    pub fn f32(self) -> Avx512 {
        self.f32
    }

    /// Stages one tile of `tile` positions of a bf16 cache. Tile index `skip + i` holds the rows
    /// at offset `rows[i]` (into `keys` and `values`, `d` values each); every other index reads
    /// as zero. Keys go to `keys_p[c * stride + t]`: the pair of elements `(2c, 2c+1)` of the
    /// key at index `t`, the even one in the low half. Values go to `values_p[m * d + c]`: the
    /// pair of column `c` of the rows at indices `(2m, 2m+1)`. Staging copies bits.
    #[allow(clippy::too_many_arguments)]
    pub fn stage_tile(
        self,
        keys: &[u16],
        values: &[u16],
        rows: &[usize],
        skip: usize,
        tile: usize,
        d: usize,
        keys_p: &mut [u32],
        stride: usize,
        values_p: &mut [u32],
    ) {
        assert!(d.is_multiple_of(KEYS) && tile.is_multiple_of(2 * LANES));
        assert!(skip + rows.len() <= tile && tile <= stride);
        assert!(keys_p.len() >= d / 2 * stride && values_p.len() >= tile / 2 * d);
        for &o in rows {
            assert!(
                o + d <= keys.len() && o + d <= values.len(),
                "row out of range"
            );
        }
        // SAFETY: an `Avx512Bf16` exists only where the CPU runs AVX-512 F (so AVX2); the
        // asserts bound every load and store.
        unsafe { stage_tile(keys, values, rows, skip, d, keys_p, stride, values_p) }
    }

    /// `q` (a multiple of 16 long) rounded to bf16 as pairs for [`Avx512Bf16::scores`]:
    /// `out[i]` holds `q[2i]` in its low half and `q[2i + 1]`.
    pub fn round_pairs(self, q: &[f32], out: &mut [u32]) {
        assert!(q.len().is_multiple_of(KEYS) && out.len() * 2 >= q.len());
        // SAFETY: as for `stage_tile`, and the CPU has AVX-512 BF16; every access is within
        // `q` and `out`.
        unsafe { round_pairs(q, out) }
    }

    /// `out[h * n + j]`: the score of head `h` of the queries `q_p: [heads, d / 2]` (rounded to
    /// pairs by [`Avx512Bf16::round_pairs`]) against the staged key at index `first + j`, for
    /// `j < n` (the module's order).
    #[allow(clippy::too_many_arguments)]
    pub fn scores(
        self,
        q_p: &[u32],
        d: usize,
        keys_p: &[u32],
        stride: usize,
        first: usize,
        n: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let heads = q_p.len() * 2 / d;
        assert!(d.is_multiple_of(KEYS) && q_p.len() * 2 == heads * d && out.len() >= heads * n);
        assert!(first + n.next_multiple_of(KEYS) <= stride && keys_p.len() >= d / 2 * stride);
        // SAFETY: as for `round_pairs`; the asserts bound every load and every (masked) store.
        unsafe { scores(q_p, d, keys_p, stride, first, n, scale, out) }
    }

    /// Adds one tile's weighted values into each head's running output `acc: [heads, d]`:
    /// `weights[h * n + j]` weighs the staged value row at index `first + j` (the module's
    /// order; `rescale[h]` as in [`Avx512::weighted_accumulate`]). `packed` is scratch.
    #[allow(clippy::too_many_arguments)]
    pub fn accumulate(
        self,
        weights: &[f32],
        values_p: &[u32],
        first: usize,
        n: usize,
        d: usize,
        rescale: &[f32],
        acc: &mut [f32],
        packed: &mut Vec<u32>,
    ) {
        let heads = acc.len() / d;
        assert!(d.is_multiple_of(KEYS) && acc.len() == heads * d && rescale.len() >= heads);
        let (m0, m1) = (first / 2, (first + n).div_ceil(2));
        assert!(weights.len() >= heads * n && values_p.len() >= m1 * d);
        let pairs = m1 - m0;
        packed.clear();
        packed.resize(heads * pairs, 0);
        {
            // Each head's weights as bf16 at their tile index, less `2 · m0`; the rest zero.
            let halves: &mut [u16] = bytemuck::cast_slice_mut(packed);
            for h in 0..heads {
                let row = &mut halves[h * 2 * pairs..][..2 * pairs];
                // SAFETY: as for `scores` (the CPU has AVX-512 BW with BF16, `Isa`'s check);
                // `first - 2 m0 + n <= 2 pairs`.
                unsafe { round_into(&weights[h * n..][..n], &mut row[first - 2 * m0..][..n]) }
            }
        }
        // SAFETY: as for `scores`; the asserts bound every load and store.
        unsafe {
            accumulate(
                packed,
                pairs,
                values_p.as_ptr().add(m0 * d),
                d,
                rescale,
                acc,
            )
        }
    }
}

#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn stage_tile(
    keys: &[u16],
    values: &[u16],
    rows: &[usize],
    skip: usize,
    d: usize,
    keys_p: &mut [u32],
    stride: usize,
    values_p: &mut [u32],
) {
    let (kp, vp) = (keys.as_ptr(), values.as_ptr());
    let end = skip + rows.len();
    // The row at tile index `t`, if staged.
    let row = |t: usize| (skip..end).contains(&t).then(|| rows[t - skip]);
    let half = d / 2;
    // Keys: eight rows of eight pairs at a time, transposed as 32-bit lanes.
    for t0 in (skip / LANES * LANES..end).step_by(LANES) {
        let offsets: [Option<usize>; LANES] = std::array::from_fn(|i| row(t0 + i));
        for c in (0..half).step_by(LANES) {
            // Loops, not `array::from_fn` closures, around intrinsics: a closure does not
            // inherit the target features, and its intrinsics can stay out-of-line calls.
            let mut r = [_mm256_setzero_ps(); LANES];
            for (r, o) in r.iter_mut().zip(offsets) {
                if let Some(o) = o {
                    *r = _mm256_loadu_ps(kp.add(o + 2 * c) as *const f32);
                }
            }
            for (l, col) in transpose8(r).iter().enumerate() {
                _mm256_storeu_ps(
                    keys_p.as_mut_ptr().add((c + l) * stride + t0) as *mut f32,
                    *col,
                );
            }
        }
    }
    // Values: rows `2m` and `2m + 1` interleaved sixteen columns at a time.
    for m in skip / 2..end.div_ceil(2) {
        let (even, odd) = (row(2 * m), row(2 * m + 1));
        for c in (0..d).step_by(KEYS) {
            let (mut a, mut b) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            if let Some(o) = even {
                a = _mm256_loadu_si256(vp.add(o + c) as *const __m256i);
            }
            if let Some(o) = odd {
                b = _mm256_loadu_si256(vp.add(o + c) as *const __m256i);
            }
            let (lo, hi) = (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b));
            let out = values_p.as_mut_ptr().add(m * d + c) as *mut __m256i;
            _mm256_storeu_si256(out, _mm256_permute2x128_si256::<0x20>(lo, hi));
            _mm256_storeu_si256(out.add(1), _mm256_permute2x128_si256::<0x31>(lo, hi));
        }
    }
}

/// `x` (a multiple of 16 long) rounded to bf16 as pairs: `out[i]` holds `x[2i]` (low half) and
/// `x[2i + 1]`.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn round_pairs(x: &[f32], out: &mut [u32]) {
    debug_assert!(out.len() * 2 >= x.len());
    for i in (0..x.len()).step_by(KEYS) {
        let h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x.as_ptr().add(i)));
        _mm256_storeu_si256(
            out.as_mut_ptr().add(i / 2) as *mut __m256i,
            std::mem::transmute::<__m256bh, __m256i>(h),
        );
    }
}

/// `out[i] = bf16(x[i])` (same lengths).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
unsafe fn round_into(x: &[f32], out: &mut [u16]) {
    debug_assert_eq!(x.len(), out.len());
    for i in (0..x.len()).step_by(KEYS) {
        let left = x.len() - i;
        let mask: __mmask16 = if left >= KEYS { !0 } else { (1u16 << left) - 1 };
        let h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, x.as_ptr().add(i)));
        let h = std::mem::transmute::<__m256bh, __m256i>(h);
        _mm256_mask_storeu_epi16(out.as_mut_ptr().add(i) as *mut i16, mask, h);
    }
}

/// Most heads scored together: with two key vectors, `2 H` accumulators and the keys fit the
/// registers.
const SCORE_HEADS: usize = 7;

#[target_feature(enable = "avx512f,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn scores(
    q_p: &[u32],
    d: usize,
    keys_p: &[u32],
    stride: usize,
    first: usize,
    n: usize,
    scale: f32,
    out: &mut [f32],
) {
    let half = d / 2;
    let heads = q_p.len() / half;
    let mut h0 = 0;
    for part in balanced_parts(heads, SCORE_HEADS) {
        let (qp, kp) = (q_p.as_ptr().add(h0 * half), keys_p.as_ptr().add(first));
        let op = out.as_mut_ptr().add(h0 * n);
        for j in (0..n).step_by(2 * KEYS) {
            macro_rules! heads {
                ($($h:literal)*) => {
                    match (part, n - j > KEYS) {
                        $(
                            ($h, false) => score_keys::<$h, 1>(qp, half, kp, stride, j, n, scale, op),
                            ($h, true) => score_keys::<$h, 2>(qp, half, kp, stride, j, n, scale, op),
                        )*
                        _ => unreachable!("parts are at most {SCORE_HEADS} heads"),
                    }
                };
            }
            heads!(1 2 3 4 5 6 7);
        }
        h0 += part;
    }
}

/// `H` heads' scores against `V` vectors of keys from index `j` (`q_p` and `keys_p` already
/// offset to the part's first head and the first key; `out` rows `n` apart).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn score_keys<const H: usize, const V: usize>(
    q_p: *const u32,
    half: usize,
    keys_p: *const u32,
    stride: usize,
    j: usize,
    n: usize,
    scale: f32,
    out: *mut f32,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; H];
    for c in 0..half {
        let mut k = [std::mem::transmute::<__m512, __m512bh>(_mm512_setzero_ps()); V];
        for (v, k) in k.iter_mut().enumerate() {
            let at = keys_p.add(c * stride + j + v * KEYS);
            *k = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(at as *const __m512i));
        }
        for (h, acc) in acc.iter_mut().enumerate() {
            let q = _mm512_set1_epi32(*q_p.add(h * half + c) as i32);
            let q = std::mem::transmute::<__m512i, __m512bh>(q);
            for v in 0..V {
                acc[v] = _mm512_dpbf16_ps(acc[v], q, k[v]);
            }
        }
    }
    let scale = _mm512_set1_ps(scale);
    for v in 0..V {
        let left = n - (j + v * KEYS);
        let mask: __mmask16 = if left >= KEYS { !0 } else { (1u16 << left) - 1 };
        for (h, acc) in acc.iter().enumerate() {
            let at = out.add(h * n + j + v * KEYS);
            _mm512_mask_storeu_ps(at, mask, _mm512_mul_ps(acc[v], scale));
        }
    }
}

/// Most heads summed together: with four vectors of columns, `4 H` accumulators and the value
/// vectors fit the registers.
const SUM_HEADS: usize = 6;
/// Vectors of columns a pass keeps (64 columns).
const SUM_STRIP: usize = 4;

/// `w_p: [heads, pairs]` weight pairs, `values_p` staged pairs from the first pair on.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn accumulate(
    w_p: &[u32],
    pairs: usize,
    values_p: *const u32,
    d: usize,
    rescale: &[f32],
    acc: &mut [f32],
) {
    let heads = acc.len() / d;
    let mut h0 = 0;
    for part in balanced_parts(heads, SUM_HEADS) {
        let (w, r) = (w_p.as_ptr().add(h0 * pairs), rescale.as_ptr().add(h0));
        let mut col = 0;
        while col < d {
            let vectors = ((d - col) / KEYS).min(SUM_STRIP);
            let (v, a) = (values_p.add(col), acc.as_mut_ptr().add(h0 * d + col));
            macro_rules! strip {
                ($($h:literal)*) => {
                    match (part, vectors) {
                        $(
                            ($h, 1) => sum_strip::<$h, 1>(w, pairs, v, d, r, a),
                            ($h, 2) => sum_strip::<$h, 2>(w, pairs, v, d, r, a),
                            ($h, 3) => sum_strip::<$h, 3>(w, pairs, v, d, r, a),
                            ($h, _) => sum_strip::<$h, 4>(w, pairs, v, d, r, a),
                        )*
                        _ => unreachable!("parts are at most {SUM_HEADS} heads"),
                    }
                };
            }
            strip!(1 2 3 4 5 6);
            col += vectors * KEYS;
        }
        h0 += part;
    }
}

/// `H` heads' sums over `C` vectors of columns (`values_p` and `acc` offset to the strip's
/// first column; pair rows `d` apart, heads' weights `pairs` apart, outputs `d` apart).
#[inline(always)]
unsafe fn sum_strip<const H: usize, const C: usize>(
    w_p: *const u32,
    pairs: usize,
    values_p: *const u32,
    d: usize,
    rescale: *const f32,
    acc: *mut f32,
) {
    let mut sums = [[_mm512_setzero_ps(); C]; H];
    for m in 0..pairs {
        let mut x = [std::mem::transmute::<__m512, __m512bh>(_mm512_setzero_ps()); C];
        for (c, x) in x.iter_mut().enumerate() {
            let at = values_p.add(m * d + c * KEYS) as *const __m512i;
            *x = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(at));
        }
        for (h, sums) in sums.iter_mut().enumerate() {
            let w = _mm512_set1_epi32(*w_p.add(h * pairs + m) as i32);
            let w = std::mem::transmute::<__m512i, __m512bh>(w);
            for c in 0..C {
                sums[c] = _mm512_dpbf16_ps(sums[c], w, x[c]);
            }
        }
    }
    for (h, sums) in sums.iter().enumerate() {
        for (c, &p) in sums.iter().enumerate() {
            store_rescaled(acc.add(h * d + c * KEYS), *rescale.add(h), p);
        }
    }
}

#[cfg(test)]
mod tests;
