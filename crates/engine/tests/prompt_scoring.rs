//! Scoring through the engine on the tiny fixture checkpoints: prompt logprobs, pooled
//! embeddings and next-token scores equal what transformers computes, and a request scores the
//! same bits alone as inside a busy batch of generation streams.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use sluice_engine::{
    Engine, EngineConfig, EngineHandle, Event, FinishReason, GenerationRequest, ModelExecutor,
    Pooling, Priority, PromptOutputs, PromptScores, RequestStream, SamplingParams, StopRules,
};
use sluice_model::{KvCache, KvDtype, LoadOptions, Model};
use sluice_text::Tokenizer;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/models")
        .join(name)
}

fn json(name: &str, file: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name).join(file)).expect("reference file");
    serde_json::from_str(&text).expect("valid json")
}

fn floats(v: &Value) -> Vec<f32> {
    (v.as_array().expect("array").iter())
        .map(|x| x.as_f64().expect("number") as f32)
        .collect()
}

fn ids(v: &Value) -> Vec<u32> {
    (v.as_array().expect("array").iter())
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

fn start(name: &str, config: EngineConfig) -> EngineHandle {
    let dir = fixture(name);
    let model = Model::load(&dir, &LoadOptions::default()).expect("fixture model loads");
    let kv = KvCache::new(model.config(), KvDtype::F32, 4, 256);
    let config = EngineConfig {
        max_model_len: model.config().max_position_embeddings,
        ..config
    };
    let tokenizer = Arc::new(Tokenizer::from_dir(&dir).expect("fixture tokenizer loads"));
    Engine::start(Box::new(ModelExecutor::new(model, kv)), tokenizer, config)
}

fn scoring(prompt: Vec<u32>, outputs: PromptOutputs) -> GenerationRequest {
    GenerationRequest {
        prompt_tokens: prompt,
        n: 1,
        sampling: SamplingParams::default(),
        stop: StopRules {
            max_tokens: 0,
            ..StopRules::default()
        },
        priority: Priority::Normal,
        cache_salt: None,
        caller: None,
        images: Default::default(),
        prompt_outputs: outputs,
    }
}

fn generation(prompt: Vec<u32>, max_tokens: u32) -> GenerationRequest {
    GenerationRequest {
        sampling: SamplingParams {
            seed: Some(7),
            ..SamplingParams::default()
        },
        stop: StopRules {
            max_tokens,
            ignore_eos: true,
            ..StopRules::default()
        },
        ..scoring(prompt, PromptOutputs::default())
    }
}

/// The scores of a score-only request, checking it generated nothing and ended with `length`.
fn scores_of(mut stream: RequestStream) -> PromptScores {
    let mut scores = None;
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Prompt { scores: s, .. } => scores = Some(*s),
            Event::Scheduled { .. } => {}
            Event::Delta { token_ids, .. } => assert!(token_ids.is_empty(), "nothing generated"),
            Event::Finished { reason, error, .. } => {
                assert_eq!(reason, FinishReason::Length, "{error:?}")
            }
        }
    }
    scores.expect("a Prompt event")
}

fn logprobs_wanted(k: u32) -> PromptOutputs {
    PromptOutputs {
        logprobs: Some(k),
        ..PromptOutputs::default()
    }
}

#[test]
fn prompt_logprobs_equal_log_softmax_of_the_transformers_logits_in_chunks() {
    for name in ["llama", "qwen3"] {
        let reference = json(name, "scoring_reference.json");
        let prompt = ids(&reference["prompt_ids"]);
        let want = floats(&reference["prompt_logprobs"]);
        // A 5-token budget cuts the prompt into six chunks.
        let engine = start(
            name,
            EngineConfig {
                max_num_batched_tokens: 5,
                ..EngineConfig::default()
            },
        );
        let scores = scores_of(
            engine
                .submit(scoring(prompt.clone(), logprobs_wanted(3)))
                .unwrap(),
        );
        assert_eq!(scores.logprobs.len(), prompt.len() - 1);
        for (i, (got, want)) in scores.logprobs.iter().zip(&want).enumerate() {
            assert_eq!(got.token_id, prompt[i + 1]);
            assert!(
                (got.logprob - want).abs() < 1e-3,
                "{name} position {i}: {} vs {want}",
                got.logprob
            );
            assert_eq!(got.top.len(), 3);
            assert!(
                got.top.windows(2).all(|w| w[0].1 >= w[1].1),
                "top is best first"
            );
            assert!(got.top[0].1 >= got.logprob);
        }
        engine.shutdown();
    }
}

