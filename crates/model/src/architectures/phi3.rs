//! `Phi3ForCausalLM` (Phi-3 and Phi-3.5 mini/medium, Phi-4-mini): the Llama block with q, k, v
//! stored as one `self_attn.qkv_proj` (`[(heads + 2 · kv_heads) · head_dim, hidden]`, q rows
//! first) and gate and up as one `mlp.gate_up_proj` (`[2 · intermediate, hidden]`, gate rows
//! first). LongRoPE and Phi-4-mini's partial rotary embeddings are the shared rotary layer's;
//! a `sliding_window` (Phi-3-mini's 2047) applies to every layer.
//!
//! The fused tensors are split back into the parts the decoder asks for by [`SplitFused`], so
//! the decoder fuses them again in its own layout (q/k/v in one `Linear`, gate/up interleaved by
//! panels). GGUF files store the same fusion (`attn_qkv`, `ffn_up` holding gate then up).

use std::borrow::Cow;

use crate::checkpoint::{RawTensor, TensorSource};
use crate::config::ModelConfig;
use crate::decoder::Decoder;
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;
use crate::plan::{AttentionOptions, DecoderPlan};

/// Loads a Phi-3 checkpoint.
pub fn load(
    source: &dyn TensorSource,
    config: &ModelConfig,
    dtype: Option<WeightDtype>,
) -> Result<Decoder, LoadError> {
    let attention = AttentionOptions {
        sliding_window: config.sliding_window,
        ..AttentionOptions::plain(config)
    };
    Decoder::load(
        &SplitFused::phi3(source, config),
        config,
        &DecoderPlan::llama(config, attention),
        dtype,
    )
}

/// One projection stored as a run of rows inside a fused one.
#[derive(Debug, Clone, Copy)]
struct Part {
    /// The module the decoder asks for, e.g. `self_attn.k_proj`.
    module: &'static str,
    /// The fused module holding it, e.g. `self_attn.qkv_proj`.
    fused: &'static str,
    /// Its first row in the fused weight.
    start: usize,
    /// Its rows.
    rows: usize,
    /// Rows of the whole fused weight.
    total: usize,
}

/// A [`TensorSource`] answering per-projection names (`model.layers.{i}.{module}.weight`) with
/// rows of the fused tensor that holds them. Rows are whole blocks in every stored type, so a
/// part is a byte range of the fused tensor, borrowed from the file's mapping where it has one.
/// Names the inner source holds itself are passed through.
pub struct SplitFused<'a> {
    inner: &'a dyn TensorSource,
    parts: Vec<Part>,
}

impl<'a> SplitFused<'a> {
    /// Phi-3's fusions: q, k, v in `qkv_proj`; gate, up in `gate_up_proj`.
    pub fn phi3(inner: &'a dyn TensorSource, config: &ModelConfig) -> Self {
        let q = config.num_attention_heads * config.head_dim;
        let kv = config.num_key_value_heads * config.head_dim;
        let inter = config.intermediate_size;
        let qkv = |module, start, rows| Part {
            module,
            fused: "self_attn.qkv_proj",
            start,
            rows,
            total: q + 2 * kv,
        };
        let gate_up = |module, start| Part {
            module,
            fused: "mlp.gate_up_proj",
            start,
            rows: inter,
            total: 2 * inter,
        };
        Self {
            inner,
            parts: vec![
                qkv("self_attn.q_proj", 0, q),
                qkv("self_attn.k_proj", q, kv),
                qkv("self_attn.v_proj", q + kv, kv),
                gate_up("mlp.gate_proj", 0),
                gate_up("mlp.up_proj", inter),
            ],
        }
    }

    /// The part `name` names and its fused tensor's name, when it is one of the parts.
    fn locate(&self, name: &str) -> Option<(Part, String)> {
        let rest = name.strip_prefix("model.layers.")?;
        let (layer, module) = rest.split_once('.')?;
        let module = module.strip_suffix(".weight")?;
        let part = *self.parts.iter().find(|p| p.module == module)?;
        Some((part, format!("model.layers.{layer}.{}.weight", part.fused)))
    }
}

