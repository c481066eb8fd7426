//! The chat-like dialects (Chat Completions, Responses, Anthropic Messages) render one parsed
//! assistant turn per choice: reasoning, text and tool calls as typed updates, parsed out of the
//! generated text by `sluice_text::assistant` (the adapter in `turn_parse.rs`). A
//! [`TurnRenderer`] is one protocol's shapes for those updates.

use crate::error::ApiError;
use crate::wire::ChatLogprobs;

/// Why a choice ended, in protocol-neutral terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model ended its turn (end of sequence or a stop string).
    Stop,
    /// `max_tokens` ran out.
    Length,
    /// The turn ended with tool calls.
    ToolCalls,
}

impl TurnEnd {
    /// OpenAI Chat Completions' `finish_reason`.
    pub fn openai(self) -> &'static str {
        match self {
            TurnEnd::Stop => "stop",
            TurnEnd::Length => "length",
            TurnEnd::ToolCalls => "tool_calls",
        }
    }
}

/// One step of one choice's assistant turn. For each choice: `Start` first, `Finish` last;
/// a call's `ToolCallStart` precedes its argument deltas and its `ToolCallEnd`; calls are
/// numbered from 0 within the choice.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnUpdate {
    /// The choice's first update.
    Start {
        /// Global choice index.
        index: u32,
    },
    /// Reasoning text (`<think>` contents).
    Reasoning {
        /// Global choice index.
        index: u32,
        /// New reasoning text.
        text: String,
    },
    /// Answer text.
    Content {
        /// Global choice index.
        index: u32,
        /// New text.
        text: String,
    },
    /// Logprobs of tokens just generated (whatever part of the turn their text went to).
    Logprobs {
        /// Global choice index.
        index: u32,
        /// Chat-shaped logprobs.
        logprobs: ChatLogprobs,
    },
    /// A tool call begins; its name is known.
    ToolCallStart {
        /// Global choice index.
        index: u32,
        /// The call's number within the choice.
        call: usize,
        /// The call's id (`call_...`, or 9 characters for Mistral).
        id: String,
        /// The function called.
        name: String,
    },
    /// More of a call's arguments (JSON text).
    ToolCallArguments {
        /// Global choice index.
        index: u32,
        /// The call's number within the choice.
        call: usize,
        /// New argument text.
        delta: String,
    },
    /// A call's arguments are complete.
    ToolCallEnd {
        /// Global choice index.
        index: u32,
        /// The call's number within the choice.
        call: usize,
    },
    /// The choice ended.
    Finish {
        /// Global choice index.
        index: u32,
        /// Why.
        end: TurnEnd,
        /// The stop string that ended the turn, when one did (`end` is then `Stop`).
        stop_string: Option<String>,
        /// Of the turn's output tokens, those it reasoned in.
        reasoning_tokens: u32,
    },
}

/// One chat-like protocol's wire shapes for parsed turns; the adapter in `turn_parse.rs` makes
/// it a [`super::Dialect`]. As with a dialect, every update goes through
/// [`TurnRenderer::update`] whether the response streams or not, and a one-body response is
/// the fold of them.
pub trait TurnRenderer: Send {
    /// Frames that open a stream.
    fn open(&mut self) -> Vec<super::Frame> {
        Vec::new()
    }

    /// The frames of [`super::Dialect::scheduled`].
    fn scheduled(&mut self, cached_prompt_tokens: u32) -> Vec<super::Frame> {
        let _ = cached_prompt_tokens;
        Vec::new()
    }

    /// The frames of one update.
    fn update(&mut self, update: TurnUpdate) -> Vec<super::Frame>;

    /// The frames of what one engine delta produced (the updates of one choice, in order);
    /// a protocol may coalesce them.
    fn updates(&mut self, updates: Vec<TurnUpdate>) -> Vec<super::Frame> {
        updates.into_iter().flat_map(|u| self.update(u)).collect()
    }

    /// The frames that end a stream once every choice finished.
    fn close(&mut self, ending: super::Ending<'_>) -> Vec<super::Frame>;

    /// The frames that end a stream an error cut short (by default OpenAI's: a `data:` error
    /// object, then `[DONE]`).
    fn error(&mut self, err: &ApiError) -> Vec<super::Frame> {
        super::openai_error(err)
    }

    /// The frames of a stream quiet for the keep-alive interval
    /// ([`super::Dialect::keep_alive`]).
    fn keep_alive(&mut self) -> Vec<super::Frame> {
        Vec::new()
    }

    /// The one JSON body of a response that does not stream.
    fn body(self: Box<Self>, ending: super::Ending<'_>) -> String;
}

/// Builders of turn-update sequences for the renderers' tests.
#[cfg(test)]
pub(crate) mod build {
    use super::{TurnEnd, TurnUpdate};

    /// Choice 0's call number `call` of `name`, its arguments sent in the pieces `args`.
    pub fn call(call: usize, id: &str, name: &str, args: &[&str]) -> Vec<TurnUpdate> {
        let mut updates = vec![TurnUpdate::ToolCallStart {
            index: 0,
            call,
            id: id.into(),
            name: name.into(),
        }];
        updates.extend(args.iter().map(|delta| TurnUpdate::ToolCallArguments {
            index: 0,
            call,
            delta: (*delta).into(),
        }));
        updates.push(TurnUpdate::ToolCallEnd { index: 0, call });
        updates
    }

    /// Choice 0's whole turn: its start, `middle`, its finish with `end`.
    pub fn turn(middle: Vec<TurnUpdate>, end: TurnEnd) -> Vec<TurnUpdate> {
        let mut updates = vec![TurnUpdate::Start { index: 0 }];
        updates.extend(middle);
        updates.push(TurnUpdate::Finish {
            index: 0,
            end,
            stop_string: None,
            reasoning_tokens: 0,
        });
        updates
    }
}
