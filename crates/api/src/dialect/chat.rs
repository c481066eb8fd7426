//! `POST /v1/chat/completions`: `chat.completion.chunk` frames (the role on each choice's first
//! delta; text, reasoning and tool-call pieces after; the finish reason on the last), then one
//! `[DONE]`; or one `chat.completion` body. Renders parsed turns ([`TurnUpdate`]).

use super::turn::{TurnEnd, TurnRenderer, TurnUpdate};
use super::{openai_ending, to_json, Ending, Frame};
use crate::assemble::ResponseMeta;
use crate::wire::chat::{
    AssistantMessage, ChatChoice, ChatChunkChoice, ChatCompletion, ChatCompletionChunk, ChatDelta,
    FunctionCall, ToolCallBody, ToolCallDelta,
};
use crate::wire::{ChatLogprobs, CompletionTokensDetails, UsageBody};

/// A change to the chunk being built for a choice: its delta and its logprobs.
type DeltaEdit = Box<dyn FnOnce(&mut ChatDelta, &mut Option<ChatLogprobs>)>;

/// What one choice has said so far.
#[derive(Debug, Clone, Default)]
struct ChoiceSoFar {
    content: String,
    reasoning: String,
    calls: Vec<ToolCallBody>,
    logprobs: Option<ChatLogprobs>,
    end: Option<TurnEnd>,
    reasoning_tokens: u32,
}

/// Chat Completions.
pub struct ChatRenderer {
    meta: ResponseMeta,
    include_usage: bool,
    logprobs: bool,
    choices: Vec<ChoiceSoFar>,
}

impl ChatRenderer {
    /// A response of `num_choices` choices; `include_usage` sends a usage chunk before
    /// `[DONE]`; `logprobs` says whether they were requested.
    pub fn new(
        meta: ResponseMeta,
        num_choices: usize,
        include_usage: bool,
        logprobs: bool,
    ) -> Self {
        ChatRenderer {
            meta,
            include_usage,
            logprobs,
            choices: vec![ChoiceSoFar::default(); num_choices],
        }
    }

    /// `usage` with the choices' reasoning tokens, when any choice reasoned.
    fn usage(&self, usage: UsageBody) -> UsageBody {
        let reasoning_tokens = self.choices.iter().map(|c| c.reasoning_tokens).sum();
        UsageBody {
            completion_tokens_details: (reasoning_tokens > 0)
                .then_some(CompletionTokensDetails { reasoning_tokens }),
            ..usage
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

    /// Folds one update into the choice's state and into `delta` (the chunk being built).
    fn fold(
        &mut self,
        update: TurnUpdate,
        pending: &mut Option<(u32, ChatDelta, Option<ChatLogprobs>)>,
    ) -> Option<(u32, TurnEnd)> {
        let (index, apply): (u32, DeltaEdit) = match update {
            TurnUpdate::Start { index } => {
                (index, Box::new(|d, _| d.role = Some("assistant".into())))
            }
            TurnUpdate::Content { index, text } => {
                self.choices[index as usize].content.push_str(&text);
                (
                    index,
                    Box::new(move |d, _| d.content.get_or_insert_with(String::new).push_str(&text)),
                )
            }
            TurnUpdate::Reasoning { index, text } => {
                self.choices[index as usize].reasoning.push_str(&text);
                (
                    index,
                    Box::new(move |d, _| {
                        d.reasoning_content
                            .get_or_insert_with(String::new)
                            .push_str(&text)
                    }),
                )
            }
            TurnUpdate::Logprobs { index, logprobs } => {
                let all = self.choices[index as usize]
                    .logprobs
                    .get_or_insert_with(Default::default);
                all.content.extend(logprobs.content.iter().cloned());
                (
                    index,
                    Box::new(move |_, lp| {
                        lp.get_or_insert_with(Default::default)
                            .content
                            .extend(logprobs.content)
                    }),
                )
            }
            TurnUpdate::ToolCallStart {
                index,
                call,
                id,
                name,
            } => {
                self.choices[index as usize].calls.push(ToolCallBody {
                    id: id.clone(),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: Some(name.clone()),
                        arguments: Some(String::new()),
                    },
                });
                (
                    index,
                    Box::new(move |d, _| {
                        d.tool_calls
                            .get_or_insert_with(Vec::new)
                            .push(ToolCallDelta {
                                index: call,
                                id: Some(id),
                                kind: Some("function".into()),
                                function: FunctionCall {
                                    name: Some(name),
                                    arguments: Some(String::new()),
                                },
                            })
                    }),
                )
            }
            TurnUpdate::ToolCallArguments { index, call, delta } => {
                if let Some(c) = self.choices[index as usize].calls.get_mut(call) {
                    c.function
                        .arguments
                        .get_or_insert_with(String::new)
                        .push_str(&delta);
                }
                (
                    index,
                    Box::new(move |d, _| {
                        let calls = d.tool_calls.get_or_insert_with(Vec::new);
                        match calls.last_mut() {
                            Some(last) if last.index == call => last
                                .function
                                .arguments
                                .get_or_insert_with(String::new)
                                .push_str(&delta),
                            _ => calls.push(ToolCallDelta {
                                index: call,
                                id: None,
                                kind: None,
                                function: FunctionCall {
                                    name: None,
                                    arguments: Some(delta),
                                },
                            }),
                        }
                    }),
                )
            }
            TurnUpdate::ToolCallEnd { .. } => return None,
            TurnUpdate::Finish {
                index,
                end,
                reasoning_tokens,
                ..
            } => {
                self.choices[index as usize].end = Some(end);
                self.choices[index as usize].reasoning_tokens = reasoning_tokens;
                return Some((index, end));
            }
        };
        let (_, delta, logprobs) =
            pending.get_or_insert_with(|| (index, ChatDelta::default(), None));
        apply(delta, logprobs);
        None
    }
}

impl TurnRenderer for ChatRenderer {
    fn update(&mut self, update: TurnUpdate) -> Vec<Frame> {
        self.updates(vec![update])
    }

