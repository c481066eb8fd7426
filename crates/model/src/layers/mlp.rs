//! The gated MLP of Llama-family models: `down(silu(gate(x)) * up(x))`.

use super::linear::Linear;
use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;

/// One layer's MLP weights.
#[derive(Debug)]
pub struct Mlp {
    /// `[2 * intermediate, hidden]`: gate then up.
    gate_up_proj: Linear,
    /// `[hidden, intermediate]`.
    down_proj: Linear,
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
        })
    }

    /// `x[T, hidden] += mlp(h)` for `h: [T, hidden]`.
    pub fn forward_add(&self, h: &[f32], t: usize, x: &mut [f32]) {
        let act = self.gate_up_proj.forward_silu_gated(h, t); // [T, intermediate]
        self.down_proj.forward_add(&act, t, x);
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.gate_up_proj.bytes() + self.down_proj.bytes()
    }
}
