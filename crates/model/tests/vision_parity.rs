//! Gemma 3's image features (SigLIP tower + projector) against transformers'
//! `get_image_features` on the tiny random-weight fixture (fixtures/models/gemma3-vision, made by
//! scripts/make_vision_fixtures.py), and batch invariance.

mod common;

use common::vision::{fixture, max_error, reference, Units};
use sluice_model::checkpoint::{Checkpoint, RawTensor, TensorSource};
use sluice_model::vision::{Gemma3VisionEncoder, VisionConfig};
use sluice_model::{LoadError, WeightDtype};

/// The reference features are f32 computations rounded to 7 decimals; ours sum in other orders
/// (the packed matmul's fused multiply-adds against PyTorch's blocked GEMMs, our softmax's
/// polynomial `exp`), which moves results by a few units of f32's last place: measured at most
/// 9.4e-7 relative (to values of at least one) over the fixture's images. The bound leaves ten
/// times that.
const TOLERANCE: f32 = 1e-5;

#[test]
fn image_features_match_transformers_for_every_fixture_image() {
    let encoder = Gemma3VisionEncoder::load(&fixture(), None).expect("load");
    let config = encoder.config().clone();
    assert_eq!((config.num_patches(), config.mm_tokens_per_image), (64, 16));
    let mut worst = 0f32;
    for (name, image) in reference().images {
        assert_eq!(image.features_shape, [16, config.text_hidden_size]);
        let features = encoder.image_features(&image.pixel_values(), 1);
        let error = max_error(&features, &image.features);
        assert!(error < TOLERANCE, "{name}: max error {error}");
        worst = worst.max(error);
    }
    eprintln!("worst max error over the fixture images: {worst:e}");
}

/// The encoder in bf16 (`--vision-dtype bf16`): every matrix product rounds its activations
/// and weights to bf16's 8 significant bits, so features move by about bf16's relative step
/// (2^-8) through the layers; measured at most 8.6e-3, the bound leaves about three times that.
const BF16_TOLERANCE: f32 = 3e-2;

#[test]
fn bf16_image_features_stay_within_bf16_rounding_of_transformers() {
    let encoder = Gemma3VisionEncoder::load(&fixture(), Some(WeightDtype::BF16)).expect("load");
    let exact = Gemma3VisionEncoder::load(&fixture(), None).unwrap();
    let mut worst = 0f32;
    for (name, image) in reference().images {
        let features = encoder.image_features(&image.pixel_values(), 1);
        let error = max_error(&features, &image.features);
        assert!(error < BF16_TOLERANCE, "{name}: max error {error}");
        // Not the f32 encoder's bits: the products did round.
        assert_ne!(features, exact.image_features(&image.pixel_values(), 1));
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
    let encoder = Gemma3VisionEncoder::load(&fixture(), dtype).unwrap();
    let reference = reference();
    let images: Vec<Vec<f32>> = reference
        .images
        .values()
        .map(|i| i.pixel_values())
        .collect();
    let batch: Vec<f32> = images.concat();
    let batched = encoder.image_features(&batch, images.len());
    let per_image = batched.len() / images.len();
    for (i, pixels) in images.iter().enumerate() {
        let alone = encoder.image_features(pixels, 1);
        let inside = &batched[i * per_image..][..per_image];
        assert!(
            alone
                .iter()
                .zip(inside)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "image {i} differs inside the batch ({dtype:?})"
        );
    }
    // Cut into units of 7 rows with a pause point after each (as a server's encode gate cuts
    // it): the same bits.
    let units = Units::of(7);
    assert_eq!(
        encoder.image_features_with_pauses(&batch, images.len(), &units),
        batched
    );
    let whole = Units::of(usize::MAX);
    encoder.image_features_with_pauses(&batch, images.len(), &whole);
    assert!(units.points() > whole.points(), "{} points", units.points());
    // And in another position among other images.
    let pair = [images[3].clone(), images[0].clone()].concat();
    let pair_features = encoder.image_features(&pair, 2);
    assert_eq!(
        pair_features[..per_image],
        batched[3 * per_image..][..per_image]
    );
}

/// The fixture's tensors under other names: every `vision_tower.` name renamed by `rename`.
struct Renamed {
    inner: Checkpoint,
    rename: fn(&str) -> String,
}

impl Renamed {
    fn original(&self, name: &str) -> Option<String> {
        let names: Vec<String> = self
            .inner
            .tensors()
            .map(|(n, _, _)| n.to_string())
            .collect();
        names.into_iter().find(|n| (self.rename)(n) == name)
    }
}

impl TensorSource for Renamed {
    fn raw(&self, name: &str, shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        match self.original(name) {
            Some(original) => self.inner.raw(&original, shape),
            None => self.inner.raw(&format!("<absent> {name}"), shape),
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.original(name).is_some()
    }
}

#[test]
fn both_tower_layouts_and_the_model_prefix_load_the_same_weights() {
    let config_text = std::fs::read_to_string(fixture().join("config.json")).unwrap();
    let config = VisionConfig::from_json(&config_text).unwrap();
    let image = reference().images.into_values().next().unwrap();
    let expected = Gemma3VisionEncoder::load(&fixture(), None)
        .unwrap()
        .image_features(&image.pixel_values(), 1);
    let layouts: [fn(&str) -> String; 3] = [
        |n| n.replacen("vision_tower.", "vision_tower.vision_model.", 1),
        |n| format!("model.{n}"),
        |n| {
            format!(
                "model.{}",
                n.replacen("vision_tower.", "vision_tower.vision_model.", 1)
            )
        },
    ];
    for rename in layouts {
        let source = Renamed {
            inner: Checkpoint::open(&fixture()).unwrap(),
            rename,
        };
        let encoder = Gemma3VisionEncoder::from_source(&source, config.clone(), None).unwrap();
        assert_eq!(encoder.image_features(&image.pixel_values(), 1), expected);
    }
}

#[test]
fn image_bytes_through_decoding_preprocessing_and_the_encoder_match_transformers() {
    use sluice_vision::{decode, DecodeLimits, SiglipPreprocessor};
    let encoder = Gemma3VisionEncoder::load(&fixture(), None).unwrap();
    let processor = SiglipPreprocessor::from_model_dir(&fixture()).unwrap();
    let reference = reference();
    // Lossless formats decode to the reference's pixels exactly; a batch of three images.
    let names = ["rgba_40x30.png", "lossless_33x50.webp", "palette_30x26.gif"];
    let images: Vec<_> = (names.iter())
        .map(|n| {
            decode(
                &std::fs::read(fixture().join("images").join(n)).unwrap(),
                DecodeLimits::default(),
            )
            .unwrap()
        })
        .collect();
    let features = encoder.image_features(&processor.batch_pixel_values(&images), images.len());
    let per_image = features.len() / images.len();
    for (i, name) in names.iter().enumerate() {
        let error = max_error(
            &features[i * per_image..][..per_image],
            &reference.images[*name].features,
        );
        assert!(error < TOLERANCE, "{name}: max error {error}");
    }
}
