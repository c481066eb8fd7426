//! One choice of one request as the engine tracks it: its tokens, how many are in the KV cache,
//! its blocks, its sampler RNG and its text state.

use std::sync::Arc;
use std::time::Instant;

use crate::block_manager::{BlockManager, BlockTable, CacheKeys};
use crate::constraint::OutputConstraint;
use crate::fair_share::CallerId;
use crate::handle::RequestId;
use crate::images::PromptImages;
use crate::output::{ChoiceOutput, Ending, OutputText, PendingOutput, TokenPlace};
use crate::prompt_scoring::PromptScoring;
use crate::request::{Priority, PromptOutputs, PromptScores, SamplingParams, StopRules};
use crate::sampler::{Sample, SamplerRng, SamplingContext};
use crate::speculation::DraftRecord;

/// Identifies a sequence (one choice) inside the engine; increases with arrival.
pub type SeqId = u64;

/// Where a sequence is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SequenceStatus {
    /// In the waiting queue (new or preempted).
    Waiting,
    /// Holds blocks and is scheduled every step until it finishes.
    Running,
    /// Done, and how.
    Finished(Ending),
}

/// What appending a run of tokens did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// Tokens taken (a run stops at the first token that ends the choice).
    pub num_tokens: usize,
    /// How the choice ends, when one of them ended it (the caller then calls
    /// [`Sequence::finish`]).
    pub ending: Option<Ending>,
}

/// Identity and rules of a new sequence.
#[derive(Debug)]
pub struct SequenceSpec {
    /// Unique id; later arrivals get larger ids.
    pub id: SeqId,
    /// The request it belongs to.
    pub request_id: RequestId,
    /// Choice index within the request.
    pub choice: u32,
    /// Base priority.
    pub priority: Priority,
    /// When the request arrived (aging and queue time start here).
    pub arrival: Instant,
    /// The prompt.
    pub prompt: Vec<u32>,
    /// Sampling parameters shared by the request's choices.
    pub sampling: Arc<SamplingParams>,
    /// Stop rules shared by the request's choices.
    pub stop: Arc<StopRules>,
    /// End-of-sequence ids of the model.
    pub eos_token_ids: Arc<[u32]>,
    /// The detokenizer and stop matcher; `None` produces token ids only.
    pub text: Option<OutputText>,
    /// The output constraint (JSON mode), if any.
    pub constraint: Option<OutputConstraint>,
    /// Scope of the prefix cache (see `GenerationRequest::cache_salt`).
    pub cache_salt: Option<u64>,
}

/// One choice of a request.
#[derive(Debug)]
pub struct Sequence {
    /// Unique id, increasing with arrival.
    pub id: SeqId,
    /// The request it belongs to.
    pub request_id: RequestId,
    /// Choice index within the request.
    pub choice: u32,
    /// Base priority.
    pub priority: Priority,
    /// When the request arrived.
    pub arrival: Instant,
    /// What its blocks' prefix-cache keys are computed under: the scope (see
    /// `GenerationRequest::cache_salt`) and the prompt's images (see [`Sequence::with_images`]).
    pub cache_keys: CacheKeys,
    /// Who sent it, for fair sharing of seats (see `GenerationRequest::caller`).
    pub caller: CallerId,
    /// Fair sharing has passed it over at least once (counted once in the metrics).
    pub(crate) deferred_by_fair_share: bool,
    /// Prompt then generated tokens.
    tokens: Vec<u32>,
    prompt_len: usize,
    /// Leading tokens whose K/V are in the cache.
    num_computed_tokens: usize,
    status: SequenceStatus,
    /// Present while running; dropping it frees the blocks.
    pub(crate) blocks: Option<BlockTable>,
    sampling: Arc<SamplingParams>,
    /// EOS (unless ignored) and stop token ids, masked until `min_tokens`.
    masked_until_min_tokens: Vec<u32>,
    rng: SamplerRng,
    /// Stop rules, text, constraint and the output not sent yet.
    output: ChoiceOutput,
    /// Outputs over the prompt still being computed, if any were asked for.
    prompt_scoring: Option<PromptScoring>,
    /// Prompt tokens found in the prefix cache when first scheduled.
    pub num_cached_prompt_tokens: usize,
    /// First time the scheduler gave it blocks.
    pub first_scheduled_at: Option<Instant>,
    /// When its latest token was sampled.
    pub last_token_at: Option<Instant>,
    /// How its draft tokens fared (speculative decoding).
    pub(crate) draft_record: DraftRecord,
    /// The prompt's images (none for a text prompt), shared by the request's choices.
    images: Arc<PromptImages>,
}

