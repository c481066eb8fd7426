//! Image input for vision-language models: bytes to RGB with the size checked before decoding
//! ([`decode`]), then the model's preprocessing, equal to the reference processor's
//! ([`SiglipPreprocessor`]: resize, rescale, normalise, channel-first f32), and where the
//! image's tokens go in the prompt ([`Gemma3ImagePrompt`]).
//!
//! ```text
//! bytes ──decode(limits)──► RgbImage ──SiglipPreprocessor::pixel_values──► [3, H, W] f32
//! ```
//!
//! The vision encoder that reads the pixel values is in `sluice-model` (`vision/`).

pub mod decode;
pub mod error;
pub mod preprocess;
pub mod prompt;
pub mod resize;

pub use decode::{decode, DecodeLimits, RgbImage, SUPPORTED_FORMATS};
pub use error::{ConfigError, ImageError};
pub use preprocess::SiglipPreprocessor;
pub use prompt::Gemma3ImagePrompt;
