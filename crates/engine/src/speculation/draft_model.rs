//! A draft model as a [`Proposer`]: a smaller model of the same vocabulary proposes its greedy
//! continuation of each sequence.
//!
//! Its paged KV cache has a block for each of the target's full-group blocks, and the draft
//! writes a sequence's keys and values at the block ids of the target's table (vLLM's layout:
//! one block manager, each block holding both models' layers). The scheduler takes the blocks
//! for the draft tokens before asking for them and gives back those of rejected tokens, so the
//! draft has no pool, no allocation failure and no rollback of its own: a block the target
//! frees is free for both.
//!
//! Per sequence the draft keeps the tokens its cache holds and the block ids it wrote them
//! through. Each step it catches up on the tokens added since (the target's accepted tokens; a
//! prompt arrives in chunks of [`CATCH_UP_TOKENS`]), after dropping what differs from the
//! sequence (draft tokens the target rejected, or blocks that are no longer the sequence's),
//! then drafts one token a pass, all sequences in one batch per pass. A sequence whose table or
//! the draft's context cannot hold its draft proposes nothing.
//!
//! Another sequence may share a block through the prefix cache; both compute its draft keys
//! and values from the same tokens at the same positions with batch-invariant kernels, so
//! writing it again writes the same bits.

use std::collections::HashMap;

use sluice_model::Batch;

use crate::block_manager::BlockId;
use crate::executor::{DraftRequest, Executor, ExecutorError, Proposer};
use crate::sampler::argmax;
use crate::sequence::SeqId;

/// Most tokens of a sequence the draft model catches up on per step: a long prompt is read over
/// several steps (proposing nothing until it is), so no step stalls on it.
pub const CATCH_UP_TOKENS: usize = 512;

/// The draft model, its cache and what each sequence holds in it.
pub struct DraftModel {
    executor: Box<dyn Executor>,
    /// The target's vocabulary: a draft ends before a token the target does not have.
    vocab_size: usize,
    /// Most tokens of a sequence caught up on per call.
    catch_up_tokens: usize,
    /// KV groups of the draft's cache: each is addressed through the target's full-group table.
    num_groups: usize,
    block_size: usize,
    seqs: HashMap<SeqId, DraftSeq>,
}

impl std::fmt::Debug for DraftModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraftModel")
            .field("sequences", &self.seqs.len())
            .finish_non_exhaustive()
    }
}

/// One sequence in the draft model's cache.
#[derive(Default)]
struct DraftSeq {
    /// The target's block ids the cache was written through.
    blocks: Vec<BlockId>,
    /// Tokens whose keys and values the cache holds, in order.
    computed: Vec<u32>,
}

/// A sequence taking part in one call.
struct Active {
    seq: SeqId,
    /// Draft tokens still wanted.
    wanted: usize,
    draft: Vec<u32>,
}

impl DraftModel {
    /// A draft model over `executor` (its own model and KV cache), for a target of
    /// `vocab_size` tokens whose full KV group has `target_blocks` blocks of the same size:
    /// every group of the draft's cache must have as many, as the target's block ids address
    /// them.
    pub fn new(
        executor: Box<dyn Executor>,
        vocab_size: usize,
        target_blocks: usize,
    ) -> Result<Self, String> {
        let pools = executor.kv_pools();
        if let Some(short) = (pools.groups.iter()).find(|p| p.num_blocks < target_blocks) {
            return Err(format!(
                "the draft model's KV cache has {} blocks in a group, fewer than the model's \
                 {target_blocks}: it writes at the model's block ids",
                short.num_blocks
            ));
        }
        Ok(DraftModel {
            vocab_size,
            catch_up_tokens: CATCH_UP_TOKENS,
            num_groups: pools.groups.len(),
            block_size: executor.block_size(),
            executor,
            seqs: HashMap::new(),
        })
    }

    /// Sequences the draft holds keys and values for (0 once every sequence was released).
    pub fn num_sequences(&self) -> usize {
        self.seqs.len()
    }

    /// The batch tables of a sequence whose target table is `blocks`: the same blocks in every
    /// group of the draft's cache.
    fn tables(&self, blocks: &[BlockId]) -> Vec<Vec<u32>> {
        vec![blocks.to_vec(); self.num_groups]
    }

