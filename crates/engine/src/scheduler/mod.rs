//! The scheduler: decides, every step, which tokens of which sequences the model computes.
//!
//! One rule: every sequence has `num_computed_tokens` and `tokens`; a step spends a token budget to
//! close the gap, running sequences first (best effective priority first), then waiting ones by
//! effective priority. Decodes, prefill chunks, prefix-cache hits and recompute after preemption
//! all follow from it. [`Scheduler::schedule`] returns a typed [`SchedulerOutput`];
//! [`Scheduler::update_from_output`] consumes the sampled tokens ([`ModelOutput`]).
//!
//! While sequences are decoding, prompt tokens also spend a second budget sized from the
//! learned step cost ([`StepCostModel`]) so that a step lasts about `step_time_target`: a long
//! prompt then arrives in chunks instead of stalling every running stream for seconds.
//!
//! Seats are shared between callers ([`crate::fair_share`]): while one caller waits below its
//! share, others over theirs are not admitted and may be preempted for it. So are a step's
//! prompt tokens: each caller with prompt work gets its part of them (`prompt_share.rs`).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::block_manager::{BlockHash, BlockManager, CachedBlock, KvEvent};
use crate::fair_share::{FairShareConfig, PromptQuotas, Shares};
use crate::handle::RequestId;
use crate::output::Ending;
use crate::prompt_scoring::PromptRows;
use crate::queue::{effective_priority, QueueFull, WaitingQueue};
use crate::sequence::{SeqId, Sequence, SequenceStatus};
use crate::speculation::{SpeculationConfig, Speculator};
use crate::step_cost::StepCostModel;

mod admission;
mod drafts;
mod prompt_share;
mod step_budget;
mod step_io;
mod update;

pub use step_io::{ModelOutput, ScheduledSeq, SchedulerOutput, StepOutcome};

use admission::row_cap;

/// Limits of one step and of the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    /// Most sequences running at once.
    pub max_num_seqs: usize,
    /// Most tokens computed in one step.
    pub max_num_batched_tokens: usize,
    /// A sequence ends (`length`) when it holds this many tokens.
    pub max_model_len: usize,
    /// Most new sequences waiting.
    pub max_queue: usize,
    /// Effective priority gained per second of waiting.
    pub aging_rate: f64,
    /// While sequences decode, prefill chunks are sized so that a step takes about this long
    /// (but prompts always get at least `prefill_share` of it); `None`: only
    /// `max_num_batched_tokens` bounds a step.
    pub step_time_target: Option<Duration>,
    /// The least share of a step's time that prompts get beside decodes, in (0, 1): the step
    /// then lasts at most the decodes' time / (1 - share), so a long prompt slows the streams
    /// by at most that factor and runs at no less than `share` of its speed alone.
    pub prefill_share: f64,
    /// How seats are shared between callers.
    pub fair_share: FairShareConfig,
}

/// Owner of every sequence, the waiting queue, the running set and the block pool.
#[derive(Debug)]
pub struct Scheduler {
    config: SchedulerConfig,
    blocks: BlockManager,
    waiting: WaitingQueue<SeqId>,
    /// Running sequences; sorted best-first at the start of every step.
    running: Vec<SeqId>,
    seqs: HashMap<SeqId, Sequence>,
    /// Choices of each request with sequences still in the scheduler.
    requests: HashMap<RequestId, Vec<SeqId>>,
    /// What steps have cost so far.
    cost: StepCostModel,
    /// What steps without prompt tokens have cost (`step_budget.rs`).
    decode_cost: StepCostModel,
    /// Steps run since the last one without prompt tokens (`step_budget.rs`).
    steps_since_decodes_alone: usize,
    /// Draft tokens and what they are worth, when the engine speculates.
    speculator: Option<Speculator>,
}

impl Scheduler {
    /// A scheduler over a block pool.
    pub fn new(config: SchedulerConfig, blocks: BlockManager) -> Self {
        Scheduler {
            waiting: WaitingQueue::new(config.max_queue, config.aging_rate),
            config,
            blocks,
            running: Vec::new(),
            seqs: HashMap::new(),
            requests: HashMap::new(),
            cost: StepCostModel::default(),
            decode_cost: StepCostModel::with_decay(step_budget::DECODE_FIT_DECAY),
            steps_since_decodes_alone: 0,
            speculator: None,
        }
    }

    /// Lets decoding sequences take draft tokens from `proposer` (see `crate::speculation`).
    pub(crate) fn speculate(
        &mut self,
        proposer: Box<dyn crate::executor::Proposer>,
        config: &SpeculationConfig,
    ) {
        self.speculator = Some(Speculator::new(proposer, config));
    }

