//! From engine events to OpenAI choices. The engine sends, per choice, deltas and then one
//! `Finished`; a response may hold several engine requests (one per completion prompt). The
//! [`ResponseAssembler`] turns that into [`ChoiceUpdate`]s with global choice indices, token
//! texts and logprobs in the wire shapes, and keeps the invariants every response must hold:
//! a choice starts before it finishes, finishes exactly once, and nothing follows its finish.
//! Streaming (`sse`) renders updates as chunks; [`ResponseCollector`] folds them into one body.

use std::collections::BTreeMap;

use sluice_engine::{Event, FinishReason, PromptScores, TokenLogprob, Usage};

mod collect;
mod logprobs;
mod update;

pub use collect::{CollectedChoice, ResponseCollector};
pub use logprobs::{chat_logprobs, completion_logprobs, LogprobsPiece, LogprobsShape, TokenTexts};
pub use update::ChoiceUpdate;

use crate::error::ApiError;
use crate::wire::{CompletionLogprobs, PromptLogprob, PromptLogprobs, UsageBody};

/// Identity shared by every chunk (or the one body) of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseMeta {
    /// `chatcmpl-...` or `cmpl-...`, the same on every chunk.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// Served model id.
    pub model: String,
    /// Identifies the server build.
    pub system_fingerprint: String,
}

#[derive(Debug, Clone, Default)]
struct ChoiceState {
    started: bool,
    finished: bool,
    /// Characters of echo and token texts so far (for completions' `text_offset`).
    token_text_chars: u32,
    completion_tokens: u32,
    /// Of `completion_tokens`, those already counted in an update.
    reported_tokens: u32,
}

impl ChoiceState {
    /// The completion tokens not yet counted in an update, now counted.
    fn unreported_tokens(&mut self) -> u32 {
        let tokens = self.completion_tokens.saturating_sub(self.reported_tokens);
        self.reported_tokens = self.completion_tokens;
        tokens
    }
}

/// Validates and translates the event streams of one response.
pub struct ResponseAssembler {
    shape: LogprobsShape,
    n: u32,
    /// Per prompt: text to put in front of each choice (completions' `echo`).
    echo: Vec<Option<String>>,
    /// `num_prompts * n` entries.
    choices: Vec<ChoiceState>,
    /// Per prompt: its usage, once one of its choices finished.
    prompt_usage: Vec<Option<Usage>>,
    logprobs: bool,
    hide_cached_tokens: bool,
    /// Per prompt, with echoed logprobs or `prompt_logprobs`: its tokens.
    prompt_tokens: Vec<Option<Vec<u32>>>,
    /// `Some(k)`: each echoed prompt carries its tokens' logprobs and top `k`.
    echo_logprobs: Option<u32>,
    /// `Some(k)`: vLLM's `prompt_logprobs` with the top `k` at each position.
    prompt_logprobs: Option<u32>,
    /// Per prompt: what the engine computed over it ([`Event::Prompt`]).
    prompt_scores: Vec<Option<Box<PromptScores>>>,
    /// The first choice's prefix-cache hit ([`Event::Scheduled`]) until it is taken.
    scheduled: Option<u32>,
}

impl ResponseAssembler {
    /// An assembler for `num_prompts` engine requests of `n` choices each. `echo`, when given,
    /// has one text per prompt.
    pub fn new(
        shape: LogprobsShape,
        num_prompts: usize,
        n: u32,
        echo: Option<Vec<String>>,
        logprobs: bool,
    ) -> Self {
        let echo: Vec<Option<String>> = echo.map_or_else(
            || vec![None; num_prompts],
            |e| e.into_iter().map(Some).collect(),
        );
        let choices = echo
            .iter()
            .flat_map(|e| {
                let state = ChoiceState {
                    token_text_chars: e.as_ref().map_or(0, |e| e.chars().count() as u32),
                    ..ChoiceState::default()
                };
                std::iter::repeat_n(state, n as usize)
            })
            .collect();
        ResponseAssembler {
            shape,
            n,
            echo,
            choices,
            prompt_usage: vec![None; num_prompts],
            logprobs,
            hide_cached_tokens: false,
            prompt_tokens: vec![None; num_prompts],
            echo_logprobs: None,
            prompt_logprobs: None,
            prompt_scores: vec![None; num_prompts],
            scheduled: None,
        }
    }

    /// Once, after the event that said so: how many of the first prompt's tokens the prefix
    /// cache held when its first choice was scheduled (0 when cached tokens are hidden).
    pub fn take_scheduled(&mut self) -> Option<u32> {
        self.scheduled.take()
    }

    /// Leaves the cached-token count out of [`ResponseAssembler::usage`].
    pub fn hiding_cached_tokens(mut self, hide: bool) -> Self {
        self.hide_cached_tokens = hide;
        self
    }

    /// The tokens of each prompt (one list per prompt), which the engine scores and sends in an
    /// [`Event::Prompt`] before the first delta: needed by echoed logprobs and `prompt_logprobs`.
    pub fn with_prompt_tokens(mut self, tokens: Vec<Vec<u32>>) -> Self {
        self.prompt_tokens = tokens.into_iter().map(Some).collect();
        self.prompt_tokens.resize(self.prompt_usage.len(), None);
        self
    }