#[test]
fn pooled_hidden_states_equal_the_transformers_pooling_for_each_mode() {
    let reference = json("qwen3", "scoring_reference.json");
    let prompt = ids(&reference["prompt_ids"]);
    let engine = start(
        "qwen3",
        EngineConfig {
            max_num_batched_tokens: 7,
            ..EngineConfig::default()
        },
    );
    for (pooling, key) in [
        (Pooling::Mean, "mean"),
        (Pooling::Cls, "cls"),
        (Pooling::LastToken, "lasttoken"),
    ] {
        let outputs = PromptOutputs {
            pooling: Some(pooling),
            ..PromptOutputs::default()
        };
        let scores = scores_of(engine.submit(scoring(prompt.clone(), outputs)).unwrap());
        let got = scores.embedding.expect("an embedding");
        let norm = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        let want = floats(&reference["pooled"][key]);
        let worst = (got.iter().zip(&want))
            .map(|(g, w)| (g / norm - w).abs())
            .fold(0f32, f32::max);
        assert!(
            worst < 1e-4,
            "{key}: normalised embedding differs by {worst}"
        );
    }
    engine.shutdown();
}

#[test]
fn next_token_scores_give_the_reference_reranker_relevance() {
    let reference = json("qwen3-reranker", "rerank_reference.json");
    let (yes, no) = (
        reference["yes"].as_u64().unwrap() as u32,
        reference["no"].as_u64().unwrap() as u32,
    );
    let engine = start("qwen3-reranker", EngineConfig::default());
    for result in reference["results"].as_array().unwrap() {
        let outputs = PromptOutputs {
            next_token_candidates: vec![yes, no],
            ..PromptOutputs::default()
        };
        let scores = scores_of(
            engine
                .submit(scoring(ids(&result["prompt_ids"]), outputs))
                .unwrap(),
        );
        let [(t_yes, l_yes), (t_no, l_no)] = scores.next_token[..] else {
            panic!("two next-token scores, got {:?}", scores.next_token)
        };
        assert_eq!((t_yes, t_no), (yes, no));
        let got = 1.0 / (1.0 + f64::from(l_no - l_yes).exp());
        let want = result["relevance"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-3 * want + 1e-7,
            "relevance {got} vs {want}"
        );
    }
    engine.shutdown();
}

/// Runs `request` while eight seeded generation streams with prompts of other lengths decode
/// around it, and returns its scores.
fn scored_in_a_busy_batch(
    engine: &EngineHandle,
    prompt: &[u32],
    request: GenerationRequest,
) -> PromptScores {
    let streams: Vec<RequestStream> = (0..8)
        .map(|i| {
            engine
                .submit(generation(prompt[..5 + i].to_vec(), 12))
                .unwrap()
        })
        .collect();
    let scores = scores_of(engine.submit(request).unwrap());
    for mut s in streams {
        while s.blocking_recv().is_some() {}
    }
    scores
}

#[test]
fn scoring_alone_and_inside_a_busy_batch_gives_identical_bits() {
    let reference = json("qwen3", "scoring_reference.json");
    let prompt = ids(&reference["prompt_ids"]);
    let outputs = PromptOutputs {
        logprobs: Some(5),
        pooling: Some(Pooling::Mean),
        next_token_candidates: vec![7, 9],
    };
    let config = EngineConfig {
        max_num_batched_tokens: 16,
        // Chunks follow the token budget only, so the busy run's chunks differ from the solo
        // run's purely by what else is in the batch.
        step_time_target: None,
        ..EngineConfig::default()
    };
    let alone = {
        let engine = start("qwen3", config.clone());
        let scores = scores_of(
            engine
                .submit(scoring(prompt.clone(), outputs.clone()))
                .unwrap(),
        );
        engine.shutdown();
        scores
    };
    let engine = start("qwen3", config);
    let busy = scored_in_a_busy_batch(&engine, &prompt, scoring(prompt.clone(), outputs));
    engine.shutdown();
    assert_eq!(alone.logprobs, busy.logprobs);
    assert_eq!(alone.embedding, busy.embedding);
    assert_eq!(alone.next_token, busy.next_token);
}

#[test]
fn echoed_generation_scores_its_prompt_and_still_generates() {
    let reference = json("llama", "scoring_reference.json");
    let prompt = ids(&reference["prompt_ids"]);
    let engine = start("llama", EngineConfig::default());
    let request = GenerationRequest {
        images: Default::default(),
        prompt_outputs: logprobs_wanted(0),
        ..generation(prompt.clone(), 4)
    };
    let mut stream = engine.submit(request).unwrap();
    let (mut order, mut generated) = (Vec::new(), 0);
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Prompt { scores, .. } => {
                assert_eq!(scores.logprobs.len(), prompt.len() - 1);
                order.push("prompt");
            }
            Event::Delta { token_ids, .. } => {
                generated += token_ids.len();
                order.push("delta");
            }
            Event::Finished { .. } => order.push("finished"),
            Event::Scheduled { .. } => order.push("scheduled"),
        }
    }
    assert_eq!(generated, 4);
    assert_eq!(order[..2], ["scheduled", "prompt"], "{order:?}");
    assert_eq!(order.last(), Some(&"finished"));
    engine.shutdown();
}
