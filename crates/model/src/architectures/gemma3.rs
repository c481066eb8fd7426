//! `Gemma3ForCausalLM` (Gemma 3 text models): the embedding multiplied by `√hidden`, RMS norms
//! that scale by `1 + weight`, norms before and after both attention and the MLP, a GeGLU MLP
//! (`gelu_pytorch_tanh`), per-head q/k norms, scores scaled by `query_pre_attn_scalar^-½`, and
//! sliding-window layers (with their own RoPE base) interleaved with global ones.

use crate::checkpoint::TensorSource;
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{
    AttentionOptions, DecoderPlan, LayerPlan, MlpKind, NormPlacement, NormWeight, QkNormSpan,
};

/// Loads a Gemma 3 checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let norm_weight = if source.norm_weights_include_one() {
        NormWeight::Plain
    } else {
        NormWeight::OffsetFromOne
    };
    Decoder::load(source, config, &plan(config, norm_weight), dtype)
}

/// The plan of a Gemma 3 model whose norm weights are applied as `norm_weight` says (GGUF
/// files store them with the one already added).
pub fn plan(config: &ModelConfig, norm_weight: NormWeight) -> DecoderPlan {
    let scalar = config
        .query_pre_attn_scalar
        .unwrap_or(config.head_dim as f64);
    let layer = |i: usize| {
        let window = config.layer_window(i);
        let sliding = window.is_some();
        let attention = AttentionOptions {
            qkv_bias: config.qkv_bias,
            o_bias: config.o_bias,
            qk_norm: true,
            qk_norm_span: QkNormSpan::Head,
            sliding_window: window,
            scale: scalar.powf(-0.5) as f32,
            logit_softcap: config.attn_logit_softcapping.map(|c| c as f32),
        };
        let rope = match (&config.rope_local, sliding) {
            (Some(local), true) => local.clone(),
            _ => config.rope.clone(),
        };
        LayerPlan {
            attention,
            rope,
            norms: NormPlacement::Sandwich,
            activation: config.hidden_activation,
            mlp: MlpKind::Dense,
        }
    };
    DecoderPlan {
        layers: (0..config.num_hidden_layers).map(layer).collect(),
        norm_weight,
        // transformers multiplies by the scale cast to the activations' dtype (f32 here).
        embedding_scale: Some((config.hidden_size as f64).sqrt() as f32),
        final_logit_softcap: config.final_logit_softcapping.map(|c| c as f32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Activation, RopeConfig, RopeScaling};

    /// A Gemma 3 config as transformers 4.x published them.
    const DIALECT_4X: &str = r#"{
        "architectures": ["Gemma3ForCausalLM"], "vocab_size": 16, "hidden_size": 8,
        "intermediate_size": 16, "num_hidden_layers": 7, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 4, "query_pre_attn_scalar": 16,
        "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4,
        "sliding_window_pattern": 3, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "final_logit_softcapping": null, "attn_logit_softcapping": null
    }"#;

    /// The same model in the 5.x dialect: `layer_types` and per-type `rope_parameters`.
    const DIALECT_5X: &str = r#"{
        "architectures": ["Gemma3ForCausalLM"], "vocab_size": 16, "hidden_size": 8,
        "intermediate_size": 16, "num_hidden_layers": 7, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 4, "query_pre_attn_scalar": 16,
        "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
            "sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}
        },
        "final_logit_softcapping": null, "attn_logit_softcapping": null
    }"#;

    fn parse(text: &str) -> ModelConfig {
        ModelConfig::from_json(text, None).expect("valid config")
    }

    #[test]
    fn both_dialects_give_the_same_config_and_plan() {
        let (a, b) = (parse(DIALECT_4X), parse(DIALECT_5X));
        assert_eq!(a, b);
        assert_eq!(
            plan(&a, NormWeight::OffsetFromOne),
            plan(&b, NormWeight::OffsetFromOne)
        );
        assert_eq!(a.hidden_activation, Activation::GeluTanh);
        assert!(a.qk_norm);
    }

    #[test]
    fn every_third_layer_is_global_with_the_global_rope() {
        let plan = plan(&parse(DIALECT_4X), NormWeight::OffsetFromOne);
        let windows: Vec<_> = plan
            .layers
            .iter()
            .map(|l| l.attention.sliding_window)
            .collect();
        let (s, f) = (Some(4), None);
        assert_eq!(windows, [s, s, f, s, s, f, s]);
        let global = RopeConfig {
            theta: 1_000_000.0,
            scaling: RopeScaling::Linear { factor: 8.0 },
            rotary_dim: None,
            mrope_section: None,
        };
        let local = RopeConfig {
            theta: 10_000.0,
            scaling: RopeScaling::Default,
            rotary_dim: None,
            mrope_section: None,
        };
        assert_eq!(plan.layers[2].rope, global);
        assert_eq!(plan.layers[0].rope, local);
        assert_eq!(plan.layers[0].attention.scale, 0.25);
        assert_eq!(plan.embedding_scale, Some(8f32.sqrt()));
        assert_eq!(plan.final_logit_softcap, None);
        assert!(plan
            .layers
            .iter()
            .all(|l| l.norms == NormPlacement::Sandwich));
    }

    #[test]
    fn gemma3_defaults_follow_transformers() {
        // No pattern, thetas, scalar or window: every 6th layer global, 1e6 / 1e4, 256, 4096.
        let text = r#"{"architectures": ["Gemma3ForCausalLM"], "vocab_size": 16,
            "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 6,
            "num_attention_heads": 2, "head_dim": 4}"#;
        let config = parse(text);
        let plan = plan(&config, NormWeight::OffsetFromOne);
        assert_eq!(plan.layers[4].attention.sliding_window, Some(4096));
        assert_eq!(plan.layers[5].attention.sliding_window, None);
        assert_eq!(plan.layers[5].rope.theta, 1_000_000.0);
        assert_eq!(plan.layers[0].rope.theta, 10_000.0);
        assert_eq!(plan.layers[0].attention.scale, 1.0 / 16.0);
        assert_eq!(config.hidden_activation, Activation::GeluTanh);
    }

    #[test]
    fn softcaps_reach_the_plan_when_configured() {
        let text = DIALECT_5X.replace(
            r#""final_logit_softcapping": null, "attn_logit_softcapping": null"#,
            r#""final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0"#,
        );
        let plan = plan(&parse(&text), NormWeight::OffsetFromOne);
        assert_eq!(plan.final_logit_softcap, Some(30.0));
        assert!(plan
            .layers
            .iter()
            .all(|l| l.attention.logit_softcap == Some(50.0)));
    }
}
