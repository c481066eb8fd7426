//! Gemma 3's image path up to the image embeddings (`Gemma3Model.get_image_features`): the
//! SigLIP tower, then the multimodal projector. What comes out is one row per image token, in
//! the text model's hidden size, for the `<image_soft_token>` positions of the prompt.
//!
//! Checkpoint layouts: the tower's tensors are found under `vision_tower.vision_model.` (the
//! hub's checkpoints, transformers 4), `vision_tower.` (as transformers 5 saves them), or either
//! with a `model.` prefix; the projector's under `multi_modal_projector.` or
//! `model.multi_modal_projector.`.

use std::path::Path;

use super::config::VisionConfig;
use super::mmproj::{mmproj_config, MmprojPreprocessing, MmprojSource};
use super::pause::{NoPause, Pause};
use super::projector::Gemma3Projector;
use super::siglip::SiglipVisionTower;
use crate::checkpoint::{Checkpoint, TensorSource};
use crate::error::LoadError;
use crate::kernels::matmul::WeightDtype;

/// Where checkpoints put the vision tower, most common first.
const TOWER_PREFIXES: [&str; 4] = [
    "vision_tower.vision_model.",
    "vision_tower.",
    "model.vision_tower.vision_model.",
    "model.vision_tower.",
];

/// Where checkpoints put the projector.
const PROJECTOR_PREFIXES: [&str; 2] = ["multi_modal_projector.", "model.multi_modal_projector."];

/// The vision tower and projector of a Gemma 3 checkpoint.
#[derive(Debug)]
pub struct Gemma3VisionEncoder {
    config: VisionConfig,
    tower: SiglipVisionTower,
    projector: Gemma3Projector,
    /// The image preparation an mmproj file states (a model directory states it in its
    /// processor config instead).
    preprocessing: Option<MmprojPreprocessing>,
}

impl Gemma3VisionEncoder {
    /// Loads the encoder of the Hugging Face model directory `dir` (its `config.json` and
    /// safetensors). `dtype` `None` keeps each matrix in its stored type (bf16 widened to f32).
    pub fn load(dir: &Path, dtype: Option<WeightDtype>) -> Result<Self, LoadError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Io {
            path: path.clone(),
            source,
        })?;
        let config = VisionConfig::from_json(&text)
            .map_err(|message| LoadError::Config { path, message })?;
        Self::from_source(&Checkpoint::open(dir)?, config, dtype)
    }

    /// Loads the encoder of llama.cpp's projector file `path` (`mmproj-*.gguf`, projector type
    /// `gemma3`): settings from its `clip.*` metadata, weights in their stored types (f32, f16,
    /// q8_0, ...) unless `dtype` asks for another. A file that is not Gemma 3's projector is an
    /// error naming what it is. [`Self::preprocessing`] gives the file's image preparation.
    pub fn load_gguf(path: &Path, dtype: Option<WeightDtype>) -> Result<Self, LoadError> {
        let source = MmprojSource::open(path)?;
        let (config, preprocessing) =
            mmproj_config(source.gguf().metadata()).map_err(|message| LoadError::Config {
                path: path.to_path_buf(),
                message,
            })?;
        let mut encoder = Self::from_source(&source, config, dtype)?;
        encoder.preprocessing = Some(preprocessing);
        Ok(encoder)
    }

    /// Loads the encoder described by `config` from `source`.
    pub fn from_source(
        source: &dyn TensorSource,
        config: VisionConfig,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let tower_prefix =
            find_prefix(source, &TOWER_PREFIXES, "embeddings.patch_embedding.weight");
        let projector_prefix =
            find_prefix(source, &PROJECTOR_PREFIXES, "mm_input_projection_weight");
        Ok(Self {
            tower: SiglipVisionTower::load(source, tower_prefix, &config, dtype)?,
            projector: Gemma3Projector::load(source, projector_prefix, &config, dtype)?,
            config,
            preprocessing: None,
        })
    }

    /// The configuration it was loaded with.
    pub fn config(&self) -> &VisionConfig {
        &self.config
    }

    /// How images are prepared for it, when it was loaded from an mmproj file (resize to
    /// `image_size` square, bilinear; rescale by 1/255; normalise by `image_mean`, `image_std`).
    pub fn preprocessing(&self) -> Option<&MmprojPreprocessing> {
        self.preprocessing.as_ref()
    }

    /// `pixel_values: [images, C, S, S]` (the processor's output) → the image embeddings
    /// `[images, mm_tokens_per_image, text_hidden]`. Each image's rows are the same bits
    /// whichever images share the call.
    pub fn image_features(&self, pixel_values: &[f32], images: usize) -> Vec<f32> {
        self.image_features_with_pauses(pixel_values, images, &NoPause)
    }

    /// [`Gemma3VisionEncoder::image_features`] with `pause`'s points between units of work (the
    /// same bits however the units cut it).
    pub fn image_features_with_pauses(
        &self,
        pixel_values: &[f32],
        images: usize,
        pause: &dyn Pause,
    ) -> Vec<f32> {
        if images == 0 {
            return Vec::new();
        }
        let states = self.tower.forward(pixel_values, images, pause);
        self.projector.forward(&states, images)
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.tower.bytes() + self.projector.bytes()
    }
}

/// The first of `prefixes` under which `source` holds `probe`; the first prefix when none does
/// (loading then names the missing tensor under the usual layout).
fn find_prefix(source: &dyn TensorSource, prefixes: &[&'static str], probe: &str) -> &'static str {
    (prefixes.iter())
        .find(|p| source.contains(&format!("{p}{probe}")))
        .unwrap_or(&prefixes[0])
}
