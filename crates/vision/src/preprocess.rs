//! SigLIP-style preprocessing (Gemma 3's image processor without pan-and-scan): every image
//! resized to the configured `height × width`, rescaled and normalised per channel, as
//! channel-first f32 `[3, height, width]`.
//!
//! Equal bit for bit to transformers' default `Gemma3ImageProcessor` (the torchvision backend;
//! see [`crate::resize`] for the resize): the uint8 image is resized, then rescale and normalise
//! are fused as that backend fuses them (see `normalize.rs`; for Gemma 3's mean = std = 0.5:
//! `(level - 127.5) / 127.5` in f32).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::decode::RgbImage;
use crate::error::ConfigError;
use crate::normalize::LevelMap;
use crate::resize::resize_bilinear_antialias;

/// PIL's number for bilinear resampling, the only filter implemented.
const BILINEAR: u32 = 2;

/// The processor's settings, as `preprocessor_config.json` (the hub's layout) or the
/// `image_processor` object of `processor_config.json` (transformers 5's) state them.
#[derive(Debug, Deserialize)]
struct ProcessorConfig {
    size: Size,
    #[serde(default = "yes")]
    do_resize: bool,
    #[serde(default = "bilinear")]
    resample: u32,
    #[serde(default = "yes")]
    do_rescale: bool,
    #[serde(default = "one_255th")]
    rescale_factor: f64,
    #[serde(default = "yes")]
    do_normalize: bool,
    image_mean: Option<[f64; 3]>,
    image_std: Option<[f64; 3]>,
    #[serde(default)]
    do_pan_and_scan: Option<bool>,
    #[serde(default)]
    do_center_crop: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct Size {
    height: usize,
    width: usize,
}

fn yes() -> bool {
    true
}

fn bilinear() -> u32 {
    BILINEAR
}

fn one_255th() -> f64 {
    1.0 / 255.0
}

/// The processor configuration of model directory `dir`: its `preprocessor_config.json`, else
/// its `processor_config.json` (whose `image_processor` object holds it: `nested`). Returns the
/// text, whether it is nested, and the file's path.
pub(crate) fn read_processor_config(dir: &Path) -> Result<(String, bool, PathBuf), ConfigError> {
    let flat = dir.join("preprocessor_config.json");
    let (path, nested) = match flat.exists() {
        true => (flat, false),
        false => (dir.join("processor_config.json"), true),
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Io {
        path: path.clone(),
        source,
    })?;
    Ok((text, nested, path))
}

/// Parses a processor configuration: the object itself, or (`nested`) an object holding it
/// under `image_processor`. `path` names it in errors.
pub(crate) fn parse_processor_config<T: serde::de::DeserializeOwned>(
    text: &str,
    nested: bool,
    path: &Path,
) -> Result<T, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let mut value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    if nested {
        value = value
            .get_mut("image_processor")
            .map(serde_json::Value::take)
            .ok_or_else(|| invalid("no `image_processor` object".into()))?;
    }
    serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
}

/// Resize, rescale and normalise, as the model's processor configuration says.
#[derive(Debug, Clone, PartialEq)]
pub struct SiglipPreprocessor {
    /// Output rows.
    pub height: usize,
    /// Output columns.
    pub width: usize,
    /// Rescale and normalise.
    levels: LevelMap,
}

impl SiglipPreprocessor {
    /// Reads `preprocessor_config.json` from a model directory, else the `image_processor` of
    /// its `processor_config.json`.
    pub fn from_model_dir(dir: &Path) -> Result<Self, ConfigError> {
        let (text, nested, path) = read_processor_config(dir)?;
        Self::from_json(&text, nested, &path)
    }

    /// Parses a processor configuration: the object itself, or (`nested`) an object holding it
    /// under `image_processor`. `path` names it in errors.
    pub fn from_json(text: &str, nested: bool, path: &Path) -> Result<Self, ConfigError> {
        Self::from_config(parse_processor_config(text, nested, path)?, path)
    }

    /// The preparation a llama.cpp projector file (`mmproj-*.gguf`) states: resize to `side`
    /// square (bilinear), rescale by 1/255, then `(x - mean) / std` per channel; the same
    /// arithmetic as the equivalent processor config.
    pub fn square(side: usize, mean: [f32; 3], std: [f32; 3]) -> Result<Self, ConfigError> {
        let config = ProcessorConfig {
            size: Size {
                height: side,
                width: side,
            },
            do_resize: true,
            resample: BILINEAR,
            do_rescale: true,
            rescale_factor: one_255th(),
            do_normalize: true,
            image_mean: Some(mean.map(f64::from)),
            image_std: Some(std.map(f64::from)),
            do_pan_and_scan: None,
            do_center_crop: None,
        };
        Self::from_config(config, Path::new("<mmproj metadata>"))
    }

