//! The text half of a choice: its stop rules, detokenizer and stop strings, its output
//! constraint and the output not sent yet. A step hands it a run of tokens (one sampled token, or
//! several: speculated tokens verified, a constraint's forced tokens); each passes stop tokens,
//! the constraint and the detokenizer in order, and the first one that ends the choice is the
//! last one kept.

mod ending;
mod pending;
mod text;

use std::sync::Arc;

pub use ending::{ChoiceError, Ending};
pub use pending::PendingOutput;
pub use text::{OutputText, TextStep};

use crate::constraint::OutputConstraint;
use crate::request::{StopRules, TokenLogprob};
use crate::sampler::Sample;
use sluice_text::constraint::TokenSet;

/// One choice's output state.
#[derive(Debug)]
pub struct ChoiceOutput {
    stop: Arc<StopRules>,
    eos_token_ids: Arc<[u32]>,
    text: Option<OutputText>,
    constraint: Option<OutputConstraint>,
    /// The stop string that matched, if one did: the text after it is never released.
    stop_string: Option<String>,
    pending: PendingOutput,
}

/// Where an accepted token leaves the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenPlace {
    /// Generated tokens, this one included.
    pub generated: usize,
    /// Prompt and generated tokens, this one included.
    pub total: usize,
    /// The context length.
    pub max_model_len: usize,
}

impl ChoiceOutput {
    /// A fresh output for a choice with these rules, text state (`None`: tokens only) and
    /// constraint.
    pub fn new(
        stop: Arc<StopRules>,
        eos_token_ids: Arc<[u32]>,
        text: Option<OutputText>,
        constraint: Option<OutputConstraint>,
    ) -> Self {
        ChoiceOutput {
            stop,
            eos_token_ids,
            text,
            constraint,
            stop_string: None,
            pending: PendingOutput::default(),
        }
    }

    /// The request's stop rules.
    pub fn stop_rules(&self) -> &StopRules {
        &self.stop
    }

    /// EOS (unless ignored) and stop token ids: what the sampler masks until `min_tokens`.
    pub fn stopping_token_ids(&self) -> Vec<u32> {
        let mut ids = self.stop.stop_token_ids.clone();
        if !self.stop.ignore_eos {
            ids.extend(self.eos_token_ids.iter().copied());
        }
        ids
    }

    /// The tokens the constraint allows next, when the choice has one.
    pub fn allowed(&mut self) -> Option<&TokenSet> {
        self.constraint.as_mut().map(OutputConstraint::allowed)
    }

    /// The output constraint, when the choice has one (a copy of it can look ahead).
    pub fn constraint(&self) -> Option<&OutputConstraint> {
        self.constraint.as_ref()
    }

    /// Takes one appended token: records it for the next event, then checks stop tokens,
    /// releases its text through the stop strings, feeds the constraint and checks the length.
    /// Returns how the choice ends when this token ends it.
    pub fn accept(
        &mut self,
        token: u32,
        logprob: Option<TokenLogprob>,
        at: TokenPlace,
    ) -> Option<Ending> {
        self.pending.token_ids.push(token);
        self.pending.logprobs.extend(logprob);
        let checks_stop = at.generated as u32 >= self.stop.min_tokens;
        let is_eos = !self.stop.ignore_eos && self.eos_token_ids.contains(&token);
        if checks_stop && (is_eos || self.stop.stop_token_ids.binary_search(&token).is_ok()) {
            return Some(Ending::Stop);
        }
        if let Some(text) = self.text.as_mut() {
            match text.push(token, checks_stop) {
                Ok(step) => {
                    self.pending.text.push_str(&step.emit);
                    if step.stopped {
                        self.stop_string = text.matched_stop().map(str::to_owned);
                        return Some(Ending::Stop);
                    }
                }
                Err(e) => return Some(ChoiceError::Detokenize(e.to_string()).into()),
            }
        }
        if let Some(constraint) = self.constraint.as_mut() {
            match constraint.accept(token) {
                Ok(true) => return Some(Ending::Stop),
                Ok(false) => {}
                Err(refused) => return Some(ChoiceError::ConstraintRefused(refused.0).into()),
            }
        }
        if at.generated >= self.stop.max_tokens as usize || at.total >= at.max_model_len {
            return Some(Ending::Length);
        }
        None
    }

    /// Takes a run of sampled tokens in order, stopping at the first that ends the choice.
    /// `push` appends a token to the sequence and says where it leaves it. Returns how many
    /// tokens were taken and how the choice ends, if it does.
    pub fn accept_run(
        &mut self,
        samples: Vec<Sample>,
        mut push: impl FnMut(u32) -> TokenPlace,
    ) -> (usize, Option<Ending>) {
        let len = samples.len();
        for (i, sample) in samples.into_iter().enumerate() {
            let at = push(sample.token_id);
            if let Some(ending) = self.accept(sample.token_id, sample.logprob, at) {
                return (i + 1, Some(ending));
            }
        }
        (len, None)
    }

    /// The stop string that ended the choice, when one did.
    pub fn stop_string(&self) -> Option<&str> {
        self.stop_string.as_deref()
    }

    /// At the end of the choice: releases held-back text unless it stopped on a string,
    /// was cancelled or failed.
    pub fn finish(&mut self, ending: &Ending) {
        let release = matches!(ending, Ending::Stop | Ending::Length) && self.stop_string.is_none();
        if let Some(text) = self.text.as_mut().filter(|_| release) {
            let rest = text.finish();
            self.pending.text.push_str(&rest);
        }
    }

    /// Takes the output produced since the last call.
    pub fn take_pending(&mut self) -> PendingOutput {
        std::mem::take(&mut self.pending)
    }
}
