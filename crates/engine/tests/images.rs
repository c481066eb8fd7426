//! Prompts with images through the engine, against the references of the Gemma 3 and
//! Qwen2.5-VL vision fixtures (fixtures/models/gemma3-vision, qwen2_5-vl): the image files
//! encoded by `ImageInput`, the prompt
//! chunked around the images by a small token budget, or resumed from a prefix-cache hit that
//! ends inside an image, give transformers' greedy tokens; the next turn of a conversation
//! reuses the blocks of the images it repeats; every block returns.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use sluice_engine::{
    Engine, EngineConfig, EngineHandle, Event, FinishReason, GenerationRequest, ImageInput,
    ModelExecutor, PromptImages, RequestStream, SamplingParams,
};
use sluice_model::architectures::registry::{vision_encoder, VisionEncoderKind};
use sluice_model::{KvCache, KvDtype, LoadOptions, Model};
use sluice_text::Tokenizer;

const GEMMA: &str = "gemma3-vision";
const QWEN: &str = "qwen2_5-vl";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/models")
        .join(name)
}

struct Served {
    engine: EngineHandle,
    images: ImageInput,
    fixture: &'static str,
}

/// The Gemma 3 fixture's engine with `num_blocks` blocks of `block_size` tokens and a step
/// budget of `budget` tokens, and its image input.
fn start(block_size: usize, num_blocks: usize, budget: usize) -> Served {
    start_fixture(GEMMA, block_size, num_blocks, budget)
}

fn start_fixture(
    name: &'static str,
    block_size: usize,
    num_blocks: usize,
    budget: usize,
) -> Served {
    let dir = fixture(name);
    let model = Model::load(&dir, &LoadOptions::default()).expect("fixture model loads");
    let kind = vision_encoder(&model.config().architecture).expect("takes images");
    let expected = match name {
        GEMMA => VisionEncoderKind::Gemma3,
        _ => VisionEncoderKind::Qwen2_5Vl,
    };
    assert_eq!(kind, expected);
    let tokenizer = Arc::new(Tokenizer::from_dir(&dir).expect("fixture tokenizer loads"));
    let images = ImageInput::load(kind, &dir, None, &tokenizer).expect("encoder loads");
    let kv = KvCache::new(model.config(), KvDtype::F32, block_size, num_blocks);
    let config = EngineConfig {
        max_model_len: model.config().max_position_embeddings,
        max_num_batched_tokens: budget,
        ..EngineConfig::default()
    };
    let engine = Engine::start(Box::new(ModelExecutor::new(model, kv)), tokenizer, config);
    // Encodings give way to the engine's steps, as served.
    let images = images.with_gate(Arc::clone(engine.encode_gate()));
    Served {
        engine,
        images,
        fixture: name,
    }
}

/// A prompt of the reference (`prompt` or `two_images`): its ids and its images' file names,
/// the greedy tokens transformers gave, and the log-probabilities of every token after the
/// prompt.
fn reference(name: &str) -> (Vec<u32>, Vec<String>, Vec<u32>, Vec<f32>) {
    reference_of(GEMMA, name)
}

fn reference_of(fixture_name: &str, name: &str) -> (Vec<u32>, Vec<String>, Vec<u32>, Vec<f32>) {
    let text = std::fs::read_to_string(fixture(fixture_name).join("reference.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let ids = |k: &str| {
        (v[name][k].as_array().unwrap().iter())
            .map(|x| x.as_u64().unwrap() as u32)
            .collect::<Vec<_>>()
    };
    let images = (v[name]["images"].as_array().unwrap().iter())
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    let greedy = ids("greedy_tokens");
    let logits = v[name]["logits"].as_array().unwrap().last().unwrap();
    let logits: Vec<f64> = (logits.as_array().unwrap().iter())
        .map(|x| x.as_f64().unwrap())
        .collect();
    let max = logits.iter().copied().fold(f64::MIN, f64::max);
    let log_sum = logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln() + max;
    let logprobs = logits.iter().map(|l| (l - log_sum) as f32).collect();
    (ids("input_ids"), images, greedy, logprobs)
}

/// transformers' logits are kept to 5 decimals; the model crate's parity is 1.3e-5.
const TOLERANCE: f32 = 1e-4;

/// Alternatives compared after the prompt: the sampled token is nearly certain (its
/// log-probability about 0 whatever the image), the runners-up are not.
const TOP: u32 = 5;

/// Largest difference between the top alternatives after the prompt and the reference's
/// log-probabilities of the same tokens.
fn top_diff(top: &[(u32, f32)], reference: &[f32]) -> f32 {
    assert_eq!(top.len(), TOP as usize);
    (top.iter())
        .map(|&(id, logprob)| (logprob - reference[id as usize]).abs())
        .fold(0.0, f32::max)
}

fn prompt_images(served: &Served, prompt: &[u32], files: &[String]) -> Arc<PromptImages> {
    let encoded = (files.iter())
        .map(|f| {
            let bytes = std::fs::read(fixture(served.fixture).join("images").join(f)).unwrap();
            served.images.encode(&bytes).unwrap()
        })
        .collect();
    Arc::new(served.images.prompt_images(prompt, encoded).unwrap())
}

fn request(prompt: Vec<u32>, images: Arc<PromptImages>, max_tokens: u32) -> GenerationRequest {
    GenerationRequest {
        sampling: SamplingParams {
            logprobs: Some(TOP),
            temperature: 0.0,
            ..SamplingParams::default()
        },
        images,
        ..GenerationRequest::greedy(prompt, max_tokens)
    }
}

/// What a request gave.
struct Output {
    tokens: Vec<u32>,
    /// The top alternatives to the first token.
    first_top: Vec<(u32, f32)>,
    /// Prompt tokens read from the prefix cache.
    cached: u32,
}

fn tokens_of(mut stream: RequestStream) -> Output {
    let (mut tokens, mut cached, mut logprobs) = (Vec::new(), 0, Vec::new());
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Delta {
                token_ids,
                logprobs: l,
                ..
            } => {
                tokens.extend(token_ids);
                logprobs.extend(l.into_iter().map(|l| l.top));
            }
            Event::Finished { reason, error, .. } => {
                assert_eq!(reason, FinishReason::Length, "{error:?}")
            }
            Event::Scheduled {
                cached_prompt_tokens,
                ..
            } => cached = cached_prompt_tokens,
            Event::Prompt { .. } => {}
        }
    }
    Output {
        tokens,
        first_top: logprobs.swap_remove(0),
        cached,
    }
}

