//! A served model's image input: the bytes of an image to the embeddings its prompt carries
//! into the engine ([`ImageInput::encode`]), and a tokenized prompt's image soft tokens paired
//! with those embeddings ([`ImageInput::prompt_images`]).
//!
//! ```text
//! bytes ─decode(limits)─► RGB ─SiglipPreprocessor─► pixels ─Gemma3VisionEncoder─► [N, hidden]
//! ```
//!
//! Each image is encoded once: embeddings are kept by the hash of the image's bytes, so the
//! same image sent again (the next turn of a conversation) costs a lookup.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use sluice_model::architectures::registry::VisionEncoderKind;
use sluice_model::vision::Gemma3VisionEncoder;
use sluice_model::{LoadError, WeightDtype};
use sluice_text::Tokenizer;
use sluice_vision::{decode, DecodeLimits, Gemma3ImagePrompt, ImageError, SiglipPreprocessor};
use thiserror::Error;

use crate::images::{ImageSpan, PromptImages};

/// Encoded images kept for reuse, most recent last.
const CACHED_IMAGES: usize = 64;

/// One image, encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedImage {
    /// SHA-256 of the image's bytes.
    pub content_hash: [u8; 32],
    /// `[soft tokens, hidden]` row-major.
    pub embeddings: Arc<[f32]>,
}

/// Why a prompt's images do not match its image tokens.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ImagePromptError {
    /// The rendered prompt holds a different number of images than the request sent (a chat
    /// template that drops image parts, or writes its own placeholders).
    #[error("the prompt holds {found} images but the request sent {sent}")]
    CountMismatch {
        /// Image token runs in the prompt.
        found: usize,
        /// Images sent.
        sent: usize,
    },
    /// A run of image tokens is not one image long.
    #[error("an image in the prompt has {found} image tokens, expected {expected}")]
    RunLength {
        /// Tokens in the run.
        found: usize,
        /// Tokens per image.
        expected: usize,
    },
}

/// The image side of a model that takes images.
pub struct ImageInput {
    kind: VisionEncoderKind,
    encoder: Gemma3VisionEncoder,
    preprocessor: SiglipPreprocessor,
    prompt: Gemma3ImagePrompt,
    image_token_id: u32,
    limits: DecodeLimits,
    cache: Mutex<EncodedCache>,
}

impl std::fmt::Debug for ImageInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageInput")
            .field("kind", &self.kind)
            .field("tokens_per_image", &self.prompt.tokens_per_image)
            .finish_non_exhaustive()
    }
}

impl ImageInput {
    /// Loads the encoder of `kind` and its processor settings from the model directory `dir`.
    pub fn load(
        kind: VisionEncoderKind,
        dir: &Path,
        dtype: Option<WeightDtype>,
        tokenizer: &Tokenizer,
    ) -> Result<Self, LoadError> {
        let config_error = |e: sluice_vision::ConfigError| LoadError::Config {
            path: dir.to_path_buf(),
            message: e.to_string(),
        };
        let encoder = match kind {
            VisionEncoderKind::Gemma3 => Gemma3VisionEncoder::load(dir, dtype)?,
            VisionEncoderKind::Qwen2_5Vl => {
                return Err(LoadError::Config {
                    path: dir.to_path_buf(),
                    message: "Qwen2.5-VL's vision encoder is not wired into the engine yet".into(),
                })
            }
        };
        let preprocessor = SiglipPreprocessor::from_model_dir(dir).map_err(config_error)?;
        let prompt = Gemma3ImagePrompt::from_model_dir(dir).map_err(config_error)?;
        let image_token_id =
            tokenizer
                .token_to_id(&prompt.image_token)
                .ok_or_else(|| LoadError::Config {
                    path: dir.to_path_buf(),
                    message: format!("the tokenizer has no image token {}", prompt.image_token),
                })?;
        Ok(ImageInput {
            kind,
            encoder,
            preprocessor,
            prompt,
            image_token_id,
            limits: DecodeLimits::default(),
            cache: Mutex::new(EncodedCache::default()),
        })
    }

    /// Which encoder it runs.
    pub fn kind(&self) -> VisionEncoderKind {
        self.kind
    }

    /// The text that marks where an image goes in a rendered prompt (`<start_of_image>`).
    pub fn placeholder(&self) -> &str {
        &self.prompt.boi_token
    }

