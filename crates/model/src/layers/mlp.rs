//! The gated MLP: `down(act(gate(x)) * up(x))`, with SiLU (Llama family) or the tanh
//! approximation of GELU (Gemma's GeGLU) as `act`.

use super::linear::Linear;
use super::vec_written_by;
use super::weights::load_rows;
use crate::checkpoint::TensorSource;
use crate::config::{Activation, ModelConfig};
use crate::error::LoadError;
use crate::kernels::matmul::{GatedMatrix, WeightDtype};
use crate::kernels::vector::{elementwise_ops, VectorOps};
use rayon::prelude::*;

/// How the gate and up projections are kept.
#[derive(Debug)]
enum GateUp {
    /// SiLU, no biases and whole panels: the activation runs inside the product.
    Fused(GatedMatrix),
    /// `[2 * intermediate, hidden]`, gate then up; the activation runs after the product.
    Stacked(Linear, Activation),
}

/// The dimensions and options of one gated MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlpShape {
    /// Input and output width.
    pub hidden: usize,
    /// Width of the gated hidden layer.
    pub intermediate: usize,
    /// Whether each projection carries a bias.
    pub bias: bool,
    /// The gate's activation.
    pub activation: Activation,
}

/// One layer's MLP weights.
#[derive(Debug)]
pub struct Mlp {
    gate_up: GateUp,
    /// `[hidden, intermediate]`.
    down_proj: Linear,
}

impl Mlp {
    /// Loads `{prefix}.gate_proj`, `up_proj`, `down_proj`; the gate goes through `activation`.
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        config: &ModelConfig,
        activation: Activation,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let names = ["gate_proj", "up_proj", "down_proj"].map(|n| format!("{prefix}.{n}"));
        let shape = MlpShape {
            hidden: config.hidden_size,
            intermediate: config.intermediate_size,
            bias: config.mlp_bias,
            activation,
        };
        Self::load_named(source, &names, shape, dtype)
    }

    /// Loads the gate, up and down projections named `gate`, `up`, `down` (prefixes of
    /// `.weight` and `.bias`), of the given shape: an expert of an MoE block, whose names and
    /// width differ from a dense layer's.
    pub fn load_named(
        source: &dyn TensorSource,
        [gate, up, down]: &[String; 3],
        shape: MlpShape,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let MlpShape {
            hidden,
            intermediate: inter,
            bias,
            activation,
        } = shape;
        // The fused epilogue computes SiLU only.
        let fusable = activation == Activation::Silu && !bias;
        let fused = if fusable && GatedMatrix::fits(inter) {
            let g = load_rows(source, &format!("{gate}.weight"), inter, hidden, dtype)?;
            let u = load_rows(source, &format!("{up}.weight"), inter, hidden, dtype)?;
            (g.format.ggml_type() == u.format.ggml_type())
                .then(|| GatedMatrix::pack_encoded(&g.bytes, &u.bytes, inter, hidden, g.format))
        } else {
            None
        };
        let gate_up = match fused {
            Some(gated) => GateUp::Fused(gated),
            None => GateUp::Stacked(
                Linear::load(source, &[(gate, inter), (up, inter)], hidden, bias, dtype)?,
                activation,
            ),
        };
        let down_proj = Linear::load(source, &[(down, hidden)], inter, bias, dtype)?;
        Ok(Self { gate_up, down_proj })
    }

    /// `x[T, hidden] += mlp(h)` for `h: [T, hidden]`.
    pub fn forward_add(&self, h: &[f32], t: usize, x: &mut [f32]) {
        let act = match &self.gate_up {
            // SAFETY: `matmul_silu` writes all `t * out_dim` elements.
            GateUp::Fused(gated) => unsafe {
                vec_written_by(t * gated.out_dim(), |act| gated.matmul_silu(h, t, act))
            },
            GateUp::Stacked(linear, activation) => {
                act_mul_halves(&linear.forward(h, t), linear.out_dim() / 2, *activation)
            }
        };
        self.down_proj.forward_add(&act, t, x);
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        let gate_up = match &self.gate_up {
            GateUp::Fused(gated) => gated.bytes(),
            GateUp::Stacked(linear, _) => linear.bytes(),
        };
        gate_up + self.down_proj.bytes()
    }
}

