//! Gemma 3 prompts with images, end to end in the model crate: image bytes through
//! `sluice-vision`'s decoding and preprocessing and the vision encoder, the embeddings given to
//! the language model of the `Gemma3ForConditionalGeneration` fixture at the image's soft-token
//! rows (`Batch::push_bidirectional_image`), against the logits and greedy continuations
//! transformers recorded (fixtures/models/gemma3-vision, scripts/make_vision_fixtures.py).

mod common;

use std::ops::Range;

use common::{argmax, cache, fixture_dir, BlockPool, Sequence, BLOCK_SIZE};
use serde::Deserialize;
use sluice_model::checkpoint::{Checkpoint, RawTensor, TensorSource};
use sluice_model::vision::Gemma3VisionEncoder;
use sluice_model::{
    kv_layout, Batch, ForwardError, KvCache, KvDtype, KvPools, LoadError, LoadOptions, Logits,
    Model, ModelConfig, RELEASED_BLOCK,
};
use sluice_vision::{decode, DecodeLimits, SiglipPreprocessor};

const FIXTURE: &str = "gemma3-vision";

#[derive(Deserialize)]
struct Reference {
    prompt: PromptReference,
    two_images: PromptReference,
}

/// A prompt with its images expanded as `Gemma3Processor` expands them.
#[derive(Deserialize)]
struct PromptReference {
    images: Vec<String>,
    input_ids: Vec<u32>,
    /// 1 at the image soft tokens.
    token_type_ids: Vec<u32>,
    /// `[prompt_len, vocab]`.
    logits: Vec<Vec<f32>>,
    greedy_tokens: Vec<u32>,
}

impl PromptReference {
    /// Each image's soft-token rows, in order.
    fn image_runs(&self) -> Vec<Range<usize>> {
        let mut runs: Vec<Range<usize>> = Vec::new();
        for (i, &t) in self.token_type_ids.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if t == 1 && run.end == i => run.end = i + 1,
                _ if t == 1 => runs.push(i..i + 1),
                _ => {}
            }
        }
        runs
    }
}

