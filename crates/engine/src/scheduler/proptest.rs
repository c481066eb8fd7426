//! Random workloads over a tiny block pool: nothing lost, nothing leaked, outputs as if alone,
//! with callers sharing seats fairly (or not), an optional per-caller cap and speculative
//! decoding with any proposer.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
struct Arrival {
    at_step: usize,
    priority: Priority,
    prompt: Vec<u32>,
    max_tokens: u32,
    n: u32,
    cancel_at_step: Option<usize>,
    caller: Option<u64>,
}

fn arrival() -> impl Strategy<Value = Arrival> {
    (
        0usize..12,
        prop_oneof![
            Just(Priority::High),
            Just(Priority::Normal),
            Just(Priority::Low)
        ],
        // A small alphabet, so prompts often share prefixes (and prefix-cache blocks).
        prop::collection::vec(1u32..3, 1..9),
        1u32..8,
        1u32..3,
        prop::option::weighted(0.2, 0usize..30),
        prop::option::weighted(0.8, 0u64..3),
    )
        .prop_map(
            |(at_step, priority, prompt, max_tokens, n, cancel_at_step, caller)| Arrival {
                at_step,
                priority,
                prompt,
                max_tokens,
                n,
                cancel_at_step,
                caller,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_workloads_finish_exactly_once_with_their_solo_outputs_and_free_every_block(
        arrivals in prop::collection::vec(arrival(), 1..10),
        prefix_caching in any::<bool>(),
        budget in 1usize..12,
        step_target_ms in prop::option::of(1u64..8),
        fair_share in any::<bool>(),
        max_seqs_per_caller in prop::option::weighted(0.3, 1usize..4),
        speculation in prop::option::weighted(0.5, (0usize..3, 1usize..6)),
    ) {
        let (block_size, num_blocks) = (2, 8);
        let t0 = Instant::now();
        let mut s = Scheduler::new(
            SchedulerConfig {
                step_time_target: step_target_ms.map(Duration::from_millis),
                fair_share: FairShareConfig { enabled: fair_share, max_seqs_per_caller },
                ..config(4, budget)
            },
            BlockManager::new(num_blocks, block_size, prefix_caching),
        );
        // Drafts from prompt lookup, always right or always wrong: the outputs stay the same.
        let mut held = None;
        if let Some((kind, max_draft_tokens)) = speculation {
            let config = super::spec_tests::fixed(max_draft_tokens);
            let proposer = super::spec_tests::proposer(kind, block_size);
            held = Some(Arc::clone(&proposer.held));
            s = s.with_proposer(Box::new(proposer), &config);
        }
        let mut exec = HistoryExecutor::new(VOCAB, block_size, num_blocks);
        let mut next_id = 0;
        let mut owner: HashMap<SeqId, usize> = HashMap::new();
        let mut finished: HashMap<SeqId, Vec<u32>> = HashMap::new();
        let mut cancelled = vec![false; arrivals.len()];
        let mut step_no = 0;
        loop {
            let now = t0 + Duration::from_millis(10 * step_no as u64);
            for (r, a) in arrivals.iter().enumerate() {
                if a.at_step == step_no {
                    for choice in 0..a.n {
                        owner.insert(next_id, r);
                        s.add(seq(NewSeq {
                            id: next_id,
                            request: r as RequestId,
                            choice,
                            priority: a.priority,
                            arrival: now,
                            prompt: a.prompt.clone(),
                            max_tokens: a.max_tokens,
                        }).with_caller(a.caller)).unwrap();
                        next_id += 1;
                    }
                }
                if a.cancel_at_step == Some(step_no) && a.at_step <= step_no {
                    cancelled[r] = true;
                    for aborted in s.abort_request(r as RequestId) {
                        prop_assert!(aborted.is_finished());
                    }
                }
            }
            let all_arrived = arrivals.iter().all(|a| a.at_step <= step_no);
            if all_arrived && s.is_idle() {
                break;
            }
            let (out, done) = step(&mut s, &mut exec, now);
            if let Some(cap) = max_seqs_per_caller {
                let census = s.callers();
                prop_assert!(census.max_running() <= cap, "a caller runs past the cap");
            }
            // A made-up machine: 1 ms per token, 0.3 ms more per logits row.
            let cost_us = 1000 * out.batch.num_tokens() + 300 * out.batch.logits_indices.len();
            s.observe_step(&out, Duration::from_micros(cost_us as u64));
            prop_assert!(out.rejected.is_empty(), "every sequence fits the pool alone");
            for id in done {
                let seq = s.remove(id).expect("a finished sequence is still held");
                prop_assert!(finished.insert(id, seq.output().to_vec()).is_none(), "finished twice");
            }
            step_no += 1;
            prop_assert!(step_no < 2_000, "the workload does not make progress");
        }
        prop_assert_eq!(s.block_manager().num_used_blocks(), 0);
        if let Some(held) = held {
            prop_assert!(held.lock().unwrap().is_empty(), "the proposer still holds sequences");
        }
        for (id, r) in &owner {
            let a = &arrivals[*r];
            match finished.get(id) {
                Some(tokens) => prop_assert_eq!(
                    tokens,
                    &greedy_alone(&a.prompt, VOCAB, a.max_tokens as usize, None)
                ),
                None => prop_assert!(cancelled[*r], "sequence {} was lost", id),
            }
        }
    }
}
