//! Vision encoders: pixel values (from `sluice-vision`'s preprocessing) to the image embeddings
//! a multimodal text model reads at its image-token positions.
//!
//! Files: `config.rs` (the vision settings of a config.json), `siglip.rs` (the SigLIP tower:
//! patch embedding, positions, encoder layers, post-norm), `encoder_layer.rs` (one layer:
//! bidirectional attention and the GELU MLP), `layer_norm.rs`, `projector.rs` (Gemma 3's pooling,
//! norm and projection), `gemma3.rs` (the two together, loaded from a checkpoint), `mmproj.rs`
//! (llama.cpp's `mmproj-*.gguf` files: their metadata and tensor names), `attention.rs` (the
//! bidirectional attention within spans that both encoders' layers share), `block_units.rs` (the
//! row-wise halves of both encoders' blocks, in units), `pause.rs` (the
//! points between units of work where an encoding may stop for a server's decoding steps).
//!
//! Qwen2.5-VL (`qwen2_5_vl/`): [`Qwen2_5VisionEncoder`] (`load`, `load_gguf`, `from_source`,
//! `image_features(patches, grid_thw)`) over `config.rs` ([`Qwen2_5VisionConfig`]), `layout.rs`
//! (rotary positions, window order and attention spans), `block.rs` (a block: RMS norms, 2D
//! rotary attention, SwiGLU MLP), `merger.rs` (the patch merger) and `mmproj.rs` (llama.cpp's
//! `qwen2.5vl_merger` projector files). Its input is `sluice-vision`'s `Qwen2VlPreprocessor`
//! patches.
//!
//! Every step works per row or per image with the kernels' fixed reduction orders, so an image's
//! embeddings are the same bits alone or in a batch.

mod attention;
mod block_units;
pub mod config;
pub mod encoder_layer;
pub mod gemma3;
pub mod layer_norm;
pub mod mmproj;
pub mod pause;
pub mod projector;
pub mod qwen2_5_vl;
pub mod siglip;

pub use config::VisionConfig;

use rayon::prelude::*;

/// Rows per task of [`par_rows`].
const ROWS_PER_TASK: usize = 32;

/// `f` over `x` and `out` in blocks of rows `width` wide, on the thread pool (a norm over an
/// image's thousands of rows, which one thread would leave the others waiting on); each row is
/// computed as `f` alone would compute it.
pub(crate) fn par_rows(
    x: &[f32],
    out: &mut [f32],
    width: usize,
    f: impl Fn(&[f32], &mut [f32]) + Sync,
) {
    let block = ROWS_PER_TASK * width;
    (out.par_chunks_mut(block).zip(x.par_chunks(block))).for_each(|(out, x)| f(x, out));
}
pub use gemma3::Gemma3VisionEncoder;
pub use mmproj::MmprojPreprocessing;
pub use pause::{NoPause, Pause, UNIT_ROWS};
pub use qwen2_5_vl::config::Qwen2_5VisionConfig;
pub use qwen2_5_vl::Qwen2_5VisionEncoder;
