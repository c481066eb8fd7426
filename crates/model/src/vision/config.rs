//! The vision settings of a Gemma 3 `config.json` (`Gemma3ForConditionalGeneration`): the SigLIP
//! tower's `vision_config`, `mm_tokens_per_image`, and the text model's hidden size the
//! projector maps into (from `text_config`, or from the top level for a config that states the
//! text settings there). Missing fields take transformers' defaults (`SiglipVisionConfig`,
//! `Gemma3Config`, `Gemma3TextConfig`), as the hub's configs leave defaults out.

use serde::Deserialize;

/// The vision tower and projector of a Gemma 3 model.
#[derive(Debug, Clone, PartialEq)]
pub struct VisionConfig {
    /// Width of the tower's residual stream.
    pub hidden_size: usize,
    /// Width of the tower's MLP.
    pub intermediate_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer.
    pub num_attention_heads: usize,
    /// Colour channels of the pixel values.
    pub num_channels: usize,
    /// Side of the (square) input image in pixels.
    pub image_size: usize,
    /// Side of a patch in pixels.
    pub patch_size: usize,
    /// Epsilon of the tower's LayerNorms and of the projector's RMS norm.
    pub layer_norm_eps: f64,
    /// Image tokens per image after the projector's pooling (a square number).
    pub mm_tokens_per_image: usize,
    /// Width of the text model's embeddings, the projector's output.
    pub text_hidden_size: usize,
}

impl VisionConfig {
    /// Patches per side of the image.
    pub fn patches_per_side(&self) -> usize {
        self.image_size / self.patch_size
    }

    /// Patches per image.
    pub fn num_patches(&self) -> usize {
        self.patches_per_side() * self.patches_per_side()
    }

    /// Image tokens per side after pooling.
    pub fn tokens_per_side(&self) -> usize {
        (self.mm_tokens_per_image as f64).sqrt().round() as usize
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// Pixel values per image: `[num_channels, image_size, image_size]`.
    pub fn values_per_image(&self) -> usize {
        self.num_channels * self.image_size * self.image_size
    }

    /// Parses `config.json` text; `Err` says what is missing or inconsistent.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let vision = raw
            .vision_config
            .ok_or("no `vision_config`: not a vision model")?;
        if let Some(act) = vision.hidden_act.as_deref() {
            if act != "gelu_pytorch_tanh" {
                return Err(format!(
                    "unsupported vision hidden_act `{act}` (gelu_pytorch_tanh)"
                ));
            }
        }
        if vision.vision_use_head == Some(true) {
            return Err("vision_use_head: the SigLIP pooling head is not implemented".into());
        }
        let text_hidden_size = (raw.text_config.and_then(|t| t.hidden_size))
            .or(raw.hidden_size)
            .unwrap_or(2304);
        let config = Self {
            hidden_size: vision.hidden_size.unwrap_or(768),
            intermediate_size: vision.intermediate_size.unwrap_or(3072),
            num_hidden_layers: vision.num_hidden_layers.unwrap_or(12),
            num_attention_heads: vision.num_attention_heads.unwrap_or(12),
            num_channels: vision.num_channels.unwrap_or(3),
            image_size: vision.image_size.unwrap_or(224),
            patch_size: vision.patch_size.unwrap_or(16),
            layer_norm_eps: vision.layer_norm_eps.unwrap_or(1e-6),
            mm_tokens_per_image: raw.mm_tokens_per_image.unwrap_or(256),
            text_hidden_size,
        };
        config.check()?;
        Ok(config)
    }

    /// Checks the sizes against each other (the pooling, the heads, the patches).
    pub(crate) fn check(&self) -> Result<(), String> {
        let nonzero = [
            self.hidden_size,
            self.intermediate_size,
            self.num_attention_heads,
            self.num_channels,
            self.patch_size,
            self.mm_tokens_per_image,
            self.text_hidden_size,
        ];
        if nonzero.contains(&0) {
            return Err("a vision size is 0".into());
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "vision hidden_size {} is not a multiple of its {} heads",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if self.image_size == 0 || !self.image_size.is_multiple_of(self.patch_size) {
            return Err(format!(
                "image_size {} is not a multiple of patch_size {}",
                self.image_size, self.patch_size
            ));
        }
        let side = self.tokens_per_side();
        if side * side != self.mm_tokens_per_image || !self.patches_per_side().is_multiple_of(side)
        {
            return Err(format!(
                "mm_tokens_per_image {} is not a square whose side divides the {} patches per side",
                self.mm_tokens_per_image,
                self.patches_per_side()
            ));
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct RawConfig {
    vision_config: Option<RawVision>,
    text_config: Option<RawText>,
    hidden_size: Option<usize>,
    mm_tokens_per_image: Option<usize>,
}

#[derive(Deserialize)]
struct RawText {
    hidden_size: Option<usize>,
}

#[derive(Deserialize)]
struct RawVision {
    hidden_size: Option<usize>,
    intermediate_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    num_channels: Option<usize>,
    image_size: Option<usize>,
    patch_size: Option<usize>,
    layer_norm_eps: Option<f64>,
    hidden_act: Option<String>,
    vision_use_head: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// google/gemma-3-4b-it's config.json as the hub has it (defaults left out).
    const HUB_4B: &str = r#"{
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
        "eoi_token_index": 256000, "image_token_index": 262144, "mm_tokens_per_image": 256,
        "model_type": "gemma3",
        "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
            "num_hidden_layers": 34, "sliding_window": 1024},
        "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
            "model_type": "siglip_vision_model", "num_attention_heads": 16,
            "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false}
    }"#;

    #[test]
    fn the_hub_4b_config_pools_4096_patches_into_256_tokens() {
        let c = VisionConfig::from_json(HUB_4B).unwrap();
        assert_eq!((c.patches_per_side(), c.num_patches()), (64, 4096));
        assert_eq!((c.tokens_per_side(), c.mm_tokens_per_image), (16, 256));
        assert_eq!((c.head_dim(), c.text_hidden_size), (72, 2560));
        assert_eq!((c.num_channels, c.layer_norm_eps), (3, 1e-6));
    }

    #[test]
    fn text_settings_at_the_top_level_give_the_same_config() {
        let top = HUB_4B.replace(
            r#""text_config": {"hidden_size": 2560,"#,
            r#""hidden_size": 2560, "text_config": {"#,
        );
        assert_eq!(
            VisionConfig::from_json(&top).unwrap(),
            VisionConfig::from_json(HUB_4B).unwrap()
        );
    }

    #[test]
    fn a_text_model_or_a_pooling_that_does_not_divide_is_refused() {
        assert!(VisionConfig::from_json(r#"{"hidden_size": 8}"#).is_err());
        let odd = HUB_4B.replace(
            r#""mm_tokens_per_image": 256"#,
            r#""mm_tokens_per_image": 100"#,
        );
        assert!(VisionConfig::from_json(&odd)
            .unwrap_err()
            .contains("square"));
    }
}
