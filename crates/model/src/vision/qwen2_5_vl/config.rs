//! The vision settings of a Qwen2.5-VL `config.json` (`Qwen2_5_VLForConditionalGeneration`): its
//! `vision_config`, and the text model's hidden size the merger maps into (from `text_config`
//! as transformers 5 writes it, or the top level as the hub's configs state it). Missing fields
//! take transformers' defaults (`Qwen2_5_VLVisionConfig`).

use serde::Deserialize;

/// The vision transformer and patch merger of a Qwen2.5-VL model.
#[derive(Debug, Clone, PartialEq)]
pub struct Qwen2_5VisionConfig {
    /// Blocks (`depth`).
    pub depth: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP.
    pub intermediate_size: usize,
    /// Attention heads per block.
    pub num_heads: usize,
    /// Colour channels.
    pub in_channels: usize,
    /// Side of a patch in pixels.
    pub patch_size: usize,
    /// Frames per patch.
    pub temporal_patch_size: usize,
    /// Patches merged into one token along each side.
    pub spatial_merge_size: usize,
    /// Side of an attention window in pixels.
    pub window_size: usize,
    /// Blocks that attend over the whole image; the others attend within windows.
    pub fullatt_block_indexes: Vec<usize>,
    /// Width of the merger's output, the text model's hidden size.
    pub out_hidden_size: usize,
    /// Base of the 2D rotary embedding's frequencies.
    pub rope_theta: f64,
}

impl Qwen2_5VisionConfig {
    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    /// Values per patch: `in_channels · temporal_patch_size · patch_size²`.
    pub fn patch_len(&self) -> usize {
        self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size
    }

    /// Patches per merged token: `spatial_merge_size²`.
    pub fn merge_unit(&self) -> usize {
        self.spatial_merge_size * self.spatial_merge_size
    }

    /// Side of an attention window in merged tokens: `window_size / merge / patch`.
    pub fn window_tokens(&self) -> usize {
        self.window_size / self.spatial_merge_size / self.patch_size
    }

