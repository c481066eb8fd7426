use super::*;

const NGRAM: NgramProposer = NgramProposer {
    min_ngram: 1,
    max_ngram: 3,
};

fn config(max_draft_tokens: usize, adaptive: bool) -> SpeculationConfig {
    SpeculationConfig {
        proposer: ProposerSpec::Ngram(NgramProposer {
            min_ngram: 1,
            max_ngram: 3,
        }),
        max_draft_tokens,
        adaptive,
    }
}

fn proposal(index: usize, len: usize, acceptance: f64) -> Proposal {
    Proposal {
        index,
        draft: (0..len as u32).collect(),
        acceptance,
    }
}

fn lengths(chosen: &[(usize, Vec<u32>)]) -> Vec<(usize, usize)> {
    chosen.iter().map(|(i, d)| (*i, d.len())).collect()
}

#[test]
fn fixed_speculation_verifies_every_proposed_token_within_the_step_budget() {
    let s = Speculator::new(Box::new(NGRAM), &config(8, false));
    let chosen = s.choose(2, 2, 100, vec![proposal(0, 3, 0.1), proposal(1, 5, 0.0)]);
    assert_eq!(lengths(&chosen), vec![(0, 3), (1, 5)]);
    // Four tokens left: the likeliest first (acceptance 0 never beats 0.1).
    let chosen = s.choose(2, 2, 4, vec![proposal(0, 3, 0.1), proposal(1, 5, 0.0)]);
    assert_eq!(lengths(&chosen), vec![(0, 3), (1, 1)]);
}

#[test]
fn adaptive_speculation_takes_the_drafts_worth_their_rows() {
    let mut s = Speculator::new(Box::new(NGRAM), &config(8, true));
    let p = || vec![proposal(3, 6, 0.9)];
    assert!(s.choose(1, 1, 100, p()).is_empty(), "no step measured yet");
    // A memory-bound machine: up to 4 rows cost the same, then each row costs a full one.
    for rows in 1..=16 {
        let seconds = if rows <= 4 { 0.1 } else { 0.025 * rows as f64 };
        s.observe_step(rows, rows, seconds);
    }
    assert_eq!(lengths(&s.choose(1, 1, 100, p())), vec![(3, 3)]);
    // Four streams already fill the cheap rows: a row costs a full token's time there, which a
    // draft token accepted 90% of the time does not repay.
    assert_eq!(
        lengths(&s.choose(4, 4, 100, vec![proposal(0, 6, 0.9)])),
        vec![]
    );
}

#[test]
fn exploration_at_most_doubles_the_largest_step_measured() {
    let mut s = Speculator::new(Box::new(NGRAM), &config(16, true));
    s.observe_step(1, 1, 0.1);
    // Only one row measured: a step of two is tried, not one of seventeen.
    assert_eq!(
        lengths(&s.choose(1, 1, 100, vec![proposal(0, 16, 0.9)])),
        vec![(0, 1)]
    );
    s.observe_step(2, 2, 0.1);
    assert_eq!(
        lengths(&s.choose(1, 1, 100, vec![proposal(0, 16, 0.9)])),
        vec![(0, 3)]
    );
}

#[test]
fn acceptance_follows_the_sequence_and_starts_from_the_proposer_wide_rate() {
    let mut s = Speculator::new(Box::new(NGRAM), &config(8, true));
    let fresh = DraftRecord::default();
    assert_eq!(s.acceptance(&fresh), INITIAL_ACCEPTANCE);
    let mut good = DraftRecord::default();
    for _ in 0..20 {
        s.record(
            &mut good,
            Verified {
                proposed: 4,
                accepted: 4,
            },
        );
    }
    assert!(s.acceptance(&good) > 0.9, "{}", s.acceptance(&good));
    let mut bad = DraftRecord::default();
    for _ in 0..20 {
        s.record(
            &mut bad,
            Verified {
                proposed: 4,
                accepted: 0,
            },
        );
    }
    // One token judged a draft when the first is rejected: the rest were never compared.
    assert!(s.acceptance(&bad) < 0.3, "{}", s.acceptance(&bad));
    let prior = s.acceptance(&DraftRecord::default());
    assert!(
        (0.3..0.95).contains(&prior),
        "both sequences count: {prior}"
    );
}

#[test]
fn proposals_are_cut_to_the_room_and_the_configured_most() {
    let mut s = Speculator::new(Box::new(NGRAM), &config(3, false));
    let tokens = [1, 2, 3, 4, 5, 6, 7, 1, 2];
    let ask = |seq, max_tokens| DraftRequest {
        seq,
        tokens: &tokens,
        blocks: &[],
        max_tokens,
    };
    let drafts = s.propose(&[ask(0, 10), ask(1, 2), ask(2, 0), ask(3, 1)]);
    assert_eq!(drafts, vec![vec![3, 4, 5], vec![3, 4], vec![], vec![3]]);
}
