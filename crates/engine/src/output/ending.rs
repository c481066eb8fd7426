//! How a choice ends, typed: the finish reason the API reports and, for a failure, why.

use thiserror::Error;

use crate::executor::ExecutorError;
use crate::request::FinishReason;
use crate::sampler::SampleError;

/// Why a choice failed. The message (`Display`) is what its `Finished` event carries.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChoiceError {
    /// The sampler had no token to pick.
    #[error(transparent)]
    Sampling(#[from] SampleError),
    /// A token could not be turned into text (the text error's message; the error itself is not
    /// `Clone`).
    #[error("{0}")]
    Detokenize(String),
    /// A sampled token is not allowed by the output constraint.
    #[error("token {0} breaks the constrained output")]
    ConstraintRefused(u32),
    /// The sequence can never be admitted.
    #[error("sequence of {tokens} tokens does not fit the KV cache or the context")]
    DoesNotFit {
        /// Its length.
        tokens: usize,
    },
    /// The request has no prompt tokens.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The waiting queue had no room.
    #[error("the waiting queue is full")]
    QueueFull,
    /// The step it ran in failed.
    #[error(transparent)]
    Step(#[from] ExecutorError),
}

/// How a choice ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// EOS, a stop token, a stop string or a complete constrained output.
    Stop,
    /// `max_tokens` or the context length (or a prompt-only request computed).
    Length,
    /// The client went away.
    Cancelled,
    /// It failed.
    Error(ChoiceError),
}

impl Ending {
    /// The finish reason the API reports.
    pub fn reason(&self) -> FinishReason {
        match self {
            Ending::Stop => FinishReason::Stop,
            Ending::Length => FinishReason::Length,
            Ending::Cancelled => FinishReason::Cancelled,
            Ending::Error(_) => FinishReason::Error,
        }
    }

    /// The error message, for a failure.
    pub fn message(&self) -> Option<String> {
        match self {
            Ending::Error(e) => Some(e.to_string()),
            _ => None,
        }
    }
}

impl From<ChoiceError> for Ending {
    fn from(e: ChoiceError) -> Self {
        Ending::Error(e)
    }
}
