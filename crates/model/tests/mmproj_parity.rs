//! Gemma 3's vision encoder from llama.cpp's projector files (`mmproj-*.gguf`), converted from
//! fixtures/models/gemma3-vision by llama.cpp's own converter (scripts/make_mmproj_fixtures.py):
//! the same image features as the safetensors checkpoint and as transformers, batch invariance,
//! and clear errors for files that are not Gemma 3's projector or are broken.

mod common;

use std::path::{Path, PathBuf};

use common::vision::{fixture, max_error, reference};
use sluice_model::kernels::matmul::WeightDtype;
use sluice_model::vision::{Gemma3VisionEncoder, MmprojPreprocessing};

fn gguf(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/gguf")
        .join(name)
}

const F16: &str = "mmproj-gemma3-vision-f16.gguf";
const Q8_0: &str = "mmproj-gemma3-vision-q8_0.gguf";

/// The worst error of `encoder` over the fixture images, against the safetensors encoder's
/// features and against transformers' (reference.json).
fn worst_errors(encoder: &Gemma3VisionEncoder) -> (f32, f32) {
    let hf = Gemma3VisionEncoder::load(&fixture(), None).unwrap();
    let (mut vs_hf, mut vs_reference) = (0f32, 0f32);
    for image in reference().images.values() {
        let pixels = image.pixel_values();
        let ours = encoder.image_features(&pixels, 1);
        vs_hf = vs_hf.max(max_error(&ours, &hf.image_features(&pixels, 1)));
        vs_reference = vs_reference.max(max_error(&ours, &image.features));
    }
    (vs_hf, vs_reference)
}

#[test]
fn the_f16_mmproj_gives_the_checkpoints_features_within_f16_rounding() {
    let encoder = Gemma3VisionEncoder::load_gguf(&gguf(F16), None).unwrap();
    let hf = Gemma3VisionEncoder::load(&fixture(), None).unwrap();
    assert_eq!(encoder.config(), hf.config());
    let (vs_hf, vs_reference) = worst_errors(&encoder);
    eprintln!("f16 mmproj: worst error {vs_hf:e} vs safetensors, {vs_reference:e} vs transformers");
    assert!(vs_hf < F16_TOLERANCE, "{vs_hf}");
    assert!(vs_reference < F16_TOLERANCE, "{vs_reference}");
}

#[test]
fn the_q8_0_mmproj_gives_the_checkpoints_features_within_its_quantization_noise() {
    let encoder = Gemma3VisionEncoder::load_gguf(&gguf(Q8_0), None).unwrap();
    let (vs_hf, vs_reference) = worst_errors(&encoder);
    eprintln!(
        "q8_0 mmproj: worst error {vs_hf:e} vs safetensors, {vs_reference:e} vs transformers"
    );
    assert!(vs_hf < Q8_0_TOLERANCE, "{vs_hf}");
    assert!(vs_reference < Q8_0_TOLERANCE, "{vs_reference}");
    // The same noise as quantizing the checkpoint's matrices to q8_0 ourselves: it is the
    // rounding of the weights, not a difference in the model.
    let ours = Gemma3VisionEncoder::load(&fixture(), WeightDtype::from_name("q8_0")).unwrap();
    let (own_vs_hf, _) = worst_errors(&ours);
    eprintln!("checkpoint quantized to q8_0 at load: worst error {own_vs_hf:e} vs safetensors");
    assert!(vs_hf < 1.5 * own_vs_hf, "{vs_hf} vs {own_vs_hf}");
    let hf = Gemma3VisionEncoder::load(&fixture(), None).unwrap();
    let pixels: Vec<f32> = (reference().images.values())
        .flat_map(|i| i.pixel_values())
        .collect();
    let images = pixels.len() / hf.config().values_per_image();
    let (a, b) = (
        encoder.image_features(&pixels, images),
        hf.image_features(&pixels, images),
    );
    let rms = |v: &[f32]| (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt();
    let diff: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x - y).collect();
    let relative_rms = rms(&diff) / rms(&b);
    eprintln!("q8_0 mmproj: RMS error / RMS feature {relative_rms:e}");
    assert!(relative_rms < 2e-2, "{relative_rms}");
}