    /// [`Scheduler::speculate`], builder style.
    #[cfg(test)]
    pub(crate) fn with_proposer(
        mut self,
        proposer: Box<dyn crate::executor::Proposer>,
        config: &SpeculationConfig,
    ) -> Self {
        self.speculate(proposer, config);
        self
    }

    /// Records how long a planned step took (scheduling, forward pass and sampling), which sizes
    /// later prefill chunks.
    pub fn observe_step(&mut self, out: &SchedulerOutput, elapsed: Duration) {
        let (tokens, rows) = (out.batch.num_tokens(), out.batch.logits_indices.len());
        // Each token attends to the positions up to its own (fewer under a sliding window,
        // which the fit then charges at a lower rate).
        let attended: u64 = out.batch.positions.iter().map(|&p| u64::from(p) + 1).sum();
        // The prediction is fitted only where the trace is on (field values are evaluated
        // only for an enabled event).
        tracing::trace!(
            tokens,
            logit_rows = rows,
            attended,
            predicted_ms = (self.cost.estimate())
                .map_or(f64::NAN, |c| c.seconds(tokens, rows, attended) * 1e3),
            ms = elapsed.as_secs_f64() * 1e3,
            "step cost"
        );
        self.cost
            .observe(tokens, rows, attended, elapsed.as_secs_f64());
        let decodes_only =
            (out.scheduled.iter()).all(|s| s.num_new_tokens == 1 && s.logits_row.is_some());
        if decodes_only {
            (self.decode_cost).observe(tokens, rows, attended, elapsed.as_secs_f64());
            self.steps_since_decodes_alone = 0;
        } else {
            self.steps_since_decodes_alone += 1;
        }
        if let Some(speculator) = self.speculator.as_mut() {
            speculator.observe_step(tokens, rows, elapsed.as_secs_f64());
        }
    }

    /// The block pool.
    pub fn block_manager(&self) -> &BlockManager {
        &self.blocks
    }

    /// The prefix cache's block keyed `key` in group `group` (see
    /// [`BlockManager::cached_block`]).
    pub fn cached_block(&self, group: usize, key: BlockHash) -> Option<CachedBlock> {
        self.blocks.cached_block(group, key)
    }

    /// The prefix cache's changes since the last call (see [`BlockManager::drain_events`]).
    pub fn drain_kv_events(&mut self) -> Vec<KvEvent> {
        self.blocks.drain_events()
    }

    /// Sequences waiting (new or preempted).
    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Sequences running.
    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    /// True when nothing waits or runs.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// A sequence still held by the scheduler.
    pub fn sequence(&self, id: SeqId) -> Option<&Sequence> {
        self.seqs.get(&id)
    }

    /// A sequence still held by the scheduler, mutably (to sample it).
    pub fn sequence_mut(&mut self, id: SeqId) -> Option<&mut Sequence> {
        self.seqs.get_mut(&id)
    }

    /// True when [`Scheduler::add`] will take a new sequence.
    pub fn has_queue_room(&self) -> bool {
        self.waiting.has_room()
    }

    /// Queues a new sequence.
    pub fn add(&mut self, seq: Sequence) -> Result<(), QueueFull> {
        self.waiting
            .push(seq.priority, seq.arrival, seq.id, seq.id)?;
        self.requests
            .entry(seq.request_id)
            .or_default()
            .push(seq.id);
        self.seqs.insert(seq.id, seq);
        Ok(())
    }

    /// Takes a finished sequence out of the scheduler (its blocks are already free).
    pub fn remove(&mut self, id: SeqId) -> Option<Sequence> {
        let seq = self.seqs.remove(&id)?;
        if let Some(speculator) = self.speculator.as_mut() {
            speculator.release(id);
        }
        self.running.retain(|&r| r != id);
        if seq.status() == &crate::sequence::SequenceStatus::Waiting {
            self.waiting.remove(seq.priority, seq.arrival, id);
        }
        if let Some(choices) = self.requests.get_mut(&seq.request_id) {
            choices.retain(|&c| c != id);
            if choices.is_empty() {
                self.requests.remove(&seq.request_id);
            }
        }
        Some(seq)
    }

    /// Finishes every choice of a request as cancelled and takes them out, freeing their blocks.
    pub fn abort_request(&mut self, request_id: RequestId) -> Vec<Sequence> {
        let ids = self.requests.get(&request_id).cloned().unwrap_or_default();
        ids.into_iter()
            .filter_map(|id| {
                let mut seq = self.remove(id)?;
                seq.finish(Ending::Cancelled);
                Some(seq)
            })
            .collect()
    }

