//! Qwen2.5-VL's image path up to the image embeddings (`Qwen2_5_VLModel.get_image_features`):
//! the vision transformer with window attention, then the patch merger. What comes out is one
//! row per `<|image_pad|>` token of the prompt, in the text model's hidden size.
//!
//! ```text
//! patches [t·h·w, C·T·p·p]   (sluice-vision's Qwen2VlPreprocessor: rows by merged token)
//!   → reorder window by window (layout.rs)
//!   → patch_embed: × W[hidden, C·T·p·p]   (the Conv3d, stride = kernel, as one matrix product)
//!   → blocks (block.rs): 2D rotary attention within a window, or within the image for
//!     `fullatt_block_indexes`; SwiGLU MLP
//!   → merger (merger.rs): RMS norm, merge² patches → one token, MLP
//!   → back to the processor's token order
//! [t·h·w / merge², out_hidden]
//! ```
//!
//! Checkpoint layouts: tensors under `visual.` (the hub's, and what transformers 5 saves) or
//! `model.visual.` (transformers 5's module names), or llama.cpp's projector file (`mmproj.rs`).
//! Config: `config.rs`.
//!
//! Each image runs on its own rows with the kernels' fixed reduction orders (attention spans
//! never cross images; every matrix product works row by row), so an image's embeddings are the
//! same bits alone or beside other images.

pub mod block;
pub mod config;
pub mod layout;
pub mod merger;
pub mod mmproj;

use std::ops::Range;
use std::path::Path;

use block::{RotaryTables, VisionBlock};
use config::Qwen2_5VisionConfig;
use layout::ImageLayout;
use merger::PatchMerger;
use mmproj::{qwen_mmproj_config, QwenMmprojSource};

use crate::checkpoint::{Checkpoint, TensorSource};
use crate::error::LoadError;
use crate::kernels::matmul::{PackedMatrix, WeightDtype};
use crate::layers::weights::target_format;
use crate::vision::mmproj::MmprojSource;
use crate::vision::pause::{NoPause, Pause};

/// Where checkpoints put the vision transformer, most common first.
const PREFIXES: [&str; 2] = ["visual.", "model.visual."];

/// The vision transformer and patch merger of a Qwen2.5-VL checkpoint.
#[derive(Debug)]
pub struct Qwen2_5VisionEncoder {
    config: Qwen2_5VisionConfig,
    /// `[hidden, C · T · p · p]`: the Conv3d's kernels (no bias), one row per output feature.
    patch_embed: PackedMatrix,
    blocks: Vec<VisionBlock>,
    merger: PatchMerger,
}

