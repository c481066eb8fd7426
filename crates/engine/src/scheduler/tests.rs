use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::executor::fake::{greedy_alone, HistoryExecutor};
use crate::executor::Executor;
use crate::request::{Priority, SamplingParams, StopRules};
use crate::sampler::{Sample, SampleError};
use crate::sequence::SequenceSpec;

const VOCAB: usize = 32;

fn config(max_num_seqs: usize, max_num_batched_tokens: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_num_seqs,
        max_num_batched_tokens,
        max_model_len: 1024,
        max_queue: 1024,
        aging_rate: 0.1,
        step_time_target: None,
        prefill_share: 0.5,
        fair_share: FairShareConfig::default(),
    }
}

fn scheduler(num_blocks: usize, block_size: usize, budget: usize) -> Scheduler {
    Scheduler::new(
        config(16, budget),
        BlockManager::new(num_blocks, block_size, true),
    )
}

struct NewSeq {
    id: SeqId,
    request: RequestId,
    choice: u32,
    priority: Priority,
    arrival: Instant,
    prompt: Vec<u32>,
    max_tokens: u32,
}

fn seq(s: NewSeq) -> Sequence {
    Sequence::new(SequenceSpec {
        id: s.id,
        request_id: s.request,
        choice: s.choice,
        priority: s.priority,
        arrival: s.arrival,
        prompt: s.prompt,
        sampling: Arc::new(SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        }),
        stop: Arc::new(StopRules {
            max_tokens: s.max_tokens,
            ..StopRules::default()
        }),
        eos_token_ids: Arc::from(Vec::new()),
        text: None,
        constraint: None,
        cache_salt: None,
    })
}

fn simple(id: SeqId, t0: Instant, prompt_len: usize, max_tokens: u32) -> Sequence {
    seq(NewSeq {
        id,
        request: id,
        choice: 0,
        priority: Priority::Normal,
        arrival: t0,
        prompt: (0..prompt_len as u32)
            .map(|t| (t * 7 + id as u32) % 30 + 1)
            .collect(),
        max_tokens,
    })
}

fn token(t: u32) -> Result<Vec<Sample>, SampleError> {
    Ok(vec![Sample {
        token_id: t,
        logprob: None,
    }])
}

/// Feeds `token` to every sequence that asked for logits (a hand-written model output).
fn feed(s: &mut Scheduler, out: &SchedulerOutput, t: u32, now: Instant) -> Vec<SeqId> {
    let samples = out
        .scheduled
        .iter()
        .filter(|x| x.logits_row.is_some())
        .map(|x| (x.seq_id, token(t)))
        .collect();
    finished_ids(s.update_from_output(out, ModelOutput { samples }, now))
}

/// The sequences a step finished, in order.
fn finished_ids(outcome: StepOutcome) -> Vec<SeqId> {
    outcome.finished.into_iter().map(|(id, _)| id).collect()
}

fn scheduled_tokens(out: &SchedulerOutput) -> Vec<(SeqId, usize)> {
    out.scheduled
        .iter()
        .map(|x| (x.seq_id, x.num_new_tokens))
        .collect()
}

/// Runs one real step with the fake model and the real sampler.
fn step(
    s: &mut Scheduler,
    exec: &mut HistoryExecutor,
    now: Instant,
) -> (SchedulerOutput, Vec<SeqId>) {
    let out = s.schedule(now);
    if out.is_empty() {
        return (out, Vec::new());
    }
    let logits = exec.execute(&out.batch).expect("fake model runs");
    let mut samples = Vec::new();
    for x in &out.scheduled {
        if let Some(row) = x.logits_row {
            let seq = s.sequence_mut(x.seq_id).unwrap();
            samples.push((x.seq_id, seq.sample_verified(&logits, row, &x.draft)));
        }
    }
    let finished = finished_ids(s.update_from_output(&out, ModelOutput { samples }, now));
    (out, finished)
}

#[test]
fn long_prompt_is_prefilled_in_chunks_of_the_token_budget() {
    let t0 = Instant::now();
    let mut s = scheduler(16, 4, 8);
    s.add(simple(0, t0, 20, 4)).unwrap();
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 8)]);
    assert_eq!(out.scheduled[0].logits_row, None, "no logits mid-prefill");
    assert!(feed(&mut s, &out, 5, t0).is_empty());
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 8)]);
    feed(&mut s, &out, 5, t0);
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 4)]);
    assert_eq!(out.scheduled[0].logits_row, Some(0));
    assert_eq!(out.batch.positions, vec![16, 17, 18, 19]);
}

