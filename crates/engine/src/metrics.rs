//! Engine counters, gauges and latency histograms, written by the engine thread and read by
//! anyone through atomics (no locks), so `/metrics` can be scraped every 50 ms.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::request::Task;
use crate::speculation::{Verified, MAX_DRAFT_TOKENS};

/// vLLM's `time_to_first_token_seconds` buckets.
const TTFT_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// vLLM's `inter_token_latency_seconds` buckets.
const ITL_BOUNDS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// vLLM's request-level buckets (`e2e_request_latency_seconds`, `request_queue_time_seconds`).
const REQUEST_BOUNDS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A fixed-bucket histogram of seconds with atomic buckets.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); the last slot counts values above every bound.
    buckets: Vec<AtomicU64>,
    /// Sum of observations, as `f64` bits.
    sum_bits: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_bits: AtomicU64::new(0f64.to_bits()),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, value: Duration) {
        let secs = value.as_secs_f64();
        let bucket = self.bounds.partition_point(|&b| b < secs);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        // Only the engine thread writes, but a CAS loop keeps the sum exact for any writer.
        let _ = self
            .sum_bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + secs).to_bits())
            });
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// A consistent-enough copy for exposition (each field is read atomically).
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0;
        let counts = self.buckets[..self.bounds.len()]
            .iter()
            .map(|b| {
                running += b.load(Ordering::Relaxed);
                running
            })
            .collect();
        HistogramSnapshot {
            bounds: self.bounds.to_vec(),
            counts,
            sum: f64::from_bits(self.sum_bits.load(Ordering::Relaxed)),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

/// A histogram as Prometheus exposes it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Upper bounds (`le`) of the buckets, ascending; `+Inf` is implied and equals `count`.
    pub bounds: Vec<f64>,
    /// Cumulative number of observations `<=` each bound.
    pub counts: Vec<u64>,
    /// Sum of all observations, in seconds.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

/// Everything the engine counts. Shared between the engine thread (writer) and handles.
#[derive(Debug)]
pub struct EngineMetrics {
    pub(crate) running: AtomicUsize,
    pub(crate) waiting: AtomicUsize,
    pub(crate) kv_blocks_used: AtomicUsize,
    pub(crate) kv_blocks_total: AtomicUsize,
    pub(crate) kv_window_blocks_used: AtomicUsize,
    pub(crate) kv_window_blocks_total: AtomicUsize,
    pub(crate) block_size: AtomicUsize,
    pub(crate) prefix_cache_queries: AtomicU64,
    pub(crate) prefix_cache_hits: AtomicU64,
    pub(crate) prefix_cache_disk_hits: AtomicU64,
    /// The model's disk tier, when it has one (its counters are read at each snapshot).
    pub(crate) kv_disk: std::sync::OnceLock<crate::kv_disk::ModelDisk>,
    /// The model's KV event stream, when events are published (`--kv-events`).
    pub(crate) kv_events: std::sync::OnceLock<crate::kv_events::KvEventSink>,
    pub(crate) preemptions: AtomicU64,
    pub(crate) fair_share_deferred: AtomicU64,
    pub(crate) fair_share_preempted: AtomicU64,
    pub(crate) fair_share_prompt_tokens_deferred: AtomicU64,
    pub(crate) active_callers: AtomicUsize,
    pub(crate) max_running_per_caller: AtomicUsize,
    /// Image encodings running or waiting at the encode gate (`encode_gate.rs` keeps it).
    pub(crate) image_encodings: AtomicUsize,
    /// Times an image encoding waited at a pause point for its turn beside the steps.
    pub(crate) image_encoding_waits: AtomicU64,
    pub(crate) prompt_tokens: AtomicU64,
    pub(crate) generation_tokens: AtomicU64,
    pub(crate) requests_finished: AtomicU64,
    /// Choices that ended with `stop` or `length`, per [`Task`] (in `Task::ALL` order).
    pub(crate) requests_succeeded: [AtomicU64; 3],
    pub(crate) time_to_first_token: Histogram,
    pub(crate) inter_token_latency: Histogram,
    pub(crate) e2e_request_latency: Histogram,
    pub(crate) request_queue_time: Histogram,
    pub(crate) step_times: StepTimers,
    pub(crate) spec_decode: SpecDecodeCounters,
}

/// Speculative decoding's counters, with vLLM's meanings.
#[derive(Debug, Default)]
pub(crate) struct SpecDecodeCounters {
    pub(crate) drafts: AtomicU64,
    pub(crate) draft_tokens: AtomicU64,
    pub(crate) accepted_tokens: AtomicU64,
    pub(crate) accepted_per_position: [AtomicU64; MAX_DRAFT_TOKENS],
}

impl SpecDecodeCounters {
    /// Counts one verified draft.
    pub(crate) fn record(&self, verified: Verified) {
        EngineMetrics::add(&self.drafts, 1);
        EngineMetrics::add(&self.draft_tokens, verified.proposed as u64);
        EngineMetrics::add(&self.accepted_tokens, verified.accepted as u64);
        for position in &self.accepted_per_position[..verified.accepted.min(MAX_DRAFT_TOKENS)] {
            EngineMetrics::add(position, 1);
        }
    }

    fn snapshot(&self) -> SpecDecodeSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let per_position = self.accepted_per_position.each_ref().map(load);
        let positions = per_position
            .iter()
            .rposition(|&n| n > 0)
            .map_or(0, |p| p + 1);
        SpecDecodeSnapshot {
            drafts: load(&self.drafts),
            draft_tokens: load(&self.draft_tokens),
            accepted_tokens: load(&self.accepted_tokens),
            accepted_per_position: per_position[..positions].to_vec(),
        }
    }
}

