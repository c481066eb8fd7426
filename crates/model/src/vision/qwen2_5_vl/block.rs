//! One Qwen2.5-VL vision block (`Qwen2_5_VLVisionBlock`): pre-norm attention with the 2D rotary
//! embedding, then a SwiGLU MLP, each added to the residual stream.
//!
//! ```text
//! h += proj(attention(rope(qkv(rms_norm1(h)))))   within each row's span: window or frame
//! h += down(silu(gate(x)) · up(x)),  x = rms_norm2(h)
//! ```
//!
//! The RMS norms have eps 1e-6 and scale by `w` (not `1 + w`); every projection has a bias.

use std::ops::Range;

use super::super::attention::{attention_dtype, span_attention};
use super::super::block_units::{normed_qkv, residual_tail};
use super::super::pause::Pause;
use crate::checkpoint::TensorSource;
use crate::config::Activation;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::layers::linear::Linear;
use crate::layers::mlp::{Mlp, MlpShape};
use crate::layers::norm::RmsNorm;
use crate::plan::NormWeight;

/// The epsilon transformers hard-codes for the vision RMS norms.
pub(super) const NORM_EPS: f64 = 1e-6;

/// The 2D rotary embedding's cos and sin for each row: `[rows, head_dim / 2]` each, the first
/// quarter of the head turned by the patch's grid row, the second by its column
/// (`Qwen2_5_VLVisionRotaryEmbedding`: `inv_freq = θ^(-2i / (head_dim/2))`, i < head_dim/4).
#[derive(Debug)]
pub struct RotaryTables {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
}

impl RotaryTables {
    /// The tables for rows at `positions` (grid row, grid column).
    pub fn new(positions: &[(usize, usize)], head_dim: usize, theta: f64) -> Self {
        let (half, quarter) = (head_dim / 2, head_dim / 4);
        // In f32, as transformers computes `1 / base ** (arange(0, dim, 2) / dim)`.
        let inv_freq: Vec<f32> = (0..quarter)
            .map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / half as f32))
            .collect();
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for &(row, column) in positions {
            for position in [row, column] {
                for &f in &inv_freq {
                    let angle = position as f32 * f;
                    cos.push(angle.cos());
                    sin.push(angle.sin());
                }
            }
        }
        Self { cos, sin, half }
    }

    /// Rotates q and k of `qkv: [rows, 3 · hidden]` in place ("rotate half": feature `i` pairs
    /// with `i + head_dim/2`).
    fn apply(&self, qkv: &mut [f32], hidden: usize) {
        let (half, head_dim) = (self.half, 2 * self.half);
        for (row, values) in qkv.chunks_exact_mut(3 * hidden).enumerate() {
            let cos = &self.cos[row * half..][..half];
            let sin = &self.sin[row * half..][..half];
            for head in values[..2 * hidden].chunks_exact_mut(head_dim) {
                let (a, b) = head.split_at_mut(half);
                for i in 0..half {
                    let (x1, x2) = (a[i], b[i]);
                    a[i] = x1 * cos[i] - x2 * sin[i];
                    b[i] = x2 * cos[i] + x1 * sin[i];
                }
            }
        }
    }
}

/// A block's weights.
#[derive(Debug)]
pub struct VisionBlock {
    norm1: RmsNorm,
    /// `[3 · hidden, hidden]` with bias: q, k, v.
    qkv: Linear,
    /// `[hidden, hidden]` with bias.
    proj: Linear,
    norm2: RmsNorm,
    /// gate and up `[intermediate, hidden]`, down `[hidden, intermediate]`, with biases.
    mlp: Mlp,
    hidden: usize,
    heads: usize,
    /// What attention's products multiply in.
    attention: WeightDtype,
}

impl VisionBlock {
    /// Loads the block under `prefix` (`…blocks.{i}`).
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        (hidden, intermediate, heads): (usize, usize, usize),
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let name = |part: &str| format!("{prefix}.{part}");
        let norm =
            |part: &str| RmsNorm::load(source, &name(part), hidden, NORM_EPS, NormWeight::Plain);
        let mlp_names = ["gate_proj", "up_proj", "down_proj"].map(|n| name(&format!("mlp.{n}")));
        let mlp_shape = MlpShape {
            hidden,
            intermediate,
            bias: true,
            activation: Activation::Silu,
        };
        Ok(Self {
            norm1: norm("norm1")?,
            qkv: Linear::load(
                source,
                &[(&name("attn.qkv"), 3 * hidden)],
                hidden,
                true,
                dtype,
            )?,
            proj: Linear::load(source, &[(&name("attn.proj"), hidden)], hidden, true, dtype)?,
            norm2: norm("norm2")?,
            mlp: Mlp::load_named(source, &mlp_names, mlp_shape, dtype)?,
            hidden,
            heads,
            attention: attention_dtype(dtype),
        })
    }

    /// Runs the block over `states: [rows, hidden]` in place; row `r` attends to the rows of
    /// `spans[r]`. Row-wise stages run in units of `pause.unit_rows()` rows, with a pause point
    /// after each unit (and inside attention).
    pub fn forward(
        &self,
        states: &mut [f32],
        rotary: &RotaryTables,
        spans: &[Range<usize>],
        pause: &dyn Pause,
    ) {
        let h = self.hidden;
        let norm1 = |x: &[f32], out: &mut [f32]| self.norm1.forward(x, out);
        let mut qkv = normed_qkv(states, h, &norm1, &self.qkv, pause);
        rotary.apply(&mut qkv, h);
        let attended = span_attention(
            &qkv,
            h,
            self.heads,
            self.attention,
            |r| spans[r].clone(),
            pause,
        );
        drop(qkv);
        let norm2 = |x: &[f32], out: &mut [f32]| self.norm2.forward(x, out);
        let mlp = |x: &[f32], n: usize, y: &mut [f32]| self.mlp.forward_add(x, n, y);
        residual_tail(states, &attended, h, &self.proj, &norm2, &mlp, pause);
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.norm1.bytes()
            + self.norm2.bytes()
            + self.qkv.bytes()
            + self.proj.bytes()
            + self.mlp.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_turn_by_their_grid_row_then_their_column() {
        // head_dim 8: inv_freq [1, 0.01] (θ = 10^4, i / 2 for i = 0, 1).
        let tables = RotaryTables::new(&[(0, 0), (3, 5)], 8, 10_000.0);
        assert_eq!(&tables.cos[..4], [1.0; 4]);
        let angles = [3.0f32, 0.03, 5.0, 0.05];
        for (c, a) in tables.cos[4..].iter().zip(angles) {
            assert!((c - a.cos()).abs() < 1e-6);
        }
        // Position zero is the identity on q and k, and v is never turned.
        let mut qkv: Vec<f32> = (0..3 * 8).map(|v| v as f32).collect();
        let before = qkv.clone();
        RotaryTables::new(&[(0, 0)], 8, 10_000.0).apply(&mut qkv, 8);
        assert_eq!(qkv, before);
    }
}
