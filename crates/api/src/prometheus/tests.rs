use sluice_engine::pool::{ModelReport, ModelStatus, PoolSnapshot};

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
        prefix_cache_disk_hits: 24,
        kv_disk: None,
        kv_events: None,
        preemptions: 3,
        fair_share_deferred: 5,
        fair_share_preempted: 2,
        fair_share_prompt_tokens_deferred: 480,
        active_callers: 2,
        max_running_per_caller: 4,
        image_encodings: 3,
        image_encoding_waits: 11,
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
        spec_decode: sluice_engine::SpecDecodeSnapshot {
            drafts: 30,
            draft_tokens: 120,
            accepted_tokens: 75,
            accepted_per_position: vec![28, 25, 22],
        },
    }
}

#[test]
fn speculative_decoding_counters_carry_vllm_names() {
    let t = text();
    for line in [
        "vllm:spec_decode_num_drafts_total{model_name=\"llama\"} 30\n",
        "vllm:spec_decode_num_draft_tokens_total{model_name=\"llama\"} 120\n",
        "vllm:spec_decode_num_accepted_tokens_total{model_name=\"llama\"} 75\n",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"llama\",position=\"0\"} 28\n",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"llama\",position=\"2\"} 22\n",
    ] {
        assert!(t.contains(line), "{line} missing from {t}");
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
        "sluice:fair_share_prompt_tokens_deferred_total{model_name=\"llama\"} 480",
        "sluice:fair_share_active_callers{model_name=\"llama\"} 2",
        "sluice:fair_share_max_running_per_caller{model_name=\"llama\"} 4",
        "sluice:image_encodings{model_name=\"llama\"} 3",
        "sluice:image_encoding_waits_total{model_name=\"llama\"} 11",
        "vllm:prefix_cache_queries_total{model_name=\"llama\"} 100",
        "vllm:prefix_cache_hits_total{model_name=\"llama\"} 40",
    ] {
        assert!(t.contains(line), "missing {line}");
    }
    assert!(t.contains("# TYPE vllm:prompt_tokens_total counter\n"));
}

#[test]
fn the_disk_tier_is_shown_for_the_models_that_have_one() {
    assert!(!text().contains("kv_disk"), "no disk tier, no series");
    let disk = sluice_engine::kv_disk::DiskSnapshot {
        bytes_used: 4096,
        bytes_limit: 1 << 30,
        blocks_read: 12,
        blocks_written: 30,
        read_errors: 1,
        write_errors: 0,
        writes_skipped: 2,
        read_ns: 1_500_000_000,
        writing: true,
    };
    let with_disk = MetricsSnapshot {
        kv_disk: Some(disk),
        ..snapshot()
    };
    let t = render(&[
        ("llama".to_string(), with_disk),
        ("other".to_string(), snapshot()),
    ]);
    for line in [
        "sluice:prefix_cache_disk_hits_total{model_name=\"llama\"} 24\n",
        "sluice:kv_disk_bytes_used{model_name=\"llama\"} 4096\n",
        "sluice:kv_disk_bytes_limit{model_name=\"llama\"} 1073741824\n",
        "sluice:kv_disk_writing{model_name=\"llama\"} 1\n",
        "sluice:kv_disk_blocks_read_total{model_name=\"llama\"} 12\n",
        "sluice:kv_disk_blocks_written_total{model_name=\"llama\"} 30\n",
        "sluice:kv_disk_read_errors_total{model_name=\"llama\"} 1\n",
        "sluice:kv_disk_write_errors_total{model_name=\"llama\"} 0\n",
        "sluice:kv_disk_writes_skipped_total{model_name=\"llama\"} 2\n",
        "sluice:kv_disk_read_seconds_total{model_name=\"llama\"} 1.5\n",
        "# TYPE sluice:kv_disk_blocks_read_total counter\n",
        "# TYPE sluice:kv_disk_bytes_used gauge\n",
    ] {
        assert!(t.contains(line), "missing {line} in {t}");
    }
    assert!(!t.contains("sluice:kv_disk_bytes_used{model_name=\"other\"}"));
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
                || series.starts_with("sluice:fair_share_")
                || series.starts_with("sluice:prefix_cache_")
                || series.starts_with("sluice:kv_disk_")
                || series.starts_with("sluice:image_encoding"))
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
        load_waiters: 0,
    };
    let pool = PoolSnapshot {
        budget: Budget {
            max_memory_bytes: 1000,
            max_models: None,
            wait_for_idle: std::time::Duration::ZERO,
            load_timeout: std::time::Duration::from_secs(60),
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

#[test]
fn kv_event_counters_are_shown_for_the_models_that_publish() {
    assert!(!text().contains("kv_events"), "no publisher, no series");
    let publishing = MetricsSnapshot {
        kv_events: Some(sluice_engine::kv_events::KvEventStats {
            events: 40,
            dropped: 3,
        }),
        ..snapshot()
    };
    let t = render(&[
        ("llama".to_string(), publishing),
        ("other".to_string(), snapshot()),
    ]);
    for line in [
        "# TYPE sluice:kv_events_total counter\n",
        "sluice:kv_events_total{model_name=\"llama\"} 40\n",
        "sluice:kv_events_dropped_total{model_name=\"llama\"} 3\n",
    ] {
        assert!(t.contains(line), "missing {line}");
    }
    assert!(!t.contains("kv_events_total{model_name=\"other\"}"));
}
