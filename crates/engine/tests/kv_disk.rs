//! The prefix cache's disk tier with real models, loaded the way the server loads them: a
//! prompt read back from disk (after the model is unloaded and loaded again, with an empty KV
//! cache) gives the same token ids and the same logprobs, bit for bit, as computing it, for a
//! full-attention and a sliding-window model, f32, f16 and quantized weights, alone and among
//! 16 concurrent requests; another tenant never reads it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_engine::kv_disk::DiskCache;
use sluice_engine::pool::{DirectoryLoader, LoadSettings, ModelLoader};
use sluice_engine::{EngineHandle, Event, GenerationRequest, RequestStream, SamplingParams};
use sluice_model::WeightDtype;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/models")
        .join(name)
}

fn settings(dtype: Option<WeightDtype>, kv_disk: Option<Arc<DiskCache>>) -> LoadSettings {
    LoadSettings {
        dtype,
        kv_disk,
        ..LoadSettings::with_fixed_kv(4, 8 << 20)
    }
}

fn request(prompt: Vec<u32>, seed: Option<u64>, salt: Option<u64>) -> GenerationRequest {
    GenerationRequest {
        sampling: SamplingParams {
            temperature: if seed.is_some() { 1.0 } else { 0.0 },
            seed,
            logprobs: Some(3),
            ..SamplingParams::default()
        },
        cache_salt: salt,
        ..GenerationRequest::greedy(prompt, 8)
    }
}

/// What a choice gave: its tokens, each token's logprob and top logprobs as bits, and the
/// prompt tokens served from a cache.
#[derive(Debug, PartialEq)]
struct Outcome {
    tokens: Vec<u32>,
    logprob_bits: Vec<u32>,
    cached: u32,
}

fn outcome(mut stream: RequestStream) -> Outcome {
    let mut out = Outcome {
        tokens: Vec::new(),
        logprob_bits: Vec::new(),
        cached: 0,
    };
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Delta {
                token_ids,
                logprobs,
                ..
            } => {
                out.tokens.extend(token_ids);
                for lp in logprobs {
                    out.logprob_bits.push(lp.logprob.to_bits());
                    out.logprob_bits
                        .extend(lp.top.iter().map(|(_, l)| l.to_bits()));
                }
            }
            Event::Finished { usage, error, .. } => {
                assert!(error.is_none(), "{error:?}");
                out.cached = usage.cached_prompt_tokens;
            }
            Event::Prompt { .. } | Event::Scheduled { .. } => {}
        }
    }
    out
}

/// 16 requests over prompts that share a long head (greedy and seeded, two tenants).
fn requests(vocab: u32) -> Vec<GenerationRequest> {
    (0..16u32)
        .map(|i| {
            let mut prompt: Vec<u32> = (0..41).map(|t| (t * 7 + 3) % (vocab - 10) + 5).collect();
            prompt.extend((0..3 + i % 4).map(|t| (t * 11 + i) % (vocab - 10) + 5));
            let seed = (i % 2 == 1).then_some(100 + u64::from(i));
            request(prompt, seed, (i % 4 == 3).then_some(77))
        })
        .collect()
}

/// Loads `dir`, runs `requests` (one alone first, then all 16 at once), and unloads it.
fn serve(dir: &Path, settings: &LoadSettings, requests: &[GenerationRequest]) -> Vec<Outcome> {
    let loaded = DirectoryLoader::new(settings.clone())
        .load(dir)
        .expect("loads");
    let engine: EngineHandle = loaded.engine;
    let mut out = vec![outcome(engine.submit(requests[0].clone()).unwrap())];
    let streams: Vec<_> = (requests[1..].iter())
        .map(|r| engine.submit(r.clone()).unwrap())
        .collect();
    out.extend(streams.into_iter().map(outcome));
    engine.shutdown();
    assert!(
        engine.wait_stopped(std::time::Duration::from_secs(60)),
        "the engine stops"
    );
    out
}

fn check(name: &str, dtype: Option<WeightDtype>) {
    let dir = fixture(name);
    let vocab = sluice_model::ModelFiles::config_at(&dir)
        .unwrap()
        .vocab_size as u32;
    let reqs = requests(vocab.min(500));
    let plain = serve(&dir, &settings(dtype, None), &reqs);
    let root = tempfile::tempdir().unwrap();
    let cache = DiskCache::open(&root.path().join("kv"), 1 << 30).unwrap();
    let with_disk = settings(dtype, Some(Arc::clone(&cache)));
    let cold = serve(&dir, &with_disk, &reqs);
    // An unload and a load: the KV cache starts empty, the directory does not.
    let warm = serve(&dir, &with_disk, &reqs);
    for (i, ((p, c), w)) in plain.iter().zip(&cold).zip(&warm).enumerate() {
        assert_eq!(
            p.tokens, c.tokens,
            "{name} {dtype:?} request {i}: writing changes nothing"
        );
        assert_eq!(
            p.logprob_bits, c.logprob_bits,
            "{name} {dtype:?} request {i}"
        );
        assert_eq!(
            c.tokens, w.tokens,
            "{name} {dtype:?} request {i}: read back from disk"
        );
        assert_eq!(
            c.logprob_bits, w.logprob_bits,
            "{name} {dtype:?} request {i}"
        );
        // Every request's 40-token head is on disk now: a warm start reads at least that much
        // (in its own tenant's scope).
        assert!(
            w.cached >= 40,
            "{name} {dtype:?} request {i}: {} cached",
            w.cached
        );
    }
    assert_eq!(
        cold[0].cached, 0,
        "the first request of an empty cache computes everything"
    );
    // Tenant 77's prompts are cached under its own scope only: its first request of the cold run
    // found nothing the shared-scope requests had computed.
    assert_eq!(
        cold[3].cached, 0,
        "{name} {dtype:?}: a tenant never reads another's blocks"
    );
}

#[test]
fn full_attention_f32_f16_and_quantized_read_back_bit_for_bit() {
    check("llama", Some(WeightDtype::F32));
    check("llama", Some(WeightDtype::F16));
    check("llama", WeightDtype::from_name("q8_0"));
    check("llama", WeightDtype::from_name("q4_k"));
}

#[test]
fn sliding_window_layers_read_back_bit_for_bit() {
    check("gemma3", None);
}
