//! The caller's side of the engine: submit requests, read their event streams, read metrics.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::TrySendError;
use thiserror::Error;
use tokio::sync::mpsc;

use crate::encode_gate::EncodeGate;
use crate::metrics::EngineMetrics;
use crate::outbox::FINAL_EVENTS_PER_CHOICE;
use crate::request::{Event, GenerationRequest};

/// Events buffered per request before the engine starts coalescing deltas.
pub(crate) const EVENT_CHANNEL_CAPACITY: usize = 64;

/// Identifies a request inside the engine.
pub type RequestId = u64;

/// Why a request was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SubmitError {
    /// The waiting queue (or the engine's inbox) is full; try again later (HTTP 429).
    #[error("the engine queue is full")]
    QueueFull,
    /// The engine is shutting down or its thread has died.
    #[error("the engine has shut down")]
    ShutDown,
    /// A group has more requests than the engine's inbox holds (its `max_queue`): it could
    /// never be admitted, so retrying is pointless (HTTP 400).
    #[error("a group of {requests} requests exceeds the limit of {limit}")]
    GroupTooLarge {
        /// Requests in the group.
        requests: usize,
        /// Most requests one group may have.
        limit: usize,
    },
}

/// A message to the engine thread.
#[derive(Debug)]
pub(crate) enum Command {
    /// A new request and the sending half of its event stream.
    Add {
        id: RequestId,
        request: Box<GenerationRequest>,
        events: mpsc::Sender<Event>,
        arrival: Instant,
    },
    /// Stop accepting, finish accepted work, exit.
    Shutdown,
}

/// State shared by every handle and the engine thread.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) metrics: Arc<EngineMetrics>,
    /// False once the engine thread has exited (normally or by panic).
    pub(crate) alive: AtomicBool,
    /// False once shutdown was asked for.
    pub(crate) accepting: AtomicBool,
    /// Sequences submitted but never yet scheduled (in the inbox or the waiting queue).
    pub(crate) queued_seqs: AtomicUsize,
    /// Requests submitted and not yet fully finished.
    pub(crate) unfinished: AtomicUsize,
    pub(crate) max_queue: usize,
    next_id: AtomicU64,
    /// The origin of `loop_turned_ms`.
    origin: Instant,
    /// Milliseconds after `origin` when the engine loop last came round: took its commands
    /// (after any wait for work) to start an iteration. While the engine has work, how long ago
    /// that was is how long the iteration in progress has run; the liveness probe reads it.
    loop_turned_ms: AtomicU64,
    /// Where the model's image encodings share the CPU with the steps.
    pub(crate) encode_gate: Arc<EncodeGate>,
}

impl Shared {
    pub(crate) fn new(metrics: Arc<EngineMetrics>, max_queue: usize) -> Self {
        Shared {
            alive: AtomicBool::new(true),
            accepting: AtomicBool::new(true),
            queued_seqs: AtomicUsize::new(0),
            unfinished: AtomicUsize::new(0),
            max_queue,
            next_id: AtomicU64::new(0),
            origin: Instant::now(),
            loop_turned_ms: AtomicU64::new(0),
            encode_gate: EncodeGate::counting_into(Arc::clone(&metrics)),
            metrics,
        }
    }

    /// Records that the engine loop came round (called once per iteration).
    pub(crate) fn loop_turned(&self) {
        let ms = self.origin.elapsed().as_millis() as u64;
        self.loop_turned_ms.store(ms, Ordering::Release);
    }

    /// While requests are unfinished: how long before `now` the loop last came round.
    fn iteration_age_at(&self, now: Instant) -> Option<Duration> {
        // Work first: a request handed to an idle engine is work before the engine wakes.
        if self.unfinished.load(Ordering::Acquire) == 0 {
            return None;
        }
        let turned =
            self.origin + Duration::from_millis(self.loop_turned_ms.load(Ordering::Acquire));
        Some(now.saturating_duration_since(turned))
    }

    /// Reserves queue room for `n` sequences; a request alone in an empty queue always fits.
    fn reserve(&self, n: usize) -> bool {
        self.queued_seqs
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                (q == 0 || q + n <= self.max_queue).then_some(q + n)
            })
            .is_ok()
    }
}