    /// Makes each echoed prompt carry its tokens' logprobs and top `k` (needs
    /// [`ResponseAssembler::with_prompt_tokens`]).
    pub fn with_echo_logprobs(mut self, k: u32) -> Self {
        self.echo_logprobs = Some(k);
        self
    }

    /// Answers vLLM's `prompt_logprobs` with the top `k` (needs
    /// [`ResponseAssembler::with_prompt_tokens`]); see [`ResponseAssembler::prompt_logprobs`].
    pub fn with_prompt_logprobs(mut self, k: u32) -> Self {
        self.prompt_logprobs = Some(k);
        self
    }

    /// vLLM's `prompt_logprobs` of prompt `prompt_index`: `null` for its first token, then at
    /// each position the prompt token and the top `k`, keyed by token id, each with its
    /// logprob, rank and text. `None` when not asked for.
    pub fn prompt_logprobs(
        &self,
        prompt_index: usize,
        tokens: &dyn TokenTexts,
    ) -> Option<PromptLogprobs> {
        let k = self.prompt_logprobs? as usize;
        let prompt = self.prompt_tokens.get(prompt_index)?.as_ref()?;
        let scores = self.prompt_scores.get(prompt_index)?.as_ref()?;
        let entry = |id: u32, logprob: f32, rank: u32| {
            let decoded_token = tokens.token_text(id);
            let value = PromptLogprob {
                logprob,
                rank,
                decoded_token,
            };
            (id.to_string(), value)
        };
        let positions = scores
            .logprobs
            .iter()
            .zip(&scores.ranks)
            .map(|(lp, &rank)| {
                let mut position: BTreeMap<String, PromptLogprob> = (lp.top.iter().take(k))
                    .enumerate()
                    .map(|(i, &(id, logprob))| entry(id, logprob, i as u32 + 1))
                    .collect();
                let (id, own) = entry(lp.token_id, lp.logprob, rank);
                position.insert(id, own);
                Some(position)
            });
        let out: PromptLogprobs = std::iter::once(None).chain(positions).collect();
        debug_assert_eq!(out.len(), prompt.len());
        Some(out)
    }

    /// [`ResponseAssembler::prompt_logprobs`] of the prompt choice `index` belongs to.
    pub fn prompt_logprobs_of_choice(
        &self,
        index: usize,
        tokens: &dyn TokenTexts,
    ) -> Option<PromptLogprobs> {
        self.prompt_logprobs(index / self.n.max(1) as usize, tokens)
    }

    /// The completions logprobs of prompt `prompt_index`'s echo for choice `index`: its first
    /// token with a null logprob, then the engine's scores. Offsets restart at 0.
    fn echo_piece(
        &mut self,
        prompt_index: usize,
        index: u32,
        tokens: &dyn TokenTexts,
    ) -> Result<Option<CompletionLogprobs>, ApiError> {
        let (Some(k), Some(prompt)) = (self.echo_logprobs, &self.prompt_tokens[prompt_index])
        else {
            return Ok(None);
        };
        let scores = self.prompt_scores[prompt_index].as_ref().ok_or_else(|| {
            ApiError::Internal("the engine sent no prompt logprobs for an echoed prompt".into())
        })?;
        let mut piece = CompletionLogprobs::default();
        let first = tokens.token_text(prompt[0]);
        let first_chars = first.chars().count() as u32;
        piece.tokens.push(first);
        piece.token_logprobs.push(None);
        piece.top_logprobs.push(None);
        piece.text_offset.push(0);
        // The scores may hold more alternatives than the echo asked for (`prompt_logprobs`).
        let logprobs: Vec<TokenLogprob> = (scores.logprobs.iter())
            .map(|lp| TokenLogprob {
                top: lp.top.iter().take(k as usize).copied().collect(),
                ..lp.clone()
            })
            .collect();
        piece.extend(completion_logprobs(&logprobs, tokens, first_chars));
        let chars = piece.tokens.iter().map(|t| t.chars().count() as u32).sum();
        self.choices[index as usize].token_text_chars = chars;
        Ok(Some(piece))
    }

    /// Total number of choices in the response.
    pub fn num_choices(&self) -> usize {
        self.choices.len()
    }

    /// Whether every choice has finished.
    pub fn is_complete(&self) -> bool {
        self.choices.iter().all(|c| c.finished)
    }

    /// Token counts over all prompts and choices so far.
    pub fn usage(&self) -> UsageBody {
        let known = self.prompt_usage.iter().flatten();
        let prompt: u32 = known.clone().map(|u| u.prompt_tokens).sum();
        let cached: u32 = known.map(|u| u.cached_prompt_tokens).sum();
        let completion: u32 = self.choices.iter().map(|c| c.completion_tokens).sum();
        let usage = UsageBody::new(prompt, completion, cached);
        if self.hide_cached_tokens {
            usage.without_cached_tokens()
        } else {
            usage
        }
    }

