//! How much of a step prompts get while sequences decode: the step time target and the prefill
//! share, turned into prompt tokens through the learned step costs.
//!
//! A step with prompt work lasts about `step_time_target`, or longer where the decodes alone
//! take more than `1 - prefill_share` of that: then it lasts `decodes / (1 - prefill_share)`.
//! So a long prompt never slows the streams beside it by more than `1 / (1 - share)`, beyond
//! the target, nor runs at less than `share` of its speed alone.
//!
//! Two fits say what a step costs. `decode_cost` sees only steps without prompt tokens and so
//! says what the decodes alone take; `cost` sees every step and sizes the prompt chunk. Under a
//! steady long prompt every step carries a chunk, and the full fit cannot tell the decodes'
//! part from the chunk's (their features move together), so the decodes' time comes from the
//! decode fit and the chunk is sized so that the whole step, as the full fit predicts it,
//! lasts the planned time. The decodes themselves cost more as the streams deepen (every
//! token attends to all before it: 55 -> 75 ms for 15 streams over a 9.5K-token prompt on 2
//! cores), which a fit of steps long past would have to extrapolate. So every
//! [`DECODE_PROBE_EVERY`] steps with prompt work one step runs the decodes alone, and the decode
//! fit, with a short memory, follows them.

use super::{is_prefilling, Scheduler};

/// Fewest prompt tokens a step beside decodes computes, however little time the budget
/// leaves. Fewer run the attention's per-row kernels and cost nearly as much: beside 16 decodes
/// at position 9,000 of a Qwen2.5-0.5B-shaped model (`forward_bench`, f16 cache, AVX-512), 4
/// prompt tokens cost 10.5 ms each, 8 cost 7.6 ms and 64 cost 6.1 ms.
pub(super) const MIN_PROMPT_CHUNK: usize = 8;

/// Steps with prompt work after which one step runs the decodes alone, to measure them: it
/// costs a long prompt beside streams about 3% of its time (one step of the decodes' length in
/// sixteen of twice that).
pub(super) const DECODE_PROBE_EVERY: usize = 16;

/// The decode fit's memory: about ten steps without prompt tokens count.
pub(super) const DECODE_FIT_DECAY: f64 = 0.9;

impl Scheduler {
    /// Prompt tokens (prefill chunks, admissions) this step may compute. Unbounded unless a step
    /// time target is set, the cost of a step has been measured, and some running sequence is
    /// decoding. Then, but for one step in [`DECODE_PROBE_EVERY`] that measures the decodes
    /// alone (no prompt tokens), the step is planned to last the target, or the decodes' time over
    /// `1 - prefill_share` where that is longer; prompts get what the planned step leaves
    /// after the decodes (but never less than `prefill_share` of it, nor fewer than
    /// [`MIN_PROMPT_CHUNK`] tokens). That time buys fewer tokens the deeper the prompt already
    /// is (each token attends to every position before it), so the tokens are counted at the
    /// deepest running prompt's position.
    pub(super) fn prefill_budget(&self) -> usize {
        let (Some(target), Some(cost)) = (self.config.step_time_target, self.cost.estimate())
        else {
            return usize::MAX;
        };
        let (mut decoding, mut attended, mut deepest) = (0usize, 0u64, 0usize);
        for seq in self.running.iter().map(|id| &self.seqs[id]) {
            if is_prefilling(seq) {
                deepest = deepest.max(seq.num_computed_tokens());
            } else {
                decoding += 1;
                attended += seq.num_computed_tokens() as u64 + 1;
            }
        }
        if decoding == 0 {
            return usize::MAX;
        }
        if self.steps_since_decodes_alone >= DECODE_PROBE_EVERY {
            return 0;
        }
        let decodes_alone = (self.decode_cost.estimate())
            .unwrap_or(cost)
            .seconds(decoding, decoding, attended);
        let share = self.config.prefill_share.clamp(0.05, 0.95);
        let step_secs = target.as_secs_f64().max(decodes_alone / (1.0 - share));
        let decodes = cost.seconds(decoding, decoding, attended);
        let prefill_secs = (step_secs - decodes).max(share * step_secs);
        cost.prompt_tokens_within(deepest, prefill_secs)
            .max(MIN_PROMPT_CHUNK)
    }
}