/// A cheap, cloneable handle to a running engine. `Send + Sync`.
#[derive(Debug, Clone)]
pub struct EngineHandle {
    pub(crate) inbox: crossbeam_channel::Sender<Command>,
    pub(crate) shared: Arc<Shared>,
}

impl EngineHandle {
    /// Queues a request and returns its event stream. Never blocks.
    pub fn submit(&self, request: GenerationRequest) -> Result<RequestStream, SubmitError> {
        let mut streams = self.submit_all(vec![request])?;
        Ok(streams.remove(0))
    }

    /// Queues several requests that stand or fall together (the prompts of one completion
    /// request) and returns their event streams in order. Queue room is reserved for all of
    /// their sequences at once, so a group larger than the queue is still admitted whole when
    /// the queue is empty, as a single large request is, instead of being refused forever.
    /// If one cannot be handed to the engine, those already handed over are dropped (and so
    /// aborted). Never blocks.
    pub fn submit_all(
        &self,
        requests: Vec<GenerationRequest>,
    ) -> Result<Vec<RequestStream>, SubmitError> {
        if !self.is_alive() || !self.shared.accepting.load(Ordering::Acquire) {
            return Err(SubmitError::ShutDown);
        }
        let limit = self.inbox.capacity().unwrap_or(usize::MAX);
        if requests.len() > limit {
            return Err(SubmitError::GroupTooLarge {
                requests: requests.len(),
                limit,
            });
        }
        let total: usize = requests.iter().map(|r| r.n.max(1) as usize).sum();
        if !self.shared.reserve(total) {
            return Err(SubmitError::QueueFull);
        }
        let mut unsent = total;
        let mut streams = Vec::with_capacity(requests.len());
        for request in requests {
            let n = request.n.max(1) as usize;
            match self.send(request) {
                Ok(stream) => {
                    unsent -= n;
                    streams.push(stream);
                }
                Err(e) => {
                    self.shared.queued_seqs.fetch_sub(unsent, Ordering::AcqRel);
                    return Err(e);
                }
            }
        }
        Ok(streams)
    }

    /// Hands one request, whose queue room is reserved, to the engine thread.
    fn send(&self, request: GenerationRequest) -> Result<RequestStream, SubmitError> {
        // Room for the streaming events plus the final slots the engine reserves per choice.
        let choices = request.n.max(1) as usize;
        let (events, rx) =
            mpsc::channel(EVENT_CHANNEL_CAPACITY + FINAL_EVENTS_PER_CHOICE * choices);
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.unfinished.fetch_add(1, Ordering::AcqRel);
        let command = Command::Add {
            id,
            request: Box::new(request),
            events,
            arrival: Instant::now(),
        };
        match self.inbox.try_send(command) {
            Ok(()) => Ok(RequestStream { events: rx }),
            Err(e) => {
                self.shared.unfinished.fetch_sub(1, Ordering::AcqRel);
                Err(match e {
                    TrySendError::Full(_) => SubmitError::QueueFull,
                    TrySendError::Disconnected(_) => SubmitError::ShutDown,
                })
            }
        }
    }

    /// The engine's counters, gauges and histograms.
    pub fn metrics(&self) -> &Arc<EngineMetrics> {
        &self.shared.metrics
    }

    /// The gate through which this engine's model's image encodings share the CPU with its
    /// steps (`ImageInput::with_gate`).
    pub fn encode_gate(&self) -> &Arc<EncodeGate> {
        &self.shared.encode_gate
    }

