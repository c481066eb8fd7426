use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::*;
use crate::executor::fake::HistoryExecutor;
use crate::handle::{RequestStream, SubmitError};
use crate::request::{Event, FinishReason, GenerationRequest, Usage};
use crate::request::{Priority, SamplingParams, StopRules};
use crate::testkit::word_tokenizer;

pub(super) const VOCAB: usize = 32;

pub(super) fn start(exec: HistoryExecutor, config: EngineConfig) -> EngineHandle {
    Engine::start(Box::new(exec), word_tokenizer(VOCAB), config)
}

pub(super) fn request(prompt: Vec<u32>, seed: u64, max_tokens: u32) -> GenerationRequest {
    GenerationRequest {
        prompt_tokens: prompt,
        n: 1,
        sampling: SamplingParams {
            seed: Some(seed),
            ..SamplingParams::default()
        },
        stop: StopRules {
            max_tokens,
            ..StopRules::default()
        },
        priority: Priority::Normal,
        cache_salt: None,
        caller: None,
        images: Default::default(),
        prompt_outputs: crate::request::PromptOutputs::default(),
    }
}

#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Choice {
    pub(super) tokens: Vec<u32>,
    text: String,
    reason: Option<FinishReason>,
    pub(super) usage: Usage,
    finishes: usize,
}

/// Reads a stream to its end, per choice.
pub(super) fn collect(mut stream: RequestStream, n: usize) -> Vec<Choice> {
    let mut choices = vec![Choice::default(); n];
    // Each choice's `Scheduled`: at most once, before anything else, saying what `Finished`
    // says of the prefix cache.
    let mut scheduled: Vec<Option<u32>> = vec![None; n];
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Scheduled {
                choice,
                cached_prompt_tokens,
            } => {
                let c = &choices[choice as usize];
                assert!(c.tokens.is_empty() && c.text.is_empty() && c.finishes == 0);
                assert_eq!(scheduled[choice as usize], None, "one Scheduled per choice");
                scheduled[choice as usize] = Some(cached_prompt_tokens);
            }
            Event::Delta {
                choice,
                text,
                token_ids,
                ..
            } => {
                let c = &mut choices[choice as usize];
                assert_eq!(c.finishes, 0, "no delta after Finished");
                c.tokens.extend(token_ids);
                c.text.push_str(&text);
            }
            Event::Finished {
                choice,
                reason,
                usage,
                ..
            } => {
                if let Some(cached) = scheduled[choice as usize] {
                    assert_eq!(cached, usage.cached_prompt_tokens);
                }
                let c = &mut choices[choice as usize];
                c.reason = Some(reason);
                c.usage = usage;
                c.finishes += 1;
            }
            Event::Prompt { .. } => panic!("no prompt outputs were asked for"),
        }
    }
    choices
}

pub(super) fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub(super) fn prompt(i: u32, len: u32) -> Vec<u32> {
    (0..len)
        .map(|t| (t * 3 + i) % (VOCAB as u32 - 1) + 1)
        .collect()
}

#[test]
fn concurrent_seeded_requests_give_exactly_the_tokens_each_gives_alone() {
    let requests: Vec<GenerationRequest> = (0..32)
        .map(|i| request(prompt(i % 5, 3 + i % 7), 1000 + i as u64, 4 + i % 9))
        .collect();
    let alone = start(HistoryExecutor::new(VOCAB, 4, 64), EngineConfig::default());
    let solo: Vec<Choice> = requests
        .iter()
        .map(|r| collect(alone.submit(r.clone()).unwrap(), 1).remove(0))
        .collect();
    // A small pool and budget: chunked prefill, prefix hits and preemption all happen.
    let config = EngineConfig {
        max_num_batched_tokens: 16,
        ..EngineConfig::default()
    };
    let busy = start(HistoryExecutor::new(VOCAB, 4, 24), config);
    let streams: Vec<RequestStream> = requests
        .iter()
        .map(|r| busy.submit(r.clone()).unwrap())
        .collect();
    let together: Vec<Choice> = streams
        .into_iter()
        .map(|s| collect(s, 1).remove(0))
        .collect();
    for (i, (a, b)) in solo.iter().zip(&together).enumerate() {
        assert_eq!(a.tokens, b.tokens, "request {i}");
        assert_eq!(a.text, b.text, "request {i}");
        assert_eq!(b.finishes, 1);
        assert_eq!(b.reason, Some(FinishReason::Length));
    }
    let m = busy.metrics().snapshot();
    assert!(m.preemptions > 0, "the pool was small enough to preempt");
    assert_eq!(m.requests_finished, 32);
    assert_eq!(m.time_to_first_token.count, 32);
    wait_until("every block is free", || {
        busy.metrics().snapshot().kv_blocks_used == 0
    });
}

