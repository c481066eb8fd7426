//! Draft tokens in steps: accepted runs computed once, rejected rows' blocks given back, and
//! outputs exactly those of plain decoding (the random workloads in `proptest.rs` check the
//! last with every proposer here).

use super::*;
use crate::executor::fake::logits_after;
use crate::executor::{DraftRequest, NgramProposer, Proposer};
use crate::speculation::{ProposerSpec, SpeculationConfig};

/// The fake model's greedy continuation: every draft token is accepted.
#[derive(Debug)]
pub(super) struct Oracle;

impl Proposer for Oracle {
    fn propose(&mut self, requests: &[DraftRequest<'_>]) -> Vec<Vec<u32>> {
        (requests.iter())
            .map(|r| greedy_after(r.tokens, r.max_tokens))
            .collect()
    }
}

fn greedy_after(tokens: &[u32], max_tokens: usize) -> Vec<u32> {
    {
        let mut history = tokens.to_vec();
        for _ in 0..max_tokens {
            let logits = logits_after(&history, VOCAB);
            let best = (0..VOCAB)
                .max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a)))
                .expect("non-empty vocabulary") as u32;
            history.push(best);
        }
        history.split_off(tokens.len())
    }
}

/// Never right: the first draft token is always rejected.
#[derive(Debug)]
pub(super) struct Adversary;

