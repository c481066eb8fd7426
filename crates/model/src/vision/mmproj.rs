//! llama.cpp's projector files (`mmproj-*.gguf`, written by `convert_hf_to_gguf.py --mmproj`):
//! the vision tower and projector of a multimodal model, apart from its language model's GGUF.
//!
//! Gemma 3's (`clip.projector_type = gemma3`) is read here; Qwen2.5-VL's maps its own names
//! onto the same file reader in `qwen2_5_vl/mmproj.rs`. Gemma 3's settings come from `clip.*`
//! metadata ([`mmproj_config`]); its tensors are answered to the Hugging Face names the
//! safetensors loader asks for ([`MmprojSource`], names in [`gguf_name`]), so one loader
//! (`Gemma3VisionEncoder::from_source`) builds both. Layouts match Hugging Face's once ggml's
//! dimensions are reversed: `v.patch_embd.weight` is the convolution `[hidden, C, p, p]`,
//! `mm.input_projection.weight` the `[vision_hidden, text_hidden]` matrix the model multiplies
//! from the right, and `mm.soft_emb_norm.weight` holds `1 + w` (the converter adds the one).
//!
//! What the converter writes for Gemma 3, and what it means here:
//! - `clip.vision.{image_size, patch_size, embedding_length, feed_forward_length, block_count}`,
//!   `clip.vision.attention.{head_count, layer_norm_epsilon}`: the SigLIP config;
//! - `clip.vision.projection_dim`: the text model's hidden size;
//! - `clip.vision.projector.scale_factor` (only when not 4): patches per side per image token
//!   side, so `mm_tokens_per_image = (image_size / patch_size / scale)²`;
//! - `clip.vision.image_mean`, `clip.vision.image_std`: the processor's normalisation
//!   ([`MmprojPreprocessing`]);
//! - `clip.use_gelu`: the MLP's GELU (tanh form, SigLIP's `gelu_pytorch_tanh`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use sluice_gguf::{GgufModel, Metadata, MetadataError};

use super::config::VisionConfig;
use crate::checkpoint::{RawTensor, TensorSource};
use crate::error::LoadError;

/// Where the encoder's loader looks for the tower, and for the projector, in an mmproj file.
pub(crate) const TOWER_PREFIX: &str = "vision_tower.vision_model.";
/// See [`TOWER_PREFIX`].
pub(crate) const PROJECTOR_PREFIX: &str = "multi_modal_projector.";

/// The projector types sluice reads.
const SERVED_PROJECTORS: [&str; 1] = ["gemma3"];

/// Largest image side, patch side or width an mmproj file may state: far above any real
/// model's, small enough that products of them cannot overflow.
const MAX_SIZE: u64 = 1 << 20;

/// How an mmproj file's images are prepared (as llama.cpp's `clip` prepares them, and as the
/// model's Hugging Face processor does): resized to `image_size` square with bilinear
/// filtering, levels rescaled by 1/255, then `(x - mean) / std` per channel.
#[derive(Debug, Clone, PartialEq)]
pub struct MmprojPreprocessing {
    /// Side of the square the image is resized to.
    pub image_size: usize,
    /// Per-channel mean (RGB).
    pub image_mean: [f32; 3],
    /// Per-channel standard deviation (RGB).
    pub image_std: [f32; 3],
}

/// An mmproj file whose tensors answer to Hugging Face names.
#[derive(Debug)]
pub struct MmprojSource {
    model: GgufModel,
}

impl MmprojSource {
    /// Opens `path` (a projector file, not a language model's GGUF).
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let model = GgufModel::open(path).map_err(|e| LoadError::Gguf {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(Self { model })
    }

    /// The parsed file, for its metadata.
    pub fn gguf(&self) -> &GgufModel {
        &self.model
    }

    fn path(&self) -> PathBuf {
        self.model.path().to_path_buf()
    }

    /// The tensor the file names `gguf`, as stored (other projectors' sources map their own
    /// names onto it).
    pub(crate) fn raw_gguf(&self, gguf: &str) -> Option<RawTensor<'_>> {
        let (info, bytes) = self.model.tensor(gguf)?;
        Some(RawTensor {
            ggml_type: info.ggml_type,
            shape: info.shape(),
            bytes: Cow::Borrowed(bytes),
            path: self.path(),
        })
    }
}