/// Speculative decoding so far (all zero when the engine does not speculate).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpecDecodeSnapshot {
    /// Drafts verified (`vllm:spec_decode_num_drafts`).
    pub drafts: u64,
    /// Draft tokens verified (`vllm:spec_decode_num_draft_tokens`).
    pub draft_tokens: u64,
    /// Of which accepted (`vllm:spec_decode_num_accepted_tokens`).
    pub accepted_tokens: u64,
    /// Accepted draft tokens per position in their draft, the first position first, up to the
    /// last position any was accepted at (`vllm:spec_decode_num_accepted_tokens_per_pos`).
    pub accepted_per_position: Vec<u64>,
}

/// Where the engine thread's time goes, summed over all steps (nanoseconds).
#[derive(Debug, Default)]
pub(crate) struct StepTimers {
    pub(crate) steps: AtomicU64,
    pub(crate) tokens: AtomicU64,
    pub(crate) schedule_ns: AtomicU64,
    pub(crate) forward_ns: AtomicU64,
    pub(crate) sample_ns: AtomicU64,
}

/// Totals of the engine thread's time per phase of a step, to tell scheduler overhead from
/// model time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepTimes {
    /// Steps that ran a forward pass.
    pub steps: u64,
    /// Tokens those forward passes computed (prompt chunks and decodes).
    pub tokens: u64,
    /// Seconds spent choosing what to run and building batches.
    pub schedule_seconds: f64,
    /// Seconds spent in the model's forward pass.
    pub forward_seconds: f64,
    /// Seconds spent sampling, detokenizing and updating sequences.
    pub sample_seconds: f64,
}