#[test]
fn running_decodes_go_before_a_new_prefill_and_share_the_step() {
    let t0 = Instant::now();
    let mut s = scheduler(32, 4, 6);
    s.add(simple(0, t0, 3, 8)).unwrap();
    let out = s.schedule(t0);
    feed(&mut s, &out, 9, t0);
    s.add(simple(1, t0 + Duration::from_millis(1), 12, 8))
        .unwrap();
    let out = s.schedule(t0);
    // The decode of 0 comes first, then as much of 1's prompt as the budget allows.
    assert_eq!(scheduled_tokens(&out), vec![(0, 1), (1, 5)]);
    assert_eq!(out.scheduled[0].logits_row, Some(0));
    assert_eq!(out.batch.logits_indices, vec![0]);
}

#[test]
fn sequence_ends_at_max_tokens_and_frees_its_blocks() {
    let t0 = Instant::now();
    let mut s = scheduler(8, 4, 64);
    s.add(simple(0, t0, 5, 2)).unwrap();
    let out = s.schedule(t0);
    assert!(feed(&mut s, &out, 3, t0).is_empty());
    let out = s.schedule(t0);
    assert_eq!(feed(&mut s, &out, 4, t0), vec![0]);
    let seq = s.remove(0).unwrap();
    assert_eq!(seq.output(), &[3, 4]);
    assert_eq!(
        seq.status(),
        &crate::sequence::SequenceStatus::Finished(crate::output::Ending::Length)
    );
    assert_eq!(s.block_manager().num_used_blocks(), 0);
    assert!(s.is_idle());
}

#[test]
fn admission_waits_until_blocks_can_be_allocated() {
    let t0 = Instant::now();
    let mut s = scheduler(3, 4, 64);
    s.add(simple(0, t0, 8, 8)).unwrap(); // 2 blocks now
    s.add(simple(1, t0 + Duration::from_millis(1), 8, 8))
        .unwrap(); // 2 more: does not fit
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 8)]);
    assert_eq!(s.num_waiting(), 1);
    assert!(out.preempted.is_empty());
}

#[test]
fn preempted_sequence_keeps_generated_tokens() {
    let t0 = Instant::now();
    let mut s = scheduler(4, 2, 64);
    s.add(simple(0, t0, 3, 10)).unwrap();
    s.add(simple(1, t0 + Duration::from_millis(1), 3, 10))
        .unwrap();
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 3), (1, 3)]);
    feed(&mut s, &out, 7, t0); // both now hold 4 tokens in 4 blocks: the pool is full
    let out = s.schedule(t0);
    feed(&mut s, &out, 8, t0);
    // Both need a fifth token slot; only one can have it: the later arrival is preempted.
    let out = s.schedule(t0);
    assert_eq!(out.preempted, vec![1]);
    assert_eq!(scheduled_tokens(&out), vec![(0, 1)]);
    let victim = s.sequence(1).unwrap();
    assert_eq!(
        victim.output(),
        &[7, 8],
        "generated tokens survive preemption"
    );
    assert_eq!(victim.num_computed_tokens(), 0);
    assert!(victim.block_table().is_none());
}

#[test]
fn preemption_picks_the_worst_effective_priority() {
    let t0 = Instant::now();
    let mut s = scheduler(4, 2, 64);
    let mut low = simple(0, t0, 3, 10);
    low.priority = Priority::Low;
    s.add(low).unwrap();
    s.add(simple(1, t0 + Duration::from_millis(1), 3, 10))
        .unwrap();
    for _ in 0..2 {
        let out = s.schedule(t0);
        feed(&mut s, &out, 7, t0);
    }
    let out = s.schedule(t0);
    assert_eq!(
        out.preempted,
        vec![0],
        "the Low one goes, though it arrived first"
    );
}

