//! What a caller hands the engine, already validated, and what it gets back.

use std::sync::Arc;
use std::time::Duration;

use crate::images::PromptImages;

pub use sluice_model::Pooling;
use sluice_text::constraint::{Grammar, Regex, Schema, ToolCallRules};
use sluice_text::StopSet;

/// Scheduling priority of a request. Lower numeric value is served first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Served first (base 0).
    High,
    /// The default (base 1).
    #[default]
    Normal,
    /// Served last (base 2).
    Low,
}

impl Priority {
    /// The base of the effective-priority formula: High 0, Normal 1, Low 2.
    pub fn base(self) -> f64 {
        match self {
            Priority::High => 0.0,
            Priority::Normal => 1.0,
            Priority::Low => 2.0,
        }
    }
}

/// How tokens are drawn from the logits. Every value here has been validated by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy (argmax).
    pub temperature: f32,
    /// Nucleus mass in (0, 1]; 1 disables.
    pub top_p: f32,
    /// Keep only the k most likely tokens; `None` disables.
    pub top_k: Option<u32>,
    /// Drop tokens below `min_p * p(max)`; 0 disables.
    pub min_p: f32,
    /// Multiplicative penalty on tokens seen in prompt or output (1 disables), as in vLLM/HF.
    pub repetition_penalty: f32,
    /// Additive penalty on tokens present in the output (OpenAI semantics).
    pub presence_penalty: f32,
    /// Additive penalty per occurrence in the output (OpenAI semantics).
    pub frequency_penalty: f32,
    /// Added to the logits of the given token ids before sampling.
    pub logit_bias: Vec<(u32, f32)>,
    /// Seed of this request's own RNG; `None` draws a random seed.
    pub seed: Option<u64>,
    /// `Some(k)`: return the chosen token's logprob and the top `k` (k <= 20) alternatives.
    pub logprobs: Option<u32>,
    /// The form the output must keep; tokens that would break it are never sampled.
    pub response_format: ResponseFormat,
    /// Whether the engine may verify draft tokens for this request when it speculates (the
    /// output is the same either way; only its speed differs).
    pub speculative: bool,
}

/// The form a choice's output must keep (OpenAI's `response_format`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ResponseFormat {
    /// Any text.
    #[default]
    Text,
    /// One JSON object: every token keeps the output a valid prefix of one, and the choice
    /// stops (finish reason `stop`) when the object closes.
    JsonObject,
    /// One JSON document that conforms to the schema; stops when it closes.
    JsonSchema(Arc<Schema>),
    /// Text that matches a regular expression as a whole (vLLM's `regex` and `choice`); stops
    /// when nothing more can follow, and end-of-sequence is allowed only where it matches.
    Regex(Arc<Regex>),
    /// A sentence of a grammar (GBNF); stops when nothing more can follow, end-of-sequence
    /// allowed only after a whole sentence.
    Grammar(Arc<Grammar>),
    /// Tool calls in the chat template's framing (from `tools` and `tool_choice`): a forced
    /// call stops the choice when it closes; in auto mode the output is text, end-of-sequence
    /// and stop tokens allowed, except inside a call, which is held to the tools' schemas.
    ToolCalls(Arc<ToolCallRules>),
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: None,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
            seed: None,
            logprobs: None,
            response_format: ResponseFormat::Text,
            speculative: true,
        }
    }
}

/// When a choice stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopRules {
    /// Generate at most this many tokens.
    pub max_tokens: u32,
    /// EOS and stop tokens are ignored until this many tokens were generated.
    pub min_tokens: u32,
    /// Keep going past EOS.
    pub ignore_eos: bool,
    /// Extra token ids that end generation (the token is not part of the text); sorted and
    /// without duplicates, so a membership test is a binary search.
    pub stop_token_ids: Vec<u32>,
    /// Strings that end generation; the matched text is not returned. Compiled once and
    /// shared by every choice.
    pub stop_strings: StopSet,
    /// Special tokens whose text stays in the output (other special tokens are dropped from
    /// it): the markers a tool-call format writes with control tokens, such as Mistral's
    /// `[TOOL_CALLS]` or Llama 3's `<|python_tag|>`, which the API parses calls by.
    pub kept_special_tokens: Vec<u32>,
}

