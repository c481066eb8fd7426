//! A layer's feed-forward block, as its [`MlpKind`] says: one dense gated MLP or a mixture of
//! experts.

use super::mlp::Mlp;
use super::moe::Moe;
use crate::checkpoint::TensorSource;
use crate::config::{Activation, ModelConfig};
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::MlpKind;

/// One layer's feed-forward weights.
#[derive(Debug)]
pub enum FeedForward {
    /// `model.layers.{i}.mlp`.
    Dense(Mlp),
    /// The router and experts (boxed: an MoE block is rare beside dense ones and large).
    Sparse(Box<Moe>),
}

impl FeedForward {
    /// Loads layer `layer_prefix`'s block (`{layer_prefix}.mlp`, or the module `kind` names).
    pub fn load(
        source: &dyn TensorSource,
        layer_prefix: &str,
        config: &ModelConfig,
        kind: &MlpKind,
        activation: Activation,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        Ok(match kind {
            MlpKind::Dense => Self::Dense(Mlp::load(
                source,
                &format!("{layer_prefix}.mlp"),
                config,
                activation,
                dtype,
            )?),
            MlpKind::Sparse(sparse) => Self::Sparse(Box::new(Moe::load(
                source,
                &format!("{layer_prefix}.{}", sparse.module),
                config,
                sparse,
                dtype,
            )?)),
        })
    }

    /// `x[T, hidden] += ffn(h)` for `h: [T, hidden]`.
    pub fn forward_add(&self, h: &[f32], t: usize, x: &mut [f32]) {
        match self {
            Self::Dense(mlp) => mlp.forward_add(h, t, x),
            Self::Sparse(moe) => moe.forward_add(h, t, x),
        }
    }

    /// Distinct experts the last forward pass ran; `None` for a dense block.
    pub fn experts_touched(&self) -> Option<usize> {
        match self {
            Self::Dense(_) => None,
            Self::Sparse(moe) => Some(moe.experts_touched()),
        }
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        match self {
            Self::Dense(mlp) => mlp.bytes(),
            Self::Sparse(moe) => moe.bytes(),
        }
    }
}
