//! `/metrics` text: the engine's snapshot in Prometheus text format (version 0.0.4) under
//! vLLM's metric names, so Grafana dashboards and the Kubernetes inference gateway work
//! unchanged. Rendering is one pass over atomics into one string: cheap enough to scrape
//! every 50 ms.

mod exposition;
mod pool;
#[cfg(test)]
mod tests;

use sluice_engine::kv_disk::DiskSnapshot;
use sluice_engine::kv_events::KvEventStats;
use sluice_engine::{HistogramSnapshot, MetricsSnapshot, Task};

use exposition::{header, histogram, sample};
pub use pool::render_pool;

/// The content type of the Prometheus text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A gauge: name, help text, how to read it from a snapshot.
type GaugeSpec = (&'static str, &'static str, fn(&MetricsSnapshot) -> f64);
/// A counter: name, help text, how to read it from a snapshot.
type CounterSpec = (&'static str, &'static str, fn(&MetricsSnapshot) -> u64);
/// A histogram: name, help text, how to find it in a snapshot.
type HistogramSpec = (
    &'static str,
    &'static str,
    fn(&MetricsSnapshot) -> &HistogramSnapshot,
);

/// Renders every model's metrics; each sample carries a `model_name` label.
pub fn render(models: &[(String, MetricsSnapshot)]) -> String {
    let mut out = String::with_capacity(4096 + models.len() * 4096);
    let gauges: [GaugeSpec; 8] = [
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            |s| s.running as f64,
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            |s| s.waiting as f64,
        ),
        (
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            kv_cache_usage,
        ),
        (
            "sluice:kv_window_blocks_used",
            "Blocks of the sliding-window layers' KV pool held by sequences (0 without one).",
            |s| s.kv_window_blocks_used as f64,
        ),
        (
            "sluice:kv_window_blocks_total",
            "Blocks in the sliding-window layers' KV pool (0 when the model keeps none).",
            |s| s.kv_window_blocks_total as f64,
        ),
        (
            "sluice:fair_share_active_callers",
            "Callers (API keys, or users under one key) with running or waiting sequences.",
            |s| s.active_callers as f64,
        ),
        (
            "sluice:fair_share_max_running_per_caller",
            "Most running sequences held by one caller.",
            |s| s.max_running_per_caller as f64,
        ),
        (
            "sluice:image_encodings",
            "Image encodings running or waiting for their turn beside the steps.",
            |s| s.image_encodings as f64,
        ),
    ];
    for (name, help, value) in gauges {
        header(&mut out, name, help, "gauge");
        for (model, snap) in models {
            sample(&mut out, name, &[("model_name", model)], value(snap));
        }
    }
    header(
        &mut out,
        "vllm:cache_config_info",
        "Information of the KV cache configuration.",
        "gauge",
    );
    for (model, snap) in models {
        let block_size = snap.block_size.to_string();
        let num_blocks = snap.kv_blocks_total.to_string();
        let labels = [
            ("block_size", block_size.as_str()),
            ("model_name", model),
            ("num_gpu_blocks", num_blocks.as_str()),
        ];
        sample(&mut out, "vllm:cache_config_info", &labels, 1.0);
    }
    let counters: [CounterSpec; 15] = [
        (
            "vllm:prompt_tokens_total",
            "Number of prefill tokens processed.",
            |s| s.prompt_tokens,
        ),
        (
            "vllm:generation_tokens_total",
            "Number of generation tokens processed.",
            |s| s.generation_tokens,
        ),
        (
            "vllm:num_preemptions_total",
            "Cumulative number of preemptions from the engine.",
            |s| s.preemptions,
        ),
        (
            "vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.",
            |s| s.prefix_cache_queries,
        ),
        (
            "vllm:prefix_cache_hits_total",
            "Prefix cache hits, in terms of number of cached tokens.",
            |s| s.prefix_cache_hits,
        ),
        (
            "sluice:prefix_cache_disk_hits_total",
            "Of the prefix cache hits, tokens read back from the disk tier (--kv-disk-cache).",
            |s| s.prefix_cache_disk_hits,
        ),
        (
            "sluice:fair_share_deferred_total",
            "Waiting sequences passed over for another caller's fair share (each counted once).",
            |s| s.fair_share_deferred,
        ),
        (
            "sluice:fair_share_preemptions_total",
            "Sequences preempted to give a caller waiting below its share a seat.",
            |s| s.fair_share_preempted,
        ),
        (
            "sluice:image_encoding_waits_total",
            "Times an image encoding waited at a pause point for its turn beside the steps.",
            |s| s.image_encoding_waits,
        ),
        (
            "sluice:fair_share_prompt_tokens_deferred_total",
            "Prompt tokens a caller left to other callers' parts of a step's prompt budget.",
            |s| s.fair_share_prompt_tokens_deferred,
        ),
        (
            "vllm:spec_decode_num_drafts_total",
            "Number of spec decoding drafts.",
            |s| s.spec_decode.drafts,
        ),
        (
            "vllm:spec_decode_num_draft_tokens_total",
            "Number of draft tokens.",
            |s| s.spec_decode.draft_tokens,
        ),
        (
            "vllm:spec_decode_num_accepted_tokens_total",
            "Number of accepted tokens.",
            |s| s.spec_decode.accepted_tokens,
        ),
        (
            "sluice:engine_steps_total",
            "Engine steps that ran a forward pass.",
            |s| s.step_times.steps,
        ),
        (
            "sluice:engine_step_tokens_total",
            "Tokens computed by forward passes (prompt chunks and decodes).",
            |s| s.step_times.tokens,
        ),
    ];
    for (name, help, value) in counters {
        header(&mut out, name, help, "counter");
        for (model, snap) in models {
            sample(&mut out, name, &[("model_name", model)], value(snap) as f64);
        }
    }
    let histograms: [HistogramSpec; 4] = [
        (
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            |s| &s.time_to_first_token,
        ),
        (
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            |s| &s.inter_token_latency,
        ),
        (
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            |s| &s.e2e_request_latency,
        ),
        (
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            |s| &s.request_queue_time,
        ),
    ];
    for (name, help, value) in histograms {
        header(&mut out, name, help, "histogram");
        for (model, snap) in models {
            histogram(&mut out, name, model, value(snap));
        }
    }
    engine_steps(&mut out, models);
    requests_by_task(&mut out, models);
    kv_disk(&mut out, models);
    kv_events(&mut out, models);
    accepted_per_position(&mut out, models);
    out
}

