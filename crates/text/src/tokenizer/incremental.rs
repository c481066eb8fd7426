//! Streaming detokenization: turns generated token ids into text one token at a time without
//! ever emitting half of a multi-byte character, and with the spaces between tokens right.
//!
//! Decoding a token alone is wrong in two ways: a byte-level token may hold only part of a UTF-8
//! character, and SentencePiece decoders drop the leading space of the first token they see.
//! So, as TGI and vLLM do, each step decodes a short window of tokens ending at the new one,
//! starting a few tokens back (`prefix_offset`), and emits what the window's text has beyond the
//! text of its already-emitted part (`prefix_offset..read_offset`). Text ending in U+FFFD is an
//! incomplete character: it is held until a later token completes it.

use crate::{TextError, Tokenizer};
use std::sync::Arc;

/// Incremental detokenizer for one sequence's generated tokens. Special tokens are skipped,
/// except those [`IncrementalDecoder::keep_special`] names.
#[derive(Debug)]
pub struct IncrementalDecoder {
    /// Special tokens written as their text; each one ends the decode window before it.
    kept: Vec<u32>,
    tokenizer: Arc<Tokenizer>,
    /// Context tokens (see [`IncrementalDecoder::with_context`]) followed by every pushed token.
    tokens: Vec<u32>,
    /// Start of the decode window: tokens before it are only context for the next emission.
    prefix_offset: usize,
    /// Tokens before this index have had their text emitted.
    read_offset: usize,
}

/// How many context tokens [`IncrementalDecoder::with_context`] keeps (vLLM uses the same).
const CONTEXT_TOKENS: usize = 5;

impl IncrementalDecoder {
    /// A decoder for a sequence that starts with no context: the text emitted over the whole
    /// stream equals `tokenizer.decode(all_ids, true)`.
    pub fn new(tokenizer: Arc<Tokenizer>) -> IncrementalDecoder {
        IncrementalDecoder {
            kept: Vec::new(),
            tokenizer,
            tokens: Vec::new(),
            prefix_offset: 0,
            read_offset: 0,
        }
    }

    /// A decoder whose first output token is decoded after the last few `context` tokens (the
    /// end of the prompt), so a SentencePiece token "▁Paris" streams as " Paris" rather than
    /// losing its space as the first token of a text. The context itself is never emitted.
    pub fn with_context(tokenizer: Arc<Tokenizer>, context: &[u32]) -> IncrementalDecoder {
        let tail = &context[context.len().saturating_sub(CONTEXT_TOKENS)..];
        IncrementalDecoder {
            kept: Vec::new(),
            tokenizer,
            tokens: tail.to_vec(),
            prefix_offset: 0,
            read_offset: tail.len(),
        }
    }

    /// Writes these special tokens as their text instead of skipping them (a tool-call
    /// format's control-token markers). Such a token ends the window before it: the text
    /// pending there is released first, as at the end of a sequence.
    pub fn keep_special(&mut self, ids: &[u32]) {
        self.kept = ids.to_vec();
    }

    /// Adds the next generated token and returns the text it completes (often the token's own
    /// text; empty while a multi-byte character is incomplete or for a special token).
    pub fn push(&mut self, token_id: u32) -> Result<String, TextError> {
        if self.kept.contains(&token_id) {
            let marker = self.tokenizer.decode(&[token_id], false)?;
            let mut text = self.finish();
            text.push_str(&marker);
            self.tokens.push(token_id);
            self.prefix_offset = self.tokens.len();
            self.read_offset = self.tokens.len();
            return Ok(text);
        }
        self.tokens.push(token_id);
        let window = &self.tokens[self.prefix_offset..];
        let emitted_len = self.read_offset - self.prefix_offset;
        let decoded = self
            .tokenizer
            .decode(&window[..emitted_len], true)
            .and_then(|prefix| Ok((prefix, self.tokenizer.decode(window, true)?)));
        let (prefix_text, window_text) = match decoded {
            Ok(texts) => texts,
            Err(err) => {
                // Leave the decoder as it was, so the caller may carry on without this id.
                self.tokens.pop();
                return Err(err);
            }
        };
        if window_text.len() <= prefix_text.len() || window_text.ends_with('\u{FFFD}') {
            return Ok(String::new());
        }
        let delta = text_after(&window_text, &prefix_text).to_string();
        self.prefix_offset = self.read_offset;
        self.read_offset = self.tokens.len();
        Ok(delta)
    }

    /// Releases whatever is still held when the sequence ends: an incomplete character comes
    /// out as U+FFFD, exactly as a full decode writes it.
    pub fn finish(&mut self) -> String {
        let window = &self.tokens[self.prefix_offset..];
        let emitted_len = self.read_offset - self.prefix_offset;
        let decoded = self
            .tokenizer
            .decode(&window[..emitted_len], true)
            .and_then(|prefix| Ok((prefix, self.tokenizer.decode(window, true)?)));
        self.prefix_offset = self.tokens.len();
        self.read_offset = self.tokens.len();
        match decoded {
            Ok((prefix_text, window_text)) if window_text.len() > prefix_text.len() => {
                text_after(&window_text, &prefix_text).to_string()
            }
            // Every id was checked by the `push` that added it, so decoding cannot fail here.
            _ => String::new(),
        }
    }
}

/// The part of `text` after `prefix`. The window's text normally starts with its prefix's text;
/// when it does not (a byte-fallback run that turned invalid changes how earlier bytes decode),
/// the text after their longest common prefix is returned, cut on a character boundary.
fn text_after<'a>(text: &'a str, prefix: &str) -> &'a str {
    if let Some(rest) = text.strip_prefix(prefix) {
        return rest;
    }
    let common = text
        .char_indices()
        .zip(prefix.chars())
        .find(|((_, a), b)| a != b)
        .map(|((at, _), _)| at)
        .unwrap_or(prefix.len().min(text.len()));
    &text[common..]
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
