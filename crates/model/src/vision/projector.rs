//! Gemma 3's multimodal projector (`Gemma3MultiModalProjector`): the tower's patch grid averaged
//! down to `mm_tokens_per_image` tokens, RMS-normalised with Gemma's `1 + weight` scale, and
//! projected to the text model's hidden size.
//!
//! ```text
//! [images · patches, vision_hidden]
//!   → AvgPool2d(k, stride k) over each image's grid   k = patches_per_side / tokens_per_side
//!   → mm_soft_emb_norm (RMS, eps = layer_norm_eps, · (1 + w))
//!   → · mm_input_projection_weight                   [vision_hidden, text_hidden], x · W
//! [images · mm_tokens_per_image, text_hidden]
//! ```
//!
//! Tokens come out in row-major order of the pooled grid, as transformers flattens them.

use super::config::VisionConfig;
use crate::checkpoint::TensorSource;
use crate::error::LoadError;
use crate::kernels::matmul::{PackedMatrix, WeightDtype};
use crate::layers::linear::Linear;
use crate::layers::norm::RmsNorm;
use crate::layers::weights::target_format;
use crate::plan::NormWeight;

/// The projector's weights.
#[derive(Debug)]
pub struct Gemma3Projector {
    norm: RmsNorm,
    /// `[text_hidden, vision_hidden]`: the checkpoint's `[vision_hidden, text_hidden]` matrix
    /// transposed, so the product is a linear layer.
    projection: Linear,
    config: VisionConfig,
}

impl Gemma3Projector {
    /// Loads `{prefix}mm_soft_emb_norm.weight` and `{prefix}mm_input_projection_weight`; the
    /// norm weight is read as stored where `source` says the one is already added (mmproj files).
    pub fn load(
        source: &dyn TensorSource,
        prefix: &str,
        config: &VisionConfig,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let (vision, text) = (config.hidden_size, config.text_hidden_size);
        let style = match source.norm_weights_include_one() {
            true => NormWeight::Plain,
            false => NormWeight::OffsetFromOne,
        };
        let norm_prefix = format!("{prefix}mm_soft_emb_norm");
        let norm = RmsNorm::load(source, &norm_prefix, vision, config.layer_norm_eps, style)?;
        let name = format!("{prefix}mm_input_projection_weight");
        let raw = source.raw(&name, &[vision, text])?;
        let format = target_format(raw.ggml_type, vision, dtype);
        let stored = raw.to_f32(&name)?;
        let mut transposed = vec![0f32; stored.len()];
        for (i, row) in stored.chunks_exact(text).enumerate() {
            for (j, &w) in row.iter().enumerate() {
                transposed[j * vision + i] = w;
            }
        }
        let pack_dtype = WeightDtype::of(format.ggml_type()).unwrap_or(WeightDtype::F32);
        Ok(Self {
            norm,
            projection: Linear::from_packed(PackedMatrix::pack(
                &transposed,
                text,
                vision,
                pack_dtype,
            )),
            config: config.clone(),
        })
    }

    /// `states: [images · patches, vision_hidden]` → `[images · mm_tokens, text_hidden]`.
    pub fn forward(&self, states: &[f32], images: usize) -> Vec<f32> {
        let mut pooled = average_pool(states, images, &self.config);
        self.norm.forward_in_place(&mut pooled);
        self.projection
            .forward(&pooled, images * self.config.mm_tokens_per_image)
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.norm.bytes() + self.projection.bytes()
    }
}

/// Each image's `side × side` grid of `hidden`-wide patch states averaged over `k × k` blocks
/// (`AvgPool2d(k, stride=k)`: the block's sum in row-major order, divided by `k²`).
fn average_pool(states: &[f32], images: usize, config: &VisionConfig) -> Vec<f32> {
    let (hidden, side, tokens) = (
        config.hidden_size,
        config.patches_per_side(),
        config.tokens_per_side(),
    );
    let k = side / tokens;
    let area = (k * k) as f32;
    let mut out = vec![0f32; images * tokens * tokens * hidden];
    for (image, pooled) in out.chunks_exact_mut(tokens * tokens * hidden).enumerate() {
        let grid = &states[image * side * side * hidden..][..side * side * hidden];
        for (t, token) in pooled.chunks_exact_mut(hidden).enumerate() {
            let (ty, tx) = (t / tokens, t % tokens);
            for ky in 0..k {
                for kx in 0..k {
                    let patch = (ty * k + ky) * side + tx * k + kx;
                    for (acc, v) in token.iter_mut().zip(&grid[patch * hidden..][..hidden]) {
                        *acc += v;
                    }
                }
            }
            token.iter_mut().for_each(|v| *v /= area);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_averages_square_blocks_in_row_major_order() {
        let config = VisionConfig {
            hidden_size: 1,
            intermediate_size: 1,
            num_hidden_layers: 0,
            num_attention_heads: 1,
            num_channels: 3,
            image_size: 4,
            patch_size: 1,
            layer_norm_eps: 1e-6,
            mm_tokens_per_image: 4,
            text_hidden_size: 1,
        };
        // A 4×4 grid numbered 0..16 row by row: the top-left 2×2 block is 0, 1, 4, 5.
        let grid: Vec<f32> = (0..16).map(|v| v as f32).collect();
        let pooled = average_pool(&grid, 1, &config);
        assert_eq!(pooled, [2.5, 4.5, 10.5, 12.5]);
    }
}
