//! The LongRoPE fixtures reach both factor sets: without the long factors their logits change.

mod common;

use common::*;
use sluice_model::{Checkpoint, Model, ModelConfig, RopeScaling, WeightDtype};

/// The fixture with its original length raised past every test sequence: short factors only.
fn short_factors_only(name: &str) -> Model {
    let dir = fixture_dir(name);
    let mut config = ModelConfig::from_dir(&dir).unwrap();
    let RopeScaling::LongRope(long) = &mut config.rope.scaling else {
        panic!("{name} is not a LongRoPE fixture");
    };
    long.original_max_position_embeddings = 4096;
    let checkpoint = Checkpoint::open(&dir).unwrap();
    Model::from_source(config, &checkpoint, &Default::default()).unwrap()
}

fn max_last_row_diff(a: &Model, b: &Model, tokens: &[u32]) -> f32 {
    let (x, y) = (
        prefill_all_positions(a, tokens),
        prefill_all_positions(b, tokens),
    );
    let last = tokens.len() - 1;
    (x.row(last).iter().zip(y.row(last)))
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}

#[test]
fn phi4_mini_prompt_is_past_its_original_length() {
    let reference = reference("phi4-mini");
    let model = load("phi4-mini", WeightDtype::F32);
    let diff = max_last_row_diff(
        &model,
        &short_factors_only("phi4-mini"),
        &reference.prompt_ids,
    );
    assert!(diff > 1e-2, "long factors had no effect ({diff})");
}

#[test]
fn phi3_prompt_is_within_its_original_length_and_its_continuation_crosses_it() {
    let reference = reference("phi3");
    let model = load("phi3", WeightDtype::F32);
    let short = short_factors_only("phi3");
    assert_eq!(
        max_last_row_diff(&model, &short, &reference.prompt_ids),
        0.0
    );
    let mut tokens = reference.prompt_ids.clone();
    tokens.extend(&reference.greedy_tokens);
    assert!(tokens.len() > 32);
    let diff = max_last_row_diff(&model, &short, &tokens);
    assert!(diff > 1e-2, "long factors had no effect ({diff})");
}
