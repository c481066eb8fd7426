//! Starts the real HTTP API in-process over the tiny fixture model, on an ephemeral loopback
//! port, for the end-to-end tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_api::registry::ModelTask;
use sluice_api::server::allowed_hosts::AllowedHosts;
use sluice_api::server::ServeOptions;
use sluice_api::{ApiConfig, ServedModel};
use sluice_engine::{
    Engine, EngineConfig, EngineHandle, Executor, ExecutorError, ImageInput, ModelExecutor,
};
use sluice_model::{Batch, KvCache, KvDtype, KvPools, LoadOptions, Logits, Model};
use sluice_text::Tokenizer;

/// The model every test serves.
pub const MODEL_ID: &str = "llama";

/// POSTs `body` as JSON to `{base}{path}`; the status and the JSON answer.
pub async fn post_json(
    base: &str,
    path: &str,
    body: impl serde::Serialize,
) -> (u16, serde_json::Value) {
    let res = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

/// POSTs `body` with `"stream": true` added to `{base}{path}`; the whole SSE text.
pub async fn post_stream(base: &str, path: &str, body: &serde_json::Value) -> String {
    let mut body = body.clone();
    body["stream"] = serde_json::json!(true);
    let res = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    res.text().await.unwrap()
}

/// The fixture model directory.
pub fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/llama")
}

/// The real model executor, optionally slowed down so that a request of the tiny fixture model
/// lasts long enough to be disconnected from or queued behind.
struct SlowedExecutor {
    inner: ModelExecutor,
    step_delay: Duration,
}

impl Executor for SlowedExecutor {
    fn execute(&mut self, batch: &Batch) -> Result<Logits, ExecutorError> {
        if !self.step_delay.is_zero() {
            std::thread::sleep(self.step_delay);
        }
        self.inner.execute(batch)
    }

    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    fn block_size(&self) -> usize {
        self.inner.block_size()
    }

    fn kv_pools(&self) -> KvPools {
        self.inner.kv_pools()
    }

    fn block_bytes(&self, group: usize) -> usize {
        self.inner.block_bytes(group)
    }

    fn save_block(&self, group: usize, block: u32, out: &mut Vec<u8>) {
        self.inner.save_block(group, block, out);
    }

    fn load_block(&mut self, group: usize, block: u32, bytes: &[u8]) -> Result<(), ExecutorError> {
        self.inner.load_block(group, block, bytes)
    }
}

/// The options that serve the fixture model `fixtures/models/NAME` (as `llama`): `llama`
/// renders with no known tool-call format (the generic envelope), `llama-tools` is Hermes.
pub fn fixture(name: &str) -> ServerOptions {
    ServerOptions {
        model_dir: Some(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/models")
                .join(name),
        ),
        ..ServerOptions::default()
    }
}

/// Knobs a test may turn.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub api_keys: Vec<String>,
    /// `--admin-key`.
    pub admin_key: Option<String>,
    /// `--allowed-hosts`.
    pub allowed_hosts: AllowedHosts,
    /// Listen on 0.0.0.0 (every address) instead of 127.0.0.1; the tests still connect to
    /// 127.0.0.1.
    pub bind_all: bool,
    pub hide_cached_tokens: bool,
    pub allowed_origins: Vec<String>,
    pub max_num_seqs: usize,
    pub max_queue: usize,
    pub num_blocks: usize,
    pub max_body_bytes: usize,
    /// Added to every forward pass (the fixture model is otherwise done in milliseconds).
    pub step_delay: Duration,
    /// A connection must deliver its request headers within this time.
    pub header_read_timeout: Duration,
    /// A response whose socket takes no bytes for this long is dropped.
    pub write_timeout: Duration,
    /// Serve this fixture directory instead of `fixtures/models/llama` (still as `llama`).
    pub model_dir: Option<PathBuf>,
    /// What the model is served for (`--task`).
    pub task: ModelTask,
    /// The Responses store's byte budgets: in all, and per API key.
    pub stored_response_bytes: (usize, usize),
    /// More models, served by the same engine under these ids with these tokenizers (a
    /// tokenizer with another chat template).
    pub extra_models: Vec<(String, Arc<Tokenizer>)>,
    /// Extra names, alias rules and the default model.
    pub model_names: sluice_api::model_names::ModelNames,
    /// `--clamp-max-tokens`.
    pub clamp_max_tokens: bool,
    /// How often a quiet stream sends its protocol's keep-alive event.
    pub stream_keep_alive: Duration,
    /// `--speculative`.
    pub speculation: Option<sluice_engine::speculation::SpeculationConfig>,
    /// `--allowed-media-domains` and the image fetch limits.
    pub media: sluice_api::media::MediaFetchConfig,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            api_keys: Vec::new(),
            admin_key: None,
            allowed_hosts: AllowedHosts::default(),
            bind_all: false,
            hide_cached_tokens: false,
            allowed_origins: Vec::new(),
            max_num_seqs: 16,
            max_queue: 64,
            num_blocks: 256,
            max_body_bytes: 1 << 20,
            step_delay: Duration::ZERO,
            header_read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(20),
            model_dir: None,
            task: ModelTask::Auto,
            stored_response_bytes: (
                sluice_api::responses_store::DEFAULT_MAX_BYTES,
                sluice_api::responses_store::DEFAULT_MAX_BYTES_PER_KEY,
            ),
            extra_models: Vec::new(),
            model_names: Default::default(),
            clamp_max_tokens: false,
            stream_keep_alive: sluice_api::state::STREAM_KEEP_ALIVE,
            speculation: None,
            media: Default::default(),
        }
    }
}

