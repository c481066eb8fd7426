//! The final-norm hidden states a batch asks for (`Batch::hidden_indices`) equal the ones
//! transformers computes (`scoring_reference.json`, written by `scripts/make_fixtures.py`), and
//! asking for them changes no logits.

mod common;

use common::{cache, fixture_dir, load, BlockPool, Sequence};
use serde::Deserialize;
use sluice_model::{Batch, WeightDtype};

#[derive(Deserialize)]
struct ScoringReference {
    prompt_ids: Vec<u32>,
    /// `[prompt_len, hidden]`.
    hidden_states: Vec<Vec<f32>>,
}

fn scoring_reference(name: &str) -> ScoringReference {
    let path = fixture_dir(name).join("scoring_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn hidden_states_of_every_row_match_transformers() {
    for name in ["llama", "qwen3"] {
        let model = load(name, WeightDtype::F32);
        let reference = scoring_reference(name);
        let ids = &reference.prompt_ids;
        let mut kv = cache(&model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut seq = Sequence::new(ids.clone());
        let mut batch = Batch::default();
        seq.schedule(ids.len(), &mut pool, &mut batch);
        batch.hidden_indices = (0..ids.len()).collect();
        let out = model.forward(&batch, &mut kv).unwrap();
        assert_eq!(out.hidden_size, model.config().hidden_size);
        let mut worst = 0f32;
        for (i, want) in reference.hidden_states.iter().enumerate() {
            for (got, want) in out.hidden_row(i).iter().zip(want) {
                worst = worst.max((got - want).abs());
            }
        }
        assert!(
            worst < 1e-3,
            "{name}: hidden states differ by up to {worst}"
        );
    }
}

#[test]
fn hidden_rows_come_in_the_order_asked_and_leave_the_logits_unchanged() {
    let model = load("qwen3", WeightDtype::F32);
    let ids = scoring_reference("qwen3").prompt_ids;
    let run = |hidden: Vec<usize>| {
        let mut kv = cache(&model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut seq = Sequence::new(ids.clone());
        let mut batch = Batch::default();
        seq.schedule(ids.len(), &mut pool, &mut batch);
        batch.hidden_indices = hidden;
        model.forward(&batch, &mut kv).unwrap()
    };
    let plain = run(Vec::new());
    let last = ids.len() - 1;
    // The last row is both a logits row and a hidden row; row 0 is only a hidden row.
    let with_hidden = run(vec![last, 0, last]);
    assert_eq!(plain.data, with_hidden.data, "logits must not change");
    assert!(plain.hidden.is_empty());
    assert_eq!(with_hidden.hidden_row(0), with_hidden.hidden_row(2));
    let all = run((0..ids.len()).collect());
    assert_eq!(with_hidden.hidden_row(0), all.hidden_row(last));
    assert_eq!(with_hidden.hidden_row(1), all.hidden_row(0));
}
