//! RMS normalisation: `y = x / sqrt(mean(x²) + eps) · weight`, per row.

use crate::checkpoint::TensorSource;
use crate::error::LoadError;
use crate::kernels::dot::sum_of_squares;
use crate::plan::NormWeight;

/// An RMS norm over rows of `weight.len()` features.
#[derive(Debug)]
pub struct RmsNorm {
    /// `[dim]`, the factor applied (for [`NormWeight::OffsetFromOne`], `1 + w` in f32, as
    /// transformers computes it).
    weight: Vec<f32>,
    eps: f32,
}

impl RmsNorm {
    /// Loads `{prefix}.weight` of shape `[dim]`, applied as `style` says.
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        dim: usize,
        eps: f64,
        style: NormWeight,
    ) -> Result<Self, LoadError> {
        let mut weight = source.tensor(&format!("{prefix}.weight"), &[dim])?;
        if style == NormWeight::OffsetFromOne {
            weight.iter_mut().for_each(|w| *w += 1.0);
        }
        Ok(Self {
            weight,
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

    /// A source holding one norm weight.
    struct OneWeight(Vec<f32>);

    impl TensorSource for OneWeight {
        fn tensor(&self, _name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
            assert_eq!(shape, [self.0.len()]);
            Ok(self.0.clone())
        }

        fn raw(
            &self,
            name: &str,
            shape: &[usize],
        ) -> Result<crate::checkpoint::RawTensor<'_>, LoadError> {
            Ok(crate::checkpoint::RawTensor::from_f32(
                &self.tensor(name, shape)?,
                shape,
            ))
        }

        fn contains(&self, _name: &str) -> bool {
            true
        }
    }

    #[test]
    fn offset_weights_scale_by_one_plus_the_stored_value() {
        let source = OneWeight(vec![0.0, 1.0]);
        let plain = RmsNorm::load(&source, "n", 2, 0.0, NormWeight::Plain).unwrap();
        let gemma = RmsNorm::load(&source, "n", 2, 0.0, NormWeight::OffsetFromOne).unwrap();
        let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
        plain.forward(&[1.0, 1.0], &mut a);
        gemma.forward(&[1.0, 1.0], &mut b);
        assert_eq!(a, [0.0, 1.0]);
        assert_eq!(b, [1.0, 2.0]);
    }
}
