//! Makes a [`TurnRenderer`] a [`Dialect`]: each choice's generated text goes through its own
//! `sluice_text::assistant::TurnStream`, which splits it into reasoning, text and tool calls
//! (holding back what may still be the start of a marker), and the renderer sees only typed
//! [`TurnUpdate`]s. The parser's stream folds to the same turn as parsing the whole text at
//! once, so streamed and one-body answers agree.

use sluice_text::assistant::{
    prompt_opens_reasoning, CallIdForm, ReasoningSyntax, ToolCallFormat, TurnEvent, TurnOptions,
    TurnStream,
};
use sluice_text::Tokenizer;

use super::turn::{TurnEnd, TurnRenderer, TurnUpdate};
use super::{Dialect, Ending, Frame};
use crate::assemble::{ChoiceUpdate, LogprobsPiece, LogprobsShape};
use crate::error::ApiError;
use crate::validate::tool_constraint::forced_opening;
use crate::validate::tools::ToolRequest;

/// How a model's output is read: its tool-call format (the `--tool-call-parser` override, else
/// what its chat template shows) and its reasoning syntax.
#[derive(Debug, Clone)]
pub struct OutputSyntax {
    /// The format calls are parsed in.
    pub tool_format: ToolCallFormat,
    /// `<think>` tags, when the template uses them.
    pub reasoning: Option<ReasoningSyntax>,
}

impl OutputSyntax {
    /// The syntax of `tokenizer`'s model; `parser` is the server's `--tool-call-parser`.
    pub fn of(tokenizer: &Tokenizer, parser: Option<&str>) -> Result<Self, ApiError> {
        let source = tokenizer.chat_template().map(|t| t.source());
        let tool_format = match parser {
            Some(name) => {
                ToolCallFormat::from_name_and_template(name, source).map_err(ApiError::Internal)?
            }
            None => source.map_or(ToolCallFormat::GenericJson, ToolCallFormat::detect),
        };
        Ok(OutputSyntax {
            tool_format,
            reasoning: source.and_then(ReasoningSyntax::detect),
        })
    }

    /// How to read the output of a request with `tools`, whose rendered prompt is `prompt`.
    pub fn turn_options(&self, tools: &ToolRequest, prompt: &str) -> TurnOptions {
        TurnOptions {
            tool_format: tools.parses_calls().then_some(self.tool_format),
            starts_in_reasoning: (self.reasoning.as_ref())
                .is_some_and(|syntax| prompt_opens_reasoning(prompt, syntax)),
            reasoning: self.reasoning.clone(),
            tool_schemas: (tools.tools.iter())
                .map(|t| (t.name.clone(), t.parameters.clone()))
                .collect(),
            forced_opening: forced_opening(tools, self.tool_format),
        }
    }

    /// The ids calls get: Mistral's templates accept only 9 alphanumerics.
    pub fn call_ids(&self) -> CallIds {
        match self.tool_format.syntax().call_ids() {
            CallIdForm::NineAlphanumerics => CallIds::Mistral,
            CallIdForm::Any => CallIds::OpenAi,
        }
    }
}

/// How tool-call ids look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallIds {
    /// `call_` and 24 random alphanumerics (OpenAI's form).
    OpenAi,
    /// 9 random alphanumerics (Mistral's templates refuse any other).
    Mistral,
    /// `toolu_` and 24 random alphanumerics (Anthropic's form).
    Anthropic,
}

impl CallIds {
    /// A fresh id.
    pub fn fresh(self) -> String {
        let random = |n: usize| -> String {
            use rand::distr::{Alphanumeric, SampleString};
            Alphanumeric.sample_string(&mut rand::rng(), n)
        };
        match self {
            CallIds::OpenAi => format!("call_{}", random(24)),
            CallIds::Mistral => random(9),
            CallIds::Anthropic => format!("toolu_{}", random(24)),
        }
    }
}

struct ChoiceTurn {
    stream: TurnStream,
    /// Calls started so far.
    calls: usize,
    reasoning: ReasoningTokens,
}

/// Counts a turn's reasoning tokens: those generated before its answer (content or a call)
/// began, once it has reasoned. A token is placed by the text it releases: tokens that release
/// nothing yet (a marker, text held back) go with the next update that releases something,
/// and an update releasing both reasoning and answer counts as answer. So the opening marker
/// counts as reasoning and the closing one as answer.
#[derive(Debug, Default)]
struct ReasoningTokens {
    counted: u32,
    /// Tokens whose text is not placed yet.
    pending: u32,
    answering: bool,
}

impl ReasoningTokens {
    fn add(&mut self, tokens: u32, events: &[TurnEvent]) {
        if self.answering {
            return;
        }
        self.pending += tokens;
        let answer = events.iter().any(|e| !matches!(e, TurnEvent::Reasoning(_)));
        if answer {
            self.answering = true;
        } else if !events.is_empty() {
            self.counted += std::mem::take(&mut self.pending);
        }
    }

    /// The count once the turn ended with `tokens` more and `events`: what no text placed goes
    /// with the reasoning of a turn that `reasoned` and never answered (an unclosed block).
    fn finish(&mut self, tokens: u32, events: &[TurnEvent], reasoned: bool) -> u32 {
        self.add(tokens, events);
        if !self.answering && reasoned {
            self.counted += std::mem::take(&mut self.pending);
        }
        self.counted
    }
}

