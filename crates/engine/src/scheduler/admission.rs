//! Admission: which waiting sequence fair sharing lets in next, whom it may displace, and
//! whether the block pool has room for it (a cached prefix or a sibling choice's prompt blocks
//! reused first).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::{is_prefilling, Scheduler, SchedulerOutput, StepPlan};
use crate::block_manager::SharedPrefix;
use crate::fair_share::{PromptQuotas, Shares};
use crate::handle::RequestId;
use crate::output::ChoiceError;
use crate::prompt_scoring::PROMPT_LOGITS_ROWS_PER_STEP;
use crate::request::Priority;
use crate::sequence::{SeqId, Sequence};

impl Scheduler {
    /// Admits waiting sequences, best first among those fair sharing lets in, within the
    /// step's tokens and their callers' parts of the prompt tokens, preempting for a starving
    /// caller or a High request where it may. Returns the tokens it scheduled.
    pub(super) fn admit_waiting(
        &mut self,
        now: Instant,
        step: &mut StepPlan,
        out: &mut SchedulerOutput,
    ) -> usize {
        let mut scheduled = 0;
        while step.tokens > 0 && step.prompt_tokens > 0 {
            let Some(id) = self.next_admissible(now, &step.shares, &step.quotas, out) else {
                break;
            };
            let caller = self.seqs[&id].caller;
            let unshared = step.tokens.min(step.prompt_tokens);
            let admission = if self.running.len() < self.config.max_num_seqs {
                self.try_admit(id, unshared.min(step.quotas.left(caller)), now, out)
            } else {
                Admission::NoSeat
            };
            match admission {
                Admission::Admitted(num_new) => {
                    let wanted = self.seqs[&id].num_uncomputed_tokens().min(unshared);
                    step.deferred_prompt_tokens += wanted.saturating_sub(num_new);
                    step.shares.on_admit(caller);
                    step.quotas.spend(caller, num_new);
                    step.admitted.insert(id);
                    step.seqs.push((id, num_new));
                    step.tokens = step.tokens.saturating_sub(num_new);
                    step.prompt_tokens = step.prompt_tokens.saturating_sub(num_new);
                    scheduled += num_new;
                }
                Admission::Rejected => {
                    step.shares.on_reject(caller);
                    out.rejected.push(id);
                }
                Admission::WaitForSibling => break,
                Admission::NoBlocks | Admission::NoSeat => {
                    let waiting_priority = self.seqs[&id].priority;
                    let fair_victim = self.fair_victim(id, &step.shares, &step.admitted);
                    let low_victim = self.low_victim(waiting_priority, &step.admitted);
                    let Some(victim) = low_victim.or(fair_victim) else {
                        break;
                    };
                    if fair_victim == Some(victim) {
                        out.fair_share_preempted += 1;
                    }
                    if let Some(pos) = step.seqs.iter().position(|&(p, _)| p == victim) {
                        let freed = step.seqs.remove(pos).1;
                        step.tokens += freed;
                        let victim_seq = &self.seqs[&victim];
                        if is_prefilling(victim_seq) {
                            step.prompt_tokens = step.prompt_tokens.saturating_add(freed);
                            step.quotas.refund(victim_seq.caller, freed);
                        }
                    }
                    self.preempt(victim, &mut out.preempted, &mut step.shares);
                }
            }
        }
        scheduled
    }

    /// The best waiting sequence fair sharing lets in now: its caller may take a seat and has
    /// prompt tokens left this step. When it passes over the queue's head, the head is counted
    /// as deferred (once per sequence).
    pub(super) fn next_admissible(
        &mut self,
        now: Instant,
        shares: &Shares,
        quotas: &PromptQuotas,
        out: &mut SchedulerOutput,
    ) -> Option<SeqId> {
        let admissible = |caller| shares.may_admit(caller) && quotas.left(caller) > 0;
        let head = *self.waiting.peek(now)?;
        if admissible(self.seqs[&head].caller) {
            return Some(head);
        }
        let seqs = &self.seqs;
        let chosen = self
            .waiting
            .peek_where(now, |id| admissible(seqs[id].caller))
            .copied();
        let head_seq = self.seqs.get_mut(&head).expect("waiting sequence exists");
        if !head_seq.deferred_by_fair_share {
            head_seq.deferred_by_fair_share = true;
            out.fair_share_deferred += 1;
        }
        chosen
    }

    /// A running sequence that waiting sequence `id` may preempt for its fair share: the worst
    /// one of a caller over its share, not of better priority, never one admitted in this step.
    pub(super) fn fair_victim(
        &self,
        id: SeqId,
        shares: &Shares,
        admitted: &HashSet<SeqId>,
    ) -> Option<SeqId> {
        let waiting = &self.seqs[&id];
        self.running.iter().rev().copied().find(|v| {
            let victim = &self.seqs[v];
            !admitted.contains(v)
                && shares.may_preempt_for(
                    waiting.caller,
                    waiting.priority,
                    victim.caller,
                    victim.priority,
                )
        })
    }

    /// A running Low sequence a waiting High one may preempt (worst first, never one admitted in
    /// this step).
    pub(super) fn low_victim(&self, waiting: Priority, admitted: &HashSet<SeqId>) -> Option<SeqId> {
        if waiting != Priority::High {
            return None;
        }
        self.running
            .iter()
            .rev()
            .copied()
            .find(|id| self.seqs[id].priority == Priority::Low && !admitted.contains(id))
    }

