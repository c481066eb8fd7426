//! The engine thread: owns the executor (model and KV cache), the scheduler and every sequence.
//!
//! Each loop: take commands from the inbox (sleeping on it when idle), abort requests whose stream
//! was dropped, run one step (schedule, one forward pass, sample, update), deliver events.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use sluice_model::{Batch, KvPools, KvSpan, Logits};
use sluice_text::constraint::{JsonTokenMasks, TokenMasks, TokenTrie};
use sluice_text::Tokenizer;
use thiserror::Error;
use tokio::sync::mpsc;

use crate::block_manager::BlockManager;
use crate::constraint::ConstraintMasks;
use crate::fair_share::FairShareConfig;
use crate::handle::{Command, EngineHandle, RequestId, Shared};
use crate::metrics::EngineMetrics;
use crate::outbox::{flush, Flush, RequestState};
use crate::output_text::OutputText;
use crate::queue::DEFAULT_AGING_RATE;
use crate::request::{Event, FinishReason, GenerationRequest, ResponseFormat, Usage};
use crate::sampler::sample;
use crate::scheduler::{ModelOutput, ScheduledSeq, Scheduler, SchedulerConfig, SchedulerOutput};
use crate::sequence::{SeqId, Sequence, SequenceSpec, SequenceStatus};

/// How long an otherwise idle engine waits before retrying events a slow client has not taken.
const REDELIVERY_INTERVAL: Duration = Duration::from_millis(2);

/// Runs forward passes for the engine; the model and its KV cache live behind it.
pub trait Executor: Send + 'static {
    /// Runs one forward pass; returns logits for `batch.logits_indices` rows.
    fn execute(&mut self, batch: &Batch) -> Result<Logits, ExecutorError>;
    /// Columns of every logits row.
    fn vocab_size(&self) -> usize;
    /// Tokens per KV block.
    fn block_size(&self) -> usize;
    /// The KV spec: one block pool per KV group (see `sluice_model::kv_layout`), the
    /// full-attention group's first. The engine's block manager keeps a pool of as many blocks
    /// per group and gives every sequence a block table in each.
    fn kv_pools(&self) -> KvPools;
}

/// A forward pass failed; the sequences in that step finish with `error`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExecutorError {
    /// The model refused the batch.
    #[error(transparent)]
    Model(#[from] sluice_model::ForwardError),
    /// Another executor reported a failure.
    #[error("forward pass failed: {0}")]
    Forward(String),
    /// The model returned logits of the wrong shape.
    #[error("model returned {rows} rows of {vocab} logits; {expected_rows} rows of {expected_vocab} were asked for")]
    WrongLogitsShape {
        /// Rows returned.
        rows: usize,
        /// Columns returned.
        vocab: usize,
        /// Rows asked for.
        expected_rows: usize,
        /// The executor's vocabulary size.
        expected_vocab: usize,
    },
    /// The model returned a different number of hidden-state rows than were asked for.
    #[error("model returned {floats} hidden-state floats for {expected_rows} rows")]
    WrongHiddenShape {
        /// Floats returned.
        floats: usize,
        /// Rows asked for.
        expected_rows: usize,
    },
}

/// Default [`EngineConfig::step_time_target`]: a quarter second between tokens is still a
/// fluent stream, and the prompt share of such a step keeps matrix shapes large enough to run
/// at full speed on a CPU.
pub const DEFAULT_STEP_TIME_TARGET: Duration = Duration::from_millis(250);

