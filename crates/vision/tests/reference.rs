//! Decoding and preprocessing against transformers' Gemma 3 processor on the fixture's images
//! (fixtures/models/gemma3-vision, made by scripts/make_vision_fixtures.py).

use std::path::PathBuf;

use serde::Deserialize;
use sluice_vision::{
    decode, DecodeLimits, Gemma3ImagePrompt, ImageError, RgbImage, SiglipPreprocessor,
};

#[derive(Deserialize)]
struct Reference {
    images: std::collections::BTreeMap<String, ImageReference>,
    prompt: PromptReference,
}

/// One prompt with one image, as `Gemma3Processor` expanded and tokenized it.
#[derive(Deserialize)]
struct PromptReference {
    text: String,
    input_ids: Vec<u32>,
    token_type_ids: Vec<u32>,
}

#[derive(Deserialize)]
struct ImageReference {
    pixel_values_shape: Vec<usize>,
    /// The processor's `pixel_values` are `(level - 127.5) / 127.5` in f32 of these.
    pixel_levels: Vec<u8>,
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/gemma3-vision")
}

fn reference() -> Reference {
    let text = std::fs::read_to_string(fixture().join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference")
}

fn image_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture().join("images").join(name)).expect("image")
}

/// The largest and the mean difference between our pixel values and the processor's, in levels
/// (1/127.5).
fn level_diff(ours: &[f32], expected: &ImageReference) -> (f32, f32) {
    assert_eq!(ours.len(), expected.pixel_levels.len());
    let reference = expected
        .pixel_levels
        .iter()
        .map(|&l| (f32::from(l) - 127.5) / 127.5);
    let diffs: Vec<f32> = (ours.iter().zip(reference))
        .map(|(a, b)| (a - b).abs() * 127.5)
        .collect();
    let max = diffs.iter().copied().fold(0.0, f32::max);
    (max, diffs.iter().sum::<f32>() / diffs.len() as f32)
}

#[test]
fn pixel_values_equal_the_reference_processor_bit_for_bit_for_lossless_formats() {
    let processor = SiglipPreprocessor::from_model_dir(&fixture()).expect("processor config");
    assert_eq!((processor.height, processor.width), (32, 32));
    let reference = reference();
    let mut checked = 0;
    for (name, expected) in &reference.images {
        if name.ends_with(".jpg") {
            continue;
        }
        assert_eq!(expected.pixel_values_shape, [3, 32, 32]);
        let image = decode(&image_bytes(name), DecodeLimits::default()).expect(name);
        let ours = processor.pixel_values(&image);
        let reference = expected
            .pixel_levels
            .iter()
            .map(|&l| (f32::from(l) - 127.5) / 127.5);
        let mismatches = (ours.iter().zip(reference))
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(mismatches, 0, "{name}: {mismatches} values differ");
        checked += 1;
    }
    // PNG (RGB, RGBA, grayscale, no resize), lossless WebP (upright and EXIF-rotated), GIF.
    assert_eq!(checked, 7);
}

/// JPEG decoders differ: libjpeg-turbo (under PIL) and zune-jpeg (under the `image` crate)
/// round their inverse DCTs and upsample subsampled chroma differently, so decoded levels
/// differ and the resize averages that down. Measured on these images after resizing: 1 level
/// at most for full-resolution chroma (mean 0.02), 4 for 4:2:0 (mean 0.36) (chroma upsampling is where the
/// decoders differ most), the mean well under a level. The bounds are those measurements plus
/// one level. (Lossless formats are compared bit for bit above.)
#[test]
fn jpeg_pixel_values_are_within_a_few_levels_of_the_reference() {
    let processor = SiglipPreprocessor::from_model_dir(&fixture()).unwrap();
    let reference = reference();
    let cases = [
        ("photo444_64x40.jpg", 2.0),
        ("photo420_40x64.jpg", 5.0),
        ("exif3_36x52.jpg", 2.0),
    ];
    for (name, bound) in cases {
        let image = decode(&image_bytes(name), DecodeLimits::default()).expect(name);
        let ours = processor.pixel_values(&image);
        let expected = &reference.images[name];
        let (max, mean) = level_diff(&ours, expected);
        assert!(
            max <= bound && mean < 0.5,
            "{name}: max {max}, mean {mean} levels"
        );
    }
}

#[test]
fn a_batch_holds_each_image_as_alone() {
    let processor = SiglipPreprocessor::from_model_dir(&fixture()).unwrap();
    let images: Vec<RgbImage> = ["rgb_48x20.png", "gray_23x37.png", "palette_30x26.gif"]
        .iter()
        .map(|n| decode(&image_bytes(n), DecodeLimits::default()).unwrap())
        .collect();
    let batch = processor.batch_pixel_values(&images);
    for (i, image) in images.iter().enumerate() {
        let n = processor.values_per_image();
        assert_eq!(&batch[i * n..][..n], processor.pixel_values(image));
    }
}

