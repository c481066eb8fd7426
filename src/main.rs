//! `sluice`: an OpenAI-compatible LLM inference server with continuous batching.
//!
//! Subcommands: `serve` (the HTTP server), `generate` (one prompt from the command line, with
//! prefill and decode speeds) and `bench` (a load generator for any OpenAI-compatible server).

mod bench;
mod cli_parse;
mod drain;
mod engine_args;
mod generate;
mod kv_cache_memory;
mod kv_events_args;
mod launch;
mod media_args;
mod serve;
mod speculation_args;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "OpenAI-compatible LLM inference server"
)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve models over the OpenAI-compatible HTTP API.
    Serve(Box<serve::ServeArgs>),
    /// Generate a continuation for one prompt and print prefill and decode speeds.
    Generate(generate::GenerateArgs),
    /// Measure any OpenAI-compatible server under a concurrency sweep.
    Bench(bench::BenchArgs),
}

fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only for a person at a terminal: log files, pipes and collectors get plain text
    // (and NO_COLOR turns it off everywhere, https://no-color.org).
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Generate(args) => generate::run(args),
        Command::Bench(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(bench::run(args)),
    }
}