/// `act(gate) * up` for each row of `gate_up: [T, 2 * inter]` (gate then up), each element on
/// its own (so batch-invariant).
fn act_mul_halves(gate_up: &[f32], inter: usize, activation: Activation) -> Vec<f32> {
    let mut act = vec![0f32; gate_up.len() / 2];
    let ops = elementwise_ops();
    gate_up
        .par_chunks_exact(2 * inter)
        .zip(act.par_chunks_exact_mut(inter))
        .with_min_len(8)
        .for_each(|(row, out)| {
            let (gate, up) = row.split_at(inter);
            match activation {
                Activation::Silu => ops.silu_mul(gate, up, out),
                Activation::GeluTanh => ops.gelu_tanh_mul(gate, up, out),
            }
        });
    act
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::RawTensor;
    use crate::kernels::test_values;
    use std::collections::HashMap;

    /// Tensors by name, as a checkpoint would hand them over.
    struct Weights(HashMap<String, Vec<f32>>);

    impl TensorSource for Weights {
        fn tensor(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LoadError> {
            let t = self.0[name].clone();
            assert_eq!(t.len(), shape.iter().product::<usize>(), "{name}");
            Ok(t)
        }

        fn raw(&self, name: &str, shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
            Ok(RawTensor::from_f32(&self.tensor(name, shape)?, shape))
        }

        fn contains(&self, name: &str) -> bool {
            self.0.contains_key(name)
        }
    }

    fn mlp(hidden: usize, inter: usize) -> (Weights, ModelConfig) {
        let mut w = HashMap::new();
        for (i, (name, len)) in [
            ("gate_proj", inter * hidden),
            ("up_proj", inter * hidden),
            ("down_proj", hidden * inter),
        ]
        .into_iter()
        .enumerate()
        {
            w.insert(format!("mlp.{name}.weight"), test_values(len, i as u32 + 1));
        }
        let config = ModelConfig::from_json(
            &serde_json::json!({
                "architectures": ["LlamaForCausalLM"], "vocab_size": 16,
                "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": 1,
                "num_attention_heads": 2,
            })
            .to_string(),
            None,
        )
        .expect("config");
        (Weights(w), config)
    }

    /// The fused kernel path against the stacked product followed by the activation.
    #[test]
    fn fused_and_stacked_gate_up_give_the_same_bits() {
        let (hidden, inter, t) = (24, 48, 7);
        let (weights, config) = mlp(hidden, inter);
        for dtype in [WeightDtype::F32, WeightDtype::F16] {
            let fused =
                Mlp::load(&weights, "mlp", &config, Activation::Silu, Some(dtype)).expect("load");
            assert!(matches!(fused.gate_up, GateUp::Fused(_)));
            let stacked = Mlp {
                gate_up: GateUp::Stacked(
                    Linear::load(
                        &weights,
                        &[("mlp.gate_proj", inter), ("mlp.up_proj", inter)],
                        hidden,
                        false,
                        Some(dtype),
                    )
                    .expect("gate/up"),
                    Activation::Silu,
                ),
                down_proj: Linear::load(
                    &weights,
                    &[("mlp.down_proj", hidden)],
                    inter,
                    false,
                    Some(dtype),
                )
                .expect("down"),
            };
            assert_eq!(fused.bytes(), stacked.bytes());
            let h = test_values(t * hidden, 7);
            let residual = test_values(t * hidden, 8);
            let (mut a, mut b) = (residual.clone(), residual.clone());
            fused.forward_add(&h, t, &mut a);
            stacked.forward_add(&h, t, &mut b);
            assert_eq!(a, b, "{dtype:?}");
            assert_ne!(a, residual);
        }
        // A width that ends inside a panel loads stacked.
        let (weights, config) = mlp(hidden, 40);
        let odd = Mlp::load(
            &weights,
            "mlp",
            &config,
            Activation::Silu,
            Some(WeightDtype::F32),
        )
        .expect("load");
        assert!(matches!(odd.gate_up, GateUp::Stacked(..)));
    }

    #[test]
    fn gelu_tanh_matches_pytorch_values() {
        // torch.nn.functional.gelu(x, approximate="tanh") at these points.
        let gate = [-3.0, -1.0, 0.0, 0.5, 2.0];
        let expected = [-0.003_637_433, -0.158_808, 0.0, 0.345_714, 1.954_598];
        let mut out = [0.0; 5];
        elementwise_ops().gelu_tanh_mul(&gate, &[1.0; 5], &mut out);
        for (a, b) in out.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    #[test]
    fn a_gelu_gate_loads_stacked_and_differs_from_silu() {
        let (hidden, inter, t) = (24, 48, 3);
        let (weights, config) = mlp(hidden, inter);
        let gelu = Mlp::load(&weights, "mlp", &config, Activation::GeluTanh, None).expect("load");
        assert!(matches!(
            gelu.gate_up,
            GateUp::Stacked(_, Activation::GeluTanh)
        ));
        let silu = Mlp::load(&weights, "mlp", &config, Activation::Silu, None).expect("load");
        let h = test_values(t * hidden, 7);
        let (mut a, mut b) = (vec![0.0; t * hidden], vec![0.0; t * hidden]);
        gelu.forward_add(&h, t, &mut a);
        silu.forward_add(&h, t, &mut b);
        assert_ne!(a, b);
    }
}
