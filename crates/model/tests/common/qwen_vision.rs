//! The Qwen2.5-VL fixture (fixtures/models/qwen2_5-vl, scripts/make_qwen_vl_fixture.py): its
//! directory, the per-image references transformers wrote, and the processor's pixel values.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use sluice_vision::Qwen2VlPreprocessor;

/// The fixture's `reference.json`, per image.
#[derive(Deserialize)]
pub struct QwenImagesReference {
    pub images: BTreeMap<String, QwenImageReference>,
}

/// One image: the processor's resized image and grid, and transformers' image features.
#[derive(Deserialize)]
pub struct QwenImageReference {
    pub resized_height: usize,
    pub resized_width: usize,
    pub image_grid_thw: [usize; 3],
    /// `[3, H, W]`: the processor's resized image.
    pub resized_levels: Vec<u8>,
    pub features_shape: [usize; 2],
    pub features: Vec<f32>,
}

impl QwenImageReference {
    /// The processor's `pixel_values`: the resized levels normalised and patchified (checked
    /// bit for bit against the processor in sluice-vision's tests).
    pub fn pixel_values(&self) -> Vec<f32> {
        let processor = Qwen2VlPreprocessor::from_model_dir(&fixture()).unwrap();
        let plane = self.resized_levels.len() / 3;
        let levels = &self.resized_levels;
        let interleaved: Vec<u8> = (0..plane)
            .flat_map(|i| [levels[i], levels[plane + i], levels[2 * plane + i]])
            .collect();
        let patches =
            processor.patches_from_levels(&interleaved, self.resized_height, self.resized_width);
        let [t, h, w] = self.image_grid_thw;
        assert_eq!((patches.grid.t, patches.grid.h, patches.grid.w), (t, h, w));
        patches.values
    }
}

pub fn fixture() -> PathBuf {
    super::fixture_dir("qwen2_5-vl")
}

pub fn reference() -> QwenImagesReference {
    let text = std::fs::read_to_string(fixture().join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}
