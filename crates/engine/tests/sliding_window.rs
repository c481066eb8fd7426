//! Gemma 3's sliding-window layers through the engine: their keys and values live in a small
//! window pool whose blocks sequences give back as the window moves on, so a sequence runs far
//! past what that pool could hold whole; tokens match transformers and do not depend on what
//! else runs or on preemption; every window block returns when requests end.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use sluice_engine::{
    Engine, EngineConfig, EngineHandle, Event, FinishReason, GenerationRequest, ModelExecutor,
    RequestStream, SamplingParams,
};
use sluice_model::{KvCache, KvDtype, KvPools, LoadOptions, Model};
use sluice_text::Tokenizer;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/models")
        .join(name)
}

/// The gemma3 fixture (window 8, layers sliding, sliding, global, ...) with 64 full blocks of 4
/// tokens and `window_blocks` window blocks.
fn start(window_blocks: usize, config: EngineConfig) -> EngineHandle {
    let dir = fixture("gemma3");
    let model = Model::load(&dir, &LoadOptions::default()).expect("fixture model loads");
    let window = model.config().sliding_window.expect("a window");
    let pools = KvPools::with_window(64, window, window_blocks);
    let kv = KvCache::with_pools(model.config(), KvDtype::F32, 4, pools);
    let config = EngineConfig {
        max_model_len: model.config().max_position_embeddings,
        ..config
    };
    let tokenizer = Arc::new(Tokenizer::from_dir(&dir).expect("fixture tokenizer loads"));
    Engine::start(Box::new(ModelExecutor::new(model, kv)), tokenizer, config)
}

fn request(prompt: Vec<u32>, max_tokens: u32, seed: Option<u64>) -> GenerationRequest {
    GenerationRequest {
        sampling: SamplingParams {
            temperature: if seed.is_some() { 1.0 } else { 0.0 },
            seed,
            ..SamplingParams::default()
        },
        ..GenerationRequest::greedy(prompt, max_tokens)
    }
}

fn tokens_of(mut stream: RequestStream) -> Vec<u32> {
    let mut tokens = Vec::new();
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Delta { token_ids, .. } => tokens.extend(token_ids),
            Event::Finished { reason, error, .. } => {
                assert_eq!(reason, FinishReason::Length, "{error:?}")
            }
            Event::Prompt { .. } | Event::Scheduled { .. } => {}
        }
    }
    tokens
}

fn reference() -> (Vec<u32>, Vec<u32>) {
    let text = std::fs::read_to_string(fixture("gemma3").join("reference.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let ids = |k: &str| {
        (v[k].as_array().unwrap().iter())
            .map(|x| x.as_u64().unwrap() as u32)
            .collect::<Vec<_>>()
    };
    (ids("prompt_ids"), ids("greedy_tokens"))
}

#[test]
fn a_sequence_runs_far_past_what_the_window_pool_holds_and_matches_transformers() {
    let (prompt, greedy) = reference();
    // 4 window blocks = 16 positions; the sequence reaches 230. Chunks of 4 tokens need at most
    // (8 - 1) / 4 + 2 + 1 = 4 window blocks.
    let config = EngineConfig {
        max_num_batched_tokens: 4,
        ..EngineConfig::default()
    };
    let engine = start(4, config);
    let max_tokens = 230 - prompt.len() as u32;
    let tokens = tokens_of(
        engine
            .submit(request(prompt.clone(), max_tokens, None))
            .unwrap(),
    );
    assert_eq!(tokens.len(), max_tokens as usize);
    assert_eq!(
        tokens[..greedy.len()],
        greedy[..],
        "transformers' greedy tokens"
    );
    let m = engine.metrics().snapshot();
    assert_eq!((m.kv_window_blocks_total, m.kv_window_blocks_used), (4, 0));
    assert_eq!(m.kv_blocks_used, 0);
    engine.shutdown();
}

#[test]
fn seeded_streams_give_the_same_tokens_alone_and_with_a_window_pool_that_forces_preemption() {
    let (prompt, _) = reference();
    // Short prompts: admitted with one window block each, every sequence later holds three.
    let prompts: Vec<Vec<u32>> = (0..8)
        .map(|i| prompt[i % 3..i % 3 + 2 + i % 2].to_vec())
        .collect();
    let alone: Vec<Vec<u32>> = {
        let engine = start(64, EngineConfig::default());
        let out = (prompts.iter().enumerate())
            .map(|(i, p)| {
                tokens_of(
                    engine
                        .submit(request(p.clone(), 40, Some(i as u64)))
                        .unwrap(),
                )
            })
            .collect();
        engine.shutdown();
        out
    };
    // Eight sequences grow to 8 * 3 window blocks; 14 force preemptions.
    let engine = start(14, EngineConfig::default());
    let streams: Vec<RequestStream> = (prompts.iter().enumerate())
        .map(|(i, p)| {
            engine
                .submit(request(p.clone(), 40, Some(i as u64)))
                .unwrap()
        })
        .collect();
    let together: Vec<Vec<u32>> = streams.into_iter().map(tokens_of).collect();
    assert_eq!(together, alone);
    let m = engine.metrics().snapshot();
    assert!(m.preemptions > 0, "the window pool was never short");
    assert_eq!((m.kv_window_blocks_used, m.kv_blocks_used), (0, 0));
    engine.shutdown();
}

/// The tokens of a stream and how many prompt tokens came from the prefix cache.
fn tokens_and_cached(mut stream: RequestStream) -> (Vec<u32>, u32) {
    let (mut tokens, mut cached) = (Vec::new(), 0);
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Delta { token_ids, .. } => tokens.extend(token_ids),
            Event::Finished { usage, error, .. } => {
                assert_eq!(error, None);
                cached = usage.cached_prompt_tokens;
            }
            Event::Prompt { .. } | Event::Scheduled { .. } => {}
        }
    }
    (tokens, cached)
}

#[test]
fn a_second_turn_reuses_the_first_turns_window_blocks_and_gives_the_cold_tokens() {
    let (prompt, _) = reference();
    let engine = start(16, EngineConfig::default());
    let (first, cached) =
        tokens_and_cached(engine.submit(request(prompt.clone(), 24, None)).unwrap());
    assert_eq!(cached, 0);
    // The next turn of a chat: the whole first turn, then more.
    let mut next = prompt.clone();
    next.extend(&first);
    next.extend(&prompt[..3]);
    let (warm, cached) = tokens_and_cached(engine.submit(request(next.clone(), 16, None)).unwrap());
    // Every full block the first turn computed (its last token's K/V never was), window
    // layers included: blocks of 4.
    let computed = prompt.len() + first.len() - 1;
    assert_eq!(cached as usize, computed / 4 * 4);
    let m = engine.metrics().snapshot();
    assert_eq!((m.kv_window_blocks_used, m.kv_blocks_used), (0, 0));
    engine.shutdown();
    // The same turn computed cold gives the same tokens.
    let cold_config = EngineConfig {
        enable_prefix_caching: false,
        ..EngineConfig::default()
    };
    let cold_engine = start(16, cold_config);
    let (cold, cached) = tokens_and_cached(cold_engine.submit(request(next, 16, None)).unwrap());
    assert_eq!(cached, 0);
    assert_eq!(warm, cold);
    cold_engine.shutdown();
}
