//! The engine over a real (tiny, random-weight) Llama checkpoint from `fixtures/models/llama`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_model::{KvCache, KvDtype, LoadOptions, Model, ModelFiles};
use sluice_text::Tokenizer;

use super::*;
use crate::engine::{Engine, EngineConfig};
use crate::handle::{EngineHandle, RequestStream};
use crate::request::{Event, FinishReason, GenerationRequest, ResponseFormat, SamplingParams};

fn fixture() -> PathBuf {
    crate::testkit::fixture("llama")
}

struct Reference {
    prompt_ids: Vec<u32>,
    greedy_tokens: Vec<u32>,
}

fn reference() -> Reference {
    let text = std::fs::read_to_string(fixture().join("reference.json")).expect("reference.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid json");
    let ids = |key: &str| -> Vec<u32> {
        json[key]
            .as_array()
            .expect("an array of ids")
            .iter()
            .map(|v| v.as_u64().expect("an id") as u32)
            .collect()
    };
    Reference {
        prompt_ids: ids("prompt_ids"),
        greedy_tokens: ids("greedy_tokens"),
    }
}

fn start(block_size: usize, num_blocks: usize, config: EngineConfig) -> EngineHandle {
    start_model(&fixture(), block_size, num_blocks, config)
}

/// An engine over the model at `path` (a fixture directory or GGUF file).
fn start_model(
    path: &Path,
    block_size: usize,
    num_blocks: usize,
    config: EngineConfig,
) -> EngineHandle {
    let files = ModelFiles::open(path).expect("fixture model opens");
    let model = Model::from_files(&files, &LoadOptions::default()).expect("fixture model loads");
    let tokenizer = Arc::new(match files.gguf_metadata() {
        Some(metadata) => Tokenizer::from_gguf(metadata).expect("fixture tokenizer loads"),
        None => Tokenizer::from_dir(path).expect("fixture tokenizer loads"),
    });
    let kv = KvCache::new(model.config(), KvDtype::F32, block_size, num_blocks);
    let config = EngineConfig {
        eos_token_ids: model.config().eos_token_ids.clone(),
        max_model_len: model.config().max_position_embeddings,
        ..config
    };
    Engine::start(Box::new(ModelExecutor::new(model, kv)), tokenizer, config)
}

fn request(prompt: Vec<u32>, sampling: SamplingParams, max_tokens: u32) -> GenerationRequest {
    GenerationRequest {
        sampling,
        ..GenerationRequest::greedy(prompt, max_tokens)
    }
}

/// Tokens, text and finish reason of a one-choice stream.
fn collect(mut stream: RequestStream) -> (Vec<u32>, String, Option<FinishReason>) {
    let (mut tokens, mut text, mut reason) = (Vec::new(), String::new(), None);
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Delta {
                token_ids, text: t, ..
            } => {
                tokens.extend(token_ids);
                text.push_str(&t);
            }
            Event::Finished { reason: r, .. } => reason = Some(r),
            Event::Scheduled { .. } => {}
            Event::Prompt { .. } => panic!("no prompt outputs were asked for"),
        }
    }
    (tokens, text, reason)
}

fn greedy() -> SamplingParams {
    SamplingParams {
        temperature: 0.0,
        ..SamplingParams::default()
    }
}

#[test]
fn greedy_output_matches_the_transformers_reference_with_chunked_prefill_and_cache_hits() {
    let r = reference();
    // An 8-token budget cuts the 26-token prompt into chunks.
    let config = EngineConfig {
        max_num_batched_tokens: 8,
        ..EngineConfig::default()
    };
    let engine = start(4, 64, config);
    let req = request(r.prompt_ids.clone(), greedy(), r.greedy_tokens.len() as u32);
    let (first, _, reason) = collect(engine.submit(req.clone()).unwrap());
    assert_eq!(first, r.greedy_tokens);
    assert_eq!(reason, Some(FinishReason::Length));
    // The second run reads 24 prompt tokens from the prefix cache.
    let (second, _, _) = collect(engine.submit(req).unwrap());
    assert_eq!(second, r.greedy_tokens);
    assert_eq!(engine.metrics().snapshot().prefix_cache_hits, 24);
}

