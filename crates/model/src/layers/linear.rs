//! A linear layer `y = x · Wᵀ + b` over packed weights, optionally fusing several checkpoint
//! projections that read the same input (q/k/v, gate/up) into one matrix: one pass over the
//! input, one parallel dispatch, and wider work for the threads.

use super::vec_written_by;
use crate::checkpoint::TensorSource;
use crate::error::LoadError;
use crate::kernels::matmul::{PackedMatrix, WeightDtype};

/// A (possibly fused) linear projection.
#[derive(Debug)]
pub struct Linear {
    /// `[sum of out dims, in_dim]`, packed.
    weight: PackedMatrix,
    /// `[sum of out dims]`, when the projections carry biases.
    bias: Option<Vec<f32>>,
}

impl Linear {
    /// Loads the projections `parts` (checkpoint prefix, output features), all of width
    /// `in_dim`, stacked in the given order. Reads `{prefix}.weight` and, with `bias`,
    /// `{prefix}.bias`.
    pub fn load(
        source: &dyn TensorSource,
        parts: &[(&str, usize)],
        in_dim: usize,
        bias: bool,
        dtype: WeightDtype,
    ) -> Result<Self, LoadError> {
        let out_dim: usize = parts.iter().map(|p| p.1).sum();
        let mut weight = Vec::with_capacity(out_dim * in_dim);
        let mut biases = bias.then(|| Vec::with_capacity(out_dim));
        for &(prefix, out) in parts {
            weight.extend(source.tensor(&format!("{prefix}.weight"), &[out, in_dim])?);
            if let Some(b) = biases.as_mut() {
                b.extend(source.tensor(&format!("{prefix}.bias"), &[out])?);
            }
        }
        Ok(Self {
            weight: PackedMatrix::pack(&weight, out_dim, in_dim, dtype),
            bias: biases,
        })
    }

    /// Wraps an already packed matrix without bias.
    pub fn from_packed(weight: PackedMatrix) -> Self {
        Self { weight, bias: None }
    }

    /// `x: [m, in_dim]` → `[m, out_dim]`.
    pub fn forward(&self, x: &[f32], m: usize) -> Vec<f32> {
        let n = self.weight.out_dim();
        // SAFETY: `matmul_uninit` writes all `m * n` elements.
        let mut y = unsafe { vec_written_by(m * n, |y| self.weight.matmul_uninit(x, m, y)) };
        if let Some(bias) = &self.bias {
            for row in y.chunks_exact_mut(n) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        }
        y
    }

    /// `y[m, out_dim] += x · Wᵀ + b`: the projection added into a residual stream, with the
    /// same bits as computing it and then adding.
    pub fn forward_add(&self, x: &[f32], m: usize, y: &mut [f32]) {
        if self.bias.is_some() {
            for (acc, v) in y.iter_mut().zip(self.forward(x, m)) {
                *acc += v;
            }
        } else {
            self.weight.matmul_add(x, m, y);
        }
    }

    /// Output features.
    pub fn out_dim(&self) -> usize {
        self.weight.out_dim()
    }

    /// The packed weight (for tied embedding lookups).
    pub fn weight(&self) -> &PackedMatrix {
        &self.weight
    }

    /// Bytes of weights and biases.
    pub fn bytes(&self) -> usize {
        self.weight.bytes() + self.bias.as_ref().map_or(0, |b| b.len() * 4)
    }
}