#[test]
fn waiting_high_request_preempts_a_running_low_one() {
    let t0 = Instant::now();
    let mut s = scheduler(2, 4, 64);
    let mut low = simple(0, t0, 6, 10);
    low.priority = Priority::Low;
    s.add(low).unwrap();
    let out = s.schedule(t0);
    feed(&mut s, &out, 7, t0);
    let mut high = simple(1, t0 + Duration::from_millis(1), 6, 10);
    high.priority = Priority::High;
    s.add(high).unwrap();
    let out = s.schedule(t0);
    assert_eq!(out.preempted, vec![0]);
    assert_eq!(scheduled_tokens(&out), vec![(1, 6)]);
    assert_eq!(s.sequence(0).unwrap().output(), &[7]);
}

#[test]
fn waiting_normal_request_does_not_preempt_a_running_low_one() {
    let t0 = Instant::now();
    let mut s = scheduler(2, 4, 64);
    let mut low = simple(0, t0, 6, 10);
    low.priority = Priority::Low;
    s.add(low).unwrap();
    let out = s.schedule(t0);
    feed(&mut s, &out, 7, t0);
    s.add(simple(1, t0, 6, 10)).unwrap();
    let out = s.schedule(t0);
    assert!(out.preempted.is_empty());
    assert_eq!(scheduled_tokens(&out), vec![(0, 1)]);
}

#[test]
fn sequence_resumed_in_a_step_is_not_preempted_again_in_that_step() {
    let t0 = Instant::now();
    let mut s = scheduler(2, 4, 64);
    // A Low request aged past High is admitted first; a High one right behind it finds no
    // blocks, and may not take them back from the sequence admitted in this very step.
    let mut low = simple(0, t0, 6, 10);
    low.priority = Priority::Low;
    s.add(low).unwrap();
    let now = t0 + Duration::from_secs(25);
    let mut high = simple(1, now, 6, 10);
    high.priority = Priority::High;
    s.add(high).unwrap();
    let out = s.schedule(now);
    assert!(out.preempted.is_empty());
    assert_eq!(scheduled_tokens(&out), vec![(0, 6)]);
    assert_eq!(s.num_waiting(), 1);
}

#[test]
fn aged_low_request_is_admitted_before_a_fresh_normal_one() {
    let t0 = Instant::now();
    let mut s = Scheduler::new(config(1, 64), BlockManager::new(16, 4, true));
    let mut low = simple(0, t0, 4, 4);
    low.priority = Priority::Low;
    s.add(low).unwrap();
    let later = t0 + Duration::from_secs(11);
    s.add(simple(1, later, 4, 4)).unwrap();
    let out = s.schedule(later);
    assert_eq!(scheduled_tokens(&out), vec![(0, 4)]);
}

#[test]
fn fresh_low_request_waits_behind_a_normal_one() {
    let t0 = Instant::now();
    let mut s = Scheduler::new(config(1, 64), BlockManager::new(16, 4, true));
    let mut low = simple(0, t0, 4, 4);
    low.priority = Priority::Low;
    s.add(low).unwrap();
    let later = t0 + Duration::from_secs(5);
    s.add(simple(1, later, 4, 4)).unwrap();
    assert_eq!(scheduled_tokens(&s.schedule(later)), vec![(1, 4)]);
}

#[test]
fn sequence_larger_than_the_whole_pool_is_rejected() {
    let t0 = Instant::now();
    let mut s = scheduler(2, 4, 64);
    s.add(simple(0, t0, 9, 4)).unwrap();
    let out = s.schedule(t0);
    assert_eq!(out.rejected, vec![0]);
    assert!(out.is_empty());
    assert!(s.remove(0).unwrap().is_finished());
}

#[test]
fn aborting_a_request_frees_its_blocks_and_its_queue_place() {
    let t0 = Instant::now();
    let mut s = scheduler(8, 4, 64);
    s.add(simple(0, t0, 8, 4)).unwrap();
    s.add(simple(1, t0, 8, 4)).unwrap();
    let out = s.schedule(t0);
    feed(&mut s, &out, 1, t0);
    assert!(s.block_manager().num_used_blocks() > 0);
    assert_eq!(s.abort_request(0).len(), 1);
    assert_eq!(s.abort_request(1).len(), 1);
    assert_eq!(s.block_manager().num_used_blocks(), 0);
    assert!(s.is_idle());
}

