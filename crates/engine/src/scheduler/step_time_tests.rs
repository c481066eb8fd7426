//! Prefill chunks sized to the step time target beside running decodes.

use super::*;

/// A scheduler whose steps have been measured at 1 ms per token (logits rows cost nothing extra)
/// and that aims at `target_ms` per step.
fn timed_scheduler(target_ms: u64, budget: usize) -> Scheduler {
    timed_scheduler_with_blocks(target_ms, budget, 64)
}

/// [`timed_scheduler`] over `blocks` blocks of 4 tokens.
fn timed_scheduler_with_blocks(target_ms: u64, budget: usize, blocks: usize) -> Scheduler {
    let mut s = Scheduler::new(
        SchedulerConfig {
            step_time_target: Some(Duration::from_millis(target_ms)),
            ..config(16, budget)
        },
        BlockManager::new(blocks, 4, true),
    );
    s.cost.observe(100, 1, 0, 0.1);
    s.cost.observe(100, 50, 0, 0.1);
    s
}

/// Starts `count` sequences and runs them until each is decoding.
fn start_decoding(s: &mut Scheduler, t0: Instant, count: usize) {
    for id in 0..count {
        s.add(simple(id as SeqId, t0, 3, 50)).unwrap();
    }
    let out = s.schedule(t0);
    assert_eq!(
        out.batch.logits_indices.len(),
        count,
        "all prompts in one step"
    );
    feed(s, &out, 9, t0);
}

#[test]
fn step_time_target_cuts_prefill_chunks_beside_decodes() {
    let t0 = Instant::now();
    let mut s = timed_scheduler(20, 512);
    start_decoding(&mut s, t0, 1);
    s.add(simple(7, t0 + Duration::from_millis(1), 40, 4))
        .unwrap();
    // 20 ms: 1 ms for the decode, 19 for the prompt, and the decode is never cut.
    for expected in [19, 19, 2] {
        let out = s.schedule(t0);
        assert_eq!(scheduled_tokens(&out), vec![(0, 1), (7, expected)]);
        feed(&mut s, &out, 9, t0);
    }
}

#[test]
fn without_decodes_a_prompt_takes_the_whole_token_budget() {
    let t0 = Instant::now();
    let mut s = timed_scheduler(20, 32);
    s.add(simple(7, t0, 40, 4)).unwrap();
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(7, 32)]);
}

#[test]
fn the_prompt_chunk_is_never_below_the_least_chunk() {
    let t0 = Instant::now();
    let mut s = timed_scheduler(1, 512);
    start_decoding(&mut s, t0, 1);
    s.add(simple(7, t0 + Duration::from_millis(1), 40, 4))
        .unwrap();
    let out = s.schedule(t0);
    let least = super::step_budget::MIN_PROMPT_CHUNK;
    assert_eq!(scheduled_tokens(&out), vec![(0, 1), (7, least)]);
}

#[test]
fn step_time_target_waits_for_a_measured_step() {
    let t0 = Instant::now();
    let mut s = Scheduler::new(
        SchedulerConfig {
            step_time_target: Some(Duration::from_millis(1)),
            ..config(16, 512)
        },
        BlockManager::new(64, 4, true),
    );
    start_decoding(&mut s, t0, 1);
    s.add(simple(7, t0 + Duration::from_millis(1), 40, 4))
        .unwrap();
    let out = s.schedule(t0);
    assert_eq!(scheduled_tokens(&out), vec![(0, 1), (7, 40)]);
    s.observe_step(&out, Duration::from_millis(41));
    assert!(s.cost.estimate().is_some());
}

#[test]
fn a_deeper_prompt_gets_shorter_chunks_for_the_same_step_time() {
    let t0 = Instant::now();
    let mut s = timed_scheduler(20, 512);
    // 1 ms a token plus 10 µs per attended position.
    s.cost = Default::default();
    for (tokens, rows, attended) in [(100, 1, 5050), (100, 50, 0), (100, 1, 50_000), (10, 1, 0)] {
        let seconds = 0.001 * tokens as f64 + 1e-5 * attended as f64;
        s.cost.observe(tokens, rows, attended, seconds);
    }
    start_decoding(&mut s, t0, 1);
    s.add(simple(7, t0 + Duration::from_millis(1), 200, 4))
        .unwrap();
    let mut chunks = Vec::new();
    while chunks.iter().sum::<usize>() < 200 {
        let out = s.schedule(t0);
        let tokens = scheduled_tokens(&out);
        assert_eq!(tokens[0], (0, 1), "the decode always runs");
        chunks.push(tokens[1].1);
        feed(&mut s, &out, 9, t0);
    }
    assert!(chunks.windows(2).all(|w| w[1] <= w[0]), "{chunks:?}");
    assert!(chunks[0] > 2 * chunks[chunks.len() - 2], "{chunks:?}");
}

