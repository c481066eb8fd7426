//! Draft tokens in a step: after the step's own work is planned, decoding sequences may take
//! draft tokens from the proposer as extra rows, as many as the speculator finds worth their
//! cost, never preempting anything for them; after the step, the rows of rejected draft tokens
//! give their blocks back.

use std::collections::HashMap;

use super::{Scheduler, StepPlan};
use crate::block_manager::BlockManager;
use crate::executor::DraftRequest;
use crate::sampler::Sample;
use crate::sequence::Sequence;
use crate::speculation::{Proposal, Speculator, Verified};

impl Scheduler {
    /// Adds draft tokens to the planned step where they pay (see `crate::speculation`).
    pub(super) fn plan_drafts(&mut self, step: &mut StepPlan) {
        let Some(speculator) = self.speculator.as_mut() else {
            return;
        };
        let rows: usize = step.seqs.iter().map(|&(_, n)| n).sum();
        if rows == 0 || step.tokens == 0 {
            return;
        }
        let mut tokens_out = 0;
        let (mut candidates, mut places) = (Vec::new(), Vec::new());
        for (index, &(id, num_new)) in step.seqs.iter().enumerate() {
            let seq = &self.seqs[&id];
            let samples = !seq.scores_only() && num_new == seq.num_uncomputed_tokens();
            tokens_out += usize::from(samples);
            let images_refused = !seq.images().is_empty() && !speculator.drafts_for_images();
            if !samples || num_new != 1 || !seq.sampling().speculative || images_refused {
                continue;
            }
            let room = draft_room(seq, self.config.max_model_len);
            candidates.push(speculator.candidate(&seq.draft_record, room));
            places.push(index);
        }
        // How long a draft each sequence could use, priced before asking for it: a draft
        // model's passes cost time whether or not their tokens are verified.
        let lengths = speculator.lengths(rows, tokens_out, step.tokens, &candidates);
        let mut wanted: Vec<(usize, usize)> = (places.into_iter().zip(lengths))
            .filter(|&(_, len)| len > 0)
            .collect();
        // The blocks of the run to verify (the last token and its draft) are taken before the
        // draft is asked for: a draft model writes its own keys and values at the same block
        // ids. Free blocks only (drafts never preempt anyone); where too few are free, the draft
        // is cut to the blocks the sequence holds.
        let block_size = self.blocks.block_size();
        for (index, len) in &mut wanted {
            let seq = (self.seqs.get_mut(&step.seqs[*index].0)).expect("planned sequence exists");
            let have = seq.tokens().len();
            let table = seq.blocks.as_mut().expect("running sequence holds blocks");
            if self.blocks.append(table, have + *len).is_err() {
                *len = (*len).min((table.block_ids().len() * block_size).saturating_sub(have));
            }
        }
        wanted.retain(|&(_, len)| len > 0);
        let asked: Vec<DraftRequest<'_>> = (wanted.iter())
            .map(|&(index, len)| {
                let seq = &self.seqs[&step.seqs[index].0];
                DraftRequest {
                    seq: seq.id,
                    tokens: seq.tokens(),
                    blocks: seq.blocks.as_ref().expect("running").block_ids(),
                    max_tokens: len,
                }
            })
            .collect();
        let drafts = if asked.is_empty() {
            Vec::new()
        } else {
            speculator.propose(&asked)
        };
        let proposals: Vec<Proposal> = (wanted.iter().zip(drafts))
            .filter(|(_, draft)| !draft.is_empty())
            .map(|(&(index, _), draft)| {
                let seq = &self.seqs[&step.seqs[index].0];
                Proposal {
                    index,
                    draft,
                    acceptance: speculator.acceptance(&seq.draft_record),
                }
            })
            .collect();
        let mut chosen: HashMap<usize, Vec<u32>> = if proposals.is_empty() {
            HashMap::new()
        } else {
            (speculator.choose(rows, tokens_out, step.tokens, proposals))
                .into_iter()
                .collect()
        };
        // Each asked sequence keeps the blocks of the run it verifies, and gives back the rest.
        for (index, _) in wanted {
            let id = step.seqs[index].0;
            let seq = self.seqs.get_mut(&id).expect("planned sequence exists");
            let draft = chosen.remove(&index).unwrap_or_default();
            let run = seq.tokens().len() + draft.len();
            let table = seq.blocks.as_mut().expect("running sequence holds blocks");
            self.blocks.truncate(table, run);
            if !draft.is_empty() {
                step.tokens -= draft.len();
                step.drafts.insert(id, draft);
            }
        }
    }
}

/// What verifying `draft` did, given the run sampled for it: the leading draft tokens the run
/// repeats were accepted.
pub(super) fn verified(draft: &[u32], run: &[Sample]) -> Verified {
    let accepted = (run.iter().zip(draft))
        .take_while(|(s, d)| s.token_id == **d)
        .count();
    Verified {
        proposed: draft.len(),
        accepted,
    }
}

/// After a sequence's verified run was appended: records the verification, counts the accepted
/// draft tokens as computed (their rows' K/V are the K/V of the tokens kept) and gives back the
/// blocks that only rejected draft tokens used (unless the run `ends` the sequence, which frees
/// them all).
pub(super) fn settle_draft(
    blocks: &mut BlockManager,
    speculator: Option<&mut Speculator>,
    seq: &mut Sequence,
    ends: bool,
    verified: Verified,
) {
    if let Some(speculator) = speculator {
        speculator.record(&mut seq.draft_record, verified);
    }
    if !ends {
        // The run's last token has no K/V yet; every token before it does.
        let computed = seq.tokens().len() - 1;
        seq.advance_computed(computed - seq.num_computed_tokens());
        seq.register_computed_blocks(blocks);
        let num_tokens = seq.tokens().len();
        if let Some(table) = seq.blocks.as_mut() {
            blocks.truncate(table, num_tokens);
        }
    }
}

/// Draft tokens a sequence can use: the verified run (drafts plus one) must fit both its
/// `max_tokens` and the context.
fn draft_room(seq: &Sequence, max_model_len: usize) -> usize {
    let tokens_left = (seq.stop_rules().max_tokens as usize).saturating_sub(seq.output().len());
    let context_left = max_model_len.saturating_sub(seq.tokens().len());
    tokens_left.min(context_left).saturating_sub(1)
}
