//! llama.cpp's Qwen2.5-VL projector files (`mmproj-*.gguf`, `clip.projector_type =
//! qwen2.5vl_merger`), read through the same loader as a checkpoint: [`QwenMmprojSource`]
//! answers the Hugging Face names under `visual.` with the file's tensors.
//!
//! What `convert_hf_to_gguf.py --mmproj` writes, and how it maps back:
//! - `blocks.N.attn.qkv` is split into `v.blk.N.attn_{q,k,v}`: the three are stacked again
//!   (rows are independent in every ggml type, so their bytes are concatenated);
//! - the Conv3d `patch_embed.proj.weight` `[hidden, C, 2, p, p]` is split by frame into
//!   `v.patch_embd.weight` and `v.patch_embd.weight.1` (`[hidden, C, p, p]` each): interleaved
//!   again, in f32;
//! - `norm1` / `norm2` → `ln1` / `ln2`, `attn.proj` → `attn_out`, `mlp.{gate,up,down}_proj` →
//!   `ffn_{gate,up,down}`, the merger's `ln_q` → `v.post_ln`, `mlp.0` / `mlp.2` → `mm.0` / `mm.2`;
//! - settings: `clip.vision.{embedding_length, feed_forward_length, block_count, patch_size,
//!   projection_dim}`, `clip.vision.attention.head_count`, `clip.vision.n_wa_pattern` (block `i`
//!   attends fully when `(i + 1) % n_wa_pattern == 0`, so `fullatt_block_indexes` must have been
//!   evenly spaced), `clip.vision.spatial_merge_size` when not 2. No window size is written:
//!   llama.cpp uses 112 pixels, the real models' value, and so does this loader.

use std::borrow::Cow;

use sluice_gguf::{Metadata, MetadataError};

use super::config::Qwen2_5VisionConfig;
use crate::checkpoint::{RawTensor, TensorSource};
use crate::error::LoadError;
use crate::vision::mmproj::MmprojSource;

/// The projector types read here (the converter's name, and the shorter ones llama.cpp knows).
const QWEN_PROJECTORS: [&str; 3] = ["qwen2.5vl_merger", "qwen2.5vl", "qwen25vl"];

/// The attention window llama.cpp assumes for these files, in pixels.
pub const MMPROJ_WINDOW_SIZE: usize = 112;

/// Largest size a file may state (as for Gemma 3's files).
const MAX_SIZE: u64 = 1 << 20;

/// A Qwen2.5-VL mmproj file whose tensors answer to Hugging Face names under `visual.`.
#[derive(Debug)]
pub struct QwenMmprojSource {
    file: MmprojSource,
}

impl QwenMmprojSource {
    /// Wraps an opened projector file.
    pub fn new(file: MmprojSource) -> Self {
        Self { file }
    }

    /// The file, for its metadata.
    pub fn file(&self) -> &MmprojSource {
        &self.file
    }

    fn missing(&self, tensor: &str) -> LoadError {
        LoadError::MissingTensor {
            path: self.file.gguf().path().to_path_buf(),
            tensor: tensor.to_string(),
        }
    }