#[test]
fn decodes_slower_than_the_target_leave_prompts_their_share_of_the_step() {
    let t0 = Instant::now();
    // 0.5, the default: 8 ms of decodes earn the prompt 8 ms.
    for (share, expected) in [(0.5, 8), (0.6, 12), (0.75, 24)] {
        let mut s = timed_scheduler(5, 512);
        s.config.prefill_share = share;
        start_decoding(&mut s, t0, 8);
        s.add(simple(20, t0 + Duration::from_millis(1), 40, 4))
            .unwrap();
        let out = s.schedule(t0);
        let tokens = scheduled_tokens(&out);
        assert_eq!(tokens.len(), 9, "all eight decodes run: {tokens:?}");
        // 8 ms of decodes are 1 - share of the step: the prompt gets the rest.
        assert_eq!(tokens[8], (20, expected), "share {share}");
    }
}

#[test]
fn the_decodes_time_comes_from_steps_without_prompt_tokens() {
    let t0 = Instant::now();
    let mut s = timed_scheduler(5, 512);
    s.config.prefill_share = 0.8;
    // Steps with prompt chunks came out at 1.5 ms a token; the decodes alone run at 1 ms a
    // token (10 decodes: 10 ms), so a step is planned at 10 ms / (1 - 0.8) = 50 ms.
    s.cost = Default::default();
    s.cost.observe(100, 1, 0, 0.15);
    s.cost.observe(100, 50, 0, 0.15);
    start_decoding(&mut s, t0, 10);
    s.decode_cost = Default::default();
    s.decode_cost.observe(10, 10, 0, 0.010);
    s.add(simple(20, t0 + Duration::from_millis(1), 100, 4))
        .unwrap();
    let out = s.schedule(t0);
    let tokens = scheduled_tokens(&out);
    assert_eq!(tokens.len(), 11, "all ten decodes run: {tokens:?}");
    // The full fit charges the decodes 15 ms of the 50, which leaves 35 ms, but the prompt
    // gets at least 80% of the step: 40 ms, 26 tokens at 1.5 ms. Planned from the full fit's
    // decodes the step would be 75 ms and the chunk 40 tokens.
    assert_eq!(tokens[10], (20, 26));
}

#[test]
fn only_steps_without_prompt_tokens_teach_the_decode_fit() {
    let t0 = Instant::now();
    let mut s = timed_scheduler(1000, 512);
    s.add(simple(0, t0, 20, 4)).unwrap();
    let prompt = s.schedule(t0);
    s.observe_step(&prompt, Duration::from_millis(40));
    assert!(
        s.decode_cost.estimate().is_none(),
        "a prompt step is not a decode step"
    );
    feed(&mut s, &prompt, 9, t0);
    let decode = s.schedule(t0);
    assert_eq!(scheduled_tokens(&decode), vec![(0, 1)]);
    s.observe_step(&decode, Duration::from_millis(3));
    let learned = s.decode_cost.estimate().expect("a decode step teaches it");
    assert!(
        (learned.seconds(1, 1, 0) - 0.003).abs() < 1e-9,
        "{learned:?}"
    );
}

#[test]
fn beside_a_long_prompt_one_step_in_sixteen_measures_the_decodes_alone() {
    let t0 = Instant::now();
    let mut s = timed_scheduler_with_blocks(20, 512, 512);
    start_decoding(&mut s, t0, 1);
    s.add(simple(7, t0 + Duration::from_millis(1), 1000, 4))
        .unwrap();
    let every = super::step_budget::DECODE_PROBE_EVERY;
    let mut alone = Vec::new();
    for step in 0..2 * every + 2 {
        let out = s.schedule(t0);
        let tokens = scheduled_tokens(&out);
        assert_eq!(tokens[0], (0, 1), "the decode always runs");
        if tokens.len() == 1 {
            alone.push(step);
        }
        s.observe_step(&out, Duration::from_millis(10));
        feed(&mut s, &out, 9, t0);
    }
    assert_eq!(alone, vec![every, 2 * every + 1]);
    assert!(
        s.decode_cost.estimate().is_some(),
        "the probes taught the decode fit"
    );
}
