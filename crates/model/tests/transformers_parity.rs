//! Every fixture reproduces the logits and greedy continuation transformers recorded.

mod common;

use common::*;
use sluice_model::{Batch, KvDtype, Logits, WeightDtype};

/// Largest `|ours - transformers|` over every prompt position's logits.
fn max_prompt_logit_diff(logits: &Logits, expected: &[Vec<f32>]) -> f32 {
    let mut max_diff = 0f32;
    for (i, expected) in expected.iter().enumerate() {
        for (a, b) in logits.row(i).iter().zip(expected) {
            max_diff = max_diff.max((a - b).abs());
        }
    }
    max_diff
}

#[test]
fn prompt_logits_match_transformers_for_every_architecture() {
    for name in FIXTURES {
        let model = load(name, WeightDtype::F32);
        let reference = reference(name);
        let logits = prefill_all_positions(&model, &reference.prompt_ids);
        assert_eq!(logits.rows(), reference.prompt_logits.len());
        let max_diff = max_prompt_logit_diff(&logits, &reference.prompt_logits);
        eprintln!("{name}: max |logit diff| {max_diff:e}");
        assert!(max_diff < 1e-3, "{name}: max |logit diff| {max_diff}");
    }
}

#[test]
fn greedy_continuation_matches_transformers_for_every_architecture() {
    for name in FIXTURES {
        let model = load(name, WeightDtype::F32);
        let reference = reference(name);
        let mut kv = cache(&model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut seq = Sequence::new(reference.prompt_ids.clone());
        let mut generated = Vec::new();
        let mut pending = seq.tokens.len();
        while generated.len() < reference.greedy_tokens.len() {
            let mut batch = Batch::default();
            seq.schedule(pending, &mut pool, &mut batch);
            let next = argmax(model.forward(&batch, &mut kv).unwrap().row(0));
            generated.push(next);
            seq.tokens.push(next);
            pending = 1;
        }
        assert_eq!(generated, reference.greedy_tokens, "{name}");
    }
}

#[test]
fn f16_storage_of_an_f16_checkpoint_is_exact() {
    // The checkpoint's values are already f16, so keeping them as f16 loses nothing.
    let reference = reference("llama-odd-head-dim");
    let f32_logits = prefill_all_positions(
        &load("llama-odd-head-dim", WeightDtype::F32),
        &reference.prompt_ids,
    );
    let f16_logits = prefill_all_positions(
        &load("llama-odd-head-dim", WeightDtype::F16),
        &reference.prompt_ids,
    );
    assert_eq!(f32_logits, f16_logits);
}

#[test]
fn f16_storage_of_an_f32_checkpoint_stays_close() {
    let reference = reference("qwen2");
    let logits = prefill_all_positions(&load("qwen2", WeightDtype::F16), &reference.prompt_ids);
    let last = reference.prompt_logits.len() - 1;
    let max_diff = logits
        .row(last)
        .iter()
        .zip(&reference.prompt_logits[last])
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(max_diff < 0.1, "max |logit diff| {max_diff}");
}

#[test]
fn f16_kv_cache_stays_close_to_transformers_for_every_architecture() {
    // Keys and values are rounded to f16 once when cached (relative error 2^-11 each), in
    // every layer, so the error grows with depth: 1e-2 per layer (the 2-layer fixtures stay
    // within 6e-3, the 6-layer gemma3 within 4.4e-2).
    kv_cache_stays_close(KvDtype::F16, 1e-2);
}

#[test]
fn bf16_kv_cache_stays_close_to_transformers_for_every_architecture() {
    // bf16 keeps 8 significant bits against f16's 11, so each cached value moves up to 2^-9,
    // eight times f16's 2^-12; where the CPU has AVX-512 BF16 the queries and softmax weights
    // are rounded to bf16 as well. Eight times the f16 bound per layer.
    kv_cache_stays_close(KvDtype::Bf16, 8e-2);
}

/// Every fixture's prompt logits with an f32 model and a `kv` cache stay within `per_layer`
/// times its depth of transformers'.
fn kv_cache_stays_close(kv: KvDtype, per_layer: f32) {
    for name in FIXTURES {
        let reference = reference(name);
        let model = load(name, WeightDtype::F32);
        let logits = prefill_all_positions_with(&model, &reference.prompt_ids, kv);
        let max_diff = max_prompt_logit_diff(&logits, &reference.prompt_logits);
        eprintln!("{name} ({kv:?} KV): max |logit diff| {max_diff:e}");
        let bound = per_layer * model.config().num_hidden_layers as f32;
        assert!(max_diff < bound, "{name}: max |logit diff| {max_diff}");
    }
}

#[test]
fn mistral_fixture_exercises_its_sliding_window() {
    // The prompt is longer than the window, so ignoring the window must change late logits.
    let dir = fixture_dir("mistral");
    let mut config = sluice_model::ModelConfig::from_dir(&dir).unwrap();
    assert_eq!(config.sliding_window, Some(8));
    config.sliding_window = None;
    let checkpoint = sluice_model::Checkpoint::open(&dir).unwrap();
    let model = sluice_model::Model::from_source(config, &checkpoint, &Default::default()).unwrap();
    let reference = reference("mistral");
    let logits = prefill_all_positions(&model, &reference.prompt_ids);
    let last = reference.prompt_logits.len() - 1;
    let max_diff = logits
        .row(last)
        .iter()
        .zip(&reference.prompt_logits[last])
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(max_diff > 1e-2, "window had no effect ({max_diff})");
}

/// Logits of the reference prompt's last position from `config` with the gemma3 fixture's
/// weights.
fn gemma3_last_logits(config: sluice_model::ModelConfig) -> Vec<f32> {
    let checkpoint = sluice_model::Checkpoint::open(&fixture_dir("gemma3")).unwrap();
    let model = sluice_model::Model::from_source(config, &checkpoint, &Default::default()).unwrap();
    let tokens = reference("gemma3").prompt_ids;
    prefill_all_positions(&model, &tokens)
        .row(tokens.len() - 1)
        .to_vec()
}

#[test]
fn gemma3_fixture_exercises_both_layer_types_and_their_ropes() {
    // The prompt runs past the window of 8, and the local and global layers rotate with
    // different RoPE: making every layer global, or giving the local layers the global RoPE,
    // must each change the last logits.
    use sluice_model::config::LayerType;
    let config = sluice_model::ModelConfig::from_dir(&fixture_dir("gemma3")).unwrap();
    let types = config.layer_types.clone().expect("mixed layer types");
    assert!(types.contains(&LayerType::Full) && types.contains(&LayerType::Sliding));
    assert_eq!(config.sliding_window, Some(8));
    let reference = reference("gemma3");
    assert!(reference.prompt_ids.len() > 8);
    let expected = &reference.prompt_logits[reference.prompt_ids.len() - 1];
    let max_diff = |logits: Vec<f32>| {
        (logits.iter().zip(expected))
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max)
    };
    assert!(max_diff(gemma3_last_logits(config.clone())) < 1e-3);
    let all_global = sluice_model::ModelConfig {
        layer_types: None,
        sliding_window: None,
        ..config.clone()
    };
    assert!(
        max_diff(gemma3_last_logits(all_global)) > 1e-2,
        "window had no effect"
    );
    let one_rope = sluice_model::ModelConfig {
        rope_local: None,
        ..config
    };
    assert!(
        max_diff(gemma3_last_logits(one_rope)) > 1e-2,
        "local RoPE had no effect"
    );
}