impl Proposer for Adversary {
    fn propose(&mut self, requests: &[DraftRequest<'_>]) -> Vec<Vec<u32>> {
        let wrong = |draft: Vec<u32>| draft.into_iter().map(|t| (t + 1) % VOCAB as u32).collect();
        Oracle.propose(requests).into_iter().map(wrong).collect()
    }
}

/// Wraps a proposer and keeps the sequences it holds something for: those it proposed for
/// and was not yet told to release. Checks that each request's blocks hold its draft (a draft
/// model writes there): distinct blocks covering its tokens and `max_tokens` more.
#[derive(Debug)]
pub(super) struct Tracked {
    inner: Box<dyn Proposer>,
    block_size: usize,
    pub(super) held: Arc<std::sync::Mutex<std::collections::HashSet<SeqId>>>,
}

impl Proposer for Tracked {
    fn propose(&mut self, requests: &[DraftRequest<'_>]) -> Vec<Vec<u32>> {
        for r in requests {
            let room = r.blocks.len() * self.block_size;
            assert!(
                room >= r.tokens.len() + r.max_tokens,
                "{room} positions for {r:?}"
            );
            let distinct: std::collections::HashSet<_> = r.blocks.iter().collect();
            assert_eq!(distinct.len(), r.blocks.len(), "{r:?}");
        }
        self.held
            .lock()
            .unwrap()
            .extend(requests.iter().map(|r| r.seq));
        self.inner.propose(requests)
    }

    fn release(&mut self, seq: SeqId) {
        self.held.lock().unwrap().remove(&seq);
    }
}

/// A proposer by number (prompt lookup, the oracle, the adversary), tracked, for blocks of
/// `block_size` tokens.
pub(super) fn proposer(kind: usize, block_size: usize) -> Tracked {
    Tracked {
        inner: untracked(kind),
        block_size,
        held: Default::default(),
    }
}

fn untracked(kind: usize) -> Box<dyn Proposer> {
    match kind % 3 {
        0 => Box::new(NgramProposer {
            min_ngram: 1,
            max_ngram: 3,
        }),
        1 => Box::new(Oracle),
        _ => Box::new(Adversary),
    }
}

/// Every proposed token up to `max_draft_tokens`, whatever it costs.
pub(super) fn fixed(max_draft_tokens: usize) -> SpeculationConfig {
    SpeculationConfig {
        proposer: ProposerSpec::Ngram(NgramProposer {
            min_ngram: 1,
            max_ngram: 3,
        }),
        max_draft_tokens,
        adaptive: false,
    }
}

fn speculating(proposer: Box<dyn Proposer>, max_draft_tokens: usize) -> Scheduler {
    scheduler(64, 4, 64).with_proposer(proposer, &fixed(max_draft_tokens))
}

#[test]
fn a_right_draft_is_computed_in_the_step_and_kept_whole() {
    let t0 = Instant::now();
    let mut s = speculating(Box::new(Oracle), 4);
    let mut exec = HistoryExecutor::new(VOCAB, 4, 64);
    s.add(simple(0, t0, 5, 11)).unwrap();
    let (out, _) = step(&mut s, &mut exec, t0);
    assert_eq!(out.batch.num_tokens(), 5, "the prompt step takes no draft");
    let (out, _) = step(&mut s, &mut exec, t0);
    // The first token, then a draft of four: five rows, five tokens kept.
    assert_eq!(out.scheduled[0].draft.len(), 4);
    assert_eq!(
        (out.batch.num_tokens(), out.batch.logits_indices.len()),
        (5, 5)
    );
    let seq = s.sequence(0).unwrap();
    assert_eq!(seq.output().len(), 6);
    assert_eq!(seq.num_computed_tokens(), seq.tokens().len() - 1);
    // Room for 11 tokens: the next draft is cut to what max_tokens can still use.
    let (out, done) = step(&mut s, &mut exec, t0);
    assert_eq!(out.scheduled[0].draft.len(), 4);
    assert_eq!(done, vec![0]);
    let seq = s.remove(0).unwrap();
    assert_eq!(seq.output(), greedy_alone(seq.prompt(), VOCAB, 11, None));
    assert_eq!(s.block_manager().num_used_blocks(), 0);
}

/// Never has a guess.
#[derive(Debug)]
struct Silent;

impl Proposer for Silent {
    fn propose(&mut self, requests: &[DraftRequest<'_>]) -> Vec<Vec<u32>> {
        vec![Vec::new(); requests.len()]
    }
}

#[test]
fn blocks_taken_for_a_draft_that_never_came_are_given_back() {
    let t0 = Instant::now();
    let mut s = speculating(Box::new(Silent), 8);
    let mut exec = HistoryExecutor::new(VOCAB, 4, 64);
    s.add(simple(0, t0, 5, 11)).unwrap();
    step(&mut s, &mut exec, t0);
    // The decode step asks for eight draft tokens with the blocks of 6 + 8 positions taken
    // (four), gets none, and keeps the two its one token needs.
    let (out, _) = step(&mut s, &mut exec, t0);
    assert!(out.scheduled[0].draft.is_empty());
    assert_eq!(s.block_manager().num_used_blocks(), 2);
}

#[test]
fn a_wrong_draft_yields_the_plain_token_and_gives_its_blocks_back() {
    let t0 = Instant::now();
    let mut s = speculating(Box::new(Adversary), 6);
    let mut exec = HistoryExecutor::new(VOCAB, 4, 64);
    s.add(simple(0, t0, 3, 9)).unwrap();
    let mut steps = 0;
    loop {
        let (out, done) = step(&mut s, &mut exec, t0);
        steps += 1;
        if !done.is_empty() {
            break;
        }
        let seq = s.sequence(0).unwrap();
        if steps > 1 {
            assert!(
                !out.scheduled[0].draft.is_empty(),
                "step {steps} verifies a draft"
            );
        }
        // Only the blocks the kept tokens need stay held.
        let needed = seq.tokens().len().div_ceil(4);
        assert_eq!(s.block_manager().num_used_blocks(), needed, "step {steps}");
    }
    let seq = s.remove(0).unwrap();
    assert_eq!(steps, 9, "one token a step, as without drafts");
    assert_eq!(seq.output(), greedy_alone(seq.prompt(), VOCAB, 9, None));
    assert_eq!(s.block_manager().num_used_blocks(), 0);
}

#[test]
fn drafts_use_only_free_blocks_and_never_preempt() {
    let t0 = Instant::now();
    // Two sequences of 8 prompt tokens fill 4 of 5 blocks of 4.
    let mut s = Scheduler::new(config(4, 64), BlockManager::new(5, 4, false))
        .with_proposer(Box::new(Oracle), &fixed(8));
    let mut exec = HistoryExecutor::new(VOCAB, 4, 5);
    s.add(simple(0, t0, 7, 6)).unwrap();
    s.add(simple(1, t0, 7, 6)).unwrap();
    let mut outputs = HashMap::new();
    while !s.is_idle() {
        let (out, done) = step(&mut s, &mut exec, t0);
        assert!(out.preempted.is_empty(), "a draft preempted a sequence");
        for id in done {
            outputs.insert(id, s.remove(id).unwrap());
        }
    }
    for seq in outputs.values() {
        assert_eq!(seq.output(), greedy_alone(seq.prompt(), VOCAB, 6, None));
    }
}

#[test]
fn scores_only_and_prefilling_sequences_take_no_draft() {
    let t0 = Instant::now();
    let mut s = speculating(Box::new(Oracle), 4);
    s.add(simple(0, t0, 9, 0)).unwrap();
    s.add(simple(1, t0, 30, 4)).unwrap();
    let out = s.schedule(t0);
    assert!(out.scheduled.iter().all(|x| x.draft.is_empty()));
}
