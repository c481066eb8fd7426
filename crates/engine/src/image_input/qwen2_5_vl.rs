//! Qwen2.5-VL's images: a window-attention ViT whose patch merger gives one token per 2x2
//! patches, as many tokens as the image's size asks for (`smart_resize` between the processor's
//! minimum and maximum pixels), written into the prompt as
//! `<|vision_start|><|image_pad|><|vision_end|>` with the pad repeated once per token. The
//! language model reads the image rows causally at 3-D rotary positions laid out by each image's
//! patch grid ([`PromptLayout::Mrope`]).
//!
//! ```text
//! RGB ─Qwen2VlPreprocessor─► patches [t·h·w, 3·2·14·14] + grid ─Qwen2_5VisionEncoder─►
//!     [t·h·w / 4, text_hidden]
//! ```

use std::path::Path;

use sluice_model::architectures::registry::VisionEncoderKind;
use sluice_model::vision::mmproj::MmprojSource;
use sluice_model::vision::{Pause, Qwen2_5VisionEncoder};
use sluice_model::{LoadError, WeightDtype};
use sluice_text::Tokenizer;
use sluice_vision::{ImageError, Qwen2VlImagePrompt, Qwen2VlPreprocessor, RgbImage};

use super::{EncodedImage, ImageEncoder, ImageFeatures, ImageGrid, PromptLayout};

/// Qwen2.5-VL's encoder, processor settings and prompt tokens.
pub struct Qwen2_5VlImages {
    encoder: Qwen2_5VisionEncoder,
    preprocessor: Qwen2VlPreprocessor,
    prompt: Qwen2VlImagePrompt,
    /// What the chat template writes for an image part.
    placeholder: String,
}

impl Qwen2_5VlImages {
    /// Loads the encoder, its processor settings and prompt tokens from the Hugging Face model
    /// directory `dir`; the tokenizer must know the image tokens by the ids the config gives.
    pub fn load(
        dir: &Path,
        dtype: Option<WeightDtype>,
        tokenizer: &Tokenizer,
    ) -> Result<Self, LoadError> {
        let config_error = |message: String| LoadError::Config {
            path: dir.to_path_buf(),
            message,
        };
        let encoder = Qwen2_5VisionEncoder::load(dir, dtype)?;
        let preprocessor =
            Qwen2VlPreprocessor::from_model_dir(dir).map_err(|e| config_error(e.to_string()))?;
        let prompt =
            Qwen2VlImagePrompt::from_model_dir(dir).map_err(|e| config_error(e.to_string()))?;
        let text = |id: u32| tokenizer.token_str(id);
        let (Some(start), Some(pad), Some(end)) = (
            text(prompt.vision_start_token_id),
            text(prompt.image_token_id),
            text(prompt.vision_end_token_id),
        ) else {
            return Err(config_error(format!(
                "the tokenizer lacks the image tokens the config names (ids {}, {}, {})",
                prompt.vision_start_token_id, prompt.image_token_id, prompt.vision_end_token_id
            )));
        };
        if pad != prompt.image_token {
            return Err(config_error(format!(
                "the config's image_token_id {} is {pad:?} in the tokenizer, not {:?}",
                prompt.image_token_id, prompt.image_token
            )));
        }
        if preprocessor.merge_size != encoder.config().spatial_merge_size {
            return Err(config_error(format!(
                "the processor merges {0}x{0} patches, the vision model {1}x{1}",
                preprocessor.merge_size,
                encoder.config().spatial_merge_size
            )));
        }
        Ok(Self {
            placeholder: format!("{start}{pad}{end}"),
            encoder,
            preprocessor,
            prompt,
        })
    }
}

