//! Hugging Face `config.json` (both the transformers 4.x and 5.x dialects) and
//! `generation_config.json`, parsed into one [`ModelConfig`].
//!
//! transformers 4.x published `rope_theta`, `rope_scaling` and `torch_dtype` at the top level;
//! transformers 5.x writes `rope_parameters` (holding `rope_theta` and the scaling fields) and
//! `dtype`. Both read into the same [`RopeConfig`].

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::error::LoadError;
pub use crate::moe_config::MoeConfig;

mod capacity;
mod nested;
mod rope;
pub mod spec;

pub(crate) use capacity::SizeClaims;
pub use capacity::WeightCapacity;

use spec::{ArchitectureFacts, AttentionBias, ConfigSpec, SlidingWindow};

use rope::{layer_types, parse_rope};

/// How rotary position embeddings are computed.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE: `inv_freq[i] = theta^(-2i/head_dim)`.
    Default,
    /// Llama 3.1's frequency-dependent scaling (`rope_type: "llama3"`).
    Llama3 {
        /// Divisor applied to low frequencies.
        factor: f64,
        /// Wavelengths above `original_max / low_freq_factor` are fully scaled.
        low_freq_factor: f64,
        /// Wavelengths below `original_max / high_freq_factor` are left alone.
        high_freq_factor: f64,
        /// The context length the model was pre-trained with.
        original_max_position_embeddings: f64,
    },
    /// Every frequency divided by `factor` (`rope_type: "linear"`, Gemma 3's global layers).
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// Per-frequency divisors, `[head_dim / 2]` (GGUF's `rope_freqs.weight`, which llama.cpp's
    /// converter writes for Llama 3.1's scaling).
    FreqFactors(Vec<f32>),
    /// Phi-3's LongRoPE (`rope_type: "longrope"`, 4.x `"su"`): per-frequency divisors, one set
    /// for short sequences and one for long ones.
    LongRope(LongRope),
}

/// LongRoPE's parameters. A sequence uses `long_factor` once its own length (the tokens cached
/// after the step) exceeds `original_max_position_embeddings`, as transformers does with the
/// length it is given; cos and sin are scaled by `attention_factor` either way.
#[derive(Debug, Clone, PartialEq)]
pub struct LongRope {
    /// `[rotary_dim / 2]` divisors of the inverse frequencies up to the original length.
    pub short_factor: Vec<f32>,
    /// `[rotary_dim / 2]` divisors past it.
    pub long_factor: Vec<f32>,
    /// The context length the model was pre-trained with.
    pub original_max_position_embeddings: usize,
    /// Multiplier of cos and sin (`√(1 + ln(max / original) / ln(original))` by default).
    pub attention_factor: f32,
}

/// The activation of the MLP's gate (`hidden_act`, Gemma's `hidden_activation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `x · sigmoid(x)` (`silu`).
    Silu,
    /// GELU's tanh approximation (`gelu_pytorch_tanh`).
    GeluTanh,
}

/// Which attention a layer runs (`layer_types`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerType {
    /// Every earlier position (`full_attention`).
    Full,
    /// The last `sliding_window` positions (`sliding_attention`).
    Sliding,
}

/// Rotary embedding parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeConfig {
    /// The base `theta`.
    pub theta: f64,
    /// Frequency scaling.
    pub scaling: RopeScaling,
    /// How many leading features of each head rotate, when not all of them
    /// (`partial_rotary_factor`, GGUF `rope.dimension_count`); the rest pass through.
    pub rotary_dim: Option<usize>,
    /// Multimodal RoPE (Qwen2-VL, Qwen2.5-VL: `mrope_section`): the `rotary_dim / 2` frequency
    /// pairs split into three runs of these lengths, rotated by a token's temporal, height and
    /// width position respectively (`Batch::mrope_positions`); `None` for one position.
    pub mrope_section: Option<[usize; 3]>,
}