#[test]
fn dropped_stream_aborts_the_request_and_frees_its_blocks() {
    // Room for a long generation, so the request is still running when its stream is dropped.
    let config = EngineConfig {
        max_model_len: 1_000_000,
        ..EngineConfig::default()
    };
    let engine = start(HistoryExecutor::new(VOCAB, 4, 100_000), config);
    let mut stream = engine.submit(request(prompt(1, 10), 1, 500_000)).unwrap();
    assert!(matches!(
        stream.blocking_recv(),
        Some(Event::Scheduled { .. })
    ));
    assert!(matches!(stream.blocking_recv(), Some(Event::Delta { .. })));
    wait_until("the request holds blocks", || {
        engine.metrics().snapshot().kv_blocks_used > 0
    });
    drop(stream);
    wait_until("the request is gone", || engine.num_unfinished() == 0);
    wait_until("its blocks are free", || {
        engine.metrics().snapshot().kv_blocks_used == 0
    });
    assert_eq!(engine.metrics().snapshot().running, 0);
}

#[test]
fn prefix_cache_hit_skips_recomputation_and_gives_the_same_output() {
    let exec = HistoryExecutor::new(VOCAB, 4, 64);
    let computed = Arc::clone(&exec.tokens_computed);
    let engine = start(exec, EngineConfig::default());
    let r = request(prompt(2, 18), 5, 4);
    let first = collect(engine.submit(r.clone()).unwrap(), 1).remove(0);
    let after_first = computed.load(Ordering::Relaxed);
    let second = collect(engine.submit(r).unwrap(), 1).remove(0);
    let second_work = computed.load(Ordering::Relaxed) - after_first;
    assert_eq!(first.tokens, second.tokens);
    assert_eq!(first.usage.cached_prompt_tokens, 0);
    assert_eq!(second.usage.cached_prompt_tokens, 16);
    // 2 prompt tokens and 3 decodes instead of 18 + 3.
    assert_eq!(second_work, 5);
    let m = engine.metrics().snapshot();
    assert_eq!((m.prefix_cache_queries, m.prefix_cache_hits), (36, 16));
}

#[test]
fn three_choices_share_prompt_blocks_and_each_draws_from_seed_plus_index() {
    let exec = HistoryExecutor::new(VOCAB, 4, 64);
    let computed = Arc::clone(&exec.tokens_computed);
    let config = EngineConfig {
        enable_prefix_caching: false,
        ..EngineConfig::default()
    };
    let engine = start(exec, config);
    let mut r = request(prompt(3, 20), 40, 3);
    r.n = 3;
    let choices = collect(engine.submit(r.clone()).unwrap(), 3);
    // Choice 0 computes the prompt; choices 1 and 2 share its 4 full blocks and compute only the
    // last 4 prompt tokens; each choice then computes 2 decode tokens.
    assert_eq!(computed.load(Ordering::Relaxed), 20 + 4 + 4 + 3 * 2);
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c.finishes, 1);
        let mut alone = r.clone();
        alone.n = 1;
        alone.sampling.seed = Some(40 + i as u64);
        let solo = collect(engine.submit(alone).unwrap(), 1).remove(0);
        assert_eq!(c.tokens, solo.tokens, "choice {i}");
    }
    assert_ne!(choices[0].tokens, choices[1].tokens);
}

#[test]
fn executor_error_finishes_the_request_with_error_and_the_engine_keeps_serving() {
    let mut exec = HistoryExecutor::new(VOCAB, 4, 64);
    exec.fail_on_token = Some(31);
    let engine = start(exec, EngineConfig::default());
    let failed = collect(engine.submit(request(vec![5, 31, 6], 1, 4)).unwrap(), 1);
    assert_eq!(failed[0].reason, Some(FinishReason::Error));
    assert_eq!(failed[0].finishes, 1);
    let ok = collect(engine.submit(request(vec![5, 6], 1, 1)).unwrap(), 1);
    assert!(engine.is_alive());
    assert_eq!(ok[0].reason, Some(FinishReason::Length));
    assert_eq!(ok[0].tokens.len(), 1);
}

#[test]
fn slow_reader_receives_every_token_without_blocking_the_engine() {
    let engine = start(HistoryExecutor::new(VOCAB, 4, 256), EngineConfig::default());
    let slow = engine.submit(request(prompt(4, 5), 9, 300)).unwrap();
    // Another request finishes while the first one's channel is full.
    let other = collect(engine.submit(request(prompt(5, 5), 9, 20)).unwrap(), 1);
    assert_eq!(other[0].tokens.len(), 20);
    wait_until("the slow request has generated everything", || {
        engine.metrics().snapshot().running == 0
    });
    let slow = collect(slow, 1);
    assert_eq!(slow[0].tokens.len(), 300);
    assert_eq!(slow[0].finishes, 1);
    assert_eq!(slow[0].usage.completion_tokens, 300);
}