    /// Brings `request`'s sequence up to date in the cache, as far as this step allows: drops
    /// what differs from its tokens or blocks, then queues the tokens not yet computed (at most
    /// [`CATCH_UP_TOKENS`]) into `batch`. Returns whether the sequence is then fully computed
    /// (it can draft this step), or `None` when its table or the draft's context cannot hold
    /// its draft.
    fn catch_up(&mut self, request: &DraftRequest<'_>, batch: &mut Batch) -> Option<bool> {
        let tokens = request.tokens;
        // A sequence the draft model's context cannot hold with its draft gets none.
        let context = self.executor.context_length().unwrap_or(usize::MAX);
        if tokens.len() + request.max_tokens > context {
            return None;
        }
        let DraftSeq {
            mut blocks,
            mut computed,
        } = self.seqs.remove(&request.seq).unwrap_or_default();
        // Positions written through blocks that are still the sequence's.
        let same_blocks = (blocks.iter().zip(request.blocks))
            .take_while(|(a, b)| a == b)
            .count()
            * self.block_size;
        // The last token is always computed again: its logits give the first draft token
        // (`tokens` may end inside what the cache holds, when the target kept a draft token the
        // step did not verify).
        let same = (computed.iter().zip(tokens))
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len().saturating_sub(1))
            .min(same_blocks);
        computed.truncate(same);
        let todo = &tokens[same..(same + self.catch_up_tokens).min(tokens.len())];
        let caught_up = same + todo.len() == tokens.len();
        // Positions written: the tokens caught up on and, drafting, every draft token but the
        // last (fed back for the next).
        let end = same
            + todo.len()
            + if caught_up {
                request.max_tokens.saturating_sub(1)
            } else {
                0
            };
        if end > request.blocks.len() * self.block_size {
            return None;
        }
        blocks.clear();
        blocks.extend_from_slice(request.blocks);
        let tables = self.tables(&blocks);
        batch.push_sequence_tables(todo, same, tables, self.block_size, caught_up);
        computed.extend_from_slice(todo);
        self.seqs.insert(request.seq, DraftSeq { blocks, computed });
        Some(caught_up)
    }

    /// One pass: each active sequence's last draft token in, its next draft token out.
    fn draft_pass(&mut self, active: &mut [(usize, Active)]) -> Result<(), ExecutorError> {
        let mut batch = Batch::default();
        for (_, a) in active.iter() {
            let state = &self.seqs[&a.seq];
            let last = *a.draft.last().expect("a draft has its first token");
            batch.push_sequence_tables(
                &[last],
                state.computed.len(),
                self.tables(&state.blocks),
                self.block_size,
                true,
            );
        }
        let logits = self.executor.execute(&batch)?;
        for (i, (_, a)) in active.iter_mut().enumerate() {
            let state = self
                .seqs
                .get_mut(&a.seq)
                .expect("active sequences are held");
            state.computed.push(*a.draft.last().expect("non-empty"));
            match argmax(logits.row(i)).filter(|&t| (t as usize) < self.vocab_size) {
                Some(token) => a.draft.push(token),
                None => a.wanted = a.draft.len(),
            }
        }
        Ok(())
    }

    /// Drafts for every request, or the executor's failure.
    fn try_propose(
        &mut self,
        requests: &[DraftRequest<'_>],
    ) -> Result<Vec<Vec<u32>>, ExecutorError> {
        let mut batch = Batch::default();
        // Per request: `Some(row)` when it catches up this step and reads logits row `row`.
        let mut rows = Vec::with_capacity(requests.len());
        let mut next_row = 0;
        for request in requests {
            match self.catch_up(request, &mut batch) {
                Some(true) => {
                    rows.push(Some(next_row));
                    next_row += 1;
                }
                Some(false) => rows.push(None),
                None => {
                    self.seqs.remove(&request.seq);
                    rows.push(None);
                }
            }
        }
        let mut drafts = vec![Vec::new(); requests.len()];
        if batch.num_tokens() == 0 {
            return Ok(drafts);
        }
        let logits = self.executor.execute(&batch)?;
        let mut active: Vec<(usize, Active)> = Vec::new();
        for (i, (request, row)) in requests.iter().zip(&rows).enumerate() {
            let Some(row) = row else { continue };
            let first = argmax(logits.row(*row)).filter(|&t| (t as usize) < self.vocab_size);
            if let (Some(token), true) = (first, request.max_tokens > 0) {
                let a = Active {
                    seq: request.seq,
                    wanted: request.max_tokens,
                    draft: vec![token],
                };
                active.push((i, a));
            }
        }
        loop {
            let (more, done): (Vec<_>, Vec<_>) =
                (active.into_iter()).partition(|(_, a)| a.draft.len() < a.wanted);
            for (i, a) in done {
                drafts[i] = a.draft;
            }
            active = more;
            if active.is_empty() {
                return Ok(drafts);
            }
            self.draft_pass(&mut active)?;
        }
    }
}

impl Proposer for DraftModel {
    fn propose(&mut self, requests: &[DraftRequest<'_>]) -> Vec<Vec<u32>> {
        match self.try_propose(requests) {
            Ok(drafts) => drafts,
            Err(e) => {
                // A draft is only a guess: without one the step decodes as it would anyway.
                tracing::error!("the draft model failed, no draft this step: {e}");
                for request in requests {
                    self.seqs.remove(&request.seq);
                }
                vec![Vec::new(); requests.len()]
            }
        }
    }

    fn release(&mut self, seq: SeqId) {
        self.seqs.remove(&seq);
    }

    fn drafts_for_images(&self) -> bool {
        false
    }
}

#[cfg(test)]
#[path = "draft_model_tests.rs"]
mod tests;
