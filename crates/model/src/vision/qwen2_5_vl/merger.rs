//! Qwen2.5-VL's patch merger (`Qwen2_5_VLPatchMerger`): each patch RMS-normalised, the
//! `merge²` patches of a merged token concatenated, then a two-layer MLP with exact GELU into
//! the text model's hidden size.
//!
//! ```text
//! [tokens · merge², hidden] → ln_q (RMS, eps 1e-6, · w) → view [tokens, merge² · hidden]
//!   → mlp.0 [merge² · hidden, merge² · hidden] + b → GELU (erf) → mlp.2 [out, merge² · hidden] + b
//! [tokens, out_hidden]
//! ```

use rayon::prelude::*;

use super::block::NORM_EPS;
use crate::checkpoint::TensorSource;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::layers::linear::Linear;
use crate::layers::norm::RmsNorm;
use crate::plan::NormWeight;
use crate::vision::pause::{in_units, Pause};

/// The merger's weights.
#[derive(Debug)]
pub struct PatchMerger {
    ln_q: RmsNorm,
    /// `[merge² · hidden, merge² · hidden]` with bias.
    fc1: Linear,
    /// `[out_hidden, merge² · hidden]` with bias.
    fc2: Linear,
    /// `merge² · hidden`.
    width: usize,
}

impl PatchMerger {
    /// Loads `{prefix}ln_q`, `{prefix}mlp.0` and `{prefix}mlp.2`.
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        (hidden, merge_unit, out_hidden): (usize, usize, usize),
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let width = hidden * merge_unit;
        let name = |part: &str| format!("{prefix}{part}");
        Ok(Self {
            ln_q: RmsNorm::load(source, &name("ln_q"), hidden, NORM_EPS, NormWeight::Plain)?,
            fc1: Linear::load(source, &[(&name("mlp.0"), width)], width, true, dtype)?,
            fc2: Linear::load(source, &[(&name("mlp.2"), out_hidden)], width, true, dtype)?,
            width,
        })
    }

    /// `states: [tokens · merge², hidden]`, each token's patches contiguous → `[tokens,
    /// out_hidden]`, in units of `pause.unit_rows()` tokens.
    pub fn forward(&self, states: &[f32], pause: &dyn Pause) -> Vec<f32> {
        let tokens = states.len() / self.width;
        let out_hidden = self.fc2.out_dim();
        let mut out = vec![0f32; tokens * out_hidden];
        in_units(tokens, pause, |unit| {
            let x = &states[unit.start * self.width..unit.end * self.width];
            let mut normed = vec![0f32; x.len()];
            self.ln_q.forward(x, &mut normed);
            let mut act = self.fc1.forward(&normed, unit.len());
            act.par_chunks_mut(self.width)
                .for_each(|row| row.iter_mut().for_each(|x| *x = gelu_erf(*x)));
            let y = &mut out[unit.start * out_hidden..unit.end * out_hidden];
            self.fc2.forward_into(&act, unit.len(), y);
        });
        out
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.ln_q.bytes() + self.fc1.bytes() + self.fc2.bytes()
    }
}

/// GELU as `torch.nn.GELU()` computes it: `½x(1 + erf(x / √2))`, in f64 then rounded.
fn gelu_erf(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))) as f32
}

/// The error function to well under f32's precision: its Maclaurin series below 3 (at most 60
/// terms; the largest term is about 10³, so some 1e-13 is lost to cancellation), and one minus
/// the continued fraction of `erfc` above (`erfc(3) ≈ 2.2e-5`, 40 levels).
fn erf(x: f64) -> f64 {
    let a = x.abs();
    let value = if a < 3.0 {
        // erf(a) = 2/√π Σ (-1)ⁿ a^(2n+1) / (n! (2n+1))
        let (mut term, mut sum) = (a, a);
        for n in 1..60 {
            term *= -a * a / n as f64;
            let next = term / (2 * n + 1) as f64;
            sum += next;
            if next.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        sum * std::f64::consts::FRAC_2_SQRT_PI
    } else {
        // erfc(a) = exp(-a²)/√π · 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + 2/(a + …)))))
        let mut fraction = a;
        for k in (1..40).rev() {
            fraction = a + (k as f64 / 2.0) / fraction;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / fraction
    };
    value.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values_on_both_sides_of_the_switch() {
        let known = [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (2.999, 0.999_977_769_831_400_2),
            (3.0, 0.999_977_909_503_001_4),
            (4.0, 0.999_999_984_582_742_1),
        ];
        for (x, e) in known {
            assert!((erf(x) - e).abs() < 1e-12, "erf({x}) = {} not {e}", erf(x));
            assert_eq!(erf(-x), -erf(x));
        }
    }

    #[test]
    fn gelu_is_half_the_input_times_its_normal_cdf() {
        assert_eq!(gelu_erf(0.0), 0.0);
        assert!((gelu_erf(1.0) - 0.841_344_8).abs() < 1e-7);
        assert!((gelu_erf(-1.0) + 0.158_655_26).abs() < 1e-7);
        assert_eq!(gelu_erf(10.0), 10.0);
    }
}
