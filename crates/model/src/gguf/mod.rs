//! GGUF models: the config from metadata ([`config`]) and a [`TensorSource`] that answers the
//! Hugging Face tensor names the shared decoder asks for with the GGUF tensors llama.cpp's
//! converter wrote, undoing the converter's Q/K row permutation where the registry says the
//! files have it ([`GgufSpec::permuted_qk`], `llama` files).
//!
//! Gemma 3 files ([`GgufSpec::gemma_norms`]) name the sandwich norms differently:
//! `post_attention_norm`, `ffn_norm` (before the MLP) and `post_ffw_norm`, so `ffn_norm` means
//! `pre_feedforward_layernorm` there, not `post_attention_layernorm`. Their norm weights hold
//! `1 + w` (the converter adds the one).
//!
//! Experts: the converter stacks a layer's experts into one 3-D tensor per projection,
//! `blk.N.ffn_{gate,up,down}_exps.weight`, row-major `[num_experts, out, in]` (ggml's dims
//! reversed). Expert `e` of any type is the contiguous run of rows `e·out .. (e+1)·out` (rows
//! hold whole blocks), so the decoder's per-expert names are answered with that slice of the
//! mapped file, without a copy.
//!
//! [`GgufSpec::permuted_qk`]: crate::architectures::registry::GgufSpec::permuted_qk
//! [`GgufSpec::gemma_norms`]: crate::architectures::registry::GgufSpec::gemma_norms

pub mod config;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use sluice_gguf::{GgufModel, TensorInfo};

use crate::architectures::registry;
use crate::checkpoint::{RawTensor, TensorSource};
use crate::config::ModelConfig;
use crate::error::LoadError;

