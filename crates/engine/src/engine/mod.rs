//! The engine thread: owns the executor (model and KV cache), the scheduler and every sequence.
//!
//! Each loop: take commands from the inbox (sleeping on it when idle), abort requests whose stream
//! was dropped, run one step (schedule, one forward pass, sample, update), deliver events.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use sluice_model::KvSpan;
use sluice_text::constraint::{JsonTokenMasks, TokenTrie};
use sluice_text::Tokenizer;

use crate::block_manager::{BlockManager, KvEvent};
use crate::executor::Executor;
use crate::fair_share::FairShareConfig;
use crate::handle::{Command, EngineHandle, RequestId, Shared};
use crate::kv_disk::ModelDisk;
use crate::kv_events::{KvEventSink, Medium};
use crate::metrics::EngineMetrics;
use crate::outbox::RequestState;
use crate::queue::DEFAULT_AGING_RATE;
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::sequence::{SeqId, Sequence};
use crate::speculation::SpeculationConfig;

/// How long an otherwise idle engine waits before retrying events a slow client has not taken.
const REDELIVERY_INTERVAL: Duration = Duration::from_millis(2);

/// Default [`EngineConfig::step_time_target`]: ten tokens a second is still a fluent stream.
/// At 16 streams of 128-token prompts (Qwen2.5-0.5B shape, 2 cores) it halves the inter-token
/// p99 of 250 ms (270 -> 125 ms) for a 60% longer median time to first token (0.30 -> 0.49 s),
/// at the same throughput.
pub const DEFAULT_STEP_TIME_TARGET: Duration = Duration::from_millis(100);

/// Default [`EngineConfig::prefill_share`]: prompts and decodes get the machine in equal parts
/// while both have work, so neither slows by much more than 2x because of the other.
pub const DEFAULT_PREFILL_SHARE: f64 = 0.5;

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
    /// The least share of a step's time prompts get while sequences decode, in (0, 1): a long
    /// prompt slows the streams by at most 1 / (1 - share) and runs at no less than this share
    /// of its speed alone.
    pub prefill_share: f64,
    /// How running seats are shared between callers (`GenerationRequest::caller`).
    pub fair_share: FairShareConfig,
    /// The prefix cache's disk tier for this model (`--kv-disk-cache`), if any.
    pub kv_disk: Option<ModelDisk>,
    /// Where this model's KV events are published (`--kv-events`), if anywhere.
    pub kv_events: Option<KvEventSink>,
    /// Speculative decoding (`--speculative`), if on: decoding sequences verify draft tokens
    /// where they pay; outputs are the same as without.
    pub speculation: Option<SpeculationConfig>,
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
            prefill_share: DEFAULT_PREFILL_SHARE,
            fair_share: FairShareConfig::default(),
            kv_disk: None,
            kv_events: None,
            speculation: None,
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
        Self::start_with_draft(executor, None, tokenizer, config)
    }

    /// [`Engine::start`] with the draft model `config.speculation` names
    /// (`ProposerSpec::DraftModel`), loaded by the caller: an executor of its own model and KV
    /// cache, of the same vocabulary.
    pub fn start_with_draft(
        executor: Box<dyn Executor>,
        draft: Option<Box<dyn Executor>>,
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
                EngineLoop::new(executor, draft, tokenizer, config, thread_shared, inbox_rx).run();
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
        // No step will come: every encoding runs.
        self.0.encode_gate.set_busy(false);
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
    /// Where the prefix cache's blocks are written through to (and read back from).
    kv_disk: Option<ModelDisk>,
    /// Where the prefix cache's changes are published.
    kv_events: Option<KvEventSink>,
    /// The KV group of the sliding-window layers, for a model that has them.
    window_group: Option<usize>,
    /// The vocabulary trie for constrained decoding, built on the first request that needs it.
    token_trie: Option<Arc<TokenTrie>>,
    /// `json_object` masks over it, shared by every such request.
    json_object_masks: Option<Arc<JsonTokenMasks>>,
}