#[test]
fn waiting_high_request_takes_the_seat_of_a_running_low_one() {
    let t0 = Instant::now();
    let mut s = Scheduler::new(config(1, 64), BlockManager::new(32, 4, true));
    let mut low = simple(0, t0, 3, 8);
    low.priority = Priority::Low;
    s.add(low).unwrap();
    let out = s.schedule(t0);
    feed(&mut s, &out, 2, t0);
    s.add(simple(1, t0, 3, 8)).unwrap(); // Normal: waits for the seat
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 1)]);
    feed(&mut s, &out, 2, t0);
    let mut high = simple(2, t0, 3, 8);
    high.priority = Priority::High;
    s.add(high).unwrap();
    let out = s.schedule(t0);
    assert_eq!(out.preempted, vec![0]);
    assert_eq!(scheduled_tokens(&out), vec![(2, 3)]);
}

#[test]
fn max_num_seqs_caps_the_running_set() {
    let t0 = Instant::now();
    let mut s = Scheduler::new(config(2, 64), BlockManager::new(32, 4, true));
    for id in 0..4 {
        s.add(simple(id, t0, 3, 4)).unwrap();
    }
    let out = s.schedule(t0);
    assert_eq!(out.scheduled.len(), 2);
    assert_eq!(s.num_waiting(), 2);
}

#[test]
fn the_fake_model_sees_every_token_through_the_block_tables() {
    let t0 = Instant::now();
    let mut s = scheduler(6, 2, 5);
    let mut exec = HistoryExecutor::new(VOCAB, 2, 6);
    let prompts: Vec<Vec<u32>> = vec![vec![1, 2, 3], vec![1, 2, 4, 5]];
    for (i, p) in prompts.iter().enumerate() {
        s.add(seq(NewSeq {
            id: i as u64,
            request: i as u64,
            choice: 0,
            priority: Priority::Normal,
            arrival: t0 + Duration::from_millis(i as u64),
            prompt: p.clone(),
            max_tokens: 6,
        }))
        .unwrap();
    }
    let mut outputs = vec![Vec::new(); 2];
    let mut preemptions = 0;
    while !s.is_idle() {
        let (out, finished) = step(&mut s, &mut exec, t0);
        preemptions += out.preempted.len();
        for id in finished {
            outputs[id as usize] = s.remove(id).unwrap().output().to_vec();
        }
    }
    assert!(
        preemptions > 0,
        "the pool is small enough to force preemption"
    );
    for (i, p) in prompts.iter().enumerate() {
        assert_eq!(outputs[i], greedy_alone(p, VOCAB, 6, None));
    }
}

#[path = "proptest.rs"]
mod proptests;

#[path = "fair_tests.rs"]
mod fair_share_tests;

#[path = "step_time_tests.rs"]
mod step_time_tests;

#[path = "prefix_tests.rs"]
mod prefix_tests;

#[path = "prompt_fair_tests.rs"]
mod prompt_fair_tests;

#[path = "spec_tests.rs"]
mod spec_tests;

#[test]
fn a_run_of_tokens_is_appended_at_once_and_computed_in_the_next_step() {
    let t0 = Instant::now();
    let mut s = scheduler(16, 4, 64);
    s.add(simple(0, t0, 5, 10)).unwrap();
    let out = s.schedule(t0);
    let run = Ok(Sample::run(&[3, 4, 5]));
    let outcome = s.update_from_output(
        &out,
        ModelOutput {
            samples: vec![(0, run)],
        },
        t0,
    );
    assert_eq!(outcome.appended, vec![(0, 3)]);
    assert!(outcome.finished.is_empty());
    // The one rule: computed tokens catch up with all tokens, three at once, and the last
    // one's logits are wanted.
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 3)]);
    assert_eq!(out.batch.positions, vec![5, 6, 7]);
    assert_eq!(out.scheduled[0].logits_row, Some(0));
    // A run that reaches max_tokens finishes the sequence with the tokens before it.
    let run = Ok(Sample::run(&[1, 2, 3, 4, 5, 6, 7, 8]));
    let outcome = s.update_from_output(
        &out,
        ModelOutput {
            samples: vec![(0, run)],
        },
        t0,
    );
    assert_eq!(outcome.appended, vec![(0, 7)]);
    assert_eq!(outcome.finished, vec![(0, crate::output::Ending::Length)]);
    assert_eq!(s.remove(0).unwrap().output().len(), 10);
    assert_eq!(s.block_manager().num_used_blocks(), 0);
}

#[path = "image_tests.rs"]
mod image_tests;