#[test]
fn concurrent_seeded_requests_on_a_real_model_match_their_solo_runs() {
    let r = reference();
    let requests: Vec<GenerationRequest> = (0..8u32)
        .map(|i| {
            let sampling = SamplingParams {
                temperature: 0.8,
                top_p: 0.95,
                seed: Some(100 + i as u64),
                ..SamplingParams::default()
            };
            let len = 6 + 2 * i as usize;
            request(r.prompt_ids[..len].to_vec(), sampling, 12)
        })
        .collect();
    solo_runs_equal_a_preempted_batch(&requests);
}

#[test]
fn seeded_requests_on_quantized_gguf_models_match_their_solo_runs() {
    let r = reference();
    let gguf = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gguf");
    // K-quants with q6_K beside q4_K (Q4_K_M), and two 32-weight block types.
    for file in [
        "qwen2-q256-q4_k_m.gguf",
        "qwen2-q256-q8_0.gguf",
        "qwen2-q256-q5_0.gguf",
    ] {
        let requests: Vec<GenerationRequest> = (0..6u32)
            .map(|i| {
                let sampling = SamplingParams {
                    temperature: 0.9,
                    seed: Some(7 + i as u64),
                    ..SamplingParams::default()
                };
                request(r.prompt_ids[..8 + 3 * i as usize].to_vec(), sampling, 12)
            })
            .collect();
        solo_runs_equal_a_preempted_batch_on(&gguf.join(file), &requests);
    }
}

/// Runs each request alone, then all at once in an engine too small to hold them (24 blocks of
/// 4 tokens: preemption happens); asserts each gives the same tokens, text and finish reason
/// both ways and returns the solo results.
fn solo_runs_equal_a_preempted_batch(
    requests: &[GenerationRequest],
) -> Vec<(Vec<u32>, String, Option<FinishReason>)> {
    solo_runs_equal_a_preempted_batch_on(&fixture(), requests)
}

/// [`solo_runs_equal_a_preempted_batch`] on the model at `path`.
fn solo_runs_equal_a_preempted_batch_on(
    path: &Path,
    requests: &[GenerationRequest],
) -> Vec<(Vec<u32>, String, Option<FinishReason>)> {
    let alone = start_model(path, 4, 256, EngineConfig::default());
    let solo: Vec<_> = requests
        .iter()
        .map(|q| collect(alone.submit(q.clone()).unwrap()))
        .collect();
    let config = EngineConfig {
        max_num_batched_tokens: 32,
        ..EngineConfig::default()
    };
    let busy = start_model(path, 4, 24, config);
    let streams: Vec<_> = requests
        .iter()
        .map(|q| busy.submit(q.clone()).unwrap())
        .collect();
    for (i, stream) in streams.into_iter().enumerate() {
        assert_eq!(collect(stream), solo[i], "request {i}");
    }
    assert!(busy.metrics().snapshot().preemptions > 0);
    solo
}

/// The text of each delta of a one-choice stream, and its token ids.
fn deltas(mut stream: RequestStream) -> (Vec<String>, Vec<u32>) {
    let (mut texts, mut tokens) = (Vec::new(), Vec::new());
    while let Some(event) = stream.blocking_recv() {
        if let Event::Delta {
            text, token_ids, ..
        } = event
        {
            texts.push(text);
            tokens.extend(token_ids);
        }
    }
    (texts, tokens)
}

#[test]
fn streamed_text_equals_the_decoded_tokens_and_never_splits_a_character() {
    let r = reference();
    let engine = start(4, 64, EngineConfig::default());
    let sampling = SamplingParams {
        seed: Some(7),
        ..SamplingParams::default()
    };
    let (texts, tokens) = deltas(engine.submit(request(r.prompt_ids, sampling, 48)).unwrap());
    let tokenizer = Tokenizer::from_dir(&fixture()).unwrap();
    let full = tokenizer.decode(&tokens, true).unwrap();
    let streamed = texts.concat();
    assert_eq!(streamed.trim_start(), full.trim_start());
    assert!(texts
        .iter()
        .all(|t| !t.contains('\u{FFFD}') || full.contains('\u{FFFD}')));
}

