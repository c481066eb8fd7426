//! LayerNorm as `torch.nn.LayerNorm` computes it: per row, `(x - mean) / sqrt(var + eps) · w + b`
//! with the biased variance, in f32. Each row is reduced on its own in a fixed order, so a row's
//! result never depends on the rows beside it.

use crate::checkpoint::TensorSource;
use crate::error::LoadError;

/// A LayerNorm over rows of `weight.len()` features.
#[derive(Debug)]
pub struct LayerNorm {
    /// `[dim]`
    weight: Vec<f32>,
    /// `[dim]`
    bias: Vec<f32>,
    eps: f32,
}

impl LayerNorm {
    /// Loads `{prefix}.weight` and `{prefix}.bias`, both `[dim]`.
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        dim: usize,
        eps: f64,
    ) -> Result<Self, LoadError> {
        Ok(Self {
            weight: source.tensor(&format!("{prefix}.weight"), &[dim])?,
            bias: source.tensor(&format!("{prefix}.bias"), &[dim])?,
            eps: eps as f32,
        })
    }

    /// Normalises every `dim`-wide row of `x` into `out` (same shape).
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        let dim = self.weight.len();
        for (row, out_row) in x.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
            let mean = row.iter().sum::<f32>() / dim as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / dim as f32;
            let inv_std = 1.0 / (var + self.eps).sqrt();
            for (((o, &v), &w), &b) in out_row
                .iter_mut()
                .zip(row)
                .zip(&self.weight)
                .zip(&self.bias)
            {
                *o = (v - mean) * inv_std * w + b;
            }
        }
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        (self.weight.len() + self.bias.len()) * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_get_zero_mean_unit_variance_then_scale_and_shift() {
        let norm = LayerNorm {
            weight: vec![1.0, 2.0],
            bias: vec![0.5, 0.0],
            eps: 0.0,
        };
        let mut out = [0.0; 4];
        norm.forward(&[1.0, 3.0, 0.0, 4.0], &mut out);
        assert_eq!(out, [-0.5, 2.0, -0.5, 2.0]);
    }
}
