//! `sluice serve`: offer the models through a model pool (loaded on demand within a memory
//! budget), listen at once (the health probes answer from the start), preload the models asked
//! for, serve the HTTP API, drain on SIGTERM (see `drain.rs`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_api::lifecycle::gate::gated;
use sluice_api::lifecycle::Lifecycle;
use sluice_api::registry::ModelTask;
use sluice_api::server::allowed_hosts::AllowedHosts;
use sluice_api::server::ServeOptions;
use sluice_api::{router_with, ApiConfig, ModelRegistry};
use sluice_engine::kv_events::KvEventPublisher;
use sluice_engine::pool::{Budget, DirectoryLoader, MemoryShare, ModelPool};

use crate::cli_parse::parse_seconds;
use crate::drain::{drain, RunningServer, ShutdownSignals};
use crate::engine_args::EngineArgs;
use crate::kv_events_args::KvEventsArgs;
use crate::launch::{bundled_model_dir, default_max_memory_bytes, model_names, model_specs};
use crate::media_args::{with_projectors, MediaArgs};

/// How long a load waits for busy models to go idle when only they stand in its way.
const LOAD_WAIT_FOR_IDLE: Duration = Duration::from_secs(30);

/// Flags of `sluice serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A Hugging Face model directory or a GGUF file; repeat to serve several. Defaults to the
    /// bundled model when neither --model nor --models-dir is given.
    #[arg(long = "model")]
    pub models: Vec<PathBuf>,
    /// llama.cpp's projector file (`mmproj-*.gguf`) of a GGUF --model, for its images (one per
    /// --model, in order; llama-server's `--mmproj`). Without it, a projector file beside the
    /// model's GGUF is used: the one `mmproj*.gguf` in a folder of one model, else
    /// `mmproj-NAME.gguf` beside `NAME.gguf`.
    #[arg(long = "mmproj")]
    pub mmproj: Vec<PathBuf>,
    /// The id clients use for the model (one per --model, in order); more names after commas
    /// (`--served-model-name qwen,gpt-4o-mini`) also reach it.
    #[arg(long = "served-model-name")]
    pub served_model_names: Vec<String>,
    /// PATTERN=MODEL: requests naming a model that matches the glob (`*`, `?`) go to MODEL, for
    /// clients with fixed model names (`--model-alias 'claude-*=qwen3-coder'`). Repeatable; the
    /// first matching rule wins; served ids and names always win over rules.
    #[arg(long = "model-alias")]
    pub model_aliases: Vec<String>,
    /// Cut a request's `max_tokens` to what is left of the context instead of refusing it
    /// (llama-server's behaviour; clients like Claude Code always ask for 32,000).
    #[arg(long)]
    pub clamp_max_tokens: bool,
    /// The model a request without `model` goes to (default: the only model served; with
    /// several and no default, such a request is a 400).
    #[arg(long = "default-model")]
    pub default_model: Option<String>,
    /// A folder of models: each folder in it holding a config.json is served under its folder
    /// name, each GGUF file under its stem, each folder holding one GGUF model (and its
    /// `mmproj*.gguf`, llama.cpp's router layout) under its folder name. Projector files are
    /// not models. Repeatable.
    #[arg(long = "models-dir")]
    pub models_dirs: Vec<PathBuf>,
    /// Load this model at start (repeatable). With a single model and no --preload, that model
    /// is preloaded.
    #[arg(long = "preload")]
    pub preload: Vec<String>,
    /// Never unload this model, neither to make room nor by an admin (repeatable).
    #[arg(long = "pin")]
    pub pin: Vec<String>,
    /// GiB all loaded models may hold together (weights plus KV pools); default: 3/4 of RAM.
    #[arg(long)]
    pub max_memory: Option<f64>,
    /// Most models loaded at once.
    #[arg(long)]
    pub max_models: Option<usize>,
    /// Seconds a model's load (reading its files, starting its engine) may take. A load still
    /// running then is abandoned: its waiting requests get a 503 naming this flag, its memory
    /// reservation is freed and other models' loads never wait for it.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub load_timeout: u64,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Require this key on the API (`Authorization: Bearer KEY` or `X-Api-Key: KEY`).
    /// Repeatable (or comma-separated in SLUICE_API_KEY); each key gets its own prefix-cache
    /// scope, so tenants cannot probe each other's prompts through cache hits.
    #[arg(long = "api-key", env = "SLUICE_API_KEY", value_delimiter = ',')]
    pub api_keys: Vec<String>,
    /// A file of API keys, one per line (blank lines and lines starting with # are skipped);
    /// adds to --api-key.
    #[arg(long)]
    pub api_keys_file: Option<PathBuf>,
    /// Require this key on the admin routes (`/admin/*`: load, unload, pin), where API keys
    /// then do not suffice; it opens the API routes too. Without it the admin routes take the
    /// API keys (or nothing, without --api-key).
    #[arg(long = "admin-key", env = "SLUICE_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,
    /// Leave `usage.prompt_tokens_details.cached_tokens` out of responses (for one key shared
    /// by many users, where the count would tell a caller what others sent).
    #[arg(long)]
    pub hide_cached_tokens: bool,
    /// Let browser apps on this origin call the API (CORS, and requests that change state,
    /// which browsers are otherwise refused from other origins); repeatable or
    /// comma-separated, `*` for any origin.
    #[arg(long = "allowed-origins", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
    /// Answer requests for this `Host` name too (a guard against DNS rebinding); repeatable or
    /// comma-separated, `.example.com` for a domain and its subdomains, `*` for any. localhost
    /// and IP addresses are always answered. Default: only those when --host is a loopback
    /// address, any name otherwise.
    #[arg(long = "allowed-hosts", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,
    /// Where image URLs may be fetched from, and within which limits.
    #[command(flatten)]
    pub media: MediaArgs,
    /// Tokenize special-token text inside chat messages into control tokens (the old,
    /// injectable behaviour: a user could write a system turn). Off by default.
    #[arg(long)]
    pub parse_special_tokens_in_messages: bool,
    /// Prompts templated and tokenized at once (more wait; a freed slot goes to the waiting
    /// caller holding the fewest); default: the number of CPUs.
    #[arg(long)]
    pub max_concurrent_tokenizations: Option<usize>,
    /// The format models write tool calls in: hermes, qwen3_coder, llama3_json, mistral or
    /// generic. Default: detected from each model's chat template.
    #[arg(long, value_parser = parse_tool_call_parser)]
    pub tool_call_parser: Option<String>,
    /// Seconds a connection has to send a complete request head: from being accepted (whatever
    /// it sends meanwhile, an HTTP/2 preface included) and, on a kept-alive connection, from the
    /// end of its previous response. A connection that misses it is closed.
    #[arg(long, default_value_t = 30.0, value_parser = parse_seconds)]
    pub header_timeout: f64,
    /// Seconds a response may find the client's socket full (the client not reading) before
    /// the connection is dropped and its request cancelled, freeing its KV blocks.
    #[arg(long, default_value_t = 20.0, value_parser = parse_seconds)]
    pub write_timeout: f64,
    /// Connections open at once; one more is answered 503 (with `Retry-After: 1`) and closed.
    /// Keep it below the process's open-file limit (`ulimit -n`).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Also accept HTTP/2 over cleartext (prior knowledge, "h2c"). Off by default: OpenAI
    /// clients speak HTTP/1.1. When on, idle connections are pinged every 20 s and closed when
    /// the peer does not answer within 20 s.
    #[arg(long)]
    pub h2c: bool,
    /// Do not serve the web app (playground and dashboard) at `/` and `/ui/`.
    #[arg(long)]
    pub no_ui: bool,
    /// Seconds running requests get to finish after SIGTERM or Ctrl-C (new ones get 503 with
    /// Retry-After meanwhile); what still runs then is cancelled. The engines then get as long
    /// again to finish their step and the disk tier to write what it queued, so give the pod a
    /// termination grace period above twice this.
    #[arg(long, default_value_t = 30.0, value_parser = parse_seconds)]
    pub drain_timeout: f64,
    /// Seconds an engine with work may go without finishing a step before `/health/live`
    /// reports it wedged (503). One CPU step over a long prompt chunk can take a while.
    #[arg(long, default_value_t = 300.0, value_parser = parse_seconds)]
    pub liveness_timeout: f64,
    /// What the models are served for: `embed` marks an embedder (generation requests are a
    /// 400), `score` a reranker, `generate` a generative model; `auto` lets each model's files
    /// decide (sentence-transformers pooling files make an embedder). Once for every model, or
    /// once per --model in order.
    #[arg(long = "task", value_enum)]
    pub tasks: Vec<TaskArg>,
    /// MiB the Responses API's stored responses (`store: true`) may hold in all; the oldest
    /// entry of the caller holding the most goes first.
    #[arg(long, value_name = "MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub responses_store_mib: u64,
    /// MiB one API key's stored responses may hold; its own oldest go first.
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub responses_store_mib_per_key: u64,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub kv_events: KvEventsArgs,
}