#[test]
fn text_deltas_concatenate_to_the_decoded_tokens() {
    let engine = start(HistoryExecutor::new(VOCAB, 4, 64), EngineConfig::default());
    let out = collect(engine.submit(request(prompt(6, 4), 2, 12)).unwrap(), 1).remove(0);
    let expected = word_tokenizer(VOCAB).decode(&out.tokens, true).unwrap();
    assert_eq!(out.text.trim_start(), expected);
}

#[test]
fn stop_string_ends_the_choice_and_is_not_returned() {
    let engine = start(HistoryExecutor::new(VOCAB, 4, 64), EngineConfig::default());
    let base = request(prompt(7, 4), 3, 12);
    let free = collect(engine.submit(base.clone()).unwrap(), 1).remove(0);
    // Stop on the third generated word (or wherever its text first appears).
    let words: Vec<&str> = free.text.split_whitespace().collect();
    let stop = format!(" {}", words[2]);
    let mut stopped = base;
    stopped.stop.stop_strings = sluice_text::StopSet::new(vec![stop.clone()]);
    let out = collect(engine.submit(stopped).unwrap(), 1).remove(0);
    assert_eq!(out.reason, Some(FinishReason::Stop));
    let cut = free.text.find(&stop).unwrap();
    assert_eq!(out.text, free.text[..cut]);
    assert!(out.tokens.len() <= 3);
    assert_eq!(out.tokens, free.tokens[..out.tokens.len()]);
}

#[test]
fn shutdown_finishes_accepted_work_then_refuses_requests_and_exits() {
    let engine = start(HistoryExecutor::new(VOCAB, 4, 64), EngineConfig::default());
    let stream = engine.submit(request(prompt(8, 4), 1, 50)).unwrap();
    engine.shutdown();
    assert_eq!(
        engine.submit(request(vec![1], 1, 1)).err(),
        Some(SubmitError::ShutDown)
    );
    let out = collect(stream, 1);
    assert_eq!(out[0].tokens.len(), 50);
    wait_until("the engine thread exits", || !engine.is_alive());
}

#[test]
fn gauges_report_the_pool() {
    let engine = start(HistoryExecutor::new(VOCAB, 4, 64), EngineConfig::default());
    collect(engine.submit(request(prompt(9, 4), 1, 2)).unwrap(), 1);
    let m = engine.metrics().snapshot();
    assert_eq!((m.kv_blocks_total, m.block_size), (64, 4));
    assert_eq!(m.generation_tokens, 2);
    assert_eq!(m.prompt_tokens, 4);
    assert_eq!(m.inter_token_latency.count, 1);
    assert_eq!(m.request_queue_time.count, 1);
}

/// The prompt scores of a score-only request's stream, and its usage.
fn prompt_scores(mut stream: RequestStream) -> (crate::request::PromptScores, Usage) {
    let (mut scores, mut usage) = (None, None);
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Prompt { scores: s, .. } => scores = Some(*s),
            Event::Finished { usage: u, .. } => usage = Some(u),
            Event::Delta { token_ids, .. } => assert!(token_ids.is_empty()),
            Event::Scheduled { .. } => {}
        }
    }
    (scores.expect("a Prompt event"), usage.expect("Finished"))
}

#[test]
fn prompt_logprobs_score_each_position_from_its_own_history_and_skip_the_prefix_cache() {
    let exec = HistoryExecutor::new(VOCAB, 4, 64);
    let computed = Arc::clone(&exec.tokens_computed);
    let config = EngineConfig {
        max_num_batched_tokens: 5,
        ..EngineConfig::default()
    };
    let engine = start(exec, config);
    let p = prompt(4, 18);
    // A plain request first puts the prompt's blocks in the prefix cache.
    collect(engine.submit(request(p.clone(), 1, 2)).unwrap(), 1);
    let before = computed.load(Ordering::Relaxed);
    let scoring = GenerationRequest {
        stop: StopRules {
            max_tokens: 0,
            ..StopRules::default()
        },
        images: Default::default(),
        prompt_outputs: crate::request::PromptOutputs {
            logprobs: Some(2),
            ..Default::default()
        },
        ..request(p.clone(), 1, 0)
    };
    let (scores, usage) = prompt_scores(engine.submit(scoring).unwrap());
    assert_eq!(
        computed.load(Ordering::Relaxed) - before,
        p.len(),
        "every row computed"
    );
    assert_eq!(
        (usage.cached_prompt_tokens, usage.completion_tokens),
        (0, 0)
    );
    assert_eq!(scores.logprobs.len(), p.len() - 1);
    for (i, lp) in scores.logprobs.iter().enumerate() {
        let logits = crate::executor::fake::logits_after(&p[..=i], VOCAB);
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let total: f64 = logits.iter().map(|&x| f64::from(x - max).exp()).sum();
        let want = f64::from(logits[p[i + 1] as usize] - max) - total.ln();
        assert_eq!(lp.token_id, p[i + 1]);
        assert!((f64::from(lp.logprob) - want).abs() < 1e-5, "position {i}");
        assert_eq!(lp.top.len(), 2);
    }
}
