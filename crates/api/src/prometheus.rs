//! `/metrics` text: the engine's snapshot in Prometheus text format (version 0.0.4) under
//! vLLM's metric names, so Grafana dashboards and the Kubernetes inference gateway work
//! unchanged. Rendering is one pass over atomics into one string: cheap enough to scrape
//! every 50 ms.

use std::fmt::Write;

use sluice_engine::pool::{ModelReport, ModelStatus, PoolSnapshot};
use sluice_engine::{HistogramSnapshot, MetricsSnapshot, Task};

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
    let gauges: [GaugeSpec; 7] = [
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
    let counters: [CounterSpec; 9] = [
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
    out
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

/// One per-model pool series: name, help, type, and how to read it from a model's report.
type PoolSeries = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ModelReport) -> f64,
);

/// Appends the model pool's metrics under `sluice:` names: pool totals, then per model (label
/// `model_name`, every registered model, loaded or not) its state, memory and load counters.
pub fn render_pool(out: &mut String, pool: &PoolSnapshot) {
    let totals: [(&str, &str, f64); 3] = [
        (
            "sluice:pool_memory_budget_bytes",
            "Memory budget of all loaded models (--max-memory).",
            pool.budget.max_memory_bytes as f64,
        ),
        (
            "sluice:pool_memory_used_bytes",
            "Memory held or reserved by models: weights plus KV pools.",
            pool.used_bytes as f64,
        ),
        (
            "sluice:pool_models_loaded",
            "Number of models loaded now.",
            pool.loaded_models as f64,
        ),
    ];
    for (name, help, value) in totals {
        header(out, name, help, "gauge");
        sample(out, name, &[], value);
    }
    let per_model: [PoolSeries; 5] = [
        (
            "sluice:model_loaded",
            "1 while the model is loaded, else 0.",
            "gauge",
            |m| f64::from(u8::from(m.status == ModelStatus::Loaded)),
        ),
        (
            "sluice:model_memory_bytes",
            "Memory the model holds or has reserved: weights plus KV pool.",
            "gauge",
            |m| m.memory_bytes as f64,
        ),
        (
            "sluice:model_loads_total",
            "Successful loads of the model.",
            "counter",
            |m| m.loads as f64,
        ),
        (
            "sluice:model_load_failures_total",
            "Failed loads of the model.",
            "counter",
            |m| m.load_failures as f64,
        ),
        (
            "sluice:model_unloads_total",
            "Unloads of the model (evictions and admin unloads).",
            "counter",
            |m| m.unloads as f64,
        ),
    ];
    for (name, help, kind, value) in per_model {
        header(out, name, help, kind);
        for m in &pool.models {
            sample(out, name, &[("model_name", &m.id)], value(m));
        }
    }
    let name = "sluice:model_load_seconds";
    header(
        out,
        name,
        "Time spent in successful loads of the model.",
        "summary",
    );
    for m in &pool.models {
        let labels = [("model_name", m.id.as_str())];
        sample(out, &format!("{name}_sum"), &labels, m.load_seconds);
        sample(out, &format!("{name}_count"), &labels, m.loads as f64);
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

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, val)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{key}=\"");
            escape_label(out, val);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    write_value(out, value);
    out.push('\n');
}

fn histogram(out: &mut String, name: &str, model: &str, h: &HistogramSnapshot) {
    let bucket = format!("{name}_bucket");
    for (bound, count) in h.bounds.iter().zip(&h.counts) {
        let mut le = String::new();
        write_value(&mut le, *bound);
        sample(
            out,
            &bucket,
            &[("le", &le), ("model_name", model)],
            *count as f64,
        );
    }
    sample(
        out,
        &bucket,
        &[("le", "+Inf"), ("model_name", model)],
        h.count as f64,
    );
    sample(out, &format!("{name}_sum"), &[("model_name", model)], h.sum);
    sample(
        out,
        &format!("{name}_count"),
        &[("model_name", model)],
        h.count as f64,
    );
}

fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

