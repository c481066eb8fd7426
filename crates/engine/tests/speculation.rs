//! Speculative decoding on real (tiny, random-weight) models: with drafts from prompt lookup,
//! verified in the batched step, every request gives the same tokens, text, logprobs, stop
//! string and finish reason as plain decoding, alone and among concurrent requests in a pool
//! small enough to preempt; on f32 safetensors, quantized GGUF, a MoE and a sliding-window
//! model; greedy, seeded, penalised, biased, `n = 2`, `min_tokens`, stop strings, JSON mode and
//! a JSON schema.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_engine::executor::NgramProposer;
use sluice_engine::speculation::{ProposerSpec, SpeculationConfig};
use sluice_engine::{
    Engine, EngineConfig, EngineHandle, Event, Executor, FinishReason, GenerationRequest,
    ModelExecutor, Priority, PromptOutputs, RequestStream, ResponseFormat, SamplingParams,
    StopRules, TokenLogprob,
};
use sluice_model::{KvCache, KvDtype, LoadOptions, Model, ModelFiles};
use sluice_text::{StopSet, Tokenizer};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn tokenizer(files: &ModelFiles, path: &Path) -> Arc<Tokenizer> {
    Arc::new(match files.gguf_metadata() {
        Some(metadata) => Tokenizer::from_gguf(metadata).expect("fixture tokenizer loads"),
        None => Tokenizer::from_dir(path).expect("fixture tokenizer loads"),
    })
}

/// The model at `path` over a paged cache of `num_blocks` blocks of 4, and its end-of-sequence
/// ids and context length.
fn executor(path: &Path, num_blocks: usize) -> (ModelExecutor, Vec<u32>, usize) {
    let files = ModelFiles::open(path).expect("fixture model opens");
    let model = Model::from_files(&files, &LoadOptions::default()).expect("fixture model loads");
    let kv = KvCache::new(model.config(), KvDtype::F32, 4, num_blocks);
    let eos = model.config().eos_token_ids.clone();
    let context = model.config().max_position_embeddings;
    (ModelExecutor::new(model, kv), eos, context)
}

fn start(path: &Path, num_blocks: usize, config: EngineConfig) -> EngineHandle {
    let (executor, eos_token_ids, max_model_len) = executor(path, num_blocks);
    let draft = match &config.speculation {
        Some(SpeculationConfig {
            proposer: ProposerSpec::DraftModel(draft),
            ..
        }) => Some(Box::new(self::executor(draft, num_blocks).0) as Box<dyn Executor>),
        _ => None,
    };
    let tokenizer = tokenizer(&ModelFiles::open(path).unwrap(), path);
    let config = EngineConfig {
        eos_token_ids,
        max_model_len,
        ..config
    };
    Engine::start_with_draft(Box::new(executor), draft, tokenizer, config)
}

/// Prompt lookup, or the draft model at `draft`.
fn speculation(adaptive: bool, draft: Option<&Path>) -> Option<SpeculationConfig> {
    let proposer = match draft {
        Some(path) => ProposerSpec::DraftModel(path.to_owned()),
        None => ProposerSpec::Ngram(NgramProposer {
            min_ngram: 1,
            max_ngram: 3,
        }),
    };
    Some(SpeculationConfig {
        proposer,
        max_draft_tokens: 5,
        adaptive,
    })
}

/// One choice's whole output.
#[derive(Debug, Clone, PartialEq, Default)]
struct Choice {
    tokens: Vec<u32>,
    text: String,
    logprobs: Vec<TokenLogprob>,
    reason: Option<FinishReason>,
    stop_string: Option<String>,
}

fn collect(mut stream: RequestStream, n: usize) -> Vec<Choice> {
    let mut choices = vec![Choice::default(); n];
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Delta {
                choice,
                text,
                token_ids,
                logprobs,
            } => {
                let c = &mut choices[choice as usize];
                c.tokens.extend(token_ids);
                c.text.push_str(&text);
                c.logprobs.extend(logprobs);
            }
            Event::Finished {
                choice,
                reason,
                stop_string,
                ..
            } => {
                let c = &mut choices[choice as usize];
                (c.reason, c.stop_string) = (Some(reason), stop_string);
            }
            Event::Prompt { .. } | Event::Scheduled { .. } => {}
        }
    }
    choices
}

fn request(
    prompt: Vec<u32>,
    sampling: SamplingParams,
    stop: StopRules,
    n: u32,
) -> GenerationRequest {
    GenerationRequest {
        prompt_tokens: prompt,
        n,
        sampling,
        stop,
        priority: Priority::Normal,
        cache_salt: None,
        caller: None,
        images: Default::default(),
        prompt_outputs: PromptOutputs::default(),
    }
}

