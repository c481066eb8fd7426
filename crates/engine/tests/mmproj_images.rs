//! A GGUF language model served with llama.cpp's projector file, loaded the way the server
//! loads it (`DirectoryLoader`): fixtures/gguf/gemma3-vision-f16.gguf beside
//! mmproj-gemma3-vision-{f16,q8_0}.gguf, against the Hugging Face directory they were
//! converted from (fixtures/models/gemma3-vision).
//!
//! The text GGUF cannot state two of the directory's settings (no GGUF key for the sliding
//! pattern nor `query_pre_attn_scalar`: llama.cpp takes every 6th layer global and the head
//! size), so the directory compared is the fixture with its config saying what the GGUF
//! means: both layers sliding, `query_pre_attn_scalar` 16. Weights, tokenizer, processor and
//! encoder are the fixture's own.
//!
//! The same for Qwen2.5-VL (fixtures/gguf/qwen2_5-vl-f16.gguf beside
//! mmproj-qwen2_5-vl-f16.gguf, from fixtures/models/qwen2_5-vl): the projector file states no
//! window size (llama.cpp takes 112 pixels) nor pixel budget (the processor's defaults), so the
//! directory compared says those.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sluice_engine::pool::{DirectoryLoader, LoadSettings, LoadedModel, ModelLoader};
use sluice_engine::{Event, GenerationRequest, ImageInput, SamplingParams};
use sluice_model::architectures::registry::VisionEncoderKind;
use sluice_model::WeightDtype;
use sluice_text::Tokenizer;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn hf_fixture() -> PathBuf {
    root().join("fixtures/models/gemma3-vision")
}

fn gguf(name: &str) -> PathBuf {
    root().join("fixtures/gguf").join(name)
}

const TEXT: &str = "gemma3-vision-f16.gguf";

fn loader() -> DirectoryLoader {
    DirectoryLoader::new(LoadSettings {
        dtype: Some(WeightDtype::F32),
        ..LoadSettings::with_fixed_kv(4, 4 << 20)
    })
}

/// The fixture directory with its config saying what the text GGUF means (module docs).
fn hf_as_the_gguf_reads_it() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(hf_fixture()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if name != "config.json" {
            std::os::unix::fs::symlink(&path, dir.path().join(name)).unwrap();
        }
    }
    let text = std::fs::read_to_string(hf_fixture().join("config.json")).unwrap();
    let mut config: Value = serde_json::from_str(&text).unwrap();
    let t = &mut config["text_config"];
    t["layer_types"] = serde_json::json!(["sliding_attention", "sliding_attention"]);
    t["sliding_window_pattern"] = 6.into();
    t["_sliding_window_pattern"] = 6.into();
    t["query_pre_attn_scalar"] = 16.into();
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    dir
}

