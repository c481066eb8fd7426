//! The gated MLP of Llama-family models: `down(silu(gate(x)) * up(x))`.

use super::linear::Linear;
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::kernels::vector::{best_ops, VectorOps};
use rayon::prelude::*;

/// One layer's MLP weights.
#[derive(Debug)]
pub struct Mlp {
    /// `[2 * intermediate, hidden]`: gate then up.
    gate_up_proj: Linear,
    /// `[hidden, intermediate]`.
    down_proj: Linear,
    intermediate: usize,
}

impl Mlp {
    /// Loads `{prefix}.gate_proj`, `up_proj`, `down_proj`.
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        config: &ModelConfig,
        dtype: WeightDtype,
    ) -> Result<Self, LoadError> {
        let (hidden, inter) = (config.hidden_size, config.intermediate_size);
        let gate_up_proj = Linear::load(
            source,
            &[
                (&format!("{prefix}.gate_proj"), inter),
                (&format!("{prefix}.up_proj"), inter),
            ],
            hidden,
            config.mlp_bias,
            dtype,
        )?;
        let down_proj = Linear::load(
            source,
            &[(&format!("{prefix}.down_proj"), hidden)],
            inter,
            config.mlp_bias,
            dtype,
        )?;
        Ok(Self {
            gate_up_proj,
            down_proj,
            intermediate: inter,
        })
    }

    /// `h: [T, hidden]` → `[T, hidden]`.
    pub fn forward(&self, h: &[f32], t: usize) -> Vec<f32> {
        let inter = self.intermediate;
        let gate_up = self.gate_up_proj.forward(h, t); // [T, 2 * inter]
        let mut act = vec![0f32; t * inter]; // [T, inter]
        let ops = best_ops(inter);
        gate_up
            .par_chunks_exact(2 * inter)
            .zip(act.par_chunks_exact_mut(inter))
            .with_min_len(8)
            .for_each(|(row, out)| {
                let (gate, up) = row.split_at(inter);
                ops.silu_mul(gate, up, out);
            });
        self.down_proj.forward(&act, t)
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.gate_up_proj.bytes() + self.down_proj.bytes()
    }
}