    /// The census of callers with work, for fair sharing (and the metrics).
    pub fn callers(&self) -> Shares {
        let unfinished = self.seqs.values().filter(|s| !s.is_finished());
        Shares::new(
            self.config.fair_share,
            self.config.max_num_seqs,
            unfinished.map(|s| (s.caller, s.status() == &SequenceStatus::Running)),
        )
    }

    /// Orders running sequences best-first: effective priority, then arrival, then id. With
    /// several callers sharing seats, every caller's sequences beyond its share come after
    /// all within-share ones, so the first to be preempted are the over-share ones.
    fn sort_running(&mut self, now: Instant, shares: &Shares) {
        let rate = self.config.aging_rate;
        let seqs = &self.seqs;
        let key = |id: &SeqId| {
            let s = &seqs[id];
            (
                effective_priority(s.priority, s.arrival, now, rate),
                s.arrival,
                s.id,
            )
        };
        self.running.sort_by(|a, b| {
            let (ka, kb) = (key(a), key(b));
            ka.0.total_cmp(&kb.0)
                .then(ka.1.cmp(&kb.1))
                .then(ka.2.cmp(&kb.2))
        });
        if shares.ranks_running() {
            let mut seen: HashMap<_, usize> = HashMap::new();
            let beyond: HashSet<SeqId> = self
                .running
                .iter()
                .filter(|id| {
                    let count = seen.entry(self.seqs[id].caller).or_default();
                    *count += 1;
                    *count > shares.share()
                })
                .copied()
                .collect();
            // Stable: the priority order holds within each half.
            self.running.sort_by_key(|id| beyond.contains(id));
        }
    }

    fn preempt(&mut self, id: SeqId, preempted: &mut Vec<SeqId>, shares: &mut Shares) {
        self.running.retain(|&r| r != id);
        if let Some(speculator) = self.speculator.as_mut() {
            speculator.release(id);
        }
        let seq = self.seqs.get_mut(&id).expect("running sequence exists");
        shares.on_preempt(seq.caller);
        seq.preempt();
        self.waiting.requeue(seq.priority, seq.arrival, id, id);
        preempted.push(id);
    }

    /// Plans one step at time `now`.
    pub fn schedule(&mut self, now: Instant) -> SchedulerOutput {
        let mut out = SchedulerOutput::default();
        let shares = self.callers();
        self.sort_running(now, &shares);
        let prompt_tokens = self.prefill_budget();
        let mut step = StepPlan {
            seqs: Vec::new(),
            tokens: self.config.max_num_batched_tokens,
            prompt_tokens,
            quotas: self.prompt_quotas(&shares, prompt_tokens),
            shares,
            admitted: HashSet::new(),
            deferred_prompt_tokens: 0,
            drafts: HashMap::new(),
        };
        self.plan_running(&mut step, &mut out);
        // Then waiting ones, unless this step already had to preempt.
        if out.preempted.is_empty() {
            self.admit_waiting(now, &mut step, &mut out);
            if step.quotas.is_split() {
                // What callers left of their parts goes to the prompts already running, then
                // to anyone waiting: the split never leaves a step idle.
                let mut spare = self.top_up(&mut step);
                step.quotas = PromptQuotas::unlimited();
                spare += self.admit_waiting(now, &mut step, &mut out);
                step.deferred_prompt_tokens = step.deferred_prompt_tokens.saturating_sub(spare);
            }
        }
        out.fair_share_prompt_tokens_deferred = step.deferred_prompt_tokens as u64;
        self.plan_drafts(&mut step);
        self.build_batch(&step, &mut out);
        out.kv_loads = self.blocks.take_loads();
        out
    }