impl TensorSource for MmprojSource {
    fn raw(&self, name: &str, expected_shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        let missing = |tensor: String| LoadError::MissingTensor {
            path: self.path(),
            tensor,
        };
        let gguf = gguf_name(name).ok_or_else(|| missing(name.to_string()))?;
        let (info, bytes) = self
            .model
            .tensor(&gguf)
            .ok_or_else(|| missing(gguf.clone()))?;
        let raw = RawTensor {
            ggml_type: info.ggml_type,
            shape: info.shape(),
            bytes: Cow::Borrowed(bytes),
            path: self.path(),
        };
        raw.check_shape(&gguf, expected_shape)?;
        if raw.ggml_type.block().is_none() {
            return Err(LoadError::UnsupportedDtype {
                path: self.path(),
                tensor: gguf,
                dtype: raw.ggml_type.name(),
            });
        }
        Ok(raw)
    }

    fn contains(&self, name: &str) -> bool {
        gguf_name(name).is_some_and(|g| self.model.tensor_info(&g).is_some())
    }

    fn norm_weights_include_one(&self) -> bool {
        true
    }
}

/// The mmproj tensor holding the Hugging Face tensor `hf` (under [`TOWER_PREFIX`] or
/// [`PROJECTOR_PREFIX`]), as gguf-py's tensor map names it for Gemma 3.
pub fn gguf_name(hf: &str) -> Option<String> {
    if let Some(rest) = hf.strip_prefix(PROJECTOR_PREFIX) {
        return match rest {
            "mm_input_projection_weight" => Some("mm.input_projection.weight".into()),
            "mm_soft_emb_norm.weight" => Some("mm.soft_emb_norm.weight".into()),
            _ => None,
        };
    }
    let rest = hf.strip_prefix(TOWER_PREFIX)?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let fixed = [
        ("embeddings.patch_embedding", "v.patch_embd"),
        ("embeddings.position_embedding", "v.position_embd"),
        ("post_layernorm", "v.post_ln"),
    ];
    if let Some((_, g)) = fixed.iter().find(|(h, _)| *h == module) {
        return Some(format!("{g}.{suffix}"));
    }
    let (layer, module) = module.strip_prefix("encoder.layers.")?.split_once('.')?;
    layer.parse::<usize>().ok()?;
    let g = LAYER_NAMES.iter().find(|(h, _)| *h == module)?.1;
    Some(format!("v.blk.{layer}.{g}.{suffix}"))
}

/// A SigLIP encoder layer's modules: Hugging Face name → mmproj name.
const LAYER_NAMES: [(&str, &str); 8] = [
    ("layer_norm1", "ln1"),
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.out_proj", "attn_out"),
    ("layer_norm2", "ln2"),
    ("mlp.fc1", "ffn_up"),
    ("mlp.fc2", "ffn_down"),
];

