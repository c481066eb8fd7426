//! The SigLIP vision tower (`SiglipVisionModel` without its pooling head), as Gemma 3 uses it:
//!
//! ```text
//! pixel_values [images, C, S, S]
//!   → patch embedding: each p×p patch (C·p·p values) times W[hidden, C·p·p] + b
//!     (the stride-p convolution as one matrix product over all patches)
//!   → + position_embedding[patch]          patches in row-major grid order
//!   → encoder layers                       bidirectional within each image
//!   → post_layernorm                       [images · patches, hidden]
//! ```
//!
//! Matches transformers' `SiglipVisionModel.forward` with `interpolate_pos_encoding=False` (the
//! image is always `image_size` square, as the processor resizes it).

use super::config::VisionConfig;
use super::encoder_layer::{EncoderLayer, EncoderShape};
use super::layer_norm::LayerNorm;
use super::pause::Pause;
use crate::checkpoint::TensorSource;
use crate::error::LoadError;
use crate::kernels::matmul::{PackedMatrix, WeightDtype};
use crate::layers::weights::target_format;

/// The tower's weights.
#[derive(Debug)]
pub struct SiglipVisionTower {
    /// `[hidden, C · p · p]`: the convolution's kernels, one row per output feature.
    patch_embedding: PackedMatrix,
    /// `[hidden]`
    patch_bias: Vec<f32>,
    /// `[patches, hidden]`
    position_embedding: Vec<f32>,
    layers: Vec<EncoderLayer>,
    post_layernorm: LayerNorm,
    config: VisionConfig,
}

impl SiglipVisionTower {
    /// Loads the tower whose tensors are named `{prefix}embeddings.…`, `{prefix}encoder.…` and
    /// `{prefix}post_layernorm.…`.
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        config: &VisionConfig,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let (hidden, c, p) = (config.hidden_size, config.num_channels, config.patch_size);
        let kernel = c * p * p;
        let name = format!("{prefix}embeddings.patch_embedding.weight");
        let raw = source.raw(&name, &[hidden, c, p, p])?;
        let format = target_format(raw.ggml_type, kernel, dtype);
        let weights = raw.to_f32(&name)?;
        let pack_dtype = WeightDtype::of(format.ggml_type()).unwrap_or(WeightDtype::F32);
        let shape = EncoderShape {
            hidden,
            intermediate: config.intermediate_size,
            heads: config.num_attention_heads,
            eps: config.layer_norm_eps,
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                EncoderLayer::load(source, &format!("{prefix}encoder.layers.{i}"), shape, dtype)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            patch_embedding: PackedMatrix::pack(&weights, hidden, kernel, pack_dtype),
            patch_bias: source.tensor(
                &format!("{prefix}embeddings.patch_embedding.bias"),
                &[hidden],
            )?,
            position_embedding: source.tensor(
                &format!("{prefix}embeddings.position_embedding.weight"),
                &[config.num_patches(), hidden],
            )?,
            layers,
            post_layernorm: LayerNorm::load(
                source,
                &format!("{prefix}post_layernorm"),
                hidden,
                config.layer_norm_eps,
            )?,
            config: config.clone(),
        })
    }

    /// `pixel_values: [images, C, S, S]` → the last hidden state `[images · patches, hidden]`,
    /// with pause points between units of work.
    pub fn forward(&self, pixel_values: &[f32], images: usize, pause: &dyn Pause) -> Vec<f32> {
        let config = &self.config;
        let (hidden, patches) = (config.hidden_size, config.num_patches());
        assert_eq!(
            pixel_values.len(),
            images * config.values_per_image(),
            "pixel values"
        );
        let columns = patch_columns(pixel_values, images, config);
        let mut states = vec![0f32; images * patches * hidden];
        self.patch_embedding
            .matmul(&columns, images * patches, &mut states);
        for (i, row) in states.chunks_exact_mut(hidden).enumerate() {
            let position = &self.position_embedding[(i % patches) * hidden..][..hidden];
            for ((v, b), p) in row.iter_mut().zip(&self.patch_bias).zip(position) {
                *v = *v + b + p;
            }
        }
        pause.point();
        for layer in &self.layers {
            layer.forward(&mut states, patches, pause);
        }
        let mut out = vec![0f32; states.len()];
        self.post_layernorm.forward(&states, &mut out);
        out
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.patch_embedding.bytes()
            + (self.patch_bias.len() + self.position_embedding.len()) * 4
            + self.layers.iter().map(EncoderLayer::bytes).sum::<usize>()
            + self.post_layernorm.bytes()
    }
}

/// Every patch of every image as one row of `C · p · p` values in the convolution kernel's
/// order (channel, then row, then column): `[images · patches, C · p · p]`, patches in row-major
/// grid order.
fn patch_columns(pixel_values: &[f32], images: usize, config: &VisionConfig) -> Vec<f32> {
    let (c, p, s) = (config.num_channels, config.patch_size, config.image_size);
    let side = config.patches_per_side();
    let mut out = Vec::with_capacity(images * config.num_patches() * c * p * p);
    for image in pixel_values.chunks_exact(c * s * s).take(images) {
        for py in 0..side {
            for px in 0..side {
                for channel in image.chunks_exact(s * s) {
                    for ky in 0..p {
                        out.extend_from_slice(&channel[(py * p + ky) * s + px * p..][..p]);
                    }
                }
            }
        }
    }
    out
}
