//! Vector building blocks for attention and activations, each with one documented operation
//! order so the AVX2 path and the portable path give the same bits (tested), and a value never
//! depends on how many others are computed beside it.
//!
//! - [`VectorOps::group_scores`]: `q · k` for each query head against cached key rows. Per
//!   score, lane `l` accumulates `q[8c + l] · k[8c + l]` over chunks `c` with fused
//!   multiply-adds, then the lanes fold as `((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7))`; a tail past
//!   the last full chunk (portable path only: AVX2 runs when the width is a multiple of 8) is
//!   fused in afterwards. The AVX2 path scores four rows for up to three heads at once, so each
//!   key row is loaded (and widened from f16) once per three heads.
//! - [`exp`]: `e^x` by range reduction `x = n·ln2 + r` and a degree-6 polynomial in fused
//!   multiply-adds, about 1 ulp; inputs are clamped to `[-87, 88]`, so it never returns inf/0.
//! - [`VectorOps::exp_sum`]: `x[i] = e^(x[i] - shift)`, returning `Σ x[i]` summed in eight lanes
//!   by position modulo 8, folded like `dot4`, then the tail in order.
//! - [`VectorOps::group_weighted_sum`]: `out_h = Σ_i w[h, i] · v_i` for each head, one fused
//!   multiply-add per row and element, in row order, starting from zero.
//! - [`VectorOps::silu_mul`]: `out[i] = g[i] / (1 + e^-g[i]) · u[i]`.
//! - [`VectorOps::max_finite`]: the largest finite value, as eight running maxima by position
//!   modulo 8 (`if s > m { s } else { m }`), then the tail and the lanes folded in order.
//!
//! Which implementation runs follows [`Isa::current`], as for every kernel; [`exp_sum`] and
//! [`max_finite`] are the two other crates use (the sampler), dispatched the same way.

use half::f16;

#[cfg_attr(not(target_arch = "x86_64"), allow(unused_imports))]
use super::Isa;

/// Lanes per vector.
pub(crate) const LANES: usize = 8;

const EXP_LO: f32 = -87.0;
const EXP_HI: f32 = 88.0;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Cephes' `expf` coefficients, as published.
#[allow(clippy::excessive_precision)]
const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    5.000_000_1e-1,
];

/// `e^x` for one value (the reference for the vector paths).
#[inline]
#[allow(clippy::manual_clamp)] // max/min map NaN to a bound, as the vector max/min do; clamp keeps NaN
pub fn exp(x: f32) -> f32 {
    let x = x.max(EXP_LO).min(EXP_HI);
    let n = (x * LOG2E).round_ties_even();
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    let mut p = EXP_POLY[0];
    for &c in &EXP_POLY[1..] {
        p = p.mul_add(r, c);
    }
    let p = p.mul_add(r * r, r) + 1.0;
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// The fixed fold of eight lane sums every reduction in the kernels uses.
#[inline]
pub(crate) fn fold(s: [f32; LANES]) -> f32 {
    ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

/// How cached keys and values are stored: `f32`, or `f16` (half the memory and bandwidth;
/// widened exactly to f32 when read).
pub trait KvElement: Copy + Default + Send + Sync + 'static {
    /// The exact f32 value.
    fn to_f32(self) -> f32;
    /// Rounds `src` into `dst` (same length).
    fn store(src: &[f32], dst: &mut [Self]);
    /// Eight values from `p` widened to f32.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C, and eight values are readable at `p`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl KvElement for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    fn store(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(p)
    }
}

impl KvElement for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }

    fn store(src: &[f32], dst: &mut [f16]) {
        use half::slice::HalfFloatSliceExt;
        dst.convert_from_f32_slice(src);
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
}