const WORDS: [&str; 12] = [
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "runs", "home",
];

/// A text that repeats itself (so prompt lookup has something to find), tokenized: `len`
/// words from a period that depends on `seed`.
fn prompt(tokenizer: &Tokenizer, seed: usize, len: usize) -> Vec<u32> {
    let period = 3 + seed % 4;
    let words: Vec<&str> = (0..len)
        .map(|i| WORDS[(i % period + seed) % WORDS.len()])
        .collect();
    tokenizer
        .encode(&words.join(" "), false)
        .expect("plain words tokenize")
}

/// Requests of every kind the sampler knows; `stop` is a string the model is known to write.
fn requests(tokenizer: &Tokenizer, stop: &str) -> Vec<GenerationRequest> {
    let prompt = |seed, len| prompt(tokenizer, seed, len);
    let length = |max_tokens| StopRules {
        max_tokens,
        ignore_eos: true,
        ..StopRules::default()
    };
    let seeded = |seed, temperature| SamplingParams {
        temperature,
        seed: Some(seed),
        ..SamplingParams::default()
    };
    let greedy = seeded(0, 0.0);
    let mut out = vec![
        request(prompt(1, 24), greedy.clone(), length(24), 1),
        request(
            prompt(2, 20),
            SamplingParams {
                top_p: 0.9,
                ..seeded(11, 0.8)
            },
            length(24),
            1,
        ),
        request(
            prompt(3, 26),
            SamplingParams {
                top_k: Some(20),
                repetition_penalty: 1.2,
                presence_penalty: 0.3,
                frequency_penalty: 0.2,
                ..seeded(12, 1.0)
            },
            length(20),
            1,
        ),
        request(
            prompt(4, 18),
            SamplingParams {
                logprobs: Some(3),
                ..greedy.clone()
            },
            length(24),
            1,
        ),
        request(
            prompt(5, 22),
            SamplingParams {
                logprobs: Some(2),
                ..seeded(13, 0.7)
            },
            length(16),
            2,
        ),
        request(
            prompt(6, 21),
            seeded(14, 0.9),
            StopRules {
                max_tokens: 24,
                min_tokens: 6,
                ..StopRules::default()
            },
            1,
        ),
        request(
            prompt(7, 19),
            SamplingParams {
                logit_bias: vec![(7, 3.0), (9, -2.0)],
                ..seeded(15, 0.6)
            },
            length(20),
            1,
        ),
        request(
            prompt(8, 23),
            SamplingParams {
                response_format: ResponseFormat::JsonObject,
                ..seeded(16, 1.5)
            },
            length(30),
            1,
        ),
        request(
            prompt(2, 25),
            SamplingParams {
                response_format: ResponseFormat::JsonSchema(Arc::new(
                    sluice_text::constraint::Schema::compile(&serde_json::json!({
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 22, 333]}},
                        "required": ["ok", "n"]
                    }))
                    .expect("a supported schema"),
                )),
                ..seeded(17, 1.2)
            },
            length(30),
            1,
        ),
    ];
    if !stop.is_empty() {
        let mut stopped = length(24);
        stopped.stop_strings = StopSet::new(vec![stop.to_owned()]);
        out.push(request(prompt(1, 24), greedy, stopped, 1));
    }
    out
}

