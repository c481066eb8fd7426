//! Outputs computed over a prompt while it is prefilled: prompt logprobs, a pooled hidden state
//! and the next token's log-probabilities of chosen tokens ([`PromptOutputs`]).
//!
//! The scheduler asks a sequence which rows of a prefill chunk it needs ([`PromptScoring::rows`]);
//! the model returns logits and hidden states for exactly those rows, and the engine hands them
//! back ([`PromptScoring::record`]) before the next chunk. So the `[prompt, vocab]` logits matrix
//! never exists: each step holds at most one chunk's rows, reduced at once to a logprob and its
//! top `k`. Every output remembers how far it got, so a sequence preempted and recomputed from
//! the start records each position exactly once.

use std::ops::Range;

use sluice_model::Logits;

use crate::request::{Pooling, PromptOutputs, PromptScores};
use crate::sampler::{token_logprob, MAX_TOP_LOGPROBS};

/// Most prompt-logprob rows one step computes: a prefill chunk of a request that asks for
/// prompt logprobs is cut to this many tokens, bounding the logits a step holds to
/// `64 * vocab` floats (39 MB for a 152k vocabulary).
pub const PROMPT_LOGITS_ROWS_PER_STEP: usize = 64;

/// Which rows of one prefill chunk a sequence needs, as positions in its token sequence and
/// the first row each occupies in the step's logits and hidden states.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptRows {
    /// Positions whose logits score the next prompt token.
    pub logprob_positions: Range<usize>,
    /// Row of the step's logits holding `logprob_positions.start`.
    pub first_logits_row: usize,
    /// Positions whose final hidden state is pooled.
    pub hidden_positions: Range<usize>,
    /// Row of the step's hidden states holding `hidden_positions.start`.
    pub first_hidden_row: usize,
}

/// One sequence's progress on its [`PromptOutputs`].
#[derive(Debug)]
pub struct PromptScoring {
    wanted: PromptOutputs,
    prompt: Vec<u32>,
    scores: PromptScores,
    /// Running sum of pooled hidden states (mean pooling), in position order.
    pooled_sum: Vec<f32>,
    /// Prompt positions pooled so far.
    pooled: usize,
}

impl PromptScoring {
    /// Progress on `wanted` over `prompt`; `None` when nothing is wanted.
    pub fn new(wanted: PromptOutputs, prompt: &[u32]) -> Option<Self> {
        (!wanted.is_empty()).then(|| PromptScoring {
            wanted,
            prompt: prompt.to_vec(),
            scores: PromptScores::default(),
            pooled_sum: Vec::new(),
            pooled: 0,
        })
    }

    /// True while some prompt row still has an output to record, so the prompt must be computed
    /// rather than found in the prefix cache.
    pub fn needs_prompt_rows(&self) -> bool {
        let n = self.prompt.len();
        let logprobs = self.wanted.logprobs.is_some() && self.scores.logprobs.len() + 1 < n;
        let pooling = match self.wanted.pooling {
            Some(Pooling::Mean) => self.pooled < n,
            Some(Pooling::Cls) => self.scores.embedding.is_none(),
            _ => false,
        };
        logprobs || pooling
    }

    /// True while prompt logprobs are still to come (chunks are then cut to
    /// [`PROMPT_LOGITS_ROWS_PER_STEP`]).
    pub fn wants_logprob_rows(&self) -> bool {
        self.wanted.logprobs.is_some() && self.scores.logprobs.len() + 1 < self.prompt.len()
    }

    /// The positions of the chunk `start..start + len` this sequence needs outputs for (rows are
    /// numbered later by the batch builder).
    pub fn rows(&self, start: usize, len: usize) -> (Range<usize>, Range<usize>) {
        let (end, n) = (start + len, self.prompt.len());
        let logprobs = if self.wanted.logprobs.is_some() {
            let from = start.max(self.scores.logprobs.len());
            from..end.min(n - 1).max(from)
        } else {
            0..0
        };
        let single = |p: usize, done: bool| {
            if !done && (start..end).contains(&p) {
                p..p + 1
            } else {
                0..0
            }
        };
        let hidden = match self.wanted.pooling {
            None => 0..0,
            Some(Pooling::Mean) => {
                let from = start.max(self.pooled);
                from..end.min(n).max(from)
            }
            Some(Pooling::Cls) => single(0, self.scores.embedding.is_some()),
            Some(Pooling::LastToken) => single(n - 1, self.scores.embedding.is_some()),
        };
        (logprobs, hidden)
    }

