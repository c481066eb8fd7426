//! `sluice serve`: offer the models through a model pool (loaded on demand within a memory
//! budget), preload the ones asked for, serve the HTTP API, drain on SIGTERM.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_api::registry::ModelTask;
use sluice_api::server::ServeOptions;
use sluice_api::{router_for, ApiConfig, ModelRegistry};
use sluice_engine::kv_disk::DiskCache;
use sluice_engine::pool::{Budget, DirectoryLoader, LoadSettings, MemoryShare, ModelPool};
use sluice_engine::{EngineConfig, FairShareConfig};
use sluice_model::{KvDtype, WeightDtype};

use crate::kv_cache_memory::KvCacheMemoryArg;
use crate::launch::{bundled_model_dir, default_max_memory_bytes, model_specs};

/// How long a load waits for busy models to go idle when only they stand in its way.
const LOAD_WAIT_FOR_IDLE: Duration = Duration::from_secs(30);

/// How long running requests may take to finish after SIGTERM before the process exits anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Weight storage types accepted by `--dtype`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum DtypeArg {
    /// Each matrix as stored where sluice has a format for it (f16 stays f16, a GGUF file's
    /// quantized types stay as they are); bf16 becomes f32 (its range does not fit f16).
    Auto,
    /// 32-bit floats.
    F32,
    /// 16-bit floats, converted to f32 inside the kernels.
    F16,
}

impl DtypeArg {
    fn weights(self) -> Option<WeightDtype> {
        match self {
            DtypeArg::Auto => None,
            DtypeArg::F32 => Some(WeightDtype::F32),
            DtypeArg::F16 => Some(WeightDtype::F16),
        }
    }

    fn kv(self) -> Option<KvDtype> {
        match self {
            DtypeArg::Auto => None,
            DtypeArg::F32 => Some(KvDtype::F32),
            DtypeArg::F16 => Some(KvDtype::F16),
        }
    }
}

/// `--quantize NAME`: a type sluice has a weight format for.
fn parse_quantize(name: &str) -> Result<WeightDtype, String> {
    WeightDtype::from_name(name)
        .filter(|d| !matches!(*d, WeightDtype::F32 | WeightDtype::F16))
        .ok_or_else(|| {
            format!(
                "unknown quantization type `{name}` (known: {})",
                WeightDtype::quantized_names().join(", ")
            )
        })
}

/// Model loading and engine flags shared by `serve` and `generate`.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineArgs {
    /// Most sequences running at once.
    #[arg(long, default_value_t = 64)]
    pub max_num_seqs: usize,
    /// Token budget of one engine step (decodes plus prefill chunks).
    #[arg(long, default_value_t = 512)]
    pub max_num_batched_tokens: usize,
    /// While streams are decoding, prompt chunks are sized (from measured step times) so that
    /// one step takes about this long, which bounds the stall a new prompt causes to running
    /// streams; prompts still get at least half of every step. 0 turns it off: only
    /// --max-num-batched-tokens bounds a step.
    #[arg(long, default_value_t = 250)]
    pub step_time_target_ms: u64,
    /// Waiting requests allowed before new ones get 429.
    #[arg(long, default_value_t = 256)]
    pub max_queue: usize,
    /// Memory for the paged KV cache of each model, counted in --max-memory: `auto`, or GiB.
    /// `auto` sizes each model's pool to hold 4 sequences at its full context (the model's own
    /// or --max-model-len) where --max-memory allows, never more than what the budget leaves
    /// after the model's weights (half of that when several models may be loaded at once),
    /// never less than 1 GiB where that fits; the figure and the context it allows are logged
    /// at load.
    #[arg(long, default_value_t = KvCacheMemoryArg::Auto)]
    pub kv_cache_memory: KvCacheMemoryArg,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
    /// How weights are kept in memory (bf16 checkpoints are converted at load).
    #[arg(long, value_enum, default_value_t = DtypeArg::Auto)]
    pub dtype: DtypeArg,
    /// Quantize every weight matrix at load to this type (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k,
    /// q3_k, q4_k, q5_k, q6_k), from safetensors or GGUF alike; rows whose length the type's
    /// blocks do not divide fall back to q8_0 (else f16), as llama-quantize does.
    #[arg(long, value_parser = parse_quantize, conflicts_with = "dtype")]
    pub quantize: Option<WeightDtype>,
    /// How the KV cache stores keys and values; `auto` follows the weights.
    #[arg(long, value_enum, default_value_t = DtypeArg::Auto)]
    pub kv_cache_dtype: DtypeArg,
    /// Context length limit (at most the model's own).
    #[arg(long)]
    pub max_model_len: Option<usize>,
    /// Turn automatic prefix caching off.
    #[arg(long)]
    pub no_prefix_caching: bool,
    /// Keep the prefix cache's blocks in this directory too (created 0700 if missing): a
    /// prompt computed once is read back instead of computed again after it left the RAM pool,
    /// after a model unload and after a restart. Blocks are written as they are computed, off
    /// the step loop; files name the model they belong to and are checked when read. The
    /// directory holds users' prompts (as token ids and KV): keep it private. Several servers
    /// may share one.
    #[arg(long, value_name = "DIR")]
    pub kv_disk_cache: Option<PathBuf>,
    /// GiB the --kv-disk-cache directory may hold; the least recently used blocks go first.
    #[arg(long, value_name = "GIB", default_value_t = 32.0)]
    pub kv_disk_cache_size: f64,
    /// Share running sequences fairly between callers (API keys; the `user` field when there
    /// is one key or none): while a caller waits below its share (--max-num-seqs divided by the
    /// callers with work), others over theirs are not admitted and may be preempted for it. A
    /// caller alone may use every seat.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    pub fair_share: Switch,
    /// Most sequences one caller may run at once, even on an idle server (default: no cap).
    #[arg(long)]
    pub max_seqs_per_caller: Option<usize>,
}