    /// False once the engine thread has exited.
    pub fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::Acquire)
    }

    /// Blocks until the engine thread has exited (after [`EngineHandle::shutdown`]: once its
    /// accepted work is done and its disk tier has written what it queued) or `timeout` has
    /// passed; returns whether it exited.
    pub fn wait_stopped(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.is_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        !self.is_alive()
    }

    /// Stops accepting requests; the engine finishes the work it accepted, then its thread exits.
    pub fn shutdown(&self) {
        self.shared.accepting.store(false, Ordering::Release);
        // A full inbox still wakes the engine, which then sees `accepting` is false.
        let _ = self.inbox.try_send(Command::Shutdown);
    }

    /// Requests accepted and not yet finished (running or waiting).
    pub fn num_unfinished(&self) -> usize {
        self.shared.unfinished.load(Ordering::Acquire)
    }

    /// While the engine has work (requests running or waiting): how long the loop iteration in
    /// progress has run, i.e. since the loop last came round. `None` when it has no work (an
    /// idle engine sleeps on its inbox, which is not a hang). A value far beyond the longest
    /// step means the engine is wedged. A request handed to a sleeping engine counts as work a
    /// few microseconds before the engine wakes, so one reading can be stale; act on several.
    pub fn iteration_age(&self) -> Option<Duration> {
        self.shared.iteration_age_at(Instant::now())
    }
}

/// The events of one request. Dropping it cancels the request; its blocks are freed at the
/// engine's next step.
#[derive(Debug)]
pub struct RequestStream {
    events: mpsc::Receiver<Event>,
}