impl Default for EngineMetrics {
    fn default() -> Self {
        EngineMetrics {
            running: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            kv_blocks_used: AtomicUsize::new(0),
            kv_blocks_total: AtomicUsize::new(0),
            kv_window_blocks_used: AtomicUsize::new(0),
            kv_window_blocks_total: AtomicUsize::new(0),
            block_size: AtomicUsize::new(0),
            prefix_cache_queries: AtomicU64::new(0),
            prefix_cache_hits: AtomicU64::new(0),
            prefix_cache_disk_hits: AtomicU64::new(0),
            kv_disk: std::sync::OnceLock::new(),
            kv_events: std::sync::OnceLock::new(),
            preemptions: AtomicU64::new(0),
            fair_share_deferred: AtomicU64::new(0),
            fair_share_preempted: AtomicU64::new(0),
            fair_share_prompt_tokens_deferred: AtomicU64::new(0),
            active_callers: AtomicUsize::new(0),
            image_encodings: AtomicUsize::new(0),
            image_encoding_waits: AtomicU64::new(0),
            max_running_per_caller: AtomicUsize::new(0),
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            requests_finished: AtomicU64::new(0),
            requests_succeeded: Default::default(),
            time_to_first_token: Histogram::new(TTFT_BOUNDS),
            inter_token_latency: Histogram::new(ITL_BOUNDS),
            e2e_request_latency: Histogram::new(REQUEST_BOUNDS),
            request_queue_time: Histogram::new(REQUEST_BOUNDS),
            step_times: StepTimers::default(),
            spec_decode: SpecDecodeCounters::default(),
        }
    }
}

impl EngineMetrics {
    /// Reads every metric (lock-free).
    pub fn snapshot(&self) -> MetricsSnapshot {
        let load = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        let load64 = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MetricsSnapshot {
            running: load(&self.running),
            waiting: load(&self.waiting),
            kv_blocks_used: load(&self.kv_blocks_used),
            kv_blocks_total: load(&self.kv_blocks_total),
            kv_window_blocks_used: load(&self.kv_window_blocks_used),
            kv_window_blocks_total: load(&self.kv_window_blocks_total),
            block_size: load(&self.block_size),
            prefix_cache_queries: load64(&self.prefix_cache_queries),
            prefix_cache_hits: load64(&self.prefix_cache_hits),
            prefix_cache_disk_hits: load64(&self.prefix_cache_disk_hits),
            kv_disk: self.kv_disk.get().map(|d| d.snapshot()),
            kv_events: self.kv_events.get().map(|s| s.0.stats()),
            preemptions: load64(&self.preemptions),
            fair_share_deferred: load64(&self.fair_share_deferred),
            fair_share_preempted: load64(&self.fair_share_preempted),
            fair_share_prompt_tokens_deferred: load64(&self.fair_share_prompt_tokens_deferred),
            active_callers: load(&self.active_callers),
            image_encodings: load(&self.image_encodings),
            image_encoding_waits: load64(&self.image_encoding_waits),
            max_running_per_caller: load(&self.max_running_per_caller),
            prompt_tokens: load64(&self.prompt_tokens),
            generation_tokens: load64(&self.generation_tokens),
            requests_finished: load64(&self.requests_finished),
            requests_succeeded: self.requests_succeeded.each_ref().map(load64),
            time_to_first_token: self.time_to_first_token.snapshot(),
            inter_token_latency: self.inter_token_latency.snapshot(),
            e2e_request_latency: self.e2e_request_latency.snapshot(),
            request_queue_time: self.request_queue_time.snapshot(),
            step_times: self.step_times(),
            spec_decode: self.spec_decode.snapshot(),
        }
    }

    /// Time spent per phase of a step, summed since start.
    pub fn step_times(&self) -> StepTimes {
        let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-9;
        let t = &self.step_times;
        StepTimes {
            steps: t.steps.load(Ordering::Relaxed),
            tokens: t.tokens.load(Ordering::Relaxed),
            schedule_seconds: secs(&t.schedule_ns),
            forward_seconds: secs(&t.forward_ns),
            sample_seconds: secs(&t.sample_ns),
        }
    }

