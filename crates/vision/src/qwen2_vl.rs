//! Qwen2-VL / Qwen2.5-VL preprocessing: each image keeps its aspect ratio, resized to a multiple
//! of `patch_size · merge_size` pixels a side within a pixel budget ([`smart_resize`]), then cut
//! into flattened patches in the order the vision encoder reads them.
//!
//! Equal bit for bit to transformers' default `Qwen2VLImageProcessor` (the torchvision backend):
//! - `smart_resize(height, width, factor, min_pixels, max_pixels)`: each side rounded to the
//!   nearest multiple of `factor` (Python's `round`, ties to even); if the area exceeds
//!   `max_pixels`, `β = √(h·w / max_pixels)` and each side is `max(factor, ⌊side / β / factor⌋ ·
//!   factor)`; if under `min_pixels`, `β = √(min_pixels / (h·w))` and each side is
//!   `⌈side · β / factor⌉ · factor` (all in f64); an aspect ratio over 200 is refused;
//! - the uint8 image resized with antialiased bicubic (`resample` 3; see [`crate::resize`]);
//! - rescale and normalise fused (`normalize.rs`), with CLIP's mean and std by default;
//! - patchify: with `p = patch_size`, `m = merge_size`, `T = temporal_patch_size`, the image
//!   `[3, gh·p, gw·p]` becomes rows ordered by merge window (window row, window column, row in
//!   window, column in window), so each merged token's `m²` patches are contiguous; each row is
//!   `[3, T, p, p]` flattened, the still image repeated over `T` frames. `grid_thw` is
//!   `[1, gh, gw]`, and the prompt holds `gh · gw / m²` image tokens.
//!
//! Settings from `preprocessor_config.json` (the hub's layout) or the `image_processor` object
//! of `processor_config.json` (transformers 5's): the pixel budget as `min_pixels` / `max_pixels`
//! or as `size: {shortest_edge, longest_edge}` (transformers 5's names for the same two numbers;
//! `min_pixels` / `max_pixels` win where both are given, as in the reference's constructor).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::decode::RgbImage;
use crate::error::{ConfigError, ImageError};
use crate::normalize::LevelMap;
use crate::preprocess::{parse_processor_config, read_processor_config};
use crate::resize::{resize_antialias, Filter};

/// The processor's settings as its JSON states them; defaults are `Qwen2VLImageProcessor`'s.
#[derive(Debug, Deserialize)]
struct ProcessorConfig {
    #[serde(default)]
    size: Option<PixelBudget>,
    min_pixels: Option<usize>,
    max_pixels: Option<usize>,
    #[serde(default = "patch_size")]
    patch_size: usize,
    #[serde(default = "merge_size")]
    merge_size: usize,
    #[serde(default = "temporal_patch_size")]
    temporal_patch_size: usize,
    #[serde(default = "yes")]
    do_resize: bool,
    #[serde(default = "bicubic")]
    resample: u32,
    #[serde(default = "yes")]
    do_rescale: bool,
    #[serde(default = "one_255th")]
    rescale_factor: f64,
    #[serde(default = "yes")]
    do_normalize: bool,
    #[serde(default = "clip_mean")]
    image_mean: Option<[f64; 3]>,
    #[serde(default = "clip_std")]
    image_std: Option<[f64; 3]>,
}

/// `size`: transformers 5 names the budget `shortest_edge` / `longest_edge` (pixels, not edges);
/// some older saves wrote `min_pixels` / `max_pixels` inside it.
#[derive(Debug, Deserialize)]
struct PixelBudget {
    #[serde(alias = "min_pixels")]
    shortest_edge: Option<usize>,
    #[serde(alias = "max_pixels")]
    longest_edge: Option<usize>,
}

fn patch_size() -> usize {
    14
}
fn merge_size() -> usize {
    2
}
fn temporal_patch_size() -> usize {
    2
}
fn yes() -> bool {
    true
}
fn bicubic() -> u32 {
    3
}
fn one_255th() -> f64 {
    1.0 / 255.0
}
fn clip_mean() -> Option<[f64; 3]> {
    Some([0.481_454_66, 0.457_827_5, 0.408_210_73])
}
fn clip_std() -> Option<[f64; 3]> {
    Some([0.268_629_54, 0.261_302_58, 0.275_777_11])
}

