//! Sampling the rows a step computed for a sequence's draft tokens: each position is sampled
//! exactly as plain decoding would sample it, and the run ends at the first sample that differs
//! from the draft.

use sluice_model::Logits;

use super::Sequence;
use crate::constraint::OutputConstraint;
use crate::sampler::{sample, Sample, SampleError};

impl Sequence {
    /// Samples rows `first_row ..= first_row + draft.len()` of `logits`: row `i` holds the
    /// logits after the sequence's tokens and the first `i` draft tokens. Position `i` is
    /// sampled with the sequence's own parameters, random stream and penalties, its constraint
    /// moved past the draft tokens before it, as if those tokens had been sampled one step at a
    /// time. Returns the samples up to and including the first that differs from the draft (or
    /// the one after the whole draft): every sample is the token plain decoding would draw, so
    /// appending them changes nothing but the speed.
    ///
    /// The sequence itself is unchanged apart from its random stream (the caller appends the
    /// run); a draft token that completes the constraint ends the run there.
    pub fn sample_verified(
        &mut self,
        logits: &Logits,
        first_row: usize,
        draft: &[u32],
    ) -> Result<Vec<Sample>, SampleError> {
        let generated = self.tokens.len();
        // The constraint as it stands after the accepted draft tokens (a copy, from the first).
        let mut ahead: Option<OutputConstraint> = None;
        let mut run = Vec::with_capacity(draft.len() + 1);
        let result = loop {
            let i = run.len();
            let (params, ctx, rng) = self.sampling_parts(ahead.as_mut());
            let drawn = match sample(logits.row(first_row + i), params, ctx, rng) {
                Ok(drawn) => drawn,
                Err(e) => break Err(e),
            };
            let token = drawn.token_id;
            run.push(drawn);
            if draft.get(i) != Some(&token) {
                break Ok(());
            }
            // The draft token is the token plain decoding samples here: look past it.
            self.tokens.push(token);
            if ahead.is_none() {
                ahead = self.output.constraint().cloned();
            }
            if let Some(constraint) = ahead.as_mut() {
                // Complete (the choice stops on it) or, never for a masked sample, refused.
                if !matches!(constraint.accept(token), Ok(false)) {
                    break Ok(());
                }
            }
        };
        self.tokens.truncate(generated);
        result.map(|()| run)
    }
}