    /// A rendered prompt with every placeholder expanded to the image's tokens, and how many
    /// there were.
    pub fn expand(&self, rendered: &str) -> (String, usize) {
        self.prompt.expand(rendered)
    }

    /// Soft tokens per image.
    pub fn tokens_per_image(&self) -> usize {
        self.prompt.tokens_per_image
    }

    /// Bytes of the encoder's weights.
    pub fn weight_bytes(&self) -> usize {
        self.encoder.bytes()
    }

    /// Decodes, preprocesses and encodes one image (or finds it encoded already). Blocking:
    /// call off the async runtime.
    pub fn encode(&self, bytes: &[u8]) -> Result<EncodedImage, ImageError> {
        let content_hash: [u8; 32] = Sha256::digest(bytes).into();
        if let Some(found) = self.cache.lock().expect("not poisoned").get(&content_hash) {
            return Ok(found);
        }
        let image = decode(bytes, self.limits)?;
        let pixels = self.preprocessor.pixel_values(&image);
        let embeddings: Arc<[f32]> = self.encoder.image_features(&pixels, 1).into();
        let encoded = EncodedImage {
            content_hash,
            embeddings,
        };
        (self.cache.lock().expect("not poisoned")).insert(encoded.clone());
        Ok(encoded)
    }

    /// Pairs the runs of image tokens in a tokenized prompt with `images`, in order.
    pub fn prompt_images(
        &self,
        prompt: &[u32],
        images: Vec<EncodedImage>,
    ) -> Result<PromptImages, ImagePromptError> {
        let runs = token_runs(prompt, self.image_token_id);
        if runs.len() != images.len() {
            let (found, sent) = (runs.len(), images.len());
            return Err(ImagePromptError::CountMismatch { found, sent });
        }
        let expected = self.prompt.tokens_per_image;
        let mut spans = Vec::with_capacity(images.len());
        for (run, image) in runs.into_iter().zip(images) {
            if run.len() != expected {
                let found = run.len();
                return Err(ImagePromptError::RunLength { found, expected });
            }
            spans.push(ImageSpan {
                start: run.start,
                embeddings: image.embeddings,
                content_hash: image.content_hash,
            });
        }
        let hidden = self.encoder.config().text_hidden_size;
        Ok(PromptImages::new(spans, hidden).expect("runs are ordered, embeddings whole rows"))
    }
}

/// The maximal runs of `token` in `tokens`.
fn token_runs(tokens: &[u32], token: u32) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, &t) in tokens.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if t == token && run.end == i => run.end = i + 1,
            _ if t == token => runs.push(i..i + 1),
            _ => {}
        }
    }
    runs
}

/// The most recently encoded images, by content hash.
#[derive(Default)]
struct EncodedCache {
    by_hash: HashMap<[u8; 32], Arc<[f32]>>,
    order: VecDeque<[u8; 32]>,
}

impl EncodedCache {
    fn get(&mut self, hash: &[u8; 32]) -> Option<EncodedImage> {
        let embeddings = Arc::clone(self.by_hash.get(hash)?);
        self.order.retain(|h| h != hash);
        self.order.push_back(*hash);
        Some(EncodedImage {
            content_hash: *hash,
            embeddings,
        })
    }

    fn insert(&mut self, image: EncodedImage) {
        if (self.by_hash)
            .insert(image.content_hash, image.embeddings)
            .is_none()
        {
            self.order.push_back(image.content_hash);
        }
        while self.order.len() > CACHED_IMAGES {
            let oldest = self.order.pop_front().expect("not empty");
            self.by_hash.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_the_image_token_are_found_in_order() {
        assert_eq!(token_runs(&[1, 9, 9, 2, 9, 3], 9), vec![1..3, 4..5]);
        assert!(token_runs(&[1, 2], 9).is_empty());
    }

    #[test]
    fn the_cache_keeps_the_most_recent_images() {
        let mut cache = EncodedCache::default();
        let image = |n: u8| EncodedImage {
            content_hash: [n; 32],
            embeddings: vec![f32::from(n)].into(),
        };
        for n in 0..=CACHED_IMAGES as u8 {
            cache.insert(image(n));
            // Touching the first keeps it.
            assert!(cache.get(&[0; 32]).is_some());
        }
        assert!(cache.get(&[1; 32]).is_none());
        assert_eq!(cache.get(&[2; 32]), Some(image(2)));
        assert_eq!(cache.by_hash.len(), CACHED_IMAGES);
    }
}