impl TensorSource for SplitFused<'_> {
    fn raw(&self, name: &str, expected_shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        // The fused tensor wins where both names answer: a GGUF source maps `mlp.up_proj` and
        // `mlp.gate_up_proj` to the same `ffn_up`.
        let located = self
            .locate(name)
            .filter(|(_, fused)| self.inner.contains(fused));
        let (Some((part, fused)), [rows, cols]) = (located, expected_shape) else {
            return self.inner.raw(name, expected_shape);
        };
        let whole = self.inner.raw(&fused, &[part.total, *cols])?;
        let row_bytes = whole.bytes.len() / part.total;
        let range = part.start * row_bytes..(part.start + part.rows) * row_bytes;
        let bytes = match whole.bytes {
            Cow::Borrowed(mapped) => Cow::Borrowed(&mapped[range]),
            Cow::Owned(owned) => Cow::Owned(owned[range].to_vec()),
        };
        let raw = RawTensor {
            ggml_type: whole.ggml_type,
            shape: vec![part.rows, *cols],
            bytes,
            path: whole.path,
        };
        raw.check_shape(name, &[*rows, *cols])?;
        Ok(raw)
    }

    fn contains(&self, name: &str) -> bool {
        self.inner.contains(name)
            || (self.locate(name)).is_some_and(|(_, fused)| self.inner.contains(&fused))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LongRope, RopeScaling};
    use std::collections::HashMap;

    /// Phi-4-mini as transformers 4.x published it (shrunk): `rope_scaling` with `longrope`,
    /// `partial_rotary_factor` and the original length at top level.
    const DIALECT_4X: &str = r#"{
        "architectures": ["Phi3ForCausalLM"], "vocab_size": 16, "hidden_size": 32,
        "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 1024,
        "original_max_position_embeddings": 32, "partial_rotary_factor": 0.75,
        "rope_theta": 10000.0, "sliding_window": null,
        "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 2], "long_factor": [3, 4, 5]}
    }"#;

    /// The same in the 5.x dialect.
    const DIALECT_5X: &str = r#"{
        "architectures": ["Phi3ForCausalLM"], "vocab_size": 16, "hidden_size": 32,
        "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 1024,
        "original_max_position_embeddings": 32, "partial_rotary_factor": 0.75,
        "sliding_window": null,
        "rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0,
            "partial_rotary_factor": 0.75, "original_max_position_embeddings": 32,
            "short_factor": [1, 1, 2], "long_factor": [3, 4, 5]}
    }"#;

    fn parse(text: &str) -> Result<ModelConfig, String> {
        ModelConfig::from_json(text, None)
    }

    #[test]
    fn both_dialects_give_longrope_with_partial_rotary() {
        let (a, b) = (parse(DIALECT_4X).unwrap(), parse(DIALECT_5X).unwrap());
        assert_eq!(a, b);
        assert_eq!(a.rope.rotary_dim, Some(6));
        // factor = 1024 / 32 = 32: √(1 + ln 32 / ln 32) = √2.
        let expected = LongRope {
            short_factor: vec![1.0, 1.0, 2.0],
            long_factor: vec![3.0, 4.0, 5.0],
            original_max_position_embeddings: 32,
            attention_factor: 2f32.sqrt(),
        };
        assert_eq!(a.rope.scaling, RopeScaling::LongRope(expected));
        assert_eq!(a.sliding_window, None);
    }

    #[test]
    fn su_is_longrope_and_explicit_factors_win() {
        let text = DIALECT_4X.replace(
            r#""type": "longrope","#,
            r#""type": "su", "attention_factor": 1.25,"#,
        );
        let RopeScaling::LongRope(long) = parse(&text).unwrap().rope.scaling else {
            panic!("not longrope");
        };
        assert_eq!(long.attention_factor, 1.25);
    }

    #[test]
    fn factor_counts_must_match_the_rotated_dimensions() {
        let text = DIALECT_5X.replace(r#""long_factor": [3, 4, 5]"#, r#""long_factor": [3, 4]"#);
        let err = parse(&text).unwrap_err();
        assert!(err.contains("3 short and long factors"), "{err}");
    }

    /// A source holding named f32 tensors.
    struct Tensors(HashMap<String, (Vec<f32>, Vec<usize>)>);

    impl TensorSource for Tensors {
        fn raw(&self, name: &str, shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
            let (values, stored) = self.0.get(name).ok_or(LoadError::MissingTensor {
                path: Default::default(),
                tensor: name.into(),
            })?;
            let raw = RawTensor::from_f32(values, stored);
            raw.check_shape(name, shape)?;
            Ok(raw)
        }

        fn contains(&self, name: &str) -> bool {
            self.0.contains_key(name)
        }
    }

    #[test]
    fn fused_rows_are_split_in_q_k_v_and_gate_up_order() {
        let config = parse(DIALECT_5X).unwrap();
        // q: 4 heads · 8 = 32 rows, k and v: 16 each; one column holding the row index.
        let rows = |n: usize| (0..n).map(|r| r as f32).collect::<Vec<_>>();
        let inner = Tensors(HashMap::from([
            (
                "model.layers.0.self_attn.qkv_proj.weight".to_string(),
                (rows(64), vec![64, 1]),
            ),
            (
                "model.layers.0.mlp.gate_up_proj.weight".to_string(),
                (rows(32), vec![32, 1]),
            ),
        ]));
        let split = SplitFused::phi3(&inner, &config);
        let first = |name: &str, n: usize| split.tensor(name, &[n, 1]).unwrap()[0];
        assert_eq!(first("model.layers.0.self_attn.q_proj.weight", 32), 0.0);
        assert_eq!(first("model.layers.0.self_attn.k_proj.weight", 16), 32.0);
        assert_eq!(first("model.layers.0.self_attn.v_proj.weight", 16), 48.0);
        assert_eq!(first("model.layers.0.mlp.gate_proj.weight", 16), 0.0);
        assert_eq!(first("model.layers.0.mlp.up_proj.weight", 16), 16.0);
        assert!(split.contains("model.layers.0.mlp.up_proj.weight"));
        assert!(!split.contains("model.layers.1.mlp.up_proj.weight"));
        assert!(split
            .raw("model.layers.0.self_attn.k_proj.weight", &[8, 1])
            .is_err());
    }
}
