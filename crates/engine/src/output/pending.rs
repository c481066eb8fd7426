//! Output a choice produced that its request's events have not carried yet.

use crate::request::TokenLogprob;

/// Text, token ids and logprobs produced since the last take.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingOutput {
    /// Text released (complete characters, past any possible stop-string prefix).
    pub text: String,
    /// Tokens appended.
    pub token_ids: Vec<u32>,
    /// Their logprobs, when asked for.
    pub logprobs: Vec<TokenLogprob>,
}

impl PendingOutput {
    /// True when there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.token_ids.is_empty()
    }

    /// Appends what `later` holds.
    pub fn merge(&mut self, later: PendingOutput) {
        self.text.push_str(&later.text);
        self.token_ids.extend(later.token_ids);
        self.logprobs.extend(later.logprobs);
    }
}