/// An image's patch grid: temporal patches (1 for a still image), rows and columns of patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridThw {
    /// Temporal patches.
    pub t: usize,
    /// Rows of patches.
    pub h: usize,
    /// Columns of patches.
    pub w: usize,
}

impl GridThw {
    /// Patches: `t · h · w`, the rows of the patch values.
    pub fn patches(&self) -> usize {
        self.t * self.h * self.w
    }

    /// Image tokens after merging `merge_size × merge_size` patches: `t · h · w / merge²`.
    pub fn tokens(&self, merge_size: usize) -> usize {
        self.patches() / (merge_size * merge_size)
    }
}

/// One image ready for the vision encoder.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePatches {
    /// Its grid.
    pub grid: GridThw,
    /// `[grid.patches(), 3 · temporal_patch_size · patch_size²]`, rows in merge-window order.
    pub values: Vec<f32>,
}

/// The resized side lengths `(height, width)` of a `height × width` image: multiples of `factor`
/// within `min_pixels..=max_pixels` as nearly as the aspect ratio allows (see the module
/// documentation for the arithmetic). Refuses an aspect ratio over 200, and a budget that leaves
/// a side empty.
pub fn smart_resize(
    height: usize,
    width: usize,
    factor: usize,
    min_pixels: usize,
    max_pixels: usize,
) -> Result<(usize, usize), ImageError> {
    let extreme = ImageError::AspectRatio {
        width: width as u32,
        height: height as u32,
    };
    if height == 0 || width == 0 {
        return Err(extreme);
    }
    let (h, w, f) = (height as f64, width as f64, factor as f64);
    if h.max(w) / h.min(w) > 200.0 {
        return Err(extreme);
    }
    let mut h_bar = (h / f).round_ties_even() as usize * factor;
    let mut w_bar = (w / f).round_ties_even() as usize * factor;
    if h_bar * w_bar > max_pixels {
        let beta = ((height * width) as f64 / max_pixels as f64).sqrt();
        h_bar = factor.max((h / beta / f).floor() as usize * factor);
        w_bar = factor.max((w / beta / f).floor() as usize * factor);
    } else if h_bar * w_bar < min_pixels {
        let beta = (min_pixels as f64 / (height * width) as f64).sqrt();
        h_bar = (h * beta / f).ceil() as usize * factor;
        w_bar = (w * beta / f).ceil() as usize * factor;
    }
    if h_bar == 0 || w_bar == 0 {
        return Err(extreme);
    }
    Ok((h_bar, w_bar))
}

/// Qwen2-VL's image processor: smart resize, rescale, normalise, patchify.
#[derive(Debug, Clone, PartialEq)]
pub struct Qwen2VlPreprocessor {
    /// A patch's side in pixels.
    pub patch_size: usize,
    /// Patches merged into one token along each side.
    pub merge_size: usize,
    /// Frames per patch (a still image is repeated this many times).
    pub temporal_patch_size: usize,
    /// The least pixels after resizing.
    pub min_pixels: usize,
    /// The most pixels after resizing.
    pub max_pixels: usize,
    filter: Filter,
    levels: LevelMap,
}

impl Qwen2VlPreprocessor {
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

    /// The processor's defaults (bicubic resize, rescale by 1/255) with the given patching,
    /// pixel budget and normalisation: what a llama.cpp projector file states, with the
    /// budget it leaves out. `path` names the source in errors.
    #[allow(clippy::too_many_arguments)]
    pub fn with_defaults(
        patch_size: usize,
        merge_size: usize,
        temporal_patch_size: usize,
        min_pixels: usize,
        max_pixels: usize,
        image_mean: [f64; 3],
        image_std: [f64; 3],
        path: &Path,
    ) -> Result<Self, ConfigError> {
        let config = ProcessorConfig {
            size: None,
            min_pixels: Some(min_pixels),
            max_pixels: Some(max_pixels),
            patch_size,
            merge_size,
            temporal_patch_size,
            do_resize: yes(),
            resample: bicubic(),
            do_rescale: yes(),
            rescale_factor: one_255th(),
            do_normalize: yes(),
            image_mean: Some(image_mean),
            image_std: Some(image_std),
        };
        Self::from_config(config, path)
    }