/// The encoder's config and the image preparation an mmproj file's metadata states; `Err`
/// says what is missing, inconsistent, or not Gemma 3's.
pub fn mmproj_config(metadata: &Metadata) -> Result<(VisionConfig, MmprojPreprocessing), String> {
    let text = |e: MetadataError| e.to_string();
    let architecture = metadata.str("general.architecture").map_err(text)?;
    if architecture != Some("clip") {
        return Err(format!(
            "not an mmproj file: general.architecture is `{}`, a projector file says `clip`",
            architecture.unwrap_or("(none)")
        ));
    }
    let projector = (metadata.str("clip.vision.projector_type").map_err(text)?)
        .or(metadata.str("clip.projector_type").map_err(text)?)
        .ok_or("no clip.projector_type")?;
    if !SERVED_PROJECTORS.contains(&projector) {
        return Err(format!(
            "projector type `{projector}` is not served (mmproj projector types sluice reads: {})",
            SERVED_PROJECTORS.join(", ")
        ));
    }
    if metadata.bool("clip.has_vision_encoder").map_err(text)? == Some(false) {
        return Err("clip.has_vision_encoder is false: no vision tower".into());
    }
    if metadata.bool("clip.use_silu").map_err(text)? == Some(true)
        || metadata.bool("clip.use_gelu").map_err(text)? == Some(false)
    {
        return Err("the vision MLP is not GELU (clip.use_gelu): Gemma 3's is".into());
    }
    let size = |key: &str| -> Result<usize, String> {
        match metadata.require_u64(key).map_err(text)? {
            v @ 1..=MAX_SIZE => Ok(v as usize),
            v => Err(format!("{key} is {v}, expected 1..={MAX_SIZE}")),
        }
    };
    let (image_size, patch_size) = (
        size("clip.vision.image_size")?,
        size("clip.vision.patch_size")?,
    );
    if !image_size.is_multiple_of(patch_size) {
        return Err(format!(
            "image_size {image_size} is not a multiple of patch_size {patch_size}"
        ));
    }
    let per_side = image_size / patch_size;
    let scale = match metadata
        .u64("clip.vision.projector.scale_factor")
        .map_err(text)?
    {
        None => 4,
        Some(v @ 1..=MAX_SIZE) => v as usize,
        Some(v) => return Err(format!("clip.vision.projector.scale_factor is {v}")),
    };
    if !per_side.is_multiple_of(scale) {
        return Err(format!(
            "the projector's scale factor {scale} does not divide the {per_side} patches per side"
        ));
    }
    let tokens_per_side = per_side / scale;
    // Stored as f32: the shortest decimal that rounds to it is the config's value (1e-6 rather
    // than 9.99999997e-7), which the norms round back to the same f32.
    let eps = (metadata.f64("clip.vision.attention.layer_norm_epsilon")).map_err(text)?;
    let eps = eps.map(|e| (e as f32).to_string().parse::<f64>().unwrap_or(e));
    let config = VisionConfig {
        hidden_size: size("clip.vision.embedding_length")?,
        intermediate_size: size("clip.vision.feed_forward_length")?,
        num_hidden_layers: size("clip.vision.block_count")?,
        num_attention_heads: size("clip.vision.attention.head_count")?,
        num_channels: 3,
        image_size,
        patch_size,
        layer_norm_eps: eps.unwrap_or(1e-6),
        mm_tokens_per_image: tokens_per_side * tokens_per_side,
        text_hidden_size: size("clip.vision.projection_dim")?,
    };
    config.check()?;
    let channels = |key: &str| -> Result<[f32; 3], String> {
        let values = (metadata.f32_array(key).map_err(text)?).ok_or(format!("no {key}"))?;
        let values: [f32; 3] = (values.try_into())
            .map_err(|v: Vec<f32>| format!("{key} has {} values, expected 3", v.len()))?;
        Ok(values)
    };
    let preprocessing = MmprojPreprocessing {
        image_size,
        image_mean: channels("clip.vision.image_mean")?,
        image_std: channels("clip.vision.image_std")?,
    };
    if !(preprocessing.image_std.iter()).all(|s| s.is_finite() && *s > 0.0)
        || !preprocessing.image_mean.iter().all(|m| m.is_finite())
    {
        return Err("clip.vision.image_std must be positive and image_mean finite".into());
    }
    Ok((config, preprocessing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_gguf_pys_map() {
        for (hf, g) in [
            ("embeddings.patch_embedding.weight", "v.patch_embd.weight"),
            ("embeddings.patch_embedding.bias", "v.patch_embd.bias"),
            (
                "embeddings.position_embedding.weight",
                "v.position_embd.weight",
            ),
            (
                "encoder.layers.0.self_attn.q_proj.weight",
                "v.blk.0.attn_q.weight",
            ),
            (
                "encoder.layers.12.self_attn.out_proj.bias",
                "v.blk.12.attn_out.bias",
            ),
            ("encoder.layers.3.layer_norm1.weight", "v.blk.3.ln1.weight"),
            ("encoder.layers.3.layer_norm2.bias", "v.blk.3.ln2.bias"),
            ("encoder.layers.26.mlp.fc1.weight", "v.blk.26.ffn_up.weight"),
            ("encoder.layers.26.mlp.fc2.bias", "v.blk.26.ffn_down.bias"),
            ("post_layernorm.weight", "v.post_ln.weight"),
        ] {
            assert_eq!(
                gguf_name(&format!("{TOWER_PREFIX}{hf}")).as_deref(),
                Some(g)
            );
        }
        assert_eq!(
            gguf_name("multi_modal_projector.mm_input_projection_weight").as_deref(),
            Some("mm.input_projection.weight")
        );
        assert_eq!(
            gguf_name("multi_modal_projector.mm_soft_emb_norm.weight").as_deref(),
            Some("mm.soft_emb_norm.weight")
        );
        for unknown in [
            "vision_tower.vision_model.encoder.layers.x.mlp.fc1.weight",
            "vision_tower.vision_model.encoder.layers.0.other.weight",
            "vision_tower.embeddings.patch_embedding.weight",
            "model.embed_tokens.weight",
        ] {
            assert_eq!(gguf_name(unknown), None, "{unknown}");
        }
    }
}
