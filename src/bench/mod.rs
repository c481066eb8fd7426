//! `sluice bench`: a load generator for any OpenAI-compatible server.
//!
//! The same workload measures sluice and llama.cpp's llama-server: streamed `/v1/completions`
//! with prompts of a fixed token length (distinct per request, so prefix caching cannot skip
//! them) and a fixed output length (`max_tokens` with `ignore_eos`), swept over concurrency
//! levels of closed-loop clients. Each level has a warm-up that is not counted and a bounded
//! measurement window. Results go to stdout as a table, to JSON, and to an SVG chart;
//! `--merge` combines several runs' JSON into one chart and a markdown table of ratios.

mod client;
mod percentile;
mod prompt;
mod report;
mod sse;
mod svg;
mod sweep;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use client::Endpoint;
use prompt::PromptFactory;
use report::BenchReport;
use sweep::{BenchEndpoint, LevelPlan, Workload};

/// Command-line arguments of `sluice bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Base URL of the OpenAI-compatible routes.
    #[arg(long, default_value = "http://127.0.0.1:8000/v1")]
    pub base_url: String,
    /// Model name to request; default: the first one `/v1/models` lists.
    #[arg(long)]
    pub model: Option<String>,
    /// Prompt length in tokens (calibrated with the server's `/tokenize` when it has one).
    #[arg(long, default_value_t = 128)]
    pub prompt_tokens: usize,
    /// Tokens generated per request (`max_tokens` with `ignore_eos`).
    #[arg(long, default_value_t = 128)]
    pub output_tokens: u32,
    /// Concurrency levels to sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub concurrency: Vec<usize>,
    /// Measurement window per level, seconds.
    #[arg(long, default_value_t = 30.0)]
    pub duration_secs: f64,
    /// Warm-up per level, seconds (requests started in it are not measured).
    #[arg(long, default_value_t = 5.0)]
    pub warmup_secs: f64,
    /// After the window, how long to wait for in-flight requests before cutting them, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub drain_secs: f64,
    /// Stop a level early once this many requests have started in its window.
    #[arg(long)]
    pub requests_per_level: Option<usize>,
    /// The API to measure: streamed completions, or embeddings (then the rates are embeddings
    /// per second, shown as output tokens).
    #[arg(long, value_enum, default_value_t = BenchEndpoint::Completions)]
    pub endpoint: BenchEndpoint,
    /// With `--endpoint embeddings`: distinct inputs per request (the client-side batch).
    #[arg(long, default_value_t = 1)]
    pub inputs_per_request: usize,
    /// Sampling temperature sent with every request.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Name of this run in tables and charts.
    #[arg(long, default_value = "sluice")]
    pub label: String,
    /// Bearer token sent as `Authorization`.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Write the results as JSON here (rewritten after every level).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write an SVG chart (throughput and TTFT against concurrency) here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// With `--merge`: also write the markdown comparison here.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Chart title.
    #[arg(long)]
    pub title: Option<String>,
    /// Run nothing: combine these JSON results into one chart and markdown table (ratios are
    /// against the last file).
    #[arg(long, num_args = 1..)]
    pub merge: Vec<PathBuf>,
}