/// The reference's `prompt` up to its image's end (the image's run is 9..25): all sliding
/// layers with a window of 8 let the last position see most of the image, which the whole
/// prompt's would not. Its ids and its image files.
fn reference_prompt() -> (Vec<u32>, Vec<String>) {
    let text = std::fs::read_to_string(hf_fixture().join("reference.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let ids = (v["prompt"]["input_ids"].as_array().unwrap().iter())
        .map(|x| x.as_u64().unwrap() as u32)
        .take(26)
        .collect();
    let images = (v["prompt"]["images"].as_array().unwrap().iter())
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    (ids, images)
}

/// Greedy tokens and the top-5 log-probabilities after the prompt, for `image` in the prompt.
fn generate(model: &LoadedModel, image: &str, max_tokens: u32) -> (Vec<u32>, Vec<(u32, f32)>) {
    let (prompt, files) = reference_prompt();
    let image = hf_fixture().join("images").join(image);
    generate_from(model, prompt, &vec![image; files.len()], max_tokens)
}

/// Greedy tokens and the top-5 log-probabilities after `prompt`, whose image runs take
/// `images` in order.
fn generate_from(
    model: &LoadedModel,
    prompt: Vec<u32>,
    images: &[PathBuf],
    max_tokens: u32,
) -> (Vec<u32>, Vec<(u32, f32)>) {
    let input = model.images.as_ref().expect("takes images");
    let encoded = (images.iter())
        .map(|path| input.encode(&std::fs::read(path).unwrap()).unwrap())
        .collect();
    let images = std::sync::Arc::new(input.prompt_images(&prompt, encoded).unwrap());
    let request = GenerationRequest {
        sampling: SamplingParams {
            logprobs: Some(5),
            temperature: 0.0,
            ..SamplingParams::default()
        },
        images,
        ..GenerationRequest::greedy(prompt, max_tokens)
    };
    let mut stream = model.engine.submit(request).unwrap();
    let (mut tokens, mut tops) = (Vec::new(), Vec::new());
    while let Some(event) = stream.blocking_recv() {
        if let Event::Delta {
            token_ids,
            logprobs,
            ..
        } = event
        {
            tokens.extend(token_ids);
            tops.extend(logprobs.into_iter().map(|l| l.top));
        }
    }
    (tokens, tops.swap_remove(0))
}

/// Largest difference between two top-k lists' log-probabilities of the same tokens; infinite
/// when they name different tokens.
fn top_diff(a: &[(u32, f32)], b: &[(u32, f32)]) -> f32 {
    let ids = |t: &[(u32, f32)]| {
        let mut ids: Vec<u32> = t.iter().map(|p| p.0).collect();
        ids.sort();
        ids
    };
    if ids(a) != ids(b) {
        return f32::INFINITY;
    }
    (a.iter())
        .map(|(id, lp)| (lp - b.iter().find(|p| p.0 == *id).unwrap().1).abs())
        .fold(0.0, f32::max)
}

const IMAGE: &str = "photo444_64x40.jpg";
const OTHER_IMAGE: &str = "rgb_32x32.png";
const TOKENS: u32 = 8;

/// Log-probabilities of the top 5 after the prompt, f16 projector file against the directory
/// (bf16 weights, read as f32): 5e-6 measured.
const F16_TOLERANCE: f32 = 1e-4;
/// The same with the q8_0 projector file (the encoder layers' matrices in q8_0): 0.016
/// measured, where another image changes which tokens are the top 5.
const Q8_0_TOLERANCE: f32 = 5e-2;

#[test]
fn a_gguf_model_with_its_mmproj_gives_the_directorys_greedy_tokens() {
    let hf_dir = hf_as_the_gguf_reads_it();
    let hf = loader().load(hf_dir.path()).unwrap();
    let (hf_tokens, hf_top) = generate(&hf, IMAGE, TOKENS);
    // The comparison sees the image: another one moves the alternatives far past the
    // tolerances below.
    let (_, other_top) = generate(&hf, OTHER_IMAGE, 1);
    hf.engine.shutdown();
    let moved = top_diff(&other_top, &hf_top);
    assert!(
        moved > 10.0 * Q8_0_TOLERANCE,
        "another image moved it {moved}"
    );

    // Found beside it: mmproj-gemma3-vision-f16.gguf is named for gemma3-vision-f16.gguf.
    let f16 = loader().load(&gguf(TEXT)).unwrap();
    let images = f16
        .images
        .as_ref()
        .expect("the projector beside it is found");
    assert_eq!(images.tokens_per_image(), Some(16));
    let (tokens, top) = generate(&f16, IMAGE, TOKENS);
    f16.engine.shutdown();
    assert_eq!(tokens, hf_tokens);
    // f16 weights in the projector file (the directory's are bf16, loaded as f32 here).
    let diff = top_diff(&top, &hf_top);
    assert!(diff < F16_TOLERANCE, "f16 mmproj: logprobs off by {diff}");

    // q8_0: the encoder layers' matrices quantized; the first token's alternatives stay within
    // its quantization noise, and the greedy tokens are the same.
    let q8 = loader()
        .with_projector(gguf(TEXT), gguf("mmproj-gemma3-vision-q8_0.gguf"))
        .load(&gguf(TEXT))
        .unwrap();
    let (tokens, top) = generate(&q8, IMAGE, TOKENS);
    q8.engine.shutdown();
    let diff = top_diff(&top, &hf_top);
    assert!(diff < Q8_0_TOLERANCE, "q8_0 mmproj: logprobs off by {diff}");
    assert_eq!(tokens, hf_tokens, "q8_0 mmproj");
}

#[test]
fn the_estimate_counts_the_projector_file() {
    let alone = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(gguf(TEXT), alone.path().join(TEXT)).unwrap();
    let without = loader().estimate_bytes(&alone.path().join(TEXT)).unwrap();
    let with = loader().estimate_bytes(&gguf(TEXT)).unwrap();
    let mmproj = std::fs::metadata(gguf("mmproj-gemma3-vision-f16.gguf")).unwrap();
    assert_eq!(with - without, mmproj.len() as usize);
    let loaded = loader().load(&alone.path().join(TEXT)).unwrap();
    loaded.engine.shutdown();
    assert!(loaded.images.is_none(), "no projector beside it");
}

fn load_error(loader: DirectoryLoader, model: &Path) -> String {
    loader.load(model).unwrap_err().to_string()
}

#[test]
fn a_projector_that_does_not_fit_the_model_is_refused_at_load() {
    let f16 = gguf("mmproj-gemma3-vision-f16.gguf");
    let err = load_error(
        loader().with_projector(gguf("llama-f16.gguf"), f16.clone()),
        &gguf("llama-f16.gguf"),
    );
    assert!(err.contains("takes no images"), "{err}");
    let err = load_error(
        loader().with_projector(gguf("gemma3-p6-f16.gguf"), gguf(TEXT)),
        &gguf("gemma3-p6-f16.gguf"),
    );
    assert!(err.contains("not an mmproj file"), "{err}");
    // gemma3-p6's vocabulary is not Gemma 3's: it has no image tokens.
    let err = load_error(
        loader().with_projector(gguf("gemma3-p6-f16.gguf"), f16.clone()),
        &gguf("gemma3-p6-f16.gguf"),
    );
    assert!(err.contains("<start_of_image>"), "{err}");
    let tokenizer = Tokenizer::from_dir(&hf_fixture()).unwrap();
    let err = ImageInput::load_mmproj(&f16, VisionEncoderKind::Gemma3, 32, None, &tokenizer)
        .unwrap_err()
        .to_string();
    assert!(err.contains("hidden size is 32"), "{err}");
}

#[test]
fn a_gemma3_gguf_without_a_projector_named_for_it_serves_text_only() {
    // fixtures/gguf holds several models and two projectors, neither named for gemma3-p6.
    let loaded = loader().load(&gguf("gemma3-p6-f16.gguf")).unwrap();
    loaded.engine.shutdown();
    assert!(loaded.images.is_none());
}

/// fixtures/models/qwen2_5-vl with what its GGUF files mean (module docs): a window of 112
/// pixels, the processor's default pixel budget.
fn qwen_as_the_gguf_reads_it() -> tempfile::TempDir {
    let fixture = root().join("fixtures/models/qwen2_5-vl");
    let dir = tempfile::tempdir().unwrap();
    let edited = ["config.json", "preprocessor_config.json"];
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if !edited.iter().any(|e| name == *e) {
            std::os::unix::fs::symlink(&path, dir.path().join(name)).unwrap();
        }
    }
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(fixture.join(name)).unwrap()).unwrap()
    };
    let mut config = read("config.json");
    config["vision_config"]["window_size"] = 112.into();
    let mut processor = read("preprocessor_config.json");
    let (min, max) = (56 * 56, 12_845_056);
    processor["min_pixels"] = min.into();
    processor["max_pixels"] = max.into();
    processor["size"] = serde_json::json!({"shortest_edge": min, "longest_edge": max});
    for (name, value) in edited.iter().zip([config, processor]) {
        std::fs::write(dir.path().join(name), value.to_string()).unwrap();
    }
    dir
}