    /// The tensors named `parts` stacked along their first dimension (same type required).
    fn stacked(&self, parts: &[String], name: &str) -> Result<RawTensor<'_>, LoadError> {
        let mut tensors = Vec::with_capacity(parts.len());
        for part in parts {
            tensors.push(self.file.raw_gguf(part).ok_or_else(|| self.missing(part))?);
        }
        let first = &tensors[0];
        if tensors.iter().any(|t| t.ggml_type != first.ggml_type) {
            return Err(LoadError::UnsupportedDtype {
                path: first.path.clone(),
                tensor: name.to_string(),
                dtype: "q, k and v of different types".to_string(),
            });
        }
        let mut shape = first.shape.clone();
        shape[0] = tensors.iter().map(|t| t.shape[0]).sum();
        let bytes: Vec<u8> = tensors
            .iter()
            .flat_map(|t| t.bytes.iter().copied())
            .collect();
        Ok(RawTensor {
            ggml_type: first.ggml_type,
            shape,
            bytes: Cow::Owned(bytes),
            path: first.path.clone(),
        })
    }

    /// The Conv3d kernel `[hidden, C, frames, p, p]` from its per-frame halves, in f32.
    fn patch_kernel(&self, name: &str) -> Result<RawTensor<'static>, LoadError> {
        let frames = ["v.patch_embd.weight", "v.patch_embd.weight.1"];
        let mut values = Vec::with_capacity(frames.len());
        let mut shape = Vec::new();
        for frame in frames {
            let raw = self
                .file
                .raw_gguf(frame)
                .ok_or_else(|| self.missing(frame))?;
            shape = raw.shape.clone();
            values.push(raw.to_f32(frame)?);
        }
        let [hidden, channels, p, q] = shape[..] else {
            return Err(self.missing(name));
        };
        let mut out = Vec::with_capacity(values.len() * values[0].len());
        for kernel in 0..hidden * channels {
            for frame in &values {
                out.extend_from_slice(&frame[kernel * p * q..][..p * q]);
            }
        }
        Ok(RawTensor::from_f32(
            &out,
            &[hidden, channels, frames.len(), p, q],
        ))
    }
}

impl TensorSource for QwenMmprojSource {
    fn raw(&self, name: &str, expected_shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        let raw = match gguf_names(name) {
            Some(Mapped::PatchKernel) => self.patch_kernel(name)?,
            Some(Mapped::Stacked(parts)) => self.stacked(&parts, name)?,
            Some(Mapped::One(gguf)) => self
                .file
                .raw_gguf(&gguf)
                .ok_or_else(|| self.missing(&gguf))?,
            None => return Err(self.missing(name)),
        };
        raw.check_shape(name, expected_shape)?;
        if raw.ggml_type.block().is_none() {
            return Err(LoadError::UnsupportedDtype {
                path: raw.path.clone(),
                tensor: name.to_string(),
                dtype: raw.ggml_type.name(),
            });
        }
        Ok(raw)
    }

    fn contains(&self, name: &str) -> bool {
        let has = |g: &str| self.file.gguf().tensor_info(g).is_some();
        match gguf_names(name) {
            Some(Mapped::PatchKernel) => has("v.patch_embd.weight") && has("v.patch_embd.weight.1"),
            Some(Mapped::Stacked(parts)) => parts.iter().all(|p| has(p)),
            Some(Mapped::One(gguf)) => has(&gguf),
            None => false,
        }
    }
}

/// Where a Hugging Face tensor is in the file.
#[derive(Debug, PartialEq)]
enum Mapped {
    One(String),
    /// Several tensors stacked by rows.
    Stacked(Vec<String>),
    /// The Conv3d, from its two frames.
    PatchKernel,
}

/// The file's tensors for the Hugging Face tensor `hf` (under `visual.`).
fn gguf_names(hf: &str) -> Option<Mapped> {
    let rest = hf.strip_prefix("visual.")?;
    if rest == "patch_embed.proj.weight" {
        return Some(Mapped::PatchKernel);
    }
    let (module, suffix) = rest.rsplit_once('.')?;
    let fixed = [
        ("merger.ln_q", "v.post_ln"),
        ("merger.mlp.0", "mm.0"),
        ("merger.mlp.2", "mm.2"),
    ];
    if let Some((_, g)) = fixed.iter().find(|(h, _)| *h == module) {
        return Some(Mapped::One(format!("{g}.{suffix}")));
    }
    let (block, module) = module.strip_prefix("blocks.")?.split_once('.')?;
    block.parse::<usize>().ok()?;
    if module == "attn.qkv" {
        let parts = ["attn_q", "attn_k", "attn_v"].map(|p| format!("v.blk.{block}.{p}.{suffix}"));
        return Some(Mapped::Stacked(parts.to_vec()));
    }
    let g = BLOCK_NAMES.iter().find(|(h, _)| *h == module)?.1;
    Some(Mapped::One(format!("v.blk.{block}.{g}.{suffix}")))
}

