//! A non-streaming response: its updates folded into one text, logprobs and finish reason
//! per choice.

use super::logprobs::LogprobsPiece;
use super::update::ChoiceUpdate;

/// One choice of a response, folded from its updates.
#[derive(Debug, Clone, Default)]
pub struct CollectedChoice {
    /// All its text.
    pub text: String,
    /// All its logprobs, when requested and any were sent.
    pub logprobs: Option<LogprobsPiece>,
    /// Its finish reason, once finished.
    pub finish_reason: Option<&'static str>,
}

/// Folds the updates of a non-streaming response into its one body.
pub struct ResponseCollector {
    choices: Vec<CollectedChoice>,
}

impl ResponseCollector {
    /// A collector for `num_choices` choices.
    pub fn new(num_choices: usize) -> Self {
        ResponseCollector {
            choices: vec![CollectedChoice::default(); num_choices],
        }
    }

    /// Adds one update.
    pub fn add(&mut self, update: ChoiceUpdate) {
        match update {
            ChoiceUpdate::Delta {
                index,
                text,
                logprobs,
                ..
            } => {
                let choice = &mut self.choices[index as usize];
                choice.text.push_str(&text);
                match (&mut choice.logprobs, logprobs) {
                    (_, None) => {}
                    (slot @ None, Some(piece)) => *slot = Some(piece),
                    (Some(LogprobsPiece::Chat(all)), Some(LogprobsPiece::Chat(more))) => {
                        all.content.extend(more.content)
                    }
                    (
                        Some(LogprobsPiece::Completion(all)),
                        Some(LogprobsPiece::Completion(more)),
                    ) => all.extend(more),
                    (Some(_), Some(_)) => unreachable!("one response has one logprobs shape"),
                }
            }
            ChoiceUpdate::Finish { index, reason, .. } => {
                self.choices[index as usize].finish_reason = Some(reason)
            }
        }
    }

    /// What each choice collected, by global index.
    pub fn into_choices(self) -> Vec<CollectedChoice> {
        self.choices
    }
}