/// Everything the runtime needs from a model directory's configuration files.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `architectures[0]`, e.g. `LlamaForCausalLM`.
    pub architecture: String,
    /// Vocabulary size (rows of the embedding and of the output head).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the MLP's gated hidden layer.
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads per layer.
    pub num_attention_heads: usize,
    /// Key/value heads per layer (grouped-query attention when fewer than query heads).
    pub num_key_value_heads: usize,
    /// Width of one attention head (explicit `head_dim`, else `hidden_size / num_attention_heads`).
    pub head_dim: usize,
    /// Longest context the model supports.
    pub max_position_embeddings: usize,
    /// Epsilon of every RMS norm.
    pub rms_norm_eps: f64,
    /// The MLP gate's activation.
    pub hidden_activation: Activation,
    /// Rotary embedding parameters.
    pub rope: RopeConfig,
    /// Whether the output head reuses the token embedding.
    pub tie_word_embeddings: bool,
    /// Whether q/k/v projections carry a bias (Qwen2, or Llama's `attention_bias`).
    pub qkv_bias: bool,
    /// Whether the output projection carries a bias (Llama's `attention_bias`).
    pub o_bias: bool,
    /// Whether the MLP projections carry biases (Llama's `mlp_bias`).
    pub mlp_bias: bool,
    /// Whether queries and keys are RMS-normed per head before RoPE (Qwen3).
    pub qk_norm: bool,
    /// Attention only sees the last `sliding_window` positions (Mistral), when set.
    pub sliding_window: Option<usize>,
    /// Which layers attend within `sliding_window` when layers differ (Gemma 3); `None` when
    /// every layer is the same, i.e. all of them within `sliding_window` if it is set.
    pub layer_types: Option<Vec<LayerType>>,
    /// RoPE of the sliding-window layers when it differs from [`Self::rope`] (Gemma 3's
    /// `rope_local_base_freq`, 5.x `rope_parameters.sliding_attention`).
    pub rope_local: Option<RopeConfig>,
    /// Attention scores are scaled by `query_pre_attn_scalar^-½` instead of `head_dim^-½`.
    pub query_pre_attn_scalar: Option<f64>,
    /// Logits are capped to `cap · tanh(logits / cap)`.
    pub final_logit_softcapping: Option<f64>,
    /// Attention scores are capped to `cap · tanh(score / cap)`.
    pub attn_logit_softcapping: Option<f64>,
    /// Token ids that end generation: `generation_config.json`, else `config.json`.
    pub eos_token_ids: Vec<u32>,
    /// Beginning-of-sequence token, when the configs name one.
    pub bos_token_id: Option<u32>,
    /// The dtype the checkpoint declares (`dtype` or `torch_dtype`), informational.
    pub checkpoint_dtype: Option<String>,
    /// The experts of a mixture-of-experts model; `None` for a dense one.
    pub moe: Option<MoeConfig>,
}

