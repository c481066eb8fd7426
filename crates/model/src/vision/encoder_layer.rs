//! One SigLIP encoder layer (`SiglipEncoderLayer`): pre-norm bidirectional multi-head attention
//! and a GELU (tanh) MLP, each added to the residual stream.
//!
//! ```text
//! h += out_proj(attention(layer_norm1(h)))      every patch sees every patch of its image
//! h += fc2(gelu_tanh(fc1(layer_norm2(h))))
//! ```
//!
//! Attention runs per image, head and query row (`attention.rs`), so an image's output never
//! depends on the other images of the batch.

use rayon::prelude::*;

use super::attention::{attention_dtype, span_attention};
use super::block_units::{normed_qkv, residual_tail};
use super::layer_norm::LayerNorm;
use super::pause::Pause;
use crate::checkpoint::TensorSource;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::kernels::vector::{elementwise_ops, VectorOps};
use crate::layers::linear::Linear;

/// The shapes an encoder layer is built with.
#[derive(Debug, Clone, Copy)]
pub struct EncoderShape {
    /// Residual width.
    pub hidden: usize,
    /// MLP width.
    pub intermediate: usize,
    /// Attention heads.
    pub heads: usize,
    /// LayerNorm epsilon.
    pub eps: f64,
}

/// A SigLIP encoder layer's weights.
#[derive(Debug)]
pub struct EncoderLayer {
    layer_norm1: LayerNorm,
    /// q, k, v stacked: `[3 · hidden, hidden]` with biases.
    qkv: Linear,
    /// `[hidden, hidden]` with bias.
    out_proj: Linear,
    layer_norm2: LayerNorm,
    /// `[intermediate, hidden]` with bias.
    fc1: Linear,
    /// `[hidden, intermediate]` with bias.
    fc2: Linear,
    shape: EncoderShape,
    /// What attention's products multiply in.
    attention: WeightDtype,
}

impl EncoderLayer {
    /// Loads the layer under `prefix` (`…encoder.layers.{i}`).
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        shape: EncoderShape,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let (h, i) = (shape.hidden, shape.intermediate);
        let name = |part: &str| format!("{prefix}.{part}");
        let attn = |part: &str| format!("{prefix}.self_attn.{part}");
        let (q, k, v) = (attn("q_proj"), attn("k_proj"), attn("v_proj"));
        Ok(Self {
            layer_norm1: LayerNorm::load(source, &name("layer_norm1"), h, shape.eps)?,
            qkv: Linear::load(source, &[(&q, h), (&k, h), (&v, h)], h, true, dtype)?,
            out_proj: Linear::load(source, &[(&attn("out_proj"), h)], h, true, dtype)?,
            layer_norm2: LayerNorm::load(source, &name("layer_norm2"), h, shape.eps)?,
            fc1: Linear::load(source, &[(&name("mlp.fc1"), i)], h, true, dtype)?,
            fc2: Linear::load(source, &[(&name("mlp.fc2"), h)], i, true, dtype)?,
            shape,
            attention: attention_dtype(dtype),
        })
    }

    /// Runs the layer over `hidden: [images · patches, hidden]` in place, attention within each
    /// image's `patches` rows; row-wise stages in units of `pause.unit_rows()` rows, with a pause
    /// point after each unit and each attention head.
    pub fn forward(&self, hidden: &mut [f32], patches: usize, pause: &dyn Pause) {
        let h = self.shape.hidden;
        let norm1 = |x: &[f32], out: &mut [f32]| self.layer_norm1.forward(x, out);
        let qkv = normed_qkv(hidden, h, &norm1, &self.qkv, pause);
        let attended = self.attention(&qkv, patches, pause);
        drop(qkv);
        let ops = elementwise_ops();
        let norm2 = |x: &[f32], out: &mut [f32]| self.layer_norm2.forward(x, out);
        let mlp = |x: &[f32], n: usize, y: &mut [f32]| {
            let mut act = self.fc1.forward(x, n);
            act.par_chunks_mut(self.shape.intermediate)
                .for_each(|row| ops.gelu_tanh(row));
            self.fc2.forward_add(&act, n, y);
        };
        residual_tail(hidden, &attended, h, &self.out_proj, &norm2, &mlp, pause);
    }

    /// Softmax attention of every row to every row of its image: `qkv: [rows, 3 · hidden]` →
    /// `[rows, hidden]`.
    fn attention(&self, qkv: &[f32], patches: usize, pause: &dyn Pause) -> Vec<f32> {
        span_attention(
            qkv,
            self.shape.hidden,
            self.shape.heads,
            self.attention,
            |row| {
                let first = row / patches * patches;
                first..first + patches
            },
            pause,
        )
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.layer_norm1.bytes()
            + self.layer_norm2.bytes()
            + [&self.qkv, &self.out_proj, &self.fc1, &self.fc2]
                .iter()
                .map(|l| l.bytes())
                .sum::<usize>()
    }
}
