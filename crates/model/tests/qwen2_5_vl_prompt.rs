//! Qwen2.5-VL's language model against transformers (fixtures/models/qwen2_5-vl,
//! scripts/make_qwen_vl_fixture.py): the multimodal RoPE positions of `sluice_model::mrope`
//! equal `get_rope_index`'s, and the image features transformers computed, given at the
//! `<|image_pad|>` rows (`Batch::input_embeddings`) with those positions
//! (`Batch::mrope_positions`), give its logits at every position and its greedy continuation.
//! Image tokens attend causally, so a prompt may be cut anywhere, even inside an image.

mod common;

use common::qwen2_5_vl::{greedy_continuation, max_diff, reference, run_prompt, FIXTURE};
use common::{cache, fixture_dir, BlockPool, Sequence};
use sluice_model::checkpoint::{Checkpoint, RawTensor, TensorSource};
use sluice_model::{prompt_positions, Batch, LoadError, LoadOptions, Model, ModelConfig};

fn model() -> Model {
    Model::load(&fixture_dir(FIXTURE), &LoadOptions::default()).expect("load the text model")
}

/// transformers runs in f32 with its own summation orders; the references keep 5 decimals of the
/// logits and 7 of the image features. Measured: at most 6.6e-6 over both prompts (logits of a
/// few units), mostly the references' rounding; the bound is the Gemma 3 image prompts'.
const TOLERANCE: f32 = 1e-4;

#[test]
fn positions_equal_get_rope_index() {
    let reference = reference();
    for prompt in [&reference.prompt, &reference.two_images] {
        let (positions, delta) = prompt_positions(
            prompt.input_ids.len(),
            &prompt.prompt_images(),
            reference.merge_size,
        )
        .unwrap();
        let expected: Vec<[u32; 3]> = (0..prompt.input_ids.len())
            .map(|i| prompt.position_ids.clone().map(|axis| axis[i]))
            .collect();
        assert_eq!(positions, expected);
        assert_eq!(delta, prompt.rope_deltas);
    }
}

#[test]
fn the_text_before_the_first_image_gives_transformers_logits_without_3d_positions() {
    let (model, reference) = (model(), reference());
    assert_eq!(model.config().rope.mrope_section, Some([2, 3, 3]));
    for prompt in [&reference.prompt, &reference.two_images] {
        // Up to the first image the rows are text at plain positions: a text prompt.
        let text = prompt.image_runs()[0].start;
        let run = run_prompt(&model, &reference, prompt, &[text], false);
        let diff = max_diff(&run.logits, &prompt.logits[..text]);
        eprintln!("text prefix: max |logit diff| {diff:e} over {text} positions");
        assert!(diff < TOLERANCE, "max |logit diff| {diff}");
    }
}

#[test]
fn prompts_with_images_give_transformers_logits() {
    let (model, reference) = (model(), reference());
    for (name, prompt) in [
        ("one image", &reference.prompt),
        ("two images", &reference.two_images),
    ] {
        let n = prompt.input_ids.len();
        let run = run_prompt(&model, &reference, prompt, &[n], true);
        let diff = max_diff(&run.logits, &prompt.logits);
        let image = prompt.image_runs()[0].start;
        let from_image = max_diff(&run.logits[image..], &prompt.logits[image..]);
        assert!(diff < TOLERANCE, "{name}: max |logit diff| {diff}");
        // Token indices as positions are far from the reference: the 3-D positions are what
        // match it.
        let plain = run_prompt(&model, &reference, prompt, &[n], false);
        let plain = max_diff(&plain.logits, &prompt.logits);
        eprintln!(
            "{name}: max |logit diff| {diff:e} over {n} positions ({from_image:e} from the first \
             image on; by token index instead of 3-D positions {plain:e})"
        );
        assert!(
            plain > 100.0 * TOLERANCE,
            "{name}: plain positions differ by {plain}"
        );
    }
}

#[test]
fn greedy_continuations_decode_at_index_plus_rope_delta() {
    let (model, reference) = (model(), reference());
    for prompt in [&reference.prompt, &reference.two_images] {
        let generated = greedy_continuation(&model, &reference, prompt);
        assert_eq!(generated, prompt.greedy_tokens);
    }
}