impl Qwen2_5VlImages {
    /// Loads the encoder from llama.cpp's projector file `path` (`clip.projector_type =
    /// qwen2.5vl_merger`). The file states the patch size, merge and normalisation but not the
    /// processor's pixel budget: images are resized as the Hugging Face processor's defaults
    /// for Qwen2.5-VL say (bicubic, between 56 x 56 and 12,845,056 pixels). The prompt's tokens
    /// come from `tokenizer` (the GGUF vocabulary).
    pub fn load_mmproj(
        path: &Path,
        dtype: Option<WeightDtype>,
        tokenizer: &Tokenizer,
    ) -> Result<Self, LoadError> {
        let error = |message: String| LoadError::Config {
            path: path.to_path_buf(),
            message,
        };
        let encoder = Qwen2_5VisionEncoder::load_gguf(path, dtype)?;
        let source = MmprojSource::open(path)?;
        let metadata = source.gguf().metadata();
        let channels = |key: &str| -> Result<[f64; 3], LoadError> {
            let values = metadata.f32_array(key).ok().flatten();
            let values = values.filter(|v| v.iter().all(|x| x.is_finite()));
            let values: [f32; 3] = (values.and_then(|v| v.try_into().ok()))
                .ok_or_else(|| error(format!("{key} is not three numbers")))?;
            Ok(values.map(f64::from))
        };
        let c = encoder.config();
        let preprocessor = Qwen2VlPreprocessor::with_defaults(
            c.patch_size,
            c.spatial_merge_size,
            c.temporal_patch_size,
            56 * 56,
            12_845_056,
            channels("clip.vision.image_mean")?,
            channels("clip.vision.image_std")?,
            path,
        )
        .map_err(|e| error(e.to_string()))?;
        let id = |token: &str| {
            (tokenizer.token_to_id(token)).ok_or_else(|| {
                error(format!(
                    "the language model's vocabulary has no {token}: it is not Qwen2.5-VL's"
                ))
            })
        };
        let prompt = Qwen2VlImagePrompt {
            image_token: "<|image_pad|>".to_string(),
            image_token_id: id("<|image_pad|>")?,
            vision_start_token_id: id("<|vision_start|>")?,
            vision_end_token_id: id("<|vision_end|>")?,
        };
        Ok(Self {
            placeholder: "<|vision_start|><|image_pad|><|vision_end|>".to_string(),
            encoder,
            preprocessor,
            prompt,
        })
    }
}

impl ImageEncoder for Qwen2_5VlImages {
    fn kind(&self) -> VisionEncoderKind {
        VisionEncoderKind::Qwen2_5Vl
    }

    fn placeholder(&self) -> &str {
        &self.placeholder
    }

    fn expand(&self, rendered: &str, images: &[EncodedImage]) -> (String, usize) {
        let tokens: Vec<usize> = images.iter().map(|i| i.tokens).collect();
        match self.prompt.expand(rendered, &tokens) {
            Some(expanded) => (expanded, images.len()),
            // Not one pad per image: say how many there were, the caller refuses it.
            None => (
                rendered.to_string(),
                rendered.matches(self.prompt.image_token.as_str()).count(),
            ),
        }
    }

    fn image_token_id(&self) -> u32 {
        self.prompt.image_token_id
    }

    fn tokens_per_image(&self) -> Option<usize> {
        None
    }

    fn embedding_width(&self) -> usize {
        self.encoder.config().out_hidden_size
    }

    fn weight_bytes(&self) -> usize {
        self.encoder.bytes()
    }

    fn layout(&self) -> PromptLayout {
        PromptLayout::Mrope {
            spatial_merge_size: self.encoder.config().spatial_merge_size,
        }
    }

    fn encode(&self, image: &RgbImage, pause: &dyn Pause) -> Result<ImageFeatures, ImageError> {
        let patches = self.preprocessor.patches(image)?;
        let grid = patches.grid;
        let grids = [[grid.t, grid.h, grid.w]];
        let embeddings = (self.encoder).image_features_with_pauses(&patches.values, &grids, pause);
        Ok(ImageFeatures {
            embeddings,
            grid: Some(ImageGrid {
                t: grid.t,
                h: grid.h,
                w: grid.w,
            }),
        })
    }
}
