//! `sluice generate`: one prompt through the real engine, printed as it streams, with speeds.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use sluice_engine::pool::MemoryShare;
use sluice_engine::{Event, FinishReason, GenerationRequest, SamplingParams, StopRules};

use crate::engine_args::EngineArgs;
use crate::launch::{bundled_model_dir, default_max_memory_bytes, launch};

/// Flags of `sluice generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// A Hugging Face model directory. Defaults to the bundled model.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The prompt (plain text, no chat template).
    #[arg(long)]
    pub prompt: String,
    /// Tokens to generate at most.
    #[arg(long, default_value_t = 64)]
    pub max_tokens: u32,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Nucleus sampling mass.
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Seed of the sampler.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Keep generating past end-of-sequence tokens.
    #[arg(long)]
    pub ignore_eos: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Generates and prints the continuation, then the prefill and decode speeds on stderr.
pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.max_tokens >= 1, "--max-tokens must be at least 1");
    anyhow::ensure!(
        (0.0..=2.0).contains(&args.temperature),
        "--temperature must be within [0, 2]"
    );
    anyhow::ensure!(
        args.top_p > 0.0 && args.top_p <= 1.0,
        "--top-p must be within (0, 1]"
    );
    let dir = args.model.clone().unwrap_or_else(bundled_model_dir);
    // No pool: the one model has the default pool budget to itself.
    let share = MemoryShare {
        budget_bytes: default_max_memory_bytes(),
        models: 1,
    };
    let launched = launch(&dir, &args.engine.launch_options(share)?)?;
    let prompt_tokens = launched
        .tokenizer
        .encode(&args.prompt, true)
        .context("tokenizing the prompt")?;
    anyhow::ensure!(!prompt_tokens.is_empty(), "the prompt is empty");
    let prompt_len = prompt_tokens.len();
    anyhow::ensure!(
        prompt_len + args.max_tokens as usize <= launched.max_model_len,
        "prompt ({prompt_len} tokens) plus --max-tokens ({}) exceeds the context length {}",
        args.max_tokens,
        launched.max_model_len
    );
    let request = GenerationRequest {
        prompt_tokens,
        n: 1,
        sampling: SamplingParams {
            temperature: args.temperature,
            top_p: args.top_p,
            seed: args.seed,
            ..SamplingParams::default()
        },
        stop: StopRules {
            max_tokens: args.max_tokens,
            ignore_eos: args.ignore_eos,
            ..StopRules::default()
        },
        priority: Default::default(),
        cache_salt: None,
        caller: None,
        images: Default::default(),
        prompt_outputs: sluice_engine::PromptOutputs::default(),
    };
    let started = Instant::now();
    let mut stream = launched
        .engine
        .submit(request)
        .context("submitting the request")?;
    let mut first_token_at = None;
    let mut last_token_at = started;
    let mut generated = 0usize;
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", args.prompt)?;
    while let Some(event) = stream.blocking_recv() {
        match event {
            Event::Delta {
                text, token_ids, ..
            } => {
                let now = Instant::now();
                if !token_ids.is_empty() {
                    first_token_at.get_or_insert(now);
                    last_token_at = now;
                    generated += token_ids.len();
                }
                write!(stdout, "{text}")?;
                stdout.flush()?;
            }
            Event::Finished { reason, error, .. } => {
                writeln!(stdout)?;
                if reason == FinishReason::Error {
                    anyhow::bail!(
                        "generation failed: {}",
                        error.unwrap_or_else(|| "unknown error".into())
                    );
                }
                let first = first_token_at.unwrap_or(last_token_at);
                let prefill = first.duration_since(started).as_secs_f64();
                let decode = last_token_at.duration_since(first).as_secs_f64();
                eprintln!(
                    "finish: {}; prompt {prompt_len} tokens in {:.3} s ({:.1} tok/s); \
                     decode {} tokens in {:.3} s ({:.1} tok/s)",
                    reason.as_str(),
                    prefill,
                    prompt_len as f64 / prefill.max(1e-9),
                    generated.saturating_sub(1),
                    decode,
                    generated.saturating_sub(1) as f64 / decode.max(1e-9),
                );
                break;
            }
            // No prompt outputs are asked for.
            Event::Prompt { .. } | Event::Scheduled { .. } => {}
        }
    }
    // The engine exits once its work is done, after the disk tier (if any) wrote what it
    // queued: wait for that before the process ends.
    launched.engine.shutdown();
    launched
        .engine
        .wait_stopped(std::time::Duration::from_secs(30));
    Ok(())
}