#[test]
fn chunks_cut_anywhere_give_the_same_bits() {
    let (model, reference) = (model(), reference());
    for prompt in [&reference.prompt, &reference.two_images] {
        let n = prompt.input_ids.len();
        let whole = run_prompt(&model, &reference, prompt, &[n], true).logits;
        let runs = prompt.image_runs();
        let (first, last) = (&runs[0], runs.last().unwrap());
        // Before an image, inside one (causal attention lets a chunk end mid-image), right after
        // one, and several cuts at once.
        for cuts in [
            vec![first.start, n],
            vec![first.start + 1, n],
            vec![first.end, n],
            vec![5, first.start + 2, last.end - 1, last.end + 3, n],
        ] {
            let chunked = run_prompt(&model, &reference, prompt, &cuts, true).logits;
            assert!(chunked == whole, "cuts {cuts:?}");
        }
    }
}

/// An image prompt's rows get the same bits alone and in a batch before or after a text
/// sequence, whose rows take `[p, p, p]` (pushed after the image's positions were set, too), and
/// the text the same bits as alone.
#[test]
fn an_image_prompt_has_the_same_bits_beside_a_text_sequence() {
    let (model, reference) = (model(), reference());
    let prompt = &reference.two_images;
    let n = prompt.input_ids.len();
    let alone = run_prompt(&model, &reference, prompt, &[n], true).logits;
    let text: Vec<u32> = prompt.input_ids[..11].to_vec();
    let text_alone = {
        let mut kv = cache(&model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut batch = Batch::default();
        Sequence::new(text.clone()).schedule(text.len(), &mut pool, &mut batch);
        batch.logits_indices = (0..text.len()).collect();
        model.forward(&batch, &mut kv).unwrap().data
    };
    let hidden = model.config().hidden_size;
    let mrope = prompt.mrope(reference.merge_size);
    for text_first in [true, false] {
        let mut kv = cache(&model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut batch = Batch::default();
        if text_first {
            Sequence::new(text.clone()).schedule(text.len(), &mut pool, &mut batch);
        }
        let offset = batch.num_tokens();
        Sequence::new(prompt.input_ids.clone()).schedule(n, &mut pool, &mut batch);
        for (run, values) in prompt.image_runs().iter().zip(prompt.features(&reference)) {
            (batch.input_embeddings).push_run(offset + run.start, values, hidden);
        }
        batch.set_mrope_positions(offset, &mrope.rows(0, n));
        if !text_first {
            Sequence::new(text.clone()).schedule(text.len(), &mut pool, &mut batch);
        }
        let text_rows = if text_first { 0 } else { n };
        batch.logits_indices = (offset..offset + n)
            .chain(text_rows..text_rows + text.len())
            .collect();
        let out = model.forward(&batch, &mut kv).unwrap();
        let rows: Vec<Vec<f32>> = (0..n).map(|r| out.row(r).to_vec()).collect();
        assert!(rows == alone, "image prompt, text first: {text_first}");
        assert!(
            out.data[n * out.vocab_size..] == text_alone[..],
            "text first: {text_first}"
        );
    }
}

/// The fixture's tensors (the hub's names, `model.layers.*`) under the module tree's
/// (`model.language_model.layers.*`).
struct ModuleTreeNames(Checkpoint);

impl ModuleTreeNames {
    fn original(name: &str) -> Option<String> {
        match name.strip_prefix("model.language_model.") {
            Some(rest) => Some(format!("model.{rest}")),
            None => (name == "lm_head.weight").then(|| name.to_owned()),
        }
    }
}

impl TensorSource for ModuleTreeNames {
    fn raw(&self, name: &str, shape: &[usize]) -> Result<RawTensor<'_>, LoadError> {
        let original = Self::original(name).unwrap_or_else(|| format!("<absent> {name}"));
        self.0.raw(&original, shape)
    }

    fn contains(&self, name: &str) -> bool {
        Self::original(name).is_some_and(|n| self.0.contains(&n))
    }
}

#[test]
fn the_module_trees_names_load_the_same_weights() {
    let dir = fixture_dir(FIXTURE);
    let config = ModelConfig::from_dir(&dir).unwrap();
    assert_eq!(config.architecture, "Qwen2_5_VLForConditionalGeneration");
    let ids = &reference().prompt.input_ids[..12];
    let logits = |model: &Model| {
        let mut kv = cache(model);
        let mut pool = BlockPool::new(kv.num_blocks());
        let mut batch = Batch::default();
        Sequence::new(ids.to_vec()).schedule(ids.len(), &mut pool, &mut batch);
        model.forward(&batch, &mut kv).unwrap()
    };
    let source = ModuleTreeNames(Checkpoint::open(&dir).unwrap());
    let renamed = Model::from_source(config, &source, &LoadOptions::default()).unwrap();
    assert_eq!(logits(&renamed), logits(&model()));
}