    fn from_config(config: ProcessorConfig, path: &Path) -> Result<Self, ConfigError> {
        let unsupported = |what: &str| ConfigError::Unsupported {
            path: PathBuf::from(path),
            what: what.to_string(),
        };
        if !config.do_resize {
            return Err(unsupported("do_resize false"));
        }
        let filter = match config.resample {
            2 => Filter::Bilinear,
            3 => Filter::Bicubic,
            other => {
                return Err(unsupported(&format!(
                    "resample {other} (bilinear, 2, and bicubic, 3, are implemented)"
                )))
            }
        };
        if config.patch_size == 0 || config.merge_size == 0 || config.temporal_patch_size == 0 {
            return Err(unsupported("a zero patch, merge or temporal patch size"));
        }
        let size = config.size.as_ref();
        let min_pixels = (config.min_pixels)
            .or_else(|| size.and_then(|s| s.shortest_edge))
            .unwrap_or(56 * 56);
        let max_pixels = (config.max_pixels)
            .or_else(|| size.and_then(|s| s.longest_edge))
            .unwrap_or(28 * 28 * 1280);
        if min_pixels > max_pixels {
            return Err(unsupported("min_pixels above max_pixels"));
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
            patch_size: config.patch_size,
            merge_size: config.merge_size,
            temporal_patch_size: config.temporal_patch_size,
            min_pixels,
            max_pixels,
            filter,
            levels,
        })
    }

    /// The side multiple of a resized image: `patch_size · merge_size`.
    pub fn factor(&self) -> usize {
        self.patch_size * self.merge_size
    }

    /// Values per patch: `3 · temporal_patch_size · patch_size²`.
    pub fn patch_len(&self) -> usize {
        3 * self.temporal_patch_size * self.patch_size * self.patch_size
    }

    /// The resized `(height, width)` of a `width × height` image.
    pub fn resized_size(&self, width: u32, height: u32) -> Result<(usize, usize), ImageError> {
        smart_resize(
            height as usize,
            width as usize,
            self.factor(),
            self.min_pixels,
            self.max_pixels,
        )
    }

    /// The patch grid of a `width × height` image.
    pub fn grid(&self, width: u32, height: u32) -> Result<GridThw, ImageError> {
        let (h, w) = self.resized_size(width, height)?;
        Ok(GridThw {
            t: 1,
            h: h / self.patch_size,
            w: w / self.patch_size,
        })
    }

    /// How many image tokens a `width × height` image becomes in the prompt.
    pub fn image_tokens(&self, width: u32, height: u32) -> Result<usize, ImageError> {
        Ok(self.grid(width, height)?.tokens(self.merge_size))
    }

    /// The image resized as the reference resizes it: `[height, width, 3]` uint8 levels and the
    /// resized `(height, width)`.
    pub fn resized_levels(&self, image: &RgbImage) -> Result<(Vec<u8>, usize, usize), ImageError> {
        let (h, w) = self.resized_size(image.width, image.height)?;
        let (width, height) = (image.width as usize, image.height as usize);
        let levels = resize_antialias(&image.pixels, (width, height), 3, (w, h), self.filter);
        Ok((levels, h, w))
    }

    /// One image's patches.
    pub fn patches(&self, image: &RgbImage) -> Result<ImagePatches, ImageError> {
        let (levels, h, w) = self.resized_levels(image)?;
        Ok(self.patches_from_levels(&levels, h, w))
    }

    /// Patches of an image already resized to `height × width` (`[height, width, 3]` levels,
    /// both sides multiples of [`factor`](Self::factor)).
    pub fn patches_from_levels(&self, levels: &[u8], height: usize, width: usize) -> ImagePatches {
        let (p, m, frames) = (self.patch_size, self.merge_size, self.temporal_patch_size);
        assert_eq!(levels.len(), height * width * 3, "level count");
        assert!(
            height.is_multiple_of(p * m) && width.is_multiple_of(p * m),
            "unmerged size"
        );
        let grid = GridThw {
            t: 1,
            h: height / p,
            w: width / p,
        };
        let mut values = Vec::with_capacity(grid.patches() * self.patch_len());
        for block_row in 0..grid.h / m {
            for block_col in 0..grid.w / m {
                for row_in in 0..m {
                    for col_in in 0..m {
                        let (top, left) =
                            ((block_row * m + row_in) * p, (block_col * m + col_in) * p);
                        for c in 0..3 {
                            for _ in 0..frames {
                                for y in top..top + p {
                                    let row = &levels[(y * width + left) * 3..][..p * 3];
                                    let pixels = row.iter().skip(c).step_by(3);
                                    values.extend(pixels.map(|&v| self.levels.apply(c, v)));
                                }
                            }
                        }
                    }
                }
            }
        }
        ImagePatches { grid, values }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUB_QWEN25_VL: &str = r#"{
        "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
        "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor"
    }"#;

    fn parse(text: &str, nested: bool) -> Result<Qwen2VlPreprocessor, ConfigError> {
        Qwen2VlPreprocessor::from_json(text, nested, Path::new("test.json"))
    }

    #[test]
    fn the_hub_config_and_transformers_5_size_form_read_the_same() {
        let hub = parse(HUB_QWEN25_VL, false).unwrap();
        assert_eq!((hub.min_pixels, hub.max_pixels), (3136, 12_845_056));
        assert_eq!((hub.factor(), hub.patch_len()), (28, 1176));
        let v5 = r#"{"image_processor": {"size": {"shortest_edge": 3136,
            "longest_edge": 12845056}, "resample": 3, "rescale_factor": 0.00392156862745098}}"#;
        assert_eq!(parse(v5, true).unwrap(), hub);
        // `min_pixels` wins over `size`, as in the reference's constructor.
        let both = HUB_QWEN25_VL.replace(
            r#""min_pixels": 3136"#,
            r#""min_pixels": 784, "size": {"shortest_edge": 3136, "longest_edge": 4}"#,
        );
        assert_eq!(parse(&both, false).unwrap().min_pixels, 784);
        assert_eq!(parse(&both, false).unwrap().max_pixels, 12_845_056);
        let lanczos = HUB_QWEN25_VL.replace(r#""merge_size": 2"#, r#""resample": 1"#);
        assert!(matches!(
            parse(&lanczos, false),
            Err(ConfigError::Unsupported { .. })
        ));
    }

    #[test]
    fn smart_resize_rounds_ties_to_even_and_keeps_the_budget() {
        // 42 / 28 = 1.5 rounds to 2, 70 / 28 = 2.5 to 2 (Python's round).
        assert_eq!(smart_resize(42, 70, 28, 0, 1 << 20).unwrap(), (56, 56));
        // Over the budget: β = √(120·120 / 9408); ⌊120 / β / 28⌋ = 3.
        assert_eq!(smart_resize(120, 120, 28, 3136, 9408).unwrap(), (84, 84));
        // Under it: β = √(3136 / 900); ⌈30 · β / 28⌉ = 2.
        assert_eq!(smart_resize(30, 30, 28, 3136, 9408).unwrap(), (56, 56));
        assert!(smart_resize(1, 201, 28, 3136, 9408).is_err());
        assert!(smart_resize(1, 200, 28, 3136, 1 << 30).is_ok());
    }

    #[test]
    fn patches_are_in_merge_window_order_and_repeat_over_frames() {
        let mut p = parse(HUB_QWEN25_VL, false).unwrap();
        (p.patch_size, p.merge_size, p.temporal_patch_size) = (1, 2, 2);
        p.levels = LevelMap::new(false, 1.0, false, None, None).unwrap();
        // A 2 x 4 image whose red level is its column + 10 · its row.
        let levels: Vec<u8> = (0..2)
            .flat_map(|y| (0..4).flat_map(move |x| [10 * y + x, 0, 0]))
            .collect();
        let out = p.patches_from_levels(&levels, 2, 4);
        assert_eq!(out.grid, GridThw { t: 1, h: 2, w: 4 });
        assert_eq!(out.grid.tokens(2), 2);
        let red: Vec<f32> = out.values.chunks(6).map(|row| row[0]).collect();
        assert_eq!(red, [0.0, 1.0, 10.0, 11.0, 2.0, 3.0, 12.0, 13.0]);
        assert!(out
            .values
            .chunks(6)
            .all(|row| row[0] == row[1] && row[2..] == [0.0; 4]));
    }
}