/// `--task` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TaskArg {
    /// Each model's files decide.
    Auto,
    /// Chat and completions only.
    Generate,
    /// Embeddings (rerank and score by cosine similarity); no generation.
    Embed,
    /// Rerank and score by "yes"/"no" logits; no generation or embeddings.
    Score,
}

impl TaskArg {
    fn task(self) -> ModelTask {
        match self {
            TaskArg::Auto => ModelTask::Auto,
            TaskArg::Generate => ModelTask::Generate,
            TaskArg::Embed => ModelTask::Embed,
            TaskArg::Score => ModelTask::Score,
        }
    }
}

/// The task of each served id: one `--task` for every model, or one per `--model` in order
/// (those are the first specs).
fn model_tasks(
    tasks: &[TaskArg],
    specs: &[sluice_engine::pool::ModelSpec],
    num_models: usize,
) -> anyhow::Result<HashMap<String, ModelTask>> {
    match tasks {
        [] => Ok(HashMap::new()),
        [one] => Ok(specs.iter().map(|s| (s.id.clone(), one.task())).collect()),
        many => {
            anyhow::ensure!(
                many.len() == num_models,
                "{} --task given for {num_models} --model (give one for all, or one per --model)",
                many.len()
            );
            Ok((specs.iter().zip(many))
                .map(|(s, t)| (s.id.clone(), t.task()))
                .collect())
        }
    }
}