/// A vision block's modules: Hugging Face name → mmproj name.
const BLOCK_NAMES: [(&str, &str); 6] = [
    ("norm1", "ln1"),
    ("norm2", "ln2"),
    ("attn.proj", "attn_out"),
    ("mlp.gate_proj", "ffn_gate"),
    ("mlp.up_proj", "ffn_up"),
    ("mlp.down_proj", "ffn_down"),
];

/// The encoder's config from a Qwen2.5-VL mmproj file's metadata; `Err` says what is missing,
/// inconsistent, or not this projector.
pub fn qwen_mmproj_config(metadata: &Metadata) -> Result<Qwen2_5VisionConfig, String> {
    let text = |e: MetadataError| e.to_string();
    if metadata.str("general.architecture").map_err(text)? != Some("clip") {
        return Err("not an mmproj file: general.architecture is not `clip`".into());
    }
    let projector = (metadata.str("clip.vision.projector_type").map_err(text)?)
        .or(metadata.str("clip.projector_type").map_err(text)?)
        .ok_or("no clip.projector_type")?;
    if !QWEN_PROJECTORS.contains(&projector) {
        return Err(format!(
            "projector type `{projector}` is not Qwen2.5-VL's ({})",
            QWEN_PROJECTORS.join(", ")
        ));
    }
    if metadata.bool("clip.use_silu").map_err(text)? == Some(false) {
        return Err("clip.use_silu is false: Qwen2.5-VL's vision MLP is SiLU-gated".into());
    }
    let size = |key: &str| -> Result<Option<usize>, String> {
        match metadata.u64(key).map_err(text)? {
            None => Ok(None),
            Some(v @ 1..=MAX_SIZE) => Ok(Some(v as usize)),
            Some(v) => Err(format!("{key} is {v}, expected 1..={MAX_SIZE}")),
        }
    };
    let required = |key: &str| size(key)?.ok_or(format!("no {key}"));
    let depth = required("clip.vision.block_count")?;
    let pattern = required("clip.vision.n_wa_pattern")?;
    let config = Qwen2_5VisionConfig {
        depth,
        hidden_size: required("clip.vision.embedding_length")?,
        intermediate_size: required("clip.vision.feed_forward_length")?,
        num_heads: required("clip.vision.attention.head_count")?,
        in_channels: 3,
        patch_size: required("clip.vision.patch_size")?,
        temporal_patch_size: 2,
        spatial_merge_size: size("clip.vision.spatial_merge_size")?.unwrap_or(2),
        window_size: MMPROJ_WINDOW_SIZE,
        fullatt_block_indexes: (0..depth).filter(|i| (i + 1) % pattern == 0).collect(),
        out_hidden_size: required("clip.vision.projection_dim")?,
        rope_theta: 10_000.0,
    };
    config.check()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_converters_split() {
        let one = |g: &str| Some(Mapped::One(g.to_string()));
        assert_eq!(
            gguf_names("visual.patch_embed.proj.weight"),
            Some(Mapped::PatchKernel)
        );
        assert_eq!(
            gguf_names("visual.blocks.3.norm1.weight"),
            one("v.blk.3.ln1.weight")
        );
        assert_eq!(
            gguf_names("visual.blocks.0.attn.proj.bias"),
            one("v.blk.0.attn_out.bias")
        );
        assert_eq!(
            gguf_names("visual.blocks.12.mlp.gate_proj.weight"),
            one("v.blk.12.ffn_gate.weight")
        );
        assert_eq!(
            gguf_names("visual.merger.ln_q.weight"),
            one("v.post_ln.weight")
        );
        assert_eq!(gguf_names("visual.merger.mlp.2.bias"), one("mm.2.bias"));
        let qkv = ["attn_q", "attn_k", "attn_v"].map(|p| format!("v.blk.1.{p}.bias"));
        assert_eq!(
            gguf_names("visual.blocks.1.attn.qkv.bias"),
            Some(Mapped::Stacked(qkv.to_vec()))
        );
        for unknown in [
            "visual.blocks.x.norm1.weight",
            "model.visual.blocks.0.norm1.weight",
        ] {
            assert_eq!(gguf_names(unknown), None, "{unknown}");
        }
    }
}
