//! A linear layer `y = x · Wᵀ + b` over packed weights, optionally fusing several checkpoint
//! projections that read the same input (q/k/v, gate/up) into one matrix: one pass over the
//! input, one parallel dispatch, and wider work for the threads.

use super::vec_written_by;
use super::weights::{load_rows, EncodedRows};
use crate::checkpoint::TensorSource;
use crate::error::LoadError;
use crate::kernels::matmul::{PackedMatrix, WeightDtype};

/// A (possibly fused) linear projection.
#[derive(Debug)]
pub struct Linear {
    /// `[sum of out dims, in_dim]`, packed: one matrix when every part is kept in the same
    /// format, else one per part (a Q4_K_M file stores `v_proj` as q6_K beside q4_K `q_proj`
    /// and `k_proj`), whose outputs are placed side by side.
    segments: Vec<PackedMatrix>,
    /// `[sum of out dims]`, when the projections carry biases.
    bias: Option<Vec<f32>>,
    out_dim: usize,
}

impl Linear {
    /// Loads the projections `parts` (checkpoint prefix, output features), all of width
    /// `in_dim`, stacked in the given order. Reads `{prefix}.weight` and, with `bias`,
    /// `{prefix}.bias`. `dtype` `None` keeps each part's stored type.
    pub fn load(
        source: &dyn TensorSource,
        parts: &[(&str, usize)],
        in_dim: usize,
        bias: bool,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let out_dim: usize = parts.iter().map(|p| p.1).sum();
        let mut rows: Vec<(EncodedRows, usize)> = Vec::with_capacity(parts.len());
        let mut biases = bias.then(|| Vec::with_capacity(out_dim));
        for &(prefix, out) in parts {
            rows.push((
                load_rows(source, &format!("{prefix}.weight"), out, in_dim, dtype)?,
                out,
            ));
            if let Some(b) = biases.as_mut() {
                b.extend(source.tensor(&format!("{prefix}.bias"), &[out])?);
            }
        }
        let format = rows[0].0.format;
        let same_format = rows
            .iter()
            .all(|(r, _)| r.format.ggml_type() == format.ggml_type());
        let segments = if same_format {
            let bytes: Vec<u8> = match rows.as_slice() {
                [(only, _)] => only.bytes.to_vec(),
                _ => rows
                    .iter()
                    .flat_map(|(r, _)| r.bytes.iter().copied())
                    .collect(),
            };
            vec![PackedMatrix::pack_encoded(&bytes, out_dim, in_dim, format)]
        } else {
            rows.iter()
                .map(|(r, out)| PackedMatrix::pack_encoded(&r.bytes, *out, in_dim, r.format))
                .collect()
        };
        Ok(Self {
            segments,
            bias: biases,
            out_dim,
        })
    }

    /// Wraps an already packed matrix without bias.
    pub fn from_packed(weight: PackedMatrix) -> Self {
        Self {
            out_dim: weight.out_dim(),
            segments: vec![weight],
            bias: None,
        }
    }

    /// `x: [m, in_dim]` → `[m, out_dim]`.
    pub fn forward(&self, x: &[f32], m: usize) -> Vec<f32> {
        match (self.segments.as_slice(), &self.bias) {
            // SAFETY: `matmul_uninit` writes all `m * out_dim` elements.
            ([only], None) => unsafe {
                vec_written_by(m * self.out_dim, |y| only.matmul_uninit(x, m, y))
            },
            _ => {
                let mut y = vec![0f32; m * self.out_dim];
                self.forward_into(x, m, &mut y);
                y
            }
        }
    }

    /// `y[m, out_dim] = x · Wᵀ + b` for `x: [m, in_dim]`, into a buffer the caller keeps (every
    /// element is overwritten).
    pub fn forward_into(&self, x: &[f32], m: usize, y: &mut [f32]) {
        let n = self.out_dim;
        match self.segments.as_slice() {
            [only] => only.matmul(x, m, y),
            segments => {
                let mut column = 0;
                for segment in segments {
                    let width = segment.out_dim();
                    // SAFETY: `matmul_uninit` writes all `m * width` elements.
                    let part =
                        unsafe { vec_written_by(m * width, |p| segment.matmul_uninit(x, m, p)) };
                    for (dst, src) in y.chunks_exact_mut(n).zip(part.chunks_exact(width)) {
                        dst[column..column + width].copy_from_slice(src);
                    }
                    column += width;
                }
            }
        }
        if let Some(bias) = &self.bias {
            for row in y.chunks_exact_mut(n) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        }
    }

    /// `y[m, out_dim] += x · Wᵀ + b`: the projection added into a residual stream, with the
    /// same bits as computing it and then adding.
    pub fn forward_add(&self, x: &[f32], m: usize, y: &mut [f32]) {
        match (self.segments.as_slice(), &self.bias) {
            ([only], None) => only.matmul_add(x, m, y),
            _ => {
                for (acc, v) in y.iter_mut().zip(self.forward(x, m)) {
                    *acc += v;
                }
            }
        }
    }

    /// Output features.
    pub fn out_dim(&self) -> usize {
        self.out_dim
    }

    /// The packed weight (for tied embedding lookups), when it is one matrix.
    pub fn weight(&self) -> Option<&PackedMatrix> {
        match self.segments.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }

    /// Bytes of weights and biases.
    pub fn bytes(&self) -> usize {
        self.segments.iter().map(PackedMatrix::bytes).sum::<usize>()
            + self.bias.as_ref().map_or(0, |b| b.len() * 4)
    }
}