    pub(crate) fn add_duration(counter: &AtomicU64, d: Duration) {
        counter.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a choice of a `task` request that ended normally.
    pub(crate) fn count_success(&self, task: Task) {
        let i = Task::ALL
            .iter()
            .position(|&t| t == task)
            .expect("every task is listed");
        Self::add(&self.requests_succeeded[i], 1);
    }

    pub(crate) fn set(gauge: &AtomicUsize, v: usize) {
        gauge.store(v, Ordering::Relaxed);
    }
}

/// A point-in-time copy of [`EngineMetrics`].
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsSnapshot {
    /// Sequences scheduled in the last step's running set.
    pub running: usize,
    /// Sequences waiting in the queue (new or preempted).
    pub waiting: usize,
    /// KV blocks referenced by at least one sequence.
    pub kv_blocks_used: usize,
    /// KV blocks in the pool.
    pub kv_blocks_total: usize,
    /// Blocks of the sliding-window layers' pool held by sequences (0 without one).
    pub kv_window_blocks_used: usize,
    /// Blocks in the sliding-window layers' pool (0 when the model keeps none).
    pub kv_window_blocks_total: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Prompt tokens looked up in the prefix cache (vLLM counts tokens, not requests).
    pub prefix_cache_queries: u64,
    /// Prompt tokens found in the prefix cache (RAM and disk).
    pub prefix_cache_hits: u64,
    /// Of which read back from the disk tier.
    pub prefix_cache_disk_hits: u64,
    /// The disk tier, when the model has one.
    pub kv_disk: Option<crate::kv_disk::DiskSnapshot>,
    /// The KV event stream's counters, when events are published.
    pub kv_events: Option<crate::kv_events::KvEventStats>,
    /// Sequences preempted (by recompute) so far.
    pub preemptions: u64,
    /// Waiting sequences fair sharing passed over at least once (each counted once).
    pub fair_share_deferred: u64,
    /// Sequences preempted to give a starving caller its share (also in `preemptions`).
    pub fair_share_preempted: u64,
    /// Prompt tokens a caller left, step by step, to other callers' parts of the prompt budget.
    pub fair_share_prompt_tokens_deferred: u64,
    /// Callers with running or waiting sequences at the last step.
    pub active_callers: usize,
    /// Most sequences one caller ran at the last step.
    pub max_running_per_caller: usize,
    /// Image encodings running or waiting for their turn beside the steps.
    pub image_encodings: usize,
    /// Times an image encoding waited at a pause point for its turn beside the steps.
    pub image_encoding_waits: u64,
    /// Prompt tokens of admitted requests (once per request).
    pub prompt_tokens: u64,
    /// Tokens generated, all choices.
    pub generation_tokens: u64,
    /// Choices finished for any reason.
    pub requests_finished: u64,
    /// Choices that ended with `stop` or `length`, per task in `Task::ALL` order.
    pub requests_succeeded: [u64; 3],
    /// Arrival to first generated token.
    pub time_to_first_token: HistogramSnapshot,
    /// Time between consecutive generated tokens of one choice.
    pub inter_token_latency: HistogramSnapshot,
    /// Arrival to finish.
    pub e2e_request_latency: HistogramSnapshot,
    /// Arrival to first scheduled.
    pub request_queue_time: HistogramSnapshot,
    /// Where the engine thread's time went.
    pub step_times: StepTimes,
    /// Speculative decoding's drafts and acceptance.
    pub spec_decode: SpecDecodeSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_counts_are_cumulative_per_bound() {
        let h = Histogram::new(&[0.1, 1.0]);
        h.observe(Duration::from_millis(50));
        h.observe(Duration::from_millis(500));
        h.observe(Duration::from_secs(5));
        let s = h.snapshot();
        assert_eq!(s.counts, vec![1, 2]);
        assert_eq!(s.count, 3);
        assert!((s.sum - 5.55).abs() < 1e-9);
    }

    #[test]
    fn value_on_a_bound_falls_in_that_bucket() {
        let h = Histogram::new(&[1.0, 2.0]);
        h.observe(Duration::from_secs(1));
        assert_eq!(h.snapshot().counts, vec![1, 1]);
    }
}
