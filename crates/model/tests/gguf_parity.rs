//! GGUF files converted from the fixtures by llama.cpp's own converter
//! (`scripts/make_gguf_fixtures.py`) give the same model as the safetensors directories: the
//! same config, and bit-identical logits when the weights are kept in the same format.

mod common;

use std::path::PathBuf;

use common::*;
use sluice_model::{LoadOptions, Model, ModelConfig, ModelFiles, WeightDtype};

fn gguf_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/gguf")
        .join(file)
}

fn load_gguf(file: &str, dtype: Option<WeightDtype>) -> Model {
    Model::load(&gguf_path(file), &LoadOptions { dtype }).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The fields a GGUF file states, or implies by which tensors it holds.
fn comparable(c: &ModelConfig) -> ModelConfig {
    ModelConfig {
        // GGUF carries no dtype field, and its eos set comes from the tokenizer metadata.
        checkpoint_dtype: None,
        eos_token_ids: Vec::new(),
        bos_token_id: None,
        ..c.clone()
    }
}

#[test]
fn gguf_config_equals_the_hugging_face_config() {
    for name in GGUF_FIXTURES {
        let hf = ModelFiles::config_at(&fixture_dir(name)).unwrap();
        let gguf = ModelFiles::config_at(&gguf_path(&format!("{name}-f16.gguf"))).unwrap();
        let (mut a, b) = (comparable(&hf), comparable(&gguf));
        if let (
            sluice_model::RopeScaling::Llama3 { .. },
            sluice_model::RopeScaling::FreqFactors(_),
        ) = (&a.rope.scaling, &b.rope.scaling)
        {
            // Llama 3.1 scaling arrives as the per-frequency divisors the converter computed
            // from it (checked through the logits below).
            a.rope.scaling = b.rope.scaling.clone();
        }
        if name == "mistral" {
            // llama.cpp's converter writes no sliding window for Mistral (llama.cpp attends to
            // the whole context), so neither does a model loaded from the GGUF file.
            // Mistral's files are `llama` files.
            assert_eq!(a.sliding_window, Some(8));
            a.sliding_window = None;
            a.architecture = "LlamaForCausalLM".into();
        }
        assert_eq!(a, b, "{name}");
    }
}

#[test]
fn f16_gguf_logits_are_bit_identical_to_the_safetensors_model_kept_in_f16() {
    for name in GGUF_FIXTURES {
        let reference = reference(name);
        let hf = prefill_all_positions(&load(name, WeightDtype::F16), &reference.prompt_ids);
        // As stored: the file's matrices are f16, its norms f32.
        let gguf = prefill_all_positions(
            &load_gguf(&format!("{name}-f16.gguf"), None),
            &reference.prompt_ids,
        );
        if name == "mistral" {
            // No sliding window from the GGUF file (above): the first 8 positions, which the
            // window of 8 does not cut, are identical.
            let vocab = hf.vocab_size;
            assert_eq!(hf.data[..8 * vocab], gguf.data[..8 * vocab]);
            assert_ne!(hf.data, gguf.data);
        } else if name == "llama3-rope-scaling" {
            // The converter's divisors are rounded to f32, so RoPE angles differ in the last
            // bits; everything else is identical.
            let max_diff = hf
                .data
                .iter()
                .zip(&gguf.data)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(max_diff < 1e-4, "{name}: {max_diff}");
        } else {
            assert_eq!(hf.data, gguf.data, "{name}");
        }
    }
}

#[test]
fn f32_gguf_reproduces_transformers() {
    let reference = reference("llama");
    let hf = prefill_all_positions(&load("llama", WeightDtype::F32), &reference.prompt_ids);
    let gguf = prefill_all_positions(&load_gguf("llama-f32.gguf", None), &reference.prompt_ids);
    assert_eq!(hf.data, gguf.data);
}

#[test]
fn gguf_weight_bytes_estimate_is_exact() {
    for (file, dtype) in [
        ("llama-f16.gguf", None),
        ("qwen2-f16.gguf", Some(WeightDtype::F32)),
        ("llama-f32.gguf", Some(WeightDtype::F16)),
        ("qwen2-q256-q4_k_m.gguf", None),
        ("qwen2-q256-f16.gguf", WeightDtype::from_name("q4_K")),
        ("qwen2-f16.gguf", WeightDtype::from_name("q4_K")),
        // Stacked experts: counted once per expert.
        ("mixtral-f16.gguf", None),
        ("mixtral-f16.gguf", WeightDtype::from_name("q8_0")),
        ("qwen3-moe-q256-q4_k_m.gguf", None),
        ("qwen3-moe-q256-f16.gguf", WeightDtype::from_name("q4_K")),
    ] {
        let files = ModelFiles::open(&gguf_path(file)).unwrap();
        let model = Model::from_files(&files, &LoadOptions { dtype }).unwrap();
        assert_eq!(
            files.loaded_bytes(dtype),
            model.weight_bytes(),
            "{file} {dtype:?}"
        );
    }
}

#[test]
fn a_split_gguf_set_loads_as_the_one_file_it_was_split_from() {
    // `llama-split-0000N-of-00003.gguf`: the converter's `--split-max-tensors 8` on the llama
    // fixture; any part names the whole set.
    let reference = reference("llama");
    let whole = prefill_all_positions(&load_gguf("llama-f16.gguf", None), &reference.prompt_ids);
    for part in 1..=3 {
        let file = format!("llama-split-0000{part}-of-00003.gguf");
        assert_eq!(ModelFiles::default_name(&gguf_path(&file)), "llama-split");
        assert_eq!(ModelFiles::is_model(&gguf_path(&file)), part == 1, "{file}");
        let split = prefill_all_positions(&load_gguf(&file, None), &reference.prompt_ids);
        assert_eq!(whole.data, split.data, "{file}");
    }
}

#[test]
fn a_split_gguf_set_with_a_missing_part_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("sluice-split-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for part in [1, 3] {
        let file = format!("llama-split-0000{part}-of-00003.gguf");
        std::fs::copy(gguf_path(&file), dir.join(&file)).unwrap();
    }
    let err = match ModelFiles::open(&dir.join("llama-split-00001-of-00003.gguf")) {
        Ok(_) => panic!("a split set without its second part opened"),
        Err(e) => e.to_string(),
    };
    std::fs::remove_dir_all(&dir).ok();
    assert!(err.contains("00002-of-00003"), "{err}");
}
