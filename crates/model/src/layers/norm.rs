//! RMS normalisation: `y = x / sqrt(mean(x²) + eps) · weight`, per row.

use crate::checkpoint::TensorSource;
use crate::error::LoadError;
use crate::kernels::dot::sum_of_squares;

/// An RMS norm over rows of `weight.len()` features.
#[derive(Debug)]
pub struct RmsNorm {
    /// `[dim]`.
    weight: Vec<f32>,
    eps: f32,
}

impl RmsNorm {
    /// Loads `{prefix}.weight` of shape `[dim]`.
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        dim: usize,
        eps: f64,
    ) -> Result<Self, LoadError> {
        Ok(Self {
            weight: source.tensor(&format!("{prefix}.weight"), &[dim])?,
            eps: eps as f32,
        })
    }

    /// Normalises every `dim`-wide row of `x` into `out` (same shape).
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        let dim = self.weight.len();
        for (row, out_row) in x.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
            let inv_rms = 1.0 / (sum_of_squares(row) / dim as f32 + self.eps).sqrt();
            for ((o, &v), &w) in out_row.iter_mut().zip(row).zip(&self.weight) {
                *o = w * (v * inv_rms);
            }
        }
    }

    /// Normalises every row of `x` in place.
    pub fn forward_in_place(&self, x: &mut [f32]) {
        let dim = self.weight.len();
        for row in x.chunks_exact_mut(dim) {
            let inv_rms = 1.0 / (sum_of_squares(row) / dim as f32 + self.eps).sqrt();
            for (v, &w) in row.iter_mut().zip(&self.weight) {
                *v = w * (*v * inv_rms);
            }
        }
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.weight.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_scales_rows_to_unit_root_mean_square() {
        let norm = RmsNorm {
            weight: vec![1.0, 2.0],
            eps: 0.0,
        };
        let mut out = [0.0; 4];
        norm.forward(&[3.0, 4.0, 1.0, 1.0], &mut out);
        let r = (12.5f32).sqrt();
        assert_eq!(out, [3.0 / r, 2.0 * (4.0 / r), 1.0, 2.0]);
    }
}
