//! Fair sharing of seats between callers, step by step.

use std::collections::HashMap;

use super::*;

fn fair_scheduler(max_num_seqs: usize, fair_share: FairShareConfig) -> Scheduler {
    Scheduler::new(
        SchedulerConfig {
            fair_share,
            ..config(max_num_seqs, 256)
        },
        BlockManager::new(64, 4, true),
    )
}

/// A single-choice request `id` of `caller`, arriving `ms` after `t0`.
fn of(caller: u64, id: SeqId, t0: Instant, ms: u64, priority: Priority) -> Sequence {
    seq(NewSeq {
        id,
        request: id,
        choice: 0,
        priority,
        arrival: t0 + Duration::from_millis(ms),
        prompt: vec![1 + id as u32 % 7, 2, 3],
        max_tokens: 6,
    })
    .with_caller(Some(caller))
}

fn ids(out: &SchedulerOutput) -> Vec<SeqId> {
    out.scheduled.iter().map(|x| x.seq_id).collect()
}

const FAIR: FairShareConfig = FairShareConfig {
    enabled: true,
    max_seqs_per_caller: None,
};

#[test]
fn a_waiting_caller_gets_a_seat_before_another_callers_second_sequence() {
    let t0 = Instant::now();
    let mut s = fair_scheduler(2, FAIR);
    for id in 0..3 {
        s.add(of(1, id, t0, 0, Priority::Normal)).unwrap();
    }
    s.add(of(2, 10, t0, 1, Priority::Normal)).unwrap();
    let out = s.schedule(t0 + Duration::from_millis(2));
    assert_eq!(
        ids(&out),
        vec![0, 10],
        "caller 2 is admitted before 1's second request"
    );
    assert_eq!(out.fair_share_deferred, 1);
    assert!(out.preempted.is_empty());
}

#[test]
fn a_caller_alone_takes_every_seat() {
    let t0 = Instant::now();
    let mut s = fair_scheduler(2, FAIR);
    for id in 0..3 {
        s.add(of(1, id, t0, 0, Priority::Normal)).unwrap();
    }
    let out = s.schedule(t0);
    assert_eq!(ids(&out), vec![0, 1]);
    assert_eq!(out.fair_share_deferred, 0);
}

#[test]
fn a_new_caller_preempts_the_latest_sequence_of_a_caller_holding_every_seat() {
    let t0 = Instant::now();
    let mut s = fair_scheduler(4, FAIR);
    let mut exec = HistoryExecutor::new(VOCAB, 4, 64);
    for id in 0..8 {
        s.add(of(1, id, t0, 0, Priority::Normal)).unwrap();
    }
    let (out, _) = step(&mut s, &mut exec, t0);
    assert_eq!(ids(&out), vec![0, 1, 2, 3]);
    s.add(of(2, 20, t0, 5, Priority::Normal)).unwrap();
    let (out, _) = step(&mut s, &mut exec, t0 + Duration::from_millis(6));
    assert_eq!(
        out.preempted,
        vec![3],
        "the latest of caller 1's running sequences"
    );
    assert_eq!(out.fair_share_preempted, 1);
    assert!(ids(&out).contains(&20), "caller 2 runs in the same step");
    // Caller 2 holds one seat of its two and waits for nothing more: no further preemption,
    // and caller 1's preempted sequence waits for a seat instead of taking one back.
    let (out, _) = step(&mut s, &mut exec, t0 + Duration::from_millis(7));
    assert!(out.preempted.is_empty());
    assert_eq!(ids(&out), vec![0, 1, 20, 2], "within-share sequences first");
}

#[test]
fn every_sequence_of_both_callers_finishes_with_its_solo_output() {
    let t0 = Instant::now();
    let mut s = fair_scheduler(4, FAIR);
    let mut exec = HistoryExecutor::new(VOCAB, 4, 64);
    let mut prompts = HashMap::new();
    for id in 0..8 {
        let seq = of(1, id, t0, 0, Priority::Normal);
        prompts.insert(id, seq.prompt().to_vec());
        s.add(seq).unwrap();
    }
    let mut outputs = HashMap::new();
    let mut first_step_of_caller_2 = None;
    for step_no in 0..200u64 {
        let now = t0 + Duration::from_millis(step_no);
        if step_no == 2 {
            for id in [20, 21] {
                let seq = of(2, id, t0, step_no, Priority::Normal);
                prompts.insert(id, seq.prompt().to_vec());
                s.add(seq).unwrap();
            }
        }
        if s.is_idle() && step_no > 2 {
            break;
        }
        let (out, done) = step(&mut s, &mut exec, now);
        if first_step_of_caller_2.is_none() && ids(&out).contains(&20) {
            first_step_of_caller_2 = Some(step_no);
        }
        for id in done {
            outputs.insert(id, s.remove(id).unwrap().output().to_vec());
        }
    }
    assert_eq!(first_step_of_caller_2, Some(2), "admitted on arrival");
    assert_eq!(outputs.len(), 10);
    for (id, prompt) in &prompts {
        assert_eq!(
            outputs[id],
            greedy_alone(prompt, VOCAB, 6, None),
            "sequence {id}"
        );
    }
    assert_eq!(s.block_manager().num_used_blocks(), 0);
}

#[test]
fn fairness_never_preempts_a_sequence_of_better_priority() {
    let t0 = Instant::now();
    let mut s = fair_scheduler(2, FAIR);
    for id in 0..3 {
        s.add(of(1, id, t0, 0, Priority::High)).unwrap();
    }
    let out = s.schedule(t0);
    feed(&mut s, &out, 9, t0);
    s.add(of(2, 10, t0, 1, Priority::Normal)).unwrap();
    let out = s.schedule(t0 + Duration::from_millis(2));
    assert!(out.preempted.is_empty());
    assert_eq!(ids(&out), vec![0, 1]);
}

#[test]
fn with_fair_share_off_a_second_caller_waits_for_a_free_seat() {
    let t0 = Instant::now();
    let mut s = fair_scheduler(
        2,
        FairShareConfig {
            enabled: false,
            max_seqs_per_caller: None,
        },
    );
    for id in 0..3 {
        s.add(of(1, id, t0, 0, Priority::Normal)).unwrap();
    }
    s.add(of(2, 10, t0, 1, Priority::Normal)).unwrap();
    let out = s.schedule(t0 + Duration::from_millis(2));
    assert_eq!(ids(&out), vec![0, 1]);
    feed(&mut s, &out, 9, t0);
    let out = s.schedule(t0 + Duration::from_millis(3));
    assert!(out.preempted.is_empty());
    assert_eq!(out.fair_share_deferred, 0);
}

#[test]
fn the_per_caller_cap_holds_on_an_idle_server() {
    let t0 = Instant::now();
    let mut s = fair_scheduler(
        4,
        FairShareConfig {
            enabled: true,
            max_seqs_per_caller: Some(2),
        },
    );
    for id in 0..3 {
        s.add(of(1, id, t0, 0, Priority::Normal)).unwrap();
    }
    let out = s.schedule(t0);
    assert_eq!(ids(&out), vec![0, 1]);
    assert_eq!(out.fair_share_deferred, 1);
    assert_eq!(s.num_waiting(), 1);
}