/// Accepted draft tokens per position in their draft (vLLM's per-position counter).
fn accepted_per_position(out: &mut String, models: &[(String, MetricsSnapshot)]) {
    let name = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
    header(out, name, "Accepted tokens per draft position.", "counter");
    for (model, snap) in models {
        for (position, &count) in snap.spec_decode.accepted_per_position.iter().enumerate() {
            let position = position.to_string();
            let labels = [
                ("model_name", model.as_str()),
                ("position", position.as_str()),
            ];
            sample(out, name, &labels, count as f64);
        }
    }
}

/// KV events (`--kv-events`), for the models that publish them: events queued for the
/// publisher, and events dropped because its queue was full.
fn kv_events(out: &mut String, models: &[(String, MetricsSnapshot)]) {
    type Spec = (&'static str, &'static str, fn(&KvEventStats) -> u64);
    let specs: [Spec; 2] = [
        (
            "sluice:kv_events_total",
            "KV cache events queued for publishing (--kv-events).",
            |s| s.events,
        ),
        (
            "sluice:kv_events_dropped_total",
            "KV cache events dropped because the publisher's queue was full.",
            |s| s.dropped,
        ),
    ];
    if models.iter().all(|(_, snap)| snap.kv_events.is_none()) {
        return;
    }
    for (name, help, value) in specs {
        header(out, name, help, "counter");
        for (model, snap) in models {
            if let Some(stats) = &snap.kv_events {
                sample(out, name, &[("model_name", model)], value(stats) as f64);
            }
        }
    }
}

