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
    use super::super::tests::{max_rows, values};
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
