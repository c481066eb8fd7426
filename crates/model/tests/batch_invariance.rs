//! A sequence's logits do not depend on what else is in the step or how its prompt was chunked.

mod common;

use common::*;
use sluice_model::{Batch, KvDtype, Logits, Model, WeightDtype};

/// Runs `target` (prompt = first `prompt_len` tokens) to completion with chunked prefill of
/// `chunk` tokens then decodes; other sequences ride along in every step, each at its own
/// stage. Returns the target's logits after every step that requested them.
fn run_with_companions(
    model: &Model,
    tokens: &[u32],
    prompt_len: usize,
    chunk: usize,
    companions: usize,
    kv_dtype: KvDtype,
) -> Vec<Vec<f32>> {
    let mut kv = cache_of(model, kv_dtype);
    let mut pool = BlockPool::new(kv.num_blocks());
    let mut target = Sequence::new(tokens.to_vec());
    // Companions: different prompts, at different offsets into their own prefill.
    let mut others: Vec<Sequence> = (0..companions)
        .map(|i| {
            Sequence::new(
                tokens
                    .iter()
                    .rev()
                    .skip(i * 3)
                    .map(|&t| (t + i as u32 + 1) % 500)
                    .collect(),
            )
        })
        .collect();
    for (i, other) in others.iter_mut().enumerate() {
        // Pre-compute part of each companion so they decode while the target prefills.
        let mut batch = Batch::default();
        other.schedule(5 + 4 * i, &mut pool, &mut batch);
        model.forward(&batch, &mut kv).unwrap();
    }
    let mut target_logits = Vec::new();
    while target.num_computed < tokens.len() {
        let mut batch = Batch::default();
        for (i, other) in others.iter_mut().enumerate() {
            if other.num_computed < other.tokens.len() {
                // Alternate decodes and 3-token chunks.
                let n = if i % 2 == 0 { 1 } else { 3 };
                other.schedule(
                    n.min(other.tokens.len() - other.num_computed),
                    &mut pool,
                    &mut batch,
                );
            }
        }
        let target_row = batch.logits_indices.len();
        let remaining_prompt = prompt_len.saturating_sub(target.num_computed);
        let n = if remaining_prompt > 0 {
            chunk.min(remaining_prompt)
        } else {
            1
        };
        target.schedule(n, &mut pool, &mut batch);
        for (i, other) in others.iter_mut().enumerate() {
            if i == 1 && other.num_computed < other.tokens.len() {
                other.schedule(1, &mut pool, &mut batch);
            }
        }
        let logits: Logits = model.forward(&batch, &mut kv).unwrap();
        target_logits.push(logits.row(target_row).to_vec());
    }
    target_logits
}

#[test]
fn logits_are_bit_identical_alone_and_batched_with_three_others() {
    // phi4-mini's companions are on both sides of its LongRoPE switch while it crosses it.
    for name in ["llama", "qwen2", "llama-odd-head-dim", "phi3", "phi4-mini"] {
        for (dtype, kv_dtype) in [
            (WeightDtype::F32, KvDtype::F32),
            (WeightDtype::F16, KvDtype::F32),
            (WeightDtype::F16, KvDtype::F16),
            (WeightDtype::F16, KvDtype::Bf16),
            (WeightDtype::BF16, KvDtype::F32),
        ] {
            let model = load(name, dtype);
            let tokens = reference(name).prompt_ids;
            let alone = run_with_companions(&model, &tokens, 12, 5, 0, kv_dtype);
            let batched = run_with_companions(&model, &tokens, 12, 5, 3, kv_dtype);
            assert_eq!(alone.len(), batched.len());
            for (step, (a, b)) in alone.iter().zip(&batched).enumerate() {
                assert!(
                    a == b,
                    "{name} {dtype:?} weights, {kv_dtype:?} KV: step {step} differs when batched"
                );
            }
        }
    }
}

#[test]
fn chunked_prefill_gives_the_same_logits_as_one_chunk() {
    // phi3's prompt stays within its LongRoPE original length, so no chunk crosses it.
    for name in ["mistral", "qwen3", "phi3"] {
        for kv_dtype in [KvDtype::F32, KvDtype::F16, KvDtype::Bf16] {
            let model = load(name, WeightDtype::F32);
            let tokens = reference(name).prompt_ids;
            let len = tokens.len();
            let one_chunk = run_with_companions(&model, &tokens, len, len, 0, kv_dtype);
            let chunked = run_with_companions(&model, &tokens, len, 7, 0, kv_dtype);
            assert_eq!(one_chunk.last(), chunked.last(), "{name} {kv_dtype:?}");
        }
    }
}

#[test]
fn longrope_chunks_past_the_original_length_match_one_chunk_and_earlier_chunks_do_not() {
    // phi4-mini's original length is 16 and its prompt 26 tokens: in one chunk every key is
    // rotated with the long factors. A first chunk of 17 is already past 16, so both chunks use
    // them too; chunks of 7 write the first 14 keys with the short factors (as transformers
    // would, fed the same pieces), so the logits differ.
    let model = load("phi4-mini", WeightDtype::F32);
    let tokens = reference("phi4-mini").prompt_ids;
    let len = tokens.len();
    let one_chunk = run_with_companions(&model, &tokens, len, len, 0, KvDtype::F32);
    let past = run_with_companions(&model, &tokens, len, 17, 0, KvDtype::F32);
    assert_eq!(one_chunk.last(), past.last());
    let across = run_with_companions(&model, &tokens, len, 7, 0, KvDtype::F32);
    assert_ne!(one_chunk.last(), across.last());
}

#[test]
fn last_layer_runs_only_the_rows_that_want_logits_without_changing_them() {
    // With logits for every position the last layer runs all rows; with only the last
    // position's, it skips the others past the K/V write. The wanted row must not move a bit.
    for name in FIXTURES {
        let model = load(name, WeightDtype::F32);
        let tokens = reference(name).prompt_ids;
        let every_row = prefill_all_positions(&model, &tokens);
        let mut kv = cache(&model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut seq = Sequence::new(tokens.clone());
        let mut batch = Batch::default();
        seq.schedule(tokens.len(), &mut pool, &mut batch);
        assert_eq!(batch.logits_indices, vec![tokens.len() - 1]);
        let only_last = model.forward(&batch, &mut kv).unwrap();
        assert!(
            only_last.row(0) == every_row.row(tokens.len() - 1),
            "{name}: the last row changed"
        );
    }
}
