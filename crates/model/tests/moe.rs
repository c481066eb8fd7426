//! Mixture-of-experts models beyond the per-fixture parity lists: the memory estimate counts
//! every expert, and a decode step reports how many distinct experts its rows ran.

mod common;

use common::*;
use sluice_model::{Batch, KvCache, KvDtype, LoadOptions, Model, ModelFiles, WeightDtype};

const MOE_FIXTURES: [&str; 4] = ["qwen3-moe", "mixtral", "olmoe", "qwen2-moe"];

#[test]
fn memory_estimate_counts_every_expert() {
    for name in MOE_FIXTURES {
        let files = ModelFiles::open(&fixture_dir(name)).unwrap();
        let config = files.config().clone();
        let moe = config.moe.clone().expect("an MoE config");
        let sparse_layers = (0..config.num_hidden_layers)
            .filter(|&i| moe.is_sparse(i))
            .count();
        // Every expert's gate, up and down, in f16 at least.
        let experts = sparse_layers
            * moe.num_experts
            * 3
            * moe.expert_intermediate_size
            * config.hidden_size
            * 2;
        for dtype in [None, Some(WeightDtype::F16), WeightDtype::from_name("q8_0")] {
            let estimate = files.loaded_bytes(dtype);
            let model = Model::from_files(&files, &LoadOptions { dtype }).unwrap();
            assert_eq!(estimate, model.weight_bytes(), "{name} {dtype:?}");
            let floor = if dtype.is_some() {
                experts / 2
            } else {
                experts
            };
            assert!(estimate > floor, "{name} {dtype:?}: {estimate} <= {floor}");
        }
    }
}

/// Distinct experts (summed over MoE layers) one decode step runs for the first `streams`
/// sequences, each a different rotation of the reference prompt.
fn experts_touched_by_decode_step(model: &Model, streams: usize) -> usize {
    let prompt = reference("qwen3-moe").prompt_ids;
    let mut kv = KvCache::new(model.config(), KvDtype::F32, BLOCK_SIZE, 1024);
    let mut pool = BlockPool::new(kv.num_blocks());
    let mut seqs: Vec<Sequence> = (0..streams)
        .map(|s| {
            let mut tokens = prompt.clone();
            tokens.rotate_left(s % prompt.len());
            tokens[0] = (tokens[0] + (s / prompt.len()) as u32 * 7) % 500;
            Sequence::new(tokens)
        })
        .collect();
    let mut prefill = Batch::default();
    for seq in &mut seqs {
        let n = seq.tokens.len();
        seq.schedule(n, &mut pool, &mut prefill);
    }
    let logits = model.forward(&prefill, &mut kv).unwrap();
    let mut decode = Batch::default();
    for (i, seq) in seqs.iter_mut().enumerate() {
        seq.tokens.push(argmax(logits.row(i)));
        seq.schedule(1, &mut pool, &mut decode);
    }
    model.forward(&decode, &mut kv).unwrap();
    model.experts_touched_last_step().expect("an MoE model")
}

#[test]
fn a_decode_step_reports_the_distinct_experts_its_rows_ran() {
    let model = load("qwen3-moe", WeightDtype::F32);
    let moe = model.config().moe.clone().unwrap();
    // Layers 0 and 2 are sparse; layer 1 is in mlp_only_layers.
    let sparse_layers = 2;
    let touched: Vec<usize> = [1, 16, 64]
        .iter()
        .map(|&streams| experts_touched_by_decode_step(&model, streams))
        .collect();
    eprintln!("qwen3-moe experts touched per decode step at 1/16/64 streams: {touched:?}");
    assert_eq!(touched[0], moe.experts_per_token * sparse_layers);
    // The first 16 and 64 streams include the smaller sets (each row's routing is its own).
    assert!(
        touched[0] <= touched[1] && touched[1] <= touched[2],
        "{touched:?}"
    );
    assert!(touched[2] <= moe.num_experts * sparse_layers);
    assert!(touched[1] > touched[0], "{touched:?}");
    assert!(load("qwen3", WeightDtype::F32)
        .experts_touched_last_step()
        .is_none());
}