    /// Applies one engine event of prompt `prompt_index`. Errors are what the client must be
    /// told instead of a normal ending (engine failure, cancellation by shutdown, a broken
    /// event sequence).
    pub fn apply(
        &mut self,
        prompt_index: usize,
        event: Event,
        tokens: &dyn TokenTexts,
    ) -> Result<Vec<ChoiceUpdate>, ApiError> {
        let choice = match &event {
            Event::Delta { choice, .. }
            | Event::Finished { choice, .. }
            | Event::Scheduled { choice, .. }
            | Event::Prompt { choice, .. } => *choice,
        };
        if choice >= self.n || prompt_index >= self.prompt_usage.len() {
            return Err(ApiError::Internal(format!(
                "engine sent an event for choice {choice} of prompt {prompt_index}, outside the request"
            )));
        }
        let index = prompt_index as u32 * self.n + choice;
        let state = &self.choices[index as usize];
        if state.finished {
            return Err(ApiError::Internal(format!(
                "engine sent an event for choice {index} after it finished"
            )));
        }
        let mut updates = Vec::with_capacity(2);
        match event {
            Event::Delta {
                text,
                token_ids,
                logprobs,
                ..
            } => {
                let first = !state.started;
                let mut update_text = String::new();
                if first {
                    if let Some(echo) = &self.echo[prompt_index] {
                        update_text.push_str(echo);
                    }
                }
                update_text.push_str(&text);
                let echo_piece = match first {
                    true => self.echo_piece(prompt_index, index, tokens)?,
                    false => None,
                };
                let piece = match (echo_piece, self.logprobs_piece(index, &logprobs, tokens)) {
                    (Some(mut echo), Some(LogprobsPiece::Completion(generated))) => {
                        echo.extend(generated);
                        Some(LogprobsPiece::Completion(echo))
                    }
                    (Some(echo), _) => Some(LogprobsPiece::Completion(echo)),
                    (None, piece) => piece,
                };
                let state = &mut self.choices[index as usize];
                state.started = true;
                state.completion_tokens += token_ids.len() as u32;
                if first || !update_text.is_empty() || piece.is_some() {
                    updates.push(ChoiceUpdate::Delta {
                        index,
                        first,
                        text: update_text,
                        logprobs: piece,
                        tokens: state.unreported_tokens(),
                    });
                }
            }
            Event::Finished {
                reason,
                error,
                stop_string,
                usage,
                ..
            } => {
                let reason = match reason {
                    FinishReason::Stop => "stop",
                    FinishReason::Length => "length",
                    FinishReason::Cancelled => {
                        return Err(ApiError::Unavailable(
                            "the request was cancelled: the server is shutting down".into(),
                        ))
                    }
                    FinishReason::Error => {
                        return Err(ApiError::Internal(
                            error.unwrap_or_else(|| "the engine failed on this request".into()),
                        ))
                    }
                };
                if !state.started {
                    let text = self.echo[prompt_index].clone().unwrap_or_default();
                    let echo_piece = self.echo_piece(prompt_index, index, tokens)?;
                    updates.push(ChoiceUpdate::Delta {
                        index,
                        first: true,
                        text,
                        logprobs: echo_piece.map(LogprobsPiece::Completion),
                        tokens: 0,
                    });
                }
                let state = &mut self.choices[index as usize];
                state.started = true;
                state.finished = true;
                // The engine's count is authoritative (it includes tokens a stop string cut off).
                state.completion_tokens = usage.completion_tokens;
                let tokens = state.unreported_tokens();
                self.prompt_usage[prompt_index].get_or_insert(usage);
                updates.push(ChoiceUpdate::Finish {
                    index,
                    reason,
                    stop_string,
                    tokens,
                });
            }
            Event::Prompt { scores, .. } => self.prompt_scores[prompt_index] = Some(scores),
            Event::Scheduled {
                cached_prompt_tokens,
                ..
            } => {
                if index == 0 {
                    let hidden = self.hide_cached_tokens;
                    self.scheduled = Some(if hidden { 0 } else { cached_prompt_tokens });
                }
            }
        }
        Ok(updates)
    }

    fn logprobs_piece(
        &mut self,
        index: u32,
        logprobs: &[TokenLogprob],
        tokens: &dyn TokenTexts,
    ) -> Option<LogprobsPiece> {
        if !self.logprobs || logprobs.is_empty() {
            return None;
        }
        Some(match self.shape {
            LogprobsShape::Chat => LogprobsPiece::Chat(chat_logprobs(logprobs, tokens)),
            LogprobsShape::Completion => {
                // Offsets count characters of token texts, starting after the echoed prompt.
                let state = &mut self.choices[index as usize];
                let start = state.token_text_chars;
                let piece = completion_logprobs(logprobs, tokens, start);
                state.token_text_chars = start
                    + piece
                        .tokens
                        .iter()
                        .map(|t| t.chars().count() as u32)
                        .sum::<u32>();
                LogprobsPiece::Completion(piece)
            }
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