/// The raw fields of `config.json` we read; everything else is ignored.
#[derive(Deserialize)]
struct RawConfig {
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    max_position_embeddings: Option<usize>,
    rms_norm_eps: Option<f64>,
    hidden_act: Option<String>,
    hidden_activation: Option<String>,
    // 4.x dialect
    rope_theta: Option<f64>,
    rope_scaling: Option<Value>,
    torch_dtype: Option<String>,
    // 5.x dialect
    rope_parameters: Option<Value>,
    dtype: Option<String>,
    tie_word_embeddings: Option<bool>,
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    sliding_window: Option<usize>,
    use_sliding_window: Option<bool>,
    layer_types: Option<Vec<String>>,
    sliding_window_pattern: Option<usize>,
    rope_local_base_freq: Option<f64>,
    query_pre_attn_scalar: Option<f64>,
    final_logit_softcapping: Option<f64>,
    attn_logit_softcapping: Option<f64>,
    use_bidirectional_attention: Option<bool>,
    original_max_position_embeddings: Option<usize>,
    partial_rotary_factor: Option<f64>,
    eos_token_id: Option<Value>,
    bos_token_id: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct RawGenerationConfig {
    eos_token_id: Option<Value>,
    bos_token_id: Option<Value>,
}

impl ModelConfig {
    /// Reads `config.json` and, when present, `generation_config.json` from `dir`, with what
    /// `facts` says of its architecture (see `ModelConfig::from_dir`, which asks the registry).
    /// The config's sizes are checked against the size of the directory's safetensors files
    /// (see [`WeightCapacity`]), so a missing weight file is an error here already.
    pub(crate) fn from_dir_with(dir: &Path, facts: ArchitectureFacts) -> Result<Self, LoadError> {
        let config_path = dir.join("config.json");
        let text = read_text(&config_path)?;
        let capacity = crate::checkpoint::safetensors_capacity(dir)?;
        let generation_path = dir.join("generation_config.json");
        let generation = match read_text(&generation_path) {
            Ok(text) => Some(
                serde_json::from_str::<RawGenerationConfig>(&text).map_err(|e| {
                    LoadError::Config {
                        path: generation_path.clone(),
                        message: e.to_string(),
                    }
                })?,
            ),
            Err(LoadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                None
            }
            Err(err) => return Err(err),
        };
        Self::from_json_with(&text, generation.as_ref(), facts, capacity).map_err(|message| {
            LoadError::Config {
                path: config_path,
                message,
            }
        })
    }