#[test]
fn a_qwen_gguf_model_with_its_mmproj_gives_the_directorys_greedy_tokens() {
    let fixture = root().join("fixtures/models/qwen2_5-vl");
    let text = std::fs::read_to_string(fixture.join("reference.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    for name in ["prompt", "two_images"] {
        let prompt: Vec<u32> = (v[name]["input_ids"].as_array().unwrap().iter())
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let images: Vec<PathBuf> = (v[name]["images"].as_array().unwrap().iter())
            .map(|x| fixture.join("images").join(x.as_str().unwrap()))
            .collect();
        let hf_dir = qwen_as_the_gguf_reads_it();
        let hf = loader().load(hf_dir.path()).unwrap();
        let (hf_tokens, hf_top) = generate_from(&hf, prompt.clone(), &images, TOKENS);
        hf.engine.shutdown();
        // Found beside it: mmproj-qwen2_5-vl-f16.gguf is named for qwen2_5-vl-f16.gguf.
        let model = loader().load(&gguf("qwen2_5-vl-f16.gguf")).unwrap();
        let input = model
            .images
            .as_ref()
            .expect("the projector beside it is found");
        assert_eq!(input.kind(), VisionEncoderKind::Qwen2_5Vl);
        assert_eq!(
            input.tokens_per_image(),
            None,
            "as many tokens as the image's size"
        );
        let (tokens, top) = generate_from(&model, prompt, &images, TOKENS);
        model.engine.shutdown();
        assert_eq!(tokens, hf_tokens, "{name}");
        let diff = top_diff(&top, &hf_top);
        assert!(diff < F16_TOLERANCE, "{name}: logprobs off by {diff}");
    }
}