fn reference() -> Reference {
    let text = std::fs::read_to_string(fixture_dir(FIXTURE).join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn model() -> Model {
    Model::load(&fixture_dir(FIXTURE), &LoadOptions::default()).expect("load the text model")
}

/// The embeddings of the prompt's images, `[images, 16, hidden]`, from the image files.
fn image_embeddings(prompt: &PromptReference) -> Vec<f32> {
    let dir = fixture_dir(FIXTURE);
    let encoder = Gemma3VisionEncoder::load(&dir, None).unwrap();
    let processor = SiglipPreprocessor::from_model_dir(&dir).unwrap();
    let images: Vec<_> = (prompt.images.iter())
        .map(|name| {
            let bytes = std::fs::read(dir.join("images").join(name)).unwrap();
            decode(&bytes, DecodeLimits::default()).unwrap()
        })
        .collect();
    encoder.image_features(&processor.batch_pixel_values(&images), images.len())
}

/// One sequence's prompt, fed in chunks that end at `cuts` (the last at the prompt's end),
/// its images' embeddings given at their runs, logits for every row; and the cache and
/// sequence, to continue from. `bidirectional: false` gives the image rows no spans.
struct Run {
    logits: Vec<Vec<f32>>,
    kv: KvCache,
    pool: BlockPool,
    seq: Sequence,
}

fn run_prompt(
    model: &Model,
    prompt: &PromptReference,
    embeddings: &[f32],
    cuts: &[usize],
    bidirectional: bool,
) -> Run {
    let hidden = model.config().hidden_size;
    let per_image = embeddings.len() / prompt.images.len();
    let runs = prompt.image_runs();
    assert_eq!(runs.len(), prompt.images.len());
    let mut kv = cache(model);
    let mut pool = BlockPool::new(kv.num_blocks());
    let mut seq = Sequence::new(prompt.input_ids.clone());
    let mut logits = Vec::new();
    for &end in cuts {
        let start = seq.num_computed;
        let mut batch = Batch::default();
        seq.schedule(end - start, &mut pool, &mut batch);
        batch.logits_indices = (0..end - start).collect();
        for (i, run) in runs.iter().enumerate() {
            if run.start < start || run.end > end {
                assert!(
                    run.end <= start || run.start >= end,
                    "cut {end} splits an image"
                );
                continue;
            }
            let values = &embeddings[i * per_image..][..per_image];
            if bidirectional {
                batch.push_bidirectional_image(run.start - start, values, hidden);
            } else {
                (batch.input_embeddings).push_run(run.start - start, values, hidden);
            }
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
fn max_diff(ours: &[Vec<f32>], expected: &[Vec<f32>]) -> f32 {
    assert_eq!(ours.len(), expected.len());
    (ours.iter().zip(expected))
        .flat_map(|(a, b)| a.iter().zip(b).map(|(a, b)| (a - b).abs()))
        .fold(0.0, f32::max)
}

/// transformers computes in f32 with its own summation orders, and the reference keeps 5
/// decimals: measured at most 1.3e-5 over both prompts (logits up to about 30). The bound
/// leaves some room, and stays ten times tighter than the text fixtures' (`transformers_parity.rs`).
const TOLERANCE: f32 = 1e-4;

#[test]
fn a_prompt_with_an_image_gives_transformers_logits() {
    let (model, reference) = (model(), reference());
    for (name, prompt) in [
        ("one image", &reference.prompt),
        ("two images", &reference.two_images),
    ] {
        let embeddings = image_embeddings(prompt);
        let whole = run_prompt(&model, prompt, &embeddings, &[prompt.input_ids.len()], true);
        let diff = max_diff(&whole.logits, &prompt.logits);
        eprintln!(
            "{name}: max |logit diff| {diff:e} over {} positions",
            prompt.logits.len()
        );
        assert!(diff < TOLERANCE, "{name}: max |logit diff| {diff}");
        // Causal attention over the image tokens is far from the reference: the spans are what
        // match it.
        let causal = run_prompt(
            &model,
            prompt,
            &embeddings,
            &[prompt.input_ids.len()],
            false,
        );
        let diff = max_diff(&causal.logits, &prompt.logits);
        assert!(
            diff > 100.0 * TOLERANCE,
            "{name}: causal image tokens differ by {diff}"
        );
    }
}

#[test]
fn chunks_cut_outside_the_images_give_the_same_bits() {
    let (model, reference) = (model(), reference());
    for prompt in [&reference.prompt, &reference.two_images] {
        let embeddings = image_embeddings(prompt);
        let n = prompt.input_ids.len();
        let whole = run_prompt(&model, prompt, &embeddings, &[n], true).logits;
        let runs = prompt.image_runs();
        // Before the first image, right after it (the end-of-image token in the next chunk),
        // between images, and several cuts at once.
        let mut cuts: Vec<Vec<usize>> = vec![
            vec![runs[0].start, n],
            vec![runs[0].end, n],
            vec![3, runs[0].start - 1, runs[0].end + 1, n],
        ];
        if let Some(second) = runs.get(1) {
            cuts.push(vec![second.start, n]);
            cuts.push(vec![runs[0].end, second.end, n]);
        }
        for cuts in cuts {
            let chunked = run_prompt(&model, prompt, &embeddings, &cuts, true).logits;
            assert!(chunked == whole, "cuts {cuts:?}");
        }
    }
}

#[test]
fn greedy_continuations_match_transformers() {
    let (model, reference) = (model(), reference());
    for prompt in [&reference.prompt, &reference.two_images] {
        let embeddings = image_embeddings(prompt);
        let n = prompt.input_ids.len();
        let Run {
            logits,
            mut kv,
            mut pool,
            mut seq,
        } = run_prompt(&model, prompt, &embeddings, &[n], true);
        let mut generated = vec![argmax(logits.last().unwrap())];
        while generated.len() < prompt.greedy_tokens.len() {
            seq.tokens.push(*generated.last().unwrap());
            let mut batch = Batch::default();
            seq.schedule(1, &mut pool, &mut batch);
            generated.push(argmax(model.forward(&batch, &mut kv).unwrap().row(0)));
        }
        assert_eq!(generated, prompt.greedy_tokens);
    }
}

/// With the sliding-window layers' K/V in a pool of their own that keeps only what the window
/// reaches (the fixture's window, 8, is shorter than an image's 16 tokens), chunked prefill
/// gives the same bits as the uniform cache.
#[test]
fn a_window_pool_gives_the_uniform_cache_bits() {
    let (model, reference) = (model(), reference());
    let prompt = &reference.two_images;
    let embeddings = image_embeddings(prompt);
    let n = prompt.input_ids.len();
    let uniform = run_prompt(&model, prompt, &embeddings, &[n], true).logits;
    let config = model.config();
    let window = config.sliding_window.unwrap();
    let mut kv = KvCache::with_pools(
        config,
        KvDtype::F32,
        BLOCK_SIZE,
        KvPools::with_window(128, window, 16),
    );
    let mut pool = BlockPool::new(128);
    let mut free: Vec<u32> = (0..16).rev().collect();
    let mut window_table: Vec<u32> = Vec::new();
    let mut seq = Sequence::new(prompt.input_ids.clone());
    let runs = prompt.image_runs();
    let per_image = embeddings.len() / runs.len();
    let mut logits = Vec::new();
    for end in [runs[0].start, runs[1].start - 2, n] {
        let start = seq.num_computed;
        // Release the window blocks no row from `start` on reads; cover the chunk.
        let behind = kv_layout::blocks_behind(start, window, BLOCK_SIZE).min(window_table.len());
        for b in &mut window_table[..behind] {
            if *b != RELEASED_BLOCK {
                free.push(std::mem::replace(b, RELEASED_BLOCK));
            }
        }
        while window_table.len() * BLOCK_SIZE < end {
            window_table.push(free.pop().unwrap());
        }
        let mut batch = Batch::default();
        seq.schedule_with_groups(
            end - start,
            &mut pool,
            &mut batch,
            vec![window_table.clone()],
        );
        batch.logits_indices = (0..end - start).collect();
        for (i, run) in runs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.start >= start && r.end <= end)
        {
            let values = &embeddings[i * per_image..][..per_image];
            batch.push_bidirectional_image(run.start - start, values, config.hidden_size);
        }
        let out = model.forward(&batch, &mut kv).unwrap();
        logits.extend((0..out.rows()).map(|r| out.row(r).to_vec()));
    }
    assert!(logits == uniform);
}

/// An image prompt's rows get the same bits alone and beside another sequence's (before it and
/// after it in the batch), and a text prompt beside it the same bits as alone.
#[test]
fn an_image_prompt_has_the_same_bits_beside_other_sequences() {
    let (model, reference) = (model(), reference());
    let prompt = &reference.two_images;
    let embeddings = image_embeddings(prompt);
    let n = prompt.input_ids.len();
    let alone = run_prompt(&model, prompt, &embeddings, &[n], true).logits;
    let text: Vec<u32> = prompt.input_ids[..9].to_vec();
    let text_alone = {
        let mut kv = cache(&model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut batch = Batch::default();
        Sequence::new(text.clone()).schedule(text.len(), &mut pool, &mut batch);
        batch.logits_indices = (0..text.len()).collect();
        model.forward(&batch, &mut kv).unwrap().data
    };
    let hidden = model.config().hidden_size;
    let per_image = embeddings.len() / 2;
    for text_first in [true, false] {
        let mut kv = cache(&model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut batch = Batch::default();
        let mut image_seq = Sequence::new(prompt.input_ids.clone());
        let mut text_seq = Sequence::new(text.clone());
        if text_first {
            text_seq.schedule(text.len(), &mut pool, &mut batch);
        }
        let offset = batch.num_tokens();
        image_seq.schedule(n, &mut pool, &mut batch);
        if !text_first {
            text_seq.schedule(text.len(), &mut pool, &mut batch);
        }
        for (i, run) in prompt.image_runs().iter().enumerate() {
            let values = &embeddings[i * per_image..][..per_image];
            batch.push_bidirectional_image(offset + run.start, values, hidden);
        }
        let text_rows = if text_first {
            0..text.len()
        } else {
            n..n + text.len()
        };
        batch.logits_indices = (offset..offset + n).chain(text_rows).collect();
        let out = model.forward(&batch, &mut kv).unwrap();
        let rows: Vec<Vec<f32>> = (0..n).map(|r| out.row(r).to_vec()).collect();
        assert!(rows == alone, "image prompt, text first: {text_first}");
        assert!(
            out.data[n * out.vocab_size..] == text_alone[..],
            "text first: {text_first}"
        );
    }
}

#[test]
fn image_rows_that_do_not_fit_the_batch_are_refused() {
    let model = model();
    let hidden = model.config().hidden_size;
    let mut kv = cache(&model);
    let mut pool = BlockPool::new(kv.num_blocks());
    let mut batch = Batch::default();
    Sequence::new(vec![0, 514, 514, 2]).schedule(4, &mut pool, &mut batch);
    Sequence::new(vec![0, 514, 514, 2]).schedule(4, &mut pool, &mut batch);
    let refused = |batch: &Batch, kv: &mut KvCache| {
        matches!(
            model.forward(batch, kv),
            Err(ForwardError::InconsistentBatch(_))
        )
    };
    // A span across two sequences: an image must be one sequence's, within one chunk.
    let mut across = batch.clone();
    across.push_bidirectional_image(3, &vec![0.0; 2 * hidden], hidden);
    assert!(refused(&across, &mut kv));
    // Rows past the batch, or values not one row per embedding row.
    let mut past = batch.clone();
    past.push_bidirectional_image(7, &vec![0.0; 2 * hidden], hidden);
    assert!(refused(&past, &mut kv));
    let mut short = batch.clone();
    short.input_embeddings.rows = vec![1, 2];
    short.input_embeddings.values = vec![0.0; hidden];
    assert!(refused(&short, &mut kv));
    let mut fine = batch;
    fine.push_bidirectional_image(1, &vec![0.0; 2 * hidden], hidden);
    fine.push_bidirectional_image(5, &vec![0.0; 2 * hidden], hidden);
    assert!(model.forward(&fine, &mut kv).is_ok());
}

/// The fixture's tensors under another checkpoint layout.
struct Renamed {
    inner: Checkpoint,
    /// The fixture's (transformers 5) name of a tensor named `name` in the other layout.
    original: fn(&str) -> Option<String>,
}

impl TensorSource for Renamed {
    fn raw(&self, name: &str, shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        let original = (self.original)(name).unwrap_or_else(|| format!("<absent> {name}"));
        self.inner.raw(&original, shape)
    }

    fn contains(&self, name: &str) -> bool {
        (self.original)(name).is_some_and(|n| self.inner.contains(&n))
    }
}

#[test]
fn every_language_model_layout_loads_the_same_weights() {
    let dir = fixture_dir(FIXTURE);
    let config = ModelConfig::from_dir(&dir).unwrap();
    assert_eq!(config.architecture, "Gemma3ForConditionalGeneration");
    assert_eq!((config.hidden_size, config.vocab_size), (64, 515));
    let prompt = reference().prompt;
    let ids = &prompt.input_ids[..8];
    let logits = |model: &Model| -> Logits {
        let mut kv = cache(model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut batch = Batch::default();
        Sequence::new(ids.to_vec()).schedule(ids.len(), &mut pool, &mut batch);
        model.forward(&batch, &mut kv).unwrap()
    };
    let expected = logits(&model());
    // The fixture is saved as the hub's checkpoints are (`language_model.model.*`); the module
    // tree's own names (`model.language_model.*`), and a text model alone (`model.*`).
    let layouts: [fn(&str) -> Option<String>; 2] = [
        |n| {
            (n.strip_prefix("model.language_model."))
                .map(|rest| format!("language_model.model.{rest}"))
        },
        |n| (n.strip_prefix("model.")).map(|rest| format!("language_model.model.{rest}")),
    ];
    for original in layouts {
        let source = Renamed {
            inner: Checkpoint::open(&dir).unwrap(),
            original,
        };
        let model = Model::from_source(config.clone(), &source, &LoadOptions::default()).unwrap();
        assert_eq!(logits(&model), expected);
    }
}