/// An on/off flag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

impl EngineArgs {
    /// The load settings these flags describe, for models that share the memory of `share`.
    pub fn launch_options(&self, share: MemoryShare) -> anyhow::Result<LoadSettings> {
        anyhow::ensure!(self.block_size > 0, "--block-size must be at least 1");
        anyhow::ensure!(self.max_num_seqs > 0, "--max-num-seqs must be at least 1");
        anyhow::ensure!(
            self.max_num_batched_tokens > 0,
            "--max-num-batched-tokens must be at least 1"
        );
        anyhow::ensure!(
            self.max_seqs_per_caller != Some(0),
            "--max-seqs-per-caller must be at least 1"
        );
        anyhow::ensure!(
            self.kv_disk_cache_size.is_finite() && self.kv_disk_cache_size > 0.0,
            "--kv-disk-cache-size must be a positive number of GiB"
        );
        let kv_disk = match &self.kv_disk_cache {
            Some(dir) if !self.no_prefix_caching => {
                let bytes = (self.kv_disk_cache_size * (1u64 << 30) as f64) as u64;
                Some(DiskCache::open(dir, bytes)?)
            }
            Some(_) => {
                anyhow::bail!("--kv-disk-cache needs prefix caching (drop --no-prefix-caching)")
            }
            None => None,
        };
        Ok(LoadSettings {
            dtype: self.quantize.or(self.dtype.weights()),
            kv_dtype: self.kv_cache_dtype.kv(),
            block_size: self.block_size,
            kv_cache_memory: self.kv_cache_memory.setting(share),
            max_model_len: self.max_model_len,
            engine: EngineConfig {
                max_num_seqs: self.max_num_seqs,
                max_num_batched_tokens: self.max_num_batched_tokens,
                max_queue: self.max_queue,
                enable_prefix_caching: !self.no_prefix_caching,
                step_time_target: (self.step_time_target_ms > 0)
                    .then(|| Duration::from_millis(self.step_time_target_ms)),
                fair_share: FairShareConfig {
                    enabled: self.fair_share == Switch::On,
                    max_seqs_per_caller: self.max_seqs_per_caller,
                },
                ..EngineConfig::default()
            },
            kv_disk,
        })
    }
}

