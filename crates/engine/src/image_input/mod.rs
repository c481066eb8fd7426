//! A served model's image input: the bytes of an image to the embeddings its prompt carries
//! into the engine ([`ImageInput::encode`]), and a tokenized prompt's image soft tokens paired
//! with those embeddings ([`ImageInput::prompt_images`]).
//!
//! ```text
//! bytes ─decode(limits)─► RGB ─ImageEncoder::encode─► [tokens, hidden] (+ grid)
//! ```
//!
//! What differs between model families (how an image is prepared and encoded, how many tokens
//! it takes, the placeholder text and its expansion, the image token) is an [`ImageEncoder`]:
//! one file per family in this folder (`gemma3.rs`). What does not (decoding with limits, the
//! cache of encoded images, pairing token runs with images) lives here, once.
//!
//! Each image is encoded once: embeddings are kept by the hash of the image's bytes, so the
//! same image sent again (the next turn of a conversation) costs a lookup.

mod gemma3;
mod qwen2_5_vl;

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use sluice_model::architectures::registry::VisionEncoderKind;
use sluice_model::vision::mmproj::MmprojSource;
use sluice_model::vision::{NoPause, Pause};
use sluice_model::{LoadError, WeightDtype};
use sluice_text::Tokenizer;
use sluice_vision::{decode, DecodeLimits, ImageError, RgbImage};
use thiserror::Error;

use crate::encode_gate::EncodeGate;
use crate::images::{ImageSpan, PromptImages};

pub use gemma3::Gemma3Images;
pub use qwen2_5_vl::Qwen2_5VlImages;

/// Encoded images kept for reuse, most recent last.
const CACHED_IMAGES: usize = 64;

/// One image, encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedImage {
    /// SHA-256 of the image's bytes.
    pub content_hash: [u8; 32],
    /// Soft tokens the image takes in the prompt (rows of `embeddings`).
    pub tokens: usize,
    /// `[tokens, hidden]` row-major.
    pub embeddings: Arc<[f32]>,
    /// The grid its tokens cover, for a family whose language model lays positions out by it
    /// (`None` for Gemma 3).
    pub grid: Option<ImageGrid>,
}

/// The (time, height, width) grid of an image's tokens, as a language model with
/// multi-dimensional positions (Qwen2.5-VL's 3-D RoPE) reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGrid {
    /// Frames (1 for a still image).
    pub t: usize,
    /// Rows.
    pub h: usize,
    /// Columns.
    pub w: usize,
}

/// What a family's encoder makes of one decoded image.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageFeatures {
    /// `[tokens, hidden]` row-major, `hidden` being [`ImageEncoder::embedding_width`].
    pub embeddings: Vec<f32>,
    /// The grid of its tokens, where the family has one.
    pub grid: Option<ImageGrid>,
}

/// One family of image encoders: how a decoded image becomes embeddings and how a rendered
/// prompt makes room for them. A new family is a new file in this folder implementing it,
/// plus its [`VisionEncoderKind`] arm in [`ImageInput::load`].
pub trait ImageEncoder: Send + Sync {
    /// Which family it is.
    fn kind(&self) -> VisionEncoderKind;
    /// The text that marks where an image goes in a rendered prompt (`<start_of_image>`).
    fn placeholder(&self) -> &str;
    /// `rendered` with its placeholders expanded to their images' tokens (the i-th placeholder
    /// to `images[i]`, whose token counts may differ), and how many placeholders it held.
    fn expand(&self, rendered: &str, images: &[EncodedImage]) -> (String, usize);
    /// The token each image embedding row takes the place of.
    fn image_token_id(&self) -> u32;
    /// Soft tokens per image where every image takes the same number; `None` where it depends
    /// on the image.
    fn tokens_per_image(&self) -> Option<usize>;
    /// Width of an embedding row (the language model's hidden size).
    fn embedding_width(&self) -> usize;
    /// Bytes of the encoder's weights.
    fn weight_bytes(&self) -> usize;
    /// Prepares and encodes one decoded image (an image the processor cannot take, such as
    /// one too thin to resize, is an error), stopping at `pause`'s points when told to.
    /// Blocking.
    fn encode(&self, image: &RgbImage, pause: &dyn Pause) -> Result<ImageFeatures, ImageError>;
    /// How the language model reads the image rows.
    fn layout(&self) -> PromptLayout {
        PromptLayout::Bidirectional
    }
}