    /// Plans the running sequences, best first: a decode's token, an unfinished prompt's
    /// chunk within its caller's part of the prompt tokens. A sequence short of blocks
    /// preempts the worst running one (never one already planned: victims come from the end).
    fn plan_running(&mut self, step: &mut StepPlan, out: &mut SchedulerOutput) {
        // The best running prompt always computes something, as without sharing: otherwise a
        // step budget smaller than the callers could leave every prompt holding blocks while
        // the one caller given the tokens preempts itself for lack of them, for good.
        let mut first_prompt = true;
        let mut i = 0;
        while i < self.running.len() && step.tokens > 0 {
            let id = self.running[i];
            let seq = &self.seqs[&id];
            let prefilling = is_prefilling(seq);
            let mut num_new = seq
                .num_uncomputed_tokens()
                .min(step.tokens)
                .min(row_cap(seq));
            // Prompt tokens this caller leaves to others' parts of the step.
            let mut left_to_others = 0;
            if prefilling {
                num_new = num_new.min(step.prompt_tokens);
                let part = step.quotas.left(seq.caller);
                let fair = num_new.min(if first_prompt { part.max(1) } else { part });
                left_to_others = num_new - fair;
                num_new = fair;
                first_prompt = false;
            }
            if num_new == 0 {
                step.deferred_prompt_tokens += left_to_others;
                i += 1;
                continue;
            }
            // An image's rows are computed together, even past the budget.
            let num_new = seq.images().chunk_len(seq.num_computed_tokens(), num_new);
            let target = seq.num_computed_tokens() + num_new;
            let table = seq.blocks.as_ref().expect("running sequence holds blocks");
            if self.blocks.can_append(table, target) {
                let seq = self.seqs.get_mut(&id).expect("exists");
                let table = seq.blocks.as_mut().expect("running sequence holds blocks");
                self.blocks.append(table, target).expect("checked");
                step.seqs.push((id, num_new));
                step.tokens = step.tokens.saturating_sub(num_new);
                if prefilling {
                    step.prompt_tokens = step.prompt_tokens.saturating_sub(num_new);
                    step.quotas.spend(seq.caller, num_new);
                    step.deferred_prompt_tokens += left_to_others;
                }
                i += 1;
            } else {
                let victim = *self
                    .running
                    .last()
                    .expect("the current sequence is running");
                self.preempt(victim, &mut out.preempted, &mut step.shares);
            }
        }
    }

    fn build_batch(&self, step: &StepPlan, out: &mut SchedulerOutput) {
        let block_size = self.blocks.block_size();
        for &(id, num_new) in &step.seqs {
            let seq = &self.seqs[&id];
            let start = seq.num_computed_tokens();
            let catches_up = start + num_new == seq.tokens().len();
            let table = seq.block_table().expect("scheduled sequence holds blocks");
            let token_start = out.batch.num_tokens();
            let computed = &seq.tokens()[start..start + num_new];
            let draft = step.drafts.get(&id).cloned().unwrap_or_default();
            let tokens = if draft.is_empty() {
                computed.to_vec()
            } else {
                [computed, &draft].concat()
            };
            out.batch
                .push_sequence_tables(&tokens, start, table.tables(), block_size, false);
            let batch = &mut out.batch;
            seq.images().push_rows(batch, start, num_new, token_start);
            seq.images()
                .push_positions(batch, start, tokens.len(), token_start);
            let prompt_rows = seq.prompt_scoring().map(|scoring| {
                let (logprob_positions, hidden_positions) = scoring.rows(start, num_new);
                let rows = PromptRows {
                    first_logits_row: batch.logits_indices.len(),
                    first_hidden_row: batch.hidden_indices.len(),
                    logprob_positions,
                    hidden_positions,
                };
                let flat = |p: usize| token_start + p - start;
                batch
                    .logits_indices
                    .extend(rows.logprob_positions.clone().map(flat));
                batch
                    .hidden_indices
                    .extend(rows.hidden_positions.clone().map(flat));
                rows
            });
            // A score-only sequence needs its last row's logits only for next-token scores.
            let wants_last_row =
                !seq.scores_only() || seq.prompt_scoring().is_some_and(|p| p.wants_next_token());
            // The last computed token's row, then one per draft token.
            let logits_row = (catches_up && wants_last_row).then(|| {
                let first = batch.logits_indices.len();
                let last_token = token_start + num_new - 1;
                batch
                    .logits_indices
                    .extend(last_token..=last_token + draft.len());
                first
            });
            out.scheduled.push(ScheduledSeq {
                seq_id: id,
                num_new_tokens: num_new,
                logits_row,
                prompt_rows,
                draft,
            });
        }
    }
}

/// One step as it is being planned: what is scheduled so far and what is left.
struct StepPlan {
    /// `(sequence, tokens it computes)`, in batch order.
    seqs: Vec<(SeqId, usize)>,
    /// Tokens left under `max_num_batched_tokens`.
    tokens: usize,
    /// Prompt tokens left under the step time target.
    prompt_tokens: usize,
    /// Each caller's part of the prompt tokens.
    quotas: PromptQuotas,
    /// The census of callers, kept current as sequences are admitted and preempted.
    shares: Shares,
    /// Sequences admitted this step (never preempted in it).
    admitted: HashSet<SeqId>,
    /// Prompt tokens callers left to others' parts.
    deferred_prompt_tokens: usize,
    /// Draft tokens sequences verify this step (see `drafts.rs`).
    drafts: HashMap<SeqId, Vec<u32>>,
}

/// True while a sequence has more than one token to compute (a prompt, or a recompute after
/// preemption); a decoding sequence has exactly one.
fn is_prefilling(seq: &Sequence) -> bool {
    seq.num_uncomputed_tokens() > 1
}

#[cfg(test)]
mod tests;