/// Runs `sluice bench`.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if !args.merge.is_empty() {
        return merge(&args);
    }
    if args.concurrency.is_empty() || args.concurrency.contains(&0) {
        bail!("--concurrency needs one or more levels above zero");
    }
    if !(args.duration_secs > 0.0 && args.warmup_secs >= 0.0 && args.drain_secs >= 0.0) {
        bail!("--duration-secs must be positive; --warmup-secs and --drain-secs not negative");
    }
    let endpoint = Endpoint::new(&args.base_url, args.api_key.clone())?;
    let model = match &args.model {
        Some(model) => model.clone(),
        None => endpoint
            .first_model()
            .await
            .with_context(|| format!("asking {}/models for a model name", args.base_url))?,
    };
    let started = SystemTime::now().duration_since(UNIX_EPOCH)?;
    // Prompt numbers start somewhere new every run, so a server's prefix cache stays cold.
    let first_number = u64::from(started.subsec_micros()) * 97 + started.as_secs() % 1000;
    let prompts = PromptFactory::calibrated(&endpoint, &model, args.prompt_tokens, first_number)
        .await
        .context("calibrating the prompt length with /tokenize")?;
    match prompts.calibrated_tokens() {
        Some(tokens) => eprintln!(
            "prompt: {} words = {tokens:.1} tokens by the server's /tokenize (target {})",
            prompts.words(),
            args.prompt_tokens
        ),
        None => eprintln!(
            "prompt: no /tokenize; {} words (the server's usage reports the real length)",
            prompts.words()
        ),
    }
    let workload = Arc::new(Workload {
        model: model.clone(),
        prompts,
        output_tokens: args.output_tokens,
        temperature: args.temperature,
        endpoint: args.endpoint,
        inputs_per_request: args.inputs_per_request.max(1),
    });
    let mut report = BenchReport {
        label: args.label.clone(),
        base_url: args.base_url.clone(),
        model,
        prompt_tokens_target: args.prompt_tokens,
        prompt_tokens_calibrated: workload.prompts.calibrated_tokens(),
        output_tokens: args.output_tokens,
        warmup_s: args.warmup_secs,
        duration_s: args.duration_secs,
        started_unix_s: started.as_secs(),
        levels: Vec::new(),
    };
    for &concurrency in &args.concurrency {
        eprintln!(
            "level: {concurrency} concurrent streams, {}s warm-up + {}s measured",
            args.warmup_secs, args.duration_secs
        );
        let plan = LevelPlan {
            concurrency,
            warmup: Duration::from_secs_f64(args.warmup_secs),
            duration: Duration::from_secs_f64(args.duration_secs),
            drain_cap: Duration::from_secs_f64(args.drain_secs),
            max_requests: args.requests_per_level,
        };
        let level = sweep::run_level(&endpoint, &workload, plan)
            .await
            .context("a bench client task failed")?;
        let unit = match args.endpoint {
            BenchEndpoint::Completions => "output tok/s",
            BenchEndpoint::Embeddings => "embeddings/s",
        };
        eprintln!(
            "  => {:.1} {unit}, {:.2} req/s, TTFT p50 {} ms, errors {}{}",
            level.output_tokens_per_s,
            level.requests_per_s,
            level
                .ttft_ms
                .map_or_else(|| "-".to_owned(), |t| format!("{:.1}", t.p50)),
            level.errors,
            level
                .error_samples
                .first()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        );
        report.levels.push(level);
        if let Some(path) = &args.out {
            write_file(path, &serde_json::to_string_pretty(&report)?)?;
        }
    }
    print!("{}", report::text_table(&report));
    if let Some(path) = &args.svg {
        let title = args.title.clone().unwrap_or_else(|| {
            format!(
                "{}: prompt {} / output {} tokens",
                report.model, report.prompt_tokens_target, report.output_tokens
            )
        });
        write_file(
            path,
            &svg::render_chart(&title, std::slice::from_ref(&report)),
        )?;
    }
    Ok(())
}

/// `--merge`: one chart and one markdown comparison from several runs' JSON.
fn merge(args: &BenchArgs) -> anyhow::Result<()> {
    let reports = args
        .merge
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str::<BenchReport>(&text)
                .with_context(|| format!("parsing {} as sluice bench JSON", path.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let markdown = report::markdown_comparison(&reports);
    print!("{markdown}");
    if let Some(path) = &args.markdown {
        write_file(path, &markdown)?;
    }
    if let Some(path) = &args.svg {
        let title = args.title.clone().unwrap_or_else(|| {
            let labels: Vec<&str> = reports.iter().map(|r| r.label.as_str()).collect();
            labels.join(" vs ")
        });
        write_file(path, &svg::render_chart(&title, &reports))?;
    }
    Ok(())
}

fn write_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}
