//! Prompt tokens shared between callers: each step's prompt budget (prefill chunks and
//! admissions) is split between the callers with prompt work ([`PromptQuotas`]), and what a
//! caller leaves unused goes to the chunks already planned, so the split never idles the step.

use std::collections::HashMap;

use super::admission::row_cap;
use super::{is_prefilling, Scheduler, StepPlan};
use crate::fair_share::{CallerId, PromptQuotas, Shares};
use crate::sequence::SequenceStatus;

impl Scheduler {
    /// This step's prompt tokens per caller. Each caller with prompt work asks for the rest of
    /// its running prompts (each cut to what one step may compute of it) and, when seat sharing
    /// lets it in, its waiting prompts; the prompt budget is what `max_num_batched_tokens`
    /// leaves after the decodes, within the step time target's `prefill_budget`.
    pub(super) fn prompt_quotas(&self, shares: &Shares, prefill_budget: usize) -> PromptQuotas {
        if !self.config.fair_share.enabled {
            return PromptQuotas::unlimited();
        }
        let mut demands: HashMap<CallerId, usize> = HashMap::new();
        let mut decodes = 0;
        for seq in self.seqs.values().filter(|s| !s.is_finished()) {
            let ask = match seq.status() {
                SequenceStatus::Running if is_prefilling(seq) => seq.num_uncomputed_tokens(),
                SequenceStatus::Running => {
                    decodes += seq.num_uncomputed_tokens();
                    continue;
                }
                SequenceStatus::Waiting if shares.may_admit(seq.caller) => seq.tokens().len(),
                _ => continue,
            };
            let demand = demands.entry(seq.caller).or_default();
            *demand = demand.saturating_add(ask.min(row_cap(seq)));
        }
        let budget =
            (self.config.max_num_batched_tokens.saturating_sub(decodes)).min(prefill_budget);
        // When decodes take the whole step there is nothing to split: the running order alone
        // decides, as without sharing (a split of nothing would stall every prompt).
        if budget == 0 {
            return PromptQuotas::unlimited();
        }
        PromptQuotas::split(demands, budget)
    }

    /// Gives the prompt tokens left after every caller took its part to running sequences
    /// with more prompt to compute, best first (planned or not: a caller whose part went
    /// unused must not stall the others). Returns how many it gave.
    pub(super) fn top_up(&mut self, step: &mut StepPlan) -> usize {
        let mut given = 0;
        for i in 0..self.running.len() {
            let spare = step.tokens.min(step.prompt_tokens);
            if spare == 0 {
                break;
            }
            let id = self.running[i];
            let planned = step.seqs.iter().position(|&(p, _)| p == id);
            let already = planned.map_or(0, |p| step.seqs[p].1);
            let seq = &self.seqs[&id];
            let more = (seq.num_uncomputed_tokens() - already)
                .min(row_cap(seq).saturating_sub(already))
                .min(spare);
            if more == 0 {
                continue;
            }
            let start = seq.num_computed_tokens();
            let more = (seq.images().chunk_len(start, already + more)).saturating_sub(already);
            if more == 0 {
                continue;
            }
            let target = seq.num_computed_tokens() + already + more;
            let seq = self.seqs.get_mut(&id).expect("running sequence exists");
            let table = seq.blocks.as_mut().expect("running sequence holds blocks");
            if self.blocks.append(table, target).is_err() {
                continue;
            }
            match planned {
                Some(p) => step.seqs[p].1 += more,
                None => step.seqs.push((id, more)),
            }
            step.tokens = step.tokens.saturating_sub(more);
            step.prompt_tokens = step.prompt_tokens.saturating_sub(more);
            given += more;
        }
        given
    }
}