    /// Parses `config.json` text; `Err` says what is missing or inconsistent.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let vision = raw
            .vision_config
            .ok_or("no `vision_config`: not a vision model")?;
        if let Some(act) = vision.hidden_act.as_deref() {
            if act != "silu" {
                return Err(format!("unsupported vision hidden_act `{act}` (silu)"));
            }
        }
        let text_hidden = (raw.text_config.and_then(|t| t.hidden_size)).or(raw.hidden_size);
        let out_hidden_size = vision.out_hidden_size.or(text_hidden).unwrap_or(3584);
        if let Some(text) = text_hidden.filter(|&t| t != out_hidden_size) {
            return Err(format!(
                "vision out_hidden_size {out_hidden_size} differs from the text hidden_size {text}"
            ));
        }
        let config = Self {
            depth: vision.depth.unwrap_or(32),
            hidden_size: vision.hidden_size.unwrap_or(3584),
            intermediate_size: vision.intermediate_size.unwrap_or(3420),
            num_heads: vision.num_heads.unwrap_or(16),
            in_channels: vision.in_channels.or(vision.in_chans).unwrap_or(3),
            patch_size: vision.patch_size.unwrap_or(14),
            temporal_patch_size: vision.temporal_patch_size.unwrap_or(2),
            spatial_merge_size: vision.spatial_merge_size.unwrap_or(2),
            window_size: vision.window_size.unwrap_or(112),
            fullatt_block_indexes: vision.fullatt_block_indexes.unwrap_or(vec![7, 15, 23, 31]),
            out_hidden_size,
            rope_theta: (vision.rope_parameters.and_then(|r| r.rope_theta)).unwrap_or(10_000.0),
        };
        config.check()?;
        Ok(config)
    }

    /// Checks the sizes against each other (heads, the rotary halves, windows).
    pub(crate) fn check(&self) -> Result<(), String> {
        let nonzero = [
            self.depth,
            self.hidden_size,
            self.intermediate_size,
            self.num_heads,
            self.in_channels,
            self.patch_size,
            self.temporal_patch_size,
            self.spatial_merge_size,
            self.out_hidden_size,
        ];
        if nonzero.contains(&0) {
            return Err("a vision size is 0".into());
        }
        if !self.hidden_size.is_multiple_of(self.num_heads) {
            return Err(format!(
                "vision hidden_size {} is not a multiple of its {} heads",
                self.hidden_size, self.num_heads
            ));
        }
        // The rotary embedding gives each of rows and columns a quarter of the head.
        if !self.head_dim().is_multiple_of(4) {
            return Err(format!(
                "vision head_dim {} is not a multiple of 4",
                self.head_dim()
            ));
        }
        if self.window_tokens() == 0 {
            return Err(format!(
                "window_size {} is smaller than a merged token ({} pixels)",
                self.window_size,
                self.spatial_merge_size * self.patch_size
            ));
        }
        if let Some(&bad) = self
            .fullatt_block_indexes
            .iter()
            .find(|&&i| i >= self.depth)
        {
            return Err(format!(
                "fullatt_block_indexes names block {bad} of {}",
                self.depth
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
}

#[derive(Deserialize)]
struct RawText {
    hidden_size: Option<usize>,
}

#[derive(Deserialize)]
struct RawVision {
    depth: Option<usize>,
    hidden_size: Option<usize>,
    intermediate_size: Option<usize>,
    num_heads: Option<usize>,
    in_channels: Option<usize>,
    in_chans: Option<usize>,
    patch_size: Option<usize>,
    temporal_patch_size: Option<usize>,
    spatial_merge_size: Option<usize>,
    window_size: Option<usize>,
    fullatt_block_indexes: Option<Vec<usize>>,
    out_hidden_size: Option<usize>,
    hidden_act: Option<String>,
    rope_parameters: Option<RawRope>,
}

#[derive(Deserialize)]
struct RawRope {
    rope_theta: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen/Qwen2.5-VL-7B-Instruct's config.json as the hub has it: text settings at the top
    /// level, the vision settings nested.
    const HUB_7B: &str = r#"{
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "hidden_size": 3584,
        "image_token_id": 151655, "model_type": "qwen2_5_vl", "num_hidden_layers": 28,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vision_config": {"depth": 32, "hidden_act": "silu", "hidden_size": 1280,
            "intermediate_size": 3420, "num_heads": 16, "in_chans": 3, "out_hidden_size": 3584,
            "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
            "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31],
            "tokens_per_second": 2, "temporal_patch_size": 2}
    }"#;

    #[test]
    fn the_hub_7b_config_has_windows_of_four_merged_tokens() {
        let c = Qwen2_5VisionConfig::from_json(HUB_7B).unwrap();
        assert_eq!((c.head_dim(), c.patch_len(), c.merge_unit()), (80, 1176, 4));
        assert_eq!(
            (c.window_tokens(), c.out_hidden_size, c.rope_theta),
            (4, 3584, 10_000.0)
        );
        assert_eq!(c.fullatt_block_indexes, [7, 15, 23, 31]);
    }

    #[test]
    fn text_settings_nested_give_the_same_config() {
        let nested = HUB_7B.replace(
            r#""hidden_size": 3584,"#,
            r#""text_config": {"hidden_size": 3584},"#,
        );
        assert_eq!(
            Qwen2_5VisionConfig::from_json(&nested).unwrap(),
            Qwen2_5VisionConfig::from_json(HUB_7B).unwrap()
        );
    }

    #[test]
    fn inconsistent_sizes_are_refused() {
        assert!(Qwen2_5VisionConfig::from_json(r#"{"hidden_size": 8}"#).is_err());
        let other_text = HUB_7B.replace(r#""hidden_size": 3584,"#, r#""hidden_size": 2048,"#);
        assert!(Qwen2_5VisionConfig::from_json(&other_text)
            .unwrap_err()
            .contains("out_hidden_size"));
        let block = HUB_7B.replace("[7, 15, 23, 31]", "[7, 32]");
        assert!(Qwen2_5VisionConfig::from_json(&block).is_err());
    }
}