/// Flags of `sluice serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A Hugging Face model directory; repeat to serve several. Defaults to the bundled model
    /// when neither --model nor --models-dir is given.
    #[arg(long = "model")]
    pub models: Vec<PathBuf>,
    /// The id clients use for the model (one per --model, in order).
    #[arg(long = "served-model-name")]
    pub served_model_names: Vec<String>,
    /// A folder of model directories: each one holding a config.json is served under its
    /// folder name. Repeatable.
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
    /// Leave `usage.prompt_tokens_details.cached_tokens` out of responses (for one key shared
    /// by many users, where the count would tell a caller what others sent).
    #[arg(long)]
    pub hide_cached_tokens: bool,
    /// Let browser apps on this origin call the API (CORS); repeatable or comma-separated,
    /// `*` for any origin.
    #[arg(long = "allowed-origins", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
    /// Tokenize special-token text inside chat messages into control tokens (the old,
    /// injectable behaviour: a user could write a system turn). Off by default.
    #[arg(long)]
    pub parse_special_tokens_in_messages: bool,
    /// Prompts templated and tokenized at once (more wait); default: the number of CPUs.
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
    /// What the models are served for: `embed` marks an embedder (generation requests are a
    /// 400), `score` a reranker, `generate` a generative model; `auto` lets each model's files
    /// decide (sentence-transformers pooling files make an embedder). Once for every model, or
    /// once per --model in order.
    #[arg(long = "task", value_enum)]
    pub tasks: Vec<TaskArg>,
    #[command(flatten)]
    pub engine: EngineArgs,
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

/// A positive number of seconds (fractions allowed).
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs < 1e9 => Ok(secs),
        _ => Err(format!("`{text}` is not a positive number of seconds")),
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

/// Runs the server until SIGTERM or Ctrl-C, then drains.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
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
    let share = MemoryShare::of(&budget, specs.len());
    let loader = DirectoryLoader::new(args.engine.launch_options(share)?);
    let pool = ModelPool::new(specs, Arc::new(loader), budget)?;
    tracing::info!(
        models = ?pool.ids(),
        max_memory_gib = format_args!("{:.2}", budget.max_memory_bytes as f64 / (1u64 << 30) as f64),
        max_models = ?budget.max_models,
        "models available"
    );
    let defaults = ApiConfig::default();
    let config = ApiConfig {
        api_keys: api_keys(&args.api_keys, args.api_keys_file.as_deref())?,
        hide_cached_tokens: args.hide_cached_tokens,
        parse_special_tokens_in_messages: args.parse_special_tokens_in_messages,
        allowed_origins: args.allowed_origins.clone(),
        max_concurrent_tokenizations: args
            .max_concurrent_tokenizations
            .unwrap_or(defaults.max_concurrent_tokenizations)
            .max(1),
        tool_call_parser: args.tool_call_parser.clone(),
        ..defaults
    };
    let registry = ModelRegistry::pooled(pool.clone()).with_tasks(tasks);
    let mut app = router_for(Arc::new(registry), config);
    if !args.no_ui {
        app = app.merge(sluice_api::routes::ui::router());
    }

    let serve_options = ServeOptions {
        header_read_timeout: Duration::from_secs_f64(args.header_timeout),
        write_timeout: Duration::from_secs_f64(args.write_timeout),
        max_connections: args.max_connections as usize,
        http2: args.h2c,
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        for name in &preload {
            pool.load(name)
                .await
                .with_context(|| format!("preloading {name}"))?;
        }
        let addr = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let local = listener.local_addr()?;
        tracing::info!("listening on http://{local}");
        // Graceful shutdown waits for open responses (running streams) to finish; the deadline
        // bounds that wait.
        let (stopping_tx, mut stopping_rx) = tokio::sync::watch::channel(false);
        let server = sluice_api::server::serve(listener, app, serve_options, async move {
            shutdown_signal().await;
            let _ = stopping_tx.send(true);
        });
        let deadline = async move {
            let _ = stopping_rx.wait_for(|stopping| *stopping).await;
            tokio::time::sleep(DRAIN_TIMEOUT).await;
        };
        tokio::select! {
            () = server => {}
            _ = deadline => tracing::warn!("drain timed out; cancelling what is still running"),
        }
        pool.shutdown();
        tracing::info!("stopped");
        anyhow::Ok(())
    })
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: no new connections, finishing running requests");
}

/// A `--tool-call-parser` name, checked at startup.
fn parse_tool_call_parser(name: &str) -> Result<String, String> {
    sluice_text::assistant::ToolCallFormat::from_name(name).map(|_| name.to_string())
}
