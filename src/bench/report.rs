//! Results of a benchmark run: the JSON written to `--out`, the table printed at the end, and the
//! side-by-side markdown of several runs (`--merge`).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Median and 99th percentile of a latency, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Measurements at one concurrency level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelReport {
    /// Closed-loop clients, each keeping one request in flight.
    pub concurrency: usize,
    /// Length of the measurement window in seconds (warm-up excluded).
    pub window_s: f64,
    /// Requests that completed inside the window.
    pub requests_completed: u64,
    /// Completed requests per second of window.
    pub requests_per_s: f64,
    /// Generated tokens that arrived inside the window, per second.
    pub output_tokens_per_s: f64,
    /// Time to first token of requests started in the window; `None` when none got one.
    pub ttft_ms: Option<LatencyMs>,
    /// Inter-token latency over every chunk gap of requests started in the window.
    pub itl_ms: Option<LatencyMs>,
    /// Median end-to-end latency of requests started in the window that completed.
    pub e2e_ms_p50: Option<f64>,
    /// Mean prompt length the server reported in `usage`.
    pub prompt_tokens_mean: Option<f64>,
    /// Mean generated tokens per completed request.
    pub completion_tokens_mean: Option<f64>,
    /// Requests that failed (warm-up included).
    pub errors: u64,
    /// Requests still streaming when the drain cap ran out.
    pub cut: u64,
    /// A few distinct error messages, for diagnosis.
    pub error_samples: Vec<String>,
}

/// One full run of `sluice bench` against one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Name of this run in tables and charts (`sluice`, `llama-server`).
    pub label: String,
    /// Base URL of the server measured.
    pub base_url: String,
    /// Model name sent in requests.
    pub model: String,
    /// Prompt length asked for.
    pub prompt_tokens_target: usize,
    /// Mean prompt length by the server's `/tokenize`, when it has one.
    pub prompt_tokens_calibrated: Option<f64>,
    /// Tokens generated per request.
    pub output_tokens: u32,
    /// Warm-up per level, seconds.
    pub warmup_s: f64,
    /// Measurement window per level, seconds.
    pub duration_s: f64,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix_s: u64,
    /// One entry per concurrency level, in sweep order.
    pub levels: Vec<LevelReport>,
}

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The plain-text table printed at the end of a run.
pub fn text_table(report: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} @ {} model={} prompt={} (calibrated {}) output={}",
        report.label,
        report.base_url,
        report.model,
        report.prompt_tokens_target,
        cell(report.prompt_tokens_calibrated, 1),
        report.output_tokens
    );
    let _ = writeln!(
        out,
        "{:>5} {:>10} {:>8} {:>10} {:>10} {:>9} {:>9} {:>10} {:>7} {:>6} {:>4}",
        "conc",
        "out tok/s",
        "req/s",
        "TTFT p50",
        "TTFT p99",
        "ITL p50",
        "ITL p99",
        "e2e p50",
        "prompt",
        "errors",
        "cut"
    );
    for level in &report.levels {
        let _ = writeln!(
            out,
            "{:>5} {:>10.1} {:>8.2} {:>10} {:>10} {:>9} {:>9} {:>10} {:>7} {:>6} {:>4}",
            level.concurrency,
            level.output_tokens_per_s,
            level.requests_per_s,
            cell(level.ttft_ms.map(|l| l.p50), 1),
            cell(level.ttft_ms.map(|l| l.p99), 1),
            cell(level.itl_ms.map(|l| l.p50), 2),
            cell(level.itl_ms.map(|l| l.p99), 2),
            cell(level.e2e_ms_p50, 0),
            cell(level.prompt_tokens_mean, 1),
            level.errors,
            level.cut
        );
    }
    let _ = writeln!(out, "(latencies in ms)");
    out
}

/// One metric of the side-by-side tables.
struct Metric {
    title: &'static str,
    value: fn(&LevelReport) -> Option<f64>,
    decimals: usize,
}

const METRICS: &[Metric] = &[
    Metric {
        title: "Output tokens/s (higher is better)",
        value: |l| Some(l.output_tokens_per_s),
        decimals: 1,
    },
    Metric {
        title: "TTFT p50, ms (lower is better)",
        value: |l| l.ttft_ms.map(|t| t.p50),
        decimals: 1,
    },
    Metric {
        title: "TTFT p99, ms (lower is better)",
        value: |l| l.ttft_ms.map(|t| t.p99),
        decimals: 1,
    },
    Metric {
        title: "Inter-token latency p50, ms (lower is better)",
        value: |l| l.itl_ms.map(|t| t.p50),
        decimals: 2,
    },
    Metric {
        title: "Inter-token latency p99, ms (lower is better)",
        value: |l| l.itl_ms.map(|t| t.p99),
        decimals: 2,
    },
    Metric {
        title: "Requests/s",
        value: |l| Some(l.requests_per_s),
        decimals: 2,
    },
    Metric {
        title: "Errors",
        value: |l| Some(l.errors as f64),
        decimals: 0,
    },
];