#[test]
fn stop_string_split_over_two_tokens_ends_the_choice_without_leaking() {
    let r = reference();
    let engine = start(4, 64, EngineConfig::default());
    let sampling = SamplingParams {
        seed: Some(11),
        ..SamplingParams::default()
    };
    let req = request(r.prompt_ids, sampling, 40);
    let (texts, _) = deltas(engine.submit(req.clone()).unwrap());
    let full = texts.concat();
    // The last character of one delta and the first of the next: a stop string across tokens.
    let (i, stop) = texts
        .windows(2)
        .enumerate()
        .find_map(|(i, w)| {
            let a = w[0].chars().last()?;
            let b = w[1].chars().next()?;
            Some((i, format!("{a}{b}")))
        })
        .expect("two neighbouring non-empty deltas");
    let mut stopped = req;
    stopped.stop.stop_strings = sluice_text::StopSet::new(vec![stop.clone()]);
    let (_, text, reason) = collect(engine.submit(stopped).unwrap());
    assert_eq!(reason, Some(FinishReason::Stop));
    let cut = full.find(&stop).expect("the stop string occurs");
    assert!(
        cut < texts[..=i].concat().len(),
        "it first occurs by the split"
    );
    assert_eq!(text, full[..cut]);
}

/// JSON mode on a random-weight model, which left alone writes token soup: every choice's text
/// is a valid prefix of one JSON object, the ones that stop are whole objects serde_json parses,
/// and a seeded JSON choice draws the same tokens alone as in a batch with preemption.
#[test]
fn json_mode_output_is_always_json_and_batch_invariant() {
    use sluice_text::constraint::JsonRecognizer;

    let r = reference();
    let requests: Vec<GenerationRequest> = (0..12u64)
        .map(|seed| {
            let sampling = SamplingParams {
                // Flattened, so the choices do more than close the object at once.
                temperature: 2.0,
                seed: Some(seed),
                response_format: ResponseFormat::JsonObject,
                ..SamplingParams::default()
            };
            request(r.prompt_ids[..8].to_vec(), sampling, 40)
        })
        .collect();
    let solo = solo_runs_equal_a_preempted_batch(&requests);
    let mut stopped = 0;
    for (i, (tokens, text, reason)) in solo.iter().enumerate() {
        let prefix = JsonRecognizer::new().after(text.trim_start().as_bytes());
        assert!(prefix.is_some(), "choice {i} left JSON: {text:?}");
        match reason {
            Some(FinishReason::Stop) => {
                stopped += 1;
                let value: serde_json::Value = serde_json::from_str(text)
                    .unwrap_or_else(|e| panic!("choice {i}: {e} in {text:?}"));
                assert!(value.is_object(), "{text:?}");
            }
            Some(FinishReason::Length) => assert_eq!(tokens.len(), 40),
            other => panic!("choice {i} ended with {other:?}"),
        }
    }
    assert!(stopped > 0, "no choice closed its object: {solo:?}");
}

/// `json_schema` on the random-weight model: every choice that ends is a document of the
/// schema's shape (both keys, a boolean and one of the enum's numbers).
#[test]
fn json_schema_output_has_the_schema_shape() {
    let schema = sluice_text::constraint::Schema::compile(&serde_json::json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 22, 333]}},
        "required": ["ok", "n"]
    }))
    .unwrap();
    let schema = Arc::new(schema);
    let r = reference();
    let engine = start(4, 256, EngineConfig::default());
    let mut stopped = 0;
    for seed in 0..8 {
        let sampling = SamplingParams {
            temperature: 1.5,
            seed: Some(seed),
            response_format: ResponseFormat::JsonSchema(Arc::clone(&schema)),
            ..SamplingParams::default()
        };
        let req = request(r.prompt_ids[..8].to_vec(), sampling, 200);
        let (_, text, reason) = collect(engine.submit(req).unwrap());
        if reason == Some(FinishReason::Stop) {
            stopped += 1;
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(value["ok"].is_boolean(), "{text}");
            assert!(
                [1, 22, 333].contains(&value["n"].as_u64().unwrap()),
                "{text}"
            );
            assert_eq!(value.as_object().unwrap().len(), 2, "{text}");
        } else {
            assert_eq!(reason, Some(FinishReason::Length), "{text}");
        }
    }
    assert!(stopped > 0);
}

