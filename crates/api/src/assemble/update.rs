//! What the assembler hands a dialect: one checked step of one choice.

use super::logprobs::LogprobsPiece;

/// One step of one choice.
#[derive(Debug, Clone, PartialEq)]
pub enum ChoiceUpdate {
    /// New text (possibly empty) for a choice; `first` marks the choice's first update.
    Delta {
        /// Global choice index (`prompt_index * n + choice`).
        index: u32,
        /// Whether this is the choice's first update (chat puts the role on it).
        first: bool,
        /// Newly released text (with the echoed prompt in front on a completion's first).
        text: String,
        /// Logprobs of the tokens behind this text, when requested.
        logprobs: Option<LogprobsPiece>,
        /// Tokens generated since the choice's previous update (a token whose text is held
        /// back is counted with the update that releases text).
        tokens: u32,
    },
    /// The choice ended; always preceded by at least one `Delta` of the same choice.
    Finish {
        /// Global choice index.
        index: u32,
        /// OpenAI's finish reason: "stop" or "length".
        reason: &'static str,
        /// The stop string that ended the choice, when one did.
        stop_string: Option<String>,
        /// Tokens generated since the choice's previous update (including those whose text a
        /// stop string cut off).
        tokens: u32,
    },
}