/// The operations, in a portable and (on x86_64) an AVX2+FMA+F16C flavour.
pub trait VectorOps: Copy + Send + Sync {
    /// `out[h * n + i] = scale · (q_h · data[offsets[i]..][..d])` for every head `h` of
    /// `q: [heads, d]` and row `i < n = offsets.len()`.
    fn group_scores<E: KvElement>(
        self,
        q: &[f32],
        d: usize,
        data: &[E],
        offsets: &[usize],
        scale: f32,
        out: &mut [f32],
    );
    /// `out[h, :] = Σ_i weights[h * n + i] · data[offsets[i]..][..d]` for `out: [heads, d]`.
    fn group_weighted_sum<E: KvElement>(
        self,
        weights: &[f32],
        data: &[E],
        offsets: &[usize],
        d: usize,
        out: &mut [f32],
    );
    /// `x[i] = e^(x[i] - shift)`; returns their sum.
    fn exp_sum(self, x: &mut [f32], shift: f32) -> f32;
    /// `out[i] = silu(gate[i]) · up[i]`.
    fn silu_mul(self, gate: &[f32], up: &[f32], out: &mut [f32]);
    /// The largest finite value of `x`; `None` when none is finite.
    fn max_finite(self, x: &[f32]) -> Option<f32>;
}

/// Scalar code with the documented order; runs anywhere.
#[derive(Debug, Clone, Copy)]
pub struct Portable;

fn dot_portable<E: KvElement>(q: &[f32], k: &[E]) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = q.len() / LANES;
    for c in 0..chunks {
        let (qc, kc) = (&q[c * LANES..][..LANES], &k[c * LANES..][..LANES]);
        for ((a, &x), y) in acc.iter_mut().zip(qc).zip(kc) {
            *a = x.mul_add(y.to_f32(), *a);
        }
    }
    let mut sum = fold(acc);
    for i in chunks * LANES..q.len() {
        sum = q[i].mul_add(k[i].to_f32(), sum);
    }
    sum
}

impl VectorOps for Portable {
    fn group_scores<E: KvElement>(
        self,
        q: &[f32],
        d: usize,
        data: &[E],
        offsets: &[usize],
        scale: f32,
        out: &mut [f32],
    ) {
        let n = offsets.len();
        for (h, qh) in q.chunks_exact(d).enumerate() {
            for (i, &o) in offsets.iter().enumerate() {
                out[h * n + i] = dot_portable(qh, &data[o..][..d]) * scale;
            }
        }
    }

    fn group_weighted_sum<E: KvElement>(
        self,
        weights: &[f32],
        data: &[E],
        offsets: &[usize],
        d: usize,
        out: &mut [f32],
    ) {
        let n = offsets.len();
        out.fill(0.0);
        for (h, out_h) in out.chunks_exact_mut(d).enumerate() {
            for (i, &o) in offsets.iter().enumerate() {
                let w = weights[h * n + i];
                for (acc, v) in out_h.iter_mut().zip(&data[o..][..d]) {
                    *acc = w.mul_add(v.to_f32(), *acc);
                }
            }
        }
    }

    fn exp_sum(self, x: &mut [f32], shift: f32) -> f32 {
        let mut lanes = [0f32; LANES];
        let full = x.len() / LANES * LANES;
        for (i, v) in x.iter_mut().enumerate() {
            *v = exp(*v - shift);
            if i < full {
                lanes[i % LANES] += *v;
            }
        }
        let mut sum = fold(lanes);
        for &v in &x[full..] {
            sum += v;
        }
        sum
    }

    fn silu_mul(self, gate: &[f32], up: &[f32], out: &mut [f32]) {
        for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
            *o = g / (1.0 + exp(-g)) * u;
        }
    }

    fn max_finite(self, x: &[f32]) -> Option<f32> {
        max_finite_lanes(x)
    }
}

/// [`VectorOps::max_finite`] in plain Rust; eight running maxima let the compiler vectorise
/// the scan (to the width of the target features it is compiled with).
#[inline(always)]
fn max_finite_lanes(scores: &[f32]) -> Option<f32> {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = scores.chunks_exact(LANES);
    let finite_or_low = |s: f32| if s.is_finite() { s } else { f32::NEG_INFINITY };
    for chunk in &mut chunks {
        for (m, &s) in lanes.iter_mut().zip(chunk) {
            let s = finite_or_low(s);
            *m = if s > *m { s } else { *m };
        }
    }
    let best = chunks
        .remainder()
        .iter()
        .map(|&s| finite_or_low(s))
        .chain(lanes)
        .fold(f32::NEG_INFINITY, |a, b| if b > a { b } else { a });
    (best > f32::NEG_INFINITY).then_some(best)
}