    /// Parses `config.json` text with what `facts` says of its architecture; `generation`
    /// overrides the special token ids. Its sizes must fit weight files of `capacity`, checked
    /// before any per-layer table is built.
    pub(crate) fn from_json_with(
        text: &str,
        generation: Option<&RawGenerationConfig>,
        facts: ArchitectureFacts,
        capacity: WeightCapacity,
    ) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Named {
            architectures: Option<Vec<String>>,
        }
        let named: Named = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let architecture = (named.architectures.as_ref())
            .and_then(|a| a.first())
            .cloned()
            .ok_or("no `architectures` entry")?;
        // Names sluice does not implement read as the Llama block (and fail to load).
        let (spec, moe) = facts(&architecture).unwrap_or((ConfigSpec::PLAIN, None));
        let text = &nested::flatten_text_config(text, spec.text_config_defaults)?;
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let hidden_activation = match raw.hidden_activation.as_ref().or(raw.hidden_act.as_ref()) {
            None => spec.activation,
            Some(act) => match act.as_str() {
                "silu" => Activation::Silu,
                "gelu_pytorch_tanh" => Activation::GeluTanh,
                other => {
                    return Err(format!(
                        "unsupported hidden activation `{other}` (silu, gelu_pytorch_tanh)"
                    ))
                }
            },
        };
        if raw.num_attention_heads == 0 {
            return Err("num_attention_heads is 0".into());
        }
        let num_key_value_heads = raw.num_key_value_heads.unwrap_or(raw.num_attention_heads);
        if num_key_value_heads == 0 || !raw.num_attention_heads.is_multiple_of(num_key_value_heads)
        {
            return Err(format!(
                "num_attention_heads ({}) is not a multiple of num_key_value_heads ({num_key_value_heads})",
                raw.num_attention_heads
            ));
        }
        let head_dim = raw
            .head_dim
            .unwrap_or(raw.hidden_size / raw.num_attention_heads);
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(format!("head_dim {head_dim} must be even and non-zero"));
        }
        let moe = crate::moe_config::parse(text, moe)?;
        capacity.check(&SizeClaims {
            vocab: raw.vocab_size,
            hidden: raw.hidden_size,
            layers: raw.num_hidden_layers,
            heads: raw.num_attention_heads,
            kv_heads: num_key_value_heads,
            head_dim,
            intermediate: raw.intermediate_size,
            experts: moe
                .as_ref()
                .map(|m| (m.num_experts, m.expert_intermediate_size)),
        })?;
        let (rope, rope_local) = parse_rope(&raw, &spec, head_dim)?;
        if raw.use_bidirectional_attention == Some(true) {
            return Err("use_bidirectional_attention is not supported".into());
        }
        let layer_types = layer_types(&raw, &spec)?;
        let eos_source = generation
            .and_then(|g| g.eos_token_id.as_ref())
            .or(raw.eos_token_id.as_ref());
        let bos_source = generation
            .and_then(|g| g.bos_token_id.as_ref())
            .or(raw.bos_token_id.as_ref());
        // Qwen2 configs carry a `sliding_window` that only applies with `use_sliding_window`
        // (and then only to some layers, which we do not implement).
        let sliding_window = match (spec.window, raw.use_sliding_window) {
            (SlidingWindow::OptIn, Some(true)) => {
                return Err("Qwen2 use_sliding_window is not supported".into())
            }
            (SlidingWindow::OptIn, _) | (_, Some(false)) => None,
            (SlidingWindow::Interleaved { window, .. }, _) => raw.sliding_window.or(Some(window)),
            (SlidingWindow::Uniform, _) => raw.sliding_window,
        };
        let attention_bias = raw.attention_bias.unwrap_or(false);
        let (qkv_bias, o_bias) = match spec.attention_bias {
            AttentionBias::FromConfig => (attention_bias, attention_bias),
            AttentionBias::QkvOnly => (true, false),
        };
        // Layers all of one type are the uniform case: all full means no window at all.
        let (layer_types, sliding_window) = match layer_types {
            Some(types) if types.iter().all(|&t| t == LayerType::Full) => (None, None),
            Some(types) if types.iter().all(|&t| t == LayerType::Sliding) => (None, sliding_window),
            other => (other, sliding_window),
        };
        Ok(Self {
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            intermediate_size: raw.intermediate_size,
            num_hidden_layers: raw.num_hidden_layers,
            num_attention_heads: raw.num_attention_heads,
            num_key_value_heads,
            head_dim,
            max_position_embeddings: raw.max_position_embeddings.unwrap_or(2048),
            rms_norm_eps: raw.rms_norm_eps.unwrap_or(1e-6),
            hidden_activation,
            rope,
            tie_word_embeddings: raw.tie_word_embeddings.unwrap_or(false),
            qkv_bias,
            o_bias,
            mlp_bias: raw.mlp_bias.unwrap_or(false),
            qk_norm: spec.qk_norm,
            sliding_window,
            layer_types,
            rope_local,
            query_pre_attn_scalar: raw.query_pre_attn_scalar.or(spec.query_pre_attn_scalar),
            final_logit_softcapping: raw.final_logit_softcapping,
            attn_logit_softcapping: raw.attn_logit_softcapping,
            eos_token_ids: token_ids(eos_source)?,
            bos_token_id: token_ids(bos_source)?.first().copied(),
            checkpoint_dtype: raw.dtype.or(raw.torch_dtype),
            moe,
            architecture,
        })
    }

    /// Query heads that share one key/value head.
    pub fn heads_per_kv_head(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads
    }

    /// The sliding window layer `layer` attends within, if it is a sliding-window layer: the
    /// layers `layer_types` marks sliding, or every layer when there is no such list.
    pub fn layer_window(&self, layer: usize) -> Option<usize> {
        let sliding = match &self.layer_types {
            Some(types) => types.get(layer) == Some(&LayerType::Sliding),
            None => true,
        };
        self.sliding_window.filter(|_| sliding)
    }
}

/// A JSON file of a model directory, read only when it is a regular file (a FIFO named
/// `config.json` would block the read forever).
fn read_text(path: &Path) -> Result<String, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let bytes = sluice_gguf::read_regular_file(path).map_err(io)?;
    String::from_utf8(bytes)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// A token id field that may be absent, a number or a list of numbers.
fn token_ids(value: Option<&Value>) -> Result<Vec<u32>, String> {
    let as_id = |v: &Value| {
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("token id {v} is not a u32"))
    };
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(as_id).collect(),
        Some(v) => Ok(vec![as_id(v)?]),
    }
}

