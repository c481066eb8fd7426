//! Qwen2-VL preprocessing against transformers' `Qwen2VLImageProcessor` on the fixture's images
//! (fixtures/models/qwen2_5-vl, made by scripts/make_qwen_vl_fixture.py).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use sluice_vision::{decode, DecodeLimits, GridThw, Qwen2VlImagePrompt, Qwen2VlPreprocessor};

#[derive(Deserialize)]
struct Reference {
    images: BTreeMap<String, ImageReference>,
    prompt: PromptReference,
    two_images: PromptReference,
}

/// A chat-templated prompt as `Qwen2_5_VLProcessor` expanded and tokenized it.
#[derive(Deserialize)]
struct PromptReference {
    text: String,
    images: Vec<String>,
    input_ids: Vec<u32>,
    mm_token_type_ids: Vec<u32>,
    image_grid_thw: Vec<[usize; 3]>,
}

#[derive(Deserialize)]
struct ImageReference {
    resized_height: usize,
    resized_width: usize,
    image_grid_thw: [usize; 3],
    /// The processor's resized image, `[3, H, W]`.
    resized_levels: Vec<u8>,
    pixel_values_shape: [usize; 2],
    /// `pixel_values[0]`, exactly.
    pixel_values_first_row: Vec<f32>,
    features_shape: [usize; 2],
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models/qwen2_5-vl")
}

fn reference() -> Reference {
    let text = std::fs::read_to_string(fixture().join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference")
}

fn processor() -> Qwen2VlPreprocessor {
    Qwen2VlPreprocessor::from_model_dir(&fixture()).expect("processor config")
}

/// `[3, H, W]` to `[H, W, 3]`.
fn interleaved(planar: &[u8]) -> Vec<u8> {
    let plane = planar.len() / 3;
    (0..plane)
        .flat_map(|i| [planar[i], planar[plane + i], planar[2 * plane + i]])
        .collect()
}

#[test]
fn both_config_files_give_the_same_processor() {
    let flat = processor();
    assert_eq!((flat.min_pixels, flat.max_pixels), (56 * 56, 28 * 28 * 12));
    let text = std::fs::read_to_string(fixture().join("processor_config.json")).unwrap();
    let nested = Qwen2VlPreprocessor::from_json(&text, true, &fixture()).unwrap();
    assert_eq!(nested, flat);
}

#[test]
fn sizes_grids_and_token_counts_equal_the_reference() {
    let processor = processor();
    for (name, expected) in &reference().images {
        let image = decode(
            &std::fs::read(fixture().join("images").join(name)).unwrap(),
            DecodeLimits::default(),
        )
        .expect(name);
        let size = processor.resized_size(image.width, image.height).unwrap();
        assert_eq!(
            size,
            (expected.resized_height, expected.resized_width),
            "{name}"
        );
        let grid = processor.grid(image.width, image.height).unwrap();
        let [t, h, w] = expected.image_grid_thw;
        assert_eq!(grid, GridThw { t, h, w }, "{name}");
        assert_eq!(
            expected.pixel_values_shape,
            [grid.patches(), processor.patch_len()]
        );
        let tokens = processor.image_tokens(image.width, image.height).unwrap();
        assert_eq!(tokens, expected.features_shape[0], "{name}");
    }
}

#[test]
fn resized_levels_equal_the_reference_bit_for_bit_for_lossless_images() {
    let processor = processor();
    let mut checked = 0;
    for (name, expected) in &reference().images {
        if name.ends_with(".jpg") {
            continue;
        }
        let bytes = std::fs::read(fixture().join("images").join(name)).unwrap();
        let image = decode(&bytes, DecodeLimits::default()).unwrap();
        let (levels, h, w) = processor.resized_levels(&image).unwrap();
        assert_eq!((h, w), (expected.resized_height, expected.resized_width));
        let wanted = interleaved(&expected.resized_levels);
        let differ = levels.iter().zip(&wanted).filter(|(a, b)| a != b).count();
        assert_eq!(
            differ,
            0,
            "{name}: {differ} of {} levels differ",
            levels.len()
        );
        // The whole path, decode to patches, gives the processor's first row bit for bit.
        let patches = processor.patches(&image).unwrap();
        let first = &patches.values[..processor.patch_len()];
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(first),
            bits(&expected.pixel_values_first_row),
            "{name}"
        );
        checked += 1;
    }
    // RGB PNGs shrunk, enlarged and unchanged in area, a grayscale one enlarged.
    assert_eq!(checked, 5);
}

