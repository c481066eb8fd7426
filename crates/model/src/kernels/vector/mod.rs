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
//! - [`gelu_tanh`]: GELU's tanh approximation as `x / (1 + e^(-2u))`, the input clamped below
//!   at -10 (NaN kept); its doc comment gives the operation order.
//! - [`VectorOps::gelu_tanh_mul`]: `out[i] = gelu_tanh(g[i]) · u[i]`; [`VectorOps::gelu_tanh`]:
//!   `x[i] = gelu_tanh(x[i])` in place.
//! - [`VectorOps::max_finite`]: the largest finite value, as eight running maxima by position
//!   modulo 8 (`if s > m { s } else { m }`), then the tail and the lanes folded in order.
//!
//! Which implementation runs follows [`Isa::current`], as for every kernel; [`exp_sum`] and
//! [`max_finite`] are the two other crates use (the sampler), dispatched the same way.
//!
//! One file per instruction set: `portable.rs` is the reference every other file must match
//! bit for bit (and is tested against plain formulas), `avx2.rs` the AVX2+FMA+F16C kernels
//! (tested against `portable.rs`), `avx512.rs` attention scores against a staged, transposed key
//! tile for runs of prompt tokens (the `group_scores` order, tested against `portable.rs`).
//! This file holds what they share and the dispatch.

use half::{bf16, f16};

#[cfg_attr(not(target_arch = "x86_64"), allow(unused_imports))]
use super::Isa;

mod portable;
pub use portable::{exp, gelu_tanh, Portable};

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
pub mod avx512_bf16;

/// Lanes per vector.
pub(crate) const LANES: usize = 8;

/// The fixed fold of eight lane sums every reduction in the kernels uses.
#[inline]
pub(crate) fn fold(s: [f32; LANES]) -> f32 {
    ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

/// How cached keys and values are stored: `f32`, or `f16` / `bf16` (half the memory and
/// bandwidth; widened exactly to f32 when read).
pub trait KvElement: Copy + Default + Send + Sync + 'static {
    /// The stored bits of a bf16 cache's values (whose attention multiplies in bf16 where the
    /// CPU can); `None` for other types.
    fn bf16_bits(data: &[Self]) -> Option<&[u16]> {
        let _ = data;
        None
    }
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

impl KvElement for bf16 {
    fn bf16_bits(data: &[bf16]) -> Option<&[u16]> {
        Some(bytemuck::cast_slice(data))
    }

    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }

    fn store(src: &[f32], dst: &mut [bf16]) {
        use half::slice::HalfFloatSliceExt;
        dst.convert_from_f32_slice(src);
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const bf16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        let bits = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(bits))
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
    /// `out[i] = gelu_tanh(gate[i]) · up[i]` ([`gelu_tanh`]).
    fn gelu_tanh_mul(self, gate: &[f32], up: &[f32], out: &mut [f32]);
    /// `x[i] = gelu_tanh(x[i])` ([`gelu_tanh`]).
    fn gelu_tanh(self, x: &mut [f32]);
    /// The largest finite value of `x`; `None` when none is finite.
    fn max_finite(self, x: &[f32]) -> Option<f32>;
}

/// The fastest operations [`Isa::current`] has for rows of `width` values (AVX2's
/// `group_scores` and `group_weighted_sum` need a multiple of 8; element-by-element work takes
/// [`elementwise_ops`] at any width). The choice depends only on the ISA and the width, so it is
/// the same for every call a model makes.
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

/// The fastest operations [`Isa::current`] has for element-by-element work (`silu_mul`,
/// `gelu_tanh_mul`, `gelu_tanh`, `exp_sum`) on rows of any length: the vector kernels finish a
/// row's last values with the portable ones, which give the same bits. (Through [`best_ops`], a
/// vision MLP 3,420 wide ran its SiLU in scalar code, software `fmaf` calls included, as did
/// the sampler's softmax over a vocabulary that is not a multiple of 8.)
pub fn elementwise_ops() -> Ops {
    best_ops(LANES)
}

/// `x[i] = e^(x[i] - shift)`; returns their sum ([`VectorOps::exp_sum`] with
/// [`elementwise_ops`], at any length).
pub fn exp_sum(x: &mut [f32], shift: f32) -> f32 {
    elementwise_ops().exp_sum(x, shift)
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

    fn gelu_tanh_mul(self, gate: &[f32], up: &[f32], out: &mut [f32]) {
        forward_ops!(self, ops => ops.gelu_tanh_mul(gate, up, out))
    }

    fn gelu_tanh(self, x: &mut [f32]) {
        forward_ops!(self, ops => ops.gelu_tanh(x))
    }

    fn max_finite(self, x: &[f32]) -> Option<f32> {
        forward_ops!(self, ops => ops.max_finite(x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_values;

    /// Values in `[-4, 4)`.
    pub(super) fn values(n: usize, seed: u32) -> Vec<f32> {
        test_values(n, seed).into_iter().map(|v| v * 8.0).collect()
    }

    /// Rows for [`VectorOps::max_finite`]: plain values, and NaN, infinities and zeros of both
    /// signs among `-1`s, in the lanes and in the tail.
    pub(super) fn max_rows() -> Vec<Vec<f32>> {
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

    /// Inputs where [`gelu_tanh`] could go wrong: zeros of both signs, values too small to
    /// notice, the clamp's edge, values whose cube overflows, infinities and NaN, each sign:
    /// 26 of them (three vectors and a tail).
    pub(super) fn gelu_special_values() -> Vec<f32> {
        let magnitudes = [
            0.0,
            1e-40,
            f32::MIN_POSITIVE,
            1e-20,
            1e-7,
            0.5,
            9.999,
            10.0,
            10.001,
            1e13,
            f32::MAX,
            f32::INFINITY,
        ];
        let mut v: Vec<f32> = magnitudes.iter().flat_map(|&m| [m, -m]).collect();
        v.insert(11, f32::NAN);
        v.push(-f32::NAN);
        v
    }

    /// The dispatching functions give the portable bits whatever [`Isa::current`] is
    /// (`SLUICE_ISA=portable|avx2|avx512vnni cargo test` runs each).
    #[test]
    fn the_dispatched_kernels_give_the_portable_bits() {
        for n in [0usize, 1, 7, 8, 9, 31, 64, 100] {
            let x = values(n, 7);
            let (mut a, mut b) = (x.clone(), x.clone());
            let (sa, sb) = (exp_sum(&mut a, 0.25), Portable.exp_sum(&mut b, 0.25));
            assert_eq!((sa.to_bits(), a), (sb.to_bits(), b), "exp_sum n={n}");
            let v = values(n, 8);
            for ops in [best_ops(n), elementwise_ops()] {
                let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
                ops.silu_mul(&x, &v, &mut a);
                Portable.silu_mul(&x, &v, &mut b);
                assert_eq!(a, b, "silu_mul n={n}");
                let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
                ops.gelu_tanh_mul(&x, &v, &mut a);
                Portable.gelu_tanh_mul(&x, &v, &mut b);
                assert_eq!(a, b, "gelu_tanh_mul n={n}");
                let (mut a, mut b) = (x.clone(), x.clone());
                ops.gelu_tanh(&mut a);
                Portable.gelu_tanh(&mut b);
                assert_eq!(a, b, "gelu_tanh n={n}");
            }
        }
        for row in max_rows() {
            let (a, b) = (max_finite(&row), Portable.max_finite(&row));
            assert_eq!(a.map(f32::to_bits), b.map(f32::to_bits), "{row:?}");
        }
    }
}