/// The converter's f16 holds every bf16 weight of the checkpoint exactly but the few below
/// f16's normal range (one element of `mm.input_projection`, moved by 3e-8); the f16 kernel
/// widens to f32 and sums in the f32 kernel's order. Measured: 1.5e-7 from the safetensors
/// encoder, 9.4e-7 from transformers (the safetensors encoder's own distance). The bound is the
/// safetensors test's.
const F16_TOLERANCE: f32 = 1e-5;

/// q8_0 rounds each weight to 8 bits per block of 32; on this tiny random model the features
/// move by up to 4.9e-2 (relative to values of at least one; 8.7e-3 in RMS over the features' RMS), the same as
/// quantizing the checkpoint's matrices to q8_0 at load (4.8e-2). The bound leaves twice that.
const Q8_0_TOLERANCE: f32 = 0.1;

#[test]
fn an_image_has_the_same_bits_alone_and_in_a_batch_from_either_file() {
    let reference = reference();
    let images: Vec<Vec<f32>> = (reference.images.values())
        .map(|i| i.pixel_values())
        .collect();
    for file in [F16, Q8_0] {
        let encoder = Gemma3VisionEncoder::load_gguf(&gguf(file), None).unwrap();
        let batched = encoder.image_features(&images.concat(), images.len());
        let per_image = batched.len() / images.len();
        for (i, pixels) in images.iter().enumerate() {
            let alone = encoder.image_features(pixels, 1);
            let inside = &batched[i * per_image..][..per_image];
            assert!(
                (alone.iter().zip(inside)).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{file}: image {i} differs inside the batch"
            );
        }
    }
}

#[test]
fn the_files_preprocessing_is_the_checkpoints_processor() {
    use sluice_vision::SiglipPreprocessor;
    let encoder = Gemma3VisionEncoder::load_gguf(&gguf(F16), None).unwrap();
    let p = encoder
        .preprocessing()
        .expect("an mmproj file states its preprocessing");
    assert_eq!(
        p,
        &MmprojPreprocessing {
            image_size: 32,
            image_mean: [0.5; 3],
            image_std: [0.5; 3],
        }
    );
    let from_file = SiglipPreprocessor::square(p.image_size, p.image_mean, p.image_std).unwrap();
    assert_eq!(
        from_file,
        SiglipPreprocessor::from_model_dir(&fixture()).unwrap()
    );
    let hf = Gemma3VisionEncoder::load(&fixture(), None).unwrap();
    assert!(hf.preprocessing().is_none());
}