impl RequestStream {
    /// The next event; `None` after the last `Finished` (or if the engine died).
    pub async fn recv(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The next event, blocking the current thread. Must not be called from an async context.
    pub fn blocking_recv(&mut self) -> Option<Event> {
        self.events.blocking_recv()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_bound_counts_sequences_and_always_admits_into_an_empty_queue() {
        let shared = Shared::new(Arc::new(EngineMetrics::default()), 4);
        assert!(shared.reserve(3));
        assert!(!shared.reserve(2));
        assert!(shared.reserve(1));
        shared.queued_seqs.store(0, Ordering::Release);
        assert!(
            shared.reserve(8),
            "a lone request larger than the bound still runs"
        );
    }

    #[test]
    fn iteration_age_is_none_without_work_and_counts_from_the_last_turn() {
        let shared = Shared::new(Arc::new(EngineMetrics::default()), 4);
        shared.loop_turned();
        let now = Instant::now();
        assert_eq!(
            shared.iteration_age_at(now + Duration::from_secs(600)),
            None
        );
        shared.unfinished.store(1, Ordering::Release);
        let age = shared
            .iteration_age_at(now + Duration::from_secs(600))
            .unwrap();
        assert!(age >= Duration::from_secs(599), "{age:?}");
        shared.loop_turned();
        let age = shared.iteration_age_at(Instant::now()).unwrap();
        assert!(age < Duration::from_secs(60), "{age:?}");
    }

    /// An executor whose forward pass waits for a signal: an engine wedged in a step.
    struct WedgedExecutor {
        inner: crate::executor::fake::HistoryExecutor,
        release: std::sync::mpsc::Receiver<()>,
    }

    impl crate::Executor for WedgedExecutor {
        fn execute(
            &mut self,
            batch: &sluice_model::Batch,
        ) -> Result<sluice_model::Logits, crate::ExecutorError> {
            let _ = self.release.recv();
            self.inner.execute(batch)
        }
        fn vocab_size(&self) -> usize {
            self.inner.vocab_size()
        }
        fn block_size(&self) -> usize {
            self.inner.block_size()
        }
        fn kv_pools(&self) -> sluice_model::KvPools {
            self.inner.kv_pools()
        }
        fn block_bytes(&self, group: sluice_model::KvGroupId) -> usize {
            self.inner.block_bytes(group)
        }
        fn save_block(&self, group: sluice_model::KvGroupId, block: u32, out: &mut Vec<u8>) {
            self.inner.save_block(group, block, out)
        }
        fn load_block(
            &mut self,
            group: sluice_model::KvGroupId,
            block: u32,
            bytes: &[u8],
        ) -> Result<(), crate::ExecutorError> {
            self.inner.load_block(group, block, bytes)
        }
    }

    #[test]
    fn a_step_that_does_not_return_ages_the_iteration_and_an_idle_engine_has_no_age() {
        let (release, wait) = std::sync::mpsc::channel();
        let executor = WedgedExecutor {
            inner: crate::executor::fake::HistoryExecutor::new(32, 4, 64),
            release: wait,
        };
        let engine = crate::Engine::start(
            Box::new(executor),
            crate::testkit::word_tokenizer(32),
            Default::default(),
        );
        assert_eq!(engine.iteration_age(), None, "idle: asleep on its inbox");
        let mut request = one_token_request(1);
        request.stop.max_tokens = 1;
        let mut stream = engine.submit(request).unwrap();
        // The loop cannot come round while the step waits, so its age only grows.
        std::thread::sleep(Duration::from_millis(50));
        let age = engine.iteration_age().expect("it has work");
        assert!(age >= Duration::from_millis(50), "{age:?}");
        release.send(()).unwrap();
        drop(release);
        while stream.blocking_recv().is_some() {}
        engine.shutdown();
        assert!(engine.wait_stopped(Duration::from_secs(10)));
        assert_eq!(engine.iteration_age(), None, "no work left");
    }

    fn one_token_request(n: u32) -> GenerationRequest {
        GenerationRequest {
            prompt_tokens: vec![1],
            n,
            sampling: Default::default(),
            stop: Default::default(),
            priority: Default::default(),
            cache_salt: None,
            caller: None,
            images: Default::default(),
            prompt_outputs: crate::request::PromptOutputs::default(),
        }
    }

    #[test]
    fn a_group_larger_than_the_queue_is_admitted_whole_into_an_empty_queue() {
        let (inbox, _receiver) = crossbeam_channel::bounded(4);
        let handle = EngineHandle {
            inbox,
            shared: Arc::new(Shared::new(Arc::new(EngineMetrics::default()), 4)),
        };
        // Three prompts of n = 2: six sequences against a queue bound of four.
        let group = vec![one_token_request(2); 3];
        let streams = handle.submit_all(group.clone()).unwrap();
        assert_eq!(streams.len(), 3);
        assert_eq!(handle.shared.queued_seqs.load(Ordering::Acquire), 6);
        // Not while anything waits; and a group that can never fit the inbox is refused as such.
        assert_eq!(handle.submit_all(group).err(), Some(SubmitError::QueueFull));
        assert_eq!(
            handle.submit_all(vec![one_token_request(1); 5]).err(),
            Some(SubmitError::GroupTooLarge {
                requests: 5,
                limit: 4
            })
        );
    }

    #[test]
    fn submit_to_a_dead_engine_is_refused() {
        let (inbox, receiver) = crossbeam_channel::bounded(1);
        drop(receiver);
        let handle = EngineHandle {
            inbox,
            shared: Arc::new(Shared::new(Arc::new(EngineMetrics::default()), 4)),
        };
        let req = GenerationRequest {
            prompt_tokens: vec![1],
            n: 1,
            sampling: Default::default(),
            stop: Default::default(),
            priority: Default::default(),
            cache_salt: None,
            caller: None,
            images: Default::default(),
            prompt_outputs: crate::request::PromptOutputs::default(),
        };
        assert_eq!(handle.submit(req).err(), Some(SubmitError::ShutDown));
        assert_eq!(handle.num_unfinished(), 0);
    }

    #[test]
    fn full_inbox_answers_queue_full_and_releases_the_reservation() {
        let (inbox, _receiver) = crossbeam_channel::bounded(1);
        let handle = EngineHandle {
            inbox,
            shared: Arc::new(Shared::new(Arc::new(EngineMetrics::default()), 100)),
        };
        let req = GenerationRequest {
            prompt_tokens: vec![1],
            n: 1,
            sampling: Default::default(),
            stop: Default::default(),
            priority: Default::default(),
            cache_salt: None,
            caller: None,
            images: Default::default(),
            prompt_outputs: crate::request::PromptOutputs::default(),
        };
        let _first = handle.submit(req.clone()).unwrap();
        assert_eq!(handle.submit(req).err(), Some(SubmitError::QueueFull));
        assert_eq!(handle.shared.queued_seqs.load(Ordering::Acquire), 1);
        assert_eq!(handle.num_unfinished(), 1);
    }
}
