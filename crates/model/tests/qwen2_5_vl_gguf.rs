//! Qwen2.5-VL's language model from llama.cpp's GGUF files: `fixtures/gguf/qwen2_5-vl-f16.gguf`
//! and its llama-quantize Q8_0, converted from fixtures/models/qwen2_5-vl by
//! scripts/make_mmproj_fixtures.py (`general.architecture = qwen2vl`, the M-RoPE split as
//! `qwen2vl.rope.dimension_sections = [2, 3, 3, 0]`, Q/K rows not permuted). The reference's
//! image features as input embeddings and `get_rope_index`'s 3-D positions give transformers'
//! logits and greedy continuations, as the checkpoint does (`tests/qwen2_5_vl_prompt.rs`).

mod common;

use std::path::PathBuf;

use common::qwen2_5_vl::{greedy_continuation, max_diff, reference, run_prompt, FIXTURE};
use common::{fixture_dir, prefill_all_positions};
use sluice_gguf::GgufModel;
use sluice_model::vision::Gemma3VisionEncoder;
use sluice_model::{LoadOptions, Model, ModelConfig, ModelFiles, WeightDtype};

fn gguf_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/gguf")
        .join(file)
}

/// A GGUF file's model, its matrices kept in their stored types.
fn gguf_model(file: &str) -> Model {
    Model::load(&gguf_path(file), &LoadOptions::default()).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// What a GGUF file states, or implies by which tensors it holds, of a config.
fn comparable(c: &ModelConfig) -> ModelConfig {
    ModelConfig {
        // GGUF carries no dtype field, and its eos set comes from the tokenizer metadata.
        checkpoint_dtype: None,
        eos_token_ids: Vec::new(),
        bos_token_id: None,
        ..c.clone()
    }
}

/// transformers' logits are f32 from the bf16 checkpoint; the f16 file holds the same weights
/// (bf16 values are f16 values, but for subnormals in three tensors, off by at most 3e-8) and
/// sluice widens them to f32 in its products, so the bound is the checkpoint's
/// (`tests/qwen2_5_vl_prompt.rs`: the references' 5 decimals and summation orders). Measured:
/// 6.8e-6 over both prompts.
const F16_TOLERANCE: f32 = 1e-4;

#[test]
fn the_gguf_config_is_the_checkpoints() {
    let hf = ModelFiles::config_at(&fixture_dir(FIXTURE)).unwrap();
    for file in ["qwen2_5-vl-f16.gguf", "qwen2_5-vl-q8_0.gguf"] {
        let gguf = ModelFiles::config_at(&gguf_path(file)).unwrap();
        assert_eq!(gguf.architecture, "Qwen2_5_VLForConditionalGeneration");
        assert_eq!(gguf.rope.mrope_section, Some([2, 3, 3]), "{file}");
        assert_eq!(comparable(&gguf), comparable(&hf), "{file}");
    }
}

#[test]
fn f16_gguf_logits_are_bit_identical_to_the_checkpoint_kept_in_f16() {
    let reference = reference();
    let checkpoint = Model::load(
        &fixture_dir(FIXTURE),
        &LoadOptions {
            dtype: Some(WeightDtype::F16),
        },
    )
    .unwrap();
    let gguf = gguf_model("qwen2_5-vl-f16.gguf");
    for prompt in [&reference.prompt, &reference.two_images] {
        let n = prompt.input_ids.len();
        let ours = run_prompt(&gguf, &reference, prompt, &[n], true).logits;
        let theirs = run_prompt(&checkpoint, &reference, prompt, &[n], true).logits;
        assert!(ours == theirs, "{} images", prompt.images.len());
    }
    // Text alone, plain positions.
    let text = &reference.prompt.input_ids[..reference.prompt.image_runs()[0].start];
    assert_eq!(
        prefill_all_positions(&gguf, text).data,
        prefill_all_positions(&checkpoint, text).data
    );
}

#[test]
fn image_prompts_from_the_f16_gguf_give_transformers_logits_and_greedy_tokens() {
    let (reference, model) = (reference(), gguf_model("qwen2_5-vl-f16.gguf"));
    for prompt in [&reference.prompt, &reference.two_images] {
        let n = prompt.input_ids.len();
        let logits = run_prompt(&model, &reference, prompt, &[n], true).logits;
        let diff = max_diff(&logits, &prompt.logits);
        eprintln!(
            "f16 GGUF, {} images: max |logit diff| {diff:e} over {n} positions",
            prompt.images.len()
        );
        assert!(diff < F16_TOLERANCE, "max |logit diff| {diff}");
        assert_eq!(
            greedy_continuation(&model, &reference, prompt),
            prompt.greedy_tokens
        );
    }
}

/// llama-quantize's Q8_0 (every matrix, the embedding and head too, 8-bit levels per 32 weights
/// of an f16 scale) is as far from transformers as the checkpoint quantized to q8_0 at load.
/// Measured over both prompts: the file 0.105, at load 0.112 (logits of a few units); the greedy
/// continuations are transformers'.
#[test]
fn image_prompts_from_the_q8_0_gguf_are_as_near_transformers_as_q8_0_at_load() {
    let (reference, model) = (reference(), gguf_model("qwen2_5-vl-q8_0.gguf"));
    let at_load = Model::load(
        &fixture_dir(FIXTURE),
        &LoadOptions {
            dtype: WeightDtype::from_name("q8_0"),
        },
    )
    .unwrap();
    for prompt in [&reference.prompt, &reference.two_images] {
        let n = prompt.input_ids.len();
        let file = run_prompt(&model, &reference, prompt, &[n], true).logits;
        let file = max_diff(&file, &prompt.logits);
        let loaded = run_prompt(&at_load, &reference, prompt, &[n], true).logits;
        let loaded = max_diff(&loaded, &prompt.logits);
        eprintln!(
            "q8_0, {} images: max |logit diff| {file:e} (q8_0 at load: {loaded:e}) over {n} \
             positions",
            prompt.images.len(),
        );
        assert!(file < 1.25 * loaded, "{file} against {loaded} at load");
        assert_eq!(
            greedy_continuation(&model, &reference, prompt),
            prompt.greedy_tokens
        );
    }
}

/// The projector file the converter writes beside the language model (`--mmproj`), recorded for
/// the encoder that will read it; nothing here loads it yet. Row-major shapes, as the
/// checkpoint's: the Conv3d patch kernel `[32, 3, 2, 14, 14]` split into its two temporal
/// slices, each block's fused `qkv` split into q, k and v, the merger's `ln_q` as `v.post_ln`
/// and its MLP as `mm.0` / `mm.2`.
#[test]
fn the_projector_file_holds_the_vision_transformer_and_merger() {
    let path = gguf_path("mmproj-qwen2_5-vl-f16.gguf");
    let file = GgufModel::open(&path).unwrap();
    let meta = file.metadata();
    assert_eq!(meta.str("general.architecture").unwrap(), Some("clip"));
    assert_eq!(
        meta.str("clip.projector_type").unwrap(),
        Some("qwen2.5vl_merger")
    );
    assert_eq!(meta.bool("clip.use_silu").unwrap(), Some(true));
    for (key, value) in [
        ("clip.vision.image_size", 560), // the converter's default, not the processor's
        ("clip.vision.patch_size", 14),
        ("clip.vision.embedding_length", 32),
        ("clip.vision.feed_forward_length", 64),
        ("clip.vision.block_count", 4),
        ("clip.vision.attention.head_count", 2),
        ("clip.vision.projection_dim", 64),
        // Every 2nd block full attention (`fullatt_block_indexes` [1, 3]), the others windowed.
        ("clip.vision.n_wa_pattern", 2),
    ] {
        assert_eq!(meta.u64(key).unwrap(), Some(value), "{key}");
    }
    let shape = |name: &str| file.tensor_info(name).map(|t| t.shape());
    for (name, expected) in [
        ("v.patch_embd.weight", &[32, 3, 14, 14][..]),
        ("v.patch_embd.weight.1", &[32, 3, 14, 14]),
        ("v.blk.3.ln1.weight", &[32]),
        ("v.blk.3.attn_q.weight", &[32, 32]),
        ("v.blk.3.attn_v.bias", &[32]),
        ("v.blk.3.attn_out.weight", &[32, 32]),
        ("v.blk.3.ln2.weight", &[32]),
        ("v.blk.3.ffn_gate.weight", &[64, 32]),
        ("v.blk.3.ffn_up.bias", &[64]),
        ("v.blk.3.ffn_down.weight", &[32, 64]),
        ("v.post_ln.weight", &[32]),
        ("mm.0.weight", &[128, 128]),
        ("mm.0.bias", &[128]),
        ("mm.2.weight", &[64, 128]),
        ("mm.2.bias", &[64]),
    ] {
        assert_eq!(shape(name).as_deref(), Some(expected), "{name}");
    }
    // 16 tensors a block, the two patch slices, the merger's norm and its MLP's four.
    assert_eq!(file.tensors().count(), 4 * 16 + 7);
    // Not a language model, nor Gemma 3's projector.
    let err = Model::load(&path, &LoadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("`clip`"), "{err}");
    let err = Gemma3VisionEncoder::load_gguf(&path, None).unwrap_err();
    assert!(err.to_string().contains("qwen2.5vl_merger"), "{err}");
}