#[test]
fn prompts_chunked_around_their_images_give_the_reference_greedy_tokens() {
    // 8 tokens a step: the first image's 16 rows (9..25) are computed in one step past it.
    let served = start(4, 64, 8);
    for name in ["prompt", "two_images"] {
        let (prompt, files, greedy, after_prompt) = reference(name);
        let images = prompt_images(&served, &prompt, &files);
        let stream = (served.engine)
            .submit(request(prompt.clone(), images, greedy.len() as u32))
            .unwrap();
        let out = tokens_of(stream);
        assert_eq!(out.tokens, greedy, "{name}");
        let diff = top_diff(&out.first_top, &after_prompt);
        assert!(diff < TOLERANCE, "{name}: logprobs off by {diff}");
        // The check sees the image: another one moves the logprob far past the tolerance.
        let other = vec!["photo444_64x40.jpg".to_string(); files.len()];
        let images = prompt_images(&served, &prompt, &other);
        let stream = (served.engine).submit(request(prompt, images, 1)).unwrap();
        let diff = top_diff(&tokens_of(stream).first_top, &after_prompt);
        assert!(
            diff > 100.0 * TOLERANCE,
            "{name}: another image moved it {diff}"
        );
    }
    assert_eq!(served.engine.metrics().snapshot().kv_blocks_used, 0);
    served.engine.shutdown();
}

#[test]
fn a_cache_hit_ending_inside_an_image_computes_the_rest_of_it_and_matches() {
    let served = start(16, 16, 256);
    let (prompt, files, greedy, after_prompt) = reference("prompt");
    // The prompt up to the image's end (the run is 9..25): its one full block, 0..16, ends
    // inside the image.
    let short = prompt[..26].to_vec();
    let images = prompt_images(&served, &short, &files);
    let stream = served.engine.submit(request(short, images, 1)).unwrap();
    tokens_of(stream);
    let images = prompt_images(&served, &prompt, &files);
    let stream = (served.engine)
        .submit(request(prompt, images, greedy.len() as u32))
        .unwrap();
    let out = tokens_of(stream);
    assert_eq!(out.cached, 16, "the hit ends inside the image");
    assert_eq!(out.tokens, greedy);
    let diff = top_diff(&out.first_top, &after_prompt);
    assert!(diff < TOLERANCE, "logprobs off by {diff}");
    assert_eq!(served.engine.metrics().snapshot().kv_blocks_used, 0);
    served.engine.shutdown();
}