impl Sequence {
    /// A waiting sequence with no generated tokens.
    pub fn new(spec: SequenceSpec) -> Self {
        let output = ChoiceOutput::new(spec.stop, spec.eos_token_ids, spec.text, spec.constraint);
        Sequence {
            id: spec.id,
            request_id: spec.request_id,
            choice: spec.choice,
            priority: spec.priority,
            arrival: spec.arrival,
            cache_keys: CacheKeys::from(spec.cache_salt),
            caller: None,
            deferred_by_fair_share: false,
            prompt_len: spec.prompt.len(),
            tokens: spec.prompt,
            num_computed_tokens: 0,
            status: SequenceStatus::Waiting,
            blocks: None,
            rng: SamplerRng::new(spec.sampling.seed, spec.choice),
            sampling: spec.sampling,
            masked_until_min_tokens: output.stopping_token_ids(),
            output,
            prompt_scoring: None,
            num_cached_prompt_tokens: 0,
            first_scheduled_at: None,
            last_token_at: None,
            draft_record: DraftRecord::default(),
            images: Arc::default(),
        }
    }

    /// Belongs to `caller` for fair sharing (anonymous by default).
    pub fn with_caller(mut self, caller: CallerId) -> Self {
        self.caller = caller;
        self
    }

    /// Takes its prompt's images; blocks holding their tokens are keyed by them (see
    /// [`PromptImages::cache_keys`]).
    pub fn with_images(mut self, images: Arc<PromptImages>) -> Self {
        self.cache_keys = images.cache_keys(self.cache_keys.salt);
        self.images = images;
        self
    }

    /// The prompt's images.
    pub fn images(&self) -> &PromptImages {
        &self.images
    }

    /// Asks for outputs over the prompt (scoring, pooling) besides generated tokens.
    pub fn with_prompt_outputs(mut self, wanted: PromptOutputs) -> Self {
        self.prompt_scoring = PromptScoring::new(wanted, self.prompt());
        self
    }

    /// Progress on the outputs over the prompt, if any were asked for.
    pub fn prompt_scoring(&self) -> Option<&PromptScoring> {
        self.prompt_scoring.as_ref()
    }

    /// Progress on the outputs over the prompt, mutably (to record a chunk's rows).
    pub fn prompt_scoring_mut(&mut self) -> Option<&mut PromptScoring> {
        self.prompt_scoring.as_mut()
    }

    /// Takes what was computed over the prompt (once, when the sequence is collected).
    pub fn take_prompt_scores(&mut self) -> Option<PromptScores> {
        self.prompt_scoring.take().map(PromptScoring::into_scores)
    }

    /// True when the request generates nothing (`max_tokens` 0: score or embed the prompt).
    pub fn scores_only(&self) -> bool {
        self.output.stop_rules().max_tokens == 0
    }

    /// Prompt then generated tokens.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The prompt.
    pub fn prompt(&self) -> &[u32] {
        &self.tokens[..self.prompt_len]
    }

    /// Generated tokens.
    pub fn output(&self) -> &[u32] {
        &self.tokens[self.prompt_len..]
    }

    /// Leading tokens whose K/V are in the cache.
    pub fn num_computed_tokens(&self) -> usize {
        self.num_computed_tokens
    }

    /// Tokens still to compute before the next token can be sampled.
    pub fn num_uncomputed_tokens(&self) -> usize {
        self.tokens.len() - self.num_computed_tokens
    }

    /// Where the sequence is in its life.
    pub fn status(&self) -> &SequenceStatus {
        &self.status
    }

    /// True once finished.
    pub fn is_finished(&self) -> bool {
        matches!(self.status, SequenceStatus::Finished(_))
    }

    /// The request's sampling parameters.
    pub fn sampling(&self) -> &SamplingParams {
        &self.sampling
    }