/// A regex and a grammar on the random-weight model: every choice that ends matches, and the
/// constraint stops it as soon as nothing more may follow.
#[test]
fn regex_and_grammar_outputs_match() {
    use sluice_text::constraint::{Grammar, GrammarStates, Regex};
    let regex = Arc::new(Regex::compile("[0-9]{3}-[a-z]{2}").unwrap());
    let grammar = Arc::new(Grammar::compile(r#"root ::= ("yes" | "no") "!""#).unwrap());
    let r = reference();
    let engine = start(4, 256, EngineConfig::default());
    let formats = [
        ResponseFormat::Regex(Arc::clone(&regex)),
        ResponseFormat::Grammar(Arc::clone(&grammar)),
    ];
    for (format, seed) in formats.iter().flat_map(|f| (0..4).map(move |s| (f, s))) {
        let sampling = SamplingParams {
            temperature: 1.5,
            seed: Some(seed),
            response_format: format.clone(),
            ..SamplingParams::default()
        };
        let req = request(r.prompt_ids[..8].to_vec(), sampling, 60);
        let (_, text, reason) = collect(engine.submit(req).unwrap());
        assert_eq!(reason, Some(FinishReason::Stop), "{format:?}: {text:?}");
        let matched = match format {
            ResponseFormat::Regex(regex) => regex.is_match(text.as_bytes()),
            _ => GrammarStates::new(Arc::clone(&grammar)).is_match(text.as_bytes()),
        };
        assert!(matched, "{format:?}: {text:?}");
    }
}

/// A forced tool call (Hermes framing) on the random-weight model: every choice that ends is
/// one call of a listed tool, framed, with arguments of that tool's shape.
#[test]
fn a_forced_tool_call_is_one_framed_call_of_a_listed_tool() {
    use sluice_text::constraint::{Tool, ToolCallFraming, ToolCallMode, ToolCallRules};
    let weather = serde_json::json!({
        "type": "object",
        "properties": {"unit": {"enum": ["c", "f"]}},
        "required": ["unit"],
        "additionalProperties": false
    });
    let ping = serde_json::json!({"type": "object", "additionalProperties": false});
    let tools = [
        Tool::compile("weather", &weather).unwrap().0,
        Tool::compile("ping", &ping).unwrap().0,
    ];
    let mode = ToolCallMode::Forced { tool: None };
    let rules = Arc::new(ToolCallRules::new(&tools, &ToolCallFraming::hermes(), &mode).unwrap());
    let r = reference();
    let engine = start(4, 256, EngineConfig::default());
    let mut stopped = 0;
    for seed in 0..6 {
        let sampling = SamplingParams {
            temperature: 1.5,
            seed: Some(seed),
            response_format: ResponseFormat::ToolCalls(Arc::clone(&rules)),
            ..SamplingParams::default()
        };
        let req = request(r.prompt_ids[..8].to_vec(), sampling, 200);
        let (_, text, reason) = collect(engine.submit(req).unwrap());
        if reason != Some(FinishReason::Stop) {
            assert_eq!(reason, Some(FinishReason::Length), "{text}");
            continue;
        }
        stopped += 1;
        let call = text
            .strip_prefix("<tool_call>")
            .and_then(|t| t.strip_suffix("</tool_call>"))
            .unwrap_or_else(|| panic!("not framed: {text:?}"));
        let value: serde_json::Value = serde_json::from_str(call.trim()).unwrap();
        let arguments = value["arguments"].as_object().unwrap();
        match value["name"].as_str().unwrap() {
            "weather" => assert!(["c", "f"].contains(&arguments["unit"].as_str().unwrap())),
            "ping" => assert!(arguments.is_empty(), "{text}"),
            other => panic!("called {other}"),
        }
        assert_eq!(value.as_object().unwrap().len(), 2, "{text}");
    }
    assert!(stopped > 0);
}