    /// Records the outputs of one computed chunk: `rows` as planned, `next_token_row` the row
    /// of the logits after the chunk's last token when that token ends the prompt.
    pub fn record(&mut self, logits: &Logits, rows: &PromptRows, next_token_row: Option<usize>) {
        if let Some(k) = self.wanted.logprobs {
            let k = k.min(MAX_TOP_LOGPROBS);
            for (i, p) in rows.logprob_positions.clone().enumerate() {
                if p != self.scores.logprobs.len() {
                    continue;
                }
                let row = logits.row(rows.first_logits_row + i);
                let token = self.prompt[p + 1];
                self.scores.logprobs.push(token_logprob(row, token, k));
                self.scores.ranks.push(rank_of(row, token));
            }
        }
        for (i, p) in rows.hidden_positions.clone().enumerate() {
            let state = logits.hidden_row(rows.first_hidden_row + i);
            match self.wanted.pooling {
                Some(Pooling::Mean) if p == self.pooled => {
                    if self.pooled_sum.is_empty() {
                        self.pooled_sum = vec![0.0; state.len()];
                    }
                    for (sum, &x) in self.pooled_sum.iter_mut().zip(state) {
                        *sum += x;
                    }
                    self.pooled += 1;
                    if self.pooled == self.prompt.len() {
                        let n = self.pooled as f32;
                        let mean = self.pooled_sum.iter().map(|s| s / n).collect();
                        self.scores.embedding = Some(mean);
                    }
                }
                Some(Pooling::Cls | Pooling::LastToken) if self.scores.embedding.is_none() => {
                    self.scores.embedding = Some(state.to_vec());
                }
                _ => {}
            }
        }
        if let Some(row) = next_token_row.filter(|_| self.scores.next_token.is_empty()) {
            let row = logits.row(row);
            self.scores.next_token = (self.wanted.next_token_candidates.iter())
                .map(|&t| (t, token_logprob(row, t, 0).logprob))
                .collect();
        }
    }

    /// True once every wanted output is computed.
    pub fn is_complete(&self) -> bool {
        let logprobs =
            self.wanted.logprobs.is_none() || self.scores.logprobs.len() + 1 >= self.prompt.len();
        let pooling = self.wanted.pooling.is_none() || self.scores.embedding.is_some();
        logprobs && pooling && !self.wants_next_token()
    }

    /// True when the next-token log-probabilities are still to come.
    pub fn wants_next_token(&self) -> bool {
        !self.wanted.next_token_candidates.is_empty() && self.scores.next_token.is_empty()
    }

    /// What was computed.
    pub fn into_scores(self) -> PromptScores {
        self.scores
    }
}

/// 1 + the number of other tokens at least as likely as `token` in `row` (logits order as the
/// probabilities do).
fn rank_of(row: &[f32], token: u32) -> u32 {
    let own = row[token as usize];
    row.iter().filter(|&&x| x >= own).count().max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanting(logprobs: Option<u32>, pooling: Option<Pooling>) -> PromptScoring {
        let wanted = PromptOutputs {
            logprobs,
            pooling,
            next_token_candidates: Vec::new(),
        };
        PromptScoring::new(wanted, &[0, 1, 1, 0, 1]).expect("something is wanted")
    }

    #[test]
    fn logprob_rows_stop_before_the_last_prompt_position() {
        let s = wanting(Some(1), None);
        assert_eq!(s.rows(0, 3), (0..3, 0..0));
        assert_eq!(s.rows(3, 2), (3..4, 0..0));
    }

    #[test]
    fn pooling_rows_follow_the_pooling_mode() {
        assert_eq!(wanting(None, Some(Pooling::Mean)).rows(2, 3).1, 2..5);
        assert_eq!(wanting(None, Some(Pooling::Cls)).rows(0, 2).1, 0..1);
        assert_eq!(wanting(None, Some(Pooling::Cls)).rows(2, 2).1, 0..0);
        assert_eq!(wanting(None, Some(Pooling::LastToken)).rows(0, 4).1, 0..0);
        assert_eq!(wanting(None, Some(Pooling::LastToken)).rows(4, 1).1, 4..5);
    }

    #[test]
    fn last_token_pooling_can_use_the_prefix_cache() {
        assert!(!wanting(None, Some(Pooling::LastToken)).needs_prompt_rows());
        assert!(wanting(None, Some(Pooling::Mean)).needs_prompt_rows());
        assert!(wanting(Some(0), None).needs_prompt_rows());
    }

    #[test]
    fn a_rank_counts_the_tokens_at_least_as_likely() {
        let row = [0.5, 2.0, -1.0, 2.0];
        assert_eq!(rank_of(&row, 1), 2, "a tie takes the worse rank");
        assert_eq!(rank_of(&row, 0), 3);
        assert_eq!(rank_of(&row, 2), 4);
    }

    #[test]
    fn recomputed_positions_are_recorded_once() {
        let mut s = wanting(Some(0), Some(Pooling::Mean));
        // Two rows of a 2-token vocabulary and hidden size 1.
        let logits = Logits {
            data: vec![0.0, 0.0, 0.0, 0.0],
            vocab_size: 2,
            hidden: vec![1.0, 3.0],
            hidden_size: 1,
        };
        let rows = PromptRows {
            logprob_positions: 0..2,
            first_logits_row: 0,
            hidden_positions: 0..2,
            first_hidden_row: 0,
        };
        s.record(&logits, &rows, None);
        s.record(&logits, &rows, None); // the same chunk again, after a preemption
        assert_eq!(s.scores.logprobs.len(), 2);
        assert_eq!(s.scores.ranks.len(), 2);
        assert_eq!(s.pooled, 2);
        assert_eq!(s.pooled_sum, vec![4.0]);
    }
}