/// Markdown tables, one per metric, with one column per run and the ratio of every run to the
/// last one given (the baseline): `--merge sluice.json llama.json` gives sluice / llama-server.
pub fn markdown_comparison(reports: &[BenchReport]) -> String {
    let mut out = String::new();
    let Some(baseline) = reports.last() else {
        return out;
    };
    let mut levels: Vec<usize> = reports
        .iter()
        .flat_map(|r| r.levels.iter().map(|l| l.concurrency))
        .collect();
    levels.sort_unstable();
    levels.dedup();
    for report in reports {
        let _ = writeln!(
            out,
            "- **{}**: model `{}`, prompt {} tokens (server-counted {}), output {} tokens, \
             warm-up {} s and {} s measured per level",
            report.label,
            report.model,
            report.prompt_tokens_target,
            cell(
                report
                    .prompt_tokens_calibrated
                    .or_else(|| report.levels.iter().find_map(|l| l.prompt_tokens_mean)),
                1
            ),
            report.output_tokens,
            report.warmup_s,
            report.duration_s
        );
    }
    for metric in METRICS {
        let _ = write!(out, "\n**{}**\n\n| concurrency |", metric.title);
        for report in reports {
            let _ = write!(out, " {} |", report.label);
        }
        for report in &reports[..reports.len() - 1] {
            let _ = write!(out, " {} / {} |", report.label, baseline.label);
        }
        out.push_str("\n|---:|");
        out.push_str(&"---:|".repeat(2 * reports.len() - 1));
        out.push('\n');
        for &concurrency in &levels {
            let value_of = |report: &BenchReport| {
                report
                    .levels
                    .iter()
                    .find(|l| l.concurrency == concurrency)
                    .and_then(metric.value)
            };
            let _ = write!(out, "| {concurrency} |");
            for report in reports {
                let _ = write!(out, " {} |", cell(value_of(report), metric.decimals));
            }
            let base = value_of(baseline);
            for report in &reports[..reports.len() - 1] {
                let ratio = match (value_of(report), base) {
                    (Some(v), Some(b)) if b != 0.0 => Some(v / b),
                    _ => None,
                };
                let _ = write!(out, " {} |", cell(ratio, 2));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(concurrency: usize, tokens_per_s: f64, ttft: Option<f64>) -> LevelReport {
        LevelReport {
            concurrency,
            window_s: 10.0,
            requests_completed: 10,
            requests_per_s: 1.0,
            output_tokens_per_s: tokens_per_s,
            ttft_ms: ttft.map(|p50| LatencyMs {
                p50,
                p99: p50 * 2.0,
            }),
            itl_ms: Some(LatencyMs { p50: 5.0, p99: 9.0 }),
            e2e_ms_p50: Some(700.0),
            prompt_tokens_mean: Some(128.0),
            completion_tokens_mean: Some(128.0),
            errors: 0,
            cut: 0,
            error_samples: vec![],
        }
    }

    fn report(label: &str, levels: Vec<LevelReport>) -> BenchReport {
        BenchReport {
            label: label.into(),
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m".into(),
            prompt_tokens_target: 128,
            prompt_tokens_calibrated: Some(128.0),
            output_tokens: 128,
            warmup_s: 1.0,
            duration_s: 10.0,
            started_unix_s: 0,
            levels,
        }
    }

    #[test]
    fn comparison_ratios_divide_by_the_last_run() {
        let a = report(
            "sluice",
            vec![level(1, 30.0, Some(50.0)), level(16, 300.0, None)],
        );
        let b = report(
            "llama-server",
            vec![level(1, 20.0, Some(100.0)), level(16, 150.0, Some(80.0))],
        );
        let md = markdown_comparison(&[a, b]);
        assert!(md.contains("| concurrency | sluice | llama-server | sluice / llama-server |"));
        assert!(md.contains("| 1 | 30.0 | 20.0 | 1.50 |"), "{md}");
        assert!(md.contains("| 16 | 300.0 | 150.0 | 2.00 |"), "{md}");
        // TTFT: a missing value gives a dash and no ratio.
        assert!(md.contains("| 1 | 50.0 | 100.0 | 0.50 |"), "{md}");
        assert!(md.contains("| 16 | - | 80.0 | - |"), "{md}");
    }

    #[test]
    fn comparison_covers_levels_present_in_any_run() {
        let a = report("a", vec![level(4, 1.0, None)]);
        let b = report("b", vec![level(64, 2.0, None)]);
        let md = markdown_comparison(&[a, b]);
        assert!(md.contains("| 4 | 1.0 | - | - |"), "{md}");
        assert!(md.contains("| 64 | - | 2.0 | - |"), "{md}");
    }

    #[test]
    fn report_round_trips_through_json() {
        let original = report("x", vec![level(1, 10.0, Some(3.0))]);
        let json = serde_json::to_string(&original).unwrap();
        let back: BenchReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, original);
    }

    #[test]
    fn text_table_has_a_row_per_level() {
        let table = text_table(&report(
            "x",
            vec![level(1, 10.0, None), level(4, 40.0, Some(2.0))],
        ));
        assert_eq!(table.lines().count(), 2 + 2 + 1);
        assert!(table.contains("40.0"));
    }
}
