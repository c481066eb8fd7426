//! What crosses the scheduler's boundary each step: the step it decided (`SchedulerOutput`), the
//! tokens sampled for it (`ModelOutput`) and what applying them did (`StepOutcome`).

use sluice_model::Batch;

use crate::block_manager::BlockLoad;
use crate::output::Ending;
use crate::prompt_scoring::PromptRows;
use crate::sampler::{Sample, SampleError};
use crate::sequence::SeqId;
use crate::speculation::Verified;

/// One sequence's share of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledSeq {
    /// The sequence.
    pub seq_id: SeqId,
    /// Tokens it computes this step.
    pub num_new_tokens: usize,
    /// Row of the step's logits to sample its next token from, once it has caught up.
    pub logits_row: Option<usize>,
    /// Rows of the step's outputs this sequence's prompt outputs read (scoring, pooling).
    pub prompt_rows: Option<PromptRows>,
    /// Draft tokens computed after its own (speculative decoding): their logits rows follow
    /// `logits_row`, one each.
    pub draft: Vec<u32>,
}

/// What one step computes, and what happened while deciding it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulerOutput {
    /// The forward pass's input.
    pub batch: Batch,
    /// The scheduled sequences, in batch order.
    pub scheduled: Vec<ScheduledSeq>,
    /// Sequences preempted (blocks freed, requeued with their tokens) while scheduling.
    pub preempted: Vec<SeqId>,
    /// Sequences scheduled for the first time (they left the queue as new requests).
    pub first_scheduled: Vec<SeqId>,
    /// Sequences finished without running (they can never fit); collect them with `remove`.
    pub rejected: Vec<SeqId>,
    /// Prompt tokens looked up in the prefix cache this step.
    pub prefix_cache_queries: u64,
    /// Of which found.
    pub prefix_cache_hits: u64,
    /// Of the found, those read from the lower tier (a disk) rather than found in RAM.
    pub prefix_cache_lower_hits: u64,
    /// Blocks read from the lower tier, to copy into the KV cache before the forward pass.
    pub kv_loads: Vec<BlockLoad>,
    /// Waiting sequences fair sharing passed over for the first time this step.
    pub fair_share_deferred: u64,
    /// Of the preempted, those preempted to give a starving caller its share.
    pub fair_share_preempted: u64,
    /// Prompt tokens a caller would have computed this step but left to other callers' parts.
    pub fair_share_prompt_tokens_deferred: u64,
}

impl SchedulerOutput {
    /// True when the step computes nothing.
    pub fn is_empty(&self) -> bool {
        self.scheduled.is_empty()
    }
}

/// The sampled tokens of one step: per sequence that had a `logits_row`, the run of tokens it
/// takes (one when decoding; several when a step verifies speculated tokens or a constraint
/// forces some), or why sampling failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelOutput {
    /// `(sequence, its run of tokens or the sampling error)`.
    pub samples: Vec<(SeqId, Result<Vec<Sample>, SampleError>)>,
}

/// What a step did to its sequences, read by the engine loop and its metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepOutcome {
    /// Sequences that took tokens, and how many, in step order.
    pub appended: Vec<(SeqId, usize)>,
    /// Sequences that finished, and how; collect them with
    /// [`Scheduler::remove`](super::Scheduler::remove).
    pub finished: Vec<(SeqId, Ending)>,
    /// What each draft verified this step did.
    pub verified: Vec<Verified>,
}

impl StepOutcome {
    /// Whether `id` finished in this step.
    pub fn has_finished(&self, id: SeqId) -> bool {
        self.finished.iter().any(|(f, _)| *f == id)
    }
}
