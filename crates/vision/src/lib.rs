//! Image input for vision-language models: bytes to RGB with the size checked before decoding
//! ([`decode`]), then the model's preprocessing, equal to the reference processor's
//! ([`SiglipPreprocessor`]: resize, rescale, normalise, channel-first f32, for Gemma 3;
//! [`Qwen2VlPreprocessor`]: [`smart_resize`] to the pixel budget, bicubic, normalise, flattened
//! patches and their [`GridThw`], for Qwen2-VL and Qwen2.5-VL), and where the image's tokens go
//! in the prompt ([`Gemma3ImagePrompt`]; [`Qwen2VlImagePrompt`]: `<|vision_start|>`, then
//! [`GridThw::tokens`] `<|image_pad|>` tokens, then `<|vision_end|>`).
//!
//! ```text
//! bytes ──decode(limits)──► RgbImage ──SiglipPreprocessor::pixel_values──► [3, H, W] f32
//!                                    ──Qwen2VlPreprocessor::patches──► ImagePatches
//!                                         ([t·h·w, 3·T·p·p] f32 and grid_thw)
//! ```
//!
//! The vision encoder that reads the pixel values is in `sluice-model` (`vision/`).

pub mod decode;
pub mod error;
mod normalize;
pub mod preprocess;
pub mod prompt;
pub mod qwen2_vl;
pub mod resize;

pub use decode::{decode, DecodeLimits, RgbImage, SUPPORTED_FORMATS};
pub use error::{ConfigError, ImageError};
pub use preprocess::SiglipPreprocessor;
pub use prompt::{Gemma3ImagePrompt, Qwen2VlImagePrompt};
pub use qwen2_vl::{smart_resize, GridThw, ImagePatches, Qwen2VlPreprocessor};