    /// One chunk for everything one engine delta produced for a choice (so a choice's first
    /// chunk carries the role together with its first text), then the finishing chunk.
    fn updates(&mut self, updates: Vec<TurnUpdate>) -> Vec<Frame> {
        let mut frames = Vec::new();
        let mut pending = None;
        let mut finish = None;
        for update in updates {
            if let Some(f) = self.fold(update, &mut pending) {
                finish = Some(f);
            }
        }
        if let Some((index, mut delta, logprobs)) = pending {
            let empty = delta.content.is_none()
                && delta.reasoning_content.is_none()
                && delta.tool_calls.is_none();
            if empty {
                delta.content = Some(String::new());
            }
            frames.push(self.chunk(
                vec![ChatChunkChoice {
                    index,
                    delta,
                    logprobs,
                    finish_reason: None,
                }],
                None,
            ));
        }
        if let Some((index, end)) = finish {
            frames.push(self.chunk(
                vec![ChatChunkChoice {
                    index,
                    delta: ChatDelta::default(),
                    logprobs: None,
                    finish_reason: Some(end.openai().to_string()),
                }],
                None,
            ));
        }
        frames
    }

    fn close(&mut self, ending: Ending<'_>) -> Vec<Frame> {
        let usage = self.usage(ending.usage);
        let usage = (self.include_usage).then(|| self.chunk(Vec::new(), Some(usage)));
        openai_ending(usage)
    }

    fn body(self: Box<Self>, ending: Ending<'_>) -> String {
        let logprobs = self.logprobs;
        let usage = self.usage(ending.usage);
        let body = ChatCompletion {
            id: self.meta.id,
            object: "chat.completion".into(),
            created: self.meta.created,
            model: self.meta.model,
            system_fingerprint: self.meta.system_fingerprint,
            choices: (self.choices.into_iter().enumerate())
                .map(|(i, c)| {
                    let has_calls = !c.calls.is_empty();
                    ChatChoice {
                        index: i as u32,
                        message: AssistantMessage {
                            role: "assistant".into(),
                            content: (!has_calls || !c.content.is_empty()).then_some(c.content),
                            reasoning_content: (!c.reasoning.is_empty()).then_some(c.reasoning),
                            tool_calls: has_calls.then_some(c.calls),
                        },
                        logprobs: match c.logprobs {
                            Some(lp) => Some(lp),
                            None if logprobs => Some(ChatLogprobs::default()),
                            None => None,
                        },
                        finish_reason: c.end.unwrap_or(TurnEnd::Stop).openai().to_string(),
                    }
                })
                .collect(),
            usage,
            prompt_logprobs: ending.assembler.prompt_logprobs(0, ending.tokens),
        };
        to_json(&body)
    }
}