/// Engine limits and switches.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Most sequences running at once.
    pub max_num_seqs: usize,
    /// Most tokens computed in one step (prefill chunks are cut to fit).
    pub max_num_batched_tokens: usize,
    /// Most sequences waiting to start; beyond it submissions get `QueueFull`.
    pub max_queue: usize,
    /// Reuse the KV of identical prompt prefixes.
    pub enable_prefix_caching: bool,
    /// Effective priority gained per second of waiting.
    pub aging_rate: f64,
    /// Context length: a sequence ends with `length` when it holds this many tokens.
    pub max_model_len: usize,
    /// Token ids that end generation (the model's generation config).
    pub eos_token_ids: Vec<u32>,
    /// While sequences decode, size prefill chunks so a step takes about this long (learned
    /// from measured steps): bounds the inter-token latency a new prompt causes. `None`: steps
    /// are bounded by `max_num_batched_tokens` alone.
    pub step_time_target: Option<Duration>,
    /// How running seats are shared between callers (`GenerationRequest::caller`).
    pub fair_share: FairShareConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_num_seqs: 64,
            // A CPU step over 256 tokens keeps running streams moving while a prompt prefills.
            max_num_batched_tokens: 256,
            max_queue: 1024,
            enable_prefix_caching: true,
            aging_rate: DEFAULT_AGING_RATE,
            max_model_len: 4096,
            eos_token_ids: Vec::new(),
            step_time_target: Some(DEFAULT_STEP_TIME_TARGET),
            fair_share: FairShareConfig::default(),
        }
    }
}

/// Starts engines.
#[derive(Debug)]
pub struct Engine;

impl Engine {
    /// Starts the engine thread over `executor` and returns a handle to it.
    pub fn start(
        executor: Box<dyn Executor>,
        tokenizer: Arc<Tokenizer>,
        config: EngineConfig,
    ) -> EngineHandle {
        let metrics = Arc::new(EngineMetrics::default());
        let shared = Arc::new(Shared::new(metrics, config.max_queue));
        let (inbox_tx, inbox_rx) = crossbeam_channel::bounded(config.max_queue.max(1));
        let thread_shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("sluice-engine".to_string())
            .spawn(move || {
                let _alive = AliveGuard(Arc::clone(&thread_shared));
                EngineLoop::new(executor, tokenizer, config, thread_shared, inbox_rx).run();
            });
        if let Err(e) = spawned {
            tracing::error!("could not start the engine thread: {e}");
            shared.alive.store(false, Ordering::Release);
        }
        EngineHandle {
            inbox: inbox_tx,
            shared,
        }
    }
}

/// Marks the engine dead when its thread ends, normally or by panic.
struct AliveGuard(Arc<Shared>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::Release);
    }
}

struct EngineLoop {
    executor: Box<dyn Executor>,
    tokenizer: Arc<Tokenizer>,
    eos_token_ids: Arc<[u32]>,
    scheduler: Scheduler,
    shared: Arc<Shared>,
    inbox: Receiver<Command>,
    requests: HashMap<RequestId, RequestState>,
    next_seq_id: SeqId,
    draining: bool,
    /// The KV group of the sliding-window layers, for a model that has them.
    window_group: Option<usize>,
    /// The vocabulary trie for constrained decoding, built on the first request that needs it.
    token_trie: Option<Arc<TokenTrie>>,
    /// `json_object` masks over it, shared by every such request.
    json_object_masks: Option<Arc<JsonTokenMasks>>,
}

impl EngineLoop {
    fn new(
        executor: Box<dyn Executor>,
        tokenizer: Arc<Tokenizer>,
        config: EngineConfig,
        shared: Arc<Shared>,
        inbox: Receiver<Command>,
    ) -> Self {
        let pools = executor.kv_pools();
        let blocks =
            BlockManager::for_pools(&pools, executor.block_size(), config.enable_prefix_caching);
        let scheduler = Scheduler::new(
            SchedulerConfig {
                // Zero would leave work waiting forever; one is the least that makes progress.
                max_num_seqs: config.max_num_seqs.max(1),
                max_num_batched_tokens: config.max_num_batched_tokens.max(1),
                max_model_len: config.max_model_len,
                // The handle bounds new requests; the scheduler's own bound only guards it.
                max_queue: usize::MAX,
                aging_rate: config.aging_rate,
                step_time_target: config.step_time_target.filter(|t| !t.is_zero()),
                fair_share: config.fair_share,
            },
            blocks,
        );
        let m = &shared.metrics;
        EngineMetrics::set(&m.kv_blocks_total, pools.num_blocks());
        let window_blocks = pools.window().map_or(0, |w| w.num_blocks);
        EngineMetrics::set(&m.kv_window_blocks_total, window_blocks);
        EngineMetrics::set(&m.block_size, executor.block_size());
        EngineLoop {
            eos_token_ids: config.eos_token_ids.clone().into(),
            executor,
            tokenizer,
            scheduler,
            shared,
            inbox,
            requests: HashMap::new(),
            next_seq_id: 0,
            draining: false,
            window_group: (pools.groups.iter()).position(|p| matches!(p.span, KvSpan::Window(_))),
            token_trie: None,
            json_object_masks: None,
        }
    }

