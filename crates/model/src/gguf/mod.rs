//! GGUF models: the config from metadata ([`config`]) and a [`TensorSource`] that answers the
//! Hugging Face tensor names the shared decoder asks for with the GGUF tensors llama.cpp's
//! converter wrote, undoing the converter's Q/K row permutation for `llama`.

pub mod config;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use sluice_gguf::{GgufModel, TensorInfo};

use crate::checkpoint::{RawTensor, TensorSource};
use crate::config::ModelConfig;
use crate::error::LoadError;

/// A GGUF file (or split set) with the config read from its metadata.
#[derive(Debug)]
pub struct GgufSource {
    model: GgufModel,
    config: ModelConfig,
    /// `llama` files store Q and K rows permuted for llama.cpp's interleaved RoPE.
    permuted_qk: bool,
}

impl GgufSource {
    /// Opens `path` and reads its config.
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        Self::open_with(path, GgufModel::open)
    }

    /// Reads the config of `path` from its header alone: a file whose tensor data is cut off
    /// still has a config (and fails when loaded).
    pub fn config_at(path: &Path) -> Result<ModelConfig, LoadError> {
        Ok(Self::open_with(path, GgufModel::open_header)?.config)
    }

    fn open_with(
        path: &Path,
        open: impl Fn(&Path) -> Result<GgufModel, sluice_gguf::GgufError>,
    ) -> Result<Self, LoadError> {
        let model = open(path).map_err(|e| LoadError::Gguf {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let config = config::config_from_gguf(&model).map_err(|message| LoadError::Config {
            path: path.to_path_buf(),
            message,
        })?;
        let permuted_qk =
            model.metadata().str("general.architecture").ok().flatten() == Some("llama");
        Ok(Self {
            model,
            config,
            permuted_qk,
        })
    }

    /// The config from the metadata.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The parsed file(s), for the metadata (tokenizer, chat template).
    pub fn gguf(&self) -> &GgufModel {
        &self.model
    }

    /// Every tensor with its Hugging Face name, for memory estimates.
    pub fn tensors(&self) -> impl Iterator<Item = (Option<String>, &TensorInfo)> {
        self.model.tensors().map(|t| (hf_name(&t.name), t))
    }

    fn path(&self) -> PathBuf {
        self.model.path().to_path_buf()
    }

    /// The heads whose rows the converter permuted in `name`, if any.
    fn permuted_heads(&self, name: &str) -> Option<usize> {
        if !self.permuted_qk {
            return None;
        }
        if name.ends_with("self_attn.q_proj.weight") || name.ends_with("self_attn.q_proj.bias") {
            Some(self.config.num_attention_heads)
        } else if name.ends_with("self_attn.k_proj.weight")
            || name.ends_with("self_attn.k_proj.bias")
        {
            Some(self.config.num_key_value_heads)
        } else {
            None
        }
    }
}

impl TensorSource for GgufSource {
    fn raw(&self, name: &str, expected_shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        let missing = || LoadError::MissingTensor {
            path: self.path(),
            tensor: name.to_string(),
        };
        let gguf_name = gguf_name(name).ok_or_else(missing)?;
        let (info, bytes) = self.model.tensor(&gguf_name).ok_or_else(missing)?;
        let raw = RawTensor {
            ggml_type: info.ggml_type,
            shape: info.shape(),
            bytes: Cow::Borrowed(bytes),
            path: self.path(),
        };
        raw.check_shape(name, expected_shape)?;
        if raw.ggml_type.block().is_none() {
            return Err(LoadError::UnsupportedDtype {
                path: self.path(),
                tensor: gguf_name,
                dtype: format!(
                    "{} (sluice reads f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K..q6_K)",
                    raw.ggml_type
                ),
            });
        }
        Ok(match self.permuted_heads(name) {
            Some(heads) => unpermute_rows(raw, heads),
            None => raw,
        })
    }

    fn contains(&self, name: &str) -> bool {
        gguf_name(name).is_some_and(|n| self.model.tensor(&n).is_some())
    }
}

/// llama.cpp's converter stores each head's rows of Q and K as pairs `(i, i + d/2)` next to
/// each other (row `2i + s` holds Hugging Face row `s * d/2 + i`), for its interleaved RoPE.
/// Rows hold whole blocks of any type, so this moves encoded rows without decoding them.
fn unpermute_rows(raw: RawTensor<'_>, heads: usize) -> RawTensor<'_> {
    let rows = raw.shape[0];
    let row_bytes = raw.bytes.len() / rows;
    let head_rows = rows / heads;
    let half = head_rows / 2;
    let mut out = vec![0u8; raw.bytes.len()];
    for h in 0..heads {
        for s in 0..2 {
            for i in 0..half {
                let hf = h * head_rows + s * half + i;
                let stored = h * head_rows + 2 * i + s;
                out[hf * row_bytes..][..row_bytes]
                    .copy_from_slice(&raw.bytes[stored * row_bytes..][..row_bytes]);
            }
        }
    }
    if let Cow::Borrowed(mapped) = raw.bytes {
        crate::checkpoint::release_mapped(mapped);
    }
    RawTensor {
        bytes: Cow::Owned(out),
        ..raw
    }
}

/// The GGUF name of a Hugging Face tensor name the decoder asks for.
fn gguf_name(hf: &str) -> Option<String> {
    let fixed = [
        ("model.embed_tokens.weight", "token_embd.weight"),
        ("model.norm.weight", "output_norm.weight"),
        ("lm_head.weight", "output.weight"),
    ];
    if let Some((_, g)) = fixed.iter().find(|(h, _)| *h == hf) {
        return Some(g.to_string());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, module) = rest.split_once('.')?;
    let (module, suffix) = module.rsplit_once('.')?;
    let g = LAYER_NAMES.iter().find(|(h, _)| *h == module)?.1;
    Some(format!("blk.{layer}.{g}.{suffix}"))
}

/// The Hugging Face name of a GGUF tensor, when the decoder uses it.
fn hf_name(gguf: &str) -> Option<String> {
    let fixed = [
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("output_norm.weight", "model.norm.weight"),
        ("output.weight", "lm_head.weight"),
    ];
    if let Some((_, h)) = fixed.iter().find(|(g, _)| *g == gguf) {
        return Some(h.to_string());
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, module) = rest.split_once('.')?;
    let (module, suffix) = module.rsplit_once('.')?;
    let h = LAYER_NAMES.iter().find(|(_, g)| *g == module)?.0;
    Some(format!("model.layers.{layer}.{h}.{suffix}"))
}

/// Per-layer modules: Hugging Face name → GGUF name.
/// Phi-3's fused projections come last, so a GGUF name maps back to the unfused module first.
const LAYER_NAMES: [(&str, &str); 13] = [
    ("input_layernorm", "attn_norm"),
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.o_proj", "attn_output"),
    ("self_attn.q_norm", "attn_q_norm"),
    ("self_attn.k_norm", "attn_k_norm"),
    ("post_attention_layernorm", "ffn_norm"),
    ("mlp.gate_proj", "ffn_gate"),
    ("mlp.up_proj", "ffn_up"),
    ("mlp.down_proj", "ffn_down"),
    ("self_attn.qkv_proj", "attn_qkv"),
    ("mlp.gate_up_proj", "ffn_up"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        for hf in [
            "model.embed_tokens.weight",
            "lm_head.weight",
            "model.layers.3.self_attn.q_proj.bias",
            "model.layers.11.mlp.down_proj.weight",
            "model.layers.0.self_attn.k_norm.weight",
        ] {
            let g = gguf_name(hf).unwrap();
            assert_eq!(hf_name(&g).as_deref(), Some(hf), "{g}");
        }
        assert_eq!(
            gguf_name("model.layers.2.post_attention_layernorm.weight").unwrap(),
            "blk.2.ffn_norm.weight"
        );
        assert!(gguf_name("model.layers.0.unknown.weight").is_none());
    }

    #[test]
    fn unpermuting_inverts_the_converters_permutation() {
        // Two heads of four rows, one byte per row: HF rows 0..8.
        let (heads, head_rows) = (2usize, 4usize);
        let hf: Vec<u8> = (0..8).collect();
        // The converter's permutation: stored row (h, 2i + s) = HF row (h, s * 2 + i).
        let mut stored = vec![0u8; 8];
        for h in 0..heads {
            for s in 0..2 {
                for i in 0..head_rows / 2 {
                    stored[h * head_rows + 2 * i + s] = hf[h * head_rows + s * 2 + i];
                }
            }
        }
        let raw = RawTensor {
            ggml_type: sluice_gguf::GgmlType::Other(0),
            shape: vec![8, 1],
            bytes: Cow::Owned(stored),
            path: PathBuf::new(),
        };
        assert_eq!(unpermute_rows(raw, heads).bytes.as_ref(), hf.as_slice());
    }
}