/// The prefix cache's disk tier, for the models that have one: the directory's size (shared by
/// every model), and per model the blocks read and written, failures, and read time.
fn kv_disk(out: &mut String, models: &[(String, MetricsSnapshot)]) {
    type DiskSpec = (
        &'static str,
        &'static str,
        &'static str,
        fn(&DiskSnapshot) -> f64,
    );
    let specs: [DiskSpec; 9] = [
        ("sluice:kv_disk_bytes_used", "Bytes of KV block files in the disk tier's directory.", "gauge", |d| d.bytes_used as f64),
        ("sluice:kv_disk_bytes_limit", "The disk tier's bound (--kv-disk-cache-size).", "gauge", |d| d.bytes_limit as f64),
        ("sluice:kv_disk_writing", "1 while blocks are written to the disk tier; 0 after a full disk or a permission error.", "gauge", |d| f64::from(u8::from(d.writing))),
        ("sluice:kv_disk_blocks_read_total", "KV blocks read back from the disk tier.", "counter", |d| d.blocks_read as f64),
        ("sluice:kv_disk_blocks_written_total", "KV blocks written to the disk tier.", "counter", |d| d.blocks_written as f64),
        ("sluice:kv_disk_read_errors_total", "Block files found damaged or unreadable (never used).", "counter", |d| d.read_errors as f64),
        ("sluice:kv_disk_write_errors_total", "Block writes that failed.", "counter", |d| d.write_errors as f64),
        ("sluice:kv_disk_writes_skipped_total", "Blocks not written: the write queue was full or writing was off.", "counter", |d| d.writes_skipped as f64),
        ("sluice:kv_disk_read_seconds_total", "Time spent reading and checking blocks from the disk tier.", "counter", |d| d.read_ns as f64 * 1e-9),
    ];
    if models.iter().all(|(_, snap)| snap.kv_disk.is_none()) {
        return;
    }
    for (name, help, kind, value) in specs {
        header(out, name, help, kind);
        for (model, snap) in models {
            if let Some(disk) = &snap.kv_disk {
                sample(out, name, &[("model_name", model)], value(disk));
            }
        }
    }
}

/// Requests that ended normally, per task (`generate`, `embed`, `score`): scoring requests ride
/// the same engine, so every other series counts them together with generation.
fn requests_by_task(out: &mut String, models: &[(String, MetricsSnapshot)]) {
    let name = "vllm:request_success_total";
    header(
        out,
        name,
        "Count of successfully processed requests, per task.",
        "counter",
    );
    for (model, snap) in models {
        for (task, count) in Task::ALL.iter().zip(snap.requests_succeeded) {
            let labels = [("model_name", model.as_str()), ("task", task.as_str())];
            sample(out, name, &labels, count as f64);
        }
    }
}

/// The engine thread's seconds per step phase (with the step and token counters, a step's mean
/// time and size follow from two rates).
fn engine_steps(out: &mut String, models: &[(String, MetricsSnapshot)]) {
    let name = "sluice:engine_step_seconds_total";
    header(
        out,
        name,
        "Engine thread seconds per step phase: schedule, forward, sample (includes detokenizing).",
        "counter",
    );
    for (model, snap) in models {
        let t = &snap.step_times;
        for (phase, secs) in [
            ("schedule", t.schedule_seconds),
            ("forward", t.forward_seconds),
            ("sample", t.sample_seconds),
        ] {
            sample(out, name, &[("model_name", model), ("phase", phase)], secs);
        }
    }
}

/// Fraction of KV blocks in use; 0 for an engine without blocks (not yet started).
fn kv_cache_usage(s: &MetricsSnapshot) -> f64 {
    if s.kv_blocks_total == 0 {
        0.0
    } else {
        s.kv_blocks_used as f64 / s.kv_blocks_total as f64
    }
}