/// The keys of `--api-key` and of `--api-keys-file`; empty keys are refused (they would let
/// anyone in who sends an empty bearer token).
fn api_keys(flags: &[String], file: Option<&std::path::Path>) -> anyhow::Result<Vec<String>> {
    let mut keys: Vec<String> = flags.iter().map(|k| k.trim().to_string()).collect();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --api-keys-file {}", path.display()))?;
        keys.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string),
        );
        anyhow::ensure!(
            !keys.is_empty(),
            "--api-keys-file {} has no keys",
            path.display()
        );
    }
    anyhow::ensure!(
        keys.iter().all(|k| !k.is_empty()),
        "--api-key must not be empty"
    );
    Ok(keys)
}

/// The `--admin-key`: not empty, and not one of the API keys (it would not separate anyone).
fn admin_key(flag: Option<&str>, api_keys: &[String]) -> anyhow::Result<Option<String>> {
    let Some(key) = flag.map(str::trim) else {
        return Ok(None);
    };
    anyhow::ensure!(!key.is_empty(), "--admin-key must not be empty");
    anyhow::ensure!(
        !api_keys.iter().any(|k| k == key),
        "--admin-key must differ from every --api-key"
    );
    Ok(Some(key.to_string()))
}

/// Runs the server until SIGTERM or Ctrl-C, then drains.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let api_keys = api_keys(&args.api_keys, args.api_keys_file.as_deref())?;
    let admin_key = admin_key(args.admin_key.as_deref(), &api_keys)?;
    let allowed_hosts =
        AllowedHosts::from_flag(&args.allowed_hosts).map_err(|e| anyhow::anyhow!(e))?;
    if args.allowed_origins.iter().any(|o| o.trim() == "*") && api_keys.is_empty() {
        tracing::warn!(
            "--allowed-origins '*' without --api-key: any web page its visitors open can call \
             this server's API, the admin routes included unless --admin-key is set"
        );
    }
    let models = if args.models.is_empty() && args.models_dirs.is_empty() {
        vec![bundled_model_dir()]
    } else {
        args.models.clone()
    };
    let specs = model_specs(
        &models,
        &args.served_model_names,
        &args.models_dirs,
        &args.pin,
    )?;
    let budget = Budget {
        max_memory_bytes: match args.max_memory {
            Some(gib) => {
                anyhow::ensure!(
                    gib.is_finite() && gib > 0.0,
                    "--max-memory must be a positive number of GiB"
                );
                (gib * (1u64 << 30) as f64) as usize
            }
            None => default_max_memory_bytes(),
        },
        max_models: args.max_models,
        wait_for_idle: LOAD_WAIT_FOR_IDLE,
        load_timeout: Duration::from_secs(args.load_timeout),
    };
    anyhow::ensure!(
        budget.max_models != Some(0),
        "--max-models must be at least 1"
    );
    let preload = if args.preload.is_empty() && specs.len() == 1 {
        vec![specs[0].id.clone()]
    } else {
        args.preload.clone()
    };
    for name in &preload {
        anyhow::ensure!(
            specs.iter().any(|s| &s.id == name),
            "--preload {name}: no model is served under that name"
        );
    }
    let tasks = model_tasks(&args.tasks, &specs, models.len())?;
    let names = model_names(
        &args.served_model_names,
        &specs,
        &args.model_aliases,
        args.default_model.as_deref(),
    )?;
    let share = MemoryShare::of(&budget, specs.len());
    let mut settings = args.engine.launch_options(share)?;
    let kv_disk = settings.kv_disk.clone();
    let kv_events = args.kv_events.start()?;
    settings.kv_events = (kv_events.clone()).map(|p| p as Arc<dyn KvEventPublisher>);
    let loader = with_projectors(DirectoryLoader::new(settings), &models, &args.mmproj)?;
    let pool = ModelPool::new(specs, Arc::new(loader), budget)?;
    tracing::info!(
        models = ?pool.ids(),
        max_memory_gib = format_args!("{:.2}", budget.max_memory_bytes as f64 / (1u64 << 30) as f64),
        max_models = ?budget.max_models,
        "models available"
    );
    let defaults = ApiConfig::default();
    let config = ApiConfig {
        admin_key,
        api_keys,
        hide_cached_tokens: args.hide_cached_tokens,
        parse_special_tokens_in_messages: args.parse_special_tokens_in_messages,
        allowed_origins: args.allowed_origins.clone(),
        max_concurrent_tokenizations: args
            .max_concurrent_tokenizations
            .unwrap_or(defaults.max_concurrent_tokenizations)
            .max(1),
        tool_call_parser: args.tool_call_parser.clone(),
        stored_response_bytes: (args.responses_store_mib << 20) as usize,
        stored_response_bytes_per_key: (args.responses_store_mib_per_key << 20) as usize,
        liveness_timeout: Duration::from_secs_f64(args.liveness_timeout),
        clamp_max_tokens: args.clamp_max_tokens,
        media: args.media.fetch_config(),
        ..defaults
    };
    let retry_after_secs = config.retry_after_secs;
    let lifecycle = Arc::new(Lifecycle::starting(preload.iter().cloned()));
    let registry = ModelRegistry::pooled(pool.clone())
        .with_tasks(tasks)
        .with_names(names);
    let mut app = router_with(Arc::new(registry), config, Arc::clone(&lifecycle));
    if !args.no_ui {
        app = app.merge(sluice_api::routes::ui::router());
    }
    let app = gated(app, Arc::clone(&lifecycle), retry_after_secs);
    let drain_timeout = Duration::from_secs_f64(args.drain_timeout);

    let serve_options = ServeOptions {
        header_read_timeout: Duration::from_secs_f64(args.header_timeout),
        write_timeout: Duration::from_secs_f64(args.write_timeout),
        max_connections: args.max_connections as usize,
        http2: args.h2c,
        allowed_hosts: allowed_hosts.clone(),
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut signals = ShutdownSignals::listen().context("listening for SIGTERM")?;
        // Listen first: the probes answer while the models load (startup and ready 503).
        let addr = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let local = listener.local_addr()?;
        tracing::info!("listening on http://{local}");
        tracing::info!("answering {}", allowed_hosts.describe(local.ip()));
        let (stop, mut stopping) = tokio::sync::watch::channel(false);
        let stopped = async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        };
        let server = RunningServer {
            task: tokio::spawn(sluice_api::server::serve(
                listener,
                app,
                serve_options,
                stopped,
            )),
            stop,
        };
        let preloading = async {
            for name in &preload {
                pool.load(name)
                    .await
                    .with_context(|| format!("preloading {name}"))?;
                lifecycle.preloaded(name);
                tracing::info!(model = name, "preloaded");
            }
            anyhow::Ok(())
        };
        // A signal during the preload goes straight to the drain.
        let signal = tokio::select! {
            preloaded = preloading => {
                if let Err(e) = preloaded {
                    tracing::error!("{e:#}");
                    server.task.abort();
                    pool.shutdown();
                    return Err(e);
                }
                tracing::info!("started: every --preload model is loaded; ready");
                signals.recv().await
            }
            signal = signals.recv() => signal,
        };
        tracing::info!(signal, "shutting down");
        drain(&lifecycle, server, drain_timeout).await;
        // The engines finish what they accepted (what was cancelled is aborted at their next
        // step) and exit, each waiting for the disk tier to write what it queued; the process
        // must not end before that.
        tracing::info!("stopping the engines");
        let engines = pool.shutdown();
        let _ = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + drain_timeout;
            for engine in &engines {
                engine.wait_stopped(deadline.saturating_duration_since(std::time::Instant::now()));
            }
            if let Some(disk) = kv_disk {
                disk.flush();
            }
            // The engines' last events (each model's AllBlocksCleared) go out before the exit.
            if let Some(events) = kv_events {
                events.flush(Duration::from_secs(1));
            }
        })
        .await;
        tracing::info!("stopped");
        anyhow::Ok(())
    })
}

/// A `--tool-call-parser` name, checked at startup.
fn parse_tool_call_parser(name: &str) -> Result<String, String> {
    sluice_text::assistant::ToolCallFormat::from_name(name).map(|_| name.to_string())
}