#[test]
fn the_next_turn_reuses_the_blocks_of_the_same_image_and_only_those() {
    let (block, served) = (4, start(4, 64, 256));
    let (prompt, files, greedy, after_prompt) = reference("two_images");
    let both = prompt_images(&served, &prompt, &files);
    let runs: Vec<_> = both.runs().collect();
    // Turn one: the conversation up to just after the first image, that image alone.
    let first_turn = prompt[..runs[0].end + 1].to_vec();
    let images = prompt_images(&served, &first_turn, &files[..1]);
    tokens_of(
        served
            .engine
            .submit(request(first_turn.clone(), images, 1))
            .unwrap(),
    );
    // Turn two adds text and a second image: every full block of turn one is found (a cache
    // scope folded from all of a prompt's images would have found none).
    let stream = (served.engine)
        .submit(request(prompt.clone(), both, greedy.len() as u32))
        .unwrap();
    let out = tokens_of(stream);
    assert_eq!(out.cached as usize, first_turn.len() / block * block);
    assert!(
        out.cached as usize > runs[0].end - block,
        "past the first image"
    );
    assert_eq!(out.tokens, greedy);
    let diff = top_diff(&out.first_top, &after_prompt);
    assert!(diff < TOLERANCE, "logprobs off by {diff}");
    // Another first image: only the blocks wholly before it are shared.
    let other = ["rgba_40x30.png".to_string(), files[1].clone()];
    let images = prompt_images(&served, &prompt, &other);
    let out = tokens_of(served.engine.submit(request(prompt, images, 1)).unwrap());
    assert_eq!(out.cached as usize, runs[0].start / block * block);
    assert_eq!(served.engine.metrics().snapshot().kv_blocks_used, 0);
    served.engine.shutdown();
}

#[test]
fn qwen_prompts_give_the_reference_greedy_tokens_alone_and_among_others() {
    // 8 tokens a step: the prompt is chunked around and through its images.
    let served = start_fixture(QWEN, 4, 128, 8);
    for name in ["prompt", "two_images"] {
        let (prompt, files, greedy, after_prompt) = reference_of(QWEN, name);
        let images = prompt_images(&served, &prompt, &files);
        let alone = (served.engine)
            .submit(request(prompt.clone(), images.clone(), greedy.len() as u32))
            .unwrap();
        let out = tokens_of(alone);
        assert_eq!(out.tokens, greedy, "{name}");
        let diff = top_diff(&out.first_top, &after_prompt);
        assert!(diff < TOLERANCE, "{name}: logprobs off by {diff}");
        // Among a text prompt and another image prompt, in one batch: the same tokens.
        let (other, other_files, ..) = reference_of(QWEN, "prompt");
        let other_images = prompt_images(&served, &other, &other_files);
        let text: Vec<u32> = (0..40).map(|i| 10 + i % 300).collect();
        let streams = [
            (served.engine).submit(request(text, Default::default(), 8)),
            (served.engine).submit(request(prompt.clone(), images, greedy.len() as u32)),
            (served.engine).submit(request(other, other_images, 8)),
        ];
        let outs: Vec<Output> = streams.into_iter().map(|s| tokens_of(s.unwrap())).collect();
        assert_eq!(outs[1].tokens, greedy, "{name} among others");
        assert_eq!(
            outs[1].first_top, out.first_top,
            "{name}: the same bits in a batch"
        );
    }
    // The next turn reuses the image's blocks and still decodes at the right positions.
    let (prompt, files, greedy, _) = reference_of(QWEN, "two_images");
    let images = prompt_images(&served, &prompt, &files);
    let out = tokens_of(
        (served.engine)
            .submit(request(prompt, images, greedy.len() as u32))
            .unwrap(),
    );
    assert!(out.cached > 0, "the same prompt again hits");
    assert_eq!(out.tokens, greedy);
    assert_eq!(served.engine.metrics().snapshot().kv_blocks_used, 0);
    served.engine.shutdown();
}

#[test]
fn images_encoded_while_a_stream_decodes_give_the_same_embeddings_and_tokens() {
    let served = start(4, 256, 64);
    let dir = fixture(GEMMA);
    let tokenizer = Tokenizer::from_dir(&dir).unwrap();
    let plain = ImageInput::load(VisionEncoderKind::Gemma3, &dir, None, &tokenizer).unwrap();
    let files: Vec<Vec<u8>> = (std::fs::read_dir(dir.join("images")).unwrap())
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect();
    let text: Vec<u32> = (0..40).map(|i| 10 + i % 300).collect();
    let expected = tokens_of(
        (served.engine)
            .submit(request(text.clone(), Default::default(), 200))
            .unwrap(),
    );
    // The same stream again, with every fixture image encoded through the gate meanwhile.
    let stream = (served.engine)
        .submit(request(text, Default::default(), 200))
        .unwrap();
    let gate = Arc::clone(served.engine.encode_gate());
    std::thread::scope(|scope| {
        let decoding = scope.spawn(|| tokens_of(stream));
        for bytes in &files {
            let encoded = served.images.encode(bytes).unwrap();
            assert_eq!(encoded, plain.encode(bytes).unwrap());
        }
        let out = decoding.join().unwrap();
        assert_eq!(out.tokens, expected.tokens);
    });
    assert_eq!(gate.active(), 0);
    let metrics = served.engine.metrics().snapshot();
    assert_eq!(metrics.image_encodings, 0, "the gauge follows the turns");
    assert_eq!(metrics.kv_blocks_used, 0);
    served.engine.shutdown();
}