impl Default for StopRules {
    fn default() -> Self {
        StopRules {
            max_tokens: 16,
            min_tokens: 0,
            ignore_eos: false,
            stop_token_ids: Vec::new(),
            stop_strings: StopSet::default(),
            kept_special_tokens: Vec::new(),
        }
    }
}

/// A validated generation request: a tokenized prompt and everything that governs its output.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationRequest {
    /// The prompt, already tokenized (and templated).
    pub prompt_tokens: Vec<u32>,
    /// Number of independent choices (>= 1); they share the prompt's KV blocks.
    pub n: u32,
    /// Sampling parameters shared by all choices. Choice `i` seeds its RNG with `seed + i`.
    pub sampling: SamplingParams,
    /// Stop rules shared by all choices.
    pub stop: StopRules,
    /// Scheduling priority.
    pub priority: Priority,
    /// Scope of the prefix cache: prompt blocks are reused only between requests with the same
    /// salt (`None` is a scope of its own). The API derives it from the caller's API key and
    /// `cache_salt`, so one caller's cache hits reveal nothing of another's prompts.
    pub cache_salt: Option<u64>,
    /// Who sent it, for fair sharing of running seats between callers (`None` is one
    /// anonymous caller). The API derives it from the API key, or from the request's `user`
    /// when the server has one key or none; it is an opaque hash, never the key itself.
    pub caller: Option<u64>,
    /// The prompt's images: where their soft tokens are and their embeddings (empty for a
    /// text prompt).
    pub images: Arc<PromptImages>,
    /// What is computed over the prompt itself (scoring, embeddings); nothing by default.
    pub prompt_outputs: PromptOutputs,
}

/// Outputs computed over the prompt rather than generated: prompt logprobs (evaluation
/// harnesses), a pooled hidden state (embeddings) and the next token's log-probabilities of
/// chosen tokens (a reranker's "yes" and "no"). They are computed chunk by chunk as the prompt
/// is prefilled; a request that asks for prompt logprobs or mean/CLS pooling computes every
/// prompt token (no prefix-cache reuse), since cached rows have no logits or hidden states.
/// Only choice 0 of a request computes them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptOutputs {
    /// `Some(k)`: the log-probability of every prompt token after the first, with the top `k`
    /// alternatives at each position.
    pub logprobs: Option<u32>,
    /// `Some(pooling)`: the prompt's final-norm hidden states pooled into one (unnormalised)
    /// vector.
    pub pooling: Option<Pooling>,
    /// Tokens whose log-probability at the position after the prompt is reported.
    pub next_token_candidates: Vec<u32>,
}

impl PromptOutputs {
    /// True when nothing is asked for.
    pub fn is_empty(&self) -> bool {
        self.logprobs.is_none() && self.pooling.is_none() && self.next_token_candidates.is_empty()
    }

    /// True when every prompt row must be computed (cached rows would lack their outputs).
    pub fn needs_every_prompt_row(&self) -> bool {
        self.logprobs.is_some() || matches!(self.pooling, Some(Pooling::Mean | Pooling::Cls))
    }
}

/// What [`PromptOutputs`] produced, delivered in an [`Event::Prompt`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptScores {
    /// One entry per prompt token after the first (the first has no context to score it).
    pub logprobs: Vec<TokenLogprob>,
    /// Parallel to `logprobs`: each prompt token's rank in its position's distribution (1 is
    /// the most likely; ties share the worse rank), as vLLM's `prompt_logprobs` report it.
    pub ranks: Vec<u32>,
    /// The pooled final hidden state, unnormalised.
    pub embedding: Option<Vec<f32>>,
    /// `(token, log-probability)` at the position after the prompt, in the order asked.
    pub next_token: Vec<(u32, f32)>,
}

/// What a request is for, as the metrics label it (`task`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// Generates tokens (chat, completions).
    Generate,
    /// Pools the prompt's hidden states (embeddings).
    Embed,
    /// Scores the prompt and generates nothing (prompt logprobs, rerank, score).
    Score,
}

impl Task {
    /// Every task, in the order metrics list them.
    pub const ALL: [Task; 3] = [Task::Generate, Task::Embed, Task::Score];