/// A chat-like dialect: a renderer over parsed turns.
pub struct TurnDialect<R: TurnRenderer> {
    renderer: Box<R>,
    choices: Vec<ChoiceTurn>,
    ids: CallIds,
    /// Calls the parser gave up on (counted for the metric when the response ends).
    malformed_calls: u32,
    /// `parallel_tool_calls: false`: calls after a choice's first are left out.
    single_call: bool,
}

impl<R: TurnRenderer> TurnDialect<R> {
    /// `num_choices` choices parsed with `options`, rendered by `renderer`.
    pub fn new(renderer: R, num_choices: usize, options: TurnOptions, ids: CallIds) -> Self {
        TurnDialect {
            renderer: Box::new(renderer),
            choices: (0..num_choices)
                .map(|_| ChoiceTurn {
                    stream: TurnStream::new(options.clone()),
                    calls: 0,
                    reasoning: ReasoningTokens::default(),
                })
                .collect(),
            ids,
            malformed_calls: 0,
            single_call: false,
        }
    }

    /// With `parallel_tool_calls: false`: only each choice's first call is returned (a model
    /// that writes more has them dropped, with a log line).
    pub fn single_call(mut self, single: bool) -> Self {
        self.single_call = single;
        self
    }

    fn translate(&mut self, index: u32, events: Vec<TurnEvent>, out: &mut Vec<TurnUpdate>) {
        let choice = &mut self.choices[index as usize];
        for event in events {
            let call = match &event {
                TurnEvent::ToolCallStart { index, .. }
                | TurnEvent::ToolCallArguments { index, .. }
                | TurnEvent::ToolCallEnd { index } => Some(*index),
                _ => None,
            };
            if self.single_call && call.is_some_and(|c| c > 0) {
                if matches!(event, TurnEvent::ToolCallStart { .. }) {
                    tracing::info!("parallel_tool_calls is false: a further call is left out");
                }
                continue;
            }
            out.push(match event {
                TurnEvent::Reasoning(text) => TurnUpdate::Reasoning { index, text },
                TurnEvent::Content(text) => TurnUpdate::Content { index, text },
                TurnEvent::ToolCallStart { index: call, name } => {
                    choice.calls = choice.calls.max(call + 1);
                    TurnUpdate::ToolCallStart {
                        index,
                        call,
                        id: self.ids.fresh(),
                        name,
                    }
                }
                TurnEvent::ToolCallArguments { index: call, delta } => {
                    TurnUpdate::ToolCallArguments { index, call, delta }
                }
                TurnEvent::ToolCallEnd { index: call } => TurnUpdate::ToolCallEnd { index, call },
            });
        }
    }
}

impl<R: TurnRenderer> Dialect for TurnDialect<R> {
    fn logprobs_shape(&self) -> LogprobsShape {
        LogprobsShape::Chat
    }

    fn open(&mut self) -> Vec<Frame> {
        self.renderer.open()
    }

    fn scheduled(&mut self, cached_prompt_tokens: u32) -> Vec<Frame> {
        self.renderer.scheduled(cached_prompt_tokens)
    }

    fn update(&mut self, update: ChoiceUpdate) -> Vec<Frame> {
        let mut out = Vec::new();
        match update {
            ChoiceUpdate::Delta {
                index,
                first,
                text,
                logprobs,
                tokens,
            } => {
                if first {
                    out.push(TurnUpdate::Start { index });
                }
                let choice = &mut self.choices[index as usize];
                let events = choice.stream.push(&text);
                choice.reasoning.add(tokens, &events);
                self.translate(index, events, &mut out);
                if let Some(LogprobsPiece::Chat(logprobs)) = logprobs {
                    out.push(TurnUpdate::Logprobs { index, logprobs });
                }
            }
            ChoiceUpdate::Finish {
                index,
                reason,
                stop_string,
                tokens,
            } => {
                let choice = &mut self.choices[index as usize];
                let events = choice.stream.finish();
                let reasoned = !choice.stream.turn().reasoning.is_empty();
                let reasoning_tokens = choice.reasoning.finish(tokens, &events, reasoned);
                self.translate(index, events, &mut out);
                let choice = &self.choices[index as usize];
                self.malformed_calls += choice.stream.turn().malformed_calls;
                let end = match reason {
                    "length" => TurnEnd::Length,
                    _ if choice.calls > 0 => TurnEnd::ToolCalls,
                    _ => TurnEnd::Stop,
                };
                // A stop string ends a plain turn; one that ended in tool calls reads so.
                let stop_string = stop_string.filter(|_| end == TurnEnd::Stop);
                out.push(TurnUpdate::Finish {
                    index,
                    end,
                    stop_string,
                    reasoning_tokens,
                });
            }
        }
        self.renderer.updates(out)
    }

    fn close(&mut self, ending: Ending<'_>) -> Vec<Frame> {
        self.report_malformed();
        self.renderer.close(ending)
    }

    fn error(&mut self, err: &ApiError) -> Vec<Frame> {
        self.renderer.error(err)
    }

    fn keep_alive(&mut self) -> Vec<Frame> {
        self.renderer.keep_alive()
    }

    fn body(mut self: Box<Self>, ending: Ending<'_>) -> String {
        self.report_malformed();
        self.renderer.body(ending)
    }
}

impl<R: TurnRenderer> TurnDialect<R> {
    fn report_malformed(&mut self) {
        if self.malformed_calls > 0 {
            tracing::warn!(
                calls = self.malformed_calls,
                "the model wrote tool calls that did not parse; returned as text or raw arguments"
            );
            crate::api_metrics::count_malformed_tool_calls(self.malformed_calls);
            self.malformed_calls = 0;
        }
    }
}

#[cfg(test)]
mod tests;