    fn run(mut self) {
        loop {
            self.receive_commands();
            self.abort_closed_requests();
            if !self.scheduler.is_idle() {
                self.step();
            }
            // Gauges first: a client that has its event and then scrapes /metrics must see the
            // step that produced it (the other order made a test flaky under load).
            self.publish_gauges();
            self.deliver_events();
            if self.draining && self.scheduler.is_idle() && self.requests.is_empty() {
                break;
            }
        }
    }

    /// Takes every queued command; sleeps on the inbox when there is nothing else to do.
    fn receive_commands(&mut self) {
        if !self.shared.accepting.load(Ordering::Acquire) {
            self.draining = true;
        }
        if self.scheduler.is_idle() {
            if let Some(command) = self.wait_for_command() {
                self.handle(command);
            }
        }
        while let Ok(command) = self.inbox.try_recv() {
            self.handle(command);
        }
    }

    /// With nothing to compute: sleeps on the inbox, or only briefly when events still wait for
    /// a slow client.
    fn wait_for_command(&mut self) -> Option<Command> {
        let received = if !self.requests.is_empty() {
            self.inbox.recv_timeout(REDELIVERY_INTERVAL)
        } else if !self.draining {
            self.inbox
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            return None;
        };
        match received {
            Ok(command) => Some(command),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                self.draining = true;
                if !self.requests.is_empty() {
                    std::thread::sleep(REDELIVERY_INTERVAL);
                }
                None
            }
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Shutdown => self.draining = true,
            Command::Add {
                id,
                request,
                events,
                arrival,
            } => self.add_request(id, *request, events, arrival),
        }
    }

    fn add_request(
        &mut self,
        id: RequestId,
        request: GenerationRequest,
        events: mpsc::Sender<Event>,
        arrival: Instant,
    ) {
        let n = request.n.max(1);
        EngineMetrics::add(
            &self.shared.metrics.prompt_tokens,
            request.prompt_tokens.len() as u64,
        );
        self.requests
            .insert(id, RequestState::new(events, request.task(), n as usize));
        let masks = self.constraint_masks(&request.sampling.response_format);
        let sampling = Arc::new(request.sampling);
        let stop = Arc::new(request.stop);
        for choice in 0..n {
            let seq_id = self.next_seq_id;
            self.next_seq_id += 1;
            let text = OutputText::new(
                Arc::clone(&self.tokenizer),
                &request.prompt_tokens,
                stop.stop_strings.clone(),
            )
            .keeping_special(&stop.kept_special_tokens);
            let seq = Sequence::new(SequenceSpec {
                id: seq_id,
                request_id: id,
                choice,
                priority: request.priority,
                arrival,
                prompt: request.prompt_tokens.clone(),
                sampling: Arc::clone(&sampling),
                stop: Arc::clone(&stop),
                eos_token_ids: Arc::clone(&self.eos_token_ids),
                text: Some(text),
                constraint: masks.as_ref().map(ConstraintMasks::start),
                cache_salt: request.cache_salt,
            });
            // The prompt is the same for every choice: the first one scores it.
            let seq = seq.with_caller(request.caller);
            let seq = if choice == 0 {
                seq.with_prompt_outputs(request.prompt_outputs.clone())
            } else {
                seq
            };
            if request.prompt_tokens.is_empty() {
                self.finish_unscheduled(seq, "the prompt is empty");
            } else if !self.scheduler.has_queue_room() {
                self.finish_unscheduled(seq, "the waiting queue is full");
            } else if let Err(full) = self.scheduler.add(seq) {
                tracing::error!("request {id} choice {choice}: {full}");
            }
        }
    }

    /// The masks a request's choices share for its `response_format`, if it has one.
    fn constraint_masks(&mut self, format: &ResponseFormat) -> Option<ConstraintMasks> {
        match format {
            ResponseFormat::Text => None,
            ResponseFormat::JsonObject => {
                let trie = self.token_trie();
                let masks = self
                    .json_object_masks
                    .get_or_insert_with(|| Arc::new(JsonTokenMasks::json_object(trie)));
                Some(ConstraintMasks::JsonObject(Arc::clone(masks)))
            }
            ResponseFormat::JsonSchema(schema) => {
                let masks = TokenMasks::new(self.token_trie(), Arc::clone(schema));
                Some(ConstraintMasks::JsonSchema(Arc::new(masks)))
            }
            ResponseFormat::ToolCalls(rules) => {
                let masks = TokenMasks::new(self.token_trie(), Arc::clone(rules));
                Some(ConstraintMasks::ToolCalls(Arc::new(masks)))
            }
        }
    }

    /// The model's vocabulary trie for constrained decoding (built once: a pass over the
    /// vocabulary, ~90 ms for 152k tokens).
    fn token_trie(&mut self) -> Arc<TokenTrie> {
        let (tokenizer, vocab_size) = (&self.tokenizer, self.executor.vocab_size());
        let trie = self.token_trie.get_or_insert_with(|| {
            let started = Instant::now();
            let trie = TokenTrie::new(tokenizer.token_bytes(), vocab_size);
            let ms = started.elapsed().as_secs_f64() * 1e3;
            tracing::info!(ms, "built the vocabulary trie for constrained decoding");
            Arc::new(trie)
        });
        Arc::clone(trie)
    }

    /// Finishes a sequence that never entered the scheduler with an error.
    fn finish_unscheduled(&mut self, mut seq: Sequence, message: &str) {
        self.release_queue_slot(&seq);
        seq.finish(FinishReason::Error, Some(message.to_string()));
        self.record_finished(seq, Instant::now());
    }

    /// Aborts every request whose stream was dropped; their blocks return immediately.
    fn abort_closed_requests(&mut self) {
        let closed: Vec<RequestId> = self
            .requests
            .iter()
            .filter(|(_, r)| r.events.is_closed())
            .map(|(&id, _)| id)
            .collect();
        for id in closed {
            for seq in self.scheduler.abort_request(id) {
                self.release_queue_slot(&seq);
                EngineMetrics::add(&self.shared.metrics.requests_finished, 1);
            }
            self.requests.remove(&id);
            self.shared.unfinished.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// A sequence that leaves without ever being scheduled frees its place in the queue bound.
    fn release_queue_slot(&self, seq: &Sequence) {
        if seq.first_scheduled_at.is_none() {
            self.shared.queued_seqs.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn step(&mut self) {
        // The prefix cache's changes since the last step: a publisher (KV events for a router,
        // a disk tier) takes them here; until one is configured they are dropped, so the sink
        // never grows.
        drop(self.scheduler.drain_kv_events());
        let now = Instant::now();
        let out = self.scheduler.schedule(now);
        let m = Arc::clone(&self.shared.metrics);
        EngineMetrics::add(&m.preemptions, out.preempted.len() as u64);
        EngineMetrics::add(&m.prefix_cache_queries, out.prefix_cache_queries);
        EngineMetrics::add(&m.prefix_cache_hits, out.prefix_cache_hits);
        EngineMetrics::add(&m.fair_share_deferred, out.fair_share_deferred);
        EngineMetrics::add(&m.fair_share_preempted, out.fair_share_preempted);
        for &id in &out.first_scheduled {
            self.shared.queued_seqs.fetch_sub(1, Ordering::AcqRel);
            if let Some(seq) = self.scheduler.sequence(id) {
                m.request_queue_time.observe(now - seq.arrival);
            }
        }
        for &id in &out.rejected {
            self.collect_finished(id, now);
        }
        if out.is_empty() {
            return;
        }
        let scheduled_at = Instant::now();
        EngineMetrics::add_duration(&m.step_times.schedule_ns, scheduled_at - now);
        EngineMetrics::add(&m.step_times.steps, 1);
        EngineMetrics::add(&m.step_times.tokens, out.batch.num_tokens() as u64);
        let result = self.execute(&out);
        let executed_at = Instant::now();
        EngineMetrics::add_duration(&m.step_times.forward_ns, executed_at - scheduled_at);
        match result {
            Ok(logits) => {
                self.process_logits(&out, &logits);
                EngineMetrics::add_duration(&m.step_times.sample_ns, executed_at.elapsed());
                let elapsed = now.elapsed();
                tracing::trace!(
                    tokens = out.batch.num_tokens(),
                    logit_rows = out.batch.logits_indices.len(),
                    ms = elapsed.as_secs_f64() * 1e3,
                    "step"
                );
                self.scheduler.observe_step(&out, elapsed);
            }
            Err(e) => {
                tracing::error!("step failed: {e}");
                let now = Instant::now();
                for id in self.scheduler.fail_step(&out, &e.to_string()) {
                    self.collect_finished(id, now);
                }
            }
        }
    }

    fn execute(&mut self, out: &SchedulerOutput) -> Result<Logits, ExecutorError> {
        let logits = self.executor.execute(&out.batch)?;
        let expected_rows = out.batch.logits_indices.len();
        let expected_vocab = self.executor.vocab_size();
        if logits.rows() != expected_rows
            || logits.vocab_size != expected_vocab
            || logits.data.len() != expected_rows * expected_vocab
        {
            return Err(ExecutorError::WrongLogitsShape {
                rows: logits.rows(),
                vocab: logits.vocab_size,
                expected_rows,
                expected_vocab,
            });
        }
        let expected_rows = out.batch.hidden_indices.len();
        if logits.hidden.len() != expected_rows * logits.hidden_size
            || (expected_rows > 0 && logits.hidden_size == 0)
        {
            return Err(ExecutorError::WrongHiddenShape {
                floats: logits.hidden.len(),
                expected_rows,
            });
        }
        Ok(logits)
    }

    fn process_logits(&mut self, out: &SchedulerOutput, logits: &Logits) {
        let mut samples = Vec::new();
        let mut previous_token_at = Vec::new();
        for s in &out.scheduled {
            let Some(seq) = self.scheduler.sequence_mut(s.seq_id) else {
                continue;
            };
            let next_token_row = s.logits_row.filter(|_| ends_prompt(s, seq));
            if let (Some(rows), Some(scoring)) = (&s.prompt_rows, seq.prompt_scoring_mut()) {
                scoring.record(logits, rows, next_token_row);
                if scoring.is_complete() {
                    let scores = seq.take_prompt_scores().map(Box::new);
                    let (request_id, choice) = (seq.request_id, seq.choice as usize);
                    if let Some(r) = self.requests.get_mut(&request_id) {
                        r.choices[choice].prompt = scores;
                    }
                }
            }
            let Some(row) = s.logits_row.filter(|_| !seq.scores_only()) else {
                continue;
            };
            previous_token_at.push((s.seq_id, seq.last_token_at));
            let (params, ctx, rng) = seq.sampling_inputs();
            let drawn = sample(logits.row(row), params, ctx, rng).map_err(|e| e.to_string());
            samples.push((s.seq_id, drawn));
        }
        let now = Instant::now();
        let finished = self
            .scheduler
            .update_from_output(out, ModelOutput { samples }, now);
        let m = Arc::clone(&self.shared.metrics);
        for (id, previous) in previous_token_at {
            let Some(seq) = self.scheduler.sequence_mut(id) else {
                continue;
            };
            if seq.last_token_at == Some(now) {
                EngineMetrics::add(&m.generation_tokens, 1);
                match previous {
                    Some(t) => m.inter_token_latency.observe(now - t),
                    None => m.time_to_first_token.observe(now - seq.arrival),
                }
            }
            let pending = seq.take_pending();
            let (request_id, choice) = (seq.request_id, seq.choice as usize);
            if let Some(r) = self.requests.get_mut(&request_id) {
                r.choices[choice].delta.merge(pending);
            }
        }
        for id in finished {
            self.collect_finished(id, now);
        }
    }

    /// Takes a finished sequence out of the scheduler and queues its last events.
    fn collect_finished(&mut self, id: SeqId, now: Instant) {
        if let Some(seq) = self.scheduler.remove(id) {
            self.release_queue_slot(&seq);
            self.record_finished(seq, now);
        }
    }

    fn record_finished(&mut self, mut seq: Sequence, now: Instant) {
        let m = &self.shared.metrics;
        EngineMetrics::add(&m.requests_finished, 1);
        m.e2e_request_latency.observe(now - seq.arrival);
        let SequenceStatus::Finished { reason, error } = seq.status().clone() else {
            return;
        };
        let usage = Usage {
            prompt_tokens: seq.prompt().len() as u32,
            completion_tokens: seq.output().len() as u32,
            cached_prompt_tokens: seq.num_cached_prompt_tokens as u32,
        };
        let queue_time = seq
            .first_scheduled_at
            .map_or(now - seq.arrival, |t| t - seq.arrival);
        let stop_string = seq.stop_string().map(str::to_owned);
        let pending = seq.take_pending();
        if let Some(r) = self.requests.get_mut(&seq.request_id) {
            if matches!(reason, FinishReason::Stop | FinishReason::Length) {
                self.shared.metrics.count_success(r.task);
            }
            let outbox = &mut r.choices[seq.choice as usize];
            outbox.delta.merge(pending);
            outbox.finished = Some(Event::Finished {
                choice: seq.choice,
                reason,
                error,
                stop_string,
                usage,
                queue_time,
            });
        }
    }

    /// Sends what each request's channel will take; the rest waits for a later loop.
    fn deliver_events(&mut self) {
        let mut done = Vec::new();
        for (&id, request) in self.requests.iter_mut() {
            match flush(request, &self.shared.unfinished) {
                Flush::AllDelivered => done.push(id),
                Flush::Pending => {}
                // Noticed (and aborted) at the next loop's `abort_closed_requests`.
                Flush::Closed => {}
            }
        }
        // (`flush` took each of these off the unfinished count as it sent the last event.)
        for id in done {
            self.requests.remove(&id);
        }
    }

    fn publish_gauges(&self) {
        let m = &self.shared.metrics;
        EngineMetrics::set(&m.running, self.scheduler.num_running());
        EngineMetrics::set(&m.waiting, self.scheduler.num_waiting());
        let callers = self.scheduler.callers();
        EngineMetrics::set(&m.active_callers, callers.active_callers());
        EngineMetrics::set(&m.max_running_per_caller, callers.max_running());
        EngineMetrics::set(
            &m.kv_blocks_used,
            self.scheduler.block_manager().num_used_blocks(),
        );
        let blocks = self.scheduler.block_manager();
        if let Some(window) = (self.window_group).map(|g| blocks.group_blocks(g)) {
            EngineMetrics::set(&m.kv_window_blocks_used, window.0 - window.1);
        }
    }
}

/// True when the scheduled chunk's last token is the last prompt token (its logits score the
/// token after the prompt). Read before the chunk is counted as computed.
fn ends_prompt(s: &ScheduledSeq, seq: &Sequence) -> bool {
    seq.num_computed_tokens() + s.num_new_tokens == seq.prompt().len()
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