/// Runs the requests without speculation, one at a time; then with it (prompt lookup, or the
/// draft model at `draft`), fixed and adaptive, all at once in a pool that preempts: every
/// output is the same. Returns the draft tokens accepted and proposed.
fn speculation_changes_nothing_on(path: &Path, draft: Option<&Path>) -> (u64, u64) {
    let plain = start(path, 256, EngineConfig::default());
    let tokenizer = tokenizer(&ModelFiles::open(path).unwrap(), path);
    // A stop string the greedy output of the model holds (from its second half, if it can).
    let probe = collect(
        plain.submit(requests(&tokenizer, "")[0].clone()).unwrap(),
        1,
    );
    let chars: Vec<char> = probe[0].text.chars().collect();
    let half = chars.len() / 2;
    let stop: String = ((half..chars.len()).chain(1..half))
        .filter_map(|i| chars.get(i..i + 2))
        .find(|w| w.iter().all(|c| c.is_alphanumeric()))
        .unwrap_or_else(|| panic!("two letters in the greedy text {:?}", probe[0].text))
        .iter()
        .collect();
    let requests = requests(&tokenizer, &stop);
    let solo: Vec<Vec<Choice>> = (requests.iter())
        .map(|q| collect(plain.submit(q.clone()).unwrap(), q.n as usize))
        .collect();
    assert_eq!(solo.last().unwrap()[0].stop_string.as_deref(), Some(&*stop));
    let (mut accepted, mut proposed) = (0, 0);
    for adaptive in [false, true] {
        let config = EngineConfig {
            max_num_batched_tokens: 48,
            speculation: speculation(adaptive, draft),
            ..EngineConfig::default()
        };
        let busy = start(path, 40, config);
        let streams: Vec<_> = (requests.iter())
            .map(|q| busy.submit(q.clone()).unwrap())
            .collect();
        for (i, (stream, q)) in streams.into_iter().zip(&requests).enumerate() {
            let got = collect(stream, q.n as usize);
            assert_eq!(
                got,
                solo[i],
                "{}: request {i}, adaptive {adaptive}",
                path.display()
            );
        }
        let m = busy.metrics().snapshot();
        if !adaptive {
            assert!(m.preemptions > 0, "{}: the pool preempts", path.display());
            assert!(
                m.spec_decode.drafts > 0,
                "{}: drafts were verified",
                path.display()
            );
        }
        accepted += m.spec_decode.accepted_tokens;
        proposed += m.spec_decode.draft_tokens;
        let blocks = busy.metrics().snapshot().kv_blocks_used;
        assert_eq!(blocks, 0, "{}: every block is free", path.display());
    }
    (accepted, proposed)
}

#[test]
fn speculation_changes_no_output_of_f32_f16_quantized_moe_or_sliding_window_models() {
    let mut accepted = 0;
    for path in [
        fixtures().join("models/llama"),
        fixtures().join("gguf/llama-f16.gguf"),
        fixtures().join("gguf/qwen2-q256-q4_k_m.gguf"),
        fixtures().join("gguf/qwen2-q256-q8_0.gguf"),
        fixtures().join("models/qwen3-moe"),
        fixtures().join("models/gemma3"),
    ] {
        let (n, _) = speculation_changes_nothing_on(&path, None);
        eprintln!("{}: {n} draft tokens accepted", path.display());
        accepted += n;
    }
    assert!(
        accepted > 50,
        "prompt lookup drafts were accepted: {accepted}"
    );
}

#[test]
fn a_draft_model_changes_no_output_and_drafts_what_the_target_would_write() {
    // The target as its own draft: greedy drafts are the target's own greedy tokens.
    let llama = fixtures().join("models/llama");
    let (accepted, proposed) = speculation_changes_nothing_on(&llama, Some(&llama));
    eprintln!("llama drafting for itself: {accepted} of {proposed} accepted");
    // Greedy requests draw exactly the draft's tokens: every draft token is accepted. (Over
    // every request the share depends on the sampled ones and, adaptive, on timing.)
    let config = EngineConfig {
        speculation: speculation(false, Some(&llama)),
        ..EngineConfig::default()
    };
    let engine = start(&llama, 256, config);
    let tokenizer = tokenizer(&ModelFiles::open(&llama).unwrap(), &llama);
    for q in requests(&tokenizer, "")
        .into_iter()
        .filter(|q| q.sampling.temperature == 0.0)
    {
        collect(engine.submit(q).unwrap(), 1);
    }
    let m = engine.metrics().snapshot().spec_decode;
    assert!(m.draft_tokens > 0, "greedy requests were drafted for");
    assert_eq!(m.accepted_tokens, m.draft_tokens, "{m:?}");
    assert!(
        accepted > 0 && proposed >= accepted,
        "{accepted} of {proposed}"
    );
    // A draft of other weights over the same vocabulary: Q8_0 drafting for Q4_K_M.
    let gguf = fixtures().join("gguf");
    let (accepted, proposed) = speculation_changes_nothing_on(
        &gguf.join("qwen2-q256-q4_k_m.gguf"),
        Some(&gguf.join("qwen2-q256-q8_0.gguf")),
    );
    eprintln!("q8_0 drafting for q4_k_m: {accepted} of {proposed} accepted");
    assert!(
        accepted > 0 && proposed > accepted,
        "{accepted} of {proposed}"
    );
    // Sliding-window layers in both: the draft's window layers, too, read and write at the
    // target's full-group block ids.
    let (accepted, proposed) = speculation_changes_nothing_on(
        &gguf.join("gemma3-p6-q4_k_m.gguf"),
        Some(&gguf.join("gemma3-p6-q8_0.gguf")),
    );
    eprintln!("gemma3 q8_0 drafting for q4_k_m: {accepted} of {proposed} accepted");
    assert!(accepted > 0, "{accepted} of {proposed}");
}
