//! Qwen2.5-VL's image features (vision transformer + patch merger) against transformers'
//! `get_image_features` on the tiny random-weight fixture (fixtures/models/qwen2_5-vl, made by
//! scripts/make_qwen_vl_fixture.py: window and full-attention blocks, windows that split the
//! grid), batch invariance, and both checkpoint layouts.

mod common;

use common::qwen_vision::{fixture, reference, QwenImageReference};
use common::vision::{max_error, Units};
use sluice_model::checkpoint::{Checkpoint, RawTensor, TensorSource};
use sluice_model::vision::{Qwen2_5VisionConfig, Qwen2_5VisionEncoder};
use sluice_model::{LoadError, WeightDtype};
use sluice_vision::{decode, DecodeLimits, Qwen2VlPreprocessor};

/// Measured at most 3.5e-6 relative (to values of at least one) over the fixture's images
/// (the matmul's and softmax's reduction orders against PyTorch's, f32 `sin`/`cos`/`powf` of
/// the rotary tables, the reference rounded to 7 decimals); the bound leaves about ten times
/// that, as the Gemma 3 tests do. (Running every block with full attention instead moves the
/// features by up to 1.15, so the windows are exercised.)
const TOLERANCE: f32 = 3e-5;

#[test]
fn image_features_match_transformers_for_every_fixture_image() {
    let encoder = Qwen2_5VisionEncoder::load(&fixture(), None).expect("load");
    let config = encoder.config();
    assert_eq!(
        (config.depth, config.fullatt_block_indexes.clone()),
        (4, vec![1, 3])
    );
    assert_eq!(config.window_tokens(), 2);
    let mut worst = 0f32;
    for (name, image) in reference().images {
        let features = encoder.image_features(&image.pixel_values(), &[image.image_grid_thw]);
        assert_eq!(
            features.len(),
            image.features_shape[0] * image.features_shape[1]
        );
        assert_eq!(image.features_shape[1], config.out_hidden_size);
        let error = max_error(&features, &image.features);
        eprintln!(
            "{name}: grid {:?}, max error {error:e}",
            image.image_grid_thw
        );
        assert!(error < TOLERANCE, "{name}: max error {error}");
        worst = worst.max(error);
    }
    eprintln!("worst max error over the fixture images: {worst:e}");
}

/// The encoder in bf16 (`--vision-dtype bf16`): every matrix product rounds its activations
/// and weights to bf16's 8 significant bits; measured at most 1.27e-2, the bound leaves about three
/// times that.
const BF16_TOLERANCE: f32 = 4e-2;

#[test]
fn bf16_image_features_stay_within_bf16_rounding_of_transformers() {
    let encoder = Qwen2_5VisionEncoder::load(&fixture(), Some(WeightDtype::BF16)).expect("load");
    let exact = Qwen2_5VisionEncoder::load(&fixture(), None).unwrap();
    let mut worst = 0f32;
    for (name, image) in reference().images {
        let grid = [image.image_grid_thw];
        let features = encoder.image_features(&image.pixel_values(), &grid);
        let error = max_error(&features, &image.features);
        assert!(error < BF16_TOLERANCE, "{name}: max error {error}");
        assert_ne!(features, exact.image_features(&image.pixel_values(), &grid));
        worst = worst.max(error);
    }
    eprintln!("bf16: worst max error over the fixture images: {worst:e}");
}

#[test]
fn an_image_has_the_same_bits_alone_and_in_a_batch() {
    for dtype in [None, Some(WeightDtype::BF16)] {
        same_bits_alone_and_in_a_batch(dtype);
    }
}

fn same_bits_alone_and_in_a_batch(dtype: Option<WeightDtype>) {
    let encoder = Qwen2_5VisionEncoder::load(&fixture(), dtype).unwrap();
    let images: Vec<QwenImageReference> = reference().images.into_values().collect();
    let values: Vec<Vec<f32>> = images
        .iter()
        .map(QwenImageReference::pixel_values)
        .collect();
    let grids: Vec<[usize; 3]> = images.iter().map(|i| i.image_grid_thw).collect();
    let batched = encoder.image_features(&values.concat(), &grids);
    let mut start = 0;
    for (i, (pixels, &grid)) in values.iter().zip(&grids).enumerate() {
        let alone = encoder.image_features(pixels, &[grid]);
        let inside = &batched[start..][..alone.len()];
        let same = alone
            .iter()
            .zip(inside)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "image {i} differs inside the batch ({dtype:?})");
        start += alone.len();
    }
    assert_eq!(start, batched.len());
    // Cut into units of 7 rows with a pause point after each (as a server's encode gate cuts
    // it): the same bits.
    let units = Units::of(7);
    let paused = encoder.image_features_with_pauses(&values.concat(), &grids, &units);
    assert_eq!(paused, batched);
    let whole = Units::of(usize::MAX);
    encoder.image_features_with_pauses(&values.concat(), &grids, &whole);
    assert!(units.points() > whole.points(), "{} points", units.points());
    assert!(encoder.image_features(&[], &[]).is_empty());
}

/// The fixture's tensors with `model.` before every name, as transformers 5 names the modules.
struct ModelPrefixed(Checkpoint);

impl TensorSource for ModelPrefixed {
    fn raw(&self, name: &str, shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        match name.strip_prefix("model.") {
            Some(stored) => self.0.raw(stored, shape),
            None => self.0.raw(&format!("<absent> {name}"), shape),
        }
    }

    fn contains(&self, name: &str) -> bool {
        name.strip_prefix("model.")
            .is_some_and(|n| self.0.contains(n))
    }
}

#[test]
fn the_hub_and_the_model_prefixed_layouts_load_the_same_weights() {
    let text = std::fs::read_to_string(fixture().join("config.json")).unwrap();
    let config = Qwen2_5VisionConfig::from_json(&text).unwrap();
    let image = reference().images.into_values().next().unwrap();
    let pixels = image.pixel_values();
    let expected = Qwen2_5VisionEncoder::load(&fixture(), None)
        .unwrap()
        .image_features(&pixels, &[image.image_grid_thw]);
    let source = ModelPrefixed(Checkpoint::open(&fixture()).unwrap());
    let encoder = Qwen2_5VisionEncoder::from_source(&source, config, None).unwrap();
    assert!(encoder.bytes() > 0);
    assert_eq!(
        encoder.image_features(&pixels, &[image.image_grid_thw]),
        expected
    );
}

#[test]
fn image_bytes_through_decoding_preprocessing_and_the_encoder_match_transformers() {
    let encoder = Qwen2_5VisionEncoder::load(&fixture(), None).unwrap();
    let processor = Qwen2VlPreprocessor::from_model_dir(&fixture()).unwrap();
    let reference = reference();
    // Lossless images decode and resize to the reference's levels exactly; a batch of three.
    let names = ["rgb_120x90.png", "gray_30x30.png", "rgb_40x100.png"];
    let (mut values, mut grids) = (Vec::new(), Vec::new());
    for name in names {
        let bytes = std::fs::read(fixture().join("images").join(name)).unwrap();
        let patches = processor
            .patches(&decode(&bytes, DecodeLimits::default()).unwrap())
            .unwrap();
        values.extend(patches.values);
        grids.push([patches.grid.t, patches.grid.h, patches.grid.w]);
    }
    let features = encoder.image_features(&values, &grids);
    let mut start = 0;
    for name in names {
        let expected = &reference.images[name].features;
        let error = max_error(&features[start..][..expected.len()], expected);
        assert!(error < TOLERANCE, "{name}: max error {error}");
        start += expected.len();
    }
}