/// The fastest operations [`Isa::current`] has for rows of `width` values (AVX2 needs a
/// multiple of 8). The choice depends only on the ISA and the width, so it is the same for
/// every call a model makes.
pub fn best_ops(width: usize) -> Ops {
    #[cfg(target_arch = "x86_64")]
    {
        if width.is_multiple_of(LANES) {
            if let Some(avx2) = avx2::Avx2::for_isa(Isa::current()) {
                return Ops::Avx2(avx2);
            }
        }
    }
    let _ = width;
    Ops::Portable(Portable)
}

/// `x[i] = e^(x[i] - shift)`; returns their sum ([`VectorOps::exp_sum`] with
/// [`best_ops`]`(x.len())`).
pub fn exp_sum(x: &mut [f32], shift: f32) -> f32 {
    best_ops(x.len()).exp_sum(x, shift)
}

/// The largest finite value of `x`, `None` when none is finite ([`VectorOps::max_finite`] on
/// [`Isa::current`], whatever the length).
pub fn max_finite(x: &[f32]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    if let Some(avx2) = avx2::Avx2::for_isa(Isa::current()) {
        return avx2.max_finite(x);
    }
    Portable.max_finite(x)
}

/// One of the implementations, chosen at run time by [`best_ops`].
#[derive(Debug, Clone, Copy)]
pub enum Ops {
    /// Scalar.
    Portable(Portable),
    /// AVX2 + FMA + F16C.
    #[cfg(target_arch = "x86_64")]
    Avx2(avx2::Avx2),
}

macro_rules! forward_ops {
    ($self:ident, $ops:ident => $call:expr) => {
        match $self {
            Ops::Portable($ops) => $call,
            #[cfg(target_arch = "x86_64")]
            Ops::Avx2($ops) => $call,
        }
    };
}

impl VectorOps for Ops {
    fn group_scores<E: KvElement>(
        self,
        q: &[f32],
        d: usize,
        data: &[E],
        offsets: &[usize],
        scale: f32,
        out: &mut [f32],
    ) {
        forward_ops!(self, ops => ops.group_scores(q, d, data, offsets, scale, out))
    }

    fn group_weighted_sum<E: KvElement>(
        self,
        weights: &[f32],
        data: &[E],
        offsets: &[usize],
        d: usize,
        out: &mut [f32],
    ) {
        forward_ops!(self, ops => ops.group_weighted_sum(weights, data, offsets, d, out))
    }

    fn exp_sum(self, x: &mut [f32], shift: f32) -> f32 {
        forward_ops!(self, ops => ops.exp_sum(x, shift))
    }

    fn silu_mul(self, gate: &[f32], up: &[f32], out: &mut [f32]) {
        forward_ops!(self, ops => ops.silu_mul(gate, up, out))
    }

    fn max_finite(self, x: &[f32]) -> Option<f32> {
        forward_ops!(self, ops => ops.max_finite(x))
    }
}

#[cfg(target_arch = "x86_64")]
pub mod avx2 {
    //! AVX2 + FMA + F16C implementations of [`VectorOps`].