    pub(super) fn try_admit(
        &mut self,
        id: SeqId,
        budget: usize,
        now: Instant,
        out: &mut SchedulerOutput,
    ) -> Admission {
        let seq = &self.seqs[&id];
        let total = seq.tokens().len();
        if total.div_ceil(self.blocks.block_size()) > self.blocks.num_blocks()
            || total >= self.config.max_model_len
        {
            let seq = self.seqs.get_mut(&id).expect("exists");
            self.waiting.remove(seq.priority, seq.arrival, id);
            seq.finish(ChoiceError::DoesNotFit { tokens: total }.into());
            return Admission::Rejected;
        }
        let block_size = self.blocks.block_size();
        let siblings = sibling_prefix(&self.seqs, &self.requests, block_size, seq);
        let shared = match siblings {
            SiblingPrefix::None => None,
            SiblingPrefix::Ready(shared) => Some(shared),
            SiblingPrefix::Computing => return Admission::WaitForSibling,
        };
        // Rows found in the cache have no logits or hidden states to score or pool: such a
        // sequence looks nothing up (an empty lookup key reuses no block).
        let needs_rows = seq.prompt_scoring().is_some_and(|p| p.needs_prompt_rows());
        let (lookup, shared) = match needs_rows {
            true => (&[][..], None),
            false => (seq.tokens(), shared),
        };
        let keys = &seq.cache_keys;
        let cached = (self.blocks).num_reusable_tokens(lookup, shared, keys.clone());
        let num_new = (total - cached).min(budget).min(row_cap(seq));
        let num_new = seq.images().chunk_len(cached, num_new);
        if !self
            .blocks
            .can_allocate(lookup, cached + num_new, shared, keys.clone())
        {
            return Admission::NoBlocks;
        }
        // A block the lower tier offered may fail to read: the table then reuses less, and the
        // sequence computes from where its reused prefix really ends.
        let target = cached + num_new;
        let Ok(mut table) = self.blocks.allocate(lookup, target, shared, keys.clone()) else {
            return Admission::NoBlocks;
        };
        let (cached, lower) = (table.num_cached_tokens(), table.num_lower_tokens());
        let num_new = target - cached.min(target);
        // Less reused than offered: the chunk starts earlier and may now end inside an image.
        let num_new = match seq.images().chunk_len(cached, num_new) {
            0 => 0,
            fixed if fixed > num_new => {
                if self.blocks.append(&mut table, cached + fixed).is_err() {
                    return Admission::NoBlocks;
                }
                fixed
            }
            fixed => fixed,
        };
        let seq = self.seqs.get_mut(&id).expect("exists");
        self.waiting.remove(seq.priority, seq.arrival, id);
        if seq.first_scheduled_at.is_none() {
            out.first_scheduled.push(id);
            let prompt = seq.prompt().len();
            out.prefix_cache_queries += prompt as u64;
            out.prefix_cache_hits += cached.min(prompt) as u64;
            out.prefix_cache_lower_hits += lower.min(prompt) as u64;
        }
        seq.start_running(table, now);
        self.running.push(id);
        Admission::Admitted(num_new)
    }
}

/// Most tokens a sequence may compute in one step: a chunk whose every row is scored is cut to
/// [`PROMPT_LOGITS_ROWS_PER_STEP`].
pub(super) fn row_cap(seq: &Sequence) -> usize {
    match seq.prompt_scoring() {
        Some(p) if p.wants_logprob_rows() => PROMPT_LOGITS_ROWS_PER_STEP,
        _ => usize::MAX,
    }
}

/// What a running sibling choice offers a sequence about to be admitted.
enum SiblingPrefix<'a> {
    /// No sibling holds the prompt's full blocks.
    None,
    /// A sibling has computed them: share instead of recomputing.
    Ready(SharedPrefix<'a>),
    /// A sibling is still computing them: waiting for it saves recomputing.
    Computing,
}

fn sibling_prefix<'a>(
    seqs: &'a HashMap<SeqId, Sequence>,
    requests: &HashMap<RequestId, Vec<SeqId>>,
    block_size: usize,
    seq: &Sequence,
) -> SiblingPrefix<'a> {
    let shareable = seq.prompt().len().saturating_sub(1) / block_size;
    if shareable == 0 {
        return SiblingPrefix::None;
    }
    let mut computing = false;
    let siblings = requests.get(&seq.request_id).into_iter().flatten();
    for sib in siblings.filter(|&&s| s != seq.id).map(|s| &seqs[s]) {
        let Some(table) = sib.block_table() else {
            continue;
        };
        if sib.num_computed_tokens() >= shareable * block_size {
            return SiblingPrefix::Ready(SharedPrefix {
                table,
                num_blocks: shareable,
            });
        }
        computing = true;
    }
    if computing {
        SiblingPrefix::Computing
    } else {
        SiblingPrefix::None
    }
}

/// The outcome of trying to admit the best waiting sequence.
pub(super) enum Admission {
    Admitted(usize),
    Rejected,
    NoBlocks,
    /// `max_num_seqs` sequences already run.
    NoSeat,
    WaitForSibling,
}
