//! Qwen2.5-VL's vision encoder from llama.cpp's projector files (`mmproj-*.gguf`), converted from
//! fixtures/models/qwen2_5-vl by llama.cpp's own converter (scripts/make_qwen_mmproj_fixture.py):
//! the checkpoint's image features, batch invariance, and clear errors for other projectors.
//!
//! The files state no window size and llama.cpp uses 112 pixels, where the checkpoint says 56:
//! the file's features are compared with the checkpoint's loaded with a 112-pixel window.

mod common;

use std::path::PathBuf;

use common::qwen_vision::{fixture, reference};
use common::vision::max_error;
use sluice_model::vision::{Qwen2_5VisionConfig, Qwen2_5VisionEncoder};
use sluice_model::{Checkpoint, LoadError, WeightDtype};

fn gguf(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/gguf")
        .join(name)
}

const F16: &str = "mmproj-qwen2_5-vl-f16.gguf";
const Q8_0: &str = "mmproj-qwen2_5-vl-q8_0.gguf";

/// The checkpoint's encoder with llama.cpp's window.
fn checkpoint_with_mmproj_window() -> Qwen2_5VisionEncoder {
    let text = std::fs::read_to_string(fixture().join("config.json")).unwrap();
    let config = Qwen2_5VisionConfig {
        window_size: 112,
        ..Qwen2_5VisionConfig::from_json(&text).unwrap()
    };
    let source = Checkpoint::open(&fixture()).unwrap();
    Qwen2_5VisionEncoder::from_source(&source, config, None).unwrap()
}

/// The worst error of `encoder` over the fixture images against the checkpoint's.
fn worst_error(encoder: &Qwen2_5VisionEncoder) -> f32 {
    let hf = checkpoint_with_mmproj_window();
    let mut worst = 0f32;
    for image in reference().images.values() {
        let (pixels, grid) = (image.pixel_values(), [image.image_grid_thw]);
        let ours = encoder.image_features(&pixels, &grid);
        worst = worst.max(max_error(&ours, &hf.image_features(&pixels, &grid)));
    }
    worst
}

#[test]
fn the_files_settings_are_the_checkpoints_with_llama_cpps_window() {
    let encoder = Qwen2_5VisionEncoder::load_gguf(&gguf(F16), None).unwrap();
    assert_eq!(encoder.config(), checkpoint_with_mmproj_window().config());
}

/// bf16 weights are exact in f16 (every one of this fixture is in f16's normal range); what
/// remains is the f16 kernel's reduction order against the bf16 one: measured 1.3e-6 relative
/// (to values of at least one), the bound leaves about ten times that.
#[test]
fn the_f16_mmproj_gives_the_checkpoints_features() {
    let encoder = Qwen2_5VisionEncoder::load_gguf(&gguf(F16), None).unwrap();
    let error = worst_error(&encoder);
    eprintln!("f16 mmproj: worst max error {error:e}");
    assert!(error < 1.5e-5, "max error {error}");
}

/// q8_0 matrices: the same noise as quantizing the checkpoint's matrices to q8_0 at load (it is
/// the rounding of the weights, not a difference in the model): measured 5.2e-2 for the file,
/// 5.8e-2 for the checkpoint quantized by sluice.
#[test]
fn the_q8_0_mmproj_stays_within_quantization_noise() {
    let encoder = Qwen2_5VisionEncoder::load_gguf(&gguf(Q8_0), None).unwrap();
    let error = worst_error(&encoder);
    let text = std::fs::read_to_string(fixture().join("config.json")).unwrap();
    let config = Qwen2_5VisionConfig {
        window_size: 112,
        ..Qwen2_5VisionConfig::from_json(&text).unwrap()
    };
    let source = Checkpoint::open(&fixture()).unwrap();
    let ours =
        Qwen2_5VisionEncoder::from_source(&source, config, WeightDtype::from_name("q8_0")).unwrap();
    let own = worst_error(&ours);
    eprintln!("q8_0 mmproj: worst max error {error:e}; checkpoint quantized at load {own:e}");
    assert!(error < 1.5 * own && error < 1e-1, "{error} vs {own}");
}

#[test]
fn an_image_has_the_same_bits_alone_and_in_a_batch() {
    let encoder = Qwen2_5VisionEncoder::load_gguf(&gguf(Q8_0), None).unwrap();
    let images: Vec<_> = reference().images.into_values().collect();
    let values: Vec<f32> = images.iter().flat_map(|i| i.pixel_values()).collect();
    let grids: Vec<[usize; 3]> = images.iter().map(|i| i.image_grid_thw).collect();
    let batched = encoder.image_features(&values, &grids);
    let last = images.last().unwrap();
    let alone = encoder.image_features(&last.pixel_values(), &[last.image_grid_thw]);
    assert_eq!(batched[batched.len() - alone.len()..], alone[..]);
}

#[test]
fn another_projectors_file_is_refused_by_name() {
    let err =
        Qwen2_5VisionEncoder::load_gguf(&gguf("mmproj-gemma3-vision-f16.gguf"), None).unwrap_err();
    assert!(
        matches!(&err, LoadError::Config { message, .. } if message.contains("gemma3")),
        "{err}"
    );
}
