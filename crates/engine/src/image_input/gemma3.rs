//! Gemma 3's images: a SigLIP tower and projector giving a fixed number of soft tokens per
//! image, written into the prompt as `<start_of_image>` expanded to
//! `"\n\n<start_of_image>" + N × "<image_soft_token>" + "<end_of_image>\n\n"`.
//!
//! ```text
//! RGB ─SiglipPreprocessor─► pixels [3, S, S] ─Gemma3VisionEncoder─► [mm_tokens, text_hidden]
//! ```

use std::path::Path;

use sluice_model::architectures::registry::VisionEncoderKind;
use sluice_model::vision::{Gemma3VisionEncoder, Pause};
use sluice_model::{LoadError, WeightDtype};
use sluice_text::Tokenizer;
use sluice_vision::{Gemma3ImagePrompt, ImageError, RgbImage, SiglipPreprocessor};

use super::{EncodedImage, ImageEncoder, ImageFeatures};

/// Gemma 3's encoder, processor settings and prompt tokens.
pub struct Gemma3Images {
    encoder: Gemma3VisionEncoder,
    preprocessor: SiglipPreprocessor,
    prompt: Gemma3ImagePrompt,
    image_token_id: u32,
}

impl Gemma3Images {
    /// Loads the encoder, its processor settings and prompt tokens from the Hugging Face model
    /// directory `dir`.
    pub fn load(
        dir: &Path,
        dtype: Option<WeightDtype>,
        tokenizer: &Tokenizer,
    ) -> Result<Self, LoadError> {
        let config_error = |e: sluice_vision::ConfigError| LoadError::Config {
            path: dir.to_path_buf(),
            message: e.to_string(),
        };
        let encoder = Gemma3VisionEncoder::load(dir, dtype)?;
        let preprocessor = SiglipPreprocessor::from_model_dir(dir).map_err(config_error)?;
        let prompt = Gemma3ImagePrompt::from_model_dir(dir).map_err(config_error)?;
        Self::new(encoder, preprocessor, prompt, tokenizer, dir)
    }

    /// Loads the encoder and its image settings from llama.cpp's projector file `path`
    /// (projector type `gemma3`). The prompt's tokens are Gemma 3's own, which llama.cpp's
    /// converter keeps in the language model's vocabulary (`tokenizer`); the soft tokens per
    /// image follow from the file's image and patch sizes.
    pub fn load_mmproj(
        path: &Path,
        dtype: Option<WeightDtype>,
        tokenizer: &Tokenizer,
    ) -> Result<Self, LoadError> {
        let encoder = Gemma3VisionEncoder::load_gguf(path, dtype)?;
        let error = |message: String| LoadError::Config {
            path: path.to_path_buf(),
            message,
        };
        let p = encoder
            .preprocessing()
            .expect("an mmproj file states its preprocessing");
        let preprocessor = SiglipPreprocessor::square(p.image_size, p.image_mean, p.image_std)
            .map_err(|e| error(e.to_string()))?;
        let prompt = Gemma3ImagePrompt {
            boi_token: "<start_of_image>".to_string(),
            eoi_token: "<end_of_image>".to_string(),
            image_token: "<image_soft_token>".to_string(),
            tokens_per_image: encoder.config().mm_tokens_per_image,
        };
        for token in [&prompt.boi_token, &prompt.eoi_token] {
            if tokenizer.token_to_id(token).is_none() {
                return Err(error(format!(
                    "the language model's vocabulary has no {token}: it is not Gemma 3's"
                )));
            }
        }
        Self::new(encoder, preprocessor, prompt, tokenizer, path)
    }

    fn new(
        encoder: Gemma3VisionEncoder,
        preprocessor: SiglipPreprocessor,
        prompt: Gemma3ImagePrompt,
        tokenizer: &Tokenizer,
        path: &Path,
    ) -> Result<Self, LoadError> {
        let image_token_id =
            tokenizer
                .token_to_id(&prompt.image_token)
                .ok_or_else(|| LoadError::Config {
                    path: path.to_path_buf(),
                    message: format!("the tokenizer has no image token {}", prompt.image_token),
                })?;
        Ok(Self {
            encoder,
            preprocessor,
            prompt,
            image_token_id,
        })
    }
}

impl ImageEncoder for Gemma3Images {
    fn kind(&self) -> VisionEncoderKind {
        VisionEncoderKind::Gemma3
    }

    fn placeholder(&self) -> &str {
        &self.prompt.boi_token
    }

    fn expand(&self, rendered: &str, _images: &[EncodedImage]) -> (String, usize) {
        // Every image has the same expansion.
        self.prompt.expand(rendered)
    }

    fn image_token_id(&self) -> u32 {
        self.image_token_id
    }

    fn tokens_per_image(&self) -> Option<usize> {
        Some(self.prompt.tokens_per_image)
    }

    fn embedding_width(&self) -> usize {
        self.encoder.config().text_hidden_size
    }

    fn weight_bytes(&self) -> usize {
        self.encoder.bytes()
    }

    fn encode(&self, image: &RgbImage, pause: &dyn Pause) -> Result<ImageFeatures, ImageError> {
        let pixels = self.preprocessor.pixel_values(image);
        Ok(ImageFeatures {
            embeddings: (self.encoder).image_features_with_pauses(&pixels, 1, pause),
            grid: None,
        })
    }
}
