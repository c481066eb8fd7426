//! Counters the API layer keeps itself (the engine's are in `sluice_engine::metrics`), rendered
//! after the engine's on `/metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

static MALFORMED_TOOL_CALLS: AtomicU64 = AtomicU64::new(0);

/// Counts tool calls the model wrote that did not parse (returned as text or raw arguments).
pub fn count_malformed_tool_calls(calls: u32) {
    MALFORMED_TOOL_CALLS.fetch_add(u64::from(calls), Ordering::Relaxed);
}

/// Tool calls that did not parse since the server started.
pub fn malformed_tool_calls() -> u64 {
    MALFORMED_TOOL_CALLS.load(Ordering::Relaxed)
}

/// Appends the API's counters in Prometheus text format.
pub fn render(out: &mut String) {
    let name = "sluice:tool_call_parse_failures_total";
    let _ = writeln!(
        out,
        "# HELP {name} Tool calls the model wrote that did not parse (returned as text or with \
         their raw arguments).\n# TYPE {name} counter\n{name} {}",
        malformed_tool_calls()
    );
}

/// Appends the tokenizing slots' gauges: slots held and requests waiting for one.
pub fn render_tokenizing(out: &mut String, (held, waiting): (usize, usize)) {
    for (name, help, value) in [
        (
            "sluice:tokenizing_slots_used",
            "Prompts being templated and tokenized now (--max-concurrent-tokenizations).",
            held,
        ),
        (
            "sluice:tokenizing_waiting",
            "Requests waiting for a tokenizing slot.",
            waiting,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    }
}

/// Appends the Responses store's gauges and counters.
pub fn render_store(out: &mut String, usage: &crate::responses_store::StoreUsage) {
    for (name, kind, help, value) in [
        (
            "sluice:stored_responses",
            "gauge",
            "Responses kept for previous_response_id and GET /v1/responses/{id}.",
            usage.entries as u64,
        ),
        (
            "sluice:stored_responses_bytes",
            "gauge",
            "Estimated memory the stored responses hold, in bytes.",
            usage.bytes as u64,
        ),
        (
            "sluice:stored_responses_evicted_total",
            "counter",
            "Stored responses evicted to keep within the count or byte budgets.",
            usage.evicted,
        ),
        (
            "sluice:responses_not_stored_total",
            "counter",
            "Responses not stored because they alone exceeded their caller's byte budget.",
            usage.refused,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    }
}