/// JPEG decoders round differently (see tests/reference.rs); the bicubic resize passes that on.
/// Measured on photo_64x48.jpg (4:4:4): at most 2 levels, mean 0.033 (bicubic's negative lobes
/// pass a decoder's difference on a little further than bilinear); the bound is that plus one.
#[test]
fn jpeg_levels_are_within_a_few_levels_of_the_reference() {
    let processor = processor();
    let name = "photo_64x48.jpg";
    let expected = &reference().images[name];
    let bytes = std::fs::read(fixture().join("images").join(name)).unwrap();
    let (levels, _, _) = processor
        .resized_levels(&decode(&bytes, DecodeLimits::default()).unwrap())
        .unwrap();
    let wanted = interleaved(&expected.resized_levels);
    let diffs: Vec<i32> = (levels.iter().zip(&wanted))
        .map(|(&a, &b)| (i32::from(a) - i32::from(b)).abs())
        .collect();
    let max = diffs.iter().copied().max().unwrap();
    let mean = diffs.iter().sum::<i32>() as f64 / diffs.len() as f64;
    eprintln!("{name}: max {max}, mean {mean:.3} levels");
    assert!(max <= 3 && mean < 0.5, "{name}: max {max}, mean {mean}");
}

#[test]
fn patches_from_the_reference_levels_normalise_as_the_processor_does() {
    let processor = processor();
    for (name, expected) in &reference().images {
        let levels = interleaved(&expected.resized_levels);
        let patches =
            processor.patches_from_levels(&levels, expected.resized_height, expected.resized_width);
        let first = &patches.values[..processor.patch_len()];
        for (i, (a, b)) in first
            .iter()
            .zip(&expected.pixel_values_first_row)
            .enumerate()
        {
            assert_eq!(a.to_bits(), b.to_bits(), "{name}[{i}]: {a} vs {b}");
        }
    }
}

#[test]
fn expanded_prompts_tokenize_to_the_processors_ids() {
    let processor = processor();
    let prompt = Qwen2VlImagePrompt::from_model_dir(&fixture()).unwrap();
    let tokenizer = tokenizers::Tokenizer::from_file(fixture().join("tokenizer.json")).unwrap();
    assert_eq!(
        tokenizer.token_to_id(&prompt.image_token),
        Some(prompt.image_token_id)
    );
    assert_eq!(
        tokenizer.token_to_id("<|vision_start|>"),
        Some(prompt.vision_start_token_id)
    );
    assert_eq!(
        tokenizer.token_to_id("<|vision_end|>"),
        Some(prompt.vision_end_token_id)
    );
    let reference = reference();
    for expected in [&reference.prompt, &reference.two_images] {
        let mut tokens = Vec::new();
        for (name, &[t, h, w]) in expected.images.iter().zip(&expected.image_grid_thw) {
            let bytes = std::fs::read(fixture().join("images").join(name)).unwrap();
            let image = decode(&bytes, DecodeLimits::default()).unwrap();
            let grid = processor.grid(image.width, image.height).unwrap();
            assert_eq!(grid, GridThw { t, h, w }, "{name}");
            tokens.push(grid.tokens(processor.merge_size));
        }
        let text = prompt
            .expand(&expected.text, &tokens)
            .expect("one pad per image");
        let ids = tokenizer.encode(text, true).unwrap().get_ids().to_vec();
        assert_eq!(ids, expected.input_ids);
        // The image tokens are exactly the positions the processor marks as image (type 1),
        // each run right after a vision start and before a vision end.
        let marked: Vec<u32> = (ids.iter())
            .map(|&id| u32::from(id == prompt.image_token_id))
            .collect();
        assert_eq!(marked, expected.mm_token_type_ids);
        let starts: Vec<usize> = (ids.iter().enumerate())
            .filter(|(_, &id)| id == prompt.vision_start_token_id)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(starts.len(), tokens.len());
        for (&start, &n) in starts.iter().zip(&tokens) {
            assert!(ids[start + 1..=start + n]
                .iter()
                .all(|&id| id == prompt.image_token_id));
            assert_eq!(ids[start + n + 1], prompt.vision_end_token_id);
        }
    }
}
