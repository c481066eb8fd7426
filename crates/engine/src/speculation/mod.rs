//! Speculative decoding that never changes an output.
//!
//! A [`Proposer`] guesses the tokens after a decoding sequence; the step computes them as extra
//! rows of the sequence (prefill-like rows in the same paged attention), and the sequence keeps
//! the samples plain decoding would draw, up to the first that differs from the guess
//! (`Sequence::sample_verified`). A row's logits do not depend on what else shares its step,
//! so the output is the same, token for token, with or without speculation: only its speed
//! changes.
//!
//! Extra rows compete with other sequences' tokens, so a step takes drafts only where they pay:
//! each draft token's chance of being kept (the sequence's acceptance so far, the proposer's
//! before it has any) against what the step's extra rows cost on this machine (`cost.rs`). At
//! high concurrency, where every row costs its share, speculation stops by itself.

pub mod cost;
mod draft_model;

pub use draft_model::{DraftModel, CATCH_UP_TOKENS};

use std::path::PathBuf;

use crate::executor::{DraftRequest, Executor, NgramProposer, Proposer};
use crate::sequence::SeqId;

use cost::{RowCosts, MAX_ROWS};

/// Most draft tokens one sequence may take in one step.
pub const MAX_DRAFT_TOKENS: usize = 32;

/// Acceptance assumed before any draft was verified.
const INITIAL_ACCEPTANCE: f64 = 0.5;

/// How many verified draft tokens the proposer-wide rate counts as, in a sequence's estimate.
const PRIOR_WEIGHT: f64 = 4.0;

/// Decay of a sequence's own record per verification (recent drafts count most).
const SEQUENCE_DECAY: f64 = 0.9;

/// Decay of the proposer-wide record per verification.
const GLOBAL_DECAY: f64 = 0.99;

/// Which proposer drafts tokens (one variant per kind of proposer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposerSpec {
    /// Prompt lookup (`--speculative ngram`).
    Ngram(NgramProposer),
    /// A draft model (`--speculative draft:PATH`): whoever starts the engine loads it and hands
    /// its executor to `Engine::start_with_draft`.
    DraftModel(PathBuf),
}

impl ProposerSpec {
    /// The proposer for a target of `vocab_size` tokens whose full KV group has
    /// `target_blocks` blocks, over the draft model's executor where the spec names one; why
    /// not, when a draft model is named but none was loaded or its cache cannot follow the
    /// target's blocks.
    pub(crate) fn build(
        &self,
        draft: Option<Box<dyn Executor>>,
        vocab_size: usize,
        target_blocks: usize,
    ) -> Result<Box<dyn Proposer>, String> {
        match self {
            ProposerSpec::Ngram(ngram) => Ok(Box::new(*ngram)),
            ProposerSpec::DraftModel(_) => {
                let draft = draft.ok_or("no draft model was loaded")?;
                Ok(Box::new(DraftModel::new(draft, vocab_size, target_blocks)?))
            }
        }
    }
}

/// Speculative decoding settings of an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeculationConfig {
    /// Where draft tokens come from.
    pub proposer: ProposerSpec,
    /// Most draft tokens per sequence and step (`--num-speculative-tokens`, at most
    /// [`MAX_DRAFT_TOKENS`]).
    pub max_draft_tokens: usize,
    /// Verify as many draft tokens as a step's cost model finds worth their rows (`true`), or
    /// every proposed token up to `max_draft_tokens` whatever the load (`false`, as vLLM does).
    pub adaptive: bool,
}

/// A sequence's record of verified drafts, recent ones weighing most.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DraftRecord {
    /// Draft tokens whose verdict was known (those up to the first rejected one).
    verified: f64,
    /// Of which accepted.
    accepted: f64,
}

/// What one verification did, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Draft tokens proposed.
    pub proposed: usize,
    /// Of which accepted (a leading run).
    pub accepted: usize,
}

/// The scheduler's speculation: the proposer, what rows cost, and how often drafts are kept.
#[derive(Debug)]
pub(crate) struct Speculator {
    proposer: Box<dyn Proposer>,
    max_draft_tokens: usize,
    adaptive: bool,
    costs: RowCosts,
    /// The proposer's record over every sequence: the prior of a new one.
    overall: DraftRecord,
}

/// A sequence's proposal, before the step chooses how much of it to verify.
pub(crate) struct Proposal {
    /// The sequence's place in the step.
    pub(crate) index: usize,
    /// The guessed tokens.
    pub(crate) draft: Vec<u32>,
    /// Estimated chance each draft token is accepted, given the ones before it were.
    pub(crate) acceptance: f64,
}

impl Speculator {
    /// A speculator over `proposer`, with `config`'s limits.
    pub(crate) fn new(proposer: Box<dyn Proposer>, config: &SpeculationConfig) -> Self {
        Speculator {
            proposer,
            max_draft_tokens: config.max_draft_tokens.min(MAX_DRAFT_TOKENS),
            adaptive: config.adaptive,
            costs: RowCosts::default(),
            overall: DraftRecord::default(),
        }
    }

