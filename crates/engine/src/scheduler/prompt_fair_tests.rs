//! Fair sharing of each step's prompt tokens between callers: one caller's long prompts never
//! keep another's short prompt waiting for all of them, a caller alone uses the whole budget,
//! and what one caller leaves unused goes to the others.

use std::collections::HashMap;

use super::*;

/// 16 seats, 64 tokens a step, 256 blocks of 4, fair sharing on.
fn prompt_scheduler() -> Scheduler {
    Scheduler::new(config(16, 64), BlockManager::new(256, 4, true))
}

/// Request `id` of `caller` with a prompt of `len` tokens, arriving `ms` after `t0`.
fn prompt_of(caller: u64, id: SeqId, t0: Instant, ms: u64, len: usize) -> Sequence {
    simple(id, t0 + Duration::from_millis(ms), len, 4).with_caller(Some(caller))
}

/// Tokens each caller computes in the step `out`.
fn tokens_per_caller(s: &Scheduler, out: &SchedulerOutput) -> HashMap<u64, usize> {
    let mut per = HashMap::new();
    for x in &out.scheduled {
        let caller = s.sequence(x.seq_id).unwrap().caller.unwrap();
        *per.entry(caller).or_default() += x.num_new_tokens;
    }
    per
}

#[test]
fn a_short_prompt_runs_in_the_next_step_while_another_caller_prefills_long_prompts() {
    let t0 = Instant::now();
    let mut s = prompt_scheduler();
    let mut exec = HistoryExecutor::new(VOCAB, 4, 256);
    for id in 0..8 {
        s.add(prompt_of(1, id, t0, 0, 48)).unwrap();
    }
    let (out, _) = step(&mut s, &mut exec, t0);
    assert_eq!(tokens_per_caller(&s, &out), HashMap::from([(1, 64)]));
    assert_eq!(
        out.fair_share_prompt_tokens_deferred, 0,
        "nobody else asked"
    );

    s.add(prompt_of(2, 20, t0, 1, 5)).unwrap();
    let (out, _) = step(&mut s, &mut exec, t0 + Duration::from_millis(2));
    let short = out.scheduled.iter().find(|x| x.seq_id == 20);
    assert_eq!(
        short.map(|x| x.num_new_tokens),
        Some(5),
        "caller 2's whole prompt runs at once: {:?}",
        out.scheduled
    );
    assert_eq!(
        out.batch.num_tokens(),
        64,
        "caller 1 takes the rest of the step"
    );
    assert_eq!(out.fair_share_prompt_tokens_deferred, 5);
}

#[test]
fn two_callers_with_long_prompts_split_each_step_evenly() {
    let t0 = Instant::now();
    let mut s = prompt_scheduler();
    let mut exec = HistoryExecutor::new(VOCAB, 4, 256);
    for id in 0..4 {
        s.add(prompt_of(1, id, t0, 0, 64)).unwrap();
    }
    for id in 10..14 {
        s.add(prompt_of(2, id, t0, 1, 64)).unwrap();
    }
    for n in 0..4 {
        let (out, _) = step(&mut s, &mut exec, t0 + Duration::from_millis(2 + n));
        let per = tokens_per_caller(&s, &out);
        let decodes = out
            .scheduled
            .iter()
            .filter(|x| x.num_new_tokens == 1)
            .count();
        assert_eq!(per.len(), 2, "step {n}: {per:?}");
        assert!(
            per.values().all(|&t| t >= 31),
            "step {n}: {per:?}, {decodes} decodes"
        );
        assert_eq!(per.values().sum::<usize>(), 64, "step {n}: {per:?}");
    }
}

#[test]
fn a_caller_alone_uses_the_whole_prompt_budget() {
    let t0 = Instant::now();
    let mut s = prompt_scheduler();
    for id in 0..3 {
        s.add(prompt_of(1, id, t0, 0, 48)).unwrap();
    }
    let out = s.schedule(t0);
    assert_eq!(out.batch.num_tokens(), 64);
    assert_eq!(out.fair_share_prompt_tokens_deferred, 0);
}

