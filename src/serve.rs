//! `sluice serve`: load the models, start their engines, serve the HTTP API, drain on SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use sluice_api::{router, ApiConfig, ServedModel};
use sluice_engine::{EngineConfig, EngineHandle};
use sluice_model::WeightDtype;

use crate::launch::{bundled_model_dir, default_model_id, launch, LaunchOptions};

/// How long running requests may take to finish after SIGTERM before the process exits anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Weight storage types accepted by `--dtype`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum DtypeArg {
    /// 32-bit floats.
    F32,
    /// 16-bit floats, converted to f32 inside the kernels.
    F16,
}

impl From<DtypeArg> for WeightDtype {
    fn from(d: DtypeArg) -> Self {
        match d {
            DtypeArg::F32 => WeightDtype::F32,
            DtypeArg::F16 => WeightDtype::F16,
        }
    }
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
    /// Waiting requests allowed before new ones get 429.
    #[arg(long, default_value_t = 256)]
    pub max_queue: usize,
    /// GiB of memory for the paged KV cache of each model.
    #[arg(long, default_value_t = 1.0)]
    pub kv_cache_memory: f64,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
    /// How weights are kept in memory (bf16 checkpoints are converted at load).
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// Context length limit (at most the model's own).
    #[arg(long)]
    pub max_model_len: Option<usize>,
    /// Turn automatic prefix caching off.
    #[arg(long)]
    pub no_prefix_caching: bool,
}

impl EngineArgs {
    /// The launch options these flags describe.
    pub fn launch_options(&self) -> anyhow::Result<LaunchOptions> {
        anyhow::ensure!(self.block_size > 0, "--block-size must be at least 1");
        anyhow::ensure!(self.max_num_seqs > 0, "--max-num-seqs must be at least 1");
        anyhow::ensure!(
            self.max_num_batched_tokens > 0,
            "--max-num-batched-tokens must be at least 1"
        );
        anyhow::ensure!(
            self.kv_cache_memory.is_finite() && self.kv_cache_memory > 0.0,
            "--kv-cache-memory must be a positive number of GiB"
        );
        Ok(LaunchOptions {
            dtype: self.dtype.into(),
            block_size: self.block_size,
            kv_cache_bytes: (self.kv_cache_memory * (1u64 << 30) as f64) as usize,
            max_model_len: self.max_model_len,
            engine: EngineConfig {
                max_num_seqs: self.max_num_seqs,
                max_num_batched_tokens: self.max_num_batched_tokens,
                max_queue: self.max_queue,
                enable_prefix_caching: !self.no_prefix_caching,
                ..EngineConfig::default()
            },
        })
    }
}

/// Flags of `sluice serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A Hugging Face model directory; repeat to serve several. Defaults to the bundled model.
    #[arg(long = "model")]
    pub models: Vec<PathBuf>,
    /// The id clients use for the model (one per --model, in order).
    #[arg(long = "served-model-name")]
    pub served_model_names: Vec<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Require `Authorization: Bearer KEY` on the API.
    #[arg(long, env = "SLUICE_API_KEY")]
    pub api_key: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Runs the server until SIGTERM or Ctrl-C, then drains.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let dirs = if args.models.is_empty() {
        vec![bundled_model_dir()]
    } else {
        args.models.clone()
    };
    anyhow::ensure!(
        args.served_model_names.len() <= dirs.len(),
        "{} --served-model-name given for {} --model",
        args.served_model_names.len(),
        dirs.len()
    );
    let opts = args.engine.launch_options()?;
    let mut served: Vec<ServedModel> = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let id = args
            .served_model_names
            .get(i)
            .cloned()
            .unwrap_or_else(|| default_model_id(dir));
        anyhow::ensure!(
            served.iter().all(|m| m.id != id),
            "two models are served as {id:?}; give --served-model-name"
        );
        let launched = launch(dir, &opts)?;
        tracing::info!(
            model = %id,
            memory_mib = launched.memory_bytes >> 20,
            "serving (weights plus KV cache)"
        );
        served.push(launched.served_as(id));
    }
    let engines: Vec<EngineHandle> = served.iter().map(|m| m.engine.clone()).collect();
    let config = ApiConfig {
        api_key: args.api_key.clone(),
        ..ApiConfig::default()
    };
    let app = router(served, config);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let addr = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let local = listener.local_addr()?;
        // Streamed tokens are small writes; Nagle's algorithm would hold each back ~40 ms.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tracing::info!("listening on http://{local}");
        // Graceful shutdown waits for open responses (running streams) to finish; the deadline
        // bounds that wait.
        let (stopping_tx, mut stopping_rx) = tokio::sync::watch::channel(false);
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            shutdown_signal().await;
            let _ = stopping_tx.send(true);
        });
        let deadline = async move {
            let _ = stopping_rx.wait_for(|stopping| *stopping).await;
            tokio::time::sleep(DRAIN_TIMEOUT).await;
        };
        tokio::select! {
            served = server => served.context("serving HTTP")?,
            _ = deadline => tracing::warn!("drain timed out; cancelling what is still running"),
        }
        for engine in &engines {
            engine.shutdown();
        }
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