/// `F16` with `edit` applied to its bytes, written to a scratch file.
fn broken(tag: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(gguf(F16)).unwrap();
    edit(&mut bytes);
    let path =
        std::env::temp_dir().join(format!("sluice-mmproj-{tag}-{}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The offset just past the first occurrence of the length-prefixed string `s` in `bytes`.
fn after_string(bytes: &[u8], s: &str) -> usize {
    let mut needle = (s.len() as u64).to_le_bytes().to_vec();
    needle.extend(s.as_bytes());
    (bytes.windows(needle.len()))
        .position(|w| w == needle)
        .expect("string in header")
        + needle.len()
}

/// Overwrites the length-prefixed string `old` with `new` (the same length).
fn replace_string(bytes: &mut [u8], old: &str, new: &str) {
    assert_eq!(old.len(), new.len());
    let at = after_string(bytes, old);
    bytes[at - old.len()..at].copy_from_slice(new.as_bytes());
}

/// A metadata value's offset: past its key and its 4-byte type tag.
fn value_of(bytes: &[u8], key: &str) -> usize {
    after_string(bytes, key) + 4
}

fn load_error(path: &Path) -> String {
    let err = Gemma3VisionEncoder::load_gguf(path, None).unwrap_err();
    std::fs::remove_file(path).unwrap();
    err.to_string()
}

#[test]
fn another_projector_type_is_refused_by_name() {
    let path = broken("projector", |b| {
        let at = value_of(b, "clip.projector_type") + 8;
        b[at..at + 6].copy_from_slice(b"llama4");
    });
    let err = load_error(&path);
    assert!(
        err.contains("`llama4`") && err.contains("gemma3") && err.contains(".gguf"),
        "{err}"
    );
}

#[test]
fn a_language_model_gguf_is_not_an_mmproj_file() {
    let err = Gemma3VisionEncoder::load_gguf(&gguf("gemma3-vision-f16.gguf"), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not an mmproj file") && err.contains("`gemma3`"),
        "{err}"
    );
}

#[test]
fn a_missing_or_misshapen_tensor_is_named() {
    let path = broken("missing", |b| {
        replace_string(b, "v.blk.1.attn_k.weight", "v.blk.1.attn_X.weight")
    });
    let err = load_error(&path);
    assert!(err.contains("`v.blk.1.attn_k.weight` is missing"), "{err}");

    let path = broken("projection", |b| {
        replace_string(
            b,
            "mm.input_projection.weight",
            "mm.input_projectioX.weight",
        )
    });
    assert!(load_error(&path).contains("mm.input_projection.weight"));

    // ffn_up is [64, 32]: its two dimensions swapped keep its size and break its shape.
    let path = broken("shape", |b| {
        let at = after_string(b, "v.blk.0.ffn_up.weight") + 4;
        let (d0, d1) = (b[at..at + 8].to_vec(), b[at + 8..at + 16].to_vec());
        b[at..at + 8].copy_from_slice(&d1);
        b[at + 8..at + 16].copy_from_slice(&d0);
    });
    let err = load_error(&path);
    assert!(
        err.contains("v.blk.0.ffn_up.weight")
            && err.contains("[32, 64]")
            && err.contains("[64, 32]"),
        "{err}"
    );
}

/// An edit of a file's bytes.
type Edit = fn(&mut Vec<u8>);

#[test]
fn hostile_metadata_and_truncation_are_errors_not_panics() {
    // (scratch file tag, edit of the f16 file's bytes, what the error names)
    let cases: [(&str, Edit, &str); 7] = [
        (
            "type",
            |b| {
                // A tensor entry: name, dimension count, dimensions, type.
                let at = after_string(b, "v.blk.0.attn_q.weight");
                let dims = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
                let type_at = at + 4 + 8 * dims;
                b[type_at..type_at + 4].copy_from_slice(&39u32.to_le_bytes());
            },
            "v.blk.0.attn_q.weight",
        ),
        (
            "image-size",
            |b| {
                let at = value_of(b, "clip.vision.image_size");
                b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            },
            "clip.vision.image_size",
        ),
        (
            "scale",
            |b| {
                let at = value_of(b, "clip.vision.projector.scale_factor");
                b[at..at + 4].copy_from_slice(&3u32.to_le_bytes());
            },
            "scale factor 3",
        ),
        (
            "heads",
            |b| {
                let at = value_of(b, "clip.vision.attention.head_count");
                b[at..at + 4].copy_from_slice(&3u32.to_le_bytes());
            },
            "heads",
        ),
        (
            "layers",
            |b| {
                let at = value_of(b, "clip.vision.block_count");
                b[at..at + 4].copy_from_slice(&1000u32.to_le_bytes());
            },
            "v.blk.2.",
        ),
        (
            "mean",
            |b| {
                let at = after_string(b, "clip.vision.image_mean");
                b[at - 1] = b'X';
            },
            "clip.vision.image_mean",
        ),
        ("truncated", |b| b.truncate(b.len() - 100), "truncated"),
    ];
    for (tag, edit, expected) in cases {
        let err = load_error(&broken(tag, edit));
        assert!(err.contains(expected), "{tag}: {err}");
    }
}

/// The language model's GGUF converted beside the mmproj loads, and the projector maps into its
/// hidden size (what a caller pairing the two files must check). Its logits are not compared:
/// the fixture's text settings (sliding pattern 2, `query_pre_attn_scalar` 24) have no GGUF
/// keys, so llama.cpp's file describes another text model (scripts/make_mmproj_fixtures.py).
#[test]
fn the_language_model_gguf_loads_and_takes_the_projectors_width() {
    use sluice_model::{LoadOptions, Model};
    let model = Model::load(&gguf("gemma3-vision-f16.gguf"), &LoadOptions::default()).unwrap();
    let encoder = Gemma3VisionEncoder::load_gguf(&gguf(F16), None).unwrap();
    assert_eq!(
        encoder.config().text_hidden_size,
        model.config().hidden_size
    );
}