/// How a family's language model reads a prompt's image rows (see [`crate::ImageLayout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptLayout {
    /// Each image's rows attend to each other both ways (Gemma 3).
    Bidirectional,
    /// Causal rows at 3-D rotary positions laid out by each image's patch grid, merged
    /// `spatial_merge_size` x `spatial_merge_size` into tokens (Qwen2.5-VL).
    Mrope {
        /// Patches per token along each side.
        spatial_merge_size: usize,
    },
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
    /// A run of image tokens is not as long as its image.
    #[error("an image in the prompt has {found} image tokens, expected {expected}")]
    RunLength {
        /// Tokens in the run.
        found: usize,
        /// Tokens the image takes.
        expected: usize,
    },
    /// The images' positions cannot be laid out (an image without its grid, or runs where the
    /// model's position rule cannot place them).
    #[error("the images cannot be placed in the prompt: {0}")]
    Layout(String),
}

/// The image side of a model that takes images: its family's [`ImageEncoder`], the decode
/// limits and the encoded images kept for reuse.
pub struct ImageInput {
    family: Box<dyn ImageEncoder>,
    limits: DecodeLimits,
    cache: Mutex<EncodedCache>,
    /// The serving engine's gate, through which encodings give way to its steps; `None`
    /// encodes without pausing.
    gate: Option<Arc<EncodeGate>>,
}

impl std::fmt::Debug for ImageInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageInput")
            .field("kind", &self.family.kind())
            .field("tokens_per_image", &self.family.tokens_per_image())
            .finish_non_exhaustive()
    }
}

impl ImageInput {
    /// Image input through `family`'s encoder.
    pub fn new(family: Box<dyn ImageEncoder>) -> Self {
        ImageInput {
            family,
            limits: DecodeLimits::default(),
            cache: Mutex::new(EncodedCache::default()),
            gate: None,
        }
    }

