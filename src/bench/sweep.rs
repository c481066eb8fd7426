//! One concurrency level: closed-loop clients, a warm-up, a bounded measurement window, a capped
//! drain, and the arithmetic that turns request records into a [`LevelReport`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::client::{CompletionRequest, Endpoint, LiveCounters, Outcome, RequestRecord};
use super::percentile::Samples;
use super::prompt::PromptFactory;
use super::report::{LatencyMs, LevelReport};

/// What every request of the run asks for.
#[derive(Debug)]
pub struct Workload {
    /// Model name as the server knows it.
    pub model: String,
    /// Source of distinct fixed-length prompts.
    pub prompts: PromptFactory,
    /// Tokens to generate per request.
    pub output_tokens: u32,
    /// Sampling temperature.
    pub temperature: f64,
    /// Which API the requests go to.
    pub endpoint: BenchEndpoint,
    /// Inputs per `/embeddings` request (distinct prompts).
    pub inputs_per_request: usize,
}

/// The API a bench run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BenchEndpoint {
    /// Streamed `/v1/completions` with a fixed output length (output tokens per second).
    #[default]
    Completions,
    /// `/v1/embeddings` with `--inputs-per-request` prompts each (embeddings per second,
    /// reported as output tokens: one per embedding).
    Embeddings,
}

/// Timing of one level.
#[derive(Debug, Clone, Copy)]
pub struct LevelPlan {
    /// Closed-loop clients.
    pub concurrency: usize,
    /// Time before the measurement window; requests in it are not counted.
    pub warmup: Duration,
    /// Length of the measurement window; no request is issued after it.
    pub duration: Duration,
    /// How long to wait for in-flight requests after the window before cutting them.
    pub drain_cap: Duration,
    /// Stop issuing once this many requests have started in the window.
    pub max_requests: Option<usize>,
}

/// Runs one level against `endpoint`, printing a progress line to stderr every second. Fails only
/// if a client task panicked.
pub async fn run_level(
    endpoint: &Endpoint,
    workload: &Arc<Workload>,
    plan: LevelPlan,
) -> Result<LevelReport, tokio::task::JoinError> {
    let live = Arc::new(LiveCounters::default());
    let window_start = Instant::now() + plan.warmup;
    let deadline = window_start + plan.duration;
    let cut_at = deadline + plan.drain_cap;
    let issued_in_window = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::with_capacity(plan.concurrency);
    for client in 0..plan.concurrency {
        let (endpoint, workload) = (endpoint.clone(), Arc::clone(workload));
        let (live, issued_in_window) = (Arc::clone(&live), Arc::clone(&issued_in_window));
        // Clients start spread over the warm-up, so they do not all prefill in the same step
        // and then finish together, cycle after cycle.
        let first_start =
            Instant::now() + plan.warmup.mul_f64(client as f64 / plan.concurrency as f64);
        clients.push(tokio::spawn(async move {
            tokio::time::sleep_until(first_start).await;
            let mut records = Vec::new();
            loop {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                if let (Some(max), true) = (plan.max_requests, now >= window_start) {
                    if issued_in_window.fetch_add(1, Ordering::Relaxed) >= max {
                        break;
                    }
                }
                let record = match workload.endpoint {
                    BenchEndpoint::Completions => {
                        let request = CompletionRequest {
                            model: workload.model.clone(),
                            prompt: workload.prompts.next_prompt(),
                            max_tokens: workload.output_tokens,
                            temperature: workload.temperature,
                        };
                        endpoint.stream_completion(&request, cut_at, &live).await
                    }
                    BenchEndpoint::Embeddings => {
                        let inputs = (0..workload.inputs_per_request)
                            .map(|_| workload.prompts.next_prompt())
                            .collect();
                        endpoint.embed(&workload.model, inputs, cut_at, &live).await
                    }
                };
                if matches!(record.outcome, Outcome::Failed(_)) {
                    // An overloaded server answers at once; do not spin on it.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                records.push(record);
            }
            records
        }));
    }
    let progress = tokio::spawn(print_progress(
        plan,
        Arc::clone(&live),
        window_start,
        deadline,
    ));
    let mut records = Vec::new();
    let mut outcome = Ok(());
    for client in clients {
        match client.await {
            Ok(client_records) => records.extend(client_records),
            Err(error) => outcome = Err(error),
        }
    }
    progress.abort();
    outcome.map(|()| summarize(plan.concurrency, &records, window_start, deadline))
}

async fn print_progress(
    plan: LevelPlan,
    live: Arc<LiveCounters>,
    window_start: Instant,
    deadline: Instant,
) {
    let started = Instant::now();
    let mut last_chunks = 0;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let now = Instant::now();
        let phase = if now < window_start {
            "warm-up"
        } else if now < deadline {
            "measure"
        } else {
            "drain"
        };
        let chunks = live.chunks.load(Ordering::Relaxed);
        eprintln!(
            "  c={:<3} {:>5.0}s {:<7} chunks/s {:>7} done {:>5} in-flight {:>3} errors {}",
            plan.concurrency,
            (now - started).as_secs_f64(),
            phase,
            chunks - last_chunks,
            live.completed.load(Ordering::Relaxed),
            live.in_flight.load(Ordering::Relaxed),
            live.failed.load(Ordering::Relaxed),
        );
        last_chunks = chunks;
    }
}