    fn from_config(config: ProcessorConfig, path: &Path) -> Result<Self, ConfigError> {
        let unsupported = |what: &str| ConfigError::Unsupported {
            path: PathBuf::from(path),
            what: what.to_string(),
        };
        if !config.do_resize {
            return Err(unsupported("do_resize false (images of any size)"));
        }
        if config.resample != BILINEAR {
            return Err(unsupported(&format!(
                "resample {} (only bilinear, 2, is implemented)",
                config.resample
            )));
        }
        if config.do_pan_and_scan == Some(true) {
            return Err(unsupported("do_pan_and_scan"));
        }
        if config.do_center_crop == Some(true) {
            return Err(unsupported("do_center_crop"));
        }
        if config.size.height == 0 || config.size.width == 0 {
            return Err(unsupported("an empty size"));
        }
        let levels = LevelMap::new(
            config.do_rescale,
            config.rescale_factor,
            config.do_normalize,
            config.image_mean,
            config.image_std,
        )
        .map_err(unsupported)?;
        Ok(Self {
            height: config.size.height,
            width: config.size.width,
            levels,
        })
    }

    /// Values per image: `3 · height · width`.
    pub fn values_per_image(&self) -> usize {
        3 * self.height * self.width
    }

    /// One image's pixel values, `[3, height, width]`.
    pub fn pixel_values(&self, image: &RgbImage) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.values_per_image());
        self.append_pixel_values(image, &mut out);
        out
    }

    /// Several images' pixel values, `[images, 3, height, width]`: each image's values are
    /// the same as alone.
    pub fn batch_pixel_values(&self, images: &[RgbImage]) -> Vec<f32> {
        let mut out = Vec::with_capacity(images.len() * self.values_per_image());
        for image in images {
            self.append_pixel_values(image, &mut out);
        }
        out
    }

    fn append_pixel_values(&self, image: &RgbImage, out: &mut Vec<f32>) {
        let resized = resize_bilinear_antialias(
            &image.pixels,
            (image.width as usize, image.height as usize),
            3,
            (self.width, self.height),
        );
        for c in 0..3 {
            let levels = resized.iter().skip(c).step_by(3);
            out.extend(levels.map(|&v| self.levels.apply(c, v)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUB_GEMMA3: &str = r#"{
        "do_convert_rgb": null, "do_normalize": true, "do_pan_and_scan": null,
        "do_rescale": true, "do_resize": true, "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "Gemma3ImageProcessor", "image_seq_length": 256,
        "image_std": [0.5, 0.5, 0.5], "pan_and_scan_max_num_crops": null,
        "processor_class": "Gemma3Processor", "resample": 2,
        "rescale_factor": 0.00392156862745098, "size": {"height": 896, "width": 896}
    }"#;

    fn parse(text: &str, nested: bool) -> Result<SiglipPreprocessor, ConfigError> {
        SiglipPreprocessor::from_json(text, nested, Path::new("test.json"))
    }

    #[test]
    fn the_hub_gemma3_config_normalises_levels_to_minus_one_to_one() {
        let p = parse(HUB_GEMMA3, false).unwrap();
        assert_eq!((p.height, p.width), (896, 896));
        assert_eq!(p.levels.normalization(), Some(([127.5; 3], [127.5; 3])));
        let nested = format!(r#"{{"image_processor": {HUB_GEMMA3}, "image_seq_length": 256}}"#);
        assert_eq!(parse(&nested, true).unwrap(), p);
        let image = RgbImage::new(1, 1, vec![0, 255, 128]).unwrap();
        let small = SiglipPreprocessor {
            height: 1,
            width: 1,
            ..p
        };
        assert_eq!(small.pixel_values(&image), [-1.0, 1.0, 0.5 / 127.5]);
    }

    #[test]
    fn an_mmproj_files_settings_equal_the_processor_config_they_came_from() {
        let square = SiglipPreprocessor::square(896, [0.5; 3], [0.5; 3]).unwrap();
        assert_eq!(square, parse(HUB_GEMMA3, false).unwrap());
        // CLIP's normalisation, stored as f32 in the file: the same arithmetic as from JSON.
        let (mean, std) = (
            [0.481_454_66, 0.457_827_5, 0.408_210_73],
            [0.268_629_54, 0.261_302_6, 0.275_777_1],
        );
        let json = HUB_GEMMA3
            .replace(
                r#""image_mean": [0.5, 0.5, 0.5]"#,
                &format!("\"image_mean\": {mean:?}"),
            )
            .replace(
                r#""image_std": [0.5, 0.5, 0.5]"#,
                &format!("\"image_std\": {std:?}"),
            );
        assert_eq!(
            SiglipPreprocessor::square(896, mean, std).unwrap(),
            parse(&json, false).unwrap()
        );
        assert!(SiglipPreprocessor::square(0, mean, std).is_err());
    }

    #[test]
    fn pan_and_scan_and_other_filters_are_refused() {
        let pan = HUB_GEMMA3.replace(r#""do_pan_and_scan": null"#, r#""do_pan_and_scan": true"#);
        assert!(matches!(
            parse(&pan, false),
            Err(ConfigError::Unsupported { .. })
        ));
        let bicubic = HUB_GEMMA3.replace(r#""resample": 2"#, r#""resample": 3"#);
        assert!(matches!(
            parse(&bicubic, false),
            Err(ConfigError::Unsupported { .. })
        ));
        assert!(matches!(
            parse("{}", true),
            Err(ConfigError::Invalid { .. })
        ));
    }
}
