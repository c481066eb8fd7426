//! sluice against llama.cpp on the same GGUF + mmproj files with an image in the prompt: the
//! next-token distribution after text, an image and text, as llama-server computed it
//! (fixtures/gguf/llamacpp-image-reference.json, written by scripts/llamacpp_image_reference.py
//! through `/completion` with `multimodal_data`), for the Gemma 3 and Qwen2.5-VL fixtures.
//!
//! The images are ones neither server resizes (Gemma's fixture takes 32x32; 112x112 is a whole
//! number of Qwen2.5-VL's merged patches), so both encode the same pixels; the prompt is built
//! as llama.cpp's mtmd builds it: the text before the image with its BOS, the family's image
//! begin token, one image token per embedding row, its end token, the text after.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use sluice_engine::pool::{DirectoryLoader, LoadSettings, LoadedModel, ModelLoader};
use sluice_engine::{Event, GenerationRequest, PromptOutputs};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn reference() -> Value {
    let path = root().join("fixtures/gguf/llamacpp-image-reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The model as served by default: its matrices in their stored types (f16).
fn load(model: &str, mmproj: &str) -> LoadedModel {
    let gguf = root().join("fixtures/gguf");
    DirectoryLoader::new(LoadSettings::with_fixed_kv(4, 4 << 20))
        .with_projector(gguf.join(model), gguf.join(mmproj))
        .load(&gguf.join(model))
        .unwrap()
}

/// Every token's log-probability after the prompt of `case` with the image file `image`, and
/// the prompt's length.
fn distribution(
    case: &Value,
    image: &str,
    (before, after): (&str, &str),
    image_marks: [&str; 2],
) -> (Vec<f32>, usize) {
    let model = load(
        case["model"].as_str().unwrap(),
        case["mmproj"].as_str().unwrap(),
    );
    let input = model.images.as_ref().expect("takes images");
    let bytes = std::fs::read(root().join(image)).unwrap();
    let encoded = input.encode(&bytes).unwrap();
    let tokenizer = &model.tokenizer;
    let id = |text: &str| tokenizer.token_to_id(text).unwrap();
    let image_token = match image_marks[0] {
        "<start_of_image>" => id("<image_soft_token>"),
        _ => id("<|image_pad|>"),
    };
    let mut prompt = tokenizer.encode(before, true).unwrap();
    prompt.push(id(image_marks[0]));
    prompt.extend(std::iter::repeat_n(image_token, encoded.tokens));
    prompt.push(id(image_marks[1]));
    prompt.extend(tokenizer.encode(after, false).unwrap());
    let prompt_len = prompt.len();
    let vocab = case["logprobs"].as_array().unwrap().len();
    let images = Arc::new(input.prompt_images(&prompt, vec![encoded]).unwrap());
    let request = GenerationRequest {
        images,
        // Every token's log-probability at the position after the prompt.
        prompt_outputs: PromptOutputs {
            next_token_candidates: (0..vocab as u32).collect(),
            ..PromptOutputs::default()
        },
        ..GenerationRequest::greedy(prompt, 1)
    };
    let mut stream = model.engine.submit(request).unwrap();
    let mut row = vec![f32::NEG_INFINITY; vocab];
    while let Some(event) = stream.blocking_recv() {
        if let Event::Prompt { scores, .. } = event {
            for &(token, logprob) in &scores.next_token {
                row[token as usize] = logprob;
            }
        }
    }
    model.engine.shutdown();
    (row, prompt_len)
}

/// KL(p ‖ q) of two rows of log-probabilities.
fn kl(p: &[f32], q: &[f32]) -> f64 {
    (p.iter().zip(q))
        .map(|(&p, &q)| f64::from(p).exp() * f64::from(p - q))
        .sum()
}

fn argmax(row: &[f32]) -> usize {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]))
        .unwrap()
}

/// KL(llama.cpp ‖ sluice) measured at most 3.1e-7 (each server's f16 rounding; llama.cpp's
/// log-probabilities are kept to 6 decimals); the bound leaves some thirty times that.
const KL_BOUND: f64 = 1e-5;
/// The largest difference of one token's log-probability, measured at most 4.8e-3 (Gemma 3;
/// Qwen2.5-VL 2.2e-3). Another image moves Gemma's by 0.16, Qwen's by 1.27.
const LOGPROB_BOUND: f32 = 1e-2;

/// Checks sluice's distribution after the prompt of fixture `name` against llama.cpp's, and
/// that another image (`other`, which either server resizes) moves it far outside the bounds,
/// so the comparison sees the image.
fn agrees(name: &str, image_marks: [&str; 2], other: &str) {
    let reference = reference();
    let text = (
        reference["before"].as_str().unwrap(),
        reference["after"].as_str().unwrap(),
    );
    let case = &reference["models"][name];
    let llama: Vec<f32> = (case["logprobs"].as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    let image = case["image"].as_str().unwrap();
    let (ours, prompt_len) = distribution(case, image, text, image_marks);
    assert_eq!(
        prompt_len as u64,
        case["prompt_tokens"].as_u64().unwrap(),
        "{name}: the prompt llama-server evaluated has another length"
    );
    let divergence = kl(&llama, &ours);
    let worst = largest_difference(&llama, &ours);
    eprintln!("{name}: KL(llama.cpp ‖ sluice) {divergence:e}, largest log-probability difference {worst:e}");
    assert_eq!(
        argmax(&ours),
        argmax(&llama),
        "{name}: another most likely token"
    );
    assert!(divergence < KL_BOUND, "{name}: KL {divergence}");
    assert!(
        worst < LOGPROB_BOUND,
        "{name}: log-probabilities off by {worst}"
    );
    let (moved, _) = distribution(case, other, text, image_marks);
    let moved_by = largest_difference(&llama, &moved);
    eprintln!("{name}: another image moves a log-probability by {moved_by}");
    assert!(
        moved_by > 10.0 * LOGPROB_BOUND,
        "{name}: another image moved it only {moved_by}"
    );
}

fn largest_difference(a: &[f32], b: &[f32]) -> f32 {
    (a.iter().zip(b))
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}

/// An image of another size, which both families resize.
const OTHER: &str = "fixtures/models/gemma3-vision/images/photo444_64x40.jpg";

#[test]
fn gemma3_with_its_mmproj_agrees_with_llama_cpp_on_an_image_prompt() {
    let marks = ["<start_of_image>", "<end_of_image>"];
    agrees("gemma3-vision", marks, OTHER);
}

#[test]
fn qwen2_5_vl_with_its_mmproj_agrees_with_llama_cpp_on_an_image_prompt() {
    let marks = ["<|vision_start|>", "<|vision_end|>"];
    agrees("qwen2_5-vl", marks, OTHER);
}
