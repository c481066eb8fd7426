//! A choice's text: incremental detokenization followed by stop-string matching.

use std::sync::Arc;

use sluice_text::{IncrementalDecoder, StopMatcher, StopSet, TextError, Tokenizer};

/// Text released by one token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TextStep {
    /// Text safe to send now (no half characters, no possible stop-string prefix).
    pub emit: String,
    /// A stop string matched; nothing after it will ever be emitted.
    pub stopped: bool,
}

/// Detokenizer and stop matcher of one choice.
pub struct OutputText {
    decoder: IncrementalDecoder,
    stop: StopMatcher,
}

impl std::fmt::Debug for OutputText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputText").finish_non_exhaustive()
    }
}

impl OutputText {
    /// A fresh state for a choice of `prompt` with these stop strings. The prompt's last tokens
    /// give the first output token its context (a leading space survives).
    pub fn new(tokenizer: Arc<Tokenizer>, prompt: &[u32], stop_strings: StopSet) -> Self {
        OutputText {
            decoder: IncrementalDecoder::with_context(tokenizer, prompt),
            stop: StopMatcher::new(stop_strings),
        }
    }

    /// Keeps the text of these special tokens in the output (see
    /// [`crate::StopRules::kept_special_tokens`]).
    pub fn keeping_special(mut self, ids: &[u32]) -> Self {
        self.decoder.keep_special(ids);
        self
    }

    /// Decodes `token` and runs the new text through the stop matcher when `match_stop` is set
    /// (it is not while `min_tokens` has not been reached).
    pub fn push(&mut self, token: u32, match_stop: bool) -> Result<TextStep, TextError> {
        let text = self.decoder.push(token)?;
        if !match_stop {
            return Ok(TextStep {
                emit: text,
                stopped: false,
            });
        }
        let status = self.stop.push(&text);
        Ok(TextStep {
            emit: status.emit,
            stopped: status.stopped,
        })
    }

    /// The stop string that matched, once one has.
    pub fn matched_stop(&self) -> Option<&str> {
        self.stop.matched_stop()
    }

    /// Releases everything held back, at the end of a choice that did not stop on a string.
    pub fn finish(&mut self) -> String {
        let rest = self.decoder.finish();
        let status = self.stop.push(&rest);
        let mut text = status.emit;
        if !status.stopped {
            // A stop settled only now still cuts the text; the finish reason stays the
            // caller's (EOS or length ended generation first).
            text.push_str(&self.stop.finish().emit);
        }
        text
    }
}
