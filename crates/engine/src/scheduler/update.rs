//! Applying a computed step: computed counts advance, filled blocks are registered, each
//! sequence's run of sampled tokens is appended (a verified draft's settled), and sequences
//! that stop finish.

use std::collections::HashMap;
use std::time::Instant;

use super::{drafts, ModelOutput, Scheduler, SchedulerOutput, StepOutcome};
use crate::executor::ExecutorError;
use crate::output::{ChoiceError, Ending};
use crate::sequence::SeqId;

impl Scheduler {
    /// Records a computed step: advances computed tokens, registers full blocks in the prefix
    /// cache, appends each sequence's run of sampled tokens and finishes sequences that stop.
    pub fn update_from_output(
        &mut self,
        out: &SchedulerOutput,
        model_output: ModelOutput,
        now: Instant,
    ) -> StepOutcome {
        for s in &out.scheduled {
            let Some(seq) = self.seqs.get_mut(&s.seq_id) else {
                continue;
            };
            seq.advance_computed(s.num_new_tokens);
            seq.register_computed_blocks(&mut self.blocks);
        }
        let mut outcome = StepOutcome::default();
        // A score-only request ends once its prompt is computed; it samples nothing.
        for s in &out.scheduled {
            let Some(seq) = self.seqs.get_mut(&s.seq_id) else {
                continue;
            };
            if seq.scores_only() && !seq.is_finished() && seq.num_uncomputed_tokens() == 0 {
                seq.finish(Ending::Length);
                outcome.finished.push((s.seq_id, Ending::Length));
            }
        }
        let drafts: HashMap<SeqId, &[u32]> = (out.scheduled.iter())
            .filter(|s| !s.draft.is_empty())
            .map(|s| (s.seq_id, &s.draft[..]))
            .collect();
        for (id, result) in model_output.samples {
            let Some(seq) = self.seqs.get_mut(&id).filter(|s| !s.is_finished()) else {
                continue;
            };
            let draft = drafts.get(&id).copied().unwrap_or_default();
            let ending = match result {
                Ok(run) => {
                    let verified = (!draft.is_empty()).then(|| drafts::verified(draft, &run));
                    let appended = seq.append_tokens(run, self.config.max_model_len, now);
                    if appended.num_tokens > 0 {
                        outcome.appended.push((id, appended.num_tokens));
                    }
                    if let Some(verified) = verified {
                        let (blocks, speculator) = (&mut self.blocks, self.speculator.as_mut());
                        let ends = appended.ending.is_some();
                        drafts::settle_draft(blocks, speculator, seq, ends, verified);
                        outcome.verified.push(verified);
                    }
                    appended.ending
                }
                Err(e) => Some(Ending::Error(e.into())),
            };
            if let Some(ending) = ending {
                seq.finish(ending.clone());
                outcome.finished.push((id, ending));
            }
        }
        self.running.retain(|id| !outcome.has_finished(*id));
        outcome
    }

    /// Finishes every sequence of a failed step with `error` (the engine keeps serving).
    pub fn fail_step(&mut self, out: &SchedulerOutput, error: &ExecutorError) -> StepOutcome {
        let ending = Ending::Error(ChoiceError::Step(error.clone()));
        let mut outcome = StepOutcome::default();
        for s in &out.scheduled {
            if let Some(seq) = self.seqs.get_mut(&s.seq_id) {
                seq.finish(ending.clone());
                outcome.finished.push((s.seq_id, ending.clone()));
            }
        }
        self.running.retain(|id| !outcome.has_finished(*id));
        outcome
    }
}