/// Turns the records of one level into its report.
///
/// Throughput counts the tokens whose chunks arrived inside the window, whichever request they
/// belong to, so requests straddling the window's edges count for the part inside it. TTFT and
/// inter-token latency come from requests that started inside the window and did not fail (a
/// request cut by the drain cap still has a first token and gaps); end-to-end latency and
/// completion length from those that completed.
pub fn summarize(
    concurrency: usize,
    records: &[RequestRecord],
    window_start: Instant,
    deadline: Instant,
) -> LevelReport {
    let last_finish = records.iter().map(|r| r.finished).max().unwrap_or(deadline);
    // A request bound can end the level before the deadline.
    let window_end = deadline.min(last_finish).max(window_start);
    let window_s = (window_end - window_start).as_secs_f64();
    let in_window = |t: Instant| t >= window_start && t <= window_end;
    let tokens: f64 = records
        .iter()
        .map(|r| {
            r.content_chunks.iter().filter(|t| in_window(**t)).count() as f64 * r.tokens_per_chunk()
        })
        .sum();
    let completed_in_window = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Completed) && in_window(r.finished))
        .count() as u64;
    let measured: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::Failed(_)) && r.started >= window_start)
        .collect();
    let completed: Vec<&RequestRecord> = measured
        .iter()
        .copied()
        .filter(|r| matches!(r.outcome, Outcome::Completed))
        .collect();
    let ttft = Samples::new(
        measured
            .iter()
            .filter_map(|r| r.time_to_first_token())
            .map(|d| d.as_secs_f64() * 1e3)
            .collect(),
    );
    let itl = Samples::new(
        measured
            .iter()
            .flat_map(|r| r.inter_token_latencies_ms())
            .collect(),
    );
    let e2e = Samples::new(
        completed
            .iter()
            .map(|r| (r.finished - r.started).as_secs_f64() * 1e3)
            .collect(),
    );
    let prompt_tokens = Samples::new(
        completed
            .iter()
            .filter_map(|r| r.usage?.prompt_tokens.map(|p| p as f64))
            .collect(),
    );
    let completion_tokens = Samples::new(
        measured
            .iter()
            .map(|r| r.completion_tokens() as f64)
            .collect(),
    );
    let mut error_samples: Vec<String> = Vec::new();
    let mut errors = 0;
    for record in records {
        if let Outcome::Failed(error) = &record.outcome {
            errors += 1;
            let message = error.to_string();
            if error_samples.len() < 3 && !error_samples.contains(&message) {
                error_samples.push(message);
            }
        }
    }
    let per_second = |count: f64| {
        if window_s > 0.0 {
            count / window_s
        } else {
            0.0
        }
    };
    let latency = |s: &Samples| {
        Some(LatencyMs {
            p50: s.p50()?,
            p99: s.p99()?,
        })
    };
    LevelReport {
        concurrency,
        window_s,
        requests_completed: completed_in_window,
        requests_per_s: per_second(completed_in_window as f64),
        output_tokens_per_s: per_second(tokens),
        ttft_ms: latency(&ttft),
        itl_ms: latency(&itl),
        e2e_ms_p50: e2e.p50(),
        prompt_tokens_mean: prompt_tokens.mean(),
        completion_tokens_mean: completion_tokens.mean(),
        errors,
        cut: records
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Cut))
            .count() as u64,
        error_samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::client::RequestError;
    use crate::bench::sse::UsageCounts;

    fn record(
        start_ms: u64,
        chunk_ms: &[u64],
        end_ms: u64,
        base: Instant,
        usage: Option<u64>,
    ) -> RequestRecord {
        let at = |ms: u64| base + Duration::from_millis(ms);
        RequestRecord {
            started: at(start_ms),
            finished: at(end_ms),
            content_chunks: chunk_ms.iter().map(|&ms| at(ms)).collect(),
            usage: usage.map(|n| UsageCounts {
                prompt_tokens: Some(128),
                completion_tokens: Some(n),
            }),
            outcome: Outcome::Completed,
        }
    }

    #[test]
    fn throughput_counts_only_tokens_arriving_inside_the_window() {
        let base = Instant::now();
        let window_start = base + Duration::from_millis(1000);
        let deadline = base + Duration::from_millis(2000);
        // Straddles the start: chunks at 900 (out), 1100, 1200 (in).
        let early = record(800, &[900, 1100, 1200], 1200, base, Some(3));
        // Straddles the deadline: 1900 in, 2100 out.
        let late = record(1800, &[1900, 2100], 2100, base, Some(2));
        let report = summarize(2, &[early, late], window_start, deadline);
        assert!((report.window_s - 1.0).abs() < 1e-9);
        assert!((report.output_tokens_per_s - 3.0).abs() < 1e-9);
        // Only `early` finished inside the window; only `late` started in it.
        assert_eq!(report.requests_completed, 1);
        assert!((report.ttft_ms.unwrap().p50 - 100.0).abs() < 1e-6);
        assert!((report.e2e_ms_p50.unwrap() - 300.0).abs() < 1e-6);
    }

    #[test]
    fn chunks_carrying_several_tokens_split_their_gap() {
        let base = Instant::now();
        // 4 tokens in 2 chunks 40 ms apart: 20 ms per token.
        let r = record(0, &[10, 50], 50, base, Some(4));
        let report = summarize(1, &[r], base, base + Duration::from_millis(100));
        assert!((report.itl_ms.unwrap().p50 - 20.0).abs() < 1e-6);
        assert!((report.output_tokens_per_s - 4.0 / 0.05).abs() < 1e-6);
    }

    #[test]
    fn missing_usage_counts_one_token_per_chunk() {
        let base = Instant::now();
        let r = record(0, &[10, 20, 30], 30, base, None);
        assert_eq!(r.completion_tokens(), 3);
        let report = summarize(1, &[r], base, base + Duration::from_millis(30));
        assert!((report.itl_ms.unwrap().p50 - 10.0).abs() < 1e-6);
    }

    #[test]
    fn failures_are_counted_and_sampled_but_not_measured() {
        let base = Instant::now();
        let mut failed = record(0, &[], 5, base, None);
        failed.outcome = Outcome::Failed(RequestError::Stream("out of memory".into()));
        let mut cut = record(0, &[10], 90, base, None);
        cut.outcome = Outcome::Cut;
        let report = summarize(1, &[failed, cut], base, base + Duration::from_millis(50));
        assert_eq!(report.errors, 1);
        assert_eq!(report.cut, 1);
        assert_eq!(report.error_samples, ["error event: out of memory"]);
        assert_eq!(report.requests_completed, 0);
        // The cut request got its first token: it counts for TTFT but not for end-to-end latency.
        assert!((report.ttft_ms.unwrap().p50 - 10.0).abs() < 1e-6);
        assert_eq!(report.e2e_ms_p50, None);
    }
}
