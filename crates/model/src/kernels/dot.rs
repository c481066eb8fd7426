//! Fixed-order reductions over f32 slices for the norms.
//!
//! Eight independent partial sums (one per vector lane) accumulate strided elements, then fold
//! in the same fixed tree as the attention kernels ([`super::vector`]); the tail is added last.
//! The order depends only on the length, so results never depend on batch composition, and the
//! loop vectorises without fast-math.

use super::vector::{fold, LANES};

/// `Σ a[i] · b[i]` in a fixed order.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0f32; LANES];
    let chunks = a.len() / LANES;
    for c in 0..chunks {
        let (x, y) = (&a[c * LANES..][..LANES], &b[c * LANES..][..LANES]);
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    let mut sum = fold(acc);
    for i in chunks * LANES..a.len() {
        sum += a[i] * b[i];
    }
    sum
}

/// `Σ a[i]²` in a fixed order.
#[inline]
pub fn sum_of_squares(a: &[f32]) -> f32 {
    dot(a, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_handles_tails_shorter_than_a_vector() {
        let a: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let expected: f32 = a.iter().map(|x| x * x).sum();
        assert_eq!(dot(&a, &a), expected);
        assert_eq!(sum_of_squares(&a[..3]), 5.0);
    }
}