/// A running server.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The engine behind it.
    pub engine: EngineHandle,
    /// The model's context length.
    pub max_model_len: usize,
    server: tokio::task::JoinHandle<()>,
}

impl TestServer {
    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The value of one metric sample (labelled `model_name="llama"`) from `/metrics`.
    pub async fn metric(&self, name: &str) -> f64 {
        crate::metrics::scrape(&self.base, &format!("{name}{{model_name=\"{MODEL_ID}\"}}")).await
    }

    /// Waits until `metric` reads `want`, or panics after `timeout`.
    pub async fn wait_for_metric(&self, name: &str, want: f64, timeout: Duration) {
        let start = Instant::now();
        loop {
            let got = self.metric(name).await;
            if got == want {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "{name} stayed at {got}, expected {want}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl TestServer {
    /// Waits until the engine holds no request, or panics after `timeout`.
    pub async fn wait_until_idle(&self, timeout: Duration) {
        let start = Instant::now();
        while self.engine.num_unfinished() > 0 {
            assert!(
                start.elapsed() < timeout,
                "{} requests never finished",
                self.engine.num_unfinished()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.server.abort();
        self.engine.shutdown();
    }
}

/// Loads the fixture model, starts its engine and serves the API on 127.0.0.1:0.
pub async fn start(options: ServerOptions) -> TestServer {
    let dir = options.model_dir.clone().unwrap_or_else(model_dir);
    let pooling = sluice_model::pooling_of(&dir).expect("fixture pooling config reads");
    let model = Model::load(&dir, &LoadOptions::default()).expect("fixture model loads");
    let tokenizer = Arc::new(Tokenizer::from_dir(&dir).expect("fixture tokenizer loads"));
    let config = model.config().clone();
    let max_model_len = config.max_position_embeddings;
    let kv = KvCache::new(&config, KvDtype::F32, 16, options.num_blocks);
    let engine = Engine::start(
        Box::new(SlowedExecutor {
            inner: ModelExecutor::new(model, kv),
            step_delay: options.step_delay,
        }),
        tokenizer.clone(),
        EngineConfig {
            max_num_seqs: options.max_num_seqs,
            max_queue: options.max_queue,
            max_model_len,
            eos_token_ids: config.eos_token_ids.clone(),
            speculation: options.speculation.clone(),
            ..EngineConfig::default()
        },
    );
    // A model that takes images gets its encoder, as the loader gives it one.
    let images =
        sluice_model::architectures::registry::vision_encoder(&config.architecture).map(|kind| {
            Arc::new(ImageInput::load(kind, &dir, None, &tokenizer).expect("encoder loads"))
        });
    let served = |id: String, tokenizer: Arc<Tokenizer>| ServedModel {
        id,
        engine: engine.clone(),
        tokenizer,
        max_model_len,
        pooling,
        task: options.task,
        created: 1_700_000_000,
        lease: None,
        images: images.clone(),
    };
    let mut models = vec![served(MODEL_ID.to_string(), tokenizer)];
    for (id, tokenizer) in options.extra_models {
        models.push(served(id, tokenizer));
    }
    let api = ApiConfig {
        api_keys: options.api_keys,
        admin_key: options.admin_key,
        max_concurrent_tokenizations: 2,
        hide_cached_tokens: options.hide_cached_tokens,
        parse_special_tokens_in_messages: false,
        allowed_origins: options.allowed_origins,
        max_body_bytes: options.max_body_bytes,
        request_read_timeout: Duration::from_secs(5),
        retry_after_secs: 2,
        tool_call_parser: None,
        stored_response_bytes: options.stored_response_bytes.0,
        stored_response_bytes_per_key: options.stored_response_bytes.1,
        clamp_max_tokens: options.clamp_max_tokens,
        stream_keep_alive: options.stream_keep_alive,
        media: options.media,
        ..ApiConfig::default()
    };
    let registry = sluice_api::registry::ModelRegistry::new(models).with_names(options.model_names);
    let app = sluice_api::router_for(Arc::new(registry), api);
    let bind = if options.bind_all {
        "0.0.0.0:0"
    } else {
        "127.0.0.1:0"
    };
    let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let serve_options = ServeOptions {
        header_read_timeout: options.header_read_timeout,
        write_timeout: options.write_timeout,
        allowed_hosts: options.allowed_hosts,
        ..ServeOptions::default()
    };
    let server = tokio::spawn(sluice_api::server::serve(
        listener,
        app,
        serve_options,
        std::future::pending(),
    ));
    TestServer {
        base: format!("http://{addr}"),
        engine,
        max_model_len,
        server,
    }
}

/// The `data:` payloads of an SSE body, in order.
pub fn sse_payloads(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
        .map(str::to_string)
        .collect()
}