impl EngineLoop {
    /// The loop over `executor`; `draft` is the draft model `config.speculation` names, if it
    /// names one (the proposer is built here, on the engine thread, beside the scheduler).
    fn new(
        executor: Box<dyn Executor>,
        draft: Option<Box<dyn Executor>>,
        tokenizer: Arc<Tokenizer>,
        config: EngineConfig,
        shared: Arc<Shared>,
        inbox: Receiver<Command>,
    ) -> Self {
        let pools = executor.kv_pools();
        let mut blocks =
            BlockManager::for_pools(&pools, executor.block_size(), config.enable_prefix_caching);
        let kv_disk = config.kv_disk.filter(|_| config.enable_prefix_caching);
        if let Some(disk) = &kv_disk {
            blocks.set_lower_tier(Box::new(disk.clone()));
            let _ = shared.metrics.kv_disk.set(disk.clone());
        }
        let kv_events = config.kv_events.filter(|_| config.enable_prefix_caching);
        if let Some(sink) = &kv_events {
            let _ = shared.metrics.kv_events.set(sink.clone());
        }
        let mut scheduler = Scheduler::new(
            SchedulerConfig {
                // Zero would leave work waiting forever; one is the least that makes progress.
                max_num_seqs: config.max_num_seqs.max(1),
                max_num_batched_tokens: config.max_num_batched_tokens.max(1),
                max_model_len: config.max_model_len,
                // The handle bounds new requests; the scheduler's own bound only guards it.
                max_queue: usize::MAX,
                aging_rate: config.aging_rate,
                step_time_target: config.step_time_target.filter(|t| !t.is_zero()),
                prefill_share: config.prefill_share,
                fair_share: config.fair_share,
            },
            blocks,
        );
        if let Some(speculation) = &config.speculation {
            let target_blocks = pools.num_blocks();
            match (speculation.proposer).build(draft, executor.vocab_size(), target_blocks) {
                Ok(proposer) => scheduler.speculate(proposer, speculation),
                Err(why) => tracing::error!("{why}: serving without speculation"),
            }
        }
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
            kv_disk,
            kv_events,
            window_group: (pools.groups.iter()).position(|p| matches!(p.span, KvSpan::Window(_))),
            token_trie: None,
            json_object_masks: None,
        }
    }

    fn run(mut self) {
        loop {
            self.receive_commands();
            // The heartbeat: after the wait for work, so an idle spell is not read as a hang.
            self.shared.loop_turned();
            self.abort_closed_requests();
            if !self.scheduler.is_idle() {
                // With steps to run, one image encoding at a time runs beside them.
                self.shared.encode_gate.set_busy(true);
                self.step();
            }
            self.publish_kv_events();
            // Gauges first: a client that has its event and then scrapes /metrics must see the
            // step that produced it (the other order made a test flaky under load).
            self.publish_gauges();
            self.deliver_events();
            if self.draining && self.scheduler.is_idle() && self.requests.is_empty() {
                break;
            }
        }
        // Every block registered is queued for the disk by now: wait until it is written.
        if let Some(disk) = &self.kv_disk {
            disk.flush();
        }
        // The pool this engine's blocks lived in goes away with it.
        if let Some(sink) = &self.kv_events {
            sink.publish(Medium::Memory, vec![KvEvent::AllCleared]);
        }
    }

    /// Hands the prefix cache's changes since the last call to their consumers: the KV event
    /// stream gets them all; each newly stored block the disk tier lacks is copied out of the KV
    /// cache and queued for writing. Runs between steps, so every stored block still holds the
    /// content it was stored with.
    fn publish_kv_events(&mut self) {
        let events = self.scheduler.drain_kv_events();
        if events.is_empty() {
            return;
        }
        let Some(disk) = &self.kv_disk else {
            if let Some(sink) = &self.kv_events {
                sink.publish(Medium::Memory, events);
            }
            return;
        };
        for event in &events {
            let KvEvent::Stored {
                group,
                block_hashes,
                parent,
                ..
            } = event
            else {
                continue;
            };
            for (i, &key) in block_hashes.iter().enumerate() {
                if !disk.wants(*group, key) {
                    continue;
                }
                let Some(cached) = self.scheduler.cached_block(*group, key) else {
                    continue;
                };
                let mut payload = Vec::with_capacity(self.executor.block_bytes(*group));
                self.executor.save_block(*group, cached.block, &mut payload);
                // A chain's first block has no parent in the events (its parent key is the
                // chain's root, which names the cache scope).
                let event_parent = if i == 0 {
                    *parent
                } else {
                    Some(block_hashes[i - 1])
                };
                disk.save(
                    *group,
                    key,
                    cached.parent,
                    event_parent,
                    cached.tokens,
                    payload,
                );
            }
        }
        if let Some(sink) = &self.kv_events {
            sink.publish(Medium::Memory, events);
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
        // No step to run: every waiting image encoding runs until the next one.
        self.shared.encode_gate.set_busy(false);
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
        let now = Instant::now();
        let out = self.scheduler.schedule(now);
        let m = Arc::clone(&self.shared.metrics);
        EngineMetrics::add(&m.preemptions, out.preempted.len() as u64);
        EngineMetrics::add(&m.prefix_cache_queries, out.prefix_cache_queries);
        EngineMetrics::add(&m.prefix_cache_hits, out.prefix_cache_hits);
        EngineMetrics::add(&m.prefix_cache_disk_hits, out.prefix_cache_lower_hits);
        EngineMetrics::add(&m.fair_share_deferred, out.fair_share_deferred);
        EngineMetrics::add(&m.fair_share_preempted, out.fair_share_preempted);
        EngineMetrics::add(
            &m.fair_share_prompt_tokens_deferred,
            out.fair_share_prompt_tokens_deferred,
        );
        for &id in &out.first_scheduled {
            self.shared.queued_seqs.fetch_sub(1, Ordering::AcqRel);
            if let Some(seq) = self.scheduler.sequence(id) {
                m.request_queue_time.observe(now - seq.arrival);
                if let Some(r) = self.requests.get_mut(&seq.request_id) {
                    r.choices[seq.choice as usize].scheduled =
                        Some(seq.num_cached_prompt_tokens as u32);
                }
            }
        }
        // Newly scheduled requests hear so before their first forward pass, which for a long
        // prompt is the longest wait (a Messages stream opens with `message_start` then).
        if !out.first_scheduled.is_empty() {
            self.deliver_events();
        }
        for &id in &out.rejected {
            self.collect_finished(id, now);
        }
        // Blocks read back from the disk tier land in the KV cache before anything reads them
        // (their sizes were checked when read, so this does not fail for a sound executor).
        for load in &out.kv_loads {
            if let Err(e) = self
                .executor
                .load_block(load.group, load.block, &load.bytes)
            {
                tracing::error!("a KV block read from disk could not be loaded: {e}");
            }
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
                self.scheduler.observe_step(&out, now.elapsed());
            }
            Err(e) => {
                tracing::error!("step failed: {e}");
                let now = Instant::now();
                for (id, _) in self.scheduler.fail_step(&out, &e).finished {
                    self.collect_finished(id, now);
                }
            }
        }
    }
}

mod intake;
mod results;

#[cfg(test)]
mod disk_tests;
#[cfg(test)]
mod event_tests;
#[cfg(test)]
mod tests;