    /// The request's stop rules.
    pub fn stop_rules(&self) -> &StopRules {
        self.output.stop_rules()
    }

    /// The block table while running.
    pub fn block_table(&self) -> Option<&BlockTable> {
        self.blocks.as_ref()
    }

    /// The sampler inputs and this sequence's RNG.
    #[cfg(test)]
    pub(crate) fn sampling_inputs(
        &mut self,
    ) -> (&SamplingParams, SamplingContext<'_>, &mut SamplerRng) {
        self.sampling_parts(None)
    }

    /// The sampler inputs over the sequence's tokens as they stand, its constraint's mask (or
    /// `ahead`'s, a copy of the constraint moved past tokens the sequence holds only for now),
    /// and its RNG.
    fn sampling_parts<'a>(
        &'a mut self,
        ahead: Option<&'a mut OutputConstraint>,
    ) -> (&'a SamplingParams, SamplingContext<'a>, &'a mut SamplerRng) {
        let min_tokens = self.output.stop_rules().min_tokens;
        let allowed = match ahead {
            Some(constraint) => Some(constraint.allowed()),
            None => self.output.allowed(),
        };
        let ctx = SamplingContext {
            prompt: &self.tokens[..self.prompt_len],
            output: &self.tokens[self.prompt_len..],
            masked_until_min_tokens: &self.masked_until_min_tokens,
            min_tokens,
            allowed,
        };
        (&self.sampling, ctx, &mut self.rng)
    }

    pub(crate) fn start_running(&mut self, blocks: BlockTable, now: Instant) {
        self.num_computed_tokens = blocks.num_cached_tokens();
        if self.first_scheduled_at.is_none() {
            self.num_cached_prompt_tokens = blocks.num_cached_tokens().min(self.prompt_len);
            self.first_scheduled_at = Some(now);
        }
        self.blocks = Some(blocks);
        self.status = SequenceStatus::Running;
    }

    /// Frees the blocks and forgets the cache; every token is kept and recomputed later.
    pub(crate) fn preempt(&mut self) {
        self.blocks = None;
        self.num_computed_tokens = 0;
        self.status = SequenceStatus::Waiting;
    }

    /// Lets the block manager register the blocks this sequence has filled and computed.
    pub(crate) fn register_computed_blocks(&mut self, blocks: &mut BlockManager) {
        if let Some(table) = self.blocks.as_mut() {
            blocks.register_computed(table, &self.tokens, self.num_computed_tokens);
        }
    }

    pub(crate) fn advance_computed(&mut self, n: usize) {
        self.num_computed_tokens += n;
        debug_assert!(self.num_computed_tokens <= self.tokens.len());
    }

    /// Appends a run of sampled tokens (one, or several a step verified or forced), each
    /// passing stop tokens, the constraint and the detokenizer in order; the first that ends
    /// the choice is the last one appended.
    pub fn append_tokens(
        &mut self,
        samples: Vec<Sample>,
        max_model_len: usize,
        now: Instant,
    ) -> Appended {
        let (tokens, prompt_len) = (&mut self.tokens, self.prompt_len);
        let (num_tokens, ending) = self.output.accept_run(samples, |token| {
            tokens.push(token);
            TokenPlace {
                generated: tokens.len() - prompt_len,
                total: tokens.len(),
                max_model_len,
            }
        });
        if num_tokens > 0 {
            self.last_token_at = Some(now);
        }
        Appended { num_tokens, ending }
    }

    /// The stop string that ended the sequence, when one did.
    pub fn stop_string(&self) -> Option<&str> {
        self.output.stop_string()
    }

    /// Ends the sequence, releasing its blocks. Held-back text is released unless the choice
    /// stopped on a string, was cancelled or failed.
    pub fn finish(&mut self, ending: Ending) {
        if !self.is_finished() {
            self.output.finish(&ending);
            self.status = SequenceStatus::Finished(ending);
        }
        self.blocks = None;
    }

    /// Takes the output produced since the last call.
    pub fn take_pending(&mut self) -> PendingOutput {
        self.output.take_pending()
    }
}

#[path = "sequence_verify.rs"]
mod verify;

#[cfg(test)]
#[path = "sequence_tests.rs"]
mod tests;