#[test]
fn prompt_tokens_a_caller_leaves_unused_go_to_the_others() {
    let t0 = Instant::now();
    let mut s = prompt_scheduler();
    let mut exec = HistoryExecutor::new(VOCAB, 4, 256);
    // Caller 2's 40-token prompt is computed once, so its second copy finds 36 tokens cached.
    let first = prompt_of(2, 30, t0, 0, 40);
    let prompt = first.prompt().to_vec();
    s.add(first).unwrap();
    while !s.is_idle() {
        let (_, done) = step(&mut s, &mut exec, t0);
        for id in done {
            s.remove(id);
        }
    }
    for id in 0..4 {
        s.add(prompt_of(1, id, t0, 1, 64)).unwrap();
    }
    let copy = seq(NewSeq {
        id: 31,
        request: 31,
        choice: 0,
        priority: Priority::Normal,
        arrival: t0 + Duration::from_millis(2),
        prompt,
        max_tokens: 4,
    });
    s.add(copy.with_caller(Some(2))).unwrap();
    // Caller 2's part is 32 tokens but it computes 4: the other 28 go to caller 1.
    let (out, _) = step(&mut s, &mut exec, t0 + Duration::from_millis(3));
    assert_eq!(
        tokens_per_caller(&s, &out),
        HashMap::from([(1, 60), (2, 4)]),
        "{:?}",
        out.scheduled
    );
}

#[test]
fn shared_prompt_steps_keep_every_output_equal_to_its_solo_run() {
    let t0 = Instant::now();
    let mut s = prompt_scheduler();
    let mut exec = HistoryExecutor::new(VOCAB, 4, 256);
    let mut prompts = HashMap::new();
    for (caller, id, len) in [(1, 0, 70), (1, 1, 50), (2, 10, 9), (3, 20, 33), (2, 11, 61)] {
        let seq = prompt_of(caller, id, t0, id, len);
        prompts.insert(id, seq.prompt().to_vec());
        s.add(seq).unwrap();
    }
    let mut outputs = HashMap::new();
    for n in 0..100 {
        if s.is_idle() {
            break;
        }
        let (_, done) = step(&mut s, &mut exec, t0 + Duration::from_millis(100 + n));
        for id in done {
            outputs.insert(id, s.remove(id).unwrap().output().to_vec());
        }
    }
    assert_eq!(outputs.len(), prompts.len());
    for (id, prompt) in &prompts {
        assert_eq!(
            outputs[id],
            greedy_alone(prompt, VOCAB, 4, None),
            "sequence {id}"
        );
    }
    assert_eq!(s.block_manager().num_used_blocks(), 0);
}

#[test]
fn a_step_budget_smaller_than_the_callers_still_finishes_every_prompt() {
    // One token a step, three callers with prompts, and blocks for fewer prompts than run:
    // the best running prompt always advances, so nobody preempts itself forever.
    let t0 = Instant::now();
    let mut s = Scheduler::new(config(4, 1), BlockManager::new(8, 2, false));
    let mut exec = HistoryExecutor::new(VOCAB, 2, 8);
    let arrivals = [
        (0, None, 1),
        (3, Some(0), 7),
        (4, None, 7),
        (4, None, 1),
        (4, Some(1), 7),
    ];
    let mut prompts = HashMap::new();
    let mut outputs = HashMap::new();
    for n in 0..200u64 {
        let now = t0 + Duration::from_millis(10 * n);
        for (id, &(at, caller, len)) in arrivals.iter().enumerate() {
            if at == n {
                let seq = simple(id as SeqId, now, len, 1).with_caller(caller);
                prompts.insert(id as SeqId, seq.prompt().to_vec());
                s.add(seq).unwrap();
            }
        }
        if s.is_idle() && n > 4 {
            break;
        }
        let (_, done) = step(&mut s, &mut exec, now);
        for id in done {
            outputs.insert(id, s.remove(id).unwrap().output().to_vec());
        }
    }
    assert_eq!(outputs.len(), arrivals.len(), "every sequence finishes");
    for (id, prompt) in &prompts {
        assert_eq!(
            outputs[id],
            greedy_alone(prompt, VOCAB, 1, None),
            "sequence {id}"
        );
    }
}