    /// The same input, its encodings sharing the CPU with the steps of the engine whose gate this
    /// is (`EngineHandle::encode_gate`): one at a time beside its steps (`encode_gate.rs`).
    pub fn with_gate(mut self, gate: Arc<EncodeGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Loads the encoder of `kind` and its processor settings from the model directory `dir`.
    pub fn load(
        kind: VisionEncoderKind,
        dir: &Path,
        dtype: Option<WeightDtype>,
        tokenizer: &Tokenizer,
    ) -> Result<Self, LoadError> {
        let family: Box<dyn ImageEncoder> = match kind {
            VisionEncoderKind::Gemma3 => Box::new(Gemma3Images::load(dir, dtype, tokenizer)?),
            VisionEncoderKind::Qwen2_5Vl => Box::new(Qwen2_5VlImages::load(dir, dtype, tokenizer)?),
        };
        Ok(Self::new(family))
    }

    /// Loads the image encoder of a GGUF language model from llama.cpp's projector file `path`
    /// (`mmproj-*.gguf`): the family its `clip.projector_type` names, which must be `kind`
    /// (what the language model's architecture takes) and project to `text_hidden` (the
    /// language model's hidden size); image settings from the file, the prompt's tokens from
    /// `tokenizer` (the GGUF vocabulary).
    pub fn load_mmproj(
        path: &Path,
        kind: VisionEncoderKind,
        text_hidden: usize,
        dtype: Option<WeightDtype>,
        tokenizer: &Tokenizer,
    ) -> Result<Self, LoadError> {
        let error = |message: String| LoadError::Config {
            path: path.to_path_buf(),
            message,
        };
        let found = projector_family(path)?;
        if found != kind {
            return Err(error(format!(
                "the projector is {found:?}'s, the language model takes {kind:?}'s images"
            )));
        }
        let family: Box<dyn ImageEncoder> = match kind {
            VisionEncoderKind::Gemma3 => {
                Box::new(Gemma3Images::load_mmproj(path, dtype, tokenizer)?)
            }
            VisionEncoderKind::Qwen2_5Vl => {
                Box::new(Qwen2_5VlImages::load_mmproj(path, dtype, tokenizer)?)
            }
        };
        if family.embedding_width() != text_hidden {
            return Err(error(format!(
                "the projector's output is {} wide, the language model's hidden size is \
                 {text_hidden}: this mmproj file belongs to another model",
                family.embedding_width()
            )));
        }
        Ok(Self::new(family))
    }

    /// Which encoder it runs.
    pub fn kind(&self) -> VisionEncoderKind {
        self.family.kind()
    }

    /// The text that marks where an image goes in a rendered prompt (`<start_of_image>`).
    pub fn placeholder(&self) -> &str {
        self.family.placeholder()
    }

    /// A rendered prompt with every placeholder expanded to its image's tokens (`images` in
    /// order), and how many placeholders there were.
    pub fn expand(&self, rendered: &str, images: &[EncodedImage]) -> (String, usize) {
        self.family.expand(rendered, images)
    }

    /// Soft tokens per image where the family's count is fixed; `None` where it depends on
    /// the image.
    pub fn tokens_per_image(&self) -> Option<usize> {
        self.family.tokens_per_image()
    }

    /// Bytes of the encoder's weights.
    pub fn weight_bytes(&self) -> usize {
        self.family.weight_bytes()
    }

    /// Decodes, preprocesses and encodes one image (or finds it encoded already). Blocking:
    /// call off the async runtime.
    pub fn encode(&self, bytes: &[u8]) -> Result<EncodedImage, ImageError> {
        let content_hash: [u8; 32] = Sha256::digest(bytes).into();
        if let Some(found) = self.cache.lock().expect("not poisoned").get(&content_hash) {
            return Ok(found);
        }
        let turn = self.gate.as_ref().map(EncodeGate::enter);
        let pause: &dyn Pause = match &turn {
            Some(turn) => turn,
            None => &NoPause,
        };
        // Decoding and preprocessing (single-threaded, tens of milliseconds) are a unit too.
        pause.point();
        let image = decode(bytes, self.limits)?;
        let features = self.family.encode(&image, pause)?;
        drop(turn);
        let encoded = EncodedImage {
            content_hash,
            tokens: features.embeddings.len() / self.family.embedding_width(),
            embeddings: features.embeddings.into(),
            grid: features.grid,
        };
        (self.cache.lock().expect("not poisoned")).insert(encoded.clone());
        Ok(encoded)
    }

    /// Pairs the runs of image tokens in a tokenized prompt with `images`, in order; each run
    /// must be as long as its image.
    pub fn prompt_images(
        &self,
        prompt: &[u32],
        images: Vec<EncodedImage>,
    ) -> Result<PromptImages, ImagePromptError> {
        let runs = token_runs(prompt, self.family.image_token_id());
        if runs.len() != images.len() {
            let (found, sent) = (runs.len(), images.len());
            return Err(ImagePromptError::CountMismatch { found, sent });
        }
        let mut spans = Vec::with_capacity(images.len());
        let mut grids = Vec::with_capacity(images.len());
        for (run, image) in runs.into_iter().zip(images) {
            if run.len() != image.tokens {
                let (found, expected) = (run.len(), image.tokens);
                return Err(ImagePromptError::RunLength { found, expected });
            }
            grids.extend(image.grid);
            spans.push(ImageSpan {
                start: run.start,
                embeddings: image.embeddings,
                content_hash: image.content_hash,
            });
        }
        let hidden = self.family.embedding_width();
        let images =
            PromptImages::new(spans, hidden).expect("runs are ordered, embeddings whole rows");
        match self.family.layout() {
            PromptLayout::Bidirectional => Ok(images),
            PromptLayout::Mrope { spatial_merge_size } => {
                if grids.len() != images.spans().len() {
                    let message = "an image was encoded without its grid".to_string();
                    return Err(ImagePromptError::Layout(message));
                }
                let grid = |g: &ImageGrid| [g.t, g.h, g.w];
                let grids: Vec<[usize; 3]> = grids.iter().map(grid).collect();
                (images.with_mrope(prompt.len(), &grids, spatial_merge_size))
                    .map_err(|e| ImagePromptError::Layout(e.to_string()))
            }
        }
    }
}

/// The family of the projector file `path`, from its `clip.projector_type`.
fn projector_family(path: &Path) -> Result<VisionEncoderKind, LoadError> {
    let source = MmprojSource::open(path)?;
    let metadata = source.gguf().metadata();
    let error = |message: String| LoadError::Config {
        path: path.to_path_buf(),
        message,
    };
    let text = |key: &str| metadata.str(key).ok().flatten();
    if text("general.architecture") != Some("clip") {
        return Err(error(format!(
            "not an mmproj file: general.architecture is `{}`, a projector file says `clip`",
            text("general.architecture").unwrap_or("(none)")
        )));
    }
    let projector = text("clip.vision.projector_type").or(text("clip.projector_type"));
    match projector {
        Some("gemma3") => Ok(VisionEncoderKind::Gemma3),
        Some("qwen2.5vl_merger") => Ok(VisionEncoderKind::Qwen2_5Vl),
        other => Err(error(format!(
            "projector type `{}` is not served (mmproj projector types sluice reads: gemma3, \
             qwen2.5vl_merger)",
            other.unwrap_or("(none)")
        ))),
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
    by_hash: HashMap<[u8; 32], EncodedImage>,
    order: VecDeque<[u8; 32]>,
}

impl EncodedCache {
    fn get(&mut self, hash: &[u8; 32]) -> Option<EncodedImage> {
        let found = self.by_hash.get(hash)?.clone();
        self.order.retain(|h| h != hash);
        self.order.push_back(*hash);
        Some(found)
    }

    fn insert(&mut self, image: EncodedImage) {
        let hash = image.content_hash;
        if self.by_hash.insert(hash, image).is_none() {
            self.order.push_back(hash);
        }
        while self.order.len() > CACHED_IMAGES {
            let oldest = self.order.pop_front().expect("not empty");
            self.by_hash.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn gemma_fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/gemma3-vision")
    }

    #[test]
    fn an_encoding_waits_for_an_older_one_beside_the_steps_and_gives_the_same_embeddings() {
        let dir = gemma_fixture();
        let tokenizer = Tokenizer::from_dir(&dir).unwrap();
        let load = || ImageInput::load(VisionEncoderKind::Gemma3, &dir, None, &tokenizer);
        let bytes = std::fs::read(dir.join("images/rgb_32x32.png")).unwrap();
        let expected = load().unwrap().encode(&bytes).unwrap();
        let gate = EncodeGate::new();
        let input = Arc::new(load().unwrap().with_gate(Arc::clone(&gate)));
        // Steps are running and an older encoding runs beside them: this one waits at its
        // first point.
        gate.set_busy(true);
        let older = gate.enter();
        let encoding = {
            let input = Arc::clone(&input);
            std::thread::spawn(move || input.encode(&bytes).unwrap())
        };
        while gate.pauses() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !encoding.is_finished(),
            "ran beside the steps and an older encoding"
        );
        assert_eq!(gate.active(), 2);
        drop(older);
        assert_eq!(encoding.join().unwrap(), expected);
        assert_eq!(gate.active(), 0);
    }

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
            tokens: 1,
            embeddings: vec![f32::from(n)].into(),
            grid: None,
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
