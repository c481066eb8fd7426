//! The model pool's series (`sluice:pool_*` and per-model state, memory and load counters).

use sluice_engine::pool::{ModelReport, ModelStatus, PoolSnapshot};

use super::exposition::{header, sample};

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
    let per_model: [PoolSeries; 6] = [
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
            "sluice:model_load_waiting_requests",
            "Requests waiting for the model's load now.",
            "gauge",
            |m| m.load_waiters as f64,
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