/// Configs for unit tests elsewhere in the crate.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A two-layer GQA config with small dimensions.
    pub(crate) fn tiny_config() -> ModelConfig {
        ModelConfig::from_json(
            r#"{"architectures": ["LlamaForCausalLM"], "vocab_size": 32, "hidden_size": 16,
                "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2}"#,
            None,
        )
        .expect("valid config")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIALECT_5X: &str = r#"{
        "architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
        "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "eos_token_id": 2, "dtype": "bfloat16",
        "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}
    }"#;

    const DIALECT_4X: &str = r#"{
        "architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
        "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
        "rope_theta": 500000.0,
        "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    }"#;

    #[test]
    fn both_dialects_parse_to_the_same_config() {
        let a = ModelConfig::from_json(DIALECT_5X, None).unwrap();
        let b = ModelConfig::from_json(DIALECT_4X, None).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rope.theta, 500000.0);
        assert!(matches!(a.rope.scaling, RopeScaling::Llama3 { factor, .. } if factor == 8.0));
        assert_eq!(a.head_dim, 4);
        assert_eq!(a.checkpoint_dtype.as_deref(), Some("bfloat16"));
    }

    #[test]
    fn generation_config_eos_ids_take_precedence() {
        let generation = RawGenerationConfig {
            eos_token_id: Some(serde_json::json!([5, 7])),
            bos_token_id: None,
        };
        let c = ModelConfig::from_json(DIALECT_5X, Some(&generation)).unwrap();
        assert_eq!(c.eos_token_ids, vec![5, 7]);
        let c = ModelConfig::from_json(DIALECT_5X, None).unwrap();
        assert_eq!(c.eos_token_ids, vec![2]);
    }

    #[test]
    fn unknown_rope_type_is_an_error() {
        let text = DIALECT_4X.replace("llama3", "yarn");
        let err = ModelConfig::from_json(&text, None).unwrap_err();
        assert!(err.contains("yarn"), "{err}");
    }

    #[test]
    fn the_architecture_decides_what_the_config_leaves_unsaid() {
        let qwen2 = DIALECT_4X
            .replace("LlamaForCausalLM", "Qwen2ForCausalLM")
            .replace(
                "\"eos_token_id\"",
                "\"sliding_window\": 4, \"eos_token_id\"",
            );
        let c = ModelConfig::from_json(&qwen2, None).unwrap();
        assert_eq!(
            (c.qkv_bias, c.o_bias, c.sliding_window),
            (true, false, None)
        );
        let opted_in = qwen2.replace(
            "\"eos_token_id\"",
            "\"use_sliding_window\": true, \"eos_token_id\"",
        );
        assert_eq!(
            ModelConfig::from_json(&opted_in, None).unwrap_err(),
            "Qwen2 use_sliding_window is not supported"
        );
        let llama = qwen2.replace("Qwen2ForCausalLM", "LlamaForCausalLM");
        let c = ModelConfig::from_json(&llama, None).unwrap();
        assert_eq!(
            (c.qkv_bias, c.o_bias, c.sliding_window),
            (false, false, Some(4))
        );
        assert!(!c.qk_norm && c.moe.is_none());
        let qwen3 = DIALECT_4X.replace("LlamaForCausalLM", "Qwen3ForCausalLM");
        assert!(ModelConfig::from_json(&qwen3, None).unwrap().qk_norm);
        // A name sluice does not implement reads as the Llama block.
        let other = DIALECT_4X.replace("LlamaForCausalLM", "GPT2LMHeadModel");
        let c = ModelConfig::from_json(&other, None).unwrap();
        assert_eq!(c.architecture, "GPT2LMHeadModel");
        assert_eq!(c.hidden_activation, Activation::Silu);
        assert!(!c.qk_norm && c.rope_local.is_none() && c.layer_types.is_none());
    }

    #[test]
    fn indivisible_head_counts_are_an_error() {
        let text = DIALECT_4X.replace("\"num_key_value_heads\": 1", "\"num_key_value_heads\": 3");
        assert!(ModelConfig::from_json(&text, None).is_err());
    }
}