fn escape_label(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram_snapshot() -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: vec![0.01, 0.5],
            counts: vec![1, 3],
            sum: 1.25,
            count: 4,
        }
    }

    fn snapshot() -> MetricsSnapshot {
        MetricsSnapshot {
            running: 2,
            waiting: 5,
            kv_blocks_used: 16,
            kv_blocks_total: 64,
            kv_window_blocks_used: 3,
            kv_window_blocks_total: 12,
            block_size: 16,
            prefix_cache_queries: 100,
            prefix_cache_hits: 40,
            preemptions: 3,
            fair_share_deferred: 5,
            fair_share_preempted: 2,
            active_callers: 2,
            max_running_per_caller: 4,
            prompt_tokens: 1234,
            generation_tokens: 567,
            requests_finished: 9,
            requests_succeeded: [7, 1, 1],
            time_to_first_token: histogram_snapshot(),
            inter_token_latency: histogram_snapshot(),
            e2e_request_latency: histogram_snapshot(),
            request_queue_time: histogram_snapshot(),
            step_times: sluice_engine::StepTimes {
                steps: 7,
                tokens: 300,
                schedule_seconds: 0.5,
                forward_seconds: 2.25,
                sample_seconds: 0.125,
            },
        }
    }

    fn text() -> String {
        render(&[("llama".to_string(), snapshot())])
    }

    #[test]
    fn gauges_carry_vllm_names_and_the_model_label() {
        let t = text();
        assert!(
            t.contains("vllm:num_requests_running{model_name=\"llama\"} 2\n"),
            "{t}"
        );
        assert!(t.contains("vllm:num_requests_waiting{model_name=\"llama\"} 5\n"));
        assert!(t.contains("vllm:kv_cache_usage_perc{model_name=\"llama\"} 0.25\n"));
        assert!(t.contains("sluice:kv_window_blocks_used{model_name=\"llama\"} 3\n"));
        assert!(t.contains("sluice:kv_window_blocks_total{model_name=\"llama\"} 12\n"));
        assert!(t.contains("# TYPE vllm:num_requests_running gauge\n"));
    }

    #[test]
    fn cache_config_info_labels_block_size_and_block_count() {
        assert!(text().contains(
            "vllm:cache_config_info{block_size=\"16\",model_name=\"llama\",num_gpu_blocks=\"64\"} 1\n"
        ));
    }

    #[test]
    fn successful_requests_are_counted_per_task() {
        let t = text();
        for line in [
            "vllm:request_success_total{model_name=\"llama\",task=\"generate\"} 7\n",
            "vllm:request_success_total{model_name=\"llama\",task=\"embed\"} 1\n",
            "vllm:request_success_total{model_name=\"llama\",task=\"score\"} 1\n",
        ] {
            assert!(t.contains(line), "missing {line}");
        }
    }

    #[test]
    fn counters_are_exported_with_total_suffix() {
        let t = text();
        for line in [
            "vllm:prompt_tokens_total{model_name=\"llama\"} 1234",
            "vllm:generation_tokens_total{model_name=\"llama\"} 567",
            "vllm:num_preemptions_total{model_name=\"llama\"} 3",
            "sluice:fair_share_deferred_total{model_name=\"llama\"} 5",
            "sluice:fair_share_preemptions_total{model_name=\"llama\"} 2",
            "sluice:fair_share_active_callers{model_name=\"llama\"} 2",
            "sluice:fair_share_max_running_per_caller{model_name=\"llama\"} 4",
            "vllm:prefix_cache_queries_total{model_name=\"llama\"} 100",
            "vllm:prefix_cache_hits_total{model_name=\"llama\"} 40",
        ] {
            assert!(t.contains(line), "missing {line}");
        }
        assert!(t.contains("# TYPE vllm:prompt_tokens_total counter\n"));
    }

    #[test]
    fn engine_step_counters_split_time_by_phase() {
        let t = text();
        for line in [
            "sluice:engine_steps_total{model_name=\"llama\"} 7\n",
            "sluice:engine_step_tokens_total{model_name=\"llama\"} 300\n",
            "sluice:engine_step_seconds_total{model_name=\"llama\",phase=\"schedule\"} 0.5\n",
            "sluice:engine_step_seconds_total{model_name=\"llama\",phase=\"forward\"} 2.25\n",
            "sluice:engine_step_seconds_total{model_name=\"llama\",phase=\"sample\"} 0.125\n",
        ] {
            assert!(t.contains(line), "missing {line} in {t}");
        }
        assert!(t.contains("# TYPE sluice:engine_step_seconds_total counter\n"));
    }

    #[test]
    fn histograms_have_cumulative_buckets_inf_sum_and_count() {
        let t = text();
        for name in [
            "vllm:time_to_first_token_seconds",
            "vllm:inter_token_latency_seconds",
            "vllm:e2e_request_latency_seconds",
            "vllm:request_queue_time_seconds",
        ] {
            assert!(t.contains(&format!("# TYPE {name} histogram\n")));
            assert!(t.contains(&format!(
                "{name}_bucket{{le=\"0.01\",model_name=\"llama\"}} 1\n"
            )));
            assert!(t.contains(&format!(
                "{name}_bucket{{le=\"0.5\",model_name=\"llama\"}} 3\n"
            )));
            assert!(t.contains(&format!(
                "{name}_bucket{{le=\"+Inf\",model_name=\"llama\"}} 4\n"
            )));
            assert!(t.contains(&format!("{name}_sum{{model_name=\"llama\"}} 1.25\n")));
            assert!(t.contains(&format!("{name}_count{{model_name=\"llama\"}} 4\n")));
        }
    }

    #[test]
    fn every_sample_line_parses_as_name_labels_value() {
        for line in text().lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(
                (series.starts_with("vllm:")
                    || series.starts_with("sluice:engine_")
                    || series.starts_with("sluice:kv_window_")
                    || series.starts_with("sluice:fair_share_"))
                    && series.ends_with('}'),
                "{line}"
            );
            assert!(value == "+Inf" || value.parse::<f64>().is_ok(), "{line}");
        }
    }

    #[test]
    fn help_and_type_appear_once_per_metric_with_several_models() {
        let t = render(&[("a".to_string(), snapshot()), ("b".to_string(), snapshot())]);
        assert_eq!(
            t.matches("# TYPE vllm:num_requests_running gauge").count(),
            1
        );
        assert!(t.contains("vllm:num_requests_running{model_name=\"a\"} 2"));
        assert!(t.contains("vllm:num_requests_running{model_name=\"b\"} 2"));
    }

    #[test]
    fn pool_metrics_cover_totals_and_every_model_loaded_or_not() {
        use sluice_engine::pool::Budget;
        let model = |id: &str, status, memory_bytes, loads| ModelReport {
            id: id.into(),
            dir: id.into(),
            status,
            pinned: false,
            max_model_len: 64,
            memory_bytes,
            requests: 0,
            last_used: None,
            loaded_at: None,
            loads,
            load_failures: 0,
            unloads: 1,
            load_seconds: 0.5,
            last_error: None,
        };
        let pool = PoolSnapshot {
            budget: Budget {
                max_memory_bytes: 1000,
                max_models: None,
                wait_for_idle: std::time::Duration::ZERO,
            },
            used_bytes: 300,
            loaded_models: 1,
            models: vec![
                model("a", ModelStatus::Loaded, 300, 2),
                model("b", ModelStatus::Unloaded, 0, 1),
            ],
        };
        let mut t = String::new();
        render_pool(&mut t, &pool);
        for line in [
            "sluice:pool_memory_budget_bytes 1000\n",
            "sluice:pool_memory_used_bytes 300\n",
            "sluice:pool_models_loaded 1\n",
            "sluice:model_loaded{model_name=\"a\"} 1\n",
            "sluice:model_loaded{model_name=\"b\"} 0\n",
            "sluice:model_memory_bytes{model_name=\"a\"} 300\n",
            "sluice:model_loads_total{model_name=\"a\"} 2\n",
            "sluice:model_unloads_total{model_name=\"b\"} 1\n",
            "sluice:model_load_seconds_sum{model_name=\"a\"} 0.5\n",
            "sluice:model_load_seconds_count{model_name=\"b\"} 1\n",
            "# TYPE sluice:model_loads_total counter\n",
        ] {
            assert!(t.contains(line), "missing {line} in {t}");
        }
    }

    #[test]
    fn kv_usage_of_an_engine_without_blocks_is_zero_and_labels_are_escaped() {
        let mut s = snapshot();
        s.kv_blocks_total = 0;
        let t = render(&[("we\"ird\\".to_string(), s)]);
        assert!(
            t.contains("vllm:kv_cache_usage_perc{model_name=\"we\\\"ird\\\\\"} 0\n"),
            "{t}"
        );
    }
}
