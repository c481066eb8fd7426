//! Logprobs in the wire shapes: chat's list of tokens with their alternatives, completions'
//! parallel lists with character offsets.

use sluice_engine::TokenLogprob;

use crate::wire::{ChatLogprobs, ChatTokenLogprob, CompletionLogprobs, TopLogprob};

/// Text of single tokens, for logprobs (the tokenizer in production, a table in tests).
pub trait TokenTexts: Send + Sync {
    /// The text token `id` decodes to on its own.
    fn token_text(&self, id: u32) -> String;

    /// The bytes token `id` stands for; differs from its text when it holds part of a
    /// multi-byte character (the text then shows U+FFFD).
    fn token_bytes(&self, id: u32) -> Vec<u8> {
        self.token_text(id).into_bytes()
    }
}

/// The shape logprobs take on the wire: chat's token list or completions' parallel arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogprobsShape {
    /// `/v1/chat/completions` (and the chat-like dialects).
    Chat,
    /// `/v1/completions`.
    Completion,
}

/// Logprobs of some tokens of one choice, in the shape of the response's API.
#[derive(Debug, Clone, PartialEq)]
pub enum LogprobsPiece {
    /// Chat shape.
    Chat(ChatLogprobs),
    /// Completions shape.
    Completion(CompletionLogprobs),
}

/// Chat logprobs: one entry per token with its text, bytes and alternatives.
pub fn chat_logprobs(logprobs: &[TokenLogprob], tokens: &dyn TokenTexts) -> ChatLogprobs {
    let entry = |id: u32| {
        let token = tokens.token_text(id);
        (token, tokens.token_bytes(id))
    };
    ChatLogprobs {
        content: logprobs
            .iter()
            .map(|lp| {
                let (token, bytes) = entry(lp.token_id);
                ChatTokenLogprob {
                    token,
                    logprob: lp.logprob,
                    bytes,
                    top_logprobs: lp
                        .top
                        .iter()
                        .map(|&(id, logprob)| {
                            let (token, bytes) = entry(id);
                            TopLogprob {
                                token,
                                logprob,
                                bytes,
                            }
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}

/// Completions logprobs: parallel lists, offsets counted in characters from `start_offset`.
pub fn completion_logprobs(
    logprobs: &[TokenLogprob],
    tokens: &dyn TokenTexts,
    start_offset: u32,
) -> CompletionLogprobs {
    let mut out = CompletionLogprobs::default();
    let mut offset = start_offset;
    for lp in logprobs {
        let text = tokens.token_text(lp.token_id);
        out.text_offset.push(offset);
        offset += text.chars().count() as u32;
        out.tokens.push(text);
        out.token_logprobs.push(Some(lp.logprob));
        let top = lp
            .top
            .iter()
            .map(|&(id, logprob)| (tokens.token_text(id), serde_json::json!(logprob)))
            .collect();
        out.top_logprobs.push(Some(top));
    }
    out
}
