//! The Qwen2.5-VL fixture (fixtures/models/qwen2_5-vl, scripts/make_qwen_vl_fixture.py): its
//! `reference.json` (per image, transformers' image features; per prompt, the processor's
//! expansion, `get_rope_index`'s positions, the logits and the greedy continuation) and a prompt
//! run through a language model with the image features as input embeddings and the 3-D
//! positions, for the checkpoint (`tests/qwen2_5_vl_prompt.rs`) and llama.cpp's GGUF files
//! (`tests/qwen2_5_vl_gguf.rs`) alike.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use sluice_model::{Batch, KvCache, Model, MropePositions, PromptImage};

use super::{argmax, cache, fixture_dir, BlockPool, Sequence};

/// The fixture's directory name under fixtures/models.
pub const FIXTURE: &str = "qwen2_5-vl";

/// The fixture's `reference.json`.
#[derive(Deserialize)]
pub struct Reference {
    pub merge_size: usize,
    pub images: BTreeMap<String, ImageReference>,
    pub prompt: PromptReference,
    pub two_images: PromptReference,
}

/// One image of the references.
#[derive(Deserialize)]
pub struct ImageReference {
    /// `[tokens, text hidden]`: `get_image_features`' output for this image alone.
    pub features: Vec<f32>,
}

/// A prompt as `Qwen2_5_VLProcessor` expanded it, and what transformers computed from it.
#[derive(Deserialize)]
pub struct PromptReference {
    pub images: Vec<String>,
    pub input_ids: Vec<u32>,
    /// 1 at the `<|image_pad|>` tokens.
    pub mm_token_type_ids: Vec<u32>,
    pub image_grid_thw: Vec<[usize; 3]>,
    /// `[3, prompt_len]`: `get_rope_index`'s temporal, height and width positions.
    pub position_ids: [Vec<u32>; 3],
    pub rope_deltas: i64,
    /// `[prompt_len, vocab]`.
    pub logits: Vec<Vec<f32>>,
    pub greedy_tokens: Vec<u32>,
}

impl PromptReference {
    /// Each image's `<|image_pad|>` rows, in order.
    pub fn image_runs(&self) -> Vec<Range<usize>> {
        let mut runs: Vec<Range<usize>> = Vec::new();
        for (i, &t) in self.mm_token_type_ids.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if t == 1 && run.end == i => run.end = i + 1,
                _ if t == 1 => runs.push(i..i + 1),
                _ => {}
            }
        }
        runs
    }

    /// Its images where `MropePositions` takes them: each run's first row and its grid.
    pub fn prompt_images(&self) -> Vec<PromptImage> {
        (self.image_runs().iter().zip(&self.image_grid_thw))
            .map(|(run, &grid_thw)| PromptImage {
                start: run.start,
                grid_thw,
            })
            .collect()
    }

    /// Its rows' multimodal RoPE positions.
    pub fn mrope(&self, merge: usize) -> MropePositions {
        MropePositions::new(self.input_ids.len(), &self.prompt_images(), merge).unwrap()
    }

    /// The features of its images, in order, `[image tokens, hidden]` each.
    pub fn features<'a>(&self, reference: &'a Reference) -> Vec<&'a [f32]> {
        (self.images.iter())
            .map(|name| reference.images[name].features.as_slice())
            .collect()
    }
}

/// The fixture's references.
pub fn reference() -> Reference {
    let text = std::fs::read_to_string(fixture_dir(FIXTURE).join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The prompt's logits at every row, fed in chunks ending at `cuts` (the last at the prompt's
/// end), each chunk with its image rows' features and its rows' 3-D positions; and the cache and
/// sequence to continue from. `positions: false` leaves out the 3-D positions (plain RoPE by
/// token index).
pub struct Run {
    pub logits: Vec<Vec<f32>>,
    pub kv: KvCache,
    pub pool: BlockPool,
    pub seq: Sequence,
}

pub fn run_prompt(
    model: &Model,
    reference: &Reference,
    prompt: &PromptReference,
    cuts: &[usize],
    positions: bool,
) -> Run {
    let hidden = model.config().hidden_size;
    let mrope = prompt.mrope(reference.merge_size);
    let features = prompt.features(reference);
    let runs = prompt.image_runs();
    let mut kv = cache(model);
    let mut pool = BlockPool::new(kv.num_blocks());
    let mut seq = Sequence::new(prompt.input_ids.clone());
    let mut logits = Vec::new();
    for &end in cuts {
        let start = seq.num_computed;
        let mut batch = Batch::default();
        seq.schedule(end - start, &mut pool, &mut batch);
        batch.logits_indices = (0..end - start).collect();
        for (run, values) in runs.iter().zip(&features) {
            // The part of the image in this chunk.
            let (first, last) = (run.start.max(start), run.end.min(end));
            if first < last {
                let rows = &values[(first - run.start) * hidden..(last - run.start) * hidden];
                batch.input_embeddings.push_run(first - start, rows, hidden);
            }
        }
        if positions {
            batch.set_mrope_positions(0, &mrope.rows(start, end - start));
        }
        let out = model.forward(&batch, &mut kv).unwrap();
        logits.extend((0..out.rows()).map(|r| out.row(r).to_vec()));
    }
    Run {
        logits,
        kv,
        pool,
        seq,
    }
}

/// Largest `|ours - transformers|` over every position's logits.
pub fn max_diff(ours: &[Vec<f32>], expected: &[Vec<f32>]) -> f32 {
    assert_eq!(ours.len(), expected.len());
    (ours.iter().zip(expected))
        .flat_map(|(a, b)| a.iter().zip(b).map(|(a, b)| (a - b).abs()))
        .fold(0.0, f32::max)
}

/// The greedy continuation of `prompt` (as many tokens as the reference's): the prompt in one
/// chunk with its images, then one token a step, each decoding at `index + rope_delta` in every
/// component.
pub fn greedy_continuation(
    model: &Model,
    reference: &Reference,
    prompt: &PromptReference,
) -> Vec<u32> {
    let n = prompt.input_ids.len();
    let mrope = prompt.mrope(reference.merge_size);
    let Run {
        logits,
        mut kv,
        mut pool,
        mut seq,
    } = run_prompt(model, reference, prompt, &[n], true);
    let mut generated = vec![argmax(logits.last().unwrap())];
    while generated.len() < prompt.greedy_tokens.len() {
        let index = seq.tokens.len();
        seq.tokens.push(*generated.last().unwrap());
        let mut batch = Batch::default();
        seq.schedule(1, &mut pool, &mut batch);
        let position = (index as i64 + prompt.rope_deltas) as u32;
        assert_eq!(mrope.rows(index, 1), [[position; 3]]);
        batch.set_mrope_positions(0, &mrope.rows(index, 1));
        generated.push(argmax(model.forward(&batch, &mut kv).unwrap().row(0)));
    }
    generated
}