/// A GGUF file (or split set) with the config read from its metadata.
#[derive(Debug)]
pub struct GgufSource {
    model: GgufModel,
    config: ModelConfig,
    /// Q and K rows are stored permuted for llama.cpp's interleaved RoPE (`llama` files).
    permuted_qk: bool,
    /// Gemma's sandwich norm names, norm weights with the one added (`gemma3` files).
    gemma_norms: bool,
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
        // The config names the architecture the registry resolved the file to.
        let gguf = registry::by_hf_name(&config.architecture).and_then(|a| a.gguf);
        Ok(Self {
            model,
            config,
            permuted_qk: gguf.is_some_and(|g| g.permuted_qk),
            gemma_norms: gguf.is_some_and(|g| g.gemma_norms),
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
        self.model
            .tensors()
            .map(|t| (hf_name(&t.name, self.gemma_norms), t))
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
        let (gguf_name, expert) = gguf_location(name, self.gemma_norms).ok_or_else(missing)?;
        let (info, bytes) = self.model.tensor(&gguf_name).ok_or_else(missing)?;
        let (shape, bytes) = match expert {
            None => (info.shape(), bytes),
            Some(e) => match info.shape().as_slice() {
                &[experts, rows, cols] if e < experts => {
                    let size = bytes.len() / experts;
                    (vec![rows, cols], &bytes[e * size..][..size])
                }
                _ => return Err(missing()),
            },
        };
        let raw = RawTensor {
            ggml_type: info.ggml_type,
            shape,
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
        gguf_location(name, self.gemma_norms).is_some_and(|(n, expert)| {
            self.model
                .tensor_info(&n)
                .is_some_and(|info| expert.is_none_or(|e| e < info.shape()[0]))
        })
    }

    fn norm_weights_include_one(&self) -> bool {
        self.gemma_norms
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

/// Where a Hugging Face tensor name the decoder asks for lives: a GGUF tensor, and for one
/// expert's projection (`…experts.{e}.gate_proj.weight`, Mixtral's `w1`/`w3`/`w2`) its index in
/// the stacked `ffn_*_exps` tensor. `gemma3` names its sandwich norms apart.
fn gguf_location(hf: &str, gemma_norms: bool) -> Option<(String, Option<usize>)> {
    if let Some(found) = expert_location(hf) {
        return Some(found);
    }
    gguf_name(hf, gemma_norms).map(|name| (name, None))
}

/// `model.layers.{i}.{mlp|block_sparse_moe}.experts.{e}.{projection}.{suffix}` →
/// (`blk.{i}.ffn_{gate|up|down}_exps.{suffix}`, `e`).
fn expert_location(hf: &str) -> Option<(String, Option<usize>)> {
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, module) = rest.split_once('.')?;
    let experts = module
        .strip_prefix("mlp.experts.")
        .or_else(|| module.strip_prefix("block_sparse_moe.experts."))?;
    let (expert, projection) = experts.split_once('.')?;
    let (projection, suffix) = projection.rsplit_once('.')?;
    let stacked = EXPERT_PROJECTIONS
        .iter()
        .find(|(names, _)| names.contains(&projection))?
        .1;
    Some((
        format!("blk.{layer}.{stacked}.{suffix}"),
        Some(expert.parse().ok()?),
    ))
}

/// An expert's projection names (Qwen/OLMoE, Mixtral) → the stacked GGUF tensor.
const EXPERT_PROJECTIONS: [([&str; 2], &str); 3] = [
    (["gate_proj", "w1"], "ffn_gate_exps"),
    (["up_proj", "w3"], "ffn_up_exps"),
    (["down_proj", "w2"], "ffn_down_exps"),
];

/// The GGUF name of a Hugging Face tensor name the decoder asks for (not an expert's), in a
/// `gemma3` file or another.
fn gguf_name(hf: &str, gemma_norms: bool) -> Option<String> {
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
    let gemma_norms = GEMMA3_NORMS.iter().filter(|_| gemma_norms);
    let g = gemma_norms
        .chain(&LAYER_NAMES)
        .find(|(h, _)| *h == module)?
        .1;
    Some(format!("blk.{layer}.{g}.{suffix}"))
}

/// The Hugging Face name of a GGUF tensor, when the decoder uses it (for a stacked expert
/// tensor, `…mlp.experts.{projection}.weight`), in a `gemma3` file or another.
fn hf_name(gguf: &str, gemma_norms: bool) -> Option<String> {
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
    if let Some((names, _)) = EXPERT_PROJECTIONS.iter().find(|(_, g)| *g == module) {
        // All experts at once, `[num_experts, out, in]`: a name no single tensor has.
        return Some(format!(
            "model.layers.{layer}.mlp.experts.{}.{suffix}",
            names[0]
        ));
    }
    let gemma_norms = GEMMA3_NORMS.iter().filter(|_| gemma_norms);
    let h = gemma_norms
        .chain(&LAYER_NAMES)
        .find(|(_, g)| *g == module)?
        .0;
    Some(format!("model.layers.{layer}.{h}.{suffix}"))
}

/// A `gemma3` file's sandwich norms (Hugging Face name → GGUF name), looked up before
/// [`LAYER_NAMES`], whose `ffn_norm` is the norm after attention in every other architecture.
const GEMMA3_NORMS: [(&str, &str); 3] = [
    ("post_attention_layernorm", "post_attention_norm"),
    ("pre_feedforward_layernorm", "ffn_norm"),
    ("post_feedforward_layernorm", "post_ffw_norm"),
];

/// Per-layer modules: Hugging Face name → GGUF name.
/// Phi-3's fused projections and Mixtral's router come last, so a GGUF name maps back to the
/// unfused module, and the router to `mlp.gate`, first.
const LAYER_NAMES: [(&str, &str); 15] = [
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
    ("mlp.gate", "ffn_gate_inp"),
    ("block_sparse_moe.gate", "ffn_gate_inp"),
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
            let g = gguf_name(hf, false).unwrap();
            assert_eq!(hf_name(&g, false).as_deref(), Some(hf), "{g}");
        }
        assert_eq!(
            gguf_name("model.layers.2.post_attention_layernorm.weight", false).unwrap(),
            "blk.2.ffn_norm.weight"
        );
        assert!(gguf_name("model.layers.0.unknown.weight", false).is_none());
        for router in ["mlp.gate", "block_sparse_moe.gate"] {
            let hf = format!("model.layers.4.{router}.weight");
            assert_eq!(gguf_name(&hf, false).unwrap(), "blk.4.ffn_gate_inp.weight");
        }
    }

    #[test]
    fn gemma3_sandwich_norms_have_their_own_names() {
        for (hf, g) in [
            ("input_layernorm", "attn_norm"),
            ("post_attention_layernorm", "post_attention_norm"),
            ("pre_feedforward_layernorm", "ffn_norm"),
            ("post_feedforward_layernorm", "post_ffw_norm"),
            ("self_attn.q_norm", "attn_q_norm"),
        ] {
            let (hf, g) = (
                format!("model.layers.1.{hf}.weight"),
                format!("blk.1.{g}.weight"),
            );
            assert_eq!(gguf_name(&hf, true).as_deref(), Some(g.as_str()));
            assert_eq!(hf_name(&g, true).as_deref(), Some(hf.as_str()));
        }
    }

    #[test]
    fn an_experts_projection_is_a_slice_of_the_stacked_tensor() {
        for (hf, stacked, expert) in [
            (
                "model.layers.2.mlp.experts.5.gate_proj.weight",
                "blk.2.ffn_gate_exps.weight",
                5,
            ),
            (
                "model.layers.0.mlp.experts.0.up_proj.weight",
                "blk.0.ffn_up_exps.weight",
                0,
            ),
            (
                "model.layers.1.mlp.experts.127.down_proj.weight",
                "blk.1.ffn_down_exps.weight",
                127,
            ),
            (
                "model.layers.3.block_sparse_moe.experts.7.w1.weight",
                "blk.3.ffn_gate_exps.weight",
                7,
            ),
            (
                "model.layers.3.block_sparse_moe.experts.1.w3.weight",
                "blk.3.ffn_up_exps.weight",
                1,
            ),
            (
                "model.layers.3.block_sparse_moe.experts.2.w2.weight",
                "blk.3.ffn_down_exps.weight",
                2,
            ),
        ] {
            assert_eq!(
                gguf_location(hf, false),
                Some((stacked.to_string(), Some(expert))),
                "{hf}"
            );
        }
        assert_eq!(
            hf_name("blk.2.ffn_down_exps.weight", false).as_deref(),
            Some("model.layers.2.mlp.experts.down_proj.weight")
        );
        assert!(gguf_location("model.layers.0.mlp.experts.x.gate_proj.weight", false).is_none());
        assert!(gguf_location("model.layers.0.mlp.experts.0.other.weight", false).is_none());
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