impl Qwen2_5VisionEncoder {
    /// Loads the encoder of the Hugging Face model directory `dir` (its `config.json` and
    /// safetensors). `dtype` `None` keeps each matrix in its stored type (bf16 widened to f32).
    pub fn load(dir: &Path, dtype: Option<WeightDtype>) -> Result<Self, LoadError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Io {
            path: path.clone(),
            source,
        })?;
        let config = Qwen2_5VisionConfig::from_json(&text)
            .map_err(|message| LoadError::Config { path, message })?;
        Self::from_source(&Checkpoint::open(dir)?, config, dtype)
    }

    /// Loads the encoder of llama.cpp's projector file `path` (`mmproj-*.gguf`, projector type
    /// `qwen2.5vl_merger`): settings from its `clip.*` metadata (the window is llama.cpp's 112
    /// pixels, see `mmproj.rs`), weights in their stored types unless `dtype` asks for another.
    /// Images are prepared as for the checkpoint (`Qwen2VlPreprocessor` with the model's
    /// `preprocessor_config.json`); the file states only the mean and std.
    pub fn load_gguf(path: &Path, dtype: Option<WeightDtype>) -> Result<Self, LoadError> {
        let file = MmprojSource::open(path)?;
        let config =
            qwen_mmproj_config(file.gguf().metadata()).map_err(|message| LoadError::Config {
                path: path.to_path_buf(),
                message,
            })?;
        Self::from_source(&QwenMmprojSource::new(file), config, dtype)
    }

    /// Loads the encoder described by `config` from `source`.
    pub fn from_source(
        source: &dyn TensorSource,
        config: Qwen2_5VisionConfig,
        dtype: Option<WeightDtype>,
    ) -> Result<Self, LoadError> {
        let prefix = (PREFIXES.iter())
            .find(|p| source.contains(&format!("{p}patch_embed.proj.weight")))
            .unwrap_or(&PREFIXES[0]);
        let c = &config;
        let (hidden, kernel) = (c.hidden_size, c.patch_len());
        let name = format!("{prefix}patch_embed.proj.weight");
        let shape = [
            hidden,
            c.in_channels,
            c.temporal_patch_size,
            c.patch_size,
            c.patch_size,
        ];
        let raw = source.raw(&name, &shape)?;
        let format = target_format(raw.ggml_type, kernel, dtype);
        let weights = raw.to_f32(&name)?;
        let pack_dtype = WeightDtype::of(format.ggml_type()).unwrap_or(WeightDtype::F32);
        let sizes = (hidden, c.intermediate_size, c.num_heads);
        let blocks = (0..c.depth)
            .map(|i| VisionBlock::load(source, &format!("{prefix}blocks.{i}"), sizes, dtype))
            .collect::<Result<_, _>>()?;
        let merger_sizes = (hidden, c.merge_unit(), c.out_hidden_size);
        let merger = PatchMerger::load(source, &format!("{prefix}merger."), merger_sizes, dtype)?;
        Ok(Self {
            patch_embed: PackedMatrix::pack(&weights, hidden, kernel, pack_dtype),
            blocks,
            merger,
            config,
        })
    }

    /// The configuration it was loaded with.
    pub fn config(&self) -> &Qwen2_5VisionConfig {
        &self.config
    }

    /// `patches: [Σ t·h·w, C·T·p·p]`, the processor's patches of each image one after the
    /// other, and each image's `grid_thw` → the image embeddings `[Σ t·h·w / merge²,
    /// out_hidden]`, image by image in the processor's token order. Each image's rows are the
    /// same bits whichever images share the call.
    ///
    /// Panics when the patches do not fill the grids or a grid is not a multiple of the merge.
    pub fn image_features(&self, patches: &[f32], grid_thw: &[[usize; 3]]) -> Vec<f32> {
        self.image_features_with_pauses(patches, grid_thw, &NoPause)
    }

    /// [`Qwen2_5VisionEncoder::image_features`] with `pause`'s points between units of work (the
    /// same bits however the units cut it).
    pub fn image_features_with_pauses(
        &self,
        patches: &[f32],
        grid_thw: &[[usize; 3]],
        pause: &dyn Pause,
    ) -> Vec<f32> {
        let c = &self.config;
        let (merge, unit, kernel) = (c.spatial_merge_size, c.merge_unit(), c.patch_len());
        for &[_, h, w] in grid_thw {
            assert!(
                h.is_multiple_of(merge) && w.is_multiple_of(merge),
                "grid {h}x{w} not merged by {merge}"
            );
        }
        let layouts: Vec<ImageLayout> = (grid_thw.iter())
            .map(|&grid| ImageLayout::new(grid, merge, c.window_tokens()))
            .collect();
        let rows: usize = layouts.iter().map(ImageLayout::rows).sum();
        assert_eq!(patches.len(), rows * kernel, "patch values for the grids");
        if rows == 0 {
            return Vec::new();
        }

        // Rows in run order, each image's spans offset to where its rows start.
        let mut columns = Vec::with_capacity(patches.len());
        let (mut window_spans, mut frame_spans) =
            (Vec::with_capacity(rows), Vec::with_capacity(rows));
        let mut positions = Vec::with_capacity(rows);
        let mut start = 0;
        for layout in &layouts {
            let image = &patches[start * kernel..][..layout.rows() * kernel];
            for &token in &layout.order {
                columns.extend_from_slice(&image[token * unit * kernel..][..unit * kernel]);
            }
            let shift = |r: &Range<usize>| r.start + start..r.end + start;
            for span in &layout.windows {
                window_spans.extend(std::iter::repeat_n(shift(span), span.len()));
            }
            for span in &layout.frames {
                frame_spans.extend(std::iter::repeat_n(shift(span), span.len()));
            }
            positions.extend_from_slice(&layout.positions);
            start += layout.rows();
        }

        let mut states = vec![0f32; rows * c.hidden_size];
        self.patch_embed.matmul(&columns, rows, &mut states);
        pause.point();
        let rotary = RotaryTables::new(&positions, c.head_dim(), c.rope_theta);
        for (i, block) in self.blocks.iter().enumerate() {
            let spans = match c.fullatt_block_indexes.contains(&i) {
                true => &frame_spans,
                false => &window_spans,
            };
            block.forward(&mut states, &rotary, spans, pause);
        }
        let merged = self.merger.forward(&states, pause);

        // Back to the processor's token order, image by image.
        let out_hidden = c.out_hidden_size;
        let mut out = vec![0f32; merged.len()];
        let mut first = 0;
        for layout in &layouts {
            for (k, &token) in layout.order.iter().enumerate() {
                out[(first + token) * out_hidden..][..out_hidden]
                    .copy_from_slice(&merged[(first + k) * out_hidden..][..out_hidden]);
            }
            first += layout.order.len();
        }
        out
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.patch_embed.bytes()
            + self.blocks.iter().map(VisionBlock::bytes).sum::<usize>()
            + self.merger.bytes()
    }
}
