//! Draft tokens for speculative decoding: a [`Proposer`] guesses the tokens that follow a
//! sequence; the step computes them as extra rows and keeps the longest run the model's own
//! sampling agrees with (handed to the scheduler as a run of tokens, see
//! `scheduler::ModelOutput`), so a speculated token is always the token computing it gives.

use crate::block_manager::BlockId;
use crate::sequence::SeqId;

/// One sequence's call for a draft.
#[derive(Debug, Clone, Copy)]
pub struct DraftRequest<'a> {
    /// The sequence (a proposer with state per sequence, such as a draft model's cache, keys
    /// it by this).
    pub seq: SeqId,
    /// Its prompt then output.
    pub tokens: &'a [u32],
    /// Its full-group blocks in the target's pool, covering at least `tokens` and `max_tokens`
    /// more positions: a proposer with a cache of its own (a draft model) writes the sequence's
    /// keys and values at these block ids.
    pub blocks: &'a [BlockId],
    /// Most tokens to propose.
    pub max_tokens: usize,
}

/// Guesses tokens that may follow sequences. A proposer lives on its engine's thread (beside
/// the scheduler that asks it).
pub trait Proposer: std::fmt::Debug {
    /// A draft for each request, in order: up to its `max_tokens` tokens that may follow its
    /// `tokens`; fewer, or none, where there is no guess. One call per step, for every
    /// sequence that may speculate, so a model-based proposer can run them as one batch.
    fn propose(&mut self, requests: &[DraftRequest<'_>]) -> Vec<Vec<u32>>;

    /// `seq` is gone (finished, cancelled or preempted): forget anything kept for it.
    fn release(&mut self, _seq: SeqId) {}

    /// Whether it drafts well for a prompt with images. A proposer reading only token ids
    /// does (prompt lookup); a draft model would read the images' soft tokens as text.
    fn drafts_for_images(&self) -> bool {
        true
    }
}

/// Prompt lookup: finds the latest earlier occurrence of the sequence's last `n` tokens (the
/// longest `n` from `max_ngram` down to `min_ngram` that occurs) and proposes what followed it,
/// continuing the copy past the end of the sequence where the occurrence is that close.
/// Cheap and strong where outputs quote their context (code edits, extraction, agents echoing
/// tool results).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NgramProposer {
    /// Shortest suffix matched.
    pub min_ngram: usize,
    /// Longest suffix matched.
    pub max_ngram: usize,
}

impl Proposer for NgramProposer {
    fn propose(&mut self, requests: &[DraftRequest<'_>]) -> Vec<Vec<u32>> {
        (requests.iter())
            .map(|r| self.draft(r.tokens, r.max_tokens))
            .collect()
    }
}

impl NgramProposer {
    /// Up to `max_tokens` tokens that may follow `tokens`.
    pub fn draft(&self, tokens: &[u32], max_tokens: usize) -> Vec<u32> {
        let min = self.min_ngram.max(1);
        for n in (min..=self.max_ngram).rev() {
            if tokens.len() <= n {
                continue;
            }
            let suffix = &tokens[tokens.len() - n..];
            // The latest occurrence other than the suffix itself (it may overlap the suffix).
            let found = (0..tokens.len() - n)
                .rev()
                .find(|&start| &tokens[start..start + n] == suffix);
            if let Some(start) = found {
                // What followed the occurrence, copied on past the end of `tokens` as an
                // overlapping copy does: a run that repeats with period `distance` goes on
                // repeating (`a b a b` proposes `a b a b ...`, not only the one token left).
                let distance = tokens.len() - (start + n);
                let mut draft = Vec::with_capacity(max_tokens);
                for i in 0..max_tokens {
                    let token = if i < distance {
                        tokens[start + n + i]
                    } else {
                        draft[i - distance]
                    };
                    draft.push(token);
                }
                return draft;
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ngram(min_ngram: usize, max_ngram: usize) -> NgramProposer {
        NgramProposer {
            min_ngram,
            max_ngram,
        }
    }

    #[test]
    fn proposes_what_followed_the_latest_earlier_occurrence_of_the_suffix() {
        let tokens = [1, 2, 3, 4, 9, 1, 2, 3, 7, 1, 2, 3];
        // `1 2 3` last occurred at 5 (followed by 7 1 2 3), before that at 0.
        assert_eq!(ngram(1, 3).draft(&tokens, 3), vec![7, 1, 2]);
        // Past the end, the copy goes on: `7 1 2 3` again.
        assert_eq!(ngram(1, 3).draft(&tokens, 6), vec![7, 1, 2, 3, 7, 1]);
        assert_eq!(ngram(1, 3).draft(&tokens, 0), Vec::<u32>::new());
    }

    #[test]
    fn the_longest_matching_suffix_wins_and_no_match_proposes_nothing() {
        // The 2-gram `5 6` occurs at 0 (then 8); the 1-gram `6` last at 3 (then 5).
        let tokens = [5, 6, 8, 6, 5, 6];
        assert_eq!(ngram(1, 2).draft(&tokens, 1), vec![8]);
        assert_eq!(ngram(1, 1).draft(&tokens, 1), vec![5]);
        assert!(ngram(1, 3).draft(&[1, 2, 3], 4).is_empty());
        assert!(ngram(2, 4).draft(&[], 4).is_empty());
    }

    #[test]
    fn a_repeating_run_is_proposed_to_go_on_repeating() {
        assert_eq!(ngram(1, 2).draft(&[4, 9, 9, 9], 3), vec![9, 9, 9]);
        assert_eq!(ngram(2, 2).draft(&[1, 5, 6, 5, 6], 5), vec![5, 6, 5, 6, 5]);
    }
}
