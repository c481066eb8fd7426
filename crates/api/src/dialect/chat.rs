//! `POST /v1/chat/completions`: `chat.completion.chunk` frames with a role on each choice's
//! first delta, then one `[DONE]`; or one `chat.completion` body.

use super::{to_json, Dialect, Ending, Frame, DONE};
use crate::assemble::{ChoiceUpdate, LogprobsPiece, ResponseCollector, ResponseMeta};
use crate::wire::chat::{
    AssistantMessage, ChatChoice, ChatChunkChoice, ChatCompletion, ChatCompletionChunk, ChatDelta,
};
use crate::wire::{ChatLogprobs, UsageBody};

/// Chat Completions.
pub struct ChatDialect {
    meta: ResponseMeta,
    include_usage: bool,
    logprobs: bool,
    collector: ResponseCollector,
}

impl ChatDialect {
    /// A response of `num_choices` choices; `include_usage` sends a usage chunk before
    /// `[DONE]`; `logprobs` says whether they were requested.
    pub fn new(
        meta: ResponseMeta,
        num_choices: usize,
        include_usage: bool,
        logprobs: bool,
    ) -> Self {
        ChatDialect {
            meta,
            include_usage,
            logprobs,
            collector: ResponseCollector::new(num_choices),
        }
    }

    fn chunk(&self, choices: Vec<ChatChunkChoice>, usage: Option<UsageBody>) -> Frame {
        Frame::data(to_json(&ChatCompletionChunk {
            id: self.meta.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.meta.created,
            model: self.meta.model.clone(),
            system_fingerprint: self.meta.system_fingerprint.clone(),
            choices,
            usage,
        }))
    }
}

impl Dialect for ChatDialect {
    fn update(&mut self, update: ChoiceUpdate) -> Vec<Frame> {
        self.collector.add(update.clone());
        let choice = match update {
            ChoiceUpdate::Delta {
                index,
                first,
                text,
                logprobs,
            } => ChatChunkChoice {
                index,
                delta: ChatDelta {
                    role: first.then(|| "assistant".to_string()),
                    content: Some(text),
                },
                logprobs: match logprobs {
                    Some(LogprobsPiece::Chat(lp)) => Some(lp),
                    _ => None,
                },
                finish_reason: None,
            },
            ChoiceUpdate::Finish { index, reason } => ChatChunkChoice {
                index,
                delta: ChatDelta::default(),
                logprobs: None,
                finish_reason: Some(reason.to_string()),
            },
        };
        vec![self.chunk(vec![choice], None)]
    }

    fn close(&mut self, ending: Ending<'_>) -> Vec<Frame> {
        let mut frames = Vec::with_capacity(2);
        if self.include_usage {
            frames.push(self.chunk(Vec::new(), Some(ending.usage)));
        }
        frames.push(Frame::data(DONE));
        frames
    }

    fn body(self: Box<Self>, ending: Ending<'_>) -> String {
        let logprobs = self.logprobs;
        let body = ChatCompletion {
            id: self.meta.id,
            object: "chat.completion".into(),
            created: self.meta.created,
            model: self.meta.model,
            system_fingerprint: self.meta.system_fingerprint,
            choices: (self.collector.into_choices().into_iter().enumerate())
                .map(|(i, c)| ChatChoice {
                    index: i as u32,
                    message: AssistantMessage {
                        role: "assistant".into(),
                        content: c.text,
                    },
                    logprobs: match c.logprobs {
                        Some(LogprobsPiece::Chat(lp)) => Some(lp),
                        _ if logprobs => Some(ChatLogprobs::default()),
                        _ => None,
                    },
                    finish_reason: c.finish_reason.unwrap_or("stop").to_string(),
                })
                .collect(),
            usage: ending.usage,
            prompt_logprobs: ending.assembler.prompt_logprobs(0, ending.tokens),
        };
        to_json(&body)
    }
}