    use super::*;
    use crate::kernels::balanced_parts;
    use std::arch::x86_64::*;

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
        let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(x, _mm256_set1_ps(LOG2E)),
        );
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
            let qv: [__m256; H] = std::array::from_fn(|h| _mm256_loadu_ps(q.add(h * d + c)));
            for r in 0..4 {
                let k = E::load8(rows[r].add(c));
                for h in 0..H {
                    acc[h][r] = _mm256_fmadd_ps(qv[h], k, acc[h][r]);
                }
            }
        }
        // The fold tree through two horizontal adds and a cross-half add: lane pairs (0,1),
        // (2,3) first, then those pairs, then the two 128-bit halves.
        std::array::from_fn(|h| {
            let a = acc[h];
            let t = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
            let total = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps::<1>(t));
            let mut out = [0f32; 4];
            _mm_storeu_ps(out.as_mut_ptr(), total);
            out
        })
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
    #[allow(clippy::too_many_arguments)]
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
            let v: [__m256; V] = std::array::from_fn(|j| E::load8(row.add(j * LANES)));
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
        fn max_finite(self, x: &[f32]) -> Option<f32> {
            // SAFETY: as above.
            unsafe { max_finite(x) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_values;

    /// Values in `[-4, 4)`.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        test_values(n, seed).into_iter().map(|v| v * 8.0).collect()
    }

    #[test]
    fn exp_is_within_two_ulp_of_the_true_value() {
        let mut x = -87.0f32;
        while x <= 88.0 {
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            assert!(
                ((got - want) / want).abs() < 2.5e-7,
                "exp({x}) = {got}, want {want}"
            );
            x += 0.0137;
        }
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1e9) > 0.0 && exp(1e9).is_finite());
    }

    #[test]
    fn scores_and_weighted_sums_match_plain_formulas_for_any_width() {
        for d in [1usize, 7, 8, 24, 64, 67] {
            let heads = 3;
            let q = values(heads * d, 1);
            let data = values(20 * d, 2);
            let offsets: Vec<usize> = [3usize, 0, 7, 19, 5].iter().map(|r| r * d).collect();
            let n = offsets.len();
            let mut scores = vec![0.0; heads * n];
            Portable.group_scores(&q, d, &data, &offsets, 0.5, &mut scores);
            let mut sums = vec![0.0; heads * d];
            Portable.group_weighted_sum(&scores, &data, &offsets, d, &mut sums);
            for h in 0..heads {
                for (i, &o) in offsets.iter().enumerate() {
                    let exact: f64 = (0..d)
                        .map(|c| q[h * d + c] as f64 * data[o + c] as f64)
                        .sum::<f64>()
                        * 0.5;
                    assert!((scores[h * n + i] as f64 - exact).abs() < 1e-4 * d as f64);
                }
                for c in 0..d {
                    let exact: f64 = (0..n)
                        .map(|i| scores[h * n + i] as f64 * data[offsets[i] + c] as f64)
                        .sum();
                    assert!((sums[h * d + c] as f64 - exact).abs() < 1e-3 * d as f64);
                }
            }
        }
    }

    #[test]
    fn exp_sum_and_silu_match_scalar_formulas() {
        let mut x = values(37, 3);
        let orig = x.clone();
        let sum = Portable.exp_sum(&mut x, 1.5);
        for (e, o) in x.iter().zip(&orig) {
            assert!((e - (o - 1.5).exp()).abs() <= 1e-6 * e.abs().max(1.0));
        }
        assert!((sum - x.iter().sum::<f32>()).abs() < 1e-4);
        let (g, u) = (values(19, 4), values(19, 5));
        let mut out = vec![0.0; 19];
        Portable.silu_mul(&g, &u, &mut out);
        for i in 0..19 {
            let want = g[i] / (1.0 + (-g[i]).exp()) * u[i];
            assert!((out[i] - want).abs() < 1e-5, "{} vs {want}", out[i]);
        }
    }

    /// Rows for [`VectorOps::max_finite`]: plain values, and values among NaN, infinities and
    /// zeros of both signs at every position modulo 8.
    fn max_rows() -> Vec<Vec<f32>> {
        let mut rows: Vec<Vec<f32>> = [0usize, 1, 7, 8, 9, 31, 64, 100]
            .iter()
            .map(|&n| values(n, 11))
            .collect();
        let odd = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];
        for n in [5usize, 16, 19] {
            for (k, &v) in odd.iter().enumerate() {
                rows.push(
                    (0..n)
                        .map(|i| if i % 3 == k % 3 { v } else { -1.0 })
                        .collect(),
                );
                rows.push(vec![v; n]);
            }
        }
        rows.push(vec![-0.0, 0.0, -0.0, 0.0, 0.0, -0.0, 0.0, -0.0, 0.0]);
        rows
    }

    #[test]
    fn max_finite_is_the_largest_finite_value() {
        for row in max_rows() {
            let want = row
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(None, |m: Option<f32>, v| Some(m.map_or(v, |m| m.max(v))));
            assert_eq!(Portable.max_finite(&row), want, "{row:?}");
            assert_eq!(max_finite(&row), want, "{row:?}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn attention_ops_agree<E: KvElement>(fast: avx2::Avx2, convert: impl Fn(f32) -> E) {
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

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_agrees_bit_for_bit_with_the_portable_reference() {
        let Some(fast) = avx2::Avx2::for_isa(Isa::Avx2) else {
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
}
