//! `POST /v1/completions`: `text_completion` chunks then `[DONE]`, or one `text_completion`
//! body; logprobs in the parallel-array shape.

use super::{openai_ending, to_json, Dialect, Ending, Frame};
use crate::assemble::{
    ChoiceUpdate, LogprobsPiece, LogprobsShape, ResponseCollector, ResponseMeta,
};
use crate::wire::completion::{Completion, CompletionChoice, CompletionChunk};
use crate::wire::{CompletionLogprobs, UsageBody};

/// Completions.
pub struct CompletionDialect {
    meta: ResponseMeta,
    include_usage: bool,
    logprobs: bool,
    collector: ResponseCollector,
}

impl CompletionDialect {
    /// A response of `num_choices` choices (prompts times `n`); `include_usage` sends a usage
    /// chunk before `[DONE]`; `logprobs` says whether they were requested.
    pub fn new(
        meta: ResponseMeta,
        num_choices: usize,
        include_usage: bool,
        logprobs: bool,
    ) -> Self {
        CompletionDialect {
            meta,
            include_usage,
            logprobs,
            collector: ResponseCollector::new(num_choices),
        }
    }

    fn chunk(&self, choices: Vec<CompletionChoice>, usage: Option<UsageBody>) -> Frame {
        Frame::data(to_json(&CompletionChunk {
            id: self.meta.id.clone(),
            object: "text_completion".into(),
            created: self.meta.created,
            model: self.meta.model.clone(),
            system_fingerprint: self.meta.system_fingerprint.clone(),
            choices,
            usage,
        }))
    }
}

impl Dialect for CompletionDialect {
    fn logprobs_shape(&self) -> LogprobsShape {
        LogprobsShape::Completion
    }

    fn update(&mut self, update: ChoiceUpdate) -> Vec<Frame> {
        self.collector.add(update.clone());
        let choice = match update {
            ChoiceUpdate::Delta {
                index,
                text,
                logprobs,
                ..
            } => CompletionChoice {
                text,
                index,
                logprobs: match logprobs {
                    Some(LogprobsPiece::Completion(lp)) => Some(lp),
                    _ => None,
                },
                finish_reason: None,
                prompt_logprobs: None,
            },
            ChoiceUpdate::Finish { index, reason, .. } => CompletionChoice {
                text: String::new(),
                index,
                logprobs: None,
                finish_reason: Some(reason.to_string()),
                prompt_logprobs: None,
            },
        };
        vec![self.chunk(vec![choice], None)]
    }

    fn close(&mut self, ending: Ending<'_>) -> Vec<Frame> {
        let usage = (self.include_usage).then(|| self.chunk(Vec::new(), Some(ending.usage)));
        openai_ending(usage)
    }

    fn body(self: Box<Self>, ending: Ending<'_>) -> String {
        let logprobs = self.logprobs;
        let body = Completion {
            id: self.meta.id,
            object: "text_completion".into(),
            created: self.meta.created,
            model: self.meta.model,
            system_fingerprint: self.meta.system_fingerprint,
            choices: (self.collector.into_choices().into_iter().enumerate())
                .map(|(i, c)| CompletionChoice {
                    text: c.text,
                    index: i as u32,
                    logprobs: match c.logprobs {
                        Some(LogprobsPiece::Completion(lp)) => Some(lp),
                        _ if logprobs => Some(CompletionLogprobs::default()),
                        _ => None,
                    },
                    finish_reason: Some(c.finish_reason.unwrap_or("stop").to_string()),
                    prompt_logprobs: ending.assembler.prompt_logprobs_of_choice(i, ending.tokens),
                })
                .collect(),
            usage: ending.usage,
        };
        to_json(&body)
    }
}