/// `bytes` (a PNG) with the IHDR chunk's size replaced and its CRC recomputed.
fn png_claiming(bytes: &[u8], width: u32, height: u32) -> Vec<u8> {
    let mut out = bytes.to_vec();
    assert_eq!(&out[12..16], b"IHDR");
    out[16..20].copy_from_slice(&width.to_be_bytes());
    out[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32(&out[12..29]);
    out[29..33].copy_from_slice(&crc.to_be_bytes());
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[test]
fn a_decompression_bomb_is_refused_from_its_header() {
    let png = image_bytes("rgb_48x20.png");
    // The same header recomputed is the same file: the CRC helper is right.
    assert_eq!(png_claiming(&png, 48, 20), png);
    let bomb = png_claiming(&png, 60_000, 60_000);
    let limits = DecodeLimits::default();
    let err = decode(&bomb, limits).unwrap_err();
    assert_eq!(
        err,
        ImageError::TooLarge {
            width: 60_000,
            height: 60_000,
            max_pixels: limits.max_pixels,
            max_side: limits.max_side,
        }
    );
    // The chunks before the pixel data are enough to refuse it: the header, up to the start of
    // the first IDAT chunk (the decoder reads that far to know the image).
    let idat = bomb.windows(4).position(|w| w == b"IDAT").unwrap();
    let err = decode(&bomb[..idat + 4], limits).unwrap_err();
    assert!(matches!(err, ImageError::TooLarge { .. }), "{err}");
    let exact = DecodeLimits {
        max_pixels: 48 * 20,
        max_side: 48,
    };
    assert!(decode(&png, exact).is_ok());
    let fewer_pixels = DecodeLimits {
        max_pixels: 48 * 20 - 1,
        ..exact
    };
    let shorter_side = DecodeLimits {
        max_side: 47,
        ..exact
    };
    for strict in [fewer_pixels, shorter_side] {
        let err = decode(&png, strict).unwrap_err();
        assert!(matches!(err, ImageError::TooLarge { .. }), "{err}");
    }
    // A thin image of few pixels but a side over the limit is refused too.
    let thin = png_claiming(&png, 1, 40_000);
    assert!(matches!(
        decode(&thin, limits),
        Err(ImageError::TooLarge { .. })
    ));
}

#[test]
fn truncated_and_corrupt_images_are_undecodable() {
    for name in [
        "rgb_48x20.png",
        "photo444_64x40.jpg",
        "lossless_33x50.webp",
        "palette_30x26.gif",
    ] {
        let bytes = image_bytes(name);
        let cut = &bytes[..bytes.len() / 2];
        let err = decode(cut, DecodeLimits::default()).unwrap_err();
        assert!(matches!(err, ImageError::Undecodable(_)), "{name}: {err}");
    }
    let err = decode(b"\x89PNG\r\n\x1a\n", DecodeLimits::default()).unwrap_err();
    assert!(matches!(err, ImageError::Undecodable(_)), "{err}");
}

#[test]
fn a_gif_decodes_to_its_first_frame() {
    use image::codecs::gif::GifEncoder;
    use image::{Delay, Frame, Rgba, RgbaImage};
    let frame = |v: u8| {
        Frame::from_parts(
            RgbaImage::from_pixel(4, 3, Rgba([v, 0, 255 - v, 255])),
            0,
            0,
            Delay::from_numer_denom_ms(10, 1),
        )
    };
    let mut bytes = Vec::new();
    {
        let mut encoder = GifEncoder::new(&mut bytes);
        encoder.encode_frames([frame(200), frame(10)]).unwrap();
    }
    let image = decode(&bytes, DecodeLimits::default()).unwrap();
    assert_eq!((image.width, image.height), (4, 3));
    assert_eq!(&image.pixels[..3], [200, 0, 55]);
}

#[test]
fn an_exif_orientation_turns_the_image_upright() {
    // Stored 44 wide and 28 tall with orientation 6: upright it is 28 wide and 44 tall.
    let image = decode(&image_bytes("exif6_44x28.webp"), DecodeLimits::default()).unwrap();
    assert_eq!((image.width, image.height), (28, 44));
    let image = decode(&image_bytes("exif3_36x52.jpg"), DecodeLimits::default()).unwrap();
    assert_eq!((image.width, image.height), (36, 52));
}

#[test]
fn grayscale_and_alpha_become_rgb_as_the_reference_converts_them() {
    let gray = decode(&image_bytes("gray_23x37.png"), DecodeLimits::default()).unwrap();
    assert!(gray
        .pixels
        .chunks_exact(3)
        .all(|p| p[0] == p[1] && p[1] == p[2]));
    // Alpha 0 composites to white: the fixture's first pixel has alpha 0.
    let rgba = decode(&image_bytes("rgba_40x30.png"), DecodeLimits::default()).unwrap();
    assert_eq!(&rgba.pixels[..3], [255, 255, 255]);
}

#[test]
fn the_expanded_prompt_tokenizes_to_the_processors_ids() {
    let prompt = Gemma3ImagePrompt::from_model_dir(&fixture()).unwrap();
    assert_eq!(prompt.tokens_per_image, 16);
    let reference = reference().prompt;
    let (text, images) = prompt.expand(&reference.text);
    assert_eq!(images, 1);
    let tokenizer = tokenizers::Tokenizer::from_file(fixture().join("tokenizer.json")).unwrap();
    let ids = tokenizer.encode(text, true).unwrap().get_ids().to_vec();
    assert_eq!(ids, reference.input_ids);
    // The soft tokens are exactly the positions the processor marks as image (token type 1).
    let soft = tokenizer.token_to_id(&prompt.image_token).unwrap();
    let marked: Vec<u32> = ids.iter().map(|&id| u32::from(id == soft)).collect();
    assert_eq!(marked, reference.token_type_ids);
}