    /// Records a step's cost.
    pub(crate) fn observe_step(&mut self, tokens: usize, rows: usize, seconds: f64) {
        self.costs.observe(tokens, rows, seconds);
    }

    /// Drafts for `requests`, each cut to its room and the configured most; requests with
    /// no room are not passed on (their draft is empty).
    pub(crate) fn propose(&mut self, requests: &[DraftRequest<'_>]) -> Vec<Vec<u32>> {
        let limit = |r: &DraftRequest<'_>| r.max_tokens.min(self.max_draft_tokens);
        let asked: Vec<DraftRequest<'_>> = (requests.iter())
            .filter(|r| limit(r) > 0)
            .map(|r| DraftRequest {
                max_tokens: limit(r),
                ..*r
            })
            .collect();
        let mut drafts = if asked.is_empty() {
            Vec::new()
        } else {
            self.proposer.propose(&asked)
        }
        .into_iter();
        (requests.iter())
            .map(|r| match limit(r) {
                0 => Vec::new(),
                n => {
                    let mut draft = drafts.next().unwrap_or_default();
                    draft.truncate(n);
                    draft
                }
            })
            .collect()
    }

    /// Whether sequences whose prompt has images may speculate (see
    /// [`Proposer::drafts_for_images`]).
    pub(crate) fn drafts_for_images(&self) -> bool {
        self.proposer.drafts_for_images()
    }

    /// A sequence left the running set: the proposer forgets it.
    pub(crate) fn release(&mut self, seq: SeqId) {
        self.proposer.release(seq);
    }

    /// The chance a sequence with `record` has its next draft token accepted.
    pub(crate) fn acceptance(&self, record: &DraftRecord) -> f64 {
        let prior = if self.overall.verified > 0.0 {
            self.overall.accepted / self.overall.verified
        } else {
            INITIAL_ACCEPTANCE
        };
        let rate = (record.accepted + PRIOR_WEIGHT * prior) / (record.verified + PRIOR_WEIGHT);
        rate.clamp(0.0, 0.99)
    }

    /// Records a verification in the sequence's record and the proposer's.
    pub(crate) fn record(&mut self, record: &mut DraftRecord, verified: Verified) {
        // Tokens after the first rejected one were never judged.
        let judged = (verified.accepted + 1).min(verified.proposed) as f64;
        let accepted = verified.accepted as f64;
        for (r, decay) in [(record, SEQUENCE_DECAY), (&mut self.overall, GLOBAL_DECAY)] {
            r.verified = r.verified * decay + judged;
            r.accepted = r.accepted * decay + accepted;
        }
    }

    /// How many draft tokens each candidate may verify in a step of `rows` rows (yielding
    /// `tokens_out` tokens without drafts, with `budget` tokens left), given its acceptance and
    /// most tokens `(acceptance, len)`: the draft tokens most likely to be kept first, as many
    /// as raise the expected tokens per second (every one, when not adaptive).
    pub(crate) fn lengths(
        &self,
        rows: usize,
        tokens_out: usize,
        budget: usize,
        candidates: &[(f64, usize)],
    ) -> Vec<usize> {
        let budget = budget.min(MAX_ROWS.saturating_sub(rows));
        // (chance all draft tokens up to this one are kept, candidate), each candidate's in
        // order; a stable sort keeps that order among equal chances.
        let mut gains: Vec<(f64, usize)> = (candidates.iter().enumerate())
            .flat_map(|(c, &(acceptance, len))| {
                (1..=len).map(move |depth| (acceptance.powi(depth as i32), c))
            })
            .collect();
        gains.sort_by(|a, b| b.0.total_cmp(&a.0));
        gains.truncate(budget);
        let count = if self.adaptive {
            let chances: Vec<f64> = gains.iter().map(|g| g.0).collect();
            self.costs
                .best_draft_count(rows, tokens_out as f64, &chances)
        } else {
            gains.len()
        };
        let mut lengths = vec![0; candidates.len()];
        for &(_, c) in &gains[..count] {
            lengths[c] += 1;
        }
        lengths
    }

    /// [`Speculator::lengths`] over actual proposals: each cut to its length, those left empty
    /// dropped. Returns `(index, draft)`.
    pub(crate) fn choose(
        &self,
        rows: usize,
        tokens_out: usize,
        budget: usize,
        proposals: Vec<Proposal>,
    ) -> Vec<(usize, Vec<u32>)> {
        let candidates: Vec<(f64, usize)> = (proposals.iter())
            .map(|p| (p.acceptance, p.draft.len()))
            .collect();
        let lengths = self.lengths(rows, tokens_out, budget, &candidates);
        (proposals.into_iter().zip(lengths))
            .filter(|(_, len)| *len > 0)
            .map(|(mut proposal, len)| {
                proposal.draft.truncate(len);
                (proposal.index, proposal.draft)
            })
            .collect()
    }

    /// The acceptance of `record`'s sequence and its room, capped at the configured most.
    pub(crate) fn candidate(&self, record: &DraftRecord, room: usize) -> (f64, usize) {
        (self.acceptance(record), room.min(self.max_draft_tokens))
    }
}

#[cfg(test)]
mod tests;