    /// The label value (`generate`, `embed`, `score`).
    pub fn as_str(self) -> &'static str {
        match self {
            Task::Generate => "generate",
            Task::Embed => "embed",
            Task::Score => "score",
        }
    }
}

impl GenerationRequest {
    /// One greedy choice of `max_tokens` tokens after `prompt_tokens`, whatever the model would
    /// end it with (`ignore_eos`), at normal priority, without images, caller or cache salt;
    /// set any other field with struct update syntax (tests, benchmarks).
    pub fn greedy(prompt_tokens: Vec<u32>, max_tokens: u32) -> Self {
        GenerationRequest {
            prompt_tokens,
            n: 1,
            sampling: SamplingParams {
                temperature: 0.0,
                ..SamplingParams::default()
            },
            stop: StopRules {
                max_tokens,
                ignore_eos: true,
                ..StopRules::default()
            },
            priority: Priority::Normal,
            cache_salt: None,
            caller: None,
            images: Default::default(),
            prompt_outputs: PromptOutputs::default(),
        }
    }

    /// What the request is for: pooling makes it an embedding, generating nothing a score.
    pub fn task(&self) -> Task {
        if self.prompt_outputs.pooling.is_some() {
            Task::Embed
        } else if self.stop.max_tokens == 0 {
            Task::Score
        } else {
            Task::Generate
        }
    }
}

/// Why a choice ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// EOS, a stop token or a stop string.
    Stop,
    /// `max_tokens` or the model's context length was reached.
    Length,
    /// The caller went away (its event stream was dropped) or the engine shut down.
    Cancelled,
    /// The engine failed on this request; the message says why.
    Error,
}

impl FinishReason {
    /// The OpenAI wire name (`stop`, `length`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
            FinishReason::Error => "error",
        }
    }
}

/// Log-probability of a sampled token and the most likely alternatives at that position.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    /// The sampled token.
    pub token_id: u32,
    /// Its log-probability under the model's distribution (after temperature 1, before
    /// top-p/top-k filtering, as OpenAI reports it).
    pub logprob: f32,
    /// The `k` most likely tokens and their log-probabilities, best first.
    pub top: Vec<(u32, f32)>,
}

/// Token counts of one finished choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt tokens (the same for every choice of a request).
    pub prompt_tokens: u32,
    /// Tokens generated by this choice.
    pub completion_tokens: u32,
    /// Prompt tokens served from the prefix cache.
    pub cached_prompt_tokens: u32,
}

/// What the engine sends back on a request's event stream. Every choice gets zero or more
/// `Delta`s and then exactly one `Finished`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// New output for one choice. `text` may be empty while a possible stop string or an
    /// incomplete UTF-8 character is held back; `token_ids` and `logprobs` are never held back.
    Delta {
        /// Choice index in `0..n`.
        choice: u32,
        /// Newly released text.
        text: String,
        /// Tokens sampled since the previous delta.
        token_ids: Vec<u32>,
        /// One entry per token in `token_ids` when logprobs were asked for.
        logprobs: Vec<TokenLogprob>,
    },
    /// The choice ended. Any text still held back was released by a preceding `Delta`.
    Finished {
        /// Choice index in `0..n`.
        choice: u32,
        /// Why it ended.
        reason: FinishReason,
        /// Set when `reason` is `Error`.
        error: Option<String>,
        /// The stop string that ended the choice, when one did (`reason` is then `Stop`).
        stop_string: Option<String>,
        /// Token counts.
        usage: Usage,
        /// Time spent waiting in the queue before first being scheduled.
        queue_time: Duration,
    },
    /// The choice was scheduled for the first time: of its prompt, this many tokens came from
    /// the prefix cache. Sent once, before any other event of the choice (a choice that
    /// never runs, such as one refused at admission, has none).
    Scheduled {
        /// Choice index in `0..n`.
        choice: u32,
        /// Prompt tokens read from the prefix cache (what `Usage::cached_prompt_tokens` says).
        cached_prompt_tokens: u32,
    },
    /// What was computed over the prompt ([`PromptOutputs`]), sent once (for choice 0) as soon
    /// as the prompt is computed: before that choice's first `Delta`.
    Prompt {
        /// Choice index (always 0).
        choice: u32,
        /// The scores and the pooled state.
        scores: Box<PromptScores>,
    },
}
