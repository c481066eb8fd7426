//! The portable kernels: plain Rust in the documented operation order (see [`super`]), the
//! reference every instruction set's kernels must match bit for bit.

use super::{fold, KvElement, VectorOps, LANES};

pub(super) const EXP_LO: f32 = -87.0;
pub(super) const EXP_HI: f32 = 88.0;
pub(super) const LOG2E: f32 = std::f32::consts::LOG2_E;
pub(super) const LN2_HI: f32 = 0.693_359_4;
pub(super) const LN2_LO: f32 = -2.121_944_4e-4;
/// Cephes' `expf` coefficients, as published.
#[allow(clippy::excessive_precision)]
pub(super) const EXP_POLY: [f32; 6] = [
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

/// Below this, [`gelu_tanh`] computes at this value instead: `e^t` stays finite (`t` is 87.31
/// here, inside [`exp`]'s range) and the result, `-1.2e-37`, is zero for every purpose.
pub(super) const GELU_LO: f32 = -10.0;
/// `2√(2/π)`, rounded to f32.
#[allow(clippy::excessive_precision)]
pub(super) const GELU_2K: f32 = 1.595_769_121_605_731;
/// `2√(2/π) · 0.044715`, rounded to f32.
#[allow(clippy::excessive_precision)]
pub(super) const GELU_2K_CUBIC: f32 = 0.071_354_816_272_600_25;

/// GELU with PyTorch's tanh approximation (`gelu_pytorch_tanh`) for one value (the reference
/// for the vector paths): `½x(1 + tanh(u))` with `u = √(2/π)(x + 0.044715x³)`, computed as
/// `x / (1 + e^(-2u))` (the same function: `½(1 + tanh u)` is the logistic of `2u`), which
/// keeps its relative precision everywhere: near zero there is no `1 - 2/(…)` cancellation,
/// and for negative `x` no `1 + tanh u → 0` one. The operation order:
///
/// ```text
/// c = if GELU_LO > x { GELU_LO } else { x }        (NaN stays NaN)
/// t = c · fma(c · c, -GELU_2K_CUBIC, -GELU_2K)     (= -2u)
/// gelu = c / (1 + exp(t))
/// ```
///
/// Large positive `x` (even `inf`) give `x` (`exp` clamps `t`); NaN gives NaN.
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    let c = if GELU_LO > x { GELU_LO } else { x };
    let t = c * (c * c).mul_add(-GELU_2K_CUBIC, -GELU_2K);
    c / (1.0 + exp(t))
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

    fn gelu_tanh_mul(self, gate: &[f32], up: &[f32], out: &mut [f32]) {
        for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
            *o = gelu_tanh(g) * u;
        }
    }

    fn gelu_tanh(self, x: &mut [f32]) {
        x.iter_mut().for_each(|v| *v = gelu_tanh(*v));
    }

    fn max_finite(self, x: &[f32]) -> Option<f32> {
        max_finite_lanes(x)
    }
}

/// [`VectorOps::max_finite`] in plain Rust; eight running maxima let the compiler vectorise
/// the scan (to the width of the target features it is compiled with).
#[inline(always)]
pub(super) fn max_finite_lanes(scores: &[f32]) -> Option<f32> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{gelu_special_values, max_rows, values};
    use super::*;

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

    /// PyTorch's formula in f64, as `x / (1 + e^(-2u))` (`½x(1 + tanh u)` itself cancels to
    /// nothing in f64 too once `x < -7`), and its condition number `|x · gelu'(x) / gelu(x)|`:
    /// the relative change of the result per relative change of `x`, so rounding `x` to f32
    /// alone moves the result by up to about half that many ulps.
    fn gelu_tanh_f64(x: f32) -> (f64, f64) {
        let x = f64::from(x);
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let u = k * (x + 0.044_715 * x * x * x);
        let sigmoid = 1.0 / (1.0 + (-2.0 * u).exp());
        let du = k * (1.0 + 3.0 * 0.044_715 * x * x);
        (x * sigmoid, (1.0 + 2.0 * x * du * (1.0 - sigmoid)).abs())
    }

    /// The distance between `v` and the next f32 away from zero.
    fn ulp(v: f64) -> f64 {
        let v = (v as f32).abs();
        f64::from(f32::from_bits(v.to_bits() + 1) - v)
    }

    #[test]
    fn gelu_tanh_errs_by_a_few_ulp_times_its_condition_number() {
        // The error in units of the result's last place, against the condition number: where
        // the function itself magnifies its input's rounding (negative x: 7.7 at -3, 218 at
        // -9.8), no f32 computation does better than that. Measured: at most 12.5 ulp for
        // |x| <= 3 (at -2.98), 202 ulp to the clamp (at -9.80), at most 3.4 times the
        // condition number (at -1.34), and 5.2e-7 absolute (at 4.67, 1.1 ulp). PyTorch's
        // formula with libm's `tanhf` in f32: 205 ulp within |x| <= 3, and no correct digit
        // around -5.7, where `1 + tanh u` cancels.
        let (mut near, mut ratio, mut abs) = ((0f64, 0f32), (0f64, 0f32), (0f64, 0f32));
        let worst = |w: &mut (f64, f32), e: f64, x: f32| {
            if e > w.0 {
                *w = (e, x);
            }
        };
        for i in -2_000_000..=2_000_000 {
            for x in [i as f32 * 1.5e-6, i as f32 * 5e-6] {
                let (got, (want, condition)) = (f64::from(gelu_tanh(x)), gelu_tanh_f64(x));
                let ulps = (got - want).abs() / ulp(want);
                if x.abs() <= 3.0 {
                    worst(&mut near, ulps, x);
                }
                worst(&mut ratio, ulps / condition.max(1.0), x);
                worst(&mut abs, (got - want).abs(), x);
            }
        }
        eprintln!(
            "gelu_tanh vs f64 (error, at x): {near:?} ulp for |x| <= 3, \
             {ratio:?} ulp per condition number, {abs:?} absolute"
        );
        assert!(
            near.0 < 16.0 && ratio.0 < 4.0 && abs.0 < 6e-7,
            "{near:?} {ratio:?} {abs:?}"
        );
    }

    #[test]
    fn gelu_tanh_handles_zeros_huge_values_and_nan() {
        assert_eq!(gelu_tanh(0.0).to_bits(), 0f32.to_bits());
        assert_eq!(gelu_tanh(-0.0).to_bits(), (-0f32).to_bits());
        assert_eq!(gelu_tanh(1e-30), 5e-31);
        assert_eq!(gelu_tanh(f32::MAX), f32::MAX);
        assert_eq!(gelu_tanh(f32::INFINITY), f32::INFINITY);
        assert!(gelu_tanh(f32::NAN).is_nan() && gelu_tanh(-f32::NAN).is_nan());
        for x in gelu_special_values() {
            let g = gelu_tanh(x);
            if x.is_nan() {
                continue;
            }
            assert!(g.is_finite() || x == f32::INFINITY, "gelu_tanh({x}) = {g}");
            if x <= -10.0 {
                assert!(g <= 0.0 && g > -1e-36, "gelu_tanh({x}) = {g}");
            }
        }
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
        }
    }
}
